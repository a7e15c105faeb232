// A database file of arbitrary bytes, opened from memory (as it is, and with
// recover): it opens or is refused with an error, never a crash or a hang,
// and one that opens answers reads, checkpoints and closes.
#include <cstdint>
#include <string>

#include "fuzz_common.h"

using namespace kitfox;

static void exercise(Database& db) {
  auto cs = db.query("collections");
  if (!cs.is_ok()) return;
  for (const Value& c : cs->rows) {
    const Value* name = c.get("name");
    if (!name || name->kind() != Kind::Text) continue;
    const std::string n = name->as_string();
    for (std::string q : {"get " + n + " count", "get " + n + " limit 5", "describe " + n}) db.query(q);
  }
  db.query("get t near e [1, 0, 0, 0] limit 3");
  db.query("get t near e [1, 0, 0, 0] exact limit 3");
  db.query("get t match body \"fox\" limit 3");
  db.query("get t where n > 0 order n desc limit 3");
  db.query("put t {name: \"new\", n: 9, e: [0, 0, 1, 0]}");
  db.checkpoint();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (bool recover : {false, true}) {
    auto fs = make_memory_file_system();
    {
      auto f = fs->open("f.kfdb", OpenFlags{true, true});
      if (!f.is_ok() || !(*f)->write(0, data, size).is_ok()) fuzz::fail("memory file");
    }
    OpenOptions o = fuzz::quiet_options();
    o.recover = recover;
    o.lazy_extents = !recover;
    auto db = Database::open(*fs, "f.kfdb", o);
    if (!db.is_ok()) {
      if (db.status().code() != Code::Corrupt && db.status().code() != Code::Limit)
        fuzz::fail("a file was refused with a " + std::string(code_name(db.status().code())) +
                   " error: " + db.status().to_string());
      continue;
    }
    exercise(**db);
    (*db)->close();
  }
  return 0;
}
