// Prepared statements: bound once, bound again when the catalog changes,
// shared by threads; the statement cache behind Database::query.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "codec.h"
#include "db.h"
#include "schema.h"

using namespace kitfox;

namespace {

std::unique_ptr<Database> open_memory(FileSystem& fs) {
  auto db = Database::open(fs, "p.kfdb", {});
  REQUIRE(db.is_ok());
  return std::move(db.value());
}

std::string rows(const Result<QueryResult>& r) {
  if (!r.is_ok()) return "error: " + r.status().message();
  std::string s;
  for (const Value& v : r.value().rows) s += to_json(v) + "\n";
  return s;
}

void ok(Database& db, const char* text) {
  auto r = db.query(text);
  REQUIRE_MESSAGE(r.is_ok(), text, ": ", r.status().to_string());
}

}  // namespace

TEST_CASE("a prepared statement runs with new parameters") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (name text, n int)");
  auto put = db->prepare("put t {name: $1, n: $2}");
  REQUIRE(put.is_ok());
  CHECK(put->is_write());
  for (int i = 1; i <= 5; i++)
    REQUIRE(put->query({Value::text("d" + std::to_string(i)), Value::integer(i * 10)}).is_ok());
  auto get = db->prepare("get t select name where id = $1");
  REQUIRE(get.is_ok());
  CHECK_FALSE(get->is_write());
  CHECK(get->text() == "get t select name where id = $1");
  CHECK(rows(get->query({Value::integer(3)})) == "{\"id\":3,\"name\":\"d3\"}\n");
  CHECK(rows(get->query({Value::integer(5)})) == "{\"id\":5,\"name\":\"d5\"}\n");
  CHECK(rows(get->query({Value::integer(9)})) == "");
}

TEST_CASE("prepare reports a syntax error or an unknown name at once") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int)");
  auto bad = db->prepare("get t where");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == Code::Syntax);
  auto none = db->prepare("get nope");
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().message() == "collection 'nope' does not exist");
  auto field = db->prepare("get t where m = 1");
  REQUIRE_FALSE(field.is_ok());
  CHECK(field.status().message() == "unknown field 'm' in collection 't'");
  CHECK(field.status().position() == 12);
  // A put's or insert's documents written in the text: each key, where it
  // stands, whether the documents are all literals or hold parameters.
  struct Case {
    const char* text;
    int64_t pos;
  };
  for (const Case& c : {Case{"put t {nosuch: 1}", 7}, Case{"insert t [{n: 1}, {id: 5, nosuch: 2}]", 26},
                        Case{"put t {n: $1, nosuch: 2}", 14}, Case{"put t [{n: $1}, {nosuch: $2}]", 17},
                        Case{"put t [{n: 1}, {n: $1}, {n: 2, nosuch: 3}]", 31}}) {
    const std::string text = c.text;
    CAPTURE(text);
    auto put = db->prepare(c.text);
    REQUIRE_FALSE(put.is_ok());
    CHECK(put.status().message() == "unknown field 'nosuch' in collection 't'");
    CHECK(put.status().position() == c.pos);
    // Run at once, the same error at the same place.
    auto run = db->query(c.text, {Value::integer(1), Value::integer(2)});
    REQUIRE_FALSE(run.is_ok());
    CHECK(run.status().message() == put.status().message());
    CHECK(run.status().position() == c.pos);
  }
  CHECK(db->prepare("put t [{id: 3, n: 1}, $1]").is_ok());  // a document given as a parameter is checked as it runs
}

TEST_CASE("a prepared statement is bound again after alter, create index and drop") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (a int, b text)");
  ok(*db, "put t [{a: 1, b: \"x\"}, {a: 2, b: \"y\"}]");
  auto get = db->prepare("get t select b where a = $1");
  REQUIRE(get.is_ok());
  CHECK(rows(get->query({Value::integer(2)})) == "{\"id\":2,\"b\":\"y\"}\n");

  // An index on the field it filters: the same answer, now from the index.
  ok(*db, "create index on t (a) @hash");
  CHECK(rows(get->query({Value::integer(2)})) == "{\"id\":2,\"b\":\"y\"}\n");
  auto plan = db->query("explain get t select b where a = 2");
  REQUIRE(plan.is_ok());
  CHECK(rows(plan).find("@hash") != std::string::npos);

  // A field it selects renamed away: refused, naming the field.
  ok(*db, "alter collection t rename b to c");
  auto r = get->query({Value::integer(2)});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::NotFound);
  CHECK(r.status().message() == "unknown field 'b' in collection 't'");
  // ... and back: it works again.
  ok(*db, "alter collection t rename c to b");
  CHECK(rows(get->query({Value::integer(1)})) == "{\"id\":1,\"b\":\"x\"}\n");

  // A write bound to a field that was dropped.
  auto set = db->prepare("set t {b: $1} where a = $2");
  REQUIRE(set.is_ok());
  ok(*db, "alter collection t drop b");
  auto w = set->query({Value::text("z"), Value::integer(1)});
  REQUIRE_FALSE(w.is_ok());
  CHECK(w.status().message() == "unknown field 'b' in collection 't'");

  // The collection dropped, then made again with other fields.
  ok(*db, "drop collection t");
  auto gone = get->query({Value::integer(1)});
  REQUIRE_FALSE(gone.is_ok());
  CHECK(gone.status().message() == "collection 't' does not exist");
  ok(*db, "create collection t (b text, a int)");
  ok(*db, "put t {a: 7, b: \"new\"}");
  CHECK(rows(get->query({Value::integer(7)})) == "{\"id\":1,\"b\":\"new\"}\n");
}

