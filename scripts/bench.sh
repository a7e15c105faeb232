#!/usr/bin/env bash
# Builds the benchmarks (Release, in build-bench/) and runs them; arguments go
# to the benchmark program.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

configure_once build-bench -DCMAKE_BUILD_TYPE=Release -DKITFOX_BENCH=ON -DKITFOX_TESTS=OFF
cmake --build build-bench -j2
exec build-bench/bench/kitfox_bench "$@"
