// A where clause tested on a document's encoding (EncodedWhere) against the
// evaluator on the decoded document: the same answer for every clause and
// document, Truth::Ask only where the evaluator is to answer (a value the
// encoded form does not read, or the evaluator's error); and the same rows
// from queries over enough documents that a filter compiles its clause.
#include <doctest/doctest.h>

#include <cmath>

#include "codec.h"
#include "db.h"
#include "query/evaluator.h"
#include "query/parser.h"
#include "schema.h"

using namespace kitfox;

namespace {

const char* truth_name(Truth t) {
  switch (t) {
    case Truth::False: return "false";
    case Truth::True: return "true";
    case Truth::Null: return "null";
    case Truth::Ask: return "ask";
  }
  return "?";
}

CollectionDef where_def() {
  CollectionDef def;
  def.name = "t";
  const char* names[] = {"name", "n", "x", "ok", "at", "tags", "j"};
  for (uint32_t i = 0; i < 7; i++) {
    Field f;
    f.id = i + 1;
    f.name = names[i];
    def.fields.push_back(f);
  }
  def.next_field_id = 8;
  return def;
}

Value list_of(std::vector<Value> items) { return Value::list(std::move(items)); }

// Documents of every kind a field may hold, a field left out, and values
// that compare across kinds (2 and 2.0, text that reads as a timestamp).
std::vector<Value> where_docs() {
  const int64_t day = 86400000;
  std::vector<Value> docs;
  auto doc = [&](std::initializer_list<std::pair<const char*, Value>> fields) {
    Value o = Value::object();
    for (const auto& [k, v] : fields) o.append(k, v);
    docs.push_back(std::move(o));
  };
  doc({{"name", Value::text("Ken")}, {"n", Value::integer(3)}, {"x", Value::real(2.0)}, {"ok", Value::boolean(true)},
       {"at", Value::timestamp(1700000000000)}, {"tags", list_of({Value::text("a")})}, {"j", Value::integer(3)}});
  doc({{"name", Value::text("ken")}, {"n", Value::integer(-7)}, {"x", Value::real(-0.5)}, {"ok", Value::boolean(false)},
       {"j", Value::text("a")}});
  doc({{"name", Value::text("abc")}, {"n", Value::integer(1)}, {"x", Value::real(0.5)}, {"j", Value::real(2.0)}});
  doc({{"name", Value::text("")}, {"n", Value::integer(2)}, {"at", Value::timestamp(1700000000000 + day)},
       {"j", list_of({Value::integer(1), Value::text("a")})}});
  doc({{"n", Value::integer(INT64_MAX)}, {"x", Value::real(1e300)}, {"j", Value::boolean(true)}});
  doc({{"name", Value::text("2024-01-01T00:00:00Z")}, {"n", Value::integer(INT64_MIN)}, {"j", Value::object()}});
  doc({{"name", Value::text("a much longer name than sixteen bytes, kenneth")}, {"x", Value::real(3.0)},
       {"at", Value::timestamp(-day)}, {"j", Value::text("2024-01-01T00:00:00Z")}});
  doc({});
  doc({{"ok", Value::boolean(true)}, {"j", Value::vector({1.0f, 2.0f})}});
  doc({{"name", Value::text("zzz")}, {"n", Value::integer(3)}, {"x", Value::real(3.5)}, {"j", Value::integer(-1)}});
  doc({{"name", Value::bytes("ken")}, {"n", Value::integer(0)}, {"tags", Value::list()}});
  doc({{"j", Value::timestamp(1700000000000)}, {"at", Value::timestamp(1600000000000)}});
  doc({{"name", Value::text("\xc3\xa9t\xc3\xa9")}, {"n", Value::integer(3)}});  // a text past ASCII
  return docs;
}

// Values only the encoded test meets here (a put refuses a NaN float): NaN,
// -0.0, ints past 2^53 beside the floats they round to; a field holding a
// text in one document and an int in the next (a typed put refuses it).
std::vector<Value> odd_number_docs() {
  std::vector<Value> docs;
  auto doc = [&](const char* k, Value v, const char* k2 = nullptr, Value v2 = Value()) {
    Value o = Value::object();
    o.append(k, std::move(v));
    if (k2) o.append(k2, std::move(v2));
    docs.push_back(std::move(o));
  };
  doc("x", Value::real(std::nan("")), "j", Value::real(std::nan("")));
  doc("x", Value::real(-0.0), "n", Value::integer(0));
  doc("n", Value::integer(9007199254740993), "x", Value::real(9007199254740992.0));
  doc("n", Value::integer(9007199254740992), "j", Value::real(9007199254740992.0));
  // After a text name (left where it lay), an int one, then none.
  doc("name", Value::text("ken"));
  doc("name", Value::integer(3));
  doc("n", Value::integer(3));
  return docs;
}

// Clauses with the parameters $1 = 3, $2 = "ke", $3 = [1, 2, "a"], $4 = null,
// $5 = a timestamp, $6 = 2.0, $7 = the bytes "ken".
const char* kClauses[] = {
    "n = 3", "n != 3", "n < 3", "n <= 3", "n > 3", "n >= 3", "3 < n", "3 >= n", "n = 3.0", "n = \"3\"",
    "n != \"3\"", "n < \"3\"", "n = $1", "n > $6", "n = $4", "n != $4", "x < 0", "x = 2", "x > 1.5",
    "x = $6", "name = \"ken\"", "name ~ \"KE\"", "name ~ $2", "name ~ \"\"", "name < \"b\"",
    "name = 3", "name != 3", "name > \"2024\"", "name < $5", "ok = true", "ok != false", "ok = 1", "ok < true",
    "at > \"2023-11-14T00:00:00Z\"", "at < 1700000000001", "at = \"not a date\"", "at != \"not a date\"",
    "at >= $5", "at < 0", "j = 3", "j = \"a\"", "j < 5", "j ~ \"a\"", "j = 2", "j = true", "j > \"2023\"",
    "n in [1, 2, 3]", "n not in [1, 2]", "name in [\"ken\", \"abc\", 3]", "x in [2, 0.5]", "n in $3",
    "n in $4", "n not in $4", "j in $3", "j in [3, 2]", "n in $1", "at in [1700000000000]", "n is null",
    "name is not null", "id is null", "j is null", "tags is null", "id < 5", "id in [1, 3, 5]", "2 >= id",
    "id != 4", "n > 1 and name ~ \"k\"", "not (n = 3)", "n = 3 or x < 0", "not (n > 1 and x < 0 or name = \"ken\")",
    "n = 3 and j ~ \"a\"", "n = 99 and j ~ \"a\"", "j ~ \"a\" or n = 3", "(n > 0 or x > 0) and not (ok = true)",
    "n = $4 or n = 3", "n = $4 and n = 99", "tags = [\"a\"]", "tags is not null and n = 3", "name ~ 3",
    "ok = true and x < 4 and n != 0 and name != \"\" and at is null", "x = 0", "x < 1", "x >= -1",
    "n = 9007199254740992.0", "n > 9007199254740992.0", "x = 9007199254740993", "j < 9007199254740993",
    "name = $7", "name != $7", "n in [9007199254740992.0]",
    // A constant read as a timestamp (made one once) against fields that
    // hold timestamps in some documents and other kinds in others.
    "\"2023-11-14T00:00:00Z\" < at", "1700000000000 = at", "at = 1700000000000.0", "j > \"2023-11-14\"",
    "j = 1700000000000", "j <= $5", "\"2023-11-15\" > j", "j != \"not a date\"", "name > \"2023-11-14\"",
    "n < \"2023-11-14\"", "at < $2",
    // Texts compared where they lie in the document, either side first.
    "\"b\" > name", "\"ken\" != name", "\"ken\" = name", "name >= \"\"", "name <= $2", "$2 < name",
    "name ~ $4", "name = $4", "name not in [\"ken\", \"\"]", "name = \"ken\" and name ~ \"e\"", "name > 3",
    "name is null", "not (name is null)", "name < \"z\"", "$5 > name",
    // One field compared in place by one node and made a value by another, either first.
    "name in [\"ken\"] or name < \"b\"", "name > 3 or name = \"ken\"", "name ~ \"k\" and name in $3",
    "name < $5 or name ~ \"k\"", "name = 3 or name = \"ken\"",
    // Timestamps against constants that are no timestamp, and constant first.
    "at = true", "at = $7", "at != $6", "$5 = at", "$1 < at", "\"not a date\" != at", "\"2023-11-14\" = j",
    "$1 >= j",
};

std::vector<Value> where_params() {
  return {Value::integer(3),
          Value::text("ke"),
          list_of({Value::integer(1), Value::integer(2), Value::text("a")}),
          Value(),
          Value::timestamp(1700000000000),
          Value::real(2.0),
          Value::bytes("ken")};
}

std::string ids(const Result<QueryResult>& r) {
  if (!r.is_ok()) return "error: " + r.status().message();
  std::string s;
  for (const Value& v : r.value().rows) s += std::to_string(v.get("id")->as_int()) + " ";
  return s;
}

}  // namespace

