// `kitfox import`'s reader and writer: see importer.h.
#include "importer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cli_text.h"
#include "codec.h"
#include "documents.h"
#include "engine_limits.h"
#include "simdjson.h"

namespace kitfox {

namespace {

namespace od = simdjson::ondemand;
using Clock = std::chrono::steady_clock;

constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;
constexpr char kBom[] = "\xEF\xBB\xBF";

inline bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// ---------------------------------------------------------------------------
// The input, from the first byte still needed to the last read, followed by
// kPadding zero bytes (simdjson reads up to that far past what it parses).
// Positions are offsets in the whole input.

class Buffer {
 public:
  const char* at(uint64_t off) const { return data_.get() + (off - base_); }
  uint64_t end() const { return base_ + len_; }

  // Appends s; the bytes before `keep` are no longer needed.
  void append(std::string_view s, uint64_t keep) {
    const size_t drop = static_cast<size_t>(keep - base_);
    const size_t need = len_ + s.size() + kPadding;
    if (drop > 0 && (drop >= len_ / 2 || need > cap_)) {
      memmove(data_.get(), data_.get() + drop, len_ - drop);
      len_ -= drop;
      base_ = keep;
    }
    if (len_ + s.size() + kPadding > cap_) {
      size_t cap = std::max({cap_ * 2, len_ + s.size() + kPadding, size_t{1} << 16});
      std::unique_ptr<char[]> d(new char[cap]);
      if (len_) memcpy(d.get(), data_.get(), len_);
      data_ = std::move(d);
      cap_ = cap;
    }
    if (!s.empty()) memcpy(data_.get() + len_, s.data(), s.size());
    len_ += s.size();
    memset(data_.get() + len_, 0, kPadding);
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t len_ = 0, cap_ = 0;
  uint64_t base_ = 0;
};

// ---------------------------------------------------------------------------
// Batches, written in order by a thread of their own (or at once).

struct Batch {
  EncodedDocs docs;  // the put's parameter, left encoded (Params)
  uint64_t first_line = 0, last_line = 0;
};

class BatchWriter {
 public:
  struct Failure {
    Status status;
    uint64_t first_doc = 0, last_doc = 0, first_line = 0, last_line = 0;
    uint64_t batch = 0;  // its number, from 1
  };

  BatchWriter(Database& db, std::string statement, bool thread) : db_(db), statement_(std::move(statement)) {
    if (thread) thread_ = std::thread([this] { run(); });
  }
  ~BatchWriter() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Queues a batch (waiting while another one is queued). False once a
  // batch failed: nothing is written after it.
  bool submit(Batch b) {
    submitted_++;
    if (!thread_.joinable()) {
      if (!failed_) write(std::move(b), submitted_);
      return !failed_;
    }
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !queued_ || failed_; });
    if (failed_) return false;
    queued_.emplace(std::move(b));
    queued_no_ = submitted_;
    cv_.notify_all();
    return true;
  }

  // Waits until every queued batch is written; false when one failed.
  bool drain() {
    if (thread_.joinable()) {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return (!queued_ && !busy_) || failed_; });
      // A batch being written when another failed cannot be: writes stop at the first failure.
    }
    return !failed_;
  }

  bool failed() const { return failed_; }
  const Failure& failure() const { return failure_; }  // once failed()
  uint64_t submitted() const { return submitted_; }
  uint64_t written() const { return written_; }

 private:
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return queued_ || stop_; });
      if (!queued_) return;
      Batch b = std::move(*queued_);
      const uint64_t no = queued_no_;
      queued_.reset();
      if (failed_) {  // nothing is written after a failed batch
        cv_.notify_all();
        continue;
      }
      busy_ = true;
      cv_.notify_all();  // the next batch may be queued while this one is written
      lk.unlock();
      write(std::move(b), no);
      lk.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  void write(Batch b, uint64_t no) {
    const uint64_t n = b.docs.size();
    Status s;
    if (!put_) {  // prepared at the first batch (the collection may come after the importer)
      auto p = db_.prepare(statement_);
      if (p.is_ok()) put_ = std::move(p.value());
      else s = p.status();
    }
    if (s.is_ok()) s = put_.query(Params::documents(b.docs.list()), &out_);
    if (s.is_ok()) {
      written_ += n;
      return;
    }
    std::lock_guard g(mu_);
    failure_ = {s, written_ + 1, written_ + n, b.first_line, b.last_line, no};
    failed_ = true;
  }

  Database& db_;
  const std::string statement_;
  Statement put_;  // `put C $1`, $1 the batch's documents left encoded
  QueryResult out_;  // the {id} rows, written over batch after batch
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Batch> queued_;
  uint64_t queued_no_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::atomic<bool> failed_{false};
  Failure failure_;
  uint64_t submitted_ = 0;  // only the feeding thread
  std::atomic<uint64_t> written_{0};
};

}  // namespace

