// Secondary indexes on a field or a json path: @hash and @unique (equality,
// in) and @sorted (ranges, and order ... limit without a sort). Derived: built
// from the documents on first use, then kept up to date by writes.
//
// Keys compare as the query language does: numbers by value (5 and 5.0 are
// one key), other kinds never equal to each other. Null keys are not found by
// equality or ranges; a sorted index keeps them, first, for ordering.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../value.h"
#include "key_blocks.h"
#include "params.h"
#include "steady_map.h"

namespace kitfox {

// The ids under one key of a hash index, ascending: one inline (every key
// of a @unique index, most of a selective @hash one), more in an array of
// their own. A std::vector took an allocation a key: a million of them to
// make and to free.
class IdList {
 public:
  IdList() = default;
  IdList(IdList&& o) noexcept { take(o); }
  IdList& operator=(IdList&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  IdList(const IdList&) = delete;
  IdList& operator=(const IdList&) = delete;
  ~IdList() { release(); }

  const int64_t* begin() const { return cap_ ? p_ : &one_; }
  const int64_t* end() const { return begin() + n_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t front() const { return *begin(); }
  bool contains(int64_t id) const;
  bool insert(int64_t id);  // in order; false when it is there already
  bool erase(int64_t id);
  size_t heap_bytes() const { return cap_ * sizeof(int64_t); }

 private:
  void take(IdList& o) {
    n_ = o.n_;
    cap_ = o.cap_;
    if (cap_) p_ = o.p_;
    else one_ = o.one_;
    o.n_ = o.cap_ = 0;
  }
  void release() {
    if (cap_) delete[] p_;
    cap_ = 0;
  }
  union {
    int64_t one_ = 0;
    int64_t* p_;
  };
  uint32_t n_ = 0, cap_ = 0;  // cap_ 0: the one inline
};

class SecondaryIndex {
 public:
  explicit SecondaryIndex(IndexKind kind) : kind_(kind) {}
  // With no id list past its one inline id, the entries go with the map's
  // chunks, not one by one.
  ~SecondaryIndex() { hash_.clear(id_bytes_ == 0); }
  SecondaryIndex(const SecondaryIndex&) = delete;
  SecondaryIndex& operator=(const SecondaryIndex&) = delete;
  IndexKind kind() const { return kind_; }

  // A document's entry: its key as put (a document has one entry at most;
  // a write takes the old one out first, by the key the old version gives).
  // The index keeps no map from a document to its key: the versions of a
  // document are in the arena, and a map took 80 bytes a document.
  void put(int64_t id, const Value& key);
  // Takes out the entry (key, id); false when there was none (a hash
  // index holds no null keys: true for those).
  bool remove(int64_t id, const Value& key);
  // Takes out the document's entry whatever its key, looking through every
  // entry: for when its old version cannot give its key (a damaged one).
  void remove_any(int64_t id);

  // Documents whose key equals v, ascending.
  void equal(const Value& v, std::vector<int64_t>* out) const;
  // Sorted only: documents with lo <(=) key <(=) hi (either bound may be
  // absent), ascending by id.
  void range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, std::vector<int64_t>* out) const;
  // Sorted only: how many documents range() would give (null keys never).
  size_t count_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl) const;
  // The document holding key v other than `except`, or -1 (for @unique).
  int64_t holder(const Value& v, int64_t except) const;
  // Sorted only: visits (key, id) in key order (ascending or descending;
  // equal keys always by ascending id) until f returns false. The key is
  // valid during the call only (a key held in a word is made for it).
  template <typename F>
  void ordered(bool desc, F&& f) const;
  // The same over the keys in a range (lo and hi may be null: unbounded;
  // null keys left out unless `nulls`, which ordered() asks for, with no
  // lower bound), from the end the order starts at, so a limit stops it
  // after as many entries as it takes.
  template <typename F>
  void ordered_range(bool desc, const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, F&& f,
                     bool nulls = false) const;
  // Visits each distinct non-null key as f(lowest id holding it, how many
  // documents hold it) until f returns false; keys in no particular order.
  template <typename F>
  void groups(F&& f) const;
  // Entries held (a hash index holds no null keys).
  size_t size() const {
    return kind_ == IndexKind::Sorted ? sorted_.size() + pending_.size() + pending_ints_.size() : size_;
  }
  // The map's (its entries hold the keys), id lists' and blocks' memory.
  size_t memory_bytes() const {
    return hash_.memory_bytes() + sorted_.memory_bytes() + id_bytes_;
  }

