#!/usr/bin/env bash
# Runs every test stage in order and stops at the first that fails (non-zero
# exit). `npm test` runs setup.sh first, then this.
#
#   scripts/test.sh                 all stages
#   scripts/test.sh native          only the named stages
#   KITFOX_SKIP_ASAN=1 scripts/test.sh    skip the sanitizer stage (local use; CI never sets it)
#   KITFOX_SKIP_TSAN=1 scripts/test.sh    skip the ThreadSanitizer stage (the same)
#
# A stage is a function `stage_<name>`; to add one (wasm, browser),
# write the function and append its name to STAGES.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

STAGES=(native asan tsan fuzz node browser firefox)

header() {
  printf '\n==== %s ====\n' "$*"
}

# skip REASON: called by a stage that does not run here; the summary says so.
skipped=()
skip() {
  header "$current: skipped ($*)"
  skipped+=("$current")
}

# Native Release build in build/ and its ctest suite (unit, query scripts, crash, CLI).
stage_native() {
  header "native: build (Release, build/)"
  bash scripts/build.sh
  header "native: ctest (build/)"
  # Two at a time: the heavy unit tests beside the rest (tests/CMakeLists.txt).
  ctest --test-dir build --output-on-failure -j2
}

# The unit and crash tests under ThreadSanitizer, in build-tsan/: threads
# share one database (group commit, checkpoints beside readers and writers,
# prepared statements), and any data race fails the stage. The unit tests of
# the doctest suite "heavy" are left out here: long, and with no thread
# another test does not run (one thread, or the HNSW linking threads that
# "the graph does not depend on the thread count" runs); the native and
# asan stages run them.
stage_tsan() {
  if [[ ${KITFOX_SKIP_TSAN:-} == 1 ]]; then
    skip "KITFOX_SKIP_TSAN=1"
    return 0
  fi
  header "tsan: build (-O2, line tables, ThreadSanitizer, build-tsan/)"
  configure_once build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" -DKITFOX_TSAN=ON
  cmake --build build-tsan -j2 --target kitfox_unit kitfox_crash_test kitfox
  header "tsan: unit tests but the heavy ones, and the crash test (build-tsan/)"
  # The timeouts only catch a hang, as ctest's do in the other stages.
  TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" timeout 1800 build-tsan/tests/kitfox_unit --test-suite-exclude=heavy
  TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" timeout 600 build-tsan/tests/kitfox_crash_test
  header "tsan: kitfox serve under its tests (build-tsan/kitfox)"
  TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" KITFOX_CLI=build-tsan/kitfox \
    node --test --test-concurrency=1 tests/js/server.test.js tests/js/server-queries.test.js
}

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in
# build-asan/ (clang; the fuzz stage's harnesses are built there too).
stage_asan() {
  if [[ ${KITFOX_SKIP_ASAN:-} == 1 ]]; then
    skip "KITFOX_SKIP_ASAN=1"
    return 0
  fi
  header "asan: build (clang -O1, sanitizers, build-asan/)"
  configure_asan
  cmake --build build-asan -j2
  header "asan: ctest (build-asan/)"
  # Options already in the environment come last, so they win.
  ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
    UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    ctest --test-dir build-asan --output-on-failure -j2
  header "asan: kitfox serve under its tests (build-asan/kitfox)"
  ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
    UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" KITFOX_CLI=build-asan/kitfox \
    node --test --test-concurrency=1 tests/js/server.test.js tests/js/server-queries.test.js
}

# The libFuzzer harnesses (tests/fuzz/: statements, JSON, the value codec,
# import, the server, a put's encoded documents, database files from arbitrary bytes), built with clang and the sanitizers
# in build-asan/ beside the asan stage's tests, each run for a fixed number of seeded inputs
# (scripts/fuzz.sh NAME SECONDS runs one for long).
stage_fuzz() {
  header "fuzz: build (clang, libFuzzer, sanitizers, build-asan/) and a short run of each harness"
  bash scripts/fuzz.sh
}

# The WASM build (dist/) and the npm package's tests under Node's test
# runner: the API, the query scripts, files shared with the native CLI (so
# the native build must come first), locking between processes; and the
# packed package (npm pack, installed in a temporary project): its
# contents, its types under tsc, and Node, Deno, Bun and workerd running it.
stage_node() {
  header "node: build (WASM, dist/)"
  bash scripts/build-wasm.sh
  [[ -x build/kitfox ]] || bash scripts/build.sh  # the tests run the native CLI
  header "node: node --test tests/js/"
  node --test tests/js/
}

# The package in Debian's Chromium (playwright-core drives it; scripts/serve.js
# serves the repository on 127.0.0.1): kitfox/worker over OPFS, reload,
# locking between tabs, the copy protocol, the reopen of 100k x 128 (its file
# made by the native CLI, cached in build/browser/), the web demo, and apps
# bundled from the packed package by esbuild, Vite and webpack.
stage_browser() {
  header "browser: build (WASM, dist/; native CLI)"
  bash scripts/build-wasm.sh
  [[ -x build/kitfox ]] || bash scripts/build.sh
  header "browser: node --test tests/browser/"
  node --test --test-concurrency=1 tests/browser/
}

# The same browser tests in Debian's firefox-esr, driven by puppeteer-core
# over WebDriver BiDi (tests/browser/helpers.js, KITFOX_BROWSER=firefox):
# OPFS in a worker, reloads, tabs, the copy protocol, the reopen, the demo,
# the bundled apps.
stage_firefox() {
  header "firefox: build (WASM, dist/; native CLI)"
  bash scripts/build-wasm.sh
  [[ -x build/kitfox ]] || bash scripts/build.sh
  header "firefox: KITFOX_BROWSER=firefox node --test tests/browser/"
  KITFOX_BROWSER=firefox node --test --test-concurrency=1 tests/browser/
}

if (($# > 0)); then
  selected=("$@")
else
  selected=("${STAGES[@]}")
fi
for stage in "${selected[@]}"; do
  declare -F "stage_$stage" >/dev/null || {
    echo "test.sh: unknown stage '$stage' (stages: ${STAGES[*]})" >&2
    exit 2
  }
done

current=""
passed=()
report() {
  local rc=$?
  if ((rc != 0)) && [[ -n $current ]]; then
    printf '\n==== FAILED: stage %s (exit %d)' "$current" "$rc" >&2
    ((${#passed[@]} == 0)) || printf '; passed: %s' "${passed[*]}" >&2
    printf ' ====\n' >&2
  fi
}
trap report EXIT

timings=()
for stage in "${selected[@]}"; do
  current=$stage
  started=$SECONDS
  "stage_$stage"
  timings+=("$stage $((SECONDS - started))s")
  printf '==== %s: %ds ====\n' "$stage" "$((SECONDS - started))"
  [[ " ${skipped[*]-} " == *" $stage "* ]] || passed+=("$stage")
done
current=""
printf '\n==== all tests passed: %s' "${passed[*]-none}"
((${#skipped[@]} == 0)) || printf '; skipped: %s' "${skipped[*]}"
printf ' ====\n'
printf 'stage times: %s\n' "$(IFS=,; echo "${timings[*]}" | sed 's/,/, /g')"
