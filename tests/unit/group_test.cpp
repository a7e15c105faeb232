// Groups past the first table and chunk of the aggregate's group store:
// thousands of keys, keys that compare equal written as ints and as floats,
// two keys a group, and pages of groups ordered by an aggregate, each
// checked against the sums the test computes itself.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "db.h"

using namespace kitfox;

namespace {

std::unique_ptr<Database> open_groups(FileSystem& fs, const char* name = "g.kfdb") {
  auto db = Database::open(fs, name, {});
  REQUIRE(db.is_ok());
  return std::move(db.value());
}

QueryResult must(Database& db, const std::string& text) {
  auto r = db.query(text);
  REQUIRE_MESSAGE(r.is_ok(), text, ": ", r.status().to_string());
  return std::move(r.value());
}

}  // namespace

TEST_CASE("thousands of groups: every key once, ints and floats that compare equal as one") {
  auto fs = make_memory_file_system();
  auto db = open_groups(*fs);
  must(*db, "create collection t (k json, c text, v int)");
  // k = i % 3000: an int for the first two rounds, the same number as a
  // float (i.5 for odd keys, so those are a group of their own) in the third.
  std::map<double, std::pair<int64_t, int64_t>> want;  // key -> count, sum of v
  std::map<std::pair<std::string, double>, int64_t> want2;  // (c, key) -> count
  std::vector<Value> docs;
  for (int64_t i = 0; i < 9000; i++) {
    const int64_t k = i % 3000;
    Value d = Value::object();
    double key = (double)k;
    if (i < 6000) d.append("k", Value::integer(k));
    else if (k % 2 == 0) d.append("k", Value::real((double)k));
    else d.append("k", Value::real(key = (double)k + 0.5));
    const std::string c = std::string(1, (char)('a' + i % 5)) + std::string((size_t)(i % 3) * 10, 'x');
    d.append("c", Value::text(c));
    d.append("v", Value::integer(i));
    want[key].first++;
    want[key].second += i;
    want2[{c, key}]++;
    docs.push_back(std::move(d));
  }
  auto put = db->query("put t $1", {Value::list(std::move(docs))});
  REQUIRE(put.is_ok());

  QueryResult r = must(*db, "get t select k, count(*), sum(v) group k");
  REQUIRE(r.rows.size() == want.size());  // 3,000 + 1,500
  size_t i = 0;
  for (const auto& [key, cs] : want) {  // by key, as the map orders them
    const Value& row = r.rows[i++];
    const double at_key = key;  // (a structured binding cannot be captured: clang 14)
    CAPTURE(at_key);
    CHECK(row.get("k")->as_number() == key);
    CHECK(row.get("count(*)")->as_int() == cs.first);
    CHECK(row.get("sum(v)")->as_int() == cs.second);
  }
  // A group's key shows as it was first met: the int.
  CHECK(r.rows[3].get("k")->kind() == Kind::Int);    // 2, met as an int before 2.0
  CHECK(r.rows[2].get("k")->kind() == Kind::Float);  // 1.5

  // Mins and maxes, kept beside the counts, in every chunk.
  r = must(*db, "get t select k, min(v), max(v), avg(v) group k");
  REQUIRE(r.rows.size() == want.size());
  i = 0;
  for (const auto& [key, cs] : want) {
    const Value& row = r.rows[i++];
    const double at_key = key;
    CAPTURE(at_key);
    const int64_t lo = (int64_t)key >= 0 && key == std::floor(key) ? (int64_t)key : (int64_t)key + 6000;
    CHECK(row.get("min(v)")->as_int() == lo);
    CHECK(row.get("max(v)")->as_int() == lo + 3000 * (cs.first - 1));
    CHECK(row.get("avg(v)")->as_number() == (double)cs.second / (double)cs.first);
  }
  // Mins and maxes replaced after their first value, of a json key holding
  // ints and floats, per group of a text key; an argument inside a json
  // field (looked up by path, not placed).
  {
    auto db2 = open_groups(*fs, "u.kfdb");
    must(*db2, "create collection u (c text, m json, w int)");
    std::map<std::string, std::pair<double, double>> mm;  // c -> min, max of m.x
    std::map<std::string, std::pair<int64_t, int64_t>> ww;  // c -> min, max of w
    std::vector<Value> more;
    for (int64_t i = 0; i < 4000; i++) {
      const std::string c = "group " + std::to_string(i % 700);
      const int64_t w = (i * 7919) % 4001 - 2000;  // up and down
      Value m = Value::object();
      const double x = i % 3 ? (double)w : (double)w + 0.25;
      m.append("x", i % 3 ? Value::integer(w) : Value::real(x));
      Value d = Value::object();
      d.append("c", Value::text(c));
      d.append("m", std::move(m));
      d.append("w", Value::integer(w));
      auto [it, fresh] = mm.try_emplace(c, x, x);
      if (!fresh) it->second = {std::min(it->second.first, x), std::max(it->second.second, x)};
      auto [jt, fresh2] = ww.try_emplace(c, w, w);
      if (!fresh2) jt->second = {std::min(jt->second.first, w), std::max(jt->second.second, w)};
      more.push_back(std::move(d));
    }
    REQUIRE(db2->query("put u $1", {Value::list(std::move(more))}).is_ok());
    QueryResult u = must(*db2, "get u select c, min(m.x), max(m.x), min(w), max(w) group c");
    REQUIRE(u.rows.size() == mm.size());
    size_t k = 0;
    for (const auto& [c, x] : mm) {
      const Value& row = u.rows[k++];
      const std::string group = c;
      CAPTURE(group);
      CHECK(row.get("c")->as_string() == c);
      CHECK(row.get("min(m.x)")->as_number() == x.first);
      CHECK(row.get("max(m.x)")->as_number() == x.second);
      CHECK(row.get("min(w)")->as_int() == ww[c].first);
      CHECK(row.get("max(w)")->as_int() == ww[c].second);
    }
    REQUIRE(db2->close().is_ok());
  }

  r = must(*db, "get t select min(c), max(k), count(*)");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].get("min(c)")->as_string() == "a");
  CHECK(r.rows[0].get("max(k)")->as_number() == 2999.5);

  // The largest groups first (ties by key), a page of them.
  r = must(*db, "get t select k, count(*) group k order count(*) desc, k desc limit 3 offset 2");
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0].get("k")->as_number() == 2994);
  CHECK(r.rows[0].get("count(*)")->as_int() == 3);
  CHECK(r.rows[2].get("k")->as_number() == 2990);

  // Two keys a group, one of them text of three lengths (past 16 bytes too).
  r = must(*db, "get t select c, count(*) group c, v");
  CHECK(r.rows.size() == 9000);
  r = must(*db, "get t select count(*) where v < 0 group c");
  CHECK(r.rows.empty());
  r = must(*db, "get t select c, k, count(*) group c, k");
  std::map<std::pair<std::string, double>, int64_t> got;
  for (const Value& row : r.rows) got[{row.get("c")->as_string(), row.get("k")->as_number()}] = row.get("count(*)")->as_int();
  CHECK(got.size() == r.rows.size());  // no pair twice
  CHECK(got == want2);
  r = must(*db, "get t select c, count(*) where v >= 0 group c");
  CHECK(r.rows.size() == 15);
}

