#include "value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "float_text.h"

namespace kitfox {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Text: return "text";
    case Kind::Bytes: return "bytes";
    case Kind::Timestamp: return "timestamp";
    case Kind::List: return "list";
    case Kind::Object: return "object";
    case Kind::Vector: return "vector";
  }
  return "?";
}

// A kind tag and one member: 56 bytes on 64-bit targets (120 with a member
// for each kind), 32 in WASM.
static_assert(sizeof(void*) != 8 || sizeof(Value) == 56);

const std::string Value::kEmptyString;

const Value& Value::at_path(const std::vector<std::string>& path) const {
  static const Value null;
  const Value* v = this;
  for (const std::string& k : path) {
    v = v->kind() == Kind::Object ? v->get(k) : nullptr;
    if (!v) return null;
  }
  return *v;
}
const std::vector<Value> Value::kNoItems;
const std::vector<std::string> Value::kNoKeys;
const std::vector<float> Value::kNoFloats;

void Value::become(Kind k) {
  destroy();
  kind_ = k;
  switch (k) {
    case Kind::Text: case Kind::Bytes: new (&s_) std::string(); break;
    case Kind::List: case Kind::Object: new (&m_) Members{}; break;
    case Kind::Vector: new (&vec_) std::vector<float>(); break;
    default: i_ = 0; break;
  }
}

void Value::copy_from(const Value& o) {
  kind_ = o.kind_;
  switch (kind_) {
    case Kind::Text: case Kind::Bytes: new (&s_) std::string(o.s_); break;
    case Kind::List: case Kind::Object: new (&m_) Members(o.m_); break;
    case Kind::Vector: new (&vec_) std::vector<float>(o.vec_); break;
    default: i_ = o.i_; break;
  }
}

const Value* Value::get(std::string_view key) const {
  if (!has_members()) return nullptr;
  for (size_t i = 0; i < m_.keys.size(); i++)
    if (same_key(m_.keys[i], key)) return &m_.items[i];
  return nullptr;
}

Value* Value::get_mut(std::string_view key) { return const_cast<Value*>(std::as_const(*this).get(key)); }

void Value::set(std::string_view key, Value v) {
  if (Value* p = get_mut(key)) {
    *p = std::move(v);
    return;
  }
  Members& m = members();
  m.keys.emplace_back(key);
  m.items.push_back(std::move(v));
}

bool Value::erase(std::string_view key) {
  if (!has_members()) return false;
  for (size_t i = 0; i < m_.keys.size(); i++)
    if (same_key(m_.keys[i], key)) {
      m_.keys.erase(m_.keys.begin() + i);
      m_.items.erase(m_.items.begin() + i);
      return true;
    }
  return false;
}

static int rank(Kind k) {
  switch (k) {
    case Kind::Null: return 0;
    case Kind::Bool: return 1;
    case Kind::Int:
    case Kind::Float: return 2;
    case Kind::Timestamp: return 3;
    case Kind::Text: return 4;
    case Kind::Bytes: return 5;
    case Kind::List: return 6;
    case Kind::Object: return 7;
    case Kind::Vector: return 8;
  }
  return 9;
}

template <typename T>
static int cmp3(T a, T b) { return a < b ? -1 : (b < a ? 1 : 0); }

