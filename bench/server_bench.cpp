// server_bench: `kitfox serve` against PostgreSQL 15 + pgvector 0.8.6, both
// asked over TCP loopback by the same client program, on the same data.
//
//   1. requests: over N documents {title: text, n: int, embed: vector<128>}
//      (HNSW m=16, ef_construction=200, ef 100 on both sides; an ordered
//      index on n on both sides: kitfox @sorted, a PostgreSQL B-tree), the
//      round trip p50/p99/max of the empty request (GET /health; `;` and a
//      prepared SELECT 1), a row by id, a filter with a limit, a near top-10
//      and a put, one client at a time and C clients at once; recall@10 of
//      both sides' near against the exact top 10;
//   2. loads: L rows into an empty collection, without and with the vector
//      index, each way a client can send them (kitfox: POST /docs of 1,000
//      documents, a put of 1,000 in POST /query, a POST /batch of 1,000
//      single puts; PostgreSQL: COPY, INSERTs of 1,000 rows), kitfox with
//      --sync 250 against synchronous_commit = off; rows/s;
//   3. durable writers: 1, 4, 16 clients each putting one small row a
//      request (kitfox --sync always, PostgreSQL synchronous_commit = on)
//      with two clients reading rows by id beside them: commits/s, the
//      writes' latency, the readers' p50/p99 and worst wait;
//   4. reconciliation: one aggregate over every row of a ledger each second
//      beside 4 clients sending small writes, and the same writes alone:
//      the writes' worst wait and how many waited past 50 ms.
//
// The servers are started by bench/server_bench.sh (a throwaway PostgreSQL
// cluster, two kitfox servers); this program is only their client. kitfox
// is asked with Boost.Beast (synchronous HTTP/1.1, one kept-alive
// connection a client thread, TCP_NODELAY), PostgreSQL with libpq
// (prepared statements, text parameters and results, one connection a
// client thread). Every request body and parameter is built before its
// round trip is timed.
//
// Usage: server_bench --pg CONNINFO [--kitfox URL --kitfox-durable URL | --no-kitfox] [options]
// (--help lists them); run through bench/server_bench.sh.
#include <libpq-fe.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "clustered.h"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

using namespace kitfox::benchutil;

constexpr uint32_t kDim = 128;
constexpr uint32_t kClusters = 40;
constexpr uint64_t kCentreSeed = 42;
constexpr uint64_t kBaseSeed = 1, kQuerySeed = 2, kPutSeed = 3, kLoadSeed = 4;
constexpr const char* kHnswKitfox = "@hnsw(l2, m=16, ef_construction=200, ef_search=100)";
constexpr const char* kHnswPg = "USING hnsw (embed vector_l2_ops) WITH (m = 16, ef_construction = 200)";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "server_bench: %s\n", what.c_str());
  std::exit(1);
}

double us_since(Clock::time_point a) { return std::chrono::duration<double, std::micro>(Clock::now() - a).count(); }
double s_since(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// ---------------------------------------------------------------- options

struct Options {
  std::string pg, kitfox, kitfox_durable, kitfox_bin, kitfox_threads, kitfox_loops, pg_bin, commit;
  std::string placement;  // where the servers and this client run (server_bench.sh --pin)
  std::string dir = "/tmp", out;
  bool no_kitfox = false;
  std::set<std::string> only;  // empty: every scenario
  size_t rows = 10000;         // the requests' and the durable writers' collection
  size_t requests = 2000;      // per request type, mode, side and round
  size_t rounds = 3;
  size_t clients = 8;
  size_t recall_queries = 100;
  size_t load_rows = 100000, load_batch = 1000;
  bool load_index = true;  // the loads with the vector index too
  double seconds = 5;  // per durable configuration
  std::vector<size_t> writers{1, 4, 16};
  size_t readers = 2;
  size_t recon_rows = 1000000, recon_writers = 4;
  double recon_seconds = 10;
  double wait_quiet = 0;  // before each scenario, wait up to this long for other processes to go quiet
  bool runs(const char* scenario) const { return only.empty() || only.count(scenario); }
};

void usage() {
  std::fprintf(stderr,
               "usage: server_bench --pg CONNINFO [--kitfox URL --kitfox-durable URL | --no-kitfox]\n"
               "         [--quick] [--only requests,load,durable,recon] [--rows N] [--requests N] [--rounds N]\n"
               "         [--clients N] [--load-rows N] [--load-batch N] [--no-load-index] [--seconds S] [--writers LIST] [--readers N]\n"
               "         [--recon-rows N] [--recon-seconds S] [--recon-writers N] [--wait-quiet S] [--dir PATH] [--out PATH]\n"
               "(bench/server_bench.sh starts the servers and passes the addresses; its header says more)\n");
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool quick = false;
  std::set<std::string> given;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    auto count = [&]() -> size_t {
      std::string v = value();
      size_t n = 0;
      if (!parse_positive(v.c_str(), &n)) die(a + ": '" + v + "' is not a positive count");
      given.insert(a);
      return n;
    };
    auto secs = [&]() -> double {
      std::string v = value();
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (!end || *end || !(d > 0)) die(a + ": '" + v + "' is not a positive number of seconds");
      given.insert(a);
      return d;
    };
    if (a == "--pg") o.pg = value();
    else if (a == "--kitfox") o.kitfox = value();
    else if (a == "--kitfox-durable") o.kitfox_durable = value();
    else if (a == "--kitfox-bin") o.kitfox_bin = value();
    else if (a == "--kitfox-threads") o.kitfox_threads = value();
    else if (a == "--kitfox-loops") o.kitfox_loops = value();
    else if (a == "--pg-bin") o.pg_bin = value();
    else if (a == "--commit") o.commit = value();
    else if (a == "--placement") o.placement = value();
    else if (a == "--no-kitfox") o.no_kitfox = true;
    else if (a == "--quick") quick = true;
    else if (a == "--only") {
      std::string v = value(), part;
      for (size_t p = 0; p <= v.size(); p++) {
        if (p == v.size() || v[p] == ',') {
          if (part != "requests" && part != "load" && part != "durable" && part != "recon")
            die("--only: '" + part + "' is not one of requests, load, durable, recon");
          o.only.insert(part);
          part.clear();
        } else {
          part += v[p];
        }
      }
    } else if (a == "--rows") o.rows = count();
    else if (a == "--requests") o.requests = count();
    else if (a == "--rounds") o.rounds = count();
    else if (a == "--clients") o.clients = count();
    else if (a == "--load-rows") o.load_rows = count();
    else if (a == "--load-batch") o.load_batch = count();
    else if (a == "--no-load-index") o.load_index = false;
    else if (a == "--seconds") o.seconds = secs();
    else if (a == "--readers") o.readers = count();
    else if (a == "--recon-rows") o.recon_rows = count();
    else if (a == "--recon-writers") o.recon_writers = count();
    else if (a == "--recon-seconds") o.recon_seconds = secs();
    else if (a == "--writers") {
      std::string v = value(), part;
      o.writers.clear();
      for (size_t p = 0; p <= v.size(); p++) {
        if (p == v.size() || v[p] == ',') {
          size_t n = 0;
          if (!parse_positive(part.c_str(), &n)) die("--writers: '" + part + "' is not a positive count");
          o.writers.push_back(n);
          part.clear();
        } else {
          part += v[p];
        }
      }
    } else if (a == "--dir") o.dir = value();
    else if (a == "--wait-quiet") o.wait_quiet = secs();
    else if (a == "--out") o.out = value();
    else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      usage();
      die("unknown option " + a);
    }
  }
  if (quick) {
    if (!given.count("--requests")) o.requests = 500;
    if (!given.count("--rounds")) o.rounds = 1;
    if (!given.count("--load-rows")) o.load_rows = 20000;
    if (!given.count("--seconds")) o.seconds = 2;
    if (!given.count("--recon-rows")) o.recon_rows = 200000;
    if (!given.count("--recon-seconds")) o.recon_seconds = 4;
  }
  if (o.pg.empty()) {
    usage();
    die("--pg CONNINFO is required");
  }
  if (!o.no_kitfox && (o.kitfox.empty() || o.kitfox_durable.empty())) {
    usage();
    die("--kitfox URL and --kitfox-durable URL are required (or --no-kitfox)");
  }
  if (o.rows < 100) die("--rows must be at least 100");
  return o;
}

// ---------------------------------------------------------------- data

void append_float(std::string& s, float f) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, f);  // shortest text that reads back the same float
  s.append(buf, r.ptr);
}

// "[0.1,-0.2,...]": a JSON array and pgvector's text form alike.
std::string vector_text(const float* v) {
  std::string s = "[";
  s.reserve(kDim * 12);
  for (uint32_t i = 0; i < kDim; i++) {
    if (i) s += ',';
    append_float(s, v[i]);
  }
  s += ']';
  return s;
}

// A JSON string literal (the texts here are letters, digits and spaces, but
// the statements carry quotes in places).
std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

struct Row {
  std::string title;
  int64_t n;
  std::string embed;  // vector_text
};

std::string random_title(SplitMix& r) {
  static const char kAlpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(10 + r.below(11), ' ');
  for (auto& c : s) c = kAlpha[r.below(sizeof kAlpha - 1)];
  return s;
}

// `count` rows from stream `seed`: titles of 10-20 letters, n in [0, n_range),
// clustered vectors (kept in *vectors when asked).
std::vector<Row> make_rows(const kitfox::bench::Clustered& gen, size_t count, uint64_t seed, int64_t n_range,
                           std::vector<float>* vectors = nullptr) {
  std::vector<float> v = gen.points(count, seed);
  SplitMix r(seed * 7919 + 17);
  std::vector<Row> rows(count);
  for (size_t i = 0; i < count; i++) {
    rows[i].title = random_title(r);
    rows[i].n = (int64_t)r.below((uint64_t)n_range);
    rows[i].embed = vector_text(&v[i * kDim]);
  }
  if (vectors) *vectors = std::move(v);
  return rows;
}

