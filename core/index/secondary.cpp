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
  remove(id);
  Value k = normalize(key);
  if (kind_ == IndexKind::Sorted) {
    sorted_.insert({k, id});
  } else {
    if (k.is_null()) return;
    auto& ids = hash_[hash_key(k)];
    ids.insert(std::lower_bound(ids.begin(), ids.end(), id), id);
  }
  key_of_[id] = std::move(k);
}

void SecondaryIndex::remove(int64_t id) {
  const Value* key = key_of_.find(id);
  if (!key) return;
  if (kind_ == IndexKind::Sorted) {
    sorted_.erase({*key, id});
  } else {
    std::string hk = hash_key(*key);
    if (std::vector<int64_t>* ids = hash_.find(hk)) {
      auto pos = std::lower_bound(ids->begin(), ids->end(), id);
      if (pos != ids->end() && *pos == id) ids->erase(pos);
      if (ids->empty()) hash_.erase(hk);
    }
  }
  key_of_.erase(id);
}

void SecondaryIndex::equal(const Value& v, std::vector<int64_t>* out) const {
  out->clear();
  if (v.is_null()) return;
  Value k = normalize(v);
  if (kind_ == IndexKind::Sorted) {
    for (auto it = sorted_.lower_bound({k, INT64_MIN}); it != sorted_.end() && compare(it->first, k) == 0; ++it)
      if (it->first.kind() == k.kind() || (it->first.is_number() && k.is_number())) out->push_back(it->second);
    return;
  }
  if (const std::vector<int64_t>* ids = hash_.find(hash_key(k))) *out = *ids;
}

template <typename F>
void SecondaryIndex::walk_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, F&& f) const {
  Value l = lo ? normalize(*lo) : Value(), h = hi ? normalize(*hi) : Value();
  auto it = lo ? sorted_.lower_bound({l, INT64_MIN}) : sorted_.begin();
  for (; it != sorted_.end(); ++it) {
    const Value& k = it->first;
    if (k.is_null()) continue;
    if (lo) {
      int c = compare(k, l);
      if (c < 0 || (c == 0 && !lo_incl)) continue;
    }
    if (hi) {
      int c = compare(k, h);
      if (c > 0 || (c == 0 && !hi_incl)) break;
    }
    f(it->second);
  }
}

void SecondaryIndex::range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, std::vector<int64_t>* out) const {
  out->clear();
  walk_range(lo, lo_incl, hi, hi_incl, [&](int64_t id) { out->push_back(id); });
  std::sort(out->begin(), out->end());
}

size_t SecondaryIndex::count_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl) const {
  size_t n = 0;
  walk_range(lo, lo_incl, hi, hi_incl, [&](int64_t) { n++; });
  return n;
}

int64_t SecondaryIndex::holder(const Value& v, int64_t except) const {
  std::vector<int64_t> ids;
  equal(v, &ids);
  for (int64_t id : ids)
    if (id != except) return id;
  return -1;
}

}  // namespace kitfox
