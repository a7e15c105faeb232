// `kitfox import`'s reader (native/importer.h): the fast reader (simdjson
// On-Demand, vectors straight into f32) against the plain one (parse_json on
// every line or element), on inputs that probe where they could part: numbers,
// strings, nesting, white space, lines, elements, chunk and region
// boundaries, batches and the writer thread. Same documents, same counts, same
// messages; and clean input never falls back to the plain reader.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../fuzz/import_compare.h"
#include "codec.h"
#include "db.h"
#include "documents.h"
#include "importer.h"

using namespace kitfox;
using importcheck::Outcome;

namespace {

const char* kCreate =
    "create collection t (name text, n int, f float, meta json, tags [text], v vector<4>, h vector<2, f16>)";

Outcome plain(const std::string& input, uint64_t batch) {
  ImportOptions o;
  o.fast = false;
  o.writer_thread = false;
  o.batch = batch;
  return importcheck::run(input, kCreate, o, input.size());
}

// The fast reader in every chunking and region size given, with and without
// the writer thread, gives what the plain reader gives.
Outcome same_as_plain(const std::string& input, uint64_t batch = 3,
                      std::vector<size_t> chunks = {1, 2, 3, 5, 64, 1 << 20},
                      std::vector<size_t> regions = {1, 7, 100, 1 << 20}) {
  const Outcome want = plain(input, batch);
  REQUIRE(want.opened);
  CHECK(want.count == static_cast<int64_t>(want.imported));
  for (size_t chunk : chunks)
    for (size_t region : regions)
      for (bool thread : {false, true}) {
        ImportOptions o;
        o.batch = batch;
        o.region_bytes = region;
        o.writer_thread = thread;
        const Outcome got = importcheck::run(input, kCreate, o, chunk);
        if (!(got == want)) {
          INFO("input: " << input);
          INFO("chunk " << chunk << ", region " << region << ", thread " << thread);
          INFO("fast:\n" << importcheck::describe(got));
          INFO("plain:\n" << importcheck::describe(want));
          CHECK(false);
          return want;
        }
      }
  return want;
}

// The fast reader takes it all (nothing read by the plain reader).
void all_fast(const std::string& input) {
  ImportOptions o;
  o.region_bytes = 64;
  const Outcome got = importcheck::run(input, kCreate, o, 1 << 20);
  INFO("input: " << input);
  INFO(importcheck::describe(got));
  CHECK(got.ok);
  CHECK(got.read_slowly == 0);
}

std::string array_of(const std::vector<std::string>& docs, const char* sep = ",\n") {
  std::string s = "[";
  for (size_t i = 0; i < docs.size(); i++) s += (i ? sep : "") + docs[i];
  return s + "]";
}

std::string lines_of(const std::vector<std::string>& docs) {
  std::string s;
  for (const std::string& d : docs) s += d + "\n";
  return s;
}

// parse_number_array over a padded copy of `text`.
bool numbers(const std::string& text, std::vector<float>* out) {
  std::string padded = text;
  padded.append(64, '\0');
  return parse_number_array(std::string_view(padded.data(), text.size()), out);
}

// What the engine makes of parse_json's list for a vector field.
bool reference_numbers(const std::string& text, std::vector<float>* out) {
  auto v = parse_json(text);
  if (!v.is_ok() || v->kind() != Kind::List) return false;
  out->clear();
  for (const Value& e : v->items()) {
    if (!e.is_number()) return false;
    out->push_back(static_cast<float>(e.as_number()));
  }
  return true;
}

// 16 numbers in the forms JSON writers print (integers, unsigned ones past
// int64 at times, doubles of every magnitude each way printf prints them),
// as a JSON array with white space here and there.
std::string random_numbers(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(-1, 1);
  static const char* const forms[] = {"%.17g", "%.9g", "%g", "%.3f", "%e", "%.0f", "%.12e", "%.16g"};
  std::string t = "[";
  for (int i = 0; i < 16; i++) {
    char buf[64];
    const double mag = std::pow(10.0, static_cast<int>(rng() % 80) - 40);
    switch (rng() % 3) {
      case 0: snprintf(buf, sizeof buf, "%lld", static_cast<long long>(rng() % 2000000) - 1000000); break;
      case 1: snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(rng() >> (rng() % 64))); break;
      default: snprintf(buf, sizeof buf, forms[rng() % 8], unit(rng) * mag); break;
    }
    t += (i ? (rng() % 4 ? "," : " ,\n ") : "") + std::string(buf);
  }
  return t + "]";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("import: parse_number_array reads numbers as parse_json and the engine do") {
  const char* fast[] = {
      "[]", "[ ]", "[0]", "[-0]", "[-0.0]", "[0.0]", "[1, 2, 3]", "[ 1 ,\n2\t,\r3 ]", "[255,0,13,73]",
      "[1.5, -2.25, 3e2, 4E-2, 5e+3]", "[0.1, 0.2, 0.30000000000000004]", "[9007199254740993]",
      "[9223372036854775807]", "[-9223372036854775808]", "[123456789012345678]", "[1e22, 1e-22, 1e23, 1e-23]",
      "[3.4028235e38, 3.5e38, 1e39, -1e39]", "[1.00000000000000000000000000001]", "[0.000000000000000000000000123]",
      "[1e308, 2.2250738585072014e-308]", "[123456789012345678901234567890.5]", "[16777217, 16777219]",
      "[0.1e1, 10e-1, 1.0e0]", "[12345678901234567890e-10]",
  };
  for (const char* t : fast) {
    std::vector<float> got, want;
    INFO(t);
    REQUIRE(reference_numbers(t, &want));
    CHECK(numbers(t, &got));
    CHECK(same_bits(got, want));
  }
  // Not arrays of numbers, malformed, or beyond int64: the general path.
  const char* general[] = {
      "", "[", "[1", "[1,]", "[,1]", "[01]", "[1.]", "[.5]", "[-]", "[+1]", "[1e]", "[1e+]", "[1 2]", "[1,,2]",
      "[\"1\"]", "[null]", "[true]", "[[1]]", "[{}]", "[NaN]", "[Infinity]", "[0x10]", "[9223372036854775808]",
      "[-9223372036854775809]", "[18446744073709551616]", "[1e400]", "[1] x", "[1]]", "{}", "[1,2,3",
  };
  for (const char* t : general) {
    std::vector<float> got;
    INFO(t);
    CHECK_FALSE(numbers(t, &got));
  }
  // Random numbers in every form JSON writers produce: the same floats, bit for bit.
  std::mt19937_64 rng(15);
  for (int round = 0; round < 2000; round++) {
    const std::string t = random_numbers(rng);
    std::vector<float> got, want;
    INFO(t);
    const bool ref = reference_numbers(t, &want);
    if (numbers(t, &got)) {
      REQUIRE(ref);
      CHECK(same_bits(got, want));
    } else {
      // Only integers beyond int64 (parse_json refuses them) may fall back.
      CHECK((!ref || t.find_first_of(".eE") == std::string::npos));
    }
  }
}

TEST_CASE("import: encode_number_list writes the encoding of parse_json's list, or declines") {
  // The encoding of parse_json's value, and of encode_number_list's read
  // over a padded copy (with the text's length checked).
  auto want = [](const std::string& t, std::string* out) {
    auto v = parse_json(t);
    if (!v.is_ok()) return false;
    out->clear();
    encode_item(*out, *v, false);
    return true;
  };
  auto got = [](const std::string& t, std::string* out) {
    std::string padded = t;
    padded.append(64, '\0');
    out->clear();
    const char* end = encode_number_list(padded.data(), out);
    if (end) CHECK(end == padded.data() + t.find_last_of(']') + 1);
    return end != nullptr;
  };
  std::vector<std::string> fast = {
      "[]", "[ ]", "[0]", "[-0]", "[-0.0]", "[1, 2, 3]", "[ 1 ,\n2\t,\r3 ]", "[1.5, -2.25, 3e2, 4E-2, 5e+3]",
      "[9007199254740993]", "[9223372036854775807]", "[-9223372036854775808]", "[1e22, 1e-22, 1e23]",
      "[1e308, 2.2250738585072014e-308]", "[123456789012345678901234567890.5]", "[12345678901234567890e-10]",
      "[0.1, 0.2, 0.30000000000000004]", "[63, 64, -64, -65, 8191, 8192, 1000000]",
  };
  std::string many = "[";  // a count of more than one byte
  for (int i = 0; i < 300; i++) many += (i ? "," : "") + std::to_string(i * 37 - 5000) + (i % 3 ? ".25" : "");
  fast.push_back(many + "]");
  for (const std::string& t : fast) {
    std::string a, b;
    INFO(t);
    REQUIRE(want(t, &b));
    CHECK(got(t, &a));
    CHECK(a == b);
  }
  for (const char* t : {"", "[", "[1", "[1,]", "[,1]", "[01]", "[1.]", "[-]", "[+1]", "[1e]", "[1 2]", "[\"1\"]",
                        "[1, null]", "[1, [2]]", "[1, {}]", "[NaN]", "[9223372036854775808]", "[-9223372036854775809]",
                        "[1e400]", "[1,2,3", "{}"}) {
    std::string a;
    INFO(t);
    CHECK_FALSE(got(t, &a));
  }
  // Random numbers in every form JSON writers produce: the same bytes.
  std::mt19937_64 rng(16);
  for (int round = 0; round < 2000; round++) {
    const std::string t = random_numbers(rng);
    std::string a, b;
    INFO(t);
    const bool ref = want(t, &b);
    if (got(t, &a)) {
      REQUIRE(ref);
      CHECK(a == b);
    } else {
      CHECK(!ref);  // only what parse_json refuses (an integer beyond int64)
    }
  }
}

TEST_CASE("import: doubles as JSON writers print them (17 digits) read exactly") {
  // Embeddings sent as JSON: every double printed in full (%.17g and
  // %.16g, as JavaScript prints them), and decimals halfway between two
  // doubles.
  std::mt19937_64 rng(128);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int round = 0; round < 400; round++) {
    std::string t = "[";
    for (int i = 0; i < 128; i++) {
      char buf[64];
      double v = unit(rng) * std::pow(10.0, static_cast<int>(rng() % 12) - 6);
      if (rng() % 8 == 0) {
        // Halfway between two doubles (as a decimal with enough digits).
        double a = std::fabs(v), b = std::nextafter(a, 2.0);
        snprintf(buf, sizeof buf, "%.19g", a + (b - a) / 2);
      } else {
        snprintf(buf, sizeof buf, rng() % 2 ? "%.17g" : "%.16g", v);
      }
      t += (i ? "," : "") + std::string(buf);
    }
    t += "]";
    std::vector<float> got, want;
    INFO(t);
    REQUIRE(reference_numbers(t, &want));
    CHECK(numbers(t, &got));
    CHECK(same_bits(got, want));
  }
}

