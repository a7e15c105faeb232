#include <doctest/doctest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "codec.h"
#include "crc32c.h"
#include "db.h"
#include "float_text.h"
#include "schema.h"
#include "value.h"

using namespace kitfox;

TEST_CASE("crc32c matches the standard check value") {
  CHECK(crc32c(0, "123456789", 9) == 0xE3069283u);
  CHECK(crc32c(0, "", 0) == 0);
  // Incremental equals one shot.
  std::string s(1000, 'a');
  for (size_t i = 0; i < s.size(); i++) s[i] = char(i * 7);
  CHECK(crc32c(crc32c(0, s.data(), 333), s.data() + 333, 667) == crc32c(0, s.data(), 1000));
  // Three buffers side by side equal three one-shot checksums.
  std::string big(3 * 5000, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = char(i * 131 + (i >> 7));
  for (size_t n : {0, 1, 7, 8, 9, 4096, 4999}) {
    uint32_t out[3];
    crc32c_3(big.data(), big.data() + 5000, big.data() + 10000, n, out);
    CHECK(out[0] == crc32c(0, big.data(), n));
    CHECK(out[1] == crc32c(0, big.data() + 5000, n));
    CHECK(out[2] == crc32c_software(0, big.data() + 10000, n));
  }
}

TEST_CASE("timestamps: ISO-8601 in and out") {
  int64_t ms;
  REQUIRE(parse_timestamp("1970-01-01T00:00:00Z", &ms));
  CHECK(ms == 0);
  REQUIRE(parse_timestamp("2024-02-29T12:30:15.250+02:00", &ms));
  CHECK(format_timestamp(ms) == "2024-02-29T10:30:15.250Z");
  REQUIRE(parse_timestamp("1969-12-31", &ms));
  CHECK(ms == -86400000);
  CHECK(format_timestamp(-1) == "1969-12-31T23:59:59.999Z");
  CHECK_FALSE(parse_timestamp("2023-02-29", &ms));
  CHECK_FALSE(parse_timestamp("2024-13-01", &ms));
  CHECK_FALSE(parse_timestamp("2024-01-01T25:00", &ms));
  CHECK_FALSE(parse_timestamp("2024-01-01x", &ms));
}

TEST_CASE("timestamps outside years 0000-9999 are written with an expanded year, and read back") {
  // Every such time the engine takes (8.64e15 ms either side of 1970) and
  // some within: what format writes, parse reads as the same time.
  for (int64_t t : {int64_t(8640000000000000), int64_t(-8640000000000000), int64_t(253402300800000) /* 10000-01-01 */,
                    int64_t(253402300799999), int64_t(-62167219200000) /* 0000-01-01 */, int64_t(-62167219200001),
                    int64_t(-62198755200000) /* -000001-01-01 */, int64_t(-8639999999999999), int64_t(123456789)}) {
    const std::string text = format_timestamp(t);
    int64_t back = 0;
    INFO(text);
    REQUIRE(parse_timestamp(text, &back));
    CHECK(back == t);
  }
  CHECK(format_timestamp(253402300800000) == "+010000-01-01T00:00:00.000Z");
  CHECK(format_timestamp(-62167219200001) == "-000001-12-31T23:59:59.999Z");
  int64_t ms;
  REQUIRE(parse_timestamp("+275760-09-13T00:00:00.000Z", &ms));
  CHECK(ms == 8640000000000000);
  REQUIRE(parse_timestamp("-000004-02-29", &ms));  // year -4 is a leap year
  CHECK_FALSE(parse_timestamp("-000003-02-29", &ms));
  CHECK_FALSE(parse_timestamp("-000000-01-01", &ms));  // no negative zero
  CHECK_FALSE(parse_timestamp("+10000-01-01", &ms));   // six digits after a sign
  CHECK_FALSE(parse_timestamp("+0100000-01-01", &ms));
}

TEST_CASE("UTF-8 validation") {
  CHECK(valid_utf8("plain ascii text, long enough for the fast path"));
  CHECK(valid_utf8("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x8a"));
  CHECK_FALSE(valid_utf8("\xc3"));             // cut short
  CHECK_FALSE(valid_utf8("\xc0\xaf"));         // overlong
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));     // surrogate
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80")); // beyond U+10FFFF
  CHECK_FALSE(valid_utf8("abcdefgh\xff"));
}

