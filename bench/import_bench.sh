#!/usr/bin/env bash
# `kitfox import` of Fashion-MNIST (Debian's dataset-fashion-mnist) against the
# old importer and, with an HNSW index, against hnswlib: converts the images
# to NDJSON and a JSON array (bench/idx2ndjson.mjs), builds the old importer's
# CLI from a commit before the rewrite, and runs build/bench/kitfox_import_bench.
#
#   bash scripts/bench.sh import [OPTIONS]     builds build-bench/, then this
#   bash bench/import_bench.sh [OPTIONS]
#
# Options (the rest go to kitfox_import_bench: --runs N, --no-hnsw, --no-plain, --wait-quiet S, --keep):
#   --quick          20,000 training images instead of 60,000
#   --rows N         N training images (at most 60,000)
#   --build DIR      the build with kitfox and bench/kitfox_import_bench (default build-bench)
#   --old-ref REV    the commit whose importer is the old one (default: the last before the rewrite)
#   --old-kitfox P   use this CLI as the old importer instead of building REV
#   --dir PATH       where the data and database files go (default /tmp)
#   --out PATH       also write the Markdown report to PATH
#
# The old CLI is built once per commit in BUILD/old-REV/ (from `git archive`,
# so the working tree and the index are untouched); JOBS (default 2) is its
# build's parallelism.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rows=60000
build=build-bench
old_ref=9a6adb39938973955333c46ef2417e0d7f463e0c
old_kitfox=
dir=/tmp
out=
pass=()
while (($# > 0)); do
  case $1 in
    --quick) rows=20000 ;;
    --rows | --build | --old-ref | --old-kitfox | --dir | --out)
      (($# >= 2)) || { echo "import_bench.sh: $1 needs a value" >&2; exit 2; }
      case $1 in
        --rows) rows=$2 ;;
        --build) build=$2 ;;
        --old-ref) old_ref=$2 ;;
        --old-kitfox) old_kitfox=$2 ;;
        --dir) dir=$2 ;;
        --out) out=$2 ;;
      esac
      shift ;;
    *) pass+=("$1") ;;
  esac
  shift
done

images=/usr/share/datasets/fashion-mnist
if [[ ! -e $images/train-images-idx3-ubyte.gz ]]; then
  echo "import_bench.sh: no Fashion-MNIST in $images: install dataset-fashion-mnist (scripts/setup.sh does)" >&2
  exit 1
fi
for f in "$build/kitfox" "$build/bench/kitfox_import_bench"; do
  [[ -x $f ]] || { echo "import_bench.sh: no $f: build $build with -DKITFOX_BENCH=ON (scripts/bench.sh does)" >&2; exit 1; }
done

if [[ -z $old_kitfox ]]; then
  short=$(git rev-parse --short "$old_ref")
  old=$build/old-$short
  old_kitfox=$old/build/kitfox
  if [[ ! -x $old_kitfox ]]; then
    echo "import_bench.sh: building the old importer's CLI (commit $short) in $old" >&2
    rm -rf "$old/src" && mkdir -p "$old/src"
    git archive "$old_ref" | tar -x -C "$old/src"
    ln -s "$PWD/node_modules" "$old/src/node_modules"
    cmake -S "$old/src" -B "$old/build" -DCMAKE_BUILD_TYPE=Release -DKITFOX_TESTS=OFF >"$old/configure.log"
    cmake --build "$old/build" -j"${JOBS:-2}" --target kitfox >"$old/build.log" 2>&1 || { cat "$old/build.log"; exit 1; }
  fi
  label="commit $short, the importer before the rewrite (hand-written scanner, parse_json per document)"
else
  label="$old_kitfox"
fi

data=$(mktemp -d "$dir/kitfox-import-data-XXXXXX")
trap 'rm -rf "$data"' EXIT
echo "import_bench.sh: converting $rows training images and the t10k images into $data" >&2
node bench/idx2ndjson.mjs "$images" train --limit "$rows" --f32 "$data/train.f32" >"$data/train.ndjson"
node bench/idx2ndjson.mjs "$images" train --limit "$rows" --array >"$data/train.json"
node bench/idx2ndjson.mjs "$images" t10k --f32 "$data/test.f32" >/dev/null

"$build/bench/kitfox_import_bench" --data "$data" --kitfox "$build/kitfox" --old-kitfox "$old_kitfox" \
  --old-label "$label" --dir "$dir" ${out:+--out "$out"} "${pass[@]}"
