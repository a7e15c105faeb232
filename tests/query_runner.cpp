// Runs tests/queries/*.test scripts against the native engine. The WASM suite
// runs the same files (js/test), so both builds are held to one set of answers.
//
// Script format (blocks separated by blank lines, '#' lines are comments):
//
//   statement ok            the statement must succeed (rows are not checked)
//   <statement>
//
//   statement error         the statement must fail; the optional text after
//   <statement>             ---- must appear in the error (code and message,
//   ----                    as "type error at 12: expected ...")
//   <expected error text>
//
//   query [rowsort] [mask=k1,k2]   rows as JSON lines, compared exactly
//   <statement>             (rowsort: after sorting the lines; mask: the
//   ----                    values of those top-level keys shown as "*",
//   <expected rows>         for scores whose last digits may differ by platform)
//
//   params <json array>     parameters for the following statements
//   reopen                  closes the database and opens it again
//
//   prepare NAME            prepares the statement (Database::prepare) under
//   <statement>             NAME; it must succeed (`prepare error` must fail,
//                           with an optional ---- and error text as above)
//
// A statement written `@NAME` runs the prepared statement NAME with the
// current params. reopen drops every prepared statement.
//
// A statement may span lines until the ---- or the blank line.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "db.h"

using namespace kitfox;

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: kitfox_query_runner FILE.test\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  auto fs = make_memory_file_system();
  auto opened = Database::open(*fs, "script.kfdb");
  if (!opened) {
    fprintf(stderr, "open: %s\n", opened.status().to_string().c_str());
    return 1;
  }
  std::unique_ptr<Database> db = std::move(opened.value());
  std::vector<Value> params;
  std::map<std::string, Statement> prepared;
  int passed = 0, failed = 0;
  size_t i = 0;
  auto fail = [&](size_t line, const std::string& msg) {
    fprintf(stderr, "%s:%zu: %s\n", argv[1], line + 1, msg.c_str());
    failed++;
  };
  while (i < lines.size()) {
    std::string head = lines[i];
    if (head.empty() || head[0] == '#') { i++; continue; }
    size_t head_line = i++;
    if (head == "reopen") {
      Status s = db->close();
      if (!s) { fail(head_line, "close: " + s.to_string()); break; }
      prepared.clear();
      db.reset();
      auto r = Database::open(*fs, "script.kfdb");
      if (!r) { fail(head_line, "reopen: " + r.status().to_string()); break; }
      db = std::move(r.value());
      passed++;
      continue;
    }
    if (head.rfind("params ", 0) == 0) {
      auto r = parse_json(head.substr(7));
      if (!r || r->kind() != Kind::List) { fail(head_line, "params must be a JSON array"); continue; }
      params = r->items();
      continue;
    }
    std::string stmt;
    while (i < lines.size() && !lines[i].empty() && lines[i] != "----") {
      if (!stmt.empty()) stmt += "\n";
      stmt += lines[i++];
    }
    std::vector<std::string> expected;
    bool has_expected = false;
    if (i < lines.size() && lines[i] == "----") {
      has_expected = true;
      i++;
      while (i < lines.size() && !lines[i].empty()) expected.push_back(lines[i++]);
    }
    if (head.rfind("prepare ", 0) == 0) {
      std::string name = head.substr(8);
      auto p = db->prepare(stmt);
      if (name == "error") {
        std::string want;
        for (auto& e : expected) want += (want.empty() ? "" : "\n") + e;
        if (p) fail(head_line, "expected prepare to fail\n  in: " + stmt);
        else if (has_expected && p.status().to_string().find(want) == std::string::npos)
          fail(head_line, "error text differs\n  want (substring): " + want + "\n  got: " + p.status().to_string());
        else passed++;
      } else if (!p) {
        fail(head_line, "prepare failed: " + p.status().to_string() + "\n  in: " + stmt);
      } else {
        prepared[name] = std::move(p.value());
        passed++;
      }
      continue;
    }
    Result<QueryResult> r = Status(Code::Invalid, "no result");
    if (stmt.size() > 1 && stmt[0] == '@') {
      auto it = prepared.find(stmt.substr(1));
      if (it == prepared.end()) {
        fail(head_line, "no statement prepared as '" + stmt.substr(1) + "'");
        continue;
      }
      r = it->second.query(params);
    } else {
      r = db->query(stmt, params);
    }
    if (head == "statement ok") {
      if (!r) fail(head_line, "expected success, got " + r.status().to_string() + "\n  in: " + stmt);
      else passed++;
    } else if (head == "statement error") {
      if (r) {
        fail(head_line, "expected an error, the statement succeeded\n  in: " + stmt);
      } else {
        std::string msg = r.status().to_string();
        std::string want;
        for (auto& e : expected) want += (want.empty() ? "" : "\n") + e;
        if (has_expected && msg.find(want) == std::string::npos)
          fail(head_line, "error text differs\n  want (substring): " + want + "\n  got: " + msg);
        else
          passed++;
      }
    } else if (head.rfind("query", 0) == 0) {
      bool rowsort = false;
      std::vector<std::string> masked;
      bool bad_head = false;
      size_t p = 5;
      while (p < head.size()) {
        while (p < head.size() && head[p] == ' ') p++;
        size_t e = head.find(' ', p);
        std::string word = head.substr(p, e == std::string::npos ? std::string::npos : e - p);
        p = e == std::string::npos ? head.size() : e;
        if (word.empty()) continue;
        if (word == "rowsort") rowsort = true;
        else if (word.rfind("mask=", 0) == 0) {
          std::string keys = word.substr(5);
          size_t a = 0;
          for (;;) {
            size_t c = keys.find(',', a);
            masked.push_back(keys.substr(a, c == std::string::npos ? std::string::npos : c - a));
            if (c == std::string::npos) break;
            a = c + 1;
          }
        } else bad_head = true;
      }
      if (bad_head) {
        fail(head_line, "unknown directive '" + head + "'");
        continue;
      }
      if (!r) {
        fail(head_line, "query failed: " + r.status().to_string() + "\n  in: " + stmt);
        continue;
      }
      std::vector<std::string> got;
      for (Value row : r->rows) {
        for (const std::string& k : masked)
          if (Value* v = row.get_mut(k)) *v = Value::text("*");
        got.push_back(to_json(row));
      }
      if (rowsort) {
        std::sort(got.begin(), got.end());
        std::sort(expected.begin(), expected.end());
      }
      if (got != expected) {
        std::string msg = "rows differ\n  in: " + stmt + "\n  want:\n";
        for (auto& e : expected) msg += "    " + e + "\n";
        msg += "  got:\n";
        for (auto& g : got) msg += "    " + g + "\n";
        fail(head_line, msg);
      } else {
        passed++;
      }
    } else {
      fail(head_line, "unknown directive '" + head + "'");
    }
  }
  if (db) db->close();
  printf("%s: %d passed, %d failed\n", argv[1], passed, failed);
  return failed ? 1 : 0;
}
