// The npm package as a user gets it: `npm pack` of the repository, installed
// in a temporary project (no registry: the tarball has no dependencies).
// Used by the tests of the packed package (pack, runtimes, types) and the
// bundler tests in tests/browser/.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { root, tempDir, within } from './helpers.js';

// The runtimes' binaries, from the npm packages of the same names (dev
// dependencies; scripts/setup.sh installs them with npm ci). Each package's
// install script puts its platform package's binary in place; without it
// (npm run with scripts off) the platform package's own copy serves.
function binary(name, candidates) {
  for (const c of candidates) {
    const file = path.join(root, 'node_modules', c);
    if (fs.existsSync(file) && fs.statSync(file).size > 1 << 20) return file;
  }
  throw new Error(`no ${name} binary in node_modules (${candidates.join(', ')}): bash scripts/setup.sh installs the npm dev dependency ${name}`);
}

export const bins = {
  workerd: binary('workerd', ['workerd/bin/workerd', '@cloudflare/workerd-linux-64/bin/workerd']),
  deno: binary('deno', ['deno/deno', '@deno/linux-x64-glibc/deno']),
  bun: binary('bun', ['bun/bin/bun.exe', '@oven/bun-linux-x64/bin/bun']),
  esbuild: binary('esbuild', ['esbuild/bin/esbuild', '@esbuild/linux-x64/bin/esbuild']),
  tsc: path.join(root, 'node_modules/typescript/bin/tsc'),
};

// Packs the repository into a fresh directory: { tarball, files } (the
// paths inside the package, from npm's own listing).
export function pack() {
  if (!fs.existsSync(path.join(root, 'dist/kitfox-core.web.js'))) throw new Error('dist/ is not built: bash scripts/build-wasm.sh');
  const dir = tempDir('kitfox-pack-');
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const [info] = JSON.parse(out);
  return { tarball: path.join(dir, info.filename), files: info.files.map((f) => f.path), info };
}

// A temporary project with kitfox installed from `tarball`, and `files`
// (a map of relative paths to contents, or a directory to copy) in it.
export function project(tarball, files = {}, prefix = 'kitfox-project-') {
  const dir = tempDir(prefix);
  if (typeof files === 'string') fs.cpSync(files, dir, { recursive: true, filter: (src) => !/node_modules|\.wrangler/.test(path.relative(files, src)) });
  else {
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), text);
    }
  }
  const pkgFile = path.join(dir, 'package.json');
  const pkg = fs.existsSync(pkgFile) ? JSON.parse(fs.readFileSync(pkgFile, 'utf8')) : { name: 'kitfox-test-app', private: true, type: 'module' };
  // The tarball replaces whatever version the project names.
  pkg.dependencies = { ...pkg.dependencies, kitfox: `file:${tarball}` };
  delete pkg.devDependencies;
  fs.writeFileSync(pkgFile, JSON.stringify(pkg, null, 2));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  return dir;
}

// Starts `workerd serve wrangler.json` in `dir` on a free port (workerd
// reports the port on its control descriptor once it listens); `stop()`
// ends it and waits for it to exit.
export async function startWorkerd(dir) {
  const child = spawn(bins.workerd, ['serve', 'wrangler.json', '--socket-addr', 'http=127.0.0.1:0', '--control-fd', '3'], {
    cwd: dir,
    env: { ...process.env, WORKERD_ESBUILD: bins.esbuild },
    stdio: ['ignore', 'inherit', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => {
    stderr += d;
    process.stderr.write(d);
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await within(
    new Promise((resolve, reject) => {
      let text = '';
      child.stdio[3].setEncoding('utf8');
      child.stdio[3].on('data', (d) => {
        text += d;
        for (const line of text.split('\n')) {
          if (!line.trim()) continue;
          const m = JSON.parse(line);
          if (m.event === 'listen' && m.socket === 'http') resolve(m.port);
        }
      });
      exited.then(({ code, signal }) => reject(new Error(`workerd exited (${code ?? signal}) before listening: ${stderr}`)));
    }),
    'workerd never reported its port',
  );
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill('SIGTERM');
      await within(exited, 'workerd never exited');
    },
  };
}

// The ```js blocks of README.md, each with where it runs.
export function readmeExamples() {
  const text = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  return [...text.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => {
    const code = m[1];
    const where = /from 'kitfox\/worker'/.test(code)
      ? 'browser'
      : /from 'kitfox\/http'/.test(code)
        ? 'server'
        : /export default \{[\s\S]*fetch\(/.test(code)
          ? 'workerd'
          : 'node';
    return { code, where };
  });
}
