// kitfox_bench: kitfox against SQLite on the same data, in the same run.
//
//   1. bulk put of N small documents {name: text, n: int}, 1,000 per statement
//      for kitfox (literal text, and `put t $1` with a list parameter), one
//      prepared INSERT per row in one transaction for SQLite (WAL,
//      synchronous=NORMAL);
//   2. point read by id (random ids, fixed seed), median of 3 runs;
//   3. reopen of the loaded file (median of 5) plus the first read, and the
//      sizes of the files on disk.
//
// Usage: kitfox_bench [--quick] [--rows N] [--reads N] [--batch N]
//                     [--dir PATH] [--out PATH] [--keep]
// See bench/README.md.
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "db.h"
#include "posix_file.h"

using kitfox::Database;
using kitfox::OpenOptions;
using kitfox::SyncMode;
using kitfox::Value;
using Clock = std::chrono::steady_clock;

namespace {

using namespace kitfox::benchutil;

// ---------------------------------------------------------------- helpers

// The data directory this run made, removed by die() too (unless --keep).
std::string g_data_dir;

[[noreturn]] void die(const std::string& what) { die_removing("kitfox_bench", g_data_dir, what); }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}


using Rng = SplitMix;


std::string mib(uint64_t bytes) { return fmt("%.1f MiB", bytes / 1048576.0); }

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return (uint64_t)st.st_size;
}

// ---------------------------------------------------------------- data

struct Data {
  std::vector<std::string> names;
  std::vector<int64_t> ns;
  uint64_t raw_bytes = 0;  // name bytes + 8 per int
};

Data make_data(size_t rows, uint64_t seed) {
  static const char kAlpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  Data d;
  d.names.reserve(rows);
  d.ns.reserve(rows);
  Rng r(seed);
  for (size_t i = 0; i < rows; i++) {
    size_t len = 10 + r.below(11);  // 10..20 characters
    std::string s(len, ' ');
    for (size_t k = 0; k < len; k++) s[k] = kAlpha[r.below(sizeof kAlpha - 1)];
    d.raw_bytes += len + 8;
    d.names.push_back(std::move(s));
    d.ns.push_back((int64_t)r.below(1000000000));
  }
  return d;
}

// `put t [{name: "...", n: 1}, ...]`, one statement per batch.
std::vector<std::string> literal_statements(const Data& d, size_t batch) {
  std::vector<std::string> out;
  for (size_t i = 0; i < d.names.size(); i += batch) {
    size_t end = std::min(d.names.size(), i + batch);
    std::string s = "put t [";
    s.reserve(16 + (end - i) * 40);
    for (size_t k = i; k < end; k++) {
      if (k > i) s += ", ";
      s += "{name: \"";
      s += d.names[k];  // [a-z0-9] only: nothing to escape
      s += "\", n: ";
      s += std::to_string(d.ns[k]);
      s += '}';
    }
    s += ']';
    out.push_back(std::move(s));
  }
  return out;
}

// One params vector per statement: {Value::list([{name, n}, ...])}.
std::vector<std::vector<Value>> list_params(const Data& d, size_t batch) {
  std::vector<std::vector<Value>> out;
  for (size_t i = 0; i < d.names.size(); i += batch) {
    size_t end = std::min(d.names.size(), i + batch);
    std::vector<Value> docs;
    docs.reserve(end - i);
    for (size_t k = i; k < end; k++) {
      Value o = Value::object();
      o.append("name", Value::text(d.names[k]));
      o.append("n", Value::integer(d.ns[k]));
      docs.push_back(std::move(o));
    }
    std::vector<Value> p;
    p.push_back(Value::list(std::move(docs)));
    out.push_back(std::move(p));
  }
  return out;
}

// ---------------------------------------------------------------- kitfox

struct LoadResult {
  double put_s = 0;        // the statements
  double close_s = 0;      // close(): checkpoint + flush
  double free_s = 0;       // destroying the Database afterwards (not counted)
  uint64_t size_before_close = 0;
  uint64_t size_after_close = 0;
  uint64_t wal_before_close = 0;  // SQLite only
  uint64_t wal_after_close = 0;
  PeakRss mem;             // the process, from open (before the load) to close
  double total_s() const { return put_s + close_s; }
};

OpenOptions kitfox_options() {
  OpenOptions o;
  o.sync = SyncMode::Off;
  return o;
}

std::unique_ptr<Database> kitfox_open(kitfox::FileSystem& fs, const std::string& path) {
  auto r = Database::open(fs, path, kitfox_options());
  if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
  return std::move(r.value());
}

void kitfox_fresh(const std::string& path) {
  remove_file(path);
  remove_file(path + "~");
}

enum class Variant { Literal, Param };

