#!/usr/bin/env bash
# Installs what building and testing kitfox needs on a Debian machine.
# Idempotent: when everything is present it does nothing and prints nothing.
# Every npm script (build, test, start, bench) runs it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# What must be present, and the Debian package that provides it.
# A check is either `cmd:NAME` (a command on PATH) or an absolute file path.
# To add a dependency, add one line here.
# emscripten (the WASM build) depends on the package `nodejs`: a machine with
# NodeSource's nodejs 20 keeps it (it satisfies the dependency); on a machine
# without Node, apt brings Debian's. Its optimizer finds acorn through
# NODE_PATH=/usr/share/nodejs, which scripts/build-wasm.sh sets.
# python3 is for node-gyp, which compiles better-sqlite3 (a benchmark peer,
# an npm dev dependency) against Node's headers in /usr/include/node (.npmrc).
# chromium is the browser the browser tests and the browser benchmark drive
# through the npm package playwright-core (which never downloads a browser);
# firefox-esr is the second browser of the browser tests, driven by the npm
# package puppeteer-core over WebDriver BiDi. The edge runtimes of the
# package tests (workerd, deno, bun), the bundlers (esbuild, vite, webpack)
# and typescript are npm dev dependencies, binaries included.
# clang and its libFuzzer runtime (libclang-rt-14-dev) build the fuzzers.
# libboost1.81-dev brings Boost.Beast and Asio (header-only), the HTTP
# server of `kitfox serve` (native/http_server.cpp).
# dataset-fashion-mnist is the real data set `bash scripts/bench.sh import`
# imports (bench/import_bench.sh).
REQUIREMENTS=(
  "cmd:cmake                      cmake"
  "cmd:g++                        g++"
  "cmd:make                       make"
  "cmd:pkg-config                 pkg-config"
  "/usr/include/doctest/doctest.h doctest-dev"
  "/usr/include/sqlite3.h         libsqlite3-dev"
  "/usr/include/hnswlib/hnswlib.h libhnswlib-dev"
  "/usr/include/boost/beast.hpp   libboost1.81-dev"
  "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz dataset-fashion-mnist"
  "cmd:em++                       emscripten"
  "cmd:python3                    python3"
  "/usr/bin/chromium              chromium"
  "/usr/bin/firefox-esr           firefox-esr"
  "cmd:clang++                    clang"
  "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev"
)

# `bash scripts/setup.sh server-bench` adds what `bash scripts/bench.sh
# server` needs beside the rest: PostgreSQL 15, its server headers (to build
# pgvector from ../shared/peers/) and libpq's (the benchmark's client).
# npm test never needs them.
if [[ ${1:-} == server-bench ]]; then
  REQUIREMENTS+=(
    "/usr/lib/postgresql/15/bin/initdb             postgresql-15"
    "/usr/include/postgresql/15/server/postgres.h  postgresql-server-dev-15"  # (pg_config comes with postgresql-15 too)
    "/usr/include/postgresql/libpq-fe.h            libpq-dev"
  )
fi

log() { echo "setup: $*"; }
die() { echo "setup: $*" >&2; exit 1; }

present() {
  local check=$1
  case $check in
    cmd:*) command -v "${check#cmd:}" >/dev/null 2>&1 ;;
    /*) [[ -e $check ]] ;;
    *) die "bad check '$check' in REQUIREMENTS (want cmd:NAME or an absolute path)" ;;
  esac
}

# --- system packages --------------------------------------------------------
missing=()
for entry in "${REQUIREMENTS[@]}"; do
  read -r check package <<<"$entry"
  [[ -n ${package:-} ]] || die "no package for '$check' in REQUIREMENTS"
  if ! present "$check"; then
    # Several checks may name one package: list it once.
    [[ " ${missing[*]-} " == *" $package "* ]] || missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  if ((EUID == 0)); then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    die "missing ${missing[*]}: run as root, or install them: apt-get install ${missing[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "missing ${missing[*]} and no apt-get (this script knows Debian): install them by hand"
  log "installing ${missing[*]}"
  "${as_root[@]}" apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
  for entry in "${REQUIREMENTS[@]}"; do
    read -r check package <<<"$entry"
    present "$check" || die "'$check' is still missing after installing $package"
  done
fi

# --- npm dependencies (simdjson sources) -------------------------------------
# npm writes node_modules/.package-lock.json on every install, so it is older
# than package-lock.json exactly when the lock file changed since.
if [[ ! -e node_modules/.package-lock.json || node_modules/.package-lock.json -ot package-lock.json ]]; then
  command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js >= 20 (it comes with npm)"
  log "installing npm dependencies"
  npm ci --no-audit --no-fund
fi