TEST_CASE("import: long arrays of small integers, with an odd number anywhere") {
  // The reader takes runs of plain integers 64 bytes at a time: every kind of
  // number that breaks the run, at every place in a window, must come out as
  // the one-at-a-time reading does (or fall back where parse_json refuses).
  std::mt19937_64 rng(784);
  const char* odd[] = {"-7", "0", "00", "012", "12345678", "123456789", "1234567890123", "0.5", "1e3", "-0",
                       " 5", "5 ", "\n6", "x", ",", "", "9223372036854775807", "9223372036854775808"};
  for (int round = 0; round < 3000; round++) {
    std::vector<std::string> nums;
    const int n = 1 + static_cast<int>(rng() % 200);
    const uint64_t mag = uint64_t{1} << (rng() % 28);
    for (int i = 0; i < n; i++) nums.push_back(std::to_string(rng() % mag));
    if (round % 3) nums[rng() % n] = odd[rng() % (sizeof odd / sizeof *odd)];
    std::string t = "[";
    for (int i = 0; i < n; i++) t += (i ? "," : "") + nums[i];
    t += "]";
    std::vector<float> got, want;
    INFO(t);
    const bool ref = reference_numbers(t, &want);
    const bool fast = numbers(t, &got);
    if (fast) {
      REQUIRE(ref);
      CHECK(same_bits(got, want));
    } else {
      CHECK((!ref || t.find("9223372036854775808") != std::string::npos));
    }
    if (ref && t.find("9223372036854775808") == std::string::npos) CHECK(fast);
  }
}