TEST_CASE("a group from an index of thousands of keys answers as the scan's groups; pages past the end") {
  auto fs = make_memory_file_system();
  auto db = open_groups(*fs);
  must(*db, "create collection t (k int @hash, s text @sorted, v int)");
  std::vector<Value> docs;
  for (int64_t i = 0; i < 5000; i++) {
    Value d = Value::object();
    if (i % 11) d.append("k", Value::integer(i % 1700));  // every 11th without a key: the null group
    d.append("s", Value::text("s" + std::to_string(i % 900)));
    d.append("v", Value::integer(i));
    docs.push_back(std::move(d));
  }
  REQUIRE(db->query("put t $1", {Value::list(std::move(docs))}).is_ok());
  for (const char* field : {"k", "s"}) {
    CAPTURE(field);
    const std::string f = field;
    QueryResult plan = must(*db, "explain get t select " + f + ", count(*) group " + f);
    CHECK(plan.rows[0].get("op")->as_string() == "group from index");
    QueryResult by_index = must(*db, "get t select " + f + ", count(*), count(" + f + ") group " + f);
    // A where clause takes the index's answer away: the scan's groups.
    QueryResult by_scan = must(*db, "get t select " + f + ", count(*), count(" + f + ") where v >= 0 group " + f);
    REQUIRE(by_index.rows.size() == by_scan.rows.size());
    CHECK(by_index.rows.size() > 256);
    for (size_t i = 0; i < by_index.rows.size(); i++) CHECK(to_json(by_index.rows[i]) == to_json(by_scan.rows[i]));
    CHECK(must(*db, "get t select " + f + ", count(*) group " + f + " limit 0").rows.empty());
    CHECK(must(*db, "get t select " + f + ", count(*) group " + f + " offset 100000").rows.empty());
    QueryResult last = must(*db, "get t select " + f + ", count(*) group " + f + " order count(*) desc, " + f + " offset " +
                                     std::to_string(by_scan.rows.size() - 1));
    CHECK(last.rows.size() == 1);
  }
}

