// The `kitfox` command: run statements against a database file, interactively
// or from arguments and standard input, and the maintenance commands
// (import, stats, checkpoint, compact). Run `kitfox --help` for the usage.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "db.h"
#include "cli_text.h"
#include "http_server.h"
#include "importer.h"
#include "line_editor.h"
#include "posix_file.h"
#include "query/lexer.h"

namespace kitfox {
namespace {

constexpr const char* kVersion = "kitfox 0.1.0";
constexpr const char* kPrompt = "kitfox> ";
constexpr const char* kContinuePrompt = "   ...> ";
constexpr size_t kHistoryEntries = 1000;
constexpr size_t kMaxCellWidth = 80;  // table cells wider than this are cut with "…"

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char kHelp[] =
    R"(kitfox 0.1.0: an embedded document database

usage:
  kitfox FILE [options]                  on a terminal: an interactive prompt
  kitfox FILE -c STATEMENT... [options]  run statements, print rows as JSON lines
  ... | kitfox FILE [options]            run the statements read from standard input
  kitfox import FILE COLLECTION DATA [--batch N]
  kitfox stats FILE [--json]
  kitfox checkpoint FILE
  kitfox compact FILE
  kitfox serve FILE [--host H] [--port P] [--sync MODE] [--token T]
               [--cors ORIGINS] [--max-body BYTES] [--loops N] [--threads N]
               [--timeout SECONDS]
  kitfox --help | --version

FILE is created when it does not exist (by serve too; import, stats,
checkpoint and compact need an existing database, and leave an empty file
as it is). FILE :memory: is a database in memory, gone when the command
ends (kitfox :memory: -c ..., kitfox serve :memory:).

options:
  -c STATEMENT    run one statement; repeat to run several, in order. The run
                  stops at the first statement that fails.
  --param JSON    the value of $1, then $2, ... (repeatable), given to every
                  statement: --param 42 --param '"text"' --param '[0.5, 1]'
  --table         print each result as an aligned table, not as JSON lines
  --sync MODE     always (flush every write before it is acknowledged), off
                  (flush on checkpoint and close only), or a period in
                  milliseconds (default 250)
  --recover       open a damaged file: keep everything before the damage
                  (rebuilding a damaged index or graph), save the damaged
                  original as FILE.damaged (.damaged.2, ... when taken),
                  and report what was cut
  --batch N       import: documents per write (default 1000; fewer when they
                  pass 64 MiB encoded)
  --json          stats: print one JSON object

serve answers HTTP on HOST:PORT (default 127.0.0.1:7700; --port 0 takes a free
port) until SIGINT or SIGTERM, then finishes the requests in flight, flushes
and closes the database. It prints its URL on standard output. Endpoints:
POST /query {"query", "params"}, POST /batch [{"query", "params"}, ...],
POST /docs/COLLECTION (a JSON array or NDJSON of documents), GET /health,
GET /stats; see docs/server.md.
  --token T       every request but /health needs "Authorization: Bearer T"
                  (or set KITFOX_TOKEN instead, out of sight of ps)
  --cors ORIGINS  web pages of these origins (comma-separated, or *) may call
                  the server from a browser; none by default
  --max-body N    the largest request body in bytes (default 67108864)
  --loops N       event loops, the threads that read requests, run the short
                  ones (a read by id or through an index, a put) and write
                  the answers (default: one a core)
  --threads N     threads for the requests that may run long (a read that
                  scans or goes through many documents, a set or del not by
                  id, an index build, a checkpoint, a body over 64 KiB), so
                  that they hold up no loop (default max(4, cores))
  --timeout S     a request must arrive whole within S seconds, and an idle
                  connection is closed after S seconds (default 30)

Statements read from standard input or typed at the prompt end at a ';' outside
a "string", or at the end of a line when no ( [ { is open and no string is
open: a statement can span lines inside brackets. -- starts a comment that runs
to the end of the line.

import reads DATA (a path, or - for standard input) as NDJSON, one JSON object
per line, or as one JSON array of objects when its first character is '['.
A byte order mark and blank lines are skipped. The collection must exist.
Documents are written in batches: a bad document stops the import, naming its
line (and, in an array, its byte offset), and every document before it is
written; a batch the engine refuses is named by its documents and lines.

The words import, stats, checkpoint, compact and serve are commands only as the first
argument. To open a database file with one of those names, give a path to it,
such as ./stats.

At the prompt: .help, .table (toggle table output), .stats, .quit or .exit.
Line editing keys: arrows, Home/End (Ctrl-A/E), Ctrl-U, Ctrl-K, Ctrl-W,
Up/Down for history (kept in ~/.kitfox_history), Ctrl-C to discard the line,
Ctrl-D on an empty line to leave.

exit status: 0 success, 1 an error, 2 bad usage.
)";

const char kUsage[] =
    "usage: kitfox FILE [-c STATEMENT]... [--param JSON]... [--table] [--sync always|off|MS] "
    "[--recover]\n"
    "       kitfox import FILE COLLECTION DATA [--batch N] [--sync always|off|MS]\n"
    "       kitfox stats FILE [--json]\n"
    "       kitfox checkpoint FILE\n"
    "       kitfox compact FILE\n"
    "       kitfox serve FILE [--host H] [--port P] [--sync always|off|MS] [--token T]\n"
    "                         [--cors ORIGINS] [--max-body BYTES] [--loops N] [--threads N]\n"
    "                         [--timeout SECONDS]\n"
    "Run 'kitfox --help' for more.\n";

int usage_error(const std::string& msg) {
  fprintf(stderr, "kitfox: %s\n%s", msg.c_str(), kUsage);
  return kExitUsage;
}


// ---------------------------------------------------------------------------
// Standard output. SIGPIPE is ignored so that a closed pipe (`| head`) ends the
// run through this check, and the database is still closed properly.

bool g_out_failed = false;
int g_out_errno = 0;

void out_write(std::string_view s) {
  if (g_out_failed || s.empty()) return;
  if (fwrite(s.data(), 1, s.size(), stdout) != s.size()) {
    g_out_failed = true;
    g_out_errno = errno;
  }
}

// Flushes; false once standard output cannot be written. Reports the failure
// once, unless the reader simply went away.
bool out_flush() {
  if (!g_out_failed && fflush(stdout) != 0) {
    g_out_failed = true;
    g_out_errno = errno;
  }
  static bool reported = false;
  if (g_out_failed && !reported) {
    reported = true;
    if (g_out_errno != EPIPE) print_error(std::string("writing standard output: ") + strerror(g_out_errno));
  }
  return !g_out_failed;
}

// ---------------------------------------------------------------------------
// Small text helpers

bool is_comment_line(std::string_view line) { return trim(line).substr(0, 2) == "--"; }

std::string human_bytes(uint64_t n) {
  std::string s = std::to_string(n);
  if (n < 1024) return s;
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  char buf[48];
  snprintf(buf, sizeof buf, " (%.1f %s)", v, units[u]);
  return s + buf;
}

// Cuts text to at most `max` columns, ending it with "…" when cut.
std::string fit_width(std::string s, size_t max) {
  if (display_width(s) <= max) return s;
  size_t w = 0, i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t n = utf8_decode(s, i, &cp);
    int cw = codepoint_width(cp);
    if (w + static_cast<size_t>(cw) > max - 1) break;
    w += static_cast<size_t>(cw);
    i += n;
  }
  s.resize(i);
  s += "\xE2\x80\xA6";
  return s;
}

// ---------------------------------------------------------------------------
// Tables

struct TableColumn {
  std::string name;
  bool right = false;  // right-aligned (numbers)
};

void pad(std::string& out, size_t n) { out.append(n, ' '); }

// Renders an aligned text table, widths by terminal columns (UTF-8 aware).
std::string render_table(const std::vector<TableColumn>& cols, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<std::vector<bool>>* right_cells = nullptr) {
  std::vector<size_t> width(cols.size());
  for (size_t c = 0; c < cols.size(); c++) width[c] = display_width(cols[c].name);
  for (const auto& r : rows)
    for (size_t c = 0; c < cols.size() && c < r.size(); c++) width[c] = std::max(width[c], display_width(r[c]));

  std::string out;
  auto line = [&](const std::vector<std::string>& cells, const std::vector<bool>* right) {
    std::string l;
    for (size_t c = 0; c < cols.size(); c++) {
      const std::string empty;
      const std::string& cell = c < cells.size() ? cells[c] : empty;
      size_t fill = width[c] - display_width(cell);
      bool r = right != nullptr ? (c < right->size() && (*right)[c]) : false;
      if (c > 0) l += " | ";
      if (r) pad(l, fill);
      l += cell;
      if (!r && c + 1 < cols.size()) pad(l, fill);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l;
    out += '\n';
  };
  std::vector<std::string> header;
  for (const auto& c : cols) header.push_back(c.name);
  line(header, nullptr);
  std::string rule;
  for (size_t c = 0; c < cols.size(); c++) {
    if (c > 0) rule += "-+-";
    rule.append(width[c], '-');
  }
  out += rule + '\n';
  for (size_t i = 0; i < rows.size(); i++) {
    std::vector<bool> right;
    if (right_cells != nullptr) {
      right = (*right_cells)[i];
    } else {
      for (const auto& c : cols) right.push_back(c.right);
    }
    line(rows[i], &right);
  }
  return out;
}

// A cell: the JSON text of the value, but text without quotes or escapes
// (control characters still escaped so that rows stay on one line).
std::string cell_text(const Value& v) {
  switch (v.kind()) {
    case Kind::Text: {
      std::string out;
      for (char ch : v.as_string()) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c == '\t') {
          out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
      }
      return out;
    }
    case Kind::Timestamp:
      return format_timestamp(v.as_int());
    case Kind::Bytes: {
      std::string s = to_json(v);
      if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
      return s;
    }
    default:
      return to_json(v);
  }
}

std::string render_rows_table(const std::vector<Value>& rows) {
  std::vector<TableColumn> cols;
  std::unordered_map<std::string, size_t> index;
  auto column = [&](const std::string& name) {
    auto it = index.find(name);
    if (it != index.end()) return it->second;
    index.emplace(name, cols.size());
    cols.push_back({name, false});
    return cols.size() - 1;
  };
  for (const Value& row : rows) {
    if (row.kind() == Kind::Object) {
      for (const std::string& k : row.keys()) column(k);
    } else {
      column("value");
    }
  }
  std::vector<std::vector<std::string>> cells(rows.size());
  std::vector<std::vector<bool>> right(rows.size());
  for (size_t i = 0; i < rows.size(); i++) {
    cells[i].resize(cols.size());
    right[i].resize(cols.size());
    const Value& row = rows[i];
    auto put = [&](size_t c, const Value& v) {
      cells[i][c] = fit_width(cell_text(v), kMaxCellWidth);
      right[i][c] = v.is_number();
    };
    if (row.kind() == Kind::Object) {
      for (size_t k = 0; k < row.keys().size(); k++) put(index[row.keys()[k]], row.items()[k]);
    } else {
      put(index["value"], row);
    }
  }
  std::string out;
  if (!cols.empty()) out = render_table(cols, cells, &right);
  out += "(" + std::to_string(rows.size()) + " rows)\n";
  return out;
}

// ---------------------------------------------------------------------------
// Statement splitting, shared by standard input and the prompt: a statement
// ends at ';' outside a double-quoted string (backslash escapes inside), and at
// the end of a line when no ( [ { and no string is open. `--` outside a string
// starts a comment to the end of the line (as in the engine's lexer); comments
// are dropped, so brackets, quotes and ';' in them do not count.

struct Statement {
  std::string text;
  size_t line = 0;  // line of its first character in the input, from 1
};

class StatementSplitter {
 public:
  void feed_line(std::string_view line, std::vector<Statement>* out) {
    line_no_++;
    if (!in_string_ && is_comment_line(line)) return;
    for (size_t i = 0; i < line.size(); i++) {
      const char c = line[i];
      if (!in_string_ && c == '-' && i + 1 < line.size() && line[i + 1] == '-') break;  // a comment to the end of the line
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == ';') {
        emit(out);
        continue;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '(' || c == '[' || c == '{') {
        depth_++;
      } else if ((c == ')' || c == ']' || c == '}') && depth_ > 0) {
        depth_--;
      }
      if (trim(cur_).empty() && c != ' ' && c != '\t' && c != '\r') start_line_ = line_no_;
      cur_.push_back(c);
    }
    if (in_string_ || depth_ > 0) {
      cur_.push_back('\n');
    } else {
      emit(out);
    }
  }

  // End of input: whatever is pending is a statement (the engine reports what
  // is missing from it).
  void finish(std::vector<Statement>* out) { emit(out); }

  bool pending() const { return in_string_ || depth_ > 0 || !trim(cur_).empty(); }
  bool in_string() const { return in_string_; }

  void reset() {
    cur_.clear();
    depth_ = 0;
    in_string_ = escape_ = false;
  }

 private:
  void emit(std::vector<Statement>* out) {
    std::string_view t = trim(cur_);
    if (!t.empty()) out->push_back({std::string(t), start_line_});
    reset();
  }

  std::string cur_;
  size_t line_no_ = 0;
  size_t start_line_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
};

// ---------------------------------------------------------------------------
// Errors in statements: the status, where the statement came from, and the
// statement with a caret under the position.

void print_statement_error(const Status& s, std::string_view stmt, const std::string& where) {
  print_error(s.to_string());
  if (!where.empty()) fprintf(stderr, "kitfox: in the statement %s\n", where.c_str());
  if (s.position() < 0 || static_cast<uint64_t>(s.position()) > stmt.size()) return;
  // Only the line the position is on, and of a long line only the part
  // around it (a 300 MB statement is not echoed back).
  constexpr size_t kContext = 60;
  const size_t pos = static_cast<size_t>(s.position());
  size_t start = pos == 0 ? std::string_view::npos : stmt.rfind('\n', pos - 1);
  start = start == std::string_view::npos ? 0 : start + 1;
  size_t end = stmt.find('\n', pos);
  if (end == std::string_view::npos) end = stmt.size();
  auto boundary = [&](size_t i) {  // back to the start of a UTF-8 sequence
    while (i > start && i < stmt.size() && (static_cast<unsigned char>(stmt[i]) & 0xC0) == 0x80) i--;
    return i;
  };
  size_t from = pos - start > kContext ? boundary(pos - kContext) : start;
  size_t to = end - pos > kContext ? boundary(pos + kContext) : end;
  std::string_view line = stmt.substr(from, to - from);
  const char* lead = from > start ? "..." : "";
  fprintf(stderr, "  %s%.*s%s\n", lead, static_cast<int>(line.size()), line.data(), to < end ? "..." : "");
  std::string caret = "  ";
  caret += lead;
  std::string_view before = stmt.substr(from, pos - from);
  for (size_t i = 0; i < before.size();) {
    uint32_t cp;
    size_t n = utf8_decode(before, i, &cp);
    // Tabs are copied so the caret lines up however wide the terminal shows them.
    if (cp == '\t') {
      caret += '\t';
    } else {
      caret.append(static_cast<size_t>(codepoint_width(cp)), ' ');
    }
    i += n;
  }
  caret += '^';
  fprintf(stderr, "%s\n", caret.c_str());
}

void print_open_report(const OpenReport& r, const std::string& file) {
  for (const std::string& w : r.warnings) fprintf(stderr, "kitfox: warning: %s\n", w.c_str());
  if (r.torn_bytes > 0) {
    fprintf(stderr,
            "kitfox: cut off a torn tail of %llu bytes at the end of %s (read as a write a crash cut "
            "short, never acknowledged)\n",
            static_cast<unsigned long long>(r.torn_bytes), file.c_str());
  }
  if (r.recovered_bytes > 0) {
    fprintf(stderr,
            "kitfox: --recover dropped %llu bytes of %s from offset %llu on (the damaged record and "
            "everything after it)\n",
            static_cast<unsigned long long>(r.recovered_bytes), file.c_str(),
            static_cast<unsigned long long>(r.recovered_offset));
  }
}

// The file system a database named `file` lives in: memory for ":memory:"
// (a database gone when the command ends), else the real one.
std::unique_ptr<FileSystem> file_system_for(const std::string& file) {
  return file == ":memory:" ? make_memory_file_system() : make_posix_file_system();
}

Result<std::unique_ptr<Database>> open_database(FileSystem& fs, const std::string& file, const OpenOptions& opts) {
  auto db = Database::open(fs, file, opts);
  if (!db.is_ok()) {
    const Status& s = db.status();
    print_error(s.to_string());
    return s;
  }
  print_open_report((*db)->open_report(), file);
  return db;
}

// Every write flushed first: a failure there is the command's (exit 1).
// The checkpoint close() may run then is upkeep: when it fails, every
// write is still in the file's log, which the next open reads, so that is
// a warning, not a failed command (a script would run it again and write
// everything twice).
int close_database(std::unique_ptr<Database>& db, const std::string& file, int code) {
  const Status flushed = db->sync();
  const Status s = db->close();
  db.reset();
  if (!flushed.is_ok()) {
    print_error("closing " + file + ": " + flushed.to_string());
    return kExitError;
  }
  if (!s.is_ok())
    fprintf(stderr, "kitfox: warning: closing %s: %s (every write is in the file, in its log: the next open reads it)\n",
            file.c_str(), s.to_string().c_str());
  return code;
}

// ---------------------------------------------------------------------------
// Stats

std::string stats_text(const Stats& st, const std::string& file) {
  std::string out;
  auto row = [&](const char* name, const std::string& value) {
    out += name;
    pad(out, 14 - strlen(name));
    out += value;
    out += '\n';
  };
  row("file", file);
  row("file bytes", human_bytes(st.file_bytes));
  row("image bytes", human_bytes(st.image_bytes));
  row("tail bytes", human_bytes(st.tail_bytes));
  row("tail records", std::to_string(st.tail_records));
  row("memory bytes", human_bytes(st.memory_bytes));
  out += '\n';
  if (st.collections.empty()) {
    out += "(no collections)\n";
    return out;
  }
  std::vector<TableColumn> ccols = {{"collection", false}, {"documents", true}, {"bytes", true}};
  std::vector<std::vector<std::string>> rows;
  for (const CollectionStats& c : st.collections)
    rows.push_back({c.name, std::to_string(c.documents), std::to_string(c.bytes)});
  out += render_table(ccols, rows);
  return out;
}

std::string stats_json(const Stats& st, const std::string& file) {
  Value o = Value::object();
  o.append("file", Value::text(file));
  Value v = stats_value(st);
  for (size_t i = 0; i < v.keys().size(); i++) o.append(v.keys()[i], std::move(v.mutable_items()[i]));
  return to_json(o) + "\n";
}

// ---------------------------------------------------------------------------
// Running statements

bool is_query(std::string_view stmt) {
  std::string_view t = trim(stmt);
  std::string first(t.substr(0, t.find_first_of(" \t\n")));
  for (char& c : first) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return first == "get" || first == "explain";
}

class Session {
 public:
  Session(Database& db, std::string file, std::vector<Value> params, bool table)
      : db_(db), file_(std::move(file)), params_(std::move(params)), table_(table),
        warned_(db.open_report().warnings.size()) {}

