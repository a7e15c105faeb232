// Small helpers the native benchmark programs share: formatting, files,
// medians, progress lines.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kitfox::benchutil {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  va_list ap, ap2;
  va_start(ap, f);
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, f, ap);
  va_end(ap);
  std::string s(n > 0 ? (size_t)n : 0, '\0');
  std::vsnprintf(s.data(), s.size() + 1, f, ap2);
  va_end(ap2);
  return s;
}

// 1234567 -> "1,234,567"
inline std::string grouped(double x) {
  std::string s = fmt("%.0f", x), out;
  size_t neg = s[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < s.size(); i++) {
    if (i > neg && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// A whole file's text ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t\n");
  size_t b = s.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

inline void remove_file(const std::string& path) { ::unlink(path.c_str()); }

inline void progress(const std::string& s) {
  std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stderr);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace kitfox::benchutil
