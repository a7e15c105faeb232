// Shared by the tests in this folder.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// KITFOX_CLI names another build of it (scripts/test.sh runs the server
// tests with the sanitizer builds).
export const cli = process.env.KITFOX_CLI ? path.resolve(process.env.KITFOX_CLI) : path.join(root, 'build', 'kitfox');

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

// Starts `kitfox serve FILE --port 0 ...args` and resolves once it printed
// its URL: { url, port, child, exited (a promise of the exit code),
// stop(signal) (resolves to the exit code) }.
export async function startServer(file, args = []) {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: build the native CLI first (bash scripts/build.sh)`);
  const { spawn } = await import('node:child_process');
  const child = spawn(cli, ['serve', file, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  let out = '';
  child.stdout.setEncoding('utf8');
  const url = await within(
    new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/serving .* at (http:\/\/\S+)\n/);
        if (m) resolve(m[1]);
      });
      exited.then((code) => reject(new Error(`kitfox serve exited (${code}) before it served: ${stderr}`)));
    }),
    'kitfox serve printed no URL',
  );
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    child,
    exited,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return within(exited, 'kitfox serve did not stop');
    },
  };
}
