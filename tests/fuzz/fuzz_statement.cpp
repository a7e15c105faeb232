// ParsedStatement text, parsed and run against a small database in memory: any
// text is an answer or an error, never a crash, a hang or a sanitizer report.
// A statement that fails changes nothing (the count of each collection and
// the file's bytes stay as they were).
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "query/parser.h"

using namespace kitfox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParsedStatement st;
  if (!parse_statement(text, &st).is_ok()) return 0;
  auto fs = make_memory_file_system();
  auto db = fuzz::sample_db(*fs);
  auto count = [&] {
    std::string all;
    for (const char* c : {"get t count", "get u count"}) {
      auto r = db->query(c);
      all += r.is_ok() ? to_json(r->rows[0]) : r.status().to_string();
    }
    return all;
  };
  std::string before = count();
  uint64_t bytes = db->stats().file_bytes;
  std::vector<Value> params = {Value::integer(1), Value::text("a"), Value::vector({1, 0, 0, 0})};
  auto r = db->query(text, params);
  if (!r.is_ok() && (count() != before || db->stats().file_bytes != bytes))
    fuzz::fail("a failed statement changed the database: " + r.status().to_string());
  // Whatever it did, the database checkpoints, closes and opens again.
  if (Status s = db->checkpoint(); !s.is_ok() && s.code() != Code::Failed) fuzz::fail("checkpoint: " + s.to_string());
  std::string after = count();
  db->close();
  db.reset();
  auto again = Database::open(*fs, "f.kfdb", fuzz::quiet_options());
  if (!again.is_ok()) fuzz::fail("reopen: " + again.status().to_string());
  db = std::move(again.value());
  if (count() != after) fuzz::fail("reopen changed the counts");
  return 0;
}
