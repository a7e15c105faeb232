// Floating-point std::to_chars for the WebAssembly build.
//
// Emscripten 3.1.6 (Debian's) ships libc++ 13, which has only the integer
// overloads of std::to_chars; core/json.cpp needs the shortest round-trip
// form of doubles and floats. scripts/build-wasm.sh force-includes this header
// into every source of the WASM build (never natively). The output matches
// libstdc++'s: the shortest digits that read back to the same value, printed
// as printf's %f or %e would, whichever is shorter (%f on a tie).
#pragma once
#include <charconv>

#if defined(__EMSCRIPTEN__) && defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
namespace std {
to_chars_result to_chars(char* first, char* last, double value);
to_chars_result to_chars(char* first, char* last, float value);
}  // namespace std
#endif
