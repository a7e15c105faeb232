// `kitfox serve` over HTTP/1.1: Boost.Beast's parser and serializer on Asio
// (see http_server.h for the threads). Compiled with exceptions on (Asio
// and Beast report through them where no error_code overload exists); every
// call here takes an error_code, so none is thrown in normal running.
#include "http_server.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "cli_text.h"
#include "http_api.h"
#include "port.h"

namespace kitfox {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr uint32_t kHeaderLimit = 64 << 10;  // bytes of a request's start line and headers
constexpr size_t kSmallBody = 16 << 10;  // read into the buffer as it is
constexpr size_t kBodyRead = 64 << 10;   // the receive size for larger bodies (Beast's most)
constexpr const char* kServer = "kitfox/0.1.0";
}  // namespace

class Session;

// An event loop (an io_context run by one thread) and the connections that
// live on it. Only its thread touches `sessions`.
struct Loop {
  explicit Loop(uint32_t timeout_ms) : ctx(1), work(net::make_work_guard(ctx)), tick(ctx) {
    // The watchdog looks at its connections this often: a deadline is kept
    // to within a tick (a quarter of the timeout, 50 ms to 1 s).
    period = std::chrono::milliseconds(std::clamp<uint32_t>(timeout_ms / 4, 50, 1000));
  }
  void watch();  // starts the watchdog; it runs until the last connection closes after stop()
  void stop();   // shutdown: close the idle connections, the rest after their response
  void close_all();  // close every connection now

  std::unordered_set<Session*> sessions;  // first: it outlives whatever ctx holds when destroyed
  bool stopping = false;
  net::io_context ctx;
  net::executor_work_guard<net::io_context::executor_type> work;  // the loop runs until shutdown
  net::steady_timer tick;
  std::chrono::milliseconds period;
};

struct HttpServer::Impl {
  Impl(Database& db, const ServerOptions& o)
      : api(db, o.token, o.cors_origins), options(o), workers(int(o.threads)), workers_work(net::make_work_guard(workers)) {
    for (unsigned i = 0; i < o.loops; i++) loops.push_back(std::make_unique<Loop>(o.timeout_ms));
    acceptor.emplace(loops[0]->ctx);
  }

  void accept();

  Api api;
  ServerOptions options;
  // One event loop a thread, as many as cores: a connection lives on one
  // loop, so a short request is read, run and answered on one thread, with
  // no hand-over between threads on the way (each costs a wake-up, tens of
  // microseconds on a busy machine, and more loops than cores more of
  // them). A request that may run long (Api::handle's `defer`) is handed to
  // the workers and its answer back, so it holds up no other connection of
  // its loop; a durable write's flush holds none either.
  std::vector<std::unique_ptr<Loop>> loops;
  net::io_context workers;  // run by options.threads threads
  net::executor_work_guard<net::io_context::executor_type> workers_work;
  std::vector<std::thread> worker_threads;
  size_t next_loop = 0;                   // the loop of the next connection (round robin)
  std::optional<tcp::acceptor> acceptor;  // on loops[0]
  std::optional<net::steady_timer> retry;  // accept again after running out of descriptors
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool stopped = false;  // shutdown() ran
};

// One connection: read a request (its header, then its body), run it, write
// the response, and again while the client keeps the connection alive.
//
// Deadlines are kept by the loop's watchdog, not by a timer per read and
// write (two timer updates, two system calls, a request): a request must
// arrive whole, and its response be taken, by the deadline; a connection
// idle past it is closed. None runs while a request runs.
class Session : public std::enable_shared_from_this<Session> {
 public:
  using Clock = std::chrono::steady_clock;

  Session(tcp::socket socket, HttpServer::Impl& server, Loop& loop)
      : socket_(std::move(socket)), server_(server), loop_(loop) {}
  ~Session() {
    if (registered_ && !closed_) loop_.sessions.erase(this);
  }

  // On the loop's thread.
  void start() {
    if (loop_.stopping) return close();
    loop_.sessions.insert(this);
    registered_ = true;
    beast::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    read_header();
  }

  // From the loop's shutdown: an idle connection closes now, a busy one
  // after its response (which the watchdog still gives the timeout).
  void stop() {
    stopping_ = true;
    if (!busy_ && !writing_ && !linger_) close();
  }

  // Closed now, a response being written or not (a second SIGINT).
  void abort() {
    stopping_ = true;
    close();
  }

  // From the watchdog: past its deadline (reading a request, writing a
  // response, or idle) the connection is closed; nothing half-read runs.
  void check(Clock::time_point now) {
    if (!busy_ && now >= deadline_) close();
  }