TEST_CASE("UTF-8 decoding: code points, and one U+FFFD byte where validation refuses") {
  const auto one = [](std::string_view s) {
    uint32_t cp = 0;
    const size_t n = utf8_decode(s, 0, &cp);
    return std::pair<size_t, uint32_t>(n, cp);
  };
  CHECK(one("a") == std::pair<size_t, uint32_t>(1, 'a'));
  CHECK(one("\xc3\xa9") == std::pair<size_t, uint32_t>(2, 0xE9));
  CHECK(one("\xe6\x97\xa5") == std::pair<size_t, uint32_t>(3, 0x65E5));
  CHECK(one("\xf0\x9f\xa6\x8a") == std::pair<size_t, uint32_t>(4, 0x1F98A));
  CHECK(one("\xef\xbf\xbd") == std::pair<size_t, uint32_t>(3, 0xFFFD));  // U+FFFD itself: three bytes
  for (const char* bad : {"\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\x80", "\xe6\x97"})
    CHECK(one(bad) == std::pair<size_t, uint32_t>(1, 0xFFFD));
  // Over every string of up to 3 bytes from a set that covers each class of
  // byte, decoding and validation agree: valid exactly when no step is a
  // one-byte U+FFFD.
  const unsigned char bytes[] = {0x41, 0x7f, 0x80, 0x8f, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0,
                                 0xed, 0xee, 0xef, 0xf0, 0xf4, 0xf5, 0xf7, 0xf8, 0xff};
  size_t strings = 0;
  const auto check = [&](const std::string& t) {
    bool decoded = true;
    for (size_t i = 0; i < t.size();) {
      uint32_t cp;
      const size_t n = utf8_decode(t, i, &cp);
      if (n == 1 && cp == 0xFFFD) decoded = false;
      i += n;
    }
    if (decoded != valid_utf8(t)) FAIL_CHECK("disagree on a string of " << t.size() << " bytes");
    strings++;
  };
  for (unsigned char a : bytes) {
    check(std::string(1, (char)a));
    for (unsigned char b : bytes) {
      check(std::string{(char)a, (char)b});
      for (unsigned char c : bytes) check(std::string{(char)a, (char)b, (char)c});
      for (unsigned char c : bytes)
        for (unsigned char d : {0x80, 0x8f, 0xbf, 0x41}) check(std::string{(char)a, (char)b, (char)c, (char)d});
    }
  }
  CHECK(strings > 10000);
}

TEST_CASE("value order: kinds, then values; ints and floats numerically") {
  CHECK(compare(Value(), Value::boolean(false)) < 0);
  CHECK(compare(Value::integer(2), Value::real(2.5)) < 0);
  CHECK(compare(Value::real(2.0), Value::integer(2)) == 0);
  CHECK(compare(Value::integer(9007199254740993), Value::real(9007199254740992.0)) > 0);
  CHECK(compare(Value::text("a"), Value::integer(5)) > 0);
  CHECK(compare(Value::list({Value::integer(1)}), Value::list({Value::integer(1), Value::integer(0)})) < 0);
}

TEST_CASE("JSON out: shortest floats that read back, escapes, timestamps, bytes") {
  CHECK(to_json(Value::real(0.1)) == "0.1");
  CHECK(to_json(Value::real(1.0)) == "1.0");
  CHECK(to_json(Value::real(1e300)) == "1e+300");
  double d = 0.30000000000000004;
  CHECK(to_json(Value::real(d)) == "0.30000000000000004");
  CHECK(to_json(Value::text("a\"b\\c\n\x01")) == "\"a\\\"b\\\\c\\n\\u0001\"");
  CHECK(to_json(Value::timestamp(0)) == "\"1970-01-01T00:00:00.000Z\"");
  CHECK(to_json(Value::bytes("hi!")) == "\"aGkh\"");
  Value o = Value::object();
  o.append("k", Value::list({Value::integer(-3), Value(), Value::boolean(true)}));
  CHECK(to_json(o) == "{\"k\":[-3,null,true]}");
}

