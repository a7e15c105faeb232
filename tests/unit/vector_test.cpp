// Vector search through the engine: recall, exact ground truth, filtered
// search that a post-filter would get wrong, reopen without a rebuild.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "clustered.h"
#include "db.h"
#include "posix_file.h"
#include "storage/extent.h"
#include "storage/format.h"
#include "storage/record.h"
#include "test_files.h"

using namespace kitfox;

namespace {

constexpr uint32_t kDim = 32;

Value vec_value(const float* p) { return Value::vector(std::vector<float>(p, p + kDim)); }

// `background`: the checker thread of unread blocks runs (off where a test
// counts unchecked blocks, which must not race it).
std::unique_ptr<Database> open_db(FileSystem& fs, bool auto_cp = true, bool lazy = false, bool background = false) {
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.auto_checkpoint = auto_cp;
  o.lazy_extents = lazy;
  o.check_in_background = background;
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

TEST_CASE("near: recall@10 at the default ef on held-out queries, and exact equals brute force" * doctest::test_suite("heavy")) {
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

// Rewrites v.kfdb with bytes flipped in the Extent after the first record of
// `kind` (Vectors: the vector table; Graph: the level-0 lists), under valid
// frame checksums: only the extent's block checksums can tell. Returns the
// file offset of the damaged block.
static uint64_t damage_extent(FileSystem& fs, uint8_t kind) {
  auto f = fs.open("v.kfdb", {});
  REQUIRE(f.is_ok());
  std::string bytes(*(*f)->size(), '\0');
  size_t got;
  REQUIRE((*f)->read(0, bytes.data(), bytes.size(), &got).is_ok());
  std::string out = bytes.substr(0, format::kHeaderSize);
  uint64_t off = format::kHeaderSize, damaged = 0;
  RecordView r;
  bool next = false;
  while (read_record(bytes, off, &r) == ScanResult::Ok) {
    std::string body(r.body);
    if (next) {
      REQUIRE(r.kind == format::kExtent);
      for (size_t k = 0; k < 8; k++) body[body.size() / 2 + k] = (char)0xFF;
      uint32_t block = extent_block_bytes(kind == format::kVectors ? kDim * 4 : (1 + 2 * 16) * 4);
      damaged = out.size() + 5 + body.size() / 2 / block * block;
    }
    next = r.kind == kind && !damaged;
    append_record(out, r.kind, body);
    off = r.end;
  }
  REQUIRE(damaged);
  REQUIRE((*f)->truncate(0).is_ok());
  REQUIRE((*f)->write(0, out.data(), out.size()).is_ok());
  return damaged;
}

// A file system whose every call is "slow" (as OPFS's): its files ask for
// whole reads (read_chunk), so the engine reads the file on open and leaves
// only the checks of the extents' blocks to first use.
class OneReadFile : public File {
 public:
  explicit OneReadFile(std::unique_ptr<File> f) : f_(std::move(f)) {}
  uint64_t read_chunk() const override { return 1ull << 40; }
  Status read(uint64_t o, void* b, size_t n, size_t* got) override {
    reads++;
    return f_->read(o, b, n, got);
  }
  static inline int reads = 0;
  Status write(uint64_t o, const void* b, size_t n) override { return f_->write(o, b, n); }
  Status sync() override { return f_->sync(); }
  Result<uint64_t> size() override { return f_->size(); }
  Status truncate(uint64_t n) override { return f_->truncate(n); }

 private:
  std::unique_ptr<File> f_;
};
class OneReadFs : public FileSystem {
 public:
  explicit OneReadFs(FileSystem& inner) : in_(inner) {}
  Result<std::unique_ptr<File>> open(const std::string& n, OpenFlags f) override {
    KF_ASSIGN(auto file, in_.open(n, f));
    return std::unique_ptr<File>(new OneReadFile(std::move(file)));
  }
  Result<bool> exists(const std::string& n) override { return in_.exists(n); }
  Status remove(const std::string& n) override { return in_.remove(n); }
  Status replace(const std::string& a, const std::string& b) override { return in_.replace(a, b); }
  bool atomic_replace() const override { return true; }

 private:
  FileSystem& in_;
};

static std::unique_ptr<Database> open_lazy(FileSystem& fs) { return open_db(fs, true, true); }

TEST_CASE("a damaged graph is rebuilt from the vector table, with a warning: on open, or when read lazily") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(*fs);
    load(*db, gen);
    db->close();
  }
  damage_extent(*fs, format::kGraph);
  auto q = gen.points(1, 5);
  std::vector<std::string> want;
  {
    auto db = open_db(*fs, false);
    CHECK(db->open_report().index_rebuilt);
    auto res = db->query("get docs select id near e $1 limit 5", {vec_value(q.data())});
    REQUIRE(res.is_ok());
    CHECK(res->rows.size() == 5);
    for (auto& row : res->rows) want.push_back(to_json(row));
    db->close();
  }
  // Read lazily, the damage shows when the query reaches the block: the
  // graph is rebuilt then and the query answered from it.
  auto db = open_lazy(*fs);
  CHECK_FALSE(db->open_report().index_rebuilt);
  std::vector<std::string> got;
  // Another thread reads the report meanwhile: the warning is added to it
  // after the open (ThreadSanitizer saw a copy's read race that push).
  std::atomic<bool> stop{false};
  size_t seen = 0;
  std::thread reader([&] {
    while (!stop) seen = std::max(seen, db->open_report().warnings.size());
  });
  for (int i = 0; i < 50 && !db->open_report().index_rebuilt; i++) {
    auto qi = gen.points(1, 100 + i);
    REQUIRE(db->query("get docs select id near e $1 limit 5", {vec_value(qi.data())}).is_ok());
  }
  stop = true;
  reader.join();
  CHECK(seen <= db->open_report().warnings.size());
  if (!db->open_report().index_rebuilt) CHECK(db->warm(UINT64_MAX) == 0);
  REQUIRE(db->query("get docs count").is_ok());
  CHECK(db->open_report().index_rebuilt);
  auto res = db->query("get docs select id near e $1 limit 5", {vec_value(q.data())});
  REQUIRE(res.is_ok());
  for (auto& row : res->rows) got.push_back(to_json(row));
  CHECK(got == want);
}

TEST_CASE("a damaged vector table: open fails naming the offset; read lazily, the query that reaches it does") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(*fs);
    load(*db, gen);
    db->close();
  }
  uint64_t at = damage_extent(*fs, format::kVectors);
  OpenOptions o;
  o.sync = SyncMode::Off;
  o.lazy_extents = false;
  auto bad = Database::open(*fs, "v.kfdb", o);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == Code::Corrupt);
  CHECK(bad.status().message().find("vector table") != std::string::npos);
  OneReadFs one_read(*fs);
  for (FileSystem* lfs : {(FileSystem*)fs.get(), (FileSystem*)&one_read}) {
    auto db = open_lazy(*lfs);
    // Reads that do not touch the vectors work; exact search reads every block.
    REQUIRE(db->query("get docs count").is_ok());
    auto q = gen.points(1, 5);
    auto res = db->query("get docs near e $1 exact limit 5", {vec_value(q.data())});
    REQUIRE_FALSE(res.is_ok());
    CHECK(res.status().code() == Code::Corrupt);
    INFO(res.status().message());
    CHECK(res.status().message().find("at offset " + std::to_string(at) + ":") != std::string::npos);
    CHECK(res.status().message().find("vector table of 'docs.e'") != std::string::npos);
    CHECK(res.status().message().find("checksum mismatch") != std::string::npos);
  }
  CHECK(bad.status().message().find("at offset " + std::to_string(at)) != std::string::npos);
}

