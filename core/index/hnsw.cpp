#include "hnsw.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "../codec.h"
#include "../port.h"


namespace kitfox {

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Cosine: return "cosine";
    case Metric::L2: return "l2";
    case Metric::Dot: return "dot";
  }
  return "?";
}

namespace {

// Queries keep this many candidates on the upper layers (the build keeps
// one): enough not to be stranded in the wrong cluster. At 100k x 128 a beam
// of 2 searched 2-4% faster than 4 at ef 40-100 for the same recall (equal
// to or above hnswlib's greedy descent at every ef; bench/RESULTS.md).
constexpr size_t kUpperBeam = 2;

inline bool hit_less(const Hit& a, const Hit& b) {
  return a.distance < b.distance || (a.distance == b.distance && a.node < b.node);
}
struct HitGreater {
  bool operator()(const Hit& a, const Hit& b) const { return hit_less(b, a); }
};
struct HitLessF {
  bool operator()(const Hit& a, const Hit& b) const { return hit_less(a, b); }
};

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Accepts every node: one type for search() and find_candidates(), so that
// they share one instantiation of search_layer.
struct AllNodes {
  bool operator()(uint32_t) const { return true; }
};

// Per-thread search state, reused so that a search allocates nothing once warm.
struct Scratch {
  // Visited marks: 2 bytes per node keep the array small in cache; cleared
  // once every 65,535 searches.
  std::vector<uint16_t> marks;
  uint16_t gen = 0;
  uint32_t sink = 0;  // keeps the touching loads of search_layer (WASM)
  std::vector<Hit> cand, res;
  std::vector<Hit> ep, next;       // search, find_candidates: the entry points per level
  std::vector<float> q;            // find_candidates: the node's normalised vector
  std::vector<float> a;            // select_neighbors: a candidate's vector (f16: decoded)
  std::vector<float> from;         // add_link: the node whose full list is chosen again
  std::vector<Hit> relink;         // add_link: its links and the new one
  std::vector<uint32_t> kept;      // add_link: the ones it keeps
  std::vector<uint8_t> kept_pre;  // select_neighbors: which kept ones were pre-selected
  std::vector<uint16_t> halves;   // put: an f16 vector's stored form
  std::vector<Hit> pending;       // search: the nearest unlinked nodes
  void visit_reset(size_t n) {
    if (marks.size() < n) marks.resize(n + n / 2, 0);
    if (++gen == 0) {
      std::fill(marks.begin(), marks.end(), 0);
      gen = 1;
    }
  }
  bool visit(uint32_t i) {
    if (marks[i] == gen) return false;
    marks[i] = gen;
    return true;
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

HnswIndex::HnswIndex(uint32_t dim, bool f16, HnswParams p) : dim_(dim), f16_(f16), p_(p) {
  vbytes_ = (size_t)dim * (f16 ? 2 : 4);
  // Natively the first 256 bytes of each neighbour's vector are fetched
  // ahead (at 128 dims f32 that is half the vector: 5% faster than 128
  // bytes, and no faster whole); the hardware prefetcher follows on from
  // there. In WASM, where "prefetching" is a load (port.h), the whole vector
  // up to 1 KiB: at 128 dims f32 the search ran 25% faster than 256 bytes.
  ahead_bytes_ = std::min<size_t>(vbytes_, port::kPrefetchAhead);
  batch_dists_ = vbytes_ <= 1024;
  kernel_ = p.metric == Metric::L2 ? l2sq_kernel() : dot_kernel();
  kernel16_ = p.metric == Metric::L2 ? l2sq_f16_kernel() : dot_f16_kernel();
  sign_ = p.metric == Metric::L2 ? 1.0f : -1.0f;
}

Status HnswIndex::prepare(const float* v, std::vector<float>* out, const std::string& what) const {
  out->assign(v, v + dim_);
  for (uint32_t i = 0; i < dim_; i++)
    if (!std::isfinite(v[i])) return Status(Code::Type, "vector '" + what + "' has a non-finite value at " + std::to_string(i));
  if (f16_) {
    for (uint32_t i = 0; i < dim_; i++) {
      if (std::fabs(v[i]) > 65504.0f) return Status(Code::Type, "vector '" + what + "' overflows f16 at " + std::to_string(i));
      (*out)[i] = half_to_float(float_to_half(v[i]));
    }
  }
  if (p_.metric == Metric::Cosine && !(inv_norm(out->data()) > 0))
    return Status(Code::Type, "vector '" + what + "' has no direction (zero norm) for cosine distance");
  return Status::ok();
}

Status HnswIndex::prepare_query(const float* v, std::vector<float>* out, const std::string& what) const {
  out->assign(v, v + dim_);
  for (uint32_t i = 0; i < dim_; i++)
    if (!std::isfinite(v[i])) return Status(Code::Type, "vector '" + what + "' has a non-finite value at " + std::to_string(i));
  if (p_.metric == Metric::Cosine) {
    float inv = inv_norm(v);
    if (!(inv > 0)) return Status(Code::Type, "vector '" + what + "' has no direction (zero norm) for cosine distance");
    for (uint32_t i = 0; i < dim_; i++) (*out)[i] = v[i] * inv;
  }
  return Status::ok();
}

// 1/|v| in the canonical kernel order: the same bits in every build. Zero or
// not finite: 0.
float HnswIndex::inv_norm(const float* v) const {
  float n2 = dot_kernel()(v, v, dim_);
  if (!(n2 > 0) || !std::isfinite(n2)) return 0;
  float inv = 1.0f / std::sqrt(n2);
  return std::isfinite(inv) ? inv : 0;
}

void HnswIndex::normalized(uint32_t node, float* out) const {
  const float* v = vec(node, out);
  if (p_.metric == Metric::Cosine) {
    float inv = inv_[node];
    for (uint32_t i = 0; i < dim_; i++) out[i] = v[i] * inv;
  } else if (v != out) {
    memcpy(out, v, (size_t)dim_ * 4);
  }
}

void HnswIndex::vector_of(uint32_t node, std::vector<float>* out) const {
  if (node >= node_doc_.size()) {
    out->clear();
    return;
  }
  out->resize(dim_);
  const float* v = vec(node, out->data());
  if (v != out->data()) memcpy(out->data(), v, (size_t)dim_ * 4);
}

const float* HnswIndex::vec(uint32_t node, float* tmp) const {
  const char* p = raw(node);
  if (!f16_) return reinterpret_cast<const float*>(p);
  f16_to_f32(reinterpret_cast<const uint16_t*>(p), tmp, dim_);
  return tmp;
}

// The kernel between f32 values and a stored vector (f16: decoded as read).
float HnswIndex::kernel_to(const float* a, uint32_t node) const {
  const char* p = raw(node);
  if (f16_) return kernel16_(a, reinterpret_cast<const uint16_t*>(p), dim_);
  return kernel_(a, reinterpret_cast<const float*>(p), dim_);
}

float HnswIndex::dist(const float* q, uint32_t node) const {
  // q is a prepared query: 1 - inv * q.v (cosine), l2sq, -q.v (dot).
  float k = kernel_to(q, node);
  if (p_.metric == Metric::Cosine) return 1.0f - inv_[node] * k;
  return sign_ * k;
}

float HnswIndex::stored_dist(uint32_t a, const float* va, uint32_t b) const {
  float k = kernel_to(va, b);
  if (p_.metric == Metric::Cosine) return 1.0f - (inv_[a] * inv_[b]) * k;
  return sign_ * k;
}

float HnswIndex::distance_to(const float* q, uint32_t node) const {
  return dist(q, node);
}

uint32_t* HnswIndex::links(uint32_t node, int level) {
  if (level == 0) return own_block(node >> kL0Shift) + (size_t)(node & kL0Mask) * l0_stride();
  return &upper_[upper_off_[node] + (size_t)(level - 1) * (1 + p_.m)];
}
const uint32_t* HnswIndex::links(uint32_t node, int level) const {
  if (level == 0) {
    const size_t stride = l0_stride();
    if (const uint32_t* p = l0_blk_[node >> kL0Shift]) return p + (size_t)(node & kL0Mask) * stride;
    if (lazy_links_ && !lazy_links_->clean())
      return reinterpret_cast<const uint32_t*>(lazy_links_->need((uint64_t)node * stride * 4, stride * 4));
    return l0_ + (size_t)node * stride;
  }
  return &upper_[upper_off_[node] + (size_t)(level - 1) * (1 + p_.m)];
}

uint32_t* HnswIndex::own_block_copy(uint32_t b) {
  const size_t words = l0_block_words();
  uint32_t* from = l0_blk_[b];
  uint32_t* to = take_block();
  if (from) {  // a pin's: it goes on reading `from`, used again once its checkpoint is over
    memcpy(to, from, words * 4);
    l0_retired_.push_back(from);
    l0_shared_[b] = 0;
  } else {
    const uint32_t first = b << kL0Shift, end = std::max(first, std::min<uint32_t>(l0_image_n_, first + kL0Mask + 1));
    copy_image_lists(first, end, reinterpret_cast<char*>(to));
    std::fill(to + (size_t)(end - first) * l0_stride(), to + words, 0u);  // past the image's last node
    l0_used_++;
  }
  l0_blk_[b] = to;
  return to;
}

uint32_t* HnswIndex::take_block() {
  if (l0_free_.empty()) {
    // Chunks double up to a huge page's worth of blocks: a small index
    // takes little, a big one whole huge pages.
    const size_t bytes = l0_block_words() * 4, most = std::max<size_t>(1, kHugePage / bytes);
    size_t have = 0;
    for (const L0Chunk& c : l0_chunks_) have += c.blocks;
    const size_t n = std::min(most, std::max<size_t>(1, have));
    std::shared_ptr<char> mem = n == most && kHugeBlocks ? huge_block(n * bytes)
                                                         : std::shared_ptr<char>(new char[n * bytes], std::default_delete<char[]>());
    if (!mem) std::abort();  // out of memory, as a std::vector would
    for (size_t i = n; i-- > 0;) l0_free_.push_back(reinterpret_cast<uint32_t*>(mem.get() + i * bytes));
    l0_chunks_.push_back({std::move(mem), n});
  }
  uint32_t* p = l0_free_.back();
  l0_free_.pop_back();
  return p;
}

void HnswIndex::reuse_retired() {
  for (uint32_t* p : l0_retired_) l0_free_.push_back(p);
  l0_retired_.clear();
}

void HnswIndex::l0_in_image(size_t blocks) {
  l0_blk_.assign(blocks, nullptr);
  l0_shared_.assign(blocks, 0);
  l0_chunks_.clear();  // freed here unless a pin holds them
  l0_free_.clear();
  l0_retired_.clear();
  l0_used_ = 0;
}

void HnswIndex::trim_chunks() {
  if (!l0_used_) {
    l0_chunks_.clear();
    l0_free_.clear();
    return;
  }
  // Chunks some blocks of which are in use: only natively, where writes go
  // on beside a checkpoint. (Without threads the pin's blocks are all
  // unchanged at the switch.)
  if constexpr (!port::kThreads) return;
  const size_t bytes = l0_block_words() * 4;
  auto chunk_of = [&](const uint32_t* p) {  // a few dozen chunks at a million nodes
    const char* at = reinterpret_cast<const char*>(p);
    size_t i = 0;
    while (!(at >= l0_chunks_[i].mem.get() && at < l0_chunks_[i].mem.get() + l0_chunks_[i].blocks * bytes)) i++;
    return i;
  };
  std::vector<uint32_t> used(l0_chunks_.size());
  for (const uint32_t* p : l0_blk_)
    if (p) used[chunk_of(p)]++;
  size_t kept = 0;
  for (size_t i = 0; i < l0_chunks_.size(); i++) kept += used[i] != 0;
  if (kept == l0_chunks_.size()) return;
  std::vector<uint32_t*> free;
  for (uint32_t* p : l0_free_)
    if (used[chunk_of(p)]) free.push_back(p);
  size_t to = 0;
  for (size_t i = 0; i < l0_chunks_.size(); i++)
    if (used[i]) l0_chunks_[to++] = std::move(l0_chunks_[i]);
  l0_chunks_.resize(to);
  l0_free_ = std::move(free);
}

size_t HnswIndex::level0_chunk_bytes() const {
  size_t blocks = 0;
  for (const L0Chunk& c : l0_chunks_) blocks += c.blocks;
  return blocks * l0_block_words() * 4;
}

void HnswIndex::copy_image_lists(uint32_t first, uint32_t end, char* to) const {
  const size_t bytes = l0_stride() * 4;
  if (lazy_links_ && !lazy_links_->clean()) {  // each list read and checked (damaged: zeros)
    for (uint32_t n = first; n < end; n++) memcpy(to + (size_t)(n - first) * bytes, lazy_links_->need((uint64_t)n * bytes, bytes), bytes);
  } else if (end > first) {
    memcpy(to, l0_ + (size_t)first * l0_stride(), (size_t)(end - first) * bytes);
  }
}

void HnswIndex::add_l0(uint32_t node) {
  const uint32_t b = node >> kL0Shift;
  if (b == l0_blk_.size()) {  // a new block: each list is written as its node comes
    l0_blk_.push_back(take_block());
    l0_shared_.push_back(0);
    l0_used_++;
  }
  uint32_t* ls = own_block(b) + (size_t)(node & kL0Mask) * l0_stride();
  std::fill(ls, ls + l0_stride(), 0u);  // a node dropped before may have left its list
}

void HnswIndex::rebase(const char* table, const char* links0) {
  base_ = table;
  base_n_ = frozen_end_ = (uint32_t)node_doc_.size();
  frozen_.reset();
  extra_.release();
  lazy_table_.reset();
  lazy_links_.reset();
  l0_in_image(((size_t)levels_.size() + kL0Mask) >> kL0Shift);
  l0_ = reinterpret_cast<const uint32_t*>(links0);
  l0_image_n_ = (uint32_t)levels_.size();
}

void HnswIndex::read_all() const {
  if (lazy_table_) lazy_table_->warm(UINT64_MAX);
  if (lazy_links_) lazy_links_->warm(UINT64_MAX);
}

uint64_t HnswIndex::warm(uint64_t budget) {
  uint64_t done = lazy_table_ ? lazy_table_->warm(budget) : 0;
  if (lazy_links_ && done < budget) done += lazy_links_->warm(budget - done);
  return done;
}

uint64_t HnswIndex::unread_bytes() const {
  return (lazy_table_ ? lazy_table_->missing_bytes() : 0) + (lazy_links_ ? lazy_links_->missing_bytes() : 0);
}

int HnswIndex::random_level(uint32_t node) const {
  uint64_t x = splitmix(node ^ 0x6b69746678ull);
  int level = 0;
  while (level < kMaxLevel) {
    x = splitmix(x);
    if (x % p_.m != 0) break;
    level++;
  }
  return level;
}

// Of the stored bytes (vbytes_): four 64-bit lanes, each word xored in and
// multiplied (independent chains, so about a byte per cycle), then mixed.
// Only a filter: equal fingerprints are confirmed by comparing the bytes.
uint32_t HnswIndex::fingerprint(const char* bytes) const {
  uint64_t h[4] = {1, 2, 3, 4};
  size_t words = vbytes_ / 8, i = 0;
  for (; i < words; i++) {
    uint64_t w;
    memcpy(&w, bytes + i * 8, 8);
    h[i & 3] = (h[i & 3] ^ w) * 0x9E3779B97F4A7C15ull;
  }
  uint64_t tail = 0;
  memcpy(&tail, bytes + words * 8, vbytes_ - words * 8);
  uint64_t x = splitmix(h[0] ^ tail);
  x = splitmix(x ^ h[1]);
  x = splitmix(x ^ h[2]);
  x = splitmix(x ^ h[3] ^ vbytes_);
  return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

bool HnswIndex::build_maps_piece(MapBuild* b, uint32_t nodes) {
  if (maps_built_.load(std::memory_order_acquire)) return true;
  if (b->next == 0 || b->changes != changes_) {
    b->doc_node.clear();
    b->fp_nodes.clear();
    b->doc_node.reserve(levels_.size());
    if (!copy_) b->fp_nodes.reserve(levels_.size());
    b->next = 0;
    b->changes = changes_;
  }
  const uint32_t end = (uint32_t)std::min<size_t>(levels_.size(), (size_t)b->next + nodes);
  for (uint32_t n = b->next; n < end; n++) {
    if (!copy_) b->fp_nodes.insert_multi(fp_[n], n);
    if (refs_[n]) b->doc_node[node_doc_[n]] = n;
  }
  b->next = end;
  if (end < levels_.size()) return false;
  for (auto& [n, d] : more_docs_) b->doc_node[d] = n;
  std::lock_guard g(maps_mu_);
  if (!maps_built_.load(std::memory_order_relaxed)) {
    doc_node_.swap(b->doc_node);
    fp_nodes_.swap(b->fp_nodes);
    maps_built_.store(true, std::memory_order_release);
  }
  return true;
}

void HnswIndex::build_doc_map() {
  if (maps_built_.load(std::memory_order_acquire)) return;
  MapBuild b;
  build_maps_piece(&b, UINT32_MAX);
  whole_builds_.fetch_add(1, std::memory_order_relaxed);
}

bool HnswIndex::reserve(uint64_t scans) {
  reserving_.store(true, std::memory_order_relaxed);
  if (maps_ready()) return true;
  if (scans > kScanRounds) return false;  // (also keeps the product below from overflowing)
  const uint64_t cost = scans * scan_cost(), bound = scan_bound();
  uint64_t at = scanned_.load(std::memory_order_relaxed);
  do {
    if (at + cost > bound) return false;
  } while (!scanned_.compare_exchange_weak(at, at + cost, std::memory_order_relaxed));
  return true;
}

void HnswIndex::unreserve(uint64_t scans) {
  if (maps_ready()) return;
  scanned_.fetch_sub(scans * scan_cost(), std::memory_order_relaxed);
}

void HnswIndex::ready_to_find(uint64_t scans) {
  if (maps_ready()) return;
  // Counted as they go; where a caller reserves, apart from its
  // reservations and only as a guard, kOverrun bounds' worth.
  const bool reserved = reserving_.load(std::memory_order_relaxed);
  std::atomic<uint64_t>& count = reserved ? overrun_ : scanned_;
  const uint64_t cost = scans * scan_cost(), bound = (reserved ? kOverrun : 1) * scan_bound();
  if (count.load(std::memory_order_relaxed) + cost > bound) return build_doc_map();
  count.fetch_add(cost, std::memory_order_relaxed);
}

int64_t HnswIndex::find_doc(int64_t doc) const {
  if (maps_ready()) {
    const uint32_t* n = doc_node_.find(doc);
    return n ? (int64_t)*n : -1;
  }
  // As build_maps_piece has it where an image lists a document twice: a
  // node sharing it last, else the last node holding it first.
  int64_t shared = -1;
  for (const auto& [node, other] : more_docs_)
    if (other == doc) shared = node;
  if (shared >= 0) return shared;
  // Eight nodes a step from the end, their comparisons or-ed with no
  // branch between them (the compiler makes that one vector compare).
  const int64_t* d = node_doc_.data();
  const size_t n = node_doc_.size(), whole = n & ~size_t{7};
  auto holds = [&](size_t i) { return d[i] == doc && refs_[i] != 0; };  // a tombstone keeps its last document
  for (size_t i = n; i > whole; i--)
    if (holds(i - 1)) return (int64_t)(i - 1);
  for (size_t i = whole; i > 0; i -= 8) {
    bool any = false;
    for (size_t k = 1; k <= 8; k++) any |= d[i - k] == doc;
    if (any)
      for (size_t k = 1; k <= 8; k++)
        if (holds(i - k)) return (int64_t)(i - k);
  }
  return -1;
}

int64_t HnswIndex::find_twin(uint32_t fp, const char* bytes) const {
  auto same = [&](uint32_t n) { return fp_[n] == fp && memcmp(raw(n), bytes, vbytes_) == 0; };
  int64_t twin = -1;
  if (maps_ready()) {
    fp_nodes_.for_each_equal(fp, [&](uint32_t n) {
      if (same(n)) twin = n;
      return twin < 0;
    });
    return twin;
  }
  // From the end, as the map (built in node order) gives them.
  const uint32_t* f = fp_.data();
  const size_t n = fp_.size(), whole = n & ~size_t{15};
  for (size_t i = n; i > whole; i--)
    if (same((uint32_t)(i - 1))) return (int64_t)(i - 1);
  for (size_t i = whole; i > 0; i -= 16) {
    bool any = false;
    for (size_t k = 1; k <= 16; k++) any |= f[i - k] == fp;
    if (any)
      for (size_t k = 1; k <= 16; k++)
        if (same((uint32_t)(i - k))) return (int64_t)(i - k);
  }
  return -1;
}

void HnswIndex::put(int64_t doc, const float* v) {
  ready_to_find(2);
  changes_++;
  // The stored form: the floats themselves, or their halves.
  const char* bytes = reinterpret_cast<const char*>(v);
  std::vector<uint16_t>& halves = scratch().halves;
  if (f16_) {
    halves.resize(dim_);
    for (uint32_t i = 0; i < dim_; i++) halves[i] = float_to_half(v[i]);
    bytes = reinterpret_cast<const char*>(halves.data());
  }
  uint32_t fp = fingerprint(bytes);
  if (const int64_t at = find_doc(doc); at >= 0) {
    if (fp_[at] == fp && memcmp(raw((uint32_t)at), bytes, vbytes_) == 0) return;
    remove(doc);
  }
  doc_count_++;
  if (const int64_t shared = find_twin(fp, bytes); shared >= 0) {  // a node holding the same vector already
    uint32_t n = (uint32_t)shared;
    if (refs_[n]++ == 0) node_doc_[n] = doc, tombstones_--;
    else more_docs_.emplace(n, doc);
    if (maps_ready()) doc_node_[doc] = n;  // (remove() may have built them)
    return;
  }
  uint32_t n = (uint32_t)levels_.size();
  size_t off = extra_.size();
  extra_.resize(off + vbytes_);
  memcpy(extra_.data() + off, bytes, vbytes_);
  int level = random_level(n);
  levels_.push_back((uint8_t)level);
  fp_.push_back(fp);
  if (p_.metric == Metric::Cosine) inv_.push_back(inv_norm(v));
  node_doc_.push_back(doc);
  refs_.push_back(1);
  add_l0(n);
  upper_off_.push_back((uint32_t)upper_.size());
  if (level > 0) upper_.resize(upper_.size() + (size_t)level * (1 + p_.m), 0);
  if (maps_ready()) {
    fp_nodes_.insert_multi(fp, n);
    doc_node_[doc] = n;
  }
}

void HnswIndex::drop_pending() {
  // (Not into a frozen part: one found there stays, a node without a document.)
  while (levels_.size() > linked_ && levels_.size() > frozen_end_ && refs_.back() == 0) {
    changes_++;  // only when it drops one: a rollback calls it on every index
    tombstones_--;
    uint32_t n = (uint32_t)levels_.size() - 1;
    if (maps_ready()) fp_nodes_.erase_first(fp_[n], [&](uint32_t v) { return v == n; });
    extra_.resize(extra_.size() - vbytes_);
    upper_.resize(upper_off_[n]);
    upper_off_.pop_back();
    levels_.pop_back();
    fp_.pop_back();
    if (!inv_.empty()) inv_.pop_back();
    node_doc_.pop_back();
    refs_.pop_back();
    // Its list stays in its block until a node takes its place (add_l0).
  }
}

void HnswIndex::remove(int64_t doc) {
  ready_to_find(1);
  changes_++;
  const int64_t at = find_doc(doc);
  if (at < 0) return;
  uint32_t n = (uint32_t)at;
  if (maps_ready()) doc_node_.erase(doc);
  doc_count_--;
  if (--refs_[n] == 0) tombstones_++;
  if (node_doc_[n] == doc) {
    auto m = more_docs_.find(n);
    if (m != more_docs_.end()) {
      node_doc_[n] = m->second;
      more_docs_.erase(m);
    }
  } else {
    auto range = more_docs_.equal_range(n);
    for (auto r = range.first; r != range.second; ++r)
      if (r->second == doc) {
        more_docs_.erase(r);
        break;
      }
  }
}

void HnswIndex::docs_of(uint32_t node, std::vector<int64_t>* out) const {
  if (!refs_[node]) return;
  out->push_back(node_doc_[node]);
  if (refs_[node] > 1) {
    size_t start = out->size();
    auto range = more_docs_.equal_range(node);
    for (auto r = range.first; r != range.second; ++r) out->push_back(r->second);
    std::sort(out->begin() + start - 1, out->end());
  }
}

template <typename Accept>
void HnswIndex::search_layer(const float* q, const std::vector<Hit>& entry, size_t ef, int level, const Accept& accept,
                             std::vector<Hit>* out, size_t keep) const {
  Scratch& s = scratch();
  s.visit_reset(levels_.size());
  std::vector<Hit>& cand = s.cand;  // min-heap
  std::vector<Hit>& res = *out;     // max-heap of accepted
  res.clear();
  res.reserve(ef + 1);
  cand.clear();
  float lower = std::numeric_limits<float>::infinity();
  for (const Hit& e : entry) {
    if (!s.visit(e.node)) continue;
    cand.push_back(e);
    std::push_heap(cand.begin(), cand.end(), HitGreater());
    if (accept(e.node)) {
      res.push_back(e);
      std::push_heap(res.begin(), res.end(), HitLessF());
      if (res.size() > ef) {
        std::pop_heap(res.begin(), res.end(), HitLessF());
        res.pop_back();
      }
    }
  }
  if (res.size() >= ef) lower = res.front().distance;
  while (!cand.empty()) {
    Hit c = cand.front();
    if (c.distance > lower && res.size() >= ef) break;
    std::pop_heap(cand.begin(), cand.end(), HitGreater());
    cand.pop_back();
    const uint32_t* ls = links(c.node, level);
    uint32_t cnt = ls[0];
    // First the unvisited neighbours, with their vectors prefetched, then the
    // distances: the loads overlap instead of stalling one by one.
    uint32_t fresh[512];
    uint32_t nf = 0;
    uint32_t touched = 0;
    for (uint32_t i = 1; i <= cnt; i++) {
      uint32_t n = ls[i];
      if (!s.visit(n)) continue;
      fresh[nf++] = n;
      touched += port::prefetch(raw(n), ahead_bytes_);
      if (!inv_.empty()) touched += port::prefetch(&inv_[n], sizeof(float));
    }
    s.sink += touched;
    if (!cand.empty()) __builtin_prefetch(links(cand.front().node, level));
    // Small vectors: the distances first, apart from the branches that use
    // them, so that their loads overlap (a mispredicted branch would wait for
    // each in turn): 7-8% faster at 128 and 256 dims f32. Vectors over 1 KiB
    // spend longer computing than waiting, and interleaving was 2-3% faster.
    float fd[512];
    uint32_t done = 0;  // distances computed (one call site keeps the code small)
    for (uint32_t j = 0; j < nf; j++) {
      if (j == done)
        for (uint32_t upto = batch_dists_ ? nf : j + 1; done < upto; done++) fd[done] = dist(q, fresh[done]);
      uint32_t n = fresh[j];
      Hit h{fd[j], n};
      if (res.size() < ef || hit_less(h, res.front())) {
        cand.push_back(h);
        std::push_heap(cand.begin(), cand.end(), HitGreater());
        if (accept(n)) {
          res.push_back(h);
          std::push_heap(res.begin(), res.end(), HitLessF());
          if (res.size() > ef) {
            std::pop_heap(res.begin(), res.end(), HitLessF());
            res.pop_back();
          }
          if (res.size() >= ef) lower = res.front().distance;
        }
      }
    }
  }
  while (res.size() > keep) {  // the farthest go without being sorted
    std::pop_heap(res.begin(), res.end(), HitLessF());
    res.pop_back();
  }
  std::sort(res.begin(), res.end(), HitLessF());
}

void HnswIndex::search(const float* q, size_t k, size_t ef, const std::function<bool(uint32_t)>& accept,
                       std::vector<Hit>* out) const {
  if (copy_) return exact(q, k, accept, out);  // a pinned copy has no graph (the planner never asks it)
  out->clear();
  if (k == 0) return;
  Scratch& s = scratch();
  s.pending.clear();
  if (linked_ < levels_.size()) add_pending(q, k, accept, out);
  if (entry_ < 0) return;
  std::vector<Hit>& ep = s.ep;
  std::vector<Hit>& next = s.next;
  ep.clear();
  ep.push_back(Hit{dist(q, (uint32_t)entry_), (uint32_t)entry_});
  AllNodes all;
  for (int l = max_level_; l >= 1; l--) {
    search_layer(q, ep, kUpperBeam, l, all, &next);
    ep.swap(next);
  }
  if (accept) {
    auto live = [&](uint32_t n) { return refs_[n] > 0 && accept(n); };
    search_layer(q, ep, std::max(ef, k), 0, live, out, k);
  } else if (tombstones_) {
    auto live = [&](uint32_t n) { return refs_[n] > 0; };
    search_layer(q, ep, std::max(ef, k), 0, live, out, k);
  } else {
    search_layer(q, ep, std::max(ef, k), 0, all, out, k);  // every node is live
  }
  if (!s.pending.empty()) {
    out->erase(std::remove_if(out->begin(), out->end(), [&](const Hit& h) { return h.node >= linked_; }), out->end());
    out->insert(out->end(), s.pending.begin(), s.pending.end());
    std::sort(out->begin(), out->end(), HitLessF());
    if (out->size() > k) out->resize(k);
  }
}

// Nodes put since the last link_pending (a batch's, before it lands) are not
// in the graph yet: search() takes the nearest of them exactly, so that a
// statement of a batch or transaction sees the vectors written before it.
void HnswIndex::add_pending(const float* q, size_t k, const std::function<bool(uint32_t)>& accept,
                            std::vector<Hit>* out) const {
  std::vector<Hit>& p = scratch().pending;
  p.clear();
  for (uint32_t n = linked_; n < levels_.size(); n++)
    if (refs_[n] && (!accept || accept(n))) p.push_back(Hit{dist(q, n), n});
  std::sort(p.begin(), p.end(), HitLessF());
  if (p.size() > k) p.resize(k);
  if (entry_ < 0) *out = p;
}

void HnswIndex::exact(const float* q, size_t k, const std::function<bool(uint32_t)>& accept, std::vector<Hit>* out,
                      bool ties) const {
  out->clear();
  if (k == 0) return;
  std::vector<Hit> heap, tied;  // tied: left out, as far as the farthest kept
  heap.reserve(k + 1);
  for (uint32_t n = 0; n < levels_.size(); n++) {
    if (!refs_[n]) continue;
    if (accept && !accept(n)) continue;
    Hit h{dist(q, n), n};
    if (heap.size() < k) {
      heap.push_back(h);
      std::push_heap(heap.begin(), heap.end(), HitLessF());
    } else if (hit_less(h, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), HitLessF());
      const Hit out_of_heap = heap.back();
      heap.back() = h;
      std::push_heap(heap.begin(), heap.end(), HitLessF());
      if (ties) {
        if (heap.front().distance < out_of_heap.distance) tied.clear();
        else tied.push_back(out_of_heap);
      }
    } else if (ties && h.distance == heap.front().distance) {
      tied.push_back(h);
    }
  }
  heap.insert(heap.end(), tied.begin(), tied.end());
  std::sort(heap.begin(), heap.end(), HitLessF());
  *out = std::move(heap);
}

// hnsw's heuristic: keep a candidate only when it is nearer to the new node
// than to every neighbour already kept, so links spread in all directions.
// `pre` (optional) flags candidates that passed this test among themselves
// already (a selection's own output): two of them are not compared again.
void HnswIndex::select_neighbors(const std::vector<Hit>& cand, uint32_t m, std::vector<uint32_t>* out,
                                 const std::vector<uint8_t>* pre) const {
  out->clear();
  Scratch& s = scratch();
  if (s.a.size() < dim_) s.a.resize(dim_);
  s.kept_pre.clear();
  for (size_t i = 0; i < cand.size(); i++) {
    const Hit& c = cand[i];
    if (out->size() >= m) break;
    bool c_pre = pre && (*pre)[i];
    // Distances between two stored vectors, as stored: for cosine scaled by
    // both inverse norms rather than normalising the candidate first (which
    // cost 8% of a 768-dim build).
    const float* cv = nullptr;
    bool keep = true;
    for (size_t k = 0; k < out->size(); k++) {
      if (c_pre && s.kept_pre[k]) continue;
      if (!cv) cv = vec(c.node, s.a.data());
      if (stored_dist(c.node, cv, (*out)[k]) < c.distance) {
        keep = false;
        break;
      }
    }
    if (keep) out->push_back(c.node), s.kept_pre.push_back(c_pre);
  }
}

void HnswIndex::find_candidates(uint32_t node, int top, std::vector<std::vector<Hit>>* per_level) const {
  Scratch& s = scratch();
  s.q.resize(dim_);
  normalized(node, s.q.data());
  const float* q = s.q.data();
  per_level->resize(top + 1);
  std::vector<Hit>& ep = s.ep;
  std::vector<Hit>& next = s.next;
  ep.clear();
  ep.push_back(Hit{dist(q, (uint32_t)entry_), (uint32_t)entry_});
  AllNodes all;
  for (int l = max_level_; l > top; l--) {
    search_layer(q, ep, 1, l, all, &next);
    ep.swap(next);
  }
  for (int l = top; l >= 0; l--) {
    search_layer(q, ep, p_.ef_construction, l, all, &(*per_level)[l]);
    ep = (*per_level)[l];
  }
}

void HnswIndex::add_link(uint32_t from, uint32_t to, int level, bool* have_from) {
  uint32_t* ls = links(from, level);
  uint32_t cap = max_links(level);
  if (ls[0] < cap) {
    ls[++ls[0]] = to;
    return;
  }
  // A full list: choose again among its links and the new one, in the
  // thread's buffers (`from`'s vector normalised once per group of requests).
  Scratch& s = scratch();
  if (!*have_from) {
    s.from.resize(dim_);
    normalized(from, s.from.data());
    *have_from = true;
  }
  const float* fv = s.from.data();
  std::vector<Hit>& cand = s.relink;
  cand.clear();
  for (uint32_t i = 1; i <= ls[0]; i++) cand.push_back({dist(fv, ls[i]), ls[i]});
  cand.push_back({dist(fv, to), to});
  std::sort(cand.begin(), cand.end(), HitLessF());
  std::vector<uint32_t>& kept = s.kept;
  select_neighbors(cand, cap, &kept);
  ls[0] = (uint32_t)kept.size();
  for (size_t i = 0; i < kept.size(); i++) ls[1 + i] = kept[i];
}

// A node's own links (phase A of a chunk) from its pre-selected neighbours
// plus those of the chunk's earlier nodes that the search would have kept had
// they been in the graph: nearer than the farthest of the ef_construction
// found (`bound`; all of them when the search found fewer, or did not reach
// the level). Farther chunk nodes would only add stray long links (more
// links to scan in every later search). Reverse links are queued for phase C.
void HnswIndex::link_node(uint32_t node, const std::vector<std::vector<Hit>>& per_level, const std::vector<Hit>& bound,
                          uint32_t chunk_start, std::vector<LinkRequest>* reverse) {
  int level = levels_[node];
  std::vector<float> qv(dim_);
  normalized(node, qv.data());
  const float* q = qv.data();
  std::vector<uint32_t> chosen;
  std::vector<Hit> cand, near;
  std::vector<uint8_t> pre;
  for (int l = level; l >= 0; l--) {
    static const std::vector<Hit> none;
    const std::vector<Hit>& sel = l < (int)per_level.size() ? per_level[l] : none;
    near.clear();
    for (uint32_t y = chunk_start; y < node; y++)
      if (levels_[y] >= l) {
        Hit h{dist(q, y), y};
        if (l >= (int)bound.size() || hit_less(h, bound[l])) near.push_back(h);
      }
    if (near.empty()) {
      // The heuristic over its own output keeps all of it.
      chosen.clear();
      for (const Hit& h : sel) chosen.push_back(h.node);
    } else {
      std::sort(near.begin(), near.end(), HitLessF());
      cand.resize(sel.size() + near.size());
      std::merge(sel.begin(), sel.end(), near.begin(), near.end(), cand.begin(), HitLessF());
      pre.resize(cand.size());
      size_t j = 0;
      for (size_t i = 0; i < cand.size(); i++) pre[i] = j < sel.size() && cand[i].node == sel[j].node ? (j++, 1) : 0;
      select_neighbors(cand, p_.m, &chosen, &pre);
    }
    uint32_t* ls = links(node, l);
    ls[0] = (uint32_t)chosen.size();
    for (size_t i = 0; i < chosen.size(); i++) ls[1 + i] = chosen[i];
    for (uint32_t c : chosen) reverse->push_back({c, (uint8_t)l, node});
  }
}

void HnswIndex::link_pending(int threads) {
  if (linked_ >= levels_.size()) return;
  port::Workers pool(threads);
  std::vector<std::vector<std::vector<Hit>>> found(kChunk);
  std::vector<std::vector<Hit>> bounds(kChunk);
  std::vector<std::vector<LinkRequest>> requests(kChunk);
  std::vector<LinkRequest> reverse;
  std::vector<uint32_t> group_start;
  while (linked_ < levels_.size()) {
    uint32_t s = linked_, e = (uint32_t)std::min<size_t>(levels_.size(), s + kChunk);
    // The chunk's blocks its own (a pin since its nodes came may share
    // them): A writes their lists from several threads.
    for (uint32_t b = s >> kL0Shift; b <= (e - 1) >> kL0Shift; b++) own_block(b);
    // A: each node on its own (in parallel): search the graph as it stood
    // before the chunk, pre-select neighbours, then write the node's own
    // lists from them plus the chunk's earlier nodes. Nothing links to a
    // chunk node before C, so no search sees those lists being written.
    bool search = entry_ >= 0;
    pool.run(s, e, [&](uint32_t i) {
      auto& per = found[i - s];
      auto& bound = bounds[i - s];
      per.clear();
      bound.clear();
      if (search) {
        find_candidates(i, std::min<int>(levels_[i], max_level_), &per);
        std::vector<uint32_t> kept;
        for (auto& w : per) {
          const float inf = std::numeric_limits<float>::infinity();
          bound.push_back(w.size() >= p_.ef_construction ? w.back() : Hit{inf, UINT32_MAX});
          select_neighbors(w, p_.m, &kept);
          std::vector<Hit> sel;
          for (uint32_t k : kept)
            for (const Hit& h : w)
              if (h.node == k) {
                sel.push_back(h);
                break;
              }
          w.swap(sel);
        }
      }
      requests[i - s].clear();
      link_node(i, per, bound, s, &requests[i - s]);
    });
    // B: the entry point, and the reverse links in node order.
    reverse.clear();
    for (uint32_t i = s; i < e; i++) {
      if (entry_ < 0 || levels_[i] > max_level_) {
        entry_ = i;
        max_level_ = levels_[i];
      }
      reverse.insert(reverse.end(), requests[i - s].begin(), requests[i - s].end());
    }
    // C: reverse links, grouped by the node they change; groups in parallel,
    // each group in (level, node) order, so the result is the same on any
    // number of threads.
    std::sort(reverse.begin(), reverse.end(), [](const LinkRequest& a, const LinkRequest& b) {
      return a.target != b.target ? a.target < b.target : a.level != b.level ? a.level < b.level : a.from < b.from;
    });
    group_start.clear();
    for (uint32_t i = 0; i < reverse.size(); i++)
      if (i == 0 || reverse[i].target != reverse[i - 1].target) group_start.push_back(i);
    group_start.push_back((uint32_t)reverse.size());
    // The blocks the groups change, copied out of the image first, one
    // after another: the groups then write only lists of their own.
    for (size_t g = 0; g + 1 < group_start.size(); g++)
      if (reverse[group_start[g]].level == 0) own_block(reverse[group_start[g]].target >> kL0Shift);  // (level order)
    pool.run(0, (uint32_t)group_start.size() - 1, [&](uint32_t g) {
      bool have_target = false;  // the group's target vector, normalised in scratch
      for (uint32_t i = group_start[g]; i < group_start[g + 1]; i++)
        add_link(reverse[i].target, reverse[i].from, reverse[i].level, &have_target);
    });
    linked_ = e;
  }
}

// ---------------------------------------------------------------- persistence

namespace {
template <typename Array>
void put_array(std::string& out, const Array& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
}
template <typename Array>
bool get_array(Reader& r, Array* v, uint64_t n) {
  if (n > r.left() / sizeof((*v)[0])) return false;  // more than the bytes hold (n * size could wrap)
  std::string_view b = r.bytes(n * sizeof((*v)[0]));
  if (!r.ok()) return false;
  v->resize(n);
  if (n) memcpy(v->data(), b.data(), b.size());
  return true;
}
// An empty string with room for `bytes`, huge pages asked for where it
// takes new memory; with `touch`, every page of it written once.
void take_room(std::string& s, size_t bytes, bool touch) {
  s.clear();
  if (s.capacity() < bytes) {
    s.reserve(bytes);
    advise_huge_pages(s.data(), s.capacity());
  }
  if (touch) {
    s.resize(s.capacity());
    s.clear();
  }
}
}  // namespace

void HnswIndex::freeze() {
  if (!would_freeze()) return;  // nothing since the image or the last freeze, or a frozen part left
  frozen_ = std::make_shared<GrowBuffer>(std::move(extra_));
  extra_.release();
  frozen_end_ = (uint32_t)levels_.size();
}

void HnswIndex::pin(Pin* out) {
  read_all();
  reuse_retired();  // the last pin's checkpoint is over
  size_t n = levels_.size();
  out->nodes = n;
  out->table_item_bytes = table_item_bytes();
  out->links_item_bytes = links_item_bytes();
  // Their memory taken whole (unless make_room took it), huge pages asked
  // for: the copies then fault a page each 2 MiB, not each 4 KiB (writers
  // wait for the pin: 300,000 nodes' 7.6 MB went from 6-8 to 4-5 ms).
  std::string& meta = out->meta;
  std::string& graph = out->graph;
  const auto [meta_bytes, graph_bytes] = pin_bytes();
  take_room(meta, meta_bytes, false);
  take_room(graph, graph_bytes, false);
  put_u32(meta, 2);  // layout version
  put_u32(meta, dim_);
  put_u32(meta, f16_);
  put_u64(meta, n);
  put_u64(meta, doc_count_);
  put_array(meta, node_doc_);
  put_array(meta, refs_);
  std::vector<std::pair<uint32_t, int64_t>> more(more_docs_.begin(), more_docs_.end());
  std::sort(more.begin(), more.end());
  put_u64(meta, more.size());
  for (auto& [node, doc] : more) {
    put_u32(meta, node);
    put_u64(meta, (uint64_t)doc);
  }
  const size_t base_bytes = (size_t)base_n_ * vbytes_;
  const char* base = base_;
  if (lazy_table_ && !lazy_table_->clean() && base_bytes) {  // blocks unread: a copy, read and checked (damaged ones as zeros)
    out->base_copy.resize(base_bytes);
    lazy_table_->copy_to(out->base_copy.data());
    base = out->base_copy.data();
  }
  if (!extra_.size()) {
    out->rest_owner = frozen_;
  } else {  // nodes since the freeze (or no freeze): frozen and since copied together
    const size_t frozen = frozen_ ? frozen_->size() : 0;
    auto both = std::make_shared<GrowBuffer>();
    both->resize(frozen + extra_.size());
    if (frozen) memcpy(both->data(), frozen_->data(), frozen);
    memcpy(both->data() + frozen, extra_.data(), extra_.size());
    out->rest_owner = std::move(both);
  }
  out->table[0] = std::string_view(base, base_bytes);
  out->table[1] = out->rest_owner ? std::string_view(out->rest_owner->data(), out->rest_owner->size()) : std::string_view();
  put_graph(graph);
  // The level-0 lists block by block, referred to where they are: the
  // index's blocks, shared from here on; the image's (damaged lists copied
  // as zeros).
  const size_t stride_bytes = l0_stride() * 4, blocks = (n + kL0Mask) >> kL0Shift;
  const bool image_whole = !lazy_links_ || lazy_links_->clean();
  auto count = [&](size_t b) { return std::min<size_t>(n - (b << kL0Shift), kL0Mask + 1); };
  if (!image_whole) {
    size_t copy = 0;
    for (size_t b = 0; b < blocks; b++) copy += l0_blk_[b] ? 0 : count(b) * stride_bytes;
    out->links0_copy.resize(copy);  // filled below, never grown: the pieces stay where they are
  }
  auto add = [&](const char* p, size_t bytes) {  // a piece, or the last one longer where they meet
    std::string_view* last = out->links0.empty() ? nullptr : &out->links0.back();
    if (last && last->data() + last->size() == p) *last = std::string_view(last->data(), last->size() + bytes);
    else out->links0.emplace_back(p, bytes);
  };
  size_t copied = 0;
  for (size_t b = 0; b < blocks; b++) {
    const size_t bytes = count(b) * stride_bytes;
    if (const uint32_t* p = l0_blk_[b]) {
      l0_shared_[b] = 1;
      add(reinterpret_cast<const char*>(p), bytes);
    } else if (image_whole) {
      add(reinterpret_cast<const char*>(l0_ + (b << kL0Shift) * l0_stride()), bytes);
    } else {
      char* to = out->links0_copy.data() + copied;
      copy_image_lists((uint32_t)(b << kL0Shift), (uint32_t)((b << kL0Shift) + count(b)), to);
      add(to, bytes);
      copied += bytes;
    }
  }
  for (const L0Chunk& c : l0_chunks_) out->links0_owners.push_back(c.mem);
}

void HnswIndex::put_graph(std::string& graph) const {
  put_u32(graph, 5);  // layout version (5: fingerprints of the stored bytes, 4 lanes)
  put_u32(graph, (uint32_t)p_.metric);
  put_u32(graph, p_.m);
  put_u32(graph, p_.ef_construction);
  put_u64(graph, levels_.size());
  put_u64(graph, (uint64_t)entry_);
  put_u32(graph, (uint32_t)max_level_);
  put_array(graph, levels_);
  put_array(graph, fp_);
  put_array(graph, inv_);
  put_array(graph, upper_off_);
  put_u64(graph, upper_.size());
  put_array(graph, upper_);
}

void HnswIndex::Pin::make_room(size_t meta_bytes, size_t graph_bytes) {
  take_room(meta, meta_bytes, true);
  take_room(graph, graph_bytes, true);
}

std::string HnswIndex::Pin::links0_string() const {
  std::string all;
  all.reserve(parts_bytes(links0));
  for (std::string_view p : links0) all.append(p);
  return all;
}

bool HnswIndex::image_table(ImageTable* out) const {
  if (lazy_table_ && !lazy_table_->clean()) return false;
  out->base = base_;
  out->nodes = base_n_;
  out->dim = dim_;
  out->f16 = f16_;
  return true;
}

namespace {
// The arrays of the copy this thread let go last (HnswIndex::keep_copy).
thread_local std::unique_ptr<HnswIndex> t_spare_copy;
}  // namespace

void HnswIndex::keep_copy(std::unique_ptr<HnswIndex> copy) {
  if (!copy || !copy->copy_) return;
  // A thread keeps at most this much (arrays only grow): the copies of
  // bigger indexes are made afresh, their pages faulted in again.
  constexpr size_t kKeep = 64 << 20;
  const size_t bytes = copy->extra_.capacity() + copy->levels_.capacity() + copy->inv_.capacity() * 4 +
                       copy->node_doc_.capacity() * 8 + copy->refs_.capacity() * 4;
  if (bytes > kKeep) {
    t_spare_copy.reset();
    return;
  }
  // Its arrays only, in a bare index; the rest (more_docs_) is freed here,
  // with no lock held, not by the next copy.
  auto spare = std::make_unique<HnswIndex>(copy->dim_, copy->f16_, copy->p_);
  spare->copy_ = true;
  spare->extra_.swap(copy->extra_);
  spare->levels_.swap(copy->levels_);
  spare->inv_.swap(copy->inv_);
  spare->node_doc_.swap(copy->node_doc_);
  spare->refs_.swap(copy->refs_);
  copy.reset();
  t_spare_copy = std::move(spare);
}

std::unique_ptr<HnswIndex> HnswIndex::pinned_copy() const {
  auto c = std::make_unique<HnswIndex>(dim_, f16_, p_);
  if (t_spare_copy) {
    HnswIndex& s = *t_spare_copy;
    c->extra_.swap(s.extra_);
    c->levels_.swap(s.levels_);
    c->inv_.swap(s.inv_);
    c->node_doc_.swap(s.node_doc_);
    c->refs_.swap(s.refs_);
    t_spare_copy.reset();
  }
  c->copy_ = true;
  c->base_ = base_;
  c->base_n_ = base_n_;
  c->frozen_ = frozen_;  // never written: shared
  c->frozen_end_ = frozen_end_;
  c->extra_.resize(extra_.size());
  if (extra_.size()) memcpy(c->extra_.data(), extra_.data(), extra_.size());
  auto copy = [](const auto& from, auto& to) { to.assign(from.data(), from.data() + from.size()); };
  copy(levels_, c->levels_);
  copy(inv_, c->inv_);  // empty but for cosine
  copy(node_doc_, c->node_doc_);
  copy(refs_, c->refs_);
  c->more_docs_ = more_docs_;
  c->tombstones_ = tombstones_;
  c->doc_count_ = doc_count_;
  c->linked_ = (uint32_t)levels_.size();  // nothing pending: it is never linked
  return c;
}

void HnswIndex::ImageTable::vector_of(uint32_t node, std::vector<float>* out) const {
  out->resize(dim);
  if (!f16) {
    memcpy(out->data(), base + (size_t)node * dim * 4, (size_t)dim * 4);
    return;
  }
  f16_to_f32(reinterpret_cast<const uint16_t*>(base + (size_t)node * dim * 2), out->data(), dim);
}

void HnswIndex::Pin::doc_nodes(std::vector<std::pair<int64_t, uint32_t>>* out) const {
  // meta: version, dim, f16, n, documents, node -> first document, node ->
  // document count (0: a tombstone), then the further documents of shared nodes.
  Reader r(meta);
  r.bytes(12);
  uint64_t n = r.u64();
  r.u64();
  std::string_view docs = r.bytes(n * 8), refs = r.bytes(n * 4);
  uint64_t more = r.u64();
  out->clear();
  out->reserve(n + more);
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    uint32_t c;
    memcpy(&c, refs.data() + 4 * i, 4);
    if (!c) continue;
    int64_t d;
    memcpy(&d, docs.data() + 8 * i, 8);
    out->push_back({d, (uint32_t)i});
  }
  for (uint64_t i = 0; i < more && r.ok(); i++) {
    uint32_t node = r.u32();
    out->push_back({(int64_t)r.u64(), node});
  }
  // A document listed twice is on the last node listed, as node_of() has it.
  std::stable_sort(out->begin(), out->end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

void HnswIndex::rebase_prefix(const char* table, const char* links0, size_t nodes) {
  // The image holds the nodes below `nodes`: after a freeze at the pin, the
  // frozen part, let go (the pin's copy went with the pin); the nodes since
  // stay where they are. Else those from `nodes` on into memory of their own.
  if (nodes != frozen_end_) {
    GrowBuffer kept;
    kept.resize((levels_.size() - nodes) * vbytes_);
    for (size_t i = nodes; i < levels_.size(); i++) memcpy(kept.data() + (i - nodes) * vbytes_, raw((uint32_t)i), vbytes_);
    extra_ = std::move(kept);
  }
  frozen_.reset();
  base_ = table;
  base_n_ = frozen_end_ = (uint32_t)nodes;
  lazy_table_.reset();
  // The blocks no write changed since the pin (read in place from the
  // last image, or shared with the pin) are the new image's: every one of
  // their nodes is below `nodes` (a node added to a block copies it).
  const size_t pinned = std::min(l0_blk_.size(), (nodes + kL0Mask) >> kL0Shift);
  for (size_t b = 0; b < pinned; b++)
    if (l0_blk_[b] && l0_shared_[b]) {
      l0_free_.push_back(l0_blk_[b]);
      l0_blk_[b] = nullptr;
      l0_shared_[b] = 0;
      l0_used_--;
    }
  reuse_retired();
  trim_chunks();  // the pin's hold on them let go after the locks (Engine::release_tables)
  l0_ = reinterpret_cast<const uint32_t*>(links0);
  l0_image_n_ = (uint32_t)nodes;
  lazy_links_.reset();  // every block was read at the pin
}

bool HnswIndex::load_table(std::string_view meta, const ExtentRef& ext, const ExtentLoad& how) {
  std::string_view table = ext.bytes;
  Reader r(meta);
  if (r.u32() != 2 || r.u32() != dim_ || r.u32() != (uint32_t)f16_) return false;
  uint64_t n = r.u64();
  uint64_t docs = r.u64();
  // Blocks of whole vectors (extent.h): a block read alone holds each it serves.
  if (!r.ok() || n > (1ull << 32) - 2 || table.size() != n * vbytes_ || ext.block_bytes % vbytes_ != 0) return false;
  // Read in place as floats or halves: a writer aligns it (a file that does not is damaged).
  if (reinterpret_cast<uintptr_t>(table.data()) % (f16_ ? alignof(uint16_t) : alignof(float)) != 0) return false;
  if (!get_array(r, &node_doc_, n) || !get_array(r, &refs_, n)) return false;
  uint64_t nm = r.u64();
  more_docs_.clear();
  for (uint64_t i = 0; i < nm && r.ok(); i++) {
    uint32_t node = r.u32();
    int64_t doc = (int64_t)r.u64();
    if (node >= n) return false;
    more_docs_.emplace(node, doc);
  }
  if (!r.ok() || !r.done()) return false;
  uint64_t refsum = 0;
  tombstones_ = 0;
  for (uint32_t x : refs_) refsum += x, tombstones_ += x == 0;
  if (refsum != docs || nm > refsum) return false;
  base_ = table.data();
  base_n_ = frozen_end_ = (uint32_t)n;
  frozen_.reset();
  extra_.release();
  lazy_table_.reset();
  if (how.lazy && n) lazy_table_ = std::make_unique<LazyExtent>(ext, how.read, how.chunk);
  doc_count_ = docs;
  maps_built_ = false;
  scanned_ = 0;
  overrun_ = 0;
  changes_++;
  doc_node_.clear();
  fp_nodes_.clear();
  clear_graph();
  return true;
}

void HnswIndex::clear_graph() {
  levels_.clear();
  fp_.clear();
  inv_.clear();
  l0_in_image(0);
  l0_ = nullptr;
  l0_image_n_ = 0;
  lazy_links_.reset();
  upper_off_.clear();
  upper_.clear();
  entry_ = -1;
  max_level_ = -1;
  linked_ = 0;
}

bool HnswIndex::load_graph(std::string_view graph, const ExtentRef& links, const ExtentLoad& how) {
  uint64_t n = node_doc_.size();
  Reader r(graph);
  if (r.u32() != 5 || r.u32() != (uint32_t)p_.metric || r.u32() != p_.m || r.u32() != p_.ef_construction) return false;
  if (r.u64() != n) return false;
  int64_t entry = (int64_t)r.u64();
  int max_level = (int)r.u32();
  const size_t stride = 1 + 2 * p_.m;
  std::string_view l0 = links.bytes;
  if (l0.size() != n * stride * 4 || (reinterpret_cast<uintptr_t>(l0.data()) % alignof(uint32_t)) != 0 ||
      links.block_bytes % (stride * 4) != 0)  // blocks of whole lists: each checked with its block
    return false;
  const uint32_t* view = reinterpret_cast<const uint32_t*>(l0.data());
  // A level-0 list is sane when its count fits and every slot names a node.
  const uint32_t max0 = 2 * p_.m;
  auto lists_ok = [stride, max0, n](const uint32_t* ls, size_t count) {
    uint32_t bad = 0;
    for (size_t i = 0; i < count; i++, ls += stride) {
      bad |= (uint32_t)(ls[0] > max0);
      for (size_t j = 1; j < stride; j++) bad |= (uint32_t)(ls[j] >= n);
    }
    return bad == 0;
  };
  bool ok = r.ok() && get_array(r, &levels_, n) && get_array(r, &fp_, n) &&
            get_array(r, &inv_, p_.metric == Metric::Cosine ? n : 0) && get_array(r, &upper_off_, n);
  uint64_t nu = ok ? r.u64() : 0;
  ok = ok && get_array(r, &upper_, nu) && r.ok() && r.done();
  // The graph must be self-consistent: links in range, levels and offsets sane.
  if (ok && n && (entry < 0 || (uint64_t)entry >= n || max_level != levels_[entry])) ok = false;
  if (ok && !n && entry != -1) ok = false;
  uint32_t bad = !ok;
  for (uint64_t i = 0; i < n && !bad; i++) {
    if (levels_[i] > kMaxLevel) bad = 1;
    else if (levels_[i] && (uint64_t)upper_off_[i] + (uint64_t)levels_[i] * (1 + p_.m) > nu) bad = 1;
  }
  // Lazily loaded lists are checked block by block as they are read; a big
  // graph loaded at once is checked in two halves side by side.
  if (!bad && !how.lazy) {
    const unsigned parts = n >= 65536 && port::cores() > 1 ? 2 : 1;
    bool ok_part[2] = {true, true};
    port::run_parts(parts, [&](unsigned p) {
      const uint64_t from = n * p / parts, to = n * (p + 1) / parts;
      ok_part[p] = lists_ok(view + from * stride, to - from);
    });
    if (!ok_part[0] || !ok_part[1]) bad = 1;
  }
  for (uint64_t i = 0; i < n && !bad; i++)
    for (int l = 1; l <= levels_[i]; l++) {
      const uint32_t* ls = &upper_[upper_off_[i] + (size_t)(l - 1) * (1 + p_.m)];
      if (ls[0] > p_.m) bad = 1;
      for (uint32_t j = 1; j <= ls[0] && j <= p_.m; j++) bad |= (uint32_t)(ls[j] >= n);
    }
  if (bad) {
    clear_graph();
    return false;
  }
  l0_in_image((n + kL0Mask) >> kL0Shift);
  l0_ = view;
  l0_image_n_ = (uint32_t)n;
  lazy_links_.reset();
  if (how.lazy && n)
    lazy_links_ = std::make_unique<LazyExtent>(links, how.read, how.chunk, [lists_ok, stride](const char* p, size_t bytes) {
      return lists_ok(reinterpret_cast<const uint32_t*>(p), bytes / (stride * 4));
    });
  entry_ = entry;
  max_level_ = n ? max_level : -1;
  linked_ = (uint32_t)n;
  return true;
}

void HnswIndex::rebuild_graph(int threads) {
  clear_graph();
  size_t n = node_doc_.size();
  std::vector<float> tmp(dim_);
  for (uint32_t node = 0; node < n; node++) {
    const float* v = vec(node, tmp.data());
    int level = random_level(node);
    levels_.push_back((uint8_t)level);
    fp_.push_back(fingerprint(raw(node)));
    if (p_.metric == Metric::Cosine) inv_.push_back(inv_norm(v));
    add_l0(node);
    upper_off_.push_back((uint32_t)upper_.size());
    if (level > 0) upper_.resize(upper_.size() + (size_t)level * (1 + p_.m), 0);
  }
  // The same nodes hold the same documents: the maps stay, the
  // fingerprints entered again (a damaged table's blocks now read as zeros).
  changes_++;
  if (maps_ready() && !copy_) {
    fp_nodes_.clear();
    fp_nodes_.reserve(n);
    for (uint32_t node = 0; node < n; node++) fp_nodes_.insert_multi(fp_[node], node);
  }
  link_pending(threads);
}

size_t HnswIndex::memory_bytes() const {
  // Sizes, not capacities: a GrowArray's capacity is the mapping it
  // reserved (64 KiB at least), not the pages it touched.
  size_t maps = 0;
  {  // swapped in under maps_mu_ beside the readers (build_maps_piece)
    std::lock_guard g(maps_mu_);
    maps = doc_node_.size() * 32 + fp_nodes_.size() * 32;
  }
  return (frozen_ ? frozen_->size() : 0) + extra_.size() + levels_.size() + fp_.size() * 4 + inv_.size() * 4 + node_doc_.size() * 8 +
         refs_.size() * 4 + level0_chunk_bytes() + l0_blk_.size() * 9 + upper_off_.size() * 4 + upper_.size() * 4 +
         maps;
}

std::string HnswIndex::graph_bytes() const {
  std::string out;
  put_graph(out);
  const size_t n = levels_.size();
  for (uint32_t node = 0; node < n; node++) out.append(reinterpret_cast<const char*>(links(node, 0)), l0_stride() * 4);
  return out;
}

}  // namespace kitfox
