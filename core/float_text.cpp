// The shortest round-trip digits of a float by Schubfach (Raffaello
// Giulietti, "The Schubfach way to render doubles", 2020): the float's value
// and the two ends of its rounding interval are scaled by one power of ten,
// held as a 64-bit fraction rounded up, so that each lands on an integer
// (rounded to odd, which keeps the comparisons exact). A shortest decimal is
// then one digit shorter than the scaled value, if one lies in the interval,
// or else the nearer of the value's floor and ceiling. The powers are
// computed at compile time. The layout that follows is the one
// std::to_chars chooses.
#include "float_text.h"

#include <charconv>
#include <cstdint>
#include <cstring>

namespace kitfox {

namespace {

constexpr int kMantissaBits = 23;
constexpr int kExponentBias = 127 + kMantissaBits;  // f = c * 2^(e - 150)
constexpr int kMinK = -31, kMaxK = 46;               // the powers of ten floats need

using u128 = unsigned __int128;

constexpr int floor_log2_pow10(int e) { return (e * 1741647) >> 19; }
constexpr int floor_log10_pow2(int e) { return (e * 1262611) >> 22; }
constexpr int floor_log10_three_quarters_pow2(int e) { return (e * 1262611 - 524031) >> 22; }

// 10^k as g * 2^(floor_log2_pow10(k) - 63), 2^63 <= g < 2^64, rounded up.
constexpr uint64_t pow10_fraction(int k) {
  u128 five = 1;  // 5^|k| < 2^107
  for (int i = 0; i < (k < 0 ? -k : k); i++) five *= 5;
  int bits = 0;
  for (u128 v = five; v; v >>= 1) bits++;
  if (k >= 0) {
    // 10^k * 2^(63 - e) = 5^k * 2^(64 - bits(5^k)).
    if (bits <= 64) return (uint64_t)(five << (64 - bits));
    const int drop = bits - 64;
    const bool exact = (five & (((u128)1 << drop) - 1)) == 0;
    return (uint64_t)(five >> drop) + !exact;
  }
  // 2^n / 5^-k with n = 63 - e + k, by long division one bit at a time.
  const int n = 63 - floor_log2_pow10(k) + k;
  u128 r = 0, q = 0;
  for (int i = n; i >= 0; i--) {
    r = r << 1 | (i == n ? 1 : 0);
    q <<= 1;
    if (r >= five) {
      r -= five;
      q |= 1;
    }
  }
  return (uint64_t)q + 1;  // 5^-k never divides a power of two
}

struct Powers {
  uint64_t g[kMaxK - kMinK + 1];
};

constexpr Powers make_powers() {
  Powers t{};
  for (int k = kMinK; k <= kMaxK; k++) t.g[k - kMinK] = pow10_fraction(k);
  return t;
}

constexpr Powers kPowers = make_powers();

// (g * cp) / 2^64 rounded to odd: the lowest bit set when the dropped part
// is more than g's upward rounding could have added (the low 32 bits are
// ignored and the next 32 tested "> 1", as Schubfach's single-precision
// form does; the comparison of all 2^32 floats with to_chars confirms it).
inline uint32_t round_to_odd(uint64_t g, uint32_t cp) {
  const u128 p = (u128)g * cp;
  const uint32_t high = (uint32_t)(p >> 64);
  const uint32_t low = (uint32_t)(p >> 32);
  return high | (low > 1);
}

FloatDecimal shortest(uint32_t mantissa, uint32_t exponent) {
  uint32_t c;
  int q;
  if (exponent != 0) {
    c = (1u << kMantissaBits) | mantissa;
    q = (int)exponent - kExponentBias;
  } else {
    c = mantissa;
    q = 1 - kExponentBias;
  }
  FloatDecimal d;
  if (q <= 0 && -q <= kMantissaBits && (c & ((1u << -q) - 1)) == 0) {
    d = {c >> -q, 0};  // a small integer is its own shortest form
  } else {
    const bool even = (c & 1) == 0;
    const bool closer_below = mantissa == 0 && exponent > 1;  // the gap below is half as wide at a power of 2
    const uint32_t cbl = 4 * c - 2 + closer_below;
    const uint32_t cb = 4 * c;
    const uint32_t cbr = 4 * c + 2;
    const int k = closer_below ? floor_log10_three_quarters_pow2(q) : floor_log10_pow2(q);
    const int h = q + floor_log2_pow10(-k) + 1;  // 1..4
    const uint64_t g = kPowers.g[-k - kMinK];
    const uint32_t vbl = round_to_odd(g, cbl << h);
    const uint32_t vb = round_to_odd(g, cb << h);
    const uint32_t vbr = round_to_odd(g, cbr << h);
    // An even mantissa reads its interval's ends back as itself (round half to even).
    const uint32_t lower = vbl + !even;
    const uint32_t upper = vbr - !even;
    const uint32_t s = vb / 4;
    // Both candidates are computed and one is taken without a branch: on
    // an embedding's floats each wins about half the time, which a branch
    // predictor cannot guess. One digit fewer, when exactly one such
    // decimal lies in the interval:
    const uint32_t sp = s / 10;
    const bool up_inside = lower <= 40 * sp;
    const bool wp_inside = 40 * sp + 40 <= upper;
    const bool fewer = (s >= 10) & (up_inside != wp_inside);
    // else the value's floor or ceiling, whichever alone is inside, or the
    // nearer when both are (ties to even).
    const bool u_inside = lower <= 4 * s;
    const bool w_inside = 4 * s + 4 <= upper;
    const uint32_t mid = 4 * s + 2;
    const bool nearer_up = (vb > mid) | ((vb == mid) & (s & 1));
    const uint32_t up = u_inside != w_inside ? w_inside : nearer_up;
    d.digits = fewer ? sp + wp_inside : s + up;
    d.exponent = k + fewer;
  }
  while (d.digits % 10 == 0) {
    d.digits /= 10;
    d.exponent++;
  }
  return d;
}

// How many digits v (0 < v < 10^9) has, from its bit length, without a
// branch: the count is what a branch predictor cannot guess.
inline int digit_count(uint32_t v) {
  static constexpr uint32_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
  const int t = ((32 - __builtin_clz(v)) * 1233) >> 12;  // floor(log10(2^bits)), within one of the answer
  return t + (v >= kPow10[t]);
}

// v (< 10^9, n digits) as its first digit and the n - 1 after it, the
// second in the low byte of `rest` (little-endian order, as they are
// stored). Built in registers and stored whole: text written in pieces and
// read back as a word stalls a load on the pieces' stores.
struct Digits {
  char first;
  uint64_t rest;
};

// The 8 digits of v (< 10^8), leading zeros included, as ASCII in one word,
// the first digit in the low byte: split in two halves of 4, each half
// into two pairs, each pair into two digits, the lanes of a word divided
// side by side (the quotients exact over the lanes' ranges, with no carry
// between lanes).
inline uint64_t eight_digits(uint32_t v) {
  const uint32_t hi = v / 10000;
  const uint64_t x = hi | (uint64_t)(v - hi * 10000) << 32;  // two 32-bit lanes < 10^4
  const uint64_t q = ((x * 10486) >> 20) & 0x0000007F0000007Full;  // each lane / 100
  const uint64_t y = q | (x - q * 100) << 16;                       // four 16-bit lanes < 100
  const uint64_t t = ((y * 103) >> 10) & 0x000F000F000F000Full;     // each lane / 10
  return (t | (y - t * 10) << 8) + 0x3030303030303030ull;
}

inline Digits split_digits(uint32_t v, int n) {
  if (n == 9) return {char('0' + v / 100000000), eight_digits(v % 100000000)};
  const uint64_t last_n = eight_digits(v) >> (8 * (8 - n));  // n digits in the low bytes
  return {char(last_n), last_n >> 8};
}

inline void store8(char* at, uint64_t w) { memcpy(at, &w, 8); }

}  // namespace

FloatDecimal shortest_decimal(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return shortest(bits & ((1u << kMantissaBits) - 1), (bits >> kMantissaBits) & 0xFF);
}

char* write_float(char* out, float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  const bool negative = bits >> 31;
  const uint32_t mantissa = bits & ((1u << kMantissaBits) - 1);
  const uint32_t exponent = (bits >> kMantissaBits) & 0xFF;
  if (exponent == 0xFF) {
    if (mantissa) {
      memcpy(out, negative ? "-nan" : "nan", negative ? 4 : 3);
      return out + (negative ? 4 : 3);
    }
    memcpy(out, negative ? "-inf" : "inf", negative ? 4 : 3);
    return out + (negative ? 4 : 3);
  }
  *out = '-';
  out += negative;
  if (exponent == 0 && mantissa == 0) {
    *out++ = '0';
    return out;
  }
  const FloatDecimal d = shortest(mantissa, exponent);
  const int n = digit_count(d.digits);
  const int sci_exp = d.exponent + n - 1;  // d.d...e±XX, |XX| <= 45 for a float
  const int abs_exp = sci_exp < 0 ? -sci_exp : sci_exp;
  const int sci_len = n + (n > 1) + 4;
  const int fixed_len = d.exponent >= 0 ? n + d.exponent : sci_exp >= 0 ? n + 1 : n + 1 - sci_exp;

  if (fixed_len <= sci_len && d.exponent >= 0) {
    // An integer, written exactly (as printf's %f would), not as its
    // shortest digits padded with zeros: 33554448, not 33554450.
    const int e = (int)exponent - kExponentBias;
    const uint32_t m = (1u << kMantissaBits) | mantissa;
    return std::to_chars(out, out + kFloatTextMax, e >= 0 ? (uint64_t)m << e : m >> -e).ptr;
  }
  // The 8-byte stores below reach past the text, within kFloatTextMax: the
  // point comes after at most 8 digits, and at most 3 zeros follow "0.".
  const Digits g = split_digits(d.digits, n);
  if (fixed_len <= sci_len) {
    if (sci_exp >= 0) {
      const int whole = sci_exp + 1;  // ddd.ddd
      out[0] = g.first;
      store8(out + 1, g.rest);
      out[whole] = '.';
      store8(out + whole + 1, g.rest >> (8 * (whole - 1)));
      return out + n + 1;
    }
    const int zeros = -sci_exp - 1;  // 0.000ddd
    memcpy(out, "0.000000", 8);
    out[2 + zeros] = g.first;
    store8(out + 3 + zeros, g.rest);
    return out + 2 + zeros + n;
  }
  // d.ddde±XX
  out[0] = g.first;
  char* p = out + 1;
  if (n > 1) {
    *p = '.';
    store8(p + 1, g.rest);
    p += n;
  }
  *p++ = 'e';
  *p++ = sci_exp < 0 ? '-' : '+';
  *p++ = char('0' + abs_exp / 10);
  *p++ = char('0' + abs_exp % 10);
  return p;
}

}  // namespace kitfox
