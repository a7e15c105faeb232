// Shared by the libFuzzer harnesses: a small database in memory with a
// collection of every kind of field and index, for inputs to run against.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "db.h"
#include "file.h"

namespace kitfox::fuzz {

// A failed invariant: the fuzzer reports the input that caused it.
[[noreturn]] inline void fail(const std::string& what) {
  fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  abort();
}

inline OpenOptions quiet_options() {
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.check_in_background = false;
  return o;
}

// Collection `t`: a field of every type, a hash, sorted, unique, text and
// hnsw index, and three documents.
inline std::unique_ptr<Database> sample_db(FileSystem& fs, const std::string& name = "f.kfdb") {
  auto r = Database::open(fs, name, quiet_options());
  if (!r.is_ok()) fail("open a new database: " + r.status().to_string());
  auto db = std::move(r.value());
  const char* setup[] = {
      "create collection t (name text @hash, n int @sorted, f float, b bool, at timestamp, raw bytes, meta json, "
      "tags [text], body text @text, code text @unique, e vector<4> @hnsw(cosine, m=4, ef_construction=16))",
      "create collection u (k int, ref int)",
      "insert t [{name: \"a\", n: 1, f: 0.5, b: true, at: \"2024-01-02T03:04:05Z\", meta: {x: [1, {y: 2}]}, tags: "
      "[\"p\"], body: \"the quick fox\", code: \"c1\", e: [1, 0, 0, 0]}, {name: \"b\", n: 2, body: \"lazy dog\", code: "
      "\"c2\", e: [0, 1, 0, 0]}, {name: \"a\", n: 3, meta: {x: 3}, e: [0.5, 0.5, 0, 0]}]",
      "insert u [{k: 1, ref: 1}, {k: 2, ref: 3}]",
  };
  for (const char* q : setup) {
    auto s = db->query(q);
    if (!s.is_ok()) fail(std::string("setup: ") + q + ": " + s.status().to_string());
  }
  return db;
}

}  // namespace kitfox::fuzz
