// The public C++ API of the engine.
//
//   auto fs = kitfox::make_memory_file_system();            // or PosixFileSystem
//   auto db = kitfox::Database::open(*fs, "a.kfdb", {});
//   auto r = (*db)->query("get t where n > $1", {kitfox::Value::integer(3)});
//   for (const Value& row : r->rows) puts(kitfox::to_json(row).c_str());
//
// A Database is safe to use from many threads natively: reads run in
// parallel, one write at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <string_view>
#include <vector>

#include "file.h"
#include "status.h"
#include "value.h"

namespace kitfox {

enum class SyncMode : uint8_t {
  Always,  // every write is flushed before it is acknowledged (group commit)
  Period,  // flushed at most `sync_period_ms` after it was written (default)
  Off,     // flushed on checkpoint and close only
};

struct OpenOptions {
  SyncMode sync = SyncMode::Period;
  uint32_t sync_period_ms = 250;
  bool create = true;  // create the file when it does not exist
  // Open a damaged file by keeping everything before the first bad record
  // (the rest is cut off and reported). Without it a damaged file refuses to open.
  bool recover = false;
  // Checkpoint automatically when the tail outgrows the image (and on close).
  bool auto_checkpoint = true;
  // Check the blocks of vector tables and HNSW graphs when a query first
  // touches them instead of all on open (where the file cannot be mapped,
  // read them then too). Nothing is answered from an unchecked block; a
  // checkpoint checks every block first, warm() checks the rest. Off: every
  // block is checked on open (as with `recover`).
  bool lazy_extents = true;
  // With lazy_extents, where the file is mapped: a background thread checks
  // the blocks no query has touched yet (native builds only). Off: they stay
  // unchecked until a query, warm() or a checkpoint reaches them.
  bool check_in_background = true;
  // The memory the rows of one query may take (as documents a sort holds,
  // or rows kept); a query past it fails with a `limit` error.
  uint64_t max_result_bytes = 1ull << 30;
};

// Parses "always", "off" or a period in milliseconds ("250", "250ms").
Result<OpenOptions> parse_sync_option(std::string_view s, OpenOptions base = {});

struct QueryResult {
  std::vector<Value> rows;  // each row is an Object value
};

struct BatchItem {
  std::string text;
  std::vector<Value> params;
  // Or, when not empty, its parameters as one encoded list (a list value's
  // encoding, Params::split_list): what POST /batch reads from JSON with no
  // Value made. A view of bytes that outlive the batch; `params` is then
  // ignored.
  std::string_view encoded_params = {};
};

// What open found and did: shown by `kitfox stats` and the CLI on open.
struct OpenReport {
  uint64_t torn_bytes = 0;        // bytes of a torn tail that were cut off
  uint64_t recovered_bytes = 0;   // bytes cut off by `recover`
  uint64_t recovered_offset = 0;  // where the damage was
  uint64_t tail_records = 0;      // write records replayed over the image
  bool side_file_restored = false;  // a whole `name~` image replaced the file
  bool index_rebuilt = false;     // a derived record disagreed and was rebuilt
  std::vector<std::string> warnings;
};

struct CollectionStats {
  std::string name;
  uint64_t documents = 0;
  uint64_t bytes = 0;  // encoded document bytes, live versions
};

struct Stats {
  uint64_t file_bytes = 0;
  uint64_t image_bytes = 0;
  uint64_t tail_bytes = 0;
  uint64_t tail_records = 0;
  uint64_t memory_bytes = 0;  // documents and indexes held in memory
  uint64_t queued_writes = 0;  // writes waiting now for the one landing writes to take them
  uint64_t reads_pinned = 0;   // reads that ran pinned, with no lock held, since the open (docs/storage.md)
  uint64_t built_beside = 0;   // indexes and vector indexes' document maps built beside the lock since the open (docs/storage.md)
  std::vector<CollectionStats> collections;
};

class Engine;
class Database;
struct Prepared;

// The parameters of one run of a statement ($1 is the first): the caller's
// values, by reference (they outlive the run). A host whose parameters
// arrive in the codec's value encoding may leave them there, two ways:
// - the documents of a put (kitfox import, POST /docs, a put `$n` in
//   POST /query):
//   parameter `encoded_at` (0-based) is given as `encoded` (its entry in
//   `values` is null) and the put types the documents from those bytes, as
//   it types a body of literals, with no Value built for them. That is the
//   parameter Statement::documents_param() names;
// - every parameter, each its encoding (`listed`: POST /batch's items, the
//   WASM binding's runs and batches): a put or an insert whose body is literals and parameters
//   alone splices each parameter's bytes where the body encodes it
//   (reads_as_given), as they are (an int's varint written longer than it
//   needs stays so; it reads as the same int).
// Only those puts read parameters left encoded: any other statement has
// them decoded first (copy()), and sees null in their place here.
class Params {
 public:
  Params(const std::vector<Value>& values) : values_(&values) {}  // implicit, as the vector was taken before
  Params(std::vector<Value>&&) = delete;  // a view: of values that outlive it
  Params(std::vector<Value>&&, size_t, std::string_view) = delete;
  Params(const std::vector<Value>& values, size_t encoded_at, std::string_view encoded)
      : values_(&values), at_(encoded_at), encoded_(encoded) {}
  // A put's `$1` given as its encoded documents, and no other parameter
  // (`put C $1`: kitfox import's batches, POST /docs).
  static Params documents(std::string_view encoded) { return Params(one_unset(), 0, encoded); }
  // The items of `list`, the value encoding of a list of parameters (its
  // tag, its count, each item), appended to *items, each checked (a tag-12
  // reference is no parameter); else an error, and none appended.
  static Status split_list(std::string_view list, std::vector<std::string_view>* items);
  // Every parameter left encoded: `items[i]` is $i+1's encoding (as
  // split_list gives them). The items and their bytes outlive the run.
  static Params listed(const std::string_view* items, size_t n) {
    Params p(one_unset());
    p.items_ = items;
    p.count_ = n;
    p.listed_ = true;
    return p;
  }
  size_t size() const { return listed_ ? count_ : values_->size(); }
  const Value& operator[](size_t i) const { return listed_ ? one_unset()[0] : (*values_)[i]; }
  // Parameter $n's bytes where it was left encoded; else empty.
  std::string_view encoded(int64_t n) const {
    if (listed_) return n >= 1 && (size_t)n <= count_ ? items_[n - 1] : std::string_view();
    return n >= 1 && (size_t)(n - 1) == at_ ? encoded_ : std::string_view();
  }
  // Whether every parameter is a value (none left encoded).
  bool values_only() const { return !listed_ && encoded_.empty(); }
  // Whether every parameter is left encoded (listed).
  bool is_listed() const { return listed_; }
  // The values, those left encoded decoded: a copy that owns everything
  // (what a transaction keeps until its commit).
  Result<std::vector<Value>> copy() const;

