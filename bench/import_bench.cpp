// kitfox_import_bench: `kitfox import` of a real image data set (Fashion-MNIST,
// Debian's dataset-fashion-mnist: 784 small ints per image) against the
// importer it replaced and, with an HNSW index, against hnswlib building the
// same graph from binary vectors.
//
//   1. import without an index: `kitfox import` of the NDJSON (and the same
//      documents as one JSON array) into `fm (label int, v vector<784>)`,
//      the whole command timed (open, read, put, the checkpoint at the end,
//      close) and the CLI's own figure (until the last batch is written),
//      for this build and the old importer's (a CLI built from an earlier
//      commit by bench/import_bench.sh); the documents of both checked equal;
//   2. the same import into `v vector<784> @hnsw(l2, m=16, ef_construction=200)`
//      with kitfox's default threads and pinned to one CPU (the engine has no
//      thread setting), against hnswlib's single-thread addPoint loop over the
//      same vectors with the same m and ef_construction;
//   3. recall@10 at ef 100 of both graphs over the 10,000 t10k images, against
//      an exact top 10 by brute-force L2 computed here.
//
// bench/import_bench.sh (`bash scripts/bench.sh import`) converts the data,
// builds the old CLI and runs this. Usage:
//   kitfox_import_bench --data DIR --kitfox PATH [--old-kitfox PATH] [--old-label TEXT]
//          [--runs N] [--no-hnsw] [--dir PATH] [--out PATH] [--wait-quiet S] [--keep]
// DIR holds train.ndjson, train.json, train.f32 and test.f32 (bench/idx2ndjson.mjs).
#include <fcntl.h>
#include <hnswlib/hnswlib.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "db.h"
#include "posix_file.h"

using namespace kitfox::benchutil;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kDim = 784;
constexpr size_t kK = 10;
constexpr size_t kEf = 100;
constexpr int kM = 16, kEfConstruction = 200;
const char* kPlain = "create collection fm (label int, v vector<784>)";
const char* kIndexed = "create collection fm (label int, v vector<784> @hnsw(l2, m=16, ef_construction=200))";

std::string g_dir;
bool g_keep = false;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kitfox_import_bench: %s\n", what.c_str());
  if (!g_dir.empty() && !g_keep) std::filesystem::remove_all(g_dir);
  std::exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  const uint64_t bytes = size_of(path);
  if (bytes % (kDim * sizeof(float))) die(path + " is not N x 784 float32");
  std::vector<float> v(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  return v;
}

// ---------------------------------------------------------------- running the CLI

struct Run {
  double wall = 0;       // the whole command
  double cli = 0;        // what it printed: "imported N documents into C in X s"
  uint64_t rss = 0;      // its peak resident set
  double others = 0;     // CPUs other processes used meanwhile
  std::string err;
};

// Runs argv with stdout to `out` (a path) and stderr kept; on one CPU when asked.
Run run(const std::vector<std::string>& argv, const std::string& out = "/dev/null", bool one_cpu = false) {
  const std::string err_path = g_dir + "/stderr.txt";
  OtherCpu others;
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    if (one_cpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(0, &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) _exit(126);
    }
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) != pid) die("wait4 failed");
  Run r;
  r.wall = seconds_since(t0);
  // OtherCpu counts the child as another process: take its CPU time out.
  const double child = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.others = std::max(0.0, others.cores() - child / std::max(r.wall, 1e-9));
  r.rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  r.err = read_text(err_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const std::string& a : argv) cmd += a + " ";
    die("failed (status " + std::to_string(status) + "): " + cmd + "\n" + r.err);
  }
  size_t at = r.err.rfind(" in ");
  if (at != std::string::npos) r.cli = std::strtod(r.err.c_str() + at + 4, nullptr);
  return r;
}

// A fresh database holding the empty collection.
void fresh(const std::string& kitfox, const std::string& db, const char* create) {
  std::filesystem::remove(db);
  run({kitfox, db, "-c", create});
}

uint64_t fnv1a(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  uint64_t h = 1469598103934665603ull;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); i++) h = (h ^ static_cast<uint8_t>(buf[i])) * 1099511628211ull;
  }
  return h;
}

// ---------------------------------------------------------------- recall

