#!/usr/bin/env bash
# Builds the benchmarks (Release, in build-bench/) and runs them.
#
#   bash scripts/bench.sh [--quick] [--dir PATH] [--out PATH] [--svg DIR]
#       runs kitfox_bench (vs SQLite), then kitfox_vector_bench (vs hnswlib),
#       then kitfox_query_bench (indexes and full text vs SQLite), then
#       kitfox_concurrency_bench (writer threads with durable writes and
#       readers, vs SQLite WAL); --quick and --dir go to all, --svg to the
#       vector benchmark, and --out writes all Markdown reports into one file;
#   bash scripts/bench.sh bulk ARGS...     runs kitfox_bench alone with ARGS;
#   bash scripts/bench.sh vector ARGS...   runs kitfox_vector_bench alone with ARGS;
#   bash scripts/bench.sh query ARGS...    runs kitfox_query_bench alone with ARGS;
#   bash scripts/bench.sh concurrency ARGS...  runs kitfox_concurrency_bench alone with ARGS;
#   bash scripts/bench.sh import ARGS...   runs bench/import_bench.sh (kitfox import of Fashion-MNIST
#       against the old importer and hnswlib; not part of the combined run);
#   bash scripts/bench.sh server ARGS...   builds kitfox and server_bench only, then runs bench/server_bench.sh
#       (`kitfox serve` against PostgreSQL 15 + pgvector over loopback, in a throwaway cluster;
#       not part of the combined run);
#   bash scripts/bench.sh tabs ARGS...     runs bench/browser/tabs.js (a follower tab's near against the
#       leader's, and the takeover when the leader closes; not part of the combined run);
#   bash scripts/bench.sh node-scans ARGS...  runs bench/node/scans.js alone with ARGS (scans,
#       aggregates and sorts with no index in Node: kitfox WASM vs better-sqlite3 and SQLite WASM;
#       the combined run has it after bench/node/peers.js);
#   bash scripts/bench.sh browser ARGS...  runs bench/browser/reopen.js alone with ARGS
#       (reopen after a page refresh over OPFS in Debian's Chromium; the
#       combined run ends with it, with --quick, --dir and --out).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

configure_once build-bench -DCMAKE_BUILD_TYPE=Release -DKITFOX_BENCH=ON -DKITFOX_TESTS=OFF
if [[ ${1:-} == server ]]; then
  # Only what it runs: the CLI it serves with and its client program (built
  # when libpq and Boost were found; the message below says so otherwise).
  # PostgreSQL and libpq first, then configure again so that CMake finds them.
  bash scripts/setup.sh server-bench
  cmake -S . -B build-bench >/dev/null
  cmake --build build-bench -j2 --target kitfox
  cmake --build build-bench -j2 --target server_bench ||
    { echo "bench.sh: server_bench needs libpq-dev and libboost1.81-dev (configure build-bench again after installing them)" >&2; exit 1; }
  shift
  exec bash bench/server_bench.sh --build build-bench "$@"
fi
cmake --build build-bench -j2

case "${1:-}" in
  bulk) shift; exec build-bench/bench/kitfox_bench "$@" ;;
  vector) shift; exec build-bench/bench/kitfox_vector_bench "$@" ;;
  query) shift; exec build-bench/bench/kitfox_query_bench "$@" ;;
  concurrency) shift; exec build-bench/bench/kitfox_concurrency_bench "$@" ;;
  growth) shift; exec build-bench/bench/kitfox_growth_bench "$@" ;;
  import) shift; exec bash bench/import_bench.sh --build build-bench "$@" ;;
  browser) shift; bash scripts/build-wasm.sh >&2; exec node bench/browser/reopen.js "$@" ;;
  node-scans) shift; bash scripts/build-wasm.sh >&2; exec node bench/node/scans.js "$@" ;;
  tabs) shift; bash scripts/build-wasm.sh >&2; exec node bench/browser/tabs.js "$@" ;;
esac

common=()
svg=()
out=""
while (($# > 0)); do
  case $1 in
    --quick) common+=(--quick) ;;
    --dir | --out | --svg)
      (($# >= 2)) || { echo "bench.sh: $1 needs a value" >&2; exit 2; }
      case $1 in
        --dir) common+=(--dir "$2") ;;
        --out) out=$2 ;;
        --svg) svg=(--svg "$2") ;;
      esac
      shift ;;
    *)
      echo "bench.sh: '$1' is not an option of the combined run (--quick, --dir, --out, --svg);" \
        "give it to one program: bash scripts/bench.sh bulk|vector|query|concurrency $*" >&2
      exit 2 ;;
  esac
  shift
done

# One benchmark process at a time: the second starts when the first is done.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build-bench/bench/kitfox_bench "${common[@]}" ${out:+--out "$tmp/bulk.md"}
echo
build-bench/bench/kitfox_vector_bench "${common[@]}" "${svg[@]}" ${out:+--out "$tmp/vector.md"}
echo
build-bench/bench/kitfox_query_bench "${common[@]}" ${out:+--out "$tmp/query.md"}
echo
build-bench/bench/kitfox_concurrency_bench "${common[@]}" ${out:+--out "$tmp/concurrency.md"}
echo
bash scripts/build-wasm.sh >&2
node --expose-gc bench/node/peers.js "${common[@]}" ${out:+--append "$tmp/query.md"} # kitfox WASM vs the JS peers
echo
node bench/node/scans.js "${common[@]}" ${out:+--append "$tmp/query.md"} # scans in Node vs better-sqlite3, SQLite WASM
echo
node bench/browser/reopen.js "${common[@]}" ${out:+--out "$tmp/browser.md"}
if [[ -n $out ]]; then
  { cat "$tmp/bulk.md"; echo; cat "$tmp/vector.md"; echo; cat "$tmp/query.md"; echo; cat "$tmp/concurrency.md"; echo
    cat "$tmp/browser.md"; } >"$out"
  echo "bench.sh: all reports written to $out" >&2
fi
