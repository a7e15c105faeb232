// Shared by the import fuzz harness and tests/unit/import_test.cpp: one
// `kitfox import` run into a fresh database in memory, and what came of it,
// so that the fast reader can be compared with the plain one
// (ImportOptions::fast = false: parse_json on every line or element).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "db.h"
#include "file.h"
#include "importer.h"

namespace kitfox::importcheck {

struct Outcome {
  bool opened = false;
  bool ok = false;
  uint64_t imported = 0;
  uint64_t read_slowly = 0;
  std::string messages;  // what the import said, one line each
  std::string documents;  // the collection afterwards, one JSON line each
  int64_t count = -1;     // `get C count` afterwards
};

inline bool operator==(const Outcome& a, const Outcome& b) {
  return a.opened == b.opened && a.ok == b.ok && a.imported == b.imported && a.messages == b.messages &&
         a.documents == b.documents && a.count == b.count;
}

// What differs between two outcomes, for a failure message.
inline std::string describe(const Outcome& o) {
  return "ok=" + std::to_string(o.ok) + " imported=" + std::to_string(o.imported) + " count=" +
         std::to_string(o.count) + " slow=" + std::to_string(o.read_slowly) + "\nmessages:\n" + o.messages +
         "documents:\n" + o.documents;
}

inline void collect(void* ctx, const std::string& line) { *static_cast<std::string*>(ctx) += line + "\n"; }

// Imports `input` into collection `t` made by `create` (a `create collection
// t ...` statement), fed in chunks of `chunk` bytes.
inline Outcome run(std::string_view input, const std::string& create, ImportOptions o, size_t chunk) {
  Outcome out;
  auto fs = make_memory_file_system();
  OpenOptions oo;
  oo.sync = SyncMode::Off;
  oo.check_in_background = false;
  auto opened = Database::open(*fs, "i.kfdb", oo);
  if (!opened.is_ok()) return out;
  auto& db = *opened;
  if (!db->query(create).is_ok()) return out;
  out.opened = true;
  o.report = collect;
  o.report_ctx = &out.messages;
  o.progress = false;
  {
    Importer imp(*db, "t", "input", o);
    bool ok = true;
    chunk = std::max<size_t>(chunk, 1);
    for (size_t i = 0; i < input.size() && ok; i += chunk) ok = imp.feed(input.substr(i, chunk));
    if (ok) ok = imp.finish();
    out.ok = ok;
    out.imported = imp.imported();
    out.read_slowly = imp.read_slowly();
  }
  auto rows = db->query("get t");
  if (rows.is_ok())
    for (const Value& r : rows->rows) out.documents += to_json(r) + "\n";
  auto count = db->query("get t count");
  if (count.is_ok() && !count->rows.empty()) out.count = count->rows[0].get("count")->as_int();
  db->close();
  return out;
}

}  // namespace kitfox::importcheck
