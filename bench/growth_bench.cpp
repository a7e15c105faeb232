// kitfox_growth_bench: the worst single write while indexes grow. N
// documents {k, body, n} put one a statement into a collection whose @hash
// index on k and @text index on body are in use (built by a first query, so
// every put updates them), into a file with no flush, each put timed; then the
// same rows inserted one a statement into SQLite (in memory, one
// transaction, an index on k and an FTS5 table on body). A hash table that
// rehashes all its entries when it grows shows as a put far slower than the
// rest, at each doubling.
//
// Usage: kitfox_growth_bench [--rows N] [--out PATH]    (default 1,000,000)
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "db.h"
#include "posix_file.h"

using namespace kitfox;
using namespace kitfox::benchutil;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kitfox_growth_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Timings {
  std::vector<double> us;  // each write, in order
  double total_s = 0;
};

// The i-th row: a key shared by about 4 rows, a body of three words from a
// vocabulary that grows with the rows.
std::string key_of(size_t i) { return "key" + std::to_string(i / 4); }
std::string body_of(size_t i) {
  return "w" + std::to_string(i % 1000) + " v" + std::to_string(i / 3) + " u" + std::to_string((i * 7919) % 100003);
}

Timings run_kitfox(size_t rows, const std::string& dir) {
  auto fs = make_posix_file_system();
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.auto_checkpoint = false;  // no checkpoint's work inside a put
  auto r = Database::open(*fs, dir + "/g.kfdb", o);
  if (!r.is_ok()) die("open: " + r.status().to_string());
  Database& db = *r.value();
  if (!db.query("create collection t (k text @hash, body text @text, n int)").is_ok()) die("create failed");
  auto put = db.prepare("put t {k: $1, body: $2, n: $3}");
  if (!put.is_ok()) die("prepare: " + put.status().to_string());
  // Both indexes built (on first use), so that every put below updates them.
  if (!db.query("put t {k: \"key0\", body: \"w0\", n: 0}").is_ok()) die("first put failed");
  if (!db.query("get t where k = \"key0\"").is_ok() || !db.query("get t match body \"w0\" limit 1").is_ok())
    die("index build failed");
  Timings t;
  t.us.reserve(rows);
  std::vector<Value> params(3);
  auto t0 = Clock::now();
  for (size_t i = 1; i < rows; i++) {
    params[0] = Value::text(key_of(i));
    params[1] = Value::text(body_of(i));
    params[2] = Value::integer((int64_t)i);
    auto a = Clock::now();
    auto s = put->query(params);
    auto b = Clock::now();
    if (!s.is_ok()) die("put: " + s.status().to_string());
    t.us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  t.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto check = db.query("get t where k = $1", {Value::text(key_of(rows - 1))});
  if (!check.is_ok() || check->rows.empty()) die("the last key is not found");
  if (!db.close().is_ok()) die("close failed");
  std::remove((dir + "/g.kfdb").c_str());
  return t;
}

void sq_exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) die(std::string("sqlite: ") + (err ? err : sql));
}

Timings run_sqlite(size_t rows) {
  sqlite3* db = nullptr;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) die("sqlite open failed");
  sq_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, body TEXT, n INTEGER)");
  sq_exec(db, "CREATE INDEX t_k ON t (k)");
  sq_exec(db, "CREATE VIRTUAL TABLE t_fts USING fts5(body, content='t', content_rowid='id')");
  sq_exec(db, "BEGIN");
  sqlite3_stmt *ins = nullptr, *fts = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO t (k, body, n) VALUES (?, ?, ?)", -1, &ins, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "INSERT INTO t_fts (rowid, body) VALUES (last_insert_rowid(), ?)", -1, &fts, nullptr) !=
          SQLITE_OK)
    die(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
  Timings t;
  t.us.reserve(rows);
  auto t0 = Clock::now();
  for (size_t i = 0; i < rows; i++) {
    std::string k = key_of(i), body = body_of(i);
    auto a = Clock::now();
    sqlite3_bind_text(ins, 1, k.data(), (int)k.size(), SQLITE_STATIC);
    sqlite3_bind_text(ins, 2, body.data(), (int)body.size(), SQLITE_STATIC);
    sqlite3_bind_int64(ins, 3, (int64_t)i);
    if (sqlite3_step(ins) != SQLITE_DONE) die(std::string("sqlite insert: ") + sqlite3_errmsg(db));
    sqlite3_reset(ins);
    sqlite3_bind_text(fts, 1, body.data(), (int)body.size(), SQLITE_STATIC);
    if (sqlite3_step(fts) != SQLITE_DONE) die(std::string("sqlite fts insert: ") + sqlite3_errmsg(db));
    sqlite3_reset(fts);
    auto b = Clock::now();
    t.us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  sq_exec(db, "COMMIT");
  t.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  sqlite3_finalize(ins);
  sqlite3_finalize(fts);
  sqlite3_close(db);
  return t;
}

std::string row(const char* name, Timings t) {
  std::vector<size_t> order(t.us.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.us[a] > t.us[b]; });
  std::string worst;
  for (size_t i = 0; i < std::min<size_t>(5, order.size()); i++)
    worst += fmt("%s%.0f µs (write %s)", i ? ", " : "", t.us[order[i]], grouped((double)order[i] + 1).c_str());
  std::vector<double> s = t.us;
  double p50 = nearest_rank(s, 0.5), p999 = nearest_rank(s, 0.999), p9999 = nearest_rank(s, 0.9999);
  return fmt("| %s | %.2f s | %.1f µs | %.1f µs | %.1f µs | %s |\n", name, t.total_s, p50, p999, p9999, worst.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  size_t rows = 1000000;
  std::string out;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if ((a == "--rows" || a == "--out") && i + 1 < argc) {
      if (a == "--rows" && !parse_positive(argv[++i], &rows)) die("--rows needs a positive integer");
      if (a == "--out") out = argv[++i];
    } else {
      die("usage: kitfox_growth_bench [--rows N] [--out PATH]");
    }
  }
  progress(fmt("kitfox_growth_bench: %s rows", grouped((double)rows).c_str()));
  std::string tmpl = "/tmp/kitfox-growth-XXXXXX";
  if (!::mkdtemp(tmpl.data())) die("cannot make a directory under /tmp");
  Timings k = run_kitfox(rows, tmpl);
  ::rmdir(tmpl.c_str());
  progress(fmt("  kitfox: %.2f s", k.total_s));
  Timings q = run_sqlite(rows);
  progress(fmt("  SQLite: %.2f s", q.total_s));
  std::string md = "## The worst write while indexes grow (kitfox_growth_bench)\n\n| | |\n| --- | --- |\n" +
                   machine_rows() + "| SQLite | " + sqlite3_libversion() + " |\n" +
                   fmt("\n%s rows `{k, body, n}` written one a statement, each timed: kitfox `put` (prepared, a "
                       "file under /tmp, `sync = off`, no checkpoint) with `k text @hash` and `body text @text` in use; SQLite "
                       "`INSERT` (prepared, `:memory:`, one transaction) into a table with an index on k and an FTS5 "
                       "table on body. About four rows share a key; the body's vocabulary grows with the rows.\n\n",
                       grouped((double)rows).c_str()) +
                   "| engine | all writes | p50 | p99.9 | p99.99 | the five slowest |\n| --- | ---: | ---: | ---: | ---: | --- |\n" +
                   row("kitfox", std::move(k)) + row("SQLite", std::move(q)) + "\n";
  return emit_report(md, out) ? 0 : 1;
}
