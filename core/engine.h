// Engine: the database behind Database. It owns the catalog (catalog.h),
// the documents (encoded, in memory, in arena segments the file was read
// into: storage/arena.h), the file and its write log; query/executor.cpp
// runs statements against it. Its parts, by file (docs/architecture.md):
//   engine.cpp    open, run a statement or a batch, checkpoint, close, stats
//   image.cpp     the image: load the file (and replay its tail)
//   checkpoint.cpp a new image beside the writers: pin, build, carry the tail, switch
//   batch.cpp     a write's ops (WriteBatch): one encoder, one reader
//   log.cpp       the record log: write a batch as a record, apply its ops, undo a batch
//   catalog.cpp   collections and their indexes: definitions, index lifecycle
//   sync.cpp      the write queue (writes landed in groups), group commit, the flusher, the checker
//   database.cpp  Database, Statement and transactions over the engine
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "batch.h"
#include "catalog.h"
#include "codec.h"
#include "db.h"
#include "engine_limits.h"
#include "port.h"
#include "index/hnsw.h"
#include "index/secondary.h"
#include "index/text.h"
#include "query/ast.h"
#include "query/prepared.h"
#include "schema.h"
#include "storage/arena.h"
#include "storage/id_index.h"


namespace kitfox {



// A phase-fair reader/writer lock: readers and writers take turns, so
// neither side starves and a reader waits for at most one writer. glibc's
// rwlock lets new readers in ahead of a waiting writer: two threads reading
// in a loop kept a durable writer to 500 commits/s (bench/RESULTS.md,
// concurrency). Here a reader arriving while a writer holds or waits for the
// lock waits for the next reader phase, which the writer opens when it
// leaves (letting in every reader then waiting, counted by the writer so the
// next writer waits for them); a writer waits for the readers inside.
//
// Writers take turns in the order they came (a ticket each): one that
// leaves and at once comes back (a checkpoint moving documents a piece at a
// time) queues behind the writer that waited meanwhile, instead of taking
// the lock again before that one wakes.
//
// A reader with no writer about takes and leaves it with one atomic
// operation on `state_` (the readers inside, and a bit that a writer holds
// or waits); the mutex is for the waits alone, and the writer bit changes
// only under it.
class FairSharedMutex {
 public:
  void lock() {
    std::unique_lock g(m_);
    const uint64_t ticket = next_ticket_++;
    waiting_writers_++;
    writers_cv_.wait(g, [&] { return !writer_ && serving_ == ticket; });
    waiting_writers_--;
    writer_ = true;
    state_.fetch_or(kWriter, std::memory_order_relaxed);  // readers arriving now wait
    // The readers inside are most often a point read each, done in a
    // microsecond: spin a little first, since a thread put to sleep waits
    // for a core to wake on when the cores are busy.
    g.unlock();
    for (int i = 0; i < kSpins && (state_.load(std::memory_order_acquire) & kReaders); i++) port::cpu_relax();
    g.lock();
    writers_cv_.wait(g, [&] { return (state_.load(std::memory_order_acquire) & kReaders) == 0; });
  }
  void unlock() {
    {
      std::lock_guard g(m_);
      writer_ = false;
      serving_++;  // the next ticket's turn
      // The readers waiting are let in, counted now; the bit stays while
      // another writer waits, so that it waits for them alone.
      uint64_t in = waiting_readers_;
      waiting_readers_ = 0;
      if (in) phase_++;
      state_.fetch_add(in - (waiting_writers_ ? 0 : kWriter), std::memory_order_release);
    }
    readers_cv_.notify_all();
    writers_cv_.notify_all();
  }
  void lock_shared() {
    if (try_enter()) return;
    std::unique_lock g(m_);
    if (try_enter()) return;  // the writer left meanwhile
    waiting_readers_++;
    uint64_t ph = phase_;
    readers_cv_.wait(g, [&] { return phase_ != ph; });  // counted in by the writer that opened it
  }
  // Enters as a reader only if no writer holds it or waits for it.
  bool try_lock_shared() { return try_enter(); }
  // Writers waiting for their turn (for tests).
  int writers_waiting() {
    std::lock_guard g(m_);
    return waiting_writers_;
  }
  void unlock_shared() {
    uint64_t s = state_.fetch_sub(1, std::memory_order_release);
    if ((s & kWriter) && (s & kReaders) == 1) {
      std::lock_guard g(m_);  // the writer checks for readers under it
      writers_cv_.notify_all();
    }
  }