 private:
  static const std::vector<Value>& one_unset();  // {null}: the place of a parameter given encoded
  const std::vector<Value>* values_;
  size_t at_ = SIZE_MAX;
  std::string_view encoded_;  // the one left encoded
  bool listed_ = false;
  const std::string_view* items_ = nullptr;  // listed: each one's encoding
  size_t count_ = 0;
};

// A statement parsed and bound once (Database::prepare), run many times with
// new parameters. Bound again by itself when a collection it reads or writes
// is altered, dropped or given an index; a statement whose collection or
// field no longer exists fails with `not_found` until it exists again. Safe
// to run from many threads at once natively. It must not outlive its Database.
class Statement {
 public:
  Statement() = default;
  // Runs as Database::query runs the text (inside a transaction of this thread too).
  Result<QueryResult> query(const std::vector<Value>& params = {}) const;
  // The same into *out, which holds the rows on success and none after an
  // error. The rows *out held are written over where they can be: a read by
  // id keeps the last call's row, its keys and its texts' storage, so a loop
  // of such reads into one QueryResult allocates nothing.
  Status query(const std::vector<Value>& params, QueryResult* out) const;
  // The same with parameters one of which may be left encoded (Params).
  Status query(const Params& params, QueryResult* out) const;
  // For a put or insert whose body is a parameter (`put t $1`), its number:
  // the one parameter that may be given encoded; else 0.
  int64_t documents_param() const;
  // Whether a run reads its parameters as given in their encoding
  // (Params::listed), with no value made: a put or an insert whose body is
  // literals and parameters. Any other decodes them.
  bool splices_params() const;
  const std::string& text() const;
  bool is_write() const;
  explicit operator bool() const { return p_ != nullptr; }

