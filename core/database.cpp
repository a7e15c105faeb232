// Database, Statement and transactions: the public API (db.h) over the engine.
#include <cstring>

#include "engine.h"
#include "query/parser.h"

namespace kitfox {


// The statements a thread queued since its begin, by thread.
struct Database::Transactions {
  std::mutex mu;
  std::map<uint64_t, std::vector<Engine::PreparedItem>> open;  // by DatabaseThreadTxns::id
  std::atomic<size_t> count{0};  // open.size(), read without mu: none open, none to look up
};

// A thread as its transactions know it: an id no later thread is given
// (std::thread::id is handed on to the next thread at once), and, when the
// thread ends, the transactions it left open are dropped (rolled back), so
// none outlives its thread or is taken over.
struct DatabaseThreadTxns {
  static inline std::atomic<uint64_t> next{1};
  const uint64_t id = next.fetch_add(1);
  std::vector<std::weak_ptr<Database::Transactions>> opened_in;  // where it began one
  ~DatabaseThreadTxns() {
    for (auto& w : opened_in)
      if (auto t = w.lock()) {
        std::lock_guard g(t->mu);
        t->open.erase(id);
        t->count = t->open.size();
      }
  }
  // Notes that this thread began one in `t` (once for each database).
  void began_in(const std::shared_ptr<Database::Transactions>& t) {
    std::erase_if(opened_in, [](const auto& w) { return w.expired(); });
    for (const auto& w : opened_in)
      if (!w.owner_before(t) && !t.owner_before(w)) return;
    opened_in.push_back(t);
  }
};
static thread_local DatabaseThreadTxns this_thread_txns;

Database::Database() : txns_(std::make_shared<Transactions>()) {}
Database::~Database() = default;

Result<std::unique_ptr<Database>> Database::open(FileSystem& fs, const std::string& name, const OpenOptions& o) {
  KF_ASSIGN(auto e, Engine::open(fs, fs.canonical(name), o));
  std::unique_ptr<Database> db(new Database());
  db->engine_ = std::move(e);
  return db;
}

Result<QueryResult> Database::query(std::string_view text, const std::vector<Value>& params) {
  QueryResult r;
  KF_TRY(query(text, params, &r));
  return r;
}

Status Database::query(std::string_view text, const std::vector<Value>& params, QueryResult* out) {
  auto p = engine_->prepare(text, true);
  if (!p.is_ok()) {
    out->rows.clear();
    return p.status();
  }
  return run(*p, params, out);
}

Result<QueryResult> Database::query_outside_transaction(std::string_view text, const std::vector<Value>& params,
                                                       uint64_t* durable_at) {
  return query_outside_transaction(text, Params(params), durable_at);
}

Result<QueryResult> Database::query_outside_transaction(std::string_view text, const Params& params,
                                                       uint64_t* durable_at) {
  if (durable_at) *durable_at = 0;
  KF_ASSIGN(auto p, engine_->prepare(text, true));
  const StmtKind kind = p->st.kind;
  if (kind == StmtKind::Begin || kind == StmtKind::Commit || kind == StmtKind::Rollback)
    return Status(Code::Invalid, "transactions are not available here: send the statements of one atomic write together as a batch", p->st.pos);
  QueryResult r;
  KF_TRY(engine_->run(*p, params, &r, durable_at));
  return r;
}

void Database::when_durable(uint64_t durable_at, std::function<void(const Status&)> done) {
  engine_->when_durable(durable_at, std::move(done));
}

bool Database::may_run_long(std::string_view text, const std::vector<Value>& params) {
  return engine_->may_run_long(text, params);
}
bool Database::may_run_long(std::string_view text, const Params& params) {
  return engine_->may_run_long(text, params);
}
bool Database::long_write_running() const { return engine_->long_write_running(); }

Result<Statement> Database::prepare(std::string_view text) {
  KF_ASSIGN(auto p, engine_->prepare(text, false));
  Statement s;
  s.db_ = this;
  s.p_ = std::move(p);
  KF_TRY(engine_->bind_now(*s.p_));
  return s;
}

const std::vector<Value>& Params::one_unset() {
  static const std::vector<Value> one(1);
  return one;
}

Status Params::split_list(std::string_view list, std::vector<std::string_view>* items) {
  Reader r(list);
  const uint8_t tag = r.u8();
  const uint64_t n = r.varint();
  if (tag != kList) return Status(Code::Invalid, "parameters must be a list");
  if (!r.ok() || n > r.left()) return Status(Code::Invalid, "malformed parameters");
  const size_t first = items->size();  // (no reserve: a batch appends list after list)
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    const char* at = r.pos();
    skip_value(r, 0, false);  // an item, at the depth of a value given alone (as decode_params)
    items->emplace_back(at, r.pos() - at);
  }
  if (!r.ok() || !r.done()) {
    items->resize(first);
    return Status(Code::Invalid, "malformed parameters");
  }
  return Status::ok();
}

