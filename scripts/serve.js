// A small static file server for the web demo and the browser tests: serves
// the repository (js/, dist/, web-demo/, tests/browser/, ...) on 127.0.0.1,
// GET and HEAD only, nothing outside the root. No dependencies.
//
//   node scripts/serve.js [--port N] [--fallback-port] [--root DIR] [--open PATH]
//       prints the URL of PATH (default /web-demo/), which / redirects to,
//       and serves until stopped (--fallback-port: a free port when N is taken);
//   import { serve } from './serve.js'; const s = await serve({ port: 0 });
//       s.url, await s.close()  (`home: PATH`: / redirects there)
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.ts': 'text/plain; charset=utf-8',
};

function send(res, status, text) {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

// `files` maps extra URL paths to files anywhere (e.g. { '/db.kfdb': '/tmp/x.kfdb' }).
export function serve({ port = 0, root = repo, host = '127.0.0.1', quiet = true, files = {}, home = null } = {}) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n');
    let rel;
    try {
      rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      return send(res, 400, 'bad path\n');
    }
    if (home && rel === '/') {
      res.writeHead(302, { location: home });
      return res.end();
    }
    let file = Object.hasOwn(files, rel) ? files[rel] : path.resolve(base, '.' + rel);
    if (!Object.hasOwn(files, rel) && file !== base && !file.startsWith(base + path.sep)) return send(res, 403, 'outside the root\n');
    fs.stat(file, (err, st) => {
      if (!err && st.isDirectory()) {
        if (!rel.endsWith('/')) {
          res.writeHead(301, { location: rel + '/' });
          return res.end();
        }
        file = path.join(file, 'index.html');
        st = fs.existsSync(file) ? fs.statSync(file) : null;
      }
      if (err || !st || !st.isFile()) return send(res, 404, 'not found\n');
      if (!quiet) console.log(`${req.method} ${rel}`);
      // Revalidated on every use (no-cache), answered 304 while unchanged,
      // as a real server would: the browser keeps its cached copy (and, for
      // the wasm, its compiled code).
      const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
      const headers = { etag, 'cache-control': 'no-cache', 'last-modified': st.mtime.toUTCString() };
      if (req.headers['if-none-match'] === etag) {
        res.writeHead(304, headers);
        return res.end();
      }
      res.writeHead(200, {
        ...headers,
        'content-type': TYPES[path.extname(file).toLowerCase()] || 'application/octet-stream',
        'content-length': st.size,
      });
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: p } = server.address();
      resolve({
        url: `http://${host}:${p}`,
        port: p,
        close: () => new Promise((r) => server.close(() => r())),
        server,
      });
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
  };
  const port = Number(opt('--port', process.env.PORT || 8080));
  const root = opt('--root', repo);
  const open = opt('--open', '/web-demo/');
  const fallback = args.includes('--fallback-port');
  serve({ port, root, home: open })
    .catch((e) => {
      if (fallback && e.code === 'EADDRINUSE') {
        console.log(`port ${port} is taken: using a free one`);
        return serve({ port: 0, root, home: open });
      }
      throw e;
    })
    .then(
    (s) => console.log(`kitfox web demo: ${s.url}${open}  (Ctrl+C stops it; PORT=N npm start for another port)`),
    (e) => {
      console.error(`serve: ${e.message}${e.code === 'EADDRINUSE' ? ` (use --port N or PORT=N)` : ''}`);
      process.exit(1);
    },
  );
}
