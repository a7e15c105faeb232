// The endpoints of `kitfox serve` (native/http_api.cpp) without sockets:
// what needs a database in a state a socket test cannot make (a failed
// flush), and the details of the token and the media types.
// tests/js/server.test.js covers them over HTTP.
#include <doctest/doctest.h>

#include <future>
#include <string>

#include "db.h"
#include "faulty_fs.h"
#include "http_api.h"

using namespace kitfox;
using kitfox::testing::Faults;
using kitfox::testing::FaultyFs;

namespace {

ApiResponse post(Api& api, std::string_view path, std::string_view body, std::string_view type = "application/json",
                 std::string_view auth = "") {
  ApiRequest r;
  r.method = "POST";
  r.target = path;
  r.content_type = type;
  r.authorization = auth;
  r.body = body;
  // As the server does: a durable write's answer once its flush is done.
  std::promise<ApiResponse> answer;
  auto got = answer.get_future();
  api.when_durable(api.handle(r), [&answer](ApiResponse a) { answer.set_value(std::move(a)); });
  return got.get();
}

// A counter of /stats's "server" object.
int64_t server_stat(Api& api, const std::string& name) {
  ApiRequest r;
  r.method = "GET";
  r.target = "/stats";
  const std::string body = api.handle(r).body;
  const size_t at = body.find("\"" + name + "\":");
  REQUIRE(at != std::string::npos);
  return std::stoll(body.substr(at + name.size() + 3));
}

std::unique_ptr<Database> open_db(FileSystem& fs, SyncMode sync = SyncMode::Off) {
  OpenOptions o;
  o.sync = sync;
  o.auto_checkpoint = false;
  auto r = Database::open(fs, "db", o);
  REQUIRE(r.is_ok());
  return std::move(r.value());
}

}  // namespace

TEST_CASE("http api: a failed flush is 503 for writes; reads go on") {
  auto mem = make_memory_file_system();
  Faults faults;
  FaultyFs fs(*mem, &faults);
  auto db = open_db(fs, SyncMode::Always);
  Api api(*db, "");
  REQUIRE(post(api, "/query", R"j({"query": "create collection t (n int)"})j").status == 200);
  REQUIRE(post(api, "/query", R"j({"query": "put t {n: 1}"})j").status == 200);
  // handle() itself waits for no flush: the write has landed, its answer
  // waits for when_durable.
  ApiRequest put;
  put.method = "POST";
  put.target = "/query";
  put.content_type = "application/json";
  put.body = R"j({"query": "put t {n: 0}"})j";
  ApiResponse landed = api.handle(put);
  CHECK(landed.status == 200);
  CHECK(landed.durable_at > 0);
  faults.fail_sync = true;
  ApiResponse w = post(api, "/query", R"j({"query": "put t {n: 2}"})j");
  CHECK(w.status == 503);
  CHECK(w.body.find(R"j("code":"failed")j") != std::string::npos);
  faults.fail_sync = false;
  CHECK(post(api, "/docs/t", R"j([{"n": 3}])j").status == 503);
  CHECK(post(api, "/batch", R"j([{"query": "put t {n: 4}"}])j").status == 503);
  ApiResponse r = post(api, "/query", R"j({"query": "get t select n order n"})j");
  CHECK(r.status == 200);
  db->close();
}

TEST_CASE("http api: the token") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "tok-123");
  const char* body = R"({"query": "collections"})";
  CHECK(post(api, "/query", body).status == 401);
  CHECK(post(api, "/query", body).unauthorized);
  CHECK(post(api, "/query", body, "application/json", "Bearer tok-123").status == 200);
  CHECK(post(api, "/query", body, "application/json", "bearer tok-123").status == 200);  // the scheme's case is free
  CHECK(post(api, "/query", body, "application/json", "Bearer tok-12").status == 401);
  CHECK(post(api, "/query", body, "application/json", "Bearer tok-1234").status == 401);
  CHECK(post(api, "/query", body, "application/json", "Bearer TOK-123").status == 401);  // the token's is not
  CHECK(post(api, "/query", body, "application/json", "Basic tok-123").status == 401);
  CHECK(post(api, "/query", body, "application/json", "tok-123").status == 401);
  // Unknown paths ask for the token too (401), and are 404 with it; health needs none.
  CHECK(post(api, "/nowhere", body).status == 401);
  CHECK(post(api, "/nowhere", body, "application/json", "Bearer tok-123").status == 404);
  ApiRequest health;
  health.method = "GET";
  health.target = "/health?probe=1";
  CHECK(api.handle(health).status == 200);
  db->close();
}