// The squared L2 distance in 16 float lanes (vectorised), summed in double.
// For these images (integers 0-255) it is exact: a lane adds 49 squares of
// at most 65,025, below 2^24.
double l2(const float* x, const float* y) {
  static_assert(kDim % 16 == 0);
  float lane[16] = {};
  for (size_t j = 0; j < kDim; j += 16)
    for (size_t l = 0; l < 16; l++) {
      const float t = x[j + l] - y[j + l];
      lane[l] += t * t;
    }
  double s = 0;
  for (float v : lane) s += v;
  return s;
}

// Exact top-k of every query by brute-force L2, on all CPUs.
std::vector<uint32_t> ground_truth(const std::vector<float>& base, const std::vector<float>& queries) {
  const size_t n = base.size() / kDim, nq = queries.size() / kDim;
  std::vector<uint32_t> out(nq * kK);
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::vector<std::pair<double, uint32_t>> d(n);
    for (size_t q; (q = next.fetch_add(1)) < nq;) {
      const float* x = &queries[q * kDim];
      for (size_t i = 0; i < n; i++) d[i] = {l2(x, &base[i * kDim]), static_cast<uint32_t>(i)};
      std::partial_sort(d.begin(), d.begin() + kK, d.end());
      for (size_t k = 0; k < kK; k++) out[q * kK + k] = d[k].second;
    }
  };
  std::vector<std::thread> ts;
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 1; t < all; t++) ts.emplace_back(work);
  work();
  for (auto& t : ts) t.join();
  return out;
}

double recall_of(const std::vector<uint32_t>& truth, size_t q, const std::vector<uint32_t>& found) {
  size_t hit = 0;
  for (uint32_t f : found)
    for (size_t k = 0; k < kK; k++) hit += truth[q * kK + k] == f;
  return static_cast<double>(hit) / kK;
}

struct Search {
  double recall = 0;
  double p50_us = 0;
};

Search kitfox_recall(const std::string& path, const std::vector<float>& queries, const std::vector<uint32_t>& truth) {
  auto fs = kitfox::make_posix_file_system();
  kitfox::OpenOptions o;
  o.create = false;
  o.auto_checkpoint = false;
  auto db = kitfox::Database::open(*fs, path, o);
  if (!db.is_ok()) die("open " + path + ": " + db.status().to_string());
  auto st = (*db)->prepare("get fm select id near v $1 ef 100 limit 10");
  if (!st.is_ok()) die("prepare: " + st.status().to_string());
  const size_t nq = queries.size() / kDim;
  double sum = 0;
  std::vector<double> times;
  std::vector<uint32_t> found;
  for (size_t q = 0; q < nq; q++) {
    std::vector<float> v(queries.begin() + q * kDim, queries.begin() + (q + 1) * kDim);
    auto t0 = Clock::now();
    auto r = st->query({kitfox::Value::vector(std::move(v))});
    times.push_back(seconds_since(t0));
    if (!r.is_ok()) die("near: " + r.status().to_string());
    found.clear();
    for (const kitfox::Value& row : r->rows) found.push_back(static_cast<uint32_t>(row.get("id")->as_int() - 1));
    sum += recall_of(truth, q, found);
  }
  (*db)->close();
  return {sum / static_cast<double>(nq), median(times) * 1e6};
}

struct Hnsw {
  double build = 0;
  Search search;
  uint64_t rss = 0;
  double others = 0;
};

Hnsw hnswlib_run(const std::vector<float>& base, const std::vector<float>& queries, const std::vector<uint32_t>& truth) {
  const size_t n = base.size() / kDim, nq = queries.size() / kDim;
  Hnsw out;
  hnswlib::L2Space space(kDim);
  PeakRss mem;
  mem.begin();
  OtherCpu others;
  auto t0 = Clock::now();
  auto h = std::make_unique<hnswlib::HierarchicalNSW<float>>(&space, n, kM, kEfConstruction, 100);
  for (size_t i = 0; i < n; i++) h->addPoint(&base[i * kDim], static_cast<hnswlib::labeltype>(i));
  out.build = seconds_since(t0);
  out.others = others.cores();
  mem.end();
  out.rss = mem.peak - std::min(mem.peak, mem.start);
  h->setEf(kEf);
  double sum = 0;
  std::vector<double> times;
  std::vector<uint32_t> found;
  for (size_t q = 0; q < nq; q++) {
    auto t1 = Clock::now();
    auto pq = h->searchKnn(&queries[q * kDim], kK);
    times.push_back(seconds_since(t1));
    found.clear();
    while (!pq.empty()) {
      found.push_back(static_cast<uint32_t>(pq.top().second));
      pq.pop();
    }
    sum += recall_of(truth, q, found);
  }
  out.search = {sum / static_cast<double>(nq), median(times) * 1e6};
  return out;
}

