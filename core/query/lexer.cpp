#include "lexer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "../engine_limits.h"
#include "../value.h"

namespace kitfox {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::End: return "end of statement";
    case Tok::Ident: return "a name";
    case Tok::Int: return "an integer";
    case Tok::Float: return "a number";
    case Tok::String: return "a string";
    case Tok::Param: return "a parameter";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Dot: return "'.'";
    case Tok::Semicolon: return "';'";
    case Tok::Eq: return "'='";
    case Tok::Ne: return "'!='";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::Tilde: return "'~'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::At: return "'@'";
  }
  return "?";
}

static void put_utf8(std::string& o, uint32_t cp) {
  if (cp < 0x80) o += (char)cp;
  else if (cp < 0x800) { o += (char)(0xC0 | cp >> 6); o += (char)(0x80 | (cp & 63)); }
  else if (cp < 0x10000) { o += (char)(0xE0 | cp >> 12); o += (char)(0x80 | (cp >> 6 & 63)); o += (char)(0x80 | (cp & 63)); }
  else { o += (char)(0xF0 | cp >> 18); o += (char)(0x80 | (cp >> 12 & 63)); o += (char)(0x80 | (cp >> 6 & 63)); o += (char)(0x80 | (cp & 63)); }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool hex4(std::string_view s, size_t p, uint32_t* v) {
  if (p + 4 > s.size()) return false;
  *v = 0;
  for (int k = 0; k < 4; k++) {
    int h = hexval(s[p + k]);
    if (h < 0) return false;
    *v = *v << 4 | h;
  }
  return true;
}

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }


// Past spaces and comments (-- to the end of the line) from p.
void skip_space(std::string_view s, size_t& p) {
  while (p < s.size()) {
    const char c = s[p];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      p++;
    } else if (c == '-' && p + 1 < s.size() && s[p + 1] == '-') {
      while (p < s.size() && s[p] != '\n') p++;
    } else {
      break;
    }
  }
}

}  // namespace

// A number as an error names it: whole up to 40 digits, else its first 20
// and how many there are.
static std::string shown_number(std::string_view text) {
  if (text.size() <= 40) return std::string(text);
  return std::string(text.substr(0, 20)) + "... (" + std::to_string(text.size()) + " characters)";
}

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes || !is_name_start(s[0])) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

std::string_view first_word(std::string_view s) {
  size_t p = 0;
  skip_space(s, p);
  const size_t start = p;
  if (p < s.size() && is_name_start(s[p]))
    while (p < s.size() && is_name_char(s[p])) p++;
  return s.substr(start, p - start);
}