LoadResult kitfox_load(kitfox::FileSystem& fs, const std::string& path, Variant v,
                       const std::vector<std::string>& texts,
                       const std::vector<std::vector<Value>>& params, size_t batches) {
  kitfox_fresh(path);
  LoadResult lr;
  lr.mem.begin();
  auto db = kitfox_open(fs, path);
  auto cr = db->query("create collection t (name text, n int)");
  if (!cr.is_ok()) die("kitfox create: " + cr.status().to_string());

  static constexpr std::string_view kPut = "put t $1";
  auto t0 = Clock::now();
  for (size_t i = 0; i < batches; i++) {
    auto r = v == Variant::Literal ? db->query(texts[i]) : db->query(kPut, params[i]);
    if (!r.is_ok()) die("kitfox put: " + r.status().to_string());
  }
  lr.put_s = seconds_since(t0);
  lr.size_before_close = file_size(path);
  auto t1 = Clock::now();
  auto st = db->close();
  lr.close_s = seconds_since(t1);
  if (!st.is_ok()) die("kitfox close: " + st.to_string());
  lr.mem.end();
  auto t2 = Clock::now();
  db.reset();
  lr.free_s = seconds_since(t2);
  lr.size_after_close = file_size(path);
  return lr;
}

// ---------------------------------------------------------------- SQLite

void sq_exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string e = err ? err : "?";
    sqlite3_free(err);
    die(std::string("sqlite: ") + sql + ": " + e);
  }
}

sqlite3* sq_open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK)
    die("sqlite open " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
  return db;
}

sqlite3_stmt* sq_prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
    die(std::string("sqlite prepare: ") + sql + ": " + sqlite3_errmsg(db));
  return s;
}

void sq_fresh(const std::string& path) {
  remove_file(path);
  remove_file(path + "-wal");
  remove_file(path + "-shm");
  remove_file(path + "-journal");
}

LoadResult sqlite_load(const std::string& path, const Data& d) {
  sq_fresh(path);
  LoadResult lr;
  lr.mem.begin();
  sqlite3* db = sq_open(path, true);
  sq_exec(db, "PRAGMA journal_mode=WAL");
  sq_exec(db, "PRAGMA synchronous=NORMAL");
  sq_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)");

  auto t0 = Clock::now();
  sq_exec(db, "BEGIN");
  sqlite3_stmt* ins = sq_prepare(db, "INSERT INTO t (name, n) VALUES (?, ?)");
  const size_t rows = d.names.size();
  for (size_t i = 0; i < rows; i++) {
    sqlite3_bind_text(ins, 1, d.names[i].data(), (int)d.names[i].size(), SQLITE_STATIC);
    sqlite3_bind_int64(ins, 2, d.ns[i]);
    if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sq_exec(db, "COMMIT");
  lr.put_s = seconds_since(t0);
  lr.size_before_close = file_size(path);
  lr.wal_before_close = file_size(path + "-wal");
  auto t1 = Clock::now();
  if (sqlite3_close(db) != SQLITE_OK) die("sqlite close failed");
  lr.close_s = seconds_since(t1);
  lr.mem.end();
  lr.size_after_close = file_size(path);
  lr.wal_after_close = file_size(path + "-wal");
  return lr;
}

// ---------------------------------------------------------------- reads

struct ReadCheck {
  uint64_t sum = 0;  // sum of n + name length over the reads: both engines must agree
  uint64_t found = 0;
};

// `prepared`: through a Statement; else Database::query with the text.
double kitfox_reads(Database& db, const std::vector<int64_t>& ids, ReadCheck* check, const kitfox::Statement* prepared) {
  static constexpr std::string_view kGet = "get t where id = $1";
  // One result for every read, as SQLite's statement holds its row: each
  // read writes over the last one's (Statement::query(params, out)).
  std::vector<Value> params(1);
  kitfox::QueryResult r;
  uint64_t sum = 0, found = 0;
  auto t0 = Clock::now();
  for (int64_t id : ids) {
    params[0] = Value::integer(id);
    kitfox::Status st = prepared ? prepared->query(params, &r) : db.query(kGet, params, &r);
    if (!st.is_ok()) die("kitfox get: " + st.to_string());
    if (!r.rows.empty()) {
      const Value& row = r.rows[0];
      const Value* name = row.get("name");
      const Value* n = row.get("n");
      sum += (uint64_t)n->as_int() + name->as_string().size();
      found++;
    }
  }
  double s = seconds_since(t0);
  check->sum = sum;
  check->found = found;
  return s * 1e9 / (double)ids.size();
}

