// IdIndex: a collection's document id -> location map, kept as a sorted flat
// array (loaded from the image's IdIndex record with one copy) plus a small
// sorted overlay for ids that arrive out of order, merged when it grows.
// Auto-assigned ids only ever append. Deleted entries are marked and skipped.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../huge_pages.h"

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

  size_t size() const { return live_; }
  void clear() { base_.clear(); extra_.clear(); live_ = 0; dead_ = 0; }

  // A copy of `o` whose sorted array is kept in `storage` (memory a former
  // copy used: copying into pages already touched costs a fifth of fresh
  // ones); take_storage() hands it back.
  void copy_from(const IdIndex& o, IdEntries&& storage) {
    base_ = std::move(storage);
    base_.assign(o.base_.begin(), o.base_.end());
    extra_ = o.extra_;
    live_ = o.live_;
    dead_ = o.dead_;
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
    live_ = base_.size();
    dead_ = 0;
  }
  void assign(IdEntries sorted) {
    base_ = std::move(sorted);
    extra_.clear();
    live_ = base_.size();
    dead_ = 0;
  }

  const uint64_t* find(int64_t id) const {
    if (const IdEntry* e = locate(base_, id)) return e->loc == kDead ? nullptr : &e->loc;
    if (const IdEntry* e = locate(extra_, id)) return &e->loc;
    return nullptr;
  }

  // Inserts or replaces; returns the previous location or kDead.
  uint64_t put(int64_t id, uint64_t loc) {
    if (base_.empty() || id > base_.back().id) {
      if (extra_.empty() || id > extra_.back().id) {  // the common append
        if (extra_.empty()) base_.push_back({id, loc});
        else extra_.push_back({id, loc});
        live_++;
        return kDead;
      }
    }
    if (IdEntry* e = locate_mut(base_, id)) {
      uint64_t old = e->loc;
      e->loc = loc;
      if (old == kDead) { live_++; dead_--; }
      return old;
    }
    auto it = std::lower_bound(extra_.begin(), extra_.end(), id, [](const IdEntry& e, int64_t v) { return e.id < v; });
    if (it != extra_.end() && it->id == id) {
      uint64_t old = it->loc;
      it->loc = loc;
      return old;
    }
    extra_.insert(it, {id, loc});
    live_++;
    if (extra_.size() > 1024 + base_.size() / 32) merge();
    return kDead;
  }

  // Moves id to `to` if it is still at `from` (a checkpoint's new image
  // taking the place of a document no write changed since its pin).
  void move_if_at(int64_t id, uint64_t from, uint64_t to) {
    if (uint64_t* l = const_cast<uint64_t*>(find(id)); l && *l == from) *l = to;
  }

  // Removes; returns the previous location or kDead.
  uint64_t erase(int64_t id) {
    if (IdEntry* e = locate_mut(base_, id)) {
      uint64_t old = e->loc;
      if (old == kDead) return kDead;
      e->loc = kDead;
      live_--;
      dead_++;
      if (dead_ > 1024 && dead_ > base_.size() / 2) merge();
      return old;
    }
    auto it = std::lower_bound(extra_.begin(), extra_.end(), id, [](const IdEntry& e, int64_t v) { return e.id < v; });
    if (it != extra_.end() && it->id == id) {
      uint64_t old = it->loc;
      extra_.erase(it);
      live_--;
      return old;
    }
    return kDead;
  }

  // Visits live entries in ascending id order until f returns false.
  template <typename F>
  void scan(F&& f) const {
    size_t i = 0, j = 0;
    while (i < base_.size() || j < extra_.size()) {
      const IdEntry* e;
      if (j >= extra_.size() || (i < base_.size() && base_[i].id < extra_[j].id)) e = &base_[i++];
      else e = &extra_[j++];
      if (e->loc == kDead) continue;
      if (!f(*e)) return;
    }
  }

  // Live entries, sorted, as one array (merges the overlay).
  const IdEntries& flat() {
    if (!extra_.empty() || dead_) merge();
    return base_;
  }

  // What its pages hold (the array's mapping is reserved ahead, untouched).
  size_t memory_bytes() const { return (base_.size() + extra_.capacity()) * sizeof(IdEntry); }

 private:
  // A first probe where the id would be if ids were evenly spread (auto ids
  // are: the probe finds them with one memory access instead of the ~17 of a
  // binary search over 100k entries), then a binary search on its side.
  template <typename Array>
  static const IdEntry* locate(const Array& a, int64_t id) {
    const IdEntry* v = a.data();
    size_t n = a.size();
    if (n == 0 || id < v[0].id || id > v[n - 1].id) return nullptr;
    size_t lo = 0, hi = n;
    uint64_t span = (uint64_t)v[n - 1].id - (uint64_t)v[0].id;
    if (span) {
      size_t g = (size_t)((double)((uint64_t)id - (uint64_t)v[0].id) / (double)span * (double)(n - 1));
      if (g >= n) g = n - 1;
      if (v[g].id == id) return &v[g];
      if (v[g].id < id) lo = g + 1;
      else hi = g;
    }
    const IdEntry* it = std::lower_bound(v + lo, v + hi, id, [](const IdEntry& e, int64_t x) { return e.id < x; });
    return it != v + hi && it->id == id ? it : nullptr;
  }
  template <typename Array>
  static IdEntry* locate_mut(Array& v, int64_t id) { return const_cast<IdEntry*>(locate(v, id)); }

  void merge() {
    IdEntries out;
    out.reserve(live_);
    scan([&](const IdEntry& e) { out.push_back(e); return true; });
    base_ = std::move(out);
    extra_.clear();
    dead_ = 0;
  }

  IdEntries base_;
  std::vector<IdEntry> extra_;  // small: merged into base_ past 1,024 + size / 32
  size_t live_ = 0;
  size_t dead_ = 0;
};

}  // namespace kitfox