// ---------------------------------------------------------------------------

struct Importer::Impl {
  enum class Mode { Detect, Lines, Array };
  // Where the array's scan is: before its '[', between elements, inside one,
  // after its ']', or stopped at an error.
  enum class Scan { Open, Before, In, Done, Failed };

  struct Element {
    uint64_t start, end;  // its text: from its first character to the ',' or ']' after it
    uint64_t number;      // from 1
    uint64_t line;
  };

  Impl(Database& db, std::string collection, std::string source, ImportOptions o)
      : db_(db),
        collection_(std::move(collection)),
        source_(std::move(source)),
        opts_(o),
        writer_(db, "put " + collection_ + " $1", o.writer_thread),
        start_(Clock::now()),
        last_progress_(start_) {
    if (opts_.batch == 0) opts_.batch = 1;
    if (opts_.batch_bytes == 0) opts_.batch_bytes = 1;
    if (opts_.region_bytes == 0) opts_.region_bytes = 1;
    reader_ = DocumentReader(db_, collection_);
  }

  // ------------------------------------------------------------------ input

  bool feed(std::string_view chunk) {
    if (!ok_ || !writer_ok()) return false;
    fed_ += chunk.size();
    // The line counter must not fall behind what the buffer keeps.
    const uint64_t keep = keep_from();
    if (mode_ == Mode::Array) newlines_before(keep);
    const uint64_t old_end = buf_.end();
    buf_.append(chunk, keep);
    if (mode_ == Mode::Lines || mode_ == Mode::Detect) note_newlines(old_end);
    process(false);
    maybe_progress();
    return ok_ && writer_ok();
  }

  void stop() {
    writer_.drain();
    clear_progress();
  }

  bool finish() {
    if (!ok_ || !writer_ok()) return false;
    process(true);
    if (ok_ && mode_ == Mode::Array && scan_ != Scan::Done) {
      fail_input(buf_.end(), "the JSON array is not closed (unexpected end of input)", newlines_before(buf_.end()) + 1);
    }
    if (ok_) {
      flush_batch();
      writer_.drain();
      writer_ok();
    }
    clear_progress();
    return ok_;
  }

  // The first byte still needed.
  uint64_t keep_from() const {
    switch (mode_) {
      case Mode::Detect:
      case Mode::Lines: return pos_;
      case Mode::Array: {
        uint64_t k = scan_pos_;
        if (scan_ == Scan::In) k = std::min(k, element_start_);
        if (!elements_.empty()) k = std::min(k, elements_.front().start);
        return k;
      }
    }
    return pos_;
  }

  // Remembers the last newline among the bytes from `from` on (NDJSON).
  void note_newlines(uint64_t from) {
    const uint64_t end = buf_.end();
    if (end <= from) return;
    const char* s = buf_.at(from);
    const void* nl = memrchr(s, '\n', end - from);
    if (nl) last_newline_ = from + static_cast<uint64_t>(static_cast<const char*>(nl) - s) + 1;
  }

