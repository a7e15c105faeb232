// Recursive-descent parser of the query language (see docs/query-language.md).
#pragma once
#include <string_view>

#include "../status.h"
#include "ast.h"

namespace kitfox {

// Parses one statement (a trailing ';' is allowed).
Status parse_statement(std::string_view text, ParsedStatement* out);

// Whether a statement's text is a put or an insert, from its first word
// alone (nothing else is parsed).
bool is_put_text(std::string_view text);

}  // namespace kitfox
