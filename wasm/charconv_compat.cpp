// See charconv_compat.h.
#include "charconv_compat.h"

#if defined(__EMSCRIPTEN__) && defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int parse_digits(const char* buf, char* digits, int* ndigits);

// The shortest decimal digits of `v` (finite, > 0) that read back to v:
// fills `digits` (no point, no leading zeros) and returns the decimal
// exponent of the first digit (v = 0.d1d2d3... x 10^(exp+1)).
template <typename T>
int shortest_digits(T v, char* digits, int* ndigits) {
  constexpr int kMax = sizeof(T) == 8 ? 17 : 9;
  char buf[40];
  // Reading back is monotonic in the precision (more correctly rounded
  // digits are never farther from v), so the shortest is a binary search.
  auto round_trips = [&](int p) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, (double)v);
    return (sizeof(T) == 8 ? (T)strtod(buf, nullptr) : (T)strtof(buf, nullptr)) == v;
  };
  // Short forms (0.5, 12.25) are common: try them one by one first.
  int lo = 1, hi = kMax;
  for (; lo <= 4; lo++)
    if (round_trips(lo)) return parse_digits(buf, digits, ndigits);
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (round_trips(mid)) hi = mid;
    else lo = mid + 1;
  }
  round_trips(lo);  // leaves the digits of the shortest in buf
  return parse_digits(buf, digits, ndigits);
}

// buf is "d.ddde[+-]XX" or "de[+-]XX": its digits and exponent.
int parse_digits(const char* buf, char* digits, int* ndigits) {
  int n = 0;
  const char* s = buf;
  for (; *s != 'e'; s++)
    if (*s != '.') digits[n++] = *s;
  int exp = atoi(s + 1);
  while (n > 1 && digits[n - 1] == '0') n--;  // %.*e may pad with zeros
  *ndigits = n;
  return exp;
}

template <typename T>
std::to_chars_result format(char* first, char* last, T value) {
  char out[64];
  int len = 0;
  if (std::signbit(value)) out[len++] = '-';
  T a = std::fabs(value);
  if (std::isnan(value)) {
    len = 0;
    if (std::signbit(value)) out[len++] = '-';
    memcpy(out + len, "nan", 3), len += 3;
  } else if (std::isinf(a)) {
    memcpy(out + len, "inf", 3), len += 3;
  } else if (a == 0) {
    out[len++] = '0';
  } else {
    char d[24];
    int n;
    int e = shortest_digits(a, d, &n);
    // Scientific: d[.ddd]e(+|-)XX, at least two exponent digits.
    char sci[40];
    int sl = 0;
    sci[sl++] = d[0];
    if (n > 1) {
      sci[sl++] = '.';
      memcpy(sci + sl, d + 1, n - 1), sl += n - 1;
    }
    sl += snprintf(sci + sl, sizeof sci - sl, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    // Fixed: digits with the point placed by the exponent.
    int fixed_len = e >= 0 ? (n <= e + 1 ? e + 1 : n + 1) : 2 + (-e - 1) + n;
    if (fixed_len <= sl) {
      if (e >= 0) {
        if (n <= e + 1) {
          // An integer: its exact digits, as printf's %.0f (same length).
          len += snprintf(out + len, sizeof out - len, "%.0f", (double)a);
        } else {
          memcpy(out + len, d, e + 1), len += e + 1;
          out[len++] = '.';
          memcpy(out + len, d + e + 1, n - e - 1), len += n - e - 1;
        }
      } else {
        out[len++] = '0';
        out[len++] = '.';
        for (int i = 0; i < -e - 1; i++) out[len++] = '0';
        memcpy(out + len, d, n), len += n;
      }
    } else {
      memcpy(out + len, sci, sl), len += sl;
    }
  }
  if (last - first < len) return {last, std::errc::value_too_large};
  memcpy(first, out, len);
  return {first + len, std::errc()};
}

}  // namespace

namespace std {
to_chars_result to_chars(char* first, char* last, double value) { return format(first, last, value); }
to_chars_result to_chars(char* first, char* last, float value) { return format(first, last, value); }
}  // namespace std
#endif
