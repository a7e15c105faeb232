// A database file of arbitrary bytes, opened from memory (as it is, and with
// recover): it opens or is refused with an error, never a crash or a hang,
// and one that opens answers reads, checkpoints and closes. Each input is
// opened twice: as it is, and with every checksum made right, so that a
// change reaches what reads a record's body instead of stopping at its
// checksum.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "crc32c.h"
#include "fuzz_common.h"
#include "storage/format.h"
#include "storage/record.h"

using namespace kitfox;

// The header's checksum and that of each record whose frame fits in the
// file, as a writer would have made them (an Extent's covers its head only);
// the blocks' checksums inside records are left as they are.
static std::string with_checksums_made_right(std::string_view in) {
  std::string out(in);
  if (out.size() < format::kHeaderSize) return out;
  uint32_t crc = crc32c(0, out.data(), 28);
  memcpy(out.data() + 28, &crc, 4);
  uint64_t off = format::kHeaderSize;
  while (off < out.size()) {
    uint64_t head, len;
    if (frame_head(out.data() + off, out.size() - off, &head, &len) != ScanResult::Ok) break;
    const bool extent = (uint8_t)out[off + 4] == format::kExtent;
    crc = crc32c(0, out.data() + off, extent ? head : head + len);
    memcpy(out.data() + off + head + len, &crc, 4);
    off += head + len + 4;
  }
  return out;
}

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

static void open_each_way(std::string_view bytes) {
  for (bool recover : {false, true}) {
    auto fs = make_memory_file_system();
    {
      auto f = fs->open("f.kfdb", OpenFlags{true, true});
      if (!f.is_ok() || !(*f)->write(0, bytes.data(), bytes.size()).is_ok()) fuzz::fail("memory file");
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
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view as_is(reinterpret_cast<const char*>(data), size);
  open_each_way(as_is);
  const std::string made_right = with_checksums_made_right(as_is);
  if (made_right != as_is) open_each_way(made_right);
  return 0;
}