TEST_CASE("http api: media types, rows as NDJSON, prepare") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  CHECK(post(api, "/query", R"j({"query": "create collection t (n int)"})j", "application/json; charset=utf-8").status == 200);
  CHECK(post(api, "/query", R"j({"query": "get t"})j", "text/plain").status == 415);
  CHECK(post(api, "/query", R"j({"query": "get t"})j", "").status == 415);
  CHECK(post(api, "/query", R"j({"query": "get t"})j", "application/x-www-form-urlencoded").status == 415);
  CHECK(post(api, "/docs/t", "{\"n\": 1}\n{\"n\": 2}\n", "application/x-ndjson").body == R"j({"ids":[1,2]})j");
  CHECK(post(api, "/docs/t", "{\"n\": 3}", "application/x-ndjson").body == R"j({"ids":[3]})j");
  CHECK(post(api, "/docs/t", "[]").body == R"j({"ids":[]})j");
  CHECK(post(api, "/docs/t", "\n\n", "application/x-ndjson").body == R"j({"ids":[]})j");
  CHECK(post(api, "/docs/t", "[{\"n\": 4}]", "text/plain").status == 415);
  CHECK(post(api, "/docs/t-x", "[{\"n\": 4}]").status == 404);
  ApiRequest q;
  q.method = "POST";
  q.target = "/query";
  q.content_type = "application/json";
  q.accept = "application/x-ndjson";
  q.body = R"({"query": "get t where n <= 2 order n"})";
  ApiResponse nd = api.handle(q);
  CHECK(nd.status == 200);
  CHECK(std::string(nd.content_type) == "application/x-ndjson");
  CHECK(nd.body == "{\"id\":1,\"n\":1}\n{\"id\":2,\"n\":2}\n");
  CHECK(post(api, "/prepare", R"j({"query": "put t {n: $1}"})j").body == R"j({"write":true})j");
  CHECK(post(api, "/prepare", R"j({"query": "get t"})j").body == R"j({"write":false})j");
  ApiResponse bad = post(api, "/prepare", R"j({"query": "get t where m = 1"})j");
  CHECK(bad.status == 400);
  CHECK(bad.body.find(R"j("position":12)j") != std::string::npos);
  // A put's documents in the text: an unknown field is reported too.
  ApiResponse put = post(api, "/prepare", R"j({"query": "put t {nosuch: 1}"})j");
  CHECK(put.status == 400);
  CHECK(put.body.find("unknown field 'nosuch'") != std::string::npos);
  CHECK(put.body.find(R"j("position":7)j") != std::string::npos);
  // Prepare ran nothing.
  CHECK(post(api, "/query", R"j({"query": "get t count"})j").body == R"j({"rows":[{"count":3}]})j");
  db->close();
}

