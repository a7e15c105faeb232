// The interactive prompt's line editor (native/line_editor.cpp) driven
// through a pseudo-terminal: what is typed is what the line holds.
#include <pty.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include <doctest/doctest.h>
#include "line_editor.h"

using namespace kitfox;

namespace {

// The line read after `typed` (keys as bytes) comes from the terminal.
std::string typed_line(const std::string& typed, LineEditor::Read* how = nullptr) {
  int master = -1, slave = -1;
  REQUIRE(openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  setenv("TERM", "xterm", 1);
  std::string line;
  {
    LineEditor ed(slave, slave);
    REQUIRE(ed.capable());
    REQUIRE(write(master, typed.data(), typed.size()) == static_cast<ssize_t>(typed.size()));
    const LineEditor::Read r = ed.read_line("> ", &line);
    if (how) *how = r;
  }
  close(master);
  close(slave);
  return line;
}

}  // namespace

TEST_CASE("line editor: a line keeps its tabs and its bytes that are no UTF-8, as typed") {
  // A Latin-1 é, a tab, a euro sign cut short, and UTF-8 as it should be:
  // the statement then meets the same check as from a file (it was
  // stored with U+FFFD and a space in their places).
  LineEditor::Read how;
  CHECK(typed_line("put t {s: \"caf\xe9\", u: \"a\tb\", v: \"\xe2\x82\", w: \"\xc3\xa9\"}\r", &how) ==
        "put t {s: \"caf\xe9\", u: \"a\tb\", v: \"\xe2\x82\", w: \"\xc3\xa9\"}");
  CHECK(how == LineEditor::Read::Line);
  // Backspace takes a malformed byte away as one character.
  CHECK(typed_line("ab\xff\x7f" "c\r") == "abc");
  CHECK(typed_line("a\tb\x7f\x7f" "c\r") == "ac");
}
