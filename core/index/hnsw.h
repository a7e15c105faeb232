// The HNSW vector index of one vector field.
//
// Nodes are numbered in insertion order. Each node has a vector in the vector
// table (as written, in storage precision: f32 or f16 — documents in the image
// refer to it instead of repeating it, so it is data, not derived), a 4-byte
// fingerprint of it (to find a vector written again: identical vectors share
// a node), for cosine its inverse norm (cosine distance is 1 - inv * q.v with
// q normalised, so a document reads back exactly the floats it was given), a
// level, fixed-width neighbour lists (2m slots at level 0, m above), and the
// documents that hold its vector (a node with none is a tombstone: still
// traversed, never returned).
//
// Persisted as two records, each with an extent (storage/extent.h): the table
// (node -> documents; the vectors) and the graph (levels, inverse norms, upper
// links; the level-0 lists), which is derived: if it does not validate it is
// rebuilt from the table with the same node numbers. Both extents are used
// in place; when they are loaded lazily, a block is read the first time a
// node in it is touched (raw(), links()).
//
// Determinism: levels come from an integer hash of the node number, ties
// between equal distances break by node number, and the distance kernels sum
// in one canonical order. New nodes are linked in chunks of kChunk: every
// node of a chunk searches the graph as it stood before the chunk and writes
// its own lists from what it found plus those of the chunk's earlier nodes
// the search would have kept (in parallel natively, serially in WASM); then
// the reverse links are added, grouped by the node they change, each group
// in a fixed order. The result does not depend on the thread count, so
// native and WASM build the same graph from the same writes.
#pragma once
#include <cstdint>
#include <functional>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../huge_pages.h"
#include "../status.h"
#include "../storage/extent.h"
#include "distance.h"

#include "steady_map.h"

namespace kitfox {

const char* metric_name(Metric m);

struct Hit {
  float distance;
  uint32_t node;
};

class HnswIndex {
 public:
  static constexpr uint32_t kChunk = 32;
  static constexpr int kMaxLevel = 15;

  HnswIndex(uint32_t dim, bool f16, HnswParams p);

  uint32_t dim() const { return dim_; }
  bool f16() const { return f16_; }
  const HnswParams& params() const { return p_; }
  size_t nodes() const { return node_doc_.size(); }
  size_t documents() const { return doc_count_; }

  // Validates a vector to store (finite; a direction for cosine; within f16)
  // and makes its stored form (rounded to f16 for f16 fields).
  Status prepare(const float* v, std::vector<float>* out, const std::string& what) const;
  // Validates a query vector and makes the form distances take (normalised
  // for cosine).
  Status prepare_query(const float* v, std::vector<float>* out, const std::string& what) const;