 private:
  static constexpr uint64_t kWriter = uint64_t(1) << 63, kReaders = kWriter - 1;
  static constexpr int kSpins = port::kThreads ? 256 : 0;  // some microseconds of pauses
  bool try_enter() {
    uint64_t s = state_.load(std::memory_order_relaxed);
    while (!(s & kWriter))
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
    return false;
  }
  std::atomic<uint64_t> state_{0};
  std::mutex m_;
  std::condition_variable readers_cv_, writers_cv_;
  uint64_t waiting_readers_ = 0;
  int waiting_writers_ = 0;
  bool writer_ = false;
  uint64_t phase_ = 0;
  uint64_t next_ticket_ = 0, serving_ = 0;  // writers' turns, in order
};

// The calls under way on an engine (a statement, a batch, a checkpoint, a
// flush, a warm): close() makes new ones fail and waits for these to end
// before it lets the file go, so no call reads a file already closed (a
// read under the shared lock reads vector blocks from the file as it goes).
// A call that would start once close() began is refused instead.
//
// One word: the count, and a bit that close() sets. While the bit is
// clear a call comes and goes with one compare-and-swap each way; once it
// is set, a call that ends takes the mutex to count itself out, so close()
// (which waits under it) cannot return, and its engine be freed, while
// that call still touches this.
class CallsInFlight {
 public:
  // False once closing: the call must not run (and is not counted).
  bool enter() {
    uint64_t v = n_.load(std::memory_order_relaxed);
    do {
      if (v & kClosing) return false;
    } while (!n_.compare_exchange_weak(v, v + 1, std::memory_order_acquire, std::memory_order_relaxed));
    return true;
  }
  void leave() {
    uint64_t v = n_.load(std::memory_order_relaxed);
    while (!(v & kClosing))
      if (n_.compare_exchange_weak(v, v - 1, std::memory_order_release, std::memory_order_relaxed)) return;
    std::lock_guard g(m_);
    if (n_.fetch_sub(1, std::memory_order_acq_rel) == (kClosing | 1)) cv_.notify_all();
  }
  void close() {
    std::unique_lock g(m_);
    n_.fetch_or(kClosing, std::memory_order_acq_rel);
    cv_.wait(g, [&] { return n_.load(std::memory_order_acquire) == kClosing; });
  }
  // enter() and leave() around one call's scope.
  class Scope {
   public:
    explicit Scope(CallsInFlight& c) : c_(c), in_(c.enter()) {}
    ~Scope() {
      if (in_) c_.leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    explicit operator bool() const { return in_; }

   private:
    CallsInFlight& c_;
    bool in_;
  };

 private:
  static constexpr uint64_t kClosing = uint64_t(1) << 63;
  std::atomic<uint64_t> n_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

// The documents of a put or insert, typed, checked and encoded (what
// needs no decision of the write lock: prepare_documents runs beside the
// readers), waiting for their ids and their record (land_documents, under
// the write lock).
struct PreparedDocs {
  struct Doc {
    bool has_id = false;
    int64_t id = 0;
    size_t at = 0, len = 0;  // its encoding in `bodies`
    Value fields;            // by name, when the collection has a @unique index
    int64_t pos = 0;
  };
  std::vector<Doc> docs;
  std::string bodies;  // every document encoded, one after another
  bool listed = false;  // given as a list (errors name a document by its number in it)
  bool ready = false;
  // The collection they were made for: valid while the catalog is as it
  // was then (a batch holds the gate; a queued write makes them again when
  // the catalog moved), so landing them looks nothing up.
  Collection* coll = nullptr;
  // Once landed (`landed`), each document's id is in its Doc, and the
  // caller makes the `{id}` rows (landed_rows) after the write lock, so
  // that readers do not wait for a row's allocations.
  bool landed = false;
  std::string_view body(const Doc& d) const { return std::string_view(bodies).substr(d.at, d.len); }
  // Once landed: *rows becomes their {id} rows, written over the rows it
  // held; else it is left as it is.
  void landed_rows(std::vector<Value>* rows) const;
  // Empty again: its storage kept for the next documents while *budget
  // (bytes) holds it, let go past that.
  void reset(size_t* budget) {
    const size_t bytes = bodies.capacity() + docs.capacity() * sizeof(Doc);
    if (bytes > *budget) {
      std::string().swap(bodies);
      std::vector<Doc>().swap(docs);
    } else {
      *budget -= bytes;
      docs.clear();
      bodies.clear();
    }
    ready = landed = listed = false;
    coll = nullptr;
  }
};

// For a put or insert whose body is a parameter (`put t $1`), its number:
// the parameter whose documents may be given left encoded (Params); else 0.
int64_t documents_param(const ParsedStatement& st);
// Whether `st` reads `params` as they are given: values; the documents of
// `put t $n` left encoded; or every parameter left encoded (listed) for a
// put or an insert whose body is literals and parameters alone, which the
// put encodes anyway. Else they are decoded first (Params::copy).
bool reads_as_given(const ParsedStatement& st, const Params& params);
// A put or an insert whose body is literals and parameters alone (no
// explain): what reads every parameter left encoded (listed).
bool splices_params(const ParsedStatement& st);

// A write waiting in the engine's queue to land (sync.cpp): the first in
// the queue lands those behind it too.
struct QueuedWrite {
  QueuedWrite(Prepared& p, const Params& params) : p(p), params(params) {}
  Prepared& p;
  const Params params;
  bool deferred = false;     // returns once landed; its caller waits for the flush (when_durable)
  bool long_write = false;   // may hold the write lock long: landed by its own thread (Engine::land)
  uint64_t catalog_at = 0;   // the catalog version docs were made at
  PreparedDocs docs;
  Result<QueryResult> result = Status(Code::Invalid, "not landed");
  uint64_t seq = 0;          // its record's (0: none written)
  bool done = false;         // result is final (under the queue's mutex)
  std::condition_variable cv;
  QueuedWrite* next = nullptr;  // the write queued after it
};

// Every parameter the statement names given, else `invalid` naming the
// highest (explain, which runs nothing, needs none).
Status params_given(const ParsedStatement& st, const Params& params);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> open(FileSystem& fs, const std::string& name, const OpenOptions& o);
  ~Engine();

