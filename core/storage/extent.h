// Extents: the big arrays of the image (a vector table, the level-0 HNSW
// lists), stored as an Extent record right after the record that owns them.
//
// An extent is checked in blocks: the owning record carries
// `u32 block bytes | u64 block count | count x u32 crc32c` (ExtentCopy),
// and the Extent record's own frame checksum covers only its length and kind,
// so opening can step over the bytes without reading them. A LazyExtent
// checks a block the first time something touches it (from any thread),
// reading it then too where the file is not mapped (the WASM build), and
// warm() checks the rest: natively a background thread after open, in WASM
// slices while the host is idle. A reopen or a page refresh does not wait
// for 50 MiB of vectors before its first query. Without lazy checks
// (OpenOptions.lazy_extents off, or recover) first_bad_block checks every
// block on open.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../status.h"

namespace kitfox {

class Reader;

// Blocks of about kExtentBlockTarget bytes holding whole items of
// `item_bytes` each (one item when an item is bigger). Small, because the
// first use of a block reads and checks all of it, and a search touches one
// vector in each of a thousand blocks: with 1 KiB blocks the first `near`
// over 100k x 128 checks 1.3 MiB instead of 5 MiB (the checksums cost 0.4%
// of the extent). The size is written into each file, so any size of
// whole items reads (up to kMaxExtentBlockBytes; a table or graph whose
// blocks split an item is damaged: HnswIndex::load_table, load_graph).
constexpr uint32_t kExtentBlockTarget = 1024;
// No block is larger than its largest item: a vector of 65,536 floats
// (256 KiB; a level-0 list is a few KiB). A record saying more is damage.
constexpr uint32_t kMaxExtentBlockBytes = 1 << 20;
uint32_t extent_block_bytes(uint32_t item_bytes);
// The bytes of `parts` one after another.
inline uint64_t parts_bytes(std::span<const std::string_view> parts) {
  uint64_t bytes = 0;
  for (std::string_view p : parts) bytes += p.size();
  return bytes;
}
// A record (`kind`: its head, then the block size, count and checksums of
// an extent, then padding) and the Extent after it holding the bytes of
// `parts` one after another (one extent in pieces, as a vector table's image
// part and the rest, or level-0 lists in blocks of their own), its first
// byte 64-byte aligned in the file, appended to `out` a step at a time: a
// checkpoint's build can stop between two steps and go on later. Each step
// copies whole blocks and checksums them where they landed, while they are
// in cache. Until done(), nothing else may be appended to `out` nor the
// bytes from where the copy began be written out (the checksums and both
// frames are filled in as it goes and at the end), and the list of parts
// and their bytes must stay where they are. Nothing is allocated but what
// `out` grows by.
class ExtentCopy {
 public:
  // Both records' heads (the owning record's head is `head` then
  // `head_rest`); the checksums are filled in as the blocks land. Either
  // frame is long past `short_max`.
  void begin(std::string& out, uint8_t kind, std::string_view head, std::string_view head_rest,
             std::span<const std::string_view> parts, uint32_t item_bytes, uint64_t short_max);
  // Copies about `bytes` more (whole blocks, at least one), and closes both
  // records once all are in: then true.
  bool step(std::string& out, uint64_t bytes);
  bool begun() const { return block_ != 0; }
  bool done() const { return done_; }
  uint64_t at() const { return at_; }  // the extent's first byte in `out`

 private:
  std::span<const std::string_view> parts_;
  size_t part_ = 0, part_at_ = 0;  // where the next byte comes from
  uint64_t total_ = 0;
  uint32_t block_ = 0;
  uint64_t short_max_ = 0;
  uint64_t rec_ = 0;     // the owning record's frame in `out`
  uint64_t sums_ = 0;    // its checksums
  uint64_t rec_end_ = 0; // the end of its body (its frame checksum after)
  uint64_t ext_ = 0;     // the Extent's frame
  uint64_t at_ = 0, copied_ = 0;
  bool done_ = false;
};

struct ExtentRef {
  std::string_view bytes;  // where the extent is in memory (may not be read yet)
  uint64_t file_offset = 0;
  uint32_t block_bytes = 0;
  std::vector<uint32_t> crcs;
};
// Reads the checksums an ExtentCopy wrote; false when they are malformed.
bool get_extent_checksums(Reader& r, ExtentRef* e);
// True when the checksums fit an extent of `size` bytes.
bool extent_fits(const ExtentRef& e, uint64_t size);
// The index of the first block whose checksum does not match, or -1.
int64_t first_bad_block(const ExtentRef& e);

class LazyExtent {
 public:
  // Reads file bytes into memory; empty when the bytes are in memory already
  // (mapped, or read whole) and only their checks are left to first use.
  using ReadFn = std::function<Status(uint64_t file_offset, char* dst, size_t n)>;
  // Decides whether a block's bytes (checksum already matched) make sense.
  using CheckFn = std::function<bool(const char* p, size_t n)>;

