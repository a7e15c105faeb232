// Whole files of a FileSystem as strings, for tests that damage them.
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "file.h"

namespace kitfox::testing {

inline std::string read_file(FileSystem& fs, const std::string& name) {
  auto f = fs.open(name, {});
  REQUIRE(f.is_ok());
  std::string s(*(*f)->size(), '\0');
  size_t got;
  REQUIRE((*f)->read(0, s.data(), s.size(), &got).is_ok());
  return s;
}

// Replaces the file's bytes (creating it when missing).
inline void write_file(FileSystem& fs, const std::string& name, const std::string& bytes) {
  auto f = fs.open(name, OpenFlags{true, false});
  REQUIRE(f.is_ok());
  REQUIRE((*f)->truncate(0).is_ok());
  REQUIRE((*f)->write(0, bytes.data(), bytes.size()).is_ok());
}

}  // namespace kitfox::testing
