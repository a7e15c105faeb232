#include "text.h"

#include <algorithm>
#include <cstddef>
#include <cmath>

namespace kitfox {

namespace {

// Decodes one UTF-8 code point (input is valid UTF-8: text is validated on write).
uint32_t next_cp(std::string_view s, size_t* i) {
  unsigned char c = s[*i];
  if (c < 0x80) { (*i)++; return c; }
  int n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : 3;
  uint32_t cp = c & (0x3F >> n);
  for (int k = 1; k <= n && *i + k < s.size(); k++) cp = (cp << 6) | (s[*i + k] & 0x3F);
  *i += n + 1;
  return cp;
}

void put_cp(std::string& o, uint32_t cp) {
  if (cp < 0x80) o += (char)cp;
  else if (cp < 0x800) { o += (char)(0xC0 | cp >> 6); o += (char)(0x80 | (cp & 63)); }
  else if (cp < 0x10000) { o += (char)(0xE0 | cp >> 12); o += (char)(0x80 | (cp >> 6 & 63)); o += (char)(0x80 | (cp & 63)); }
  else { o += (char)(0xF0 | cp >> 18); o += (char)(0x80 | (cp >> 12 & 63)); o += (char)(0x80 | (cp >> 6 & 63)); o += (char)(0x80 | (cp & 63)); }
}

bool is_cjk(uint32_t cp) {
  return (cp >= 0x3040 && cp <= 0x30FF) ||   // Hiragana, Katakana
         (cp >= 0x3400 && cp <= 0x4DBF) ||   // CJK Extension A
         (cp >= 0x4E00 && cp <= 0x9FFF) ||   // CJK Unified Ideographs
         (cp >= 0xAC00 && cp <= 0xD7AF) ||   // Hangul syllables
         (cp >= 0x1100 && cp <= 0x11FF) ||   // Hangul Jamo
         (cp >= 0xF900 && cp <= 0xFAFF) ||   // CJK compatibility ideographs
         (cp >= 0x20000 && cp <= 0x2FA1F);   // CJK extensions B..
}

// Letters and digits: ASCII alphanumerics, and above ASCII everything but
// the common punctuation, symbol and space blocks.
bool is_word(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp <= 0xBF) return cp == 0xAA || cp == 0xB5 || cp == 0xBA;   // Latin-1 punctuation and symbols
  if (cp == 0xD7 || cp == 0xF7) return false;                      // multiplication, division
  if (cp >= 0x2000 && cp <= 0x2BFF) return false;                  // punctuation, symbols, arrows, math
  if (cp >= 0x3000 && cp <= 0x303F) return false;                  // CJK symbols and punctuation
  if (cp >= 0xFE30 && cp <= 0xFE4F) return false;                  // CJK compatibility forms
  if (cp >= 0xFF00 && cp <= 0xFF0F) return false;                  // fullwidth punctuation
  if (cp >= 0xFF1A && cp <= 0xFF20) return false;
  if (cp >= 0xFF3B && cp <= 0xFF40) return false;
  if (cp >= 0xFF5B && cp <= 0xFF65) return false;
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return false;                // emoji and pictographs
  if (cp >= 0xE000 && cp <= 0xF8FF) return false;                  // private use
  if (cp >= 0xFE10 && cp <= 0xFE1F) return false;                  // vertical forms
  if (cp >= 0xFE50 && cp <= 0xFE6F) return false;                  // small form variants
  if (cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFF)) return false;  // zero-width no-break space (a BOM), specials
  if (cp >= 0x55A && cp <= 0x55F) return false;                    // Armenian punctuation
  if (cp == 0x589 || cp == 0x58A) return false;
  if (cp == 0x5BE || cp == 0x5C0 || cp == 0x5C3 || cp == 0x5C6 || cp == 0x5F3 || cp == 0x5F4) return false;  // Hebrew
  if (cp == 0x609 || cp == 0x60A || cp == 0x60C || cp == 0x60D || cp == 0x61B || (cp >= 0x61D && cp <= 0x61F) ||
      (cp >= 0x66A && cp <= 0x66D) || cp == 0x6D4)
    return false;                                                   // Arabic
  if (cp == 0x964 || cp == 0x965 || cp == 0x970) return false;     // Devanagari
  if (cp >= 0x1360 && cp <= 0x1368) return false;                  // Ethiopic
  if (cp >= 0xE0000 && cp <= 0xE007F) return false;                // tags
  return true;
}