// ---------------------------------------------------------------- the engine alone

// What no importer can beat: the same documents, built in memory beforehand
// (labels and vectors as Value::vector), put in batches of 1,000 into a fresh
// file opened as `kitfox import` opens it (no automatic checkpoint), then the
// checkpoint the import ends with.
struct EngineAlone {
  double put = 0, checkpoint = 0;
  double others = 0;
};

EngineAlone engine_alone(const std::string& ndjson, const std::string& path) {
  std::vector<kitfox::Value> docs;
  {
    std::ifstream in(ndjson);
    std::string line;
    while (std::getline(in, line)) {
      auto v = kitfox::parse_json(line);
      if (!v.is_ok()) die("parse_json: " + v.status().to_string());
      kitfox::Value d = kitfox::Value::object();
      std::vector<float> f;
      for (const kitfox::Value& x : v->get("v")->items()) f.push_back(static_cast<float>(x.as_number()));
      d.set("label", *v->get("label"));
      d.set("v", kitfox::Value::vector(std::move(f)));
      docs.push_back(std::move(d));
    }
  }
  std::filesystem::remove(path);
  auto fs = kitfox::make_posix_file_system();
  kitfox::OpenOptions o;
  o.auto_checkpoint = false;
  auto db = kitfox::Database::open(*fs, path, o);
  if (!db.is_ok() || !(*db)->query(kPlain).is_ok()) die("engine alone: open and create");
  EngineAlone e;
  OtherCpu others;
  auto t0 = Clock::now();
  for (size_t i = 0; i < docs.size(); i += 1000) {
    std::vector<kitfox::Value> batch(std::make_move_iterator(docs.begin() + static_cast<std::ptrdiff_t>(i)),
                                     std::make_move_iterator(docs.begin() + static_cast<std::ptrdiff_t>(std::min(docs.size(), i + 1000))));
    auto r = (*db)->query("put fm $1", {kitfox::Value::list(std::move(batch))});
    if (!r.is_ok()) die("engine alone: " + r.status().to_string());
  }
  e.put = seconds_since(t0);
  auto t1 = Clock::now();
  if (!(*db)->checkpoint().is_ok()) die("engine alone: checkpoint");
  e.checkpoint = seconds_since(t1);
  e.others = others.cores();
  (*db)->close();
  std::filesystem::remove(path);
  return e;
}

// ---------------------------------------------------------------- report

std::string mb_s(uint64_t bytes, double s) { return s > 0 ? fmt("%.1f MB/s", static_cast<double>(bytes) / s / 1e6) : "-"; }
std::string rows_s(size_t rows, double s) { return s > 0 ? grouped(static_cast<double>(rows) / s) + " rows/s" : "-"; }
std::string secs(double s) { return s < 10 ? fmt("%.2f s", s) : fmt("%.1f s", s); }
std::string mib(uint64_t b) { return fmt("%.0f MiB", static_cast<double>(b) / 1048576.0); }

