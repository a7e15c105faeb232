// The endpoints of `kitfox serve`, apart from HTTP: a request's method,
// target, headers that matter and body in; a status and a JSON body out.
// native/http_server.cpp carries them over HTTP/1.1; the tests call them
// directly too.
//
//   POST /query            {"query": TEXT, "params": [...]}      -> {"rows": [...]}
//                          (with Accept: application/x-ndjson: a row a line)
//   POST /prepare          {"query": TEXT}                       -> {"write": BOOL}
//                          checks the statement as prepare() does, runs nothing
//   POST /batch            [{"query": TEXT, "params": [...]}, ...] -> {"results": [{"rows": [...]}, ...]}
//   POST /docs/COLLECTION  a JSON array of documents, or NDJSON  -> {"ids": [...]}
//   GET  /health                                                 -> {"ok": true}
//   GET  /stats            the engine's stats
//
// Every error is {"error": {"code", "message", "position"}}: position is the
// byte in the statement text, or null (malformed JSON names its byte in the
// message, and an NDJSON body its line).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db.h"

namespace kitfox {

class EncodedDocs;

struct ApiRequest {
  std::string_view method;         // "GET", "POST", ...
  std::string_view target;         // the path, with any query string
  std::string_view content_type;   // of the body ("" when none)
  std::string_view authorization;  // the Authorization header ("" when none)
  std::string_view accept;         // the Accept header ("" when none)
  std::string_view origin;         // the Origin header ("" when none)
  std::string_view body;
};

struct ApiResponse {
  unsigned status = 200;
  std::string body;      // JSON, or NDJSON rows (see content_type)
  const char* content_type = "application/json";
  const char* allow = nullptr;  // for 405: the methods the path takes
  bool head = false;            // the answer to HEAD: the headers of the GET's, no body
  bool unauthorized = false;    // 401: send WWW-Authenticate
  // CORS: the origin to allow (Access-Control-Allow-Origin), "" for none;
  // with `preflight`, the answer to an OPTIONS request (204, no body).
  std::string allow_origin;
  bool preflight = false;
  // A write whose answer waits for its flush (kitfox serve --sync always):
  // send it through Api::when_durable, never before. 0: send it now.
  uint64_t durable_at = 0;
  // Not run: the request may run long, and handle() was asked on a thread
  // others wait behind (see Api::handle). Run it with handle() on another
  // thread; never send this response (a 500 that says so).
  bool defer = false;
};

class Api {
 public:
  // `token` empty: no token is asked for. Else every endpoint but /health
  // needs `Authorization: Bearer TOKEN` (compared in constant time).
  // `origins`: the web origins whose pages may call the server from a
  // browser (CORS), "*" for any; none by default.
  Api(Database& db, std::string token, std::vector<std::string> origins = {});

  // The response to a request. A write with sync = always has landed but
  // is not yet durable (durable_at != 0): the caller hands the response to
  // when_durable(), whose `send` gets it once it is, or gets the error (503)
  // when the flush failed. Nothing here waits for a flush, so an event
  // loop's thread goes on with its other connections meanwhile.
  //
  // `on_loop`: the caller's thread is one other requests wait behind (a
  // server's event loop). A request that may run long is then not run but
  // answered with `defer`, for the caller to run it with handle() on a
  // thread of its own: a body over 64 KiB, a statement that
  // Database::may_run_long says may (a scan, a read of many documents, an
  // exact near, a set or del not by id, a statement by id whose parameters
  // give no integer id or over 1,000, an index build, a checkpoint, a
  // text over 1 KiB that is not a put), a batch holding one, and anything
  // but /health while Database::long_write_running. The rest run here.
  ApiResponse handle(const ApiRequest& request, bool on_loop = false);
  // Calls `send` with the response once its write is durable (natively from
  // the database's flusher thread, so `send` must not block), at once when
  // it waits for nothing.
  void when_durable(ApiResponse response, std::function<void(ApiResponse)> send);

  // The response that refuses a request by its head alone (its path,
  // method, token or media type: 400, 401, 404, 405, 415), the body not
  // looked at; none when its body may be read. For a client that waits for
  // a 100 Continue before it sends the body: one refused anyway sends none.
  std::optional<ApiResponse> refuse_head(const ApiRequest& request) const;

  // The response for an error found before a request reaches handle() (a
  // body over the limit, a malformed request).
  static ApiResponse error(unsigned status, std::string_view code, std::string_view message, int64_t position = -1);

 private:
  // Where a request goes, read off its head (Api::refuse).
  struct Target {
    enum Endpoint { Health, Stats, Query, Batch, Prepare, Docs } endpoint = Health;
    std::string_view collection;  // Docs: into the request's target, or into `decoded`
    std::string decoded;          // the path, when it had %-escapes
  };
  std::optional<ApiResponse> refuse(const ApiRequest& request, Target* target) const;
  std::string origin_allowed(std::string_view origin) const;  // "" when none
  ApiResponse route(const ApiRequest& request, bool on_loop);
  ApiResponse query(std::string_view body, bool ndjson, bool on_loop);
  bool put_statement(std::string_view body, std::string* text, std::vector<Value>* params, EncodedDocs* documents,
                     int64_t* documents_param);
  ApiResponse prepare(std::string_view body);
  static bool read_batch(std::string_view body, std::vector<BatchItem>* items, std::string* encoded);
  ApiResponse batch(std::string_view body, bool on_loop);
  ApiResponse docs(std::string_view collection, std::string_view content_type, std::string_view body, bool on_loop);
  ApiResponse stats();
  bool runs_long(std::string_view text, const Params& params);  // a statement for a worker
  static std::string with_lines(const std::string& message, std::string_view body);
  void count_ran(bool on_loop);  // a statement run, where (ran_on_loop_, ran_handed_over_)
  // Whether the Authorization header gives the token; `given` says whether
  // it gives one at all.
  bool authorized(std::string_view authorization, bool* given) const;

  Database& db_;
  std::string token_;
  std::vector<std::string> origins_;
  // Statements run (query, batch, docs) where handle() was asked, and on
  // a thread of their own after a `defer`; in /stats as "server".
  std::atomic<uint64_t> ran_on_loop_{0}, ran_handed_over_{0};
  // Puts (/docs, /query) whose documents the fast reader read straight into their encoding.
  std::atomic<uint64_t> read_straight_{0};
  // Batches whose items' parameters the fast reader read straight into their encoding.
  std::atomic<uint64_t> batches_read_straight_{0};
};

// The HTTP status for an engine error: 400 for what the request got wrong,
// 409 for a conflict with what is stored, 503 when the database refuses
// writes, 500 for the file layer.
unsigned http_status(Code code);

}  // namespace kitfox
