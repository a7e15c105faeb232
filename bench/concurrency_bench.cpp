// kitfox_concurrency_bench: durable writes from many threads with readers
// beside them, kitfox against SQLite, in one process, on the same data.
//
//   0. setup: N documents {name: text, n: int} preloaded into both engines
//      (untimed); the file system of the data directory and the time of one
//      fdatasync there, for scale;
//   1. writers and readers: W writer threads (W = 1, 4, 16) each committing
//      one small document per statement, durably, while R reader threads
//      (default 2) read random preloaded documents by id, for S seconds;
//      commits/s, commit latency, reader latency p50/p99 and the worst
//      reader wait. The same with no reader (writers alone) and with no
//      writer (readers alone), for reference;
//   2. a batch of 1,000 puts (one transaction) from one writer while the
//      readers read: the batch's commit time and the readers' p99 and worst
//      wait during the batch, against their latency between batches;
//   3. three checkpoints while the readers read and one writer puts: the
//      readers' and the writer's worst wait during them;
//   4. an aggregate over every document, five times, while one writer lands
//      pairs of documents: the writer's worst wait during them, and every
//      answer checked to be a whole state; then the same with a read of
//      every document that looks each one up in a collection of 1,000
//      through a @hash index (SQLite: a join through an index);
//   5. (section 7 of the report) kitfox alone: the preload's checkpoint of a collection of V documents
//      with a 128-dim vector under an HNSW index (the whole table added
//      since no image), then three more, while the readers run `near`
//      top-10 and one writer puts documents with vectors: the readers' and
//      the writer's worst wait during them, then beside five aggregates and
//      five exact `near`s over every vector, and every put there afterwards;
//      then, reopened, the first put (the index's maps built) beside the readers;
//   6. (section 8) kitfox alone: N documents with @hash, @unique, @sorted and
//      @text indexes, which are built on first use; for each of five
//      statements the file reopened, the readers and a writer running, then
//      the statement that first needs an index: its time and their waits.
//
// kitfox: one Database (core/db.h) shared by every thread, opened with
// `sync = Always` (every write flushed before it is acknowledged; concurrent
// writers share one flush: group commit), and, for reference, a second file
// opened with `sync = Off`. SQLite: WAL, `synchronous=FULL` (every commit
// flushes the WAL), one connection per thread, busy_timeout set, writers
// retrying on SQLITE_BUSY.
//
// Usage: kitfox_concurrency_bench [--quick] [--rows N] [--seconds S] [--runs N]
//          [--readers N] [--writers LIST] [--batch N] [--batches N] [--no-off]
//          [--vectors V] [--only-vectors] [--no-first-use] [--only-first-use] [--dir PATH]
//          [--out PATH] [--keep] [--wait-quiet S]
// See bench/README.md.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "db.h"
#include "file.h"
#include "posix_file.h"

using kitfox::Database;
using kitfox::OpenOptions;
using kitfox::SyncMode;
using kitfox::Value;
using Clock = std::chrono::steady_clock;

namespace {

using namespace kitfox::benchutil;

// ---------------------------------------------------------------- helpers

std::string g_data_dir;  // removed by die() too, unless --keep

[[noreturn]] void die(const std::string& what) { die_removing("kitfox_concurrency_bench", g_data_dir, what); }

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}


std::string random_name(SplitMix& r) {
  static const char kAlpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(10 + r.below(11), ' ');
  for (auto& c : s) c = kAlpha[r.below(sizeof kAlpha - 1)];
  return s;
}

std::string mib_of(uint64_t b) { return fmt("%.1f MiB", (double)b / 1048576.0); }

uint64_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (uint64_t)st.st_size : 0;
}

// A latency in the unit that suits it.
std::string lat(double us) {
  if (us < 0) return "—";
  if (us >= 1e6) return fmt("%.2f s", us / 1e6);
  if (us >= 1e3) return fmt("%.2f ms", us / 1e3);
  return fmt("%.1f µs", us);
}
std::string ratio_of(double a, double b) { return b > 0 && a >= 0 ? fmt("%.2f", a / b) : std::string("—"); }

// ---------------------------------------------------------------- counting file system
//
// Forwards to the POSIX file layer and counts File::sync() calls (fdatasync):
// the number of flushes the engine made, so commits per flush shows how many
// writers shared one (group commit); and FileSystem::replace() calls, one per
// checkpoint (a new image renamed over the file). Uses only the public file
// interface.

struct SyncCounter {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> ns{0};        // time inside them
  std::atomic<uint64_t> replaces{0};  // FileSystem::replace: a checkpoint put a new image in place
};

class CountingFile final : public kitfox::File {
 public:
  CountingFile(std::unique_ptr<kitfox::File> f, SyncCounter* c) : f_(std::move(f)), c_(c) {}
  std::unique_ptr<kitfox::Mapping> map(uint64_t size) override { return f_->map(size); }
  uint64_t read_chunk() const override { return f_->read_chunk(); }
  bool fills_ahead() const override { return f_->fills_ahead(); }
  void write_behind(uint64_t offset, uint64_t n) override { f_->write_behind(offset, n); }
  kitfox::Status read(uint64_t off, void* buf, size_t n, size_t* got) override { return f_->read(off, buf, n, got); }
  kitfox::Status write(uint64_t off, const void* buf, size_t n) override { return f_->write(off, buf, n); }
  kitfox::Status sync() override {
    auto t0 = Clock::now();
    kitfox::Status st = f_->sync();
    c_->ns += (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    c_->calls++;
    return st;
  }
  kitfox::Result<uint64_t> size() override { return f_->size(); }
  kitfox::Status truncate(uint64_t size) override { return f_->truncate(size); }

 private:
  std::unique_ptr<kitfox::File> f_;
  SyncCounter* c_;
};

class CountingFs final : public kitfox::FileSystem {
 public:
  explicit CountingFs(kitfox::FileSystem& base) : base_(base) {}
  kitfox::Result<std::unique_ptr<kitfox::File>> open(const std::string& name, kitfox::OpenFlags flags) override {
    auto r = base_.open(name, flags);
    if (!r.is_ok()) return r.status();
    return std::unique_ptr<kitfox::File>(new CountingFile(std::move(r.value()), &counter));
  }
  kitfox::Result<bool> exists(const std::string& name) override { return base_.exists(name); }
  kitfox::Status remove(const std::string& name) override { return base_.remove(name); }
  kitfox::Status replace(const std::string& from, const std::string& to) override {
    counter.replaces++;
    return base_.replace(from, to);
  }
  bool atomic_replace() const override { return base_.atomic_replace(); }
  SyncCounter counter;

 private:
  kitfox::FileSystem& base_;
};

// ---------------------------------------------------------------- the preloaded data

struct Preload {
  std::vector<std::string> names;
  std::vector<int64_t> ns;
};

Preload make_preload(size_t rows) {
  Preload p;
  SplitMix r(42);
  for (size_t i = 0; i < rows; i++) {
    p.names.push_back(random_name(r));
    p.ns.push_back((int64_t)r.below(1000000000));
  }
  return p;
}

// ---------------------------------------------------------------- the two engines behind one interface

// One thread's handle: a kitfox Database is shared by all threads (one
// writer may hold a file; reads run in parallel, writes one at a time);
// SQLite gets one connection per thread.
class Session {
 public:
  virtual ~Session() = default;
  virtual void put(const std::string& name, int64_t n) = 0;  // one statement, one document, one commit
  virtual void get(int64_t id, int64_t expect_n) = 0;         // a point read, checked
  // One transaction of `names.size()` single-document puts.
  virtual void batch(const std::vector<std::string>& names, const std::vector<int64_t>& ns) = 0;
  // An aggregate over every document: their count and the sum of n.
  virtual void aggregate(int64_t* count, int64_t* sum) = 0;
  // Every document with n >= 0 looked up in c by its n (c's k, indexed):
  // the pairs found, and the sum of n + v over them.
  virtual void lookup(int64_t* pairs, int64_t* sum) = 0;
  uint64_t busy_retries = 0;  // SQLite: statements stepped again after SQLITE_BUSY
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::unique_ptr<Session> session() = 0;
  virtual uint64_t documents() = 0;
  virtual const SyncCounter* syncs() const { return nullptr; }  // kitfox only
  // kitfox: Database::checkpoint (a new image); SQLite: wal_checkpoint(TRUNCATE).
  virtual void checkpoint() = 0;
  // SQLite: how it runs the lookup's join (EXPLAIN QUERY PLAN).
  virtual std::string lookup_plan() { return ""; }
  std::string label;
};

// ---- kitfox

constexpr std::string_view kKfPut = "put t {name: $1, n: $2}";
constexpr std::string_view kKfGet = "get t where id = $1";
constexpr std::string_view kKfAggregate = "get t select count(*), sum(n)";
constexpr std::string_view kKfLookup = "get t select n where n >= 0 lookup c on k = n required select v";

class KitfoxSession final : public Session {
 public:
  explicit KitfoxSession(Database& db) : db_(db), put_(2), get_(1) {}
  void put(const std::string& name, int64_t n) override {
    put_[0] = Value::text(name);
    put_[1] = Value::integer(n);
    auto r = db_.query(kKfPut, put_);
    if (!r.is_ok()) die("kitfox put: " + r.status().to_string());
  }
  void get(int64_t id, int64_t expect_n) override {
    get_[0] = Value::integer(id);
    auto r = db_.query(kKfGet, get_);
    if (!r.is_ok()) die("kitfox get: " + r.status().to_string());
    if (r->rows.size() != 1) die(fmt("kitfox get: document %" PRId64 " not found", id));
    const Value* n = r->rows[0].get("n");
    if (!n || n->as_int() != expect_n) die(fmt("kitfox get: document %" PRId64 " has the wrong n", id));
  }
  void batch(const std::vector<std::string>& names, const std::vector<int64_t>& ns) override {
    std::vector<kitfox::BatchItem> items(names.size());
    for (size_t i = 0; i < names.size(); i++) {
      items[i].text = kKfPut;
      items[i].params = {Value::text(names[i]), Value::integer(ns[i])};
    }
    auto r = db_.batch(items);
    if (!r.is_ok()) die("kitfox batch: " + r.status().to_string());
  }
  void aggregate(int64_t* count, int64_t* sum) override {
    auto r = db_.query(kKfAggregate);
    if (!r.is_ok() || r->rows.size() != 1) die("kitfox aggregate: " + r.status().to_string());
    *count = r->rows[0].get("count(*)")->as_int();
    *sum = r->rows[0].get("sum(n)")->as_int();
  }
  void lookup(int64_t* pairs, int64_t* sum) override {
    auto r = db_.query(kKfLookup);
    if (!r.is_ok()) die("kitfox lookup: " + r.status().to_string());
    *pairs = *sum = 0;
    for (const Value& row : r->rows)
      for (const Value& child : row.get("c")->items()) {
        ++*pairs;
        *sum += row.get("n")->as_int() + child.get("v")->as_int();
      }
  }

