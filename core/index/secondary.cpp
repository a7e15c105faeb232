#include "secondary.h"

#include <algorithm>
#include <cmath>

#include "../codec.h"

namespace kitfox {

Value SecondaryIndex::normalize(const Value& v) {
  if (v.kind() == Kind::Float) {
    double d = v.as_float();
    if (d == std::floor(d) && std::fabs(d) < 9.2e18) return Value::integer((int64_t)d);
  }
  return v;
}

std::string SecondaryIndex::hash_key(const Value& v) {
  std::string k;
  encode_value(k, normalize(v), false);
  return k;
}

void SecondaryIndex::put(int64_t id, const Value& key) {
  Value k = normalize(key);
  if (kind_ == IndexKind::Sorted) {
    if (!loading_) sorted_.insert(std::move(k), id);
    else if (k.kind() == Kind::Int) pending_ints_.push_back({k.as_int(), id});
    else pending_.push_back({std::move(k), id});
    return;
  }
  if (k.is_null()) return;
  auto& ids = hash_[hash_key(k)];
  ids.insert(std::lower_bound(ids.begin(), ids.end(), id), id);
  size_++;
}

bool SecondaryIndex::remove(int64_t id, const Value& key) {
  if (kind_ == IndexKind::Sorted) {
    if (loading_) end_load();
    return sorted_.erase(normalize(key), id);
  }
  if (key.is_null()) return true;
  std::string hk = hash_key(key);
  std::vector<int64_t>* ids = hash_.find(hk);
  if (!ids) return false;
  auto pos = std::lower_bound(ids->begin(), ids->end(), id);
  if (pos == ids->end() || *pos != id) return false;
  ids->erase(pos);
  size_--;
  if (ids->empty()) hash_.erase(hk);
  return true;
}

void SecondaryIndex::remove_any(int64_t id) {
  if (kind_ == IndexKind::Sorted) {
    if (loading_) end_load();
    sorted_.erase_id(id);
    return;
  }
  std::string found;
  hash_.for_each([&](const std::string& k, const std::vector<int64_t>& ids) {
    if (!std::binary_search(ids.begin(), ids.end(), id)) return true;
    found = k;
    return false;
  });
  if (found.empty()) return;
  std::vector<int64_t>* ids = hash_.find(found);
  ids->erase(std::lower_bound(ids->begin(), ids->end(), id));
  size_--;
  if (ids->empty()) hash_.erase(found);
}

void SecondaryIndex::end_load() {
  if (!loading_) return;
  loading_ = false;
  sorted_.load(std::move(pending_), std::move(pending_ints_));
  pending_ = {};
  pending_ints_ = {};
}

void SecondaryIndex::equal(const Value& v, std::vector<int64_t>* out) const {
  out->clear();
  if (v.is_null()) return;
  Value k = normalize(v);
  if (kind_ == IndexKind::Sorted) {
    for (Pos p = sorted_.lower_key(k), end = sorted_.end(); p != end; sorted_.next(p)) {
      const KeyBlocks::Entry& e = sorted_.at(p);
      if (compare(e.key, k) != 0) break;
      if (e.key.kind() == k.kind() || (e.key.is_number() && k.is_number())) out->push_back(e.id);
    }
    return;
  }
  if (const std::vector<int64_t>* ids = hash_.find(hash_key(k))) *out = *ids;
}

KeyBlocks::Pos SecondaryIndex::range_start(const Value* lo, bool lo_incl) const {
  const Pos past_nulls = sorted_.lower_key(Value(), true);
  if (!lo) return past_nulls;
  const Pos p = sorted_.lower_key(normalize(*lo), !lo_incl);
  return before(p, past_nulls) ? past_nulls : p;
}

void SecondaryIndex::range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, std::vector<int64_t>* out) const {
  out->clear();
  const Pos start = range_start(lo, lo_incl), end = range_end(hi, hi_incl);
  if (!before(start, end)) return;
  out->reserve(sorted_.between(start, end));
  for (Pos p = start; p != end; sorted_.next(p)) out->push_back(sorted_.at(p).id);
  std::sort(out->begin(), out->end());
}

size_t SecondaryIndex::count_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl) const {
  const Pos start = range_start(lo, lo_incl), end = range_end(hi, hi_incl);
  if (!before(start, end)) return 0;
  return sorted_.between(start, end);
}

int64_t SecondaryIndex::holder(const Value& v, int64_t except) const {
  std::vector<int64_t> ids;
  equal(v, &ids);
  for (int64_t id : ids)
    if (id != except) return id;
  return -1;
}

}  // namespace kitfox
