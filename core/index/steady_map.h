// SteadyMap: the hash map of the indexes that writes grow (a secondary
// index's keys and documents, a text index's terms and lengths, a vector
// index's document -> node map). std::unordered_map grows by rehashing every
// entry at once: at a million entries one insert, under the write lock, would
// relink them all while every reader and writer waits. SteadyMap grows in
// pieces instead: past a load of one it allocates a table of twice the
// buckets (zeroed pages the system gives lazily) and every later insert or
// erase moves the entries of a few buckets of the old table into it, so no
// operation moves more than kMoveBuckets buckets' entries, and the old table
// is gone long before the new one fills. Lookups look in both tables while
// the move runs. Const operations change nothing, so readers may share one
// under a shared lock while writers hold it exclusively. Its entries live in
// chunks the map owns (up to 4,096 entries or 256 KiB each), not one
// allocation each: an erased entry's room goes to the next insert, and the
// chunks go at clear(), at once (a million entries freed one by one took
// ~150 ms).
//
// A map whose keys are text (K = std::string) holds each key's bytes in its
// entry, after the value: entries of one size class (16 bytes apart up to
// 256, then powers of two) share chunks, and a lookup compares the key it
// already loaded with the entry. A std::string key was a second allocation
// an entry (to make, to free, and to load on every lookup). Such a map
// gives its keys as std::string_view.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <algorithm>
#include <memory>
#include <new>
#include <vector>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kitfox {

// Hashes whose low and high bits are both spread (ids are often sequential
// or strided; the bucket is taken from the top bits of a multiply).
struct SteadyHash {
  template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  uint64_t operator()(I k) const {
    return (uint64_t)(int64_t)k;  // an int and an int64_t of one value hash alike
  }
  uint64_t operator()(std::string_view k) const { return std::hash<std::string_view>()(k); }
};

// Room for a map's entries, all of one size: taken from chunks of up to
// 4,096 (one allocation for many), an entry given back goes to the next
// take, and clear() lets the chunks go at once: a map keeps the room of its
// largest size until then. Not typed, so that every SteadyMap shares this
// code.
class SlotPool {
 public:
  explicit SlotPool(size_t size) : size_(size) {}
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;
  void* take();
  void give(void* p);
  void clear();
  void swap(SlotPool& o) noexcept;
  size_t bytes() const { return slots_ * size_; }  // every chunk's room, used or not

 private:
  struct Free {
    Free* next;
  };
  size_t size_;
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
  size_t used_ = 0, cap_ = 0;  // of the last chunk, in slots
  size_t slots_ = 0;           // in all chunks
  Free* free_ = nullptr;       // room given back
};

template <typename K, typename V, typename H = SteadyHash>
class SteadyMap {
 public:
  // Buckets whose entries one insert or erase moves into the growing table
  // (at most; empty buckets passed over count a quarter each).
  static constexpr size_t kMoveBuckets = 8;

  SteadyMap() = default;
  SteadyMap(const SteadyMap&) = delete;
  SteadyMap& operator=(const SteadyMap&) = delete;
  ~SteadyMap() { clear(); }

  // The keys as the map holds them and gives them (for_each).
  static constexpr bool kText = std::is_same_v<K, std::string>;
  using KeyRef = std::conditional_t<kText, std::string_view, const K&>;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Whether a move into a bigger table is under way (tests watch it).
  bool growing() const { return old_.buckets != nullptr; }
  size_t bucket_count() const { return cur_.mask + (cur_.buckets ? 1 : 0); }
  size_t memory_bytes() const {
    return pools_.bytes() + (bucket_count() + (old_.buckets ? old_.mask + 1 : 0)) * sizeof(Node*);
  }

  template <typename Q>
  const V* find(const Q& k) const {
    const Node* n = locate(k, hash(k));
    return n ? &n->value : nullptr;
  }
  template <typename Q>
  V* find(const Q& k) {
    Node* n = locate(k, hash(k));
    return n ? &n->value : nullptr;
  }

  // The value under k, made (default) if there is none.
  template <typename Q>
  V& operator[](const Q& k) {
    step();
    uint64_t h = hash(k);
    if (Node* n = locate(k, h)) return n->value;
    if (size_ >= bucket_count()) grow();
    Node* n = make_node(h, k, V());
    link(cur_, n);
    size_++;
    return n->value;
  }

  template <typename Q>
  bool erase(const Q& k) {
    return erase_first(k, [](const V&) { return true; });
  }

  // As a multimap (a map used only through these three, never operator[]):
  // another entry under k, whatever is there already; f(value) for each
  // entry under k until f returns false; the first entry under k whose value
  // `match` accepts erased.
  template <typename Q>
  void insert_multi(const Q& k, V v) {
    step();
    if (size_ >= bucket_count()) grow();
    link(cur_, make_node(hash(k), k, std::move(v)));
    size_++;
  }
  template <typename Q, typename F>
  void for_each_equal(const Q& k, F&& f) const {
    uint64_t h = hash(k);
    for (const Table* t : {&cur_, &old_}) {
      if (!t->buckets) continue;
      for (const Node* n = t->buckets[index(*t, h)]; n; n = n->next)
        if (n->hash == h && same(n, k) && !f(n->value)) return;
    }
  }
  template <typename Q, typename P>
  bool erase_first(const Q& k, P&& match) {
    step();
    uint64_t h = hash(k);
    for (Table* t : {&cur_, &old_}) {
      if (!t->buckets) continue;
      for (Node** p = &t->buckets[index(*t, h)]; *p; p = &(*p)->next) {
        if ((*p)->hash != h || !same(*p, k) || !match((*p)->value)) continue;
        Node* n = *p;
        *p = n->next;
        drop_node(n);
        size_--;
        return true;
      }
    }
    return false;
  }

