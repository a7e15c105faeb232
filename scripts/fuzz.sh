#!/usr/bin/env bash
# The libFuzzer harnesses of tests/fuzz/, built with clang, ASan and UBSan
# in build-asan/ (the build the asan stage tests; scripts/lib.sh configure_asan).
#
#   scripts/fuzz.sh                  a short, seeded run of every harness (npm test runs this)
#   scripts/fuzz.sh NAME [SECONDS]   a long run of one (statement, json, codec, open, import, http, put, where), 600 s by
#                                    default; what it finds is kept in build-asan/fuzz/corpus/NAME
#
# Seeds: the statements of tests/queries/*.test, real database files, JSON and
# encoded values (tests/fuzz/make_seeds.cpp), and every input that once broke
# something (tests/fuzz/regressions/NAME/, run each time). A crash leaves its
# input in build-asan/fuzz/crashes/; copy it into tests/fuzz/regressions/NAME/
# with the fix.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

HARNESSES=(statement json codec open import http put where)
# Runs of the short mode: each takes 20-55 s on one core under the sanitizers.
declare -A RUNS=([statement]=200000 [json]=150000 [codec]=500000 [open]=12000 [import]=20000 [http]=10000 [put]=20000 [where]=20000)
# The two lanes of the short mode: together every harness, once.
LANE_A=(import open codec put)
LANE_B=(http statement json where)
[[ $(printf '%s\n' "${LANE_A[@]}" "${LANE_B[@]}" | sort | tr '\n' ' ') == $(printf '%s\n' "${HARNESSES[@]}" | sort | tr '\n' ' ') ]] ||
  { echo "fuzz.sh: LANE_A and LANE_B must hold every harness once" >&2; exit 2; }
declare -A MAXLEN=([statement]=2048 [json]=2048 [codec]=512 [open]=65536 [import]=4096 [http]=4096 [put]=1024 [where]=1024)

configure_asan
out=build-asan/fuzz
mkdir -p "$out"
targets=(kitfox_fuzz_seeds "${HARNESSES[@]/#/kitfox_fuzz_}")
cmake --build build-asan -j2 --target "${targets[@]}" >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }

seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds/statement" "$out/crashes"
build-asan/tests/fuzz/kitfox_fuzz_seeds "$seeds"
# One file per statement of the query scripts (the lines after a
# `statement` or `query` header, up to ---- or a blank line).
awk -v out="$seeds/statement" '
  /^(statement|query)/ { inside = 1; text = ""; next }
  inside && (/^----/ || /^$/) { if (text != "") { f = sprintf("%s/%05d", out, ++n); printf "%s", text > f; close(f) } inside = 0; next }
  inside { text = text (text == "" ? "" : "\n") $0 }
' tests/queries/*.test

run() {
  local name=$1
  shift
  local corpus=$out/corpus/$name regress=tests/fuzz/regressions/$name log=$out/$name.log
  mkdir -p "$corpus" "$regress"
  local dict=()
  [[ -f tests/fuzz/$name.dict ]] && dict=(-dict="tests/fuzz/$name.dict")
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-asan/tests/fuzz/kitfox_fuzz_$name" "${dict[@]}" "$@" -max_len="${MAXLEN[$name]}" -timeout=30 -rss_limit_mb=2048 \
    -artifact_prefix="$out/crashes/$name-" "$corpus" "$seeds/$name" "$regress" >"$log" 2>&1 || {
    tail -n 60 "$log"
    echo "fuzz: $name found a failure; its input is in $out/crashes/ (log: $log)" >&2
    return 1
  }
  echo "fuzz $name: $(grep -E '^(#[0-9]+|Done)' "$log" | tail -n 1)"
}

if (($# == 0)); then
  # Short and seeded: the same inputs each time, from a fresh corpus. Each
  # harness runs on one core, so they run in two lanes side by side, each
  # about half of the time (LANE_A, LANE_B); a harness's inputs do not
  # depend on what runs beside it.
  lane() {
    local name
    for name in "$@"; do
      rm -rf "$out/corpus/$name"
      run "$name" -seed=1 -runs="${RUNS[$name]}" || return 1
    done
  }
  lane "${LANE_A[@]}" &
  a=$!
  lane "${LANE_B[@]}" &
  b=$!
  failed=0
  wait "$a" || failed=1
  wait "$b" || failed=1
  exit "$failed"
else
  name=$1
  [[ " ${HARNESSES[*]} " == *" $name "* ]] || { echo "fuzz.sh: unknown harness '$name' (${HARNESSES[*]})" >&2; exit 2; }
  run "$name" -max_total_time="${2:-600}" -print_final_stats=1
fi
