#include "line_editor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>

namespace kitfox {

namespace {

struct Range {
  uint32_t lo, hi;
};

// Combining marks and other characters that take no column of their own.
constexpr Range kZeroWidth[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
    {0x064B, 0x065F}, {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E},
    {0x1160, 0x11FF}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F},
    {0x202A, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F},
    {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0x1F3FB, 0x1F3FF}, {0xE0000, 0xE01EF},
};

// East Asian wide and fullwidth characters, and the common emoji blocks.
constexpr Range kWide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
    {0x23F0, 0x23F0},   {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},
    {0x2648, 0x2653},   {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
    {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},   {0x26CE, 0x26CE},
    {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
    {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},
    {0x2757, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27B0},   {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x303E},
    {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
    {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},
    {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4},
    {0x17000, 0x18CFF}, {0x1B000, 0x1B2FF}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF},
    {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F251}, {0x1F300, 0x1F64F},
    {0x1F680, 0x1F6FF}, {0x1F7E0, 0x1F7EB}, {0x1F90C, 0x1F9FF}, {0x1FA70, 0x1FAFF},
    {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

template <size_t N>
bool in_ranges(const Range (&table)[N], uint32_t cp) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < table[mid].lo) {
      hi = mid;
    } else if (cp > table[mid].hi) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}

}  // namespace

int codepoint_width(uint32_t cp) {
  if (cp == '\t') return 1;  // shown as a space
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return 0;
  if (cp < 0x300) return 1;
  if (in_ranges(kZeroWidth, cp)) return 0;
  if (in_ranges(kWide, cp)) return 2;
  return 1;
}

size_t display_width(std::string_view s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    i += utf8_decode(s, i, &cp);
    w += codepoint_width(cp);
  }
  return w;
}

namespace {

// A character as the cursor sees it: a code point and the zero-width code
// points (combining marks, variation selectors) that follow it.
size_t next_char(std::string_view s, size_t pos) {
  if (pos >= s.size()) return s.size();
  uint32_t cp;
  pos += utf8_decode(s, pos, &cp);
  while (pos < s.size()) {
    size_t n = utf8_decode(s, pos, &cp);
    if (cp < 0x300 || codepoint_width(cp) != 0) break;
    pos += n;
  }
  return pos;
}

size_t prev_codepoint(std::string_view s, size_t pos) {
  if (pos == 0) return 0;
  size_t p = pos - 1;
  // Step back over continuation bytes, but no further than a sequence can be.
  while (p > 0 && pos - p < 4 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) p--;
  uint32_t cp;
  if (p + utf8_decode(s, p, &cp) != pos) return pos - 1;  // malformed: one byte
  return p;
}

size_t prev_char(std::string_view s, size_t pos) {
  while (pos > 0) {
    size_t p = prev_codepoint(s, pos);
    uint32_t cp;
    utf8_decode(s, p, &cp);
    pos = p;
    if (cp < 0x300 || codepoint_width(cp) != 0) break;
  }
  return pos;
}

bool is_word_byte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         u == '_';
}

// The terminal's settings before raw mode, restored at exit or on a fatal signal
// even when the editor object is gone.
struct termios g_saved;
int g_raw_fd = -1;

void restore_terminal() {
  if (g_raw_fd >= 0) {
    tcsetattr(g_raw_fd, TCSADRAIN, &g_saved);
    g_raw_fd = -1;
  }
}

void on_fatal_signal(int sig) {
  restore_terminal();
  signal(sig, SIG_DFL);
  raise(sig);
}

bool g_handlers_installed = false;

void install_handlers() {
  if (g_handlers_installed) return;
  g_handlers_installed = true;
  atexit(restore_terminal);
  const int sigs[] = {SIGTERM, SIGHUP, SIGQUIT};
  for (int sig : sigs) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler == SIG_IGN) continue;
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(sig, &sa, nullptr);
  }
}

bool terminal_supported() {
  const char* term = getenv("TERM");
  if (term == nullptr) return true;
  return strcmp(term, "dumb") != 0 && strcmp(term, "cons25") != 0 && strcmp(term, "emacs") != 0 &&
         term[0] != '\0';
}

constexpr int ctrl(char c) { return c & 0x1F; }

}  // namespace

