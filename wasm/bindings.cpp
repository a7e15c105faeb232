// Embind bindings: a small handle API over kitfox::Database, used by the JS
// wrapper (js/core.js, js/index.js), which is the public API.
//
// Calls pass bulk data through two buffers in the WASM heap instead of as JS
// values: the wrapper writes a statement's UTF-8 text followed by its
// parameters (a binary-encoded list value, or JSON text) into the input
// buffer, and reads the rows from the output buffer (binary: varint row
// count, then each row as an encoded object value; or JSON: one row per line,
// the same text as the native kitfox::to_json). A call returns -1 on error;
// the error's code name, message and position are then read with error_*().
#include <emscripten/bind.h>

#include <memory>
#include <string>
#include <vector>

#include "codec.h"
#include "db.h"
#include "host_file.h"

using namespace kitfox;

namespace {

struct Slot {
  std::unique_ptr<FileSystem> fs;
  std::unique_ptr<Database> db;  // destroyed before fs, which it refers to
  std::string name;
  // Prepared statements: handle s is stmts[s - 1] (destroyed before db).
  std::vector<std::unique_ptr<Statement>> stmts;
};

std::vector<std::unique_ptr<Slot>> g_slots;  // handle h is g_slots[h - 1]
std::string g_in;                            // statement text + params
std::string g_out;                           // rows of the last call
QueryResult g_rows;                          // their values, written over by the next query
Status g_err;

int fail(Status s) {
  g_err = std::move(s);
  return -1;
}

Slot* slot(int h) {
  if (h <= 0 || (size_t)h > g_slots.size() || !g_slots[h - 1]) return nullptr;
  return g_slots[h - 1].get();
}

// Output buffers of big results are not kept around between calls.
void trim(std::string& s) {
  if (s.capacity() > (4u << 20)) std::string().swap(s);
}

// Opens `name` through the JS host `host`. Returns a handle (> 0) or -1.
int open_db(int host, bool atomic_replace, std::string name, std::string sync, bool create, bool recover,
            double read_chunk) {
  OpenOptions o;
  o.create = create;
  // Vector tables and graphs are read block by block when first used (the
  // host reads the rest when idle, kfWarm): opening reads only the documents.
  o.lazy_extents = true;
  if (!sync.empty()) {
    auto r = parse_sync_option(sync, o);
    if (!r) return fail(r.status());
    o = *r;
  }
  o.recover = recover;
  auto s = std::make_unique<Slot>();
  s->fs = make_host_file_system(host, atomic_replace, (uint64_t)read_chunk);
  s->name = name;
  auto db = Database::open(*s->fs, name, o);
  if (!db) return fail(db.status());
  s->db = std::move(db.value());
  for (size_t i = 0; i < g_slots.size(); i++) {
    if (!g_slots[i]) {
      g_slots[i] = std::move(s);
      return (int)i + 1;
    }
  }
  g_slots.push_back(std::move(s));
  return (int)g_slots.size();
}

// A pointer to an input buffer of at least n bytes (valid until the next call).
uint32_t input(uint32_t n) {
  if (n < (1u << 20)) trim(g_in);  // a big statement's buffer goes at the next small one
  if (g_in.size() < n) g_in.resize(n);
  return (uint32_t)(uintptr_t)g_in.data();
}

enum Flags { kParamsJson = 1, kRowsJson = 2 };

// The parameters in `raw`: a binary-encoded list value, or JSON text.
Status read_params(std::string_view raw, int flags, std::vector<Value>* params) {
  params->clear();
  if (raw.empty()) return Status::ok();
  if (flags & kParamsJson) {
    auto r = parse_json(raw);
    if (!r) return r.status();
    if (r.value().kind() != Kind::List) return Status(Code::Invalid, "parameters must be a list");
    *params = std::move(r.value().mutable_items());
    return Status::ok();
  }
  return decode_params(raw, params);
}

// Leaves the rows in the output buffer; returns their count or -1.
// The rows are those of g_rows, which a point read writes over in place;
// a result of many rows is not kept past its encoding.
int output_rows(const Status& st, int flags) {
  if (!st) return fail(st);
  const std::vector<Value>& rows = g_rows.rows;
  trim(g_out);
  g_out.clear();
  if (flags & kRowsJson) {
    for (size_t i = 0; i < rows.size(); i++) {
      if (i) g_out += '\n';
      append_json(g_out, rows[i]);
    }
  } else {
    put_varint(g_out, rows.size());
    for (const Value& row : rows) encode_value(g_out, row, false);
  }
  int n = (int)rows.size();
  // The rows are kept for the next call to write over (a point read's row,
  // a put's {id} rows: no allocation again), unless they are many or hold
  // much (their memory is a few times what they encode to).
  if (n > 1 && (n > 4096 || g_out.size() > (64u << 10))) std::vector<Value>().swap(g_rows.rows);
  return n;
}

// Runs the statement in input[0, text_len) with the params in
// input[text_len, text_len + params_len). Returns the row count or -1.
int query(int h, uint32_t text_len, uint32_t params_len, int flags) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  if ((uint64_t)text_len + params_len > g_in.size()) return fail(Status(Code::Invalid, "input past the buffer"));
  std::vector<Value> params;
  Status ps = read_params(std::string_view(g_in.data() + text_len, params_len), flags, &params);
  if (!ps) return fail(ps);
  return output_rows(s->db->query(std::string_view(g_in.data(), text_len), params, &g_rows), flags);
}