struct Config {
  std::string label, kitfox, input;
  std::vector<Run> runs;
  Run median_run() const {  // the run of median wall time
    std::vector<Run> r = runs;
    std::sort(r.begin(), r.end(), [](const Run& a, const Run& b) { return a.wall < b.wall; });
    return r[r.size() / 2];
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string data, kitfox, old_kitfox, old_label = "the old importer", dir = "/tmp", out_path;
  size_t runs = 3;
  bool hnsw = true, plain = true;
  double wait_quiet = 0;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--data") data = value();
    else if (a == "--kitfox") kitfox = value();
    else if (a == "--old-kitfox") old_kitfox = value();
    else if (a == "--old-label") old_label = value();
    else if (a == "--runs") { if (!parse_positive(value().c_str(), &runs)) die("--runs needs a positive count"); }
    else if (a == "--no-hnsw") hnsw = false;
    else if (a == "--no-plain") plain = false;
    else if (a == "--dir") dir = value();
    else if (a == "--out") out_path = value();
    else if (a == "--wait-quiet") wait_quiet = std::strtod(value().c_str(), nullptr);
    else if (a == "--keep") g_keep = true;
    else if (a == "-h" || a == "--help") {
      std::puts("kitfox_import_bench --data DIR --kitfox PATH [--old-kitfox PATH] [--old-label TEXT] [--runs N]\n"
                "                    [--no-hnsw] [--no-plain] [--dir PATH] [--out PATH] [--wait-quiet S] [--keep]\n"
                "(bench/import_bench.sh makes DIR and the old CLI; see bench/README.md)");
      return 0;
    } else {
      die("unknown option " + a + " (--help)");
    }
  }
  if (data.empty() || kitfox.empty()) die("--data and --kitfox are needed (--help)");
  std::string tmpl = dir + "/kitfox-ibench-XXXXXX";
  std::vector<char> tb(tmpl.begin(), tmpl.end());
  tb.push_back('\0');
  if (!::mkdtemp(tb.data())) die("cannot make a directory under " + dir);
  g_dir = tb.data();

  const std::string ndjson = data + "/train.ndjson", array = data + "/train.json";
  const std::vector<float> base = read_f32(data + "/train.f32");
  const std::vector<float> queries = read_f32(data + "/test.f32");
  const size_t n = base.size() / kDim, nq = queries.size() / kDim;
  const uint64_t nd_bytes = size_of(ndjson), arr_bytes = size_of(array);
  if (!nd_bytes || !arr_bytes) die("no train.ndjson or train.json in " + data);
  const std::string started = utc_stamp();
  progress(fmt("kitfox_import_bench: %s rows x %zu, %s queries; data in %s, files in %s", grouped((double)n).c_str(),
               kDim, grouped((double)nq).c_str(), data.c_str(), g_dir.c_str()));