// {"title":"...","n":5,"embed":[...]} (with "id" first when id > 0)
std::string doc_json(const Row& r, int64_t id = 0) {
  std::string s = "{";
  if (id > 0) s += "\"id\":" + std::to_string(id) + ",";
  s += "\"title\":\"" + r.title + "\",\"n\":" + std::to_string(r.n) + ",\"embed\":" + r.embed + "}";
  return s;
}

// ---------------------------------------------------------------- statistics

struct Stats {
  size_t n = 0;
  double p50 = 0, p99 = 0, max = 0;  // microseconds
  double per_s = 0;                   // requests a second over the wall time
  size_t over_50ms = 0;
};

Stats stats_of(std::vector<double> us, double wall_s) {
  Stats s;
  s.n = us.size();
  if (us.empty()) return s;
  s.p50 = nearest_rank(us, 0.50);
  s.p99 = nearest_rank(us, 0.99);
  s.max = us.back();  // sorted by nearest_rank
  s.per_s = wall_s > 0 ? (double)us.size() / wall_s : 0;
  for (double x : us) s.over_50ms += x > 50000;
  return s;
}

std::string ms3(double us) { return fmt("%.3f", us / 1000.0); }
std::string ms2(double us) { return fmt("%.2f", us / 1000.0); }
std::string ratio(double a, double b) { return (a > 0 && b > 0) ? fmt("%.2fx", a / b) : "-"; }

// Runs `clients` threads at once; together they call op(client, i) for
// i = 0 .. total-1 (each i once, taken in order as a client is free); op
// returns the round trip it timed in microseconds. Every latency and the
// wall time from the start to the last answer.
struct Run {
  std::vector<double> us;
  double wall_s = 0;
};
Run run_clients(size_t clients, size_t total, const std::function<double(size_t, size_t)>& op) {
  std::vector<std::vector<double>> per(clients);
  std::atomic<size_t> next{0};
  std::latch go((ptrdiff_t)clients + 1);
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients; c++) {
    per[c].reserve(total / clients + 16);
    threads.emplace_back([&, c] {
      go.arrive_and_wait();
      for (;;) {
        size_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= total) break;
        per[c].push_back(op(c, i));
      }
    });
  }
  auto t0 = Clock::now();  // taken before the clients are let go: this thread may run again only after they finish
  go.count_down();
  for (auto& t : threads) t.join();
  Run r;
  r.wall_s = s_since(t0);
  for (auto& p : per) r.us.insert(r.us.end(), p.begin(), p.end());
  return r;
}

// ---------------------------------------------------------------- kitfox client

struct Url {
  std::string host;
  uint16_t port = 0;
};

Url parse_url(const std::string& u) {
  const std::string scheme = "http://";
  if (u.compare(0, scheme.size(), scheme) != 0) die("not an http:// address: " + u);
  std::string rest = u.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) die("no port in " + u);
  Url r;
  r.host = rest.substr(0, colon);
  size_t port = 0;
  if (!parse_positive(rest.substr(colon + 1).c_str(), &port) || port > 65535) die("bad port in " + u);
  r.port = (uint16_t)port;
  return r;
}

// One kept-alive HTTP/1.1 connection, synchronous (Boost.Beast on Asio).
class HttpClient {
 public:
  // The read buffer starts at 64 KiB, as a client's socket reads usually
  // do (libpq's starts at 16 KiB and grows): Beast's flat_buffer would
  // otherwise stay at 512 bytes, and an answer of 14 KB would take 28 reads.
  explicit HttpClient(const Url& url) : url_(url) {
    buf_.reserve(kReadBuffer);
    connect();
  }

  // Sends one request and reads its answer; returns the status, the body in
  // *out. A transport error ends the program.
  int request(http::verb verb, const std::string& target, const std::string& body, std::string* out) {
    // The server closes a connection idle for its --timeout (30 s by
    // default): one idle for 10 s is opened again before it is used, and a
    // connection found closed before any byte of the answer came is opened
    // again and the request sent once more.
    if (std::chrono::duration<double>(Clock::now() - last_use_).count() > 10) reconnect();
    for (int attempt = 0;; attempt++) {
      beast::error_code ec;
      int status = attempt_request(verb, target, body, out, ec);
      last_use_ = Clock::now();
      if (!ec) return status;
      bool closed = ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                    ec == net::error::broken_pipe || ec == net::error::eof;
      if (!closed || attempt > 0) die("kitfox: " + target + ": " + ec.message());
      reconnect();
    }
  }

  // POST a body; anything but 200 ends the program with the answer.
  std::string post(const std::string& target, const std::string& body) {
    std::string out;
    int st = request(http::verb::post, target, body, &out);
    if (st != 200) die("kitfox: POST " + target + " -> " + std::to_string(st) + ": " + out.substr(0, 500));
    return out;
  }

  std::string query(const std::string& q, const std::string& params = "[]") {
    return post("/query", "{\"query\":" + json_str(q) + ",\"params\":" + params + "}");
  }

 private:
  int attempt_request(http::verb verb, const std::string& target, const std::string& body, std::string* out,
                      beast::error_code& ec) {
    req_.method(verb);
    req_.target(target);
    req_.version(11);
    req_.set(http::field::host, url_.host);
    req_.keep_alive(true);
    if (verb == http::verb::post) req_.set(http::field::content_type, "application/json");
    else req_.erase(http::field::content_type);
    req_.body() = body;
    req_.prepare_payload();
    http::write(sock_, req_, ec);
    if (ec) return 0;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    http::read(sock_, buf_, parser, ec);
    if (ec) {
      if (parser.got_some() && ec == http::error::end_of_stream) ec = http::error::partial_message;  // not retried
      return 0;
    }
    auto& res = parser.get();
    int status = res.result_int();
    bool keep = res.keep_alive();
    if (out) *out = std::move(res.body());
    if (!keep) reconnect();  // the server closes: a new connection for the next request
    return status;
  }

  void reconnect() {
    beast::error_code ec;
    sock_.close(ec);
    sock_ = tcp::socket(ioc_);
    buf_.clear();
    buf_.reserve(kReadBuffer);
    connect();
  }

  void connect() {
    beast::error_code ec;
    auto addr = net::ip::make_address(url_.host, ec);
    if (ec) die("kitfox: bad host " + url_.host);
    sock_.connect(tcp::endpoint(addr, url_.port), ec);
    if (ec) die("kitfox: connecting to " + url_.host + ":" + std::to_string(url_.port) + ": " + ec.message());
    sock_.set_option(tcp::no_delay(true));
    last_use_ = Clock::now();
  }

  static constexpr size_t kReadBuffer = 64 * 1024;
  Url url_;
  Clock::time_point last_use_;
  net::io_context ioc_;
  tcp::socket sock_{ioc_};
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
};

std::string query_body(const std::string& q, const std::string& params) {
  return "{\"query\":" + json_str(q) + ",\"params\":" + params + "}";
}

// The integers after each "id": in an answer (rows put id first).
std::vector<int64_t> ids_in(const std::string& body) {
  std::vector<int64_t> ids;
  size_t p = 0;
  while ((p = body.find("\"id\":", p)) != std::string::npos) {
    p += 5;
    ids.push_back(std::strtoll(body.c_str() + p, nullptr, 10));
  }
  return ids;
}

// The number after "key": in an answer (the first one), or -1.
double number_after(const std::string& body, const std::string& key) {
  size_t p = body.find("\"" + key + "\":");
  if (p == std::string::npos) return -1;
  return std::strtod(body.c_str() + p + key.size() + 3, nullptr);
}

// kitfox's explain rows as "op (detail) < op (detail) ...".
std::string kitfox_plan(HttpClient& c, const std::string& q, const std::string& params) {
  std::string body = c.query("explain " + q, params), out;
  size_t p = 0;
  while ((p = body.find("\"op\":\"", p)) != std::string::npos) {
    p += 6;
    size_t e = body.find('"', p);
    std::string op = body.substr(p, e - p);
    size_t d = body.find("\"detail\":\"", e);
    std::string detail;
    if (d != std::string::npos && d < body.find('}', e)) {
      d += 10;
      size_t de = d;
      while (de < body.size() && !(body[de] == '"' && body[de - 1] != '\\')) de++;
      detail = body.substr(d, de - d);
    }
    if (!out.empty()) out += " < ";
    out += op + (detail.empty() ? "" : " (" + detail + ")");
    p = e;
  }
  return out;
}

// ---------------------------------------------------------------- PostgreSQL client

