// kitfox_vector_bench: kitfox's HNSW vector search against hnswlib on the same
// data, in the same run, at the same parameters (m=16, ef_construction=200,
// cosine).
//
//   1. data: bench::Clustered points and held-out queries, exact top-10 by a
//      double-precision brute-force loop (the ground truth);
//   2. build: hnswlib (addPoint loop, one thread and all threads), kitfox's
//      HnswIndex directly (link_pending(1) and all threads), and kitfox through
//      the engine (`put d $1` of 1000-document batches into a collection with
//      the @hnsw field; the same pinned to one CPU; and a load without the
//      index followed by `create index`);
//   3. `near` top-10 latency p50/p99 and recall@10 at ef 40/64/100/200:
//      Database::query, raw HnswIndex::search, hnswlib searchKnn;
//   4. `near ... exact`: time per query against the memory-read bandwidth;
//   5. reopen: Database::open + first near with the persisted graph, against
//      rebuilding the index from the documents, and hnswlib's
//      saveIndex/loadIndex; file sizes against raw data and raw + links;
//   6. machine, compiler, kernel; Markdown report (--out) and SVG charts
//      (--svg DIR).
//
// Usage: kitfox_vector_bench [--quick] [--rows N] [--queries N] [--clusters N]
//          [--exact N] [--no-768] [--dir PATH] [--out PATH] [--svg DIR]
//          [--wait-quiet S] [--retry-busy N] [--keep]
// See bench/README.md.
#include <hnswlib/hnswlib.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "clustered.h"
#include "db.h"
#include "index/distance.h"
#include "index/hnsw.h"
#include "posix_file.h"

using kitfox::Database;
using kitfox::HnswIndex;
using kitfox::HnswParams;
using kitfox::Hit;
using kitfox::Metric;
using kitfox::OpenOptions;
using kitfox::SyncMode;
using kitfox::Value;
using Clock = std::chrono::steady_clock;

namespace {

using namespace kitfox::benchutil;

constexpr uint32_t kM = 16;
constexpr uint32_t kEfConstruction = 200;
constexpr size_t kK = 10;
constexpr size_t kBatch = 1000;
constexpr size_t kEfs[] = {40, 64, 100, 200};
constexpr uint64_t kDataSeed = 1, kQuerySeed = 2, kCentreSeed = 42;

// ---------------------------------------------------------------- helpers

std::string g_data_dir;  // removed by die() too (unless --keep)

[[noreturn]] void die(const std::string& what) { die_removing("kitfox_vector_bench", g_data_dir, what); }

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


// The p-th percentile (0 < p <= 100) by the nearest-rank method.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = (size_t)std::ceil(p / 100.0 * (double)v.size());
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}



std::string mib(uint64_t bytes) { return fmt("%.1f MiB", bytes / 1048576.0); }

std::string ms(double s) { return s < 0.1 ? fmt("%.2f ms", s * 1e3) : s < 10 ? fmt("%.0f ms", s * 1e3) : fmt("%.1f s", s); }

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return (uint64_t)st.st_size;
}





std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// ---------------------------------------------------------------- conditions
//
// Every measured block records the 1-minute load average at its start and end
// (which includes this program itself: about 1 while it runs one thread, 2 on
// all threads), and the CPU time other processes used during it, in cores:
// busy time from /proc/stat minus this process's own (getrusage), over the
// wall time. The second is the one to judge a number by.

double loadavg1() {
  std::string s = read_text("/proc/loadavg");
  return s.empty() ? -1 : std::strtod(s.c_str(), nullptr);
}

double busy_cpu_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
  return (double)(user + nice + sys + irq + softirq + steal) / (double)::sysconf(_SC_CLK_TCK);
}

double self_cpu_seconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

struct Condition {
  std::string what;
  double load_start = 0, load_end = 0;
  double others = 0;  // cores used by other processes, on average
  double wall = 0;
  bool repeated = false;  // the machine was busy: measured again, this attempt's numbers dropped
};
std::vector<Condition> g_conditions;

class Probe {
 public:
  explicit Probe(std::string what) {
    c_.what = std::move(what);
    c_.load_start = loadavg1();
    busy0_ = busy_cpu_seconds();
    self0_ = self_cpu_seconds();
    t0_ = Clock::now();
  }
  ~Probe() { stop(); }
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    c_.wall = seconds_since(t0_);
    double all_busy = busy_cpu_seconds() - busy0_, self = self_cpu_seconds() - self0_;
    c_.others = c_.wall > 0 ? std::max(0.0, (all_busy - self) / c_.wall) : 0;
    c_.load_end = loadavg1();
    g_conditions.push_back(c_);
    if (busy()) progress(fmt("    warning: other processes used %.2f cores during '%s'", c_.others, c_.what.c_str()));
  }
  // Others used more than a quarter of a core (only judged over 0.3 s: the
  // kernel counts CPU time in ticks).
  bool busy() const { return c_.wall >= 0.3 && c_.others > 0.25; }

 private:
  Condition c_;
  double busy0_, self0_;
  Clock::time_point t0_;
  bool stopped_ = false;
};

// With --wait-quiet S: before a measured block, wait (up to S seconds) until
// other processes use under 0.15 cores over a 2-second sample.
double g_wait_quiet = 0;
void wait_quiet() {
  if (g_wait_quiet <= 0) return;
  auto t0 = Clock::now();
  bool said = false;
  for (;;) {
    double b0 = busy_cpu_seconds(), s0 = self_cpu_seconds();
    auto w0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    double wall = seconds_since(w0);
    double others = std::max(0.0, (busy_cpu_seconds() - b0 - (self_cpu_seconds() - s0)) / wall);
    if (others < 0.15) return;
    if (seconds_since(t0) > g_wait_quiet) {
      progress(fmt("    still busy (%.2f cores used by others) after %.0f s: measuring anyway", others, g_wait_quiet));
      return;
    }
    if (!said) progress(fmt("    waiting for the machine to be quiet (others use %.2f cores)", others));
    said = true;
  }
}

// Runs one measured block: f(attempt) does the work and records its own
// timings. With --retry-busy N, a block during which other processes used
// more than a quarter of a core is run again (after waiting for quiet), up to
// N more times; the report keeps the last attempt's numbers and lists every
// attempt under Conditions.
int g_retry_busy = 0;
template <typename F>
void measured(const std::string& name, const F& f) {
  for (int attempt = 0;; attempt++) {
    wait_quiet();
    Probe p(attempt ? fmt("%s (attempt %d)", name.c_str(), attempt + 1) : name);
    f(attempt);
    p.stop();
    if (!p.busy() || attempt >= g_retry_busy) return;
    g_conditions.back().repeated = true;
    progress("    the machine was busy: measuring again");
  }
}

// ---------------------------------------------------------------- machine

struct Machine : MachineInfo {
  std::string flags, hnswlib, hnswlib_simd, caches;
  unsigned hw_threads = 0;
};

Machine describe_machine() {
  Machine m;
  static_cast<MachineInfo&>(m) = machine_info();
  std::string flags = " " + m.cpu_field("flags") + " ";
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512bw"})
    m.flags += std::string(m.flags.empty() ? "" : ", ") + f + (flags.find(std::string(" ") + f + " ") != std::string::npos ? " yes" : " no");
  for (int i = 0; i < 6; i++) {
    std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string level = trim(read_text((base + "level").c_str())), type = trim(read_text((base + "type").c_str()));
    std::string size = trim(read_text((base + "size").c_str()));
    if (level.empty() || type == "Instruction") continue;
    m.caches += (m.caches.empty() ? "" : ", ") + std::string("L") + level + " " + size;
  }
  m.hw_threads = std::thread::hardware_concurrency();
  if (FILE* f = ::popen("dpkg-query -W -f='${Version}' libhnswlib-dev 2>/dev/null", "r")) {
    char buf[128] = {0};
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    ::pclose(f);
    m.hnswlib = trim(std::string(buf, n));
  }
  if (m.hnswlib.empty()) m.hnswlib = "unknown version";
#if defined(USE_AVX512)
  m.hnswlib_simd = "AVX-512 (compiled in, chosen when the CPU has it)";
#elif defined(USE_AVX)
  m.hnswlib_simd = "AVX";
#elif defined(USE_SSE)
  m.hnswlib_simd = "SSE";
#else
  m.hnswlib_simd = "scalar";
#endif
  return m;
}

// ---------------------------------------------------------------- data

struct Dataset {
  uint32_t dim = 0;
  size_t n = 0, nq = 0;
  std::vector<float> base;     // n x dim, as generated (not normalised)
  std::vector<float> queries;  // nq x dim, held out (another seed)
  std::vector<float> qnorm;    // queries normalised in f32, for hnswlib and raw kitfox
  std::vector<int64_t> truth;  // nq x kK document ids (1-based), exact by double-precision brute force
};

void normalise(const float* v, float* out, uint32_t dim) {
  float n2 = 0;
  for (uint32_t i = 0; i < dim; i++) n2 += v[i] * v[i];
  float inv = 1.0f / std::sqrt(n2);
  for (uint32_t i = 0; i < dim; i++) out[i] = v[i] * inv;
}

// dot in double, eight independent partial sums (vectorisable without
// reassociation).
double dot_double(const float* a, const float* b, uint32_t dim) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t i = 0;
  for (; i + 8 <= dim; i += 8)
    for (int j = 0; j < 8; j++) s[j] += (double)a[i + j] * (double)b[i + j];
  double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < dim; i++) t += (double)a[i] * (double)b[i];
  return t;
}

// Exact top-k by cosine distance, 1 - a.b / (|a| |b|), all in double; ties by id.
void ground_truth(Dataset& d, int threads) {
  std::vector<double> inv(d.n);
  for (size_t i = 0; i < d.n; i++) inv[i] = 1.0 / std::sqrt(dot_double(&d.base[i * d.dim], &d.base[i * d.dim], d.dim));
  d.truth.assign(d.nq * kK, 0);
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t q; (q = next.fetch_add(1)) < d.nq;) {
      const float* qv = &d.queries[q * d.dim];
      double qinv = 1.0 / std::sqrt(dot_double(qv, qv, d.dim));
      std::pair<double, size_t> best[kK];
      size_t have = 0;
      for (size_t i = 0; i < d.n; i++) {
        double dist = 1.0 - dot_double(qv, &d.base[i * d.dim], d.dim) * qinv * inv[i];
        if (have == kK && dist >= best[kK - 1].first) continue;
        size_t pos = have < kK ? have++ : kK - 1;
        while (pos > 0 && best[pos - 1].first > dist) {
          best[pos] = best[pos - 1];
          pos--;
        }
        best[pos] = {dist, i};
      }
      for (size_t j = 0; j < kK; j++) d.truth[q * kK + j] = (int64_t)best[j].second + 1;
    }
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; t++) ts.emplace_back(run);
  run();
  for (auto& t : ts) t.join();
}