  // A build of an empty index: the puts between begin_load() and
  // end_load() (one per document, about `n`, no removes) are gathered and
  // sorted once at the end. Nothing may read the index in between.
  void begin_load(size_t n) {
    loading_ = kind_ == IndexKind::Sorted && size() == 0;
    if (loading_) pending_ints_.reserve(n);
  }
  void end_load();

  // The form keys are stored and compared in (integral floats become ints).
  static Value normalize(const Value& v);

 private:
  using Pos = KeyBlocks::Pos;
  // A key's hash-map form (its encoding, normalized), in a buffer of this
  // thread's that the next call writes over: a lookup allocates nothing.
  static const std::string& hash_key(const Value& v);
  bool erase_hashed(const std::string& hk, int64_t id);
  // The first entry past the null keys (which sort first), or past the
  // keys below lo (or not above it when !lo_incl), whichever is later.
  Pos range_start(const Value* lo, bool lo_incl) const;
  // The first entry past the keys the upper bound admits.
  Pos range_end(const Value* hi, bool hi_incl) const {
    return hi ? sorted_.lower_key(normalize(*hi), hi_incl) : sorted_.end();
  }

  IndexKind kind_;
  // Hash maps that grow a few buckets a write (steady_map.h).
  SteadyMap<std::string, IdList> hash_;  // hash, unique: keys held in their entries
  KeyBlocks sorted_;                                   // sorted
  size_t size_ = 0;      // hash: ids in hash_ (sorted_ counts its own)
  size_t id_bytes_ = 0;  // hash: the IdLists' arrays
  bool loading_ = false;
  // A sorted index's build, begin_load() to end_load(): int keys as pairs
  // of words (16 bytes an entry, not 64), other keys as loose entries.
  std::vector<std::pair<int64_t, int64_t>> pending_ints_;
  std::vector<KeyBlocks::Loose> pending_;
};

template <typename F>
void SecondaryIndex::groups(F&& f) const {
  if (kind_ != IndexKind::Sorted) {
    hash_.for_each([&](std::string_view, const IdList& ids) { return f(ids.front(), ids.size()); });
    return;
  }
  // A group's end: stepped to within its first block, searched for past it.
  const Pos end = sorted_.end();
  for (Pos p = range_start(nullptr, false); p != end;) {
    const KeyBlocks::Entry& first = sorted_.at(p);
    Pos q = p;
    sorted_.next(q);
    while (q != end && q.b == p.b && KeyBlocks::same_key(sorted_.at(q), first)) sorted_.next(q);
    if (q != end && q.b != p.b && KeyBlocks::same_key(sorted_.at(q), first)) {
      Value k;
      q = sorted_.lower_key(KeyBlocks::key(first, &k), true);
    }
    if (!f(first.id, sorted_.between(p, q))) return;
    p = q;
  }
}

template <typename F>
void SecondaryIndex::ordered(bool desc, F&& f) const {
  if (!desc) {
    Value k;
    for (Pos p = sorted_.begin(), end = sorted_.end(); p != end; sorted_.next(p)) {
      const KeyBlocks::Entry& e = sorted_.at(p);
      if (!f(KeyBlocks::key(e, &k), e.id)) return;
    }
    return;
  }
  ordered_range(true, nullptr, false, nullptr, false, std::forward<F>(f), true);
}

template <typename F>
void SecondaryIndex::ordered_range(bool desc, const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, F&& f,
                                   bool nulls) const {
  const Pos start = nulls ? sorted_.begin() : range_start(lo, lo_incl), end = range_end(hi, hi_incl);
  if (!(start < end)) return;  // an empty range: lo above hi
  Value k;
  if (!desc) {
    for (Pos p = start; p != end; sorted_.next(p)) {
      const KeyBlocks::Entry& e = sorted_.at(p);
      if (!f(KeyBlocks::key(e, &k), e.id)) return;
    }
    return;
  }
  // From the last key the range admits, down, a group of equal keys at a
  // time (ascending ids within it): each group is found by a search for its
  // first entry, not by stepping back through it, so a limit stops the walk
  // after as many entries as it takes.
  Pos it = end;
  while (it != start) {
    Pos last = it;
    sorted_.prev(last);
    Pos first = sorted_.lower_key(KeyBlocks::key(sorted_.at(last), &k));
    if (first < start) first = start;
    for (Pos g = first; g != it; sorted_.next(g)) {
      const KeyBlocks::Entry& e = sorted_.at(g);
      if (!f(KeyBlocks::key(e, &k), e.id)) return;
    }
    it = first;
  }
}

}  // namespace kitfox