uint32_t lower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;   // Latin-1
  if (cp >= 0x100 && cp <= 0x17F) {                                 // Latin Extended-A: pairs
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return cp % 2 ? cp + 1 : cp;
    if (cp == 0x178) return 0xFF;                                   // Ÿ: its small letter is Latin-1's
    if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return cp % 2 == 0 ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32;   // Greek
  if (cp >= 0x386 && cp <= 0x38F) {                                 // Greek capitals with tonos
    switch (cp) {
      case 0x386: return 0x3AC;                                     // Ά
      case 0x388: case 0x389: case 0x38A: return cp + 37;           // Έ Ή Ί
      case 0x38C: return 0x3CC;                                     // Ό
      case 0x38E: case 0x38F: return cp + 63;                       // Ύ Ώ
      default: return cp;
    }
  }
  if (cp == 0x3C2) return 0x3C3;                                    // final ς folds to σ, as σ ends a capital word
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;                  // Cyrillic
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  // Cyrillic's other letters (Ukrainian Ґ, Kazakh Қ, Ң, Ү, Ө, ...) and its
  // supplement: pairs, the capital first (from U+04C1 to U+04CE, second).
  if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) || (cp >= 0x4D0 && cp <= 0x52F)) return cp % 2 ? cp : cp + 1;
  if (cp >= 0x4C1 && cp <= 0x4CE) return cp % 2 ? cp + 1 : cp;
  if (cp == 0x4C0) return 0x4CF;                                    // palochka
  return cp;
}

}  // namespace

void tokenize_text(std::string_view text, std::vector<std::string>* out) {
  std::string word;
  std::vector<uint32_t> cjk;
  auto flush_word = [&] {
    if (!word.empty()) out->push_back(std::move(word));
    word.clear();
  };
  auto flush_cjk = [&] {
    if (cjk.size() == 1) {
      std::string t;
      put_cp(t, cjk[0]);
      out->push_back(std::move(t));
    }
    for (size_t i = 0; i + 1 < cjk.size(); i++) {
      std::string t;
      put_cp(t, cjk[i]);
      put_cp(t, cjk[i + 1]);
      out->push_back(std::move(t));
    }
    cjk.clear();
  };
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = next_cp(text, &i);
    if (is_cjk(cp)) {
      flush_word();
      cjk.push_back(cp);
    } else if (is_word(cp)) {
      flush_cjk();
      put_cp(word, lower(cp));
    } else {
      flush_word();
      flush_cjk();
    }
  }
  flush_word();
  flush_cjk();
}

namespace {
bool posting_below(const Posting& a, int64_t d) { return a.doc < d; }
template <typename Block>
bool block_below(const Block& b, int64_t d) { return b.last < d; }
}  // namespace

Postings::Pos Postings::position(int64_t doc) const {
  auto it = std::lower_bound(blocks_.begin(), blocks_.end(), doc, block_below<Block>);
  const size_t b = std::min((size_t)(it - blocks_.begin()), blocks_.size() - 1);
  const std::vector<Posting>& blk = blocks_[b].p;
  return {b, (size_t)(std::lower_bound(blk.begin(), blk.end(), doc, posting_below) - blk.begin())};
}