  // Runs one statement and prints its rows; false on an error (printed).
  // `where` says where the statement came from, for the error message;
  // `always_footer` (the prompt) prints something even for an empty result.
  bool run(const std::string& text, const std::string& where, bool always_footer = false) {
    auto r = db_.query(text, params_);
    // What a statement found on its way (a damaged graph rebuilt when first
    // read) is said as it happens, as open's warnings are.
    const std::vector<std::string> warnings = db_.open_report().warnings;
    for (; warned_ < warnings.size(); warned_++) fprintf(stderr, "kitfox: warning: %s\n", warnings[warned_].c_str());
    if (!r.is_ok()) {
      out_flush();  // rows printed so far come before the error
      print_statement_error(r.status(), text, where);
      return false;
    }
    const std::vector<Value>& rows = r->rows;
    if (table_) {
      out_write(render_rows_table(rows));
    } else {
      std::string buf;
      for (const Value& row : rows) {
        append_json(buf, row);
        buf += '\n';
        if (buf.size() >= (1u << 16)) {
          out_write(buf);
          buf.clear();
        }
      }
      // At the prompt an empty result still answers: a query found nothing,
      // anything else (create, alter, ...) succeeded.
      if (rows.empty() && always_footer) buf += is_query(text) ? "(0 rows)\n" : "ok\n";
      out_write(buf);
    }
    return out_flush();
  }