  // `durable_at` (see Database::query_outside_transaction): not null, a
  // durable write returns once landed and sets it to what when_durable waits for.
  Result<std::vector<QueryResult>> batch(const std::vector<BatchItem>& items, uint64_t* durable_at = nullptr);

  // Parses a statement, from the statement cache when `cache` (and adds it).
  Result<std::shared_ptr<Prepared>> prepare(std::string_view text, bool cache);
  // Runs a prepared statement (binding it first if the catalog changed).
  // The result goes to *out, written over where it can be (a point read's row);
  // after an error what it holds is unspecified.
  Status run(Prepared& p, const Params& params, QueryResult* out,
             uint64_t* durable_at = nullptr);
  Status bind_now(Prepared& p);  // binds it now (an error if a name is unknown)
  bool may_run_long(std::string_view text, const Params& params);  // see Database::may_run_long
  bool long_write_running() const;          // see Database::long_write_running
  bool closed() const { return closed_; }
  // A statement of a batch and its parameters: the caller's, which outlive
  // the batch (`given`), or a copy it keeps (a transaction's queue). None
  // is left encoded: a batch's statements read values.
  struct PreparedItem {
    std::shared_ptr<Prepared> p;
    std::vector<Value> kept;
    std::optional<Params> given;
    Params params() const { return given ? *given : Params(kept); }
  };
  // Runs statements as one atomic write; `dry_run`: then undoes them all
  // (what a transaction's read sees: the transaction's writes before it).
  Result<std::vector<QueryResult>> run_batch(const std::vector<PreparedItem>& items, bool dry_run,
                                             uint64_t* durable_at = nullptr);
  // Calls `done` once every write up to `seq` is flushed, or with the
  // failure (see Database::when_durable).
  void when_durable(uint64_t seq, std::function<void(const Status&)> done);
  Status checkpoint();
  Status sync();
  Status close(bool checkpoint = true);
  Stats stats();
  // A copy: warnings are added after the open too (a graph rebuilt, an
  // automatic checkpoint failed), by threads that hold report_mu_.
  OpenReport report() const {
    std::lock_guard g(report_mu_);
    return report_;
  }