void Postings::set(int64_t doc, uint32_t tf, uint32_t len) {
  if (blocks_.empty()) {
    if (n_ == 0) {  // the first: held inline
      one_ = {doc, tf, len};
      n_ = 1;
      return;
    }
    if (one_.doc == doc) {
      one_.tf = tf;
      one_.len = len;
      return;
    }
    Block first{{}, one_.doc};  // a second: both into a block
    first.p.reserve(4);
    first.p.push_back(one_);
    blocks_.reserve(1);
    blocks_.push_back(std::move(first));
  }
  n_++;
  if (doc > blocks_.back().last && blocks_.back().p.size() == kBlock) {
    blocks_.push_back({{{doc, tf, len}}, doc});
    return;
  }
  if (Block& last = blocks_.back(); doc > last.last) {  // the common append
    last.p.push_back({doc, tf, len});
    last.last = doc;
    return;
  }
  const Pos pos = position(doc);
  const size_t b = pos.block;
  std::vector<Posting>& blk = blocks_[b].p;
  auto at = blk.begin() + (std::ptrdiff_t)pos.at;
  if (at != blk.end() && at->doc == doc) {
    n_--;
    at->tf = tf;
    at->len = len;
    return;
  }
  if (blk.size() < kBlock) {
    blk.insert(at, {doc, tf, len});
    blocks_[b].last = blk.back().doc;
    return;
  }
  // A full block splits in two halves, and the posting goes into its half.
  const size_t half = kBlock / 2;
  Block upper{std::vector<Posting>(blk.begin() + (std::ptrdiff_t)half, blk.end()), 0};
  blk.resize(half);
  if (pos.at <= half) blk.insert(blk.begin() + (std::ptrdiff_t)pos.at, {doc, tf, len});
  else upper.p.insert(upper.p.begin() + (std::ptrdiff_t)(pos.at - half), {doc, tf, len});
  blocks_[b].last = blk.back().doc;
  upper.last = upper.p.back().doc;
  blocks_.insert(blocks_.begin() + (std::ptrdiff_t)b + 1, std::move(upper));
}

bool Postings::erase(int64_t doc) {
  if (blocks_.empty()) {
    if (n_ != 1 || one_.doc != doc) return false;
    n_ = 0;
    return true;
  }
  const Pos pos = position(doc);
  const size_t b = pos.block;
  std::vector<Posting>& blk = blocks_[b].p;
  auto at = blk.begin() + (std::ptrdiff_t)pos.at;
  if (at == blk.end() || at->doc != doc) return false;
  blk.erase(at);
  n_--;
  if (blk.empty()) blocks_.erase(blocks_.begin() + (std::ptrdiff_t)b);
  else blocks_[b].last = blk.back().doc;
  return true;
}

const Posting* Postings::find(int64_t doc) const {
  if (blocks_.empty()) return n_ == 1 && one_.doc == doc ? &one_ : nullptr;
  const Pos pos = position(doc);
  const std::vector<Posting>& blk = blocks_[pos.block].p;
  return pos.at < blk.size() && blk[pos.at].doc == doc ? &blk[pos.at] : nullptr;
}

size_t Postings::memory_bytes() const {
  size_t n = blocks_.capacity() * sizeof(Block);
  for (const Block& b : blocks_) n += b.p.capacity() * sizeof(Posting);
  return n;
}

void Postings::Cursor::enter(size_t b) {
  const auto& blocks = ps_->blocks_;
  if (blocks.empty() && b == 0 && ps_->n_ == 1) {  // the one posting held inline
    b_ = 0;
    p_ = &ps_->one_;
    end_ = p_ + 1;
  } else if (b < blocks.size()) {
    b_ = b;
    p_ = blocks[b].p.data();
    end_ = p_ + blocks[b].p.size();
  } else {
    p_ = end_;  // done: stays at the end of the last block
  }
}

void Postings::Cursor::seek(int64_t d) {
  if (done() || p_->doc >= d) return;
  const auto& blocks = ps_->blocks_;
  if (blocks.empty()) {  // the one posting held inline is below d
    p_ = end_;
    return;
  }
  if (blocks[b_].last < d) {
    auto it = std::lower_bound(blocks.begin() + (std::ptrdiff_t)b_ + 1, blocks.end(), d, block_below<Block>);
    if (it == blocks.end()) {
      p_ = end_;
      return;
    }
    enter((size_t)(it - blocks.begin()));
  }
  p_ = std::lower_bound(p_, end_, d, posting_below);
}