 private:
  Database& db_;
  std::vector<Value> put_, get_;
};

class KitfoxTarget final : public Target {
 public:
  KitfoxTarget(kitfox::FileSystem& posix, const std::string& path, SyncMode mode, const std::string& name)
      : fs_(posix) {
    label = name;
    OpenOptions o;
    o.sync = mode;
    auto r = Database::open(fs_, path, o);
    if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
    db_ = std::move(r.value());
  }
  ~KitfoxTarget() override {
    if (db_) {
      auto st = db_->close();
      if (!st.is_ok()) die("kitfox close: " + st.to_string());
    }
  }
  std::unique_ptr<Session> session() override { return std::make_unique<KitfoxSession>(*db_); }
  uint64_t documents() override {
    auto r = db_->query("get t count");
    if (!r.is_ok()) die("kitfox count: " + r.status().to_string());
    return (uint64_t)r->rows.at(0).get("count")->as_int();
  }
  const SyncCounter* syncs() const override { return &fs_.counter; }
  void checkpoint() override {
    auto st = db_->checkpoint();
    if (!st.is_ok()) die("kitfox checkpoint: " + st.to_string());
  }

 private:
  CountingFs fs_;
  std::unique_ptr<Database> db_;
};

// ---- SQLite

void sq_exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string e = err ? err : "?";
    sqlite3_free(err);
    die(std::string("sqlite: ") + sql + ": " + e);
  }
}

sqlite3_stmt* sq_prep(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
    die(std::string("sqlite prepare: ") + sql + ": " + sqlite3_errmsg(db));
  return s;
}

constexpr int kBusyTimeoutMs = 5000;

// A connection as every thread opens it: WAL (a property of the file, set at
// creation), synchronous=FULL and busy_timeout (properties of the connection).
sqlite3* sq_connect(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
    die("sqlite open " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  sq_exec(db, "PRAGMA synchronous=FULL");
  return db;
}

constexpr const char* kSqJoin = "SELECT count(*), sum(t.n + c.v) FROM t JOIN c ON c.k = t.n WHERE t.n >= 0";

class SqliteSession final : public Session {
 public:
  explicit SqliteSession(const std::string& path) : db_(sq_connect(path)) {
    ins_ = sq_prep(db_, "INSERT INTO t (name, n) VALUES (?, ?)");
    sel_ = sq_prep(db_, "SELECT name, n FROM t WHERE id = ?");
    agg_ = sq_prep(db_, "SELECT count(*), sum(n) FROM t");
    join_ = sq_prep(db_, kSqJoin);
  }
  ~SqliteSession() override {
    sqlite3_finalize(ins_);
    sqlite3_finalize(sel_);
    sqlite3_finalize(agg_);
    sqlite3_finalize(join_);
    sqlite3_close(db_);
  }
  void put(const std::string& name, int64_t n) override {
    sqlite3_bind_text(ins_, 1, name.data(), (int)name.size(), SQLITE_STATIC);
    sqlite3_bind_int64(ins_, 2, n);
    step_done(ins_, "insert");
  }
  void get(int64_t id, int64_t expect_n) override {
    sqlite3_bind_int64(sel_, 1, id);
    int rc;
    while ((rc = sqlite3_step(sel_)) == SQLITE_BUSY) {
      busy_retries++;
      sqlite3_reset(sel_);
    }
    if (rc != SQLITE_ROW) die(fmt("sqlite select %" PRId64 ": %s", id, sqlite3_errmsg(db_)));
    volatile int len = sqlite3_column_bytes(sel_, 0);
    (void)len;
    if (sqlite3_column_int64(sel_, 1) != expect_n) die(fmt("sqlite select: row %" PRId64 " has the wrong n", id));
    sqlite3_reset(sel_);
  }
  void batch(const std::vector<std::string>& names, const std::vector<int64_t>& ns) override {
    // BEGIN IMMEDIATE takes the write lock up front (waiting through
    // busy_timeout, retried on SQLITE_BUSY), so the inserts cannot be refused.
    for (;;) {
      int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY) die(std::string("sqlite BEGIN IMMEDIATE: ") + sqlite3_errmsg(db_));
      busy_retries++;
    }
    for (size_t i = 0; i < names.size(); i++) {
      sqlite3_bind_text(ins_, 1, names[i].data(), (int)names[i].size(), SQLITE_STATIC);
      sqlite3_bind_int64(ins_, 2, ns[i]);
      if (sqlite3_step(ins_) != SQLITE_DONE) die(std::string("sqlite insert in batch: ") + sqlite3_errmsg(db_));
      sqlite3_reset(ins_);
    }
    for (;;) {
      int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY) die(std::string("sqlite COMMIT: ") + sqlite3_errmsg(db_));
      busy_retries++;
    }
  }
  void aggregate(int64_t* count, int64_t* sum) override { two_ints(agg_, "aggregate", count, sum); }
  void lookup(int64_t* pairs, int64_t* sum) override { two_ints(join_, "join", pairs, sum); }

 private:
  void step_done(sqlite3_stmt* s, const char* what) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_BUSY) {  // busy_timeout ran out: try again
      busy_retries++;
      sqlite3_reset(s);
    }
    if (rc != SQLITE_DONE) die(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
    sqlite3_reset(s);
  }
  // A statement answering one row of two ints, stepped again while busy.
  void two_ints(sqlite3_stmt* s, const char* what, int64_t* a, int64_t* b) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_BUSY) {
      busy_retries++;
      sqlite3_reset(s);
    }
    if (rc != SQLITE_ROW) die(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
    *a = sqlite3_column_int64(s, 0);
    *b = sqlite3_column_int64(s, 1);
    sqlite3_reset(s);
  }
  sqlite3* db_;
  sqlite3_stmt* ins_;
  sqlite3_stmt* sel_;
  sqlite3_stmt* agg_;
  sqlite3_stmt* join_;
};

class SqliteTarget final : public Target {
 public:
  explicit SqliteTarget(std::string path) : path_(std::move(path)) {
    label = "SQLite";
    main_ = sq_connect(path_);  // held open for the whole run, so the WAL index stays
  }
  ~SqliteTarget() override { sqlite3_close(main_); }
  void checkpoint() override { sq_exec(main_, "PRAGMA wal_checkpoint(TRUNCATE)"); }
  std::string lookup_plan() override {
    sqlite3_stmt* s = sq_prep(main_, (std::string("EXPLAIN QUERY PLAN ") + kSqJoin).c_str());
    std::string plan;
    while (sqlite3_step(s) == SQLITE_ROW)
      plan += (plan.empty() ? "" : "; ") + std::string((const char*)sqlite3_column_text(s, 3));
    sqlite3_finalize(s);
    return plan;
  }
  std::unique_ptr<Session> session() override { return std::make_unique<SqliteSession>(path_); }
  uint64_t documents() override {
    sqlite3_stmt* s = sq_prep(main_, "SELECT count(*) FROM t");
    if (sqlite3_step(s) != SQLITE_ROW) die("sqlite count failed");
    uint64_t n = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
  }

 private:
  std::string path_;
  sqlite3* main_;
};

// ---------------------------------------------------------------- workloads

// Threads start together: each says it is ready, then waits for `go`.
struct StartLine {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point t0, t_end;
  void arrive() {
    ready++;
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  // Called by the main thread once every thread is ready.
  void start(int threads, double seconds) {
    while (ready.load() < threads) std::this_thread::yield();
    t0 = Clock::now();
    t_end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    go.store(true, std::memory_order_release);
  }
};

struct Mixed {
  int writers = 0, readers = 0;
  double seconds = 0;
  uint64_t commits = 0;         // puts that finished inside the window
  uint64_t puts_total = 0;      // every put made (the window's and the few finishing after it)
  std::vector<double> commit_us, read_us;
  uint64_t reads = 0;
  uint64_t flushes = 0;         // kitfox: File::sync() calls during the window
  uint64_t checkpoints = 0;     // kitfox: images written (automatic checkpoints) during the run
  double flush_ms_mean = 0;
  uint64_t busy_retries = 0;
  double others = 0;            // CPUs other processes used during the run
  double commits_per_s() const { return seconds > 0 ? (double)commits / seconds : 0; }
  double reads_per_s() const { return seconds > 0 ? (double)reads / seconds : 0; }
};

// W writers putting one document per statement and R readers reading random
// preloaded documents by id, all for `seconds`.
Mixed run_mixed(Target& t, const Preload& data, int writers, int readers, double seconds, uint64_t seed) {
  Mixed m;
  m.writers = writers;
  m.readers = readers;
  m.seconds = seconds;
  const int n = writers + readers;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < n; i++) sessions.push_back(t.session());
  std::vector<std::vector<double>> lat(n);
  std::vector<uint64_t> counted(n, 0), total(n, 0);
  StartLine line;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      Session& s = *sessions[i];
      SplitMix r(seed * 1000 + (uint64_t)i);
      std::vector<double>& out = lat[i];
      out.reserve(i < writers ? 1 << 16 : 1 << 20);
      const bool writer = i < writers;
      // The documents a writer puts, made before the start.
      std::vector<std::string> names;
      if (writer)
        for (int k = 0; k < 4096; k++) names.push_back(random_name(r));
      line.arrive();
      const Clock::time_point end = line.t_end;
      uint64_t k = 0;
      for (;;) {
        auto a = Clock::now();
        if (a >= end) break;
        if (writer) {
          s.put(names[k & 4095], (int64_t)r.below(1000000000));
        } else {
          int64_t id = 1 + (int64_t)r.below(data.ns.size());
          s.get(id, data.ns[(size_t)id - 1]);
        }
        auto b = Clock::now();
        k++;
        // Every call that started inside the window is timed, the one that
        // ends after it too (a wait that outlasts the run still counts);
        // only calls that ended inside it count towards commits/s and reads/s.
        out.push_back(us_between(a, b));
        if (b <= end) counted[i]++;
      }
      total[i] = k;
    });
  }
  const SyncCounter* sc = t.syncs();
  uint64_t c0 = 0, ns0 = 0, r0 = sc ? sc->replaces.load() : 0;
  OtherCpu other;
  line.start(n, seconds);
  if (sc) c0 = sc->calls.load(), ns0 = sc->ns.load();
  std::this_thread::sleep_until(line.t_end);
  m.others = other.cores();
  if (sc) {
    m.flushes = sc->calls.load() - c0;
    uint64_t ns = sc->ns.load() - ns0;
    m.flush_ms_mean = m.flushes ? (double)ns / 1e6 / (double)m.flushes : 0;
  }
  for (auto& th : threads) th.join();
  if (sc) m.checkpoints = sc->replaces.load() - r0;
  for (int i = 0; i < n; i++) {
    if (i < writers) {
      m.commits += counted[i];
      m.puts_total += total[i];
      m.commit_us.insert(m.commit_us.end(), lat[i].begin(), lat[i].end());
    } else {
      m.reads += counted[i];
      m.read_us.insert(m.read_us.end(), lat[i].begin(), lat[i].end());
    }
    m.busy_retries += sessions[i]->busy_retries;
  }
  return m;
}

struct Batches {
  size_t size = 0;
  std::vector<double> batch_ms;          // commit time of each batch (the call, flush included)
  std::vector<double> during_us;         // reads that overlapped a batch
  std::vector<double> between_us;        // reads that did not
  double during_worst_us = 0;
  uint64_t busy_retries = 0;
  double others = 0;
};