TEST_CASE("parameters of the wrong type on a later run: a clear error, nothing written") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int, v vector<2>)");
  auto put = db->prepare("put t {n: $1, v: $2}");
  REQUIRE(put.is_ok());
  REQUIRE(put->query({Value::integer(1), Value::vector({1, 2})}).is_ok());
  auto bad = put->query({Value::text("one"), Value::vector({1, 2})});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == Code::Type);
  CHECK(bad.status().message().find("'n'") != std::string::npos);
  auto dims = put->query({Value::integer(2), Value::vector({1, 2, 3})});
  REQUIRE_FALSE(dims.is_ok());
  CHECK(dims.status().code() == Code::Type);
  auto missing = put->query({Value::integer(2)});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message() == "parameter $2 was not given (1 given)");
  auto limit = db->prepare("get t limit $1");
  REQUIRE(limit.is_ok());
  auto neg = limit->query({Value::integer(-1)});
  REQUIRE_FALSE(neg.is_ok());
  CHECK(neg.status().message() == "limit must be a non-negative integer");
  CHECK(rows(db->query("get t select n")) == "{\"id\":1,\"n\":1}\n");
  // And the statement still works.
  REQUIRE(put->query({Value::integer(2), Value::vector({3, 4})}).is_ok());
  CHECK(rows(db->query("get t count")) == "{\"count\":2}\n");
}

TEST_CASE("one prepared statement run from several threads at once") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int @hash)");
  auto put = db->prepare("put t {n: $1}");
  auto get = db->prepare("get t where n = $1");
  REQUIRE(put.is_ok());
  REQUIRE(get.is_ok());
  constexpr int kThreads = 4, kEach = 300;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; i++) {
        int n = t * kEach + i;
        if (!put->query({Value::integer(n)}).is_ok()) failures++;
        auto r = get->query({Value::integer(n)});
        if (!r.is_ok() || r->rows.size() != 1 || r->rows[0].get("n")->as_int() != n) failures++;
      }
    });
  // Meanwhile the catalog changes under them: each run binds again as needed.
  for (int i = 0; i < 20; i++) {
    ok(*db, "alter collection t add field extra int");
    ok(*db, "alter collection t drop extra");
  }
  for (auto& th : ts) th.join();
  CHECK(failures == 0);
  CHECK(rows(db->query("get t count")) == "{\"count\":" + std::to_string(kThreads * kEach) + "}\n");
}

TEST_CASE("the statement cache: the same text again is the same statement, bound again when needed") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (a int)");
  ok(*db, "put t {a: 1}");
  const char* q = "get t select a where id = $1";
  CHECK(rows(db->query(q, {Value::integer(1)})) == "{\"id\":1,\"a\":1}\n");
  ok(*db, "alter collection t rename a to b");
  auto r = db->query(q, {Value::integer(1)});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message() == "unknown field 'a' in collection 't'");
  ok(*db, "alter collection t rename b to a");
  CHECK(rows(db->query(q, {Value::integer(1)})) == "{\"id\":1,\"a\":1}\n");
  // A cached put of literals runs again and writes a new document each time.
  for (int i = 0; i < 3; i++) ok(*db, "put t {a: 5}");
  CHECK(rows(db->query("get t where a = 5 count")) == "{\"count\":3}\n");
  // Many different texts: older ones leave the cache, all still run.
  for (int i = 0; i < 500; i++) {
    std::string text = "get t where a = " + std::to_string(i) + " count";
    REQUIRE(db->query(text).is_ok());
  }
  CHECK(rows(db->query(q, {Value::integer(1)})) == "{\"id\":1,\"a\":1}\n");
}

TEST_CASE("prepared statements inside a transaction: writes queue, reads see them") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int)");
  auto put = db->prepare("put t {n: $1}");
  auto count = db->prepare("get t count");
  REQUIRE(put.is_ok());
  REQUIRE(count.is_ok());
  ok(*db, "begin");
  CHECK(rows(put->query({Value::integer(1)})) == "{\"queued\":1}\n");
  CHECK(rows(put->query({Value::integer(2)})) == "{\"queued\":2}\n");
  CHECK(rows(count->query()) == "{\"count\":2}\n");
  // Another thread sees nothing of it.
  std::string other;
  std::thread([&] { other = rows(count->query()); }).join();
  CHECK(other == "{\"count\":0}\n");
  CHECK(rows(db->query("commit")) == "{\"id\":1}\n{\"id\":2}\n");
  CHECK(rows(count->query()) == "{\"count\":2}\n");
}

TEST_CASE("a thread that ends with a transaction open has it rolled back; no later thread takes it over") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (who text)");
  // Each thread begins, queues a write and ends: the system hands a
  // thread's id on to the next thread at once, and none of these may find
  // another's transaction.
  for (int round = 0; round < 20; round++) {
    std::string began, queued;
    std::thread([&] {
      began = rows(db->query("begin"));
      queued = rows(db->query("put t {who: \"abandoned\"}"));
    }).join();
    CHECK(began == "");
    CHECK(queued == "{\"queued\":1}\n");
    std::string put, seen;
    std::thread([&] {
      put = rows(db->query("put t {who: \"later\"}"));
      seen = rows(db->query("get t where who = \"abandoned\" count"));
    }).join();
    CHECK(put == "{\"id\":" + std::to_string(round + 1) + "}\n");  // landed, not queued
    CHECK(seen == "{\"count\":0}\n");
  }
  CHECK(rows(db->query("get t count")) == "{\"count\":20}\n");
  // A transaction still open when its database closes is simply gone, and
  // its thread ending later touches nothing.
  std::atomic<bool> close_now{false}, closed{false};
  std::thread late([&] {
    ok(*db, "begin");
    close_now = true;
    while (!closed) std::this_thread::yield();
  });
  while (!close_now) std::this_thread::yield();
  REQUIRE(db->query("begin").is_ok());
  REQUIRE(db->close().is_ok());
  // Closed: a write is not queued to it, nor a transaction begun.
  CHECK(rows(db->query("put t {who: \"late\"}")) == "error: the database is closed");
  CHECK(rows(db->query("commit")) == "error: the database is closed");
  CHECK(rows(db->query("begin")) == "error: the database is closed");
  db.reset();
  closed = true;
  late.join();
}