  bool table() const { return table_; }
  void set_table(bool on) { table_ = on; }
  Database& db() { return db_; }
  const std::string& file() const { return file_; }

 private:
  Database& db_;
  std::string file_;
  std::vector<Value> params_;
  bool table_;
  size_t warned_;  // warnings of the open report printed so far
};

enum class DotResult { Handled, Quit, Error };

DotResult run_dot_command(Session& s, std::string_view line) {
  std::string_view cmd = trim(line);
  size_t sp = cmd.find_first_of(" \t");
  std::string_view name = cmd.substr(0, sp);
  std::string_view arg = sp == std::string_view::npos ? std::string_view() : trim(cmd.substr(sp));
  if (name == ".quit" || name == ".exit") return DotResult::Quit;
  if (name == ".help") {
    out_write(
        ".help            this text\n"
        ".table [on|off]  toggle table output (default: one JSON object per row)\n"
        ".stats           sizes of the file and the collections\n"
        ".quit, .exit     leave (so does Ctrl-D on an empty line)\n"
        "\n"
        "Statements end at ';' or at the end of a line when no ( [ { or string is open:\n"
        "  create collection notes (title text, year int @hash)\n"
        "  put notes {title: \"hello\", year: 2024}\n"
        "  get notes where year >= 2024 order year desc limit 10\n"
        "  get notes count\n");
  } else if (name == ".table") {
    if (arg == "on") {
      s.set_table(true);
    } else if (arg == "off") {
      s.set_table(false);
    } else if (arg.empty()) {
      s.set_table(!s.table());
    } else {
      print_error(".table takes on or off");
      return DotResult::Error;
    }
    out_write(s.table() ? "table output on\n" : "table output off (JSON lines)\n");
  } else if (name == ".stats") {
    out_write(stats_text(s.db().stats(), s.file()));
  } else {
    print_error("unknown command " + std::string(name) + " (.help lists the commands)");
    return DotResult::Error;
  }
  return out_flush() ? DotResult::Handled : DotResult::Error;
}

// Statements from a stream that is not a terminal: run as they complete, stop
// at the first error.
int run_stream(Session& s, FILE* in, const char* source) {
  StatementSplitter splitter;
  std::vector<Statement> stmts;
  char* buf = nullptr;
  size_t cap = 0;
  ssize_t n;
  bool ok = true;
  size_t line_no = 0;
  auto run_all = [&]() {
    for (const Statement& st : stmts) {
      if (!s.run(st.text, "at line " + std::to_string(st.line) + " of " + source)) {
        ok = false;
        break;
      }
    }
    stmts.clear();
  };
  while (ok && (n = getline(&buf, &cap, in)) >= 0) {
    line_no++;
    std::string_view line(buf, static_cast<size_t>(n));
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // A byte order mark (an editor's on Windows) opens a script, not a statement.
    if (line_no == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    if (!splitter.pending() && !trim(line).empty() && trim(line)[0] == '.') {
      splitter.feed_line("", &stmts);  // keeps the line count
      DotResult d = run_dot_command(s, line);
      if (d == DotResult::Quit) break;
      if (d == DotResult::Error) {
        fprintf(stderr, "kitfox: at line %zu of %s\n", line_no, source);
        ok = false;
      }
      continue;
    }
    splitter.feed_line(line, &stmts);
    run_all();
  }
  if (ok && ferror(in)) {
    print_error(std::string("reading ") + source + ": " + strerror(errno));
    ok = false;
  }
  if (ok) {
    splitter.finish(&stmts);
    run_all();
  }
  free(buf);
  return ok ? kExitOk : kExitError;
}

std::string history_path() {
  const char* home = getenv("HOME");
  if (home == nullptr || home[0] == '\0') return std::string();
  return std::string(home) + "/.kitfox_history";
}

int run_interactive(Session& s) {
  LineEditor ed(STDIN_FILENO, STDOUT_FILENO);
  ed.set_history_limit(kHistoryEntries);
  const std::string hist = history_path();
  if (!hist.empty()) ed.load_history(hist);
  bool history_warned = false;
  auto remember = [&](std::string_view entry) {
    ed.add_history(trim(entry));
    if (hist.empty() || ed.save_history(hist) || history_warned) return;
    history_warned = true;
    fprintf(stderr, "kitfox: warning: cannot write the history file %s: %s\n", hist.c_str(), strerror(errno));
  };

  printf("%s: %s (.help for help, Ctrl-D to leave)\n", kVersion, s.file().c_str());
  out_flush();

  StatementSplitter splitter;
  std::vector<Statement> stmts;
  std::string entry;        // the lines of the statement being typed, for history
  bool entry_flat = true;   // false when a newline falls inside a string
  std::string line;
  for (;;) {
    LineEditor::Read r = ed.read_line(splitter.pending() ? kContinuePrompt : kPrompt, &line);
    if (r == LineEditor::Read::Eof) {
      // Ctrl-D in the middle of a statement leaves it: said, not run.
      if (splitter.pending()) fprintf(stderr, "kitfox: the unfinished statement was not run\n");
      break;
    }
    if (r == LineEditor::Read::Interrupted) {
      splitter.reset();
      entry.clear();
      entry_flat = true;
      continue;
    }
    if (!splitter.pending() && !trim(line).empty() && trim(line)[0] == '.') {
      remember(line);
      if (run_dot_command(s, line) == DotResult::Quit) break;
      continue;
    }
    // History keeps a statement typed over several lines as one line.
    const bool in_string = splitter.in_string();
    if (in_string || !is_comment_line(line)) {
      if (in_string) entry_flat = false;
      if (!entry.empty()) entry += ' ';
      entry += line;
    }
    splitter.feed_line(line, &stmts);
    for (const Statement& st : stmts) {
      s.run(st.text, std::string(), true);
      if (g_out_failed) return kExitError;
    }
    stmts.clear();
    if (!splitter.pending()) {
      if (entry_flat) remember(entry);
      entry.clear();
      entry_flat = true;
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// Command lines

// Walks argv; options take their value as the next argument or after '='.
class ArgReader {
 public:
  ArgReader(int argc, char** argv, int first) : argc_(argc), argv_(argv), i_(first) {}
  bool done() const { return i_ >= argc_; }
  // The next argument, without the `=value` of a `--name=value` option.
  std::string next() {
    std::string a = argv_[i_++];
    inline_value_.reset();
    positional_ = options_ended_ || a.size() < 2 || a[0] != '-';
    if (!positional_ && a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        inline_value_ = a.substr(eq + 1);
        a.resize(eq);
      }
    }
    return a;
  }
  // True for an operand: not an option, or anything after `--`.
  bool positional() const { return positional_; }
  bool options_ended() const { return options_ended_; }
  void end_options() { options_ended_ = true; }
  bool has_inline_value() const { return inline_value_.has_value(); }
  // The current option's value; false when it is missing.
  bool value(std::string* out) {
    if (inline_value_) {
      *out = std::move(*inline_value_);
      inline_value_.reset();
      return true;
    }
    if (i_ >= argc_) return false;
    *out = argv_[i_++];
    return true;
  }

 private:
  int argc_;
  char** argv_;
  int i_;
  bool options_ended_ = false;
  bool positional_ = false;
  std::optional<std::string> inline_value_;
};

struct Options {
  std::vector<std::string> positional;
  std::vector<std::string> commands;  // -c
  std::vector<Value> params;
  bool table = false;
  bool json = false;
  bool recover = false;
  std::string sync;
  uint64_t batch = 1000;
};

enum OptionSet : unsigned {
  kOptStatements = 1,  // -c --param --table
  kOptBatch = 2,
  kOptJson = 4,
};

// Parses the options allowed for a command. Returns -1 to go on, else an exit code.
int parse_options(ArgReader& args, unsigned allowed, Options* o) {
  while (!args.done()) {
    std::string a = args.next();
    if (a == "--" && !args.options_ended()) {
      args.end_options();
      continue;
    }
    if (args.positional()) {
      o->positional.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      fputs(kHelp, stdout);
      return kExitOk;
    }
    if (a == "--version" || a == "-V") {
      printf("%s\n", kVersion);
      return kExitOk;
    }
    std::string v;
    auto need_value = [&]() {
      if (args.value(&v)) return true;
      usage_error(a + " needs a value");
      return false;
    };
    auto no_value = [&]() {
      if (!args.has_inline_value()) return true;
      usage_error(a + " takes no value");
      return false;
    };
    if ((allowed & kOptStatements) && (a == "-c" || a == "--command")) {
      if (!need_value()) return kExitUsage;
      o->commands.push_back(v);
    } else if ((allowed & kOptStatements) && a == "--param") {
      if (!need_value()) return kExitUsage;
      auto p = parse_json(v);
      if (!p.is_ok()) return usage_error("--param " + v + ": " + p.status().to_string());
      o->params.push_back(std::move(*p));
    } else if ((allowed & kOptStatements) && a == "--table") {
      if (!no_value()) return kExitUsage;
      o->table = true;
    } else if ((allowed & kOptJson) && a == "--json") {
      if (!no_value()) return kExitUsage;
      o->json = true;
    } else if ((allowed & kOptBatch) && a == "--batch") {
      if (!need_value()) return kExitUsage;
      if (!parse_count(v, &o->batch) || o->batch == 0) return usage_error("--batch needs a positive number, not " + v);
    } else if (a == "--sync") {
      if (!need_value()) return kExitUsage;
      o->sync = v;
    } else if (a == "--recover") {
      if (!no_value()) return kExitUsage;
      o->recover = true;
    } else {
      return usage_error("unknown option " + a);
    }
  }
  return -1;
}

// Options for open; false (after a usage message) on a bad --sync.
bool open_options(const Options& o, bool create, OpenOptions* out) {
  OpenOptions base;
  base.create = create;
  base.recover = o.recover;
  if (o.sync.empty()) {
    *out = base;
    return true;
  }
  auto r = parse_sync_option(o.sync, base);
  if (!r.is_ok()) {
    usage_error("--sync " + o.sync + ": " + r.status().to_string());
    return false;
  }
  *out = *r;
  out->create = create;
  out->recover = o.recover;
  return true;
}

// The maintenance commands need a database that exists.
bool require_existing(FileSystem& fs, const std::string& file) {
  auto e = fs.exists(file);
  if (!e.is_ok()) {
    print_error(e.status().to_string());
    return false;
  }
  if (!*e) {
    print_error("no database at " + file);
    return false;
  }
  // An empty file would be made a new database by the open: a command that
  // needs a database leaves it as it is.
  struct stat st;
  if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0) {
    print_error(file + " is an empty file (0 bytes), not a database: `kitfox " + file +
                " -c ...` makes a new database in it");
    return false;
  }
  return true;
}

int64_t file_size(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_size);
}

// ---------------------------------------------------------------------------
// kitfox FILE ...

int cmd_main(int argc, char** argv) {
  ArgReader args(argc, argv, 1);
  Options o;
  int rc = parse_options(args, kOptStatements, &o);
  if (rc >= 0) return rc;
  if (o.positional.empty()) return usage_error("no database file given");
  if (o.positional.size() > 1) return usage_error("one database file only (got " + o.positional[1] + " too)");
  const std::string& file = o.positional[0];
  OpenOptions opts;
  if (!open_options(o, true, &opts)) return kExitUsage;

  auto fs = file_system_for(file);
  auto opened = open_database(*fs, file, opts);
  if (!opened.is_ok()) return kExitError;
  std::unique_ptr<Database> db = std::move(*opened);
  Session session(*db, file, std::move(o.params), o.table);

  int code = kExitOk;
  if (!o.commands.empty()) {
    for (size_t i = 0; i < o.commands.size(); i++) {
      std::string where = o.commands.size() > 1 ? "given by -c number " + std::to_string(i + 1) : std::string();
      if (!session.run(o.commands[i], where)) {
        code = kExitError;
        break;
      }
    }
  } else if (isatty(STDIN_FILENO)) {
    code = run_interactive(session);
  } else {
    code = run_stream(session, stdin, "standard input");
  }
  // A begin whose commit never came: its writes did not land. Said, and a
  // failure, so that a script that forgot its commit does not pass for done.
  if (std::optional<size_t> queued = db->open_transaction(); queued && !g_out_failed) {
    const std::string writes = std::to_string(*queued) + (*queued == 1 ? " queued write was" : " queued writes were");
    if (code == kExitOk)
      print_error("the statements ended inside a transaction (a begin with no commit): its " + writes + " rolled back");
    else
      fprintf(stderr, "kitfox: the transaction open at the error was rolled back: its %s not written\n", writes.c_str());
    code = kExitError;
  }
  return close_database(db, file, code);
}

// ---------------------------------------------------------------------------
// kitfox import FILE COLLECTION DATA

// Buffers of megabytes that come and go (a request body, a batch of
// documents and its record): freed memory stays in the heap instead of
// going back to the system, so the next one does not fault fresh zeroed
// pages in (a tenth of a bulk load's time over HTTP, a sixth of an import's).
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int cmd_import(int argc, char** argv) {
  ArgReader args(argc, argv, 2);
  Options o;
  int rc = parse_options(args, kOptBatch, &o);
  if (rc >= 0) return rc;
  if (o.positional.size() != 3) return usage_error("import needs FILE COLLECTION DATA");
  const std::string& file = o.positional[0];
  const std::string& collection = o.positional[1];
  const std::string& data = o.positional[2];
  if (!is_name(collection)) return usage_error("import: '" + collection + "' is not a collection name");
  OpenOptions opts;
  if (!open_options(o, false, &opts)) return kExitUsage;
  keep_freed_memory();  // each batch's documents and record are megabytes
  // No automatic checkpoint between batches: an import that grows the file
  // would have the image written again and again (at 64 MiB of tail, then
  // at twice the image, ...). One at the end instead (below).
  opts.auto_checkpoint = false;

  int fd = STDIN_FILENO;
  std::string source = "standard input";
  if (data != "-") {
    fd = open(data.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      print_error("cannot open " + data + ": " + strerror(errno));
      return kExitError;
    }
    source = data;
  }
  uint64_t total = 0;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) total = static_cast<uint64_t>(st.st_size);

  auto fs = make_posix_file_system();
  if (!require_existing(*fs, file)) {
    if (fd != STDIN_FILENO) close(fd);
    return kExitError;
  }
  auto opened = open_database(*fs, file, opts);
  if (!opened.is_ok()) {
    if (fd != STDIN_FILENO) close(fd);
    return kExitError;
  }
  std::unique_ptr<Database> db = std::move(*opened);

  // Fail before reading anything when the collection does not exist.
  auto check = db->query("get " + collection + " count");
  if (!check.is_ok()) {
    print_error(without_position(check.status()).to_string());
    if (fd != STDIN_FILENO) close(fd);
    return close_database(db, file, kExitError);
  }

  ImportOptions io;
  io.batch = o.batch;
  io.total_bytes = total;
  io.progress = isatty(STDERR_FILENO);
  bool ok = true;
  double secs = 0;
  uint64_t imported = 0;
  {  // the importer (its prepared put) goes before the database closes
    Importer imp(*db, collection, source, io);
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        imp.stop();
        print_error("reading " + source + ": " + strerror(errno));
        ok = false;
        break;
      }
      if (n == 0) break;
      if (!imp.feed(std::string_view(buf.data(), static_cast<size_t>(n)))) {
        ok = false;
        break;
      }
    }
    if (ok) ok = imp.finish();
    secs = imp.seconds();
    imported = imp.imported();
  }
  if (fd != STDIN_FILENO) close(fd);