TEST_CASE("sort_prefix orders as compare does where prefixes differ") {
  std::vector<Value> vals = {Value(), Value::boolean(false), Value::boolean(true), Value::integer(INT64_MIN),
                             Value::integer(-3), Value::integer(0), Value::real(-0.0), Value::real(0.0),
                             Value::integer(3), Value::real(3.0), Value::real(3.5), Value::integer(9007199254740993),
                             Value::real(9007199254740992.0), Value::integer(INT64_MAX), Value::real(1e300),
                             Value::real(INFINITY), Value::real(-INFINITY), Value::real(std::nan("")),
                             Value::timestamp(-1), Value::timestamp(0), Value::timestamp(1700000000000),
                             Value::text(""), Value::text(std::string("a\0", 2)), Value::text("a"),
                             Value::text("abcdefg"), Value::text("abcdefgh"), Value::text("abcdefg\xff"),
                             Value::text("\xc3\xa9t\xc3\xa9"), Value::bytes(""), Value::bytes("a"),
                             Value::bytes(std::string("\x80\0", 2)), Value::bytes("\xff"), Value::real(-0x1p63),
                             Value::integer(INT64_MIN + 1), Value::timestamp(INT64_MIN), Value::real(-std::nan("")),
                             Value::list({Value::integer(1)}), Value::list(), Value::object(),
                             Value::vector({1.0f}), Value::vector({})};
  for (const Value& a : vals)
    for (const Value& b : vals) {
      CAPTURE(to_json(a));
      CAPTURE(to_json(b));
      const uint64_t pa = sort_prefix(a), pb = sort_prefix(b);
      if (pa < pb) CHECK(compare(a, b) < 0);
      if (compare(a, b) == 0) CHECK(pa == pb);
    }
}

TEST_CASE("a sort of every row orders as a top-k of them all: mixed kinds, shared prefixes, ties by arrival") {
  auto fs = make_memory_file_system();
  auto db = open_groups(*fs);
  must(*db, "create collection t (j json, s text, n int)");
  std::vector<Value> docs;
  const char* texts[] = {"abcdefg", "abcdefgh", "abcdefga", "abc", "", "abcdefg", "zz", "Abc", "abcdefgh"};
  for (int64_t i = 0; i < 3000; i++) {
    Value d = Value::object();
    switch (i % 7) {
      case 0: d.append("j", Value::integer(i % 13 - 6)); break;
      case 1: d.append("j", Value::real((double)(i % 13) / 2 - 3)); break;
      case 2: d.append("j", Value::text(texts[i % 9])); break;
      case 3: d.append("j", Value::boolean(i % 2)); break;
      case 4: d.append("j", Value::list({Value::integer(i % 3)})); break;
      case 5: break;  // no j: null
      case 6: d.append("j", Value::integer(9007199254740992 + i % 3)); break;
    }
    d.append("s", Value::text(std::string(texts[i % 9]) + (i % 2 ? "" : "\x7f")));
    d.append("n", Value::integer(i % 5));
    docs.push_back(std::move(d));
  }
  REQUIRE(db->query("put t $1", {Value::list(std::move(docs))}).is_ok());
  for (const char* order : {"j", "j desc", "s", "s desc", "n, s desc", "s, j", "j desc, n", "n desc, j"}) {
    CAPTURE(order);
    const std::string q = std::string("get t select j, s order ") + order;
    QueryResult all = must(*db, q);
    QueryResult top = must(*db, q + " limit 100000");
    REQUIRE(all.rows.size() == 3000);
    REQUIRE(top.rows.size() == 3000);
    for (size_t i = 0; i < all.rows.size(); i++) CHECK(to_json(all.rows[i]) == to_json(top.rows[i]));
    QueryResult plan = must(*db, "explain " + q);
    CHECK(to_json(plan.rows[1]).find("\"sort\"") != std::string::npos);
  }
}