TEST_CASE("JSON in: values, and errors that name the offset") {
  auto v = parse_json(R"({"a": [1, 2.5, "x", null, true], "b": {"c": -9223372036854775808}})");
  REQUIRE(v.is_ok());
  CHECK(to_json(*v) == R"({"a":[1,2.5,"x",null,true],"b":{"c":-9223372036854775808}})");
  auto bad = parse_json(R"({"a": [1, 2,, 3]})");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == Code::Json);
  CHECK(bad.status().message().find("at byte 12") != std::string::npos);
  auto big = parse_json("18446744073709551615");
  CHECK_FALSE(big.is_ok());
  auto huge = parse_json("[1e999]");
  CHECK_FALSE(huge.is_ok());
  auto badutf = parse_json("\"\xff\"");
  CHECK(badutf.status().code() == Code::Json);
  // Numbers and strings simdjson refuses: the byte where each goes wrong.
  struct Bad {
    const char* text;
    size_t at;
  };
  for (const Bad& b : {Bad{"[1, 99999999999999999999]", 4}, Bad{"[1.2.3]", 4}, Bad{"[-]", 1}, Bad{"[01]", 2},
                       Bad{"[1, 1e999]", 4}, Bad{"[1.]", 1}, Bad{"[1e+]", 1}, Bad{R"(["ok", "\x"])", 8},
                       Bad{R"(["\ud800"])", 2}, Bad{R"(["\udc00x"])", 2}, Bad{R"(["\ud800\u0041"])", 2},
                       Bad{R"({"k": "\u12g4"})", 7}}) {
    const std::string text = b.text;
    CAPTURE(text);
    auto r = parse_json(text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("at byte " + std::to_string(b.at)) != std::string::npos);
  }
  // Each error in words, not simdjson's names for them (TAPE_ERROR, ...).
  struct Said {
    const char* text;
    const char* words;
  };
  for (const Said& s : {Said{R"({"a": 1 "b": 2})", "a bracket, brace, comma, colon or quote missing or out of place"},
                        Said{"[1, 1e999]", "a number malformed or out of range"},
                        Said{R"(["a\x"])", "a malformed string (a bad escape)"}, Said{R"(["abc)", "a string with no closing quote"},
                        Said{"[\"a\tb\"]", "a control character in a string (it must be escaped)"},
                        Said{"[\"\xff\"]", "text that is not valid UTF-8"}, Said{"[tru]", "a word that is not true"},
                        Said{"", "no JSON value"}, Said{"[1] 2", "(or more after the value)"}}) {
    const std::string text = s.text;
    CAPTURE(text);
    auto r = parse_json(text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find(s.words) != std::string::npos);
    CHECK(r.status().message().find("_ERROR") == std::string::npos);
  }
  // A backslash before a NUL byte is no escape.
  auto nul = parse_json(std::string("[\"a\\\0\"]", 7));
  REQUIRE_FALSE(nul.is_ok());
  CHECK(nul.status().message().find("at byte 3") != std::string::npos);
  // And what is right still parses: escapes, a surrogate pair, numbers.
  auto good = parse_json(R"(["\"\\\/\b\f\n\r\t", "\ud83e\udd8a", "\u00e9", 0, -0.5, 1E+2, 18446744073709551615])");
  CHECK(good.status().code() == Code::Limit);  // the last is past int64: out of range, not malformed
  auto fine = parse_json(R"(["\"\\\/\b\f\n\r\t", "\ud83e\udd8a", "\u00e9", 0, -0.5, 1E+2])");
  REQUIRE(fine.is_ok());
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto d = parse_json(deep);
  REQUIRE_FALSE(d.is_ok());
  CHECK(d.status().message().find("deeper") != std::string::npos);
}

