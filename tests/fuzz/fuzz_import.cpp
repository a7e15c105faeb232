// `kitfox import` (native/importer.h): any bytes as NDJSON or a JSON array,
// fed in chunks of a size the input chooses, into a collection in batches of
// three. It imports or stops with an error, never a crash or a hang; what it
// says it imported is what the collection holds.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "importer.h"

using namespace kitfox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto fs = make_memory_file_system();
  auto opened = Database::open(*fs, "f.kfdb", fuzz::quiet_options());
  if (!opened.is_ok()) fuzz::fail("open");
  auto& db = *opened;
  if (!db->query("create collection t (name text @hash, n int, meta json, tags [text], e vector<4>)").is_ok())
    fuzz::fail("create");
  const int64_t had = 0;
  Importer imp(*db, "t", "fuzz input", 3, in.size());
  bool ok = true;
  for (size_t i = 0; i < in.size() && ok; i += chunk) ok = imp.feed(in.substr(i, chunk));
  if (ok) ok = imp.finish();
  auto after = db->query("get t count");
  if (!after.is_ok()) fuzz::fail("count after");
  if (after->rows[0].get("count")->as_int() != had + (int64_t)imp.imported())
    fuzz::fail("the collection does not hold what the import says it imported");
  return 0;
}