// in_txn: all the reads inside one BEGIN/COMMIT, so SQLite takes its read
// lock (WAL: the shared-memory read mark) once instead of once per statement.
double sqlite_reads(sqlite3* db, sqlite3_stmt* sel, const std::vector<int64_t>& ids, bool in_txn,
                    ReadCheck* check) {
  uint64_t sum = 0, found = 0;
  auto t0 = Clock::now();
  if (in_txn) sq_exec(db, "BEGIN");
  for (int64_t id : ids) {
    sqlite3_bind_int64(sel, 1, id);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) {
      const unsigned char* name = sqlite3_column_text(sel, 0);
      int len = sqlite3_column_bytes(sel, 0);
      int64_t n = sqlite3_column_int64(sel, 1);
      (void)name;
      sum += (uint64_t)n + (uint64_t)len;
      found++;
    } else if (rc != SQLITE_DONE) {
      die(std::string("sqlite select: ") + sqlite3_errmsg(db));
    }
    sqlite3_reset(sel);
  }
  if (in_txn) sq_exec(db, "COMMIT");
  double s = seconds_since(t0);
  check->sum = sum;
  check->found = found;
  return s * 1e9 / (double)ids.size();
}

// ---------------------------------------------------------------- options

struct Options {
  size_t rows = 1000000;
  size_t reads = 100000;
  size_t batch = 1000;
  std::string dir = "/tmp";
  std::string out;
  bool keep = false;
  bool quick = false;
  std::string only_load;  // "literal", "param" or "sqlite": that load alone (for profilers)
  bool only_reads = false;  // the prepared point reads alone, after an untimed load (for profilers)
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: kitfox_bench [--quick] [--rows N] [--reads N] [--batch N] [--dir PATH] [--out PATH] [--keep]\n"
               "  --quick       100,000 rows instead of 1,000,000\n"
               "  --rows N      rows to load (overrides --quick)\n"
               "  --reads N     point reads per run (default 100,000)\n"
               "  --batch N     documents per kitfox put statement (default 1,000)\n"
               "  --dir PATH    where the fresh data directory is made (default /tmp); it is deleted at the end\n"
               "  --out PATH    also write the Markdown report to PATH\n"
               "  --keep        keep the data directory\n"
               "  --only-load literal|param|sqlite\n"
               "                run that one bulk load (after its warm-up), print its time and stop: for profilers\n"
               "  --only-reads  load kitfox (untimed), run the prepared point reads once, print their time;\n"
               "                then the same ids 100 to a statement, kitfox `id in $1` against SQLite's IN,\n"
               "                then the single reads three times in turn with SQLite's (cached), and stop:\n"
               "                for profilers\n");
}

size_t parse_count(const char* flag, const char* s) {
  size_t v;
  if (!parse_positive(s, &v)) die(std::string(flag) + " needs a positive integer, got '" + s + "'");
  return v;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool rows_given = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--rows") { o.rows = parse_count("--rows", value()); rows_given = true; }
    else if (a == "--reads") o.reads = parse_count("--reads", value());
    else if (a == "--batch") o.batch = parse_count("--batch", value());
    else if (a == "--dir") o.dir = value();
    else if (a == "--out") o.out = value();
    else if (a == "--keep") o.keep = true;
    else if (a == "--only-load") {
      o.only_load = value();
      if (o.only_load != "literal" && o.only_load != "param" && o.only_load != "sqlite")
        die("--only-load takes literal, param or sqlite");
    }
    else if (a == "--only-reads") o.only_reads = true;
    else if (a == "-h" || a == "--help") { usage(stdout); std::exit(0); }
    else { usage(stderr); die("unknown argument '" + a + "'"); }
  }
  if (o.quick && !rows_given) o.rows = 100000;
  if (o.only_reads && !o.only_load.empty()) die("--only-reads and --only-load are each a run of their own");
  return o;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}


}  // namespace