TEST_CASE("http api: /docs reads vectors straight, with the values and errors of parse_json") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  REQUIRE(post(api, "/query", R"j({"query": "create collection a (v vector<3>, tags [int], m int)"})j").status == 200);
  REQUIRE(post(api, "/query", R"j({"query": "create collection b (v vector<3>, tags [int], m int)"})j").status == 200);
  const std::string docs = R"j([{"v": [1, 2.5, -3e2], "tags": [1, 2], "m": 7}, {"v": [0.1, 1e-3, 9007199254740993], "tags": [], "m": -1}])j";
  // The same documents through /docs (the fast reader) and through a put's
  // parameter (parse_json): the same rows.
  CHECK(post(api, "/docs/a", docs).body == R"j({"ids":[1,2]})j");
  CHECK(post(api, "/query", R"j({"query": "put b $1", "params": [)j" + docs + "]}").status == 200);
  std::string ra = post(api, "/query", R"j({"query": "get a"})j").body;
  std::string rb = post(api, "/query", R"j({"query": "get b"})j").body;
  CHECK(ra == rb);
  CHECK(ra.find("[1,2.5,-300]") != std::string::npos);
  // NDJSON the same.
  CHECK(post(api, "/docs/a", "{\"v\": [1, 2.5, -3e2], \"tags\": [1, 2], \"m\": 7}\n", "application/x-ndjson").status == 200);
  CHECK(post(api, "/query", R"j({"query": "get a where id = 3 select v, tags, m"})j").body ==
        R"j({"rows":[{"id":3,"v":[1,2.5,-300],"tags":[1,2],"m":7}]})j");
  // What the fast reader refuses, parse_json reads and names.
  ApiResponse bad = post(api, "/docs/a", R"j([{"v": [1, 2, 3]}, {"v": [1, 2,]}])j");
  CHECK(bad.status == 400);
  CHECK(bad.body.find("malformed JSON") != std::string::npos);
  ApiResponse two = post(api, "/docs/a", "{\"m\": 1} {\"m\": 2}\n", "application/x-ndjson");
  CHECK(two.status == 400);
  CHECK(two.body.find("line 1") != std::string::npos);
  ApiResponse big = post(api, "/docs/a", R"j([{"m": 99999999999999999999}])j");
  CHECK(big.status == 400);
  ApiResponse dim = post(api, "/docs/a", R"j([{"v": [1, 2]}])j");
  CHECK(dim.status == 400);
  CHECK(post(api, "/query", R"j({"query": "get a count"})j").body == R"j({"rows":[{"count":3}]})j");
  // Nesting counted from each document, in an array body as in an NDJSON
  // line (as `kitfox import` counts it). The same answers whether or not a
  // key given twice sends the body to parse_json.
  REQUIRE(post(api, "/query", R"j({"query": "create collection c (j json, k int)"})j").status == 200);
  auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') + "1" + std::string(static_cast<size_t>(levels), ']');
  };
  for (int levels : {62, 63, 64}) {
    for (const char* twice : {"", "\"k\": 1, \"k\": 2, "}) {
      const std::string doc = std::string("{") + twice + "\"j\": " + nested(levels) + "}";
      INFO("levels " << levels << (*twice ? ", a key given twice" : ""));
      CHECK(post(api, "/docs/c", "[" + doc + "]").status == (levels <= 63 ? 200 : 400));
      CHECK(post(api, "/docs/c", doc + "\n", "application/x-ndjson").status == (levels <= 63 ? 200 : 400));
    }
  }
  db->close();
}