  // Room for n entries without growing (a map built whole at once).
  void reserve(size_t n) {
    if (n <= bucket_count()) return;
    finish();
    size_t b = 16;
    while (b < n) b *= 2;
    rebuild(b);
  }

  // `values_own_nothing`: the caller knows no value's destructor would do
  // anything (nor any key's), so the entries go with their chunks, with no
  // visit each (a million visits in bucket order: a cache miss each).
  void clear(bool values_own_nothing = false) {
    for (Table* t : {&cur_, &old_}) {
      if (!t->buckets) continue;
      const bool visit = (!std::is_trivially_destructible_v<KeyField> || !std::is_trivially_destructible_v<V> ||
                          pools_.big) && !(values_own_nothing && !pools_.big);
      if (visit)
        for (size_t i = 0; i <= t->mask; i++)
          for (Node* n = t->buckets[i]; n;) {
            Node* next = n->next;
            drop_node(n, false);
            n = next;
          }
      std::free(t->buckets);
      *t = Table{};
    }
    pools_.clear();
    size_ = 0;
    moved_ = 0;
  }

  // Exchanges the contents of two maps (a map built aside, put in place).
  void swap(SteadyMap& o) noexcept {
    std::swap(cur_, o.cur_);
    std::swap(old_, o.old_);
    std::swap(size_, o.size_);
    std::swap(moved_, o.moved_);
    pools_.swap(o.pools_);
  }

  // f(key, value) for each entry, in no order, until f returns false.
  template <typename F>
  void for_each(F&& f) const {
    for (const Table* t : {&old_, &cur_}) {
      if (!t->buckets) continue;
      for (size_t i = 0; i <= t->mask; i++)
        for (const Node* n = t->buckets[i]; n; n = n->next)
          if (!f(n->key(), n->value)) return;
    }
  }

 private:
  // An entry: for text keys the key's length here and its bytes right
  // after the entry; others hold the key itself.
  struct TextLen {
    size_t n;
  };
  using KeyField = std::conditional_t<kText, TextLen, K>;
  struct Node {
    Node* next;
    uint64_t hash;
    V value;
    KeyField k;
    KeyRef key() const {
      if constexpr (kText) return {reinterpret_cast<const char*>(this) + sizeof(Node), k.n};
      else return k;
    }
  };
  template <typename Q>
  static bool same(const Node* n, const Q& q) {
    if constexpr (kText) return n->key() == std::string_view(q);
    else return n->k == q;
  }
  static size_t node_bytes(size_t key_bytes) { return sizeof(Node) + key_bytes; }

  // Room for entries: one pool; for text keys a pool a size class (16
  // bytes apart to 256, then powers of two to 4 KiB), made on first use,
  // and larger entries each an allocation of its own (`big` of them).
  struct FixedPools {
    SlotPool pool{sizeof(Node)};
    static constexpr size_t big = 0;
    void* take(size_t) { return pool.take(); }
    void give(void* p, size_t) { pool.give(p); }
    void clear() { pool.clear(); }
    void swap(FixedPools& o) noexcept { pool.swap(o.pool); }
    size_t bytes() const { return pool.bytes(); }
  };
  struct TextPools {
    static constexpr size_t kSmall = 16, kLarge = 4, kMaxSmall = 256, kMax = kMaxSmall << kLarge;
    static constexpr size_t class_of(size_t bytes) {
      if (bytes <= kMaxSmall) return (bytes + 15) / 16 - 1;
      size_t c = kSmall, cap = kMaxSmall * 2;
      while (cap < bytes) cap *= 2, c++;
      return c;
    }
    static constexpr size_t class_bytes(size_t c) { return c < kSmall ? (c + 1) * 16 : kMaxSmall << (c - kSmall + 1); }
    // Every size up to kMax in the smallest class that holds it.
    static constexpr bool classes_fit() {
      for (size_t b = 1; b <= kMax; b++) {
        const size_t c = class_of(b);
        if (c >= kSmall + kLarge || class_bytes(c) < b || (c > 0 && class_bytes(c - 1) >= b)) return false;
      }
      return true;
    }
    std::unique_ptr<SlotPool> pools[kSmall + kLarge];
    size_t big = 0, big_bytes = 0;
    void* take(size_t bytes) {
      if (bytes > kMax) {
        big++;
        big_bytes += bytes;
        return ::operator new(bytes, std::align_val_t(alignof(Node)));
      }
      auto& p = pools[class_of(bytes)];
      if (!p) p = std::make_unique<SlotPool>(class_bytes(class_of(bytes)));
      return p->take();
    }
    void give(void* n, size_t bytes) {
      if (bytes > kMax) {
        big--;
        big_bytes -= bytes;
        ::operator delete(n, std::align_val_t(alignof(Node)));
        return;
      }
      pools[class_of(bytes)]->give(n);
    }
    void clear() {
      for (auto& p : pools) p.reset();
      big = big_bytes = 0;
    }
    void swap(TextPools& o) noexcept {
      for (size_t i = 0; i < kSmall + kLarge; i++) pools[i].swap(o.pools[i]);
      std::swap(big, o.big);
      std::swap(big_bytes, o.big_bytes);
    }
    size_t bytes() const {
      size_t b = big_bytes;
      for (auto& p : pools)
        if (p) b += p->bytes();
      return b;
    }
  };

