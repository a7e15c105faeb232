#!/usr/bin/env bash
# The WebAssembly build: dist/kitfox-core.js (the Emscripten glue, an ES
# module) and dist/kitfox-core.wasm, from core/, wasm/ and simdjson, with
# Debian's emscripten (scripts/setup.sh installs it). Objects go to
# build-wasm/obj; make rebuilds only what changed, so with nothing to do this
# takes well under a second.
#
#   scripts/build-wasm.sh           build dist/
#   scripts/build-wasm.sh --sizes   also print the module's size (raw, gzip,
#                                   brotli) and what each part of it costs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v em++ >/dev/null 2>&1 || {
  echo "build-wasm: em++ not found: run scripts/setup.sh (it installs Debian's emscripten)" >&2
  exit 1
}
[[ -e node_modules/@nozbe/simdjson/src/simdjson.cpp ]] || {
  echo "build-wasm: simdjson not found in node_modules: run scripts/setup.sh (npm ci)" >&2
  exit 1
}
# Debian's emscripten runs its JS optimizer with the system node, which finds
# acorn (package node-acorn) only through NODE_PATH.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

make -f wasm/Makefile -j2 --no-print-directory dist/kitfox-core.js | { grep -v '^make.*is up to date' || true; }

if [[ ${1:-} == --sizes ]]; then
  make -f wasm/Makefile -j2 --no-print-directory build-wasm/names/kitfox-core.js | { grep -v '^make.*is up to date' || true; }
  node bench/node/wasm-size.js dist/kitfox-core.wasm build-wasm/names/kitfox-core.wasm dist/kitfox-core.js
fi