TEST_CASE("http api: a put's documents in /query are read as /docs reads them, with parse_json's values and errors") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  for (const char* c : {"a", "b"})
    REQUIRE(db->query(std::string("create collection ") + c + " (v vector<3>, tags [int], m int, j json, s text)").is_ok());
  const std::string docs =
      R"j([{"v": [1, 2.5, -3e2], "tags": [1, 2], "m": 7, "j": {"x": [1, {"y": null}], "z": "\u00e9\n"}, "s": "a\"b"},)j"
      R"j( {"v": [0.1, 1e-3, 9007199254740993], "tags": [], "m": -1, "j": 1234567890123456789, "s": ""}, {}])j";
  // The put through /query (its documents read straight into their
  // encoding), and the same documents made values by parse_json first.
  CHECK(post(api, "/query", R"j({"query": "put a $1", "params": [)j" + docs + "]}").body ==
        R"j({"rows":[{"id":1},{"id":2},{"id":3}]})j");
  auto values = parse_json(docs);
  REQUIRE(values.is_ok());
  REQUIRE(db->query("put b $1", {*values}).is_ok());
  auto all = [&](const char* c) { return post(api, "/query", std::string(R"j({"query": "get )j") + c + "\"}").body; };
  CHECK(all("a") == all("b"));
  // Read straight (/stats counts it): the put above, not the ones below that go to parse_json.
  auto straight = [&] { return server_stat(api, "puts_read_straight"); };
  CHECK(straight() == 1);
  CHECK(all("a").find("[1,2.5,-300]") != std::string::npos);
  // The documents as the second parameter, the params before the query, a scalar beside them.
  CHECK(post(api, "/query", R"j({"params": [7, )j" + docs + R"j(], "query": "put a $2"})j").status == 200);
  CHECK(post(api, "/query", R"j({"query": "get a count"})j").body == R"j({"rows":[{"count":6}]})j");
  CHECK(straight() == 2);
  // What the fast reader does not take is read by parse_json, which names it.
  ApiResponse bad = post(api, "/query", R"j({"query": "put a $1", "params": [[{"m": 1}, {"m": 2,}]]})j");
  CHECK(bad.status == 400);
  CHECK(bad.body.find("malformed JSON") != std::string::npos);
  ApiResponse not_doc = post(api, "/query", R"j({"query": "put a $1", "params": [[{"m": 1}, 2]]})j");
  CHECK(not_doc.status == 400);
  ApiResponse dim = post(api, "/query", R"j({"query": "put a $1", "params": [[{"v": [1, 2]}]]})j");
  CHECK(dim.status == 400);
  ApiResponse big = post(api, "/query", R"j({"query": "put a $1", "params": [[{"m": 99999999999999999999}]]})j");
  CHECK(big.status == 400);
  CHECK(big.body.find("a number malformed or out of range") != std::string::npos);  // parse_json's message
  ApiResponse extra = post(api, "/query", R"j({"query": "put a $1", "params": [[{"m": 1}]], "other": 1})j");
  CHECK(extra.status == 400);
  CHECK(post(api, "/query", R"j({"query": "put a $1", "params": [[]]})j").body == R"j({"rows":[]})j");
  CHECK(post(api, "/query", R"j({"query": "get a count"})j").body == R"j({"rows":[{"count":6}]})j");
  CHECK(straight() == 3);  // of those, only the vector of two numbers (read, then refused by the put)
  CHECK(post(api, "/docs/a", R"j([{"m": 5}])j").status == 200);
  CHECK(straight() == 4);
  // Nesting counted from the parameter, as `--param` counts it (a document
  // of the list one level down, its field values two): the same answer with
  // a key given twice, which sends the body to parse_json.
  auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') + "1" + std::string(static_cast<size_t>(levels), ']');
  };
  for (int levels : {61, 62, 63, 64}) {
    INFO("levels " << levels);
    const std::string fast = R"j({"query": "put a $1", "params": [[{"j": )j" + nested(levels) + "}]]}";
    const std::string slow = R"j({"query": "put a $1", "params": [[{"m": 1, "m": 2, "j": )j" + nested(levels) + "}]]}";
    const unsigned want = post(api, "/query", slow).status;
    CHECK(post(api, "/query", fast).status == want);
    CHECK(want == (levels <= 62 ? 200 : 400));
  }
  db->close();
}

