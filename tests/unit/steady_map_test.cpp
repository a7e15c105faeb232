// SteadyMap: the same answers as std::unordered_map under any mix of
// inserts, erases and lookups, while its growth moves a few buckets an
// operation instead of every entry at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "index/steady_map.h"

using namespace kitfox;

namespace {

template <typename K, typename V>
void check_same(const SteadyMap<K, V>& m, const std::unordered_map<K, V>& ref) {
  REQUIRE(m.size() == ref.size());
  for (auto& [k, v] : ref) {
    const V* got = m.find(k);
    REQUIRE(got);
    CHECK(*got == v);
  }
  size_t seen = 0;
  m.for_each([&](const auto& k, const V& v) {
    auto it = ref.find(K(k));
    REQUIRE(it != ref.end());
    CHECK(it->second == v);
    seen++;
    return true;
  });
  CHECK(seen == ref.size());
}

}  // namespace

TEST_CASE("SteadyMap answers as std::unordered_map does, through growth, erases and clear") {
  std::mt19937_64 rng(5);
  SteadyMap<int64_t, int64_t> m;
  std::unordered_map<int64_t, int64_t> ref;
  bool saw_growing = false;
  size_t wrong = 0;  // counted, not checked one by one: 200,000 operations
  for (int round = 0; round < 200000; round++) {
    int64_t k = (int64_t)(rng() % 50000) * (round % 3 == 0 ? 1024 : 1);  // strided keys too
    switch (rng() % 4) {
      case 0:
      case 1:
        m[k] = round;
        ref[k] = round;
        break;
      case 2:
        wrong += m.erase(k) != (ref.erase(k) == 1);
        break;
      default: {
        const int64_t* v = m.find(k);
        auto it = ref.find(k);
        wrong += (v != nullptr) != (it != ref.end()) || (v && *v != it->second);
      }
    }
    saw_growing = saw_growing || m.growing();
    if (round % 40000 == 39999) check_same(m, ref);
  }
  CHECK(wrong == 0);
  CHECK(saw_growing);
  check_same(m, ref);
  m.clear();
  ref.clear();
  check_same(m, ref);
  m[7] = 1;
  CHECK(*m.find(int64_t(7)) == 1);
  CHECK(m.size() == 1);
}

TEST_CASE("SteadyMap with text keys: looked up by string_view, found while it grows") {
  SteadyMap<std::string, std::vector<int64_t>> m;
  std::unordered_map<std::string, std::vector<int64_t>> ref;
  for (int i = 0; i < 30000; i++) {
    std::string k = "term" + std::to_string(i % 9000);
    m[std::string_view(k)].push_back(i);
    ref[k].push_back(i);
    if (i % 7 == 0) {
      std::string e = "term" + std::to_string((i * 13) % 9000);
      CHECK(m.erase(std::string_view(e)) == (ref.erase(e) == 1));
    }
  }
  check_same(m, ref);
  CHECK(m.find(std::string_view("absent")) == nullptr);
}

TEST_CASE("SteadyMap grows in pieces: no insert moves more than a few buckets, and the move ends in time") {
  SteadyMap<int64_t, int64_t> m;
  size_t growths = 0, longest = 0, run = 0, overfull = 0, odd_growth = 0;
  bool was = false;
  for (int64_t i = 0; i < 1 << 20; i++) {
    size_t buckets = m.bucket_count();
    m[i] = i;
    if (m.growing()) {
      run++;
      if (!was) growths++;
      // While it moves, the table it moves into never has to grow again.
      overfull += m.size() > m.bucket_count();
    } else {
      longest = std::max(longest, run);
      run = 0;
    }
    was = m.growing();
    // Growth allocates one table of twice the buckets: nothing else at once.
    odd_growth += m.bucket_count() != buckets && m.bucket_count() != buckets * 2 && buckets != 0;
  }
  CHECK(overfull == 0);
  CHECK(odd_growth == 0);
  CHECK(growths >= 15);  // 16 -> 2^20 buckets, each growth moved in pieces
  // A move of B buckets takes about B / kMoveBuckets inserts: never more
  // than the B inserts that would fill the new table.
  CHECK(longest <= (size_t(1) << 19) / SteadyMap<int64_t, int64_t>::kMoveBuckets + 1);
  for (int64_t i = 0; i < 1 << 20; i += 4099) REQUIRE(*m.find(i) == i);
}

TEST_CASE("SteadyMap reserve: room made at once, entries kept") {
  SteadyMap<int64_t, uint32_t> m;
  for (int64_t i = 0; i < 1000; i++) m[i] = (uint32_t)i;
  m.reserve(100000);
  CHECK(m.bucket_count() >= 100000);
  CHECK_FALSE(m.growing());
  size_t buckets = m.bucket_count();
  for (int64_t i = 1000; i < 100000; i++) m[i] = (uint32_t)i;
  CHECK(m.bucket_count() == buckets);
  for (int64_t i = 0; i < 100000; i += 97) REQUIRE(*m.find(i) == (uint32_t)i);
}

