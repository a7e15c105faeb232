// JSON in (simdjson) and out (shortest round-trip floats).
#include <charconv>
#include <cmath>
#include <cstring>

#include "db.h"
#include "engine_limits.h"
#include "float_text.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "simdjson.h"

namespace kitfox {

namespace {

const char kHex[] = "0123456789abcdef";
const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void append_string(std::string& out, std::string_view s) {
  out += '"';
  size_t start = 0;
  for (size_t i = 0; i < s.size(); i++) {
    unsigned char c = s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + start, i - start);
    start = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
  }
  out.append(s.data() + start, s.size() - start);
  out += '"';
}

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string_view s(buf, r.ptr - buf);
  out += s;
  // Keep floats recognisable as floats: 1.0 rather than 1.
  if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t)in[i] << 16 | (uint8_t)in[i + 1] << 8 | (uint8_t)in[i + 2];
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = (uint8_t)in[i] << 16 | (i + 1 < in.size() ? (uint8_t)in[i + 1] << 8 : 0);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool base64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+' || ch == '-') v = 62;
    else if (ch == '/' || ch == '_') v = 63;
    else if (ch == '=') { pad++; continue; }
    else return false;
    if (pad) return false;
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xFF));
    }
  }
  // Six bits left over: one character past the last whole byte, which no
  // encoding ends with ("t", "dAAAt").
  return pad <= 2 && bits < 6;
}

void append_json(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, v.as_int());
      out.append(buf, r.ptr - buf);
      return;
    }
    case Kind::Float: append_double(out, v.as_float()); return;
    case Kind::Text: append_string(out, v.as_string()); return;
    case Kind::Bytes: append_string(out, base64_encode(v.as_string())); return;
    case Kind::Timestamp: append_string(out, format_timestamp(v.as_int())); return;
    case Kind::List:
      out += '[';
      for (size_t i = 0; i < v.items().size(); i++) {
        if (i) out += ',';
        append_json(out, v.items()[i]);
      }
      out += ']';
      return;
    case Kind::Object:
      out += '{';
      for (size_t i = 0; i < v.items().size(); i++) {
        if (i) out += ',';
        append_string(out, v.keys()[i]);
        out += ':';
        append_json(out, v.items()[i]);
      }
      out += '}';
      return;
    case Kind::Vector: {
      // Written straight into the string's room for the longest text, then
      // cut to what was written: no copy per number.
      const size_t start = out.size(), n = v.vec().size();
      out.resize(start + 2 + n * (kFloatTextMax + 1));
      char* p = out.data() + start;
      *p++ = '[';
      for (size_t i = 0; i < n; i++) {
        if (i) *p++ = ',';
        p = write_float(p, v.vec()[i]);
      }
      *p++ = ']';
      out.resize(p - out.data());
      return;
    }
  }
}

std::string to_json(const Value& v) {
  std::string s;
  append_json(s, v);
  return s;
}

