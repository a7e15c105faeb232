// Documents from JSON text with simdjson's On-Demand API: see documents.h.
#include "documents.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cli_text.h"
#include "codec.h"
#include "engine_limits.h"

namespace kitfox {

namespace {

namespace od = simdjson::ondemand;

inline bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// After a list's item: white space, then a comma and the white space after
// it (*p past them: another item), or its `]` (*p past it: the end); else
// malformed.
enum class After { Item, End, Bad };
inline After after_item(const char** p) {
  const char* q = *p;
  while (json_space(*q)) q++;
  if (*q == ',') {
    q++;
    while (json_space(*q)) q++;
    *p = q;
    return After::Item;
  }
  *p = q + 1;
  return *q == ']' ? After::End : After::Bad;
}

// A count written before what it counts, once known: one byte is kept for
// it (most are under 128), the items moved up where it needs more.
void put_count(std::string* out, size_t at, uint64_t n) {
  if (n < 0x80) {
    (*out)[at] = static_cast<char>(n);
    return;
  }
  std::string v;
  put_varint(v, n);
  out->replace(at, 1, v);
}

// ---------------------------------------------------------------------------
// Numbers of a vector: each as parse_json reads it, then to float.

constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// Whether the 8 bytes at p are all digits, and their value: 8 digits at a
// time (SWAR), for the long fractions JSON writers print.
inline bool eight_digits(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return ((v & 0xF0F0F0F0F0F0F0F0ull) | (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ==
         0x3333333333333333ull;
}
inline uint64_t eight_digit_value(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  v = ((v & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
  v = ((v & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
  return ((v & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
}

// m x 10^e as the nearest double, for the 17- to 19-digit numbers JSON
// writers print for doubles (0.12345678901234568), where Clinger's fast path
// does not apply: with 64 bits of significand (x87's long double) m and
// 10^|e| (|e| <= 27) are exact, so m x 10^e comes out within half a unit of
// its last bit, one rounding. Rounding that to a double is then the correct
// rounding unless the 11 bits below the double's last one are exactly a
// half: there the true value may lie on either side of the tie, and this
// answers false (the caller takes from_chars).
bool extended_nearest(uint64_t m, int e, double* out) {
  if constexpr (std::numeric_limits<long double>::digits != 64) {
    return false;
  } else {
    static const auto kPow10L = [] {
      std::array<long double, 28> t{};
      t[0] = 1;
      for (size_t i = 1; i < t.size(); i++) t[i] = t[i - 1] * 10;
      return t;
    }();
    const long double x = static_cast<long double>(m);
    const long double q = e < 0 ? x / kPow10L[-e] : x * kPow10L[e];
    if (q == 0) {
      *out = 0;
      return true;
    }
    int ex;
    const long double fr = std::frexp(q, &ex);                                // [0.5, 1)
    const uint64_t bits = static_cast<uint64_t>(std::ldexp(fr, 64));         // all 64 significand bits
    if ((bits & 0x7FF) == 0x400) return false;
    *out = static_cast<double>(q);
    return true;
  }
}

// The JSON number at p as parse_json reads it: an integer in int64's range
// as that integer (*is_int set, *i), anything with a fraction or an
// exponent as the nearest double (*d). Returns the end of the number, or
// nullptr for anything else (malformed, an integer beyond int64, a double
// out of range).
[[gnu::always_inline]] inline const char* read_json_number(const char* p, bool* is_int, int64_t* i, double* out) {
  const char* start = p;
  const bool neg = *p == '-';
  p += neg;
  uint64_t m = 0;      // the significant digits, up to 19 of them
  int digits = 0;      // how many of them
  bool dropped = false;  // more than 19
  int64_t exp10 = 0;
  if (*p == '0') {
    p++;
  } else if (digit(*p)) {
    do {
      if (digits < 19) {
        m = m * 10 + static_cast<uint64_t>(*p - '0');
        digits++;
      } else {
        dropped = true;
        exp10++;
      }
      p++;
    } while (digit(*p));
  } else {
    return nullptr;
  }
  bool is_float = false;
  if (*p == '.') {
    p++;
    if (!digit(*p)) return nullptr;
    is_float = true;
    do {
      if (std::endian::native == std::endian::little && m != 0 && digits <= 11 && eight_digits(p)) {
        m = m * 100000000 + eight_digit_value(p);
        digits += 8;
        exp10 -= 8;
        p += 8;
        continue;
      }
      if (m == 0 && *p == '0') {
        exp10--;  // a leading zero is no significant digit
      } else if (digits < 19) {
        m = m * 10 + static_cast<uint64_t>(*p - '0');
        digits++;
        exp10--;
      } else {
        dropped = true;
      }
      p++;
    } while (digit(*p));
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    is_float = true;
    bool eneg = false;
    if (*p == '+' || *p == '-') eneg = *p++ == '-';
    if (!digit(*p)) return nullptr;
    int64_t e = 0;
    do {
      if (e < 1000000) e = e * 10 + (*p - '0');
      p++;
    } while (digit(*p));
    exp10 += eneg ? -e : e;
  }
  *is_int = !is_float;
  if (!is_float) {
    if (dropped || m > (neg ? 9223372036854775808ull : 9223372036854775807ull)) return nullptr;
    *i = neg ? static_cast<int64_t>(0 - m) : static_cast<int64_t>(m);
    return p;
  }
  double d;
  if (!dropped && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
    // Both exact as doubles: one rounding, the correct one (Clinger's fast path).
    d = exp10 < 0 ? static_cast<double>(m) / kPow10[-exp10] : static_cast<double>(m) * kPow10[exp10];
    if (neg) d = -d;
  } else if (!dropped && exp10 >= -27 && exp10 <= 27 && extended_nearest(m, static_cast<int>(exp10), &d)) {
    if (neg) d = -d;
  } else {
    auto r = std::from_chars(start, p, d);
    if (r.ec != std::errc() || r.ptr != p) return nullptr;
  }
  *out = d;
  return p;
}

// The same number as the engine makes a vector element of it: through
// int64 or double, then to float.
inline const char* read_number(const char* p, float* out) {
  bool is_int;
  int64_t i;
  double d;
  p = read_json_number(p, &is_int, &i, &d);
  if (!p) return nullptr;
  *out = is_int ? static_cast<float>(static_cast<double>(i)) : static_cast<float>(d);
  return p;
}

#if defined(__SSE2__)
// Plain numbers (1 to 8 digits, no sign, no fraction) separated by single
// commas, as image and count data are written, 64 bytes at a time: the
// digits and commas of the window found with SSE2, each number's value
// from its digits at once (SWAR). Reads the numbers that end at a comma in
// the 64 bytes from p (which may run past the text, into the buffer's
// padding at worst) and before `end`; returns the bytes taken (past the last
// such comma) and sets *count, or returns 0 when the window does not start
// that way.
size_t read_plain_numbers(const char* p, const char* end, float* out, size_t* count) {
  if (p >= end) return 0;
  uint64_t nondigit = 0, comma = 0;
  const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9), sep = _mm_set1_epi8(',');
  for (int k = 0; k < 4; k++) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i d = _mm_sub_epi8(b, zero);
    const __m128i is_digit = _mm_cmpeq_epi8(_mm_max_epu8(d, nine), nine);
    nondigit |= static_cast<uint64_t>(static_cast<uint16_t>(~_mm_movemask_epi8(is_digit))) << (16 * k);
    comma |= static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(b, sep)))) << (16 * k);
  }
  // Up to the first byte that breaks the pattern: a non-digit other than a
  // comma, two non-digits in a row, or no digit to start with.
  const uint64_t bad = (nondigit & ~comma) | (nondigit & (nondigit << 1)) | (nondigit & 1);
  const uint64_t below = bad ? (bad & (0 - bad)) - 1 : ~uint64_t{0};
  const size_t room = static_cast<size_t>(end - p);
  const uint64_t ends = comma & below & (room >= 64 ? ~uint64_t{0} : (uint64_t{1} << room) - 1);
  if (!ends) return 0;
  const unsigned last = 63 - static_cast<unsigned>(__builtin_clzll(ends));
  uint64_t e = ends, starts = ((ends << 1) | 1) & ~(last == 63 ? 0 : ~uint64_t{0} << (last + 1));
  const size_t n = static_cast<size_t>(__builtin_popcountll(ends));
  bool odd = false;
  for (size_t k = 0; k < n; k++) {
    const unsigned s = static_cast<unsigned>(__builtin_ctzll(starts)), t = static_cast<unsigned>(__builtin_ctzll(e));
    starts &= starts - 1;
    e &= e - 1;
    const unsigned len = t - s;
    odd |= len > 8 || (len > 1 && p[s] == '0');  // long, or a leading zero: not this way
    uint64_t w;
    memcpy(&w, p + s, 8);
    uint64_t v = (w ^ 0x3030303030303030ull) << (8 * (8 - (len > 8 ? 8 : len)));
    v = v * 10 + (v >> 8);
    v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
    out[k] = static_cast<float>(static_cast<int32_t>(v));  // below 10^8: exact as a double, then to float
  }
  if (odd) return 0;
  *count = n;
  return last + 1;
}
#endif

}  // namespace

bool parse_number_array(std::string_view text, std::vector<float>* out) {
  const char* p = text.data();
  const char* const end = p + text.size();
  out->clear();
  if (p == end || *p != '[') return false;
  size_t cap = std::max<size_t>(out->capacity(), 16), n = 0;
  out->resize(cap);
  float* w = out->data();
  p++;
  while (json_space(*p)) p++;
  if (*p == ']') {
    p++;
  } else {
    bool windows = true;  // until a window takes fewer than 4 numbers
    for (;;) {
      if (n == cap) {
        cap *= 2;
        out->resize(cap);
        w = out->data();
      }
#if defined(__SSE2__)
      if (windows && n + 32 <= cap) {  // a window holds at most 32 numbers
        size_t got = 0;
        const size_t took = read_plain_numbers(p, end, w + n, &got);
        windows = got >= 4;
        if (took) {
          n += got;
          p += took;
          if (p >= end) return false;
          while (json_space(*p)) p++;
          continue;
        }
      }
#endif
      p = read_number(p, &w[n]);
      if (!p || p >= end) return false;
      n++;
      const After a = after_item(&p);
      if (a == After::Item) continue;
      if (a == After::Bad) return false;
      break;
    }
  }
  out->resize(n);
  // Only white space may follow (the reader's view of a value runs to the next token).
  while (p < end && json_space(*p)) p++;
  return p == end;
}

const char* encode_number_list(const char* p, std::string* out) {
  if (*p != '[') return nullptr;
  p++;
  while (json_space(*p)) p++;
  put_u8(*out, kList);
  const size_t count_at = out->size();
  out->push_back(0);
  uint64_t n = 0;
  if (*p == ']') return p + 1;
  for (;;) {
    bool is_int;
    int64_t i;
    double d;
    p = read_json_number(p, &is_int, &i, &d);
    if (!p) return nullptr;
    char item[1 + 10];  // a tag, then a varint or 8 bytes
    size_t len = 1;
    if (is_int) {
      item[0] = static_cast<char>(kInt);
      for (uint64_t z = zigzag(i);; z >>= 7) {
        item[len++] = static_cast<char>(z < 0x80 ? z : (z & 0x7F) | 0x80);
        if (z < 0x80) break;
      }
    } else {
      item[0] = static_cast<char>(kFloat);
      memcpy(item + 1, &d, 8);
      len = 9;
    }
    out->append(item, len);
    n++;
    const After a = after_item(&p);
    if (a == After::Item) continue;
    if (a == After::Bad) return nullptr;
    break;
  }
  put_count(out, count_at, n);
  return p;
}

// ---------------------------------------------------------------------------

DocumentReader::DocumentReader(Database& db, std::string_view collection) {
  // The fields whose arrays go straight into f32: top-level vector<N>.
  auto r = db.query("describe " + std::string(collection));
  if (r.is_ok()) {
    for (const Value& row : r->rows) {
      const Value* f = row.get("field");
      const Value* t = row.get("type");
      if (!f || !t || f->kind() != Kind::Text || t->kind() != Kind::Text) continue;
      const std::string& type = t->as_string();
      if (type.rfind("vector<", 0) != 0) continue;
      uint64_t dim = 0;
      size_t e = type.find_first_not_of("0123456789", 7);
      parse_count(std::string_view(type).substr(7, e == std::string::npos ? std::string::npos : e - 7), &dim);
      vectors_.push_back({f->as_string(), static_cast<uint32_t>(std::min<uint64_t>(dim, kMaxVectorDim))});
    }
  }
}

const DocumentReader::VectorField* DocumentReader::vector_field(std::string_view key) const {
  for (const VectorField& f : vectors_)
    if (f.name == key) return &f;
  return nullptr;
}



bool DocumentReader::encode(od::document_reference& d, std::string* out) const {
  od::object obj;
  if (d.get_object().get(obj)) return false;
  return encode_object(obj, out, 1, !vectors_.empty());
}

// As to_object and to_value, writing the encoding of the Value they make.
bool DocumentReader::encode_object(od::object& obj, std::string* out, int depth, bool vectors) const {
  put_u8(*out, kObject);
  const size_t count_at = out->size();
  out->push_back(0);
  // The keys so far, for one given twice (compared as Value::set finds one).
  thread_local std::vector<std::string_view> keys;
  const size_t first = keys.size();
  struct Drop {  // this object's keys leave the list however it ends
    std::vector<std::string_view>& k;
    size_t n;
    ~Drop() { k.resize(n); }
  } drop{keys, first};
  uint64_t n = 0;
  for (auto f : obj) {
    od::field field;
    if (std::move(f).get(field)) return false;
    std::string_view key;
    if (field.unescaped_key(false).get(key)) return false;
    for (size_t i = first; i < keys.size(); i++)
      if (keys[i] == key) return false;
    keys.push_back(key);
    put_str(*out, key);
    const VectorField* vf = vectors ? vector_field(key) : nullptr;
    od::json_type t;
    if (vf && !field.value().type().get(t) && t == od::json_type::array) {
      std::string_view raw;
      if (field.value().raw_json().get(raw)) return false;
      thread_local std::vector<float> f32;
      f32.clear();
      f32.reserve(vf->dim);
      if (!parse_number_array(raw, &f32)) return false;
      encode_vector(*out, f32.data(), f32.size(), false);
    } else if (!encode_value(field.value(), out, depth)) {
      return false;
    }
    n++;
  }
  put_count(out, count_at, n);
  return true;
}

namespace {
// `[` and a number after it (the token the reader stands at: its text goes
// on in the padded buffer).
bool starts_number_list(std::string_view token) {
  if (token.empty() || token[0] != '[') return false;
  const char* p = token.data() + 1;
  while (json_space(*p)) p++;
  return *p == '-' || digit(*p);
}
// Whether what follows `end` in `raw` is white space alone.
bool only_space(const char* end, std::string_view raw) {
  const char* stop = raw.data() + raw.size();
  if (end > stop) return false;
  while (end < stop && json_space(*end)) end++;
  return end == stop;
}
}  // namespace

bool DocumentReader::encode_value(od::value v, std::string* out, int depth) const {
  if (depth > kMaxDepth) return false;
  od::json_type t;
  if (v.type().get(t)) return false;
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      return !v.get_object().get(obj) && encode_object(obj, out, depth + 1, false);
    }
    case od::json_type::array: {
      // A list of numbers (an embedding) read from its text at once, without
      // a value of the reader per number; anything else the way below.
      const std::string_view token = v.raw_json_token();
      if (depth < kMaxDepth && starts_number_list(token)) {
        const size_t at = out->size();
        const char* end = encode_number_list(token.data(), out);
        std::string_view raw;
        if (end) return !v.raw_json().get(raw) && raw.data() == token.data() && only_space(end, raw);
        out->resize(at);
      }
      od::array arr;
      if (v.get_array().get(arr)) return false;
      put_u8(*out, kList);
      const size_t count_at = out->size();
      out->push_back(0);
      uint64_t n = 0;
      for (auto e : arr) {
        od::value ev;
        if (std::move(e).get(ev)) return false;
        if (!encode_value(ev, out, depth + 1)) return false;
        n++;
      }
      put_count(out, count_at, n);
      return true;
    }
    case od::json_type::number: {
      od::number num;
      if (v.get_number().get(num)) return false;
      if (num.is_int64()) {
        put_u8(*out, kInt);
        put_varint(*out, zigzag(num.get_int64()));
      } else if (num.is_double()) {
        const double d = num.get_double();
        put_u8(*out, kFloat);
        out->append(reinterpret_cast<const char*>(&d), 8);
      } else {
        return false;  // beyond int64: the plain reader names the error
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return false;
      put_u8(*out, kText);
      put_str(*out, s);
      return true;
    }
    case od::json_type::boolean: {
      bool b;
      if (v.get_bool().get(b)) return false;
      put_u8(*out, b ? kTrue : kFalse);
      return true;
    }
    case od::json_type::null: {
      bool null;
      if (v.is_null().get(null) || !null) return false;
      put_u8(*out, kNull);
      return true;
    }
    default: return false;
  }
}

std::string_view EncodedDocs::list() {
  std::string head;
  put_u8(head, kList);
  put_varint(head, n_);
  memcpy(&enc_[kHead - head.size()], head.data(), head.size());
  return std::string_view(enc_).substr(kHead - head.size());
}

bool DocumentReader::read_array(const simdjson::padded_string& text, EncodedDocs* out, int depth) const {
  od::parser parser;
  od::document doc;
  if (parser.iterate(text).get(doc)) return false;
  od::array arr;
  if (doc.get_array().get(arr)) return false;
  out->clear();
  for (auto e : arr) {
    od::value v;
    od::object obj;
    // A document at `depth`, as parse_json of the whole text counts it.
    if (std::move(e).get(v) || v.get_object().get(obj) || !encode_object(obj, &out->bytes(), depth, !vectors_.empty()))
      return false;
    out->added();
  }
  return doc.at_end();
}

bool DocumentReader::read_lines(const simdjson::padded_string& text, EncodedDocs* out) const {
  od::parser parser;
  out->clear();
  const char* const base = text.data();
  const size_t size = text.size();
  for (size_t pos = 0; pos < size;) {
    const char* nl = static_cast<const char*>(memchr(base + pos, '\n', size - pos));
    const size_t end = nl ? static_cast<size_t>(nl - base) : size;
    size_t a = pos, b = end;
    while (a < b && json_space(base[a])) a++;
    while (b > a && json_space(base[b - 1])) b--;
    if (a < b) {
      // The rest of the text and its padding follow the line: simdjson may
      // read that far, and stops at the line's end.
      od::document doc;
      if (parser.iterate(base + a, b - a, size + simdjson::SIMDJSON_PADDING - a).get(doc)) return false;
      od::object obj;
      if (doc.get_object().get(obj) || !encode_object(obj, &out->bytes(), 1, !vectors_.empty()) || !doc.at_end())
        return false;
      out->added();
    }
    pos = end + 1;
  }
  return true;
}

}  // namespace kitfox
