// Full-text search: a tokenizer for Unicode text and a BM25 inverted index
// with a WAND top-k.
//
// Tokens: text is lowercased (ASCII, Latin-1, Latin Extended-A, Greek,
// Cyrillic) and split on everything that is not a letter or a digit; runs of
// CJK characters (Han, Hiragana, Katakana, Hangul) become overlapping
// character bigrams (a lone character stays a token).
//
// BM25: idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),
// score(d) = sum over query terms of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen)).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "steady_map.h"

namespace kitfox {

// Appends the tokens of `text` to `out`.
void tokenize_text(std::string_view text, std::vector<std::string>* out);

struct TextHit {
  double score;
  int64_t id;
};

class TextIndex {
 public:
  TextIndex(double k1, double b) : k1_(k1), b_(b) {}

  // Sets document `doc`'s text (its previous text, if any, is replaced);
  // no tokens removes it.
  void put(int64_t doc, const std::vector<std::string>& tokens);
  void remove(int64_t doc);
  size_t documents() const { return lengths_.size(); }

  // The k best documents for the query tokens (duplicates count once),
  // highest score first, ties by id; `accept` filters candidates as the
  // postings are merged (before they can enter the top k).
  void search(const std::vector<std::string>& query, size_t k, const std::function<bool(int64_t)>& accept,
              std::vector<TextHit>* out) const;
  // Score of one document for the query (0 when nothing matches).
  double score(const std::vector<std::string>& query, int64_t doc) const;
  size_t memory_bytes() const;

 private:
  struct Posting {
    int64_t doc;
    uint32_t tf;
  };
  struct Term {
    std::vector<Posting> postings;  // by doc id
    uint32_t max_tf = 0;            // bounds for WAND: never lowered, so always upper bounds
    uint32_t min_len = UINT32_MAX;
  };
  double idf(size_t df) const;
  double bound(const Term& t) const;

  double k1_, b_;
  // Hash maps that grow a few buckets a write (steady_map.h).
  SteadyMap<std::string, Term> terms_;
  SteadyMap<int64_t, std::pair<uint32_t, std::vector<std::string>>> lengths_;  // doc -> length, distinct terms
  uint64_t total_len_ = 0;
};

}  // namespace kitfox