// R readers read throughout; the main thread, as the one writer, lands
// `count` batches of `size` puts with `gap_s` of quiet before, between and
// after them.
Batches run_batches(Target& t, const Preload& data, int readers, size_t count, size_t size, double gap_s,
                    uint64_t seed) {
  Batches out;
  out.size = size;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < readers; i++) sessions.push_back(t.session());
  auto writer = t.session();
  struct Read {
    double start_us, dur_us;  // start since t0
  };
  std::vector<std::vector<Read>> reads(readers);
  std::atomic<bool> stop{false};
  StartLine line;
  std::vector<std::thread> threads;
  for (int i = 0; i < readers; i++) {
    threads.emplace_back([&, i] {
      Session& s = *sessions[i];
      SplitMix r(seed * 1000 + (uint64_t)i);
      reads[i].reserve(1 << 20);
      line.arrive();
      const Clock::time_point t0 = line.t0;
      while (!stop.load(std::memory_order_relaxed)) {
        int64_t id = 1 + (int64_t)r.below(data.ns.size());
        auto a = Clock::now();
        s.get(id, data.ns[(size_t)id - 1]);
        auto b = Clock::now();
        reads[i].push_back({us_between(t0, a), us_between(a, b)});
      }
    });
  }
  // The batches' documents, made before the start.
  SplitMix r(seed);
  std::vector<std::vector<std::string>> names(count);
  std::vector<std::vector<int64_t>> ns(count);
  for (size_t b = 0; b < count; b++)
    for (size_t k = 0; k < size; k++) {
      names[b].push_back(random_name(r));
      ns[b].push_back((int64_t)r.below(1000000000));
    }
  OtherCpu other;
  line.start(readers, 1e6);
  const Clock::time_point t0 = line.t0;
  std::vector<std::pair<double, double>> windows;  // [start, end] of each batch, µs since t0
  auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s));
  for (size_t b = 0; b < count; b++) {
    std::this_thread::sleep_for(gap);
    auto a = Clock::now();
    writer->batch(names[b], ns[b]);
    auto e = Clock::now();
    out.batch_ms.push_back(us_between(a, e) / 1e3);
    windows.push_back({us_between(t0, a), us_between(t0, e)});
  }
  std::this_thread::sleep_for(gap);
  out.others = other.cores();
  stop = true;
  for (auto& th : threads) th.join();
  for (int i = 0; i < readers; i++) {
    for (const Read& x : reads[i]) {
      bool during = false;
      for (auto& w : windows)
        if (x.start_us <= w.second && x.start_us + x.dur_us >= w.first) {
          during = true;
          break;
        }
      (during ? out.during_us : out.between_us).push_back(x.dur_us);
      if (during) out.during_worst_us = std::max(out.during_worst_us, x.dur_us);
    }
    out.busy_retries += sessions[i]->busy_retries;
  }
  out.busy_retries += writer->busy_retries;
  return out;
}

// R readers read by id and one writer puts (a document a statement)
// throughout; the main thread checkpoints `count` times with `gap_s` of
// quiet around each. The readers' and the writer's waits that overlapped a
// checkpoint, against the rest.
struct Checkpoints {
  std::vector<double> checkpoint_ms;
  double read_worst_us = 0, read_worst_between_us = 0;
  double write_worst_us = 0, write_worst_between_us = 0;
  uint64_t reads_during = 0, writes_during = 0;
  uint64_t puts = 0;  // the writer's, every one acknowledged
};

// The threads of a checkpoint run: R readers each calling read(i, rng) and
// one writer calling write(rng) until the main thread, having run
// checkpoint() `count` times with `gap_s` of quiet around each, stops them.
Checkpoints beside_checkpoints(int readers, size_t count, double gap_s, uint64_t seed,
                               const std::function<void(int, SplitMix&)>& read, const std::function<void(SplitMix&)>& write,
                               const std::function<void()>& checkpoint) {
  Checkpoints out;
  struct Op {
    double start_us, dur_us;
  };
  std::vector<std::vector<Op>> ops(readers + 1);
  std::atomic<bool> stop{false};
  StartLine line;
  std::vector<std::thread> threads;
  for (int i = 0; i <= readers; i++) {
    threads.emplace_back([&, i] {
      SplitMix r(seed * 1000 + (uint64_t)i);
      ops[i].reserve(1 << 20);
      line.arrive();
      const Clock::time_point t0 = line.t0;
      while (!stop.load(std::memory_order_relaxed)) {
        auto a = Clock::now();
        if (i < readers) read(i, r);
        else write(r);
        auto b = Clock::now();
        ops[i].push_back({us_between(t0, a), us_between(a, b)});
      }
    });
  }
  line.start(readers + 1, 1e6);
  const Clock::time_point t0 = line.t0;
  std::vector<std::pair<double, double>> windows;
  auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s));
  for (size_t k = 0; k < count; k++) {
    std::this_thread::sleep_for(gap);
    auto a = Clock::now();
    checkpoint();
    auto e = Clock::now();
    out.checkpoint_ms.push_back(us_between(a, e) / 1e3);
    windows.push_back({us_between(t0, a), us_between(t0, e)});
  }
  std::this_thread::sleep_for(gap);
  stop = true;
  for (auto& th : threads) th.join();
  out.puts = ops[readers].size();
  for (int i = 0; i <= readers; i++)
    for (const Op& x : ops[i]) {
      bool during = false;
      for (auto& w : windows)
        if (x.start_us <= w.second && x.start_us + x.dur_us >= w.first) {
          during = true;
          break;
        }
      double& worst = i < readers ? (during ? out.read_worst_us : out.read_worst_between_us)
                                  : (during ? out.write_worst_us : out.write_worst_between_us);
      worst = std::max(worst, x.dur_us);
      if (during) (i < readers ? out.reads_during : out.writes_during)++;
    }
  return out;
}

Checkpoints run_checkpoints(Target& t, const Preload& data, int readers, size_t count, double gap_s, uint64_t seed) {
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i <= readers; i++) sessions.push_back(t.session());  // the last one writes
  return beside_checkpoints(
      readers, count, gap_s, seed,
      [&](int i, SplitMix& r) {
        int64_t id = 1 + (int64_t)r.below(data.ns.size());
        sessions[i]->get(id, data.ns[(size_t)id - 1]);
      },
      [&](SplitMix& r) { sessions[readers]->put(random_name(r), (int64_t)r.below(1000000000)); },
      [&] { t.checkpoint(); });
}

// One writer lands pairs of documents (n = x and n = -x, one transaction
// each) throughout; the main thread runs an aggregate over every document
// `count` times with `gap_s` of quiet around each, after one with no writer
// (what it answers alone). Each answer must be a whole state: the sum as
// alone, and the count off by whole pairs. The writer's waits that overlapped
// an aggregate, against the rest.
struct Aggregates {
  double alone_ms = 0;
  std::vector<double> aggregate_ms;
  double write_worst_us = 0, write_worst_between_us = 0;
  uint64_t writes_during = 0;
  uint64_t puts = 0;  // documents the writer put, every one acknowledged
};

// `lookup`: the read is Session::lookup, whose answer the writer's documents
// (n below 1,000,000, no key of c) leave as it was alone.
Aggregates run_aggregates(Target& t, size_t count, double gap_s, uint64_t seed, bool lookup = false) {
  Aggregates out;
  auto reader = t.session();
  auto writer = t.session();
  auto read = [&](int64_t* c, int64_t* sum) { lookup ? reader->lookup(c, sum) : reader->aggregate(c, sum); };
  int64_t count0, sum0;
  auto a0 = Clock::now();
  read(&count0, &sum0);
  out.alone_ms = us_between(a0, Clock::now()) / 1e3;
  struct Op {
    double start_us, dur_us;
  };
  std::vector<Op> ops;
  ops.reserve(1 << 20);
  std::atomic<bool> stop{false};
  StartLine line;
  std::thread th([&] {
    SplitMix r(seed);
    std::vector<std::string> names(2);
    std::vector<int64_t> ns(2);
    line.arrive();
    const Clock::time_point t0 = line.t0;
    while (!stop.load(std::memory_order_relaxed)) {
      names[0] = random_name(r);
      names[1] = random_name(r);
      ns[0] = (int64_t)r.below(1000000);
      ns[1] = -ns[0];
      auto a = Clock::now();
      writer->batch(names, ns);
      auto b = Clock::now();
      ops.push_back({us_between(t0, a), us_between(a, b)});
    }
  });
  line.start(1, 1e6);
  const Clock::time_point t0 = line.t0;
  std::vector<std::pair<double, double>> windows;
  auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s));
  for (size_t k = 0; k < count; k++) {
    std::this_thread::sleep_for(gap);
    int64_t c, sum;
    auto a = Clock::now();
    read(&c, &sum);
    auto e = Clock::now();
    if (sum != sum0 || c < count0 || (c - count0) % 2 != 0 || (lookup && c != count0))
      die(fmt("%s: a long read beside the writer answered count %" PRId64 ", sum %" PRId64 " (alone: %" PRId64
              ", %" PRId64 "): not a whole state",
              t.label.c_str(), c, sum, count0, sum0));
    out.aggregate_ms.push_back(us_between(a, e) / 1e3);
    windows.push_back({us_between(t0, a), us_between(t0, e)});
  }
  std::this_thread::sleep_for(gap);
  stop = true;
  th.join();
  out.puts = 2 * ops.size();
  for (const Op& x : ops) {
    bool during = false;
    for (auto& w : windows)
      if (x.start_us <= w.second && x.start_us + x.dur_us >= w.first) {
        during = true;
        break;
      }
    double& worst = during ? out.write_worst_us : out.write_worst_between_us;
    worst = std::max(worst, x.dur_us);
    if (during) out.writes_during++;
  }
  return out;
}

// kitfox alone: a collection `v (n int, e vector<128> @hnsw(l2))` of `rows`
// documents (random vectors, fixed seed), checkpointed once so that its
// documents refer into the image's table, in `sync = always`; then R readers
// run `near` top-10 and one writer puts a document with a vector a
// statement, while the main thread checkpoints `count` times with `gap_s`
// of quiet around each. The waits that overlapped a checkpoint against the
// rest; afterwards the documents are counted: every put is there.
struct VectorCheckpoints : Checkpoints {
  size_t rows = 0;
  double preload_s = 0;
  uint64_t file_bytes = 0;
  // Then five aggregates over every document (`checkpoint_ms` their times)
  // beside the writer alone, and five exact nears over every vector; then,
  // reopened, the first put beside the readers alone. Before all that, the
  // preload's checkpoint (every vector added since no image) beside the
  // readers and the writer.
  Checkpoints aggregates, exacts, first_put, preload_checkpoint;
};

// `rows` documents into collection `coll`, 1,000 a statement, document k's
// fields set by fill(k, doc).
void put_rows(Database& db, const std::string& coll, size_t rows, const std::function<void(size_t, Value&)>& fill) {
  for (size_t i = 0; i < rows; i += 1000) {
    std::vector<Value> docs;
    for (size_t k = i; k < std::min(rows, i + 1000); k++) {
      Value d = Value::object();
      fill(k, d);
      docs.push_back(std::move(d));
    }
    auto q = db.query("put " + coll + " $1", {Value::list(std::move(docs))});
    if (!q.is_ok()) die("kitfox preload of " + coll + ": " + q.status().to_string());
  }
}

