// Vector search through the engine: recall, exact ground truth, filtered
// search that a post-filter would get wrong, reopen without a rebuild.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "clustered.h"
#include "db.h"
#include "storage/format.h"
#include "storage/record.h"

using namespace kitfox;

namespace {

constexpr uint32_t kDim = 32;

Value vec_value(const float* p) { return Value::vector(std::vector<float>(p, p + kDim)); }

std::unique_ptr<Database> open_db(FileSystem& fs, bool auto_cp = true) {
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.auto_checkpoint = auto_cp;
  auto r = Database::open(fs, "v.kfdb", o);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r.value());
}

// 4000 documents in 40 clusters; `cat` is the cluster, so a filter on it
// correlates with the vectors.
void load(Database& db, const bench::Clustered& gen) {
  REQUIRE(db.query("create collection docs (cat int, e vector<32> @hnsw(cosine, m=12, ef_construction=100))").is_ok());
  std::vector<uint32_t> cl;
  auto pts = gen.points(4000, 1, &cl);
  for (size_t b = 0; b < 4000; b += 500) {
    Value list = Value::list();
    for (size_t i = b; i < b + 500; i++) {
      Value d = Value::object();
      d.append("cat", Value::integer(cl[i]));
      d.append("e", vec_value(&pts[i * kDim]));
      list.push(std::move(d));
    }
    REQUIRE(db.query("put docs $1", {list}).is_ok());
  }
}

std::vector<int64_t> ids(const QueryResult& r) {
  std::vector<int64_t> v;
  for (auto& row : r.rows) v.push_back(row.get("id")->as_int());
  return v;
}

// Brute force in double precision over the documents themselves.
std::vector<int64_t> reference(Database& db, const float* q, size_t k, int64_t cat = -1) {
  auto all = db.query("get docs");
  REQUIRE(all.is_ok());
  std::vector<std::pair<double, int64_t>> d;
  double qn = 0;
  for (uint32_t i = 0; i < kDim; i++) qn += (double)q[i] * q[i];
  for (auto& row : all->rows) {
    if (cat >= 0 && row.get("cat")->as_int() != cat) continue;
    const auto& v = row.get("e")->vec();
    double dot = 0, vn = 0;
    for (uint32_t i = 0; i < kDim; i++) dot += (double)q[i] * v[i], vn += (double)v[i] * v[i];
    d.push_back({1 - dot / std::sqrt(qn * vn), row.get("id")->as_int()});
  }
  std::sort(d.begin(), d.end());
  std::vector<int64_t> out;
  for (size_t i = 0; i < k && i < d.size(); i++) out.push_back(d[i].second);
  return out;
}

}  // namespace

TEST_CASE("near: recall@10 at the default ef on held-out queries, and exact equals brute force") {
  auto fs = make_memory_file_system();
  auto db = open_db(*fs);
  bench::Clustered gen(kDim, 40);
  load(*db, gen);
  auto qs = gen.points(100, 12345);
  size_t hit = 0, exact_same = 0;
  for (size_t i = 0; i < 100; i++) {
    auto ref = reference(*db, &qs[i * kDim], 10);
    auto ann = db->query("get docs select id near e $1 limit 10", {vec_value(&qs[i * kDim])});
    auto ex = db->query("get docs select id near e $1 exact limit 10", {vec_value(&qs[i * kDim])});
    REQUIRE(ann.is_ok());
    REQUIRE(ex.is_ok());
    std::set<int64_t> truth(ref.begin(), ref.end());
    for (int64_t id : ids(*ann)) hit += truth.count(id);
    // float vs double distances may swap exact ties at the boundary only
    auto e = ids(*ex);
    size_t common = 0;
    for (int64_t id : e) common += truth.count(id);
    exact_same += common >= 9;
    CHECK(common >= 9);
  }
  double recall = hit / 1000.0;
  MESSAGE("recall@10 at ef=100: " << recall);
  CHECK(recall >= 0.95);
  CHECK(exact_same == 100);
}