namespace {
// The distinct tokens of a document, each with its count, in the order they
// first come: counted in an open-addressing table a thread keeps, emptied
// for the next document by a new generation, so no map or list is made a
// document (a long text's tokens hashed once each, not sorted).
const std::vector<std::pair<std::string_view, uint32_t>>& counted(const std::vector<std::string>& tokens) {
  struct Slot {
    std::string_view key;
    uint32_t run = 0;  // index into runs
    uint32_t gen = 0;
  };
  thread_local std::vector<Slot> table;
  thread_local uint32_t gen = 0;
  thread_local std::vector<std::pair<std::string_view, uint32_t>> runs;
  runs.clear();
  size_t want = 16;
  while (want < 2 * tokens.size()) want *= 2;
  size_t cap = table.size();
  // Made anew when too small, when its generations wrap, or when a long
  // text left it far larger than this one needs (a thread keeps it).
  if (cap < want || ++gen == 0 || (cap > (1u << 16) && cap > want * 64)) {
    cap = want;
    // (Swapped: shrink_to_fit does nothing without exceptions.)
    std::vector<Slot>(cap, Slot{}).swap(table);
    gen = 1;
    if (runs.capacity() > cap) std::vector<std::pair<std::string_view, uint32_t>>().swap(runs);
  }
  const size_t mask = cap - 1;
  for (const std::string& t : tokens) {
    size_t i = std::hash<std::string_view>()(t) & mask;
    for (;; i = (i + 1) & mask) {
      Slot& s = table[i];
      if (s.gen != gen) {
        s = {t, (uint32_t)runs.size(), gen};
        runs.push_back({t, 1});
        break;
      }
      if (s.key == t) {
        runs[s.run].second++;
        break;
      }
    }
  }
  return runs;
}
}  // namespace

void TextIndex::put(int64_t doc, const std::vector<std::string>& tokens) {
  // A document without text is not in the index (not counted in N or the
  // average length), whether it was written so or indexed on first use.
  if (tokens.empty()) return;
  const auto& runs = counted(tokens);
  const uint32_t len = (uint32_t)tokens.size();
  for (auto [t, n] : runs) {
    Term& term = terms_[t];
    term.postings.set(doc, n, len);
    term.max_tf = std::max(term.max_tf, n);
    term.min_len = std::min(term.min_len, len);
  }
  docs_++;
  total_len_ += len;
}

bool TextIndex::remove(int64_t doc, const std::vector<std::string>& tokens) {
  if (tokens.empty()) return false;
  bool found = false;
  uint32_t len = 0;
  uint64_t tf = 0;  // the document's tokens found: all of them when the sum is its length
  for (auto [t, n] : counted(tokens)) {
    Term* term = terms_.find(t);
    const Posting* p = term ? term->postings.find(doc) : nullptr;
    if (!p) continue;
    len = p->len;
    tf += p->tf;
    found = true;
    term->postings.erase(doc);
    if (term->postings.empty()) terms_.erase(t);
  }
  if (!found) return false;
  docs_--;
  total_len_ -= len;
  // Tokens not what it was put with: its postings under terms they did
  // not name, out too.
  if (tf != len) purge(doc, false);
  return true;
}

void TextIndex::purge(int64_t doc, bool count) {
  std::vector<std::string> held;
  uint32_t len = 0;
  terms_.for_each([&](std::string_view t, const Term& term) {
    if (const Posting* p = term.postings.find(doc)) {
      len = p->len;
      held.emplace_back(t);
    }
    return true;
  });
  for (const std::string& t : held) {
    Term* term = terms_.find(t);
    term->postings.erase(doc);
    if (term->postings.empty()) terms_.erase(t);
  }
  if (count && !held.empty()) {
    docs_--;
    total_len_ -= len;
  }
}

double TextIndex::idf(size_t df) const {
  double n = (double)docs_;
  return std::log(1.0 + (n - (double)df + 0.5) / ((double)df + 0.5));
}

double TextIndex::bound(const Term& t) const {
  double avg = docs_ == 0 ? 1 : (double)total_len_ / (double)docs_;
  double tf = t.max_tf, len = t.min_len == UINT32_MAX ? 0 : t.min_len;
  return idf(t.postings.size()) * tf * (k1_ + 1) / (tf + k1_ * (1 - b_ + b_ * len / avg));
}

double TextIndex::score(const std::vector<std::string>& query, int64_t doc) const {
  if (docs_ == 0) return 0;
  double avg = (double)total_len_ / (double)docs_;
  std::vector<std::string> q = query;
  std::sort(q.begin(), q.end());
  q.erase(std::unique(q.begin(), q.end()), q.end());
  double s = 0;
  for (const std::string& t : q) {
    const Term* term = terms_.find(t);
    if (!term) continue;
    const Posting* pos = term->postings.find(doc);
    if (!pos) continue;
    double tf = pos->tf;
    s += idf(term->postings.size()) * tf * (k1_ + 1) / (tf + k1_ * (1 - b_ + b_ * pos->len / avg));
  }
  return s;
}

