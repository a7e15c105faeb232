// IdIndex: a collection's document id -> location map, kept as a sorted flat
// array (built on open from the image's documents) plus a small
// sorted overlay for ids that arrive out of order. Auto-assigned ids only
// ever append. Deleted entries are marked and skipped.
//
// When the overlay grows past 1,024 + size / 32 entries, or the marks past
// half the array, the two are merged into a new array in pieces: each later
// put or erase moves at most kMergeStep entries, so no write waits for a
// whole array's copy (16 MiB at a million documents). Meanwhile the index
// has four sorted parts, each id in at most one: the new array (every id
// below what is left to merge), what is left of the old array and of the
// old overlay, and a new overlay. Ids above all of them append to what is
// left of the old array, which the merge reaches last.
//
// The arrays are blocks of 16,384 entries (256 KiB), each shared by
// reference count: a pinned read's copy (copy_from) takes the blocks, not
// their entries, in microseconds, and a write that then changes a block a
// copy shares copies that one block first (IdBlocks::own). A long read or a
// checkpoint pinning a million documents so holds the lock for a few
// dozen block references instead of a 16 MiB copy.
//
// Beside the array it keeps where every 64th entry's document was when the
// entry came (a 128th of the array's bytes: 128 KiB at a million documents,
// which stays in cache). A point read guesses from them where its document
// lies before the entry itself arrives from memory, so that the two misses
// overlap (likely_loc). Documents written in id order (an image, a bulk
// load) are guessed within a line or two; a guess is only ever prefetched,
// so a stale or wrong one costs a wasted load, never a wrong answer.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "../huge_pages.h"
#include "../port.h"

namespace kitfox {

struct IdEntry {
  int64_t id;
  uint64_t loc;
};

// A sorted array of id entries in blocks of kBlock, shared between an index
// and the pinned copies made of it (a copy of an IdBlocks shares its
// blocks). Writing an entry, or appending into a block, first gives the
// block to this array alone (own): a copy of it when another shares it. So
// the common append never copies the whole array, and a pin never does.
class IdBlocks {
 public:
  static constexpr size_t kShift = 14, kBlock = size_t{1} << kShift, kMask = kBlock - 1;
  // On Linux (kHugeBlocks), past this many blocks (2 MiB) new blocks are
  // carved from pieces of this many, each a huge_block: writing an array of
  // a million entries then costs a few faults instead of one every 4 KiB
  // (6.5 ms of 16 MiB's on the benchmark machine). Told how big it will be
  // (expect), an array takes one piece for all of it. A piece is freed when
  // its last block goes; until then the blocks of it that went still take
  // their memory.
  static constexpr size_t kPieceBlocks = 8;

