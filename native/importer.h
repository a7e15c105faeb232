// `kitfox import`: NDJSON or one JSON array of objects, read in chunks of
// any size, put into a collection in batches (one write each), with a
// progress line on a terminal. Bad input stops the import at the bad
// document, naming its byte and line; what came before it is written.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli_text.h"
#include "db.h"

namespace kitfox {

// A position in a statement the user did not write means nothing to them.
inline Status without_position(const Status& s) { return Status(s.code(), s.message()); }

class Importer {
 public:
  Importer(Database& db, std::string collection, std::string source, uint64_t batch, uint64_t total_bytes)
      : db_(db),
        collection_(std::move(collection)),
        source_(std::move(source)),
        batch_size_(batch),
        total_bytes_(total_bytes),
        progress_(isatty(STDERR_FILENO)),
        start_(Clock::now()),
        last_progress_(start_) {
    statement_ = "put " + collection_ + " $1";
  }

  // Consumes the next chunk of input; false once an error was reported.
  bool feed(std::string_view chunk) {
    for (size_t i = 0; i < chunk.size() && ok_;) {
      if (mode_ == Mode::Detect) {
        char c = chunk[i];
        if (offset_ == 0 && chunk.substr(i, 3) == "\xEF\xBB\xBF") {  // a byte order mark
          i += 3, offset_ += 3;
          continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
          if (c == '\n') line_++;
          i++, offset_++;
          continue;
        }
        // Leading blank lines are skipped but still counted.
        mode_ = c == '[' ? Mode::Array : Mode::Lines;
        continue;
      }
      size_t n = mode_ == Mode::Lines ? feed_lines(chunk.substr(i)) : feed_array(chunk.substr(i));
      i += n;
    }
    maybe_progress();
    return ok_;
  }

  bool finish() {
    if (!ok_) return false;
    if (mode_ == Mode::Lines && !line_buf_.empty()) {
      line_++;
      take_line();
    } else if (mode_ == Mode::Array && array_state_ != ArrayState::Done) {
      fail_input(offset_, "the JSON array is not closed (unexpected end of input)");
    }
    if (ok_) flush_batch();
    clear_progress();
    return ok_;
  }

  uint64_t imported() const { return imported_; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Mode { Detect, Lines, Array };
  enum class ArrayState { Open, BeforeElement, InElement, Done };

  // NDJSON: returns the bytes consumed.
  size_t feed_lines(std::string_view s) {
    size_t nl = s.find('\n');
    if (nl == std::string_view::npos) {
      line_buf_.append(s);
      offset_ += s.size();
      return s.size();
    }
    line_buf_.append(s.substr(0, nl));
    offset_ += nl + 1;
    line_++;
    take_line();
    line_buf_.clear();
    return nl + 1;
  }

  void take_line() {
    std::string_view t = trim(line_buf_);
    if (t.empty()) return;
    auto v = parse_json(t);
    if (!v.is_ok()) {
      fail_data("line " + std::to_string(line_) + " of " + source_ + ": " + v.status().to_string());
      return;
    }
    if (v->kind() != Kind::Object) {
      fail_data("line " + std::to_string(line_) + " of " + source_ + ": expected a JSON object, found " +
           kind_name(v->kind()));
      return;
    }
    add(std::move(*v), line_);
  }

  // One JSON array of objects, cut into elements here so that each is parsed
  // on its own: the input need not fit in memory twice.
  size_t feed_array(std::string_view s) {
    size_t i = 0;
    for (; i < s.size() && ok_; i++, offset_++) {
      char c = s[i];
      if (c == '\n') line_++;
      const bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
      switch (array_state_) {
        case ArrayState::Open:  // the '['
          array_state_ = ArrayState::BeforeElement;
          break;
        case ArrayState::BeforeElement:
          if (space) break;
          if (c == ']' && elements_ == 0 && !after_comma_) {
            array_state_ = ArrayState::Done;
            break;
          }
          if (c == ']' || c == ',') {
            fail_input(offset_, after_comma_ ? "a value is missing after ','" : "a value is missing before ','");
            break;
          }
          array_state_ = ArrayState::InElement;
          element_.clear();
          element_offset_ = offset_;
          element_line_ = line_ + 1;
          depth_ = 0;
          in_string_ = escape_ = false;
          element_char(c);
          break;
        case ArrayState::InElement:
          element_char(c);
          break;
        case ArrayState::Done:
          if (space) break;
          fail_input(offset_, "unexpected data after the JSON array");
          break;
      }
    }
    return i;
  }

  void element_char(char c) {
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      depth_++;
    } else if ((c == '}' || c == ']') && depth_ > 0) {
      depth_--;
    } else if (depth_ == 0 && (c == ',' || c == ']')) {
      take_element();
      after_comma_ = c == ',';
      array_state_ = c == ',' ? ArrayState::BeforeElement : ArrayState::Done;
      return;
    }
    element_.push_back(c);
  }

