// The HNSW index on its own: recall on held-out queries, exact search,
// determinism, sharing of identical vectors, tombstones, persistence.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <list>
#include <map>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <memory>
#include <set>
#include <thread>

#include "clustered.h"
#include "storage/id_index.h"
#include "codec.h"
#include "index/hnsw.h"

using namespace kitfox;

namespace {

// A pin's whole vector table: its image part, then the rest.
void table_of(const HnswIndex::Pin& pin, std::string& out) {
  out += pin.table[0];
  out += pin.table[1];
}

// A point along a line (a tiny wobble off it, by `salt`): numbered in
// order along it, a node's neighbours have numbers close to its own, so a
// change touches few level-0 blocks.
std::vector<float> point_on_line(uint32_t dim, double x, uint32_t salt) {
  std::vector<float> p(dim);
  p[0] = (float)x;
  for (uint32_t k = 1; k < dim; k++) p[k] = 1e-4f * (float)std::sin(1.7 * (x * 1000 + salt) * k);
  return p;
}
// n of them, 0.001 apart from `from` on.
std::vector<float> points_on_line(uint32_t dim, size_t n, double from, uint32_t salt) {
  std::vector<float> pts;
  for (size_t i = 0; i < n; i++) {
    auto p = point_on_line(dim, from + (double)i * 1e-3, salt);
    pts.insert(pts.end(), p.begin(), p.end());
  }
  return pts;
}

std::unique_ptr<HnswIndex> build(const std::vector<float>& pts, uint32_t dim, HnswParams p, int threads, bool f16 = false) {
  auto idx = std::make_unique<HnswIndex>(dim, f16, p);
  std::vector<float> v;
  size_t n = pts.size() / dim;
  for (size_t i = 0; i < n; i++) {
    REQUIRE(idx->prepare(&pts[i * dim], &v, "v").is_ok());
    idx->put((int64_t)i + 1, v.data());
    if (i % 500 == 499) idx->link_pending(threads);  // batches, like statements
  }
  idx->link_pending(threads);
  return idx;
}

double recall(const HnswIndex& idx, const std::vector<float>& queries, uint32_t dim, size_t ef) {
  size_t nq = queries.size() / dim, hit = 0;
  std::vector<Hit> a, e;
  std::vector<float> q;
  for (size_t i = 0; i < nq; i++) {
    REQUIRE(idx.prepare_query(&queries[i * dim], &q, "q").is_ok());
    idx.search(q.data(), 10, ef, nullptr, &a);
    idx.exact(q.data(), 10, nullptr, &e);
    std::set<uint32_t> truth;
    for (auto& h : e) truth.insert(h.node);
    for (auto& h : a) hit += truth.count(h.node);
  }
  return double(hit) / double(nq * 10);
}

}  // namespace

namespace {
// An index as a checkpoint writes it (its pin), loaded into others as an
// open loads it.
struct Image {
  HnswIndex::Pin pin;
  std::string vecs, links;
  explicit Image(HnswIndex& idx) {
    idx.pin(&pin);
    table_of(pin, vecs);
    links = pin.links0_string();
  }
  void load(HnswIndex& x) const {
    ExtentRef t, l;
    t.bytes = vecs;
    l.bytes = links;
    REQUIRE(x.load_table(pin.meta, t));
    REQUIRE(x.load_graph(pin.graph, l));
  }
};
}  // namespace

TEST_CASE("distance kernels agree with a plain double-precision sum") {
  bench::Clustered gen(100, 4);
  auto p = gen.points(2, 7);
  double d = 0, l = 0;
  for (int i = 0; i < 100; i++) {
    d += (double)p[i] * p[100 + i];
    l += ((double)p[i] - p[100 + i]) * ((double)p[i] - p[100 + i]);
  }
  CHECK(dot_f32(p.data(), p.data() + 100, 100) == doctest::Approx(d).epsilon(1e-5));
  CHECK(l2sq_f32(p.data(), p.data() + 100, 100) == doctest::Approx(l).epsilon(1e-5));
  MESSAGE("kernel: " << kernel_name());
}

TEST_CASE("f16 decoding is exact for every half value") {
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t x = (uint16_t)h;
    // The reference: the half's value by its definition. A NaN only has to
    // stay a NaN (F16C quiets signalling ones; stored vectors never hold one).
    uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    float f, g = half_to_float(x);
    f16_to_f32(&x, &f, 1);
    if (exp == 31 && mant != 0) {
      CHECK((std::isnan(f) && std::isnan(g)));
      continue;
    }
    float want;
    if (exp == 31) {
      want = (h & 0x8000) ? -INFINITY : INFINITY;
    } else {
      double v = exp == 0 ? std::ldexp((double)mant, -24) : std::ldexp(1.0 + mant / 1024.0, (int)exp - 15);
      want = (float)((h & 0x8000) ? -v : v);
    }
    if (memcmp(&f, &want, 4) != 0 || memcmp(&g, &want, 4) != 0)
      FAIL_CHECK("half 0x" << std::hex << h << ": f16_to_f32 " << f << ", half_to_float " << g << ", want " << want);
  }
}

TEST_CASE("recall@10 on clustered data with held-out queries, every metric" * doctest::test_suite("heavy")) {
  const uint32_t dim = 48;
  bench::Clustered gen(dim, 50);
  auto pts = gen.points(6000, 1);
  auto qs = gen.points(200, 999);  // a different stream: not dataset members
  for (Metric m : {Metric::Cosine, Metric::L2, Metric::Dot}) {
    HnswParams p;
    p.metric = m;
    auto idx = build(pts, dim, p, 2);
    double r = recall(*idx, qs, dim, 100);
    MESSAGE(std::string(metric_name(m)) << " recall@10 at ef=100: " << r);
    CHECK(r >= 0.95);
  }
}

TEST_CASE("f16 storage keeps recall" * doctest::test_suite("heavy")) {
  const uint32_t dim = 64;
  bench::Clustered gen(dim, 40);
  auto pts = gen.points(4000, 3);
  auto qs = gen.points(100, 4);
  auto idx = build(pts, dim, HnswParams{}, 2, true);
  CHECK(recall(*idx, qs, dim, 100) >= 0.95);
}

