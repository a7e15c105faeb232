// The endpoints of `kitfox serve` (see http_api.h): JSON bodies read with
// parse_json (simdjson), statements run through Database, rows written with
// append_json.
#include "http_api.h"

#include "codec.h"
#include "documents.h"
#include "query/lexer.h"
#include "query/parser.h"

#include <utility>
#include <vector>

namespace kitfox {
namespace {

constexpr const char* kEndpoints =
    "POST /query, POST /batch, POST /docs/COLLECTION, POST /prepare, GET /health, GET /stats";

// Bytes that are no UTF-8 (a request's target or a header may hold any,
// and messages name them) become U+FFFD, so that every answer is JSON.
std::string utf8_or_replaced(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = utf8_decode(s, i, &cp);
    if (cp == 0xFFFD && n == 1) out += "\xEF\xBF\xBD";
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

void append_json_string(std::string& out, std::string_view s) { append_json(out, Value::text(utf8_or_replaced(s))); }

// Bodies larger than this, and puts of more documents than this (a long
// write while it lands: Database::long_write_running), run on a thread of
// their own (Api::handle).
constexpr size_t kLongBody = 64 << 10;
constexpr size_t kLongPut = 32;

// Not run: for a worker thread (Api::handle). Were it ever sent, it says so.
ApiResponse deferred() {
  ApiResponse r = Api::error(500, "internal", "a request for a worker thread was answered unrun");
  r.defer = true;
  return r;
}

ApiResponse from_status(const Status& s) {
  return Api::error(http_status(s.code()), code_name(s.code()), s.message(), s.position());
}

// {"rows":[...]}: the rows of one result, as JSON.
void append_rows(std::string& out, const QueryResult& r) {
  out += "{\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); i++) {
    if (i) out += ',';
    append_json(out, r.rows[i]);
  }
  out += "]}";
}

ApiResponse rows_response(const QueryResult& r, bool ndjson) {
  ApiResponse out;
  if (ndjson) {
    out.content_type = "application/x-ndjson";
    for (const Value& row : r.rows) {
      append_json(out.body, row);
      out.body += '\n';
    }
    return out;
  }
  out.body.reserve(16 + r.rows.size() * 32);
  append_rows(out.body, r);
  return out;
}

// The media type without parameters ("application/json; charset=utf-8" ->
// "application/json"), lower case.
std::string media_type(std::string_view content_type) {
  size_t end = content_type.find(';');
  std::string_view t = content_type.substr(0, end);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  std::string out(t);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

// A body must say it is JSON: a page of another origin can send a plain
// form or text to a server on this machine without asking first, but not
// JSON, so nothing is run for a request a browser sent without the user.
bool is_json(std::string_view content_type) { return media_type(content_type) == "application/json"; }
bool is_ndjson(std::string_view content_type) {
  std::string t = media_type(content_type);
  return t == "application/x-ndjson" || t == "application/jsonl" || t == "application/ndjson";
}

ApiResponse unsupported_media(std::string_view got, const char* want) {
  std::string msg = "the body must be ";
  msg += want;
  msg += got.empty() ? std::string(" (no Content-Type was given)") : " (Content-Type was " + std::string(got) + ")";
  return Api::error(415, "invalid", msg);
}

// One statement of a request body: {"query": TEXT, "params": [...]}.
Status read_statement(Value& v, std::string* text, std::vector<Value>* params, const std::string& where) {
  if (v.kind() != Kind::Object)
    return Status(Code::Invalid, where + "must be an object {\"query\": ..., \"params\": [...]}, not " +
                                     std::string(kind_name(v.kind())));
  bool has_query = false;
  for (size_t i = 0; i < v.keys().size(); i++) {
    const std::string& k = v.keys()[i];
    Value& item = v.mutable_items()[i];
    if (k == "query") {
      if (item.kind() != Kind::Text)
        return Status(Code::Invalid, where + "\"query\" must be text, not " + std::string(kind_name(item.kind())));
      *text = std::move(item.mutable_string());
      has_query = true;
    } else if (k == "params") {
      if (item.kind() == Kind::Null) continue;
      if (item.kind() != Kind::List)
        return Status(Code::Invalid, where + "\"params\" must be a list, not " + std::string(kind_name(item.kind())));
      *params = std::move(item.mutable_items());
    } else {
      return Status(Code::Invalid, where + "unknown key \"" + k + "\" (a statement has \"query\" and \"params\")");
    }
  }
  if (!has_query) return Status(Code::Invalid, where + "has no \"query\"");
  return Status::ok();
}

simdjson::ondemand::parser& body_parser(size_t body_bytes);

// An NDJSON line that holds no document (skipped, not counted).
bool blank_line(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

// "query" or "params" given twice in a statement's object, which parse_json
// reads as the last: refused (a proxy or a log that reads the first would
// see another statement than the one run). `list`: a /batch body, its
// statements numbered. A body that does not parse is left to parse_json.
Status repeated_keys(std::string_view body, bool list) {
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(body);
  od::document doc;
  if (body_parser(body.size()).iterate(padded).get(doc)) return Status::ok();
  auto check = [](od::object obj, const std::string& where) {
    int query = 0, params = 0;
    for (auto f : obj) {
      od::field field;
      std::string_view key;
      if (std::move(f).get(field) || field.unescaped_key(false).get(key)) return Status::ok();
      query += key == "query";
      params += key == "params";
    }
    if (query > 1 || params > 1)
      return Status(Code::Invalid, where + "gives \"" + (query > 1 ? "query" : "params") + "\" twice");
    return Status::ok();
  };
  if (!list) {
    od::object obj;
    return doc.get_object().get(obj) ? Status::ok() : check(obj, "the body ");
  }
  od::array arr;
  if (doc.get_array().get(arr)) return Status::ok();
  size_t i = 0;
  for (auto e : arr) {
    i++;
    od::object obj;
    if (e.get_object().get(obj)) continue;
    KF_TRY(check(obj, "statement " + std::to_string(i) + " "));
  }
  return Status::ok();
}

// A body that is one statement: {"query": TEXT, "params": [...]}.
Status body_statement(std::string_view body, std::string* text, std::vector<Value>* params) {
  KF_ASSIGN(Value v, parse_json(body, -2));  // each parameter's depth counted from itself
  KF_TRY(repeated_keys(body, false));
  return read_statement(v, text, params, "the body ");
}

// The On-Demand parser of this thread, its buffers kept from request to
// request; those a body over 8 MiB grew let go before a smaller body.
simdjson::ondemand::parser& body_parser(size_t body_bytes) {
  constexpr size_t kKeep = 8 << 20;
  thread_local simdjson::ondemand::parser parser;
  if (parser.capacity() > kKeep && body_bytes <= kKeep) parser = simdjson::ondemand::parser();
  return parser;
}

// The fields of a statement's object, {"query": TEXT, "params": ...}: the
// query's text into *query, the params' value handed to `params` (false:
// not taken). False for another key or one given twice, a query that is not
// text, or no query.
template <typename F>
bool statement_fields(simdjson::ondemand::object& obj, std::string_view* query, F&& params) {
  bool has_query = false, has_params = false;
  for (auto f : obj) {
    simdjson::ondemand::field field;
    std::string_view key;
    if (std::move(f).get(field) || field.unescaped_key(false).get(key)) return false;
    if (key == "query" && !has_query) {
      if (field.value().get_string(false).get(*query)) return false;
      has_query = true;
    } else if (key == "params" && !has_params) {
      if (!params(field.value())) return false;
      has_params = true;
    } else {
      return false;  // another key, or one given twice
    }
  }
  return has_query;
}

}  // namespace

unsigned http_status(Code code) {
  switch (code) {
    case Code::Ok: return 200;
    case Code::Syntax:
    case Code::Type:
    case Code::NotFound:
    case Code::Limit:
    case Code::Json:
    case Code::Invalid: return 400;
    case Code::Exists:
    case Code::Constraint: return 409;
    case Code::Locked:
    case Code::Failed: return 503;
    case Code::Io:
    case Code::Corrupt: return 500;
  }
  return 500;
}

Api::Api(Database& db, std::string token, std::vector<std::string> origins)
    : db_(db), token_(std::move(token)), origins_(std::move(origins)) {}

ApiResponse Api::error(unsigned status, std::string_view code, std::string_view message, int64_t position) {
  ApiResponse out;
  out.status = status;
  out.body = "{\"error\":{\"code\":";
  append_json_string(out.body, code);
  out.body += ",\"message\":";
  append_json_string(out.body, message);
  out.body += ",\"position\":";
  out.body += position >= 0 ? std::to_string(position) : "null";
  out.body += "}}";
  return out;
}

bool Api::authorized(std::string_view authorization, bool* any) const {
  // `Bearer`, in any case, then one space or more (RFC 9110, 11.4).
  constexpr std::string_view kScheme = "bearer";
  std::string_view given;
  bool scheme = authorization.size() >= kScheme.size();
  for (size_t i = 0; scheme && i < kScheme.size(); i++) scheme = (authorization[i] | 0x20) == kScheme[i];
  if (scheme) {
    size_t at = kScheme.size();
    while (at < authorization.size() && authorization[at] == ' ') at++;
    if (at > kScheme.size() || at == authorization.size()) given = authorization.substr(at);
    else scheme = false;  // "Bearerx"
  }
  *any = !authorization.empty() && !(scheme && given.empty());
  if (token_.empty()) return true;
  // The time taken depends on the token's length only, never on how much
  // of it a guess got right.
  unsigned diff = given.size() != token_.size();
  for (size_t i = 0; i < token_.size(); i++) {
    unsigned char g = i < given.size() ? (unsigned char)given[i] : 0;
    diff |= g ^ (unsigned char)token_[i];
  }
  return diff == 0;
}

std::string Api::origin_allowed(std::string_view origin) const {
  if (!origin.empty())
    for (const std::string& o : origins_)
      if (o == "*" || o == origin) return o == "*" ? "*" : std::string(origin);
  return {};
}

std::optional<ApiResponse> Api::refuse_head(const ApiRequest& req) const {
  std::string allow_origin = origin_allowed(req.origin);
  if (req.method == "OPTIONS" && !allow_origin.empty()) return std::nullopt;  // a preflight: handle() answers it
  Target t;
  std::optional<ApiResponse> r = refuse(req, &t);
  if (r) {
    r->allow_origin = std::move(allow_origin);
    r->head = req.method == "HEAD";  // the headers of the refusal, no body
  }
  return r;
}

ApiResponse Api::handle(const ApiRequest& req, bool on_loop) {
  std::string allow_origin = origin_allowed(req.origin);
  if (req.method == "OPTIONS" && !allow_origin.empty()) {
    // A browser asks before it sends JSON from a page of another origin.
    ApiResponse r;
    r.status = 204;
    r.preflight = true;
    r.allow_origin = std::move(allow_origin);
    return r;
  }
  ApiResponse r = route(req, on_loop);
  if (r.defer) return r;
  r.allow_origin = std::move(allow_origin);
  r.head = req.method == "HEAD";
  return r;
}

void Api::when_durable(ApiResponse response, std::function<void(ApiResponse)> send) {
  if (!response.durable_at) return send(std::move(response));
  const uint64_t at = response.durable_at;
  db_.when_durable(at, [r = std::move(response), send = std::move(send)](const Status& flushed) mutable {
    if (!flushed.is_ok()) {
      // Landed, but the flush failed: it is not acknowledged.
      ApiResponse e = from_status(flushed);
      e.allow_origin = std::move(r.allow_origin);
      r = std::move(e);
    }
    r.durable_at = 0;
    send(std::move(r));
  });
}

// A path's %-escapes decoded (RFC 3986, 2.1): false when one is malformed.
static bool percent_decoded(std::string_view path, std::string* out) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1; };
  out->clear();
  for (size_t i = 0; i < path.size(); i++) {
    if (path[i] != '%') {
      *out += path[i];
      continue;
    }
    if (i + 2 >= path.size() || hex(path[i + 1]) < 0 || hex(path[i + 2]) < 0) return false;
    *out += char(hex(path[i + 1]) * 16 + hex(path[i + 2]));
    i += 2;
  }
  return true;
}

std::optional<ApiResponse> Api::refuse(const ApiRequest& req, Target* t) const {
  std::string_view path = req.target.substr(0, req.target.find('?'));
  // The absolute form (`GET http://host:7700/health`, as a proxy sends it),
  // which a server must take (RFC 9112, 3.2.2): its path.
  for (std::string_view scheme : {"http://", "https://"})
    if (path.size() >= scheme.size() && std::equal(scheme.begin(), scheme.end(), path.begin(), [](char a, char b) { return a == (b | 0x20); })) {
      const size_t slash = path.find('/', scheme.size());
      path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
    }
  // %-escapes decoded: /docs/%74 is /docs/t (RFC 3986, 6.2.2.2).
  if (path.find('%') != std::string_view::npos) {
    if (!percent_decoded(path, &t->decoded))
      return error(400, "invalid", "a malformed path: a % not followed by two hex digits in " + std::string(path));
    path = t->decoded;
  }
  // HEAD is GET without the body (RFC 9110, 9.3.2): every GET takes it.
  const bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  auto only = [&](const char* method) {
    ApiResponse r = error(405, "invalid",
                          std::string(req.method) + " is not allowed on " + std::string(path) + " (only " + method + ")");
    r.allow = method;
    return r;
  };
  if (path == "/health") {
    if (!get) return only("GET, HEAD");
    t->endpoint = Target::Health;
    return std::nullopt;
  }
  // Every request but /health needs the token, one to no endpoint too:
  // without it a client learns nothing of the server.
  bool given = false;
  if (!authorized(req.authorization, &given)) {
    ApiResponse r = error(401, "invalid", given ? "the token is wrong" : "this server needs a token: send Authorization: Bearer TOKEN");
    r.unauthorized = true;
    return r;
  }
  if (path == "/stats") {
    if (!get) return only("GET, HEAD");
    t->endpoint = Target::Stats;
    return std::nullopt;
  }
  const bool docs = path.rfind("/docs/", 0) == 0;
  if (path != "/query" && path != "/batch" && path != "/prepare" && !docs)
    return error(404, "not_found", "no endpoint " + std::string(path) + " (the endpoints: " + kEndpoints + ")");
  if (!post) return only("POST");
  if (docs) {
    if (!is_json(req.content_type) && !is_ndjson(req.content_type))
      return unsupported_media(req.content_type, "JSON (application/json) or NDJSON (application/x-ndjson)");
    if (!is_name(path.substr(6)))
      return error(404, "not_found", "no collection '" + std::string(path.substr(6)) + "' (not a collection name)");
    t->endpoint = Target::Docs;
    t->collection = path.substr(6);
    return std::nullopt;
  }
  if (!is_json(req.content_type)) return unsupported_media(req.content_type, "JSON (Content-Type: application/json)");
  t->endpoint = path == "/query" ? Target::Query : path == "/batch" ? Target::Batch : Target::Prepare;
  return std::nullopt;
}

ApiResponse Api::route(const ApiRequest& req, bool on_loop) {
  Target t;
  if (std::optional<ApiResponse> refused = refuse(req, &t)) return std::move(*refused);
  if (t.endpoint == Target::Health) {
    ApiResponse r;
    r.body = "{\"ok\":true}";
    return r;
  }
  // While a long write holds the engine's lock, anything that takes it waits.
  if (on_loop && db_.long_write_running()) return deferred();
  if (on_loop && req.body.size() > kLongBody) return deferred();  // a bulk load, a large batch
  switch (t.endpoint) {
    case Target::Stats:
      return stats();
    case Target::Docs:
      return docs(t.collection, req.content_type, req.body, on_loop);
    case Target::Query:
      return query(req.body, req.accept.find("application/x-ndjson") != std::string_view::npos, on_loop);
    case Target::Batch:
      return batch(req.body, on_loop);
    default:
      return prepare(req.body);
  }
}

ApiResponse Api::prepare(std::string_view body) {
  std::string text;
  std::vector<Value> params;
  Status s = body_statement(body, &text, &params);
  if (!s.is_ok()) return from_status(s);
  auto st = db_.prepare(text);
  if (!st.is_ok()) return from_status(st.status());
  ApiResponse out;
  out.body = st->is_write() ? "{\"write\":true}" : "{\"write\":false}";
  return out;
}

// `{"query": "put C $n", "params": [...]}` whose parameter $n is a JSON
// array of documents and whose other parameters are scalars: the documents
// read straight into their encoding, as POST /docs reads them (no value
// made of them), the rest as parse_json reads them. False for any other
// body, or one the fast reader does not take as it is: the caller then reads
// it whole with parse_json, which names what is wrong.
bool Api::put_statement(std::string_view body, std::string* text, std::vector<Value>* params, EncodedDocs* documents,
                        int64_t* documents_param) {
  // A quick look first: only a body whose "query" reads as a put or an
  // insert is parsed here (one it misjudges is read the old way).
  size_t q = body.find("\"query\"");
  if (q == std::string_view::npos) return false;
  q += 7;
  while (q < body.size() && (body[q] == ' ' || body[q] == '\t' || body[q] == '\r' || body[q] == '\n' || body[q] == ':')) q++;
  if (q >= body.size() || body[q] != '"' || !is_put_text(body.substr(q + 1))) return false;
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(body);
  od::parser& parser = body_parser(body.size());
  od::document doc;
  od::object obj;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(obj)) return false;
  std::string_view query, raw;
  bool has_params = false;
  if (!statement_fields(obj, &query, [&](od::value& v) { return has_params = !v.raw_json().get(raw); }) ||
      !has_params || !doc.at_end())
    return false;
  text->assign(query);
  std::string collection;
  const int64_t n = db_.documents_param(*text, &collection);
  if (n < 1) return false;
  const simdjson::padded_string list(raw);
  od::document ldoc;
  od::array arr;
  if (parser.iterate(list).get(ldoc) || ldoc.get_array().get(arr)) return false;
  for (auto e : arr) {
    od::value v;
    od::json_type t;
    std::string_view item;
    if (std::move(e).get(v) || v.type().get(t) || v.raw_json().get(item)) return false;
    if ((int64_t)params->size() + 1 == n) {
      // The documents, at the depth the parameter puts them (a parameter
      // nests as deep as from the CLI or the embedded API: counted from itself).
      const simdjson::padded_string docs(item);
      if (t != od::json_type::array || !DocumentReader(db_, collection).read_array(docs, documents, 2)) return false;
      params->emplace_back();
    } else {
      if (t == od::json_type::array || t == od::json_type::object) return false;
      auto value = parse_json(item);
      if (!value.is_ok()) return false;
      params->push_back(std::move(*value));
    }
  }
  if (!ldoc.at_end() || (int64_t)params->size() < n || documents->empty()) return false;
  *documents_param = n;
  return true;
}