TEST_CASE("a vector's cosine distance to itself is never negative, its cosine similarity never above 1") {
  auto fs = make_memory_file_system();
  auto db = open_db(*fs);
  bench::Clustered gen(kDim, 10);
  load(*db, gen);
  auto all = db->query("get docs select id, e limit 300");
  REQUIRE(all.is_ok());
  int negative = 0, above = 0;
  for (const Value& row : all->rows) {
    for (const char* q : {"get docs select id near e $1 limit 1", "get docs select id near e $1 exact limit 1"}) {
      auto r = db->query(q, {*row.get("e")});
      REQUIRE(r.is_ok());
      REQUIRE(r->rows.size() == 1);
      if (r->rows[0].get("_distance")->as_float() < 0) negative++;
    }
    auto c = db->query("get docs select cosine(e, $1) where id = $2", {*row.get("e"), *row.get("id")});
    REQUIRE(c.is_ok());
    if (c->rows[0].items()[1].as_float() > 1) above++;
  }
  CHECK(negative == 0);
  CHECK(above == 0);
}

TEST_CASE("recover steps over damaged derived records and keeps the documents of a lost vector table") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(*fs);
    load(*db, gen);
    db->close();
  }
  const std::string good = testing::read_file(*fs, "v.kfdb");
  auto qs = gen.points(10, 31);
  std::vector<std::string> want;
  {
    auto db = open_db(*fs);
    for (size_t i = 0; i < 10; i++) {
      auto r = db->query("get docs select id near e $1 exact limit 5", {vec_value(&qs[i * kDim])});
      REQUIRE(r.is_ok());
      want.push_back(to_json(Value::list(r->rows)));
    }
  }
  testing::write_file(*fs, "v.kfdb", good);
  std::vector<RecordView> recs = testing::records(good);
  REQUIRE(recs.back().end == good.size());
  for (const RecordView& r : recs) CHECK(r.kind != format::kIdIndex);
  auto first = [&](uint8_t kind) {
    for (const RecordView& r : recs)
      if (r.kind == kind) return r;
    FAIL("no record of kind " << (int)kind);
    return RecordView{};
  };
  OpenOptions rec;
  rec.sync = SyncMode::Off;
  rec.recover = true;
  // A byte of the body of a derived record, or of the vector table's record,
  // or the file cut inside the vector table.
  struct Case {
    const char* what;
    uint8_t kind;
    bool cut;
    bool vectors_kept;
  };
  for (const Case& c : {Case{"id index", format::kIdIndex, false, true}, Case{"graph", format::kGraph, false, true},
                        Case{"vector table record", format::kVectors, false, false},
                        Case{"cut inside the vector table", format::kVectors, true, false}}) {
    CAPTURE(c.what);
    // Images hold an id index no more: an older image's, damaged.
    const std::string base = c.kind == format::kIdIndex ? testing::with_old_id_index(good) : good;
    recs = testing::records(base);
    RecordView r = first(c.kind);
    std::string bad = base;
    if (c.cut) {
      bad.resize(r.end + 100);  // past the Vectors record, inside its Extent
    } else {
      bad[r.offset + 5 + r.body.size() / 2] ^= 0x20;
    }
    testing::write_file(*fs, "v.kfdb", bad);
    auto refused = Database::open(*fs, "v.kfdb", {});
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == Code::Corrupt);
    CHECK(testing::read_file(*fs, "v.kfdb") == bad);
    {
      auto db = Database::open(*fs, "v.kfdb", rec);
      INFO(db.status().to_string());
      REQUIRE(db.is_ok());
      CHECK_FALSE((*db)->open_report().warnings.empty());
      auto n = (*db)->query("get docs count");
      REQUIRE(n.is_ok());
      CHECK(n->rows[0].get("count")->as_int() == 4000);
      auto with = (*db)->query("get docs where e is not null count");
      REQUIRE(with.is_ok());
      CHECK(with->rows[0].get("count")->as_int() == (c.vectors_kept ? 4000 : 0));
      if (c.vectors_kept) {
        for (size_t i = 0; i < 10; i++) {
          auto q = (*db)->query("get docs select id near e $1 exact limit 5", {vec_value(&qs[i * kDim])});
          REQUIRE(q.is_ok());
          CHECK(to_json(Value::list(q->rows)) == want[i]);
        }
      }
      CHECK(testing::read_file(*fs, "v.kfdb.damaged") == bad);
      (*db)->close();
    }
    auto again = open_db(*fs);  // the recovered file is whole
    CHECK(again->open_report().warnings.empty());
    REQUIRE(again->query("get docs count").is_ok());
    again->close();
    REQUIRE(fs->remove("v.kfdb.damaged").is_ok());
  }
  // A damaged Docs record whose kind byte now reads as a derived record's is
  // not stepped over: the image's document count tells, and recover keeps
  // what came before it.
  recs = testing::records(good);
  RecordView docs = first(format::kDocs);
  std::string bad = good;
  bad[docs.offset + 4] = (char)format::kIdIndex;
  testing::write_file(*fs, "v.kfdb", bad);
  auto db = Database::open(*fs, "v.kfdb", rec);
  REQUIRE(db.is_ok());
  CHECK((*db)->open_report().recovered_offset == docs.offset);
}