// Prepares the statement in input[0, text_len). Returns its handle (> 0) or -1.
int prepare(int h, uint32_t text_len) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  if (text_len > g_in.size()) return fail(Status(Code::Invalid, "input past the buffer"));
  auto r = s->db->prepare(std::string_view(g_in.data(), text_len));
  if (!r) return fail(r.status());
  size_t i = 0;
  while (i < s->stmts.size() && s->stmts[i]) i++;
  if (i == s->stmts.size()) s->stmts.emplace_back();
  s->stmts[i] = std::make_unique<Statement>(std::move(r.value()));
  return (int)i + 1;
}

// Runs prepared statement `st` with the params in input[0, params_len).
int run(int h, int st, uint32_t params_len, int flags) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  if (st <= 0 || (size_t)st > s->stmts.size() || !s->stmts[st - 1])
    return fail(Status(Code::Invalid, "the statement was finalized"));
  if (params_len > g_in.size()) return fail(Status(Code::Invalid, "input past the buffer"));
  const Statement& stmt = *s->stmts[st - 1];
  const std::string_view raw(g_in.data(), params_len);
  // A put of literals and parameters (`put t $1`, `put t {name: $1, v: $2}`)
  // splices them from their encoding into its documents, no value built.
  if (!(flags & kParamsJson) && !raw.empty() && stmt.splices_params()) {
    static std::vector<std::string_view> items;  // one thread: kept from call to call
    items.clear();
    Status ps = Params::split_list(raw, &items);
    if (!ps) return fail(ps);
    const int n = output_rows(stmt.query(Params::listed(items.data(), items.size()), &g_rows), flags);
    if (items.capacity() > 4096) std::vector<std::string_view>().swap(items);  // a long list is not kept
    return n;
  }
  std::vector<Value> params;
  Status ps = read_params(raw, flags, &params);
  if (!ps) return fail(ps);
  return output_rows(stmt.query(params, &g_rows), flags);
}

void finalize(int h, int st) {
  Slot* s = slot(h);
  if (!s || st <= 0 || (size_t)st > s->stmts.size()) return;
  s->stmts[st - 1].reset();
  while (!s->stmts.empty() && !s->stmts.back()) s->stmts.pop_back();
}

// Runs a batch atomically. The input holds one binary-encoded list of
// [text, params] lists; the output is a varint result count, then each
// result as a varint row count and its rows. Returns the count or -1.
int batch(int h, uint32_t len) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  if (len > g_in.size()) return fail(Status(Code::Invalid, "input past the buffer"));
  // Each entry's parameters stay in their encoding (BatchItem::encoded_params,
  // checked by the engine): a put of literals and parameters splices them.
  Reader rd(g_in.data(), len);
  const uint8_t tag = rd.u8();
  const uint64_t n = rd.varint();
  if (!rd.ok() || tag != kList || n > rd.left() / 4) return fail(Status(Code::Invalid, "malformed batch"));  // 4 bytes an entry at least
  std::vector<BatchItem> items(n);
  for (BatchItem& it : items) {
    const uint8_t pair = rd.u8();
    const uint64_t k = rd.varint();
    const uint8_t text = rd.u8();
    if (!rd.ok() || pair != kList || k < 1 || k > 2 || text != kText)
      return fail(Status(Code::Invalid, "a batch entry is [text, params]"));
    it.text = rd.str();
    if (k == 2 && rd.left() && (uint8_t)*rd.pos() == kNull) {
      rd.u8();
    } else if (k == 2) {
      const char* at = rd.pos();
      if (rd.left() && (uint8_t)*at != kList) return fail(Status(Code::Invalid, "a batch entry's params must be a list"));
      skip_value(rd, -1, false);  // its items at the depth of values given alone (as decode_params)
      it.encoded_params = std::string_view(at, rd.pos() - at);
    }
    if (!rd.ok()) return fail(Status(Code::Invalid, "malformed batch"));
  }
  if (!rd.done()) return fail(Status(Code::Invalid, "malformed batch"));
  auto r = s->db->batch(items);
  if (!r) return fail(r.status());
  trim(g_out);
  g_out.clear();
  put_varint(g_out, r->size());
  for (const QueryResult& q : *r) {
    put_varint(g_out, q.rows.size());
    for (const Value& row : q.rows) encode_value(g_out, row, false);
  }
  return (int)r->size();
}

