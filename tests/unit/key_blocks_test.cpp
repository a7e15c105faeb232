// KeyBlocks and the @sorted SecondaryIndex over it, against a std::set of
// the same entries: random puts and removes of mixed keys (null, ints,
// floats, text) through splits and joins of blocks, and every way of reading.
#include <doctest/doctest.h>

#include <random>
#include <map>
#include <set>

#include "db.h"
#include "index/key_blocks.h"
#include "index/secondary.h"

using namespace kitfox;

namespace {

struct Less {
  bool operator()(const std::pair<Value, int64_t>& a, const std::pair<Value, int64_t>& b) const {
    int c = compare(a.first, b.first);
    return c ? c < 0 : a.second < b.second;
  }
};
using Model = std::set<std::pair<Value, int64_t>, Less>;
using Entries = std::vector<std::pair<Value, int64_t>>;

// Entries as text, to compare (a key's kind shows: 3 against 3.5 and "3").
std::string show(const Entries& v) {
  std::string s;
  for (auto& [k, id] : v) s += to_json(k) + "#" + std::to_string(id) + " ";
  return s;
}
std::string show(const Model& m) { return show(Entries(m.begin(), m.end())); }

Value random_key(std::mt19937_64& rng) {
  switch (rng() % 14) {
    case 11: return Value::bytes(std::string(1 + rng() % 3, (char)('a' + rng() % 4)));
    case 12: return Value::list({Value::integer((int64_t)(rng() % 4)), Value::text("x")});
    case 13: {
      Value o = Value::object();
      o.set("k", Value::integer((int64_t)(rng() % 4)));
      return o;
    }
    case 0: return Value();
    case 1: return Value::real((double)(rng() % 50) + 0.5);
    case 2: return Value::text("k" + std::to_string(rng() % 40));
    case 3: return Value::real((double)(rng() % 50));  // integral: one key with the int
    case 4: return Value::timestamp((int64_t)(rng() % 20));
    case 5: return Value::boolean(rng() % 2);
    case 6: return rng() % 2 ? Value::integer(((int64_t)1 << 53) + (int64_t)(rng() % 3)) : Value::real(1e19);
    default: return Value::integer((int64_t)(rng() % 50));
  }
}

Entries all(const KeyBlocks& kb) {
  Entries out;
  for (auto p = kb.begin(); p != kb.end(); kb.next(p)) out.push_back({kb.key_at(p), kb.at(p).id});
  return out;
}

bool in_range(const Value& k, const Value* lo, bool lo_incl, const Value* hi, bool hi_incl) {
  if (k.is_null()) return false;
  if (lo) {
    int c = compare(k, SecondaryIndex::normalize(*lo));
    if (c < 0 || (c == 0 && !lo_incl)) return false;
  }
  if (hi) {
    int c = compare(k, SecondaryIndex::normalize(*hi));
    if (c > 0 || (c == 0 && !hi_incl)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("KeyBlocks: inserts and erases through splits and joins keep the order of a std::set") {
  std::mt19937_64 rng(7);
  KeyBlocks kb;
  Model model;
  for (int round = 0; round < 20000; round++) {
    int64_t id = (int64_t)(rng() % 3000);
    Value k = SecondaryIndex::normalize(random_key(rng));
    if (rng() % 3) {
      if (model.insert({k, id}).second) kb.insert(k, id);
    } else {
      bool had = model.erase({k, id}) > 0;
      CHECK(kb.erase(k, id) == had);
    }
  }
  REQUIRE(kb.size() == model.size());
  CHECK(show(all(kb)) == show(model));
  // Positions: lower_key and between agree with the model.
  for (int q = 0; q < 200; q++) {
    Value k = SecondaryIndex::normalize(random_key(rng));
    for (bool after : {false, true}) {
      auto p = kb.lower_key(k, after);
      size_t want = 0;
      for (auto& [mk, mid] : model) want += after ? compare(mk, k) <= 0 : compare(mk, k) < 0;
      CHECK(kb.between(kb.begin(), p) == want);
    }
  }
  // Erasing everything leaves no block; inserts start again.
  for (auto& [k, id] : model) REQUIRE(kb.erase(k, id));
  CHECK(kb.size() == 0);
  CHECK(kb.begin() == kb.end());
  CHECK(kb.lower_key(Value::integer(3)) == kb.end());
  CHECK_FALSE(kb.erase(Value::integer(3), 1));
  kb.insert(Value::integer(3), 2);
  kb.insert(Value(), 1);
  CHECK(show(all(kb)) == "null#1 3#2 ");
  // Empty and nulls-only loads.
  kb.load({});
  CHECK(kb.begin() == kb.end());
  std::vector<KeyBlocks::Loose> nulls;
  for (int64_t id = 300; id > 0; id--) nulls.push_back({Value(), id});
  kb.load(std::move(nulls));
  CHECK(kb.size() == 300);
  CHECK(kb.lower_key(Value(), true) == kb.end());
  CHECK(kb.at(kb.begin()).id == 1);
}

TEST_CASE("KeyBlocks: a key held in a word takes no more than its entry; others are boxed, counted and freed") {
  KeyBlocks kb;
  std::vector<std::pair<int64_t, int64_t>> ints;
  for (int64_t i = 0; i < 96000; i++) ints.push_back({i % 1000, i});
  kb.load({}, std::move(ints));
  // 24 bytes an entry in blocks filled to 3/4 (and a pointer a block).
  const size_t loaded = kb.memory_bytes();
  CHECK(loaded <= 96000 * 24 * 4 / 3 + 64 * 1024);
  CHECK(loaded >= 96000 * 24);
  // Keys of every kind held in a word: the blocks' memory alone.
  KeyBlocks words;
  for (int64_t i = 0; i < 100; i++) {
    words.insert(Value(), i);
    words.insert(Value::boolean(i % 2), i);
    words.insert(Value::real(0.5 + (double)i), i);
    words.insert(Value::timestamp(i), i);
  }
  CHECK(words.memory_bytes() < 400 * 24 * 3);
  // Other keys boxed: counted while held, freed by an erase, an erase by
  // id, a clear (ASan finds what is not).
  KeyBlocks boxed;
  auto key = [](int64_t i) { return Value::text("a key longer than a string holds inline " + std::to_string(i)); };
  for (int64_t i = 0; i < 300; i++) boxed.insert(key(i), i);
  CHECK(boxed.memory_bytes() >= 300 * (24 + sizeof(Value)));
  for (int64_t i = 0; i < 300; i += 2) CHECK(boxed.erase(key(i), i));
  for (int64_t i = 1; i < 300; i += 4) CHECK(boxed.erase_id(i));
  CHECK(boxed.size() == 75);
  CHECK(boxed.memory_bytes() < 300 * 24 + 75 * sizeof(Value) + 4096);
  for (int64_t i = 3; i < 300; i += 4) CHECK(boxed.erase(key(i), i));
  CHECK(boxed.size() == 0);
  CHECK(boxed.memory_bytes() < 64);
  for (int64_t i = 0; i < 300; i++) boxed.insert(Value::bytes(std::to_string(i)), i);
  boxed.clear();
  CHECK(boxed.memory_bytes() == 0);
  // A key's kind and value come back as put.
  std::string seen;
  for (auto p = words.begin(); p != words.end(); words.next(p))
    if (words.at(p).id == 3) seen += to_json(words.key_at(p)) + " ";
  CHECK(seen == "null true 3.5 \"1970-01-01T00:00:00.003Z\" ");
}

TEST_CASE("an empty @sorted index answers nothing; a load over entries already there is a plain put") {
  SecondaryIndex si(IndexKind::Sorted);
  std::vector<int64_t> ids{7};
  const Value five = Value::integer(5);
  si.range(&five, true, nullptr, false, &ids);
  CHECK(ids.empty());
  CHECK(si.count_range(nullptr, false, nullptr, false) == 0);
  si.equal(five, &ids);
  CHECK(ids.empty());
  size_t visits = 0;
  si.ordered(true, [&](const Value&, int64_t) { return ++visits, true; });
  si.ordered_range(false, &five, true, nullptr, false, [&](const Value&, int64_t) { return ++visits, true; });
  si.groups([&](int64_t, size_t) { return ++visits, true; });
  CHECK(visits == 0);
  si.put(1, five);
  si.begin_load(10);  // not empty: no load, puts go in as they come
  si.put(2, Value::integer(4));
  CHECK(si.remove(1, Value::real(5.0)));  // 5.0 is the key 5
  si.put(1, Value::integer(6));
  si.end_load();
  std::string walk;
  si.ordered(false, [&](const Value& k, int64_t id) { return walk += to_json(k) + "#" + std::to_string(id) + " ", true; });
  CHECK(walk == "4#2 6#1 ");
}

TEST_CASE("KeyBlocks: a load sorts its entries; inserts after it split the blocks it filled") {
  std::mt19937_64 rng(11);
  Model model;
  std::vector<KeyBlocks::Loose> entries;
  for (int64_t id = 1; id <= 5000; id++) {
    Value k = SecondaryIndex::normalize(random_key(rng));
    model.insert({k, id});
    entries.push_back({k, id});
  }
  KeyBlocks kb;
  kb.load(std::move(entries));
  CHECK(show(all(kb)) == show(model));
  // Int keys given as pairs, alone and beside other keys.
  for (bool others : {false, true}) {
    Model m2;
    std::vector<std::pair<int64_t, int64_t>> ints;
    std::vector<KeyBlocks::Loose> rest;
    for (int64_t id = 1; id <= 3000; id++) {
      Value k = others ? SecondaryIndex::normalize(random_key(rng)) : Value::integer((int64_t)(rng() % 100) - 50);
      m2.insert({k, id});
      if (k.kind() == Kind::Int) ints.push_back({k.as_int(), id});
      else rest.push_back({k, id});
    }
    KeyBlocks k2;
    k2.load(std::move(rest), std::move(ints));
    CHECK(k2.size() == m2.size());
    CHECK(show(all(k2)) == show(m2));
  }
  for (int64_t id = 5001; id <= 7000; id++) {
    Value k = SecondaryIndex::normalize(random_key(rng));
    model.insert({k, id});
    kb.insert(k, id);
  }
  CHECK(show(all(kb)) == show(model));
}

TEST_CASE("a @sorted index answers equal, range, count, ordered walks and groups as a scan of its entries would") {
  for (bool load : {false, true}) {
    std::mt19937_64 rng(load ? 5 : 3);
    SecondaryIndex si(IndexKind::Sorted);
    std::map<int64_t, Value> docs;  // id -> key as put
    if (load) si.begin_load(3000);
    for (int64_t id = 1; id <= 3000; id++) {
      Value k = random_key(rng);
      si.put(id, k);
      docs[id] = k;
    }
    if (load) si.end_load();
    for (int i = 0; i < 3000; i++) {  // replaced and removed keys, by the key each had
      int64_t id = 1 + (int64_t)(rng() % 3500);
      auto it = docs.find(id);
      if (it != docs.end()) {
        // A key taken out by itself, or (as when a version gives no key) by a look through all.
        if (rng() % 8) CHECK(si.remove(id, it->second));
        else si.remove_any(id);
      }
      if (rng() % 4 == 0) {
        docs.erase(id);
      } else {
        Value k = random_key(rng);
        si.put(id, k);
        docs[id] = k;
      }
    }
    CHECK_FALSE(si.remove(9999, Value::integer(1)));
    REQUIRE(si.size() == docs.size());
    Model model;
    for (auto& [id, k] : docs) model.insert({SecondaryIndex::normalize(k), id});
    for (int q = 0; q < 300; q++) {
      Value a = random_key(rng), b = random_key(rng);
      const bool ai = rng() % 2, bi = rng() % 2;
      const Value* lo = rng() % 4 ? &a : nullptr;
      const Value* hi = rng() % 4 ? &b : nullptr;
      std::vector<int64_t> want, got;
      for (auto& [k, id] : model)
        if (in_range(k, lo, ai, hi, bi)) want.push_back(id);
      Entries walk_want;
      for (auto& [k, id] : model)
        if (in_range(k, lo, ai, hi, bi)) walk_want.push_back({k, id});
      si.range(lo, ai, hi, bi, &got);
      std::sort(want.begin(), want.end());
      CHECK(got == want);
      CHECK(si.count_range(lo, ai, hi, bi) == want.size());
      // Ascending: key order; descending: keys down, ids up within a key.
      for (bool desc : {false, true}) {
        Entries walked;
        si.ordered_range(desc, lo, ai, hi, bi, [&](const Value& k, int64_t id) {
          walked.push_back({k, id});
          return true;
        });
        auto expect = walk_want;
        if (desc)
          std::stable_sort(expect.begin(), expect.end(),
                           [](auto& x, auto& y) { return compare(x.first, y.first) > 0; });
        CHECK(show(walked) == show(expect));
        // A limit stops the walk where it reaches it, inside a group too.
        const size_t limit = 1 + rng() % 40;
        walked.clear();
        si.ordered_range(desc, lo, ai, hi, bi, [&](const Value& k, int64_t id) {
          walked.push_back({k, id});
          return walked.size() < limit;
        });
        expect.resize(std::min(limit, expect.size()));
        CHECK(show(walked) == show(expect));
      }
      // Equality finds the key's documents of a comparable kind.
      if (!a.is_null()) {
        std::vector<int64_t> eq_want;
        Value n = SecondaryIndex::normalize(a);
        for (auto& [k, id] : model)
          if (compare(k, n) == 0 && (k.kind() == n.kind() || (k.is_number() && n.is_number()))) eq_want.push_back(id);
        std::sort(eq_want.begin(), eq_want.end());
        si.equal(a, &got);
        CHECK(got == eq_want);
      }
    }
    // The whole order, nulls first ascending and last descending; a limit stops the walk.
    Entries asc, desc, first5;
    si.ordered(false, [&](const Value& k, int64_t id) { return asc.push_back({k, id}), true; });
    si.ordered(true, [&](const Value& k, int64_t id) { return desc.push_back({k, id}), true; });
    si.ordered(true, [&](const Value& k, int64_t id) { return first5.push_back({k, id}), first5.size() < 5; });
    CHECK(show(asc) == show(model));
    auto expect = asc;
    std::stable_sort(expect.begin(), expect.end(), [](auto& x, auto& y) { return compare(x.first, y.first) > 0; });
    CHECK(show(desc) == show(expect));
    CHECK(show(Entries(desc.begin(), desc.begin() + 5)) == show(first5));
    // Groups: each non-null key once, with its lowest id and its count.
    std::map<std::string, std::pair<int64_t, size_t>> groups_want, groups_got;
    for (auto& [k, id] : model) {
      if (k.is_null()) continue;
      auto& g = groups_want[to_json(k)];
      if (g.second++ == 0) g.first = id;
    }
    si.groups([&](int64_t first, size_t n) {
      groups_got[to_json(docs[first].is_null() ? Value() : SecondaryIndex::normalize(docs[first]))] = {first, n};
      return true;
    });
    CHECK(groups_got == groups_want);
  }
}

TEST_CASE("a @hash index: entries taken out by their key or by a look through all; null keys not held") {
  SecondaryIndex si(IndexKind::Hash);
  si.put(1, Value::text("a"));
  si.put(2, Value::text("a"));
  si.put(3, Value());
  si.put(4, Value::integer(5));
  CHECK(si.size() == 3);
  std::vector<int64_t> ids;
  si.equal(Value::text("a"), &ids);
  CHECK(ids == std::vector<int64_t>{1, 2});
  CHECK(si.remove(3, Value()));  // nothing held for a null key
  CHECK_FALSE(si.remove(1, Value::text("b")));
  CHECK(si.remove(1, Value::text("a")));
  si.remove_any(4);
  si.equal(Value::real(5.0), &ids);
  CHECK(ids.empty());
  si.remove_any(2);
  si.equal(Value::text("a"), &ids);
  CHECK(ids.empty());
  CHECK(si.size() == 0);
}

TEST_CASE("a @hash index destroyed: id lists in arrays let go, also after keys came and went") {
  // (The sanitizer build finds any array left behind.)
  for (bool arrays : {false, true}) {
    SecondaryIndex si(IndexKind::Hash);
    for (int64_t id = 1; id <= 3000; id++) si.put(id, Value::text("key number " + std::to_string(arrays ? id % 1000 : id)));
    // A key whose ids went (its array with it), one that went back to one.
    for (int64_t id : {1, 1001, 2001, 2, 1002}) CHECK(si.remove(id, Value::text(arrays ? "key number " + std::to_string(id % 1000) : "key number " + std::to_string(id))));
    std::vector<int64_t> ids;
    si.equal(Value::text("key number 3"), &ids);
    CHECK(ids == (arrays ? std::vector<int64_t>{3, 1003, 2003} : std::vector<int64_t>{3}));
    si.equal(Value::text("key number 2"), &ids);
    CHECK(ids == (arrays ? std::vector<int64_t>{2002} : std::vector<int64_t>{}));
    CHECK(si.size() == 2995);
  }
}

TEST_CASE("IdList: one id inline, more in an array, back inline at one; always ascending") {
  std::mt19937_64 rng(17);
  IdList l;
  std::set<int64_t> model;
  for (int round = 0; round < 4000; round++) {
    int64_t id = (int64_t)(rng() % 64);
    if (rng() % 3) {  // in order, past the last, or one held already (refused, nothing grows)
      const size_t heap = l.heap_bytes();
      const bool fresh = model.insert(id).second;
      CHECK(l.insert(id) == fresh);
      if (!fresh) CHECK(l.heap_bytes() == heap);
    } else {
      CHECK(l.erase(id) == (model.erase(id) > 0));
    }
    REQUIRE(l.size() == model.size());
    CHECK(std::vector<int64_t>(l.begin(), l.end()) == std::vector<int64_t>(model.begin(), model.end()));
    if (model.size() <= 1) CHECK(l.heap_bytes() == 0);
  }
  // Ids in order, each past the last (as a build gives them), and the last again.
  for (int64_t id = 100; id < 1100; id++) {
    CHECK(l.insert(id));
    model.insert(id);
    CHECK_FALSE(l.insert(id));
  }
  CHECK(std::vector<int64_t>(l.begin(), l.end()) == std::vector<int64_t>(model.begin(), model.end()));
  IdList moved(std::move(l));
  CHECK(std::vector<int64_t>(moved.begin(), moved.end()) == std::vector<int64_t>(model.begin(), model.end()));
  CHECK(l.size() == 0);
  IdList other;
  other.insert(5);
  other = std::move(moved);
  CHECK(other.size() == model.size());
}