  void process(bool final) {
    if (mode_ == Mode::Detect && !detect(final)) return;
    if (mode_ == Mode::Lines) {
      // Whole lines, once there is a region's worth of them (or at the end).
      const uint64_t to = final ? buf_.end() : last_newline_;
      if (to > pos_ && (final || to - pos_ >= opts_.region_bytes)) {
        read_lines(pos_, to);
        pos_ = to;
      }
      return;
    }
    scan_array();
    if (!elements_.empty() &&
        (final || scan_ == Scan::Done || scan_ == Scan::Failed ||
         elements_.back().end - elements_.front().start >= opts_.region_bytes)) {
      read_elements();
    }
    if (ok_ && scan_ == Scan::Failed) fail_input(error_at_, error_, error_line_);
  }

  bool starts_with_bom(uint64_t from, size_t len) const { return len >= 3 && memcmp(buf_.at(from), kBom, 3) == 0; }

  // Skips a byte order mark and blank lines; an array starts with '['.
  bool detect(bool final) {
    const uint64_t end = buf_.end();
    if (pos_ == 0 && !bom_checked_) {
      const size_t have = static_cast<size_t>(std::min<uint64_t>(end, 3));
      if (have < 3 && !final && memcmp(buf_.at(0), kBom, have) == 0) return false;  // could still be one
      if (have == 3 && memcmp(buf_.at(0), kBom, 3) == 0) pos_ = 3;
      bom_checked_ = true;
    }
    for (; pos_ < end; pos_++) {
      const char c = *buf_.at(pos_);
      if (json_space(c)) {
        if (c == '\n') lines_++;
        continue;
      }
      if (c == '[') {
        mode_ = Mode::Array;
        scan_pos_ = pos_;
        counted_at_ = pos_;
        counted_ = lines_;
      } else {
        mode_ = Mode::Lines;
      }
      return true;
    }
    return false;
  }

  // ------------------------------------------------------------------ NDJSON

  // [from, to): whole lines (`to` is past a '\n' or the end of the input);
  // lines_ counts the newlines before `from`, and after it those before `to`.
  void read_lines(uint64_t from, uint64_t to) {
    uint64_t at = from, line = lines_;
    if (opts_.fast) fast_lines(from, to, &at, &line);
    if (ok_ && at < to) line = slow_lines(at, to, line);
    lines_ = line;
  }

  // Every document of the region through simdjson, as long as each is an
  // object alone on its line. Moves *at (a line start) and *line (the
  // newlines before it) past what it took.
  void fast_lines(uint64_t from, uint64_t to, uint64_t* at, uint64_t* line) {
    const size_t len = static_cast<size_t>(to - from);
    // simdjson steps over a byte order mark that starts its buffer, so one
    // that starts a region is left to the plain reader, which decides what
    // it is: parse_json steps over one that opens a document (a line made of
    // a file that had one, say) as simdjson does, and names one elsewhere.
    if (starts_with_bom(from, len)) return;
    od::document_stream docs;
    if (parser_.iterate_many(buf_.at(from), len, batch_capacity(len), false).get(docs)) return;
    bool pending = false;  // a document read, taken once what follows it is checked
    std::string& doc = doc_;  // the document read, encoded
    uint64_t doc_line = 0;
    uint64_t gap = from;       // where the white space before the next document starts
    uint64_t gap_lines = *line;  // newlines before `gap`
    bool complete = true;
    for (auto it = docs.begin(); it != docs.end(); ++it) {
      const uint64_t s = from + it.current_index();
      uint64_t nl = 0;
      // Only white space since the last document's line ended (or the region began).
      if (s < gap || !blank(gap, s, &nl)) {
        complete = false;
        break;
      }
      if (pending) {
        add(doc, doc_line);
        pending = false;
        *at = gap + 1;  // past its '\n'
        *line = doc_line;
      }
      od::document_reference d;
      doc.clear();
      if ((*it).get(d) || !reader_.encode(d, &doc)) {
        complete = false;
        break;
      }
      doc_line = gap_lines + nl + 1;
      const char* p = buf_.at(s);
      const void* e = memchr(p, '\n', static_cast<size_t>(to - s));
      gap = e ? s + static_cast<uint64_t>(static_cast<const char*>(e) - p) : to;
      gap_lines = doc_line - 1;
      pending = true;
    }
    uint64_t nl = 0;
    if (complete && docs.truncated_bytes() == 0 && blank(gap, to, &nl)) {
      if (pending) add(doc, doc_line);
      *at = to;
      *line = gap_lines + nl;
    }
  }