TEST_CASE("http api: /batch reads its statements' parameters straight, with parse_json's values and errors") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  for (const char* c : {"a", "b"})
    REQUIRE(db->query(std::string("create collection ") + c + " (v vector<3>, tags [int], m int, j json, s text)").is_ok());
  auto straight = [&] { return server_stat(api, "batches_read_straight"); };
  // Statements of every kind with parameters of every kind; "C" stands
  // for the collection.
  const std::vector<std::pair<std::string, std::string>> items = {
      {"put C {v: $1, tags: $2, m: $3, j: $4, s: $5}",
       R"j([[1, 2.5, -3e2], [1, 2], 7, {"x": [1, {"y": null}, true, false], "z": "\u00e9\n"}, "a\"b"])j"},
      {"put C {v: $2, m: $1, s: $3}", R"j([-1, [0.1, 1e-3, 9007199254740993], null])j"},
      {"insert C [{m: $1}, {m: $1, j: $2}]", R"j([9, 1234567890123456789])j"},
      {"put C $1", R"j([[{"m": 10, "v": [1, 2, 3]}, {"s": "z", "tags": []}]])j"},
      {"set C {s: $1} where m = $2", R"j(["set", 7])j"},
      {"del C where id = $1", R"j([2])j"},
      {"get C where m >= $1 select m, s", R"j([9])j"},
      {"get C count", "null"},
      {"put C {m: $1}", ""},  // no params: in the batch that fails below
  };
  auto body_for = [&](char c, size_t n) {
    std::string b = "[";
    for (size_t i = 0; i < n; i++) {
      std::string text = items[i].first;
      text[text.find('C')] = c;
      b += std::string(i ? ", " : "") + "{\"query\": \"" + text + "\"";
      if (!items[i].second.empty()) b += ", \"params\": " + items[i].second;
      b += "}";
    }
    return b + "]";
  };
  const size_t n = items.size() - 1;  // all but the last
  const ApiResponse got = post(api, "/batch", body_for('a', n));
  CHECK(got.status == 200);
  CHECK(straight() == 1);
  // The same statements with values made by parse_json, run by Database::batch.
  std::vector<BatchItem> values;
  for (size_t i = 0; i < n; i++) {
    std::string text = items[i].first;
    text[text.find('C')] = 'b';
    BatchItem it{text, {}, {}};
    auto v = parse_json(items[i].second);
    REQUIRE(v.is_ok());
    if (!v->is_null()) it.params = v->items();
    values.push_back(std::move(it));
  }
  auto want = db->batch(values);
  REQUIRE(want.is_ok());
  REQUIRE(want->size() == n);
  auto all = [&](const char* c) { return post(api, "/query", std::string(R"j({"query": "get )j") + c + "\"}").body; };
  CHECK(all("a") == all("b"));
  CHECK(all("a").find(R"j({"id":1,"v":[1,2.5,-300],"tags":[1,2],"m":7,"j":{"x":[1,{"y":null},true,false],)j") !=
        std::string::npos);
  CHECK(got.body.find(R"j({"rows":[{"id":3,"m":9,"s":null},{"id":4,"m":9,"s":null},{"id":5,"m":10,"s":null}]},{"rows":[{"count":5}]}]})j") !=
        std::string::npos);
  // A statement without the parameter its text names: the engine's error, naming it.
  const std::string before = all("a");
  ApiResponse missing = post(api, "/batch", body_for('a', items.size()));
  CHECK(missing.status == 400);
  CHECK(missing.body.find("statement 9: parameter $1 was not given") != std::string::npos);
  // What the fast reader does not take is read by parse_json, which names
  // it; nothing is written.
  for (const char* bad : {
           R"j([{"query": "put a {m: $1}", "params": [1]}, {"query": "put a {m: $1}", "params": [99999999999999999999]}])j",
           R"j([{"query": "put a {m: $1}", "params": [1]}, {"query": 1}])j",
           R"j([{"query": "put a {m: $1}", "params": [1]}, 2])j",
           R"j([{"query": "put a {m: $1}", "params": [1], "other": 1}])j",
           R"j([{"query": "put a {m: $1}", "params": {"m": 1}}])j",
           R"j([{"query": "put a {m: $1}", "params": [1]},])j",
           R"j({"query": "put a {m: $1}", "params": [1]})j",
           R"j([{"query": "put a {m: $1}", "params": ["x"]}])j",
           R"j([{"query": "put a {v: $1}", "params": [[1, 2]]}])j",
       }) {
    INFO(bad);
    const ApiResponse r = post(api, "/batch", bad);
    CHECK(r.status == 400);
    CHECK(r.body.find("\"error\"") != std::string::npos);
  }
  CHECK(all("a") == before);
  CHECK(straight() == 4);  // the failed one above, and the two the fast reader read (a text for an int, a vector of two)
  // A statement's "query" or "params" given twice is refused (parse_json
  // would run the last, a proxy reading the first would see another);
  // a key given twice inside a parameter reads as parse_json reads it.
  auto twice = post(api, "/batch", R"j([{"query": "get a count"}, {"query": "get a count", "query": "del a"}])j");
  CHECK(twice.status == 400);
  CHECK(twice.body.find(R"(statement 2 gives \"query\" twice)") != std::string::npos);
  auto twice1 = post(api, "/query", R"j({"params": [], "query": "get a count", "params": [1]})j");
  CHECK(twice1.status == 400);
  CHECK(twice1.body.find(R"(the body gives \"params\" twice)") != std::string::npos);
  CHECK(all("a") == before);
  // Nesting counted from each parameter, as `--param` counts it: the same
  // answer with a key given twice in a parameter, which sends the body to
  // parse_json.
  auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') + "1" + std::string(static_cast<size_t>(levels), ']');
  };
  for (int levels : {62, 63, 64, 65}) {
    INFO("levels " << levels);
    const std::string fast = R"j([{"query": "put a {j: $1}", "params": [)j" + nested(levels) + "]}]";
    const std::string slow = R"j([{"query": "put a {j: $1}", "params": [)j" + nested(levels) + R"j(, {"x": 1, "x": 2}]}])j";
    const unsigned want_status = post(api, "/batch", slow).status;
    CHECK(post(api, "/batch", fast).status == want_status);
    CHECK(want_status == (levels <= 64 ? 200 : 400));
  }
  db->close();
}