class Pg {
 public:
  explicit Pg(const std::string& conninfo) {
    c_ = PQconnectdb(conninfo.c_str());
    if (PQstatus(c_) != CONNECTION_OK) die("PostgreSQL: connecting: " + std::string(PQerrorMessage(c_)));
    PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);  // DROP ... IF EXISTS and the like
  }
  ~Pg() { PQfinish(c_); }
  Pg(const Pg&) = delete;
  Pg& operator=(const Pg&) = delete;

  // Runs SQL text; returns the first value of the first row ("" when none).
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(c_, sql.c_str());
    check(r, sql);
    std::string v = PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }
  // Every row's first value.
  std::vector<std::string> column(const std::string& sql) {
    PGresult* r = PQexec(c_, sql.c_str());
    check(r, sql);
    std::vector<std::string> v;
    for (int i = 0; i < PQntuples(r); i++) v.push_back(PQgetvalue(r, i, 0));
    PQclear(r);
    return v;
  }
  void prepare(const std::string& name, const std::string& sql) {
    PGresult* r = PQprepare(c_, name.c_str(), sql.c_str(), 0, nullptr);
    check(r, sql);
    PQclear(r);
  }
  // Runs a prepared statement with text parameters; the rows it returned.
  int run(const std::string& name, int n, const char* const* values, std::vector<int64_t>* first_column = nullptr) {
    PGresult* r = PQexecPrepared(c_, name.c_str(), n, values, nullptr, nullptr, 0);
    check(r, name);
    int rows = PQntuples(r);
    if (first_column)
      for (int i = 0; i < rows; i++) first_column->push_back(std::strtoll(PQgetvalue(r, i, 0), nullptr, 10));
    PQclear(r);
    return rows;
  }
  // The empty query: one round trip, nothing parsed or run.
  void empty() {
    PGresult* r = PQexec(c_, ";");
    if (PQresultStatus(r) != PGRES_EMPTY_QUERY) die("PostgreSQL: the empty query: " + std::string(PQerrorMessage(c_)));
    PQclear(r);
  }
  // COPY table (cols) FROM STDIN with the text chunks given.
  void copy_in(const std::string& sql, const std::vector<std::string>& chunks) {
    PGresult* r = PQexec(c_, sql.c_str());
    if (PQresultStatus(r) != PGRES_COPY_IN) die("PostgreSQL: " + sql + ": " + PQerrorMessage(c_));
    PQclear(r);
    for (auto& ch : chunks)
      if (PQputCopyData(c_, ch.data(), (int)ch.size()) != 1) die("PostgreSQL: COPY data: " + std::string(PQerrorMessage(c_)));
    if (PQputCopyEnd(c_, nullptr) != 1) die("PostgreSQL: COPY end: " + std::string(PQerrorMessage(c_)));
    while ((r = PQgetResult(c_)) != nullptr) {
      check(r, sql);
      PQclear(r);
    }
  }

 private:
  void check(PGresult* r, const std::string& what) {
    auto st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(r);
      PQclear(r);
      die("PostgreSQL: " + what.substr(0, 200) + ": " + msg);
    }
  }
  PGconn* c_;
};

// COPY text of rows (title, n, embed), `per` rows a chunk; ids first when id0 > 0.
std::vector<std::string> copy_chunks(const std::vector<Row>& rows, size_t per, int64_t id0 = 0) {
  std::vector<std::string> chunks;
  for (size_t b = 0; b < rows.size(); b += per) {
    std::string s;
    for (size_t i = b; i < std::min(rows.size(), b + per); i++) {
      if (id0 > 0) s += std::to_string(id0 + (int64_t)i) + "\t";
      s += rows[i].title + "\t" + std::to_string(rows[i].n) + "\t" + rows[i].embed + "\n";
    }
    chunks.push_back(std::move(s));
  }
  return chunks;
}

// ---------------------------------------------------------------- report

std::string g_report;  // every section, for --out
void emit(const std::string& s) {
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
  g_report += s;
}

// A Markdown table with its columns padded, so it reads in a terminal too.
struct Table {
  size_t left = 1;  // the first `left` columns are text, aligned left
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::string md() const {
    std::vector<size_t> w(head.size());
    for (size_t i = 0; i < head.size(); i++) w[i] = head[i].size();
    auto width = [](const std::string& s) {  // display width: UTF-8 continuation bytes take none
      size_t n = 0;
      for (unsigned char c : s) n += (c & 0xC0) != 0x80;
      return n;
    };
    for (auto& r : rows)
      for (size_t i = 0; i < r.size() && i < w.size(); i++) w[i] = std::max(w[i], width(r[i]));
    for (size_t i = 0; i < head.size(); i++) w[i] = std::max(w[i], width(head[i]));
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = "|";
      for (size_t i = 0; i < w.size(); i++) {
        std::string c = i < r.size() ? r[i] : "";
        std::string pad(w[i] - std::min(w[i], width(c)), ' ');
        s += ' ';
        if (i < left) s.append(c).append(pad);
        else s.append(pad).append(c);
        s += " |";
      }
      return s + "\n";
    };
    std::string s = line(head) + "|";
    for (size_t i = 0; i < w.size(); i++) s += i < left ? " " + std::string(w[i], '-') + " |" : " " + std::string(w[i] - 1, '-') + ": |";
    s += "\n";
    for (auto& r : rows) s += line(r);
    return s;
  }
};

struct SummaryRow {
  std::string measure, kitfox, peer, ratio, target, met;
};
std::vector<SummaryRow> g_summary;

std::string met(bool ok) { return ok ? "met" : "not met"; }

// CPUs other processes used over two seconds, while neither server is asked
// anything (the servers idle count as others; they use next to nothing).
double g_wait_quiet = 0;  // --wait-quiet S
std::string others_now() {
  if (g_wait_quiet > 0) wait_for_quiet(g_wait_quiet);
  OtherCpu o;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return fmt("%.2f", o.cores());
}