TEST_CASE("f16 conversion rounds to nearest and keeps exact values") {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.5f, 1024.0f, 6.1035156e-05f, 5.9604645e-08f})
    CHECK(half_to_float(float_to_half(f)) == f);
  CHECK(half_to_float(float_to_half(0.1f)) == doctest::Approx(0.1f).epsilon(0.001));
  CHECK(half_to_float(float_to_half(1.0f + 1.0f / 4096)) == 1.0f);  // ties to even
}

TEST_CASE("document codec round trip, including after a schema change") {
  CollectionDef def;
  def.name = "t";
  def.fields = {{1, "a", {TypeKind::Text}, false, {}}, {2, "b", {TypeKind::Vector, TypeKind::Json, 2, true}, false, {}},
                {3, "c", {TypeKind::Json}, false, {}}};
  Value doc = Value::object();
  doc.append("a", Value::text("hello"));
  doc.append("b", Value::vector({0.5f, -1.0f}));
  Value c = Value::object();
  c.append("k", Value::list({Value::integer(1), Value(), Value::text("x")}));
  doc.append("c", c);
  std::string body;
  encode_document(def, doc, body);
  Value out;
  REQUIRE(decode_document(def, 7, body, &out).is_ok());
  CHECK(to_json(out) == R"({"id":7,"a":"hello","b":[0.5,-1],"c":{"k":[1,null,"x"]}})");
  Value one;
  REQUIRE(decode_field(body, 3, &one).is_ok());
  CHECK(to_json(one) == R"({"k":[1,null,"x"]})");
  // A dropped field's value is skipped; the others still decode.
  def.fields.erase(def.fields.begin());
  REQUIRE(decode_document(def, 7, body, &out).is_ok());
  CHECK(out.get("a") == nullptr);
  // Truncated bodies are errors, never reads past the end.
  for (size_t n = 0; n < body.size(); n++) {
    Value v;
    Status s = decode_document(def, 7, std::string_view(body.data(), n), &v);
    if (n > 0) CHECK_FALSE(s.is_ok());
  }
}

TEST_CASE("coerce: widening and refusals") {
  Value out;
  CHECK(coerce(Value::integer(3), {TypeKind::Float}, "f", &out).is_ok());
  CHECK(out.kind() == Kind::Float);
  CHECK_FALSE(coerce(Value::real(NAN), {TypeKind::Float}, "f", &out).is_ok());
  Type vec{TypeKind::Vector, TypeKind::Json, 2, false};
  CHECK_FALSE(coerce(Value::list({Value::real(1), Value::real(INFINITY)}), vec, "v", &out).is_ok());
  CHECK(coerce(Value::list({Value::integer(1), Value::real(2)}), vec, "v", &out).is_ok());
  CHECK(out.kind() == Kind::Vector);
}