TEST_CASE("a put whose first document is far larger than the rest reserves at most 64 MiB ahead") {
  // The encoded documents are reserved from the first one's size times
  // their number, up to 64 MiB: a 2 MiB document and 20,000 empty ones
  // would otherwise ask for 40 GB.
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (s text)");
  std::string text = "put t [{s: \"" + std::string(2 << 20, 'x') + "\"}";
  for (int i = 0; i < 20000; i++) text += ", {}";
  text += "]";
  auto r = db->query(text);
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK(r->rows.size() == 20001);
  CHECK(rows(db->query("get t count")) == "{\"count\":20001}\n");
  CHECK(rows(db->query("get t select id where id = 1")) == "{\"id\":1}\n");
}

namespace {
std::string rows(const QueryResult& r) {
  std::string s;
  for (const Value& v : r.rows) s += to_json(v) + "\n";
  return s;
}
}  // namespace

TEST_CASE("a statement run into one result again and again: each read its own row, in the last one's storage") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (name text, n int, tags json)");
  ok(*db, "put t {name: \"a name of thirty characters ...\", n: 1, tags: [1, 2]}");
  ok(*db, "put t {name: \"b\", n: 2}");  // no tags: a member fewer
  ok(*db, "put t {name: \"a name of 25 characters..\", n: 3, tags: {a: {b: \"c\"}}}");
  ok(*db, "put t {n: 4, tags: \"text where the name was\"}");
  auto get = db->prepare("get t where id = $1");
  REQUIRE(get.is_ok());
  QueryResult r;
  for (int64_t id : {1, 2, 3, 4, 1, 9, 4, 2, 3, 3}) {
    CAPTURE(id);
    REQUIRE(get->query({Value::integer(id)}, &r).is_ok());
    CHECK(rows(r) == rows(get->query({Value::integer(id)})));
    CHECK(r.rows.size() == (id == 9 ? 0u : 1u));
  }
  // Written over in place: the row, and a text's bytes when they fit.
  REQUIRE(get->query({Value::integer(1)}, &r).is_ok());
  const Value* row = &r.rows[0];
  const char* name = row->get("name")->as_string().data();
  REQUIRE(get->query({Value::integer(3)}, &r).is_ok());
  CHECK(&r.rows[0] == row);
  CHECK(r.rows[0].get("name")->as_string().data() == name);
  CHECK(r.rows[0].get("name")->as_string() == "a name of 25 characters..");

  // An error leaves no rows; a read of many rows, or of selected fields,
  // replaces what the result held; a point read after them is right again.
  CHECK_FALSE(get->query({}, &r).is_ok());
  CHECK(r.rows.empty());
  auto sel = db->prepare("get t select n, tags.a where id = $1");
  REQUIRE(sel.is_ok());
  REQUIRE(sel->query({Value::integer(3)}, &r).is_ok());
  CHECK(rows(r) == "{\"id\":3,\"n\":3,\"tags.a\":{\"b\":\"c\"}}\n");
  REQUIRE(db->query("get t where n >= $1", {Value::integer(2)}, &r).is_ok());
  CHECK(rows(r) == rows(db->query("get t where n >= $1", {Value::integer(2)})));
  CHECK(r.rows.size() == 3);
  REQUIRE(db->query("get t select id where id = $1", {Value::integer(2)}, &r).is_ok());
  CHECK(rows(r) == "{\"id\":2}\n");
  REQUIRE(get->query({Value::integer(2)}, &r).is_ok());
  CHECK(rows(r) == "{\"id\":2,\"name\":\"b\",\"n\":2}\n");
  CHECK_FALSE(db->query("get t where", {}, &r).is_ok());
  CHECK(r.rows.empty());
}

TEST_CASE("a put's parameters of every type: typed from their encoding as literals are, the same errors") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (b bool, n int, x float, s text, raw bytes, at timestamp, j json, l [int], "
          "v vector<2>, h vector<2, f16>)");
  auto put = db->prepare("put t {id: $1, b: $2, n: $3, x: $4, s: $5, raw: $6, at: $7, j: $8, l: $9, v: $10, h: $11}");
  REQUIRE(put.is_ok());
  std::vector<Value> p = {Value::integer(7), Value::boolean(true), Value::integer(-3), Value::integer(2),
                          Value::text("é"), Value::bytes(std::string("\0\xff", 2)), Value::timestamp(1700000000123),
                          Value::list({Value::integer(1), Value::text("a")}), Value::list({Value::integer(4)}),
                          Value::vector({0.5f, -1.5f}), Value::vector({1.0f, 2.0f})};
  REQUIRE(rows(put->query(p)) == "{\"id\":7}\n");
  auto got = db->query("get t where id = 7");
  REQUIRE(got.is_ok());
  REQUIRE(got->rows.size() == 1);
  const Value& row = got->rows[0];
  CHECK(row.get("x")->kind() == Kind::Float);
  CHECK(row.get("raw")->kind() == Kind::Bytes);
  CHECK(row.get("raw")->as_string() == std::string("\0\xff", 2));
  CHECK(row.get("at")->kind() == Kind::Timestamp);
  CHECK(row.get("at")->as_int() == 1700000000123);
  CHECK(to_json(*row.get("j")) == "[1,\"a\"]");
  CHECK(to_json(*row.get("l")) == "[4]");
  CHECK(to_json(*row.get("v")) == "[0.5,-1.5]");
  CHECK(to_json(*row.get("h")) == "[1,2]");
  auto error = [&](size_t i, Value v) {
    std::vector<Value> q = p;
    q[0] = Value::integer(8);
    q[i] = std::move(v);
    auto r = put->query(q);
    return r.is_ok() ? std::string("ok") : r.status().to_string();
  };
  CHECK(error(0, Value::timestamp(5)) == "type error at 7: 'id' must be an int, got timestamp");
  CHECK(error(2, Value::bytes("1")) == "type error at 22: expected int for 'n', got bytes");
  CHECK(error(3, Value::real(std::nan(""))) == "type error at 29: 'x' must be a finite number");
  CHECK(error(4, Value::text(std::string("\xff", 1))) == "type error at 36: 's' is not valid UTF-8 text");
  CHECK(error(9, Value::vector({1.0f, 2.0f, 3.0f})) == "type error at 74: vector 'v' has 3 dimensions, expected 2");
  CHECK(error(9, Value::vector({1.0f, std::nanf("")})) == "type error at 74: vector 'v' has a non-finite value at 1");
  CHECK(error(10, Value::vector({1.0f, 70000.0f})) == "type error at 82: vector 'h' value at 1 overflows f16 (max 65504)");
  CHECK(rows(db->query("get t count")) == "{\"count\":1}\n");
  // Converted where the field converts: text to bytes, an int to a timestamp.
  CHECK(error(5, Value::text("t")) == "type error at 43: expected bytes (base64 text) for 'raw'");
  CHECK(error(5, Value::text("dA")) == "ok");
  CHECK(rows(db->query("get t select raw where id = 8")) == "{\"id\":8,\"raw\":\"dA==\"}\n");
  CHECK(error(6, Value::integer(5)) == "ok");
  CHECK(rows(db->query("get t select at where id = 8")) == "{\"id\":8,\"at\":\"1970-01-01T00:00:00.005Z\"}\n");
  // A timestamp given as one is held to a JavaScript Date's range too.
  CHECK(error(6, Value::timestamp(100000000000000000)) ==
        "type error at 52: timestamp 100000000000000000 ms for 'at' is out of range (at most 8.64e15 ms either side "
        "of 1970, as a JavaScript Date)");
  CHECK(error(6, Value::timestamp(-8640000000000000)) == "ok");
  CHECK(rows(db->query("get t select at where id = 8")) == "{\"id\":8,\"at\":\"-271821-04-20T00:00:00.000Z\"}\n");
}

