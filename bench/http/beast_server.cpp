// GET /health -> {"ok":true} with Boost.Beast on Boost.Asio, the shape a real
// server uses: one io_context run by N threads, one asynchronous session per
// connection (a strand each), kept-alive connections, a 30 s idle timeout.
// Usage: beast_server PORT THREADS [per-thread]
// With `per-thread`, the shape of h2o_server instead: N io_contexts, one per
// thread, each with its own listening socket on the port (SO_REUSEPORT), so
// a connection's handlers never move between threads.
// Builds with or without -fno-exceptions (see BOOST_NO_EXCEPTIONS below).
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

#ifdef BOOST_NO_EXCEPTIONS
// Boost.Config defines BOOST_NO_EXCEPTIONS under -fno-exceptions; then Asio
// and Beast call these instead of throwing. Every call below passes an
// error_code, so reaching one is a bug (or std::bad_alloc-like exhaustion).
namespace boost {
[[noreturn]] void throw_exception(std::exception const& e) {
  std::fprintf(stderr, "beast_server: fatal: %s\n", e.what());
  std::abort();
}
[[noreturn]] void throw_exception(std::exception const& e, boost::source_location const&) {
  throw_exception(e);
}
}  // namespace boost
#endif

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr char kBody[] = R"({"ok":true})";

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket&& socket) : stream_(std::move(socket)) {}

  void start() {
    // The socket's executor is this session's strand; start on it.
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(&Session::read, shared_from_this()));
  }

 private:
  void read() {
    req_ = {};
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, req_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return close();  // end of stream, timeout, bad request: drop it
    res_ = {};
    res_.version(req_.version());
    res_.keep_alive(req_.keep_alive());
    if (req_.method() == http::verb::get && req_.target() == "/health") {
      res_.result(http::status::ok);
      res_.body() = kBody;
    } else {
      res_.result(http::status::not_found);
      res_.body() = R"({"error":{"code":"not_found"}})";
    }
    res_.set(http::field::content_type, "application/json");
    res_.prepare_payload();
    http::async_write(stream_, res_,
                      beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (ec) return close();
    if (!res_.keep_alive()) return close();
    read();
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& ioc, tcp::endpoint ep, bool reuse_port, beast::error_code& ec)
      : ioc_(ioc), acceptor_(asio::make_strand(ioc)) {
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    using reuse_port_option = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
    if (!ec && reuse_port) acceptor_.set_option(reuse_port_option(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  }

  void accept() {
    acceptor_.async_accept(asio::make_strand(ioc_),
                           beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket))->start();
    } else if (ec == asio::error::no_descriptors) {
      std::fprintf(stderr, "beast_server: accept: %s\n", ec.message().c_str());
    }
    accept();
  }

  asio::io_context& ioc_;
  tcp::acceptor acceptor_;
};

}  // namespace

int main(int argc, char** argv) {
  const bool per_thread = argc == 4 && std::string_view(argv[3]) == "per-thread";
  if (argc != 3 && !per_thread) {
    std::fprintf(stderr, "usage: %s PORT THREADS [per-thread]\n", argv[0]);
    return 2;
  }
  const auto port = static_cast<unsigned short>(std::atoi(argv[1]));
  const int threads = std::max(1, std::atoi(argv[2]));
  const tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), port);

  // Shared: one io_context, `threads` threads run it. Per thread: one each.
  const int loops = per_thread ? threads : 1;
  std::vector<std::unique_ptr<asio::io_context>> iocs;
  for (int i = 0; i < loops; ++i)
    iocs.push_back(std::make_unique<asio::io_context>(per_thread ? 1 : threads));
  for (auto& ioc : iocs) {
    beast::error_code ec;
    auto listener = std::make_shared<Listener>(*ioc, ep, per_thread, ec);
    if (ec) {
      std::fprintf(stderr, "beast_server: listen on %u: %s\n", port, ec.message().c_str());
      return 1;
    }
    listener->accept();
  }

  asio::signal_set signals(*iocs[0], SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) {
    for (auto& ioc : iocs) ioc->stop();
  });

  std::printf("beast_server: http://127.0.0.1:%u/health, %d threads%s\n", port, threads,
              per_thread ? ", an io_context per thread" : "");
  std::fflush(stdout);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) {
    asio::io_context& ioc = *iocs[per_thread ? i : 0];
    pool.emplace_back([&ioc] { ioc.run(); });
  }
  iocs[0]->run();
  for (auto& t : pool) t.join();
  return 0;
}