using MappedDir = testing::TempDir;
// Real files (mapped on open) inside a directory.
class DirFs : public FileSystem {
 public:
  explicit DirFs(std::string dir) : dir_(std::move(dir)) {}
  Result<std::unique_ptr<File>> open(const std::string& n, OpenFlags f) override { return in_.open(at(n), f); }
  Result<bool> exists(const std::string& n) override { return in_.exists(at(n)); }
  Status remove(const std::string& n) override { return in_.remove(at(n)); }
  Status replace(const std::string& a, const std::string& b) override { return in_.replace(at(a), at(b)); }
  bool atomic_replace() const override { return true; }

 private:
  std::string at(const std::string& n) const { return dir_ + "/" + n; }
  std::string dir_;
  PosixFileSystem in_;
};

TEST_CASE("a mapped file checks its blocks on first use, from several threads: damage is never answered from") {
  MappedDir dir;
  DirFs fs(dir.path);
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(fs);
    load(*db, gen);
    db->close();
  }
  auto qs = gen.points(16, 77);
  const char* text = "get docs select id near e $1 limit 5";
  std::vector<std::string> want(16);
  {
    auto db = open_db(fs, false);
    for (size_t i = 0; i < 16; i++) want[i] = to_json(Value::list());
    for (size_t i = 0; i < 16; i++) {
      auto r = db->query(text, {vec_value(&qs[i * kDim])});
      REQUIRE(r.is_ok());
      for (auto& row : r->rows) want[i] += to_json(row);
    }
  }
  auto run = [&](Database& db, std::atomic<int>* wrong, std::atomic<int>* failed) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
      ts.emplace_back([&, t] {
        for (size_t k = 0; k < 16; k++) {
          size_t i = (k + 4 * t) % 16;
          auto r = db.query(text, {vec_value(&qs[i * kDim])});
          if (!r.is_ok()) {
            (*failed)++;
            continue;
          }
          std::string got = to_json(Value::list());
          for (auto& row : r->rows) got += to_json(row);
          if (got != want[i]) (*wrong)++;
        }
      });
    for (auto& t : ts) t.join();
  };
  {
    // Whole: the same answers from four threads (beside the background
    // check of the blocks no query touched), and the checker, left alone,
    // checks every block: polled (no sleep) until it is done; the bound only
    // ends a test that would hang.
    auto db = open_db(fs, true, true, true);
    std::atomic<int> wrong{0}, failed{0};
    run(*db, &wrong, &failed);
    CHECK(wrong == 0);
    CHECK(failed == 0);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (db->warm(0) > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    CHECK(db->warm(0) == 0);
  }
  // A damaged graph block (under the mapping, read-only) is found by the
  // first query that reaches it: the graph is rebuilt with the database to
  // itself, and every query is answered as from the whole file.
  damage_extent(fs, format::kGraph);
  {
    auto db = open_lazy(fs);
    CHECK_FALSE(db->open_report().index_rebuilt);
    std::atomic<int> wrong{0}, failed{0};
    for (int round = 0; round < 5 && !db->open_report().index_rebuilt; round++) run(*db, &wrong, &failed);
    if (!db->open_report().index_rebuilt) {
      db->warm(UINT64_MAX);
      REQUIRE(db->query("get docs count").is_ok());
    }
    CHECK(db->open_report().index_rebuilt);
    CHECK(wrong == 0);
    CHECK(failed == 0);
    run(*db, &wrong, &failed);
    CHECK(wrong == 0);
  }
  // A damaged vector table block: the queries that reach it fail naming it,
  // and a checkpoint refuses rather than write zeros in place of vectors.
  {
    auto db = open_db(fs);  // rewrites the graph
    db->close();
  }
  uint64_t at = damage_extent(fs, format::kVectors);
  auto size_before = [&] {
    auto f = fs.open("v.kfdb", {});
    REQUIRE(f.is_ok());
    return *(*f)->size();
  };
  uint64_t before = size_before();
  auto db = open_lazy(fs);
  auto res = db->query("get docs near e $1 exact limit 5", {vec_value(&qs[0])});
  REQUIRE_FALSE(res.is_ok());
  CHECK(res.status().code() == Code::Corrupt);
  CHECK(res.status().message().find("at offset " + std::to_string(at) + ":") != std::string::npos);
  Status cp = db->checkpoint();
  CHECK(cp.code() == Code::Corrupt);
  CHECK(size_before() == before);
  // A write once the damage is known is refused and lands nothing (before,
  // it landed and was flushed, then answered the damage: a retry wrote it
  // twice).
  auto put = db->query("put docs {cat: 1, e: $1}", {vec_value(&qs[0])});
  CHECK(put.status().code() == Code::Corrupt);
  auto del = db->query("del docs where id = 1");
  CHECK(del.status().code() == Code::Corrupt);
  db->close();
  CHECK(size_before() == before);
  OpenOptions rec;
  rec.recover = true;
  auto kept = Database::open(fs, "v.kfdb", rec);
  INFO(kept.status().to_string());
  REQUIRE(kept.is_ok());
  auto n = (*kept)->query("get docs count");
  REQUIRE(n.is_ok());
  CHECK(n->rows[0].get("count")->as_int() == 4000);
  auto one = (*kept)->query("get docs where id = 1 count");
  REQUIRE(one.is_ok());
  CHECK(one->rows[0].get("count")->as_int() == 1);
}