TEST_CASE("a put's null parameters: a field not stored, an id assigned, a list's null document refused") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int, s text, j json)");
  auto run = [&](const char* text, std::vector<Value> params) {
    auto r = db->query(text, params);
    return r.is_ok() ? rows(r) : r.status().to_string();
  };
  CHECK(run("put t {n: $1, s: $2}", {Value(), Value::text("x")}) == "{\"id\":1}\n");
  CHECK(run("put t {s: $2, n: $1}", {Value(), Value::text("y")}) == "{\"id\":2}\n");
  CHECK(run("put t {id: $1, n: 3}", {Value()}) == "{\"id\":3}\n");
  CHECK(run("put t {n: 4, s: null, j: $1}", {Value()}) == "{\"id\":4}\n");
  Value nested = Value::object();
  nested.append("a", Value());
  nested.append("b", Value::list({Value(), Value::integer(1)}));
  CHECK(run("put t {n: 5, j: $1}", {nested}) == "{\"id\":5}\n");
  CHECK(run("put t {n: 6, j: {a: $1, b: [$1, 2]}}", {Value()}) == "{\"id\":6}\n");
  CHECK(run("put t [$1]", {Value()}) == "type error at 7: expected a document (an object), got null");
  CHECK(run("put t $1", {Value::list({Value::object(), Value()})}) ==
        "type error at 6: document 2: expected a document (an object), got null");
  CHECK(rows(db->query("get t")) ==
        "{\"id\":1,\"s\":\"x\"}\n{\"id\":2,\"s\":\"y\"}\n{\"id\":3,\"n\":3}\n{\"id\":4,\"n\":4}\n"
        "{\"id\":5,\"n\":5,\"j\":{\"a\":null,\"b\":[null,1]}}\n{\"id\":6,\"n\":6,\"j\":{\"a\":null,\"b\":[null,2]}}\n");
}

TEST_CASE("a put's parameter object with a key given twice stores the first; one nested too deep is refused at its key") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (n int, j json)");
  Value twice = Value::object();
  twice.append("n", Value::integer(1));
  twice.append("n", Value::integer(2));
  REQUIRE(db->query("put t $1", {twice}).is_ok());
  CHECK(rows(db->query("get t")) == "{\"id\":1,\"n\":1}\n");
  REQUIRE(db->checkpoint().is_ok());
  CHECK(rows(db->query("get t")) == "{\"id\":1,\"n\":1}\n");
  Value null_first = Value::object();
  null_first.append("id", Value::integer(5));
  null_first.append("n", Value());
  null_first.append("n", Value::integer(3));
  null_first.append("id", Value::integer(7));
  REQUIRE(db->query("put t $1", {null_first}).is_ok());
  CHECK(rows(db->query("get t")) == "{\"id\":1,\"n\":1}\n{\"id\":5}\n");
  Value deep = Value::integer(0);
  for (int i = 0; i < 70; i++) deep = Value::list({std::move(deep)});
  Value deep_twice = Value::object();
  deep_twice.append("n", Value::integer(1));
  deep_twice.append("n", deep);
  auto twice_deep = db->query("put t $1", {deep_twice});
  REQUIRE_FALSE(twice_deep.is_ok());
  CHECK(twice_deep.status().to_string() == "limit error at 6: value of 'n' nested deeper than 64 levels");
  auto r = db->query("put t {n: 2, j: $1}", {deep});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().to_string() == "limit error at 13: value of 'j' nested deeper than 64 levels");
  CHECK(rows(db->query("get t count")) == "{\"count\":2}\n");
}