// ---------------------------------------------------------------- main

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);

  std::string tmpl = opt.dir + "/kitfox-bench-XXXXXX";
  std::vector<char> tbuf(tmpl.begin(), tmpl.end());
  tbuf.push_back('\0');
  if (!::mkdtemp(tbuf.data())) die("cannot make a directory under " + opt.dir + ": " + std::strerror(errno));
  const std::string dir = tbuf.data();
  if (!opt.keep) g_data_dir = dir;
  const std::string kf_lit = dir + "/literal.kfdb", kf_par = dir + "/param.kfdb";
  const std::string kf_warm = dir + "/warm.kfdb", sq_path = dir + "/sqlite.db", sq_warm = dir + "/warm.db";
  auto fs = kitfox::make_posix_file_system();

  progress(fmt("kitfox_bench: %s rows, %s reads x 3, batch %zu, data in %s", grouped((double)opt.rows).c_str(),
               grouped((double)opt.reads).c_str(), opt.batch, dir.c_str()));

  // -------- data, built before any timing
  auto tg = Clock::now();
  Data data = make_data(opt.rows, 42);
  const bool want_texts = !opt.only_reads && (opt.only_load.empty() || opt.only_load == "literal");
  const bool want_params = opt.only_reads || opt.only_load.empty() || opt.only_load == "param";
  std::vector<std::string> texts = want_texts ? literal_statements(data, opt.batch) : std::vector<std::string>();
  std::vector<std::vector<Value>> params = want_params ? list_params(data, opt.batch) : std::vector<std::vector<Value>>();
  const size_t batches = (opt.rows + opt.batch - 1) / opt.batch;
  uint64_t text_bytes = 0;
  for (const auto& t : texts) text_bytes += t.size();
  progress(fmt("  data built in %.2f s (%zu statements, %s of statement text)", seconds_since(tg), batches,
               mib(text_bytes).c_str()));

  auto remove_dir = [&] {
    if (opt.keep) {
      progress("  data kept in " + dir);
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) progress("  could not remove " + dir + ": " + ec.message());
  };

  if (opt.only_reads) {
    kitfox_load(*fs, kf_par, Variant::Param, texts, params, batches);
    std::vector<std::vector<Value>>().swap(params);
    std::vector<int64_t> ids(opt.reads);
    Rng r(7);
    uint64_t expect_sum = 0;
    for (auto& id : ids) {
      id = 1 + (int64_t)r.below(opt.rows);
      expect_sum += (uint64_t)data.ns[id - 1] + data.names[id - 1].size();
    }
    auto kdb = kitfox_open(*fs, kf_par);
    auto kget = kdb->prepare("get t where id = $1");
    if (!kget.is_ok()) die("kitfox prepare: " + kget.status().to_string());
    ReadCheck kc;
    double ns = kitfox_reads(*kdb, ids, &kc, &kget.value());
    if (kc.found != ids.size() || kc.sum != expect_sum) die("kitfox reads returned wrong documents");
    std::printf("prepared point reads: %.0f ns each\n", ns);
    // The same ids 100 at a time: `get t where id in $1` (the id lookup
    // loads a few ids ahead).
    auto kin = kdb->prepare("get t where id in $1");
    if (!kin.is_ok()) die("kitfox prepare: " + kin.status().to_string());
    std::vector<Value> list(1);
    kitfox::QueryResult rin;
    uint64_t found_in = 0;
    auto ti = Clock::now();
    for (size_t i = 0; i + 100 <= ids.size(); i += 100) {
      std::vector<Value> items;
      items.reserve(100);
      for (size_t k = i; k < i + 100; k++) items.push_back(Value::integer(ids[k]));
      list[0] = Value::list(std::move(items));
      kitfox::Status st = kin.value().query(list, &rin);
      if (!st.is_ok()) die("kitfox get in: " + st.to_string());
      found_in += rin.rows.size();
    }
    double in_ns = seconds_since(ti) * 1e9 / (double)(ids.size() / 100 * 100);
    if (found_in == 0) die("kitfox id in returned nothing");
    std::printf("prepared reads of 100 ids at a time: %.0f ns an id\n", in_ns);
    // SQLite, the same ids 100 at a time (`WHERE id IN (?, ... 100)`),
    // its whole database in a 256 MiB cache, all reads in one transaction.
    sqlite_load(sq_path, data);
    sqlite3* sdb = sq_open(sq_path, false);
    sq_exec(sdb, "PRAGMA cache_size=-262144");
    sq_exec(sdb, "BEGIN");
    sq_exec(sdb, "SELECT sum(n), sum(length(name)) FROM t");  // every page into its cache
    std::string in_sql = "SELECT name, n FROM t WHERE id IN (?";
    for (int k = 1; k < 100; k++) in_sql += ",?";
    in_sql += ")";
    sqlite3_stmt* sin = sq_prepare(sdb, in_sql.c_str());
    uint64_t sq_found = 0;
    auto ts = Clock::now();
    for (size_t i = 0; i + 100 <= ids.size(); i += 100) {
      for (int k = 0; k < 100; k++) sqlite3_bind_int64(sin, k + 1, ids[i + k]);
      while (sqlite3_step(sin) == SQLITE_ROW) {
        (void)sqlite3_column_text(sin, 0);
        (void)sqlite3_column_int64(sin, 1);
        sq_found++;
      }
      sqlite3_reset(sin);
    }
    double sq_in_ns = seconds_since(ts) * 1e9 / (double)(ids.size() / 100 * 100);
    sq_exec(sdb, "COMMIT");
    sqlite3_finalize(sin);
    if (sq_found != found_in) die("SQLite's IN found other rows than kitfox's id in");
    std::printf("SQLite prepared IN of 100 ids, whole database cached: %.0f ns an id (kitfox / SQLite %.2f)\n", sq_in_ns,
                in_ns / sq_in_ns);
    // The single reads again, kitfox's and SQLite's prepared SELECT (its
    // whole database cached, one transaction) in turn, three times: the
    // medians and their ratio, as the full run prints them.
    sqlite3_stmt* sel = sq_prepare(sdb, "SELECT name, n FROM t WHERE id = ?");
    std::vector<double> kf_ns, sq_ns;
    ReadCheck sc;
    for (int run = 0; run < 3; run++) {
      kf_ns.push_back(kitfox_reads(*kdb, ids, &kc, &kget.value()));
      sq_ns.push_back(sqlite_reads(sdb, sel, ids, true, &sc));
      if (kc.found != ids.size() || kc.sum != expect_sum || sc.found != ids.size() || sc.sum != expect_sum)
        die("the point reads returned wrong rows");
    }
    sqlite3_finalize(sel);
    sqlite3_close(sdb);
    std::printf("point reads, kitfox / SQLite cached, 3 runs in turn: %.0f / %.0f ns (%.3f)\n", median(kf_ns),
                median(sq_ns), median(kf_ns) / median(sq_ns));
    kdb.reset();
    remove_dir();
    return 0;
  }

  // -------- warm-up: code paths, allocator, page cache of the directory
  {
    size_t wb = std::min<size_t>(batches, std::max<size_t>(1, 10000 / opt.batch));
    Data wd;
    wd.names.assign(data.names.begin(), data.names.begin() + std::min(opt.rows, wb * opt.batch));
    wd.ns.assign(data.ns.begin(), data.ns.begin() + wd.names.size());
    const std::string& only = opt.only_load;
    if (only.empty() || only == "literal") kitfox_load(*fs, kf_warm, Variant::Literal, texts, params, wb);
    if (only.empty() || only == "param") kitfox_load(*fs, kf_warm, Variant::Param, texts, params, wb);
    if (only.empty() || only == "sqlite") sqlite_load(sq_warm, wd);
    kitfox_fresh(kf_warm);
    sq_fresh(sq_warm);
  }

  if (!opt.only_load.empty()) {
    LoadResult r = opt.only_load == "sqlite" ? sqlite_load(sq_path, data)
                   : kitfox_load(*fs, kf_lit, opt.only_load == "literal" ? Variant::Literal : Variant::Param,
                                 texts, params, batches);
    std::printf("%s load: %.3f s (%s rows/s), close %.3f s\n", opt.only_load.c_str(), r.put_s,
                grouped(opt.rows / r.put_s).c_str(), r.close_s);
    remove_dir();
    return 0;
  }

  // -------- 1. bulk put
  progress("  bulk put: kitfox, literal statements");
  LoadResult lit = kitfox_load(*fs, kf_lit, Variant::Literal, texts, params, batches);
  progress(fmt("    %.3f s + close %.3f s", lit.put_s, lit.close_s));
  progress("  bulk put: kitfox, put t $1 with a list parameter");
  LoadResult par = kitfox_load(*fs, kf_par, Variant::Param, texts, params, batches);
  progress(fmt("    %.3f s + close %.3f s", par.put_s, par.close_s));
  progress("  bulk put: SQLite");
  LoadResult sq = sqlite_load(sq_path, data);
  progress(fmt("    %.3f s + close %.3f s", sq.put_s, sq.close_s));
  // The statement texts and parameters are not needed any more.
  std::vector<std::string>().swap(texts);
  std::vector<std::vector<Value>>().swap(params);

  // -------- 3. reopen (round 0 is an untimed warm-up)
  progress("  reopen");
  std::vector<double> kf_open, kf_first, kf_both, sq_open_t, sq_first, sq_both;
  PeakRss kf_reopen_mem, sq_reopen_mem;  // the last round's: open + first read
  for (int i = 0; i < 6; i++) {  // run 0 is a warm-up
    std::vector<Value> p1{Value::integer(1)};
    PeakRss km, sm;
    km.begin();
    auto t0 = Clock::now();
    auto db = kitfox_open(*fs, kf_lit);
    double o = seconds_since(t0);
    auto t1 = Clock::now();
    auto r = db->query("get t where id = $1", p1);
    double q = seconds_since(t1);
    if (!r.is_ok() || r->rows.size() != 1) die("kitfox first get after reopen failed");
    km.end();
    if (!db->close().is_ok()) die("kitfox close after reopen failed");
    db.reset();
    if (i > 0) { kf_open.push_back(o); kf_first.push_back(q); kf_both.push_back(o + q); }

    sm.begin();
    t0 = Clock::now();
    sqlite3* sdb = sq_open(sq_path, false);
    o = seconds_since(t0);
    t1 = Clock::now();
    sqlite3_stmt* sel = sq_prepare(sdb, "SELECT name, n FROM t WHERE id = ?");
    sqlite3_bind_int64(sel, 1, 1);
    if (sqlite3_step(sel) != SQLITE_ROW) die("sqlite first select after reopen failed");
    volatile int64_t sink = sqlite3_column_int64(sel, 1) + sqlite3_column_bytes(sel, 0);
    (void)sink;
    q = seconds_since(t1);
    sm.end();
    sqlite3_finalize(sel);
    sqlite3_close(sdb);
    if (i > 0) { sq_open_t.push_back(o); sq_first.push_back(q); sq_both.push_back(o + q); }
    kf_reopen_mem = km;
    sq_reopen_mem = sm;
  }
  const uint64_t sq_wal_after_reopen = file_size(sq_path + "-wal");

  // -------- 2. point reads, runs of both engines alternating
  progress("  point reads");
  std::vector<int64_t> ids(opt.reads), warm_ids(std::min<size_t>(opt.reads, 10000));
  {
    Rng r(7);
    for (auto& id : ids) id = 1 + (int64_t)r.below(opt.rows);
    Rng w(99);
    for (auto& id : warm_ids) id = 1 + (int64_t)w.below(opt.rows);
  }
  uint64_t expect_sum = 0;
  for (int64_t id : ids) expect_sum += (uint64_t)data.ns[id - 1] + data.names[id - 1].size();

  PeakRss kf_read_mem, sq_read_mem, runs_mem;
  kf_read_mem.begin();
  auto kdb = kitfox_open(*fs, kf_lit);
  ReadCheck kc, sc;
  auto kget = kdb->prepare("get t where id = $1");
  if (!kget.is_ok()) die("kitfox prepare: " + kget.status().to_string());
  kitfox_reads(*kdb, warm_ids, &kc, nullptr);  // warm-up
  kitfox_reads(*kdb, warm_ids, &kc, &kget.value());
  kf_read_mem.end();
  sq_read_mem.begin();
  // SQLite as configured for the load (default 2 MiB page cache: most leaf
  // pages come from the OS page cache through read(2)), and a second
  // connection whose 256 MiB page cache holds the whole database, as kitfox
  // holds its documents in memory.
  sqlite3* sdb = sq_open(sq_path, false);
  sqlite3_stmt* sel = sq_prepare(sdb, "SELECT name, n FROM t WHERE id = ?");
  sqlite3* sdb_big = sq_open(sq_path, false);
  sq_exec(sdb_big, "PRAGMA cache_size=-262144");
  sq_exec(sdb_big, "BEGIN");
  sq_exec(sdb_big, "SELECT sum(n), sum(length(name)) FROM t");  // loads every page into its cache
  sq_exec(sdb_big, "COMMIT");
  sqlite3_stmt* sel_big = sq_prepare(sdb_big, "SELECT name, n FROM t WHERE id = ?");
  sqlite_reads(sdb, sel, warm_ids, false, &sc);
  sqlite_reads(sdb, sel, warm_ids, true, &sc);
  sqlite_reads(sdb_big, sel_big, warm_ids, true, &sc);
  sq_read_mem.end();
  runs_mem.begin();
  std::vector<double> kf_ns, kft_ns, sq_ns, sqt_ns, sqb_ns;
  auto check_sq = [&] {
    if (sc.found != ids.size() || sc.sum != expect_sum) die("sqlite reads returned wrong rows");
  };
  for (int run = 0; run < 3; run++) {
    kf_ns.push_back(kitfox_reads(*kdb, ids, &kc, &kget.value()));
    if (kc.found != ids.size() || kc.sum != expect_sum) die("kitfox reads returned wrong documents");
    kft_ns.push_back(kitfox_reads(*kdb, ids, &kc, nullptr));
    if (kc.found != ids.size() || kc.sum != expect_sum) die("kitfox reads returned wrong documents");
    sq_ns.push_back(sqlite_reads(sdb, sel, ids, false, &sc));
    check_sq();
    sqt_ns.push_back(sqlite_reads(sdb, sel, ids, true, &sc));
    check_sq();
    sqb_ns.push_back(sqlite_reads(sdb_big, sel_big, ids, true, &sc));
    check_sq();
    progress(fmt("    run %d: kitfox prepared %.0f ns, text %.0f ns; SQLite autocommit %.0f ns, one transaction %.0f ns, "
                 "one transaction + 256 MiB cache %.0f ns",
                 run + 1, kf_ns.back(), kft_ns.back(), sq_ns.back(), sqt_ns.back(), sqb_ns.back()));
  }
  runs_mem.end();
  kitfox::Stats kstats = kdb->stats();
  sqlite3_finalize(sel);
  sqlite3_close(sdb);
  sqlite3_finalize(sel_big);
  sqlite3_close(sdb_big);
  if (!kdb->close().is_ok()) die("kitfox close after reads failed");
  kdb.reset();

  // -------- report
  const double N = (double)opt.rows;
  auto rps = [&](double s) { return N / s; };
  std::string md;
  md += fmt("## kitfox vs SQLite: %s rows (%s)\n\n", grouped(N).c_str(), utc_now().c_str());
  md += "### Machine\n\n| | |\n| --- | --- |\n";
  md += machine_rows();
  md += std::string("| SQLite | ") + sqlite3_libversion() + " (system libsqlite3) |\n";
  md += "| data directory | " + opt.dir + " (a fresh directory inside it) |\n\n";

  md += "### Method\n\n";
  md += fmt("- Data: %s documents `{name: text, n: int}`, names of 10-20 characters [a-z0-9], n random in "
            "[0, 1e9), fixed seed; raw size (name bytes + 8 per int) %s. Both engines load exactly the same rows.\n",
            grouped(N).c_str(), mib(data.raw_bytes).c_str());
  md += fmt("- kitfox: `OpenOptions.sync = Off` (flushed on checkpoint and close), collection "
            "`(name text, n int)`, one statement per %s documents, ids assigned by the engine. "
            "(a) literal: `put t [{name: \"...\", n: 1}, ...]`, statement text built before timing "
            "(%s in total); (b) param: `put t $1` with `$1` a `Value::list` of `Value::object` documents, "
            "built before timing. Automatic checkpoints during the load are part of the put time; "
            "`close()` (final checkpoint + flush) is timed separately.\n",
            grouped((double)opt.batch).c_str(), mib(text_bytes).c_str());
  md += "- SQLite: `PRAGMA journal_mode=WAL`, `synchronous=NORMAL`, table `t (id INTEGER PRIMARY KEY, name TEXT, "
        "n INTEGER)`, one prepared `INSERT INTO t (name, n) VALUES (?, ?)` stepped per row (bound with "
        "SQLITE_STATIC), all in one `BEGIN`/`COMMIT`; `sqlite3_close` timed separately. Default page size (4 KiB), "
        "cache size (2 MiB) and `wal_autocheckpoint` (1000 pages): the WAL outgrows that, so SQLite "
        "checkpoints it into the database file at `COMMIT`, inside its put time (see the file sizes before "
        "close); `sqlite3_close` then has little left to do.\n";
  md += "- Before timing, each engine loads 10,000 rows into a scratch file (warm-up). Each load runs once.\n";
  md += fmt("- Point reads: %s random ids in [1, N] (fixed seed), 3 runs per engine alternating, after a "
            "10,000-read warm-up; the figure is the median over the runs of (run time / reads). kitfox: "
            "`Database::query(\"get t where id = $1\", {Int})`, reading `name` and `n` from the row; SQLite: "
            "prepared `SELECT name, n FROM t WHERE id = ?`, bind, step, read both columns, reset. Both results "
            "are checked against the generated data.\n",
            grouped((double)opt.reads).c_str());
  md += "- Reopen: the file written by the literal load (closed, so it holds an image and no tail); 5 timed "
        "open + first read (`get t where id = 1` / prepare + step of the SELECT with id 1) after one untimed "
        "round, median. The file is in the OS page cache (warm reopen, not a cold disk read).\n";
  md += "- Single-threaded, one process; the machine may be shared, so small differences are noise.\n\n";

  auto ratio = [](double a, double b) { return b > 0 ? fmt("%.2f", a / b) : std::string("-"); };
  md += "### 1. Bulk put\n\n";
  md += "| engine | put time | rows/s (put) | close | total incl. close | rows/s incl. close | kitfox/SQLite rows/s (put) | kitfox/SQLite rows/s (incl. close) | peak RSS (from) |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  auto load_row = [&](const char* name, const LoadResult& r, bool is_sqlite) {
    md += fmt("| %s | %.3f s | %s | %.0f ms | %.3f s | %s | %s | %s | %s |\n", name, r.put_s, grouped(rps(r.put_s)).c_str(),
              r.close_s * 1e3, r.total_s(), grouped(rps(r.total_s())).c_str(),
              is_sqlite ? "1.00" : ratio(rps(r.put_s), rps(sq.put_s)).c_str(),
              is_sqlite ? "1.00" : ratio(rps(r.total_s()), rps(sq.total_s())).c_str(), r.mem.text().c_str());
  };
  load_row("kitfox (a) literal text", lit, false);
  load_row("kitfox (b) `put t $1` list param", par, false);
  load_row("SQLite (prepared INSERT per row)", sq, true);
  md += fmt("\nRatios above 1 mean kitfox loads faster. Freeing the kitfox `Database` object after `close()` took "
            "%.0f ms (a) / %.0f ms (b), not counted.\n\n", lit.free_s * 1e3, par.free_s * 1e3);
  md += "Peak RSS: the whole process's resident memory at its highest during that load, from just before the open "
        "to the end of `close()` (Linux VmHWM, reset through `/proc/self/clear_refs` at the start of the phase); in "
        "brackets the RSS when the phase began, which holds the statement texts and parameter documents of every "
        "row, built before timing for all three loads. The difference is what the load itself added.\n\n";

  md += "### 2. Point read by id\n\n";
  md += "| engine | median ns/read | runs (ns/read) | reads/s | kitfox time / this |\n| --- | ---: | --- | ---: | ---: |\n";
  double kmed = median(kf_ns);
  auto runs = [](const std::vector<double>& v) {
    std::string s;
    for (double x : v) s += (s.empty() ? "" : ", ") + fmt("%.0f", x);
    return s;
  };
  auto read_row = [&](const char* name, const std::vector<double>& v) {
    double med = median(v);
    md += fmt("| %s | %.0f | %s | %s | %.2f |\n", name, med, runs(v).c_str(), grouped(1e9 / med).c_str(), kmed / med);
  };
  read_row("kitfox prepared `get t where id = $1` (`Statement::query(params, &result)`)", kf_ns);
  read_row("kitfox `Database::query(\"get t where id = $1\", params, &result)` (the text, from the statement cache)", kft_ns);
  read_row("SQLite prepared SELECT, autocommit (a read transaction per statement)", sq_ns);
  read_row("SQLite prepared SELECT, all reads in one `BEGIN`/`COMMIT`", sqt_ns);
  read_row("SQLite prepared SELECT, one `BEGIN`/`COMMIT`, `cache_size` 256 MiB (whole db cached)", sqb_ns);
  md += fmt("\nPeak RSS of the process (Linux VmHWM; in brackets the RSS when the phase began): kitfox open + its "
            "%s-read warm-up, before any SQLite connection is opened: %s; then SQLite's two connections "
            "opened, the 256 MiB cache filled and their warm-ups, with kitfox's database still open: %s; the timed "
            "runs of all four rows, every database open: %s.\n",
            grouped((double)warm_ids.size()).c_str(), kf_read_mem.text().c_str(), sq_read_mem.text().c_str(),
            runs_mem.text().c_str());
  md += "\nThe last column is kitfox's prepared median over that row's; above 1 means kitfox is slower. "
        "kitfox's figure includes building the result row as a `Value` object (the text row adds finding the "
        "statement in the cache by its text); SQLite's includes only bind, step, column reads and reset. In autocommit mode every SQLite statement also begins and ends a read "
        "transaction (WAL read-mark and file-lock system calls); kitfox holds its file lock for the whole "
        "session. With its default 2 MiB page cache SQLite reads most leaf pages from the OS page cache "
        "with a system call; kitfox keeps every document in memory, so the last row (SQLite's whole "
        "database in its own cache, one transaction) compares the lookups themselves.\n\n";

  md += "### 3. Reopen and file size\n\n";
  md += "| engine | open (median of 5) | first read | open + first read | kitfox/SQLite (open + first read) | peak RSS (from) |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: |\n";
  double kb = median(kf_both), sb = median(sq_both);
  md += fmt("| kitfox `Database::open` + `get t where id = 1` | %.3f ms | %.3f ms | %.3f ms | %.2f | %s |\n",
            median(kf_open) * 1e3, median(kf_first) * 1e3, kb * 1e3, kb / sb, kf_reopen_mem.text().c_str());
  md += fmt("| SQLite `sqlite3_open_v2` + prepare/step SELECT | %.3f ms | %.3f ms | %.3f ms | 1.00 | %s |\n\n",
            median(sq_open_t) * 1e3, median(sq_first) * 1e3, sb * 1e3, sq_reopen_mem.text().c_str());
  md += "Peak RSS: the process's, from just before the open to just after the first read, last round; each "
        "engine's database was closed before the other's opened. A reopen maps the kitfox file, so its touched "
        "pages count as resident; SQLite reads pages into its own cache.\n\n";
  md += "SQLite opens lazily: `sqlite3_open_v2` reads nothing, the schema is read by the first prepare.\n\n";

  md += "| files | after the load, before close | after close |\n| --- | ---: | ---: |\n";
  md += fmt("| kitfox (a) literal: `.kfdb` | %s | %s |\n", mib(lit.size_before_close).c_str(),
            mib(lit.size_after_close).c_str());
  md += fmt("| kitfox (b) param: `.kfdb` | %s | %s |\n", mib(par.size_before_close).c_str(),
            mib(par.size_after_close).c_str());
  md += fmt("| SQLite: db + wal | %s + %s = %s | %s + %s = %s |\n", mib(sq.size_before_close).c_str(),
            mib(sq.wal_before_close).c_str(), mib(sq.size_before_close + sq.wal_before_close).c_str(),
            mib(sq.size_after_close).c_str(), mib(sq.wal_after_close).c_str(),
            mib(sq.size_after_close + sq.wal_after_close).c_str());
  md += fmt("| raw data (name bytes + 8 per int) | %s | |\n\n", mib(data.raw_bytes).c_str());
  md += fmt("A kitfox image holds the documents and the id/offset index (16 bytes per document: %s here); "
            "before close the file is the write log (tail) only.\n\n",
            mib((uint64_t)opt.rows * 16).c_str());
  md += fmt("kitfox after close / SQLite after close: %.2f. kitfox memory after reopen (documents + id index, "
            "`Stats.memory_bytes`): %s.%s\n",
            (double)lit.size_after_close / (double)std::max<uint64_t>(1, sq.size_after_close + sq.wal_after_close),
            mib(kstats.memory_bytes).c_str(),
            sq_wal_after_reopen ? fmt(" (SQLite left a %s WAL after the reopen rounds.)", mib(sq_wal_after_reopen).c_str()).c_str() : "");

  if (!emit_report(md, opt.out)) die("cannot write " + opt.out);

  remove_dir();
  return 0;
}