// Fraction of the true top-10 of query q found among `ids`.
double recall_of(const Dataset& d, size_t q, const std::vector<int64_t>& ids) {
  size_t hit = 0;
  for (size_t j = 0; j < kK; j++)
    if (std::find(ids.begin(), ids.end(), d.truth[q * kK + j]) != ids.end()) hit++;
  return (double)hit / kK;
}

// ---------------------------------------------------------------- hnswlib

using Hnswlib = hnswlib::HierarchicalNSW<float>;

// hnswlib has no cosine space: InnerProductSpace (distance 1 - a.b) over
// vectors normalised on the way in, as its Python binding does for 'cosine'.
// The normalisation is inside the timed loop, as kitfox's is.
std::unique_ptr<Hnswlib> hnswlib_build(hnswlib::InnerProductSpace& space, const Dataset& d, int threads) {
  auto h = std::make_unique<Hnswlib>(&space, d.n, kM, kEfConstruction, 100);
  std::atomic<size_t> next{0};
  auto run = [&] {
    std::vector<float> buf(d.dim);
    for (size_t i; (i = next.fetch_add(1)) < d.n;) {
      normalise(&d.base[i * d.dim], buf.data(), d.dim);
      h->addPoint(buf.data(), (hnswlib::labeltype)(i + 1));
    }
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; t++) ts.emplace_back(run);
  run();
  for (auto& t : ts) t.join();
  return h;
}

void hnswlib_query(const Hnswlib& h, const float* q, std::vector<int64_t>* ids) {
  auto pq = h.searchKnn(q, kK);
  ids->resize(pq.size());
  for (size_t i = pq.size(); i-- > 0;) {
    (*ids)[i] = (int64_t)pq.top().second;
    pq.pop();
  }
}

double hnswlib_recall(Hnswlib& h, const Dataset& d, size_t ef) {
  h.setEf(ef);
  std::vector<int64_t> ids;
  double sum = 0;
  for (size_t q = 0; q < d.nq; q++) {
    hnswlib_query(h, &d.qnorm[q * d.dim], &ids);
    sum += recall_of(d, q, ids);
  }
  return sum / (double)d.nq;
}

// ---------------------------------------------------------------- kitfox: the index alone

HnswParams kitfox_params() {
  HnswParams p;
  p.metric = Metric::Cosine;
  p.m = kM;
  p.ef_construction = kEfConstruction;
  p.ef_search = 100;
  return p;
}

// As the engine does it for `put` records of kBatch documents: prepare
// (check, round to f16), put, and link_pending after every kBatch
// documents, so the graph is the one the engine builds from the same puts.
std::unique_ptr<HnswIndex> kitfox_index_build(const Dataset& d, bool f16, int threads) {
  auto idx = std::make_unique<HnswIndex>(d.dim, f16, kitfox_params());
  std::vector<float> prepared;
  for (size_t i = 0; i < d.n; i++) {
    kitfox::Status st = idx->prepare(&d.base[i * d.dim], &prepared, "e");
    if (!st.is_ok()) die("prepare: " + st.to_string());
    idx->put((int64_t)i + 1, prepared.data());
    if ((i + 1) % kBatch == 0 || i + 1 == d.n) idx->link_pending(threads);
  }
  return idx;
}

const std::function<bool(uint32_t)> kAcceptAll;

void kitfox_raw_query(const HnswIndex& idx, const float* q, size_t ef, std::vector<Hit>* hits,
                      std::vector<int64_t>* ids) {
  idx.search(q, kK, ef, kAcceptAll, hits);
  ids->clear();
  for (const Hit& h : *hits) idx.docs_of(h.node, ids);
}

// Queries prepared by the index (`prepare_query`: normalised in f32, as the engine does).
std::vector<float> kitfox_prepared_queries(const Dataset& d, bool f16) {
  HnswIndex shape(d.dim, false, kitfox_params());
  (void)f16;
  std::vector<float> out(d.nq * d.dim), tmp;
  for (size_t q = 0; q < d.nq; q++) {
    kitfox::Status st = shape.prepare_query(&d.queries[q * d.dim], &tmp, "q");
    if (!st.is_ok()) die("prepare query: " + st.to_string());
    std::copy(tmp.begin(), tmp.end(), out.begin() + q * d.dim);
  }
  return out;
}

double kitfox_raw_recall(const HnswIndex& idx, const Dataset& d, const std::vector<float>& pq, size_t ef) {
  std::vector<Hit> hits;
  std::vector<int64_t> ids;
  double sum = 0;
  for (size_t q = 0; q < d.nq; q++) {
    kitfox_raw_query(idx, &pq[q * d.dim], ef, &hits, &ids);
    sum += recall_of(d, q, ids);
  }
  return sum / (double)d.nq;
}

// ---------------------------------------------------------------- kitfox: the engine

OpenOptions engine_options() {
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.auto_checkpoint = false;
  return o;
}

std::unique_ptr<Database> engine_open(kitfox::FileSystem& fs, const std::string& path) {
  auto r = Database::open(fs, path, engine_options());
  if (!r.is_ok()) die("kitfox open " + path + ": " + r.status().to_string());
  return std::move(r.value());
}

kitfox::QueryResult engine_exec(Database& db, std::string_view text, const std::vector<Value>& params = {}) {
  auto r = db.query(text, params);
  if (!r.is_ok()) die("kitfox '" + std::string(text.substr(0, 80)) + "': " + r.status().to_string());
  return std::move(r.value());
}

void engine_fresh(const std::string& path) {
  remove_file(path);
  remove_file(path + "~");
}

std::string type_text(uint32_t dim, bool f16) { return fmt("vector<%u%s>", dim, f16 ? ", f16" : ""); }
std::string hnsw_text() { return fmt("@hnsw(cosine, m=%u, ef_construction=%u)", kM, kEfConstruction); }

