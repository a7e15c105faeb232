// Tokens of the query language.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../status.h"

namespace kitfox {

enum class Tok : uint8_t {
  End, Ident, Int, Float, String, Param,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Colon, Dot, Semicolon,
  Eq, Ne, Lt, Le, Gt, Ge, Tilde, Minus, Star, At,
};

// 32 bytes: a bulk put is about one token per 4 bytes of text, and the
// parser walks them more than once.
struct Token {
  Tok kind = Tok::End;
  uint32_t pos = 0;       // statements are at most 256 MiB
  std::string_view text;  // the source text of the token (a string with its quotes)
  union {
    int64_t i = 0;  // Int, Param; String: 0, or 1 + the index of its unescaped form in `decoded`
    double f;       // Float
  };
};

// Whether `s` is a whole name as a statement writes one (a collection's, a
// field's): a letter or _, then letters, digits and _, 256 bytes at most.
bool is_name(std::string_view s);

// A String token's value: its text inside the quotes, or (when it held
// escapes) its decoded form.
inline std::string_view token_string(const Token& t, const std::vector<std::string>& decoded) {
  return t.i ? std::string_view(decoded[(size_t)t.i - 1]) : t.text.substr(1, t.text.size() - 2);
}

const char* tok_name(Tok t);

// The first name in `text` past spaces and comments (a statement's
// keyword), or "" when something else comes first.
std::string_view first_word(std::string_view text);

// Splits `text` into tokens; the last one is End. Strings with escapes
// have their decoded form in *decoded. Errors name the position.
Status tokenize(std::string_view text, std::vector<Token>* out, std::vector<std::string>* decoded);

}  // namespace kitfox