TEST_CASE("a timestamp parameter against fields that are no timestamp: an index answers as the filter does") {
  // The filter compares a timestamp with ISO text and with ints (ms); an
  // index holds the field's own values. Indexed and plain collections must
  // give the same rows for every statement.
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  const char* docs =
      "[{s: \"2024-01-01\", n: 1704067200000, j: {k: \"2024-01-01T00:00:00Z\"}, x: 1704067200000.0},"
      " {s: \"2024-01-01T00:00:00.000Z\", n: 1709251200000, j: {k: 1704067200000}},"
      " {s: \"2024-03-01\", n: 5, j: {k: \"2024-03-01\"}},"
      " {s: \"not a time\", n: 1704067200000, j: {k: \"x\"}},"
      " {s: \"2023-06-01\", n: 1685577600000}]";
  ok(*db, "create collection plain (s text, n int, j json, x float)");
  ok(*db, "create collection ix (s text @sorted, n int @sorted, j json, x float @sorted)");
  ok(*db, "create index on ix (j.k) @hash");
  ok(*db, "create index on ix (j.k) @sorted");
  for (const char* c : {"plain", "ix"}) REQUIRE(db->query(std::string("put ") + c + " " + docs).is_ok());
  const Value jan = Value::timestamp(1704067200000);  // 2024-01-01
  const std::vector<std::pair<std::string, std::vector<Value>>> cases = {
      {"where s = $1", {jan}},
      {"where s >= $1", {jan}},
      {"where s > $1 order s limit 2", {jan}},
      {"where s < $1 order s desc limit 2", {jan}},
      {"where s in $1", {Value::list({jan, Value::timestamp(1709251200000)})}},
      {"where s = $1 count", {jan}},
      {"where s >= $1 and s < $2 count", {jan, Value::timestamp(1709251200001)}},
      {"where n = $1", {jan}},
      {"where n >= $1 order n limit 2", {jan}},
      {"where n > $1 count", {jan}},
      {"where n in $1", {Value::list({jan, Value::timestamp(5)})}},
      {"where j.k = $1", {jan}},
      {"where j.k in $1", {Value::list({jan})}},
      {"where j.k >= $1 order j.k limit 3", {jan}},
      {"where s in $1", {Value::list({Value::text("2024-03-01"), jan})}},
      {"where n = $1 count", {jan}},
      {"where n in $1 count", {Value::list({jan, Value::timestamp(5)})}},
      {"where x = $1", {jan}},
      {"where x >= $1 count", {jan}},
  };
  for (const auto& one : cases) {
    const std::string& where = one.first;
    const std::vector<Value>& params = one.second;
    const std::string sel = where.find(" count") == std::string::npos ? "select s, n " : "";  // count takes only where
    auto plain = db->query("get plain " + sel + where, params);
    auto ix = db->query("get ix " + sel + where, params);
    INFO(where);
    REQUIRE(plain.is_ok());
    CHECK(rows(ix) == rows(plain));
  }
  // An int field's index answers a timestamp by its ms; a text field's is left to the filter.
  auto plan = [&](const std::string& q, const std::vector<Value>& params) {
    auto r = db->query("explain get ix " + q, params);
    REQUIRE(r.is_ok());
    std::string s;
    for (const Value& row : r->rows) s += to_json(row) + "\n";
    return s;
  };
  CHECK(plan("where n = $1", {jan}).find("ix.n (@sorted): equality, 2 candidates") != std::string::npos);
  CHECK(plan("where n = $1 count", {jan}).find("count from index") != std::string::npos);
  CHECK(plan("where s = $1", {jan}).find("index lookup") == std::string::npos);
  // The cases above are not all empty: the filter does match.
  CHECK(rows(db->query("get plain where s = $1 count", {jan})) == "{\"count\":2}\n");
  CHECK(rows(db->query("get plain where j.k = $1 count", {jan})) == "{\"count\":2}\n");
}

TEST_CASE("a put's documents left in their encoding (Params): as given as values, kept whole by a transaction") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (name text, n int, v vector<2>)");
  auto put = db->prepare("put t $2");
  REQUIRE(put.is_ok());
  CHECK(put->documents_param() == 2);
  CHECK(db->prepare("put t {n: $1}")->documents_param() == 0);
  CHECK(db->prepare("insert t $1")->documents_param() == 1);
  CHECK(db->prepare("get t where n = $1")->documents_param() == 0);
  auto obj = [](std::vector<std::pair<const char*, Value>> kv) {
    Value o = Value::object();
    for (auto& [k, v] : kv) o.append(k, std::move(v));
    return o;
  };
  auto docs = [&](int64_t n) {
    return Value::list({obj({{"name", Value::text("a")}, {"n", Value::integer(n)}}),
                        obj({{"n", Value::integer(n + 1)}, {"v", Value::vector({1.0f, 2.0f})}})});
  };
  auto run = [&](const Value& d, QueryResult* out) {
    std::string enc;
    encode_value(enc, d, false);
    std::vector<Value> p = {Value::integer(99), Value()};  // $2's place is null: the bytes stand for it
    return put->query(Params(p, 1, enc), out);
  };
  QueryResult out;
  REQUIRE(run(docs(1), &out).is_ok());
  CHECK(out.rows.size() == 2);
  CHECK(rows(db->query("get t")) ==
        "{\"id\":1,\"name\":\"a\",\"n\":1}\n{\"id\":2,\"n\":2,\"v\":[1,2]}\n");
  // The same errors as values get: the document by its number; nothing written.
  Status bad = run(Value::list({obj({{"n", Value::integer(5)}}), obj({{"n", Value::text("x")}})}), &out);
  CHECK(bad.to_string() == put->query({Value::integer(99), Value::list({obj({{"n", Value::integer(5)}}),
                                                                          obj({{"n", Value::text("x")}})})})
                               .status()
                               .to_string());
  CHECK(bad.message().find("document 2") != std::string::npos);
  CHECK(rows(db->query("get t count")) == "{\"count\":2}\n");
  // A transaction keeps a copy: the bytes the caller gave are gone by commit.
  ok(*db, "begin");
  REQUIRE(run(docs(10), &out).is_ok());
  CHECK(rows(Result<QueryResult>(out)) == "{\"queued\":1}\n");
  REQUIRE(run(docs(20), &out).is_ok());
  CHECK(rows(db->query("get t where n >= 10 select n")) == "{\"id\":3,\"n\":10}\n{\"id\":4,\"n\":11}\n{\"id\":5,\"n\":20}\n{\"id\":6,\"n\":21}\n");
  ok(*db, "commit");
  CHECK(rows(db->query("get t where n >= 10 select n")) == "{\"id\":3,\"n\":10}\n{\"id\":4,\"n\":11}\n{\"id\":5,\"n\":20}\n{\"id\":6,\"n\":21}\n");
  // Bytes given for a parameter no put's body is are decoded for it.
  auto set = db->prepare("put t {n: $1}");
  REQUIRE(set.is_ok());
  std::string five;
  encode_value(five, Value::integer(5), false);
  std::vector<Value> one = {Value()};
  REQUIRE(set->query(Params(one, 0, five), &out).is_ok());
  CHECK(rows(db->query("get t where n = 5 select n")) == "{\"id\":7,\"n\":5}\n");
  // So is one given to a read inside a transaction (run beside its queued writes).
  auto get = db->prepare("get t where n = $1 select n");
  REQUIRE(get.is_ok());
  ok(*db, "begin");
  REQUIRE(db->query("put t {n: 5}").is_ok());
  REQUIRE(get->query(Params(one, 0, five), &out).is_ok());
  CHECK(rows(Result<QueryResult>(out)) == "{\"id\":7,\"n\":5}\n{\"id\":8,\"n\":5}\n");
  ok(*db, "rollback");
  // Damaged bytes: refused as malformed, nothing written.
  std::string cut = five.substr(0, 1);
  CHECK(set->query(Params(one, 0, cut), &out).to_string() == "invalid error: malformed parameters");
  CHECK(rows(db->query("get t count")) == "{\"count\":7}\n");
}

