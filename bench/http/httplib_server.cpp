// GET /health -> {"ok":true} with cpp-httplib (Debian's libcpp-httplib-dev,
// 0.11.4: the header plus libcpp-httplib.so, built with OpenSSL, zlib and
// Brotli; compile with `pkg-config --cflags cpp-httplib` so the class layout
// matches the library's). Its server runs each accepted connection, for as
// long as the connection is kept alive, on one thread of its pool.
// Usage: httplib_server PORT THREADS   (THREADS: the pool's size)
#include <httplib.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace {
httplib::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PORT THREADS\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const size_t threads = static_cast<size_t>(std::max(1, std::atoi(argv[2])));

  httplib::Server server;
  // The pool's size. (The library's default, CPPHTTPLIB_THREAD_POOL_COUNT,
  // is max(8, cores - 1), compiled into libcpp-httplib.so.)
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // The default closes a kept-alive connection after 5 requests; a database
  // server would not. The idle timeout is the same 30 s as the other servers.
  server.set_keep_alive_max_count(1000000000);
  server.set_keep_alive_timeout(30);
  server.set_tcp_nodelay(true);

  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"ok":true})", "application/json");
  });

  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (!server.bind_to_port("127.0.0.1", port)) {
    std::fprintf(stderr, "httplib_server: cannot listen on %d\n", port);
    return 1;
  }
  std::printf("httplib_server: http://127.0.0.1:%d/health, %zu pool threads\n", port, threads);
  std::fflush(stdout);
  return server.listen_after_bind() ? 0 : 1;
}
