# shellcheck shell=bash
# Helpers shared by the scripts in this folder (sourced, not run).

# configure_once DIR CMAKE_ARGS...: configures the CMake build in DIR unless it
# is configured already. A configure that failed half-way leaves a
# CMakeCache.txt but no build system, so that case configures again too.
configure_once() {
  local dir=$1
  shift
  if [[ ! -f $dir/CMakeCache.txt || (! -f $dir/Makefile && ! -f $dir/build.ninja) ]]; then
    cmake -S . -B "$dir" "$@"
  fi
}

# configure_asan: the build in build-asan/ that the asan and fuzz stages share:
# clang with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's
# coverage, at -O1 with line tables (what ASan's reports need), holding the
# tests and the libFuzzer harnesses alike, so the engine is compiled once for both.
configure_asan() {
  CXX=clang++ configure_once build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DKITFOX_SANITIZE=ON -DKITFOX_FUZZ=ON
}