  // Used by the executor (query/executor.cpp, query/ops/), under the appropriate lock.
  const OpenOptions& options() const { return opts_; }
  Collection* find(std::string_view name);
  const std::map<std::string, std::unique_ptr<Collection>, std::less<>>& collections() const { return colls_; }
  std::string_view body(uint64_t loc) const { return arena_.body(loc); }
  void prefetch_body(uint64_t loc) const { arena_.prefetch(loc); }
  uint32_t next_collection_id() const { return next_coll_id_; }
  // `lock`: the shared lock the caller holds; a long read may let it go
  // once it has pinned what it reads (then lock->owns_lock() is false).
  // Reads c (the collection p names, looked up by the caller; null if none
  // exists). The rows go to *out: a point read writes over the row it holds,
  // any other read replaces them.
  Status execute_read(const Prepared& p, Collection* c, const Params& params, QueryResult* out,
                      std::shared_lock<FairSharedMutex>* lock = nullptr);
  // `limited`: the statement has a limit (its scan may end early).
  bool pinnable(const Collection& c, const class Plan& plan, const struct LookupPlan* lookup, const Field* exact_near,
                bool limited) const;
  // `child`: the copy a pinned read's lookup reads, which keeps the
  // definitions of its secondary indexes (none built) for the lookup's
  // @hash index (live_equal).
  std::unique_ptr<Collection> pin_copy(const Collection& c, const Field* exact_near, bool child = false) const;
  // A pinned read's lookup through a @hash index: the ids under `key` in
  // the live index of the collection `snap` is a pinned copy of (its
  // secondary index i), read under the shared lock, while neither that
  // collection nor the catalog changed since the pin (the index then holds
  // what the copy's documents give). False once one did, or once the read
  // has waited out a writer's turn for live_waits keys (writers busy): the
  // caller then fills an index from the copy, which costs about what its
  // scan does (pinnable). `live`: the collection and index found the first
  // time, and the waits so far.
  struct LiveIndex {
    const Collection* coll = nullptr;
    SecondaryIndex* index = nullptr;
    unsigned waits = 0;
  };
  static constexpr unsigned kLiveWaits = 256;
  unsigned live_waits = kLiveWaits;  // tests make it smaller
  bool live_equal(const Collection& snap, size_t i, const Value& key, std::vector<int64_t>* ids, LiveIndex* live);
  // A write statement's ops into *batch (left empty when it changes
  // nothing) and its answer into *out; nothing lands: the caller commits
  // the batch. Under the write lock. `docs`: a put's documents,
  // made by prepare_write beside the readers.
  Status execute_write(const ParsedStatement& st, const Params& params, PreparedDocs* docs,
                       WriteBatch* batch, QueryResult* out);
  // A put's or insert's documents, typed and encoded (under the shared
  // lock; landed at the catalog version they were made at, or made again).
  Status prepare_write(const ParsedStatement& st, const Params& params, PreparedDocs* docs);
  // Under the shared lock `lk`, for a statement p (bound) that needs_maps
  // and makes `lookups` lookups by document or vector in each vector index
  // of its collection: those lookups reserved (HnswIndex::reserve: scans
  // answer them while the index's maps are unbuilt), or where they do not
  // fit, the maps (document -> node, fingerprint -> nodes) built first, in
  // pieces with the lock let go between them (and p bound again after). So
  // no reader waits for a whole build under the write lock, nor a writer
  // for one under the shared lock. One thread builds at a time; another
  // that needs maps, or writes into an index whose maps are being built,
  // waits for it with no lock held.
  Status ready_maps(Prepared& p, uint64_t lookups, std::shared_lock<FairSharedMutex>& lk);
  // The build of ready_maps and of a read's deferred need: idx's maps, in
  // pieces under the shared lock `lk` (held again on return). False when
  // another thread builds (maps or an index): it waited a little with no
  // lock held, idx may be gone, and the caller asks again.
  bool build_maps_beside(HnswIndex* idx, std::shared_lock<FairSharedMutex>& lk);
  // A write (put and remove look documents up), or a near with a filter in
  // a batch, whose reads run under the write lock (an exact search over the
  // filter's candidates may look up the nodes of those written since the
  // last image; a read alone asks for the maps as it runs, defer_maps).
  static bool needs_maps(const ParsedStatement& st) {
    return st.is_write() || (st.where && !st.near_field.empty());
  }
  // How many lookups by document or vector a statement that needs_maps
  // makes in a vector index: a put's or insert's documents, a set's or
  // del's ids, four for each (the document's node, the vector's twin, the
  // old node taken out, a transaction's undo); UINT64_MAX when it cannot
  // say (a where clause not by id, a read).
  static uint64_t vector_lookups(const ParsedStatement& st, const Params& params);
  // For a statement p (bound) of a write or a batch, under the shared lock:
  // what it would otherwise build under the write lock, built beside it
  // first: its collection's vector maps (ready_maps), its @unique indexes (a
  // put, an insert or a set checks them) and, while any of the collection's
  // text or secondary indexes is unbuilt, those its plan would use (a read,
  // or a set or del not by id, planned here without running). `lookups`:
  // vector_lookups of the statement, or of the whole batch it is part of.
  Status ready_indexes(Prepared& p, const Params& params, uint64_t lookups,
                       std::shared_lock<FairSharedMutex>& lk);
  // A text or secondary index that a statement needs and that is not
  // built, or a vector index's maps that a read needs and that are not.
  struct IndexNeed {
    enum Kind : uint8_t { Secondary, Text, VectorMaps };
    uint32_t coll;   // collection id
    Kind kind;
    uint32_t which;  // the secondary index's place in def.secondary, or the text or vector index's field id
  };
  // While one lives on a thread, secondary() and text_index() build no index
  // they find unbuilt: they note it in *needs and fail, and execute_read
  // returns once planned; the caller builds them (build_beside) and plans
  // again. A read that would look up more documents in a vector index than
  // scans may answer asks for its maps the same way (defer_maps).
  class DeferBuilds {
   public:
    explicit DeferBuilds(std::vector<IndexNeed>* needs);
    ~DeferBuilds();
    DeferBuilds(const DeferBuilds&) = delete;
    DeferBuilds& operator=(const DeferBuilds&) = delete;
    static std::vector<IndexNeed>* current();

