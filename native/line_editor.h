// A small line editor for the interactive `kitfox` prompt: one line at a time
// in termios raw mode, with history, UTF-8 aware cursor movement and horizontal
// scrolling of lines wider than the terminal. On a terminal that cannot do it
// (TERM=dumb, or input/output not a terminal) it falls back to plain getline.
//
// Keys: Left/Right (Ctrl-B/F), Home/End (Ctrl-A/E), Alt-B/F or Ctrl-Left/Right
// (word), Backspace, Delete, Ctrl-D (delete; exit on an empty line), Ctrl-U
// (kill to start), Ctrl-K (kill to end), Ctrl-W (kill previous word), Up/Down
// (Ctrl-P/N) history, Ctrl-L clear screen, Ctrl-C discard the line, Ctrl-Z suspend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "value.h"  // utf8_decode

namespace kitfox {

// Terminal columns of one code point: 0 for combining marks and zero-width
// characters, 2 for East Asian wide characters and most emoji, else 1.
int codepoint_width(uint32_t cp);

// Terminal columns taken by UTF-8 text (malformed bytes count as one column).
size_t display_width(std::string_view s);

class LineEditor {
 public:
  enum class Read { Line, Interrupted, Eof };

  explicit LineEditor(int in_fd = 0, int out_fd = 1);
  ~LineEditor();
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  // True when raw-mode editing is used; false means plain getline.
  bool capable() const { return capable_; }

  // Shows `prompt` and reads one line (without its newline) into *line.
  // Interrupted: the user pressed Ctrl-C (the line is discarded).
  // Eof: Ctrl-D on an empty line, or end of input.
  Read read_line(std::string_view prompt, std::string* line);

  // History entries are single lines; an entry holding a newline, an empty
  // entry and a repeat of the newest entry are not added.
  void add_history(std::string_view entry);
  const std::vector<std::string>& history() const { return history_; }
  void set_history_limit(size_t n);

  // Reads entries from a file (one per line); a missing file is not an error.
  bool load_history(const std::string& path);
  // Writes the newest `limit` entries, replacing the file atomically.
  bool save_history(const std::string& path) const;

 private:
  Read read_plain(std::string_view prompt, std::string* line);
  Read read_raw(std::string_view prompt, std::string* line);
  bool enable_raw();
  void disable_raw();
  int read_byte();                 // -1 at end of input or error
  bool byte_ready(int timeout_ms);  // input waiting within timeout_ms
  void refresh();
  void write_out(std::string_view s);
  int columns();

  void insert(std::string_view bytes);
  void move_left();
  void move_right();
  void move_word_left();
  void move_word_right();
  void delete_at_cursor();
  void backspace();
  void kill_word_before();
  void history_step(int dir);

  int in_fd_;
  int out_fd_;
  bool capable_ = false;
  bool raw_ = false;
  int pushback_ = -1;  // a byte read ahead while decoding input

  std::string prompt_;
  std::string buf_;
  size_t cursor_ = 0;  // byte offset into buf_, always on a character boundary

  std::vector<std::string> history_;
  size_t history_limit_ = 1000;
  size_t history_pos_ = 0;  // == history_.size() while editing a new line
  std::string draft_;       // the new line, kept while browsing history
};

}  // namespace kitfox