ApiResponse Api::query(std::string_view body, bool ndjson, bool on_loop) {
  std::string text;
  std::vector<Value> params;
  EncodedDocs documents;
  int64_t encoded = 0;
  if (!put_statement(body, &text, &params, &documents, &encoded)) {
    text.clear();
    params.clear();
    Status s = body_statement(body, &text, &params);
    if (!s.is_ok()) return from_status(s);
    if (on_loop && runs_long(text, params)) return deferred();
  } else if (on_loop && (documents.size() > kLongPut || db_.may_run_long(text, params))) {
    return deferred();  // read again there
  } else {
    read_straight_.fetch_add(1, std::memory_order_relaxed);
  }
  count_ran(on_loop);
  uint64_t durable_at = 0;
  auto r = encoded ? db_.query_outside_transaction(text, Params(params, (size_t)encoded - 1, documents.list()),
                                                   &durable_at)
                   : db_.query_outside_transaction(text, params, &durable_at);
  if (!r.is_ok()) return from_status(r.status());
  ApiResponse out = rows_response(*r, ndjson);
  out.durable_at = durable_at;
  return out;
}

// A /batch body, `[{"query": TEXT, "params": [...]}, ...]`, read straight:
// each item's parameters into *encoded as one encoded list (an item's
// BatchItem::encoded_params views it), no Value made; a put of literals and
// parameters splices their bytes into its documents (Params::listed). False
// for a body the fast reader does not take as it is (malformed, a key
// given twice or unknown, a big integer, not a list of objects): the caller
// reads it whole with parse_json, which names what is wrong.
bool Api::read_batch(std::string_view body, std::vector<BatchItem>* items, std::string* encoded) {
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(body);
  od::parser& parser = body_parser(body.size());
  od::document doc;
  od::array arr;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(arr)) return false;
  const DocumentReader values;  // no collection: no vector field, every array a list
  thread_local std::vector<size_t> ends;  // each item's list's end in *encoded
  ends.clear();
  encoded->clear();
  items->clear();
  for (auto e : arr) {
    od::object obj;
    if (e.get_object().get(obj)) return false;
    BatchItem& item = items->emplace_back();
    std::string_view query;
    bool listed = false;
    const bool read = statement_fields(obj, &query, [&](od::value& v) {
      od::json_type t;
      bool null = false;
      if (v.type().get(t)) return false;
      if (t == od::json_type::null) return !v.is_null().get(null) && null;
      return listed = t == od::json_type::array && values.encode(v, encoded, -1);  // each parameter counted from itself
    });
    if (!read) return false;
    item.text.assign(query);
    if (!listed) {  // none, or null: an empty list
      put_u8(*encoded, kList);
      put_u8(*encoded, 0);
    }
    ends.push_back(encoded->size());
  }
  if (!doc.at_end()) return false;
  for (size_t i = 0, start = 0; i < items->size(); start = ends[i++])
    (*items)[i].encoded_params = std::string_view(*encoded).substr(start, ends[i] - start);
  return true;
}