TEST_CASE("the graph does not depend on the thread count") {
  const uint32_t dim = 32;
  bench::Clustered gen(dim, 20);
  auto pts = gen.points(3000, 5);
  auto one = build(pts, dim, HnswParams{}, 1);
  auto two = build(pts, dim, HnswParams{}, 2);
  auto four = build(pts, dim, HnswParams{}, 4);
  CHECK(one->graph_bytes() == two->graph_bytes());
  CHECK(one->graph_bytes() == four->graph_bytes());
}

TEST_CASE("identical vectors share a node; deletes leave tombstones that are never returned") {
  HnswIndex idx(4, false, HnswParams{Metric::L2, 4, 20, 20});
  float a[4] = {1, 0, 0, 0}, b[4] = {0, 1, 0, 0}, c[4] = {0, 0, 1, 0};
  idx.put(1, a);
  idx.put(2, a);
  idx.put(3, b);
  idx.put(4, c);
  idx.link_pending(1);
  CHECK(idx.nodes() == 3);
  CHECK(idx.documents() == 4);
  std::vector<int64_t> docs;
  idx.docs_of(0, &docs);
  CHECK(docs == std::vector<int64_t>{1, 2});
  idx.remove(1);
  idx.remove(2);
  std::vector<Hit> out;
  idx.search(a, 3, 10, nullptr, &out);
  CHECK(out.size() == 2);
  for (auto& h : out) CHECK(h.node != 0);
  // Writing the vector again revives the node.
  idx.put(5, a);
  CHECK(idx.nodes() == 3);
  idx.search(a, 1, 10, nullptr, &out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].node == 0);
  CHECK(out[0].distance == 0);
  // Every node live again, then one more tombstone: still never returned.
  idx.search(a, 3, 10, nullptr, &out);
  CHECK(out.size() == 3);
  idx.remove(3);
  idx.search(b, 3, 10, nullptr, &out);
  CHECK(out.size() == 2);
  for (auto& h : out) CHECK(h.node != 1);
}

TEST_CASE("after a load, the document maps built in pieces answer as built whole; a change between pieces starts over") {
  const uint32_t dim = 4;
  HnswIndex idx(dim, false, HnswParams{Metric::L2, 4, 20, 20});
  // 3,000 documents on 1,000 vectors: most nodes hold more than one.
  for (int64_t d = 1; d <= 3000; d++) {
    float v[4] = {(float)(d % 1000), 1, 2, 3};
    idx.put(d, v);
  }
  idx.remove(5);
  idx.remove(1005);
  idx.remove(2005);  // node 5 a tombstone
  idx.link_pending(1);
  const Image image(idx);
  auto load = [&](HnswIndex& x) { image.load(x); };
  HnswIndex whole(dim, false, HnswParams{Metric::L2, 4, 20, 20}), pieces(dim, false, HnswParams{Metric::L2, 4, 20, 20});
  load(whole);
  load(pieces);
  CHECK_FALSE(pieces.maps_ready());
  HnswIndex::MapBuild b;
  int n = 0;
  while (!pieces.build_maps_piece(&b, 128)) n++;
  CHECK(n == 1000 / 128);  // 7 pieces that do not finish, the 8th does
  CHECK(pieces.maps_ready());
  for (int64_t d = 0; d <= 3001; d++) CHECK(pieces.node_of(d) == whole.node_of(d));
  CHECK(pieces.node_of(5) == -1);
  // The fingerprint map too: the same vector again shares its node.
  float again[4] = {7, 1, 2, 3};
  const int64_t at = whole.node_of(7);
  pieces.put(4000, again);
  CHECK(pieces.node_of(4000) == at);
  CHECK(pieces.nodes() == 1000);
  // A put between two pieces (answered by scans, the maps left unbuilt):
  // the build in pieces starts over, and takes the new node in.
  HnswIndex changed(dim, false, HnswParams{Metric::L2, 4, 20, 20});
  load(changed);
  HnswIndex::MapBuild c;
  CHECK_FALSE(changed.build_maps_piece(&c, 600));
  float fresh[4] = {5000, 0, 0, 0};
  changed.put(6000, fresh);
  CHECK_FALSE(changed.maps_ready());
  CHECK_FALSE(changed.build_maps_piece(&c, 600));  // nodes 0-599 again, not 600-999
  CHECK(changed.build_maps_piece(&c, 600));
  const uint64_t scans = changed.scanned();  // the put's two scans
  CHECK(scans > 0);
  CHECK(changed.node_of(6000) == 1000);
  CHECK(changed.node_of(7) == at);
  CHECK(changed.scanned() == scans);  // through the maps now
  // A load between two pieces: the build starts over from the first node.
  HnswIndex reloaded(dim, false, HnswParams{Metric::L2, 4, 20, 20});
  load(reloaded);
  HnswIndex::MapBuild r;
  CHECK_FALSE(reloaded.build_maps_piece(&r, 900));
  load(reloaded);
  CHECK_FALSE(reloaded.build_maps_piece(&r, 900));  // nodes 0-899 again, not 900-999
  CHECK(reloaded.build_maps_piece(&r, 900));
  for (int64_t d = 0; d <= 3001; d++) CHECK(reloaded.node_of(d) == whole.node_of(d));
}