constexpr uint32_t kVecDim = 128;

Value random_vector(SplitMix& r) {
  std::vector<float> v(kVecDim);
  for (float& x : v) x = (float)((double)r.below(2000001) / 1000000.0 - 1.0);
  return Value::vector(std::move(v));
}

VectorCheckpoints run_vector_checkpoints(kitfox::FileSystem& fs, const std::string& path, size_t rows, int readers,
                                         size_t count, double gap_s, uint64_t seed) {
  VectorCheckpoints out;
  out.rows = rows;
  OpenOptions o;
  o.sync = SyncMode::Always;
  o.auto_checkpoint = false;  // the main thread checkpoints
  auto r = Database::open(fs, path, o);
  if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
  Database& db = *r.value();
  if (!db.query("create collection v (n int, e vector<128> @hnsw(l2, m=16, ef_construction=200))").is_ok())
    die("kitfox create v failed");
  SplitMix gen(seed);
  auto p0 = Clock::now();
  put_rows(db, "v", rows, [&](size_t k, Value& d) {
    d.append("n", Value::integer((int64_t)k));
    d.append("e", random_vector(gen));
  });
  out.preload_s = us_between(p0, Clock::now()) / 1e6;

  int64_t next_n = (int64_t)rows;
  auto put = [&](SplitMix& r) {
    auto q = db.query("put v {n: $1, e: $2}", {Value::integer(next_n++), random_vector(r)});
    if (!q.is_ok()) die("kitfox vector put: " + q.status().to_string());
  };
  auto near = [&](int, SplitMix& r) {
    auto q = db.query("get v select n near e $1 limit 10", {random_vector(r)});
    if (!q.is_ok() || q->rows.size() != 10) die("kitfox near: " + q.status().to_string());
  };
  auto checkpoint = [&] {
    if (!db.checkpoint().is_ok()) die("kitfox vector checkpoint failed");
  };
  // The preload's checkpoint: its whole table added since no image.
  out.preload_checkpoint = beside_checkpoints(readers, 1, gap_s, seed + 6, near, put, checkpoint);
  Checkpoints run = beside_checkpoints(readers, count, gap_s, seed, near, put, checkpoint);
  static_cast<Checkpoints&>(out) = std::move(run);
  out.aggregates = beside_checkpoints(
      0, 5, 0.2, seed + 1, [](int, SplitMix&) {},
      put,
      [&] {
        auto q = db.query("get v select count(*), sum(n)");
        if (!q.is_ok() || q->rows.size() != 1) die("kitfox vector aggregate: " + q.status().to_string());
      });
  out.exacts = beside_checkpoints(
      0, 5, 0.2, seed + 2, [](int, SplitMix&) {},
      put,
      [&] {
        SplitMix r(seed + 3);
        auto q = db.query("get v select n near e $1 exact limit 10", {random_vector(r)});
        if (!q.is_ok() || q->rows.size() != 10) die("kitfox exact near: " + q.status().to_string());
      });
  // Every put is there.
  auto c = db.query("get v count");
  if (!c.is_ok() ||
      (uint64_t)c->rows[0].get("count")->as_int() !=
          rows + out.preload_checkpoint.puts + out.puts + out.aggregates.puts + out.exacts.puts)
    die("kitfox vector section: documents missing after the checkpoints");
  // Checkpointed, closed and opened again: the index as loaded, its
  // document maps not built; then one put beside the readers.
  if (!db.checkpoint().is_ok() || !db.close().is_ok()) die("kitfox vector close failed");
  auto again = Database::open(fs, path, o);
  if (!again.is_ok()) die("kitfox reopen " + path + ": " + again.status().to_string());
  Database& back = *again.value();
  SplitMix first(seed + 4);
  out.first_put = beside_checkpoints(
      readers, 1, 0.3, seed + 5,
      [&](int, SplitMix& r) {
        auto q = back.query("get v select n near e $1 limit 10", {random_vector(r)});
        if (!q.is_ok() || q->rows.size() != 10) die("kitfox near: " + q.status().to_string());
      },
      [](SplitMix&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); },  // no other writer
      [&] {
        auto q = back.query("put v {n: $1, e: $2}", {Value::integer(next_n++), random_vector(first)});
        if (!q.is_ok()) die("kitfox vector put: " + q.status().to_string());
      });
  auto c2 = back.query("get v count");
  if (!c2.is_ok() || (uint64_t)c2->rows[0].get("count")->as_int() != rows + out.preload_checkpoint.puts + out.puts +
                                                                         out.aggregates.puts + out.exacts.puts + 1)
    die("kitfox vector section: documents missing after the reopen");
  if (!back.close().is_ok()) die("kitfox vector close failed");
  out.file_bytes = size_of(path);
  return out;
}

std::string vector_section(const VectorCheckpoints& v, int readers) {
  std::string md;
  md += fmt("### 7. Checkpoints of a collection with an HNSW index, beside %d `near` readers and a writer (kitfox "
            "`sync = always`)\n\n",
            readers);
  md += fmt("%s documents `{n: int, e: vector<128>}` under `@hnsw(l2, m=16, ef_construction=200)`, preloaded in "
            "%.1f s (1,000 a statement) and checkpointed once, so that their documents refer into the image's "
            "table; then %d readers each run `get v select n near e $1 limit 10` with random vectors and one writer "
            "puts `{n, e}` a statement, while %zu checkpoints run 0.3 s apart. Every put was there afterwards. File "
            "at the end: %s.\n\n",
            grouped((double)v.rows).c_str(), v.preload_s, readers, v.checkpoint_ms.size(), mib_of(v.file_bytes).c_str());
  const Checkpoints& p = v.preload_checkpoint;
  md += "The preload's checkpoint (every vector of the table added since no image) ran beside the same readers "
        "and writer:\n\n";
  md += "| the preload's checkpoint | readers' worst wait during | between | the writer's worst wait during | between | "
        "writes during |\n";
  md += "| ---: | ---: | ---: | ---: | ---: | ---: |\n";
  md += fmt("| %s | %s | %s | %s | %s | %s |\n\n", lat(median(p.checkpoint_ms) * 1e3).c_str(), lat(p.read_worst_us).c_str(),
            lat(p.read_worst_between_us).c_str(), lat(p.write_worst_us).c_str(), lat(p.write_worst_between_us).c_str(),
            grouped((double)p.writes_during).c_str());
  std::string runs;
  for (double x : v.checkpoint_ms) runs += (runs.empty() ? "" : ", ") + lat(x * 1e3);
  md += "| checkpoints | readers' worst wait during | between | reads during | the writer's worst wait during | between | "
        "writes during | writes in all |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  md += fmt("| %s | %s | %s | %s | %s | %s | %s | %s |\n\n", runs.c_str(), lat(v.read_worst_us).c_str(),
            lat(v.read_worst_between_us).c_str(), grouped((double)v.reads_during).c_str(), lat(v.write_worst_us).c_str(),
            lat(v.write_worst_between_us).c_str(), grouped((double)v.writes_during).c_str(),
            grouped((double)v.puts).c_str());
  // A statement run five times beside the writer alone: its median, the writer's waits.
  auto beside_writer = [&](const char* what, const char* column, const Checkpoints& c) {
    md += fmt("Then %s five times, 0.2 s apart, beside the writer alone:\n\n", what);
    md += fmt("| %s (median) | the writer's worst wait during | between | writes during |\n", column);
    md += "| ---: | ---: | ---: | ---: |\n";
    md += fmt("| %s | %s | %s | %s |\n\n", lat(median(c.checkpoint_ms) * 1e3).c_str(), lat(c.write_worst_us).c_str(),
              lat(c.write_worst_between_us).c_str(), grouped((double)c.writes_during).c_str());
  };
  beside_writer("`get v select count(*), sum(n)`", "aggregate", v.aggregates);
  beside_writer("`get v select n near e $1 exact limit 10` (every vector compared)", "exact near", v.exacts);
  const Checkpoints& f = v.first_put;
  md += "Then checkpointed, closed and opened again (the index as loaded: its document maps not built, a few "
        "writes' lookups scan instead), the readers alone for 0.3 s, then one put `{n, e}`:\n\n";
  md += "| the first put | readers' worst wait during | between | reads during |\n";
  md += "| ---: | ---: | ---: | ---: |\n";
  md += fmt("| %s | %s | %s | %s |\n\n", lat(median(f.checkpoint_ms) * 1e3).c_str(), lat(f.read_worst_us).c_str(),
            lat(f.read_worst_between_us).c_str(), grouped((double)f.reads_during).c_str());
  return md;
}

// Section 8: kitfox alone. A collection whose text and secondary indexes
// are built on first use (they are not in the file): `rows` documents, then
// for each statement below the file reopened, R readers reading by id and one
// writer putting into another collection, 0.3 s, then the statement (the
// first that needs its index), timed, and 0.3 s after.
struct FirstUse {
  size_t rows = 0;
  double load_s = 0;
  std::vector<std::pair<std::string, Checkpoints>> cases;  // the statement, and the waits beside it
};

FirstUse run_first_use(kitfox::FileSystem& fs, const std::string& path, size_t rows, int readers, uint64_t seed) {
  FirstUse out;
  out.rows = rows;
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.auto_checkpoint = false;
  {
    auto r = Database::open(fs, path, o);
    if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
    Database& db = *r.value();
    if (!db.query("create collection x (k text @hash, u int @unique, n int @sorted, body text @text)").is_ok() ||
        !db.query("create collection w (n int)").is_ok())
      die("kitfox create x failed");
    SplitMix gen(seed);
    auto p0 = Clock::now();
    put_rows(db, "x", rows, [&](size_t k, Value& d) {
      d.append("k", Value::text("key" + std::to_string(k % 50000)));
      d.append("u", Value::integer((int64_t)k));
      d.append("n", Value::integer((int64_t)gen.below(1000000000)));
      d.append("body", Value::text(random_name(gen) + " " + random_name(gen) + " w" + std::to_string(k % 997)));
    });
    if (!db.checkpoint().is_ok() || !db.close().is_ok()) die("kitfox first-use preload: checkpoint failed");
    out.load_s = us_between(p0, Clock::now()) / 1e6;
  }
  const std::vector<std::string> statements = {
      "put x {k: \"new\", u: -1, n: 1, body: \"fresh\"}",  // @unique checked
      "get x where k = \"key7\" limit 10",                   // @hash
      "get x where n > 999000000 order n limit 10",            // @sorted
      "get x match body \"w5\" limit 10",                    // @text
      "set x {n: 0} where k = \"key9\"",                     // @hash, then @unique
  };
  for (size_t s = 0; s < statements.size(); s++) {
    auto r = Database::open(fs, path, o);
    if (!r.is_ok()) die("kitfox reopen " + path + ": " + r.status().to_string());
    Database& db = *r.value();
    const uint64_t docs = rows + 1;  // the first case's put, kept
    Checkpoints c = beside_checkpoints(
        readers, 1, 0.3, seed + 10 + s,
        [&](int, SplitMix& g) {
          auto q = db.query("get x where id = $1", {Value::integer(1 + (int64_t)g.below(rows))});
          if (!q.is_ok() || q->rows.size() != 1) die("kitfox first-use read: " + q.status().to_string());
        },
        [&](SplitMix& g) {
          auto q = db.query("put w {n: $1}", {Value::integer((int64_t)g.below(1000))});
          if (!q.is_ok()) die("kitfox first-use write: " + q.status().to_string());
        },
        [&] {
          auto q = db.query(statements[s]);
          if (!q.is_ok()) die("kitfox first use of `" + statements[s] + "`: " + q.status().to_string());
        });
    auto n = db.query("get x count");
    if (!n.is_ok() || (uint64_t)n->rows[0].get("count")->as_int() != docs) die("kitfox first-use: documents missing");
    if (!db.close().is_ok()) die("kitfox first-use close failed");
    out.cases.push_back({statements[s], std::move(c)});
  }
  return out;
}

