#include "extent.h"

#include <algorithm>
#include <cstring>

#include "../codec.h"
#include "../crc32c.h"

namespace kitfox {

uint32_t extent_block_bytes(uint32_t item_bytes) {
  if (item_bytes == 0) return 4096;
  uint32_t per = item_bytes >= 4096 ? 1 : 4096 / item_bytes;
  return per * item_bytes;
}

static uint64_t block_count(uint64_t size, uint32_t block_bytes) { return (size + block_bytes - 1) / block_bytes; }

void put_extent_checksums(std::string& out, std::string_view bytes, uint32_t block_bytes) {
  uint64_t n = block_count(bytes.size(), block_bytes);
  put_u32(out, block_bytes);
  put_u64(out, n);
  size_t at = out.size();
  out.resize(at + n * 4);
  for (uint64_t b = 0; b < n; b++) {
    size_t off = (size_t)b * block_bytes;
    uint32_t crc = crc32c(0, bytes.data() + off, std::min<size_t>(block_bytes, bytes.size() - off));
    memcpy(&out[at + b * 4], &crc, 4);
  }
}

bool get_extent_checksums(Reader& r, ExtentRef* e) {
  e->block_bytes = r.u32();
  uint64_t n = r.u64();
  if (!r.ok() || e->block_bytes == 0 || n > r.left() / 4) return false;
  std::string_view raw = r.bytes(n * 4);
  e->crcs.resize(n);
  if (n) memcpy(e->crcs.data(), raw.data(), raw.size());
  return r.ok();
}

bool extent_fits(const ExtentRef& e, uint64_t size) {
  return e.block_bytes && e.crcs.size() == block_count(size, e.block_bytes);
}

int64_t first_bad_block(const ExtentRef& e) {
  for (size_t b = 0; b < e.crcs.size(); b++) {
    size_t off = b * e.block_bytes;
    if (crc32c(0, e.bytes.data() + off, std::min<size_t>(e.block_bytes, e.bytes.size() - off)) != e.crcs[b])
      return (int64_t)b;
  }
  return -1;
}

LazyExtent::LazyExtent(const ExtentRef& e, ReadFn read, uint64_t chunk, CheckFn check)
    : e_(e), read_(std::move(read)), check_(std::move(check)), present_((e.crcs.size() + 63) / 64, 0),
      missing_(e.bytes.size()) {
  chunk_blocks_ = std::max<uint64_t>(1, chunk / e.block_bytes);
}

void LazyExtent::load(uint64_t b) {
  if (chunk_blocks_ == 1) return load_run(b, b + 1);
  // The missing runs of the aligned chunk around b.
  uint64_t nb = e_.crcs.size();
  uint64_t c = b / chunk_blocks_ * chunk_blocks_, end = std::min(nb, c + chunk_blocks_);
  while (c < end) {
    if (present_[c >> 6] >> (c & 63) & 1) {
      c++;
      continue;
    }
    uint64_t e = c + 1;
    while (e < end && !(present_[e >> 6] >> (e & 63) & 1)) e++;
    load_run(c, e);
    c = e;
  }
}

// Reads blocks [b0, b1) (none of them present) with one read and checks each.
void LazyExtent::load_run(uint64_t b0, uint64_t b1) {
  uint64_t off = b0 * e_.block_bytes;
  size_t n = (size_t)(std::min<uint64_t>(b1 * e_.block_bytes, e_.bytes.size()) - off);
  // The extent's memory is the image buffer, owned by the engine and written
  // only here, before anything reads these bytes.
  char* p = const_cast<char*>(e_.bytes.data()) + off;
  Status st = read_ ? read_(e_.file_offset + off, p, n) : Status::ok();
  for (uint64_t b = b0; b < b1; b++) {
    present_[b >> 6] |= 1ull << (b & 63);
    size_t bo = (size_t)(b - b0) * e_.block_bytes;
    size_t bn = std::min<size_t>(e_.block_bytes, n - bo);
    missing_ -= bn;
    const char* what = nullptr;
    if (!st.is_ok()) what = "could not be read";
    else if (crc32c(0, p + bo, bn) != e_.crcs[b]) what = "checksum mismatch";
    else if (check_ && !check_(p + bo, bn)) what = "contents out of range";
    if (!what) continue;
    memset(p + bo, 0, bn);
    if (!damaged_at_) {
      damaged_at_ = e_.file_offset + off + bo;
      damage_ = std::string(what) + (st.is_ok() ? "" : ": " + st.message());
    }
  }
}

uint64_t LazyExtent::warm(uint64_t budget) {
  uint64_t before = missing_;
  uint64_t nb = e_.crcs.size();
  while (next_ < nb && before - missing_ < budget) {
    uint64_t b = next_;
    if (present_[b >> 6] >> (b & 63) & 1) {
      next_++;
      continue;
    }
    uint64_t e = b + 1, limit = b + std::max<uint64_t>(1, (budget - (before - missing_)) / e_.block_bytes);
    while (e < nb && e < limit && !(present_[e >> 6] >> (e & 63) & 1)) e++;
    load_run(b, e);
    next_ = e;
  }
  return before - missing_;
}

}  // namespace kitfox