TEST_CASE("every parameter left in its encoding (Params::listed): a put splices them, the rest reads them decoded") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  for (const char* c : {"a", "b"})
    ok(*db, (std::string("create collection ") + c + " (name text, n int, tags [int], v vector<2>, j json)").c_str());
  auto obj = [](std::vector<std::pair<const char*, Value>> kv) {
    Value o = Value::object();
    for (auto& [k, v] : kv) o.append(k, std::move(v));
    return o;
  };
  auto listed = [](std::vector<Value> params) {
    std::string enc;
    encode_value(enc, Value::list(std::move(params)), false);
    return enc;
  };
  // Each statement with its parameters as values (into b) and listed (into a).
  struct Case {
    std::string text;  // "C" stands for the collection
    std::vector<Value> params;
  };
  const std::vector<Case> cases = {
      {"put C {name: $1, n: $2, tags: $3, v: $4, j: $5}",
       {Value::text("x"), Value::integer(7), Value::list({Value::integer(1), Value::integer(2)}),
        Value::list({Value::real(0.5), Value::integer(3)}),
        obj({{"k", Value::list({Value(), Value::boolean(true), Value::real(1.5)})}})}},
      {"put C {name: $2, n: $1}", {Value::integer(8), Value()}},       // a null: the field absent
      {"insert C [{n: $1}, {n: $1, name: \"y\"}]", {Value::integer(9)}},  // a list of documents, $1 twice
      {"put C $1", {Value::list({obj({{"n", Value::integer(10)}}), obj({{"name", Value::text("z")}})})}},
      {"set C {name: $1} where n = $2", {Value::text("set"), Value::integer(7)}},  // read decoded
      {"del C where id = $1", {Value::integer(2)}},
      {"get C where n >= $1 select n, name", {Value::integer(9)}},
      {"put C {n: $1}", {Value::integer(21)}},
  };
  std::vector<BatchItem> as_values, as_listed;
  std::vector<std::string> bytes;
  bytes.reserve(cases.size());
  auto in = [](std::string text, char c) {
    text[text.find('C')] = c;
    return text;
  };
  for (const Case& k : cases) {
    as_values.push_back({in(k.text, 'b'), k.params, {}});
    bytes.push_back(listed(k.params));
    as_listed.push_back({in(k.text, 'a'), {}, bytes.back()});
  }
  auto got = db->batch(as_listed);
  REQUIRE(got.is_ok());
  auto want = db->batch(as_values);
  REQUIRE(want.is_ok());
  REQUIRE(got->size() == want->size());
  for (size_t i = 0; i < got->size(); i++) CHECK(rows(Result<QueryResult>((*got)[i])) == rows(Result<QueryResult>((*want)[i])));
  CHECK(rows(db->query("get a")) == rows(db->query("get b")));
  CHECK(rows(db->query("get a where id = 1")) ==
        "{\"id\":1,\"name\":\"set\",\"n\":7,\"tags\":[1,2],\"v\":[0.5,3],\"j\":{\"k\":[null,true,1.5]}}\n");
  CHECK(rows(db->query("get a count")) == "{\"count\":6}\n");
  // As a statement's parameters too (a put, and a read that decodes them).
  auto put = db->prepare("put a {n: $1, name: $2}");
  REQUIRE(put.is_ok());
  const std::string two = listed({Value::integer(30), Value::text("w")});
  QueryResult out;
  std::vector<std::string_view> items;
  REQUIRE(Params::split_list(two, &items).is_ok());
  REQUIRE(items.size() == 2);
  REQUIRE(put->query(Params::listed(items.data(), items.size()), &out).is_ok());
  auto get = db->prepare("get a where n = $1 select name");
  REQUIRE(get.is_ok());
  const std::string thirty = listed({Value::integer(30)});
  items.clear();
  REQUIRE(Params::split_list(thirty, &items).is_ok());
  REQUIRE(get->query(Params::listed(items.data(), items.size()), &out).is_ok());
  CHECK(rows(Result<QueryResult>(out)) == "{\"id\":8,\"name\":\"w\"}\n");
  // The same errors as values get, naming the statement; nothing written.
  const std::string bad = listed({Value::text("not a number")});
  auto err = db->batch({{"put a {n: 1}", {}, {}}, {"put a {n: $1}", {}, bad}});
  CHECK(err.status().to_string() ==
        db->batch({{"put a {n: 1}", {}, {}}, {"put a {n: $1}", {Value::text("not a number")}, {}}}).status().to_string());
  CHECK(err.status().message().find("statement 2") != std::string::npos);
  const Value pair = Value::list({Value::integer(3), Value::integer(4)});
  CHECK(db->batch({{"put a {j: norm($1)}", {}, listed({pair})}}).status().to_string() ==
        db->batch({{"put a {j: norm($1)}", {pair}, {}}}).status().to_string());
  CHECK(db->batch({{"put a {n: $2}", {}, listed({})}}).status().message().find("was not given") !=
        std::string::npos);
  // Damaged lists: refused as malformed before anything runs.
  std::string vecref = listed({Value::integer(1)});
  vecref[2] = 12;  // a tag-12 reference is no parameter
  for (const std::string& damaged : {two.substr(0, two.size() - 1), two + "x", std::string("\x05\x01\x02", 3), vecref}) {
    items.clear();
    CHECK_FALSE(Params::split_list(damaged, &items).is_ok());
    CHECK(items.empty());
    auto r = db->batch({{"put a {n: 1}", {}, {}}, {"put a {n: $1, name: $2}", {}, damaged}});
    CHECK(r.status().code() == Code::Invalid);
    CHECK(r.status().message().rfind("statement 2: ", 0) == 0);
    CHECK(r.status().message().find("parameters") != std::string::npos);
  }
  CHECK(rows(db->query("get a count")) == "{\"count\":7}\n");
}

