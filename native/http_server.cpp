// `kitfox serve` over HTTP/1.1: Boost.Beast's parser and serializer on Asio
// (see http_server.h for the threads). Compiled with exceptions on (Asio
// and Beast report through them where no error_code overload exists); every
// call here takes an error_code, so none is thrown in normal running.
#include "http_server.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http_api.h"
#include "port.h"

namespace kitfox {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr uint32_t kHeaderLimit = 64 << 10;  // bytes of a request's start line and headers
constexpr const char* kServer = "kitfox/0.1.0";

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}
}  // namespace

class Session;

struct HttpServer::Impl {
  Impl(Database& db, const ServerOptions& o) : api(db, o.token), options(o), ioc(int(o.threads)), acceptor(net::make_strand(ioc)) {}

  void accept();
  void remove(Session* s);

  Api api;
  ServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor;  // on a strand: its handlers and shutdown's close never overlap
  std::vector<std::thread> threads;
  uint16_t port = 0;

  std::mutex mu;  // guards sessions and stopping
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  bool stopping = false;
  std::optional<net::steady_timer> retry;  // accept again after running out of descriptors
};

// One connection: read a request (its header, then its body), run it, write
// the response, and again while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}
  ~Session() {
    if (!closed_) server_.remove(this);
  }

  void start() {
    beast::error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::read_header, shared_from_this()));
  }

  // From HttpServer::shutdown: an idle connection closes now, a busy one
  // after its response.
  void stop() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      if (!self->busy_) self->close();
    });
  }

 private:
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(server_.options.timeout_ms); }

  void read_header() {
    if (stopping_) return close();
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options.max_body);
    stream_.expires_after(timeout());
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec);
    if (iequals(parser_->get()[http::field::expect], "100-continue")) {
      // The client waits for a word before it sends the body.
      cont_.emplace(http::status::continue_, parser_->get().version());
      http::async_write(stream_, *cont_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      respond_error(413, "limit",
                    "the request body is larger than the server takes (" + std::to_string(server_.options.max_body) +
                        " bytes; kitfox serve --max-body)");
    } else if (ec == http::error::header_limit) {
      respond_error(431, "limit", "the request's headers are larger than " + std::to_string(kHeaderLimit) + " bytes");
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      respond_error(400, "invalid", "a malformed HTTP request (" + ec.message() + ")");
    } else {
      // The client went away, was idle or too slow: nothing was run.
      close();
    }
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec);
    busy_ = true;
    auto& req = parser_->get();
    ApiRequest r;
    r.method = req.method_string();
    r.target = req.target();
    r.content_type = req[http::field::content_type];
    r.authorization = req[http::field::authorization];
    r.accept = req[http::field::accept];
    r.body = req.body();
    ApiResponse a = server_.api.handle(r);
    respond(std::move(a), req.keep_alive(), req.version());
  }

  // An error found before the request was read whole: the response goes
  // out, then the connection closes, after reading what the client still
  // sends for a while (closing with unread bytes would reset the connection
  // and lose the response on the way).
  void respond_error(unsigned status, const char* code, const std::string& message) {
    busy_ = true;
    linger_ = true;
    respond(Api::error(status, code, message), false, 11);
  }

  void respond(ApiResponse a, bool keep_alive, unsigned version) {
    res_.emplace(http::int_to_status(a.status), version);
    res_->set(http::field::server, kServer);
    res_->set(http::field::content_type, a.content_type);
    if (a.allow) res_->set(http::field::allow, a.allow);
    if (a.unauthorized) res_->set(http::field::www_authenticate, "Bearer");
    res_->keep_alive(keep_alive && !stopping_);
    res_->body() = std::move(a.body);
    res_->prepare_payload();
    parser_.reset();  // the request's body is not needed any more
    stream_.expires_after(timeout());
    http::async_write(stream_, *res_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    busy_ = false;
    bool again = !ec && res_->keep_alive() && !stopping_;
    res_.reset();
    if (!again && linger_ && !ec) return linger();
    if (!again) return close();
    read_header();
  }

  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    linger_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    drain_.reset(new char[kDrainBytes]);
    drain();
  }

  void drain() {
    constexpr uint64_t kMaxDrain = 64ull << 20;
    stream_.expires_at(linger_deadline_);
    stream_.async_read_some(net::buffer(drain_.get(), kDrainBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrain) return self->close();
      self->drain();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
    server_.remove(this);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> cont_;
  std::optional<http::response<http::string_body>> res_;
  static constexpr size_t kDrainBytes = 16 << 10;
  std::unique_ptr<char[]> drain_;  // only while lingering
  uint64_t drained_ = 0;
  std::chrono::steady_clock::time_point linger_deadline_;
  bool linger_ = false;    // close after the response by draining the request
  bool busy_ = false;      // from a whole request until its response is out
  bool stopping_ = false;  // the server is shutting down
  bool closed_ = false;
};

void HttpServer::Impl::remove(Session* s) {
  std::lock_guard g(mu);
  sessions.erase(s);
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;  // shut down
    if (ec) {
      // Out of descriptors (or a connection reset before it was taken):
      // try again shortly instead of spinning.
      retry.emplace(acceptor.get_executor(), std::chrono::milliseconds(50));
      retry->async_wait([this](beast::error_code) {
        if (acceptor.is_open()) accept();
      });
      return;
    }
    auto s = std::make_shared<Session>(std::move(socket), *this);
    bool stop;
    {
      std::lock_guard g(mu);
      stop = stopping;
      if (!stop) sessions.emplace(s.get(), s);
    }
    if (stop) return;  // the socket closes with the session
    s->start();
    accept();
  });
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(Database& db, const ServerOptions& options) {
  ServerOptions o = options;
  if (o.threads == 0) o.threads = unsigned(std::max(16, 2 * port::cores()));
  beast::error_code ec;
  auto address = net::ip::make_address(o.host, ec);
  if (ec) return Status(Code::Invalid, "--host " + o.host + ": not an IP address (" + ec.message() + ")");
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->impl_ = std::make_unique<Impl>(db, o);
  Impl& s = *server->impl_;
  tcp::endpoint endpoint(address, o.port);
  const std::string where = o.host + ":" + std::to_string(o.port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (ec) return Status(Code::Io, "cannot listen on " + where + ": " + ec.message());
  s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status(Code::Io, "cannot listen on " + where + ": " + ec.message());
  s.port = s.acceptor.local_endpoint(ec).port();
  s.accept();
  s.threads.reserve(o.threads);
  for (unsigned i = 0; i < o.threads; i++) s.threads.emplace_back([&s] { s.ioc.run(); });
  return server;
}

HttpServer::~HttpServer() { shutdown(); }

uint16_t HttpServer::port() const { return impl_->port; }
unsigned HttpServer::threads() const { return impl_->options.threads; }

void HttpServer::shutdown() {
  if (!impl_) return;
  Impl& s = *impl_;
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard g(s.mu);
    if (s.stopping) return;
    s.stopping = true;
    for (auto& [p, w] : s.sessions)
      if (auto sp = w.lock()) live.push_back(std::move(sp));
  }
  net::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    if (s.retry) s.retry->cancel();
  });
  for (auto& sp : live) sp->stop();
  live.clear();
  // The threads return once the last connection is closed.
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace kitfox