ApiResponse Api::batch(std::string_view body, bool on_loop) {
  std::vector<BatchItem> items;
  std::string encoded;  // the items' parameters, when read straight
  const bool straight = read_batch(body, &items, &encoded);
  if (!straight) {
    auto v = parse_json(body, -3);  // each parameter's depth counted from itself
    if (!v.is_ok()) return from_status(v.status());
    if (Status twice = repeated_keys(body, true); !twice.is_ok()) return from_status(twice);
    if (v->kind() != Kind::List)
      return error(400, "invalid", "the body must be a list of statements [{\"query\": ..., \"params\": [...]}, ...]");
    items.assign(v->size(), {});
    for (size_t i = 0; i < items.size(); i++) {
      Status s = read_statement(v->mutable_items()[i], &items[i].text, &items[i].params,
                                "statement " + std::to_string(i + 1) + " ");
      if (!s.is_ok()) return from_status(s);
    }
  }
  if (on_loop) {
    thread_local std::vector<std::string_view> listed;  // an item's parameters (a body on the loop is small)
    for (const BatchItem& item : items) {
      listed.clear();
      if (item.encoded_params.empty() ? runs_long(item.text, item.params)
                                      : Params::split_list(item.encoded_params, &listed).is_ok() &&
                                            runs_long(item.text, Params::listed(listed.data(), listed.size())))
        return deferred();
    }
  }
  count_ran(on_loop);
  if (straight) batches_read_straight_.fetch_add(1, std::memory_order_relaxed);
  uint64_t durable_at = 0;
  auto r = db_.batch(items, &durable_at);
  if (!r.is_ok()) return from_status(r.status());
  ApiResponse out;
  out.durable_at = durable_at;
  out.body = "{\"results\":[";
  for (size_t i = 0; i < r->size(); i++) {
    if (i) out.body += ',';
    append_rows(out.body, (*r)[i]);
  }
  out.body += "]}";
  return out;
}