// One params vector per `put d $1`: {Value::list([{e: vector}, ...])}.
std::vector<std::vector<Value>> put_params(const Dataset& d) {
  std::vector<std::vector<Value>> out;
  for (size_t i = 0; i < d.n; i += kBatch) {
    size_t end = std::min(d.n, i + kBatch);
    std::vector<Value> docs;
    docs.reserve(end - i);
    for (size_t k = i; k < end; k++) {
      Value o = Value::object();
      o.append("e", Value::vector(std::vector<float>(&d.base[k * d.dim], &d.base[(k + 1) * d.dim])));
      docs.push_back(std::move(o));
    }
    std::vector<Value> p;
    p.push_back(Value::list(std::move(docs)));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::vector<Value>> query_params(const Dataset& d) {
  std::vector<std::vector<Value>> out(d.nq);
  for (size_t q = 0; q < d.nq; q++)
    out[q].push_back(Value::vector(std::vector<float>(&d.queries[q * d.dim], &d.queries[(q + 1) * d.dim])));
  return out;
}

void ids_of(const kitfox::QueryResult& r, std::vector<int64_t>* ids) {
  ids->clear();
  for (const Value& row : r.rows) ids->push_back(row.get("id")->as_int());
}

std::string near_text(size_t ef) { return fmt("get d select id near e $1 ef %zu limit %zu", ef, kK); }

double engine_recall(Database& db, const Dataset& d, const std::vector<std::vector<Value>>& qp, size_t ef) {
  std::string text = near_text(ef);
  std::vector<int64_t> ids;
  double sum = 0;
  for (size_t q = 0; q < d.nq; q++) {
    ids_of(engine_exec(db, text, qp[q]), &ids);
    sum += recall_of(d, q, ids);
  }
  return sum / (double)d.nq;
}

struct EngineLoad {
  double put_s = 0, checkpoint_s = 0, close_s = 0;
  uint64_t file_bytes = 0;
  PeakRss mem;  // the process, from the open before the puts to the end of close()
};

// Creates `d` (with or without the index), puts every batch, then
// checkpoint() (unless !checkpoint) and close(). With auto_checkpoint off,
// close() does not checkpoint by itself: the file would stay a write log
// that open replays (re-linking every vector). `before_close` runs on the
// open database after the puts (untimed).
EngineLoad engine_load(kitfox::FileSystem& fs, const std::string& path, const Dataset& d, bool f16, bool with_index,
                       const std::vector<std::vector<Value>>& params, const std::string& probe_name,
                       const std::function<void(Database&)>& before_close = {}, bool checkpoint = true) {
  EngineLoad r;
  std::unique_ptr<Database> db;
  static constexpr std::string_view kPut = "put d $1";
  measured(probe_name, [&](int) {
    if (db) {
      (void)db->close();
      db.reset();
    }
    engine_fresh(path);
    r.mem.begin();
    db = engine_open(fs, path);
    engine_exec(*db, "create collection d (e " + type_text(d.dim, f16) + (with_index ? " " + hnsw_text() : "") + ")");
    auto t0 = Clock::now();
    for (const auto& pp : params) engine_exec(*db, kPut, pp);
    r.put_s = seconds_since(t0);
  });
  if (before_close) before_close(*db);
  if (checkpoint) {
    auto t1 = Clock::now();
    kitfox::Status cs = db->checkpoint();
    r.checkpoint_s = seconds_since(t1);
    if (!cs.is_ok()) die("kitfox checkpoint: " + cs.to_string());
  }
  auto t1 = Clock::now();
  kitfox::Status st = db->close();
  r.close_s = seconds_since(t1);
  if (!st.is_ok()) die("kitfox close: " + st.to_string());
  r.mem.end();
  db.reset();
  r.file_bytes = file_size(path);
  return r;
}

// Runs f with this thread (and the threads it starts) on one CPU.
template <typename F>
void on_one_cpu(const F& f, unsigned* seen_hw = nullptr) {
  cpu_set_t old, one;
  if (::sched_getaffinity(0, sizeof old, &old) != 0) die("sched_getaffinity failed");
  int cpu = ::sched_getcpu();
  if (cpu < 0) cpu = 0;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (::sched_setaffinity(0, sizeof one, &one) != 0) die("sched_setaffinity failed");
  if (seen_hw) *seen_hw = std::thread::hardware_concurrency();
  f();
  ::sched_setaffinity(0, sizeof old, &old);
}

// ---------------------------------------------------------------- memory bandwidth

struct Bandwidth {
  double read_gbs = 0;  // sum loop over 1 GiB, one thread, best of 3
  double copy_gbs = 0;  // memcpy 512 MiB -> 512 MiB: (read + write bytes) / time, best of 3
};

Bandwidth measure_bandwidth() {
  Bandwidth b;
  const size_t bytes = (size_t)1 << 30;
  std::vector<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
  volatile uint64_t sink = 0;
  for (int r = 0; r < 3; r++) {
    auto t0 = Clock::now();
    uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < buf.size(); i += 8)
      for (int j = 0; j < 8; j++) s[j] += buf[i + j];
    double t = seconds_since(t0);
    sink = sink + s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    b.read_gbs = std::max(b.read_gbs, (double)bytes / t / 1e9);
  }
  const size_t half = bytes / 2;
  char* src = reinterpret_cast<char*>(buf.data());
  char* dst = src + half;
  for (int r = 0; r < 3; r++) {
    auto t0 = Clock::now();
    std::memcpy(dst, src, half);
    double t = seconds_since(t0);
    sink = sink + (uint64_t)dst[half / 3];
    b.copy_gbs = std::max(b.copy_gbs, 2.0 * (double)half / t / 1e9);
  }
  (void)sink;
  return b;
}

// ---------------------------------------------------------------- results

struct BuildRow {
  std::string engine;  // "hnswlib" or "kitfox"
  std::string what;
  std::string threads;
  double seconds = 0;
  double recall = -1;   // recall@10 at ef 100 of the graph it built
  std::string note;
  PeakRss mem;          // the process during the build (for engine loads: open to close)
  double rows_per_s(size_t n) const { return seconds > 0 ? (double)n / seconds : 0; }
};

struct SearchPoint {
  size_t ef = 0;
  double p50_us = 0, p99_us = 0, mean_us = 0, recall = 0;
};

struct Reopen {
  double open_s = 0, first_s = 0, both_s = 0;  // medians of 5
  std::vector<double> both_runs;
  double open_noindex_s = 0;                   // open of the same data without an index, median of 5
  double create_index_s = 0;                   // create index on it (all threads)
  double hl_save_s = 0, hl_load_s = 0, hl_first_s = 0;
  uint64_t hl_file = 0;
  uint64_t file_with = 0, file_without = 0;    // kitfox files after close
  uint64_t image_bytes = 0, memory_bytes = 0;
  double first_put_s = 0, second_put_s = 0;    // after open + a near, into a copy of the file (median of 3)
  double replay_open_s = -1;                   // open of the write log alone (no checkpoint), 128 only
  uint64_t tail_file = 0;
  PeakRss kf_mem, hl_mem;                      // open/load + first search, last round
};

struct ConfigResult {
  uint32_t dim = 0;
  bool f16 = false;
  std::string name;
  size_t n = 0;
  std::vector<BuildRow> builds;
  double engine_put_ckpt_s = 0, engine_put_close_s = 0;
  double engine_noindex_put_s = 0, engine_noindex_close_s = 0;
  unsigned pinned_hw = 0;
  bool graphs_identical = false;        // HnswIndex built on 1 and on all threads
  size_t same_as_engine = 0;            // queries where the engine's ids equal the raw index's (ef 100)
  std::vector<SearchPoint> kq, kraw, hl;  // hl empty for f16 (see the f32 run)
  double exact_query_s = 0, exact_raw_s = 0, exact_recall = 0;
  size_t exact_n = 0;
  uint64_t vector_bytes = 0;            // bytes of the vector table scanned by exact
  Reopen reopen;
  PeakRss query_mem;                    // near sweep + exact: engine, raw index and hnswlib all in memory
};

// ---------------------------------------------------------------- options

struct Options {
  size_t rows = 100000;
  size_t queries = 1000;
  uint32_t clusters = 40;
  size_t exact = 100;
  bool quick = false;
  bool no768 = false;
  std::string dir = "/tmp";
  std::string out;
  std::string svg;
  bool keep = false;
  double wait_quiet = 0;
  int retry_busy = 0;
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: kitfox_vector_bench [--quick] [--rows N] [--queries N] [--clusters N] [--exact N] [--no-768]\n"
               "                           [--dir PATH] [--out PATH] [--svg DIR] [--wait-quiet S] [--retry-busy N] [--keep]\n"
               "  --quick         20,000 rows, 128 dimensions only\n"
               "  --rows N        rows per data set (default 100,000; overrides --quick)\n"
               "  --queries N     held-out queries (default 1,000)\n"
               "  --clusters N    clusters of the generator (default 40)\n"
               "  --exact N       queries timed for `near ... exact` (default 100)\n"
               "  --no-768        skip the 768-dimension data sets\n"
               "  --dir PATH      where the fresh data directory is made (default /tmp); removed at the end\n"
               "  --out PATH      also write the Markdown report to PATH\n"
               "  --svg DIR       write vector-recall.svg, vector-build.svg, vector-reopen.svg into DIR\n"
               "  --wait-quiet S  before each measured block, wait up to S seconds for other processes to go idle\n"
               "  --retry-busy N  measure a block again (up to N times) when other processes used > 0.25 cores during it\n"
               "  --keep          keep the data directory\n");
}

size_t parse_count(const std::string& flag, const char* s) {
  size_t v;
  if (!parse_positive(s, &v)) die(flag + " needs a positive integer, got '" + s + "'");
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
    else if (a == "--rows") { o.rows = parse_count(a, value()); rows_given = true; }
    else if (a == "--queries") o.queries = parse_count(a, value());
    else if (a == "--clusters") o.clusters = (uint32_t)parse_count(a, value());
    else if (a == "--exact") o.exact = parse_count(a, value());
    else if (a == "--no-768") o.no768 = true;
    else if (a == "--dir") o.dir = value();
    else if (a == "--out") o.out = value();
    else if (a == "--svg") o.svg = value();
    else if (a == "--wait-quiet") o.wait_quiet = (double)parse_count(a, value());
    else if (a == "--retry-busy") o.retry_busy = (int)parse_count(a, value());
    else if (a == "--keep") o.keep = true;
    else if (a == "-h" || a == "--help") { usage(stdout); std::exit(0); }
    else { usage(stderr); die("unknown argument '" + a + "'"); }
  }
  if (o.quick) {
    if (!rows_given) o.rows = 20000;
    o.no768 = true;
  }
  return o;
}

// ---------------------------------------------------------------- one data set

struct Shared {
  // The hnswlib results of the 768 f32 run, the reference for 768 f16.
  std::vector<BuildRow> hl_builds;
  std::vector<SearchPoint> hl_search;
  double hl_save_s = 0, hl_load_s = 0, hl_first_s = 0;
  uint64_t hl_file = 0;
  PeakRss hl_load_mem;
};