  // ---- 1. without an index
  std::vector<Config> configs;
  if (!old_kitfox.empty()) configs.push_back({"old importer, NDJSON", old_kitfox, ndjson, {}});
  configs.push_back({"new importer, NDJSON", kitfox, ndjson, {}});
  if (!old_kitfox.empty()) configs.push_back({"old importer, JSON array", old_kitfox, array, {}});
  configs.push_back({"new importer, JSON array", kitfox, array, {}});
  const std::string db = g_dir + "/fm.kfdb";
  std::vector<uint64_t> hashes(configs.size());
  for (size_t r = 0; plain && r < runs; r++) {
    for (size_t c = 0; c < configs.size(); c++) {
      Config& cf = configs[c];
      fresh(cf.kitfox, db, kPlain);
      if (wait_quiet > 0) wait_for_quiet(wait_quiet);
      Run x = run({cf.kitfox, "import", db, "fm", cf.input});
      progress(fmt("  %s, run %zu: %s (the CLI: %s), other processes %.2f CPUs", cf.label.c_str(), r + 1,
                   secs(x.wall).c_str(), secs(x.cli).c_str(), x.others));
      cf.runs.push_back(x);
      if (r + 1 == runs) {
        // What was imported, read back by this build's CLI: the same for every importer.
        const std::string dump = g_dir + "/dump.ndjson";
        run({kitfox, db, "-c", "get fm"}, dump);
        hashes[c] = fnv1a(dump);
        std::filesystem::remove(dump);
      }
    }
  }
  bool same = std::all_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h == hashes[0]; });
  if (!same) die("the importers stored different documents");
  std::vector<EngineAlone> alone;
  for (size_t r = 0; plain && r < runs; r++) {
    if (wait_quiet > 0) wait_for_quiet(wait_quiet);
    alone.push_back(engine_alone(ndjson, db));
    progress(fmt("  the engine alone, run %zu: put %s, checkpoint %s", r + 1, secs(alone.back().put).c_str(),
                 secs(alone.back().checkpoint).c_str()));
  }
  std::sort(alone.begin(), alone.end(), [](const EngineAlone& a, const EngineAlone& b) { return a.put < b.put; });
  const EngineAlone eng = plain ? alone[alone.size() / 2] : EngineAlone{};

  // ---- 2. with the HNSW index
  std::vector<uint32_t> truth;
  Run idx_all, idx_one;
  Search s_all, s_one;
  Hnsw h;
  if (hnsw) {
    progress("ground truth: exact top 10 by brute force");
    auto t0 = Clock::now();
    truth = ground_truth(base, queries);
    progress(fmt("  %s", secs(seconds_since(t0)).c_str()));
    const std::string db_all = g_dir + "/hnsw-all.kfdb", db_one = g_dir + "/hnsw-one.kfdb";
    fresh(kitfox, db_all, kIndexed);
    if (wait_quiet > 0) wait_for_quiet(wait_quiet);
    idx_all = run({kitfox, "import", db_all, "fm", ndjson});
    progress(fmt("  kitfox import with @hnsw, default threads: %s", secs(idx_all.wall).c_str()));
    fresh(kitfox, db_one, kIndexed);
    if (wait_quiet > 0) wait_for_quiet(wait_quiet);
    idx_one = run({kitfox, "import", db_one, "fm", ndjson}, "/dev/null", true);
    progress(fmt("  kitfox import with @hnsw, one CPU: %s", secs(idx_one.wall).c_str()));
    if (wait_quiet > 0) wait_for_quiet(wait_quiet);
    h = hnswlib_run(base, queries, truth);
    progress(fmt("  hnswlib addPoint, one thread: %s, recall %.4f", secs(h.build).c_str(), h.search.recall));
    s_all = kitfox_recall(db_all, queries, truth);
    s_one = kitfox_recall(db_one, queries, truth);
    progress(fmt("  kitfox recall %.4f (default threads), %.4f (one CPU)", s_all.recall, s_one.recall));
  }

  // ---- report
  std::string md;
  md += fmt("### `kitfox import` of Fashion-MNIST: %s rows x 784 (%s)\n\n", grouped((double)n).c_str(), started.c_str());
  md += "#### Machine\n\n| | |\n| --- | --- |\n" + machine_rows();
  md += "| files | " + filesystem_of(g_dir) + " |\n";
  md += fmt("| hnswlib | Debian libhnswlib-dev (header-only), built with -O3 -march=native |\n");
  md += "| old importer | " + old_label + " |\n\n";
  md += "#### Method\n\n";
  md += fmt("- Data: Debian's `dataset-fashion-mnist`, the first %s training images as NDJSON "
            "`{\"label\": L, \"v\": [784 ints]}` (%s bytes) and the same documents as one JSON array "
            "(%s bytes), made by `bench/idx2ndjson.mjs`; the queries are the %s t10k images.\n",
            grouped((double)n).c_str(), grouped((double)nd_bytes).c_str(), grouped((double)arr_bytes).c_str(),
            grouped((double)nq).c_str());
  if (plain)
    md += fmt("- Import without an index: `kitfox import FILE fm DATA` (batches of 1,000, `--sync` default) into a "
              "fresh file holding `%s`. \"Whole command\" is the process from start to exit (open, read, parse, put, "
              "the checkpoint at the end, close); \"CLI's figure\" is the time the command prints (from the start "
              "of reading to the last batch written, before the checkpoint). Median of %zu runs by whole-command "
              "time, the importers alternating. MB/s are input bytes (10^6) per second. The documents stored by "
              "each importer were read back with `get fm` and are byte for byte the same. \"The engine alone\" is the "
              "floor: the same documents parsed beforehand (untimed) into Value::vector documents, put in batches of "
              "1,000 through `Database::query(\"put fm $1\")` into a fresh file opened as the CLI opens it, then "
              "`checkpoint()`; median of %zu by put time.\n",
              kPlain, runs, runs);
  if (hnsw)
    md += fmt("- With the index: the same NDJSON into `%s`, one run with kitfox's default threads (the engine "
              "links each batch's vectors on `hardware_concurrency()` threads; there is no setting for it) and "
              "one with the process pinned to one CPU (`sched_setaffinity`); timed as the whole command. "
              "hnswlib: `HierarchicalNSW<float>(L2Space(784), N, 16, 200)` and `addPoint` for every vector on "
              "one thread, from the binary vectors in memory (no parsing). recall@10 at ef 100 over the %s "
              "queries against the exact top 10 (brute-force L2, exact for these integer pixels); kitfox through "
              "`get fm select id near v $1 ef 100 limit 10` (a prepared statement), hnswlib `setEf(100)` and "
              "`searchKnn(q, 10)`.\n",
              kIndexed, grouped((double)nq).c_str());
  if (plain) {
    md += "\n#### Import without an index\n\n";
    md += "| importer, input | whole command | MB/s | rows/s | CLI's figure | MB/s | peak RSS | other processes |\n";
    md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    std::vector<Run> med;
    for (const Config& c : configs) {
      Run m = c.median_run();
      med.push_back(m);
      const uint64_t bytes = size_of(c.input);
      md += "| " + c.label + " | " + secs(m.wall) + " | " + mb_s(bytes, m.wall) + " | " + rows_s(n, m.wall) + " | " +
            secs(m.cli) + " | " + mb_s(bytes, m.cli) + " | " + mib(m.rss) + fmt(" | %.2f CPUs |\n", m.others);
    }
    md += "| the engine alone: `put fm $1` of the same documents built beforehand, then the checkpoint (in-process) | " +
          secs(eng.put + eng.checkpoint) + " | " + mb_s(nd_bytes, eng.put + eng.checkpoint) + " | " +
          rows_s(n, eng.put + eng.checkpoint) + " | " + secs(eng.put) + " (put) | " + mb_s(nd_bytes, eng.put) +
          fmt(" | - | %.2f CPUs |\n", eng.others);
    if (!old_kitfox.empty()) {
      md += fmt("\nNew over old, NDJSON: %.1fx the rate of the whole command, %.1fx by the CLI's figure; "
                "JSON array: %.1fx and %.1fx.\n",
                med[0].wall / med[1].wall, med[0].cli / med[1].cli, med[2].wall / med[3].wall, med[2].cli / med[3].cli);
    }
    md += "\nEvery run:\n\n| importer, input | whole command (s) | CLI's figure (s) |\n| --- | --- | --- |\n";
    for (const Config& c : configs) {
      std::string w, f;
      for (const Run& r : c.runs) w += (w.empty() ? "" : ", ") + fmt("%.2f", r.wall), f += (f.empty() ? "" : ", ") + fmt("%.2f", r.cli);
      md += "| " + c.label + " | " + w + " | " + f + " |\n";
    }
  }
  if (hnsw) {
    md += "\n#### With `@hnsw(l2, m=16, ef_construction=200)`, against hnswlib\n\n";
    md += "| | time | rows/s | kitfox / hnswlib (time) | recall@10, ef 100 | near p50 | peak RSS | other processes |\n";
    md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    md += "| kitfox `import`, default threads (whole command) | " + secs(idx_all.wall) + " | " + rows_s(n, idx_all.wall) +
          fmt(" | %.2fx | %.4f | %.0f µs | ", idx_all.wall / h.build, s_all.recall, s_all.p50_us) + mib(idx_all.rss) +
          fmt(" | %.2f CPUs |\n", idx_all.others);
    md += "| kitfox `import`, pinned to one CPU (whole command) | " + secs(idx_one.wall) + " | " +
          rows_s(n, idx_one.wall) +
          fmt(" | %.2fx | %.4f | %.0f µs | ", idx_one.wall / h.build, s_one.recall, s_one.p50_us) + mib(idx_one.rss) +
          fmt(" | %.2f CPUs |\n", idx_one.others);
    md += "| hnswlib `addPoint`, one thread (binary vectors, no parsing) | " + secs(h.build) + " | " +
          rows_s(n, h.build) + fmt(" | 1.00x | %.4f | %.0f µs | +", h.search.recall, h.search.p50_us) + mib(h.rss) +
          fmt(" | %.2f CPUs |\n", h.others);
    md += fmt("\nThe CLI's own figures (to the last batch written, before the checkpoint): %s with default threads, "
              "%s on one CPU.\n",
              secs(idx_all.cli).c_str(), secs(idx_one.cli).c_str());
  }
  std::fputs(md.c_str(), stdout);
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    f << md;
  }
  if (!g_keep) std::filesystem::remove_all(g_dir);
  return 0;
}
