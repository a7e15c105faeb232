// The endpoints of `kitfox serve` (native/http_api.cpp) on any bytes: the
// first byte picks the endpoint, method and media type, the rest is the
// body. Every answer is a known status with a JSON body (an error object on
// every failure); a failed request changes nothing; and POST /docs, which
// reads with the fast document reader, writes exactly what a put of the same
// body read by parse_json writes, or fails where it fails; so does POST
// /query against its statement run with parse_json's values, and POST
// /batch (whose parameters are read straight into their encoding) against
// Database::batch given parse_json's values.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "http_api.h"

using namespace kitfox;

namespace {

std::string all_rows(Database& db, const char* coll) {
  auto r = db.query(std::string("get ") + coll);
  if (!r.is_ok()) fuzz::fail("read back: " + r.status().to_string());
  std::string out;
  for (const Value& row : r->rows) out += to_json(row) + "\n";
  return out;
}

void check_json(const ApiResponse& a) {
  if (std::string_view(a.content_type) == "application/x-ndjson") {
    size_t pos = 0;
    while (pos < a.body.size()) {
      size_t nl = a.body.find('\n', pos);
      if (nl == std::string::npos) fuzz::fail("NDJSON rows without a last newline");
      if (!parse_json(std::string_view(a.body).substr(pos, nl - pos)).is_ok()) fuzz::fail("an NDJSON row is not JSON");
      pos = nl + 1;
    }
    return;
  }
  auto v = parse_json(a.body);
  if (!v.is_ok()) fuzz::fail("the body is not JSON: " + a.body);
  if (a.status != 200 && (v->kind() != Kind::Object || !v->get("error")))
    fuzz::fail("an error without an error object: " + a.body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* const kTargets[] = {"/query", "/batch", "/docs/t", "/prepare", "/docs/u", "/stats", "/health", "/docs/nope"};
  static const char* const kTypes[] = {"application/json", "application/x-ndjson", "text/plain", ""};
  const uint8_t pick = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  auto fs = make_memory_file_system();
  auto db = fuzz::sample_db(*fs);
  Api api(*db, (pick & 0x80) ? "tok" : "");
  ApiRequest r;
  r.method = (pick & 0x40) ? "GET" : "POST";
  r.target = kTargets[pick & 7];
  r.content_type = kTypes[(pick >> 3) & 3];
  r.authorization = (pick & 0x20) ? "Bearer tok" : "";
  r.accept = (pick & 0x10) ? "application/x-ndjson" : "application/json";
  r.body = body;

  const std::string before_t = all_rows(*db, "t"), before_u = all_rows(*db, "u");
  // As the server asks: on its event loop first, then, when that defers
  // the request (it may run long), on a worker; a deferred one ran nothing.
  ApiResponse a = api.handle(r, true);
  if (a.defer) {
    if (all_rows(*db, "t") != before_t || all_rows(*db, "u") != before_u)
      fuzz::fail("a deferred request changed the database");
    a = api.handle(r, false);
    if (a.defer) fuzz::fail("a request was deferred off the loop");
  }
  switch (a.status) {
    case 200: case 400: case 401: case 404: case 405: case 409: case 413: case 415: case 503: break;
    default: fuzz::fail("an unexpected status " + std::to_string(a.status));
  }
  check_json(a);
  if (a.status != 200 && (all_rows(*db, "t") != before_t || all_rows(*db, "u") != before_u))
    fuzz::fail("a failed request changed the database");

  // POST /docs/t with a JSON array: the same as a put of parse_json's reading.
  if (r.method == "POST" && r.target == std::string_view("/docs/t") && r.content_type == std::string_view("application/json") &&
      (pick & 0x80) == 0) {
    auto fs2 = make_memory_file_system();
    auto ref = fuzz::sample_db(*fs2);
    auto v = parse_json(body);
    bool ref_ok = false;
    if (v.is_ok() && v->kind() == Kind::List) {
      bool objects = true;
      for (const Value& d : v->items()) objects &= d.kind() == Kind::Object;
      if (objects && v->size() > 0) {
        std::vector<Value> params;
        params.push_back(std::move(*v));
        ref_ok = ref->query("put t $1", params).is_ok();
      } else {
        ref_ok = objects;  // an empty array writes nothing, and succeeds
      }
    }
    if ((a.status == 200) != ref_ok) fuzz::fail("POST /docs and parse_json disagree on success: " + a.body);
    if (all_rows(*db, "t") != all_rows(*ref, "t")) fuzz::fail("POST /docs wrote other documents than parse_json reads");
    ref->close();
  }
  // POST /query (whose put of a documents parameter is read as /docs reads
  // it): the same as the statement run with parse_json's values.
  if (r.method == "POST" && r.target == std::string_view("/query") && r.content_type == std::string_view("application/json") &&
      (pick & 0x80) == 0) {
    auto fs2 = make_memory_file_system();
    auto ref = fuzz::sample_db(*fs2);
    bool ref_ok = false;
    auto v = parse_json(body);
    if (v.is_ok() && v->kind() == Kind::Object) {
      const Value* text = v->get("query");
      const Value* params = v->get("params");
      bool known = true;
      for (const std::string& k : v->keys()) known &= k == "query" || k == "params";
      if (known && text && text->kind() == Kind::Text && (!params || params->kind() == Kind::List)) {
        std::vector<Value> values;
        if (params) values = params->items();
        ref_ok = ref->query_outside_transaction(text->as_string(), values).is_ok();
      }
    }
    if ((a.status == 200) != ref_ok) fuzz::fail("POST /query and parse_json's values disagree on success: " + a.body);
    if (all_rows(*db, "t") != all_rows(*ref, "t") || all_rows(*db, "u") != all_rows(*ref, "u"))
      fuzz::fail("POST /query wrote other documents than the statement with parse_json's values");
    ref->close();
  }
  // POST /batch: the same as Database::batch given parse_json's values.
  if (r.method == "POST" && r.target == std::string_view("/batch") && r.content_type == std::string_view("application/json") &&
      (pick & 0x80) == 0) {
    auto fs2 = make_memory_file_system();
    auto ref = fuzz::sample_db(*fs2);
    bool ref_ok = false;
    auto v = parse_json(body);
    if (v.is_ok() && v->kind() == Kind::List) {
      std::vector<BatchItem> items;
      bool shaped = true;
      for (const Value& s : v->items()) {
        const Value* text = s.kind() == Kind::Object ? s.get("query") : nullptr;
        const Value* params = s.get("params");
        for (const std::string& k : s.keys()) shaped &= k == "query" || k == "params";
        shaped = shaped && text && text->kind() == Kind::Text && (!params || params->is_null() || params->kind() == Kind::List);
        if (!shaped) break;
        BatchItem& it = items.emplace_back();
        it.text = text->as_string();
        if (params && !params->is_null()) it.params = params->items();
      }
      ref_ok = shaped && ref->batch(items).is_ok();
    }
    if ((a.status == 200) != ref_ok) fuzz::fail("POST /batch and parse_json's values disagree on success: " + a.body);
    if (all_rows(*db, "t") != all_rows(*ref, "t") || all_rows(*db, "u") != all_rows(*ref, "u"))
      fuzz::fail("POST /batch wrote other documents than Database::batch with parse_json's values");
    ref->close();
  }
  db->close();
  return 0;
}