  const double rate = secs > 0 ? static_cast<double>(imported) / secs : 0;
  if (ok) {
    fprintf(stderr, "imported %llu document%s into %s in %.2f s (%.0f rows/s)\n",
            static_cast<unsigned long long>(imported), imported == 1 ? "" : "s", collection.c_str(), secs, rate);
  } else {
    fprintf(stderr, "kitfox: imported %llu document%s into %s before the error\n",
            static_cast<unsigned long long>(imported), imported == 1 ? "" : "s", collection.c_str());
  }
  // The checkpoint the engine's close makes when the tail is worth it (1 MiB,
  // or a quarter of the image: Engine::checkpoint_worthwhile), which the
  // options above switched off.
  const Stats after = db->stats();
  if (after.tail_bytes > 0 && (after.tail_bytes >= (1u << 20) || after.tail_bytes * 4 >= after.image_bytes)) {
    // Upkeep, as at close: when it fails, every document imported is still
    // in the file's log (close_database flushes it, or says it could not).
    Status cs = db->checkpoint();
    if (!cs.is_ok())
      fprintf(stderr, "kitfox: warning: the checkpoint after the import failed: %s (the documents are in the file, in its log)\n",
              cs.to_string().c_str());
  }
  return close_database(db, file, ok ? kExitOk : kExitError);
}