TEST_CASE("after a load, put, remove and node_of answer by scans as the maps would, until the scans would cost a build") {
  const uint32_t dim = 4;
  const HnswParams params{Metric::L2, 4, 20, 20};
  HnswIndex idx(dim, false, params);
  // 1,020 documents on 1,000 vectors (documents 1001-1020 share those of
  // 1-20), then two tombstones (the nodes of vectors 5 and 8: their
  // documents gone) and a node whose first document left (vector 6: 1006
  // left on it).
  for (int64_t d = 1; d <= 1020; d++) {
    float v[4] = {(float)(d % 1000), 1, 2, 3};
    idx.put(d, v);
  }
  for (int64_t d : {5, 1005, 8, 1008, 6}) idx.remove(d);
  idx.link_pending(1);
  const Image image(idx);
  auto load = [&](HnswIndex& x) { image.load(x); };
  HnswIndex scanned(dim, false, params), mapped(dim, false, params), plain(dim, false, params);
  load(scanned);
  load(mapped);
  load(plain);
  HnswIndex::MapBuild b, pb;
  REQUIRE(mapped.build_maps_piece(&b, UINT32_MAX));
  REQUIRE(plain.build_maps_piece(&pb, UINT32_MAX));
  // The same writes into both: a replaced vector (its old node keeps its
  // other document), a vector another node holds (shared, not a new node),
  // a new one, a document written on a tombstone's vector (revived), the
  // same vector again (nothing), removes of a node's first document and of
  // one that is not its first, and of a document that has none.
  auto both = [&](auto&& f) {
    f(scanned);
    f(mapped);
  };
  float v7[4] = {7, 1, 2, 3}, v50[4] = {50, 1, 2, 3}, vnew[4] = {5000, 1, 2, 3}, v5[4] = {5, 1, 2, 3};
  both([&](HnswIndex& x) { x.put(1, v7); });      // 1 leaves vector 1's node (1001 stays), joins 7's
  both([&](HnswIndex& x) { x.put(2000, v50); });  // shares 50's node
  both([&](HnswIndex& x) { x.put(2001, vnew); }); // a new node
  both([&](HnswIndex& x) { x.put(2002, v5); });   // 5's node revived
  both([&](HnswIndex& x) { x.put(7, v7); });      // unchanged
  both([&](HnswIndex& x) { x.remove(12); });      // 12's node's first document (1012 stays)
  both([&](HnswIndex& x) { x.remove(1010); });    // not 10's node's first
  both([&](HnswIndex& x) { x.remove(9999); });    // none
  CHECK_FALSE(scanned.maps_ready());
  CHECK(scanned.scanned() > 0);
  // Each kind of document, by scans still.
  for (int64_t d : {8, 1008, 5, 1005, 2002, 1, 1001, 7, 1007, 6, 1006, 12, 1012, 10, 1010, 50, 2000, 2001, 9999})
    CHECK(scanned.node_of(d) == mapped.node_of(d));
  CHECK_FALSE(scanned.maps_ready());
  CHECK(scanned.nodes() == mapped.nodes());
  CHECK(scanned.documents() == mapped.documents());
  for (int64_t d = 0; d <= 2002; d++) CHECK(scanned.node_of(d) == mapped.node_of(d));
  std::vector<int64_t> a, m;
  for (uint32_t n = 0; n < mapped.nodes(); n++) {
    a.clear();
    m.clear();
    scanned.docs_of(n, &a);
    mapped.docs_of(n, &m);
    CHECK(a == m);
  }
  // 2,003 lookups: past what scans may cost the maps were built, once.
  CHECK(scanned.maps_ready());
  CHECK(scanned.whole_builds() == 1);
  // Lookups that count as they go: as many as fit, then a build. The
  // documents sharing nodes cost more than nodes: fewer than kScanRounds.
  HnswIndex counting(dim, false, params);
  load(counting);
  uint64_t fit = 0;
  while (true) {
    const uint64_t before = counting.scanned();
    CHECK(counting.node_of(5000 + (int64_t)fit) == -1);
    if (counting.maps_ready()) break;
    CHECK(counting.scanned() > before);
    fit++;
  }
  CHECK(counting.whole_builds() == 1);
  CHECK(fit > 0);
  CHECK(fit < HnswIndex::kScanRounds);
  // A caller that reserves: as many fit, reserved at once from any thread;
  // put, remove and node_of then build only as a guard against a caller
  // that reserved too few: past kOverrun times the bound.
  HnswIndex reserving(dim, false, params);
  load(reserving);
  CHECK_FALSE(reserving.reserve(HnswIndex::kScanRounds + 1));
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&] {
      while (reserving.reserve(1)) granted++;
    });
  for (auto& t : threads) t.join();
  CHECK(granted == fit);
  CHECK_FALSE(reserving.reserve(1));
  for (int64_t d : {8, 1008, 5, 1005, 1, 1001, 7, 1007, 6, 1006, 12, 1012, 10, 1010, 50, 2000, 9999})
    CHECK(reserving.node_of(d) == plain.node_of(d));
  float v9[4] = {9, 1, 2, 3};
  reserving.put(3000, v9);
  CHECK(reserving.node_of(3000) == plain.node_of(9));
  CHECK_FALSE(reserving.maps_ready());
  CHECK(reserving.whole_builds() == 0);
  uint64_t more = 20;  // the lookups above
  while (!reserving.maps_ready()) {
    CHECK(reserving.node_of(-1) == -1);
    more++;
  }
  CHECK(more > (HnswIndex::kOverrun - 1) * fit);
  CHECK(more <= HnswIndex::kOverrun * fit + 1);
  CHECK(reserving.whole_builds() == 1);
  CHECK(reserving.reserve(UINT64_MAX));  // built: every reservation granted
  CHECK(reserving.node_of(3000) == plain.node_of(9));
  // A graph rebuilt (damaged) keeps them: the same nodes, the same vectors.
  reserving.rebuild_graph(1);
  CHECK(reserving.maps_ready());
  CHECK(reserving.node_of(3000) == plain.node_of(9));
  float v11[4] = {11, 1, 2, 3};
  const size_t nodes = reserving.nodes();
  reserving.put(3001, v11);
  CHECK(reserving.node_of(3001) == plain.node_of(11));
  CHECK(reserving.nodes() == nodes);
  CHECK(reserving.whole_builds() == 1);
}

