#!/usr/bin/env bash
# The native Release build in build/: the kitfox CLI, the library and the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

configure_once build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2