// ---------------------------------------------------------------------------
// kitfox stats | checkpoint | compact FILE

int cmd_stats(int argc, char** argv) {
  ArgReader args(argc, argv, 2);
  Options o;
  int rc = parse_options(args, kOptJson, &o);
  if (rc >= 0) return rc;
  if (o.positional.size() != 1) return usage_error("stats needs FILE");
  const std::string& file = o.positional[0];
  OpenOptions opts;
  if (!open_options(o, false, &opts)) return kExitUsage;
  opts.auto_checkpoint = false;  // looking must not rewrite the file
  opts.lazy_extents = false;     // and checks every block of the file

  auto fs = make_posix_file_system();
  if (!require_existing(*fs, file)) return kExitError;
  auto opened = open_database(*fs, file, opts);
  if (!opened.is_ok()) return kExitError;
  std::unique_ptr<Database> db = std::move(*opened);
  Stats st = db->stats();
  out_write(o.json ? stats_json(st, file) : stats_text(st, file));
  int code = out_flush() ? kExitOk : kExitError;
  return close_database(db, file, code);
}

int cmd_rewrite(int argc, char** argv, bool compact) {
  const char* name = compact ? "compact" : "checkpoint";
  ArgReader args(argc, argv, 2);
  Options o;
  int rc = parse_options(args, 0, &o);
  if (rc >= 0) return rc;
  if (o.positional.size() != 1) return usage_error(std::string(name) + " needs FILE");
  const std::string& file = o.positional[0];
  OpenOptions opts;
  if (!open_options(o, false, &opts)) return kExitUsage;

  auto fs = make_posix_file_system();
  if (!require_existing(*fs, file)) return kExitError;
  const int64_t before = file_size(file);
  auto opened = open_database(*fs, file, opts);
  if (!opened.is_ok()) return kExitError;
  std::unique_ptr<Database> db = std::move(*opened);
  auto t0 = std::chrono::steady_clock::now();
  Status s = compact ? db->compact() : db->checkpoint();
  if (!s.is_ok()) {
    print_error(std::string(name) + ": " + s.to_string());
    return close_database(db, file, kExitError);
  }
  int code = close_database(db, file, kExitOk);
  if (code != kExitOk) return code;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t after = file_size(file);
  printf("%s %s: %lld -> %lld bytes in %.2f s\n", compact ? "compacted" : "checkpointed", file.c_str(),
         static_cast<long long>(before), static_cast<long long>(after), secs);
  return out_flush() ? kExitOk : kExitError;
}