uint32_t output_ptr() { return (uint32_t)(uintptr_t)g_out.data(); }
uint32_t output_len() { return (uint32_t)g_out.size(); }

int checkpoint(int h) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  Status st = s->db->checkpoint();
  return st ? 0 : fail(st);
}

int sync(int h) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  Status st = s->db->sync();
  return st ? 0 : fail(st);
}

// Reads up to `budget` bytes of vector tables and graphs not read yet;
// returns the bytes still unread (0 when all are in memory), -1 when closed.
double warm(int h, double budget) {
  Slot* s = slot(h);
  if (!s) return -1;
  return (double)s->db->warm((uint64_t)budget);
}

// Checkpoints, then reads the whole file into the output buffer.
int export_file(int h) {
  Slot* s = slot(h);
  if (!s) return fail(Status(Code::Invalid, "the database is closed"));
  Status st = s->db->checkpoint();
  if (!st) return fail(st);
  auto f = s->fs->open(s->name, OpenFlags{false, false});
  if (!f) return fail(f.status());
  auto size = (*f)->size();
  if (!size) return fail(size.status());
  trim(g_out);
  g_out.resize(*size);
  st = read_exact(**f, 0, g_out.data(), *size);
  if (!st) return fail(st);
  return 0;
}

// Closes and frees the handle, even when closing reports an error.
int close_db(int h, int checkpoint) {
  Slot* s = slot(h);
  if (!s) return 0;
  Status st = s->db->close(checkpoint != 0);
  g_slots[h - 1].reset();
  while (!g_slots.empty() && !g_slots.back()) g_slots.pop_back();
  return st ? 0 : fail(st);
}

void put_num(std::string& o, const char* key, double v) {
  o += '"';
  o += key;
  o += "\":";
  append_json(o, v == (double)(int64_t)v ? Value::integer((int64_t)v) : Value::real(v));
}

// Stats and the open report as JSON text.
std::string stats(int h) {
  Slot* s = slot(h);
  if (!s) return "";
  Stats st = s->db->stats();
  const OpenReport& rep = s->db->open_report();
  std::string o = "{";
  put_num(o, "fileBytes", st.file_bytes), o += ',';
  put_num(o, "imageBytes", st.image_bytes), o += ',';
  put_num(o, "tailBytes", st.tail_bytes), o += ',';
  put_num(o, "tailRecords", st.tail_records), o += ',';
  put_num(o, "memoryBytes", st.memory_bytes), o += ",\"collections\":[";
  for (size_t i = 0; i < st.collections.size(); i++) {
    const CollectionStats& c = st.collections[i];
    if (i) o += ',';
    o += "{\"name\":";
    append_json(o, Value::text(c.name));
    o += ',';
    put_num(o, "documents", c.documents), o += ',';
    put_num(o, "bytes", c.bytes), o += '}';
  }
  o += "],\"open\":{";
  put_num(o, "tornBytes", rep.torn_bytes), o += ',';
  put_num(o, "recoveredBytes", rep.recovered_bytes), o += ',';
  put_num(o, "tailRecords", rep.tail_records), o += ",\"sideFileRestored\":";
  o += rep.side_file_restored ? "true" : "false";
  o += ",\"indexRebuilt\":";
  o += rep.index_rebuilt ? "true" : "false";
  o += ",\"warnings\":[";
  for (size_t i = 0; i < rep.warnings.size(); i++) {
    if (i) o += ',';
    append_json(o, Value::text(rep.warnings[i]));
  }
  o += "]}}";
  return o;
}

std::string error_code() { return code_name(g_err.code()); }
std::string error_message() { return g_err.message(); }
double error_position() { return (double)g_err.position(); }
std::string error_text() { return g_err.to_string(); }

}  // namespace

EMSCRIPTEN_BINDINGS(kitfox) {
  emscripten::function("kfOpen", &open_db);
  emscripten::function("kfInput", &input);
  emscripten::function("kfQuery", &query);
  emscripten::function("kfBatch", &batch);
  emscripten::function("kfPrepare", &prepare);
  emscripten::function("kfRun", &run);
  emscripten::function("kfFinalize", &finalize);
  emscripten::function("kfOutputPtr", &output_ptr);
  emscripten::function("kfOutputLen", &output_len);
  emscripten::function("kfCheckpoint", &checkpoint);
  emscripten::function("kfSync", &sync);
  emscripten::function("kfWarm", &warm);
  emscripten::function("kfExportFile", &export_file);
  emscripten::function("kfClose", &close_db);
  emscripten::function("kfStats", &stats);
  emscripten::function("kfErrorCode", &error_code);
  emscripten::function("kfErrorMessage", &error_message);
  emscripten::function("kfErrorPosition", &error_position);
  emscripten::function("kfErrorText", &error_text);
}