TEST_CASE("import: clean NDJSON and arrays are read by the fast reader alone") {
  const std::vector<std::string> docs = {
      R"({"name": "a", "n": 1, "v": [1, 2, 3, 4]})",
      R"({"name": "é \u00e9 \ud83d\ude00 \" \\ \/ \b\f\n\r\t", "f": -0.0, "n": -0})",
      R"({"meta": {"a": [1, {"b": null}], "c": true, "d": false, "e": 1.5e3}, "tags": ["x", "y"]})",
      R"({"v": [0.5, -1e-3, 3, 4.25], "h": [1, -2]})",
      R"({"v": null, "meta": "text", "n": 9223372036854775807})",
      R"({})",
  };
  all_fast(lines_of(docs));
  all_fast("\xEF\xBB\xBF\n\n" + lines_of(docs) + "\n\n");
  all_fast(array_of(docs));
  all_fast("  \n[" + docs[0] + "]\n ");
  all_fast(array_of(docs, ","));
  all_fast("[]");
  same_as_plain(lines_of(docs));
  same_as_plain(array_of(docs));
  same_as_plain(array_of(docs, " ,  "));
}

TEST_CASE("import: documents encoded straight from JSON: wide objects, long lists, keys given twice, deep nesting") {
  // The fast reader writes each document's value encoding with no Value
  // built (DocumentReader::encode): its counts past one byte, nulls inside
  // lists and objects, and a key given twice (which it leaves to the plain
  // reader: parse_json keeps the last value at the first place).
  std::string wide = R"({"meta": {)", list = R"({"tags": [)", deep = R"({"meta": )";
  for (int i = 0; i < 300; i++) wide += (i ? ", " : "") + std::string("\"k") + std::to_string(i) + "\": " + std::to_string(i);
  wide += "}}";
  for (int i = 0; i < 200; i++) list += (i ? ", " : "") + std::string("\"t") + std::to_string(i) + "\"";
  list += "]}";
  for (int i = 0; i < 62; i++) deep += "[";
  deep += "1";
  for (int i = 0; i < 62; i++) deep += "]";
  deep += "}";
  const std::vector<std::string> docs = {
      wide, list, deep,
      R"({"meta": [null, {"a": null}, [null]], "name": null, "n": 3})",
      R"({"meta": {"k": {"x": 1}, "k2": [{}, [], {"y": [1.5, -2, "z"]}]}})",
  };
  all_fast(lines_of(docs));
  all_fast(array_of(docs));
  same_as_plain(lines_of(docs), 2, {1 << 20}, {1 << 20});
  same_as_plain(array_of(docs), 2, {1 << 20}, {1 << 20});
  // A key given twice: the same documents as the plain reader's.
  const std::vector<std::string> twice = {
      R"({"n": 1, "name": "a", "n": 2})",
      R"({"meta": {"a": 1, "b": 2, "a": 3}, "n": 4})",
      R"({"name": "b", "n": 5})",
  };
  const Outcome got = same_as_plain(lines_of(twice), 2, {1, 64, 1 << 20}, {1, 1 << 20});
  CHECK(got.documents ==
        "{\"id\":1,\"name\":\"a\",\"n\":2}\n{\"id\":2,\"n\":4,\"meta\":{\"a\":3,\"b\":2}}\n{\"id\":3,\"name\":\"b\",\"n\":5}\n");
  same_as_plain(array_of(twice), 2, {1, 64, 1 << 20}, {1, 1 << 20});
}