// ---------------------------------------------------------------------------
// kitfox serve FILE

int cmd_serve(int argc, char** argv) {
  ArgReader args(argc, argv, 2);
  std::vector<std::string> positional;
  ServerOptions so;
  Options o;
  if (const char* t = getenv("KITFOX_TOKEN")) {
    // Set but empty would serve with no token at all: a mistake to refuse.
    if (!*t) return usage_error("KITFOX_TOKEN is set but empty: set it to the token, or unset it");
    so.token = t;
  }
  while (!args.done()) {
    std::string a = args.next();
    if (args.positional()) {
      positional.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      fputs(kHelp, stdout);
      return kExitOk;
    }
    std::string v;
    if (!args.value(&v)) return usage_error(a + " needs a value");
    uint64_t n = 0;
    if (a == "--host") {
      so.host = v;
    } else if (a == "--port") {
      if (!parse_count(v, &n) || n > 65535) return usage_error("--port needs a port number (0 to 65535), not " + v);
      so.port = uint16_t(n);
    } else if (a == "--sync") {
      o.sync = v;
    } else if (a == "--token") {
      if (v.empty()) return usage_error("--token needs a token, not an empty string");
      so.token = v;
    } else if (a == "--cors") {
      for (size_t at = 0; at <= v.size();) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        std::string origin = v.substr(at, comma - at);
        if (origin.empty()) return usage_error("--cors needs origins such as http://localhost:5173 (comma-separated) or *");
        so.cors_origins.push_back(origin);
        at = comma + 1;
      }
    } else if (a == "--max-body") {
      if (!parse_count(v, &n) || n == 0) return usage_error("--max-body needs a positive number of bytes, not " + v);
      so.max_body = n;
    } else if (a == "--threads" || a == "--loops") {
      if (!parse_count(v, &n) || n == 0 || n > 1024) return usage_error(a + " needs a number from 1 to 1024, not " + v);
      (a == "--loops" ? so.loops : so.threads) = unsigned(n);
    } else if (a == "--timeout") {
      if (!parse_count(v, &n) || n == 0 || n > 86400) return usage_error("--timeout needs seconds from 1 to 86400, not " + v);
      so.timeout_ms = uint32_t(n * 1000);
    } else {
      return usage_error("unknown option " + a);
    }
  }
  if (positional.size() != 1) return usage_error("serve needs FILE");
  if (Status h = HttpServer::check_host(so.host); !h.is_ok()) return usage_error(h.message());
  const std::string& file = positional[0];
  OpenOptions opts;
  if (!open_options(o, true, &opts)) return kExitUsage;

  // Request bodies of megabytes come and go.
  keep_freed_memory();
  // Many clients: as many descriptors as this process may have.
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  // SIGINT and SIGTERM are taken by this thread alone (sigwait below): the
  // server's threads, started after this, inherit the mask. SIGUSR1 says
  // the shutdown is done (from the thread that runs it).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto fs = file_system_for(file);
  auto opened = open_database(*fs, file, opts);
  if (!opened.is_ok()) return kExitError;
  std::unique_ptr<Database> db = std::move(*opened);
  auto server = HttpServer::start(*db, so);
  if (!server.is_ok()) {
    print_error(server.status().message());
    return close_database(db, file, kExitError);
  }
  std::string host = so.host.find(':') != std::string::npos ? "[" + so.host + "]" : so.host;
  printf("kitfox: serving %s at http://%s:%u\n", file.c_str(), host.c_str(), unsigned((*server)->port()));
  out_flush();
  int sig = 0;
  do sigwait(&stop_signals, &sig);
  while (sig == SIGUSR1);
  const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  fprintf(stderr, "kitfox: %s: finishing the requests in flight, then closing %s (again to stop at once)\n", name, file.c_str());
  // The shutdown runs beside this thread, which waits for its end or for a
  // second signal: then the connections close at once, their responses
  // unsent (the requests running still end, and the database is flushed
  // and closed all the same).
  std::atomic<bool> done{false};
  const pthread_t self = pthread_self();
  std::thread stopper([&] {
    (*server)->shutdown();
    done = true;
    pthread_kill(self, SIGUSR1);
  });
  bool forced = false;
  while (!done) {
    sigwait(&stop_signals, &sig);
    if (sig == SIGUSR1) continue;
    if (!forced) fprintf(stderr, "kitfox: %s again: closing every connection now\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    forced = true;
    (*server)->close_connections();  // each time: one that came in since closes too
  }
  stopper.join();
  return close_database(db, file, kExitOk);
}

int run(int argc, char** argv) {
  if (argc < 2) return usage_error("no database file given");
  const std::string first = argv[1];
  if (first == "import") return cmd_import(argc, argv);
  if (first == "stats") return cmd_stats(argc, argv);
  if (first == "checkpoint") return cmd_rewrite(argc, argv, false);
  if (first == "compact") return cmd_rewrite(argc, argv, true);
  if (first == "serve") return cmd_serve(argc, argv);
  return cmd_main(argc, argv);
}

}  // namespace
}  // namespace kitfox

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  static char outbuf[1 << 16];
  setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  int code = kitfox::run(argc, argv);
  kitfox::out_flush();
  return code;
}