TEST_CASE("a put's {id} rows written over the rows a reused result held") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (name text, n int)");
  auto put = db->prepare("put t $1");
  auto get = db->prepare("get t where n >= $1");
  REQUIRE(put.is_ok());
  REQUIRE(get.is_ok());
  auto docs = [](std::vector<int64_t> ns) {
    std::vector<Value> l;
    for (int64_t n : ns) {
      Value o = Value::object();
      o.append("name", Value::text("a name past the short-string size"));
      o.append("n", Value::integer(n));
      l.push_back(std::move(o));
    }
    return std::vector<Value>{Value::list(std::move(l))};
  };
  auto text = [](const QueryResult& r) {
    std::string s;
    for (const Value& v : r.rows) s += to_json(v) + "\n";
    return s;
  };
  QueryResult out;
  REQUIRE(put->query(docs({1, 2, 3}), &out).is_ok());
  CHECK(text(out) == "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n");
  REQUIRE(put->query(docs({4}), &out).is_ok());
  CHECK(text(out) == "{\"id\":4}\n");
  REQUIRE(get->query({Value::integer(3)}, &out).is_ok());
  CHECK(text(out) == "{\"id\":3,\"name\":\"a name past the short-string size\",\"n\":3}\n"
                     "{\"id\":4,\"name\":\"a name past the short-string size\",\"n\":4}\n");
  REQUIRE(put->query(docs({5, 6, 7}), &out).is_ok());
  CHECK(text(out) == "{\"id\":5}\n{\"id\":6}\n{\"id\":7}\n");
  REQUIRE(db->query("get t count", {}, &out).is_ok());  // a row whose key is not id
  REQUIRE(put->query(docs({10}), &out).is_ok());
  CHECK(text(out) == "{\"id\":8}\n");
  // A put refused as it lands (a unique key held) leaves no rows.
  ok(*db, "create index on t (n) @unique");
  REQUIRE(get->query({Value::integer(0)}, &out).is_ok());
  CHECK(out.rows.size() == 8);
  CHECK(!put->query(docs({11, 1}), &out).is_ok());
  CHECK(out.rows.empty());
  CHECK(rows(db->query("get t count")) == "{\"count\":8}\n");
  CHECK(!put->query({Value::list({Value::integer(1)})}, &out).is_ok());
  CHECK(out.rows.empty());
  // Through the text too, and a set's row after a put's.
  REQUIRE(db->query("put t {n: 12}", {}, &out).is_ok());
  CHECK(text(out) == "{\"id\":9}\n");
  REQUIRE(db->query("set t {n: 13} where id = 9", {}, &out).is_ok());
  CHECK(text(out) == "{\"updated\":1}\n");
}

TEST_CASE("a vector's int beyond 2^53 goes to float through double, as put and set both convert it") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (v vector<2>)");
  // 2^60 + 2^36 + 1: to double it is 2^60 + 2^36 (a tie to even), which to
  // float is 2^60; straight to float it would be 2^60 + 2^37.
  ok(*db, "put t {v: [1152921573326323713, 1]}");
  ok(*db, "put t {v: [0, 1]}");
  ok(*db, "set t {v: [1152921573326323713, 1]} where id = 2");
  auto r = db->query("get t");
  REQUIRE(r.is_ok());
  REQUIRE(r->rows.size() == 2);
  CHECK(to_json(*r->rows[0].get("v")) == to_json(*r->rows[1].get("v")));
  CHECK(r->rows[0].get("v")->vec()[0] == 1152921504606846976.0f);
}