 private:
  friend class Database;
  Database* db_ = nullptr;
  std::shared_ptr<Prepared> p_;
};

class Database {
 public:
  static Result<std::unique_ptr<Database>> open(FileSystem& fs, const std::string& name,
                                                const OpenOptions& options = {});
  ~Database();

  // Runs one statement. Write statements are atomic: on error nothing changed.
  // The text is kept parsed in a small cache of recent statements, so a
  // statement run again costs what a prepared one does.
  // `begin` opens a transaction on this handle for this thread: its writes
  // are queued ({"queued": n}); its reads see the database with the queued
  // writes applied; `commit` lands the writes as one batch and returns their
  // rows in order; `rollback` drops them. Other threads never see them,
  // and a thread that ends with one open has it dropped (no later thread
  // takes it over).
  Result<QueryResult> query(std::string_view text, const std::vector<Value>& params = {});
  // Whether this thread has a transaction open on this handle (a begin
  // without its commit or rollback), and how many writes it has queued.
  std::optional<size_t> open_transaction() const;
  // The same into *out, its rows written over as Statement::query(params, out) does.
  Status query(std::string_view text, const std::vector<Value>& params, QueryResult* out);
  // As query(), for statements that come from many clients over threads they
  // share (a server): no transaction of the calling thread applies, and
  // begin, commit and rollback are refused (`invalid`); a client sends the
  // statements of one atomic write together, through batch().
  //
  // `durable_at`, for callers whose threads must not wait for a flush (a
  // server's event loops): when given, a write with sync = always returns
  // once it has landed (readers see it; it is not durable yet) and sets
  // *durable_at to the point when_durable() waits for before the write may
  // be acknowledged; 0 when there is nothing to wait for.
  Result<QueryResult> query_outside_transaction(std::string_view text, const std::vector<Value>& params = {},
                                                uint64_t* durable_at = nullptr);
  // The same with parameters one of which may be left encoded (Params).
  Result<QueryResult> query_outside_transaction(std::string_view text, const Params& params,
                                                uint64_t* durable_at = nullptr);
  // Parses and binds a statement once; see Statement.
  Result<Statement> prepare(std::string_view text);
  // For the text of a put or insert whose body is a parameter (`put C $n`):
  // n, and the collection's name in *collection; else 0 (any other text,
  // one that does not parse). The text is kept parsed, as query keeps it.
  int64_t documents_param(std::string_view text, std::string* collection);
  // Whether running the text may take long: a read that scanned a
  // collection, searched vectors exactly or went through over 10,000
  // documents the last time it ran (or has not run yet), a set or del not
  // by id, a read, set or del written by id whose `params` are no integer
  // id (a text, 1.5, a list holding one: it then scans; null names none
  // and is short) or over 1,000 ids, a definition (an index build), a
  // checkpoint, a text over 1 KiB that is not a put (or over 64 KiB), and
  // anything while a long write runs (long_write_running). A point read and
  // a read an index answers with few documents do not, nor does a put (a
  // caller looks at how many documents a parameter holds itself); a
  // statement with parameters asked without them is judged by id as if
  // they were missing (long). For a host that runs
  // short statements on threads others wait behind (a server's event
  // loops); it never fails: a text of at most 1 KiB that does not parse is
  // short (its error comes at once).
  bool may_run_long(std::string_view text, const std::vector<Value>& params = {});
  bool may_run_long(std::string_view text, const Params& params);
  // Whether a write that may hold the write lock long runs now: a set or
  // del not by id (or by parameters that give no integer id or over 1,000
  // ids), a definition, a put of over 1,000 documents or 64 KiB
  // encoded (or of over 32 into a vector index), a batch holding one or a
  // read, a checkpoint while it holds the write gate. Another write
  // meanwhile waits for it (and, but for the checkpoint, a read too).
  bool long_write_running() const;
  // Runs statements (put, insert, set, del and reads) as one atomic write:
  // each sees the ones before it, and all land as one record or none does.
  // Refused (`invalid`) while this thread has a transaction open: it would
  // land outside it. `durable_at`: as for query_outside_transaction.
  Result<std::vector<QueryResult>> batch(const std::vector<BatchItem>& items, uint64_t* durable_at = nullptr);
  // Calls `done` once every write up to `durable_at` (from a deferred write
  // above) is flushed, with ok, or with the error when the flush failed
  // (`failed`: acknowledge nothing). Natively it is called from a flusher
  // thread, which one flush serves for every write landed meanwhile (or at
  // once, on this thread, when the point is already flushed): `done` must
  // not block, nor close the database (close() stops that thread). Without
  // threads it flushes and calls `done` before it returns. After close(),
  // `done` hears ok when close()'s flush covered the write, else `failed`. A
  // point no write gave is refused at once (`invalid`).
  void when_durable(uint64_t durable_at, std::function<void(const Status&)> done);