TEST_CASE("near with a filter that excludes the query's neighbourhood still returns k matching rows") {
  auto fs = make_memory_file_system();
  auto db = open_db(*fs);
  bench::Clustered gen(kDim, 40);
  load(*db, gen);
  // Query at cluster 0's centre, filter to cluster 7: a post-filter of the
  // top candidates would find nothing.
  const float* centre = &gen.centres[0];
  for (const char* form : {"get docs select id, cat where cat = $2 near e $1 limit 10",
                           "get docs select id, cat where cat != $2 and cat < 20 near e $1 limit 10"}) {
    auto r = db->query(form, {vec_value(centre), Value::integer(7)});
    REQUIRE(r.is_ok());
    CHECK(r->rows.size() == 10);
    bool eq = std::string(form).find("cat = $2") != std::string::npos;
    for (auto& row : r->rows) {
      int64_t cat = row.get("cat")->as_int();
      if (eq) CHECK(cat == 7);
      else CHECK((cat != 7 && cat < 20));
    }
    if (eq) {
      auto ref = reference(*db, centre, 10, 7);
      CHECK(ids(*r) == ref);
    }
  }
  // A filter nothing matches gives nothing, not an error.
  auto none = db->query("get docs where cat = 999 near e $1 limit 10", {vec_value(centre)});
  REQUIRE(none.is_ok());
  CHECK(none->rows.empty());
}

TEST_CASE("reopen uses the persisted graph: no rebuild, same answers, also with writes in the tail") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 40);
  auto qs = gen.points(20, 777);
  std::vector<std::string> before;
  {
    auto db = open_db(*fs);
    load(*db, gen);
    REQUIRE(db->checkpoint().is_ok());
    // Writes after the checkpoint stay in the tail.
    auto more = gen.points(50, 2);
    for (int i = 0; i < 50; i++)
      REQUIRE(db->query("put docs {cat: 99, e: $1}", {vec_value(&more[i * kDim])}).is_ok());
    REQUIRE(db->query("del docs where id < 30").is_ok());
    for (size_t i = 0; i < 20; i++) {
      auto r = db->query("get docs select id near e $1 limit 10", {vec_value(&qs[i * kDim])});
      REQUIRE(r.is_ok());
      before.push_back(to_json(Value::list(r->rows)));
    }
    Stats s = db->stats();
    CHECK(s.tail_records == 51);
  }
  // The close above checkpointed (the tail was a quarter of the image):
  // reopen twice, once from the image alone and once with a tail.
  for (int round = 0; round < 2; round++) {
    auto db = open_db(*fs, false);
    CHECK_FALSE(db->open_report().index_rebuilt);
    if (round == 0) {
      // Each vector is stored once (in the table; documents refer to it):
      // the file is the raw vectors and the level-0 links plus a little.
      Stats st = db->stats();
      double raw = 4050.0 * kDim * 4, links = 4050.0 * (2 * 12 + 1) * 4;
      MESSAGE("file " << st.file_bytes << " bytes, raw vectors + links " << raw + links);
      CHECK(st.file_bytes < 1.25 * (raw + links));
    }
    CHECK(db->open_report().warnings.empty());
    for (size_t i = 0; i < 20; i++) {
      auto r = db->query("get docs select id near e $1 limit 10", {vec_value(&qs[i * kDim])});
      REQUIRE(r.is_ok());
      CHECK(to_json(Value::list(r->rows)) == before[i]);
    }
    if (round == 0) {
      REQUIRE(db->query("put docs {id: 1, cat: 5, e: $1}", {vec_value(&qs[0])}).is_ok());
      REQUIRE(db->query("del docs where id = 1").is_ok());
      db->close();
    }
  }
}

TEST_CASE("a graph record that does not validate is rebuilt from the documents, with a warning") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(*fs);
    load(*db, gen);
    db->close();
  }
  auto f = fs->open("v.kfdb", {});
  REQUIRE(f.is_ok());
  std::string bytes(*(*f)->size(), '\0');
  size_t got;
  REQUIRE((*f)->read(0, bytes.data(), bytes.size(), &got).is_ok());
  std::string out = bytes.substr(0, format::kHeaderSize);
  uint64_t off = format::kHeaderSize;
  RecordView r;
  bool changed = false;
  while (read_record(bytes, off, &r) == ScanResult::Ok) {
    std::string body(r.body);
    if (r.kind == format::kGraph) {
      // A link beyond the table (in the level-0 lists), under a valid checksum.
      for (size_t k = 0; k < 8; k++) body[body.size() / 2 + k] = (char)0xFF;
      changed = true;
    }
    append_record(out, r.kind, body);
    off = r.end;
  }
  REQUIRE(changed);
  REQUIRE((*f)->truncate(0).is_ok());
  REQUIRE((*f)->write(0, out.data(), out.size()).is_ok());
  f->reset();
  auto db = open_db(*fs);
  CHECK(db->open_report().index_rebuilt);
  auto q = gen.points(1, 5);
  auto res = db->query("get docs select id near e $1 limit 5", {vec_value(q.data())});
  REQUIRE(res.is_ok());
  CHECK(res->rows.size() == 5);
}
