#include "extent.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "../codec.h"
#include "../crc32c.h"
#include "../engine_limits.h"
#include "../index/params.h"
#include "../port.h"
#include "format.h"
#include "record.h"

namespace kitfox {

static_assert(kMaxExtentBlockBytes >= kMaxVectorDim * sizeof(float), "a block holds the largest vector");
static_assert(kMaxExtentBlockBytes >= (1 + 2 * HnswParams::kMaxM) * sizeof(uint32_t), "and the longest level-0 list");

uint32_t extent_block_bytes(uint32_t item_bytes) {
  if (item_bytes == 0) return kExtentBlockTarget;
  uint32_t per = item_bytes >= kExtentBlockTarget ? 1 : kExtentBlockTarget / item_bytes;
  return per * item_bytes;
}

static uint64_t block_count(uint64_t size, uint32_t block_bytes) { return (size + block_bytes - 1) / block_bytes; }

// The checksums of blocks [b0, b1) of `bytes`, three whole blocks at a time.
static void block_crcs(std::string_view bytes, uint32_t block_bytes, uint64_t b0, uint64_t b1, uint32_t* out) {
  uint64_t b = b0;
  for (; b + 3 <= b1 && (b + 3) * block_bytes <= bytes.size(); b += 3) {
    const char* p = bytes.data() + b * block_bytes;
    crc32c_3(p, p + block_bytes, p + 2 * block_bytes, block_bytes, out + (b - b0));
  }
  for (; b < b1; b++) {
    size_t off = (size_t)b * block_bytes;
    out[b - b0] = crc32c(0, bytes.data() + off, std::min<size_t>(block_bytes, bytes.size() - off));
  }
}

void ExtentCopy::begin(std::string& out, uint8_t kind, std::string_view head, std::string_view head_rest,
                       std::span<const std::string_view> parts, uint32_t item_bytes, uint64_t short_max) {
  parts_ = parts;
  part_ = part_at_ = 0;
  block_ = extent_block_bytes(item_bytes);
  short_max_ = short_max;
  const uint64_t bytes = parts_bytes(parts);
  total_ = bytes;
  const uint64_t n = block_count(bytes, block_);
  const uint64_t body = head.size() + head_rest.size() + 4 + 8 + n * 4;  // before the padding
  // The record's frame is chosen before its padding (up to 64 bytes more).
  const uint64_t expect = body + 64;
  const uint64_t first =
      out.size() + frame_head_bytes(expect, short_max) + body + 1 + 4 + frame_head_bytes(bytes, short_max);
  const uint8_t pad = (uint8_t)((64 - first % 64) % 64);
  // Written straight into `out`: nothing allocated but what `out` grows by.
  rec_ = open_record(out, kind, expect, short_max);
  out.append(head);
  out.append(head_rest);
  put_u32(out, block_);
  put_u64(out, n);
  sums_ = out.size();
  out.append(n * 4, '\0');  // filled in as the blocks land
  put_u8(out, pad);
  out.append(pad, '\0');
  rec_end_ = out.size();
  out.append(4, '\0');  // its frame checksum, once the block checksums are in
  ext_ = open_record(out, format::kExtent, bytes, short_max);
  at_ = out.size();
  copied_ = 0;
  done_ = false;
}

bool ExtentCopy::step(std::string& out, uint64_t bytes) {
  if (done_) return true;
  uint64_t n = std::min(total_ - copied_, std::max<uint64_t>(bytes / block_, 1) * block_);
  const uint64_t pos = copied_ + n;
  while (n) {
    const std::string_view p = parts_[part_];
    const size_t k = (size_t)std::min<uint64_t>(n, p.size() - part_at_);
    out.append(p.data() + part_at_, k);
    n -= k;
    part_at_ += k;
    if (part_at_ == p.size()) part_++, part_at_ = 0;
  }
  // The blocks that landed: whole ones, and at the end the last.
  uint32_t crcs[192];
  const std::string_view landed(out.data() + at_, (size_t)pos);
  for (uint64_t b = copied_ / block_, end = block_count(pos, block_); b < end;) {
    const uint64_t k = std::min<uint64_t>(end - b, 192);
    block_crcs(landed, block_, b, b + k, crcs);
    memcpy(out.data() + sums_ + b * 4, crcs, k * 4);
    b += k;
  }
  copied_ = pos;
  if (copied_ < total_) return false;
  close_record(out, ext_, short_max_);
  close_record_at(out, rec_, rec_end_);
  done_ = true;
  return true;
}

bool get_extent_checksums(Reader& r, ExtentRef* e) {
  e->block_bytes = r.u32();
  uint64_t n = r.u64();
  if (!r.ok() || e->block_bytes == 0 || e->block_bytes > kMaxExtentBlockBytes || n > r.left() / 4) return false;
  std::string_view raw = r.bytes(n * 4);
  e->crcs.resize(n);
  if (n) memcpy(e->crcs.data(), raw.data(), raw.size());
  return r.ok();
}

bool extent_fits(const ExtentRef& e, uint64_t size) {
  return e.block_bytes && e.crcs.size() == block_count(size, e.block_bytes);
}

// The first block in [b0, b1) whose checksum does not match, or -1.
static int64_t first_bad_in(const ExtentRef& e, uint64_t b0, uint64_t b1) {
  uint32_t got[192];
  for (uint64_t b = b0; b < b1; b += 192) {
    uint64_t end = std::min<uint64_t>(b1, b + 192);
    block_crcs(e.bytes, e.block_bytes, b, end, got);
    for (uint64_t k = b; k < end; k++)
      if (got[k - b] != e.crcs[k]) return (int64_t)k;
  }
  return -1;
}

int64_t first_bad_block(const ExtentRef& e) {
  uint64_t n = e.crcs.size();
  // A big extent is checked by several threads (a reopen is bound by this
  // pass over the vectors), each taking a contiguous part.
  const unsigned parts = e.bytes.size() >= (8u << 20) ? (unsigned)std::min(4, port::cores()) : 1;
  if (parts == 1) return first_bad_in(e, 0, n);
  std::vector<int64_t> bad(parts, -1);
  port::run_parts(parts, [&](unsigned p) { bad[p] = first_bad_in(e, n * p / parts, n * (p + 1) / parts); });
  for (int64_t b : bad)
    if (b >= 0) return b;
  return -1;
}

LazyExtent::LazyExtent(const ExtentRef& e, ReadFn read, uint64_t chunk, CheckFn check)
    : e_(e), read_(std::move(read)), check_(std::move(check)), missing_(e.bytes.size()) {
  uint64_t words = (e.crcs.size() + 31) / 32;
  state_ = std::make_unique<std::atomic<uint64_t>[]>(words);
  for (uint64_t i = 0; i < words; i++) state_[i].store(0, std::memory_order_relaxed);
  chunk_blocks_ = std::max<uint64_t>(1, chunk / e.block_bytes);
  clean_.store(e.bytes.empty(), std::memory_order_release);
}

uint32_t LazyExtent::load(uint64_t b) {
  if (!read_) {
    // Checks alone need no lock: two threads may check one block at once,
    // and the first to publish it counts it.
    load_run(b, b + 1);
    return state(b);
  }
  std::lock_guard g(mu_);
  if (uint32_t s = state(b)) return s;  // another thread read it meanwhile
  // The missing runs of the aligned chunk around b.
  uint64_t nb = e_.crcs.size();
  uint64_t c = b / chunk_blocks_ * chunk_blocks_, end = std::min(nb, c + chunk_blocks_);
  while (c < end) {
    if (state(c)) {
      c++;
      continue;
    }
    uint64_t e = c + 1;
    while (e < end && !state(e)) e++;
    load_run(c, e);
    c = e;
  }
  return state(b);
}

// Reads blocks [b0, b1) with one read (the caller holds mu_ then; none of
// them is present) and checks each. Returns the bytes it made present.
uint64_t LazyExtent::load_run(uint64_t b0, uint64_t b1) {
  uint64_t off = b0 * e_.block_bytes;
  size_t n = (size_t)(std::min<uint64_t>(b1 * e_.block_bytes, e_.bytes.size()) - off);
  Status st = Status::ok();
  if (read_) {
    // The extent's memory is then the image buffer, owned by the engine and
    // written only here, before anything reads these bytes.
    st = read_(e_.file_offset + off, const_cast<char*>(e_.bytes.data()) + off, n);
  }
  const char* p = e_.bytes.data() + off;
  uint32_t got[192];
  uint64_t done = 0;
  for (uint64_t b = b0; b < b1; b++) {
    if ((b - b0) % 192 == 0 && st.is_ok()) block_crcs(e_.bytes, e_.block_bytes, b, std::min(b1, b + 192), got);
    size_t bo = (size_t)(b - b0) * e_.block_bytes;
    size_t bn = std::min<size_t>(e_.block_bytes, n - bo);
    const char* what = nullptr;
    if (!st.is_ok()) what = "could not be read";
    else if (got[(b - b0) % 192] != e_.crcs[b]) what = "checksum mismatch";
    else if (check_ && !check_(p + bo, bn)) what = "contents out of range";
    uint64_t s = kPresent;
    if (what) {
      s = kDamaged;
      std::unique_lock g(mu_, std::defer_lock);
      if (!read_) g.lock();  // (held already when reading)
      if (!zeros_) zeros_ = std::make_unique<char[]>(e_.block_bytes);  // zero-filled
      if (!damaged_at()) {
        damage_ = std::string(what) + (st.is_ok() ? "" : ": " + st.message());
        damaged_at_.store(e_.file_offset + off + bo, std::memory_order_release);
        damaged_anywhere_.store(true, std::memory_order_release);
      }
    }
    uint64_t shift = (b & 31) * 2;
    uint64_t before = state_[b >> 5].fetch_or(s << shift, std::memory_order_acq_rel);
    if (!(before >> shift & 3)) done += bn;
  }
  uint64_t left = missing_.fetch_sub(done, std::memory_order_acq_rel) - done;
  if (left == 0 && !damaged_at()) clean_.store(true, std::memory_order_release);
  return done;
}

void LazyExtent::copy_to(char* dst) {
  warm(UINT64_MAX);
  memcpy(dst, e_.bytes.data(), e_.bytes.size());
  if (!damaged_at()) return;
  uint64_t nb = e_.crcs.size();
  for (uint64_t b = 0; b < nb; b++)
    if (state(b) == kDamaged) {
      uint64_t off = b * e_.block_bytes;
      memset(dst + off, 0, (size_t)std::min<uint64_t>(e_.block_bytes, e_.bytes.size() - off));
    }
}

uint64_t LazyExtent::warm(uint64_t budget) {
  uint64_t nb = e_.crcs.size(), done = 0;
  while (done < budget) {
    std::unique_lock g(mu_);
    while (next_ < nb && state(next_)) next_++;
    if (next_ >= nb) break;
    uint64_t b = next_, e = b + 1, limit = b + std::max<uint64_t>(1, (budget - done) / e_.block_bytes);
    while (e < nb && e < limit && !state(e)) e++;
    next_ = e;
    if (!read_) g.unlock();  // checks alone run beside need() (see load)
    done += load_run(b, e);
  }
  return done;
}

}  // namespace kitfox