TEST_CASE("f16: vectors with the same halves share a node, others do not") {
  HnswIndex idx(35, true, HnswParams{Metric::L2, 4, 20, 20});  // 70 bytes: words and a tail
  std::vector<float> a(35), b(35), c(35), pa, pb, pc;
  for (int i = 0; i < 35; i++) a[i] = 0.1f * (float)i - 1.5f;
  b = a;
  b[34] = std::nextafter(a[34], 0.0f);  // rounds to the same half
  c = a;
  c[34] = a[34] + 0.25f;  // in the tail, a different half
  REQUIRE(idx.prepare(a.data(), &pa, "a").is_ok());
  REQUIRE(idx.prepare(b.data(), &pb, "b").is_ok());
  REQUIRE(idx.prepare(c.data(), &pc, "c").is_ok());
  idx.put(1, pa.data());
  idx.put(2, pb.data());
  idx.put(3, pc.data());
  idx.link_pending(1);
  CHECK(idx.nodes() == 2);
  CHECK(idx.documents() == 3);
  CHECK(idx.node_of(1) == idx.node_of(2));
  CHECK(idx.node_of(3) != idx.node_of(1));
}

TEST_CASE("pin and load: the same answers, the vector table used in place") {
  const uint32_t dim = 32;
  bench::Clustered gen(dim, 10);
  auto pts = gen.points(2000, 8);
  auto idx = build(pts, dim, HnswParams{}, 2);
  idx->remove(7);
  HnswIndex::Pin pin;
  idx->pin(&pin);
  std::string vecs, &meta = pin.meta, &graph = pin.graph, links = pin.links0_string();
  table_of(pin, vecs);
  auto ref = [](std::string_view bytes) {
    ExtentRef e;
    e.bytes = bytes;
    return e;
  };
  HnswIndex back(dim, false, HnswParams{});
  REQUIRE(back.load_table(meta, ref(vecs)));
  REQUIRE(back.load_graph(graph, ref(links)));
  CHECK(back.graph_bytes() == idx->graph_bytes());
  auto qs = gen.points(20, 77);
  std::vector<Hit> a, b;
  for (size_t i = 0; i < 20; i++) {
    std::vector<float> q;
    REQUIRE(idx->prepare_query(&qs[i * dim], &q, "q").is_ok());
    idx->search(q.data(), 10, 50, nullptr, &a);
    back.search(q.data(), 10, 50, nullptr, &b);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); k++) CHECK(a[k].node == b[k].node);
  }
  // The loaded index knows its tombstone: a search for everything leaves it out.
  std::vector<float> q0;
  REQUIRE(idx->prepare_query(&qs[0], &q0, "q").is_ok());
  back.search(q0.data(), 2000, 2000, nullptr, &b);
  CHECK(b.size() == 1999);
  // A graph with a link beyond the table is refused; rebuilt from the table,
  // it answers with the same node numbers.
  std::string bad = links;
  for (size_t k = 0; k < 8; k++) bad[bad.size() / 2 + k] = (char)0xFF;
  HnswIndex no(dim, false, HnswParams{});
  REQUIRE(no.load_table(meta, ref(vecs)));
  CHECK_FALSE(no.load_graph(graph, ref(bad)));
  no.rebuild_graph(2);
  std::vector<float> q;
  REQUIRE(no.prepare_query(&qs[0], &q, "q").is_ok());
  idx->exact(q.data(), 10, nullptr, &a);
  no.search(q.data(), 10, 100, nullptr, &b);
  CHECK(a.size() == b.size());
  CHECK(a[0].node == b[0].node);
  // A table that does not match its size is refused.
  HnswIndex no2(dim, false, HnswParams{});
  CHECK_FALSE(no2.load_table(meta, ref(std::string_view(vecs).substr(1))));
}

TEST_CASE("a pin is the index as it stood, and rebase_prefix onto its table changes no answer") {
  // What a checkpoint does: freeze the table's part since the image, pin,
  // let writes go on, write the pin as the image, then point the live
  // index's first nodes and its untouched lists into that image. Also with
  // no freeze (the pin copies the table), and after a checkpoint that did
  // not finish (a frozen part, nodes after it: nothing frozen again, the
  // pin copies both).
  for (const char* how : {"frozen", "not frozen", "frozen twice"}) {
  INFO(how);
  const std::string way = how;
  const uint32_t dim = 16;
  bench::Clustered gen(dim, 6);
  auto pts = gen.points(1500, 3);
  auto idx = build(pts, dim, HnswParams{}, 2);
  if (way == "frozen twice") {
    idx->freeze();
    std::vector<float> v;
    REQUIRE(idx->prepare(&pts[0], &v, "v").is_ok());
    for (int k = 0; k < 3; k++) v[k] += 0.5f;
    idx->put(1501, v.data());
    idx->link_pending(1);
  }
  const int64_t docs_at_pin = way == "frozen twice" ? 1501 : 1500;
  std::map<int64_t, int64_t> node_at_pin;
  for (int64_t d = 1; d <= docs_at_pin; d++) node_at_pin[d] = idx->node_of(d);
  std::vector<float> first_added;
  idx->vector_of(1400, &first_added);
  const size_t memory_at_pin = idx->memory_bytes();
  if (way != "not frozen") idx->freeze();
  CHECK(idx->memory_bytes() == memory_at_pin);  // moved, not copied
  HnswIndex::Pin pin;
  idx->pin(&pin);
  // Frozen, the pin shares the index's part (the index holds it too); else a copy of its own.
  REQUIRE(pin.rest_owner);
  CHECK(pin.rest_owner.use_count() == (way == "frozen" ? 2 : 1));
  CHECK(pin.table[1].size() == (size_t)docs_at_pin * idx->dim() * 4);
  std::string table;
  table_of(pin, table);
  const std::string graph_at_pin = idx->graph_bytes();
  // Writes after the pin: new documents, a removal, a document given a new vector.
  auto more = gen.points(300, 4);
  std::vector<float> v;
  for (size_t i = 0; i < 300; i++) {
    REQUIRE(idx->prepare(&more[i * dim], &v, "v").is_ok());
    idx->put(2000 + (int64_t)i, v.data());
  }
  idx->remove(5);
  REQUIRE(idx->prepare(&more[0], &v, "v").is_ok());
  idx->put(6, v.data());
  idx->link_pending(2);
  // The pin still holds the index as it stood; the frozen part reads as before.
  CHECK(pin.nodes == (size_t)docs_at_pin);
  std::vector<float> again;
  idx->vector_of(1400, &again);
  CHECK(again == first_added);
  HnswIndex back(dim, false, HnswParams{});
  auto ref = [](std::string_view bytes) {
    ExtentRef e;
    e.bytes = bytes;
    return e;
  };
  REQUIRE(back.load_table(pin.meta, ref(table)));
  const std::string links = pin.links0_string();
  REQUIRE(back.load_graph(pin.graph, ref(links)));
  CHECK(back.graph_bytes() == graph_at_pin);
  std::vector<std::pair<int64_t, uint32_t>> docs;
  pin.doc_nodes(&docs);
  REQUIRE(docs.size() == (size_t)docs_at_pin);
  for (auto& [d, n] : docs) CHECK(node_at_pin[d] == (int64_t)n);
  // Rebased onto the image's table (and its lists, where the index still
  // read them in place), the live index answers as before.
  auto qs = gen.points(20, 9);
  std::vector<std::vector<float>> q(20);
  std::vector<std::vector<Hit>> before(20);
  for (size_t i = 0; i < 20; i++) {
    REQUIRE(idx->prepare_query(&qs[i * dim], &q[i], "q").is_ok());
    idx->search(q[i].data(), 10, 64, nullptr, &before[i]);
  }
  std::vector<float> stored_before, stored_after;
  idx->vector_of(1700, &stored_before);
  idx->rebase_prefix(table.data(), links.data(), pin.nodes);
  idx->vector_of(1700, &stored_after);
  CHECK(stored_before == stored_after);
  for (size_t i = 0; i < 20; i++) {
    std::vector<Hit> after;
    idx->search(q[i].data(), 10, 64, nullptr, &after);
    REQUIRE(after.size() == before[i].size());
    for (size_t k = 0; k < after.size(); k++) CHECK(after[k].node == before[i][k].node);
  }
  CHECK(idx->node_of(5) == -1);
  CHECK(idx->node_of(2299) >= docs_at_pin);
  // The frozen part let go by the index: the pin holds the last of it.
  if (way != "not frozen") CHECK(pin.rest_owner.use_count() == 1);
  }
}