TEST_CASE("import: what the fast reader leaves to the plain one comes out the same" * doctest::test_suite("heavy")) {
  const std::vector<std::string> cases = {
      // Numbers parse_json refuses, or reads as it does.
      "{\"n\": 9223372036854775808}\n",
      "{\"n\": 1}\n{\"meta\": -9223372036854775809}\n{\"n\": 2}\n",
      "{\"meta\": 18446744073709551616}\n",
      "{\"meta\": [1e400]}\n",
      "{\"meta\": [2.5e-400, -0, -0.0, 1E2, 0.1]}\n",
      "{\"meta\": 01}\n",
      "{\"v\": [1, 2, 3, 1e400]}\n",
      "{\"v\": [1, 2, 3, 9223372036854775808]}\n",
      "{\"v\": [1, 2, 3, 01]}\n{\"v\": [1, 2, 3, 4]}\n",
      "{\"v\": [1, 2, 3, \"4\"]}\n",
      "{\"v\": [1, 2, 3]}\n",
      "{\"v\": [1, 2, 3, 4, 5]}\n",
      "{\"v\": [1, 2, 3, [4]]}\n",
      "{\"v\": [1e39, 2, 3, 4]}\n",
      "{\"h\": [70000, 1]}\n",
      "{\"v\": {\"x\": 1}}\n",
      "{\"v\": []}\n",
      "{\"v\": [1, 2, 3, 4], \"v\": [5, 6, 7, 8]}\n",
      // Strings: escapes, invalid UTF-8, control characters, surrogates.
      "{\"name\": \"\xff\"}\n",
      "{\"name\": \"a\xc3\"}\n{\"name\": \"b\"}\n",
      "{\"name\": \"\\ud800\"}\n",
      "{\"name\": \"\\x\"}\n",
      "{\"name\": \"a\tb\"}\n",
      "{\"na\xe9me\": 1}\n",
      "{\"name\": \"\\u0000\"}\n",
      // Objects and nesting.
      "{\"n\": 1, \"n\": 2}\n",
      "{\"meta\": {\"a\": 1, \"a\": {\"b\": 2}}}\n",
      "{\"meta\": " + std::string(64, '[') + std::string(64, ']') + "}\n",
      "{\"meta\": " + std::string(65, '[') + std::string(65, ']') + "}\n",
      "{\"meta\": " + std::string(70, '[') + "}\n",
      "{\"n\": 1,}\n", "{\"n\" 1}\n", "{\"n\": 1 \"f\": 2}\n", "{n: 1}\n", "{\"n\": tru}\n", "{\"n\": nul}\n",
      "{\"meta\": truex}\n", "{\"meta\": [1 2]}\n", "{\"meta\": [1,]}\n",
      // Lines: not objects, two on a line, one over two lines, odd white space.
      "[1, 2]\n{\"n\": 1}\n",
      "1\n", "\"text\"\n", "null\n", "{\"n\": 1} {\"n\": 2}\n", "{\"n\": 1}{\"n\": 2}\n", "{\"n\": 1}}\n",
      "{\"n\":\n1}\n", "{\"n\": 1}\n{\"n\":\n", "{\"n\": 1}\r\n\r\n{\"n\": 2}\r\n", "\f{\"n\": 1}\v\n{\"n\": 2}\n",
      "{\"n\": 1}\n\f\n{\"n\": 2}\n", "{\"n\": 1}\n{\"n\": 2", "{\"n\": 1}\n{\"n\": 2}\n{\"n\": \"x\"}\n{\"n\": 3}\n",
      "{\"name\": \"unclosed}\n{\"n\": 1}\n", "\xEF\xBB\xBF", "\xEF\xBB", "\xEF\xBB\xBF{\"n\": 1}", " \xEF\xBB\xBF{\"n\": 1}",
      "", "\n\n\n", "  \t\r\n", "{", "}", "]",
      // Arrays.
      "[", "[]", "[] ", "[]x", "[] []", "[,]", "[,{\"n\": 1}]", "[{\"n\": 1},]", "[{\"n\": 1},,{\"n\": 2}]",
      "[{\"n\": 1}", "[{\"n\": 1},", "[{\"n\": 1} {\"n\": 2}]", "[{\"n\": 1}]]", "[{\"n\": 1}] x",
      "[{\"n\": 1}, 2, {\"n\": 3}]", "[{\"n\": 1}, [2], {\"n\": 3}]", "[{\"n\": \"a,]\\\"\"}, {\"n\": 2}]",
      "[{\"name\": \"a,]\\\"\"}, {\"n\": 2}]", "[{\"meta\": \"}\"}, {\"meta\": \"{\"}]", "[ {\"n\": 1} }, {\"n\": 2}]",
      "[{\"n\": 1},\n\f{\"n\": 2}]", "[{\"v\": [1, 2, 3, x]}]", "[{\"n\": 1}, {\"name\": \"\xff\"}]",
      "[{\"n\": 1}, {\"n\": 9223372036854775808}]", "[{\"n\":\n1},\n{\"n\":\n2}]", "[(, {\"n\": 1}]",
      "[{\"n\": 1}, {\"n\": \"x\"}, {\"n\": 3}, {\"n\": 4}]",
  };
  for (const std::string& c : cases) {
    INFO(c);
    same_as_plain(c, 2, {1, 3, 1 << 20}, {1, 16, 1 << 20});
  }
}