// One fdatasync of a small write in the data directory, the median of n:
// appended (the file grows, so the file system's journal commits too), or
// over bytes already written and flushed (as a preallocated log, such as
// PostgreSQL's WAL segments, is written).
double fdatasync_us(const std::string& dir, int n, bool overwrite) {
  std::string path = dir + "/fdatasync-probe";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  char buf[64];
  std::memset(buf, 'x', sizeof buf);
  if (overwrite) {
    std::vector<char> zero((size_t)n * sizeof buf, 0);
    if (::pwrite(fd, zero.data(), zero.size(), 0) != (ssize_t)zero.size() || ::fsync(fd) != 0) {
      ::close(fd);
      return 0;
    }
  }
  std::vector<double> us;
  for (int i = 0; i < n; i++) {
    if (::pwrite(fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf) != (ssize_t)sizeof buf) break;
    auto a = Clock::now();
    if (::fdatasync(fd) != 0) break;
    us.push_back(us_since(a));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return median(us);
}

// ---------------------------------------------------------------- the benchmark

struct Bench {
  Options o;
  Url kf_url, kf_durable_url;
  bool kf = true;
  kitfox::bench::Clustered gen{kDim, kClusters, kCentreSeed};

  // 1. requests --------------------------------------------------------

  struct Cell {  // one request type, one client count: each side's latencies
    std::vector<double> kf_us, pg_us;
    double kf_wall = 0, pg_wall = 0;
  };

  void requests() {
    progress("requests: preparing " + grouped((double)o.rows) + " documents on both sides");
    std::string others = others_now();
    const int64_t n_range = std::max<int64_t>(1, (int64_t)o.rows / 10);  // about 10 rows a value of n
    std::vector<float> base;
    std::vector<Row> rows = make_rows(gen, o.rows, kBaseSeed, n_range, &base);
    const size_t nq = std::max<size_t>(1000, o.recall_queries);
    std::vector<float> qv = gen.points(nq, kQuerySeed);
    std::vector<std::string> qtext(nq);
    for (size_t i = 0; i < nq; i++) qtext[i] = vector_text(&qv[i * kDim]);

    // Exact top 10 (l2) of the first recall_queries queries.
    std::vector<std::vector<int64_t>> truth(o.recall_queries);
    for (size_t q = 0; q < o.recall_queries; q++) {
      std::vector<std::pair<double, int64_t>> d(o.rows);
      for (size_t i = 0; i < o.rows; i++) {
        double s = 0;
        for (uint32_t k = 0; k < kDim; k++) {
          double x = (double)qv[q * kDim + k] - (double)base[i * kDim + k];
          s += x * x;
        }
        d[i] = {s, (int64_t)i + 1};
      }
      std::partial_sort(d.begin(), d.begin() + 10, d.end());
      for (int k = 0; k < 10; k++) truth[q].push_back(d[k].second);
    }

    // The same statements on both sides. kitfox ids are given (1..rows), as
    // PostgreSQL's are.
    const std::string kf_byid = "get docs where id = $1";
    const std::string kf_filter = "get docs where n = $1 limit 10";
    const std::string kf_near = "get docs select title near embed $1 ef 100 limit 10";
    const std::string kf_put = "put docs {id: $1, title: $2, n: $3, embed: $4}";
    const std::string pg_byid = "SELECT id, title, n, embed FROM docs WHERE id = $1";
    const std::string pg_filter = "SELECT id, title, n, embed FROM docs WHERE n = $1 LIMIT 10";
    const std::string pg_near =
        "SELECT id, title, embed <-> $1::vector AS distance FROM docs ORDER BY embed <-> $1::vector LIMIT 10";
    const std::string pg_put = "INSERT INTO docs (id, title, n, embed) VALUES ($1, $2, $3, $4)";

    // Load: kitfox by POST /docs (1,000 a request), PostgreSQL by COPY; both
    // indexes made after the rows are in, and timed with the first query
    // that uses them (kitfox builds a derived index on first use).
    double kf_load_s = 0, pg_load_s = 0, kf_index_s = 0, pg_index_s = 0;
    std::unique_ptr<HttpClient> kc0;
    if (kf) {
      kc0 = std::make_unique<HttpClient>(kf_url);
      kc0->query("drop collection if exists docs");
      kc0->query("create collection docs (title text, n int @sorted, embed vector<128>)");
      auto t0 = Clock::now();
      for (size_t b = 0; b < o.rows; b += 1000) {
        std::string body = "[";
        for (size_t i = b; i < std::min(o.rows, b + 1000); i++) {
          if (i > b) body += ',';
          body += doc_json(rows[i], (int64_t)i + 1);
        }
        body += "]";
        kc0->post("/docs/docs", body);
      }
      kf_load_s = s_since(t0);
      t0 = Clock::now();
      kc0->query(std::string("create index on docs (embed) ") + kHnswKitfox);
      kc0->query(kf_near, "[" + qtext[0] + "]");
      kf_index_s = s_since(t0);
      kc0->query(kf_filter, "[1]");  // builds the @sorted index on n
      std::string c = kc0->query("get docs count");
      if ((size_t)number_after(c, "count") != o.rows) die("kitfox: docs has " + c + " after the load");
    }
    Pg p0(o.pg);
    p0.exec("DROP TABLE IF EXISTS docs");
    p0.exec("CREATE TABLE docs (id bigint PRIMARY KEY, title text, n bigint, embed vector(128))");
    {
      auto chunks = copy_chunks(rows, 1000, 1);
      auto t0 = Clock::now();
      p0.copy_in("COPY docs (id, title, n, embed) FROM STDIN", chunks);
      pg_load_s = s_since(t0);
      t0 = Clock::now();
      p0.exec(std::string("CREATE INDEX docs_embed ON docs ") + kHnswPg);
      p0.exec("SET hnsw.ef_search = 100");
      p0.exec("SELECT id, title, embed <-> '" + qtext[0] + "' AS distance FROM docs ORDER BY embed <-> '" + qtext[0] +
              "' LIMIT 10");
      pg_index_s = s_since(t0);
      p0.exec("CREATE INDEX docs_n ON docs (n)");
      p0.exec("VACUUM ANALYZE docs");
    }

    // Clients: one connection each, kept for the whole scenario.
    const size_t C = o.clients;
    std::vector<std::unique_ptr<HttpClient>> kcs;
    std::vector<std::unique_ptr<Pg>> pcs;
    for (size_t c = 0; c < C; c++) {
      if (kf) kcs.push_back(std::make_unique<HttpClient>(kf_url));
      auto p = std::make_unique<Pg>(o.pg);
      p->exec("SET synchronous_commit = off");
      p->exec("SET hnsw.ef_search = 100");
      p->prepare("one", "SELECT 1");
      p->prepare("byid", pg_byid);
      p->prepare("filter", pg_filter);
      p->prepare("near", pg_near);
      p->prepare("put", pg_put);
      pcs.push_back(std::move(p));
    }

    // Parameters, built before timing: R of each read, cycled.
    const size_t R = o.requests;
    SplitMix pr(99);
    std::vector<std::string> id_txt(R), n_txt(R), kf_byid_b(R), kf_filter_b(R), kf_near_b(nq);
    for (size_t i = 0; i < R; i++) {
      id_txt[i] = std::to_string(1 + pr.below(o.rows));
      n_txt[i] = std::to_string(pr.below((uint64_t)n_range));
      kf_byid_b[i] = query_body(kf_byid, "[" + id_txt[i] + "]");
      kf_filter_b[i] = query_body(kf_filter, "[" + n_txt[i] + "]");
    }
    for (size_t i = 0; i < nq; i++) kf_near_b[i] = query_body(kf_near, "[" + qtext[i] + "]");
    // Puts: distinct new rows, the same on both sides, ids from 10^9.
    const size_t P = R * 2 * o.rounds + 2 * 200;
    std::vector<Row> put_rows = make_rows(gen, P, kPutSeed, n_range);
    std::vector<std::string> put_id(P), put_n(P), kf_put_b(P);
    for (size_t i = 0; i < P; i++) {
      put_id[i] = std::to_string(1000000000 + (int64_t)i);
      put_n[i] = std::to_string(put_rows[i].n);
      kf_put_b[i] = query_body(kf_put, "[" + put_id[i] + ",\"" + put_rows[i].title + "\"," + put_n[i] + "," +
                                           put_rows[i].embed + "]");
    }
    std::atomic<size_t> kf_put_next{0}, pg_put_next{0};

    enum Op { kEmpty, kSelect1, kById, kFilter, kNear, kPut, kOps };
    const char* names[kOps] = {"empty request", "", "row by id", "filter n = $1 limit 10", "near top-10 (ef 100)",
                               "put (one row)"};
    auto kf_op = [&](Op op) -> std::function<double(size_t, size_t)> {
      return [&, op](size_t c, size_t i) -> double {
        HttpClient& h = *kcs[c];
        const std::string* body = nullptr;
        if (op == kById) body = &kf_byid_b[i % R];
        else if (op == kFilter) body = &kf_filter_b[i % R];
        else if (op == kNear) body = &kf_near_b[i % nq];
        else if (op == kPut) body = &kf_put_b[kf_put_next.fetch_add(1) % P];
        static const std::string none;
        auto t0 = Clock::now();
        int st = op == kEmpty ? h.request(http::verb::get, "/health", none, nullptr)
                              : h.request(http::verb::post, "/query", *body, nullptr);
        double us = us_since(t0);
        if (st != 200) die(fmt("kitfox: %s -> %d", names[op], st));
        return us;
      };
    };
    auto pg_op = [&](Op op) -> std::function<double(size_t, size_t)> {
      return [&, op](size_t c, size_t i) -> double {
        Pg& p = *pcs[c];
        const char* v[4];
        const char* stmt = nullptr;
        int nv = 1;
        if (op == kById) stmt = "byid", v[0] = id_txt[i % R].c_str();
        else if (op == kFilter) stmt = "filter", v[0] = n_txt[i % R].c_str();
        else if (op == kNear) stmt = "near", v[0] = qtext[i % nq].c_str();
        else if (op == kSelect1) stmt = "one", nv = 0;
        else if (op == kPut) {
          size_t k = pg_put_next.fetch_add(1) % P;
          stmt = "put", nv = 4;
          v[0] = put_id[k].c_str(), v[1] = put_rows[k].title.c_str(), v[2] = put_n[k].c_str(), v[3] = put_rows[k].embed.c_str();
        }
        auto t0 = Clock::now();
        if (op == kEmpty) p.empty();
        else p.run(stmt, nv, v);
        return us_since(t0);
      };
    };

    // Recall@10 on both sides, and what the plans are.
    double kf_recall = -1, pg_recall = 0;
    std::string kf_near_plan, kf_filter_plan, pg_near_plan, pg_filter_plan;
    {
      size_t kh = 0, ph = 0;
      for (size_t q = 0; q < o.recall_queries; q++) {
        std::set<int64_t> t(truth[q].begin(), truth[q].end());
        if (kf) {
          for (int64_t id : ids_in(kcs[0]->post("/query", kf_near_b[q]))) kh += t.count(id);
        }
        std::vector<int64_t> ids;
        const char* v[1] = {qtext[q].c_str()};
        pcs[0]->run("near", 1, v, &ids);
        for (int64_t id : ids) ph += t.count(id);
      }
      if (kf) kf_recall = (double)kh / (double)(o.recall_queries * 10);
      pg_recall = (double)ph / (double)(o.recall_queries * 10);
      if (kf) {
        kf_near_plan = kitfox_plan(*kcs[0], kf_near, "[" + qtext[0] + "]");
        kf_filter_plan = kitfox_plan(*kcs[0], kf_filter, "[5]");
      }
      auto plan = [&](const std::string& stmt, const std::string& arg) {
        std::string s;
        for (auto& l : pcs[0]->column("EXPLAIN (COSTS OFF) EXECUTE " + stmt + "('" + arg + "')")) {
          if (!s.empty()) s += " / ";
          s += trim(l);
        }
        return s;
      };
      pg_near_plan = plan("near", qtext[0]);
      pg_filter_plan = plan("filter", "5");
    }

    // Warm-up: every read type on every connection.
    progress("requests: warm-up");
    for (Op op : {kEmpty, kById, kFilter, kNear}) {
      if (kf) run_clients(C, 50 * C, kf_op(op));
      run_clients(C, 50 * C, pg_op(op));
    }
    run_clients(C, 50 * C, pg_op(kSelect1));

    // Rounds: each read type on both sides, one client then C clients;
    // then the puts, after every read (they grow the collection).
    Cell cells[kOps][2];  // [op][0: one client, 1: C clients]
    Cell empty_beside_puts[2];
    auto measure = [&](Op op, Cell* into) {
      for (int mode = 0; mode < 2; mode++) {
        size_t clients = mode == 0 ? 1 : C;
        Cell& cell = into[mode];
        if (kf && op != kSelect1) {
          Run r = run_clients(clients, R, kf_op(op));
          cell.kf_us.insert(cell.kf_us.end(), r.us.begin(), r.us.end());
          cell.kf_wall += r.wall_s;
        }
        Run r = run_clients(clients, R, pg_op(op));
        cell.pg_us.insert(cell.pg_us.end(), r.us.begin(), r.us.end());
        cell.pg_wall += r.wall_s;
      }
    };
    for (size_t round = 0; round < o.rounds; round++) {
      progress(fmt("requests: reads, round %zu of %zu", round + 1, o.rounds));
      for (Op op : {kEmpty, kSelect1, kById, kFilter, kNear}) measure(op, cells[op]);
    }
    // The puts' warm-up (200 on each side), then their rounds, each beside an
    // empty request of its own.
    if (kf) run_clients(1, 200, kf_op(kPut));
    run_clients(1, 200, pg_op(kPut));
    for (size_t round = 0; round < o.rounds; round++) {
      progress(fmt("requests: puts, round %zu of %zu", round + 1, o.rounds));
      measure(kEmpty, empty_beside_puts);
      measure(kPut, cells[kPut]);
    }

    // Report.
    std::string s = fmt("\n## 1. Round trips over %s documents (one client; %zu at once)\n\n", grouped((double)o.rows).c_str(), C);
    s += fmt("Documents {title: text (10-20 chars), n: int in [0, %" PRId64 "), embed: vector<128>}; kitfox `n int @sorted`, "
             "PostgreSQL a B-tree on n; HNSW l2, m=16, ef_construction=200 on both, made after the rows were loaded; "
             "ef 100 in kitfox's `near`, `SET hnsw.ef_search = 100` in PostgreSQL. kitfox `--sync 250`, PostgreSQL "
             "`synchronous_commit = off` (the puts). %zu rounds of %s requests per type, side and client count, "
             "the sides in turn; the puts after all reads (new rows, given ids), beside an empty request of their own. "
             "Latencies in ms (client-side round trip: send to last byte of the answer). Other processes used %s CPUs "
             "just before.\n\n",
             n_range, o.rounds, grouped((double)R).c_str(), others.c_str());
    Table t;
    t.head = {"request", "clients", "kitfox p50", "p99", "max", "req/s", "PostgreSQL p50", "p99", "max", "req/s",
              "kitfox / PG p50"};
    Stats ks[kOps][2], ps[kOps][2], ke[2], pe[2];
    for (int mode = 0; mode < 2; mode++) {
      ke[mode] = stats_of(empty_beside_puts[mode].kf_us, empty_beside_puts[mode].kf_wall);
      pe[mode] = stats_of(empty_beside_puts[mode].pg_us, empty_beside_puts[mode].pg_wall);
    }
    for (int mode = 0; mode < 2; mode++) {
      for (Op op : {kEmpty, kSelect1, kById, kFilter, kNear, kPut}) {
        Cell& cell = cells[op][mode];
        ks[op][mode] = stats_of(cell.kf_us, cell.kf_wall);
        ps[op][mode] = stats_of(cell.pg_us, cell.pg_wall);
      }
      auto row = [&](const std::string& name, const Stats& k, const Stats& p) {
        bool hk = k.n > 0;
        t.rows.push_back({name, std::to_string(mode == 0 ? 1 : C), hk ? ms3(k.p50) : "-", hk ? ms3(k.p99) : "-",
                          hk ? ms3(k.max) : "-", hk ? grouped(k.per_s) : "-", ms3(p.p50), ms3(p.p99), ms3(p.max),
                          grouped(p.per_s), hk ? ratio(k.p50, p.p50) : "-"});
      };
      row("empty (GET /health; PG `;`)", ks[kEmpty][mode], ps[kEmpty][mode]);
      row("PG prepared SELECT 1", Stats{}, ps[kSelect1][mode]);
      row(names[kById], ks[kById][mode], ps[kById][mode]);
      row(names[kFilter], ks[kFilter][mode], ps[kFilter][mode]);
      row(names[kNear], ks[kNear][mode], ps[kNear][mode]);
      row("empty, beside the puts", ke[mode], pe[mode]);
      row(names[kPut], ks[kPut][mode], ps[kPut][mode]);
    }
    s += t.md();
    s += "\n";
    Table t2;
    t2.left = 3;
    t2.head = {"", "kitfox", "PostgreSQL + pgvector"};
    t2.rows.push_back({"recall@10 of near (ef 100), " + std::to_string(o.recall_queries) + " held-out queries",
                       kf ? fmt("%.3f", kf_recall) : "-", fmt("%.3f", pg_recall)});
    t2.rows.push_back({"load of the documents (kitfox POST /docs of 1,000; PG COPY)", kf ? fmt("%.2f s", kf_load_s) : "-",
                       fmt("%.2f s", pg_load_s)});
    t2.rows.push_back({"HNSW made after the load, with the first near", kf ? fmt("%.2f s", kf_index_s) : "-",
                       fmt("%.2f s", pg_index_s)});
    t2.rows.push_back({"plan of the near", kf ? "`" + kf_near_plan + "`" : "-", "`" + pg_near_plan + "`"});
    t2.rows.push_back({"plan of the filter", kf ? "`" + kf_filter_plan + "`" : "-", "`" + pg_filter_plan + "`"});
    s += t2.md();

    // Targets.
    if (kf) {
      s += "\nTargets (p50, one client and " + std::to_string(C) + " at once):\n\n";
      Table tt;
      tt.head = {"target", "clients", "kitfox", "against", "ratio", "met?"};
      tt.left = 1;
      for (int mode = 0; mode < 2; mode++) {
        std::string cl = std::to_string(mode == 0 ? 1 : C);
        double r = ks[kById][mode].p50 / ks[kEmpty][mode].p50;
        tt.rows.push_back({"row by id ≤ 1.3x kitfox's empty request", cl, ms3(ks[kById][mode].p50),
                           ms3(ks[kEmpty][mode].p50), fmt("%.2fx", r), met(r <= 1.3)});
        if (mode == 0)
          g_summary.push_back({fmt("Server round trip, row by id, 1 client, p50, %s docs", grouped((double)o.rows).c_str()),
                               ms3(ks[kById][0].p50) + " ms", "kitfox's GET /health " + ms3(ks[kEmpty][0].p50) + " ms",
                               fmt("%.2fx", r), "≤ 1.3x the empty request (#18)", met(r <= 1.3)});
        for (Op op : {kById, kFilter, kNear, kPut}) {
          double lim = op == kNear ? 0.5 : 1.0;
          double rr = ks[op][mode].p50 / ps[op][mode].p50;
          tt.rows.push_back({std::string(names[op]) + (op == kNear ? " ≤ 0.5x PostgreSQL's" : " ≤ PostgreSQL's"), cl,
                             ms3(ks[op][mode].p50), ms3(ps[op][mode].p50), fmt("%.2fx", rr), met(rr <= lim)});
          g_summary.push_back({fmt("Server round trip, %s, %s client%s, p50", names[op], cl.c_str(), mode ? "s" : ""),
                               ms3(ks[op][mode].p50) + " ms", "PostgreSQL " + ms3(ps[op][mode].p50) + " ms",
                               fmt("%.2fx", rr), op == kNear ? "≤ 0.5x pgvector (#18)" : "≤ 1x PostgreSQL (#18)",
                               met(rr <= lim)});
        }
      }
      s += tt.md();
      g_summary.push_back({"Server near recall@10 (ef 100), 100 queries", fmt("%.3f", kf_recall),
                           fmt("pgvector %.3f", pg_recall), fmt("%.2fx", kf_recall / pg_recall), "—", "—"});
    }
    emit(s);
    if (kf) kc0->query("drop collection docs");
    p0.exec("DROP TABLE docs");
  }

  // 2. loads -----------------------------------------------------------

  void loads() {
    const size_t L = o.load_rows, B = o.load_batch;
    progress("load: preparing " + grouped((double)L) + " rows");
    std::string others = others_now();
    std::vector<Row> rows = make_rows(gen, L, kLoadSeed, 1000);
    std::vector<float> q1 = gen.points(1, kQuerySeed + 100);
    std::string qt = vector_text(q1.data());
    std::unique_ptr<HttpClient> kc;
    if (kf) kc = std::make_unique<HttpClient>(kf_url);
    Pg p(o.pg);
    p.exec("SET synchronous_commit = off");
    p.exec("SET hnsw.ef_search = 100");

    struct Result {
      std::string way;
      double s[2] = {0, 0};      // the load, without / with the vector index
      double first[2] = {0, 0};  // the first near after it (with the index)
      bool pg = false;
    };
    std::vector<Result> results;

    auto kitfox_way = [&](const std::string& way, int idx, const std::vector<std::string>& bodies, const std::string& target) {
      kc->query("drop collection if exists load");
      kc->query("checkpoint");
      kc->query(std::string("create collection load (title text, n int, embed vector<128>") + (idx ? " " : "") +
                (idx ? kHnswKitfox : "") + ")");
      progress(fmt("load: %s, %s", way.c_str(), idx ? "with the HNSW index" : "no vector index"));
      auto t0 = Clock::now();
      for (auto& b : bodies) kc->post(target, b);
      double s = s_since(t0);
      double first = 0;
      if (idx) {
        t0 = Clock::now();
        kc->query("get load select title near embed $1 ef 100 limit 10", "[" + qt + "]");
        first = s_since(t0);
      }
      std::string c = kc->query("get load count");
      if ((size_t)number_after(c, "count") != L) die("kitfox: load has " + c + " after the " + way + " load");
      kc->query("drop collection load");
      auto it = std::find_if(results.begin(), results.end(), [&](const Result& r) { return r.way == way; });
      if (it == results.end()) results.push_back({way}), it = results.end() - 1;
      it->s[idx] = s, it->first[idx] = first;
    };
    auto pg_way = [&](const std::string& way, int idx, const std::function<void()>& load) {
      p.exec("DROP TABLE IF EXISTS load");
      p.exec("CREATE TABLE load (id bigserial PRIMARY KEY, title text, n bigint, embed vector(128))");
      if (idx) p.exec(std::string("CREATE INDEX load_embed ON load ") + kHnswPg);
      p.exec("CHECKPOINT");
      progress(fmt("load: %s, %s", way.c_str(), idx ? "with the HNSW index" : "no vector index"));
      auto t0 = Clock::now();
      load();
      double s = s_since(t0);
      double first = 0;
      if (idx) {
        t0 = Clock::now();
        p.exec("SELECT id, title, embed <-> '" + qt + "' AS distance FROM load ORDER BY embed <-> '" + qt + "' LIMIT 10");
        first = s_since(t0);
      }
      if (p.exec("SELECT count(*) FROM load") != std::to_string(L)) die("PostgreSQL: load has the wrong count after " + way);
      p.exec("DROP TABLE load");
      auto it = std::find_if(results.begin(), results.end(), [&](const Result& r) { return r.way == way; });
      if (it == results.end()) results.push_back({way, {0, 0}, {0, 0}, true}), it = results.end() - 1;
      it->s[idx] = s, it->first[idx] = first;
    };

    const std::vector<std::string> copy_text = copy_chunks(rows, B);  // sent in chunks of B rows
    const int ways = o.load_index ? 2 : 1;  // without the index, then with it
    for (int idx = 0; idx < ways; idx++) {
      if (kf) {
        {  // POST /docs/load, a JSON array of B documents
          std::vector<std::string> bodies;
          for (size_t b = 0; b < L; b += B) {
            std::string s = "[";
            for (size_t i = b; i < std::min(L, b + B); i++) {
              if (i > b) s += ',';
              s += doc_json(rows[i]);
            }
            bodies.push_back(s + "]");
          }
          kitfox_way(fmt("kitfox POST /docs, %s a request", grouped((double)B).c_str()), idx, bodies, "/docs/load");
        }
      }
      pg_way("PostgreSQL COPY (one COPY, all rows)", idx,
             [&] { p.copy_in("COPY load (title, n, embed) FROM STDIN", copy_text); });
      if (kf) {
        {  // POST /query: put load $1 with a list of B documents
          std::vector<std::string> bodies;
          for (size_t b = 0; b < L; b += B) {
            std::string s = "[[";
            for (size_t i = b; i < std::min(L, b + B); i++) {
              if (i > b) s += ',';
              s += doc_json(rows[i]);
            }
            bodies.push_back(query_body("put load $1", s + "]]"));
          }
          kitfox_way(fmt("kitfox POST /query, put $1 of %s", grouped((double)B).c_str()), idx, bodies, "/query");
        }
      }
      {
        // INSERT of B rows a statement, prepared once (and one for a shorter last batch).
        std::vector<const char*> vals;
        vals.reserve(L * 3);
        std::vector<std::string> ns(L);
        for (size_t i = 0; i < L; i++) {
          ns[i] = std::to_string(rows[i].n);
          vals.push_back(rows[i].title.c_str());
          vals.push_back(ns[i].c_str());
          vals.push_back(rows[i].embed.c_str());
        }
        auto insert_sql = [](size_t k) {
          std::string s = "INSERT INTO load (title, n, embed) VALUES ";
          for (size_t j = 0; j < k; j++) s += fmt("%s($%zu, $%zu, $%zu)", j ? ", " : "", 3 * j + 1, 3 * j + 2, 3 * j + 3);
          return s;
        };
        pg_way(fmt("PostgreSQL INSERT of %s rows", grouped((double)B).c_str()), idx, [&] {
          p.exec("DEALLOCATE ALL");
          p.prepare("ins", insert_sql(B));
          if (L % B) p.prepare("ins_last", insert_sql(L % B));
          for (size_t b = 0; b < L; b += B) {
            size_t k = std::min(B, L - b);
            p.run(k == B ? "ins" : "ins_last", (int)(3 * k), vals.data() + 3 * b);
          }
        });
      }
      if (kf) {
        {  // POST /batch of B single puts
          std::vector<std::string> bodies;
          const std::string q = json_str("put load {title: $1, n: $2, embed: $3}");
          for (size_t b = 0; b < L; b += B) {
            std::string s = "[";
            for (size_t i = b; i < std::min(L, b + B); i++) {
              if (i > b) s += ',';
              s += "{\"query\":" + q + ",\"params\":[\"" + rows[i].title + "\"," + std::to_string(rows[i].n) + "," +
                   rows[i].embed + "]}";
            }
            bodies.push_back(s + "]");
          }
          kitfox_way(fmt("kitfox POST /batch of %s single puts", grouped((double)B).c_str()), idx, bodies, "/batch");
        }
      }
    }

    // Report.
    std::string s = fmt("\n## 2. Loading %s rows into an empty collection (one client)\n\n", grouped((double)L).c_str());
    s += fmt("Rows {title: text, n: int, embed: vector<128>}, the same on both sides, every request body or COPY chunk "
             "built before timing. kitfox `--sync 250`, PostgreSQL `synchronous_commit = off`; ids assigned by the "
             "database (kitfox's own, a bigserial primary key); no index on n; with the index: "
             "kitfox `%s` declared with the collection, pgvector `CREATE INDEX ... %s` made on the empty table, so "
             "both keep the graph as the rows land. A checkpoint on each side before each load (untimed). The rate "
             "of a load with the index counts the first near after it too (kitfox could defer work to it; "
             "PostgreSQL's index is complete when the load returns). Other processes used %s CPUs just before.\n\n",
             kHnswKitfox, kHnswPg, others.c_str());
    if (ways == 1) s += "This run loaded without the vector index only (`--no-load-index`).\n\n";
    double copy_rate[2] = {0, 0}, pg_best[2] = {0, 0}, kf_best[2] = {0, 0};
    std::string kf_best_way[2], pg_best_way[2];
    for (auto& r : results)
      for (int idx = 0; idx < ways; idx++) {
        double rate = (double)L / (r.s[idx] + r.first[idx]);
        if (r.pg && rate > pg_best[idx]) pg_best[idx] = rate, pg_best_way[idx] = r.way;
        if (!r.pg && rate > kf_best[idx]) kf_best[idx] = rate, kf_best_way[idx] = r.way;
        if (r.pg && r.way.find("COPY") != std::string::npos) copy_rate[idx] = rate;
      }
    Table t;
    t.head = {"way", "no vector index: s", "rows/s", "/ COPY", "with HNSW: s", "first near ms", "rows/s",
              "/ best pgvector"};
    for (auto& r : results) {
      double r0 = (double)L / r.s[0], r1 = (double)L / (r.s[1] + r.first[1]);
      if (ways == 1)
        t.rows.push_back({r.way, fmt("%.2f", r.s[0]), grouped(r0), ratio(r0, copy_rate[0]), "-", "-", "-", "-"});
      else
        t.rows.push_back({r.way, fmt("%.2f", r.s[0]), grouped(r0), ratio(r0, copy_rate[0]), fmt("%.2f", r.s[1]),
                          fmt("%.1f", r.first[1] * 1000), grouped(r1), ratio(r1, pg_best[1])});
    }
    s += t.md();
    if (kf) {
      Table tt;
      tt.head = {"target", "kitfox (best way)", "PostgreSQL", "ratio", "met?"};
      tt.left = 3;
      double a = kf_best[0] / copy_rate[0], b = kf_best[1] / pg_best[1];
      tt.rows.push_back({"no vector index ≥ 2x COPY", grouped(kf_best[0]) + " rows/s (" + kf_best_way[0] + ")",
                         grouped(copy_rate[0]) + " rows/s", fmt("%.2fx", a), met(a >= 2)});
      if (ways == 2)
        tt.rows.push_back({"with HNSW ≥ 1.5x pgvector", grouped(kf_best[1]) + " rows/s (" + kf_best_way[1] + ")",
                           grouped(pg_best[1]) + " rows/s (" + pg_best_way[1] + ")", fmt("%.2fx", b), met(b >= 1.5)});
      s += "\n" + tt.md();
      g_summary.push_back({fmt("Server load of %s rows x 128, no vector index (%s)", grouped((double)L).c_str(),
                               kf_best_way[0].c_str()),
                           grouped(kf_best[0]) + " rows/s", "PostgreSQL COPY " + grouped(copy_rate[0]) + " rows/s",
                           fmt("%.2fx", a), "≥ 2x COPY (#18)", met(a >= 2)});
      if (ways == 2)
        g_summary.push_back({fmt("Server load of %s rows x 128 with HNSW m=16 ef_construction=200 (%s)",
                               grouped((double)L).c_str(), kf_best_way[1].c_str()),
                           grouped(kf_best[1]) + " rows/s", "pgvector " + grouped(pg_best[1]) + " rows/s (" + pg_best_way[1] + ")",
                           fmt("%.2fx", b), "≥ 1.5x pgvector (#18)", met(b >= 1.5)});
    }
    emit(s);
  }

  // 3. durable writers -------------------------------------------------

  struct Mixed {
    Stats writes, reads;
    double commits_per_s = 0;
  };

  // Writers and readers for `seconds`: write(c) and read(c) each do one
  // request on their own connection and return its time.
  static Mixed mixed(size_t writers, size_t readers, double seconds, const std::function<double(size_t)>& write,
                     const std::function<double(size_t)>& read, const std::function<void()>& beside = nullptr,
                     Stats* beside_stats = nullptr) {
    std::atomic<bool> stop{false};
    std::vector<std::vector<double>> wl(writers), rl(readers);
    std::vector<double> bl;
    std::latch go((ptrdiff_t)(writers + readers + 1));
    std::vector<std::thread> th;
    for (size_t w = 0; w < writers; w++)
      th.emplace_back([&, w] {
        go.arrive_and_wait();
        while (!stop.load(std::memory_order_relaxed)) wl[w].push_back(write(w));
      });
    for (size_t r = 0; r < readers; r++)
      th.emplace_back([&, r] {
        go.arrive_and_wait();
        while (!stop.load(std::memory_order_relaxed)) rl[r].push_back(read(r));
      });
    auto t0 = Clock::now();  // before the clients are let go, as in run_clients
    go.count_down();
    if (beside) {  // once a second, on this thread
      for (int k = 1; s_since(t0) < seconds; k++) {
        auto a = Clock::now();
        beside();
        bl.push_back(us_since(a));
        auto next = t0 + std::chrono::milliseconds((int64_t)(k * 1000));
        if (std::chrono::duration<double>(next - t0).count() >= seconds) break;
        std::this_thread::sleep_until(next);
      }
      auto end = t0 + std::chrono::milliseconds((int64_t)(seconds * 1000));
      std::this_thread::sleep_until(end);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds((int64_t)(seconds * 1000)));
    }
    stop = true;
    for (auto& t : th) t.join();
    double wall = s_since(t0);
    Mixed m;
    std::vector<double> all_w, all_r;
    for (auto& v : wl) all_w.insert(all_w.end(), v.begin(), v.end());
    for (auto& v : rl) all_r.insert(all_r.end(), v.begin(), v.end());
    m.writes = stats_of(all_w, wall);
    m.reads = stats_of(all_r, wall);
    m.commits_per_s = m.writes.per_s;
    if (beside_stats) *beside_stats = stats_of(bl, wall);
    return m;
  }

  void durable() {
    progress("durable: preparing " + grouped((double)o.rows) + " rows on both sides");
    std::string others = others_now();
    double fsync_append_us = fdatasync_us(o.dir, 20, false), fsync_overwrite_us = fdatasync_us(o.dir, 20, true);
    bool in_memory = false;
    std::string fs = filesystem_of(o.dir, &in_memory);
    std::vector<Row> rows = make_rows(gen, o.rows, kBaseSeed + 10, 1000);
    std::unique_ptr<HttpClient> kc;
    if (kf) {
      kc = std::make_unique<HttpClient>(kf_durable_url);
      kc->query("drop collection if exists log");
      kc->query("create collection log (title text, n int)");
      for (size_t b = 0; b < o.rows; b += 1000) {
        std::string s = "[";
        for (size_t i = b; i < std::min(o.rows, b + 1000); i++)
          s += (i > b ? "," : "") + std::string("{\"title\":\"") + rows[i].title + "\",\"n\":" + std::to_string(rows[i].n) + "}";
        kc->post("/docs/log", s + "]");
      }
    }
    Pg p0(o.pg);
    p0.exec("DROP TABLE IF EXISTS log");
    p0.exec("CREATE TABLE log (id bigserial PRIMARY KEY, title text, n bigint)");
    {
      std::vector<std::string> chunks;
      std::string ch;
      for (size_t i = 0; i < o.rows; i++) ch += rows[i].title + "\t" + std::to_string(rows[i].n) + "\n";
      chunks.push_back(ch);
      p0.copy_in("COPY log (title, n) FROM STDIN", chunks);
      p0.exec("VACUUM ANALYZE log");
    }
    // A pool of small writes and of read ids, cycled.
    const size_t pool = 4096;
    std::vector<Row> wrows = make_rows(gen, pool, kPutSeed + 10, 1000);
    std::vector<std::string> kf_w(pool), pg_n(pool), kf_r(pool), pg_id(pool);
    SplitMix r(7);
    for (size_t i = 0; i < pool; i++) {
      pg_n[i] = std::to_string(wrows[i].n);
      kf_w[i] = query_body("put log {title: $1, n: $2}", "[\"" + wrows[i].title + "\"," + pg_n[i] + "]");
      pg_id[i] = std::to_string(1 + r.below(o.rows));
      kf_r[i] = query_body("get log where id = $1", "[" + pg_id[i] + "]");
    }

    size_t maxw = *std::max_element(o.writers.begin(), o.writers.end());
    std::vector<std::unique_ptr<HttpClient>> kw, kr;
    std::vector<std::unique_ptr<Pg>> pw, pr;
    for (size_t i = 0; i < maxw; i++) {
      if (kf) kw.push_back(std::make_unique<HttpClient>(kf_durable_url));
      pw.push_back(std::make_unique<Pg>(o.pg));
      pw.back()->exec("SET synchronous_commit = on");
      if (pw.back()->exec("SHOW synchronous_commit") != "on") die("PostgreSQL: synchronous_commit is not on");
      pw.back()->prepare("w", "INSERT INTO log (title, n) VALUES ($1, $2)");
    }
    for (size_t i = 0; i < o.readers; i++) {
      if (kf) kr.push_back(std::make_unique<HttpClient>(kf_durable_url));
      pr.push_back(std::make_unique<Pg>(o.pg));
      pr.back()->prepare("r", "SELECT id, title, n FROM log WHERE id = $1");
    }
    std::vector<size_t> wi(maxw * 16), ri(o.readers * 16);  // per-thread cursors, spaced apart
    auto kf_write = [&](size_t c) {
      const std::string& b = kf_w[(c * 977 + wi[c * 16]++) % pool];
      auto t0 = Clock::now();
      int st = kw[c]->request(http::verb::post, "/query", b, nullptr);
      double us = us_since(t0);
      if (st != 200) die(fmt("kitfox: durable put -> %d", st));
      return us;
    };
    auto kf_read = [&](size_t c) {
      const std::string& b = kf_r[(c * 1931 + ri[c * 16]++) % pool];
      auto t0 = Clock::now();
      int st = kr[c]->request(http::verb::post, "/query", b, nullptr);
      double us = us_since(t0);
      if (st != 200) die(fmt("kitfox: read by id -> %d", st));
      return us;
    };
    auto pg_write = [&](size_t c) {
      size_t k = (c * 977 + wi[c * 16]++) % pool;
      const char* v[2] = {wrows[k].title.c_str(), pg_n[k].c_str()};
      auto t0 = Clock::now();
      pw[c]->run("w", 2, v);
      return us_since(t0);
    };
    auto pg_read = [&](size_t c) {
      const char* v[1] = {pg_id[(c * 1931 + ri[c * 16]++) % pool].c_str()};
      auto t0 = Clock::now();
      pr[c]->run("r", 1, v);
      return us_since(t0);
    };
    // Warm-up: a second of 4 writers and the readers on each side.
    if (kf) mixed(std::min<size_t>(4, maxw), o.readers, 1, kf_write, kf_read);
    mixed(std::min<size_t>(4, maxw), o.readers, 1, pg_write, pg_read);

    std::vector<std::pair<Mixed, Mixed>> res;
    for (size_t w : o.writers) {
      Mixed k, p;
      progress(fmt("durable: %zu writer%s and %zu readers, %.0f s each side", w, w > 1 ? "s" : "", o.readers, o.seconds));
      if (kf) k = mixed(w, o.readers, o.seconds, kf_write, kf_read);
      p = mixed(w, o.readers, o.seconds, pg_write, pg_read);
      res.push_back({k, p});
    }

    std::string s = fmt("\n## 3. Durable writers with %zu readers beside them\n\n", o.readers);
    s += fmt("Each writer puts one row {title, n} a request (kitfox `--sync always`: acknowledged once flushed, "
             "concurrent writers sharing flushes; PostgreSQL `synchronous_commit = on`, an INSERT a transaction); each "
             "reader reads a row by id among %s, on its own connection. %.0f s per configuration and side, after a "
             "second of warm-up. Data on %s; one fdatasync there of a small append takes %.2f ms, of a small write over "
             "flushed bytes (as into a preallocated log) %.2f ms (medians of 20). Other processes used %s CPUs just "
             "before. Latencies in ms.\n\n",
             grouped((double)o.rows).c_str(), o.seconds, fs.c_str(), fsync_append_us / 1000, fsync_overwrite_us / 1000,
             others.c_str());
    Table t;
    t.head = {"writers", "kitfox commits/s", "write p50", "p99", "reads/s", "read p99", "read max", "PG commits/s",
              "write p50", "p99", "reads/s", "read p99", "read max", "kitfox / PG commits"};
    for (size_t i = 0; i < res.size(); i++) {
      auto& [k, p] = res[i];
      bool hk = kf;
      t.rows.push_back({std::to_string(o.writers[i]), hk ? grouped(k.commits_per_s) : "-", hk ? ms2(k.writes.p50) : "-",
                        hk ? ms2(k.writes.p99) : "-", hk ? grouped(k.reads.per_s) : "-", hk ? ms2(k.reads.p99) : "-",
                        hk ? ms2(k.reads.max) : "-", grouped(p.commits_per_s), ms2(p.writes.p50), ms2(p.writes.p99),
                        grouped(p.reads.per_s), ms2(p.reads.p99), ms2(p.reads.max),
                        hk ? ratio(k.commits_per_s, p.commits_per_s) : "-"});
    }
    s += t.md();
    if (in_memory) s += "\n**The data directory is in memory: a flush costs nothing there, so these are not durable writes.**\n";
    if (kf) {
      for (size_t i = 0; i < res.size(); i++) {
        if (o.writers[i] != 16) continue;
        double r = res[i].first.commits_per_s / res[i].second.commits_per_s;
        s += fmt("\nTarget: 16 durable writers ≥ 3x PostgreSQL's commits/s: %.2fx, %s.\n", r, met(r >= 3).c_str());
        g_summary.push_back({"Server durable writers, 16 clients + 2 readers, commits/s", grouped(res[i].first.commits_per_s),
                             "PostgreSQL " + grouped(res[i].second.commits_per_s), fmt("%.2fx", r), "≥ 3x (#18)",
                             met(r >= 3)});
        g_summary.push_back({"Server readers' worst wait beside 16 durable writers", ms2(res[i].first.reads.max) + " ms",
                             "PostgreSQL " + ms2(res[i].second.reads.max) + " ms",
                             ratio(res[i].first.reads.max, res[i].second.reads.max), "—", "—"});
      }
    }
    emit(s);
    if (kf) kc->query("drop collection log");
    p0.exec("DROP TABLE log");
  }

  // 4. reconciliation --------------------------------------------------

  void recon() {
    const size_t N = o.recon_rows;
    progress("recon: preparing a ledger of " + grouped((double)N) + " rows on both sides");
    std::string others = others_now();
    const size_t accounts = 1000;
    auto account = [](uint64_t a) { return fmt("acct-%04" PRIu64, a); };
    SplitMix r(11);
    std::vector<std::string> acct(N), amount(N);
    for (size_t i = 0; i < N; i++) {
      acct[i] = account(r.below(accounts));
      amount[i] = std::to_string((int64_t)r.below(1001) - 500);
    }
    double kf_load = 0, pg_load = 0;
    std::unique_ptr<HttpClient> kc;
    if (kf) {
      kc = std::make_unique<HttpClient>(kf_url);
      kc->query("drop collection if exists ledger");
      kc->query("create collection ledger (account text, amount int)");
      auto t0 = Clock::now();
      for (size_t b = 0; b < N; b += 10000) {
        std::string s = "[";
        for (size_t i = b; i < std::min(N, b + 10000); i++)
          s += (i > b ? ",{\"account\":\"" : "{\"account\":\"") + acct[i] + "\",\"amount\":" + amount[i] + "}";
        kc->post("/docs/ledger", s + "]");
      }
      kf_load = s_since(t0);
      kc->query("checkpoint");
    }
    Pg p0(o.pg);
    p0.exec("DROP TABLE IF EXISTS ledger");
    p0.exec("CREATE TABLE ledger (id bigserial PRIMARY KEY, account text, amount bigint)");
    {
      std::vector<std::string> chunks;
      for (size_t b = 0; b < N; b += 10000) {
        std::string s;
        for (size_t i = b; i < std::min(N, b + 10000); i++) s += acct[i] + "\t" + amount[i] + "\n";
        chunks.push_back(std::move(s));
      }
      auto t0 = Clock::now();
      p0.copy_in("COPY ledger (account, amount) FROM STDIN", chunks);
      pg_load = s_since(t0);
      p0.exec("VACUUM ANALYZE ledger");
      p0.exec("CHECKPOINT");
    }

    const size_t W = o.recon_writers, pool = 4096;
    std::vector<std::string> kf_w(pool), pa(pool), pm(pool);
    for (size_t i = 0; i < pool; i++) {
      pa[i] = account(r.below(accounts));
      pm[i] = std::to_string((int64_t)r.below(1001) - 500);
      kf_w[i] = query_body("put ledger {account: $1, amount: $2}", "[\"" + pa[i] + "\"," + pm[i] + "]");
    }
    std::vector<std::unique_ptr<HttpClient>> kw;
    std::vector<std::unique_ptr<Pg>> pw;
    for (size_t i = 0; i < W; i++) {
      if (kf) kw.push_back(std::make_unique<HttpClient>(kf_url));
      pw.push_back(std::make_unique<Pg>(o.pg));
      pw.back()->exec("SET synchronous_commit = off");
      pw.back()->prepare("w", "INSERT INTO ledger (account, amount) VALUES ($1, $2)");
    }
    std::unique_ptr<HttpClient> kagg;
    if (kf) kagg = std::make_unique<HttpClient>(kf_url);
    Pg pagg(o.pg);
    pagg.prepare("agg", "SELECT count(*), sum(amount) FROM ledger");
    std::vector<size_t> wi(W * 16);
    auto kf_write = [&](size_t c) {
      const std::string& b = kf_w[(c * 977 + wi[c * 16]++) % pool];
      auto t0 = Clock::now();
      int st = kw[c]->request(http::verb::post, "/query", b, nullptr);
      double us = us_since(t0);
      if (st != 200) die(fmt("kitfox: ledger put -> %d", st));
      return us;
    };
    auto pg_write = [&](size_t c) {
      size_t k = (c * 977 + wi[c * 16]++) % pool;
      const char* v[2] = {pa[k].c_str(), pm[k].c_str()};
      auto t0 = Clock::now();
      pw[c]->run("w", 2, v);
      return us_since(t0);
    };
    auto none = [](size_t) { return 0.0; };
    const std::string kf_agg_q = "get ledger select count(*), sum(amount)";
    double kf_count = 0, pg_count = 0;
    auto kf_agg = [&] {
      std::string a = kagg->query(kf_agg_q);
      kf_count = number_after(a, "count(*)");
    };
    auto pg_agg = [&] {
      std::vector<int64_t> c;
      pagg.run("agg", 0, nullptr, &c);
      pg_count = c.empty() ? -1 : (double)c[0];
    };
    // Warm-up: the aggregate twice and a second of writes on each side.
    if (kf) kf_agg(), kf_agg(), mixed(W, 0, 1, kf_write, none);
    pg_agg(), pg_agg(), mixed(W, 0, 1, pg_write, none);

    progress(fmt("recon: %zu writers alone, then beside the aggregate, %.0f s each, each side", W, o.recon_seconds));
    Mixed k_alone, k_recon, p_alone, p_recon;
    Stats k_agg, p_agg;
    if (kf) {
      k_alone = mixed(W, 0, o.recon_seconds, kf_write, none);
      k_recon = mixed(W, 0, o.recon_seconds, kf_write, none, kf_agg, &k_agg);
    }
    p_alone = mixed(W, 0, o.recon_seconds, pg_write, none);
    p_recon = mixed(W, 0, o.recon_seconds, pg_write, none, pg_agg, &p_agg);
    if (kf && kf_count < (double)N) die(fmt("kitfox: the aggregate counted %.0f rows, fewer than %zu", kf_count, N));
    if (pg_count < (double)N) die(fmt("PostgreSQL: the aggregate counted %.0f rows, fewer than %zu", pg_count, N));

    std::string s = fmt("\n## 4. Reconciliation: an aggregate over a ledger of %s rows each second beside %zu writers\n\n",
                        grouped((double)N).c_str(), W);
    s += fmt("The ledger {account: text, amount: int} loaded first (kitfox POST /docs of 10,000: %.2f s; PostgreSQL "
             "COPY: %.2f s). Each writer puts one row a request (kitfox `--sync 250`, PostgreSQL "
             "`synchronous_commit = off`); once a second a fifth client asks kitfox `%s` and PostgreSQL "
             "`SELECT count(*), sum(amount) FROM ledger` (its parallel workers as configured). The same writes alone "
             "for %.0f s first, then %.0f s beside the aggregate. Other processes used %s CPUs just before. Latencies "
             "in ms.\n\n",
             kf_load, pg_load, kf_agg_q.c_str(), o.recon_seconds, o.recon_seconds, others.c_str());
    Table t;
    t.left = 2;
    t.head = {"side", "round", "writes/s", "write p50", "p99", "max", "past 50 ms", "aggregates", "aggregate p50",
              "max"};
    auto row = [&](const std::string& side, const std::string& round, const Mixed& m, const Stats* agg) {
      t.rows.push_back({side, round, grouped(m.writes.per_s), ms2(m.writes.p50), ms2(m.writes.p99), ms2(m.writes.max),
                        std::to_string(m.writes.over_50ms), agg ? std::to_string(agg->n) : "-",
                        agg ? ms2(agg->p50) : "-", agg ? ms2(agg->max) : "-"});
    };
    if (kf) row("kitfox", "writes alone", k_alone, nullptr), row("kitfox", "beside the aggregate", k_recon, &k_agg);
    row("PostgreSQL", "writes alone", p_alone, nullptr), row("PostgreSQL", "beside the aggregate", p_recon, &p_agg);
    s += t.md();
    if (kf) {
      bool ok = k_recon.writes.max <= 50000;
      s += fmt("\nTarget: the writes beside the reconciliation never wait past 50 ms: worst %.2f ms (%zu past 50 ms), %s.\n",
               k_recon.writes.max / 1000, k_recon.writes.over_50ms, met(ok).c_str());
      g_summary.push_back({fmt("Server reconciliation: writes' worst wait, %zu writers beside an aggregate over %s rows each second",
                               W, grouped((double)N).c_str()),
                           ms2(k_recon.writes.max) + " ms (alone " + ms2(k_alone.writes.max) + ")",
                           "PostgreSQL " + ms2(p_recon.writes.max) + " ms (alone " + ms2(p_alone.writes.max) + ")",
                           ratio(k_recon.writes.max, p_recon.writes.max), "≤ 50 ms (#18)", met(ok)});
    }
    emit(s);
    if (kf) kc->query("drop collection ledger");
    p0.exec("DROP TABLE ledger");
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  b.o = parse_options(argc, argv);
  const Options& o = b.o;
  b.kf = !o.no_kitfox;
  g_wait_quiet = o.wait_quiet;
  if (b.kf) {
    b.kf_url = parse_url(o.kitfox);
    b.kf_durable_url = parse_url(o.kitfox_durable);
    HttpClient h(b.kf_url);
    std::string body;
    int st = h.request(http::verb::get, "/health", "", &body);
    if (st != 200) die("kitfox: GET /health -> " + std::to_string(st) + ": " + body);
  }
  Pg pg(o.pg);
  std::string pg_version = pg.exec("SHOW server_version");
  std::string vec_version = pg.exec("SELECT extversion FROM pg_extension WHERE extname = 'vector'");
  if (vec_version.empty()) die("PostgreSQL: the vector extension is not created in this database");
  std::string settings;
  for (const char* k : {"shared_buffers", "maintenance_work_mem", "max_wal_size", "fsync", "wal_sync_method",
                        "max_parallel_workers_per_gather", "max_parallel_maintenance_workers", "jit"})
    settings += fmt("%s%s = %s", settings.empty() ? "" : ", ", k, pg.exec(std::string("SHOW ") + k).c_str());

  std::string s = "# kitfox serve vs PostgreSQL + pgvector, over loopback (" + utc_stamp() + ")\n\n";
  s += "### Machine\n\n| | |\n| --- | --- |\n" + machine_rows();
  s += "| PostgreSQL | " + pg_version + ", pgvector " + vec_version + "; " + settings + " |\n";
  std::string built;  // when the binary was built: the working tree may be ahead of the commit
  struct stat st;
  if (!o.kitfox_bin.empty() && ::stat(o.kitfox_bin.c_str(), &st) == 0) {
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&st.st_mtime));
    built = std::string(", the binary built ") + buf;
  }
  s += "| kitfox | " + (b.kf ? (o.kitfox_bin.empty() ? std::string("kitfox serve") : o.kitfox_bin + " serve") +
                               (o.kitfox_threads.empty() ? "" : " --threads " + o.kitfox_threads) +
                               (o.kitfox_loops.empty() ? "" : " --loops " + o.kitfox_loops) + ", HEAD " +
                               (o.commit.empty() ? "unknown" : o.commit) + built
                         : std::string("not run (--no-kitfox)")) + " |\n";
  s += "| data | " + filesystem_of(o.dir) + " |\n";
  s += "| clients | this program, on the same machine: Boost.Beast " + std::to_string(BOOST_BEAST_VERSION) +
       " HTTP/1.1 (synchronous, kept alive, TCP_NODELAY), libpq " + std::to_string(PQlibVersion()) +
       " (prepared, text format); 127.0.0.1 for both |\n";
  s += "| CPUs | " + (o.placement.empty() ? std::string("as the kernel places them (not pinned)") : o.placement) + " |\n";
  emit(s);

  if (o.runs("requests")) b.requests();
  if (o.runs("load")) b.loads();
  if (o.runs("durable")) b.durable();
  if (o.runs("recon")) b.recon();

  if (!g_summary.empty()) {
    std::string t = "\n## Lines for bench/RESULTS.md (the summary table's columns)\n\n";
    t += "| measure | kitfox | peer | kitfox / peer | design target | met? |\n| --- | ---: | ---: | ---: | --- | --- |\n";
    for (auto& r : g_summary)
      t += "| " + r.measure + " (" + utc_stamp().substr(0, 10) + ") | " + r.kitfox + " | " + r.peer + " | " + r.ratio +
           " | " + r.target + " | " + r.met + " |\n";
    emit(t);
  }
  if (!o.out.empty()) {
    FILE* f = std::fopen(o.out.c_str(), "w");
    if (!f) die("cannot write " + o.out);
    std::fputs(g_report.c_str(), f);
    std::fclose(f);
    progress("server_bench: report written to " + o.out);
  }
  return 0;
}