   private:
    std::vector<IndexNeed>* prev_;
  };
  // Under the shared lock `lk` (held again on return, which may be before
  // the index is built: the caller asks again): builds the index `need`
  // names from a pin of its collection with no lock held, then takes the
  // documents written meanwhile again, in rounds, the last under the shared
  // lock, where it is put in place. One thread builds beside the lock at a
  // time (maps or an index); another waits for it with no lock held.
  Status build_beside(const IndexNeed& need, std::shared_lock<FairSharedMutex>& lk);
  // Under the shared lock, from a read that would look up documents in the
  // vector index of c's field `fid` past what scans may answer (its maps
  // unbuilt): true when the caller builds beside the lock (a DeferBuilds
  // lives on the thread), the need noted; the read then fails and runs
  // again once they are built. False: the read scans.
  static bool defer_maps(const Collection& c, uint32_t fid);
  static constexpr int kBuildTries = 8;  // plans in a row that each found an index to build
  // build_beside for each need. `tries`: the caller's count of plans in a
  // row that needed a build; one that waited for another thread's is not
  // counted, and a build that failed ends the tries (the statement then
  // builds where it is planned and meets the error as it always did).
  void build_needs(const std::vector<IndexNeed>& needs, int* tries, std::shared_lock<FairSharedMutex>& lk);
  // Whether the index a need names is still to be built, and whether any
  // text or secondary index of c is.
  static bool unbuilt(Collection& c, const IndexNeed& n);
  static bool any_unbuilt(Collection& c);
  // Tests: called (with no lock held) each time build_beside has let the
  // lock go, after its pin and after each round's.
  std::function<void()> beside_hook;
  // Tests: called (with no lock held) when a pinned read has let the lock
  // go, and before each key its lookup asks a live @hash index for; the
  // indexes pinned reads' lookups filled from their copies, since the open.
  std::function<void()> pinned_hook, lookup_hook;
  // Tests: called when a pinned lookup found the lock held by a writer
  // (before it waits), by a group of writes under the write lock, and
  // when a statement waits for another thread's build of a vector index's
  // maps (under the shared lock, before it lets it go).
  std::function<void()> live_wait_hook, landing_hook, maps_wait_hook;
  std::atomic<uint64_t> pinned_fills{0};
  // Tests: called on the thread that builds a checkpoint's image at idle
  // priority, when it starts and each time it looks whether to hurry (after
  // a run of documents, between two steps of a vector table's copy), with
  // the flag it looks at; the budget that build gets (ms; -1: from the
  // documents and vectors, 0: told to hurry from the start); the
  // checkpoints whose image the checkpoint's own thread finished, since the
  // open.
  enum class IdleStep { Start, Documents, Vectors };
  std::function<void(IdleStep, std::atomic<bool>& hurry)> idle_hook;
  int idle_budget_ms = -1;
  std::atomic<uint64_t> builds_hurried{0};
  // An image record's body longer than this goes in a long frame
  // (storage/format.h); tests lower it to write long frames of small ones.
  uint64_t short_frame_bytes = kMaxRecordBytes;
  // A checkpoint copies a vector table or graph into its image this much a
  // step (whole blocks, at least one); tests lower it to stop inside small ones.
  uint64_t vector_step_bytes = 1 << 20;
  // Secondary index i of a collection, built now if it was not yet.
  Result<SecondaryIndex*> secondary(Collection& c, size_t i);
  // The text index of a @text field, built now if it was not yet.
  Result<TextIndex*> text_index(Collection& c, const Field& f);