TEST_CASE("import: errors name the line, the byte and the batch") {
  // A bad number inside a vector: its line, after the documents before it are written.
  std::string in = "{\"v\": [1, 2, 3, 4]}\n\n{\"v\": [5, 6, 7, 8]}\n{\"v\": [1, 2, 3x, 4]}\n{\"v\": [1, 2, 3, 4]}\n";
  Outcome o = same_as_plain(in, 1000);
  CHECK_FALSE(o.ok);
  CHECK(o.imported == 2);
  CHECK(o.messages.find("line 4 of input: json error: malformed JSON") != std::string::npos);
  // In an array: the element, its byte offset and line.
  in = "[{\"v\": [1, 2, 3, 4]},\n {\"v\": [1, 2, 3x, 4]}]";
  o = same_as_plain(in, 1000);
  CHECK_FALSE(o.ok);
  CHECK(o.imported == 1);
  CHECK(o.messages.find("input, byte 23 (line 2): array element 2: json error: malformed JSON") != std::string::npos);
  // A document the engine refuses: its batch, by documents and lines.
  in = "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n{\"n\": \"x\"}\n{\"n\": 5}\n";
  o = same_as_plain(in, 2);
  CHECK_FALSE(o.ok);
  CHECK(o.imported == 2);
  CHECK(o.messages.find("the failing batch held documents 3 to 4 of the input (lines 3 to 4 of input)") !=
        std::string::npos);
  // The engine's "document N" is the input's number, not the batch's.
  CHECK(o.messages.find("document 4: ") != std::string::npos);
  CHECK(o.messages.find("document 2: ") == std::string::npos);
  // A vector of the wrong dimension: the engine's own message.
  o = same_as_plain("{\"v\": [1, 2, 3]}\n", 10);
  CHECK(o.messages.find("vector 'v' has 3 dimensions, expected 4") != std::string::npos);
  o = same_as_plain("{\"v\": [1, 2, 3, \"x\"]}\n", 10);
  CHECK(o.messages.find("expected numbers in vector") != std::string::npos);
}

