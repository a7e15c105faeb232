// KeyBlocks: the entries (key, id) of a @sorted index in key order, ties by
// ascending id, held in blocks of up to kMax entries each (one allocation a
// block, the entries inline), the blocks in order in one array of pointers.
// Against a tree of one node an entry it walks a range through memory laid
// out in order, counts one by the sizes of the blocks it spans, is built
// from unsorted entries by one sort, and frees a block at a time. An insert
// moves at most a block's entries (a full block splits in two, and the
// array of pointers shifts by one); an erase the same (a block left under a
// quarter full joins a neighbour when both fit in one).
//
// An entry is 24 bytes: its id, its key's kind, and the key itself where it
// is a word (null, bool, int, float, timestamp: most keys), else a pointer
// to the key (text, bytes, a list, an object or a vector), which the
// blocks own.
//
// Positions (Pos) name an entry by block and index; end() is one past the
// last. Any insert or erase invalidates them. Const operations change
// nothing, so readers may share it under a shared lock.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../value.h"

namespace kitfox {

class KeyBlocks {
 public:
  struct Entry {
    int64_t id;
    union {
      int64_t i;           // bool, int, timestamp
      double f;            // float
      const Value* boxed;  // any other kind (owned by the blocks)
    };
    Kind kind;
  };
  // A key and id given to load(): any kind.
  struct Loose {
    Value key;
    int64_t id = 0;
  };
  struct Pos {
    size_t b = 0, i = 0;
    bool operator==(const Pos&) const = default;
    bool operator<(const Pos& o) const { return b < o.b || (b == o.b && i < o.i); }
  };
  static constexpr size_t kMax = 128;

  KeyBlocks() = default;
  KeyBlocks(const KeyBlocks&) = delete;
  KeyBlocks& operator=(const KeyBlocks&) = delete;
  ~KeyBlocks() { clear(); }

  size_t size() const { return size_; }
  void clear();
  void insert(Value key, int64_t id);
  bool erase(const Value& key, int64_t id);
  // Erases the entry of `id` whatever its key: a look through every entry.
  bool erase_id(int64_t id);
  // Replaces the contents with `entries` and the (int key, id) pairs
  // `ints` (any order; each (key, id) once).
  void load(std::vector<Loose> entries, std::vector<std::pair<int64_t, int64_t>> ints = {});

  Pos begin() const { return {0, 0}; }
  Pos end() const { return {blocks_.size(), 0}; }
  const Entry& at(Pos p) const { return blocks_[p.b]->e[p.i]; }
  // An entry's key: a boxed one as stored, one held in a word made in
  // *scratch (no allocation).
  static const Value& key(const Entry& e, Value* scratch) {
    switch (e.kind) {
      case Kind::Null: *scratch = Value(); return *scratch;
      case Kind::Bool: case Kind::Int: case Kind::Timestamp: scratch->assign_scalar(e.kind, e.i); return *scratch;
      case Kind::Float: scratch->assign_real(e.f); return *scratch;
      default: return *e.boxed;
    }
  }
  Value key_at(Pos p) const {
    Value v;
    return key(at(p), &v);
  }
  // compare(key of a, k), and whether two entries' keys compare equal.
  static int compare_key(const Entry& a, const Value& k) {
    if (a.kind == Kind::Int && k.kind() == Kind::Int) return a.i < k.as_int() ? -1 : a.i > k.as_int();
    Value s;
    return compare(key(a, &s), k);
  }
  static bool same_key(const Entry& a, const Entry& b) {
    if (a.kind == Kind::Int && b.kind == Kind::Int) return a.i == b.i;
    Value s;
    return compare_key(a, key(b, &s)) == 0;
  }
  void next(Pos& p) const {
    if (++p.i == blocks_[p.b]->n) p = {p.b + 1, 0};
  }
  // p must not be begin().
  void prev(Pos& p) const {
    if (p.i == 0) p = {p.b - 1, blocks_[p.b - 1]->n - 1};
    else p.i--;
  }
  // The first entry whose key is >= k (or > k with `after`), or end().
  Pos lower_key(const Value& k, bool after = false) const;
  // How many entries lie from a up to (not including) b; a <= b.
  size_t between(Pos a, Pos b) const;
  size_t memory_bytes() const {
    return blocks_.capacity() * sizeof(Block*) + blocks_.size() * sizeof(Block) + boxed_bytes_;
  }

 private:
  struct Block {
    size_t n = 0;
    Entry e[kMax];
  };
  static bool boxes(Kind k) { return k != Kind::Null && k != Kind::Bool && k != Kind::Int && k != Kind::Float && k != Kind::Timestamp; }
  Entry make(Value&& key, int64_t id);
  void drop(const Entry& e);  // frees what a boxed entry holds
  static bool less(const Entry& a, const Value& kb, int64_t ib) {
    int c = compare_key(a, kb);
    return c ? c < 0 : a.id < ib;
  }
  static bool less(const Entry& a, const Entry& b) {
    if (a.kind == Kind::Int && b.kind == Kind::Int)  // most keys: no call
      return a.i != b.i ? a.i < b.i : a.id < b.id;
    Value s;
    return less(a, key(b, &s), b.id);
  }
  // The first entry `past` is false for, or end(); `past` holds for a
  // prefix of the order (a block is searched for by its last entry).
  template <typename Past>
  Pos first_not(Past&& past) const {
    auto bi = std::partition_point(blocks_.begin(), blocks_.end(), [&](const Block* x) { return past(x->e[x->n - 1]); });
    if (bi == blocks_.end()) return end();
    const Block& x = **bi;
    return {(size_t)(bi - blocks_.begin()), (size_t)(std::partition_point(x.e, x.e + x.n, past) - x.e)};
  }
  void join(size_t b);  // block b with its right neighbour, which fits
  void erase_at(Pos p);

  std::vector<Block*> blocks_;
  size_t size_ = 0;
  size_t boxed_bytes_ = 0;  // the boxed keys (their Values, not what those hold)
};

}  // namespace kitfox