 private:
  Engine(FileSystem& fs, std::string name, OpenOptions o);
  Status load(std::string bytes, std::unique_ptr<Mapping> map);
  struct ImageIds;  // image.cpp
  Status apply_image_record(const struct RecordView& r, const std::map<uint32_t, uint64_t>* counted,
                            std::map<uint32_t, ImageIds>* ids);
  Status finish_image_ids(std::string_view file, std::map<uint32_t, ImageIds>* ids, uint64_t* repaired);
  Status apply_write(std::string_view body, uint32_t seg, uint64_t body_off, bool replay);
  // A transaction's undo log: each document as it was before its first change.
  struct Undo {
    uint32_t coll;
    int64_t id;
    int64_t next_id;
    uint64_t loc;
    std::vector<std::pair<uint32_t, std::vector<float>>> vectors;
  };
  Status apply_ops(std::string_view ops, uint64_t nops, uint32_t seg, uint64_t ops_off, std::vector<Undo>* undo);
  void remember(Collection* c, int64_t id, std::vector<Undo>* undo);
  void rollback(std::vector<Undo>& undo);
  void link_touched();
  void unentry(Collection* c, int64_t id, std::string_view old);  // log.cpp
  // Writes one record holding the batch and applies it. Under the write
  // lock; returns the sequence number to wait for in `always` mode. Inside
  // a batch() the ops apply now and join the batch's one record.
  Result<uint64_t> commit(const WriteBatch& b);
  Result<uint64_t> write_record(const WriteBatch& b, bool apply);
  // Under the gate, after writes landed `landed` bytes: zeros ahead of the log.
  void fill_ahead(uint64_t landed);
  // Whether the log is filled ahead in file f (`always` mode, a file that
  // says it pays: file.h), and the zeros over [from, to) of f that do it.
  bool fills_ahead(const File& f) const { return opts_.sync == SyncMode::Always && f.fills_ahead(); }
  static Status write_zeros(File& f, uint64_t from, uint64_t to);
  // Makes the vector indexes match the definition: drops stale ones, builds new ones.
  Status sync_indexes(Collection* c);
  Status build_index(Collection* c, const Field& f, std::unique_ptr<HnswIndex>* out);
  // Documents that refer into vector tables: a checkpoint re-encodes them,
  // and a long read of them keeps the lock (pinnable).
  static bool refers_to_tables(const Collection& c) {
    return !c.vindex.empty() || !c.retired.empty() || !c.lost_tables.empty();
  }
  // Checkpoints (checkpoint.cpp). begin_image pins the database (under a
  // lock that keeps writes out) and builds what must be built then; the
  // rest of the image is built and written with no lock held, while writes
  // go on into the old file's tail; carry_tail copies those writes after the
  // new image; switch_image makes it the file (under the write lock), and
  // move_to_image points the documents no write changed into it, in pieces.
  struct TableAt {
    uint32_t coll, field;
    uint64_t table;  // offsets in the image: the vector table
    uint64_t links;  // and the level-0 lists
    size_t nodes;    // the table's vectors
  };
  // A vector index as a checkpoint pinned it.
  struct VectorPin {
    uint32_t field;
    std::string name;  // the field's
    const HnswIndex* index;  // only compared at the switch: after the pin it may be gone
    HnswIndex::Pin pin;
    // The pin's table and level-0 lists into the image, a step at a time
    // (they refer into `pin`: a VectorPin stays where it is once begun).
    ExtentCopy table, links;
    std::string table_head, links_head;  // their records' heads before the pin's meta and graph
    bool copied = false;      // both are in the image
  };
  struct ImageColl {
    uint32_t id;
    std::string name;
    uint64_t changes;          // Collection::changes at the pin
    bool built = false;        // its records made at the pin (else from `pinned`, after it)
    IdIndex pinned;            // what the rest is built from
    std::vector<VectorPin> vectors;
    IdBlocks ids;  // its entries in the image (offsets)
    std::vector<uint64_t> was; // each one's location at the pin
    bool docs_done = false;    // its Docs records are in the image
    bool resumed = false;      // some are, up to and with id done_through
    int64_t done_through = 0;
  };
  struct NewImage {
    std::string bytes;
    uint64_t size = 0;  // of the image (bytes move into the arena at the switch)
    uint64_t records = 0, docs = 0;
    std::vector<ImageColl> colls;
    std::vector<TableAt> tables;
    // The pin: the last write in the image, the end of the file and the
    // tail's records then, and the arena's segments then.
    uint64_t seq = 0, pos = 0, tail_records = 0;
    uint32_t sealed = 0;
    Arena::View view;
    std::string side;            // the side file it is written to: NAME~, or NAME~~ when it carries a tail
    std::unique_ptr<File> file;
    uint64_t written = 0;        // bytes of the image in the side file (write_pages)
    uint64_t carried = 0;        // bytes of the old tail copied after the image
    uint32_t segment = 0;        // the image's arena segment after the switch
    bool keep_old = false;       // a collection still refers to the pin's segments
    bool beside_writers = false; // built and written with no lock held, writes landing meanwhile
    bool hurried = false;        // a build at idle priority stopped, for the checkpoint's thread to go on
    uint64_t filled = 0;         // zeros written after the image up to here, for the log to come (log.cpp, fill_ahead)
    std::vector<ImageColl*> to_move;
    // Pins whose memory was taken before the pin, with no lock held
    // (make_pin_room), by index: begin_image pins into them.
    std::vector<std::pair<const HnswIndex*, HnswIndex::Pin>> rooms;
  };
  void make_pin_room(NewImage* img);
  Status begin_image(NewImage* img, bool carry);
  // A collection's Docs records in the image, from `ids` and `view`; with
  // `hurry`, stopped soon after *hurry is set (ic.resumed), to go on from
  // there in the next call. `vs`: resolves references into tables no index
  // holds (only while writes wait).
  Status append_documents(NewImage* img, ImageColl& ic, const IdIndex& ids, const Arena::View& view,
                          const Collection* vs, std::atomic<bool>* hurry);
  // A collection's pinned vector tables and graphs in the image, copied a
  // step at a time; with `hurry`, false when it stopped between two steps
  // once *hurry was set, to go on from there in the next call.
  bool append_vectors(NewImage* img, ImageColl& ic, std::atomic<bool>* hurry);
  static void release_vectors(ImageColl& ic);
  static void release_tables(NewImage& img);
  bool told_to_hurry(std::atomic<bool>* hurry, IdleStep step);
  Status image_documents(NewImage* img, std::atomic<bool>* hurry);
  void image_vectors(NewImage* img, std::atomic<bool>* hurry);
  Status finish_image(NewImage* img);
  Status open_side(NewImage* img);
  Status write_pages(NewImage* img, bool start, const std::atomic<bool>* hurry);
  Status write_image(NewImage* img);
  Status carry_tail(NewImage& img, uint64_t to);
  Status replace_file(const NewImage& img);
  void switch_image(NewImage& img);
  void move_to_image(NewImage& img);
  void free_in_pieces(File& old);
  Status check_all_extents();
  Status checkpoint_locked();
  void checkpoint_if_due();  // after a write, with no lock held
  void auto_checkpoint();    // one automatic checkpoint, its failure a warning
  void checkpointer_loop();
  Status sync_to(uint64_t seq);
  Status check_writable() const;
  bool checkpoint_worthwhile(bool closing) const;
  void flusher_loop();
  void durable_loop();
  void checker_loop();
  void stop_checker();