TEST_CASE("SteadyMap as a multimap: entries under one key found and erased one by one, through growth") {
  SteadyMap<uint32_t, uint32_t> m;
  std::unordered_multimap<uint32_t, uint32_t> ref;
  for (uint32_t n = 0; n < 50000; n++) {
    uint32_t fp = n % 997 == 0 ? 7 : n * 2654435761u;  // many under key 7
    m.insert_multi(fp, n);
    ref.emplace(fp, n);
  }
  auto under = [&](uint32_t k) {
    std::vector<uint32_t> got;
    m.for_each_equal(k, [&](uint32_t v) {
      got.push_back(v);
      return true;
    });
    std::sort(got.begin(), got.end());
    return got;
  };
  std::vector<uint32_t> want;
  auto range = ref.equal_range(7);
  for (auto it = range.first; it != range.second; ++it) want.push_back(it->second);
  std::sort(want.begin(), want.end());
  CHECK(under(7) == want);
  CHECK(m.size() == ref.size());
  // Stopping early: f returning false ends the walk.
  int calls = 0;
  m.for_each_equal(uint32_t(7), [&](uint32_t) { return ++calls < 3; });
  CHECK(calls == 3);
  // Erase one entry of key 7, then one that is not there.
  CHECK(m.erase_first(uint32_t(7), [&](uint32_t v) { return v == want[10]; }));
  CHECK_FALSE(m.erase_first(uint32_t(7), [&](uint32_t v) { return v == want[10]; }));
  want.erase(want.begin() + 10);
  CHECK(under(7) == want);
  CHECK(m.size() == ref.size() - 1);
  CHECK(under(12345u).empty() == (ref.count(12345u) == 0));
}

TEST_CASE("SteadyMap keeps its entries in chunks: an erased entry's room is used again; swap and clear keep them whole") {
  SteadyMap<std::string, std::vector<int64_t>> m;
  for (int64_t i = 0; i < 10000; i++) m[std::to_string(i)].push_back(i);
  const size_t bytes = m.memory_bytes();
  for (int round = 0; round < 3; round++) {
    for (int64_t i = 0; i < 5000; i++) CHECK(m.erase(std::to_string(i)));
    for (int64_t i = 0; i < 5000; i++) m[std::to_string(i)] = {i, i};
  }
  CHECK(m.memory_bytes() == bytes);  // no chunk more: the erased entries' room taken again
  SteadyMap<std::string, std::vector<int64_t>> o;
  o.swap(m);
  CHECK(m.size() == 0);
  CHECK(m.memory_bytes() == 0);
  REQUIRE(o.size() == 10000);
  for (int64_t i = 0; i < 10000; i++) {
    const std::vector<int64_t>* v = o.find(std::to_string(i));
    REQUIRE(v);
    CHECK(v->back() == i);
    CHECK(v->size() == (i < 5000 ? 2u : 1u));
  }
  m["x"].push_back(1);  // each map goes on with its own chunks
  CHECK(m.size() == 1);
  o.clear();
  CHECK(o.memory_bytes() == 0);
  o["y"].push_back(2);
  CHECK(*o.find("y") == std::vector<int64_t>{2});
  CHECK(*m.find("x") == std::vector<int64_t>{1});
}

TEST_CASE("SteadyMap with text keys of every size class: each key's bytes in its entry, big ones apart") {
  SteadyMap<std::string, int64_t> m;
  std::unordered_map<std::string, int64_t> ref;
  // Every length across the classes' edges (entries 16 bytes apart to
  // 256, then powers of two to 4 KiB) and past them, bytes of every value.
  std::vector<size_t> lengths;
  for (size_t len = 0; len <= 4200; len++) lengths.push_back(len);
  lengths.push_back(70000);
  int64_t n = 0;
  for (size_t len : lengths)
    for (int copy = 0; copy < (len < 300 ? 8 : 2); copy++) {
      std::string k(len, '\0');
      for (size_t i = 0; i < len; i++) k[i] = (char)((i * 31 + copy * 7 + len) & 0xff);
      if (len) k[0] = (char)copy;
      m[k] = n;
      ref[k] = n++;
    }
  check_same(m, ref);
  // Erase every other, put them back with other values: the same answers.
  int64_t i = 0;
  for (auto& [k, v] : ref)
    if (i++ % 2) CHECK(m.erase(k));
  for (auto& [k, v] : ref) m[k] = v * 2;
  for (auto& [k, v] : ref) v *= 2;
  check_same(m, ref);
  m.for_each([&](std::string_view k, int64_t v) {
    CHECK(ref.at(std::string(k)) == v);
    return true;
  });
  SteadyMap<std::string, int64_t> o;
  o.swap(m);  // the big entries go with the others
  check_same(o, ref);
  CHECK(m.size() == 0);
  o.clear(true);  // big entries let go all the same (the sanitizer build finds one left)
  CHECK(o.size() == 0);
  o[std::string(6000, 'x')] = 1;  // and destroyed with one (the same)
  CHECK(o.memory_bytes() >= 6000);
}

TEST_CASE("SteadyMap with text keys and vector values cleared and destroyed while it grows: every entry let go") {
  for (bool destroy : {false, true}) {
    auto m = std::make_unique<SteadyMap<std::string, std::vector<int64_t>>>();
    int64_t i = 0;
    while (!m->growing() || i < 100) {  // past a growth, its old table not yet moved
      (*m)["key " + std::to_string(i)].assign(3, i);
      i++;
    }
    REQUIRE(m->growing());
    if (destroy) {
      m.reset();  // the sanitizer build finds any entry left behind
    } else {
      m->clear();
      CHECK(m->size() == 0);
      CHECK(m->find("key 1") == nullptr);
      (*m)["again"].push_back(1);
      CHECK(m->size() == 1);
    }
  }
}