TEST_CASE("a where clause tested on the encoding answers as the evaluator does") {
  const CollectionDef def = where_def();
  std::vector<Value> docs = where_docs();
  for (Value& d : odd_number_docs()) docs.push_back(std::move(d));
  const std::vector<Value> pv = where_params();
  const Params params(pv);
  size_t decided = 0, asked = 0;
  for (const char* clause : kClauses) {
    CAPTURE(clause);
    ParsedStatement st;
    REQUIRE(parse_statement(std::string("get t where ") + clause, &st).is_ok());
    Evaluator ev(params);
    EncodedWhere w;
    const bool compiled = w.compile(ev, *st.where, def);
    REQUIRE_MESSAGE(compiled, "every clause here is one the encoded form takes");
    for (size_t i = 0; i < docs.size(); i++) {
      CAPTURE(i);
      std::string body;
      encode_document(def, docs[i], body);
      const int64_t id = (int64_t)i + 1;
      Value doc;
      REQUIRE(decode_document(def, id, body, &doc, nullptr).is_ok());
      Value out;
      Status s = ev.eval(*st.where, doc, &out);
      const Truth want = !s.is_ok()        ? Truth::Ask
                         : out.is_null()   ? Truth::Null
                         : Evaluator::truthy(out) ? Truth::True
                                                  : Truth::False;
      const Truth got = w.test(id, body);
      if (got == Truth::Ask) {
        asked++;
        continue;
      }
      decided++;
      CHECK_MESSAGE(got == want, "encoded ", truth_name(got), ", evaluator ", truth_name(want));
    }
  }
  // Most answers come from the encoding (the evaluator's errors and the
  // lists, objects and vectors of `tags` and `j` are asked).
  CHECK(decided > 8 * asked);
  MESSAGE("decided ", decided, ", asked ", asked);
}