TEST_CASE("read lazily: the same answers as read whole, through writes, a checkpoint and warm()") {
  auto fs = make_memory_file_system();
  bench::Clustered gen(kDim, 10);
  {
    auto db = open_db(*fs);
    load(*db, gen);
    db->close();
  }
  auto qs = gen.points(20, 9);
  auto answers = [&](Database& db) {
    std::vector<std::string> out;
    for (size_t i = 0; i < 20; i++) {
      for (const char* q : {"get docs select id, e near e $1 limit 5", "get docs select id near e $1 exact limit 5",
                            "get docs select id where cat = 3 near e $1 limit 5"}) {
        auto r = db.query(q, {vec_value(&qs[i * kDim])});
        REQUIRE(r.is_ok());
        for (auto& row : r->rows) out.push_back(to_json(row));
      }
    }
    return out;
  };
  std::vector<std::string> whole;
  {
    auto db = open_db(*fs, false);
    whole = answers(*db);
  }
  {
    auto db = open_lazy(*fs);
    CHECK_FALSE(db->open_report().index_rebuilt);
    uint64_t unread = db->warm(0);
    CHECK(unread > 4000 * kDim * 4 / 2);  // opening read neither the table nor the lists
    CHECK(answers(*db) == whole);
    CHECK(db->warm(4096) < unread);
    // A write makes the graph its own (every block read), then a checkpoint
    // rewrites the image; answers stay those of the eager build.
    auto extra = gen.points(1, 4242);
    REQUIRE(db->query("put docs {id: 100000, cat: 1, e: $1}", {vec_value(extra.data())}).is_ok());
    REQUIRE(db->query("del docs where id = 100000").is_ok());
    REQUIRE(db->checkpoint().is_ok());
    CHECK(db->warm(0) == 0);
    CHECK(answers(*db) == whole);
    db->close();
  }
  auto db = open_lazy(*fs);
  while (db->warm(1 << 14) > 0) {
  }
  CHECK(answers(*db) == whole);
  db->close();
  // Read whole on open, checked on first use.
  OneReadFs one_read(*fs);
  OneReadFile::reads = 0;
  db = open_lazy(one_read);
  int on_open = OneReadFile::reads;
  CHECK(on_open <= 3);  // the file whole (and the side file's check)
  CHECK(db->warm(0) > 0);  // blocks still to check
  CHECK(answers(*db) == whole);
  CHECK(OneReadFile::reads == on_open);
}