  FileSystem& fs_;
  std::string name_;
  OpenOptions opts_;
  OpenReport report_;
  mutable std::mutex report_mu_;  // report_ after the open
  std::unique_ptr<File> file_;

  FairSharedMutex mu_;  // reads shared, writes exclusive
  std::atomic<bool> building_{false};  // a thread builds maps or an index beside the lock (ready_maps, build_beside)
  std::atomic<const HnswIndex*> maps_building_{nullptr};  // the vector index whose maps it builds (writes wait)
  // Takes building_ for this thread (true; BuildHeld lets it go), or waits a
  // moment for the thread that has it, with lk let go (false).
  bool claim_build(std::shared_lock<FairSharedMutex>& lk);
  struct BuildHeld {
    std::atomic<bool>& flag;
    ~BuildHeld() { flag.store(false); }
  };
  // The writes waiting to land, first come first (sync.cpp): a leader
  // lands them in groups of at most kGroup, each with one hold of
  // write_gate_ and mu_ and one flush, for at most kRounds groups.
  static constexpr size_t kGroup = 64;
  static constexpr int kRounds = 8;
  std::mutex queue_mu_;
  QueuedWrite* queue_head_ = nullptr;
  QueuedWrite* queue_tail_ = nullptr;
  size_t queued_ = 0;
  bool leading_ = false;
  Result<QueryResult> land(QueuedWrite& w);
  Result<QueryResult> land_one(QueuedWrite& w);
  // Every write passes it before mu_, and holds it until its record is
  // written and applied (not its flush). A checkpoint holds it for its pin
  // and its switch (and, where it cannot carry a tail, throughout).
  std::mutex write_gate_;
  // Under the gate: a batch's documents, statement by statement, in storage
  // kept from one batch to the next (a batch of single puts then allocates
  // nothing for them; past 1 MiB in all, what a batch grew is let go after it).
  std::vector<PreparedDocs> batch_docs_;
  std::mutex checkpoint_mu_;  // one checkpoint at a time
  std::atomic<bool> checkpoint_due_{false};  // the tail outgrew the image, or an index was built
  // Bumped (under the write lock) by every change to a collection's
  // definition: a prepared statement bound at an older one is bound again.
  std::atomic<uint64_t> catalog_version_{1};
  // Writes running that may hold the write lock long (may_run_long says
  // every statement may, meanwhile), counted by a LongWrites while they run.
  std::atomic<int> long_writes_{0};
  std::atomic<uint64_t> reads_pinned_{0};  // reads that ran pinned since the open (Stats)
  std::atomic<uint64_t> built_beside_{0};  // builds beside the lock since the open (Stats)
  // A read that may run long, as its last run went (may_run_long).
  bool reads_long(const Prepared& p) const;
  // A set or del not by id, a definition, or a statement written by id
  // whose parameters give no integer id (its plan scans) or over 1,000 ids
  // (may_run_long, the long writes).
  bool statement_long(const Prepared& p, const Params& params) const;
  struct LongWrites {
    std::atomic<int>& n;
    const bool counted;
    LongWrites(std::atomic<int>& n, bool counted) : n(n), counted(counted) {
      if (counted) n.fetch_add(1, std::memory_order_relaxed);
    }
    ~LongWrites() {
      if (counted) n.fetch_sub(1, std::memory_order_relaxed);
    }
  };
  StatementCache cache_;
  Status bound(Prepared& p);
  std::map<std::string, std::unique_ptr<Collection>, std::less<>> colls_;
  std::map<uint32_t, Collection*> by_id_;
  uint32_t next_coll_id_ = 1;
  Arena arena_;
  uint64_t seq_ = 0;          // last write sequence applied
  uint64_t write_pos_ = 0;    // end of the file
  uint64_t image_bytes_ = 0;
  uint64_t tail_records_ = 0;
  bool checkpoint_soon_ = false;  // an index was built: persist it
  bool carrying_ = false;         // a checkpoint is carrying the tail (under the gate)
  bool in_txn_ = false;           // inside batch(): ops apply now, land at the end
  WriteBatch txn_;                // inside batch(): the ops of its one record
  std::vector<Undo> undo_;
  std::vector<HnswIndex*> touched_;  // indexes with nodes to link after a record
  std::vector<float> prepared_;
  // Vector index records seen while loading the image, by collection << 32 | field.
  struct VectorRecords {
    std::string_view meta, graph;
    ExtentRef table, links;
    uint64_t graph_seq = 0;
    bool has_table = false, has_graph = false, graph_bad = false;
  };
  std::map<uint64_t, VectorRecords> vector_records_;
  ExtentRef* pending_extent_ = nullptr;  // the Extent the last record announced
  void drop_pending_extent();
  uint64_t given_up_tables_ = 0;          // recovering: vector tables with a damaged block
  bool lazy_ = false;       // extents are checked on first use
  bool lazy_read_ = false;  // and read then (not read on open)
  ExtentLoad extent_load();
  // Damage that lazily read blocks revealed: a graph is rebuilt (*repaired
  // set), a vector table fails with an error naming the offset.
  Status check_extents(bool* repaired);
  // A lazily checked block failed (check_extents acts on it): asked after
  // every read, so the common answer (no damage anywhere) is inline.
  bool extents_damaged() { return lazy_ && LazyExtent::any_damaged() && vindex_damaged(); }
  bool vindex_damaged();
  template <typename F>
  void for_each_vindex(F f) {
    for (auto& [name, c] : colls_) {
      for (auto& [fid, idx] : c->vindex) f(*c, fid, *idx);
      for (auto& [fid, idx] : c->retired) f(*c, fid, *idx);
    }
  }