// WAND: cursors over the query terms' postings, ordered by their current
// document; a document is scored only when the bounds of the terms up to it
// could beat the k-th best score so far.
void TextIndex::search(const std::vector<std::string>& query, size_t k, const std::function<bool(int64_t)>& accept,
                       std::vector<TextHit>* out) const {
  out->clear();
  if (k == 0 || docs_ == 0) return;
  std::vector<std::string> q = query;
  std::sort(q.begin(), q.end());
  q.erase(std::unique(q.begin(), q.end()), q.end());
  struct Cursor {
    Postings::Cursor c;
    double idf, bound;
    size_t term;  // its place among the sorted terms: a document's parts are summed in that order, as score() sums them
  };
  std::vector<Cursor> cur;
  for (const std::string& t : q) {
    const Term* term = terms_.find(t);
    if (!term) continue;
    cur.push_back({term->postings.cursor(), idf(term->postings.size()), bound(*term), cur.size()});
  }
  double avg = (double)total_len_ / (double)docs_;
  // `before`: ranks first (higher score, then smaller id). As the heap's
  // order it keeps the worst of the best k on top.
  auto before = [](const TextHit& a, const TextHit& b) { return a.score > b.score || (a.score == b.score && a.id < b.id); };
  std::vector<TextHit>& heap = *out;
  auto threshold = [&] { return heap.size() < k ? -1.0 : heap.front().score; };
  for (;;) {
    cur.erase(std::remove_if(cur.begin(), cur.end(), [](const Cursor& c) { return c.c.done(); }), cur.end());
    if (cur.empty()) break;
    // By document, then term: documents with the same statistics get the
    // same score to the bit (a sum in another order may differ in its last
    // place), so their ties go by id.
    std::sort(cur.begin(), cur.end(), [](const Cursor& a, const Cursor& b) {
      return a.c.doc() < b.c.doc() || (a.c.doc() == b.c.doc() && a.term < b.term);
    });
    // The pivot: the first cursor where the summed bounds pass the threshold.
    double acc = 0, th = threshold();
    size_t pivot = cur.size();
    for (size_t i = 0; i < cur.size(); i++) {
      acc += cur[i].bound;
      if (acc >= th || heap.size() < k) {
        pivot = i;
        break;
      }
    }
    if (pivot == cur.size()) break;  // nothing left can enter the top k
    int64_t pd = cur[pivot].c.doc();
    if (cur[0].c.doc() == pd) {
      // Every cursor before the pivot is on pd: score it.
      double s = 0;
      const double dl = cur[0].c.len();  // every posting of pd holds its length
      for (Cursor& c : cur) {
        if (c.c.doc() != pd) break;
        double tf = c.c.tf();
        s += c.idf * tf * (k1_ + 1) / (tf + k1_ * (1 - b_ + b_ * dl / avg));
      }
      TextHit h{s, pd};
      bool better = heap.size() < k || before(h, heap.front());
      if (better && (!accept || accept(pd))) {
        if (heap.size() == k) {
          std::pop_heap(heap.begin(), heap.end(), before);
          heap.pop_back();
        }
        heap.push_back(h);
        std::push_heap(heap.begin(), heap.end(), before);
      }
      for (Cursor& c : cur)
        if (!c.c.done() && c.c.doc() == pd) c.c.next();
    } else {
      // Skip the cursors before the pivot up to pd.
      for (size_t i = 0; i < pivot; i++) cur[i].c.seek(pd);
    }
  }
  std::sort(heap.begin(), heap.end(), [](const TextHit& a, const TextHit& b) {
    return a.score > b.score || (a.score == b.score && a.id < b.id);
  });
}

size_t TextIndex::memory_bytes() const {
  size_t n = terms_.memory_bytes();  // the entries (each term's key and Term) and buckets
  terms_.for_each([&](std::string_view, const Term& term) {
    n += term.postings.memory_bytes();
    return true;
  });
  return n;
}

}  // namespace kitfox