namespace {

// Finds where JSON text goes wrong, to name the offset in the error: simdjson
// says what is wrong but not where. Runs only after a parse failed.
struct ErrorLocator {
  std::string_view s;
  size_t p = 0;
  int depth = 0;
  bool int64_only = false;  // an integer past int64 stops it (else only one past 64 bits)
  void ws() { while (p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) p++; }
  bool lit(const char* w) {
    size_t n = strlen(w);
    if (s.substr(p, n) != w) return false;
    p += n;
    return true;
  }
  bool str() {
    if (p >= s.size() || s[p] != '"') return false;
    size_t start = ++p;
    while (p < s.size() && s[p] != '"') {
      if ((unsigned char)s[p] < 0x20) return false;
      if (s[p] == '\\') {
        if (!escape()) return false;  // p at the backslash
        continue;
      }
      p++;
    }
    if (p >= s.size()) return false;
    if (!valid_utf8(s.substr(start, p - start))) { p = start; return false; }
    p++;
    return true;
  }
  // Four hex digits at `at`, their value in *v.
  bool hex4(size_t at, unsigned* v) const {
    if (at + 4 > s.size()) return false;
    *v = 0;
    for (size_t i = at; i < at + 4; i++) {
      const char c = s[i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + (unsigned)d;
    }
    return true;
  }
  // An escape at p (a backslash): one of \" \\ / b f n r t, or \u with
  // four hex digits, a high surrogate followed by a low one.
  bool escape() {
    if (p + 1 >= s.size()) return false;
    const char e = s[p + 1];
    if (e != 'u') {
      if (e == '\0' || !strchr("\"\\/bfnrt", e)) return false;
      p += 2;
      return true;
    }
    unsigned cp;
    if (!hex4(p + 2, &cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      unsigned low;
      if (p + 7 >= s.size() || s[p + 6] != '\\' || s[p + 7] != 'u' || !hex4(p + 8, &low) || low < 0xDC00 || low > 0xDFFF)
        return false;
      p += 12;
      return true;
    }
    p += 6;
    return true;
  }
  // A number as JSON writes one, in range: otherwise p stays at its start.
  bool num() {
    const size_t start = p, n = s.size();
    auto digits = [&] {
      const size_t from = p;
      while (p < n && s[p] >= '0' && s[p] <= '9') p++;
      return p > from;
    };
    auto fail = [&] { p = start; return false; };
    if (p < n && s[p] == '-') p++;
    if (p < n && s[p] == '0') p++;
    else if (!digits()) return fail();
    bool integer = true;
    if (p < n && s[p] == '.') {
      integer = false;
      p++;
      if (!digits()) return fail();
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
      integer = false;
      p++;
      if (p < n && (s[p] == '+' || s[p] == '-')) p++;
      if (!digits()) return fail();
    }
    const std::string text(s.substr(start, p - start));
    if (integer) {  // past 64 bits: out of range (past int64 too, when looking for the one convert() refused)
      int64_t i;
      uint64_t u;
      const char* b = text.data();
      const char* e = b + text.size();
      if (std::from_chars(b, e, i).ec != std::errc() && (int64_only || std::from_chars(b, e, u).ec != std::errc())) return fail();
    } else if (!std::isfinite(std::strtod(text.c_str(), nullptr))) {
      return fail();
    }
    return true;
  }
  bool value() {
    ws();
    if (p >= s.size()) return false;
    char c = s[p];
    if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) return false;
      char close = c == '{' ? '}' : ']';
      p++;
      ws();
      if (p < s.size() && s[p] == close) { p++; depth--; return true; }
      for (;;) {
        if (c == '{') {
          ws();
          if (!str()) return false;
          ws();
          if (p >= s.size() || s[p] != ':') return false;
          p++;
        }
        if (!value()) return false;
        ws();
        if (p < s.size() && s[p] == ',') { p++; continue; }
        if (p < s.size() && s[p] == close) { p++; depth--; return true; }
        return false;
      }
    }
    if (c == '"') return str();
    if (c == 't') return lit("true");
    if (c == 'f') return lit("false");
    if (c == 'n') return lit("null");
    return num();
  }
  size_t locate() {
    if (value()) {
      ws();
      if (p == s.size()) return std::string::npos;
    }
    return p;
  }
};

// simdjson's error, in words (its own names them by its internals:
// "TAPE_ERROR: The JSON document has an improper structure").
const char* error_words(simdjson::error_code err) {
  using namespace simdjson;
  switch (err) {
    case TAPE_ERROR: return "a bracket, brace, comma, colon or quote missing or out of place (or more after the value)";
    case INCOMPLETE_ARRAY_OR_OBJECT: return "an array or object left open";
    case NUMBER_ERROR: return "a number malformed or out of range (integers are 64-bit, other numbers doubles)";
    case BIGINT_ERROR:
    case NUMBER_OUT_OF_RANGE: return "a number out of range (integers are 64-bit, other numbers doubles)";
    case STRING_ERROR: return "a malformed string (a bad escape)";
    case UNCLOSED_STRING: return "a string with no closing quote";
    case UNESCAPED_CHARS: return "a control character in a string (it must be escaped)";
    case UTF8_ERROR: return "text that is not valid UTF-8";
    case T_ATOM_ERROR: return "a word that is not true";
    case F_ATOM_ERROR: return "a word that is not false";
    case N_ATOM_ERROR: return "a word that is not null";
    case EMPTY: return "no JSON value";
    case TRAILING_CONTENT: return "more after the JSON value";
    default: return error_message(err);
  }
}

// " at byte N": where the locator stops in `text` (read from `root_depth`).
std::string at_byte(std::string_view text, int root_depth, bool int64_only = false) {
  ErrorLocator loc{text};
  loc.depth = root_depth;
  loc.int64_only = int64_only;
  const size_t at = loc.locate();
  return at == std::string::npos ? std::string() : " at byte " + std::to_string(at);
}

Status json_error(std::string_view text, const char* what, int root_depth) {
  return Status(Code::Json, std::string("malformed JSON: ") + what + at_byte(text, root_depth), -1);
}

Status too_deep(std::string_view text, int root_depth) {
  return Status(Code::Limit, "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels" + at_byte(text, root_depth));
}

Status convert(simdjson::dom::element e, Value* out, int depth, std::string_view text, int root_depth) {
  using namespace simdjson;
  if (depth > kMaxDepth) return too_deep(text, root_depth);
  switch (e.type()) {
    case dom::element_type::ARRAY: {
      *out = Value::list();
      dom::array arr;
      if (e.get_array().get(arr)) return Status(Code::Json, "malformed JSON array");
      for (dom::element c : arr) {
        Value v;
        KF_TRY(convert(c, &v, depth + 1, text, root_depth));
        out->push(std::move(v));
      }
      return Status::ok();
    }
    case dom::element_type::OBJECT: {
      *out = Value::object();
      dom::object obj;
      if (e.get_object().get(obj)) return Status(Code::Json, "malformed JSON object");
      for (dom::key_value_pair kv : obj) {
        Value v;
        KF_TRY(convert(kv.value, &v, depth + 1, text, root_depth));
        out->set(kv.key, std::move(v));
      }
      return Status::ok();
    }
    case dom::element_type::INT64: *out = Value::integer(e.get_int64().value_unsafe()); return Status::ok();
    case dom::element_type::UINT64:
      return Status(Code::Limit, "JSON integer " + std::to_string(e.get_uint64().value_unsafe()) + " is out of range (int64)" +
                                     at_byte(text, root_depth, true));
    case dom::element_type::DOUBLE: *out = Value::real(e.get_double().value_unsafe()); return Status::ok();
    case dom::element_type::STRING: *out = Value::text(std::string(e.get_string().value_unsafe())); return Status::ok();
    case dom::element_type::BOOL: *out = Value::boolean(e.get_bool().value_unsafe()); return Status::ok();
    case dom::element_type::NULL_VALUE: *out = Value(); return Status::ok();
  }
  return Status::ok();
}

}  // namespace

Result<Value> parse_json(std::string_view text, int root_depth) {
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (err) {
    if (err == simdjson::DEPTH_ERROR) return too_deep(text, root_depth);
    return json_error(text, error_words(err), root_depth);
  }
  Value v;
  KF_TRY(convert(root, &v, root_depth, text, root_depth));
  return v;
}

}  // namespace kitfox

#pragma GCC diagnostic pop