TEST_CASE("filtered near is planned by cost: graph with the filter, or exact over an index's candidates") {
  auto fs = make_memory_file_system();
  auto db = open_db(*fs);
  bench::Clustered gen(kDim, 10);
  load(*db, gen);  // cat = cluster: about 400 of 4000 documents each
  const float* centre = &gen.centres[0];
  auto plan = [&](const std::string& q) {
    auto r = db->query("explain " + q, {vec_value(centre), Value::integer(3)});
    REQUIRE(r.is_ok());
    std::string all;
    for (auto& row : r->rows) all += to_json(row) + "\n";
    return all;
  };
  const std::string q = "get docs select id, cat where cat = $2 near e $1 limit 10";
  // No index on cat: testing graph candidates costs about ef x 10 documents,
  // a scan 4000.
  std::string walk = plan(q);
  INFO(walk);
  CHECK(walk.find("\"op\":\"near graph\"") != std::string::npos);
  CHECK(walk.find("hnsw search, ef 100") != std::string::npos);
  CHECK(walk.find("testing the filter on the nodes it visits") != std::string::npos);
  auto r = db->query(q, {vec_value(centre), Value::integer(3)});
  REQUIRE(r.is_ok());
  REQUIRE(r->rows.size() == 10);
  for (auto& row : r->rows) CHECK(row.get("cat")->as_int() == 3);
  auto ref = reference(*db, centre, 10, 3);
  auto got = ids(*r);
  size_t hit = 0;
  for (int64_t id : got) hit += std::count(ref.begin(), ref.end(), id);
  CHECK(hit >= 8);
  // With a @hash on cat the index gives the ~400 candidates: exact over them.
  REQUIRE(db->query("create index on docs (cat) @hash").is_ok());
  std::string p = plan(q);
  INFO(p);
  CHECK(p.find("\"op\":\"near exact\"") != std::string::npos);
  CHECK(p.find("docs.cat (@hash): equality") != std::string::npos);
  r = db->query(q, {vec_value(centre), Value::integer(3)});
  REQUIRE(r.is_ok());
  CHECK(ids(*r) == ref);
  // Nothing passes: no graph walk, an empty answer.
  auto none = db->query("get docs where cat = 999 near e $1 limit 10", {vec_value(centre)});
  REQUIRE(none.is_ok());
  CHECK(none->rows.empty());
}