  // The plain reader: one line at a time. Returns the newlines before `to`.
  uint64_t slow_lines(uint64_t from, uint64_t to, uint64_t line) {
    uint64_t p = from;
    while (p < to && ok_) {
      const char* s = buf_.at(p);
      const void* nl = memchr(s, '\n', static_cast<size_t>(to - p));
      const uint64_t e = nl ? p + static_cast<uint64_t>(static_cast<const char*>(nl) - s) : to;
      take_line(std::string_view(s, static_cast<size_t>(e - p)), line + 1);
      if (nl) line++;
      p = nl ? e + 1 : to;
    }
    return line;
  }

  void take_line(std::string_view text, uint64_t line) {
    std::string_view t = trim(text);
    if (t.empty()) return;
    slow_++;
    auto v = parse_json(t);
    if (!v.is_ok()) {
      fail_data("line " + std::to_string(line) + " of " + source_ + ": " + v.status().to_string());
      return;
    }
    if (v->kind() != Kind::Object) {
      fail_data("line " + std::to_string(line) + " of " + source_ + ": expected a JSON object, found " +
                kind_name(v->kind()));
      return;
    }
    add_value(*v, line);
  }

  // True when [a, b) is JSON white space; *newlines counts its '\n's.
  bool blank(uint64_t a, uint64_t b, uint64_t* newlines) const {
    const char* p = buf_.at(a);
    const char* e = p + (b - a);
    uint64_t n = 0;
    for (; p < e; p++) {
      if (!json_space(*p)) return false;
      n += *p == '\n';
    }
    *newlines = n;
    return true;
  }

  // ------------------------------------------------------------------ JSON array

  // Cuts the array into elements at the commas outside strings and brackets,
  // as the plain reader always has: the fast reader then parses whole
  // elements only, and memory stays bounded.
  void scan_array() {
    const uint64_t end = buf_.end();
    uint64_t i = scan_pos_;
    while (i < end && scan_ != Scan::Failed) {
      const char c = *buf_.at(i);
      switch (scan_) {
        case Scan::Open:  // the '['
          scan_ = Scan::Before;
          i++;
          break;
        case Scan::Before:
          if (json_space(c)) {
            i++;
            break;
          }
          if (c == ']' && elements_found_ == 0 && !after_comma_) {
            scan_ = Scan::Done;
            i++;
            break;
          }
          if (c == ']' || c == ',') {
            scan_error(i, after_comma_ ? "a value is missing after ','" : "a value is missing before ','");
            break;
          }
          scan_ = Scan::In;
          element_start_ = i;
          element_line_ = newlines_before(i) + 1;
          depth_ = 0;
          in_string_ = escape_ = false;
          break;
        case Scan::In:
          i = scan_element(i, end);
          break;
        case Scan::Done:
          if (!json_space(c)) {
            scan_error(i, "unexpected data after the JSON array");
            break;
          }
          i++;
          break;
        case Scan::Failed: break;
      }
    }
    scan_pos_ = i;
  }

