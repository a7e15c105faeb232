// IdIndex: a collection's document id -> location map, kept as a sorted flat
// array (loaded from the image's IdIndex record with one copy) plus a small
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
// Beside the array it keeps where every 64th entry's document was when the
// entry came (a 128th of the array's bytes: 128 KiB at a million documents,
// which stays in cache). A point read guesses from them where its document
// lies before the entry itself arrives from memory, so that the two misses
// overlap (likely_loc). Documents written in id order (an image, a bulk
// load) are guessed within a line or two; a guess is only ever prefetched,
// so a stale or wrong one costs a wasted load, never a wrong answer.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../huge_pages.h"
#include "../port.h"

namespace kitfox {

struct IdEntry {
  int64_t id;
  uint64_t loc;
};

// The sorted array of an id index: grown at its end with no copy
// (huge_pages.h), so the common append never copies the whole index.
using IdEntries = GrowArray<IdEntry>;

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

  // A copy of `o` whose sorted array is kept in `storage` (memory a former
  // copy used: copying into pages already touched costs a fifth of fresh
  // ones); take_storage() hands it back. A copy of an index in the middle of
  // a merge is one array and an overlay.
  void copy_from(const IdIndex& o, IdEntries&& storage) {
    base_ = std::move(storage);
    end_merge();
    if (!o.merging_) {
      base_.assign(o.base_.begin(), o.base_.end());
      extra_ = o.extra_;
      dead_ = o.dead_;
    } else {
      base_.clear();
      base_.reserve(o.live_);
      o.scan([&](const IdEntry& e) {
        base_.push_back(e);
        return true;
      });
      extra_.clear();
      dead_ = 0;
    }
    live_ = o.live_;
    hint_.clear();  // a pinned read's copy: it guesses nothing (likely_loc)
  }
  IdEntries take_storage() {
    IdEntries out;
    out.swap(base_);
    clear();
    return out;
  }

  // Replaces the contents with sorted, unique, live entries; `sorted` gets
  // the entries that were here (to be freed where it costs no one).
  void swap_in(IdEntries& sorted) {
    base_.swap(sorted);
    extra_.clear();
    end_merge();
    live_ = base_.size();
    dead_ = 0;
    rehint();
  }
  void assign(IdEntries sorted) {
    base_ = std::move(sorted);
    extra_.clear();
    end_merge();
    live_ = base_.size();
    dead_ = 0;
    rehint();
  }

  const uint64_t* find(int64_t id) const {
    if (const IdEntry* e = marked_slot(id)) return e->loc == kDead ? nullptr : &e->loc;
    if (const IdEntry* e = locate(extra_.data(), extra_.size(), id)) return &e->loc;
    return nullptr;
  }

