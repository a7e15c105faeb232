// Whole files of a FileSystem as strings, and their records, for tests that
// damage them.
#pragma once
#include <doctest/doctest.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "file.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox::testing {

// A fresh directory under /tmp, removed with its files at the end of a test.
// `path` is empty when mkdtemp failed (the failure is recorded).
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kitfox-test-XXXXXX";
    if (const char* made = ::mkdtemp(tmpl)) {
      path = made;
    } else {
      FAIL_CHECK("mkdtemp failed: " << std::strerror(errno));
    }
  }
  ~TempDir() {
    if (path.empty()) return;
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((path + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return path + "/" + name; }
};

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

// The records of a file's bytes, from the header up to the first that does
// not read whole.
inline std::vector<RecordView> records(const std::string& file) {
  std::vector<RecordView> v;
  uint64_t off = format::kHeaderSize;
  RecordView r;
  while (read_record(file, off, &r) == ScanResult::Ok) {
    v.push_back(r);
    off = r.end;
  }
  return v;
}

}  // namespace kitfox::testing
