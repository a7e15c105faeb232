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

struct Token {
  Tok kind = Tok::End;
  int64_t pos = 0;
  std::string_view text;  // the source text of the token
  std::string str;        // String: the decoded value
  int64_t i = 0;          // Int, Param
  double f = 0;           // Float
};

const char* tok_name(Tok t);

// Splits `text` into tokens; the last one is End. Errors name the position.
Status tokenize(std::string_view text, std::vector<Token>* out);

}  // namespace kitfox