namespace {
std::string forty_numbers() {
  std::string s = "[";
  for (int i = 1; i <= 40; i++) s += std::string(i > 1 ? "," : "") + std::to_string(i);
  return s + "]";
}
}  // namespace

TEST_CASE("http api: on an event loop, what may run long is deferred, the rest runs") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  REQUIRE(post(api, "/query", R"j({"query": "create collection t (n int @sorted, s text)"})j").status == 200);
  REQUIRE(post(api, "/query", R"j({"query": "put t $1", "params": [[{"n": 1, "s": "a"}, {"n": 2, "s": "b"}, {"n": 2, "s": "c"}]]})j").status == 200);
  // As the server's loop asks: a deferred request ran nothing (its response, a 500, is never sent).
  auto on_loop = [&](std::string_view path, std::string_view body) {
    ApiRequest r;
    r.method = "POST";
    r.target = path;
    r.content_type = "application/json";
    r.body = body;
    return api.handle(r, true);
  };
  auto deferred = [&](std::string_view path, std::string_view body) {
    ApiResponse a = on_loop(path, body);
    return a.defer && a.status == 500 && !a.durable_at;
  };
  // Short: a read by id, a put, a definition's kin that reads the catalog, an error.
  CHECK_FALSE(deferred("/query", R"j({"query": "get t where id = 2"})j"));
  CHECK(on_loop("/query", R"j({"query": "get t where id = $1 select s", "params": [2]})j").body ==
        R"j({"rows":[{"id":2,"s":"b"}]})j");
  CHECK_FALSE(deferred("/query", R"j({"query": "put t {n: 3, s: \"d\"}"})j"));
  CHECK_FALSE(deferred("/query", R"j({"query": "describe t"})j"));
  CHECK_FALSE(deferred("/query", R"j({"query": "del t where id = 99"})j"));
  CHECK(on_loop("/query", R"j({"query": "get t wher"})j").status == 400);
  CHECK_FALSE(deferred("/query", R"j({"query": "set t {n: 5} where id in $1", "params": [[98, 99]]})j"));
  // By id as written, but no integer id in the values: the plan would scan.
  CHECK(deferred("/query", R"j({"query": "get t where id = $1", "params": ["2"]})j"));
  CHECK(deferred("/query", R"j({"query": "del t where id = $1", "params": [1.5]})j"));
  CHECK(deferred("/query", R"j({"query": "set t {n: 5} where id in $1", "params": [["a"]]})j"));
  std::string ids = "[";
  for (int i = 1; i <= 1000; i++) ids += (i > 1 ? "," : "") + std::to_string(1000 + i);
  CHECK_FALSE(deferred("/query", R"j({"query": "del t where id in $1", "params": [)j" + ids + "]]}"));  // 1,000: short
  ids += ",2001";
  CHECK(deferred("/query", R"j({"query": "del t where id in $1", "params": [)j" + ids + "]]}"));
  // An integral float is an id, null names none: both short.
  CHECK_FALSE(deferred("/query", R"j({"query": "get t where id = $1", "params": [2.0]})j"));
  CHECK_FALSE(deferred("/batch", R"j([{"query": "get t where id = $1", "params": [null]}])j"));
  CHECK(deferred("/batch", R"j([{"query": "get t where id = $1", "params": [null]}, {"query": "get t where id = $1", "params": [{}]}])j"));
  // Long: a scan, an aggregate, a set or del not by id, an index built, a checkpoint.
  CHECK(deferred("/query", R"j({"query": "get t where s = \"b\""})j"));
  CHECK(deferred("/query", R"j({"query": "get t select count(*), sum(n)"})j"));
  CHECK(deferred("/query", R"j({"query": "del t where s = \"x\""})j"));
  CHECK(deferred("/query", R"j({"query": "create index on t (s) @hash"})j"));
  CHECK(deferred("/query", R"j({"query": "checkpoint"})j"));
  // A read no run has planned yet may be long; once run (on a thread of its
  // own), an index's read is known short, a scan long.
  const std::string by_index = R"j({"query": "get t where n = $1", "params": [2]})j";
  CHECK(deferred("/query", by_index));
  CHECK(api.handle({"POST", "/query", "application/json", "", "", "", by_index}).body ==
        R"j({"rows":[{"id":2,"n":2,"s":"b"},{"id":3,"n":2,"s":"c"}]})j");
  CHECK_FALSE(deferred("/query", by_index));
  const std::string scan = R"j({"query": "get t where s = $1", "params": ["c"]})j";
  CHECK(api.handle({"POST", "/query", "application/json", "", "", "", scan}).body ==
        R"j({"rows":[{"id":3,"n":2,"s":"c"}]})j");
  CHECK(deferred("/query", scan));
  // A text over 1 KiB is not kept parsed, nor parsed to be judged: a put is
  // short, anything else may be long. `explain` alone plans and runs
  // nothing: after its first (which may build an index), short.
  const std::string x1500(1500, 'x');
  CHECK_FALSE(deferred("/query", R"j({"query": "put t {n: 7, s: \")j" + x1500 + R"j(\"}"})j"));
  CHECK(deferred("/query", R"j({"query": "get t where id = 1 or s = \")j" + x1500 + R"j(\""})j"));
  const std::string explain = R"j({"query": "explain get t where s = \"b\""})j";
  CHECK(deferred("/query", explain));
  CHECK(api.handle({"POST", "/query", "application/json", "", "", "", explain}).status == 200);
  CHECK_FALSE(deferred("/query", explain));
  // A batch holding one long statement, and a body over 64 KiB.
  CHECK_FALSE(deferred("/batch", R"j([{"query": "get t where id = 1"}, {"query": "put t {n: 5}"}])j"));
  CHECK(deferred("/batch", R"j([{"query": "get t where id = 1"}, {"query": "get t select count(*)"}])j"));
  std::string docs = "[";
  for (int i = 0; i < 5000; i++) docs += std::string(i ? "," : "") + "{\"n\": " + std::to_string(i) + ", \"s\": \"xxxx\"}";
  docs += "]";
  REQUIRE(docs.size() > (64 << 10));
  CHECK(deferred("/docs/t", docs));
  // More than 32 documents in a put (a long write while it lands, Database::
  // long_write_running), however small; not a list of numbers (a vector) or ids.
  std::string forty = "[";
  for (int i = 0; i < 40; i++) forty += std::string(i ? "," : "") + "{\"n\": 1}";
  forty += "]";
  CHECK(deferred("/docs/t", forty));
  CHECK(deferred("/query", R"j({"query": "put t $1", "params": [)j" + forty + "]}"));
  CHECK(deferred("/batch", R"j([{"query": "put t $1", "params": [)j" + forty + "]}]"));
  // A put whose parameter is a list of 40 numbers (as a vector travels) runs
  // where it is (here it fails: n is an int).
  ApiResponse numbers = on_loop("/query", R"j({"query": "put t {n: $1}", "params": [)j" + forty_numbers() + "]}");
  CHECK_FALSE(numbers.defer);
  CHECK(numbers.status == 400);
  const std::string ids33 = "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]";
  const std::string by_ids = R"j({"query": "get t where id in $1 select n", "params": [)j" + ids33 + "]}";
  CHECK(deferred("/query", by_ids));  // not run yet
  CHECK(api.handle({"POST", "/query", "application/json", "", "", "", by_ids}).status == 200);
  CHECK_FALSE(deferred("/query", by_ids));
  CHECK(post(api, "/query", R"j({"query": "get t count"})j").body == R"j({"rows":[{"count":6}]})j");
  CHECK(api.handle({"POST", "/docs/t", "application/json", "", "", "", docs}).status == 200);
  // What ran where, for /stats.
  ApiRequest stats;
  stats.method = "GET";
  stats.target = "/stats";
  const std::string body = api.handle(stats).body;
  CHECK(body.find(R"j("server":{"ran_on_loop":16,"ran_handed_over":8,"puts_read_straight":2,"batches_read_straight":2})j") != std::string::npos);
  db->close();
}

