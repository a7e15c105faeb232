#!/usr/bin/env bash
# Builds kitfox (native CLI and the WASM package) and serves the web demo
# (web-demo/) on 127.0.0.1, printing its URL. PORT=N picks the port (default
# 8080; a free one when that is taken). Ctrl+C stops the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh
bash scripts/build-wasm.sh

exec node scripts/serve.js --port "${PORT:-8080}" --open /web-demo/ --fallback-port