ApiResponse Api::docs(std::string_view collection, std::string_view content_type, std::string_view body,
                      bool on_loop) {
  EncodedDocs documents;  // the put's parameter, left encoded (Params)
  std::vector<size_t> lines;  // NDJSON read again: each document's line
  size_t start = 0;
  while (start < body.size() && (body[start] == ' ' || body[start] == '\t' || body[start] == '\r' || body[start] == '\n'))
    start++;
  const bool array = !is_ndjson(content_type) || (start < body.size() && body[start] == '[');
  // The fast reader first (documents straight into their encoding, vectors
  // into f32); what it does not take as it is, parse_json reads again, and
  // names the error.
  const simdjson::padded_string padded(body);
  const DocumentReader reader(db_, collection);
  // Each document nests as deep as from itself, as `kitfox import` reads them.
  const bool read = array ? reader.read_array(padded, &documents, 1) : reader.read_lines(padded, &documents);
  if (!read) {
    std::vector<Value> values;
    if (array) {
      // One JSON array of documents.
      auto v = parse_json(body, -1);
      if (!v.is_ok()) return from_status(v.status());
      if (v->kind() != Kind::List)
        return error(400, "invalid", "the body must be a JSON array of documents (or NDJSON, with Content-Type: application/x-ndjson)");
      values = std::move(v->mutable_items());
    } else {
      // NDJSON: a document a line; blank lines are skipped.
      size_t line = 0;
      lines.clear();
      for (size_t pos = 0; pos < body.size();) {
        size_t end = body.find('\n', pos);
        if (end == std::string_view::npos) end = body.size();
        std::string_view text = body.substr(pos, end - pos);
        line++;
        if (!blank_line(text)) {
          auto v = parse_json(text);
          if (!v.is_ok()) {
            const Status& s = v.status();
            return error(400, code_name(s.code()), "line " + std::to_string(line) + ": " + s.message());
          }
          values.push_back(std::move(*v));
          lines.push_back(line);
        }
        pos = end + 1;
      }
    }
    documents.clear();
    for (size_t i = 0; i < values.size(); i++) {
      if (values[i].kind() != Kind::Object)
        return error(400, "invalid", (array ? "document " + std::to_string(i + 1) : "line " + std::to_string(lines[i])) +
                                         " is " + kind_name(values[i].kind()) + ", not an object");
      encode_item(documents.bytes(), values[i], false);
      documents.added();
    }
  }
  if (on_loop && documents.size() > kLongPut) return deferred();  // read again there: at most 64 KiB
  if (read) read_straight_.fetch_add(1, std::memory_order_relaxed);
  count_ran(on_loop);
  if (documents.empty()) {
    ApiResponse out;
    out.body = "{\"ids\":[]}";
    return out;
  }
  const std::string text = "put " + std::string(collection) + " $1";
  uint64_t durable_at = 0;
  auto r = db_.query_outside_transaction(text, Params::documents(documents.list()), &durable_at);
  if (!r.is_ok()) {
    const Status& s = r.status();
    // Not found at the name in the statement: the collection of the path.
    // The statement is ours, not the client's: its positions mean nothing to them.
    const bool no_collection = s.code() == Code::NotFound && s.position() == 4;
    return error(no_collection ? 404 : http_status(s.code()), code_name(s.code()),
                 array ? s.message() : with_lines(s.message(), body));
  }
  ApiResponse out;
  out.durable_at = durable_at;
  out.body = "{\"ids\":[";
  for (size_t i = 0; i < r->rows.size(); i++) {
    if (i) out.body += ',';
    const Value* id = r->rows[i].get("id");
    append_json(out.body, id ? *id : Value::null());
  }
  out.body += "]}";
  return out;
}

