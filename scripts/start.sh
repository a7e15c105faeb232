#!/usr/bin/env bash
# Builds kitfox, creates a small demo database (build/demo.kfdb) the first
# time, shows it, and opens the interactive prompt on it when run in a terminal.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh

cli=build/kitfox
db=build/demo.kfdb

DEMO=(
  'create collection notes (title text, body text, year int, tags [text])'
  'put notes {title: "Welcome to kitfox", body: "An embedded document database with vector and full-text search.", year: 2024, tags: ["intro"]}'
  'put notes {title: "One file", body: "The whole database lives in one file, the same natively and in WebAssembly.", year: 2024, tags: ["storage", "wasm"]}'
  'put notes {title: "Vector search", body: "HNSW indexes are stored in the file, so reopening is fast.", year: 2025, tags: ["hnsw", "vectors"]}'
  'put notes {title: "Full-text search", body: "BM25 ranking over text fields marked @text.", year: 2025, tags: ["bm25", "text"]}'
)

if [[ ! -e $db ]]; then
  echo "start: creating the demo database $db"
  # A half-made demo must not survive a failure (the next run would skip it).
  trap 'rm -f -- "$db" "$db~"' EXIT
  for stmt in "${DEMO[@]}"; do
    "$cli" "$db" -c "$stmt"
  done
  trap - EXIT
fi

"$cli" "$db" -c 'get notes' --table

if [[ -t 0 ]]; then
  exec "$cli" "$db"
fi