  // Inside an element from i: returns where the scan stopped (past the
  // element's ',' or ']', or the end of the input read so far).
  uint64_t scan_element(uint64_t i, uint64_t end) {
    // Outside strings, only these bytes change anything: 1 at any depth, 2 at depth 0 only.
    static const auto kStops = [] {
      std::array<uint8_t, 256> t{};
      for (unsigned char c : {'"', '{', '[', '}', ']'}) t[c] = 3;
      t[static_cast<unsigned char>(',')] = 2;
      return t;
    }();
    const char* const base = buf_.at(i);
    const char* p = base;
    const char* const e = base + (end - i);
    int depth = depth_;
    bool str = in_string_, esc = escape_;
    while (p < e) {
      if (str) {
        if (esc) {
          esc = false;
          p++;
          continue;
        }
        while (p < e && *p != '"' && *p != '\\') p++;
        if (p == e) break;
        if (*p++ == '\\') {
          esc = true;
        } else {
          str = false;
        }
        continue;
      }
      const uint8_t want = depth ? 1 : 2;
      while (p < e && !(kStops[static_cast<unsigned char>(*p)] & want)) p++;
      if (p == e) break;
      const char c = *p;
      if (c == '"') {
        str = true;
      } else if (c == '{' || c == '[') {
        depth++;
      } else if ((c == '}' || c == ']') && depth > 0) {
        depth--;
      } else if (depth == 0 && (c == ',' || c == ']')) {
        const uint64_t at = i + static_cast<uint64_t>(p - base);
        elements_.push_back({element_start_, at, ++elements_found_, element_line_});
        after_comma_ = c == ',';
        scan_ = after_comma_ ? Scan::Before : Scan::Done;
        return at + 1;
      }
      p++;
    }
    depth_ = depth;
    in_string_ = str;
    escape_ = esc;
    return end;
  }

  void scan_error(uint64_t at, const char* msg) {
    scan_ = Scan::Failed;
    error_at_ = at;
    error_ = msg;
    error_line_ = newlines_before(at) + 1;
  }

  // The newlines in the input before `off` (counted once, as offsets grow).
  uint64_t newlines_before(uint64_t off) {
    if (off > counted_at_) {
      const char* p = buf_.at(counted_at_);
      counted_ += static_cast<uint64_t>(std::count(p, p + (off - counted_at_), '\n'));
      counted_at_ = off;
    }
    return counted_;
  }

  void read_elements() {
    size_t i = opts_.fast ? fast_elements() : 0;
    for (; i < elements_.size() && ok_; i++) take_element(elements_[i]);
    elements_.clear();
  }

  // The elements through simdjson, as long as its documents are exactly the
  // scan's elements. Returns how many it took.
  size_t fast_elements() {
    const uint64_t from = elements_.front().start;
    const size_t len = static_cast<size_t>(elements_.back().end - from);
    if (starts_with_bom(from, len)) return 0;  // as in fast_lines
    od::document_stream docs;
    if (parser_.iterate_many(buf_.at(from), len, batch_capacity(len), true).get(docs)) return 0;
    const size_t n = elements_.size();
    size_t j = 0, taken = 0;
    std::string& doc = doc_;  // the document read, encoded
    bool complete = true;
    for (auto it = docs.begin(); it != docs.end(); ++it) {
      // The document must start where the element does: then the one before
      // it was that element, whole.
      if (j == n || from + it.current_index() != elements_[j].start) {
        complete = false;
        break;
      }
      if (j > taken) {
        add(doc, elements_[taken].line);
        taken++;
      }
      od::document_reference d;
      doc.clear();
      if ((*it).get(d) || !reader_.encode(d, &doc)) {
        complete = false;
        break;
      }
      j++;
    }
    if (complete && j == n && j > taken && docs.truncated_bytes() == 0) {
      add(doc, elements_[taken].line);
      taken++;
    }
    return taken;
  }

  void take_element(const Element& el) {
    slow_++;
    const std::string_view t = trim(std::string_view(buf_.at(el.start), static_cast<size_t>(el.end - el.start)));
    const std::string what = "array element " + std::to_string(el.number) + ": ";
    auto v = parse_json(t);
    if (!v.is_ok()) {
      fail_input(el.start, what + rebase_offset(v.status().to_string(), el.start), el.line);
      return;
    }
    if (v->kind() != Kind::Object) {
      fail_input(el.start, what + "expected a JSON object, found " + kind_name(v->kind()), el.line);
      return;
    }
    add_value(*v, el.line);
  }

  // parse_json names the byte offset inside the element: make it an offset in DATA.
  static std::string rebase_offset(const std::string& msg, uint64_t base) {
    const std::string key = " at byte ";
    size_t at = msg.rfind(key);
    if (at == std::string::npos) return msg;
    uint64_t n;
    if (!parse_count(std::string_view(msg).substr(at + key.size()), &n)) return msg;
    return msg.substr(0, at) + key + std::to_string(base + n) + " of the input";
  }