  void take_element() {
    elements_++;
    std::string_view t = trim(element_);
    auto v = parse_json(t);
    if (!v.is_ok()) {
      fail_input(element_offset_,
                 "array element " + std::to_string(elements_) + ": " +
                     rebase_offset(v.status().to_string(), element_offset_),
                 element_line_);
      return;
    }
    if (v->kind() != Kind::Object) {
      fail_input(element_offset_,
                 "array element " + std::to_string(elements_) + ": expected a JSON object, found " +
                     kind_name(v->kind()),
                 element_line_);
      return;
    }
    add(std::move(*v), element_line_);
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

  void add(Value doc, uint64_t line) {
    if (batch_.empty()) batch_first_line_ = line;
    batch_last_line_ = line;
    batch_.push_back(std::move(doc));
    if (batch_.size() >= batch_size_) flush_batch();
    if (++since_progress_check_ >= 4096) {
      since_progress_check_ = 0;
      maybe_progress();
    }
  }

  void flush_batch() {
    if (batch_.empty() || !ok_) return;
    const size_t n = batch_.size();
    std::vector<Value> params;
    params.push_back(Value::list(std::move(batch_)));
    batch_.clear();
    auto r = db_.query(statement_, params);
    if (!r.is_ok()) {
      clear_progress();
      print_error(without_position(r.status()).to_string());
      fprintf(stderr,
              "kitfox: the failing batch held documents %llu to %llu of the input (lines %llu to %llu of %s)\n",
              static_cast<unsigned long long>(imported_ + 1), static_cast<unsigned long long>(imported_ + n),
              static_cast<unsigned long long>(batch_first_line_), static_cast<unsigned long long>(batch_last_line_),
              source_.c_str());
      ok_ = false;
      return;
    }
    imported_ += n;
    maybe_progress();
  }

  void fail(const std::string& msg) {
    clear_progress();
    print_error(msg);
    ok_ = false;
  }

  void fail_input(uint64_t at, const std::string& msg, uint64_t line = 0) {
    if (line == 0) line = line_ + 1;
    fail_data(source_ + ", byte " + std::to_string(at) + " (line " + std::to_string(line) + "): " + msg);
  }

  // Bad input: what came before it is still written, so that the import
  // stops exactly at the bad document whatever the batch size.
  void fail_data(const std::string& msg) {
    flush_batch();
    fail(msg);
  }

  void maybe_progress() {
    if (!progress_) return;
    auto now = Clock::now();
    if (now - last_progress_ < std::chrono::milliseconds(100)) return;
    last_progress_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? static_cast<double>(imported_) / secs : 0;
    char buf[160];
    if (total_bytes_ > 0) {
      double frac = static_cast<double>(offset_) / static_cast<double>(total_bytes_);
      if (frac > 1) frac = 1;
      constexpr int kBar = 30;
      int filled = static_cast<int>(frac * kBar);
      std::string bar(static_cast<size_t>(filled), '#');
      bar.append(static_cast<size_t>(kBar - filled), '.');
      snprintf(buf, sizeof buf, "\r%3d%% [%s] %llu rows, %.0f rows/s\x1b[K", static_cast<int>(frac * 100),
               bar.c_str(), static_cast<unsigned long long>(imported_), rate);
    } else {
      snprintf(buf, sizeof buf, "\r%.1f MiB read, %llu rows, %.0f rows/s\x1b[K",
               static_cast<double>(offset_) / (1 << 20),
               static_cast<unsigned long long>(imported_), rate);
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
  std::string statement_;
  uint64_t batch_size_;
  uint64_t total_bytes_;
  bool progress_;
  bool shown_ = false;
  Clock::time_point start_, last_progress_;
  uint64_t since_progress_check_ = 0;

  bool ok_ = true;
  Mode mode_ = Mode::Detect;
  uint64_t offset_ = 0;  // bytes of input consumed
  uint64_t line_ = 0;    // complete lines consumed
  std::string line_buf_;

  ArrayState array_state_ = ArrayState::Open;
  std::string element_;
  uint64_t element_offset_ = 0;
  uint64_t element_line_ = 0;
  uint64_t elements_ = 0;
  bool after_comma_ = false;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;

  std::vector<Value> batch_;
  uint64_t batch_first_line_ = 0, batch_last_line_ = 0;
  uint64_t imported_ = 0;
};

}  // namespace kitfox
