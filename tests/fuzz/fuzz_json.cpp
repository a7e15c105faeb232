// JSON text (as `kitfox import` and params given as JSON read it): parsed,
// written back and parsed again to the same value, and put as a document.
#include <cstdint>
#include <string>

#include "fuzz_common.h"

using namespace kitfox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = parse_json(text);
  if (!v.is_ok()) return 0;
  std::string once = to_json(*v);
  auto back = parse_json(once);
  if (!back.is_ok()) fuzz::fail("to_json wrote text parse_json refuses: " + back.status().to_string());
  if (to_json(*back) != once) fuzz::fail("JSON did not round-trip: " + once);
  auto fs = make_memory_file_system();
  auto db = fuzz::sample_db(*fs);
  for (const char* q : {"put t $1", "put t {meta: $1}", "put u $1"}) {
    auto r = db->query(q, {*v});
    if (!r.is_ok()) continue;
    // A list puts each of its documents (none for an empty list).
    for (const Value& row : r->rows) {
      auto id = row.get("id");
      if (!id) fuzz::fail("a put returned no id");
      auto got = db->query(std::string("get ") + q[4] + " where id = $1", {*id});
      if (!got.is_ok() || got->rows.size() != 1) fuzz::fail("a document put does not read back");
    }
  }
  return 0;
}