int compare(const Value& a, const Value& b) {
  int ra = rank(a.kind()), rb = rank(b.kind());
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (a.kind()) {
    case Kind::Null: return 0;
    case Kind::Bool: return cmp3(a.as_bool(), b.as_bool());
    case Kind::Int:
    case Kind::Float: return compare_numbers(a, b);
    case Kind::Timestamp: return cmp3(a.as_int(), b.as_int());
    case Kind::Text:
    case Kind::Bytes: {
      int c = a.as_string().compare(b.as_string());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    case Kind::List: {
      size_t n = std::min(a.items().size(), b.items().size());
      for (size_t i = 0; i < n; i++)
        if (int c = compare(a.items()[i], b.items()[i])) return c;
      return cmp3(a.items().size(), b.items().size());
    }
    case Kind::Object: {
      size_t n = std::min(a.items().size(), b.items().size());
      for (size_t i = 0; i < n; i++) {
        int c = a.keys()[i].compare(b.keys()[i]);
        if (c) return c < 0 ? -1 : 1;
        if (int d = compare(a.items()[i], b.items()[i])) return d;
      }
      return cmp3(a.items().size(), b.items().size());
    }
    case Kind::Vector: {
      size_t n = std::min(a.vec().size(), b.vec().size());
      for (size_t i = 0; i < n; i++)
        if (a.vec()[i] != b.vec()[i]) return a.vec()[i] < b.vec()[i] ? -1 : 1;
      return cmp3(a.vec().size(), b.vec().size());
    }
  }
  return 0;
}

bool equal(const Value& a, const Value& b) { return compare(a, b) == 0; }

uint64_t sort_prefix(const Value& v) {
  const uint64_t r = (uint64_t)rank(v.kind()) << 56;
  switch (v.kind()) {
    case Kind::Bool: return r | (uint64_t)v.as_bool();
    case Kind::Int:
    case Kind::Float: {
      // The number as a double (ints past 2^53 may round: equal prefixes,
      // which compare then orders), its bits made to order as unsigned,
      // the top 56 kept. -0.0 is 0.0 (they compare equal); NaN last.
      double d = v.as_number();
      if (std::isnan(d)) return r | 0x00FFFFFFFFFFFFFFull;
      if (d == 0) d = 0;
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      bits = (bits >> 63) ? ~bits : bits | (1ull << 63);
      return r | (bits >> 8);
    }
    case Kind::Timestamp: return r | (((uint64_t)v.as_int() ^ (1ull << 63)) >> 8);
    case Kind::Text:
    case Kind::Bytes: {  // the first 7 bytes, big-endian, zeros past the end
      const std::string& s = v.as_string();
      uint64_t p = 0;
      for (size_t i = 0; i < 7; i++) p = p << 8 | (i < s.size() ? (uint8_t)s[i] : 0);
      return r | p;
    }
    default: return r;  // null, and what compare orders only by looking further
  }
}

void key_bytes(std::string& out, const Value& v) {
  auto word = [&](char tag, uint64_t w) {
    out.push_back(tag);
    out.append(reinterpret_cast<const char*>(&w), 8);
  };
  auto count = [&](uint64_t n) { out.append(reinterpret_cast<const char*>(&n), 8); };
  switch (v.kind()) {
    case Kind::Null: out.push_back('n'); return;
    case Kind::Bool: out.push_back(v.as_bool() ? 't' : 'f'); return;
    case Kind::Int: word('i', (uint64_t)v.as_int()); return;
    case Kind::Float: {
      double d = v.as_float();
      if (d == std::floor(d) && d >= -0x1p63 && d < 0x1p63) return word('i', (uint64_t)(int64_t)d);
      if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return word('d', bits);
    }
    case Kind::Timestamp: word('s', (uint64_t)v.as_int()); return;
    case Kind::Text:
    case Kind::Bytes:
      out.push_back(v.kind() == Kind::Text ? 'x' : 'b');
      count(v.as_string().size());
      out += v.as_string();
      return;
    case Kind::List:
      out.push_back('l');
      count(v.items().size());
      for (const Value& x : v.items()) key_bytes(out, x);
      return;
    case Kind::Object:
      out.push_back('o');
      count(v.items().size());
      for (size_t i = 0; i < v.items().size(); i++) {
        count(v.keys()[i].size());
        out += v.keys()[i];
        key_bytes(out, v.items()[i]);
      }
      return;
    case Kind::Vector:
      out.push_back('v');
      count(v.vec().size());
      for (float f : v.vec()) {
        if (f == 0) f = 0;
        out.append(reinterpret_cast<const char*>(&f), 4);
      }
      return;
  }
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar.
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = (unsigned)(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

std::string format_timestamp(int64_t ms) {
  int64_t days = ms / 86400000, rem = ms % 86400000;
  if (rem < 0) { rem += 86400000; days--; }
  int64_t y; unsigned mo, d;
  civil_from_days(days, &y, &mo, &d);
  unsigned h = rem / 3600000, mi = rem / 60000 % 60, s = rem / 1000 % 60, f = rem % 1000;
  char buf[64];
  if (y >= 0 && y <= 9999)
    snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", (long long)y, mo, d, h, mi, s, f);
  else
    snprintf(buf, sizeof buf, "%+07lld-%02u-%02uT%02u:%02u:%02u.%03uZ", (long long)y, mo, d, h, mi, s, f);
  return buf;
}

static bool digits(std::string_view s, size_t& p, int n, int* out) {
  int v = 0;
  for (int i = 0; i < n; i++, p++) {
    if (p >= s.size() || s[p] < '0' || s[p] > '9') return false;
    v = v * 10 + (s[p] - '0');
  }
  *out = v;
  return true;
}

bool parse_timestamp(std::string_view s, int64_t* ms) {
  size_t p = 0;
  int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    // An expanded year, as format_timestamp writes one outside 0000-9999
    // (and a JavaScript Date's toISOString): a sign and six digits, -000000
    // not allowed.
    const bool minus = s[p++] == '-';
    if (!digits(s, p, 6, &y) || (minus && y == 0)) return false;
    if (minus) y = -y;
  } else if (!digits(s, p, 4, &y)) {
    return false;
  }
  if (p >= s.size() || s[p++] != '-') return false;
  if (!digits(s, p, 2, &mo) || p >= s.size() || s[p++] != '-') return false;
  if (!digits(s, p, 2, &d)) return false;
  if (mo < 1 || mo > 12 || d < 1) return false;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap)) return false;
  int64_t offset_min = 0;
  if (p < s.size()) {
    if (s[p] != 'T' && s[p] != 't' && s[p] != ' ') return false;
    p++;
    if (!digits(s, p, 2, &h) || p >= s.size() || s[p++] != ':' || !digits(s, p, 2, &mi)) return false;
    if (p < s.size() && s[p] == ':') {
      p++;
      if (!digits(s, p, 2, &sec)) return false;
      if (p < s.size() && s[p] == '.') {
        p++;
        int n = 0;
        while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
          if (n < 3) frac = frac * 10 + (s[p] - '0');
          n++, p++;
        }
        if (n == 0) return false;
        for (; n < 3; n++) frac *= 10;
      }
    }
    if (h > 23 || mi > 59 || sec > 59) return false;
    if (p < s.size()) {
      if (s[p] == 'Z' || s[p] == 'z') {
        p++;
      } else if (s[p] == '+' || s[p] == '-') {
        int sign = s[p++] == '-' ? -1 : 1, oh, om;
        if (!digits(s, p, 2, &oh)) return false;
        if (p < s.size() && s[p] == ':') p++;
        if (!digits(s, p, 2, &om) || oh > 23 || om > 59) return false;
        offset_min = sign * (oh * 60 + om);
      } else {
        return false;
      }
    }
  }
  if (p != s.size()) return false;
  int64_t days = days_from_civil(y, mo, d);
  *ms = ((days * 24 + h) * 60 + mi - offset_min) * 60000 + sec * 1000 + frac;
  return true;
}