  IdBlocks() = default;
  // A copy shares the blocks, not the piece new ones are carved from.
  IdBlocks(const IdBlocks& o) : blocks_(o.blocks_), at_(o.at_), n_(o.n_), first_cap_(o.first_cap_) {}
  IdBlocks& operator=(const IdBlocks& o) {
    if (this != &o) {
      IdBlocks t(o);
      swap(t);
    }
    return *this;
  }
  IdBlocks(IdBlocks&& o) noexcept { swap(o); }  // o left empty
  IdBlocks& operator=(IdBlocks&& o) noexcept {
    IdBlocks t(std::move(o));
    swap(t);
    return *this;
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const IdEntry& operator[](size_t i) const { return at_[i >> kShift][i & kMask]; }
  const IdEntry& front() const { return (*this)[0]; }
  const IdEntry& back() const { return (*this)[n_ - 1]; }
  // The entry to write: its block copied first if another array shares it.
  IdEntry& mut(size_t i) {
    own(i >> kShift);
    return at_[i >> kShift][i & kMask];
  }
  void push_back(const IdEntry& e) {
    room(1);
    at_[n_ >> kShift][n_ & kMask] = e;
    n_++;
  }
  // n entries from p, which need not be aligned (an image's bytes).
  void append(const void* p, size_t n) {
    const char* from = static_cast<const char*>(p);
    while (n) {
      const size_t at = n_ & kMask, k = std::min(n, kBlock - at);
      room(k);
      std::memcpy(at_[n_ >> kShift] + at, from, k * sizeof(IdEntry));
      n_ += k;
      from += k * sizeof(IdEntry);
      n -= k;
    }
  }
  // Told that about k more entries will come (a collection's documents in
  // an image, a checkpoint's new index): when that takes the array past
  // kPieceBlocks blocks, its new blocks are carved from the first on, the
  // next piece sized for them all. A wrong guess costs address space: a
  // piece's pages are taken as its blocks are written.
  void expect(size_t k) {
    const size_t total = n_ + std::min(k, kMaxPieceBlocks * kBlock);
    if (total < kPieceBlocks * kBlock) return;
    carve_all_ = true;
    next_piece_ = std::max(kPieceBlocks, ((total + kMask) >> kShift) - std::min(blocks_.size(), (total + kMask) >> kShift));
  }
  // Forgets the entries from n on (their blocks stay).
  void truncate(size_t n) { n_ = std::min(n, n_); }
  void clear() {
    blocks_.clear();
    at_.clear();
    n_ = first_cap_ = 0;
    piece_.reset();
    piece_used_ = piece_blocks_ = 0;
    next_piece_ = kPieceBlocks;
    carve_all_ = false;
  }
  void swap(IdBlocks& o) noexcept {
    blocks_.swap(o.blocks_);
    at_.swap(o.at_);
    std::swap(n_, o.n_);
    std::swap(first_cap_, o.first_cap_);
    piece_.swap(o.piece_);
    std::swap(piece_used_, o.piece_used_);
    std::swap(piece_blocks_, o.piece_blocks_);
    std::swap(next_piece_, o.next_piece_);
    std::swap(carve_all_, o.carve_all_);
  }
  // f(entries, count) over the array's runs in order, from entry `from`;
  // the mutable form owns each block first.
  template <typename F>
  void for_each_run(F&& f, size_t from = 0) const {
    for (size_t b = from / kBlock; b * kBlock < n_; b++) {
      const size_t skip = b == from / kBlock ? from % kBlock : 0;
      f((const IdEntry*)at_[b] + skip, std::min(kBlock, n_ - b * kBlock) - skip);
    }
  }
  template <typename F>
  void for_each_run_mut(F&& f) {
    for (size_t b = 0; b * kBlock < n_; b++) {
      own(b);
      f(at_[b], std::min(kBlock, n_ - b * kBlock));
    }
  }
  // The bytes of its blocks, and of those no other array shares.
  size_t memory_bytes() const { return block_bytes(false); }
  size_t owned_bytes() const { return block_bytes(true); }

 private:
  // A counted reference to a block's entries. Copies are made under the
  // engine's lock, but a pinned read lets its copy go with no lock held, on
  // its own thread: its last reads of a block must come before a write
  // that finds the block alone, so the count drops with release and is read
  // with acquire (what shared_ptr::use_count, a relaxed load, does not give).
  class Block {
   public:
    Block() = default;
    explicit Block(size_t cap) : p_(new Shared{{1}, nullptr, std::unique_ptr<IdEntry[]>(new IdEntry[cap]), {}}) {
      p_->e = p_->own.get();
    }
    // Entries in a piece of memory other blocks share (kPieceBlocks).
    Block(std::shared_ptr<char> piece, IdEntry* at) : p_(new Shared{{1}, at, nullptr, std::move(piece)}) {}
    Block(const Block& o) : p_(o.p_) {
      if (p_) p_->refs.fetch_add(1, std::memory_order_relaxed);
    }
    Block(Block&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    Block& operator=(Block o) noexcept {
      std::swap(p_, o.p_);
      return *this;
    }
    ~Block() {
      if (p_ && p_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete p_;
    }
    IdEntry* get() const { return p_->e; }
    // No other array holds it; whatever the others did with it happened before.
    bool alone() const { return p_->refs.load(std::memory_order_acquire) == 1; }

   private:
    struct Shared {
      std::atomic<uint32_t> refs;
      IdEntry* e;  // not zeroed: entries are written before they are read
      std::unique_ptr<IdEntry[]> own;  // e's memory, or
      std::shared_ptr<char> piece;     // the piece it lies in
    };
    Shared* p_ = nullptr;
  };
  size_t cap(size_t b) const { return b ? kBlock : first_cap_; }
  size_t block_bytes(bool alone_only) const {
    size_t n = 0;
    for (size_t b = 0; b < blocks_.size(); b++) n += !alone_only || blocks_[b].alone() ? cap(b) : 0;
    return n * sizeof(IdEntry);
  }
  // Room for k more entries in the block n_ is in (k fits in it), that
  // block this array's own. The first block starts small and doubles, so
  // a small collection takes little; the others are whole.
  void room(size_t k) {
    const size_t b = n_ >> kShift, need = (n_ & kMask) + k;
    if (b == blocks_.size()) {
      const size_t c = b ? kBlock : std::min(kBlock, std::max<size_t>(need, 16));
      at_.push_back(nullptr);
      blocks_.emplace_back();
      if ((b < kPieceBlocks && !carve_all_) || !carve(b)) place(b, c);
    } else if (need > cap(b)) {
      place(b, std::min(kBlock, std::max(need, 2 * cap(b))));
    } else {
      own(b);
    }
  }
  // Block b (new) in the next slot of the piece, a new piece when it is full.
  bool carve(size_t b) {
    if constexpr (!kHugeBlocks) return false;
    if (!piece_) {
      piece_blocks_ = next_piece_;
      next_piece_ = kPieceBlocks;
      piece_ = huge_block(piece_blocks_ * kBlock * sizeof(IdEntry));
      piece_used_ = 0;
      if (!piece_) return false;
    }
    IdEntry* at = reinterpret_cast<IdEntry*>(piece_.get()) + piece_used_++ * kBlock;
    blocks_[b] = Block(piece_, at);
    at_[b] = at;
    if (b == 0) first_cap_ = kBlock;
    if (piece_used_ == piece_blocks_) piece_.reset();  // full: its blocks alone keep it
    return true;
  }
  // Block b in new memory of c entries, holding what it held.
  void place(size_t b, size_t c) {
    Block nb(c);
    const size_t used = std::min(kBlock, n_ - std::min(n_, b * kBlock));
    if (used) std::memcpy(nb.get(), at_[b], used * sizeof(IdEntry));
    at_[b] = nb.get();
    blocks_[b] = std::move(nb);
    if (b == 0) first_cap_ = c;
  }
  // Only an index's own thread under the write lock writes or copies an
  // IdBlocks; a copy shares blocks while it lives (and lets them go on any
  // thread): a count read as shared that a pin's end has just dropped costs
  // a needless copy.
  void own(size_t b) {
    if (!blocks_[b].alone()) place(b, cap(b));
  }
  std::vector<Block> blocks_;
  std::vector<IdEntry*> at_;  // each block's entries, without the count beside them
  size_t n_ = 0;
  size_t first_cap_ = 0;  // entries block 0 has room for
  // The most expect() takes ahead: 4 GiB, or 64 MiB in a 32-bit build.
  static constexpr size_t kMaxPieceBlocks = sizeof(size_t) >= 8 ? 1 << 14 : 1 << 8;
  std::shared_ptr<char> piece_;  // where new blocks are carved, its slots used of how many
  size_t piece_used_ = 0, piece_blocks_ = 0;
  size_t next_piece_ = kPieceBlocks;  // the blocks of the piece taken next
  bool carve_all_ = false;       // from the first block on (expect)
};

class IdIndex {
 public:
  static constexpr uint64_t kDead = ~0ull;
  // Entries a put or an erase moves while a merge is under way. A merge
  // starts with at most size + marks entries to move (marks at most half of
  // them) and the overlay that starts it again needs 1,024 + size / 32
  // inserts, so each op moving 128 ends the merge before another is due.
  static constexpr size_t kMergeStep = 128;

  size_t size() const { return live_; }
  void clear() {
    base_.clear();
    hint_.clear();
    extra_.clear();
    end_merge();
    live_ = 0;
    dead_ = 0;
  }

  // A copy of `o` for a pinned read: it shares o's blocks (IdBlocks), so it
  // costs a reference a block and a copy of the small overlays, and a write
  // to `o` after it copies the block it changes. A copy of an index in the
  // middle of a merge is in the same middle.
  void copy_from(const IdIndex& o) {
    base_ = o.base_;
    old_ = o.old_;
    extra_ = o.extra_;
    oext_ = o.oext_;
    oi_ = o.oi_;
    oj_ = o.oj_;
    merging_ = o.merging_;
    live_ = o.live_;
    dead_ = o.dead_;
    hint_.clear();  // a pinned read's copy: it guesses nothing (likely_loc)
  }

  // Replaces the contents with sorted, unique, live entries; `sorted` gets
  // the entries that were here (to be freed where it costs no one).
  void swap_in(IdBlocks& sorted) {
    base_.swap(sorted);
    extra_.clear();
    end_merge();
    live_ = base_.size();
    dead_ = 0;
    rehint();
  }
  void assign(IdBlocks sorted) { swap_in(sorted); }

  const uint64_t* find(int64_t id) const {
    if (const IdEntry* e = marked_slot(id)) return e->loc == kDead ? nullptr : &e->loc;
    if (const IdEntry* e = locate_in(extra_, 0, id)) return &e->loc;
    return nullptr;
  }

  // Inserts or replaces; returns the previous location or kDead.
  uint64_t put(int64_t id, uint64_t loc) {
    uint64_t old = kDead;
    if (above_all(id)) {  // the common append
      if (merging_) old_.push_back({id, loc});
      else push_base({id, loc});
      live_++;
    } else if (IdEntry* e = marked_slot_mut(id)) {
      old = e->loc;
      e->loc = loc;
      if (old == kDead) {
        live_++;
        dead_--;
      }
    } else {
      auto it = overlay_at(id);
      if (it != extra_.end() && it->id == id) {
        old = it->loc;
        it->loc = loc;
      } else {
        extra_.insert(it, {id, loc});
        live_++;
        if (extra_.size() > 1024 + live_ / 32) begin_merge();
      }
    }
    step();
    return old;
  }

  // find(), calling ahead(loc) first with where the document likely is
  // (a guess, see likely_loc) so that its load starts beside the entry's.
  template <typename F>
  const uint64_t* find(int64_t id, F&& ahead) const {
    if (const size_t g = first_probe(base_, 0, base_.size(), id); g != kNoProbe) {
      if (const uint64_t l = guess_at(g); l != kDead) ahead(l);
      const IdEntry& e = base_[g];
      if (e.id == id) return e.loc == kDead ? nullptr : &e.loc;
    }
    return find(id);
  }
  // Starts loading id's entry and, where it guesses one, calls ahead(loc)
  // with where its document likely is, waiting for neither: a read of many
  // ids asks a few ids ahead, so that their misses overlap (natively; the
  // WASM build has no prefetch and does nothing).
  template <typename F>
  void prefetch(int64_t id, F&& ahead) const {
    if constexpr (port::kPrefetch) {
      const size_t g = first_probe(base_, 0, base_.size(), id);
      if (g == kNoProbe) return;
      port::prefetch(&base_[g], sizeof(IdEntry));
      if (const uint64_t l = guess_at(g); l != kDead) ahead(l);
    }
  }
  // Where the document of `id` likely is, or kDead for no guess.
  uint64_t likely_loc(int64_t id) const {
    const size_t g = first_probe(base_, 0, base_.size(), id);
    return g == kNoProbe ? kDead : guess_at(g);
  }

  // Moves id to `to` if it is still at `from` (a checkpoint's new image
  // taking the place of a document no write changed since its pin).
  void move_if_at(int64_t id, uint64_t from, uint64_t to) {
    if (IdEntry* e = marked_slot_mut(id)) {
      if (e->loc == from) e->loc = to;  // a marked one is at kDead, never `from`
    } else if (auto it = overlay_at(id); it != extra_.end() && it->id == id && it->loc == from) {
      it->loc = to;
    }
  }

  // move_if_at for n ids in ascending order, the k-th given by at(k) as
  // {id, from, to}: the array is walked along with them instead of searched
  // for each (a checkpoint moves a million so, a piece at a time under the
  // write lock). An id the array does not hold takes move_if_at's way.
  template <typename At>
  void move_ascending(size_t n, At&& at) {
    size_t p = kNoProbe;
    for (size_t k = 0; k < n; k++) {
      const auto [id, from, to] = at(k);
      if (p == kNoProbe) {  // the first, or after one the array did not hold
        p = locate(base_, 0, base_.size(), id);
        if (p == kNoProbe) {
          move_if_at(id, from, to);
          continue;
        }
      }
      for (int steps = 0; p < base_.size() && base_[p].id < id && steps < 16; steps++) p++;
      if (p < base_.size() && base_[p].id < id) p = locate(base_, p, base_.size(), id);  // far ahead: searched
      if (p != kNoProbe && p < base_.size() && base_[p].id == id) {
        if (base_[p].loc == from) base_.mut(p).loc = to;
      } else {
        move_if_at(id, from, to);  // held elsewhere, or nowhere; p, where it is, still comes after it
      }
    }
  }

  // Removes; returns the previous location or kDead.
  uint64_t erase(int64_t id) {
    uint64_t old = kDead;
    if (IdEntry* e = marked_slot_mut(id)) {
      old = e->loc;
      if (old != kDead) {
        e->loc = kDead;
        live_--;
        dead_++;
        // Not while a merge runs: it drops the marks it has still to reach,
        // and marks made meanwhile are counted for the next.
        if (!merging_ && dead_ > 1024 && dead_ > (live_ + dead_) / 2) begin_merge();
      }
    } else {
      auto it = overlay_at(id);
      if (it != extra_.end() && it->id == id) {
        old = it->loc;
        extra_.erase(it);
        live_--;
      }
    }
    step();
    return old;
  }

  // Visits live entries in ascending id order until f returns false.
  template <typename F>
  void scan(F&& f) const {
    scan_from(INT64_MIN, f);
  }
  // The same from the first id not below `first` (a checkpoint's build
  // going on where it stopped).
  template <typename F>
  void scan_from(int64_t first, F&& f) const {
    if (!merging_ && extra_.empty()) {  // the array alone, as it mostly is
      bool go = true;
      base_.for_each_run(
          [&](const IdEntry* e, size_t n) {
            for (size_t i = 0; i < n && go; i++)
              if (e[i].loc != kDead && !f(e[i])) go = false;
          },
          first == INT64_MIN ? 0 : lower(base_, 0, base_.size(), first));
      return;
    }
    // Up to four sorted parts, merged as they are read.
    struct Part {
      const IdBlocks* blocks;
      const IdEntry* flat;
      size_t at, end;
      const IdEntry& cur() const { return blocks ? (*blocks)[at] : flat[at]; }
    } parts[4];
    int n = 0;
    auto add = [&](const IdBlocks* b, const IdEntry* flat, size_t from, size_t end) {
      if (first != INT64_MIN) from = b ? lower(*b, from, end, first) : lower(flat, from, end, first);
      if (from < end) parts[n++] = {b, flat, from, end};
    };
    add(&base_, nullptr, 0, base_.size());
    if (merging_) {
      add(&old_, nullptr, oi_, old_.size());
      add(nullptr, oext_.data(), oj_, oext_.size());
    }
    add(nullptr, extra_.data(), 0, extra_.size());
    while (n) {
      int m = 0;
      for (int i = 1; i < n; i++)
        if (parts[i].cur().id < parts[m].cur().id) m = i;
      const IdEntry& e = parts[m].cur();
      if (++parts[m].at == parts[m].end) parts[m] = parts[--n];
      if (e.loc == kDead) continue;
      if (!f(e)) return;
    }
  }

  // Entries a merge under way has still to move (0 when none is).
  size_t merge_left() const { return merging_ ? (old_.size() - oi_) + (oext_.size() - oj_) : 0; }

  // What its memory holds, blocks shared with pinned copies included.
  size_t memory_bytes() const {
    return base_.memory_bytes() + old_.memory_bytes() + (extra_.capacity() + oext_.capacity()) * sizeof(IdEntry) +
           hint_.capacity() * sizeof(uint64_t);
  }
  // The bytes of its blocks no pinned copy shares (tests).
  size_t owned_block_bytes() const { return base_.owned_bytes() + old_.owned_bytes(); }

 private:
  static constexpr size_t kHintEvery = 64;
  static constexpr size_t kNoProbe = ~size_t{0};

  // Where the id would be among v[from, end) if ids were evenly spread (auto
  // ids are: the probe finds them with one memory access instead of the ~17
  // of a binary search over 100k entries); kNoProbe when it is outside
  // their ids or they hold one. V: IdBlocks or a std::vector.
  template <typename V>
  static size_t first_probe(const V& v, size_t from, size_t end, int64_t id) {
    if (from >= end || id < v[from].id || id > v[end - 1].id) return kNoProbe;
    uint64_t span = (uint64_t)v[end - 1].id - (uint64_t)v[from].id;
    if (!span) return kNoProbe;
    const size_t n = end - from;
    size_t g = (size_t)((double)((uint64_t)id - (uint64_t)v[from].id) / (double)span * (double)(n - 1));
    return from + (g >= n ? n - 1 : g);
  }

  // The index of the first entry of v[from, end) whose id is not below id
  // (end when none). V: IdBlocks or a pointer to entries.
  template <typename V>
  static size_t lower(const V& v, size_t from, size_t end, int64_t id) {
    while (from < end) {
      const size_t mid = from + (end - from) / 2;
      if (v[mid].id < id) from = mid + 1;
      else end = mid;
    }
    return from;
  }

  // The index of id among v[from, end): the first probe, then a binary
  // search on its side; kNoProbe when absent.
  template <typename V>
  static size_t locate(const V& v, size_t from, size_t end, int64_t id) {
    if (from >= end || id < v[from].id || id > v[end - 1].id) return kNoProbe;
    size_t lo = from, hi = end;
    if (size_t g = first_probe(v, from, end, id); g != kNoProbe) {
      if (v[g].id == id) return g;
      if (v[g].id < id) lo = g + 1;
      else hi = g;
    }
    lo = lower(v, lo, hi, id);
    return lo < end && v[lo].id == id ? lo : kNoProbe;
  }
  static const IdEntry* locate_in(const std::vector<IdEntry>& v, size_t from, int64_t id) {
    const size_t i = locate(v, from, v.size(), id);
    return i == kNoProbe ? nullptr : &v[i];
  }

  // The entry of id in a part that marks deletions (the arrays, and the
  // old overlay while merged), dead or alive; null when it is in none.
  const IdEntry* marked_slot(int64_t id) const {
    if (size_t i = locate(base_, 0, base_.size(), id); i != kNoProbe) return &base_[i];
    if (!merging_) return nullptr;
    if (size_t i = locate(old_, oi_, old_.size(), id); i != kNoProbe) return &old_[i];
    return locate_in(oext_, oj_, id);
  }
  // The same entry to write (its block this index's alone first).
  IdEntry* marked_slot_mut(int64_t id) {
    if (size_t i = locate(base_, 0, base_.size(), id); i != kNoProbe) return &base_.mut(i);
    if (!merging_) return nullptr;
    if (size_t i = locate(old_, oi_, old_.size(), id); i != kNoProbe) return &old_.mut(i);
    return const_cast<IdEntry*>(locate_in(oext_, oj_, id));  // the overlays are this index's own
  }
  // Where id is or would go in the overlay.
  std::vector<IdEntry>::iterator overlay_at(int64_t id) {
    return std::lower_bound(extra_.begin(), extra_.end(), id, [](const IdEntry& e, int64_t v) { return e.id < v; });
  }

  // True when id is above every id held (live or marked).
  bool above_all(int64_t id) const {
    auto below = [&](const auto& v, size_t from) { return from >= v.size() || v[v.size() - 1].id < id; };
    if (!below(base_, 0) || !below(extra_, 0)) return false;
    return !merging_ || (below(old_, oi_) && below(oext_, oj_));
  }

  void begin_merge() {
    if (merging_) {  // a second one due before the first ended: end it now (see kMergeStep)
      while (merging_) step();
    }
    old_.swap(base_);
    base_.clear();
    hint_.clear();
    oext_.swap(extra_);
    extra_.clear();
    oi_ = oj_ = 0;
    merging_ = true;
  }

  // Moves up to kMergeStep entries of the old parts, in id order, into the
  // new array (marked ones dropped); ends the merge when none is left.
  void step() {
    if (!merging_) return;
    for (size_t k = 0; k < kMergeStep; k++) {
      const bool have_old = oi_ < old_.size(), have_ext = oj_ < oext_.size();
      if (!have_old && !have_ext) break;
      const IdEntry e = have_old && (!have_ext || old_[oi_].id < oext_[oj_].id) ? old_[oi_++] : oext_[oj_++];
      if (e.loc == kDead) dead_--;
      else push_base(e);
    }
    if (oi_ == old_.size() && oj_ == oext_.size()) end_merge();
  }

  void end_merge() {
    merging_ = false;
    old_.clear();
    std::vector<IdEntry>().swap(oext_);
    oi_ = oj_ = 0;
  }

  // The guess for the document of the entry at g: between the places of
  // the 64th entries on either side of it, in proportion.
  uint64_t guess_at(size_t g) const {
    if (hint_.size() != (base_.size() + kHintEvery - 1) / kHintEvery) return kDead;
    const size_t b = g / kHintEvery, r = g % kHintEvery;
    const uint64_t lo = hint_[b];
    // Past the last 64th entry, the block before it gives the step.
    const bool last = b + 1 == hint_.size();
    if (last && b == 0) return r ? kDead : lo;
    const uint64_t a = last ? hint_[b - 1] : lo, z = last ? lo : hint_[b + 1];
    if ((a >> 40) != (z >> 40) || z <= a || z - a > (1ull << 30)) return r ? kDead : lo;
    return lo + (z - a) * r / kHintEvery;
  }

  // Appends to the array, noting every 64th entry's location.
  void push_base(const IdEntry& e) {
    if (base_.size() % kHintEvery == 0 && hint_.size() == base_.size() / kHintEvery) hint_.push_back(e.loc);
    base_.push_back(e);
  }
  void rehint() {
    hint_.clear();
    hint_.reserve((base_.size() + kHintEvery - 1) / kHintEvery);
    for (size_t i = 0; i < base_.size(); i += kHintEvery) hint_.push_back(base_[i].loc);
  }

  IdBlocks base_;
  std::vector<uint64_t> hint_;  // base_[64 k].loc when it was appended (likely_loc)
  std::vector<IdEntry> extra_;  // small: merged past 1,024 + size / 32
  size_t live_ = 0;
  size_t dead_ = 0;  // marked entries in base_, and in old_ and oext_ while merging
  // A merge under way: what is left of the old array (from oi_) and of the
  // old overlay (from oj_).
  bool merging_ = false;
  IdBlocks old_;
  std::vector<IdEntry> oext_;
  size_t oi_ = 0, oj_ = 0;
};

}  // namespace kitfox
