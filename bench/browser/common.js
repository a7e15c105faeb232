// What the browser benchmarks (reopen.js, tabs.js) share: where the
// repository is, Debian's Chromium and its flags, and the command line.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHROMIUM = process.env.KITFOX_CHROMIUM || '/usr/bin/chromium';
export const ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-gpu', '--no-first-run', '--disable-sync'];

export const argv = process.argv.slice(2);
export const flag = (name) => argv.includes(name);
// The value after `name`, or `d`.
export const opt = (name, d) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : d;
};
