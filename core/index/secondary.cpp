#include "secondary.h"

#include <algorithm>
#include <cmath>


namespace kitfox {

Value SecondaryIndex::normalize(const Value& v) {
  if (v.kind() == Kind::Float) {
    double d = v.as_float();
    if (d == std::floor(d) && d >= -0x1p63 && d < 0x1p63) return Value::integer((int64_t)d);  // (as compare has it)
  }
  return v;
}

const std::string& SecondaryIndex::hash_key(const Value& v) {
  thread_local std::string k;
  k.clear();
  key_bytes(k, v);  // (no copy of the key made; nested numbers as compare has them)
  return k;
}

void SecondaryIndex::put(int64_t id, const Value& key) {
  if (kind_ == IndexKind::Sorted) {
    Value k = normalize(key);
    if (!loading_) sorted_.insert(std::move(k), id);
    else if (k.kind() == Kind::Int) pending_ints_.push_back({k.as_int(), id});
    else pending_.push_back({std::move(k), id});
    return;
  }
  if (key.is_null()) return;
  IdList& ids = hash_[hash_key(key)];
  const size_t was = ids.heap_bytes();
  if (ids.insert(id)) size_++;
  id_bytes_ += ids.heap_bytes() - was;
}

bool SecondaryIndex::remove(int64_t id, const Value& key) {
  if (kind_ == IndexKind::Sorted) {
    if (loading_) end_load();
    return sorted_.erase(normalize(key), id);
  }
  if (key.is_null()) return true;
  return erase_hashed(hash_key(key), id);
}

bool SecondaryIndex::erase_hashed(const std::string& hk, int64_t id) {
  IdList* ids = hash_.find(hk);
  const size_t was = ids ? ids->heap_bytes() : 0;
  if (!ids || !ids->erase(id)) return false;
  id_bytes_ -= was - ids->heap_bytes();
  size_--;
  if (ids->empty()) hash_.erase(hk);  // (inline again: no array goes with it)
  return true;
}

void SecondaryIndex::remove_any(int64_t id) {
  if (kind_ == IndexKind::Sorted) {
    if (loading_) end_load();
    sorted_.erase_id(id);
    return;
  }
  std::string found;
  hash_.for_each([&](std::string_view k, const IdList& ids) {
    if (!ids.contains(id)) return true;
    found = k;
    return false;
  });
  if (!found.empty()) erase_hashed(found, id);
}

bool IdList::contains(int64_t id) const { return std::binary_search(begin(), end(), id); }

bool IdList::insert(int64_t id) {
  if (n_ == 0 && cap_ == 0) {
    one_ = id;
    n_ = 1;
    return true;
  }
  // Ids mostly come in order (a build walks them so, and new documents'
  // ids grow): one past the last is appended with no search.
  const bool last = id > end()[-1];
  if (!last && contains(id)) return false;  // held once
  if (n_ == (cap_ ? cap_ : 1)) {
    const uint32_t cap = std::max<uint32_t>(4, n_ * 2);
    int64_t* a = new int64_t[cap];
    std::copy(begin(), end(), a);
    release();
    p_ = a;
    cap_ = cap;
  }
  int64_t* a = cap_ ? p_ : &one_;
  int64_t* at = last ? a + n_ : std::lower_bound(a, a + n_, id);
  std::copy_backward(at, a + n_, a + n_ + 1);
  *at = id;
  n_++;
  return true;
}

bool IdList::erase(int64_t id) {
  int64_t* a = cap_ ? p_ : &one_;
  int64_t* at = std::lower_bound(a, a + n_, id);
  if (at == a + n_ || *at != id) return false;
  std::copy(at + 1, a + n_, at);
  n_--;
  if (cap_ && n_ <= 1) {  // back inline
    const int64_t left = n_ ? a[0] : 0;
    release();
    one_ = left;
  }
  return true;
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
  if (kind_ != IndexKind::Sorted) {
    if (const IdList* ids = hash_.find(hash_key(v))) out->assign(ids->begin(), ids->end());
    return;
  }
  Value k = normalize(v);
  for (Pos p = sorted_.lower_key(k), end = sorted_.end(); p != end; sorted_.next(p)) {
    const KeyBlocks::Entry& e = sorted_.at(p);
    if (KeyBlocks::compare_key(e, k) != 0) break;
    const bool number = e.kind == Kind::Int || e.kind == Kind::Float;
    if (e.kind == k.kind() || (number && k.is_number())) out->push_back(e.id);
  }
}

KeyBlocks::Pos SecondaryIndex::range_start(const Value* lo, bool lo_incl) const {
  const Pos past_nulls = sorted_.lower_key(Value(), true);
  if (!lo) return past_nulls;
  const Pos p = sorted_.lower_key(normalize(*lo), !lo_incl);
  return p < past_nulls ? past_nulls : p;
}

void SecondaryIndex::range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl, std::vector<int64_t>* out) const {
  out->clear();
  const Pos start = range_start(lo, lo_incl), end = range_end(hi, hi_incl);
  if (!(start < end)) return;
  out->reserve(sorted_.between(start, end));
  for (Pos p = start; p != end; sorted_.next(p)) out->push_back(sorted_.at(p).id);
  std::sort(out->begin(), out->end());
}

size_t SecondaryIndex::count_range(const Value* lo, bool lo_incl, const Value* hi, bool hi_incl) const {
  const Pos start = range_start(lo, lo_incl), end = range_end(hi, hi_incl);
  if (!(start < end)) return 0;
  return sorted_.between(start, end);
}

int64_t SecondaryIndex::holder(const Value& v, int64_t except) const {
  if (kind_ != IndexKind::Sorted) {  // a @unique check a put makes: nothing allocated
    if (v.is_null()) return -1;
    if (const IdList* ids = hash_.find(hash_key(v)))
      for (int64_t id : *ids)
        if (id != except) return id;
    return -1;
  }
  std::vector<int64_t> ids;
  equal(v, &ids);
  for (int64_t id : ids)
    if (id != except) return id;
  return -1;
}

}  // namespace kitfox