  template <typename Q>
  Node* make_node(uint64_t h, const Q& q, V&& v) {
    if constexpr (kText) {
      const std::string_view k(q);
      const size_t bytes = node_bytes(k.size());
      void* at = pools_.take(bytes);
      std::memcpy(static_cast<char*>(at) + sizeof(Node), k.data(), k.size());
      return new (at) Node{nullptr, h, std::move(v), TextLen{k.size()}};
    } else {
      return new (pools_.take(sizeof(Node))) Node{nullptr, h, std::move(v), K(q)};
    }
  }
  // `give`: its room back to the pool (not when all of it goes at once).
  void drop_node(Node* n, bool give = true) {
    size_t bytes = sizeof(Node);
    if constexpr (kText) bytes = node_bytes(n->k.n);
    n->~Node();
    if (give || bytes > TextPools::kMax) pools_.give(n, bytes);
  }

  struct Table {
    Node** buckets = nullptr;  // calloc'd: large ones are fresh zero pages, touched as used
    size_t mask = 0;
    unsigned shift = 64;
  };

  template <typename Q>
  static uint64_t hash(const Q& k) {
    if constexpr (std::is_convertible_v<const Q&, std::string_view>) return H()(std::string_view(k));
    else return H()(k);
  }
  static size_t index(const Table& t, uint64_t h) { return (size_t)((h * 0x9E3779B97F4A7C15ull) >> t.shift); }

  template <typename Q>
  Node* locate(const Q& k, uint64_t h) const {
    for (const Table* t : {&cur_, &old_}) {
      if (!t->buckets) continue;
      for (Node* n = t->buckets[index(*t, h)]; n; n = n->next)
        if (n->hash == h && same(n, k)) return n;
    }
    return nullptr;
  }

  static void link(Table& t, Node* n) {
    Node*& head = t.buckets[index(t, n->hash)];
    n->next = head;
    head = n;
  }

  static Table make(size_t buckets) {
    Table t;
    t.buckets = static_cast<Node**>(std::calloc(buckets, sizeof(Node*)));
    if (!t.buckets) std::abort();  // out of memory, as a std::unordered_map would
    t.mask = buckets - 1;
    unsigned bits = 0;
    while ((size_t(1) << bits) < buckets) bits++;
    t.shift = 64 - bits;
    return t;
  }

  // The table becomes twice as big: the current one becomes the old one,
  // emptied a few buckets at a time by step().
  void grow() {
    if (!cur_.buckets) {
      cur_ = make(16);
      return;
    }
    if (old_.buckets) finish();  // cannot happen (a move ends long before), but never three tables
    old_ = cur_;
    cur_ = make((cur_.mask + 1) * 2);
    moved_ = 0;
  }

  // Moves the entries of up to kMoveBuckets buckets of the old table.
  void step() {
    if (!old_.buckets) return;
    size_t budget = kMoveBuckets * 4;
    while (budget && moved_ <= old_.mask) {
      Node* n = old_.buckets[moved_];
      budget -= n ? std::min<size_t>(budget, 4) : 1;
      while (n) {
        Node* next = n->next;
        link(cur_, n);
        n = next;
      }
      old_.buckets[moved_++] = nullptr;
    }
    if (moved_ > old_.mask) {
      std::free(old_.buckets);
      old_ = Table{};
    }
  }

  void finish() {
    while (old_.buckets) step();
  }

  // All the entries into a table of `buckets` at once (reserve()).
  void rebuild(size_t buckets) {
    Table t = make(buckets);
    if (cur_.buckets) {
      for (size_t i = 0; i <= cur_.mask; i++)
        for (Node* n = cur_.buckets[i]; n;) {
          Node* next = n->next;
          link(t, n);
          n = next;
        }
      std::free(cur_.buckets);
    }
    cur_ = t;
  }

  Table cur_, old_;
  size_t size_ = 0;
  size_t moved_ = 0;  // buckets of old_ already emptied
  static_assert(TextPools::classes_fit());
  std::conditional_t<kText, TextPools, FixedPools> pools_;  // the entries' room (a Node holds a pointer: room for a SlotPool's Free too)
  static_assert(alignof(Node) <= alignof(std::max_align_t) && sizeof(Node) >= sizeof(void*));
};

}  // namespace kitfox
