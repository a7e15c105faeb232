// `kitfox import` (native/importer.h): any bytes as NDJSON or a JSON array,
// fed in chunks of a size the input chooses, parsed in regions of a size it
// chooses (so that documents and elements are cut across chunks and regions),
// into a collection in batches of one to four, with the writer thread or
// without. It imports or stops with an error, never a crash or a hang; what it
// says it imported is what the collection holds; and everything that came of
// it (documents, count, messages) is what the plain reader gives, which reads
// every line or element with parse_json in one chunk.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "import_compare.h"

using namespace kitfox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t chunk = 1 + data[0] % 64;
  ImportOptions o;
  o.region_bytes = size_t{1} << (data[1] & 15);  // 1 byte to 32 KiB
  o.batch = 1 + ((data[1] >> 4) & 3);
  o.writer_thread = (data[1] & 0x40) != 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::string create =
      "create collection t (name text @hash, n int, meta json, tags [text], e vector<4>, h vector<2, f16>)";

  const importcheck::Outcome fast = importcheck::run(in, create, o, chunk);
  if (!fast.opened) fuzz::fail("open and create");
  if (fast.count != static_cast<int64_t>(fast.imported))
    fuzz::fail("the collection does not hold what the import says it imported");

  ImportOptions plain = o;
  plain.fast = false;
  plain.writer_thread = false;
  const importcheck::Outcome ref = importcheck::run(in, create, plain, in.size());
  if (!(fast == ref))
    fuzz::fail("the fast reader differs from the plain one\n--- fast:\n" + importcheck::describe(fast) +
               "--- plain:\n" + importcheck::describe(ref));
  return 0;
}