TEST_CASE("a where clause tested on the encoding asks for what it does not read") {
  const CollectionDef def = where_def();
  const std::vector<Value> pv = where_params();
  const Params params(pv);
  struct Case {
    const char* clause;
    Value doc;
    Truth want;
  };
  Value with_list = Value::object();
  with_list.append("tags", list_of({Value::text("a")}));
  with_list.append("n", Value::integer(3));
  Value number_j = Value::object();
  number_j.append("j", Value::integer(5));
  Value plain = Value::object();
  plain.append("n", Value::integer(3));
  const Case cases[] = {
      {"tags = [\"a\"]", with_list, Truth::Ask},  // a list
      {"n = 3 and tags is null", with_list, Truth::Ask},
      {"n = 4 and tags is null", with_list, Truth::Ask},  // the evaluator decodes the list first
      {"j ~ \"a\"", number_j, Truth::Ask},          // the evaluator's type error
      {"n in $1", plain, Truth::Ask},               // not a list: the evaluator's error
      {"n = 3", plain, Truth::True},
      {"j ~ \"a\"", plain, Truth::Null},
  };
  for (const Case& c : cases) {
    CAPTURE(c.clause);
    ParsedStatement st;
    REQUIRE(parse_statement(std::string("get t where ") + c.clause, &st).is_ok());
    Evaluator ev(params);
    EncodedWhere w;
    REQUIRE(w.compile(ev, *st.where, def));
    std::string body;
    encode_document(def, c.doc, body);
    CHECK(truth_name(w.test(1, body)) == std::string(truth_name(c.want)));
  }
  // A document cut short before the field, or whose field count runs past
  // its end: asked (the evaluator's "document cut short"); damage past the
  // field is not read, by either.
  ParsedStatement st;
  REQUIRE(parse_statement("get t where n = 3", &st).is_ok());
  Evaluator ev(params);
  EncodedWhere w;
  REQUIRE(w.compile(ev, *st.where, def));
  Value named = Value::object();
  named.append("name", Value::text("a name before n"));
  named.append("n", Value::integer(3));
  named.append("tags", list_of({Value::text("a")}));
  std::string body;
  encode_document(def, named, body);
  CHECK(w.test(1, body) == Truth::True);
  CHECK(w.test(1, std::string_view(body).substr(0, 5)) == Truth::Ask);
  CHECK(w.test(1, std::string_view(body).substr(0, body.size() - 1)) == Truth::True);
  std::string extra = body;
  extra[0] = 9;
  CHECK(w.test(1, extra) == Truth::True);  // n is found first
  ParsedStatement sx;
  REQUIRE(parse_statement("get t where x = 1", &sx).is_ok());
  EncodedWhere wx;
  REQUIRE(wx.compile(ev, *sx.where, def));
  CHECK(wx.test(1, body) == Truth::Null);  // no x
  CHECK(wx.test(1, extra) == Truth::Ask);  // no x, and fields promised past the end
  Value decoded;
  CHECK_FALSE(decode_field(extra, 3, &decoded, nullptr).is_ok());
  // Bodies no writer makes, built by hand: a field given twice is read at
  // its first (a null, a list), as decode_field reads; a field that would
  // not decode (a vector reference with no table to read it from) is the
  // evaluator's error even where the clause decides without it.
  auto body_of = [](std::initializer_list<std::pair<uint32_t, Value>> fields, int64_t ref_field = -1) {
    std::string b;
    put_varint(b, fields.size() + (ref_field >= 0));
    for (const auto& [fid, v] : fields) {
      put_varint(b, fid);
      encode_item(b, v, false);
    }
    if (ref_field >= 0) {
      put_varint(b, (uint64_t)ref_field);
      encode_vector_ref(b, 5);
    }
    return b;
  };
  struct Built {
    const char* clause;
    std::string body;
    Truth want;
  };
  const Built built[] = {
      {"n is not null and name is null", body_of({{2, Value()}, {2, Value::integer(3)}, {1, Value::text("x")}}), Truth::False},
      {"n is null", body_of({{2, Value()}, {2, Value::integer(3)}}), Truth::True},
      {"name is null or n = 1", body_of({{2, list_of({Value::integer(1)})}, {2, Value::integer(1)}, {1, Value::text("x")}}),
       Truth::Ask},
      {"n = 1 or j is null", body_of({{2, Value::integer(1)}}, 7), Truth::Ask},
      {"n = 1", body_of({{2, Value::integer(1)}}, 7), Truth::True},  // j is not read
      // A text given twice, compared where it lies: its first copy.
      {"name = \"x\"", body_of({{1, Value::text("x")}, {1, Value::text("y")}}), Truth::True},
      {"name = \"y\"", body_of({{1, Value::text("x")}, {1, Value::text("y")}}), Truth::False},
      {"name in [\"y\"]", body_of({{1, Value::text("x")}, {1, Value::text("y")}}), Truth::False},
      {"name is null", body_of({{1, Value()}, {1, Value::text("x")}}), Truth::True},
      {"name = \"x\"", body_of({{1, Value::integer(1)}, {1, Value::text("x")}}), Truth::False},
  };
  for (const Built& b : built) {
    CAPTURE(b.clause);
    ParsedStatement sb;
    REQUIRE(parse_statement(std::string("get t where ") + b.clause, &sb).is_ok());
    EncodedWhere wb;
    REQUIRE(wb.compile(ev, *sb.where, def));
    CHECK(truth_name(wb.test(1, b.body)) == std::string(truth_name(b.want)));
  }
  {  // ... and the evaluator, through a partial decode, answers so
    ParsedStatement sb;
    REQUIRE(parse_statement("get t where n is not null and name is null", &sb).is_ok());
    Value n;
    REQUIRE(decode_field(built[0].body, 2, &n, nullptr).is_ok());
    CHECK(n.is_null());
    Value j;
    CHECK_FALSE(decode_field(built[3].body, 7, &j, nullptr).is_ok());
  }

  // Clauses it does not take: a path into json, a function, a bare field,
  // has, a constant on the left of ~ or in.
  for (const char* clause : {"j.a = 1", "norm(j) > 1", "ok", "tags has \"a\"", "\"abc\" ~ name", "3 in tags", "true",
                             "x >= n", "n = $9", "n in $8"}) {
    CAPTURE(clause);
    ParsedStatement s2;
    REQUIRE(parse_statement(std::string("get t where ") + clause, &s2).is_ok());
    EncodedWhere w2;
    CHECK_FALSE(w2.compile(ev, *s2.where, def));
  }
}