TEST_CASE("import: a batch is cut by its bytes too") {
  // Ten documents of about 60 bytes each, batches of at most 1,000 of them
  // or 150 bytes: three documents a batch. The engine refuses the eighth,
  // whose batch is the seventh to ninth.
  std::string in;
  for (int i = 1; i <= 10; i++) in += "{\"name\": \"" + std::string(50, 'a') + "\", \"n\": " + (i == 8 ? std::string("\"x\"") : "1") + "}\n";
  for (bool thread : {false, true}) {
    ImportOptions o;
    o.batch = 1000;
    o.batch_bytes = 150;
    o.writer_thread = thread;
    const Outcome got = importcheck::run(in, kCreate, o, in.size());
    CHECK_FALSE(got.ok);
    CHECK(got.imported == 6);
    CHECK(got.count == 6);
    CHECK(got.messages.find("the failing batch held documents 7 to 9 of the input") != std::string::npos);
  }
}

TEST_CASE("import: documents cut across chunks and regions, and bigger than a region") {
  std::mt19937_64 rng(7);
  std::vector<std::string> docs;
  for (int i = 0; i < 40; i++) {
    std::string d = "{\"n\": " + std::to_string(i) + ", \"v\": [";
    for (int j = 0; j < 4; j++) d += (j ? ", " : "") + std::to_string(static_cast<int>(rng() % 512) - 256);
    d += "], \"name\": \"" + std::string(rng() % 300, 'a' + static_cast<char>(i % 26)) + "\"}";
    docs.push_back(d);
  }
  const std::string nd = lines_of(docs), arr = array_of(docs);
  for (const std::string* in : {&nd, &arr}) {
    const Outcome o = same_as_plain(*in, 7, {1, 13, 4096}, {1, 64, 1000, 1 << 20});
    CHECK(o.ok);
    CHECK(o.imported == 40);
    all_fast(*in);
  }
}

