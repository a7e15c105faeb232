// Small text helpers shared by the CLI and the importer.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kitfox {

inline void print_error(const std::string& msg) { fprintf(stderr, "kitfox: error: %s\n", msg.c_str()); }

// Without the white space at either end.
inline std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n' || s[b] == '\r' || s[b] == '\f' || s[b] == '\v')) b++;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r' || s[e - 1] == '\f' ||
                   s[e - 1] == '\v'))
    e--;
  return s.substr(b, e - b);
}

// A decimal count of up to 18 digits.
inline bool parse_count(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace kitfox