std::string first_use_section(const FirstUse& f, int readers) {
  std::string md = "### 8. The first statement through each index after a reopen (kitfox alone)\n\n";
  md += fmt("%s documents `{k: text @hash, u: int @unique, n: int @sorted, body: text @text}` (the indexes are built "
            "on first use: they are not in the file), loaded in %.1f s (1,000 a statement, `sync = off`) and "
            "checkpointed. For each statement the file is opened again, %d readers read by id and one writer puts "
            "`{n}` into another collection for 0.3 s, then the statement runs (the first to need its index), then "
            "0.3 s more.\n\n",
            grouped((double)f.rows).c_str(), f.load_s, readers);
  md += "| statement | its time | readers' worst wait during | between | the writer's worst wait during | between | "
        "writes during |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& [st, c] : f.cases)
    md += fmt("| `%s` | %s | %s | %s | %s | %s | %s |\n", st.c_str(), lat(median(c.checkpoint_ms) * 1e3).c_str(),
              lat(c.read_worst_us).c_str(), lat(c.read_worst_between_us).c_str(), lat(c.write_worst_us).c_str(),
              lat(c.write_worst_between_us).c_str(), grouped((double)c.writes_during).c_str());
  return md + "\n";
}

// ---------------------------------------------------------------- options

struct Options {
  size_t rows = 100000;
  double seconds = 3;
  size_t runs = 3;
  int readers = 2;
  std::vector<int> writers{1, 4, 16};
  size_t batch = 1000;
  size_t batches = 5;
  bool off = true;
  size_t vectors = 100000;  // documents of the vector section (0: skipped)
  bool only_vectors = false;
  bool first_use = true;  // section 8
  bool only_first_use = false;
  bool quick = false;
  bool keep = false;
  double wait_quiet = 0;  // seconds
  std::string dir = "/tmp", out;
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: kitfox_concurrency_bench [--quick] [--rows N] [--seconds S] [--runs N] [--readers N]\n"
               "                                [--writers LIST] [--batch N] [--batches N] [--no-off]\n"
               "                                [--dir PATH] [--out PATH] [--keep] [--wait-quiet S]\n"
               "  --quick         10,000 preloaded documents, 1 s per run, 3 batches (default 100,000, 3 s, 5)\n"
               "  --rows N        documents preloaded (the readers read these), overrides --quick\n"
               "  --seconds S     length of each timed run (overrides --quick)\n"
               "  --runs N        timed runs per configuration, median reported (default 3)\n"
               "  --readers N     reader threads beside the writers (default 2)\n"
               "  --writers LIST  writer thread counts, comma-separated (default 1,4,16)\n"
               "  --batch N       puts in the one-transaction batch (default 1,000)\n"
               "  --batches N     batches landed while the readers read (overrides --quick)\n"
               "  --no-off        skip the kitfox `sync = Off` reference\n"
               "  --vectors V     documents of section 7, the vector collection (default 100,000; 10,000 with --quick; 0 skips it)\n"
               "  --only-vectors  run section 7 alone\n"
               "  --no-first-use  skip section 8 (the first statement through each index after a reopen)\n"
               "  --only-first-use  run section 8 alone (over --rows documents)\n"
               "  --dir PATH      where the fresh data directory is made (default /tmp, on disk here); removed at the end\n"
               "  --out PATH      also write the Markdown report to PATH\n"
               "  --keep          keep the data directory\n"
               "  --wait-quiet S  before each timed run, wait up to S seconds until other processes use < 0.15 CPUs\n");
}

size_t parse_count(const std::string& flag, const char* s) {
  size_t v;
  if (!parse_positive(s, &v)) die(flag + " needs a positive integer, got '" + s + "'");
  return v;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool rows_given = false, seconds_given = false, batches_given = false, vectors_given = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--rows") { o.rows = parse_count(a, value()); rows_given = true; }
    else if (a == "--seconds") {
      const char* s = value();
      char* end = nullptr;
      o.seconds = std::strtod(s, &end);
      if (!end || *end || !(o.seconds > 0)) die("--seconds needs a positive number, got '" + std::string(s) + "'");
      seconds_given = true;
    }
    else if (a == "--runs") o.runs = parse_count(a, value());
    else if (a == "--readers") o.readers = (int)parse_count(a, value());
    else if (a == "--writers") {
      o.writers.clear();
      std::string list = value();
      size_t p = 0;
      while (p <= list.size()) {
        size_t c = list.find(',', p);
        std::string part = list.substr(p, c == std::string::npos ? std::string::npos : c - p);
        o.writers.push_back((int)parse_count("--writers", part.c_str()));
        if (c == std::string::npos) break;
        p = c + 1;
      }
    }
    else if (a == "--batch") o.batch = parse_count(a, value());
    else if (a == "--batches") { o.batches = parse_count(a, value()); batches_given = true; }
    else if (a == "--no-off") o.off = false;
    else if (a == "--vectors") {  // 0 skips section 7
      const char* v = value();
      o.vectors = std::string(v) == "0" ? 0 : parse_count(a, v);
      vectors_given = true;
    }
    else if (a == "--only-vectors") o.only_vectors = true;
    else if (a == "--no-first-use") o.first_use = false;
    else if (a == "--only-first-use") o.only_first_use = true;
    else if (a == "--dir") o.dir = value();
    else if (a == "--out") o.out = value();
    else if (a == "--keep") o.keep = true;
    else if (a == "--wait-quiet") {
      const char* s = value();
      char* end = nullptr;
      o.wait_quiet = std::strtod(s, &end);
      if (!end || *end || !(o.wait_quiet > 0)) die("--wait-quiet needs a positive number of seconds, got '" + std::string(s) + "'");
    }
    else if (a == "-h" || a == "--help") { usage(stdout); std::exit(0); }
    else { usage(stderr); die("unknown argument '" + a + "'"); }
  }
  if (o.quick && !rows_given) o.rows = 10000;
  if (o.quick && !seconds_given) o.seconds = 1;
  if (o.quick && !batches_given) o.batches = 3;
  if (o.quick && !vectors_given) o.vectors = 10000;
  return o;
}

// One fdatasync of a small append in the data directory, `n` times: what a
// durable commit costs the disk at the least.
std::vector<double> probe_fdatasync(const std::string& dir, int n) {
  std::string path = dir + "/fdatasync-probe";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create " + path + ": " + std::strerror(errno));
  char buf[64];
  std::memset(buf, 'x', sizeof buf);
  std::vector<double> us;
  for (int i = 0; i < n; i++) {
    if (::pwrite(fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf) != (ssize_t)sizeof buf) die("probe write failed");
    auto a = Clock::now();
    if (::fdatasync(fd) != 0) die(std::string("fdatasync: ") + std::strerror(errno));
    us.push_back(us_between(a, Clock::now()));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return us;
}

// ---------------------------------------------------------------- summaries

struct Summary {  // one configuration over its runs
  std::vector<Mixed> runs;
  double commits_per_s() const {
    std::vector<double> v;
    for (auto& r : runs) v.push_back(r.commits_per_s());
    return median(v);
  }
  double reads_per_s() const {
    std::vector<double> v;
    for (auto& r : runs) v.push_back(r.reads_per_s());
    return median(v);
  }
  // The median over the runs of each run's quantile.
  // -1 (shown as a dash) when a run has no sample.
  double read_q(double q) const {
    std::vector<double> v;
    for (auto r : runs) {
      if (r.read_us.empty()) return -1;
      v.push_back(nearest_rank(r.read_us, q));
    }
    return median(v);
  }
  double commit_q(double q) const {
    std::vector<double> v;
    for (auto r : runs) {
      if (r.commit_us.empty()) return -1;
      v.push_back(nearest_rank(r.commit_us, q));
    }
    return median(v);
  }
  double others_max() const {
    double w = 0;
    for (auto& r : runs) w = std::max(w, r.others);
    return w;
  }
  double read_worst() const {
    double w = 0;
    for (auto& r : runs)
      for (double x : r.read_us) w = std::max(w, x);
    return w;
  }
  double commit_worst() const {
    double w = 0;
    for (auto& r : runs)
      for (double x : r.commit_us) w = std::max(w, x);
    return w;
  }
  double per_flush() const {
    std::vector<double> v;
    for (auto& r : runs)
      if (r.flushes) v.push_back((double)r.commits / (double)r.flushes);
    return v.empty() ? -1 : median(v);
  }
  double flushes_per_s() const {
    std::vector<double> v;
    for (auto& r : runs) v.push_back((double)r.flushes / r.seconds);
    return median(v);
  }
  double flush_ms() const {
    std::vector<double> v;
    for (auto& r : runs)
      if (r.flushes) v.push_back(r.flush_ms_mean);
    return v.empty() ? -1 : median(v);
  }
  uint64_t busy() const {
    uint64_t b = 0;
    for (auto& r : runs) b += r.busy_retries;
    return b;
  }
  uint64_t checkpoints() const {
    uint64_t b = 0;
    for (auto& r : runs) b += r.checkpoints;
    return b;
  }
  // The worst read of the runs without a checkpoint (-1 if every run had one).
  double read_worst_no_checkpoint() const {
    double w = -1;
    for (auto& r : runs)
      if (!r.checkpoints)
        for (double x : r.read_us) w = std::max(w, x);
    return w;
  }
  std::string commit_runs() const {
    std::string s;
    for (auto& r : runs) s += (s.empty() ? "" : ", ") + grouped(r.commits_per_s());
    return s;
  }
};

}  // namespace

