#include <doctest/doctest.h>

#include "codec.h"
#include "db.h"
#include "query/parser.h"

using namespace kitfox;

// A put's body of literals, decoded from the encoding the parser keeps it in.
static Value body_value(const ParsedStatement& st) {
  Value v;
  Reader r(st.body->encoded);
  REQUIRE(decode_value(r, &v).is_ok());
  CHECK(r.done());
  return v;
}

TEST_CASE("parses statements into their parts") {
  ParsedStatement st;
  REQUIRE(parse_statement("get articles select title, meta.lang where year >= 2024 and tags has \"db\" order year desc limit 10", &st).is_ok());
  CHECK(st.kind == StmtKind::Get);
  CHECK(st.collection == "articles");
  REQUIRE(st.select.size() == 2);
  CHECK(st.select[1].path == std::vector<std::string>{"meta", "lang"});
  REQUIRE(st.where);
  CHECK(st.where->kind == ExprKind::And);
  CHECK(st.where->kids[1]->kind == ExprKind::Has);
  REQUIRE(st.order.size() == 1);
  CHECK(st.order[0].desc);
  REQUIRE(st.limit);
  CHECK(st.limit->value.as_int() == 10);
}

TEST_CASE("operator precedence: not binds tighter than and, and than or") {
  ParsedStatement st;
  REQUIRE(parse_statement("get t where a = 1 or not b = 2 and c = 3", &st).is_ok());
  CHECK(st.where->kind == ExprKind::Or);
  CHECK(st.where->kids[1]->kind == ExprKind::And);
  CHECK(st.where->kids[1]->kids[0]->kind == ExprKind::Not);
}

TEST_CASE("and / or chains are one node each, however long: no recursion per term") {
  ParsedStatement st;
  REQUIRE(parse_statement("get t where a = 1 and (b = 2 and c = 3) and d = 4 or e = 5 or (f = 6 or g = 7)", &st).is_ok());
  REQUIRE(st.where->kind == ExprKind::Or);
  REQUIRE(st.where->kids.size() == 4);  // (a and b and c and d), e, f, g
  CHECK(st.where->kids[0]->kind == ExprKind::And);
  CHECK(st.where->kids[0]->kids.size() == 4);
  CHECK(st.where->kids[3]->kind == ExprKind::Compare);
  // 30,000 terms: parsed (and later freed) without deep recursion.
  for (const char* op : {" and ", " or "}) {
    std::string q = "get t where n > 0";
    for (int i = 1; i < 30000; i++) q += std::string(op) + "n > " + std::to_string(i);
    ParsedStatement big;
    REQUIRE(parse_statement(q, &big).is_ok());
    CHECK(big.where->kids.size() == 30000);
  }
}

TEST_CASE("keywords are case-insensitive; names are not") {
  ParsedStatement st;
  REQUIRE(parse_statement("GET Things WHERE Year = 1 COUNT", &st).is_ok());
  CHECK(st.collection == "Things");
  CHECK(st.count);
  CHECK(st.where->kids[0]->path[0] == "Year");
}

TEST_CASE("create collection with every type") {
  ParsedStatement st;
  REQUIRE(parse_statement("create collection if not exists c (a bool, b int required, c float, d text, e bytes, f timestamp, g json, h [text], i vector<128>, j vector<8, f16>)", &st).is_ok());
  CHECK(st.if_not_exists);
  REQUIRE(st.fields.size() == 10);
  CHECK(st.fields[1].required);
  CHECK(type_name(st.fields[7].type) == "[text]");
  CHECK(st.fields[8].type.dim == 128);
  CHECK(st.fields[9].type.f16);
}

TEST_CASE("errors name the position and what was expected") {
  ParsedStatement st;
  Status s = parse_statement("get t where year >", &st);
  CHECK(s.code() == Code::Syntax);
  CHECK(s.position() == 18);
  CHECK(s.message() == "expected a value, got end of statement");
  s = parse_statement("put t {a: 1,, }", &st);
  CHECK(s.position() == 12);
  s = parse_statement("get t limit 5 limit 6", &st);
  CHECK(s.message() == "'limit' given twice");
}

TEST_CASE("string escapes and unicode") {
  ParsedStatement st;
  REQUIRE(parse_statement(R"(put t {s: "a\"b\\c\n\u00e9\ud83e\udd8a"})", &st).is_ok());
  CHECK(body_value(st).get("s")->as_string() == "a\"b\\c\n\xc3\xa9\xf0\x9f\xa6\x8a");
  CHECK(parse_statement("put t {s: \"\xff\"}", &st).message() == "statement text is not valid UTF-8");
  // Its position is the first byte that starts no whole sequence.
  CHECK(parse_statement("put t {s: \"\xff\"}", &st).position() == 11);
  CHECK(parse_statement("put t {s: \"\xc3\xa9\xe2\x82\"}", &st).position() == 13);  // é, then a cut-short €
  CHECK(parse_statement("\x80get t", &st).position() == 0);
}