ConfigResult run_config(const Options& opt, kitfox::FileSystem& fs, const std::string& dir, const Dataset& d, bool f16,
                        Shared* shared) {
  ConfigResult res;
  res.dim = d.dim;
  res.f16 = f16;
  res.n = d.n;
  res.name = fmt("%s x %u %s", grouped((double)d.n).c_str(), d.dim, f16 ? "f16" : "f32");
  const int all = (int)std::max(1u, std::thread::hardware_concurrency());
  const std::string allt = fmt("all (%d)", all);
  const bool run_hnswlib = !f16;
  progress("== " + res.name);

  hnswlib::InnerProductSpace space(d.dim);
  std::unique_ptr<Hnswlib> h1;
  const std::vector<float> pq = kitfox_prepared_queries(d, f16);

  // -------- 2. build
  if (run_hnswlib) {
    progress("  build: hnswlib, 1 thread");
    BuildRow b{"hnswlib", "`addPoint` loop", "1", 0, -1, "", {}};
    measured(res.name + ": hnswlib build, 1 thread", [&](int) {
      h1.reset();
      b.mem.begin();
      auto t0 = Clock::now();
      h1 = hnswlib_build(space, d, 1);
      b.seconds = seconds_since(t0);
      b.mem.end();
    });
    b.recall = hnswlib_recall(*h1, d, 100);
    progress(fmt("    %.2f s, recall@10 at ef 100 %.4f", b.seconds, b.recall));
    res.builds.push_back(b);

    progress("  build: hnswlib, all threads");
    BuildRow bn{"hnswlib", "`addPoint` from " + std::to_string(all) + " `std::thread`s (ParallelFor pattern)", allt, 0, -1, "", {}};
    {
      std::unique_ptr<Hnswlib> hn;
      measured(res.name + ": hnswlib build, all threads", [&](int) {
        hn.reset();
        bn.mem.begin();
        auto t0 = Clock::now();
        hn = hnswlib_build(space, d, all);
        bn.seconds = seconds_since(t0);
        bn.mem.end();
      });
      bn.recall = hnswlib_recall(*hn, d, 100);
    }
    progress(fmt("    %.2f s, recall@10 at ef 100 %.4f", bn.seconds, bn.recall));
    res.builds.push_back(bn);
  }

  progress("  build: kitfox HnswIndex, link_pending(1)");
  std::unique_ptr<HnswIndex> k1;
  BuildRow kb{"kitfox", "`HnswIndex`: prepare + put, `link_pending(1)` per 1000", "1", 0, -1, "", {}};
  measured(res.name + ": kitfox HnswIndex build, 1 thread", [&](int) {
    k1.reset();
    kb.mem.begin();
    auto t0 = Clock::now();
    k1 = kitfox_index_build(d, f16, 1);
    kb.seconds = seconds_since(t0);
    kb.mem.end();
  });
  kb.recall = kitfox_raw_recall(*k1, d, pq, 100);
  progress(fmt("    %.2f s, recall@10 at ef 100 %.4f", kb.seconds, kb.recall));
  res.builds.push_back(kb);

  progress("  build: kitfox HnswIndex, link_pending(all)");
  BuildRow kbn{"kitfox", fmt("`HnswIndex`: prepare + put, `link_pending(%d)` per 1000", all), allt, 0, -1, "", {}};
  {
    std::unique_ptr<HnswIndex> kn;
    measured(res.name + ": kitfox HnswIndex build, all threads", [&](int) {
      kn.reset();
      kbn.mem.begin();
      auto t0 = Clock::now();
      kn = kitfox_index_build(d, f16, all);
      kbn.seconds = seconds_since(t0);
      kbn.mem.end();
    });
    kbn.recall = kitfox_raw_recall(*kn, d, pq, 100);
    res.graphs_identical = kn->graph_bytes() == k1->graph_bytes();
  }
  kbn.note = res.graphs_identical ? "graph byte-identical to the 1-thread build" : "graph DIFFERS from the 1-thread build";
  progress(fmt("    %.2f s, recall@10 at ef 100 %.4f, %s", kbn.seconds, kbn.recall, kbn.note.c_str()));
  res.builds.push_back(kbn);

  // Engine loads. The parameters are built once, before any timing.
  progress("  engine: building put parameters");
  std::vector<std::vector<Value>> params = put_params(d);
  const std::vector<std::vector<Value>> qp = query_params(d);
  const std::string path = dir + "/vec.kfdb", path_pin = dir + "/pinned.kfdb", path_noidx = dir + "/noindex.kfdb";

  progress("  build: kitfox engine, put d $1 into the @hnsw collection, pinned to one CPU");
  BuildRow ep{"kitfox", "engine: `put d $1` x 1000 docs, @hnsw field, process pinned to 1 CPU", "1 CPU", 0, -1, "", {}};
  {
    EngineLoad l;
    on_one_cpu([&] {
      l = engine_load(fs, path_pin, d, f16, true, params, res.name + ": kitfox engine put, pinned to 1 CPU",
                      [&](Database& db) { ep.recall = engine_recall(db, d, qp, 100); });
    }, &res.pinned_hw);
    ep.seconds = l.put_s;
    ep.mem = l.mem;
    ep.note = fmt("%u engine threads time-share one CPU (hardware_concurrency() still says %u)", res.pinned_hw, res.pinned_hw);
    engine_fresh(path_pin);
  }
  progress(fmt("    %.2f s, recall@10 at ef 100 %.4f", ep.seconds, ep.recall));
  res.builds.push_back(ep);

  progress("  build: kitfox engine, put d $1 into the @hnsw collection");
  BuildRow ea{"kitfox", "engine: `put d $1` x 1000 docs, @hnsw field", allt, 0, -1, "", {}};
  {
    // For 128 dimensions: first close without a checkpoint and time one open
    // of that write-log-only file (it replays the puts, linking every vector
    // again), then checkpoint and close.
    const bool show_replay = d.dim == 128;
    EngineLoad l = engine_load(fs, path, d, f16, true, params, res.name + ": kitfox engine put, all threads", {},
                               !show_replay);
    if (show_replay) {
      res.reopen.tail_file = l.file_bytes;
      std::unique_ptr<Database> db;
      measured(res.name + ": kitfox open of the write log alone (replays the puts)", [&](int) {
        if (db) {
          (void)db->close();  // no checkpoint (auto_checkpoint off): the file stays as it was
          db.reset();
        }
        auto t0 = Clock::now();
        db = engine_open(fs, path);
        res.reopen.replay_open_s = seconds_since(t0);
      });
      auto t1 = Clock::now();
      kitfox::Status cs = db->checkpoint();
      l.checkpoint_s = seconds_since(t1);
      if (!cs.is_ok()) die("kitfox checkpoint: " + cs.to_string());
      auto t2 = Clock::now();
      cs = db->close();
      l.close_s = seconds_since(t2);
      if (!cs.is_ok()) die("kitfox close: " + cs.to_string());
      db.reset();
      l.file_bytes = file_size(path);
    }
    ea.seconds = l.put_s;
    ea.mem = l.mem;
    res.engine_put_ckpt_s = l.checkpoint_s;
    res.engine_put_close_s = l.close_s;
    res.reopen.file_with = l.file_bytes;
    ea.note = fmt("then `checkpoint()` (image with documents, vector table and graph) %s, `close()` %s",
                  ms(l.checkpoint_s).c_str(), ms(l.close_s).c_str());
  }
  progress(fmt("    %.2f s + checkpoint %.2f s + close %.2f s", ea.seconds, res.engine_put_ckpt_s, res.engine_put_close_s));
  res.builds.push_back(ea);

  progress("  build: kitfox engine, load without the index, then create index");
  BuildRow ec{"kitfox", "engine: `create index on d (e) " + hnsw_text() + "` after a load without it", allt, 0, -1, "", {}};
  {
    EngineLoad l = engine_load(fs, path_noidx, d, f16, false, params, res.name + ": kitfox engine put, no index");
    res.engine_noindex_put_s = l.put_s;
    res.engine_noindex_close_s = l.close_s;
    res.reopen.file_without = l.file_bytes;
    // Reopen of the file without the index: one untimed round, then 5.
    std::vector<double> opens;
    std::unique_ptr<Database> db;
    measured(res.name + ": kitfox reopen without the index x 6", [&](int) {
      opens.clear();
      for (int i = 0; i < 6; i++) {
        if (db) {
          (void)db->close();
          db.reset();
        }
        auto t0 = Clock::now();
        db = engine_open(fs, path_noidx);
        double o = seconds_since(t0);
        if (i > 0) opens.push_back(o);
      }
    });
    res.reopen.open_noindex_s = median(opens);
    measured(res.name + ": kitfox engine create index, all threads", [&](int attempt) {
      if (attempt) engine_exec(*db, "drop index on d (e)");
      ec.mem.begin();
      auto t0 = Clock::now();
      engine_exec(*db, "create index on d (e) " + hnsw_text());
      ec.seconds = seconds_since(t0);
      ec.mem.end();
    });
    res.reopen.create_index_s = ec.seconds;
    ec.recall = engine_recall(*db, d, qp, 100);
    ec.note = fmt("the load before it (not counted): %s put + %s checkpoint + %s close", ms(l.put_s).c_str(),
                  ms(l.checkpoint_s).c_str(), ms(l.close_s).c_str());
    (void)db->close();
    db.reset();
    engine_fresh(path_noidx);
  }
  progress(fmt("    create index %.2f s, recall@10 at ef 100 %.4f", ec.seconds, ec.recall));
  res.builds.push_back(ec);
  std::vector<std::vector<Value>>().swap(params);

  // -------- 5. reopen (first, while the file is fresh in the page cache for every round alike)
  progress("  reopen: open + first near");
  {
    std::vector<double> o, f, b;
    measured(res.name + ": kitfox reopen x 6", [&](int) {
    o.clear();
    f.clear();
    b.clear();
    for (int i = 0; i < 6; i++) {
      PeakRss mem;
      mem.begin();
      auto t0 = Clock::now();
      auto db = engine_open(fs, path);
      double to = seconds_since(t0);
      auto t1 = Clock::now();
      auto r = engine_exec(*db, fmt("get d select id near e $1 limit %zu", kK), qp[0]);
      double tf = seconds_since(t1);
      if (r.rows.size() != kK) die("first near after reopen returned " + std::to_string(r.rows.size()) + " rows");
      if (db->open_report().index_rebuilt) die("the index was rebuilt on open: the persisted graph did not load");
      mem.end();
      res.reopen.kf_mem = mem;
      if (i == 5) {
        kitfox::Stats s = db->stats();
        res.reopen.image_bytes = s.image_bytes;
        res.reopen.memory_bytes = s.memory_bytes;
      }
      (void)db->close();
      db.reset();
      if (i > 0) { o.push_back(to); f.push_back(tf); b.push_back(to + tf); }
    }
    });
    res.reopen.open_s = median(o);
    res.reopen.first_s = median(f);
    res.reopen.both_s = median(b);
    res.reopen.both_runs = b;
  }
  progress(fmt("    open %.2f ms + first near %.2f ms", res.reopen.open_s * 1e3, res.reopen.first_s * 1e3));

  // -------- 5b. the first puts after a reopen, into a copy of the file: the
  // graph is read in place from the file until a change copies what it
  // changes (docs/vector-search.md)
  progress("  reopen: the first puts");
  {
    const std::string copy = path + ".put";
    std::vector<double> p1, p2;
    for (int i = 0; i < 4; i++) {
      std::error_code ec;
      std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) die("copy " + path + ": " + ec.message());
      auto db = engine_open(fs, copy);
      (void)engine_exec(*db, fmt("get d select id near e $1 limit %zu", kK), qp[0]);  // a reader came first
      auto t0 = Clock::now();
      (void)engine_exec(*db, "put d {e: $1}", qp[1]);
      double a = seconds_since(t0);
      auto t1 = Clock::now();
      (void)engine_exec(*db, "put d {e: $1}", qp[2]);
      double b = seconds_since(t1);
      (void)db->close();
      db.reset();
      engine_fresh(copy);
      if (i > 0) p1.push_back(a), p2.push_back(b);
    }
    res.reopen.first_put_s = median(p1);
    res.reopen.second_put_s = median(p2);
  }
  progress(fmt("    first put %.2f ms, second %.2f ms", res.reopen.first_put_s * 1e3, res.reopen.second_put_s * 1e3));

  // -------- 3. search sweep
  progress("  near: latency and recall at each ef");
  res.query_mem.begin();
  auto db = engine_open(fs, path);
  {
    std::vector<int64_t> ids, ids2;
    std::vector<Hit> hits;
    // The engine's graph should be the raw index's (same puts, same chunks).
    for (size_t q = 0; q < d.nq; q++) {
      ids_of(engine_exec(*db, near_text(100), qp[q]), &ids);
      kitfox_raw_query(*k1, &pq[q * d.dim], 100, &hits, &ids2);
      if (ids == ids2) res.same_as_engine++;
    }
    const size_t warm = std::min<size_t>(d.nq, 100);
    std::vector<std::vector<double>> tq(std::size(kEfs)), tr(std::size(kEfs)), th(std::size(kEfs));
    std::vector<double> rq(std::size(kEfs)), rr(std::size(kEfs)), rh(std::size(kEfs));
    for (size_t e = 0; e < std::size(kEfs); e++) {
      size_t ef = kEfs[e];
      std::string text = near_text(ef);
      for (size_t q = 0; q < warm; q++) {
        engine_exec(*db, text, qp[q]);
        kitfox_raw_query(*k1, &pq[q * d.dim], ef, &hits, &ids);
        if (h1) {
          h1->setEf(ef);
          hnswlib_query(*h1, &d.qnorm[q * d.dim], &ids);
        }
      }
    }
    measured(res.name + ": near sweep, 3 rounds", [&](int) {
    for (auto* v : {&tq, &tr, &th})
      for (auto& x : *v) x.clear();
    for (int round = 0; round < 3; round++) {
      for (size_t e = 0; e < std::size(kEfs); e++) {
        size_t ef = kEfs[e];
        std::string text = near_text(ef);
        double sq = 0, sr = 0, sh = 0;
        for (size_t q = 0; q < d.nq; q++) {
          auto t0 = Clock::now();
          kitfox::QueryResult r = engine_exec(*db, text, qp[q]);
          tq[e].push_back(seconds_since(t0) * 1e6);
          ids_of(r, &ids);
          sq += recall_of(d, q, ids);
        }
        for (size_t q = 0; q < d.nq; q++) {
          auto t0 = Clock::now();
          kitfox_raw_query(*k1, &pq[q * d.dim], ef, &hits, &ids);
          tr[e].push_back(seconds_since(t0) * 1e6);
          sr += recall_of(d, q, ids);
        }
        if (h1) {
          h1->setEf(ef);
          for (size_t q = 0; q < d.nq; q++) {
            auto t0 = Clock::now();
            hnswlib_query(*h1, &d.qnorm[q * d.dim], &ids);
            th[e].push_back(seconds_since(t0) * 1e6);
            sh += recall_of(d, q, ids);
          }
        }
        if (round == 0) {
          rq[e] = sq / (double)d.nq;
          rr[e] = sr / (double)d.nq;
          rh[e] = sh / (double)d.nq;
        }
      }
    }
    });
    auto point = [&](size_t e, const std::vector<double>& t, double rec) {
      SearchPoint sp;
      sp.ef = kEfs[e];
      sp.p50_us = percentile(t, 50);
      sp.p99_us = percentile(t, 99);
      double sum = 0;
      for (double x : t) sum += x;
      sp.mean_us = sum / (double)t.size();
      sp.recall = rec;
      return sp;
    };
    for (size_t e = 0; e < std::size(kEfs); e++) {
      if (kEfs[e] == 100)  // the engine-built graph's recall, for the build table
        for (BuildRow& b : res.builds)
          if (b.what.rfind("engine: `put", 0) == 0 && b.threads != "1 CPU") b.recall = rq[e];
      res.kq.push_back(point(e, tq[e], rq[e]));
      res.kraw.push_back(point(e, tr[e], rr[e]));
      if (h1) res.hl.push_back(point(e, th[e], rh[e]));
      progress(fmt("    ef %zu: kitfox query p50 %.1f us (recall %.4f), raw %.1f us%s", kEfs[e], res.kq.back().p50_us,
                   rq[e], res.kraw.back().p50_us,
                   h1 ? fmt(", hnswlib %.1f us (recall %.4f)", res.hl.back().p50_us, rh[e]).c_str() : ""));
    }
  }

  // -------- 4. exact
  progress("  near exact");
  {
    res.exact_n = std::min(opt.exact, d.nq);
    res.vector_bytes = (uint64_t)d.n * d.dim * (f16 ? 2 : 4);
    const std::string text = fmt("get d select id near e $1 exact limit %zu", kK);
    std::vector<int64_t> ids;
    std::vector<Hit> hits;
    for (size_t q = 0; q < std::min<size_t>(5, res.exact_n); q++) engine_exec(*db, text, qp[q]);
    std::vector<double> tq, tr;
    double rec = 0;
    measured(res.name + ": near exact", [&](int) {
    tq.clear();
    tr.clear();
    rec = 0;
    for (size_t q = 0; q < res.exact_n; q++) {
      auto t0 = Clock::now();
      kitfox::QueryResult r = engine_exec(*db, text, qp[q]);
      tq.push_back(seconds_since(t0));
      ids_of(r, &ids);
      rec += recall_of(d, q, ids);
    }
    for (size_t q = 0; q < res.exact_n; q++) {
      auto t0 = Clock::now();
      k1->exact(&pq[q * d.dim], kK, kAcceptAll, &hits);
      tr.push_back(seconds_since(t0));
    }
    });
    res.exact_query_s = median(tq);
    res.exact_raw_s = median(tr);
    res.exact_recall = rec / (double)res.exact_n;
    progress(fmt("    query %.2f ms, raw %.2f ms, recall %.4f", res.exact_query_s * 1e3, res.exact_raw_s * 1e3,
                 res.exact_recall));
  }
  res.query_mem.end();
  (void)db->close();
  db.reset();
  k1.reset();

  // -------- 5b. hnswlib save/load
  if (h1) {
    progress("  hnswlib saveIndex / loadIndex");
    const std::string hp = dir + "/hnswlib.bin";
    std::vector<double> lo, fi;
    std::vector<int64_t> ids;
    measured(res.name + ": hnswlib save + load x 6", [&](int) {
    remove_file(hp);
    lo.clear();
    fi.clear();
    auto t0 = Clock::now();
    h1->saveIndex(hp);
    res.reopen.hl_save_s = seconds_since(t0);
    res.reopen.hl_file = file_size(hp);
    for (int i = 0; i < 6; i++) {
      PeakRss mem;
      mem.begin();
      auto t1 = Clock::now();
      auto h = std::make_unique<Hnswlib>(&space, hp);
      double tl = seconds_since(t1);
      auto t2 = Clock::now();
      h->setEf(100);
      hnswlib_query(*h, &d.qnorm[0], &ids);
      double tf = seconds_since(t2);
      if (ids.size() != kK) die("hnswlib search after load failed");
      mem.end();
      res.reopen.hl_mem = mem;
      if (i > 0) { lo.push_back(tl); fi.push_back(tf); }
    }
    });
    h1.reset();
    res.reopen.hl_load_s = median(lo);
    res.reopen.hl_first_s = median(fi);
    remove_file(hp);
    progress(fmt("    save %.0f ms, load %.1f ms", res.reopen.hl_save_s * 1e3, res.reopen.hl_load_s * 1e3));
  }
  engine_fresh(path);

  if (!f16 && d.dim == 768) {
    for (const BuildRow& b : res.builds)
      if (b.engine == "hnswlib") shared->hl_builds.push_back(b);
    shared->hl_search = res.hl;
    shared->hl_save_s = res.reopen.hl_save_s;
    shared->hl_load_s = res.reopen.hl_load_s;
    shared->hl_first_s = res.reopen.hl_first_s;
    shared->hl_file = res.reopen.hl_file;
    shared->hl_load_mem = res.reopen.hl_mem;
  }
  return res;
}