  // Gives document `doc` the (prepared) vector v; replaces its previous one.
  // The new node is linked by link_pending().
  void put(int64_t doc, const float* v);
  // The stored vector of a node.
  void vector_of(uint32_t node, std::vector<float>* out) const;
  void remove(int64_t doc);
  // The document -> node and fingerprint -> nodes maps that put, remove and
  // node_of use are built on first need after a load (about 250 ms at a
  // million nodes). Until then each of those finds what it needs by a scan
  // instead: of the per-node arrays (12 bytes a node, compared with no
  // branch per node: about 40 us at 100,000 nodes) and of the documents
  // sharing a node (more_docs_, far slower an entry: counted 32 nodes
  // each), as long as the scans since the load cost at most kScanRounds
  // times what a node and a shared document cost, about a build's worth.
  // So a few writes after an open (a browser tab's, a short tail of the log
  // an open replays) never pay for the maps, and many pay for them once.
  //
  // Who decides when they are built: by default put, remove and node_of
  // themselves count their scans and build the maps whole when the next
  // would go past the bound (an open's replay, WASM). A caller with other
  // threads to think of reserves its statement's lookups first instead
  // (reserve(): false when they do not fit, and it should build the maps
  // beside its lock; unreserve() gives back what it will not use); from
  // its first reserve() on, put, remove and node_of build them only past
  // kOverrun times the bound, a guard against a caller's miscount, so no
  // write under an exclusive lock builds them, however writes race for
  // the scans left.
  //
  // Such a caller builds them in pieces: build_maps_piece(&b, n) under the
  // engine's shared lock enters n more nodes into b's maps, and once every
  // node is in makes them the index's (true; also when they are built
  // already). A change to the index between two pieces starts b over, so
  // while one runs the caller's writers should wait for it rather than scan.
  static constexpr uint64_t kScanRounds = 64, kSharedCost = 32, kOverrun = 4;
  struct MapBuild {
    SteadyMap<int64_t, uint32_t> doc_node;
    SteadyMap<uint32_t, uint32_t> fp_nodes;
    uint32_t next = 0;     // the next node to enter
    uint64_t changes = 0;  // the index's changes when it began
  };
  bool build_maps_piece(MapBuild* b, uint32_t nodes);
  bool maps_ready() const { return maps_built_.load(std::memory_order_acquire); }
  // Reserves `scans` scans (true: the caller may make them, or the maps
  // are built); false when they would go past the bound.
  bool reserve(uint64_t scans);
  void unreserve(uint64_t scans);  // after a reserve(scans) that returned true, with no write between
  // What scans have cost since the load, in nodes, and what one costs now
  // (for tests).
  uint64_t scanned() const { return scanned_.load(std::memory_order_relaxed); }
  uint64_t scan_cost() const { return nodes() + kSharedCost * more_docs_.size(); }
  // Whole builds of the maps made by put, remove and node_of (for tests).
  uint64_t whole_builds() const { return whole_builds_.load(std::memory_order_relaxed); }
  // The node holding document `doc`'s vector, or -1.
  int64_t node_of(int64_t doc) {
    ready_to_find(1);
    return find_doc(doc);
  }
  // The same, counting nothing and building nothing: for a reader under a
  // shared lock, which reserved its scans first (or finds the maps built).
  int64_t find_node(int64_t doc) const { return find_doc(doc); }
  // After a checkpoint: the table and the level-0 lists now live at `table`
  // and `links0` (same contents, in memory).
  void rebase(const char* table, const char* links0);
  void link_pending(int threads);
  size_t pending() const { return levels_.size() - linked_; }
  // Forgets unlinked nodes that no document holds (a rolled-back batch's).
  void drop_pending();

  // Approximate k nearest live nodes; `accept` (may be empty) filters them.
  // Returns hits sorted by (distance, node).
  void search(const float* q, size_t k, size_t ef, const std::function<bool(uint32_t)>& accept,
              std::vector<Hit>* out) const;
  // Exact k nearest live nodes over the whole table (or those accepted).
  // `ties`: the nodes as far as the k-th come too (out may hold more than
  // k), so that a caller ordering ties by something else (a document's id)
  // finds its first k among them.
  void exact(const float* q, size_t k, const std::function<bool(uint32_t)>& accept, std::vector<Hit>* out,
             bool ties = false) const;
 private:
  void add_pending(const float* q, size_t k, const std::function<bool(uint32_t)>& accept, std::vector<Hit>* out) const;

 public:
  // The documents on a node (usually one).
  void docs_of(uint32_t node, std::vector<int64_t>* out) const;
  // Starts loading what docs_of(node) reads.
  void prefetch_docs(uint32_t node) const {
    __builtin_prefetch(&refs_[node]);
    __builtin_prefetch(&node_doc_[node]);
  }
  float distance_to(const float* q, uint32_t node) const;

