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

#include "codec.h"
#include "file.h"
#include "storage/extent.h"
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

// The write records of a file's tail: the last `n` records, each a Write
// (views into `file`, which must outlive them).
inline std::vector<RecordView> tail_writes(const std::string& file, size_t n) {
  std::vector<RecordView> recs = records(file);
  REQUIRE(recs.size() >= n);
  std::vector<RecordView> tail(recs.end() - (ptrdiff_t)n, recs.end());
  for (const RecordView& w : tail) REQUIRE(w.kind == format::kWrite);
  return tail;
}

// The checksums a record carries for an extent of `a` then `b` (`u32 block
// bytes | u64 count | count x u32 crc32c`), from the two records a
// checkpoint appends (ExtentCopy), `step` bytes a step, after a file header
// and `before` bytes; checks that they read whole, the Extent holding `a`
// then `b` from a 64-byte boundary of the file.
inline std::string extent_checksums(std::string_view a, std::string_view b, uint32_t item_bytes,
                                    uint64_t step = 1 << 20, size_t before = 0) {
  std::string out(format::kHeaderSize + before, 'h');
  ExtentCopy x;
  const std::string_view parts[2] = {a, b};
  x.begin(out, format::kVectors, "he", "ad", parts, item_bytes, kMaxRecordBytes);
  while (!x.step(out, step)) CHECK_FALSE(x.done());
  CHECK(x.done());
  RecordView rec, ext;
  REQUIRE(read_record(out, format::kHeaderSize + before, &rec) == ScanResult::Ok);
  REQUIRE(read_record(out, rec.end, &ext) == ScanResult::Ok);
  CHECK(rec.kind == format::kVectors);
  CHECK(ext.kind == format::kExtent);
  CHECK(ext.end == out.size());
  CHECK(x.at() == ext.offset + ext.head);
  CHECK(x.at() % 64 == 0);
  CHECK(ext.body.size() == a.size() + b.size());
  CHECK((ext.body.substr(0, a.size()) == a && ext.body.substr(a.size()) == b));
  REQUIRE(rec.body.size() >= 4 + 12);
  CHECK(rec.body.substr(0, 4) == "head");
  uint64_t n;
  memcpy(&n, rec.body.data() + 8, 8);
  REQUIRE(rec.body.size() >= 16 + n * 4 + 1);
  const uint8_t pad = (uint8_t)rec.body[16 + n * 4];
  CHECK(rec.body.size() == 16 + n * 4 + 1 + pad);
  return std::string(rec.body.substr(4, 12 + n * 4));
}

// The file as images before 2026-12-07 were written: after each
// collection's Docs records, an IdIndex record (`varint collection | u64
// count | count x {i64 id, u64 file offset}`), its body as edit() makes it
// from the right one. Its frame is padded to a multiple of 64 bytes so that
// the vector tables after it stay aligned.
template <typename Edit>
std::string with_old_id_index(const std::string& file, Edit edit) {
  std::string out = file.substr(0, format::kHeaderSize);
  std::vector<RecordView> recs = records(file);
  std::string entries;  // the collection's {id, offset} so far
  uint64_t count = 0;
  for (size_t i = 0; i < recs.size(); i++) {
    const RecordView& r = recs[i];
    uint32_t cid = 0;
    if (r.kind == format::kDocs) {
      Reader rd(r.body);
      cid = (uint32_t)rd.varint();
      const uint64_t n = rd.varint();
      for (uint64_t k = 0; k < n; k++) {
        const uint64_t at = out.size() + 5 + (rd.pos() - r.body.data());  // a short frame's head: 5 bytes
        const int64_t id = unzigzag(rd.varint());
        rd.str();
        entries.append((const char*)&id, 8);
        entries.append((const char*)&at, 8);
        count++;
      }
    }
    append_record(out, r.kind, r.body);
    const bool last_docs = r.kind == format::kDocs &&
                           (i + 1 == recs.size() || recs[i + 1].kind != format::kDocs ||
                            (uint32_t)Reader(recs[i + 1].body).varint() != cid);
    if (!last_docs) continue;
    std::string body;
    put_varint(body, cid);
    put_u64(body, count);
    body += entries;
    body = edit(body);
    body.append((64 - (body.size() + format::kFrameOverhead) % 64) % 64, '\0');
    append_record(out, format::kIdIndex, body);
    entries.clear();
    count = 0;
  }
  return out;
}
inline std::string with_old_id_index(const std::string& file) {
  return with_old_id_index(file, [](std::string b) { return b; });
}

}  // namespace kitfox::testing