TEST_CASE("crc32c over long buffers (three interleaved streams) equals the byte-at-a-time definition") {
  std::string s(200000 + 13, '\0');
  uint32_t x = 1;
  for (auto& c : s) c = char((x = x * 1103515245 + 12345) >> 16);
  // Reference: bitwise, straight from the polynomial.
  auto bitwise = [](const std::string& d) {
    uint32_t c = ~0u;
    for (unsigned char b : d) {
      c ^= b;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
  };
  CHECK(crc32c(0, s.data(), s.size()) == bitwise(s));
  CHECK(crc32c(crc32c(0, s.data(), 70001), s.data() + 70001, s.size() - 70001) == bitwise(s));
  CHECK(crc32c_software(0, s.data(), s.size()) == bitwise(s));
  CHECK(crc32c_software(crc32c_software(0, s.data(), 3), s.data() + 3, s.size() - 3) == bitwise(s));
  // Around the lane sizes: 3 x 1 KiB (a 4 KiB block of an extent) and 3 x 8 KiB.
  for (size_t n : {0, 1, 3071, 3072, 3073, 4096, 6144, 9216, 24575, 24576, 24576 + 3072 + 7, 24576 * 2 + 4096}) {
    std::string part = s.substr(5, n);
    INFO(n);
    CHECK(crc32c(0, part.data(), n) == bitwise(part));
    CHECK(crc32c_software(0, part.data(), n) == bitwise(part));
  }
}

TEST_CASE("write_float writes what std::to_chars writes") {
  // Every one of the 2^32 bit patterns was compared once by a one-off program (bench/RESULTS.md,
  // "Floats written in JSON"); here every float at each exponent's two ends
  // (where the rounding interval is lopsided and the layout changes), a
  // stride through all of them, and random patterns.
  uint64_t checked = 0, diff = 0;
  auto check = [&](uint32_t bits) {
    const float f = std::bit_cast<float>(bits);
    char want[64], got[kFloatTextMax];
    const auto r = std::to_chars(want, want + sizeof want, f);
    const std::string_view w(want, r.ptr - want), g(got, write_float(got, f) - got);
    checked++;
    if (w != g && diff++ < 5) {
      INFO("float bits " << bits);
      CHECK(g == w);
    }
  };
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t e = 0; e < 256; e++)
      for (uint32_t m = 0; m < 2048; m++) {
        check(sign << 31 | e << 23 | m);
        check(sign << 31 | e << 23 | (0x7FFFFF - m));
      }
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 4093) check((uint32_t)bits);
  uint64_t s = 99;
  for (int i = 0; i < 1000000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    check((uint32_t)(s >> 32));
  }
  CHECK(diff == 0);
  CHECK(checked > 3000000);
  // Each layout once, by eye.
  auto text = [](float f) {
    char b[kFloatTextMax];
    return std::string(b, write_float(b, f));
  };
  CHECK(text(0.1f) == "0.1");
  CHECK(text(-0.0f) == "-0");
  CHECK(text(100.0f) == "100");
  CHECK(text(1e10f) == "1e+10");
  CHECK(text(0.0001f) == "1e-04");  // shorter than 0.0001
  CHECK(text(0.001f) == "0.001");   // a tie goes to fixed
  CHECK(text(1.5e-5f) == "1.5e-05");
  CHECK(text(33554448.0f) == "33554448");
  CHECK(text(1.17549435e-38f) == "1.1754944e-38");
}

TEST_CASE("float_as_shortest_double: the double of the float's shortest decimal form") {
  auto by_text = [](float f) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf - 1, f);
    *r.ptr = 0;
    return strtod(buf, nullptr);
  };
  CHECK(float_as_shortest_double(0.1f) == 0.1);
  CHECK(float_as_shortest_double(-2.5f) == -2.5);
  CHECK(float_as_shortest_double(0.0f) == 0.0);
  CHECK(float_as_shortest_double(1e-30f) == 1e-30);
  CHECK(std::isinf(float_as_shortest_double(INFINITY)));
  // Every float of a few exponent ranges, and random bit patterns.
  uint64_t s = 12345, checked = 0, diff = 0;
  auto check = [&](float f) {
    if (!std::isfinite(f)) return;
    checked++;
    if (float_as_shortest_double(f) != by_text(f) && diff++ < 5) {
      INFO("float bits " << std::bit_cast<uint32_t>(f));
      CHECK(float_as_shortest_double(f) == by_text(f));
    }
  };
  for (uint32_t bits = 0x3f000000; bits < 0x3f000000 + (1u << 22); bits += 3) check(std::bit_cast<float>(bits));
  for (int i = 0; i < 2000000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    check(std::bit_cast<float>((uint32_t)(s >> 32)));
  }
  CHECK(diff == 0);
  CHECK(checked > 3000000);
}

