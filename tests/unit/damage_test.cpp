// The corruption sweep: a reference database (an image with documents, an id
// index, a vector table and graph, then a tail of writes) damaged in every
// part of every record (each byte of the frame, the body's first, middle and
// last bytes, the checksum), cut at every record and inside each, and with
// bytes appended. Each damaged copy must be refused with an offset (and left
// as it was), or open with a report, or answer exactly as before; with
// recover it must open, and answer as before unless its report says what it
// kept. Never a silent difference.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "db.h"
#include "storage/format.h"
#include "storage/record.h"
#include "test_files.h"

using namespace kitfox;
using kitfox::testing::read_file;
using kitfox::testing::write_file;

namespace {

constexpr int kDim = 8;

Value vec(int seed) {
  std::vector<float> v(kDim);
  for (int i = 0; i < kDim; i++) v[i] = (float)((seed * 7 + i * 3) % 11) - 5.0f + 0.25f * (float)i;
  return Value::vector(std::move(v));
}

OpenOptions options(bool recover = false) {
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.check_in_background = false;
  o.recover = recover;
  return o;
}

// The five writes of the tail, in order.
const char* kTail[] = {
    "put t {id: 100, n: 100, name: \"tail\", body: \"a fox in the tail\", e: $1}",
    "set t {meta.x: 7, n: 77} where id = 3",
    "del t where id = 5",
    "insert t [{id: 101, n: 101, e: $1}, {id: 102, n: 102, body: \"fox fox\"}]",
    "put t {id: 103, n: 103, name: \"last\", e: $1}",
};

// What a copy answers: every query's JSON, or "error: ..." for a failed one.
struct Answers {
  std::vector<std::string> rows;
  std::vector<Status> errors;
};

Answers answers(Database& db) {
  Answers a;
  const std::vector<std::pair<const char*, std::vector<Value>>> qs = {
      {"get t select id, n, name, body, meta order id", {}},
      {"get t count", {}},
      {"get t where n > 10 count", {}},
      {"get t select id near e $1 exact limit 7", {vec(3)}},
      {"get t select id match body \"fox\" limit 5", {}},
  };
  for (auto& [q, p] : qs) {
    auto r = db.query(q, p);
    if (r.is_ok()) {
      std::string s;
      for (auto& row : r->rows) s += to_json(row) + "\n";
      a.rows.push_back(s);
      a.errors.push_back(Status::ok());
    } else {
      a.rows.push_back("");
      a.errors.push_back(r.status());
    }
  }
  return a;
}

}  // namespace

