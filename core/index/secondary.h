// Secondary indexes on a field or a json path: @hash and @unique (equality,
// in) and @sorted (ranges, and order ... limit without a sort). Derived: built
// from the documents on first use, then kept up to date by writes.
//
// Keys compare as the query language does: numbers by value (5 and 5.0 are
// one key), other kinds never equal to each other. Null keys are not found by
// equality or ranges; a sorted index keeps them, first, for ordering.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "../value.h"
#include "params.h"
#include "steady_map.h"

namespace kitfox {

class SecondaryIndex {
 public:
  explicit SecondaryIndex(IndexKind kind) : kind_(kind) {}
  IndexKind kind() const { return kind_; }

  void put(int64_t id, const Value& key);  // replaces the document's previous key
  void remove(int64_t id);

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
  // equal keys always by ascending id) until f returns false.
  template <typename F>
  void ordered(bool desc, F&& f) const;
  // The same over the keys in a range (lo and hi may be null: unbounded;
  // null keys left out), from the end the order starts at, so a limit
  // stops it after as many entries as it takes.
  template <typename F>
  void ordered_range(bool desc, const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, F&& f) const;
  // Visits each distinct non-null key as f(lowest id holding it, how many
  // documents hold it) until f returns false; keys in no particular order.
  template <typename F>
  void groups(F&& f) const;
  size_t size() const { return key_of_.size(); }
  size_t memory_bytes() const { return key_of_.size() * 96; }

  // The form keys are stored and compared in (integral floats become ints).
  static Value normalize(const Value& v);

 private:
  struct Less {
    bool operator()(const std::pair<Value, int64_t>& a, const std::pair<Value, int64_t>& b) const {
      int c = compare(a.first, b.first);
      return c ? c < 0 : a.second < b.second;
    }
  };
  static std::string hash_key(const Value& v);
  template <typename F>
  void walk_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, F&& f) const;

  IndexKind kind_;
  // Hash maps that grow a few buckets a write (steady_map.h).
  SteadyMap<std::string, std::vector<int64_t>> hash_;  // hash, unique
  std::set<std::pair<Value, int64_t>, Less> sorted_;   // sorted
  SteadyMap<int64_t, Value> key_of_;
};

template <typename F>
void SecondaryIndex::groups(F&& f) const {
  if (kind_ != IndexKind::Sorted) {
    hash_.for_each([&](const std::string&, const std::vector<int64_t>& ids) { return f(ids.front(), ids.size()); });
    return;
  }
  for (auto it = sorted_.begin(); it != sorted_.end();) {
    auto end = it;
    size_t n = 0;
    while (end != sorted_.end() && compare(end->first, it->first) == 0) ++end, ++n;
    if (!it->first.is_null() && !f(it->second, n)) return;
    it = end;
  }
}

template <typename F>
void SecondaryIndex::ordered(bool desc, F&& f) const {
  if (!desc) {
    for (auto& [k, id] : sorted_)
      if (!f(k, id)) return;
    return;
  }
  // Descending by key, ascending by id within a key: each group of equal
  // keys is found by its first entry (a tree search), not by stepping back
  // through it, so a limit stops the walk after as many entries as it takes.
  auto it = sorted_.end();
  while (it != sorted_.begin()) {
    auto first = sorted_.lower_bound({std::prev(it)->first, INT64_MIN});
    for (auto g = first; g != it; ++g)
      if (!f(g->first, g->second)) return;
    it = first;
  }
}

template <typename F>
void SecondaryIndex::ordered_range(bool desc, const Value* lo, bool lo_incl, const Value* hi, bool hi_incl,
                                   F&& f) const {
  const Value l = lo ? normalize(*lo) : Value(), h = hi ? normalize(*hi) : Value();
  auto below_lo = [&](const Value& k) {
    if (!lo) return false;
    int c = compare(k, l);
    return c < 0 || (c == 0 && !lo_incl);
  };
  auto above_hi = [&](const Value& k) {
    if (!hi) return false;
    int c = compare(k, h);
    return c > 0 || (c == 0 && !hi_incl);
  };
  if (!desc) {
    for (auto it = lo ? sorted_.lower_bound({l, INT64_MIN}) : sorted_.begin(); it != sorted_.end(); ++it) {
      if (it->first.is_null() || below_lo(it->first)) continue;
      if (above_hi(it->first)) return;
      if (!f(it->first, it->second)) return;
    }
    return;
  }
  // From the last key the upper bound admits, down, a group of equal keys
  // at a time (ascending ids within it), as ordered() walks.
  auto it = !hi ? sorted_.end() : hi_incl ? sorted_.upper_bound({h, INT64_MAX}) : sorted_.lower_bound({h, INT64_MIN});
  while (it != sorted_.begin()) {
    const Value& k = std::prev(it)->first;
    if (k.is_null() || below_lo(k)) return;
    auto first = sorted_.lower_bound({k, INT64_MIN});
    if (!above_hi(k))
      for (auto g = first; g != it; ++g)
        if (!f(g->first, g->second)) return;
    it = first;
  }
}

}  // namespace kitfox