// ---------------------------------------------------------------------------
// LineEditor

LineEditor::LineEditor(int in_fd, int out_fd) : in_fd_(in_fd), out_fd_(out_fd) {
  capable_ = isatty(in_fd_) && isatty(out_fd_) && terminal_supported();
}

LineEditor::~LineEditor() { disable_raw(); }

void LineEditor::set_history_limit(size_t n) {
  history_limit_ = n;
  if (history_.size() > n) history_.erase(history_.begin(), history_.end() - static_cast<long>(n));
}

void LineEditor::add_history(std::string_view entry) {
  if (entry.empty() || entry.find('\n') != std::string_view::npos || history_limit_ == 0) return;
  if (!history_.empty() && history_.back() == entry) return;
  if (history_.size() >= history_limit_) history_.erase(history_.begin());
  history_.emplace_back(entry);
}

bool LineEditor::load_history(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return errno == ENOENT;
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) >= 0) {
    std::string_view s(line, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
    add_history(s);
  }
  free(line);
  fclose(f);
  return true;
}

bool LineEditor::save_history(const std::string& path) const {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  // Statements can hold private data: the history is for its owner only.
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    close(fd);
    unlink(tmp.c_str());
    return false;
  }
  size_t first = history_.size() > history_limit_ ? history_.size() - history_limit_ : 0;
  bool ok = true;
  for (size_t i = first; i < history_.size() && ok; i++) {
    ok = fwrite(history_[i].data(), 1, history_[i].size(), f) == history_[i].size() &&
         fputc('\n', f) != EOF;
  }
  ok = (fclose(f) == 0) && ok;
  if (ok) ok = rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) unlink(tmp.c_str());
  return ok;
}

LineEditor::Read LineEditor::read_line(std::string_view prompt, std::string* line) {
  line->clear();
  if (!capable_) return read_plain(prompt, line);
  if (!enable_raw()) {
    capable_ = false;
    return read_plain(prompt, line);
  }
  Read r = read_raw(prompt, line);
  disable_raw();
  return r;
}

LineEditor::Read LineEditor::read_plain(std::string_view prompt, std::string* line) {
  if (isatty(in_fd_)) {
    fwrite(prompt.data(), 1, prompt.size(), stdout);
    fflush(stdout);
  }
  for (;;) {
    char c;
    ssize_t n = read(in_fd_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!line->empty()) return Read::Line;
      if (isatty(in_fd_)) fputc('\n', stdout);  // end the prompt's line after Ctrl-D
      return Read::Eof;
    }
    if (c == '\n') break;
    line->push_back(c);
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return Read::Line;
}

bool LineEditor::enable_raw() {
  if (raw_) return true;
  struct termios t;
  if (tcgetattr(in_fd_, &t) != 0) return false;
  install_handlers();
  g_saved = t;
  // Output processing stays on, so '\n' still moves to the start of a line.
  t.c_iflag &= ~static_cast<tcflag_t>(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
  t.c_cflag |= CS8;
  t.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN | ISIG);
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  // TCSADRAIN, not TCSAFLUSH: typed-ahead or pasted input must survive.
  if (tcsetattr(in_fd_, TCSADRAIN, &t) != 0) return false;
  g_raw_fd = in_fd_;
  raw_ = true;
  return true;
}

void LineEditor::disable_raw() {
  if (!raw_) return;
  restore_terminal();
  raw_ = false;
}

int LineEditor::read_byte() {
  if (pushback_ >= 0) {
    int b = pushback_;
    pushback_ = -1;
    return b;
  }
  for (;;) {
    unsigned char c;
    ssize_t n = read(in_fd_, &c, 1);
    if (n == 1) return c;
    if (n < 0 && errno == EINTR) continue;
    return -1;
  }
}

