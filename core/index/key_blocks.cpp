#include "key_blocks.h"

#include <algorithm>
#include <utility>

namespace kitfox {

static_assert(sizeof(KeyBlocks::Entry) == 24);
static_assert(std::is_trivially_copyable_v<KeyBlocks::Entry>);

KeyBlocks::Entry KeyBlocks::make(Value&& key, int64_t id) {
  Entry e;
  e.id = id;
  e.kind = key.kind();
  switch (e.kind) {
    case Kind::Null: e.i = 0; break;
    case Kind::Bool: e.i = key.as_bool(); break;
    case Kind::Int: case Kind::Timestamp: e.i = key.as_int(); break;
    case Kind::Float: e.f = key.as_float(); break;
    default:
      e.boxed = new Value(std::move(key));
      boxed_bytes_ += sizeof(Value);
  }
  return e;
}

void KeyBlocks::drop(const Entry& e) {
  if (!boxes(e.kind)) return;
  delete e.boxed;
  boxed_bytes_ -= sizeof(Value);
}

void KeyBlocks::clear() {
  for (Block* b : blocks_) {
    if (boxed_bytes_)
      for (size_t i = 0; i < b->n; i++) drop(b->e[i]);
    delete b;
  }
  std::vector<Block*>().swap(blocks_);  // (shrink_to_fit does nothing without exceptions)
  size_ = 0;
}

void KeyBlocks::insert(Value key, int64_t id) {
  if (blocks_.empty()) {  // no block is ever left empty: first_not reads each one's last entry
    Block* b = new Block;
    b->e[0] = make(std::move(key), id);
    b->n = 1;
    blocks_.push_back(b);
    size_++;
    return;
  }
  Pos p = first_not([&](const Entry& e) { return less(e, key, id); });
  if (p == end()) p = {blocks_.size() - 1, blocks_.back()->n};  // after the last entry
  Block* b = blocks_[p.b];
  if (b->n == kMax) {
    // Split: the upper half moves to a new block after it.
    Block* r = new Block;
    const size_t half = kMax / 2;
    std::copy(b->e + half, b->e + kMax, r->e);
    r->n = kMax - half;
    b->n = half;
    blocks_.insert(blocks_.begin() + (ptrdiff_t)p.b + 1, r);
    if (p.i > half) b = r, p.i -= half;
  }
  std::copy_backward(b->e + p.i, b->e + b->n, b->e + b->n + 1);
  b->e[p.i] = make(std::move(key), id);  // (the key moved in last: it was searched for)
  b->n++;
  size_++;
}

bool KeyBlocks::erase(const Value& key, int64_t id) {
  const Pos p = first_not([&](const Entry& e) { return less(e, key, id); });
  if (p == end()) return false;
  const Entry& e = at(p);
  if (e.id != id || compare_key(e, key) != 0) return false;
  erase_at(p);
  return true;
}

void KeyBlocks::erase_at(Pos p) {
  const size_t bi = p.b, i = p.i;
  Block* b = blocks_[bi];
  drop(b->e[i]);
  std::copy(b->e + i + 1, b->e + b->n, b->e + i);
  b->n--;
  size_--;
  if (b->n == 0) {
    delete b;
    blocks_.erase(blocks_.begin() + (ptrdiff_t)bi);
  } else if (b->n < kMax / 4) {
    if (bi + 1 < blocks_.size() && b->n + blocks_[bi + 1]->n <= kMax) join(bi);
    else if (bi > 0 && b->n + blocks_[bi - 1]->n <= kMax) join(bi - 1);
  }
}

bool KeyBlocks::erase_id(int64_t id) {
  for (size_t bi = 0; bi < blocks_.size(); bi++) {
    const Block* b = blocks_[bi];
    for (size_t i = 0; i < b->n; i++)
      if (b->e[i].id == id) {
        erase_at({bi, i});
        return true;
      }
  }
  return false;
}

void KeyBlocks::join(size_t bi) {
  Block* a = blocks_[bi];
  Block* b = blocks_[bi + 1];
  std::copy(b->e, b->e + b->n, a->e + a->n);
  a->n += b->n;
  delete b;
  blocks_.erase(blocks_.begin() + (ptrdiff_t)bi + 1);
}

void KeyBlocks::load(std::vector<Loose> entries, std::vector<std::pair<int64_t, int64_t>> ints) {
  clear();
  const size_t n = entries.size() + ints.size();
  // Blocks filled to 3/4, so the inserts that follow split few of them.
  constexpr size_t kFill = kMax * 3 / 4;
  blocks_.reserve((n + kFill - 1) / kFill);
  auto fill = [&](auto&& put) {
    for (size_t at = 0; at < n; at += kFill) {
      Block* b = new Block;
      b->n = std::min(kFill, n - at);
      for (size_t i = 0; i < b->n; i++) b->e[i] = put(at + i);
      blocks_.push_back(b);
    }
  };
  if (entries.empty()) {
    // Int keys alone (the most common): sorted as pairs of words.
    std::sort(ints.begin(), ints.end());
    fill([&](size_t i) {
      Entry e;
      e.id = ints[i].second;
      e.i = ints[i].first;
      e.kind = Kind::Int;
      return e;
    });
  } else {
    entries.reserve(n);
    for (auto [k, id] : ints) entries.push_back({Value::integer(k), id});
    ints = {};
    std::sort(entries.begin(), entries.end(), [](const Loose& a, const Loose& b) {
      int c = compare(a.key, b.key);
      return c ? c < 0 : a.id < b.id;
    });
    fill([&](size_t i) { return make(std::move(entries[i].key), entries[i].id); });
  }
  size_ = n;
}

KeyBlocks::Pos KeyBlocks::lower_key(const Value& k, bool after) const {
  // Past an entry: its key is below k (or, with `after`, not above it).
  return first_not([&](const Entry& e) {
    int c = compare_key(e, k);
    return after ? c <= 0 : c < 0;
  });
}

size_t KeyBlocks::between(Pos a, Pos b) const {
  if (a.b == b.b) return b.i - a.i;
  size_t n = blocks_[a.b]->n - a.i;
  for (size_t x = a.b + 1; x < b.b; x++) n += blocks_[x]->n;
  return n + b.i;
}

}  // namespace kitfox