  // Persistence: `meta` (node -> documents), the table (the vectors),
  // `graph` (all but the level-0 lists) and `links0` (those), as flat
  // little-endian arrays; the caller keeps the table and links 16-byte
  // aligned. A checkpoint pins them under a lock that keeps writes out, and
  // writes them with none held: what writes change in place (meta, graph)
  // is copied; the level-0 lists are referred to where they are, block by
  // block (in the last image, or in memory the pin shares: a write to a
  // block a pin shares copies it first); of the table, which writes only
  // append to, the part the last image holds is referred to, the part
  // freeze() froze shared.
  struct Pin {  // moved, never copied: `table[0]` may view its own base_copy
    Pin() = default;
    Pin(Pin&&) = default;
    Pin& operator=(Pin&&) = default;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    size_t nodes = 0;
    uint32_t table_item_bytes = 0, links_item_bytes = 0;  // as below, for the extents
    std::string meta, graph;
    // The vector table's bytes in two parts: the last image's (where it
    // lies, or in base_copy), then the rest: the part freeze() froze,
    // shared with the index (never written again), or a copy where nodes
    // came after the freeze (rest_owner holds either).
    std::string_view table[2];
    std::vector<char> base_copy;  // the image's part read and checked, where blocks of it were unread
    std::shared_ptr<const GrowBuffer> rest_owner;
    // The level-0 lists in order, in pieces: the index's blocks (alive
    // while links0_owners are, never written while the pin is read), the
    // last image's (alive while its arena segment is), or links0_copy (the
    // image's where some of its blocks were damaged: read as zeros).
    std::vector<std::string_view> links0;
    std::vector<std::shared_ptr<char>> links0_owners;
    std::vector<char> links0_copy;  // (on the heap: a moved pin's pieces stay where they are)
    std::string links0_string() const;  // all of them, one after another (tests)
    // Memory for meta and graph taken and its pages touched ahead of pin(),
    // with no lock held (sized from pin_bytes(), with room for the nodes
    // writes add meanwhile): the pin, which writers wait for, then copies
    // into pages that are there.
    void make_room(size_t meta_bytes, size_t graph_bytes);
    // Each document's node at the pin, sorted by document (built from
    // meta); where a document is listed twice, the last is its node.
    void doc_nodes(std::vector<std::pair<int64_t, uint32_t>>* out) const;
  };
  // The table's nodes added since the last image frozen: moved, not
  // copied, into memory the pins that follow share, never written again
  // (the nodes added after go to a new part). Under a lock that keeps
  // readers and writers out: it moves what readers read. Where a
  // checkpoint that did not finish left a frozen part, nothing is frozen
  // (the pin copies the nodes after it, under a lock readers share).
  void freeze();
  bool would_freeze() const { return extra_.size() && !frozen_; }
  // Reads every lazily loaded block first. Right after freeze(), with no
  // write between, it copies no vector (else those since are copied). It
  // marks the blocks of level-0 lists it shares, so writers must be kept
  // out (readers need not be); the blocks a write copied away from an
  // earlier pin are used again from here on (that pin's checkpoint is over).
  // `out` is a new Pin, or one only make_room() touched.
  void pin(Pin* out);
  // The bytes pin() writes to a Pin's meta and graph, as the index stands.
  std::pair<size_t, size_t> pin_bytes() const {
    return {36 + (size_t)levels_.size() * 12 + more_docs_.size() * 12,
            44 + (size_t)levels_.size() * (9 + (inv_.empty() ? 0 : 4)) + upper_.size() * 4};
  }
  // The table's part in the last image (bytes no write changes, alive while
  // the image's arena segment is), for a pinned read; false while blocks of
  // it are still to be read and checked.
  struct ImageTable {
    const char* base = nullptr;
    uint32_t nodes = 0, dim = 0;
    bool f16 = false;
    void vector_of(uint32_t node, std::vector<float>* out) const;
  };
  bool image_table(ImageTable* out) const;
  // A copy for a pinned read's exact search (executor.cpp), made under a
  // lock that keeps writes out: the table's part in the last image shared
  // (call only when image_table() is true; the bytes stay alive while the
  // image's arena segment does), and its frozen part (freeze()), the
  // vectors added since and the per-node arrays a search reads copied
  // (13 bytes a node, 17 for cosine), no graph. It
  // answers exact(), docs_of(), node_of(), distance_to() and vector_of()
  // as this index did at the copy; it is never written (search() runs exact).
  // Its arrays are those of the last copy this thread let go (keep_copy,
  // which keeps at most 64 MiB), where they fit: pages already touched,
  // not faulted in again per copy.
  std::unique_ptr<HnswIndex> pinned_copy() const;
  static void keep_copy(std::unique_ptr<HnswIndex> copy);
  // Whether pinned_copy() costs little beside an exact search: at most a
  // quarter of the table added since the last image or its last freeze
  // (before a first checkpoint, all of it is), and documents sharing nodes
  // (copied one by one) at most a quarter of the nodes.
  bool cheap_to_copy() const {
    return extra_.size() * 4 <= nodes() * vbytes_ && more_docs_.size() * 4 <= nodes();
  }
  // After a checkpoint that wrote a pin of this index and writes that
  // changed it since: the image holds its first `nodes` vectors at `table`
  // (the same bytes: a node's vector never changes) and, for each block of
  // level-0 lists no write changed since the pin, those lists at `links0`:
  // read there from now on, the block's memory given back to the index's
  // free blocks (a chunk none of whose blocks is in use is let go). Nothing
  // of the index then lies in an older image.
  void rebase_prefix(const char* table, const char* links0, size_t nodes);
  // Bytes per vector in the table, per node in links0 (extent items).
  uint32_t table_item_bytes() const { return (uint32_t)vbytes_; }
  uint32_t links_item_bytes() const { return (1 + 2 * p_.m) * 4; }
  // Loads the table and its meta; the table's bytes must stay alive and
  // unchanged (they are used in place). They were checked already, or (lazy)
  // are checked, and read when `how.read` is set, block by block on first
  // use. False when meta and table disagree.
  bool load_table(std::string_view meta, const ExtentRef& table, const ExtentLoad& how = {});
  // Loads the graph over a loaded table; false when it does not validate.
  // The level-0 lists are used in place, as the table (lazy: a block out of
  // range counts as damage).
  bool load_graph(std::string_view graph, const ExtentRef& links0, const ExtentLoad& how = {});
  // Reads up to about `budget` bytes of lazily loaded blocks; the bytes read.
  uint64_t warm(uint64_t budget);
  uint64_t unread_bytes() const;
  // Damage found in a lazily loaded block (the file offset, 0 when none):
  // in the table (data: the vectors there read as zeros) or in the graph
  // (derived: rebuild_graph() repairs it).
  uint64_t table_damaged_at() const { return lazy_table_ ? lazy_table_->damaged_at() : 0; }
  uint64_t graph_damaged_at() const { return lazy_links_ ? lazy_links_->damaged_at() : 0; }
  std::string table_damage() const { return lazy_table_ ? lazy_table_->damage() : ""; }
  // Rebuilds the graph over the table (same node numbers).
  void rebuild_graph(int threads);