// The engine numbers a put's documents from 1 ("document 3: ...", "... to
// document 1 too"): in an NDJSON body, each with its line after it
// ("document 3 (line 5)"), blank lines counted.
std::string Api::with_lines(const std::string& message, std::string_view body) {
  constexpr std::string_view kDoc = "document ";
  std::string out;
  bool quoted = false;  // inside a value the message quotes (JSON text): left as it is
  for (size_t i = 0; i < message.size();) {
    const char c = message[i];
    if (quoted || c == '"' || message.compare(i, kDoc.size(), kDoc) != 0) {
      if (quoted && c == '\\' && i + 1 < message.size()) out += message[i++];
      else if (c == '"') quoted = !quoted;
      out += message[i++];
      continue;
    }
    size_t end = i + kDoc.size();
    uint64_t n = 0;
    while (end < message.size() && end < i + kDoc.size() + 19 && message[end] >= '0' && message[end] <= '9')
      n = n * 10 + uint64_t(message[end++] - '0');
    out.append(message, i, end - i);
    i = end;
    if (n == 0) continue;
    // The line of the n-th line that is not blank.
    uint64_t seen = 0, line = 0;
    for (size_t pos = 0; pos < body.size() && seen < n; line++) {
      size_t eol = body.find('\n', pos);
      if (eol == std::string_view::npos) eol = body.size();
      if (!blank_line(body.substr(pos, eol - pos))) seen++;
      pos = eol + 1;
    }
    if (seen == n) out += " (line " + std::to_string(line) + ")";
  }
  return out;
}