// ---------------------------------------------------------------- SVG

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

const char* kColHnswlib = "#1c7ed6";
const char* kColKitfox = "#e8590c";
const char* kColKitfoxRaw = "#f59f00";
const char* kColKitfoxLight = "#ffa94d";

// "nice" upper bound for an axis
double nice_max(double v) {
  if (v <= 0) return 1;
  double e = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (m * e >= v) return m * e;
  return 10 * e;
}

std::string svg_text(double x, double y, const std::string& s, const char* anchor = "start", int size = 11,
                     const char* colour = "#222", const char* weight = "normal") {
  return fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\" fill=\"%s\" font-weight=\"%s\">%s</text>\n", x,
             y, size, anchor, colour, weight, esc(s).c_str());
}

struct Series {
  std::string name;
  const char* colour;
  std::vector<SearchPoint> pts;
  bool dashed = false;
};

// Latency (p50, y) against recall@10 (x), one panel per data set.
std::string svg_recall(const std::vector<std::pair<std::string, std::vector<Series>>>& panels, const std::string& title) {
  const double pw = 430, ph = 320, ml = 62, mr = 50, mt = 74, mb = 52;
  const double W = std::max(860.0, ml + panels.size() * (pw + mr) + 10), H = mt + ph + mb + 10;
  std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                      "font-family=\"Helvetica, Arial, sans-serif\">\n", W, H, W, H);
  s += fmt("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
  s += svg_text(ml, 22, title, "start", 15, "#111", "bold");
  s += svg_text(ml, 40, "top-10 near, one thread: p50 latency per query (lower is better) against recall@10 (right is better);", "start", 11, "#555");
  s += svg_text(ml, 54, "points are ef = 40, 64, 100, 200; the 768 f16 panel's hnswlib line is its f32 index on the same data", "start", 11, "#555");
  for (size_t pi = 0; pi < panels.size(); pi++) {
    const auto& [pname, series] = panels[pi];
    double x0 = ml + pi * (pw + mr), y0 = mt;
    double rmin = 1, lmax = 0;
    for (const Series& se : series)
      for (const SearchPoint& p : se.pts) {
        rmin = std::min(rmin, p.recall);
        lmax = std::max(lmax, p.p50_us);
      }
    // x from a little below the lowest recall to 1, ticks at a step giving <= 8 of them
    double pad = std::max(0.004, (1 - rmin) * 0.08), step = 0.1;
    for (double st : {0.002, 0.005, 0.01, 0.02, 0.05, 0.1})
      if ((1 - (rmin - pad)) / st <= 8) {
        step = st;
        break;
      }
    double xlo = std::max(0.0, std::floor((rmin - pad) / step + 1e-9) * step), xhi = 1.0 + pad / 2;
    double yhi = nice_max(lmax * 1.08);
    auto X = [&](double r) { return x0 + (r - xlo) / (xhi - xlo) * pw; };
    auto Y = [&](double us) { return y0 + ph - us / yhi * ph; };
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999\"/>\n", x0, y0, pw, ph);
    s += svg_text(x0 + pw / 2, y0 - 6, pname, "middle", 12, "#111", "bold");
    for (int i = 0; i <= 5; i++) {
      double v = yhi * i / 5;
      s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x0, Y(v), x0 + pw, Y(v));
      s += svg_text(x0 - 5, Y(v) + 4, v >= 100 ? fmt("%.0f", v) : fmt("%.3g", v), "end", 10, "#444");
    }
    for (int i = 0;; i++) {
      double r = xlo + i * step;
      if (r > 1.0 + 1e-9) break;
      s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(r), y0, X(r), y0 + ph);
      s += svg_text(X(r), y0 + ph + 15, fmt(step < 0.01 ? "%.3f" : "%.2f", r), "middle", 10, "#444");
    }
    s += svg_text(x0 + pw / 2, y0 + ph + 34, "recall@10", "middle", 11, "#333");
    if (pi == 0)
      s += fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 %.1f %.1f)\">p50 latency (µs)</text>\n",
               x0 - 44, y0 + ph / 2, x0 - 44, y0 + ph / 2);
    for (const Series& se : series) {
      if (se.pts.empty()) continue;
      std::string path;
      for (const SearchPoint& p : se.pts) path += fmt("%s%.1f,%.1f", path.empty() ? "" : " ", X(p.recall), Y(p.p50_us));
      s += fmt("<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", path.c_str(), se.colour,
               se.dashed ? " stroke-dasharray=\"5,3\"" : "");
      for (const SearchPoint& p : se.pts) {
        s += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s ef %zu: recall %.4f, p50 %.1f µs, p99 %.1f µs</title></circle>\n",
                 X(p.recall), Y(p.p50_us), se.colour, esc(se.name).c_str(), p.ef, p.recall, p.p50_us, p.p99_us);
        s += svg_text(X(p.recall) + 5, Y(p.p50_us) - 5, std::to_string(p.ef), "start", 9, se.colour);
      }
    }
    double ly = y0 + 14;
    for (const Series& se : series) {
      if (se.pts.empty()) continue;
      s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x0 + 10, ly - 4,
               x0 + 30, ly - 4, se.colour, se.dashed ? " stroke-dasharray=\"5,3\"" : "");
      s += svg_text(x0 + 35, ly, se.name, "start", 10, "#222");
      ly += 15;
    }
  }
  s += "</svg>\n";
  return s;
}