  // A block touched first is read with the missing blocks around it, up to
  // `chunk` bytes (aligned), for hosts whose every read is slow.
  LazyExtent(const ExtentRef& e, ReadFn read, uint64_t chunk, CheckFn check = nullptr);

  // Makes the item at bytes [off, off + n) of the extent present and checked
  // (an item lies within one block) and returns where to read it: in place,
  // or, when its block is damaged, in a block of zeros (the extent's memory
  // may be a read-only mapping). Safe to call from several threads.
  const char* need(uint64_t off, uint64_t n) {
    (void)n;
    uint64_t b = off / e_.block_bytes;
    uint32_t s = state(b);
    if (s == kPresent) return e_.bytes.data() + off;
    if (s == 0) s = load(b);
    return s == kPresent ? e_.bytes.data() + off : zeros_.get() + off % e_.block_bytes;
  }
  // True once every block is present and none is damaged: need() is then
  // the identity and callers may skip it.
  bool clean() const { return clean_.load(std::memory_order_acquire); }
  // Reads up to about `budget` bytes of blocks not read yet; the bytes read.
  uint64_t warm(uint64_t budget);
  // Copies the whole extent to `dst` (reading every block; damaged ones as
  // zeros). Nothing else may check blocks meanwhile (the engine calls it
  // with the database to itself): a block another thread is still checking
  // would be copied as it is.
  void copy_to(char* dst);
  uint64_t missing_bytes() const { return missing_.load(std::memory_order_acquire); }
  bool complete() const { return missing_bytes() == 0; }
  // The file offset of the first block that failed (checksum, check or
  // read), 0 when none did. A failed block reads as zeros.
  uint64_t damaged_at() const { return damaged_at_.load(std::memory_order_acquire); }
  // Whether any extent of this process has found a damaged block: while
  // none has, a read need not ask each index (Engine::extents_damaged).
  static bool any_damaged() { return damaged_anywhere_.load(std::memory_order_acquire); }
  std::string damage() const {
    std::lock_guard g(mu_);
    return damage_;
  }

 private:
  static constexpr uint32_t kPresent = 1, kDamaged = 3;  // 2 bits per block
  uint32_t state(uint64_t b) const {
    return (uint32_t)(state_[b >> 5].load(std::memory_order_acquire) >> ((b & 31) * 2)) & 3;
  }
  uint32_t load(uint64_t b);  // the block's state once loaded
  uint64_t load_run(uint64_t b0, uint64_t b1);
  uint64_t chunk_blocks_;
  ExtentRef e_;
  ReadFn read_;
  CheckFn check_;
  // Held to read blocks into memory, to claim blocks for warm() and to
  // record damage; checks alone (read_ empty) run without it, and readers of
  // present blocks take no lock.
  mutable std::mutex mu_;
  std::unique_ptr<std::atomic<uint64_t>[]> state_;
  std::unique_ptr<char[]> zeros_;  // one block of zeros, made on the first damage
  std::atomic<uint64_t> missing_;
  std::atomic<bool> clean_{false};
  uint64_t next_ = 0;  // warm() scans from here
  std::atomic<uint64_t> damaged_at_{0};
  std::string damage_;
  static inline std::atomic<bool> damaged_anywhere_{false};
};

// How an index takes its extents on open: checked already (not lazy), or
// checked block by block on first use, reading them then when `read` is set.
struct ExtentLoad {
  bool lazy = false;
  LazyExtent::ReadFn read;
  uint64_t chunk = 0;  // see LazyExtent
};

}  // namespace kitfox