TEST_CASE("filtered near against the vectors: an index's many candidates far from the query are searched exactly" * doctest::test_suite("heavy")) {
  // 16 clusters of about 1,250 documents; the filter keeps one cluster far
  // from the query, where a filtered walk of the graph would visit most of
  // the graph before it found ten matches.
  auto fs = make_memory_file_system();
  auto db = open_db(*fs);
  bench::Clustered gen(kDim, 16);
  REQUIRE(db->query("create collection docs (cat int @hash, e vector<32> @hnsw(cosine, m=8, ef_construction=40))").is_ok());
  std::vector<uint32_t> cl;
  const size_t n = 20000;
  auto pts = gen.points(n, 1, &cl);
  for (size_t b = 0; b < n; b += 2000) {
    Value list = Value::list();
    for (size_t i = b; i < b + 2000; i++) {
      Value d = Value::object();
      d.append("cat", Value::integer(cl[i]));
      d.append("e", vec_value(&pts[i * kDim]));
      list.push(std::move(d));
    }
    REQUIRE(db->query("put docs $1", {list}).is_ok());
  }
  const float* q = &gen.centres[0];
  // The cluster whose centre is farthest from the query.
  int64_t far = 0;
  double worst = 2;
  for (uint32_t c = 1; c < 16; c++) {
    double dot = 0;
    for (uint32_t i = 0; i < kDim; i++) dot += (double)q[i] * gen.centres[c * kDim + i];
    if (dot < worst) worst = dot, far = c;
  }
  const std::string text = "get docs select id where cat = $2 near e $1 limit 10";
  auto plan = db->query("explain " + text, {vec_value(q), Value::integer(far)});
  REQUIRE(plan.is_ok());
  std::string p;
  for (auto& row : plan->rows) p += to_json(row) + "\n";
  INFO(p);
  CHECK(p.find("\"op\":\"near exact\"") != std::string::npos);
  CHECK(p.find("docs.cat (@hash): equality") != std::string::npos);
  CHECK(p.find("exact over the ") != std::string::npos);
  auto r = db->query(text, {vec_value(q), Value::integer(far)});
  REQUIRE(r.is_ok());
  CHECK(ids(*r) == reference(*db, q, 10, far));
}