struct Bar {
  std::string label;
  double value;
  const char* colour;
  std::string shown;
};
struct BarGroup {
  std::string title;
  std::vector<Bar> bars;
};

// Horizontal bars, grouped; log scale when `log` (values > 0).
std::string svg_bars(const std::string& title, const std::string& subtitle, const std::vector<BarGroup>& groups,
                     const std::string& axis, bool log) {
  const double lw = 330, bw = 420, bh = 16, gap = 4, ml = 10, mt = 50;
  double vmax = 0, vmin = 1e300;
  size_t nbars = 0;
  for (const BarGroup& g : groups)
    for (const Bar& b : g.bars) {
      vmax = std::max(vmax, b.value);
      if (b.value > 0) vmin = std::min(vmin, b.value);
      nbars++;
    }
  double H = mt + groups.size() * 26 + nbars * (bh + gap) + 50, W = ml + lw + bw + 110;
  double lo = 0, hi = nice_max(vmax * 1.05);
  if (log) {
    lo = std::pow(10.0, std::floor(std::log10(vmin)));
    if (vmin < 3 * lo) lo /= 10;  // keep the shortest bar visible
    hi = std::pow(10.0, std::ceil(std::log10(vmax * 1.01)));
  }
  auto L = [&](double v) {
    if (!log) return v / hi * bw;
    return (std::log10(std::max(v, lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * bw;
  };
  std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                      "font-family=\"Helvetica, Arial, sans-serif\">\n", W, H, W, H);
  s += fmt("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
  s += svg_text(ml, 20, title, "start", 15, "#111", "bold");
  s += svg_text(ml, 37, subtitle, "start", 11, "#555");
  double x0 = ml + lw, y = mt;
  double ytop = y;
  for (const BarGroup& g : groups) {
    y += 16;
    s += svg_text(ml, y, g.title, "start", 12, "#111", "bold");
    y += 8;
    for (const Bar& b : g.bars) {
      s += svg_text(x0 - 6, y + bh - 4, b.label, "end", 10, "#222");
      double w = std::max(1.0, L(b.value));
      s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x0, y, w, bh, b.colour);
      s += svg_text(x0 + w + 4, y + bh - 4, b.shown, "start", 10, "#222");
      y += bh + gap;
    }
    y += 2;
  }
  // axis
  s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n", x0, ytop, x0, y);
  s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n", x0, y, x0 + bw, y);
  if (log) {
    for (double v = lo; v <= hi * 1.001; v *= 10) {
      s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0 + L(v), ytop, x0 + L(v), y);
      s += svg_text(x0 + L(v), y + 14, v >= 1 ? grouped(v) : fmt("%g", v), "middle", 10, "#444");
    }
  } else {
    for (int i = 0; i <= 4; i++) {
      double v = hi * i / 4;
      s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0 + L(v), ytop, x0 + L(v), y);
      s += svg_text(x0 + L(v), y + 14, grouped(v), "middle", 10, "#444");
    }
  }
  s += svg_text(x0 + bw / 2, y + 30, axis, "middle", 11, "#333");
  s += "</svg>\n";
  return s;
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0) die("cannot write " + path);
  progress("  wrote " + path);
}

// The three charts, from a run's results.
void write_svgs(const std::string& dir, const std::vector<ConfigResult>& results, const Shared& shared, size_t N,
                uint32_t clusters) {
  auto hl_search_of = [&](const ConfigResult& r) -> const std::vector<SearchPoint>& { return r.f16 ? shared.hl_search : r.hl; };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::vector<std::pair<std::string, std::vector<Series>>> panels;
  for (const ConfigResult& r : results) {
    std::vector<Series> ss;
    ss.push_back({"kitfox Database::query", kColKitfox, r.kq});
    ss.push_back({"kitfox HnswIndex::search (raw)", kColKitfoxRaw, r.kraw, true});
    ss.push_back({r.f16 ? "hnswlib searchKnn (f32 index)" : "hnswlib searchKnn", kColHnswlib, hl_search_of(r)});
    panels.push_back({r.name, ss});
  }
  write_file(dir + "/vector-recall.svg",
             svg_recall(panels, fmt("kitfox vs hnswlib: near top-10, m=16, ef_construction=200, %u clusters", clusters)));

  std::vector<BarGroup> bg;
  for (const ConfigResult& r : results) {
    BarGroup g{r.name, {}};
    std::vector<BuildRow> rows;
    if (r.f16)
      for (const BuildRow& b : shared.hl_builds) rows.push_back(b);
    for (const BuildRow& b : r.builds) rows.push_back(b);
    for (const BuildRow& b : rows) {
      std::string label;
      const char* col = kColKitfox;
      if (b.engine == "hnswlib") {
        label = std::string("hnswlib") + (r.f16 ? " (f32)" : "") + ", " + b.threads + " thr";
        col = kColHnswlib;
      } else if (b.what.rfind("`HnswIndex`", 0) == 0) {
        label = "kitfox HnswIndex, " + b.threads + " thr";
        col = kColKitfoxRaw;
      } else if (b.what.find("create index") != std::string::npos) {
        label = "kitfox create index after load, " + b.threads + " thr";
        col = kColKitfoxLight;
      } else {
        label = "kitfox engine put, " + (b.threads == "1 CPU" ? std::string("pinned to 1 CPU") : b.threads + " thr");
      }
      g.bars.push_back({label, b.rows_per_s(N), col, grouped(b.rows_per_s(N)) + (b.recall >= 0 ? fmt(" (recall %.3f)", b.recall) : "")});
    }
    bg.push_back(g);
  }
  write_file(dir + "/vector-build.svg",
             svg_bars("HNSW build rate: kitfox vs hnswlib (m=16, ef_construction=200)",
                      "rows/s, higher is better; recall@10 at ef 100 of the graph built in brackets", bg, "rows/s", false));

  std::vector<BarGroup> rg;
  for (const ConfigResult& r : results) {
    const Reopen& o = r.reopen;
    BarGroup g{r.name, {}};
    double hl_load = r.f16 ? shared.hl_load_s + shared.hl_first_s : o.hl_load_s + o.hl_first_s;
    double rebuild = o.open_noindex_s + o.create_index_s;
    g.bars.push_back({"kitfox open + first near (graph persisted)", o.both_s * 1e3, kColKitfox, ms(o.both_s)});
    g.bars.push_back({"kitfox open + create index (rebuild)", rebuild * 1e3, kColKitfoxLight, ms(rebuild)});
    g.bars.push_back({std::string("hnswlib loadIndex + first search") + (r.f16 ? " (f32)" : ""), hl_load * 1e3, kColHnswlib,
                      ms(hl_load)});
    rg.push_back(g);
  }
  write_file(dir + "/vector-reopen.svg",
             svg_bars("Reopen: kitfox vs hnswlib", "warm page cache, median of 5; lower is better; log scale; target for 100k x 128: < 10 ms",
                      rg, "milliseconds (log scale)", true));
}

}  // namespace