TEST_CASE("every part of every record damaged: refused with an offset, reported, or answered as before" * doctest::test_suite("heavy")) {
  auto fs = make_memory_file_system();
  std::vector<std::string> prefix;  // the file after the image and k tail writes
  std::vector<Answers> want;        // and what it answers
  {
    auto db = Database::open(*fs, "r.kfdb", options());
    REQUIRE(db.is_ok());
    REQUIRE((*db)->query("create collection t (n int @sorted, name text, body text @text, meta json, "
                         "e vector<8> @hnsw(l2, m=4, ef_construction=20))")
                .is_ok());
    Value list = Value::list();
    for (int i = 1; i <= 60; i++) {
      Value d = Value::object();
      d.append("n", Value::integer(i));
      d.append("name", Value::text("doc " + std::to_string(i)));
      if (i % 4 == 0) d.append("body", Value::text("the quick brown fox " + std::to_string(i)));
      if (i % 3 == 0) d.append("meta", Value::object());
      d.append("e", vec(i));
      list.push(std::move(d));
    }
    REQUIRE((*db)->query("insert t $1", {list}).is_ok());
    REQUIRE((*db)->checkpoint().is_ok());
    prefix.push_back(read_file(*fs, "r.kfdb"));
    want.push_back(answers(**db));
    for (int k = 0; k < 5; k++) {
      REQUIRE((*db)->query(kTail[k], {vec(100 + k)}).is_ok());
      prefix.push_back(read_file(*fs, "r.kfdb"));
      want.push_back(answers(**db));
    }
    // Closing would checkpoint: the file is the prefix after five writes.
  }
  const std::string good = prefix.back();
  for (const Answers& a : want)
    for (const Status& s : a.errors) REQUIRE(s.is_ok());

  std::vector<RecordView> recs = testing::records(good);
  REQUIRE(recs.size() > 10);
  REQUIRE(recs.back().end == good.size());

  struct Copy {
    std::string what;
    std::string bytes;
    uint64_t at;  // the first byte that differs from the reference (or its length, cut there)
  };
  std::vector<Copy> copies;
  for (size_t i = 0; i < recs.size(); i++) {
    const RecordView& r = recs[i];
    const std::string name = "record " + std::to_string(i) + " (kind " + std::to_string(r.kind) + ") at " +
                             std::to_string(r.offset);
    uint64_t len = r.end - r.offset;
    std::vector<uint64_t> at = {0, 1, 2, 3, 4, 5, len / 2, len - 5, len - 4, len - 3, len - 2, len - 1};
    if (r.kind == format::kExtent)
      for (uint64_t k = 1; k < 8; k++) at.push_back(len * k / 8);  // blocks across the extent
    for (uint64_t a : at) {
      if (a >= len) continue;
      for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::string b = good;
        b[r.offset + a] ^= (char)x;
        copies.push_back({name + ", byte +" + std::to_string(a) + " ^ " + std::to_string(x), b, r.offset + a});
      }
    }
    copies.push_back({name + ", cut after its first byte", good.substr(0, r.offset + 1), r.offset + 1});
    copies.push_back({name + ", cut in half", good.substr(0, r.offset + len / 2), r.offset + len / 2});
  }
  copies.push_back({"garbage appended", good + "not a record at all, some garbage", good.size()});
  copies.push_back({"the last record appended again", good + good.substr(recs.back().offset), good.size()});
  copies.push_back({"zeros appended", good + std::string(100, '\0'), good.size()});
  // The tail writes whole before a byte: what a torn tail keeps.
  auto whole_before = [&](uint64_t at) {
    size_t k = 0;
    for (const RecordView& r : recs)
      if (r.kind == format::kWrite && r.end <= at) k++;
    return k;
  };

  int refused = 0, reported = 0, same = 0;
  for (const Copy& c : copies) {
    CAPTURE(c.what);
    write_file(*fs, "r.kfdb", c.bytes);
    (void)fs->remove("r.kfdb.damaged");
    {
      auto db = Database::open(*fs, "r.kfdb", options());
      if (!db.is_ok()) {
        refused++;
        CHECK(db.status().code() == Code::Corrupt);
        CHECK(db.status().message().find("offset") != std::string::npos);
        CHECK(read_file(*fs, "r.kfdb") == c.bytes);
      } else {
        const OpenReport& rep = (*db)->open_report();
        Answers got = answers(**db);
        // A torn tail is cut off at the damage, and only a file that ends
        // there can have one (cut short, or bytes appended): never with a
        // whole write after it. What the file held before it is answered.
        // Otherwise every answer is the reference, or an error naming the
        // damage (a vector block read lazily).
        bool ends_there = c.bytes.size() < good.size() || c.at >= recs.back().offset;
        if (rep.torn_bytes) CHECK(ends_there);
        const Answers& ref = rep.torn_bytes ? want[whole_before(c.at)] : want[5];
        if (rep.torn_bytes || !rep.warnings.empty()) reported++;
        else same++;
        for (size_t q = 0; q < ref.rows.size(); q++) {
          CAPTURE(q);
          if (got.errors[q].is_ok()) {
            CHECK(got.rows[q] == ref.rows[q]);
          } else {
            CHECK(got.errors[q].code() == Code::Corrupt);
            CHECK(got.errors[q].message().find("offset") != std::string::npos);
          }
        }
        (*db)->close();
      }
    }
    // Recover always opens; without a report it answers as before.
    write_file(*fs, "r.kfdb", c.bytes);
    auto db = Database::open(*fs, "r.kfdb", options(true));
    INFO(db.status().to_string());
    REQUIRE(db.is_ok());
    const OpenReport& rep = (*db)->open_report();
    Answers got = answers(**db);
    // What recover dropped its report says (a damaged catalog takes the
    // collections with it: then the queries find none).
    if (rep.warnings.empty())
      for (const Status& s : got.errors) CHECK(s.is_ok());
    if (!rep.torn_bytes && rep.warnings.empty()) CHECK(got.rows == want[5].rows);
    if (rep.torn_bytes && rep.warnings.empty()) CHECK(got.rows == want[whole_before(c.at)].rows);
    (*db)->close();
    auto again = Database::open(*fs, "r.kfdb", options());  // what recover left is whole
    REQUIRE(again.is_ok());
    CHECK((*again)->open_report().warnings.empty());
  }
  MESSAGE(copies.size() << " damaged copies: " << refused << " refused, " << reported << " opened with a report, "
                        << same << " answered as before");
}
