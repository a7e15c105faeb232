// GET /health -> {"ok":true} with libh2o (Debian's libh2o-evloop-dev, 2.2.5:
// h2o's own event loop, no libuv). The shape of the h2o server itself: one
// event loop and one h2o_context_t per thread; here each thread has its own
// listening socket on the same port (SO_REUSEPORT) and the kernel spreads the
// connections. Kept-alive connections; the idle timeout is set to the same
// 30 s as the other servers.
// Usage: h2o_server PORT THREADS
#define H2O_USE_LIBUV 0
#include <h2o.h>
#include <h2o/http1.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

h2o_globalconf_t g_config;
constexpr char kBody[] = R"({"ok":true})";

int on_health(h2o_handler_t*, h2o_req_t* req) {
  if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"))) return -1;  // -1: next handler (404)
  static h2o_generator_t generator = {nullptr, nullptr};
  req->res.status = 200;
  req->res.reason = "OK";
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, nullptr,
                 H2O_STRLIT("application/json"));
  req->res.content_length = sizeof kBody - 1;
  h2o_start_response(req, &generator);
  h2o_iovec_t body = h2o_iovec_init(kBody, sizeof kBody - 1);
  h2o_send(req, &body, 1, H2O_SEND_STATE_FINAL);
  return 0;
}

struct Worker {
  h2o_context_t ctx;
  h2o_accept_ctx_t accept_ctx;
};

void on_accept(h2o_socket_t* listener, const char* err) {
  if (err != nullptr) return;
  auto* w = static_cast<Worker*>(listener->data);
  h2o_socket_t* sock = h2o_evloop_socket_accept(listener);
  if (sock == nullptr) return;
  h2o_accept(&w->accept_ctx, sock);
}

int listen_on(unsigned short port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);  // inherited by accepted sockets
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, SOMAXCONN) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void run_worker(Worker* w, int fd) {
  h2o_context_init(&w->ctx, h2o_evloop_create(), &g_config);
  w->accept_ctx.ctx = &w->ctx;
  w->accept_ctx.hosts = g_config.hosts;
  h2o_socket_t* listener = h2o_evloop_socket_create(w->ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
  listener->data = w;
  h2o_socket_read_start(listener, on_accept);
  while (h2o_evloop_run(w->ctx.loop, INT32_MAX) == 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PORT THREADS\n", argv[0]);
    return 2;
  }
  const auto port = static_cast<unsigned short>(std::atoi(argv[1]));
  const int threads = std::max(1, std::atoi(argv[2]));
  std::signal(SIGPIPE, SIG_IGN);

  h2o_config_init(&g_config);
  g_config.http1.req_timeout = 30000;  // ms; the idle timeout of a kept-alive connection
  h2o_hostconf_t* host = h2o_config_register_host(&g_config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t* path = h2o_config_register_path(host, "/health", 0);
  h2o_handler_t* handler = h2o_create_handler(path, sizeof *handler);
  handler->on_req = on_health;

  std::vector<int> fds;
  for (int i = 0; i < threads; ++i) {
    int fd = listen_on(port);
    if (fd < 0) {
      std::fprintf(stderr, "h2o_server: listen on %u: %s\n", port, std::strerror(errno));
      return 1;
    }
    fds.push_back(fd);
  }
  std::printf("h2o_server: http://127.0.0.1:%u/health, %d threads\n", port, threads);
  std::fflush(stdout);

  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(run_worker, &workers[i], fds[i]);
  run_worker(&workers[0], fds[0]);  // SIGINT/SIGTERM end the process (default action)
  for (auto& t : pool) t.join();
  return 0;
}
