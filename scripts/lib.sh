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
