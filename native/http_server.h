// `kitfox serve`: the endpoints of http_api.h over HTTP/1.1 with keep-alive,
// on Boost.Beast and Asio (docs/server.md says why those).
//
// `loops` event loops (an io_context each, run by one thread, one a core by
// default); each connection lives on one of them (round robin) as a chain
// of asynchronous reads and writes, so an idle or slow connection holds no
// thread. A request, once read whole, runs on its loop's thread, unless it
// may run long (a scan, an aggregate, an index build, a body over 64 KiB:
// Api::handle): then one of `threads` worker threads runs it and hands the
// answer back. A durable write does not wait on its thread for its flush:
// once landed, its answer waits with the database's flusher, which one
// flush serves for the writes of every connection, and comes back to the
// loop to be sent.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "db.h"

namespace kitfox {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7700;  // 0: any free port (see HttpServer::port)
  std::string token;     // empty: no token asked for
  std::vector<std::string> cors_origins;  // pages of these origins may call it ("*": any)
  uint64_t max_body = 64ull << 20;  // bytes of one request body; larger ones get 413
  unsigned loops = 0;    // event loops; 0: one a core
  unsigned threads = 0;  // threads for the requests that may run long; 0: max(4, cores)
  // A request must arrive whole, and a response be taken, within this; a
  // kept-alive connection idle for as long is closed.
  uint32_t timeout_ms = 30000;
};

class HttpServer {
 public:
  // Listens and starts the threads; the server answers once this returns.
  static Result<std::unique_ptr<HttpServer>> start(Database& db, const ServerOptions& options);
  // Whether `host` is an address to listen on (start's own check, for a
  // command line to make before it opens the database).
  static Status check_host(const std::string& host);
  ~HttpServer();  // shutdown()

  uint16_t port() const;  // the port listened on (the one chosen, for port 0)

  // Stops accepting, closes the idle connections, lets every request in
  // flight finish and its response go out, then joins the threads. A
  // response is still given the timeout to be taken: a client that does
  // not read it is closed then, as it would be while serving. The database
  // is the caller's to close after.
  void shutdown();

  // From another thread while shutdown() runs (kitfox serve's second
  // SIGINT): closes every connection now, responses unsent. Requests
  // running go on to their end (a statement is not cut off midway), their
  // answers going nowhere; shutdown() then returns.
  void close_connections();

  struct Impl;

 private:
  HttpServer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kitfox