TEST_CASE("a node not yet linked when its table part was frozen is not dropped from it") {
  const uint32_t dim = 8;
  bench::Clustered gen(dim, 3);
  auto pts = gen.points(40, 5);
  auto idx = build(pts, dim, HnswParams{}, 1);
  std::vector<float> v;
  REQUIRE(idx->prepare(&pts[0], &v, "v").is_ok());
  for (float& x : v) x += 1.0f;
  idx->put(100, v.data());  // pending: not linked yet
  REQUIRE(idx->pending() == 1);
  idx->freeze();
  idx->remove(100);
  idx->drop_pending();  // a rollback's: the node stays in the frozen part, with no document
  CHECK(idx->nodes() == 41);
  CHECK(idx->node_of(100) == -1);
  REQUIRE(idx->prepare(&pts[dim], &v, "v").is_ok());
  for (float& x : v) x -= 1.0f;
  idx->put(101, v.data());  // after it, in the part since
  idx->drop_pending();
  CHECK(idx->nodes() == 42);
  idx->remove(101);
  idx->drop_pending();  // this one goes
  CHECK(idx->nodes() == 41);
  idx->link_pending(1);
  std::vector<float> q;
  REQUIRE(idx->prepare_query(&pts[2 * dim], &q, "q").is_ok());
  std::vector<Hit> hits;
  idx->search(q.data(), 40, 100, nullptr, &hits);
  CHECK(hits.size() == 40);
}

TEST_CASE("a copy for a pinned read shares the frozen part and answers as the index") {
  const uint32_t dim = 8;
  bench::Clustered gen(dim, 4);
  auto pts = gen.points(300, 6);
  auto idx = build(pts, dim, HnswParams{}, 1);
  idx->freeze();
  CHECK_FALSE(idx->would_freeze());
  auto more = gen.points(50, 7);
  std::vector<float> v;
  for (size_t i = 0; i < 50; i++) {
    REQUIRE(idx->prepare(&more[i * dim], &v, "v").is_ok());
    idx->put(1000 + (int64_t)i, v.data());
  }
  idx->link_pending(1);
  idx->remove(3);
  CHECK_FALSE(idx->would_freeze());  // a frozen part no switch let go: nothing more is frozen
  idx->freeze();
  HnswIndex::Pin pin;
  idx->pin(&pin);  // the frozen part and the 50 after it, copied together
  CHECK(pin.rest_owner.use_count() == 1);
  CHECK(pin.table[1].size() == 350 * dim * 4);
  auto copy = idx->pinned_copy();
  std::vector<float> q;
  std::vector<Hit> a, b;
  for (size_t i = 0; i < 10; i++) {
    REQUIRE(idx->prepare_query(&more[i * dim], &q, "q").is_ok());
    idx->exact(q.data(), 10, nullptr, &a);
    copy->exact(q.data(), 10, nullptr, &b);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); k++) {
      CHECK(a[k].node == b[k].node);
      CHECK(a[k].distance == b[k].distance);
    }
  }
  std::vector<float> x, y;
  idx->vector_of(100, &x);  // in the frozen part
  copy->vector_of(100, &y);
  CHECK(x == y);
}