  Status checkpoint();  // writes a new image, drops the tail
  Status compact();     // checkpoint, and rebuilds the in-memory store
  Status sync();        // flushes every write so far
  // With lazy_extents: reads up to about `budget` bytes of vector tables and
  // graphs not read yet, returns the bytes still unread (0: all in memory).
  // A host calls it when idle after open.
  uint64_t warm(uint64_t budget);
  // Checkpoints when worthwhile, flushes, releases the file. Calls under way
  // on other threads end first; statements (a transaction's too) and
  // checkpoint, sync and warm from then on fail ("the database is closed"). After a failed flush or write it answers that failure, since
  // what was written since the last good flush may be lost. A second
  // close() answers what the first did.
  // Flushes every write and lets the file go, first writing a new image
  // when the log has grown (as an automatic checkpoint would); `checkpoint`
  // false writes none (what a forgotten database's finalizer asks: the file
  // may have been opened again meanwhile, and an image from this one would
  // replace what that one wrote).
  Status close(bool checkpoint = true);

  Stats stats();
  OpenReport open_report() const;  // a copy: warnings are added after the open too

 private:
  friend class Statement;
  friend struct DatabaseTesting;  // the unit tests' way to the engine
  Database();
  Status run(const std::shared_ptr<Prepared>& p, const Params& params, QueryResult* out);
  Status dispatch(const std::shared_ptr<Prepared>& p, const Params& params, QueryResult* out);
  std::unique_ptr<Engine> engine_;
  struct Transactions;
  friend struct DatabaseThreadTxns;  // a thread's record of its transactions (database.cpp)
  // Open transactions (between begin and commit), per thread; shared
  // with the threads that began one, which drop theirs when they end.
  std::shared_ptr<Transactions> txns_;
};

// Stats as an object: {file_bytes, image_bytes, tail_bytes, tail_records,
// memory_bytes, collections: [{name, documents, bytes}]}.
Value stats_value(const Stats& stats);

// JSON text of a value: objects and lists as JSON, timestamps as ISO-8601
// strings, bytes as base64 strings, floats in the shortest form that reads
// back to the same double.
std::string to_json(const Value& v);
void append_json(std::string& out, const Value& v);

// Parses JSON text into a Value (objects, lists, numbers as Int when integral
// and in range, else Float). Errors name the byte offset. `root_depth`: the
// depth the text's value counts as, for the nesting limit (kMaxDepth): 1 for
// a document that stands in a list, -2 for a body whose values 2 levels down
// count from themselves.
Result<Value> parse_json(std::string_view text, int root_depth = 0);

}  // namespace kitfox