// A statement that may run long (Database::may_run_long), or whose
// parameter is a list of more than kLongPut documents (objects: a put's,
// not a vector's numbers or a list of ids).
bool Api::runs_long(std::string_view text, const Params& params) {
  for (size_t i = 0; i < params.size(); i++) {  // a parameter of many documents
    if (params.is_listed()) {
      Reader r(params.encoded((int64_t)i + 1));
      if (r.u8() == kList && r.varint() > kLongPut && r.u8() == kObject) return true;
      continue;
    }
    const Value& p = params[i];
    if (p.kind() == Kind::List && p.size() > kLongPut && p.items()[0].kind() == Kind::Object) return true;
  }
  return db_.may_run_long(text, params);
}

void Api::count_ran(bool on_loop) { (on_loop ? ran_on_loop_ : ran_handed_over_).fetch_add(1, std::memory_order_relaxed); }

ApiResponse Api::stats() {
  Value v = stats_value(db_.stats());
  Value server = Value::object();
  server.append("ran_on_loop", Value::integer((int64_t)ran_on_loop_.load(std::memory_order_relaxed)));
  server.append("ran_handed_over", Value::integer((int64_t)ran_handed_over_.load(std::memory_order_relaxed)));
  server.append("puts_read_straight", Value::integer((int64_t)read_straight_.load(std::memory_order_relaxed)));
  server.append("batches_read_straight",
                Value::integer((int64_t)batches_read_straight_.load(std::memory_order_relaxed)));
  v.append("server", std::move(server));
  ApiResponse out;
  out.body = to_json(v);
  return out;
}

}  // namespace kitfox