bool LineEditor::byte_ready(int timeout_ms) {
  if (pushback_ >= 0) return true;
  struct pollfd p;
  p.fd = in_fd_;
  p.events = POLLIN;
  p.revents = 0;
  for (;;) {
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

void LineEditor::write_out(std::string_view s) {
  while (!s.empty()) {
    ssize_t n = write(out_fd_, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

int LineEditor::columns() {
  struct winsize ws;
  if (ioctl(out_fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void LineEditor::refresh() {
  const size_t cols = static_cast<size_t>(columns());
  const size_t pw = display_width(prompt_);
  // Keep the last column free so the terminal never wraps on its own.
  size_t avail = cols > pw + 1 ? cols - pw - 1 : 1;

  // Scroll horizontally so that the cursor stays visible.
  size_t start = 0;
  size_t before = display_width(std::string_view(buf_).substr(0, cursor_));
  while (before > avail && start < cursor_) {
    size_t next = next_char(buf_, start);
    before -= display_width(std::string_view(buf_).substr(start, next - start));
    start = next;
  }
  size_t end = start, width = 0;
  while (end < buf_.size()) {
    size_t next = next_char(buf_, end);
    size_t w = display_width(std::string_view(buf_).substr(end, next - end));
    if (width + w > avail) break;
    width += w;
    end = next;
  }

  std::string out = "\r";
  out += prompt_;
  // The line as typed, shown: a tab as a space, other control bytes (which
  // would move the terminal's cursor) as '?', a byte that is no UTF-8 as
  // U+FFFD (the line keeps them all as they came).
  for (size_t i = start; i < end;) {
    uint32_t cp;
    const size_t n = utf8_decode(buf_, i, &cp);
    if (cp == 0xFFFD && n == 1) out += "\xEF\xBF\xBD";
    else if (cp == '\t') out += ' ';
    else if (cp < 0x20 || cp == 0x7F) out += '?';
    else out.append(buf_, i, n);
    i += n;
  }
  out += "\x1b[0K\r";
  size_t col = pw + before;
  if (col > 0) out += "\x1b[" + std::to_string(col) + "C";
  write_out(out);
}

void LineEditor::insert(std::string_view bytes) {
  buf_.insert(cursor_, bytes);
  cursor_ += bytes.size();
}

void LineEditor::move_left() { cursor_ = prev_char(buf_, cursor_); }
void LineEditor::move_right() { cursor_ = next_char(buf_, cursor_); }

void LineEditor::move_word_left() {
  while (cursor_ > 0 && !is_word_byte(buf_[cursor_ - 1])) cursor_ = prev_char(buf_, cursor_);
  while (cursor_ > 0 && is_word_byte(buf_[cursor_ - 1])) cursor_ = prev_char(buf_, cursor_);
}

void LineEditor::move_word_right() {
  while (cursor_ < buf_.size() && !is_word_byte(buf_[cursor_])) cursor_ = next_char(buf_, cursor_);
  while (cursor_ < buf_.size() && is_word_byte(buf_[cursor_])) cursor_ = next_char(buf_, cursor_);
}

void LineEditor::delete_at_cursor() {
  if (cursor_ >= buf_.size()) return;
  buf_.erase(cursor_, next_char(buf_, cursor_) - cursor_);
}

void LineEditor::backspace() {
  if (cursor_ == 0) return;
  size_t p = prev_codepoint(buf_, cursor_);
  // Backspace removes one code point: a combining mark goes before its base.
  buf_.erase(p, cursor_ - p);
  cursor_ = p;
}

void LineEditor::kill_word_before() {
  size_t end = cursor_;
  while (cursor_ > 0 && buf_[cursor_ - 1] == ' ') cursor_--;
  while (cursor_ > 0 && buf_[cursor_ - 1] != ' ') cursor_ = prev_char(buf_, cursor_);
  buf_.erase(cursor_, end - cursor_);
}

void LineEditor::history_step(int dir) {
  if (history_.empty()) return;
  if (history_pos_ > history_.size()) history_pos_ = history_.size();
  if (dir < 0) {
    if (history_pos_ == 0) return;
    if (history_pos_ == history_.size()) draft_ = buf_;
    history_pos_--;
    buf_ = history_[history_pos_];
  } else {
    if (history_pos_ >= history_.size()) return;
    history_pos_++;
    buf_ = history_pos_ == history_.size() ? draft_ : history_[history_pos_];
  }
  cursor_ = buf_.size();
}

LineEditor::Read LineEditor::read_raw(std::string_view prompt, std::string* line) {
  prompt_ = std::string(prompt);
  buf_.clear();
  cursor_ = 0;
  history_pos_ = history_.size();
  draft_.clear();
  refresh();

  for (;;) {
    int c = read_byte();
    if (c < 0) {
      write_out("\n");
      if (buf_.empty()) return Read::Eof;
      *line = std::move(buf_);
      buf_.clear();
      return Read::Line;
    }
    switch (c) {
      case '\r':
      case '\n':
        cursor_ = buf_.size();
        refresh();
        write_out("\n");
        *line = std::move(buf_);
        buf_.clear();
        return Read::Line;
      case ctrl('C'):
        cursor_ = buf_.size();
        refresh();
        write_out("^C\n");
        buf_.clear();
        return Read::Interrupted;
      case ctrl('D'):
        if (buf_.empty()) {
          write_out("\n");
          return Read::Eof;
        }
        delete_at_cursor();
        break;
      case ctrl('A'):
        cursor_ = 0;
        break;
      case ctrl('E'):
        cursor_ = buf_.size();
        break;
      case ctrl('B'):
        move_left();
        break;
      case ctrl('F'):
        move_right();
        break;
      case ctrl('H'):
      case 0x7F:
        backspace();
        break;
      case ctrl('U'):
        buf_.erase(0, cursor_);
        cursor_ = 0;
        break;
      case ctrl('K'):
        buf_.erase(cursor_);
        break;
      case ctrl('W'):
        kill_word_before();
        break;
      case ctrl('P'):
        history_step(-1);
        break;
      case ctrl('N'):
        history_step(+1);
        break;
      case ctrl('L'):
        write_out("\x1b[H\x1b[2J");
        break;
      case ctrl('Z'): {
        disable_raw();
        write_out("\n");
        raise(SIGTSTP);
        // Resumed.
        enable_raw();
        break;
      }
      case '\t':  // no completion: a tab is kept (shown as a space)
        insert("\t");
        break;
      case 0x1B: {
        // A lone Escape has nothing behind it; a key sequence arrives at once.
        if (!byte_ready(50)) break;
        int c1 = read_byte();
        if (c1 == 'b' || c1 == 'B') {
          move_word_left();
          break;
        }
        if (c1 == 'f' || c1 == 'F') {
          move_word_right();
          break;
        }
        if (c1 != '[' && c1 != 'O') break;
        int c2 = read_byte();
        // CSI: parameters (digits and ';'), then a final byte.
        std::string params;
        while (c2 >= 0 && ((c2 >= '0' && c2 <= '9') || c2 == ';') && params.size() < 16) {
          params.push_back(static_cast<char>(c2));
          c2 = read_byte();
        }
        const bool modified = params.find(';') != std::string::npos;  // e.g. Ctrl-Left "1;5D"
        switch (c2) {
          case 'A':
            history_step(-1);
            break;
          case 'B':
            history_step(+1);
            break;
          case 'C':
            modified ? move_word_right() : move_right();
            break;
          case 'D':
            modified ? move_word_left() : move_left();
            break;
          case 'H':
            cursor_ = 0;
            break;
          case 'F':
            cursor_ = buf_.size();
            break;
          case '~': {
            int n = atoi(params.c_str());
            if (n == 1 || n == 7) cursor_ = 0;
            else if (n == 4 || n == 8) cursor_ = buf_.size();
            else if (n == 3) delete_at_cursor();
            break;
          }
          default:
            break;
        }
        break;
      }
      default: {
        if (c < 0x20) break;  // other control keys do nothing
        // Gather one whole UTF-8 character before inserting it.
        unsigned char lead = static_cast<unsigned char>(c);
        size_t len = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3
                                   : (lead & 0xF8) == 0xF0    ? 4
                                                              : 0;
        std::string ch(1, static_cast<char>(lead));
        bool ok = len != 0;
        while (ok && ch.size() < len) {
          int b = read_byte();
          if (b < 0 || (b & 0xC0) != 0x80) {
            pushback_ = b;
            ok = false;
            break;
          }
          ch.push_back(static_cast<char>(b));
        }
        // A malformed sequence is kept as it came (shown as U+FFFD): the
        // statement is then refused as text that is no UTF-8, as from a
        // file, not stored with other text in its place.
        insert(ch);
        break;
      }
    }
    // Pasted text arrives faster than it can be drawn: draw once it stops.
    if (!byte_ready(0)) refresh();
  }
}

}  // namespace kitfox