  // ------------------------------------------------------------------ documents

  // The parser's capacity only grows, so that it is not reallocated for
  // every region.
  size_t batch_capacity(size_t len) {
    if (len > parser_capacity_) parser_capacity_ = std::max(len + len / 4, opts_.region_bytes + opts_.region_bytes / 4);
    return parser_capacity_;
  }

  // ------------------------------------------------------------------ batches and errors

  // A document read by the plain reader: encoded as the fast one encodes.
  void add_value(const Value& doc, uint64_t line) {
    doc_.clear();
    encode_item(doc_, doc, false);
    add(doc_, line);
  }

  // An encoded document.
  void add(std::string_view doc, uint64_t line) {
    if (batch_.docs.empty()) batch_.first_line = line;
    batch_.last_line = line;
    batch_.docs.bytes().append(doc);
    batch_.docs.added();
    if (batch_.docs.size() >= opts_.batch || batch_.docs.byte_size() >= opts_.batch_bytes) flush_batch();
    if (++since_progress_check_ >= 4096) {
      since_progress_check_ = 0;
      maybe_progress();
    }
  }

  void flush_batch() {
    if (batch_.docs.empty()) return;
    Batch b = std::move(batch_);
    batch_ = Batch();
    batch_.docs.reserve(std::min<size_t>(b.docs.byte_size(), size_t{64} << 20));  // room for one like it
    if (!writer_.submit(std::move(b))) writer_ok();
  }

  // The engine numbers a batch's documents from 1 ("document 100: ...",
  // and a second one a unique value is given to, "... to document 7
  // too; ..."): the numbers in the input instead, and no position (the
  // statement's).
  static Status in_input(const Status& s, uint64_t first_doc) {
    constexpr std::string_view kDoc = "document ";
    std::string m = s.message();
    // The number at m[at], or 0 when none is there.
    const auto number_at = [&](size_t at, size_t* end) {
      uint64_t n = 0;
      size_t e = at;
      while (e < m.size() && e < at + 19 && m[e] >= '0' && m[e] <= '9') n = n * 10 + uint64_t(m[e++] - '0');
      *end = e;
      return n;
    };
    size_t e;
    const uint64_t n = m.rfind(kDoc, 0) == 0 ? number_at(kDoc.size(), &e) : 0;
    if (n == 0 || m.compare(e, 2, ": ") != 0) return without_position(s);
    constexpr std::string_view kToo = " too; nothing was written";
    const size_t to = m.rfind(" to document ");
    if (to != std::string::npos && to > e) {
      const size_t at = to + 13;
      size_t end;
      const uint64_t other = number_at(at, &end);
      if (other && m.compare(end, std::string::npos, kToo) == 0) m.replace(at, end - at, std::to_string(first_doc + other - 1));
    }
    return Status(s.code(), std::string(kDoc) + std::to_string(first_doc + n - 1) + m.substr(e));
  }

  // False (after reporting the failed batch, once) when a batch failed.
  bool writer_ok() {
    if (!writer_.failed()) return true;
    if (!failure_reported_) {
      failure_reported_ = true;
      const auto& f = writer_.failure();
      clear_progress();
      say("kitfox: error: " + in_input(f.status, f.first_doc).to_string());
      char buf[200];
      snprintf(buf, sizeof buf, "the failing batch held documents %llu to %llu of the input (lines %llu to %llu of ",
               static_cast<unsigned long long>(f.first_doc), static_cast<unsigned long long>(f.last_doc),
               static_cast<unsigned long long>(f.first_line), static_cast<unsigned long long>(f.last_line));
      say("kitfox: " + std::string(buf) + source_ + ")");
    }
    ok_ = false;
    return false;
  }

  void fail_input(uint64_t at, const std::string& msg, uint64_t line) {
    fail_data(source_ + ", byte " + std::to_string(at) + " (line " + std::to_string(line) + "): " + msg);
  }