TEST_CASE("a list field's value given as a parameter: stored as coerce makes it, or refused with its error") {
  // Lists of scalars already of the element's kind are stored as given
  // (type_field's fast path); the rest go through coerce. Either way the
  // outcome is coerce's.
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  const std::pair<const char*, TypeKind> fields[] = {{"lb", TypeKind::Bool},  {"li", TypeKind::Int},
                                                     {"lf", TypeKind::Float}, {"lt", TypeKind::Text},
                                                     {"ly", TypeKind::Bytes}, {"ls", TypeKind::Timestamp},
                                                     {"lj", TypeKind::Json}};
  ok(*db, "create collection t (lb [bool], li [int], lf [float], lt [text], ly [bytes], ls [timestamp], lj [json])");
  auto L = [](std::vector<Value> v) { return Value::list(std::move(v)); };
  const std::vector<Value> values = {
      L({}),
      L({Value::boolean(true), Value::boolean(false)}),
      L({Value::integer(1), Value::integer(-300), Value::integer(INT64_MIN)}),
      L({Value::real(1.5), Value::real(-0.0), Value::real(1e300)}),
      L({Value::real(1.5), Value::integer(2)}),
      L({Value::integer(2), Value::real(1.5)}),
      L({Value::real(std::nan(""))}),
      L({Value::text("a"), Value::text(""), Value::text("é")}),
      L({Value::text("AAE=")}),
      L({Value::text("not base64!")}),
      L({Value::bytes(std::string("\0\1", 2))}),
      L({Value::timestamp(5), Value::timestamp(-8640000000000000)}),
      L({Value::timestamp(8640000000000001)}),
      L({Value::text("2024-01-02T03:04:05Z"), Value::integer(7)}),
      L({Value::integer(1), Value()}),
      L({Value::boolean(true), Value::integer(1)}),
      L({L({Value::integer(1)})}),
      Value::vector({1.0f, 2.5f}),
      Value::text("not a list"),
  };
  auto put = db->prepare("put t {id: 1, lb: $1, li: $2, lf: $3, lt: $4, ly: $5, ls: $6, lj: $7}");
  REQUIRE(put.is_ok());
  for (size_t f = 0; f < std::size(fields); f++)
    for (const Value& v : values) {
      std::vector<Value> params(std::size(fields));
      params[f] = v;
      Value want;
      Type type;
      type.kind = TypeKind::List;
      type.elem = fields[f].second;
      Status expect = coerce(v, type, fields[f].first, &want);
      auto got = put->query(params);
      INFO(fields[f].first << " = " << to_json(v));
      if (!expect.is_ok()) {
        REQUIRE(!got.is_ok());
        CHECK(got.status().message() == expect.message());
        continue;
      }
      REQUIRE_MESSAGE(got.is_ok(), got.status().to_string());
      auto row = db->query(std::string("get t select ") + fields[f].first + " where id = 1");
      REQUIRE(row.is_ok());
      REQUIRE(row->rows.size() == 1);
      const Value* stored = row->rows[0].get(fields[f].first);
      REQUIRE(stored);
      CHECK(to_json(*stored) == to_json(want));
      CHECK(stored->kind() == Kind::List);
      for (size_t i = 0; i < want.items().size() && i < stored->items().size(); i++)
        CHECK(stored->items()[i].kind() == want.items()[i].kind());
    }
}

TEST_CASE("text that is not UTF-8 is refused wherever a value holds it: a field, a list, a json value or key, a set") {
  auto fs = make_memory_file_system();
  auto db = open_memory(*fs);
  ok(*db, "create collection t (body text @text, tags [text], j json, lj [json])");
  ok(*db, "put t {body: \"hello\", tags: [\"a\"], j: {\"k\": \"v\"}}");
  const Value bad = Value::text(std::string("ab\xe2\x82", 4));
  Value bad_key = Value::object();
  bad_key.append(std::string("\xff", 1), Value::integer(1));
  Value nested = Value::object();
  nested.append("k", Value::list({Value::integer(1), bad}));
  auto status = [&](const char* q, Value v) {
    auto r = db->query(q, {std::move(v)});
    return r.is_ok() ? std::string("ok") : r.status().to_string();
  };
  CHECK(status("put t {body: $1}", bad) == "type error at 7: 'body' is not valid UTF-8 text");
  CHECK(status("put t {tags: $1}", Value::list({Value::text("x"), bad})) ==
        "type error at 7: 'tags[1]' is not valid UTF-8 text");
  CHECK(status("put t {j: $1}", nested) == "type error at 7: 'j.k[1]' is not valid UTF-8 text");
  CHECK(status("put t {j: $1}", bad_key) == "type error at 7: 'j' is not valid UTF-8 text");
  CHECK(status("put t {lj: $1}", Value::list({bad})) == "type error at 7: 'lj[0]' is not valid UTF-8 text");
  CHECK(status("set t {body: $1} where id = 1", bad) == "type error at 7: 'body' is not valid UTF-8 text");
  CHECK(status("set t {tags: $1} where id = 1", Value::list({bad})) == "type error at 7: 'tags[0]' is not valid UTF-8 text");
  CHECK(status("set t {j.k: $1} where id = 1", bad) == "type error at 7: 'j.k' is not valid UTF-8 text");
  // A json value is held to the same as a field: finite numbers, timestamps in range.
  CHECK(status("put t {j: $1}", Value::vector({1.0f, std::nanf("")})) == "type error at 7: 'j' must be a finite number");
  CHECK(status("put t {lj: $1}", Value::list({Value::timestamp(100000000000000000)})) ==
        "type error at 7: timestamp 100000000000000000 ms for 'lj[0]' is out of range (at most 8.64e15 ms either "
        "side of 1970, as a JavaScript Date)");
  CHECK(status("set t {j.k: $1} where id = 1", Value::timestamp(-8640000000000001)) ==
        "type error at 7: timestamp -8640000000000001 ms for 'j.k' is out of range (at most 8.64e15 ms either side "
        "of 1970, as a JavaScript Date)");
  // Nothing changed.
  CHECK(rows(db->query("get t")) == "{\"id\":1,\"body\":\"hello\",\"tags\":[\"a\"],\"j\":{\"k\":\"v\"}}\n");
  // The same text, valid, goes in.
  CHECK(status("set t {tags: $1} where id = 1", Value::list({Value::text("é")})) == "ok");
}