// Documents in the image refer to their vectors by node in the table the
// index had at the last checkpoint. An index dropped and made again (twice,
// before any checkpoint) numbers its nodes afresh; the image's documents
// must still read their own vectors, from the table they refer to.
TEST_CASE("an index made again before a checkpoint: image documents read their own vectors") {
  auto fs = make_memory_file_system();
  // Node order differs from id order: the index took the documents 5, 3, 1,
  // 4, 2, 6, then a new vector for 3 (a node of its own), and lost 4.
  // No two point the same way, so that `near` finds one alone under any metric.
  const std::vector<std::pair<int64_t, std::vector<float>>> docs = {
      {5, {5, 2}}, {3, {3, 4}}, {1, {1, 6}}, {4, {4, 3}}, {2, {2, 5}}, {6, {6, 1}}};
  auto expect = [](int64_t id) -> std::string {
    if (id == 3) return "[9,-2]";
    return "[" + std::to_string(id) + "," + std::to_string(7 - id) + "]";
  };
  {
    auto db = open_db(*fs, false);
    REQUIRE(db->query("create collection v (e vector<2> @hnsw(l2, m=8))").is_ok());
    for (auto& [id, e] : docs)
      REQUIRE(db->query("put v {id: $1, e: $2}", {Value::integer(id), Value::vector(e)}).is_ok());
    REQUIRE(db->query("set v {e: [9, -2]} where id = 3").is_ok());
    REQUIRE(db->query("del v where id = 4").is_ok());
    REQUIRE(db->checkpoint().is_ok());
    REQUIRE(db->close().is_ok());
  }
  auto db = open_db(*fs, false);
  auto check = [&](const char* when) {
    INFO(std::string(when));
    for (int64_t id : {1, 2, 3, 5, 6}) {
      auto r = db->query("get v where id = $1", {Value::integer(id)});
      REQUIRE(r.is_ok());
      REQUIRE(r->rows.size() == 1);
      CHECK(to_json(*r->rows[0].get("e")) == expect(id));
    }
    auto near = db->query("get v select id near e [9, -2] limit 1");
    REQUIRE(near.is_ok());
    REQUIRE(near->rows.size() == 1);
    CHECK(near->rows[0].get("id")->as_int() == 3);
  };
  check("reopened");
  REQUIRE(db->query("drop index on v (e)").is_ok());
  check("index dropped");
  REQUIRE(db->query("create index on v (e) @hnsw(l2, m=8)").is_ok());
  check("index made again");
  REQUIRE(db->query("drop index on v (e)").is_ok());
  REQUIRE(db->query("create index on v (e) @hnsw(l2, m=16)").is_ok());
  check("index made a second time");
  REQUIRE(db->checkpoint().is_ok());
  check("checkpointed");
  REQUIRE(db->close().is_ok());
  db = open_db(*fs, false);
  check("reopened after the checkpoint");
}