TEST_CASE("import: a byte order mark anywhere but the input's first bytes is the plain reader's error") {
  // simdjson steps over one that starts its buffer (a region or an array's
  // elements); the fast reader leaves such a region to the plain one.
  const Outcome lines = same_as_plain("\t\t\t\xEF\xBB\xBF \n {}}}\t\\\": #}", 1, {1, 10, 1 << 20}, {1, 512, 1 << 20});
  CHECK(!lines.ok);
  CHECK(lines.imported == 0);
  CHECK(lines.messages.find("line 1") != std::string::npos);
  same_as_plain("\t\t\xEF\xBB\xBF \n {\"n\": 1}\n");
  same_as_plain("{\"n\": 1}\n\xEF\xBB\xBF{\"n\": 2}\n");
  same_as_plain("[{\"n\": 1}, \xEF\xBB\xBF{\"n\": 2}]");
  same_as_plain(" \xEF\xBB\xBF[{\"n\": 1}]");
}

TEST_CASE("import: the collection may be made after the importer, before its first batch is written") {
  auto fs = make_memory_file_system();
  OpenOptions oo;
  oo.sync = SyncMode::Off;
  auto opened = Database::open(*fs, "late.kfdb", oo);
  REQUIRE(opened.is_ok());
  auto& db = *opened;
  for (bool thread : {false, true}) {
    ImportOptions o;
    o.writer_thread = thread;
    o.progress = false;
    std::string said;
    o.report = importcheck::collect;
    o.report_ctx = &said;
    const std::string name = thread ? "late_b" : "late_a";
    {
      Importer imp(*db, name, "input", o);
      REQUIRE(db->query("create collection " + name + " (n int)").is_ok());
      CHECK(imp.feed("{\"n\": 1}\n{\"n\": 2}\n"));
      CHECK(imp.finish());
      CHECK(imp.imported() == 2);
    }
    INFO(said);
    CHECK(db->query("get " + name + " count")->rows[0].get("count")->as_int() == 2);
  }
  // And one that never comes: the batch fails with the statement's error.
  ImportOptions o;
  o.progress = false;
  std::string said;
  o.report = importcheck::collect;
  o.report_ctx = &said;
  {
    Importer imp(*db, "nowhere", "input", o);
    imp.feed("{\"n\": 1}\n");
    CHECK_FALSE(imp.finish());
  }
  INFO(said);
  CHECK(said.find("collection 'nowhere' does not exist") != std::string::npos);
  db->close();
}