TEST_CASE("queries filtered on the encoding give the evaluator's rows and errors") {
  auto fs = make_memory_file_system();
  auto opened = Database::open(*fs, "w.kfdb", {});
  REQUIRE(opened.is_ok());
  Database& db = *opened.value();
  REQUIRE(db.query("create collection t (name text, n int, x float, ok bool, at timestamp, tags [text], j json)").is_ok());
  // Three rounds of the documents: past the eighth a filter compiles its clause.
  for (int round = 0; round < 3; round++)
    for (const Value& d : where_docs()) {
      Value doc = d;
      if (const Value* name = d.get("name"); name && name->kind() == Kind::Bytes) doc.erase("name");  // (text only)
      if (const Value* j = d.get("j"); j && j->kind() == Kind::Vector) doc.set("j", list_of({Value::real(1.0)}));
      auto r = db.query("put t $1", {doc});
      REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
    }
  const std::vector<Value> pv = where_params();
  for (const char* clause : kClauses) {
    CAPTURE(clause);
    // `and true` takes the clause away from the encoded form: the evaluator's answer.
    std::string plain = ids(db.query(std::string("get t select id where ") + clause, pv));
    std::string evaluated = ids(db.query(std::string("get t select id where (") + clause + ") and true", pv));
    CHECK(plain == evaluated);
  }
}