TEST_CASE("varints of every length read the same with room after them and at the very end; cut ones fail") {
  const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 35) + 5, (1ull << 56) - 1, ~0ull};
  for (uint64_t v : values) {
    std::string enc;
    put_varint(enc, v);
    for (size_t room : {size_t(0), size_t(12)}) {  // the bounded loop at the end, the unbounded one with room
      std::string buf = enc + std::string(room, '\x7f');
      Reader r(buf);
      CHECK(r.varint() == v);
      CHECK(r.ok());
      CHECK(r.left() == room);
    }
    for (size_t n = 0; n < enc.size(); n++) {
      Reader r(enc.data(), n);
      r.varint();
      CHECK_FALSE(r.ok());
    }
  }
  // Eleven continuation bytes: longer than any 64-bit varint, with room or not.
  for (size_t room : {size_t(0), size_t(12)}) {
    std::string buf = std::string(11, '\x80') + std::string(room, '\x01');
    Reader r(buf);
    r.varint();
    CHECK_FALSE(r.ok());
  }
  // skip_varint steps where varint reads, and fails where it fails: every
  // run of 0 to 12 bytes, each with or without its continuation bit.
  for (uint32_t n = 0; n <= 12; n++) {
    for (uint32_t bits = 0; bits < (1u << n); bits++) {
      std::string buf;
      for (uint32_t i = 0; i < n; i++) buf.push_back((char)((bits >> i & 1) ? 0x81 : 0x01));
      Reader a(buf), b(buf);
      a.varint();
      b.skip_varint();
      CHECK(a.ok() == b.ok());
      CHECK(a.left() == b.left());
    }
  }
}

TEST_CASE("keys of every length up to 20 are told apart at every byte") {
  for (size_t n = 0; n <= 20; n++) {
    std::string key(n, 'k');
    for (size_t i = 0; i < n; i++) key[i] = (char)('a' + i);
    Value o = Value::object();
    std::vector<std::string> others;
    for (size_t i = 0; i < n; i++) {  // the key with one byte changed, each placed before it
      std::string other = key;
      other[i] = 'Z';
      o.append(other, Value::integer(-1 - (int64_t)i));
      others.push_back(other);
    }
    o.append(key + "x", Value::integer(-100));  // longer by one
    o.append(key, Value::integer((int64_t)n));
    REQUIRE(o.get(key) != nullptr);
    CHECK(o.get(key)->as_int() == (int64_t)n);
    for (size_t i = 0; i < n; i++) CHECK(o.get(others[i])->as_int() == -1 - (int64_t)i);
    std::string absent = key + "y";
    CHECK(o.get(absent) == nullptr);
    // member() keeps an equal key and rewrites a differing one.
    Value row = Value::object();
    row.member(0, key) = Value::integer(1);
    for (size_t i = 0; i < n; i++) {
      row.member(0, others[i]);
      CHECK(row.get(others[i]) != nullptr);
      CHECK(row.get(key) == nullptr);
      row.member(0, key);
      CHECK(row.get(key) != nullptr);
    }
  }
}

TEST_CASE("a float or a scalar written over a value of every kind, in place") {
  std::vector<Value> olds = {Value::null(), Value::boolean(true), Value::integer(-7), Value::real(2.5),
                             Value::timestamp(86400000), Value::text(std::string(100, 't')),
                             Value::bytes(std::string(40, '\x01')), Value::vector(std::vector<float>(64, 1.0f))};
  Value list = Value::list();
  list.push(Value::text(std::string(50, 'l')));
  olds.push_back(list);
  Value obj = Value::object();
  obj.set("k", Value::text(std::string(50, 'o')));
  olds.push_back(obj);
  for (const Value& old : olds) {
    for (double d : {0.0, -0.0, 1.5, -1e300, std::nan("")}) {
      Value v = old;
      v.assign_real(d);
      REQUIRE(v.kind() == Kind::Float);
      CHECK(std::signbit(v.as_float()) == std::signbit(d));
      CHECK((std::isnan(d) ? std::isnan(v.as_float()) : v.as_float() == d));
    }
    Value i = old;
    i.assign_scalar(Kind::Int, 42);
    CHECK(equal(i, Value::integer(42)));
  }
}