TEST_CASE("integer edge cases") {
  ParsedStatement st;
  REQUIRE(parse_statement("put t {a: -9223372036854775808, b: 9223372036854775807}", &st).is_ok());
  CHECK(body_value(st).get("a")->as_int() == INT64_MIN);
  CHECK(body_value(st).get("b")->as_int() == INT64_MAX);
  CHECK(parse_statement("put t {a: 9223372036854775808}", &st).code() == Code::Limit);
}

TEST_CASE("a put's list or object of literals is parsed straight into its encoding, with its parts' positions") {
  ParsedStatement st;
  const char* text = "put t [{a: 1, b: [2.5, -3]}, {c: \"x\", d: null}, 7]";
  REQUIRE(parse_statement(text, &st).is_ok());
  REQUIRE(st.body->kind == ExprKind::Literal);
  CHECK(to_json(body_value(st)) == "[{\"a\":1,\"b\":[2.5,-3]},{\"c\":\"x\",\"d\":null},7]");
  const LiteralPositions& p = *st.body->parts;
  REQUIRE(p.item.size() == 3);
  CHECK(p.item[0] == 7);   // {a: ...
  CHECK(p.item[2] == 48);  // 7
  REQUIRE(p.key_start.size() == 4);
  CHECK(p.key.size() == 4);  // a, b, c, d
  CHECK(p.key[p.key_start[1]] == 30);  // c
  CHECK(p.key_start[3] - p.key_start[2] == 0);  // 7 has no keys
  // A parameter among them: expression nodes, as before.
  REQUIRE(parse_statement("put t [{a: $1}, {a: 2}]", &st).is_ok());
  CHECK(st.body->kind == ExprKind::ListLit);
  CHECK(st.body->kids[0]->kind == ExprKind::ObjectLit);
  CHECK(st.body->kids[1]->kind == ExprKind::Literal);  // {a: 2} alone is literals
  CHECK(st.body->kids[1]->parts->key == std::vector<int64_t>{17});
  // set keeps its object's nodes (its keys are paths).
  REQUIRE(parse_statement("set t {a.b: 1} where id = 1", &st).is_ok());
  CHECK(st.assignments.size() == 1);
  // Errors as before: a duplicate key, a non-value, depth.
  CHECK(parse_statement("put t [{a: 1, a: 2}]", &st).message() == "key 'a' appears twice");
  CHECK(parse_statement("put t [{a: 1}, {b: x}]", &st).code() == Code::Syntax);
  std::string deep = "put t {a: " + std::string(70, '[') + std::string(70, ']') + "}";
  CHECK(parse_statement(deep, &st).code() == Code::Limit);
}

TEST_CASE("a literal list whose first document is far larger than the rest reserves only what its text holds") {
  // The key positions are reserved from the first document's count times
  // the number of documents, bounded by the tokens: 10,000 keys and 400,000
  // documents would otherwise ask for 32 GB.
  std::string text = "put t [{";
  for (int i = 0; i < 10000; i++) text += (i ? ", k" : "k") + std::to_string(i) + ": 0";
  text += "}";
  for (int i = 0; i < 400000; i++) text += ", {}";
  text += "]";
  ParsedStatement st;
  REQUIRE(parse_statement(text, &st).is_ok());
  CHECK(body_value(st).items().size() == 400001);
  CHECK(st.body->parts->key.size() == 10000);
  CHECK(st.body->parts->key.capacity() <= text.size());
}

TEST_CASE("an object of many keys is checked for a repeated key in linear time, and names the repeat" * doctest::test_suite("heavy")) {
  // 200,000 keys: checked key by key against the others, hours; here, no time.
  for (const char* shape : {"put t {", "put t {x: $1, "}) {
    std::string text = shape;
    for (int i = 0; i < 200000; i++) text += "k" + std::to_string(i) + ": 0, ";
    ParsedStatement ok_st;
    REQUIRE(parse_statement(text + "last: 1}", &ok_st).is_ok());
    const std::string repeat = text + "k5: 1}";
    ParsedStatement st;
    Status s = parse_statement(repeat, &st);
    CHECK(s.message() == "key 'k5' appears twice");
    CHECK(s.position() == (int64_t)repeat.size() - 6);
  }
  ParsedStatement st;
  CHECK(parse_statement("put t {a: 1, b: 2, a: 3}", &st).message() == "key 'a' appears twice");
}

TEST_CASE("escaped strings: their decoded forms, in keys and values, over many statements") {
  ParsedStatement st;
  REQUIRE(parse_statement(R"(put t [{"k\"1": "v\n1", plain: "no escapes"}, {"k\"1": "\u00e9"}])", &st).is_ok());
  CHECK(to_json(body_value(st)) == R"([{"k\"1":"v\n1","plain":"no escapes"},{"k\"1":"é"}])");
  REQUIRE(parse_statement(R"(get t select meta."a\tb" where x = "\\")", &st).is_ok());
  CHECK(st.select[0].path == std::vector<std::string>{"meta", "a\tb"});
  CHECK(st.where->kids[1]->value.as_string() == "\\");
  ParsedStatement st2;
  REQUIRE(parse_statement(R"(get t where x = "plain")", &st2).is_ok());
  CHECK(st2.where->kids[1]->value.as_string() == "plain");
}