 private:
  void arm() { deadline_ = Clock::now() + std::chrono::milliseconds(server_.options.timeout_ms); }

  void read_header() {
    if (stopping_) return close();
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options.max_body);
    arm();
    http::async_read_header(socket_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec) return on_read_error(ec);
    // A body is framed by its length or by chunks, nothing else: any other
    // transfer coding (gzip, identity, chunked twice) would leave where the
    // body ends to guess, and a guess unlike a proxy's in front would read
    // the body as a request of its own (RFC 9112, 6.3).
    const auto& fields = parser_->get();
    const auto codings = fields.equal_range(http::field::transfer_encoding);
    if (codings.first != codings.second &&
        (std::next(codings.first) != codings.second || !beast::iequals(trim(codings.first->value()), "chunked")))
      return respond_error(400, "invalid", "a malformed HTTP request (a Transfer-Encoding other than chunked)");
    // An HTTP/1.0 client knows no 100 Continue: its expectation is ignored
    // (RFC 9110, 10.1.1).
    if (fields.version() >= 11 && beast::iequals(fields[http::field::expect], "100-continue")) {
      // The client waits for a word before it sends the body. One the
      // request's head refuses (its token, path, method or media type) is
      // the final answer, and the body is not asked for.
      if (std::optional<ApiResponse> no = server_.api.refuse_head(request_head())) return refuse_early(std::move(*no));
      cont_.emplace(http::status::continue_, fields.version());
      http::async_write(socket_, *cont_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  // The request's head, its body not read yet.
  ApiRequest request_head() const {
    const auto& req = parser_->get();
    ApiRequest r;
    r.method = req.method_string();
    r.target = req.target();
    r.content_type = req[http::field::content_type];
    r.authorization = req[http::field::authorization];
    r.accept = req[http::field::accept];
    r.origin = req[http::field::origin];
    return r;
  }

  void read_body() {
    if (parser_->is_done()) return on_read({}, 0);  // no body (a GET)
    // Beast reads as much as the buffer has room for (512 bytes at first,
    // at most 64 KiB): a large body, in as few receives as it allows.
    const auto length = parser_->content_length();
    if (!length || *length > kSmallBody) buffer_.reserve(kBodyRead);
    http::async_read(socket_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read_error(beast::error_code ec) {
    if (closed_) return;
    if (ec == http::error::body_limit) {
      respond_error(413, "limit",
                    "the request body is larger than the server takes (" + std::to_string(server_.options.max_body) +
                        " bytes; kitfox serve --max-body)");
    } else if (ec == http::error::header_limit) {
      respond_error(431, "limit", "the request's headers are larger than " + std::to_string(kHeaderLimit) + " bytes");
    } else if (ec == http::error::buffer_overflow) {
      respond_error(431, "limit",
                    "a chunk's size line or the request's trailers do not fit the connection's " +
                        std::to_string(kHeaderLimit + kBodyRead) + "-byte buffer");
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      respond_error(400, "invalid", "a malformed HTTP request (" + ec.message() + ")");
    } else {
      // The client went away, was idle or too slow: nothing was run.
      close();
    }
  }

  void on_read(beast::error_code ec, size_t) {
    // Closed after the read was done but before this ran (a shutdown or
    // the watchdog): the request is not run, since no answer could go out.
    if (closed_) return;
    if (ec) return on_read_error(ec);
    busy_ = true;
    auto& req = parser_->get();
    ApiRequest r = request_head();
    r.body = req.body();
    ApiResponse a = server_.api.handle(r, true);
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    if (a.defer) return hand_over(r, keep_alive, version);
    answer(std::move(a), keep_alive, version);
  }

  // A request that may run long runs on a worker, the loop going on with
  // its other connections; the answer comes back to the loop, which is kept
  // running for it (a shutdown waits for it). The request's views stay
  // good: parser_ holds it until respond().
  void hand_over(const ApiRequest& r, bool keep_alive, unsigned version) {
    auto hold = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(loop_.ctx.get_executor());
    net::post(server_.workers, [self = shared_from_this(), r, hold = std::move(hold), keep_alive, version]() mutable {
      ApiResponse a = self->server_.api.handle(r, false);
      net::io_context& ctx = self->loop_.ctx;
      // The session's reference moves on to the loop: its last one is never let go here.
      net::post(ctx, [self = std::move(self), a = std::move(a), hold = std::move(hold), keep_alive, version]() mutable {
        self->answer(std::move(a), keep_alive, version);
        hold.reset();
      });
    });
  }

  // On the loop's thread: the response now, or a durable write's once its
  // flush is done.
  void answer(ApiResponse a, bool keep_alive, unsigned version) {
    if (!a.durable_at) return respond(std::move(a), keep_alive, version);
    // A durable write has landed: its answer waits for its flush, this
    // loop does not. The flusher hands the answer back to the loop, and
    // until then the loop is kept running (a shutdown waits for it).
    auto hold = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(loop_.ctx.get_executor());
    server_.api.when_durable(std::move(a), [self = shared_from_this(), hold, keep_alive, version](ApiResponse done) mutable {
      // The captures move on to the loop: the last reference to the
      // session is never let go on the flusher's thread.
      net::io_context& ctx = self->loop_.ctx;
      net::post(ctx, [self = std::move(self), hold = std::move(hold), done = std::move(done), keep_alive, version]() mutable {
        self->respond(std::move(done), keep_alive, version);
        hold.reset();
      });
    });
  }

  // An error found before the request was read whole: the response goes
  // out, then the connection closes, after reading what the client still
  // sends for a while (closing with unread bytes would reset the connection
  // and lose the response on the way).
  void respond_error(unsigned status, const char* code, const std::string& message) {
    refuse_early(Api::error(status, code, message));
  }

  void refuse_early(ApiResponse a) {
    busy_ = true;
    linger_ = true;
    respond(std::move(a), false, 11);
  }

  void respond(ApiResponse a, bool keep_alive, unsigned version) {
    res_.emplace(http::int_to_status(a.status), version);
    res_->set(http::field::server, kServer);
    res_->set(http::field::content_type, a.content_type);
    if (a.allow) res_->set(http::field::allow, a.allow);
    if (a.unauthorized) res_->set(http::field::www_authenticate, "Bearer");
    if (!a.allow_origin.empty()) {
      res_->set(http::field::access_control_allow_origin, a.allow_origin);
      if (a.allow_origin != "*") res_->set(http::field::vary, "Origin");
      if (a.preflight) {
        res_->set(http::field::access_control_allow_methods, "GET, POST");
        res_->set(http::field::access_control_allow_headers, "Content-Type, Authorization, Accept");
        res_->set(http::field::access_control_max_age, "600");
      }
    }
    res_->keep_alive(keep_alive && !stopping_);
    if (a.head) {
      res_->content_length(a.body.size());  // what a GET would send; nothing follows
    } else if (a.status == 204) {
      // No Content-Length in a 204 (RFC 9110, 8.6), and no body.
    } else {
      res_->body() = std::move(a.body);
      res_->prepare_payload();
    }
    parser_.reset();  // the request's body is not needed any more
    busy_ = false;    // from here the deadline holds: the client must take the response
    arm();
    writing_ = true;
    http::async_write(socket_, *res_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    writing_ = false;
    bool again = !ec && res_->keep_alive() && !stopping_;
    res_.reset();
    if (buffer_.capacity() > kSmallBody) buffer_.shrink_to_fit();  // an idle connection keeps little
    if (!again && linger_ && !ec) return linger();
    if (!again) return close();
    read_header();
  }

  void linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    deadline_ = Clock::now() + std::chrono::seconds(2);
    drain_.reset(new char[kDrainBytes]);
    drain();
  }

  void drain() {
    constexpr uint64_t kMaxDrain = 64ull << 20;
    socket_.async_read_some(net::buffer(drain_.get(), kDrainBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrain) return self->close();
      self->drain();
    });
  }

  // Pending reads and writes end with operation_aborted; their handlers
  // hold the last references.
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (registered_) loop_.sessions.erase(this);
    // The last connection of a stopping loop: the watchdog has nothing left.
    if (loop_.stopping && loop_.sessions.empty()) loop_.tick.cancel();
  }

  tcp::socket socket_;
  HttpServer::Impl& server_;
  Loop& loop_;
  // At most a request's head and a receive of its body: a chunk's size line
  // (its extensions) and the trailers, which Beast takes only once they are
  // all in the buffer and which no other limit bounds, cannot grow it
  // further (a larger one is refused as such).
  beast::flat_buffer buffer_{kHeaderLimit + kBodyRead};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> cont_;
  std::optional<http::response<http::string_body>> res_;
  static constexpr size_t kDrainBytes = 16 << 10;
  std::unique_ptr<char[]> drain_;  // only while lingering
  uint64_t drained_ = 0;
  Clock::time_point deadline_;
  bool linger_ = false;     // close after the response by draining the request
  bool busy_ = false;       // a request read whole runs (no deadline meanwhile)
  bool writing_ = false;
  bool stopping_ = false;   // the server is shutting down
  bool registered_ = false; // in loop_.sessions
  bool closed_ = false;
};

void Loop::watch() {
  tick.expires_after(period);
  tick.async_wait([this](beast::error_code ec) {
    if (ec) return;
    const auto now = Session::Clock::now();
    // check() may close a session, which leaves the set: walk a copy.
    std::vector<Session*> all(sessions.begin(), sessions.end());
    for (Session* s : all)
      if (sessions.count(s)) s->check(now);
    // Stopping, the deadlines still hold (a response must be taken in time)
    // until the last connection is gone; then the loop may return.
    if (stopping && sessions.empty()) return;
    watch();
  });
}

void Loop::stop() {
  stopping = true;
  std::vector<Session*> all(sessions.begin(), sessions.end());
  for (Session* s : all)
    if (sessions.count(s)) s->stop();
  if (sessions.empty()) tick.cancel();
  work.reset();  // the loop returns once its last connection is closed
}

void Loop::close_all() {
  // Stopping from here (it may come before stop(), a second signal soon
  // after the first): a connection that starts later closes at once.
  stopping = true;
  std::vector<Session*> all(sessions.begin(), sessions.end());
  for (Session* s : all)
    if (sessions.count(s)) s->abort();
  tick.cancel();
}

void HttpServer::Impl::accept() {
  Loop& loop = *loops[next_loop];
  next_loop = (next_loop + 1) % loops.size();
  acceptor->async_accept(loop.ctx, [this, &loop](beast::error_code ec, tcp::socket socket) {
    if (!acceptor->is_open()) return;  // shut down
    if (ec) {
      // Out of descriptors (or a connection reset before it was taken):
      // try again shortly instead of spinning.
      retry.emplace(acceptor->get_executor(), std::chrono::milliseconds(50));
      retry->async_wait([this](beast::error_code) {
        if (acceptor->is_open()) accept();
      });
      return;
    }
    auto s = std::make_shared<Session>(std::move(socket), *this, loop);
    net::post(loop.ctx, [s] { s->start(); });
    accept();
  });
}

Status HttpServer::check_host(const std::string& host) {
  beast::error_code ec;
  net::ip::make_address(host, ec);
  if (ec) return Status(Code::Invalid, "--host " + host + ": not an IP address (" + ec.message() + ")");
  return Status::ok();
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(Database& db, const ServerOptions& options) {
  ServerOptions o = options;
  if (o.loops == 0) o.loops = unsigned(std::max(1, port::cores()));
  if (o.threads == 0) o.threads = unsigned(std::max(4, port::cores()));
  KF_TRY(check_host(o.host));
  beast::error_code ec;
  auto address = net::ip::make_address(o.host, ec);
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->impl_ = std::make_unique<Impl>(db, o);
  Impl& s = *server->impl_;
  tcp::endpoint endpoint(address, o.port);
  const std::string where = o.host + ":" + std::to_string(o.port);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (ec) return Status(Code::Io, "cannot listen on " + where + ": " + ec.message());
  s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status(Code::Io, "cannot listen on " + where + ": " + ec.message());
  s.port = s.acceptor->local_endpoint(ec).port();
  s.accept();
  s.threads.reserve(o.loops);
  for (auto& loop : s.loops) net::post(loop->ctx, [l = loop.get()] { l->watch(); });
  for (unsigned i = 0; i < o.loops; i++) s.threads.emplace_back([&s, i] { s.loops[i]->ctx.run(); });
  for (unsigned i = 0; i < o.threads; i++) s.worker_threads.emplace_back([&s] { s.workers.run(); });
  return server;
}

HttpServer::~HttpServer() { shutdown(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::close_connections() {
  for (auto& loop : impl_->loops) net::post(loop->ctx, [l = loop.get()] { l->close_all(); });
}

void HttpServer::shutdown() {
  if (!impl_ || impl_->stopped) return;
  Impl& s = *impl_;
  s.stopped = true;
  net::post(s.acceptor->get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor->close(ec);
    if (s.retry) s.retry->cancel();
  });
  for (auto& loop : s.loops) net::post(loop->ctx, [l = loop.get()] { l->stop(); });
  // Each loop returns once its last connection is closed and the answers
  // of the workers and the flusher it waits for are sent; then the workers
  // have nothing left.
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  s.workers_work.reset();
  for (auto& t : s.worker_threads) t.join();
  s.worker_threads.clear();
}

}  // namespace kitfox
