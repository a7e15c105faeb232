// Full-text search: a tokenizer for Unicode text and a BM25 inverted index
// with a WAND top-k.
//
// Tokens: text is lowercased (ASCII, Latin-1, Latin Extended-A, Greek with
// its accented capitals and final ς read as σ, Cyrillic) and split on
// everything that is not a letter or a digit; runs of
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

struct Posting {
  int64_t doc;
  uint32_t tf;
  uint32_t len;  // the document's length in tokens (what BM25 scores it with)
};

// A term's postings in document order, in blocks of at most kBlock: a
// document put or removed in the middle moves at most one block's postings,
// and growing copies one block, never the whole list (a common term's
// postings are 16 MiB at a million documents). A term of one document
// (most of a corpus's terms) holds its posting inline: no allocation.
class Postings {
 public:
  static constexpr size_t kBlock = 256;
  Postings() = default;
  // A cursor or a found posting may point at one_: a term's postings stay
  // in their map entry, which never moves (moved in once, empty). A move
  // leaves the source empty; no copies.
  Postings(Postings&& o) noexcept : blocks_(std::move(o.blocks_)), n_(o.n_), one_(o.one_) { o.reset(); }
  Postings& operator=(Postings&& o) noexcept {
    if (this != &o) {
      blocks_ = std::move(o.blocks_);
      n_ = o.n_;
      one_ = o.one_;
      o.reset();
    }
    return *this;
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  // Sets doc's term frequency and length, inserting it in order.
  void set(int64_t doc, uint32_t tf, uint32_t len);
  // Removes doc; false when it is not there.
  bool erase(int64_t doc);
  const Posting* find(int64_t doc) const;
  size_t memory_bytes() const;

  // Walks the postings in document order.
  class Cursor {
   public:
    bool done() const { return p_ == end_; }
    int64_t doc() const { return p_->doc; }
    uint32_t tf() const { return p_->tf; }
    uint32_t len() const { return p_->len; }
    void next() {
      if (++p_ == end_) enter(b_ + 1);
    }
    // To the first posting of a document >= d (none: done).
    void seek(int64_t d);

   private:
    friend class Postings;
    void enter(size_t b);  // block b's first posting, or done past the last
    const Postings* ps_ = nullptr;
    size_t b_ = 0;
    const Posting* p_ = nullptr;
    const Posting* end_ = nullptr;
  };
  Cursor cursor() const {
    Cursor c;
    c.ps_ = this;
    c.enter(0);
    return c;
  }

 private:
  // Where doc is or would go: the first block whose last doc is >= doc
  // (the last block when doc is above them all), and the place in it.
  // Blocks must not be empty.
  struct Pos {
    size_t block, at;
  };
  Pos position(int64_t doc) const;
  void reset() {
    blocks_.clear();
    n_ = 0;
  }
  struct Block {
    std::vector<Posting> p;  // never empty
    int64_t last;            // p.back().doc
  };
  // Empty until a second document comes (and again once none is left):
  // then the one posting is `one_`.
  std::vector<Block> blocks_;
  size_t n_ = 0;
  Posting one_{};
};

class TextIndex {
 public:
  TextIndex(double k1, double b) : k1_(k1), b_(b) {}

  // Document `doc`'s text, as tokens (none: not in the index), into an
  // index that holds none for it: a write takes out the old text first, by
  // the tokens of the version it replaces. The index keeps no list of each document's terms
  // (it was 200 bytes and more a document); a posting holds the document's
  // length.
  void put(int64_t doc, const std::vector<std::string>& tokens);
  // Takes out the document's postings under `tokens` (what it was put
  // with); false when none of them held it (nothing changed then).
  bool remove(int64_t doc, const std::vector<std::string>& tokens);
  // Takes out the document's postings whatever its terms, looking through
  // every term: for when its old version cannot give its tokens.
  void remove_any(int64_t doc) { purge(doc, true); }
  size_t documents() const { return docs_; }

  // The k best documents for the query tokens (duplicates count once),
  // highest score first, ties by id; `accept` filters candidates as the
  // postings are merged (before they can enter the top k).
  void search(const std::vector<std::string>& query, size_t k, const std::function<bool(int64_t)>& accept,
              std::vector<TextHit>* out) const;
  // Score of one document for the query (0 when nothing matches).
  double score(const std::vector<std::string>& query, int64_t doc) const;
  size_t memory_bytes() const;

 private:
  struct Term {
    Postings postings;
    uint32_t max_tf = 0;            // bounds for WAND: never lowered, so always upper bounds
    uint32_t min_len = UINT32_MAX;
  };
  double idf(size_t df) const;
  double bound(const Term& t) const;
  // The document's postings out of every term; counted out of the
  // documents and their length when `count`.
  void purge(int64_t doc, bool count);

  double k1_, b_;
  // Hash maps that grow a few buckets a write (steady_map.h).
  SteadyMap<std::string, Term> terms_;
  size_t docs_ = 0;  // documents with text
  uint64_t total_len_ = 0;
};

}  // namespace kitfox