TEST_CASE("an extent whose blocks split its items is damaged: a vector table refused, a graph rebuilt") {
  auto fs = make_memory_file_system();
  {
    auto db = open_db(*fs, false);
    REQUIRE(db->query("create collection w (e vector<4> @hnsw(l2, m=4, ef_construction=16))").is_ok());
    for (int i = 0; i < 10; i++)
      REQUIRE(db->query("put w {e: $1}", {Value::vector({(float)i, 1, 0, (float)(i % 3)})}).is_ok());
    REQUIRE(db->checkpoint().is_ok());
    REQUIRE(db->close().is_ok());
  }
  const std::string good = testing::read_file(*fs, "v.kfdb");
  // The file with the block size of the first record of `kind` set to 1000
  // bytes: one block still (a table of 160 bytes, lists of 360), the same
  // checksum, but not a whole number of vectors (16 bytes) or lists (36).
  auto with_block_size = [&](uint8_t kind) {
    std::string out = good.substr(0, format::kHeaderSize);
    bool done = false;
    for (const RecordView& r : testing::records(good)) {
      std::string body(r.body);
      if (r.kind == kind && !done) {
        Reader rd(body);
        rd.varint();
        rd.varint();
        if (kind == format::kGraph) rd.u64();
        rd.str();
        const size_t at = rd.pos() - body.data();
        uint32_t block;
        memcpy(&block, body.data() + at, 4);
        CHECK(block % 4 == 0);
        block = 1000;
        memcpy(body.data() + at, &block, 4);
        done = true;
      }
      append_record(out, r.kind, body);
    }
    REQUIRE(done);
    return out;
  };
  for (bool lazy : {true, false}) {
    CAPTURE(lazy);
    OpenOptions o;
    o.sync = SyncMode::Off;
    o.lazy_extents = lazy;
    o.check_in_background = false;
    testing::write_file(*fs, "v.kfdb", with_block_size(format::kVectors));
    auto refused = Database::open(*fs, "v.kfdb", o);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == Code::Corrupt);
    CHECK(refused.status().message().find("vector table") != std::string::npos);

    testing::write_file(*fs, "v.kfdb", with_block_size(format::kGraph));
    auto db = Database::open(*fs, "v.kfdb", o);
    REQUIRE(db.is_ok());
    bool rebuilt = false;
    for (const std::string& w : (*db)->open_report().warnings) rebuilt |= w.find("did not validate") != std::string::npos;
    CHECK(rebuilt);
    auto r = (*db)->query("get w select id near e $1 limit 3", {Value::vector({4, 1, 0, 1})});
    REQUIRE(r.is_ok());
    REQUIRE(r->rows.size() == 3);
    CHECK(r->rows[0].get("id")->as_int() == 5);
  }
}