Result<std::vector<Value>> Params::copy() const {
  if (listed_) {
    std::vector<Value> v(count_);
    for (size_t i = 0; i < count_; i++) {
      Reader r(items_[i]);
      if (!decode_value(r, &v[i], 0).is_ok() || !r.done()) return Status(Code::Invalid, "malformed parameters");
    }
    return v;
  }
  std::vector<Value> v = *values_;
  if (!encoded_.empty() && at_ < v.size()) {
    Reader r(encoded_);
    if (!decode_value(r, &v[at_]).is_ok() || !r.done()) return Status(Code::Invalid, "malformed parameters");
  }
  return v;
}

std::optional<size_t> Database::open_transaction() const {
  Transactions& t = *txns_;
  if (t.count.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard g(t.mu);
  auto it = t.open.find(this_thread_txns.id);
  if (it == t.open.end()) return std::nullopt;
  return it->second.size();
}

// The rows of *out are cleared on an error, whichever step it came from.
Status Database::run(const std::shared_ptr<Prepared>& p, const Params& params, QueryResult* out) {
  Status s = dispatch(p, params, out);
  if (!s.is_ok()) out->rows.clear();
  return s;
}

// Begin, commit and rollback; a statement inside this thread's transaction;
// any other straight to the engine.
Status Database::dispatch(const std::shared_ptr<Prepared>& p, const Params& params, QueryResult* out) {
  const StmtKind kind = p->st.kind;
  Transactions& t = *txns_;
  switch (kind) {
    case StmtKind::Begin: {
      if (engine_->closed()) return Status(Code::Invalid, "the database is closed");
      DatabaseThreadTxns& mine = this_thread_txns;
      std::lock_guard g(t.mu);
      if (t.open.count(mine.id)) return Status(Code::Invalid, "a transaction is already open (begin was given twice)", p->st.pos);
      t.open[mine.id];
      t.count = t.open.size();
      mine.began_in(txns_);
      out->rows.clear();
      return Status::ok();
    }
    case StmtKind::Rollback: {
      std::lock_guard g(t.mu);
      if (!t.open.erase(this_thread_txns.id)) return Status(Code::Invalid, "no transaction is open (rollback without begin)", p->st.pos);
      t.count = t.open.size();
      out->rows.clear();
      return Status::ok();
    }
    case StmtKind::Commit: {
      std::vector<Engine::PreparedItem> items;
      {
        std::lock_guard g(t.mu);
        auto it = t.open.find(this_thread_txns.id);
        if (it == t.open.end()) return Status(Code::Invalid, "no transaction is open (commit without begin)", p->st.pos);
        items = std::move(it->second);
        t.open.erase(it);
        t.count = t.open.size();
      }
      KF_ASSIGN(auto results, engine_->run_batch(items, false));
      out->rows.clear();
      for (auto& r : results)
        for (auto& row : r.rows) out->rows.push_back(std::move(row));
      return Status::ok();
    }
    default: break;
  }
  // Only this thread opens or closes its own transaction, so with none open
  // at all this thread has none.
  if (t.count.load(std::memory_order_acquire) == 0) return engine_->run(*p, params, out);
  std::unique_lock g(t.mu);
  auto it = t.open.find(this_thread_txns.id);
  if (it == t.open.end()) {
    g.unlock();
    return engine_->run(*p, params, out);
  }
  std::vector<Engine::PreparedItem>& queue = it->second;
  bool is_read = kind == StmtKind::Get || kind == StmtKind::Collections || kind == StmtKind::Describe;
  if (!is_read && kind != StmtKind::Put && kind != StmtKind::Insert && kind != StmtKind::Set && kind != StmtKind::Del)
    return Status(Code::Invalid, "only put, insert, set, del and reads can be part of a transaction", p->st.pos);
  if (!is_read) {
    if (engine_->closed()) return Status(Code::Invalid, "the database is closed");  // nothing queued to a closed database
    KF_TRY(engine_->bind_now(*p));  // an unknown name is reported now, not at commit
    KF_TRY(params_given(p->st, params));  // a missing parameter too
    KF_ASSIGN(auto kept, params.copy());
    queue.push_back({p, std::move(kept), std::nullopt});  // kept: the caller's go when it returns
    Value row = Value::object();
    row.append("queued", Value::integer((int64_t)queue.size()));
    out->rows.clear();
    out->rows.push_back(std::move(row));
    return Status::ok();
  }
  if (queue.empty()) {
    g.unlock();
    return engine_->run(*p, params, out);
  }
  // A read sees the transaction's writes: they run before it, then are undone.
  std::vector<Engine::PreparedItem> items = queue;
  g.unlock();
  if (!params.values_only()) {  // a batch's items hold values only
    KF_ASSIGN(auto kept, params.copy());
    items.push_back({p, std::move(kept), std::nullopt});
  } else {
    items.push_back({p, {}, params});
  }
  KF_ASSIGN(auto results, engine_->run_batch(items, true));
  *out = std::move(results.back());
  return Status::ok();
}

Result<QueryResult> Statement::query(const std::vector<Value>& params) const {
  QueryResult r;
  KF_TRY(query(params, &r));
  return r;
}

Status Statement::query(const std::vector<Value>& params, QueryResult* out) const {
  return query(Params(params), out);
}

Status Statement::query(const Params& params, QueryResult* out) const {
  if (!p_) {
    out->rows.clear();
    return Status(Code::Invalid, "an empty statement (not prepared)");
  }
  return db_->run(p_, params, out);
}
const std::string& Statement::text() const {
  static const std::string none;
  return p_ ? p_->text : none;
}
bool Statement::is_write() const { return p_ && p_->st.is_write(); }
int64_t Statement::documents_param() const { return p_ ? kitfox::documents_param(p_->st) : 0; }
bool Statement::splices_params() const { return p_ && kitfox::splices_params(p_->st); }

Result<std::vector<QueryResult>> Database::batch(const std::vector<BatchItem>& items, uint64_t* durable_at) {
  // Its statements would land at once, outside the transaction (a rollback
  // would not take them back).
  if (open_transaction())
    return Status(Code::Invalid, "a batch cannot run inside a transaction: run its statements in the transaction, or commit first");
  return engine_->batch(items, durable_at);
}
int64_t Database::documents_param(std::string_view text, std::string* collection) {
  // (A text the cache does not keep would be parsed twice; `put C $n` is short.)
  if (text.size() > StatementCache::kMaxText || !is_put_text(text)) return 0;
  auto p = engine_->prepare(text, true);
  if (!p.is_ok()) return 0;
  const int64_t n = kitfox::documents_param((*p)->st);
  if (n) *collection = (*p)->st.collection;
  return n;
}
Status Database::checkpoint() { return engine_->checkpoint(); }
Status Database::compact() { return engine_->checkpoint(); }
Status Database::sync() { return engine_->sync(); }
uint64_t Database::warm(uint64_t budget) { return engine_->warm(budget); }
Status Database::close(bool checkpoint) { return engine_->close(checkpoint); }
Stats Database::stats() { return engine_->stats(); }
OpenReport Database::open_report() const { return engine_->report(); }

Value stats_value(const Stats& st) {
  auto u = [](uint64_t n) { return Value::integer(static_cast<int64_t>(n)); };
  Value o = Value::object();
  o.append("file_bytes", u(st.file_bytes));
  o.append("image_bytes", u(st.image_bytes));
  o.append("tail_bytes", u(st.tail_bytes));
  o.append("tail_records", u(st.tail_records));
  o.append("memory_bytes", u(st.memory_bytes));
  o.append("queued_writes", u(st.queued_writes));
  o.append("reads_pinned", u(st.reads_pinned));
  o.append("built_beside", u(st.built_beside));
  Value list = Value::list();
  for (const CollectionStats& c : st.collections) {
    Value co = Value::object();
    co.append("name", Value::text(c.name));
    co.append("documents", u(c.documents));
    co.append("bytes", u(c.bytes));
    list.push(std::move(co));
  }
  o.append("collections", std::move(list));
  return o;
}

Result<OpenOptions> parse_sync_option(std::string_view s, OpenOptions o) {
  if (s == "always") { o.sync = SyncMode::Always; return o; }
  if (s == "off") { o.sync = SyncMode::Off; return o; }
  std::string_view n = s;
  if (n.size() > 2 && n.substr(n.size() - 2) == "ms") n.remove_suffix(2);
  uint64_t v = 0;
  if (n.empty() || n.size() > 9) return Status(Code::Invalid, "sync must be 'always', 'off' or a period in milliseconds, got '" + std::string(s) + "'");
  for (char c : n) {
    if (c < '0' || c > '9') return Status(Code::Invalid, "sync must be 'always', 'off' or a period in milliseconds, got '" + std::string(s) + "'");
    v = v * 10 + (c - '0');
  }
  o.sync = SyncMode::Period;
  o.sync_period_ms = (uint32_t)v;
  return o;
}

}  // namespace kitfox