TEST_CASE("after a load, a change copies the level-0 blocks it changes, not every list; the graph is the same") {
  const uint32_t dim = 16;
  auto on_line = [&](double x, uint32_t salt) { return point_on_line(dim, x, salt); };
  const std::vector<float> pts = points_on_line(dim, 12000, 0, 0);
  HnswParams l2;
  l2.metric = Metric::L2;
  auto idx = build(pts, dim, l2, 2);
  HnswIndex::Pin pin;
  idx->pin(&pin);
  std::string table;
  table_of(pin, table);
  auto ref = [](std::string_view bytes) {
    ExtentRef e;
    e.bytes = bytes;
    return e;
  };
  HnswIndex back(dim, false, l2);
  REQUIRE(back.load_table(pin.meta, ref(table)));
  const std::string links = pin.links0_string();
  REQUIRE(back.load_graph(pin.graph, ref(links)));
  CHECK(back.level0_owned_bytes() == 0);
  const size_t block = HnswIndex::kLevel0BlockNodes * (1 + 2 * HnswParams{}.m) * 4;
  // A new node: the image's last block (partly full) is copied, no other.
  std::vector<float> more;
  for (uint32_t i = 0; i < 40; i++) {
    auto p = on_line(6.0005 + i * 1e-3, 7);
    more.insert(more.end(), p.begin(), p.end());
  }
  std::vector<float> v;
  REQUIRE(back.prepare(&more[0], &v, "v").is_ok());
  back.put(20000, v.data());
  CHECK(back.level0_owned_bytes() == block);
  // Linked in the middle of the line: that block and the ones beside it at
  // most, not all 47.
  back.link_pending(2);
  CHECK(back.level0_owned_bytes() <= 4 * block);
  // The same changes to the index the pin came from (all its lists its
  // own): the same graph, on any number of threads.
  idx->put(20000, v.data());
  idx->link_pending(1);
  CHECK(back.graph_bytes() == idx->graph_bytes());
  for (size_t i = 1; i < 40; i++) {
    REQUIRE(back.prepare(&more[i * dim], &v, "v").is_ok());
    back.put(20000 + (int64_t)i, v.data());
    idx->put(20000 + (int64_t)i, v.data());
  }
  back.remove(3);
  idx->remove(3);
  back.link_pending(2);
  idx->link_pending(2);
  CHECK(back.graph_bytes() == idx->graph_bytes());
  // Rebased onto a new image of it, nothing is owned, and it answers as before.
  HnswIndex::Pin again;
  back.pin(&again);
  std::string table2;
  table_of(again, table2);
  std::vector<float> qs;
  for (uint32_t i = 0; i < 10; i++) {
    auto p = on_line(i * 1.1 + 0.3, 3);
    qs.insert(qs.end(), p.begin(), p.end());
  }
  std::vector<std::vector<Hit>> before(10);
  std::vector<std::vector<float>> q(10);
  for (size_t i = 0; i < 10; i++) {
    REQUIRE(back.prepare_query(&qs[i * dim], &q[i], "q").is_ok());
    back.search(q[i].data(), 10, 64, nullptr, &before[i]);
  }
  const std::string links2 = again.links0_string();
  back.rebase(table2.data(), links2.data());
  CHECK(back.level0_owned_bytes() == 0);
  CHECK(back.graph_bytes() == idx->graph_bytes());
  for (size_t i = 0; i < 10; i++) {
    std::vector<Hit> after;
    back.search(q[i].data(), 10, 64, nullptr, &after);
    REQUIRE(after.size() == before[i].size());
    for (size_t k = 0; k < after.size(); k++) CHECK(after[k].node == before[i][k].node);
  }
}