// ---------------------------------------------------------------- main

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  std::string command = "kitfox_concurrency_bench";
  for (int i = 1; i < argc; i++) command += std::string(" ") + argv[i];
  const std::string started = utc_stamp();

  std::string tmpl = opt.dir + "/kitfox-cbench-XXXXXX";
  std::vector<char> tbuf(tmpl.begin(), tmpl.end());
  tbuf.push_back('\0');
  if (!::mkdtemp(tbuf.data())) die("cannot make a directory under " + opt.dir + ": " + std::strerror(errno));
  const std::string dir = tbuf.data();
  if (!opt.keep) g_data_dir = dir;
  bool in_memory = false;
  const std::string fs_text = filesystem_of(dir, &in_memory);
  const std::string kf_always = dir + "/always.kfdb", kf_off = dir + "/off.kfdb", sq_path = dir + "/sqlite.db";
  auto posix = kitfox::make_posix_file_system();

  progress(fmt("kitfox_concurrency_bench: %s preloaded documents, writers %s, %d readers, %g s x %zu runs, data in %s (%s)",
               grouped((double)opt.rows).c_str(),
               [&] {
                 std::string s;
                 for (int w : opt.writers) s += (s.empty() ? "" : ",") + std::to_string(w);
                 return s;
               }().c_str(),
               opt.readers, opt.seconds, opt.runs, dir.c_str(), fs_text.c_str()));
  if (in_memory) progress("  warning: the data directory is in memory: flushes cost nothing there; use --dir on a disk");

  // -------- 0. setup (untimed)
  std::vector<double> probe = probe_fdatasync(dir, 500);
  const double fsync_p50 = nearest_rank(probe, 0.5), fsync_p99 = nearest_rank(probe, 0.99);
  progress(fmt("  fdatasync of a 64-byte append: p50 %s, p99 %s", lat(fsync_p50).c_str(), lat(fsync_p99).c_str()));

  auto emit = [&](const std::string& md) {
    if (!emit_report(md, opt.out)) die("cannot write " + opt.out);
    if (opt.keep) {
      progress("  data kept in " + dir);
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  auto vectors = [&] {
    progress(fmt("  checkpoints of %s documents with an HNSW index beside near readers and a writer",
                 grouped((double)opt.vectors).c_str()));
    if (opt.wait_quiet > 0) wait_for_quiet(opt.wait_quiet);
    VectorCheckpoints v = run_vector_checkpoints(*posix, dir + "/vectors.kfdb", opt.vectors, opt.readers, 3, 0.3, 4242);
    progress(fmt("    checkpoint %s (median), reads' worst during %s (between %s), the writer's worst during %s (between %s)",
                 lat(median(v.checkpoint_ms) * 1e3).c_str(), lat(v.read_worst_us).c_str(),
                 lat(v.read_worst_between_us).c_str(), lat(v.write_worst_us).c_str(),
                 lat(v.write_worst_between_us).c_str()));
    progress(fmt("    aggregate %s (median), the writer's worst during %s (between %s)",
                 lat(median(v.aggregates.checkpoint_ms) * 1e3).c_str(), lat(v.aggregates.write_worst_us).c_str(),
                 lat(v.aggregates.write_worst_between_us).c_str()));
    progress(fmt("    exact near %s (median), the writer's worst during %s (between %s)",
                 lat(median(v.exacts.checkpoint_ms) * 1e3).c_str(), lat(v.exacts.write_worst_us).c_str(),
                 lat(v.exacts.write_worst_between_us).c_str()));
    return v;
  };
  auto first_use = [&] {
    progress(fmt("  the first statement through each index after a reopen, %s documents", grouped((double)opt.rows).c_str()));
    if (opt.wait_quiet > 0) wait_for_quiet(opt.wait_quiet);
    FirstUse f = run_first_use(*posix, dir + "/first-use.kfdb", opt.rows, opt.readers, 5151);
    for (const auto& [st, c] : f.cases)
      progress(fmt("    %-48s %s, readers' worst during %s (between %s), the writer's %s (between %s)", st.c_str(),
                   lat(median(c.checkpoint_ms) * 1e3).c_str(), lat(c.read_worst_us).c_str(),
                   lat(c.read_worst_between_us).c_str(), lat(c.write_worst_us).c_str(),
                   lat(c.write_worst_between_us).c_str()));
    return f;
  };
  if (opt.only_first_use) {
    FirstUse f = first_use();
    std::string md = fmt("## Concurrency: the first statement through each index after a reopen (%s)\n\n", started.c_str());
    md += "### Machine\n\n| | |\n| --- | --- |\n" + machine_rows();
    md += "| data directory | " + opt.dir + " (a fresh directory inside it): " + fs_text + " |\n\n";
    md += "Command: `" + command + "`\n\n" + first_use_section(f, opt.readers);
    emit(md);
    return 0;
  }
  if (opt.only_vectors) {
    if (!opt.vectors) die("--only-vectors needs --vectors above 0");
    VectorCheckpoints v = vectors();
    std::string md = fmt("## Concurrency: checkpoints of a vector collection (%s)\n\n", started.c_str());
    md += "### Machine\n\n| | |\n| --- | --- |\n" + machine_rows();
    md += "| data directory | " + opt.dir + " (a fresh directory inside it): " + fs_text + " |\n";
    md += fmt("| fdatasync of a 64-byte append there | p50 %s, p99 %s (500 calls, one thread) |\n\n",
              lat(fsync_p50).c_str(), lat(fsync_p99).c_str());
    md += "Command: `" + command + "`\n\n" + vector_section(v, opt.readers);
    emit(md);
    return 0;
  }

  Preload data = make_preload(opt.rows);
  // The keys of c, which section 6's lookups find: 1,000 distinct n of the
  // preloaded documents, none below 1,000,000 (the writer's there).
  std::vector<int64_t> keys;
  {
    std::set<int64_t> seen;
    const size_t step = std::max<size_t>(1, opt.rows / 1000);
    for (size_t i = 0; i < opt.rows && keys.size() < 1000; i += step)
      if (data.ns[i] >= 1000000 && seen.insert(data.ns[i]).second) keys.push_back(data.ns[i]);
  }
  {
    OpenOptions o;
    o.sync = SyncMode::Off;
    auto r = Database::open(*posix, kf_always, o);
    if (!r.is_ok()) die("kitfox open: " + r.status().to_string());
    auto& db = *r.value();
    if (!db.query("create collection t (name text, n int)").is_ok()) die("kitfox create failed");
    for (size_t i = 0; i < opt.rows; i += 1000) {
      std::vector<Value> docs;
      for (size_t k = i; k < std::min(opt.rows, i + 1000); k++) {
        Value d = Value::object();
        d.append("name", Value::text(data.names[k]));
        d.append("n", Value::integer(data.ns[k]));
        docs.push_back(std::move(d));
      }
      auto p = db.query("put t $1", {Value::list(std::move(docs))});
      if (!p.is_ok()) die("kitfox preload: " + p.status().to_string());
    }
    if (!db.query("create collection c (k int @hash, v int)").is_ok()) die("kitfox create failed");
    std::vector<Value> kids;
    for (size_t i = 0; i < keys.size(); i++) {
      Value d = Value::object();
      d.append("k", Value::integer(keys[i]));
      d.append("v", Value::integer((int64_t)i + 1));
      kids.push_back(std::move(d));
    }
    if (!db.query("put c $1", {Value::list(std::move(kids))}).is_ok()) die("kitfox preload of c failed");
    if (!db.checkpoint().is_ok() || !db.close().is_ok()) die("kitfox preload: checkpoint/close failed");
  }
  std::filesystem::copy_file(kf_always, kf_off);
  {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(sq_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      die("sqlite create failed");
    sq_exec(db, "PRAGMA journal_mode=WAL");
    sq_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)");
    sq_exec(db, "BEGIN");
    sqlite3_stmt* ins = sq_prep(db, "INSERT INTO t (id, name, n) VALUES (?, ?, ?)");
    for (size_t i = 0; i < opt.rows; i++) {
      sqlite3_bind_int64(ins, 1, (int64_t)i + 1);
      sqlite3_bind_text(ins, 2, data.names[i].data(), (int)data.names[i].size(), SQLITE_STATIC);
      sqlite3_bind_int64(ins, 3, data.ns[i]);
      if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite preload: ") + sqlite3_errmsg(db));
      sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    sq_exec(db, "CREATE TABLE c (id INTEGER PRIMARY KEY, k INTEGER, v INTEGER)");
    sq_exec(db, "CREATE INDEX c_k ON c (k)");
    ins = sq_prep(db, "INSERT INTO c (k, v) VALUES (?, ?)");
    for (size_t i = 0; i < keys.size(); i++) {
      sqlite3_bind_int64(ins, 1, keys[i]);
      sqlite3_bind_int64(ins, 2, (int64_t)i + 1);
      if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite preload of c: ") + sqlite3_errmsg(db));
      sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    sq_exec(db, "COMMIT");
    sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    sqlite3_close(db);
  }
  progress("  preloaded");

  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(std::make_unique<KitfoxTarget>(*posix, kf_always, SyncMode::Always, "kitfox `sync = always`"));
  targets.push_back(std::make_unique<SqliteTarget>(sq_path));
  if (opt.off) targets.push_back(std::make_unique<KitfoxTarget>(*posix, kf_off, SyncMode::Off, "kitfox `sync = off`"));
  const size_t T = targets.size();
  std::vector<uint64_t> expected(T, opt.rows);  // documents each should hold at the end

  // Warm-up: a short run of every shape, untimed.
  progress("  warm-up");
  for (size_t e = 0; e < T; e++) {
    for (int w : opt.writers) {
      Mixed m = run_mixed(*targets[e], data, w, opt.readers, 0.2, 7);
      expected[e] += m.puts_total;
    }
    run_batches(*targets[e], data, opt.readers, 1, opt.batch, 0.05, 8);
    expected[e] += opt.batch;
  }

  const size_t W = opt.writers.size();
  std::vector<Summary> idle(T);                                    // readers alone
  std::vector<std::vector<Summary>> mixed(T, std::vector<Summary>(W));  // writers + readers
  std::vector<std::vector<Summary>> alone(T, std::vector<Summary>(W));  // writers alone
  uint64_t seed = 100;
  auto quiet = [&] {
    if (opt.wait_quiet > 0) wait_for_quiet(opt.wait_quiet);
  };
  // Runs interleave the engines and shapes, so slow drift of the machine
  // (other jobs, the disk) spreads over all of them alike.
  for (size_t run = 0; run < opt.runs; run++) {
    progress(fmt("  run %zu of %zu", run + 1, opt.runs));
    for (size_t e = 0; e < T; e++) {
      quiet();
      idle[e].runs.push_back(run_mixed(*targets[e], data, 0, opt.readers, opt.seconds, seed++));
    }
    for (size_t wi = 0; wi < W; wi++) {
      for (size_t e = 0; e < T; e++) {
        quiet();
        Mixed m = run_mixed(*targets[e], data, opt.writers[wi], opt.readers, opt.seconds, seed++);
        expected[e] += m.puts_total;
        progress(fmt("    %-24s %2d writers + %d readers: %s commits/s, reads p50 %s p99 %s worst %s; others %.2f CPUs",
                     targets[e]->label.c_str(), opt.writers[wi], opt.readers, grouped(m.commits_per_s()).c_str(),
                     lat(nearest_rank(m.read_us, 0.5)).c_str(), lat(nearest_rank(m.read_us, 0.99)).c_str(),
                     lat(nearest_rank(m.read_us, 1.0)).c_str(), m.others));
        mixed[e][wi].runs.push_back(std::move(m));
      }
      for (size_t e = 0; e < T; e++) {
        quiet();
        Mixed m = run_mixed(*targets[e], data, opt.writers[wi], 0, opt.seconds, seed++);
        expected[e] += m.puts_total;
        progress(fmt("    %-24s %2d writers alone: %s commits/s; others %.2f CPUs", targets[e]->label.c_str(),
                     opt.writers[wi], grouped(m.commits_per_s()).c_str(), m.others));
        alone[e][wi].runs.push_back(std::move(m));
      }
    }
  }

  progress("  batches");
  const double gap_s = 0.2;
  std::vector<Batches> batches(T);
  for (size_t e = 0; e < T; e++) {
    quiet();
    batches[e] = run_batches(*targets[e], data, opt.readers, opt.batches, opt.batch, gap_s, 900 + e);
    expected[e] += opt.batches * opt.batch;
    progress(fmt("    %-24s batch %s (median), reads during p99 %s worst %s, between p99 %s", targets[e]->label.c_str(),
                 lat(median(batches[e].batch_ms) * 1e3).c_str(), lat(nearest_rank(batches[e].during_us, 0.99)).c_str(),
                 lat(batches[e].during_worst_us).c_str(), lat(nearest_rank(batches[e].between_us, 0.99)).c_str()));
  }

  progress("  checkpoints beside readers and a writer");
  std::vector<Checkpoints> cps(T);
  for (size_t e = 0; e < T; e++) {
    quiet();
    cps[e] = run_checkpoints(*targets[e], data, opt.readers, 3, 0.3, 1700 + e);
    expected[e] += cps[e].puts;
    progress(fmt("    %-24s checkpoint %s (median), reads' worst during %s (between %s), the writer's worst during %s (between %s)",
                 targets[e]->label.c_str(), lat(median(cps[e].checkpoint_ms) * 1e3).c_str(),
                 lat(cps[e].read_worst_us).c_str(), lat(cps[e].read_worst_between_us).c_str(),
                 lat(cps[e].write_worst_us).c_str(), lat(cps[e].write_worst_between_us).c_str()));
  }

  progress("  aggregates beside a writer");
  std::vector<Aggregates> aggs(T), joins(T);
  const std::string sqlite_join_plan = targets[1]->lookup_plan();  // SQLite's
  for (bool lookup : {false, true}) {
    std::vector<Aggregates>& v = lookup ? joins : aggs;
    for (size_t e = 0; e < T; e++) {
      quiet();
      v[e] = run_aggregates(*targets[e], 5, 0.2, (lookup ? 2200 : 2100) + e, lookup);
      expected[e] += v[e].puts;
      progress(fmt("    %-24s %s %s (median; alone %s), the writer's worst during %s (between %s)",
                   targets[e]->label.c_str(), lookup ? "lookup" : "aggregate", lat(median(v[e].aggregate_ms) * 1e3).c_str(),
                   lat(v[e].alone_ms * 1e3).c_str(), lat(v[e].write_worst_us).c_str(),
                   lat(v[e].write_worst_between_us).c_str()));
    }
  }

  VectorCheckpoints vecs;
  if (opt.vectors) vecs = vectors();
  FirstUse firsts;
  if (opt.first_use) firsts = first_use();

  // Every put landed, none twice.
  for (size_t e = 0; e < T; e++) {
    uint64_t have = targets[e]->documents();
    if (have != expected[e])
      die(fmt("%s holds %" PRIu64 " documents, expected %" PRIu64, targets[e]->label.c_str(), have, expected[e]));
  }
  const uint64_t kf_file = size_of(kf_always), sq_file = size_of(sq_path), sq_wal = size_of(sq_path + "-wal");
  std::vector<std::string> targets_labels;
  for (auto& t : targets) targets_labels.push_back(t->label);
  targets.clear();  // closes

  // -------- report
  const size_t KA = 0, SQ = 1, KO = 2;
  const bool has_off = T > 2;
  auto engine_label = [&](size_t e) { return e == KA ? "kitfox `sync = always`" : e == SQ ? "SQLite" : "kitfox `sync = off`"; };
  std::string md;
  md += fmt("## Concurrency: kitfox vs SQLite, durable writes with readers beside them (%s)\n\n", started.c_str());
  md += "### Machine\n\n| | |\n| --- | --- |\n";
  md += machine_rows();
  md += std::string("| SQLite | ") + sqlite3_libversion() + " (system libsqlite3, threading mode " +
        std::to_string(sqlite3_threadsafe()) + ") |\n";
  md += "| data directory | " + opt.dir + " (a fresh directory inside it): " + fs_text + " |\n";
  md += fmt("| fdatasync of a 64-byte append there | p50 %s, p99 %s (500 calls, one thread) |\n\n", lat(fsync_p50).c_str(),
            lat(fsync_p99).c_str());

  md += "### Durability settings\n\n";
  md += "| engine | setting | what an acknowledged write means |\n| --- | --- | --- |\n";
  md += "| kitfox | `OpenOptions.sync = SyncMode::Always` | the write's record is in the file and `fdatasync` returned "
        "before `query` returns; writers waiting at the same moment share one `fdatasync` (group commit, the flush "
        "outside the write lock) |\n";
  md += fmt("| SQLite | `journal_mode=WAL`, `synchronous=FULL`, `busy_timeout=%d` | the commit's frames are in the WAL and "
            "it was `fdatasync`ed before `sqlite3_step` returns; one commit, one WAL sync; default `wal_autocheckpoint` "
            "(1,000 pages) |\n",
            kBusyTimeoutMs);
  if (has_off)
    md += "| kitfox (reference) | `OpenOptions.sync = SyncMode::Off` | in the file (page cache), flushed only on "
          "checkpoint and close: not durable, shown for the cost of the flush |\n";
  md += "\n";

  md += "### Method\n\n";
  md += fmt("- Data: %s documents `{name: text, n: int}` preloaded (fixed seed) into each engine before any timing "
            "(kitfox: `put t $1` of 1,000 documents, checkpointed, closed; the `sync = off` file is a copy; SQLite: "
            "table `t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)`, one transaction, WAL checkpointed).\n",
            grouped((double)opt.rows).c_str());
  md += "- One process. kitfox: one `Database` shared by every thread (`Database::open` of the file once; a second "
        "open of the same file is refused by its lock). SQLite: one connection per thread (opened before the start, "
        "statements prepared), each with `synchronous=FULL` and `busy_timeout`; SQLite's default threading mode.\n";
  md += fmt("- Writers: each puts one document per statement, `put t {name: $1, n: $2}` "
            "(`Database::query` with two parameters) / prepared `INSERT INTO t (name, n) VALUES (?, ?)` in "
            "autocommit (retried if `sqlite3_step` still returns `SQLITE_BUSY` after the busy timeout). "
            "Readers: `get t where id = $1` / prepared `SELECT name, n FROM t WHERE id = ?` (autocommit) of a "
            "random preloaded id, every result checked against the data; each reader loops without pause. All "
            "threads start together and start calls for %g s. Each call is timed alone (steady_clock); every call "
            "started in that window is in the latency figures, including one that ends after it (so a wait that "
            "outlasts the run is not lost); commits/s and reads/s count the calls that ended inside it.\n",
            opt.seconds);
  md += fmt("- Each configuration — writers (%s) with %d readers, the same writers alone, and the readers alone "
            "(0 writers) — runs %zu times, the engines and shapes interleaved; a short untimed run of each shape "
            "(and one batch) warms up first. Commits/s and reader p50/p99 are the medians over the runs of each "
            "run's figure (p50/p99 by nearest rank over the run's calls); the worst wait is the longest single "
            "call in any run.\n",
            [&] {
              std::string s;
              for (int w : opt.writers) s += (s.empty() ? "" : ", ") + std::to_string(w);
              return s;
            }().c_str(),
            opt.readers, opt.runs);
  md += "- kitfox flushes: the benchmark opens kitfox through a `FileSystem` that forwards to the POSIX one and counts "
        "`File::sync()` calls (each one `fdatasync`); commits per flush above 1 is group commit at work.\n";
  md += fmt("- Batch: %zu times, with %d readers reading throughout, the main thread lands one transaction of %s "
            "single-document puts (kitfox: `Database::batch` of %s `put t {name: $1, n: $2}` items, one record, one "
            "flush; SQLite: `BEGIN IMMEDIATE`, %s prepared INSERTs, `COMMIT`), with %.0f ms of reads only before, "
            "between and after the batches. A read counts as \"during\" when its call overlapped a batch's call.\n",
            opt.batches, opt.readers, grouped((double)opt.batch).c_str(), grouped((double)opt.batch).c_str(),
            grouped((double)opt.batch).c_str(), gap_s * 1e3);
  md += fmt("- At the end each engine's document count is checked against the puts made (%s and %s documents).\n",
            grouped((double)expected[KA]).c_str(), grouped((double)expected[SQ]).c_str());
  md += fmt("- The machine has %ld logical CPUs: with more threads than that, threads take turns, so a latency "
            "includes time spent waiting for a CPU, for both engines alike.\n",
            ::sysconf(_SC_NPROCESSORS_ONLN));
  md += "- Command: `" + command + "`.\n\n";

  md += fmt("### 1. Durable commits with %d readers beside the writers\n\n", opt.readers);
  md += "| writers | kitfox commits/s | flushes/s | commits per flush | kitfox commit p50 / p99 | SQLite commits/s | "
        "SQLite commit p50 / p99 | SQLite busy retries | kitfox / SQLite commits/s |";
  if (has_off) md += " kitfox `sync = off` commits/s |";
  md += "\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  if (has_off) md += " ---: |";
  md += "\n";
  for (size_t wi = 0; wi < W; wi++) {
    const Summary &k = mixed[KA][wi], &s = mixed[SQ][wi];
    md += fmt("| %d | %s | %s | %.1f | %s / %s | %s | %s / %s | %" PRIu64 " | %s |", opt.writers[wi],
              grouped(k.commits_per_s()).c_str(), grouped(k.flushes_per_s()).c_str(), k.per_flush(),
              lat(k.commit_q(0.5)).c_str(), lat(k.commit_q(0.99)).c_str(), grouped(s.commits_per_s()).c_str(),
              lat(s.commit_q(0.5)).c_str(), lat(s.commit_q(0.99)).c_str(), s.busy(),
              ratio_of(k.commits_per_s(), s.commits_per_s()).c_str());
    if (has_off) md += fmt(" %s |", grouped(mixed[KO][wi].commits_per_s()).c_str());
    md += "\n";
  }
  md += "\nRatios above 1 mean kitfox commits more per second. ";
  md += "Runs (commits/s): ";
  for (size_t wi = 0; wi < W; wi++)
    md += fmt("%s%d writers: kitfox %s; SQLite %s", wi ? "; " : "", opt.writers[wi], mixed[KA][wi].commit_runs().c_str(),
              mixed[SQ][wi].commit_runs().c_str());
  md += fmt(". kitfox's mean `fdatasync` under load: %s.\n\n", [&] {
    std::string s;
    for (size_t wi = 0; wi < W; wi++)
      s += (s.empty() ? "" : ", ") + fmt("%.3f ms (%d writers)", mixed[KA][wi].flush_ms(), opt.writers[wi]);
    return s;
  }().c_str());

  md += fmt("### 2. Reader latency beside the writers (%d readers)\n\n", opt.readers);
  md += "| writers | kitfox reads/s | kitfox p50 | kitfox p99 | kitfox p99.9 | kitfox worst wait | SQLite reads/s | "
        "SQLite p50 | SQLite p99 | SQLite p99.9 | SQLite worst wait | kitfox / SQLite p99 | kitfox / SQLite worst |";
  if (has_off) md += " kitfox `off` p99 | kitfox `off` worst |";
  md += "\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  if (has_off) md += " ---: | ---: |";
  md += "\n";
  auto read_row = [&](const std::string& label, const Summary& k, const Summary& s, const Summary* o) {
    md += fmt("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", label.c_str(),
              grouped(k.reads_per_s()).c_str(), lat(k.read_q(0.5)).c_str(), lat(k.read_q(0.99)).c_str(),
              lat(k.read_q(0.999)).c_str(), lat(k.read_worst()).c_str(), grouped(s.reads_per_s()).c_str(),
              lat(s.read_q(0.5)).c_str(), lat(s.read_q(0.99)).c_str(), lat(s.read_q(0.999)).c_str(),
              lat(s.read_worst()).c_str(), ratio_of(k.read_q(0.99), s.read_q(0.99)).c_str(),
              ratio_of(k.read_worst(), s.read_worst()).c_str());
    if (o) md += fmt(" %s | %s |", lat(o->read_q(0.99)).c_str(), lat(o->read_worst()).c_str());
    md += "\n";
  };
  read_row("0 (readers alone)", idle[KA], idle[SQ], has_off ? &idle[KO] : nullptr);
  for (size_t wi = 0; wi < W; wi++)
    read_row(std::to_string(opt.writers[wi]), mixed[KA][wi], mixed[SQ][wi], has_off ? &mixed[KO][wi] : nullptr);
  md += "\nRatios above 1 mean kitfox's readers wait longer.\n\n";
  {
    // A kitfox checkpoint writes a new image while holding the write lock,
    // so readers wait for it: say where that happened.
    std::string cp;
    for (size_t e = 0; e < T; e++) {
      if (e == SQ) continue;
      auto one = [&](const std::string& what, const Summary& x) {
        if (!x.checkpoints()) return;
        cp += fmt("%s%s, %s: %" PRIu64 " in %zu runs (worst read wait in the runs without one: %s)", cp.empty() ? "" : "; ",
                  targets_labels[e].c_str(), what.c_str(), x.checkpoints(), x.runs.size(),
                  lat(x.read_worst_no_checkpoint()).c_str());
      };
      one("readers alone", idle[e]);
      for (size_t wi = 0; wi < W; wi++) one(fmt("%d writers + readers", opt.writers[wi]), mixed[e][wi]);
      for (size_t wi = 0; wi < W; wi++) one(fmt("%d writers alone (table 3)", opt.writers[wi]), alone[e][wi]);
    }
    md += "Automatic checkpoints (kitfox writes a new image of the file when its write log outgrows the image, on "
          "its checkpointer thread: readers and writers go on beside it) during the runs: " +
          (cp.empty() ? std::string("none") : cp) + ".\n\n";
  }

  md += "### 3. Writers alone (no reader), for reference\n\n";
  md += "| writers | kitfox commits/s | commits per flush | kitfox mean `fdatasync` | kitfox commit p50 / p99 | "
        "SQLite commits/s | SQLite commit p50 / p99 | SQLite busy retries | kitfox / SQLite |";
  if (has_off) md += " kitfox `sync = off` commits/s |";
  md += "\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  if (has_off) md += " ---: |";
  md += "\n";
  for (size_t wi = 0; wi < W; wi++) {
    const Summary &k = alone[KA][wi], &s = alone[SQ][wi];
    md += fmt("| %d | %s | %.1f | %s | %s / %s | %s | %s / %s | %" PRIu64 " | %s |", opt.writers[wi],
              grouped(k.commits_per_s()).c_str(), k.per_flush(), lat(k.flush_ms() * 1e3).c_str(),
              lat(k.commit_q(0.5)).c_str(), lat(k.commit_q(0.99)).c_str(), grouped(s.commits_per_s()).c_str(),
              lat(s.commit_q(0.5)).c_str(), lat(s.commit_q(0.99)).c_str(), s.busy(),
              ratio_of(k.commits_per_s(), s.commits_per_s()).c_str());
    if (has_off) md += fmt(" %s |", grouped(alone[KO][wi].commits_per_s()).c_str());
    md += "\n";
  }
  md += "\n";

  md += fmt("### 4. Readers while a batch of %s puts lands\n\n", grouped((double)opt.batch).c_str());
  md += "| engine | batch commit (median) | batch runs | reads during the batches | p50 during | p99 during | worst "
        "wait during | p99 between batches | busy retries |\n";
  md += "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t e = 0; e < T; e++) {
    Batches& b = batches[e];
    std::string runs;
    for (double x : b.batch_ms) runs += (runs.empty() ? "" : ", ") + lat(x * 1e3);
    md += fmt("| %s | %s | %s | %s | %s | %s | %s | %s | %" PRIu64 " |\n", engine_label(e),
              lat(median(b.batch_ms) * 1e3).c_str(), runs.c_str(), grouped((double)b.during_us.size()).c_str(),
              lat(nearest_rank(b.during_us, 0.5)).c_str(), lat(nearest_rank(b.during_us, 0.99)).c_str(),
              lat(b.during_worst_us).c_str(), lat(nearest_rank(b.between_us, 0.99)).c_str(), b.busy_retries);
  }
  md += fmt("\nkitfox / SQLite during the batches: p99 %s, worst wait %s, batch commit time %s (above 1: kitfox "
            "slower).\n\n",
            ratio_of(nearest_rank(batches[KA].during_us, 0.99), nearest_rank(batches[SQ].during_us, 0.99)).c_str(),
            ratio_of(batches[KA].during_worst_us, batches[SQ].during_worst_us).c_str(),
            ratio_of(median(batches[KA].batch_ms), median(batches[SQ].batch_ms)).c_str());
  md += fmt("Files at the end: kitfox `sync = always` %s; SQLite %s + WAL %s.\n\n", mib_of(kf_file).c_str(),
            mib_of(sq_file).c_str(), mib_of(sq_wal).c_str());

  md += fmt("### 5. Checkpoints beside %d readers and a writer\n\n", opt.readers);
  md += "Three checkpoints, 0.3 s apart, while the readers read by id and one writer puts a document a statement "
        "(in the target's sync mode). kitfox: `Database::checkpoint()`, the same work as an automatic one: a new image "
        "of every document, built from a pin of the database and written and flushed beside the readers and the "
        "writer, the writes that landed meanwhile copied after it, then the switch (docs/storage.md). SQLite: `PRAGMA wal_checkpoint(TRUNCATE)` (it copies the WAL into the database file; "
        "its readers never wait for it, and it waits for its writers).\n\n";
  md += "| engine | checkpoint (median) | reads during | readers' worst wait during | between | writes during | the writer's worst wait during | between |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t e = 0; e < T; e++) {
    Checkpoints& c = cps[e];
    md += fmt("| %s | %s | %s | %s | %s | %s | %s | %s |\n",
              engine_label(e),
              lat(median(c.checkpoint_ms) * 1e3).c_str(), grouped((double)c.reads_during).c_str(),
              lat(c.read_worst_us).c_str(), lat(c.read_worst_between_us).c_str(), grouped((double)c.writes_during).c_str(),
              lat(c.write_worst_us).c_str(), lat(c.write_worst_between_us).c_str());
  }
  md += "\n";

  md += "### 6. Long reads beside a writer: an aggregate over every document, a lookup through an index\n\n";
  md += "One writer lands pairs of documents in one transaction each (n = x and n = -x, in the target's sync mode) "
        "while the main thread runs `get t select count(*), sum(n)` / `SELECT count(*), sum(n) FROM t` five times, "
        "0.2 s apart, after one run with no writer. Every answer is checked to be a whole state (the sum as alone, "
        "the count off by whole pairs). kitfox runs the aggregate pinned: it takes the collection's id index (its blocks shared, not copied) under "
        "the shared lock, then reads with no lock held.\n\n";
  auto long_reads = [&](const char* what, std::vector<Aggregates>& v) {
    md += fmt("| engine | %s (median) | alone | writes during | the writer's worst wait during | between |\n", what);
    md += "| --- | ---: | ---: | ---: | ---: | ---: |\n";
    for (size_t e = 0; e < T; e++) {
      Aggregates& a = v[e];
      md += fmt("| %s | %s | %s | %s | %s | %s |\n", engine_label(e), lat(median(a.aggregate_ms) * 1e3).c_str(),
                lat(a.alone_ms * 1e3).c_str(), grouped((double)a.writes_during).c_str(),
                lat(a.write_worst_us).c_str(), lat(a.write_worst_between_us).c_str());
    }
    md += "\n";
  };
  long_reads("aggregate", aggs);
  md += fmt("Then the same with a read of every document that looks each one up in `c`, %s documents whose int `k` "
            "is the `n` of one of them (`@hash`; SQLite: an index on `c (k)`): `get t select n where n >= 0 lookup c "
            "on k = n required select v` / `SELECT count(*), sum(t.n + c.v) FROM t JOIN c ON c.k = t.n WHERE t.n >= "
            "0`, each answer checked to be the one it gave alone (the writer's documents find no key in `c`). kitfox "
            "runs it pinned, asking the live @hash index under the shared lock, a key at a time, while `c` is not "
            "written (it is not here). SQLite's plan: %s.\n\n",
            grouped((double)keys.size()).c_str(), sqlite_join_plan.c_str());
  long_reads("lookup", joins);
  if (opt.vectors) md += vector_section(vecs, opt.readers);
  if (opt.first_use) md += first_use_section(firsts, opt.readers);

  // Conditions: what other processes used during the timed runs.
  md += "### Conditions\n\n";
  {
    std::vector<double> all;
    std::string busy_runs;
    auto note = [&](const std::string& what, double c) {
      all.push_back(c);
      if (c > 0.25) busy_runs += (busy_runs.empty() ? "" : "; ") + fmt("%s %.2f", what.c_str(), c);
    };
    for (size_t e = 0; e < T; e++) {
      const std::string& L = targets_labels[e];
      for (auto& r : idle[e].runs) note(L + ", readers alone", r.others);
      for (size_t wi = 0; wi < W; wi++) {
        for (auto& r : mixed[e][wi].runs) note(fmt("%s, %d writers + readers", L.c_str(), opt.writers[wi]), r.others);
        for (auto& r : alone[e][wi].runs) note(fmt("%s, %d writers alone", L.c_str(), opt.writers[wi]), r.others);
      }
      note(L + ", batches", batches[e].others);
    }
    std::vector<double> sorted = all;
    md += fmt("CPUs used by other processes during each timed run (`/proc/stat` busy time minus this process's "
              "`getrusage`, over the run's wall time): median %.2f, max %.2f over %zu runs.%s%s\n",
              median(all), nearest_rank(sorted, 1.0), all.size(),
              opt.wait_quiet > 0 ? fmt(" Before each run the program waited (up to %g s) until other processes used "
                                       "< 0.15 CPUs over 2 s.", opt.wait_quiet).c_str() : "",
              busy_runs.empty() ? " No run had other processes above 0.25 CPUs."
                                : (" Runs with other processes above 0.25 CPUs: " + busy_runs + ".").c_str());
  }

  emit(md);
  return 0;
}