  size_t memory_bytes() const;
  // Bytes of level-0 lists in memory of the index's own (blocks in use);
  // the rest are read in place from the image they were loaded from.
  size_t level0_owned_bytes() const { return l0_used_ * l0_block_words() * 4; }
  static constexpr uint32_t kLevel0BlockNodes = 256;
  // The graph's bytes, for the native/WASM identity test.
  std::string graph_bytes() const;
  // Memory taken for blocks of level-0 lists, in use or free (for tests).
  size_t level0_chunk_bytes() const;

 private:
  const char* raw(uint32_t node) const {
    if (node >= base_n_) {
      if (node >= frozen_end_) return extra_.data() + (size_t)(node - frozen_end_) * vbytes_;
      return frozen_->data() + (size_t)(node - base_n_) * vbytes_;
    }
    if (lazy_table_ && !lazy_table_->clean()) return lazy_table_->need((uint64_t)node * vbytes_, vbytes_);
    return base_ + (size_t)node * vbytes_;
  }
  void read_all() const;  // every lazily loaded block
  void put_graph(std::string& graph) const;  // the graph's record body but the level-0 lists
  const float* vec(uint32_t node, float* scratch) const;  // the stored vector as f32
  void normalized(uint32_t node, float* out) const;       // as a query: normalised for cosine
  float kernel_to(const float* a, uint32_t node) const;
  float dist(const float* q, uint32_t node) const;
  // Between stored vectors: node a (its vector va, as vec() gives it) and b.
  float stored_dist(uint32_t a, const float* va, uint32_t b) const;
  float inv_norm(const float* v) const;
  void clear_graph();
  uint32_t* links(uint32_t node, int level);
  const uint32_t* links(uint32_t node, int level) const;
  uint32_t max_links(int level) const { return level == 0 ? 2 * p_.m : p_.m; }
  int random_level(uint32_t node) const;
  uint32_t fingerprint(const char* stored_bytes) const;
  void build_doc_map();
  // Before `scans` lookups by document or vector: the maps built, unless
  // scans may answer them (counted then), or a caller reserves scans.
  void ready_to_find(uint64_t scans);
  // What scans may cost in all, in nodes.
  uint64_t scan_bound() const { return kScanRounds * (nodes() + more_docs_.size()); }
  // The node holding doc, or -1; a node holding exactly `bytes` (whose
  // fingerprint is fp), or -1. Through the maps once built, else by a scan.
  int64_t find_doc(int64_t doc) const;
  int64_t find_twin(uint32_t fp, const char* bytes) const;
  struct Candidates;
  // accept(node) decides which visited nodes may be results (all are walked);
  // out gets the nearest `keep` of the ef found, nearest first.
  template <typename Accept>
  void search_layer(const float* q, const std::vector<Hit>& entry, size_t ef, int level, const Accept& accept,
                    std::vector<Hit>* out, size_t keep = SIZE_MAX) const;
  void select_neighbors(const std::vector<Hit>& cand, uint32_t m, std::vector<uint32_t>* out,
                        const std::vector<uint8_t>* pre = nullptr) const;
  void find_candidates(uint32_t node, int top, std::vector<std::vector<Hit>>* per_level) const;
  struct LinkRequest {
    uint32_t target;
    uint8_t level;
    uint32_t from;
  };
  void link_node(uint32_t node, const std::vector<std::vector<Hit>>& per_level, const std::vector<Hit>& bound,
                 uint32_t chunk_start, std::vector<LinkRequest>* reverse);
  // Adds to -> from's list at `level`, choosing again when it is full;
  // *have_from says whether scratch holds from's normalised vector already.
  void add_link(uint32_t from, uint32_t to, int level, bool* have_from);