TEST_CASE("a pin shares the level-0 blocks: a write copies one first; the switch reads the unchanged ones from the image") {
  // Two indexes given the same writes build the same graph (determinism):
  // `twin` is never pinned, so any write that reached a pinned block, or
  // any block read from the wrong place after a switch, shows as a
  // difference between them.
  // Points along a line: writes at its end touch the last blocks alone.
  const uint32_t dim = 8;
  HnswParams l2;
  l2.metric = Metric::L2;
  auto idx = build(points_on_line(dim, 3000, 0, 0), dim, l2, 2), twin = build(points_on_line(dim, 3000, 0, 0), dim, l2, 1);
  const size_t block = HnswIndex::kLevel0BlockNodes * (1 + 2 * HnswParams{}.m) * 4;
  const size_t blocks = (3000 + 255) / 256;
  CHECK(idx->level0_owned_bytes() == blocks * block);
  auto ref = [](std::string_view bytes) {
    ExtentRef e;
    e.bytes = bytes;
    return e;
  };
  int64_t next_doc = 10000;
  double at = 3.0;  // where the line goes on
  std::list<std::string> images;  // the bytes the indexes read in place
  auto write_both = [&](size_t puts, int64_t removed, uint32_t salt) {
    auto more = points_on_line(dim, puts, at, salt);
    at += (double)puts * 1e-3;
    std::vector<float> v;
    for (size_t i = 0; i < puts; i++, next_doc++) {
      REQUIRE(idx->prepare(&more[i * dim], &v, "v").is_ok());
      idx->put(next_doc, v.data());
      twin->put(next_doc, v.data());
    }
    idx->remove(removed);
    twin->remove(removed);
    idx->link_pending(2);
    twin->link_pending(1);
  };
  for (std::string way : {"writes after the pin", "no write after the pin", "a pin let go, then another"}) {
    CAPTURE(way);
    HnswIndex::Pin pin;
    if (way == "a pin let go, then another") {
      HnswIndex::Pin gone;  // a checkpoint that did not finish
      idx->pin(&gone);
      write_both(40, 3, 5);
      // Its blocks, copied away by the writes, are used again from the next pin on.
    }
    if (way == "no write after the pin") write_both(100, 4, 6);  // some blocks the index's
    REQUIRE(idx->level0_owned_bytes() > 0);
    const size_t chunk_bytes = idx->level0_chunk_bytes();
    idx->pin(&pin);
    CHECK(idx->level0_chunk_bytes() == chunk_bytes);  // shared, not copied
    CHECK(pin.links0_owners.size() > 0);  // (a block per chunk; pieces where they meet)
    CHECK(pin.links0.size() <= pin.links0_owners.size() + 1);  // here: the image's blocks, then the index's
    CHECK(pin.links0_copy.empty());
    CHECK(parts_bytes(pin.links0) == pin.nodes * (1 + 2 * HnswParams{}.m) * 4);
    const std::string& at_pin = images.emplace_back(pin.links0_string());
    const std::string graph_at_pin = idx->graph_bytes();
    CHECK(graph_at_pin == twin->graph_bytes());
    const size_t owned_at_pin = idx->level0_owned_bytes();
    if (way != "no write after the pin") write_both(300, 7 + (int64_t)pin.nodes % 5, 12);
    else CHECK(idx->level0_owned_bytes() == owned_at_pin);
    // The pin reads the lists as they stood.
    CHECK(pin.links0_string() == at_pin);
    CHECK(idx->graph_bytes() == twin->graph_bytes());
    // The image written from the pin, and the switch to it.
    std::string& table = images.emplace_back();
    table_of(pin, table);
    HnswIndex back(dim, false, l2);
    REQUIRE(back.load_table(pin.meta, ref(table)));
    REQUIRE(back.load_graph(pin.graph, ref(at_pin)));
    CHECK(back.graph_bytes() == graph_at_pin);
    const size_t chunks_before = idx->level0_chunk_bytes();
    idx->rebase_prefix(table.data(), at_pin.data(), pin.nodes);
    CHECK(idx->graph_bytes() == twin->graph_bytes());
    if (way == "no write after the pin") {
      CHECK(idx->level0_owned_bytes() == 0);  // every list in the image,
      CHECK(idx->level0_chunk_bytes() == 0);  // no memory kept for them:
      for (const auto& chunk : pin.links0_owners) CHECK(chunk.use_count() == 1);  // the pin's hold is the last
    } else {
      // The blocks the writes changed stay the index's (the line's last
      // ones and those its new nodes are in); the others are the image's.
      CHECK(idx->level0_owned_bytes() > 0);
      CHECK(idx->level0_owned_bytes() <= 4 * block);  // of 13 or more
      // The chunks none of whose blocks are in use let go (natively).
      CHECK(idx->level0_chunk_bytes() < chunks_before);
      CHECK(idx->level0_chunk_bytes() >= idx->level0_owned_bytes());
    }
    // Writes after the switch go on from the image's lists and its own
    // (the pin let go first: a chunk trimmed while in use would be freed).
    const int64_t removed = 20 + (int64_t)pin.nodes % 7;
    pin = HnswIndex::Pin();
    write_both(60, removed, 13);
    CHECK(idx->graph_bytes() == twin->graph_bytes());
    // The tables as a new image would have them: read from copies of their own from here on.
    HnswIndex::Pin all;
    idx->pin(&all);
    std::string &table2 = images.emplace_back(), &links2 = images.emplace_back(all.links0_string());
    table_of(all, table2);
    idx->rebase(table2.data(), links2.data());
    CHECK(idx->graph_bytes() == twin->graph_bytes());
    CHECK(idx->level0_owned_bytes() == 0);
    CHECK(idx->level0_chunk_bytes() == 0);
  }
  auto qs = points_on_line(dim, 20, 0.5, 9);
  std::vector<float> q;
  std::vector<Hit> a, b;
  for (size_t i = 0; i < 20; i++) {
    REQUIRE(idx->prepare_query(&qs[i * dim], &q, "q").is_ok());
    idx->search(q.data(), 10, 64, nullptr, &a);
    twin->search(q.data(), 10, 64, nullptr, &b);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); k++) CHECK(a[k].node == b[k].node);
  }
}

TEST_CASE("a pin into room taken before it: the bytes of a pin into none, in the memory taken") {
  const uint32_t dim = 16;
  bench::Clustered gen(dim, 6);
  // Cosine (inverse norms) and L2 (none), upper levels, and documents sharing a node.
  for (Metric metric : {Metric::Cosine, Metric::L2}) {
    CAPTURE((int)metric);
    auto pts = gen.points(3000, 4);
    auto idx = build(pts, dim, HnswParams{metric, 8, 40, 40}, 2);
    std::vector<float> v;
    REQUIRE(idx->prepare(&pts[0], &v, "v").is_ok());
    for (int64_t doc = 5001; doc <= 5040; doc++) idx->put(doc, v.data());
    idx->link_pending(1);
    auto check = [&](size_t added, bool fits) {
      CAPTURE(added);
      auto [meta, graph] = idx->pin_bytes();
      HnswIndex::Pin room;
      room.make_room(meta + 1024, graph + 1024);
      const char *m = room.meta.data(), *g = room.graph.data();
      const size_t mc = room.meta.capacity(), gc = room.graph.capacity();
      CHECK(room.meta.empty());
      CHECK(room.meta.capacity() >= meta + 1024);
      // Writes between the room and the pin, as beside a checkpoint.
      auto more = gen.points(added, 100 + (uint32_t)added);
      for (size_t i = 0; i < added; i++) {
        REQUIRE(idx->prepare(&more[i * dim], &v, "v").is_ok());
        idx->put((int64_t)(10000 + idx->nodes()), v.data());
      }
      idx->link_pending(1);
      HnswIndex::Pin fresh;
      idx->pin(&fresh);
      idx->pin(&room);
      CHECK(room.meta == fresh.meta);
      CHECK(room.graph == fresh.graph);
      CHECK(room.links0_string() == fresh.links0_string());
      CHECK(fresh.meta.size() == idx->pin_bytes().first);
      CHECK(fresh.graph.size() == idx->pin_bytes().second);
      // Into the memory taken, not memory of its own (of the size it needs).
      CHECK((room.meta.data() == m && room.meta.capacity() == mc) == fits);
      CHECK((room.graph.data() == g && room.graph.capacity() == gc) == fits);
    };
    check(0, true);
    check(20, true);    // within the room
    check(400, false);  // past it: the pin takes new memory, the same bytes
  }
}

TEST_CASE("cosine refuses a zero vector; non-finite values are refused") {
  HnswIndex idx(3, false, HnswParams{});
  std::vector<float> out;
  float z[3] = {0, 0, 0}, n[3] = {1, NAN, 0};
  CHECK(idx.prepare(z, &out, "v").code() == Code::Type);
  CHECK(idx.prepare(n, &out, "v").code() == Code::Type);
  CHECK(idx.prepare_query(z, &out, "v").code() == Code::Type);
  // Stored vectors keep their floats exactly; queries are normalised.
  float v[3] = {3, 4, 0};
  REQUIRE(idx.prepare(v, &out, "v").is_ok());
  CHECK(out == std::vector<float>{3, 4, 0});
  REQUIRE(idx.prepare_query(v, &out, "v").is_ok());
  CHECK(out[0] == doctest::Approx(0.6));
}