TEST_CASE("http api: a read that went through most of a collection by an index is long the next time") {
  auto mem = make_memory_file_system();
  auto db = open_db(*mem);
  Api api(*db, "");
  REQUIRE(post(api, "/query", R"j({"query": "create collection t (n int @sorted)"})j").status == 200);
  std::string docs = "[";
  for (int i = 0; i < 12000; i++) docs += std::string(i ? "," : "") + "{\"n\": " + std::to_string(i % 100) + "}";
  docs += "]";
  REQUIRE(post(api, "/docs/t", docs).status == 200);
  auto deferred = [&](const std::string& body) {
    return api.handle({"POST", "/query", "application/json", "", "", "", body}, true).defer;
  };
  // Both walk the @sorted index (no scan); one reads every document, the
  // other stops at its limit.
  const std::string all = R"j({"query": "get t order by n select n"})j";
  const std::string first = R"j({"query": "get t order by n limit 3 select n"})j";
  CHECK(deferred(all));
  CHECK(deferred(first));
  ApiResponse a = post(api, "/query", all);
  REQUIRE(a.status == 200);
  CHECK(a.body.size() > 12000 * 10);
  CHECK(post(api, "/query", first).body == R"j({"rows":[{"id":1,"n":0},{"id":101,"n":0},{"id":201,"n":0}]})j");
  CHECK(deferred(all));
  CHECK_FALSE(deferred(first));
  // A range over most of the collection sends on few rows (its limit) but
  // gathers every candidate first: long.
  const std::string range = R"j({"query": "get t where n >= 1 limit 2 select n"})j";
  CHECK(post(api, "/query", range).body == R"j({"rows":[{"id":2,"n":1},{"id":3,"n":2}]})j");
  CHECK(deferred(range));
  const std::string narrow = R"j({"query": "get t where n >= 99 limit 2 select n"})j";
  CHECK(post(api, "/query", narrow).body == R"j({"rows":[{"id":100,"n":99},{"id":200,"n":99}]})j");
  CHECK_FALSE(deferred(narrow));
  db->close();
}