Status tokenize(std::string_view s, std::vector<Token>* out, std::vector<std::string>* decoded) {
  out->clear();
  decoded->clear();
  out->reserve(s.size() / 4 + 8);  // a bulk put is about one token per 4 bytes: no regrowth
  if (!valid_utf8(s)) {
    // Where: the first byte that starts no whole UTF-8 sequence.
    size_t at = 0;
    for (uint32_t cp; at < s.size();) {
      const size_t n = utf8_decode(s, at, &cp);
      if (cp == 0xFFFD && n == 1) break;
      at += n;
    }
    return Status(Code::Syntax, "statement text is not valid UTF-8", at);
  }
  size_t p = 0;
  // Each token is made in its place in *out (reserved above).
  auto single = [&](Tok k, size_t n) {
    Token& t = out->emplace_back();
    t.kind = k;
    t.pos = p;
    t.text = s.substr(p, n);
    p += n;
  };
  while (p < s.size()) {
    const char c = s[p];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '-') {
      const size_t at = p;
      skip_space(s, p);  // spaces and comments ('-' alone is a token below)
      if (p != at) continue;
    }
    size_t start = p;
    if (is_name_start(c)) {
      while (p < s.size() && is_name_char(s[p])) p++;
      Token& t = out->emplace_back();
      t.kind = Tok::Ident;
      t.pos = start;
      t.text = s.substr(start, p - start);
      continue;
    }
    if (c >= '0' && c <= '9') {
      bool is_float = false;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') p++;
      if (p + 1 < s.size() && s[p] == '.' && s[p + 1] >= '0' && s[p + 1] <= '9') {
        is_float = true;
        p++;
        while (p < s.size() && s[p] >= '0' && s[p] <= '9') p++;
      }
      if (p < s.size() && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < s.size() && (s[q] == '+' || s[q] == '-')) q++;
        if (q < s.size() && s[q] >= '0' && s[q] <= '9') {
          is_float = true;
          p = q;
          while (p < s.size() && s[p] >= '0' && s[p] <= '9') p++;
        }
      }
      const bool after_minus = !out->empty() && out->back().kind == Tok::Minus;
      const int64_t minus_pos = after_minus ? out->back().pos : 0;
      Token& t = out->emplace_back();
      t.pos = start;
      t.text = s.substr(start, p - start);
      if (is_float) {
        t.kind = Tok::Float;
        std::string tmp(t.text);
        t.f = strtod(tmp.c_str(), nullptr);
        if (std::isinf(t.f)) return Status(Code::Limit, "number " + shown_number(tmp) + " is too large", start);
      } else {
        t.kind = Tok::Int;
        auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), t.i);
        if (r.ec != std::errc()) {
          // 9223372036854775808 is valid only after a minus sign.
          if (t.text == "9223372036854775808" && after_minus) {
            t.i = INT64_MIN;  // the parser negates it back
          } else {
            // Named as written, with its sign (the minus is a token of its own).
            return Status(Code::Limit, "integer " + std::string(after_minus ? "-" : "") + shown_number(t.text) +
                                           " is out of range (int64)", after_minus ? minus_pos : start);
          }
        }
      }
      continue;
    }
    if (c == '"') {
      std::string v;
      p++;
      // Fast path: no escapes before the closing quote.
      size_t q = p;
      while (q < s.size() && s[q] != '"' && s[q] != '\\') q++;
      if (q < s.size() && s[q] == '"') {
        Token& t = out->emplace_back();
        t.kind = Tok::String;
        t.pos = start;
        t.text = s.substr(start, q + 1 - start);  // the value: inside the quotes
        p = q + 1;
        continue;
      }
      for (;;) {
        if (p >= s.size()) return Status(Code::Syntax, "unterminated string", start);
        char d = s[p];
        if (d == '"') { p++; break; }
        if (d == '\\') {
          if (p + 1 >= s.size()) return Status(Code::Syntax, "unterminated string", start);
          char e = s[p + 1];
          p += 2;
          switch (e) {
            case '"': v += '"'; break;
            case '\\': v += '\\'; break;
            case '/': v += '/'; break;
            case 'n': v += '\n'; break;
            case 't': v += '\t'; break;
            case 'r': v += '\r'; break;
            case 'b': v += '\b'; break;
            case 'f': v += '\f'; break;
            case 'u': {
              uint32_t cp;
              if (!hex4(s, p, &cp)) return Status(Code::Syntax, "bad \\u escape: expected 4 hex digits", p - 2);
              p += 4;
              if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (p + 1 < s.size() && s[p] == '\\' && s[p + 1] == 'u' && hex4(s, p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                  cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                  p += 6;
                } else {
                  return Status(Code::Syntax, "unpaired UTF-16 surrogate in \\u escape", p - 6);
                }
              } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return Status(Code::Syntax, "unpaired UTF-16 surrogate in \\u escape", p - 6);
              }
              put_utf8(v, cp);
              break;
            }
            default: return Status(Code::Syntax, std::string("unknown escape \\") + e + " in string", p - 2);
          }
          continue;
        }
        v += d;
        p++;
      }
      decoded->push_back(std::move(v));
      Token& t = out->emplace_back();
      t.kind = Tok::String;
      t.pos = start;
      t.text = s.substr(start, p - start);
      t.i = (int64_t)decoded->size();
      continue;
    }
    if (c == '$') {
      p++;
      int64_t n = 0;
      size_t ds = p;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9' && p - ds < 6) n = n * 10 + (s[p++] - '0');
      if (p == ds || n == 0) return Status(Code::Syntax, "expected a parameter number after '$' ($1, $2, ...)", start);
      Token& t = out->emplace_back();
      t.kind = Tok::Param;
      t.pos = start;
      t.text = s.substr(start, p - start);
      t.i = n;
      continue;
    }
    char n2 = p + 1 < s.size() ? s[p + 1] : 0;
    switch (c) {
      case '(': single(Tok::LParen, 1); break;
      case ')': single(Tok::RParen, 1); break;
      case '[': single(Tok::LBracket, 1); break;
      case ']': single(Tok::RBracket, 1); break;
      case '{': single(Tok::LBrace, 1); break;
      case '}': single(Tok::RBrace, 1); break;
      case ',': single(Tok::Comma, 1); break;
      case ':': single(Tok::Colon, 1); break;
      case '.': single(Tok::Dot, 1); break;
      case ';': single(Tok::Semicolon, 1); break;
      case '~': single(Tok::Tilde, 1); break;
      case '-': single(Tok::Minus, 1); break;
      case '*': single(Tok::Star, 1); break;
      case '@': single(Tok::At, 1); break;
      case '=': single(Tok::Eq, n2 == '=' ? 2 : 1); break;
      case '!':
        if (n2 != '=') return Status(Code::Syntax, "unexpected '!' (did you mean '!=' or 'not'?)", p);
        single(Tok::Ne, 2);
        break;
      case '<':
        if (n2 == '=') single(Tok::Le, 2);
        else if (n2 == '>') single(Tok::Ne, 2);
        else single(Tok::Lt, 1);
        break;
      case '>':
        if (n2 == '=') single(Tok::Ge, 2);
        else single(Tok::Gt, 1);
        break;
      default: {
        std::string ch(1, c);
        if ((unsigned char)c >= 0x80) {
          size_t q = p + 1;
          while (q < s.size() && ((unsigned char)s[q] & 0xC0) == 0x80) q++;
          ch = std::string(s.substr(p, q - p));
        }
        return Status(Code::Syntax, "unexpected character '" + ch + "'", p);
      }
    }
  }
  Token end;
  end.kind = Tok::End;
  end.pos = s.size();
  out->push_back(std::move(end));
  return Status::ok();
}

}  // namespace kitfox
