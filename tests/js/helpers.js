// Shared by the tests in this folder.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const cli = path.join(root, 'build', 'kitfox');

// A fresh directory, removed when the process exits.
export function tempDir(prefix = 'kitfox-js-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Runs the native CLI; returns its stdout. The native build comes first in
// scripts/test.sh.
export function runCli(args, input) {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: build the native CLI first (bash scripts/build.sh)`);
  return execFileSync(cli, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

export function cliLines(args) {
  const out = runCli(args).trim();
  return out === '' ? [] : out.split('\n');
}

// Waits for `promise` (an event, never a guess at how long something takes),
// with a safety bound no slow machine reaches: missing it fails with `what`.
export const SAFETY_MS = 60000;

export async function within(promise, what, ms = SAFETY_MS) {
  let timer;
  const missed = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} (nothing after ${ms / 1000} s)`)), ms);
  });
  try {
    return await Promise.race([promise, missed]);
  } finally {
    clearTimeout(timer);
  }
}