bool valid_utf8(std::string_view s) {
  const unsigned char* p = (const unsigned char*)s.data();
  const unsigned char* e = p + s.size();
  while (p < e) {
    // Fast path: 8 ASCII bytes at a time.
    while (e - p >= 8) {
      uint64_t w;
      __builtin_memcpy(&w, p, 8);
      if (w & 0x8080808080808080ull) break;
      p += 8;
    }
    if (p >= e) break;
    unsigned c = *p;
    if (c < 0x80) { p++; continue; }
    int n;
    unsigned cp;
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; if (c < 0xC2) return false; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; if (c > 0xF4) return false; }
    else return false;
    if (e - p <= n) return false;
    for (int i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    p += n + 1;
  }
  return true;
}

size_t utf8_decode(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if ((c & 0xE0) == 0xC0) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    *cp = 0xFFFD;
    return 1;
  }
  if (i + len > s.size()) {
    *cp = 0xFFFD;
    return 1;
  }
  for (size_t k = 1; k < len; k++) {
    if ((b(i + k) & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = 0xFFFD;
    return 1;
  }
  *cp = v;
  return len;
}

// The shortest decimal digits * 10^e in double: the digits (< 10^9) and
// 10^|e| (|e| <= 22) are exact doubles, so the product or quotient is
// correctly rounded, the double strtod gives for the text. From 2^24 up,
// where every float is an integer, the text form may be the whole integer
// (to_chars writes fixed notation exactly), so those go through text, as do
// exponents past 22.
static double shortest_by_text(float f) {
  char buf[kFloatTextMax + 1];
  *write_float(buf, f) = 0;
  return strtod(buf, nullptr);
}

double float_as_shortest_double(float f) {
  static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (f == 0 || !std::isfinite(f)) return (double)f;
  if (std::fabs(f) >= 16777216.0f) return shortest_by_text(f);
  const FloatDecimal d = shortest_decimal(f);
  if (d.exponent > 22 || d.exponent < -22) return shortest_by_text(f);
  const double v = d.exponent >= 0 ? d.digits * kPow10[d.exponent] : d.digits / kPow10[-d.exponent];
  return f < 0 ? -v : v;
}

}  // namespace kitfox