 public:
  uint64_t warm(uint64_t budget);  // see Database::warm (0 once closed)

 private:
  static Status closed_error();
  // checkpoint() and sync() less the call's count (CallsInFlight), for
  // what runs inside a call or is stopped by close() itself.
  Status checkpoint_now();
  Status sync_to_written();

  // Durability: flushes happen outside mu_, shared by concurrent writers.
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool syncing_ = false;
  uint64_t synced_seq_ = 0;
  uint64_t written_seq_ = 0;
  uint64_t written_end_ = 0;  // write_pos_ after written_seq_ (a checkpoint carries the tail up to it)
  // The file holds zeros from write_pos_ up to here, written ahead of the
  // log (log.cpp, fill_ahead; under the gate).
  uint64_t filled_end_ = 0;
  bool fill_failed_ = false;
  static constexpr uint64_t kFillAhead = 1 << 20;
  int64_t last_sync_ms_ = 0;
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::atomic<bool> closed_{false};  // read without a lock by run(); set under the gate
  CallsInFlight calls_;  // close() waits for them; a call once closing began is refused
  std::mutex close_mu_;  // one close() at a time: a second one waits, then finds it closed
  Status closed_status_;  // what the first close() answered, for a second one
  bool opened_ = false;  // open() succeeded
  port::Background flusher_;  // the period mode's flushes; in the always mode, the deferred writes'
  bool stop_flusher_ = false;
  // Deferred writes waiting for their flush (when_durable), in no
  // particular order; under sync_mu_.
  struct DurableWaiter {
    uint64_t seq;
    std::function<void(const Status&)> done;
  };
  std::vector<DurableWaiter> durable_waiters_;
  // Checks the blocks of a mapped file's extents that no query touched yet,
  // in slices beside the queries, after open.
  port::Background checker_;
  std::atomic<bool> stop_checker_{false};
  // Runs the automatic checkpoints, so that the write that makes one due
  // does not wait for it (natively; the WASM build runs it after that write).
  port::Background checkpointer_;
  std::mutex ckpt_mu_;
  std::condition_variable ckpt_cv_;
  bool stop_checkpointer_ = false;
};


}  // namespace kitfox