TEST_CASE("decode_fields reads in one walk what decode_field reads field by field") {
  auto body_of = [](std::initializer_list<std::pair<uint32_t, Value>> fields, uint64_t count) {
    std::string b;
    put_varint(b, count);
    for (const auto& [fid, v] : fields) {
      put_varint(b, fid);
      encode_item(b, v, false);
    }
    return b;
  };
  const std::vector<std::pair<uint32_t, Value>> base = {
      {1, Value::text("a text of more than sixteen bytes")}, {2, Value::integer(-5)}, {3, Value::real(2.5)},
      {4, list_of({Value::integer(1), Value::text("x")})}, {2, Value::integer(99)},  // 2 again: its first is read
      {5, Value()}};
  std::vector<std::string> bodies;
  bodies.push_back(body_of({base[0], base[1], base[2], base[3], base[4], base[5]}, 6));
  bodies.push_back(body_of({base[0], base[1], base[2]}, 3));
  bodies.push_back(bodies[0].substr(0, bodies[0].size() - 3));  // cut short
  bodies.push_back(body_of({base[0], base[1]}, 5));              // fields promised past its end
  bodies.push_back(std::string());
  bodies.push_back(std::string("\x02\x02\x08\x64\x01\x03\x02", 7));  // 2: a list of 100 items, cut; 1: an int
  bodies.push_back(std::string("\x02\x02\x63\x01\x03\x02", 6));       // 2: an unknown tag; 1: an int
  std::vector<std::vector<uint32_t>> id_lists = {{3, 1}, {2}, {6}, {6, 1}, {5, 4, 3, 2, 1}, {4, 6}, {2, 3}};
  std::vector<uint32_t> many;
  for (uint32_t i = 80; i > 0; i--) many.push_back(i);  // past the 64 the one walk tracks
  id_lists.push_back(many);
  // No field asked: nothing read, whatever the body.
  CHECK(decode_fields("\xff", nullptr, 0, nullptr).is_ok());
  for (size_t b = 0; b < bodies.size(); b++) {
    for (const std::vector<uint32_t>& ids : id_lists) {
      CAPTURE(b);
      CAPTURE(ids.size());
      CAPTURE(ids[0]);
      std::vector<Value> one(ids.size()), walk(ids.size(), Value::text("left over from the last document"));
      Status want = Status::ok();
      for (size_t i = 0; i < ids.size() && want.is_ok(); i++) want = decode_field(bodies[b], ids[i], &one[i]);
      Status got = decode_fields(bodies[b], ids.data(), ids.size(), walk.data());
      CHECK(got.is_ok() == want.is_ok());
      CHECK(got.code() == want.code());  // (the message may name another damage first)
      if (!got.is_ok() || !want.is_ok()) continue;
      for (size_t i = 0; i < ids.size(); i++) CHECK(to_json(walk[i]) == to_json(one[i]));
    }
  }
}