  using Kernel = float (*)(const float*, const float*, size_t);
  uint32_t dim_;
  bool f16_;
  Kernel kernel_;  // dot or l2sq, chosen once
  DistanceKernelF16 kernel16_;  // the same over f16 storage
  float sign_;     // l2 and dot: distance = sign_ * kernel
  HnswParams p_;
  size_t vbytes_;  // bytes per stored vector
  size_t ahead_bytes_;     // of a neighbour's vector loaded ahead while its list is scanned (port::prefetch)
  bool batch_dists_;       // search_layer: a node's neighbour distances before comparing them

  // Vector table: nodes below base_n_ in a loaded image; those up to
  // frozen_end_ in the part a checkpoint's pin froze (freeze(): shared with
  // the pin; none, and frozen_end_ == base_n_, after the switch); the rest here.
  const char* base_ = nullptr;
  uint32_t base_n_ = 0;
  std::shared_ptr<const GrowBuffer> frozen_;
  uint32_t frozen_end_ = 0;
  GrowBuffer extra_;
  // Blocks of the table and the level-0 lists still to read (lazy loading).
  mutable std::unique_ptr<LazyExtent> lazy_table_, lazy_links_;

  // The per-node arrays grow at their end with no copy (huge_pages.h), so
  // no put waits while a million nodes' worth of one is copied.
  GrowArray<uint8_t> levels_;
  GrowArray<uint32_t> fp_;
  GrowArray<float> inv_;          // cosine: inverse norm per node
  GrowArray<int64_t> node_doc_;   // the first document on the node
  GrowArray<uint32_t> refs_;      // documents on the node; 0 = tombstone
  size_t tombstones_ = 0;           // nodes with no document
  // Level-0 lists, per node: count, 2m slots, in blocks of 256 nodes.
  // After a load a block is read in place from the image (l0_) until a
  // change to one of its lists copies that block, and only that one, into
  // memory of the index's own (own_block): a write after an open or a
  // checkpoint copies the blocks its links touch (33 KiB each at m = 16, at
  // most 2m + 1 of them a node), never every node's lists. Blocks of nodes
  // added since are in memory of their own from the start. l0_blk_[b] is
  // block b's lists, or null: in the image.
  //
  // A checkpoint's pin shares the blocks (l0_shared_[b]): a write to one
  // copies it to another block first, and the pin's (`retired`) is used
  // again once the checkpoint is over (the next pin, or the switch to the
  // image it wrote, which reads the blocks no write changed from there).
  // Blocks are carved from chunks of memory (up to a huge page each,
  // asked for huge pages: searches read the lists at random), kept while
  // any block of theirs is in use or a pin holds them.
  static constexpr uint32_t kL0Shift = 8, kL0Mask = (1u << kL0Shift) - 1;
  static_assert(kLevel0BlockNodes == 1u << kL0Shift);
  size_t l0_stride() const { return 1 + 2 * (size_t)p_.m; }
  size_t l0_block_words() const { return l0_stride() << kL0Shift; }
  // The block's memory of the index's own, unshared (copied from the image
  // or from a pin's if it was not); writers alone.
  uint32_t* own_block(uint32_t b) {
    uint32_t* p = l0_blk_[b];
    return p && !l0_shared_[b] ? p : own_block_copy(b);
  }
  uint32_t* own_block_copy(uint32_t b);
  uint32_t* take_block();          // a block of memory, from the free ones or a new chunk
  void reuse_retired();            // the blocks a pin shared and writes copied away: free
  void l0_in_image(size_t blocks); // every block read from the image (l0_); its memory let go
  void trim_chunks();              // chunks with no block in use let go
  // The image's lists of nodes [first, end) copied to `to` (lazily loaded
  // ones read and checked first; damaged ones as zeros).
  void copy_image_lists(uint32_t first, uint32_t end, char* to) const;
  void add_l0(uint32_t node);       // a new node's list, empty, in memory of its own
  std::vector<uint32_t*> l0_blk_;
  std::vector<uint8_t> l0_shared_;
  struct L0Chunk {
    std::shared_ptr<char> mem;
    size_t blocks;
  };
  std::vector<L0Chunk> l0_chunks_;
  std::vector<uint32_t*> l0_free_, l0_retired_;
  size_t l0_used_ = 0;            // blocks in l0_blk_ with memory
  const uint32_t* l0_ = nullptr;  // the image's lists: nodes below l0_image_n_
  uint32_t l0_image_n_ = 0;
  GrowArray<uint32_t> upper_off_; // per node: offset in upper_ (levels 1..L, each count + m slots)
  GrowArray<uint32_t> upper_;
  std::unordered_multimap<uint32_t, int64_t> more_docs_;  // further documents on shared nodes
  int64_t entry_ = -1;
  int max_level_ = -1;
  uint32_t linked_ = 0;
  size_t doc_count_ = 0;

  // Built on first need after a load: document -> node, fingerprint -> nodes
  // (build_maps_piece; put, remove and node_of scan instead, or build them
  // whole if they must).
  // Pieces may be built under the shared lock, so they are put in place
  // under maps_mu_; writers change them under the write lock.
  bool copy_ = false;  // a pinned_copy(): no fingerprints, so no fingerprint map
  std::atomic<bool> maps_built_{false};
  std::atomic<uint64_t> scanned_{0};  // what scans cost (or were reserved) since the load, in nodes
  std::atomic<bool> reserving_{false};  // a caller reserves the scans (reserve())
  std::atomic<uint64_t> overrun_{0};    // what scans cost since then, counted apart as a guard
  std::atomic<uint64_t> whole_builds_{0};
  mutable std::mutex maps_mu_;
  uint64_t changes_ = 0;  // puts, removes, loads: a map build in pieces begun before one starts over
  SteadyMap<int64_t, uint32_t> doc_node_;  // grows a few buckets a put (steady_map.h)
  SteadyMap<uint32_t, uint32_t> fp_nodes_;  // fingerprint -> nodes (as a multimap), grows a few buckets a put
};

}  // namespace kitfox