  // Inserts or replaces; returns the previous location or kDead.
  uint64_t put(int64_t id, uint64_t loc) {
    uint64_t old = kDead;
    if (above_all(id)) {  // the common append
      if (merging_) old_.push_back({id, loc});
      else push_base({id, loc});
      live_++;
    } else if (IdEntry* e = const_cast<IdEntry*>(marked_slot(id))) {
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
    if (const size_t g = first_probe(base_.data(), base_.size(), id); g != kNoProbe) {
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
      const size_t g = first_probe(base_.data(), base_.size(), id);
      if (g == kNoProbe) return;
      port::prefetch(&base_[g], sizeof(IdEntry));
      if (const uint64_t l = guess_at(g); l != kDead) ahead(l);
    }
  }
  // Where the document of `id` likely is, or kDead for no guess.
  uint64_t likely_loc(int64_t id) const {
    const size_t g = first_probe(base_.data(), base_.size(), id);
    return g == kNoProbe ? kDead : guess_at(g);
  }

  // Moves id to `to` if it is still at `from` (a checkpoint's new image
  // taking the place of a document no write changed since its pin).
  void move_if_at(int64_t id, uint64_t from, uint64_t to) {
    if (uint64_t* l = const_cast<uint64_t*>(find(id)); l && *l == from) *l = to;
  }

  // Removes; returns the previous location or kDead.
  uint64_t erase(int64_t id) {
    uint64_t old = kDead;
    if (IdEntry* e = const_cast<IdEntry*>(marked_slot(id))) {
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
    // Up to four sorted parts, merged as they are read.
    struct Part {
      const IdEntry* at;
      const IdEntry* end;
    } parts[4];
    int n = 0;
    auto add = [&](const IdEntry* p, size_t k) {
      if (k) parts[n++] = {p, p + k};
    };
    add(base_.data(), base_.size());
    if (merging_) {
      add(old_.data() + oi_, old_.size() - oi_);
      add(oext_.data() + oj_, oext_.size() - oj_);
    }
    add(extra_.data(), extra_.size());
    if (n == 1) {  // the array alone, as it mostly is
      for (const IdEntry* e = parts[0].at; e != parts[0].end; ++e)
        if (e->loc != kDead && !f(*e)) return;
      return;
    }
    while (n) {
      int m = 0;
      for (int i = 1; i < n; i++)
        if (parts[i].at->id < parts[m].at->id) m = i;
      const IdEntry& e = *parts[m].at++;
      if (parts[m].at == parts[m].end) parts[m] = parts[--n];
      if (e.loc == kDead) continue;
      if (!f(e)) return;
    }
  }

  // Entries a merge under way has still to move (0 when none is).
  size_t merge_left() const { return merging_ ? (old_.size() - oi_) + (oext_.size() - oj_) : 0; }

  // What its pages hold (the arrays' mappings are reserved ahead, untouched).
  size_t memory_bytes() const {
    return (base_.size() + old_.size() + extra_.capacity() + oext_.capacity()) * sizeof(IdEntry) +
           hint_.capacity() * sizeof(uint64_t);
  }

 private:
  static constexpr size_t kHintEvery = 64;
  static constexpr size_t kNoProbe = ~size_t{0};

  // Where the id would be if ids were evenly spread (auto ids are: the probe
  // finds them with one memory access instead of the ~17 of a binary search
  // over 100k entries); kNoProbe when it is outside v's ids or v holds one.
  static size_t first_probe(const IdEntry* v, size_t n, int64_t id) {
    if (n == 0 || id < v[0].id || id > v[n - 1].id) return kNoProbe;
    uint64_t span = (uint64_t)v[n - 1].id - (uint64_t)v[0].id;
    if (!span) return kNoProbe;
    size_t g = (size_t)((double)((uint64_t)id - (uint64_t)v[0].id) / (double)span * (double)(n - 1));
    return g >= n ? n - 1 : g;
  }

  // The first probe, then a binary search on its side.
  static const IdEntry* locate(const IdEntry* v, size_t n, int64_t id) {
    if (n == 0 || id < v[0].id || id > v[n - 1].id) return nullptr;
    size_t lo = 0, hi = n;
    if (size_t g = first_probe(v, n, id); g != kNoProbe) {
      if (v[g].id == id) return &v[g];
      if (v[g].id < id) lo = g + 1;
      else hi = g;
    }
    const IdEntry* it = std::lower_bound(v + lo, v + hi, id, [](const IdEntry& e, int64_t x) { return e.id < x; });
    return it != v + hi && it->id == id ? it : nullptr;
  }

  // The entry of id in a part that marks deletions (the arrays, and the
  // old overlay while merged), dead or alive; null when it is in none.
  const IdEntry* marked_slot(int64_t id) const {
    if (const IdEntry* e = locate(base_.data(), base_.size(), id)) return e;
    if (!merging_) return nullptr;
    if (const IdEntry* e = locate(old_.data() + oi_, old_.size() - oi_, id)) return e;
    return locate(oext_.data() + oj_, oext_.size() - oj_, id);
  }
  // Where id is or would go in the overlay.
  std::vector<IdEntry>::iterator overlay_at(int64_t id) {
    return std::lower_bound(extra_.begin(), extra_.end(), id, [](const IdEntry& e, int64_t v) { return e.id < v; });
  }

  // True when id is above every id held (live or marked).
  bool above_all(int64_t id) const {
    auto below = [&](const IdEntry* v, size_t n) { return n == 0 || v[n - 1].id < id; };
    if (!below(base_.data(), base_.size()) || !below(extra_.data(), extra_.size())) return false;
    return !merging_ || (below(old_.data() + oi_, old_.size() - oi_) && below(oext_.data() + oj_, oext_.size() - oj_));
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
    old_.release();
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

  IdEntries base_;
  std::vector<uint64_t> hint_;  // base_[64 k].loc when it was appended (likely_loc)
  std::vector<IdEntry> extra_;  // small: merged past 1,024 + size / 32
  size_t live_ = 0;
  size_t dead_ = 0;  // marked entries in base_, and in old_ and oext_ while merging
  // A merge under way: what is left of the old array (from oi_) and of the
  // old overlay (from oj_).
  bool merging_ = false;
  IdEntries old_;
  std::vector<IdEntry> oext_;
  size_t oi_ = 0, oj_ = 0;
};

}  // namespace kitfox