// ---------------------------------------------------------------- main

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  std::string command = "kitfox_vector_bench";
  for (int i = 1; i < argc; i++) command += std::string(" ") + argv[i];
  g_wait_quiet = opt.wait_quiet;
  g_retry_busy = opt.retry_busy;
  Machine m = describe_machine();
  const double load_at_start = loadavg1();
  const std::string started = utc_now();

  std::string tmpl = opt.dir + "/kitfox-vbench-XXXXXX";
  std::vector<char> tbuf(tmpl.begin(), tmpl.end());
  tbuf.push_back('\0');
  if (!::mkdtemp(tbuf.data())) die("cannot make a directory under " + opt.dir + ": " + std::strerror(errno));
  const std::string dir = tbuf.data();
  if (!opt.keep) g_data_dir = dir;
  auto fs = kitfox::make_posix_file_system();
  const int all = (int)std::max(1u, std::thread::hardware_concurrency());

  progress(fmt("kitfox_vector_bench: %s rows, %zu queries, %u clusters, kernel %s, data in %s (load %.2f)",
               grouped((double)opt.rows).c_str(), opt.queries, opt.clusters, kitfox::kernel_name(), dir.c_str(),
               load_at_start));

  progress("memory bandwidth");
  Bandwidth bw;
  measured("memory bandwidth (sum loop, memcpy)", [&](int) { bw = measure_bandwidth(); });
  progress(fmt("  read %.1f GB/s (sum loop, 1 thread), copy %.1f GB/s (read + write)", bw.read_gbs, bw.copy_gbs));

  std::vector<ConfigResult> results;
  Shared shared;
  std::vector<uint32_t> dims{128};
  if (!opt.no768) dims.push_back(768);
  double gt_seconds = 0;
  for (uint32_t dim : dims) {
    progress(fmt("data: %u dimensions", dim));
    Dataset d;
    d.dim = dim;
    d.n = opt.rows;
    d.nq = opt.queries;
    kitfox::bench::Clustered gen(dim, opt.clusters, kCentreSeed);
    d.base = gen.points(d.n, kDataSeed);
    d.queries = gen.points(d.nq, kQuerySeed);
    d.qnorm.resize(d.queries.size());
    for (size_t q = 0; q < d.nq; q++) normalise(&d.queries[q * dim], &d.qnorm[q * dim], dim);
    auto t0 = Clock::now();
    ground_truth(d, all);
    gt_seconds += seconds_since(t0);
    progress(fmt("  ground truth in %.1f s", seconds_since(t0)));
    results.push_back(run_config(opt, *fs, dir, d, false, &shared));
    if (dim == 768) results.push_back(run_config(opt, *fs, dir, d, true, &shared));
  }

  Bandwidth bw_end;
  measured("memory bandwidth again, at the end", [&](int) { bw_end = measure_bandwidth(); });
  const double load_at_end = loadavg1();

  // ---------------------------------------------------------------- report
  const size_t N = opt.rows;
  std::string md;
  md += fmt("## Vector search (native): kitfox vs hnswlib, %s rows (%s)\n\n", grouped((double)N).c_str(), started.c_str());
  md += "### Machine\n\n| | |\n| --- | --- |\n";
  md += "| CPU | " + m.cpu + " |\n";
  md += fmt("| logical CPUs | %ld (`std::thread::hardware_concurrency()` = %u: the \"all threads\" figures use %d) |\n", m.cpus,
            m.hw_threads, all);
  md += "| CPU flags | " + m.flags + " |\n";
  md += fmt("| RAM | %.1f GiB |\n", m.ram / 1073741824.0);
  md += "| data caches (per CPU 0) | " + (m.caches.empty() ? std::string("unknown") : m.caches) + " |\n";
  md += "| kernel | " + m.kernel + " |\n";
  md += "| compiler | " + m.compiler + " (Release, `-O3`; kitfox built as usual, the benchmark and hnswlib with `-march=native`) |\n";
  md += fmt("| kitfox distance kernel | `%s` (`kitfox::kernel_name()`) |\n", kitfox::kernel_name());
  md += "| hnswlib | Debian `libhnswlib-dev` " + m.hnswlib + ", header-only; SIMD: " + m.hnswlib_simd + " |\n";
  md += fmt("| memory bandwidth, one thread | read %.1f GB/s (sum loop over 1 GiB), copy %.1f GB/s (memcpy 512 MiB, read + write bytes); best of 3; at the end of the run: read %.1f, copy %.1f |\n",
            bw.read_gbs, bw.copy_gbs, bw_end.read_gbs, bw_end.copy_gbs);
  md += fmt("| load average (1 min) | %.2f at the start of the run, %.2f at the end (each measured block: see Conditions) |\n\n",
            load_at_start, load_at_end);

  md += "### Method\n\n";
  md += fmt("- Data: `bench::Clustered(dim, %u clusters, seed %" PRIu64 ")` (centres on the unit sphere, Gaussian noise of norm ~0.25), "
            "%s points from stream %" PRIu64 " and %zu held-out queries from stream %" PRIu64 " (different seed, never in the data). "
            "Data sets: 128 x f32%s. The 768 f16 set is the same data as 768 f32, stored by kitfox as `vector<768, f16>`; "
            "hnswlib has no f16 storage, so its reference there is its 768 f32 build.\n",
            opt.clusters, kCentreSeed, grouped((double)N).c_str(), kDataSeed, opt.queries, kQuerySeed,
            opt.no768 ? "" : ", 768 x f32, 768 x f16");
  md += fmt("- Ground truth: exact top-10 by cosine distance computed by this program's own brute-force loop in double "
            "precision over the original f32 vectors (not by kitfox); %.0f s in all, untimed. recall@10 = |returned ∩ true top-10| / 10, "
            "averaged over all queries; for f16 it is against the f32 truth, so it includes the loss of f16 storage.\n",
            gt_seconds);
  md += fmt("- Both indexes: m = %u, ef_construction = %u, cosine. kitfox: `@hnsw(cosine, m=%u, ef_construction=%u)`, vectors "
            "stored as written with an inverse norm per node (cosine distance 1 - inv * q.v, q normalised). hnswlib: `InnerProductSpace` (distance 1 - a.b) over vectors normalised in f32 inside "
            "the timed loop (what its Python binding does for `cosine`), `HierarchicalNSW(space, N, %u, %u, seed 100)`.\n",
            kM, kEfConstruction, kM, kEfConstruction, kM, kEfConstruction);
  md += fmt("- Build. hnswlib: `addPoint` for every point on one thread; and from %d `std::thread`s taking the next point from an "
            "atomic counter (the pattern of hnswlib's `ParallelFor`). kitfox `HnswIndex` directly: `prepare` (check; f16 rounding) + `put` "
            "per vector and `link_pending(threads)` after every 1,000, exactly what the engine does per `put` record of 1,000 "
            "documents, so it builds the same graph as the engine (checked below). kitfox engine: `Database::open` with "
            "`sync = Off`, `auto_checkpoint = false`; `put d $1` per 1,000 documents, `$1` a `Value::list` of `{e: Value::vector}` "
            "objects built before timing; the engine links each record's vectors on `std::thread::hardware_concurrency()` threads "
            "(%u here) and has no setting for it, so its one-CPU figure pins the whole process to one CPU with `sched_setaffinity` "
            "(the engine still starts %u threads per chunk; they time-share the CPU). \"Index after load\": the same documents put "
            "into a collection without the index, closed and reopened, then `create index on d (e) %s` timed alone. After the puts, "
            "`checkpoint()` (writes the image: documents, vector table and graph) and `close()` are timed separately: with "
            "`auto_checkpoint = false`, `close()` alone does not checkpoint (see Reopen). Each build runs once. "
            "recall@10 of every built graph is measured at ef = 100 on all queries.\n",
            all, m.hw_threads, m.hw_threads, hnsw_text().c_str());
  md += fmt("- `near`: `Database::query(\"get d select id near e $1 ef <ef> limit 10\", {Value::vector(q)})` on the reopened file "
            "(includes parsing, normalising the query, the graph search, reading each hit's document and building the rows); "
            "raw: `HnswIndex::search(q, 10, ef)` + `docs_of` on the index built directly, query normalised beforehand; hnswlib: "
            "`setEf(ef)`, `searchKnn(q, 10)` and popping the queue, query normalised beforehand. One thread. Each query is "
            "timed on its own (steady_clock); 3 rounds over all %zu queries after a 100-query warm-up per ef; p50 and p99 over "
            "the pooled 3 x %zu times; recall from round 1.\n",
            opt.queries, opt.queries);
  md += fmt("- Exact: `get d select id near e $1 exact limit 10` on the first %zu queries (median time), and `HnswIndex::exact` "
            "alone; rate = bytes of the stored vectors (N x dim x 4, or x 2 for f16) / time, against the one-thread read "
            "bandwidth above.\n",
            std::min(opt.exact, opt.queries));
  md += "- Reopen: the file of the engine load with the index, after its `checkpoint()` and `close()`; `Database::open` + the first "
        "`get d select id near e $1 limit 10` (default ef 100), 5 timed rounds after an untimed one, median; the file is in the "
        "OS page cache (warm). Without the persisted graph: `Database::open` of the same documents without the index (median "
        "of 5) + `create index` (the build above), which is what a reopen costs when the graph must be rebuilt from the "
        "documents. hnswlib: `saveIndex` once, `HierarchicalNSW(space, path)` (loadIndex) 5 rounds after 1, median, + first "
        "`searchKnn` at ef 100.\n";
  md += "- Command: `" + command + "`. " +
        (opt.wait_quiet > 0 ? fmt("Before each measured block the program waited (up to %.0f s) until other processes used < 0.15 cores over 2 s. ", opt.wait_quiet) : std::string()) +
        (opt.retry_busy > 0 ? fmt("A block during which other processes used > 0.25 cores was measured again (up to %d times); the tables keep the last attempt. ", opt.retry_busy) : std::string()) + "\n";
  md += "- Conditions: each measured block records the 1-minute load average at its start and end (it includes this program: "
        "~1 on one thread, ~2 on all) and the CPU that *other* processes used during it (busy time from `/proc/stat` minus this "
        "process's `getrusage`, in cores); see the last table.\n\n";

  auto hl_of = [&](const ConfigResult& r, const std::string& threads) -> const BuildRow* {
    const std::vector<BuildRow>& src = r.f16 ? shared.hl_builds : r.builds;
    for (const BuildRow& b : src)
      if (b.engine == "hnswlib" && b.threads == threads) return &b;
    return nullptr;
  };
  auto hl_search_of = [&](const ConfigResult& r) -> const std::vector<SearchPoint>& { return r.f16 ? shared.hl_search : r.hl; };

  // ---- build
  md += "### 1. Build\n\n";
  for (const ConfigResult& r : results) {
    md += fmt("**%s**%s\n\n", r.name.c_str(), r.f16 ? " (hnswlib: its 768 x f32 builds, same data)" : "");
    md += "| build | threads | time | rows/s | recall@10 at ef 100 | rows/s vs hnswlib (same threads) | peak RSS (from) | note |\n";
    md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
    std::vector<BuildRow> rows;
    if (r.f16) {
      for (const BuildRow& b : shared.hl_builds) rows.push_back(b);
      for (auto& b : rows) b.note = "768 x f32 (reference)";
    }
    for (const BuildRow& b : r.builds) rows.push_back(b);
    for (const BuildRow& b : rows) {
      const BuildRow* ref = b.engine == "hnswlib" ? nullptr : hl_of(r, b.threads == "1" || b.threads == "1 CPU" ? "1" : fmt("all (%d)", all));
      md += fmt("| %s %s | %s | %.2f s | %s | %s | %s | %s | %s |\n", b.engine.c_str(), b.what.c_str(), b.threads.c_str(),
                b.seconds, grouped(b.rows_per_s(N)).c_str(), b.recall >= 0 ? fmt("%.4f", b.recall).c_str() : "-",
                ref ? fmt("%.2f", b.rows_per_s(N) / ref->rows_per_s(N)).c_str() : "1.00", b.mem.text().c_str(),
                b.note.c_str());
    }
    md += fmt("\nThe direct `HnswIndex` build on %d threads made a graph %s the one-thread build's. The engine's graph gave "
              "the same top-10 ids as the direct index for %zu of %zu queries at ef 100.\n\n",
              all, r.graphs_identical ? "byte-identical to" : "DIFFERENT from", r.same_as_engine, opt.queries);
  }
  md += "Ratios above 1 mean kitfox builds faster than hnswlib on the same number of threads (the engine's 1-CPU row is "
        "compared with hnswlib on 1 thread).\n\n";
  md += "Peak RSS: the whole process's resident memory at its highest during the build (Linux VmHWM, reset through "
        "`/proc/self/clear_refs` as the build starts); in brackets the RSS it started from, which holds the data set, "
        "the queries and the ground truth, and the indexes this program still keeps for the later measurements: the "
        "1-thread hnswlib index (from its build on) and the 1-thread `HnswIndex` (from its build on). The difference is "
        "about what the build added. The engine rows cover open, the puts, `checkpoint()` and `close()` (with the "
        "untimed recall measurement of the pinned load between them); \"create index\" covers that statement alone, on "
        "the open database of the load without the index.\n\n";

  // ---- search
  md += "### 2. `near` top-10: latency and recall (one thread)\n\n";
  for (const ConfigResult& r : results) {
    const auto& hl = hl_search_of(r);
    md += fmt("**%s**%s\n\n", r.name.c_str(), r.f16 ? " (hnswlib columns: its 768 x f32 index, same data and queries)" : "");
    md += "| ef | kitfox query p50 | p99 | raw `HnswIndex::search` p50 | p99 | hnswlib `searchKnn` p50 | p99 | recall kitfox (query = raw) | recall hnswlib | kitfox query / hnswlib p50 | raw / hnswlib p50 | engine overhead p50 |\n";
    md += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (size_t e = 0; e < r.kq.size(); e++) {
      const SearchPoint &q = r.kq[e], &w = r.kraw[e];
      const SearchPoint* h = e < hl.size() ? &hl[e] : nullptr;
      std::string rec = fmt("%.4f", q.recall);
      if (std::fabs(q.recall - w.recall) > 1e-9) rec += fmt(" (raw %.4f)", w.recall);
      md += fmt("| %zu | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %s | %s | %s | %s | %s | %s | %.1f µs |\n", q.ef, q.p50_us, q.p99_us,
                w.p50_us, w.p99_us, h ? fmt("%.1f µs", h->p50_us).c_str() : "-", h ? fmt("%.1f µs", h->p99_us).c_str() : "-",
                rec.c_str(), h ? fmt("%.4f", h->recall).c_str() : "-", h ? fmt("%.2f", q.p50_us / h->p50_us).c_str() : "-",
                h ? fmt("%.2f", w.p50_us / h->p50_us).c_str() : "-", q.p50_us - w.p50_us);
    }
    md += "\n";
  }
  md += "Ratios above 1 mean kitfox is slower. \"Engine overhead\" is the query's p50 minus the raw search's: parsing the "
        "statement, copying and normalising the query vector, decoding the 10 documents and building the result rows.\n\n";
  md += "Peak RSS during the query phase (this table and the next: the reopened database, the raw `HnswIndex` and the "
        "hnswlib index are all in memory at once, so it is one figure for the process, not per engine): ";
  for (size_t i = 0; i < results.size(); i++)
    md += (i ? "; " : "") + results[i].name + " " + results[i].query_mem.text();
  md += ".\n\n";

  // ---- exact
  md += "### 3. Exact search (`near ... exact limit 10`)\n\n";
  md += "| data set | stored vectors | kitfox query (median) | GB/s | / read bandwidth | `HnswIndex::exact` alone | GB/s | / read bandwidth | recall@10 |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ConfigResult& r : results) {
    double gq = r.vector_bytes / r.exact_query_s / 1e9, gr = r.vector_bytes / r.exact_raw_s / 1e9;
    md += fmt("| %s | %s | %.2f ms | %.1f | %.2f | %.2f ms | %.1f | %.2f | %.4f |\n", r.name.c_str(), mib(r.vector_bytes).c_str(),
              r.exact_query_s * 1e3, gq, gq / bw.read_gbs, r.exact_raw_s * 1e3, gr, gr / bw.read_gbs, r.exact_recall);
  }
  md += fmt("\nRead bandwidth (one thread, sum loop): %.1f GB/s. The exact scan is single-threaded.\n\n", bw.read_gbs);

  // ---- reopen
  md += "### 4. Reopen and file size\n\n";
  md += "| data set | kitfox open | first near | open + first near (median of 5) | without the persisted graph: open + `create index` | ratio | hnswlib `loadIndex` + first search | hnswlib `saveIndex` | kitfox / hnswlib load | kitfox peak RSS (from) | hnswlib peak RSS (from) |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ConfigResult& r : results) {
    const Reopen& o = r.reopen;
    double hl_load = r.f16 ? shared.hl_load_s + shared.hl_first_s : o.hl_load_s + o.hl_first_s;
    double hl_save = r.f16 ? shared.hl_save_s : o.hl_save_s;
    double rebuild = o.open_noindex_s + o.create_index_s;
    md += fmt("| %s | %s | %s | **%s** | %s + %s = %s | %.0fx | %s%s | %s | %.2f | %s | %s%s |\n", r.name.c_str(),
              ms(o.open_s).c_str(), ms(o.first_s).c_str(), ms(o.both_s).c_str(), ms(o.open_noindex_s).c_str(),
              ms(o.create_index_s).c_str(), ms(rebuild).c_str(), rebuild / o.both_s, ms(hl_load).c_str(),
              r.f16 ? " (f32)" : "", ms(hl_save).c_str(), o.both_s / hl_load, o.kf_mem.text().c_str(),
              (r.f16 ? shared.hl_load_mem : o.hl_mem).text().c_str(), r.f16 ? " (f32)" : "");
  }
  md += "\nThe first puts after a reopen (`put d {e: $1}` after one `near`, into a copy of the file, median of 3): ";
  for (size_t i = 0; i < results.size(); i++)
    md += fmt("%s%s: first %s, second %s", i ? "; " : "", results[i].name.c_str(), ms(results[i].reopen.first_put_s).c_str(),
              ms(results[i].reopen.second_put_s).c_str());
  md += ". The graph is read in place from the file until a change copies the level-0 lists it changes.\n";
  for (const ConfigResult& r : results)
    if (r.reopen.replay_open_s >= 0)
      md += fmt("\nWithout a checkpoint (%s): with `auto_checkpoint = false`, `close()` after the load does not "
                "checkpoint, so the file (%s) is the write log only, and `Database::open` replays every `put` record, "
                "linking every vector into a new graph: that open took %s (one run), against %s for the checkpointed file. "
                "The figures above are after an explicit `checkpoint()`.\n",
                r.name.c_str(), mib(r.reopen.tail_file).c_str(), ms(r.reopen.replay_open_s).c_str(),
                ms(r.reopen.open_s).c_str());
  md += "\n\"ratio\" is the rebuild over the reopen with the graph. Peak RSS: the process's, from just before the "
        "open (load) to just after the first search, last round; in brackets the RSS it started from: the data set, "
        "queries and ground truth, plus the indexes the program still held — during kitfox's reopen the 1-thread "
        "hnswlib index and the 1-thread `HnswIndex`, during hnswlib's load the 1-thread hnswlib index it had saved. "
        "kitfox maps its file: the mapped pages the open and the first search touched count as resident. Runs of "
        "open + first near (ms): ";
  for (size_t i = 0; i < results.size(); i++) {
    md += (i ? "; " : "") + results[i].name + ": ";
    for (size_t j = 0; j < results[i].reopen.both_runs.size(); j++)
      md += fmt("%s%.2f", j ? ", " : "", results[i].reopen.both_runs[j] * 1e3);
  }
  md += ".\n\n";
  md += "| data set | kitfox file (after close) | same documents, no index | index part (difference) | raw vectors N x dim x 4 | raw + links N x (2m+1) x 4 | file / raw | file / (raw + links) | hnswlib index file | kitfox memory after open |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ConfigResult& r : results) {
    const Reopen& o = r.reopen;
    uint64_t raw = (uint64_t)r.n * r.dim * 4, links = (uint64_t)r.n * (2 * kM + 1) * 4;
    uint64_t hl = r.f16 ? shared.hl_file : o.hl_file;
    md += fmt("| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s%s | %s |\n", r.name.c_str(), mib(o.file_with).c_str(),
              mib(o.file_without).c_str(), mib(o.file_with - std::min(o.file_with, o.file_without)).c_str(), mib(raw).c_str(),
              mib(raw + links).c_str(), (double)o.file_with / raw, (double)o.file_with / (raw + links), mib(hl).c_str(),
              r.f16 ? " (f32)" : "", mib(o.memory_bytes).c_str());
  }
  md += "\nFor f16 the raw columns still count 4 bytes per component (the data as given); its stored vector table is half "
        "that. The \"no index\" file holds the documents only, each document holding its vector. ";
  for (const ConfigResult& r : results) {
    const Reopen& o = r.reopen;
    uint64_t part = o.file_with - std::min(o.file_with, o.file_without);
    uint64_t stored = (uint64_t)r.n * r.dim * (r.f16 ? 2 : 4);
    md += fmt("%s: the index adds %s, %s the %s of stored vectors, so %s. ", r.name.c_str(), mib(part).c_str(),
              part >= stored ? "more than" : "less than", mib(stored).c_str(),
              part >= stored ? "the file holds every vector twice (in its document and in the vector table)"
                             : "each vector is stored once (the documents refer to the vector table) and the difference is the graph and per-node data");
  }
  md += "\n\n";

  // ---- conditions
  md += "### Conditions of each measured block\n\n";
  md += "| block | wall | load avg 1 min, start → end | other processes' CPU (cores, average) | |\n| --- | ---: | --- | ---: | --- |\n";
  for (const Condition& c : g_conditions)
    md += fmt("| %s | %s | %.2f → %.2f | %s | %s |\n", c.what.c_str(), ms(c.wall).c_str(), c.load_start, c.load_end,
              c.wall >= 0.3 ? fmt("%.2f", c.others).c_str() : "(too short to tell)",
              c.repeated ? "busy: measured again, dropped" : "");
  md += "\n";

  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (!opt.out.empty()) {
    write_file(opt.out, md);
  }

  if (!opt.svg.empty()) write_svgs(opt.svg, results, shared, N, opt.clusters);

  if (opt.keep) {
    progress("  data kept in " + dir);
  } else {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}