TEST_CASE("every kernel sums in the canonical order: the same bits, f32 and f16 alike") {
  // Every finite half value appears; lengths cover whole blocks of 32 and tails.
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; h++)
    if ((h & 0x7C00u) != 0x7C00u) halves.push_back((uint16_t)h);
  std::vector<float> decoded(halves.size());
  f16_to_f32(halves.data(), decoded.data(), halves.size());
  bench::Clustered gen(800, 3);
  auto q = gen.points(1, 11);
  auto sets = kernel_sets();
  REQUIRE(sets.back().name == std::string("scalar"));
  // The first set is the one in use: the index's kernels and the name reported.
  CHECK(sets.front().name == std::string(kernel_name()));
  CHECK((sets.front().dot == dot_kernel()));
  CHECK((sets.front().l2sq == l2sq_kernel()));
  CHECK((sets.front().dot16 == dot_f16_kernel()));
  CHECK((sets.front().l2sq16 == l2sq_f16_kernel()));
  const KernelSet& ref = sets.back();
  auto same = [](float x, float y) { return std::isnan(x) ? std::isnan(y) : memcmp(&x, &y, 4) == 0; };
  size_t checked = 0;
  for (const KernelSet& k : sets)
    for (size_t n : {1, 7, 31, 32, 33, 100, 768, 800})
      for (size_t off = 0; off + n <= halves.size(); off += 997 * n)
        for (bool l2 : {false, true}) {
          const float* b = &decoded[off];
          float want = (l2 ? ref.l2sq : ref.dot)(q.data(), b, n);
          float f32 = (l2 ? k.l2sq : k.dot)(q.data(), b, n);
          float f16 = (l2 ? k.l2sq16 : k.dot16)(q.data(), &halves[off], n);
          if (!same(f32, want) || !same(f16, want))
            FAIL_CHECK(k.name << " n " << n << " at " << off << (l2 ? " l2: " : " dot: ") << f32 << " / " << f16
                              << " (f16) vs scalar " << want);
          checked++;
        }
  MESSAGE("kernels: " << sets.size() << ", cases " << checked);
  CHECK(checked > 100 * sets.size());
}

TEST_CASE("GrowBuffer keeps its bytes as it grows past huge-page sizes") {
  // Growth in steps of a vector's size, as the unsaved part of a vector table
  // grows. Each step writes its bytes; every byte must read back after the
  // buffer has grown (and, on Linux, been remapped) many times, including past
  // the sizes where huge pages are requested for part of the mapping.
  for (size_t step : {512, 1024, 1536, 3072}) {
    size_t total = 24u << 20;
    void* hint = nullptr;
#ifdef __linux__
    // Where it can grow in place from an address that is not 2 MiB-aligned:
    // 64 KiB into a free range (mapped to find one, then unmapped).
    void* r = mmap(nullptr, total + (8u << 20), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(r != MAP_FAILED);
    munmap(r, total + (8u << 20));
    hint = (char*)r + (64u << 10);
#endif
    GrowBuffer b(hint);
    for (size_t n = 0; n < total; n += step) {
      b.resize(n + step);
      for (size_t i = 0; i < step; i += 8) {
        uint64_t v = (n + i) * 0x9E3779B97F4A7C15ull;
        memcpy(b.data() + n + i, &v, 8);
      }
    }
    size_t bad = 0;
    for (size_t i = 0; i + 8 <= b.size(); i += 8) {
      uint64_t v, want = i * 0x9E3779B97F4A7C15ull;
      memcpy(&v, b.data() + i, 8);
      bad += v != want;
    }
    CHECK_MESSAGE(bad == 0, "step " << step);
    CHECK(b.size() == (total + step - 1) / step * step);
#ifdef __linux__
    // One mapping from start to end: were it split (as huge-page advice for
    // part of it would do), the next mremap could not grow it.
    std::ifstream maps("/proc/self/maps");
    std::string line;
    uintptr_t lo = (uintptr_t)b.data(), hi = lo + b.capacity();
    int pieces = 0;
    while (std::getline(maps, line)) {
      uintptr_t a = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      uintptr_t e = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
      pieces += a < hi && e > lo;
    }
    CHECK_MESSAGE(pieces == 1, "step " << step << ": the buffer spans " << pieces << " mappings");
#endif
    b.release();
    CHECK(b.size() == 0);
  }
}

TEST_CASE("GrowArray: appends, moves, swaps and assigns keep every element") {
  GrowArray<IdEntry> a;
  CHECK(a.empty());
  for (int64_t i = 0; i < 1000000; i++) a.push_back({i, (uint64_t)i * 3});  // past 16 MiB: remapped many times
  REQUIRE(a.size() == 1000000);
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); i++) bad += a[i].id != (int64_t)i || a[i].loc != i * 3;
  CHECK(bad == 0);
  CHECK(a.front().id == 0);
  CHECK(a.back().id == 999999);
  GrowArray<IdEntry> b = std::move(a);
  CHECK(a.empty());
  CHECK(b.size() == 1000000);
  GrowArray<IdEntry> c(3);
  c[0] = {7, 7};
  c.swap(b);
  CHECK(c.size() == 1000000);
  CHECK(b.size() == 3);
  CHECK(b[0].id == 7);
  b.assign(c.begin() + 10, c.begin() + 20);
  REQUIRE(b.size() == 10);
  CHECK(b[9].id == 19);
  size_t cap = b.capacity();
  b.reserve(cap * 4);
  CHECK(b.size() == 10);
  CHECK(b.capacity() >= cap * 4);
  CHECK(b[9].id == 19);
  b.clear();
  CHECK(b.empty());
}