  // Bad input: what came before it is still written, so that the import
  // stops exactly at the bad document whatever the batch size.
  void fail_data(const std::string& msg) {
    if (!ok_) return;
    const bool flushed = !batch_.docs.empty();
    flush_batch();
    writer_.drain();
    // The error is shown unless an earlier batch failed (the import stopped there).
    const bool shown = !writer_.failed() || (flushed && writer_.failure().batch == writer_.submitted());
    writer_ok();
    if (shown) {
      clear_progress();
      say("kitfox: error: " + msg);
    }
    ok_ = false;
  }

  void say(const std::string& line) {
    if (opts_.report) {
      opts_.report(opts_.report_ctx, line);
    } else {
      fprintf(stderr, "%s\n", line.c_str());
    }
  }

  void maybe_progress() {
    if (!opts_.progress) return;
    auto now = Clock::now();
    if (now - last_progress_ < std::chrono::milliseconds(100)) return;
    last_progress_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const uint64_t done = writer_.written();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    char buf[160];
    if (opts_.total_bytes > 0) {
      double frac = static_cast<double>(fed_) / static_cast<double>(opts_.total_bytes);
      if (frac > 1) frac = 1;
      constexpr int kBar = 30;
      int filled = static_cast<int>(frac * kBar);
      std::string bar(static_cast<size_t>(filled), '#');
      bar.append(static_cast<size_t>(kBar - filled), '.');
      snprintf(buf, sizeof buf, "\r%3d%% [%s] %llu rows, %.0f rows/s\x1b[K", static_cast<int>(frac * 100),
               bar.c_str(), static_cast<unsigned long long>(done), rate);
    } else {
      snprintf(buf, sizeof buf, "\r%.1f MiB read, %llu rows, %.0f rows/s\x1b[K", static_cast<double>(fed_) / (1 << 20),
               static_cast<unsigned long long>(done), rate);
    }
    fputs(buf, stderr);
    shown_ = true;
  }

  void clear_progress() {
    if (!shown_) return;
    fputs("\r\x1b[K", stderr);
    shown_ = false;
  }

  Database& db_;
  std::string collection_;
  std::string source_;
  ImportOptions opts_;
  DocumentReader reader_;  // documents straight from simdjson's On-Demand values
  BatchWriter writer_;
  od::parser parser_;
  size_t parser_capacity_ = 0;

  Clock::time_point start_, last_progress_;
  bool shown_ = false;
  uint64_t since_progress_check_ = 0;

  bool ok_ = true;
  bool failure_reported_ = false;
  Mode mode_ = Mode::Detect;
  Buffer buf_;
  uint64_t fed_ = 0;        // bytes of input given
  uint64_t pos_ = 0;        // NDJSON and detection: the first byte not yet read
  uint64_t lines_ = 0;      // NDJSON and detection: the newlines before pos_
  bool bom_checked_ = false;
  uint64_t last_newline_ = 0;  // NDJSON: past the last '\n' read

  // The array's scan.
  Scan scan_ = Scan::Open;
  uint64_t scan_pos_ = 0;
  uint64_t element_start_ = 0, element_line_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  bool after_comma_ = false;
  uint64_t elements_found_ = 0;
  std::vector<Element> elements_;  // found, not yet read
  uint64_t error_at_ = 0, error_line_ = 0;
  const char* error_ = "";
  uint64_t counted_at_ = 0, counted_ = 0;  // newlines before counted_at_

  Batch batch_;
  std::string doc_;  // one document, encoded, on its way into the batch
  uint64_t slow_ = 0;
};

Importer::Importer(Database& db, std::string collection, std::string source, ImportOptions options)
    : impl_(std::make_unique<Impl>(db, std::move(collection), std::move(source), options)) {}
Importer::~Importer() = default;
bool Importer::feed(std::string_view chunk) { return impl_->feed(chunk); }
bool Importer::finish() { return impl_->finish(); }
void Importer::stop() { impl_->stop(); }
uint64_t Importer::imported() const { return impl_->writer_.written(); }
uint64_t Importer::read_slowly() const { return impl_->slow_; }
double Importer::seconds() const { return std::chrono::duration<double>(Clock::now() - impl_->start_).count(); }

}  // namespace kitfox
