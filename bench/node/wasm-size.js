// The size of the WASM module: raw, gzip and brotli (node's zlib, best
// levels), and what each part costs, from a build that keeps function names
// (scripts/build-wasm.sh --sizes; the names live in a custom section, the code
// is the same). Functions are attributed by their (mangled) names.
//
//   node bench/node/wasm-size.js dist/kitfox-core.wasm build-wasm/names/kitfox-core.wasm dist/kitfox-core.js
import fs from 'node:fs';
import zlib from 'node:zlib';

const [wasmPath, namedPath, gluePath] = process.argv.slice(2);

function sizes(buf) {
  return {
    raw: buf.length,
    gzip: zlib.gzipSync(buf, { level: 9 }).length,
    brotli: zlib.brotliCompressSync(buf, {
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: buf.length },
    }).length,
  };
}

// Minimal reader of the sections we need.
function parse(buf) {
  let p = 8;
  const u32 = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = buf[p++];
      v += (b & 127) * 2 ** shift;
      if (b < 128) return v;
      shift += 7;
    }
  };
  const name = () => {
    const n = u32();
    const s = buf.toString('utf8', p, p + n);
    p += n;
    return s;
  };
  const out = { importedFuncs: 0, bodies: [], names: new Map(), sections: [] };
  while (p < buf.length) {
    const id = buf[p++];
    const size = u32();
    const start = p;
    const end = p + size;
    let label = `section ${id}`;
    if (id === 0) {
      label = `custom "${name()}"`;
      if (label === 'custom "name"') {
        while (p < end) {
          const sub = buf[p++];
          const len = u32();
          const subEnd = p + len;
          if (sub === 1) {
            const count = u32();
            for (let i = 0; i < count; i++) {
              const idx = u32();
              out.names.set(idx, name());
            }
          }
          p = subEnd;
        }
      }
    } else if (id === 2) {
      const count = u32();
      for (let i = 0; i < count; i++) {
        name();
        name();
        const kind = buf[p++];
        if (kind === 0) {
          u32();
          out.importedFuncs++;
        } else if (kind === 1) {
          p++;
          const flags = u32();
          u32();
          if (flags & 1) u32();
        } else if (kind === 2) {
          const flags = u32();
          u32();
          if (flags & 1) u32();
        } else if (kind === 3) {
          p += 2;
        }
      }
    } else if (id === 10) {
      const count = u32();
      for (let i = 0; i < count; i++) {
        const len = u32();
        out.bodies.push(len);
        p += len;
      }
    }
    out.sections.push({ id, label: { 1: 'types', 2: 'imports', 3: 'functions', 5: 'memory', 6: 'globals', 7: 'exports', 10: 'code', 11: 'data' }[id] ?? label, size: end - start });
    p = end;
  }
  return out;
}

// Names are demangled C++ (or C). -O3 inlines much of the engine into the
// few binding functions that call it, so the bindings' share includes the
// query path they inline; the split is by where code ended up, not by source.
function part(name) {
  if (/^simdjson::/.test(name)) return 'simdjson (JSON parsing, fallback kernel)';
  if (/kitfox::/.test(name)) {
    if (/Parser|Lexer|parse_statement|Evaluator|execute|scan_where|build_document|kitfox::Expr|Statement/.test(name)) return 'kitfox: query language (parse, evaluate, execute)';
    if (/json|Json|JSON|ErrorLocator|base64/.test(name)) return 'kitfox: JSON in/out';
    if (/to_chars/.test(name)) return 'libc++ / libc++abi';
    return 'kitfox: engine, storage, codec, values';
  }
  if (/^std::__2::to_chars/.test(name)) return 'kitfox: JSON in/out';
  if (/^\(anonymous namespace\)::|emscripten|embind|BindingType|__getTypeName/.test(name)) return 'bindings (wasm/, with the engine calls they inline)';
  if (/^std::|^void std::|^operator new|^operator delete|^__cxa|^__cxxabiv|^typeinfo|^vtable|::~|abi::/.test(name)) return 'libc++ / libc++abi';
  return 'libc, malloc, printf/strtod, runtime';
}

const wasm = fs.readFileSync(wasmPath);
const named = fs.readFileSync(namedPath);
const glue = fs.readFileSync(gluePath);
const s = sizes(wasm);
const g = sizes(glue);
const kb = (n) => (n / 1024).toFixed(1);

console.log('| file | raw | gzip | brotli |');
console.log('| --- | ---: | ---: | ---: |');
console.log(`| kitfox-core.wasm | ${kb(s.raw)} KiB | ${kb(s.gzip)} KiB | ${kb(s.brotli)} KiB |`);
console.log(`| kitfox-core.js (glue) | ${kb(g.raw)} KiB | ${kb(g.gzip)} KiB | ${kb(g.brotli)} KiB |`);
const jsFiles = fs.readdirSync(new URL('../../js/', import.meta.url), { recursive: true }).filter((f) => f.endsWith('.js'));
const js = Buffer.concat(jsFiles.map((f) => fs.readFileSync(new URL(`../../js/${f}`, import.meta.url))));
const j = sizes(js);
console.log(`| js/*.js (wrapper, hosts) | ${kb(j.raw)} KiB | ${kb(j.gzip)} KiB | ${kb(j.brotli)} KiB |`);
console.log();

const m = parse(named);
const byPart = new Map();
let codeTotal = 0;
m.bodies.forEach((len, i) => {
  const name = m.names.get(m.importedFuncs + i) ?? '';
  const k = part(name);
  const e = byPart.get(k) ?? { bytes: 0, funcs: 0 };
  e.bytes += len;
  e.funcs++;
  byPart.set(k, e);
  codeTotal += len;
});
const sec = (label) => m.sections.filter((x) => x.label === label).reduce((a, x) => a + x.size, 0);
console.log('| part of kitfox-core.wasm | functions | bytes | share |');
console.log('| --- | ---: | ---: | ---: |');
const rows = [...byPart.entries()].sort((a, b) => b[1].bytes - a[1].bytes);
const total = s.raw;
for (const [k, e] of rows) console.log(`| code: ${k} | ${e.funcs} | ${kb(e.bytes)} KiB | ${((100 * e.bytes) / total).toFixed(1)}% |`);
const data = sec('data');
console.log(`| data (constants, tables) | | ${kb(data)} KiB | ${((100 * data) / total).toFixed(1)}% |`);
const other = total - codeTotal - data;
console.log(`| other sections (types, imports, exports, table, headers) | | ${kb(other)} KiB | ${((100 * other) / total).toFixed(1)}% |`);
