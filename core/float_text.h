// A float as text: the shortest decimal that reads back as the same float,
// written exactly as std::to_chars(first, last, float) writes it (fixed or
// scientific, whichever is shorter, fixed on a tie), in about two thirds
// of its time (bench/RESULTS.md). JSON output of vectors writes hundreds of these per row.
#pragma once

#include <cstdint>

namespace kitfox {

// The room a write needs: a float's text is at most 15 characters
// ("-1.1754944e-38"), but write_float stores 8 bytes at a time and reaches
// up to 18 bytes past out.
constexpr int kFloatTextMax = 24;

// Writes f's text at out (room for kFloatTextMax characters) and returns the
// end. Infinities and NaN are written as to_chars writes them ("inf",
// "-nan"); vectors cannot hold them (the schema refuses them), and
// float_as_shortest_double takes them aside first.
char* write_float(char* out, float f);

// A finite nonzero float's shortest decimal, of its magnitude: digits (no
// trailing zeros, at most 9 of them) times 10^exponent. Of the shortest
// decimals that read back as f, the nearest to it (ties to even digits).
struct FloatDecimal {
  uint32_t digits;
  int exponent;
};
FloatDecimal shortest_decimal(float f);

}  // namespace kitfox
