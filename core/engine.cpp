#include "engine.h"

#include <algorithm>

#include "codec.h"
#include "engine_limits.h"
#include "port.h"
#include "query/binder.h"
#include "query/ops/ops.h"
#include "query/parser.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox {

// Every parameter the statement names given: the highest, else refused
// (`explain`, which runs nothing, shows a plan without them where it can).
Status params_given(const ParsedStatement& st, const Params& params) {
  if ((uint64_t)st.max_param <= params.size() || (st.explain && !st.analyze)) return Status::ok();
  return Status(Code::Invalid,
                "parameter $" + std::to_string(st.max_param) + " was not given (" + std::to_string(params.size()) + " given)",
                st.max_param_pos);
}

// ---------------------------------------------------------------- open

Engine::Engine(FileSystem& fs, std::string name, OpenOptions o) : fs_(fs), name_(std::move(name)), opts_(o) {}

Engine::~Engine() {
  // An engine dropped half-way through its open must not checkpoint what
  // little it loaded over the file.
  if (opened_ && !closed_) close();
}


// ---------------------------------------------------------------- run

Result<std::shared_ptr<Prepared>> Engine::prepare(std::string_view text, bool cache) {
  if (cache && text.size() <= StatementCache::kMaxText)
    if (auto p = cache_.find(text)) return p;
  auto p = std::make_shared<Prepared>();
  p->text = std::string(text);
  KF_TRY(parse_statement(p->text, &p->st));
  p->point_id = point_read(p->st);
  if (cache) cache_.add(p);
  return p;
}

namespace {
// A write that may hold the write lock long: a set or del not by id (it
// may scan), a definition (an index built, a collection dropped).
bool writes_long(const ParsedStatement& st) {
  switch (st.kind) {
    case StmtKind::Put:
    case StmtKind::Insert:
    case StmtKind::Get:
    case StmtKind::Collections:
    case StmtKind::Describe:
    case StmtKind::Checkpoint:  // beside the writers
    case StmtKind::Compact:
    case StmtKind::Begin:
    case StmtKind::Commit:
    case StmtKind::Rollback:
      return false;
    case StmtKind::Set:
    case StmtKind::Del:
      return !names_ids(st.where.get());
    default:
      return true;
  }
}
// A put that may hold the write lock long: many documents, or documents
// linked into a vector index's graph as they land.
bool puts_long(const PreparedDocs& d) {
  constexpr size_t kLongBytes = 64 << 10, kLongDocs = 1000, kLongLinked = 32;
  return d.bodies.size() > kLongBytes || d.docs.size() > kLongDocs ||
         (d.coll && !d.coll->vindex.empty() && d.docs.size() > kLongLinked);
}
}  // namespace

bool Engine::reads_long(const Prepared& p) const {
  if (p.st.kind != StmtKind::Get || p.point_id) return false;
  // As its last run went; not run at this catalog version yet: may.
  const uint64_t ran = p.ran.load(std::memory_order_relaxed);
  return (ran >> 1) != catalog_version_.load(std::memory_order_relaxed) || (ran & 1);
}

bool Engine::may_run_long(std::string_view text, const Params& params) {
  constexpr size_t kLongText = 64 << 10;
  // While a long write runs, a short statement would wait for its lock.
  if (long_write_running()) return true;
  // Not kept parsed, so not parsed here: a put of a few documents is short.
  if (text.size() > StatementCache::kMaxText) return text.size() > kLongText || !is_put_text(text);
  auto r = prepare(text, true);
  if (!r.is_ok()) return false;  // its error comes at once
  const Prepared& p = **r;
  return statement_long(p, params) || reads_long(p) || p.st.kind == StmtKind::Checkpoint ||
         p.st.kind == StmtKind::Compact;
}

// A set or del not by id or a definition (writes_long), or a statement
// written by id whose values give none (a text, 1.5, a list holding one:
// the plan scans, a set or del under the write lock) or over 1,000 ids (as
// many documents as a long put's).
bool Engine::statement_long(const Prepared& p, const Params& params) const {
  if (writes_long(p.st)) return true;
  const StmtKind k = p.st.kind;
  if ((k != StmtKind::Get && k != StmtKind::Set && k != StmtKind::Del) || !names_ids(p.st.where.get())) return false;
  constexpr int64_t kLongIds = 1000;
  if (!params.values_only()) {  // the ids from the values they will be decoded into
    auto values = params.copy();
    if (!values.is_ok()) return false;  // its error comes at once
    const int64_t n = ids_named(Evaluator(Params(*values)), p.st.where.get());
    return n < 0 || n > kLongIds;
  }
  const int64_t n = ids_named(Evaluator(params), p.st.where.get());
  return n < 0 || n > kLongIds;
}

bool Engine::long_write_running() const { return long_writes_.load(std::memory_order_relaxed) > 0; }

Status Engine::bound(Prepared& p) {
  uint64_t v = catalog_version_.load(std::memory_order_relaxed);
  if (p.bound_at.load(std::memory_order_acquire) == v) return Status::ok();
  std::lock_guard g(p.bind_mu);
  if (p.bound_at.load(std::memory_order_relaxed) == v) return Status::ok();
  KF_TRY(bind(*this, p.st));
  p.collection = p.st.collection.empty() ? nullptr : find(p.st.collection);
  p.bound_at.store(v, std::memory_order_release);
  return Status::ok();
}

Status Engine::bind_now(Prepared& p) {
  std::shared_lock lk(mu_);
  KF_TRY(bound(p));
  return check_document_keys(*this, p.st);
}

int64_t documents_param(const ParsedStatement& st) {
  if (st.kind != StmtKind::Put && st.kind != StmtKind::Insert) return 0;
  const Expr* b = st.body.get();
  return b && b->kind == ExprKind::Param ? b->param : 0;
}

namespace {

// Literals and parameters, in lists and objects of them: what a put's body
// encodes with no evaluation (prepare_documents).
bool values_alone(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal:
    case ExprKind::Param: return true;
    case ExprKind::ListLit:
    case ExprKind::ObjectLit:
      for (const ExprPtr& k : e.kids)
        if (!values_alone(*k)) return false;
      return true;
    default: return false;
  }
}
}  // namespace

bool splices_params(const ParsedStatement& st) {
  return (st.kind == StmtKind::Put || st.kind == StmtKind::Insert) && !st.explain && st.body && values_alone(*st.body);
}

bool reads_as_given(const ParsedStatement& st, const Params& params) {
  if (params.values_only()) return true;
  if (!params.is_listed()) return !params.encoded(documents_param(st)).empty();
  return splices_params(st);
}

Status Engine::run(Prepared& p, const Params& params, QueryResult* out,
                   uint64_t* durable_at) {
  if (durable_at) *durable_at = 0;
  const ParsedStatement& st = p.st;
  KF_TRY(params_given(st, params));
  if (!reads_as_given(st, params)) {  // only a put reads parameters in their encoding
    KF_ASSIGN(auto values, params.copy());
    return run(p, Params(values), out, durable_at);
  }
  CallsInFlight::Scope in(calls_);
  if (!in) return closed_error();
  switch (st.kind) {
    case StmtKind::Checkpoint:
    case StmtKind::Compact:
      KF_TRY(checkpoint_now());
      out->rows.clear();
      return Status::ok();
    case StmtKind::Begin:
    case StmtKind::Commit:
    case StmtKind::Rollback:
      return Status(Code::Invalid, "transactions belong to a Database handle", st.pos);
    default: break;
  }
  if (!st.is_write()) {
    for (int tries = 0;; tries++) {
      std::shared_lock lk(mu_);
      KF_TRY(bound(p));
      // An index its plan would build (or vector maps its run would need),
      // built beside the lock first, then planned again (after
      // kBuildTries, built where planned, or for maps, scanned).
      std::vector<IndexNeed> needs;
      Status r;
      {
        DeferBuilds defer(port::kThreads && tries < kBuildTries ? &needs : nullptr);
        r = execute_read(p, p.collection, params, out, &lk);
      }
      if (!needs.empty()) {
        build_needs(needs, &tries, lk);
        continue;
      }
      if (!lk.owns_lock()) return r;  // pinned: it read no block still to be checked
      if (!extents_damaged()) return r;
      break;
    }
    // A block found damaged: rebuilding a graph needs the database alone.
    std::unique_lock lk(mu_);
    bool repaired = false;
    KF_TRY(check_extents(&repaired));
    KF_TRY(bound(p));
    return execute_read(p, p.collection, params, out);  // from the rebuilt graph
  }
  // A write's documents are made beside the readers and the other
  // writers; the write lock is held only to give them ids and land them,
  // with the writes queued beside it (sync.cpp).
  QueuedWrite w(p, params);
  w.deferred = durable_at != nullptr;
  {
    std::shared_lock lk(mu_);
    KF_TRY(check_writable());
    KF_TRY(bound(p));
    // (Counted only where a vector index will look them up: not on every write.)
    const bool vectors = p.collection && !p.collection->vindex.empty();
    KF_TRY(ready_indexes(p, params, vectors ? vector_lookups(st, params) : 0, lk));
    w.catalog_at = catalog_version_.load(std::memory_order_relaxed);
    KF_TRY(prepare_write(st, params, &w.docs));
    // Under the lock: it reads the collection.
    w.long_write = statement_long(p, params) || puts_long(w.docs);
  }
  LongWrites counted(long_writes_, w.long_write);
  KF_ASSIGN(QueryResult landed, land(w));
  // A put's {id} rows, made here beside the readers, over the rows *out held.
  if (w.docs.landed) w.docs.landed_rows(&out->rows);
  else *out = std::move(landed);
  if (w.deferred && opts_.sync == SyncMode::Always) *durable_at = w.seq;
  return Status::ok();
}

namespace {
Status in_statement(size_t i, const Status& s) {
  return Status(s.code(), "statement " + std::to_string(i + 1) + ": " + s.message(), s.position());
}
}  // namespace

Result<std::vector<QueryResult>> Engine::batch(const std::vector<BatchItem>& items, uint64_t* durable_at) {
  // The parameters left encoded, each item's in one table (a parameter
  // looked up by its number), made whole before any Params refers into it.
  // A malformed list is reported where the statement is, after the
  // errors of the statements before it.
  std::vector<std::string_view> encoded;
  std::vector<size_t> first(items.size() + 1, 0);
  size_t bad = items.size();
  Status bad_list;
  for (size_t i = 0; i < items.size() && bad == items.size(); i++) {
    if (!items[i].encoded_params.empty()) {
      bad_list = Params::split_list(items[i].encoded_params, &encoded);
      if (!bad_list.is_ok()) bad = i;
    }
    first[i + 1] = encoded.size();
  }
  std::vector<PreparedItem> prepared(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    const BatchItem& item = items[i];
    PreparedItem& it = prepared[i];
    if (i > 0 && item.text == items[i - 1].text) {  // a run of one statement: prepared once
      it.p = prepared[i - 1].p;
    } else {
      auto p = prepare(item.text, true);
      if (!p.is_ok()) return in_statement(i, p.status());
      it.p = std::move(p.value());
    }
    if (i == bad) return in_statement(i, bad_list);
    if (item.encoded_params.empty()) {
      it.given = Params(item.params);
      continue;
    }
    it.given = Params::listed(encoded.data() + first[i], first[i + 1] - first[i]);
    if (!reads_as_given(it.p->st, *it.given)) {
      auto values = it.given->copy();
      if (!values.is_ok()) return in_statement(i, values.status());
      it.kept = std::move(*values);
      it.given.reset();
    }
  }
  return run_batch(prepared, false, durable_at);
}

Result<std::vector<QueryResult>> Engine::run_batch(const std::vector<PreparedItem>& items, bool dry_run,
                                                   uint64_t* durable_at) {
  // At most this many statements' storage kept, 1 MiB of it in all.
  constexpr size_t kKeptDocs = 1024, kKeptBytes = 1 << 20;
  if (durable_at) *durable_at = 0;
  for (size_t i = 0; i < items.size(); i++) {
    StmtKind k = items[i].p->st.kind;
    if (k != StmtKind::Put && k != StmtKind::Insert && k != StmtKind::Set && k != StmtKind::Del && k != StmtKind::Get &&
        k != StmtKind::Collections && k != StmtKind::Describe)
      return in_statement(i, Status(Code::Invalid, "only put, insert, set, del and reads can be part of a batch",
                                    items[i].p->st.pos));
    if (Status given = params_given(items[i].p->st, items[i].params()); !given.is_ok()) return in_statement(i, given);
  }
  CallsInFlight::Scope in(calls_);
  if (!in) return closed_error();
  std::vector<QueryResult> out;
  out.reserve(items.size());
  uint64_t wait_seq = 0;
  bool wrote = false;
  {
    // What its statements would build under the write lock, built beside
    // the readers and the writers first (an unknown name is reported
    // below).
    // A vector index's lookups counted over the whole batch, a collection
    // at a time (scans may answer a few statements' each, not a thousand),
    // and reserved by the collection's first statement.
    std::vector<std::pair<std::string_view, uint64_t>> lookups;
    auto of = [&](std::string_view coll) -> uint64_t& {
      for (auto& [name, n] : lookups)
        if (name == coll) return n;
      return lookups.emplace_back(coll, 0).second;
    };
    for (const PreparedItem& it : items)
      if (needs_maps(it.p->st)) {
        uint64_t& n = of(it.p->st.collection);
        n += std::min(UINT64_MAX - n, vector_lookups(it.p->st, it.params()));
      }
    std::shared_lock lk(mu_);
    for (size_t i = 0; i < items.size(); i++) {
      if (i > 0 && items[i].p == items[i - 1].p) continue;  // a run of one statement
      if (!bound(*items[i].p).is_ok()) continue;
      uint64_t& n = of(items[i].p->st.collection);
      KF_TRY(ready_indexes(*items[i].p, items[i].params(), n, lk));
      if (needs_maps(items[i].p->st)) n = 0;  // reserved
    }
  }
  {
    std::lock_guard gate(write_gate_);
    const uint64_t start = write_pos_;
    // The puts' documents are made beside the readers (they depend on the
    // catalog alone, which no statement of a batch changes).
    struct Kept {  // batch_docs_ for this batch's statements, emptied after it, what grew big let go
      std::vector<PreparedDocs>& v;
      size_t n;
      Kept(std::vector<PreparedDocs>& v, size_t n) : v(v), n(n) {
        if (v.size() < n) v.resize(n);
      }
      ~Kept() {
        size_t budget = kKeptBytes;
        for (size_t i = 0; i < n; i++) v[i].reset(&budget);
        if (v.size() > kKeptDocs) v.resize(kKeptDocs);
      }
    } kept(batch_docs_, items.size());
    std::vector<PreparedDocs>& docs = batch_docs_;
    {
      std::shared_lock lk(mu_);
      KF_TRY(check_writable());
      for (size_t i = 0; i < items.size(); i++) {
        Status s = bound(*items[i].p);
        if (s.is_ok()) s = prepare_write(items[i].p->st, items[i].params(), &docs[i]);
        if (!s.is_ok()) return in_statement(i, s);
      }
    }
    // Its reads run under the write lock too (they see its writes).
    bool long_write = false;
    for (size_t i = 0; i < items.size() && !long_write; i++)
      long_write = statement_long(*items[i].p, items[i].params()) || puts_long(docs[i]) || reads_long(*items[i].p);
    LongWrites counted(long_writes_, long_write);
    std::unique_lock lk(mu_);
    KF_TRY(check_writable());
    in_txn_ = true;
    txn_.clear();
    undo_.clear();
    WriteBatch batch;  // each statement's ops
    // Its reads' rows are one answer: held to max_result_bytes together, as
    // one query's are (a batch of reads of 300 MB each ran a WASM module
    // out of memory, failing every database in it).
    uint64_t rows_left = opts_.max_result_bytes;
    for (size_t i = 0; i < items.size(); i++) {
      const ParsedStatement& st = items[i].p->st;
      QueryResult r;
      Status s;
      if (st.is_write()) {
        batch.clear();
        s = execute_write(st, items[i].params(), &docs[i], &batch, &r);
        if (s.is_ok() && !batch.empty()) s = commit(batch).status();
      } else {
        struct Left {  // this read's own budget is what is left of the batch's
          explicit Left(uint64_t n) { RowBudget::batch_left = n; }
          ~Left() { RowBudget::batch_left = UINT64_MAX; }
        } left(rows_left);
        s = execute_read(*items[i].p, find(st.collection), items[i].params(), &r);  // no lock held since binding
        for (size_t k = 0; s.is_ok() && k < r.rows.size(); k++) {
          const uint64_t n = RowBudget::bytes(r.rows[k]);
          if (n > rows_left)
            s = Status(Code::Limit, "the rows of this batch's reads take more than " + std::to_string(opts_.max_result_bytes >> 20) +
                                        " MiB (max_result_bytes): add limits or select fewer fields, or read in more calls");
          else
            rows_left -= n;
        }
      }
      if (!s.is_ok()) {
        rollback(undo_);
        in_txn_ = false;
        return in_statement(i, s);
      }
      out.push_back(std::move(r));
    }
    in_txn_ = false;
    auto rows = [&] {  // the puts' {id} rows, made after the write lock
      for (size_t i = 0; i < out.size(); i++) docs[i].landed_rows(&out[i].rows);
    };
    bool repaired = false;
    Status damaged = check_extents(&repaired);
    if (!damaged.is_ok() || dry_run) {
      rollback(undo_);
      if (!damaged.is_ok()) return damaged;
      lk.unlock();
      rows();
      return out;
    }
    if (!txn_.empty()) {
      auto w = write_record(txn_, false);
      if (!w.is_ok()) {
        rollback(undo_);
        return w.status();
      }
      wait_seq = seq_;
      wrote = true;
    }
    undo_.clear();
    txn_.clear();
    lk.unlock();
    rows();
    fill_ahead(write_pos_ - start);  // beside the readers
  }
  checkpoint_if_due();
  if (wrote && opts_.sync == SyncMode::Always) {
    if (durable_at) *durable_at = wait_seq;
    else KF_TRY(sync_to(wait_seq));
  }
  return out;
}


Status Engine::close(bool checkpoint) {
  std::lock_guard one_close(close_mu_);
  if (closed_) return closed_status_;
  // New calls fail from here; those under way end first (a durable write's
  // flush included: the flusher still runs).
  calls_.close();
  stop_checker();
  if (checkpointer_.running()) {
    {
      std::lock_guard g(ckpt_mu_);
      stop_checkpointer_ = true;
    }
    ckpt_cv_.notify_all();
    checkpointer_.join();
  }
  if (flusher_.running()) {
    {
      std::lock_guard g(sync_mu_);
      stop_flusher_ = true;
    }
    sync_cv_.notify_all();
    flusher_.join();
  }
  // A checkpoint or a write another thread is running ends first.
  std::lock_guard one(checkpoint_mu_);
  std::lock_guard gate(write_gate_);
  Status st;
  {
    std::unique_lock lk(mu_);
    if (checkpoint && !failed_ && opts_.auto_checkpoint && checkpoint_worthwhile(true)) st = checkpoint_locked();
  }
  // The flush even after a failed checkpoint: the writes are in the file.
  if (!failed_) {
    const Status flushed = sync_to_written();
    if (st.is_ok()) st = flushed;
  }
  // A failed flush or write before: what it did not make durable is not
  // now either, and close() says so rather than answer ok.
  if (st.is_ok() && failed_) st = Status(Code::Failed, failure_ + "; what was written since the last flush that succeeded may be lost");
  closed_ = true;
  file_.reset();
  closed_status_ = st;
  return st;
}

Status Engine::closed_error() { return Status(Code::Invalid, "the database is closed"); }

Stats Engine::stats() {
  std::shared_lock lk(mu_);
  Stats s;
  s.file_bytes = write_pos_;
  s.image_bytes = image_bytes_;
  s.tail_bytes = write_pos_ - image_bytes_;
  s.tail_records = tail_records_;
  s.memory_bytes = arena_.memory_bytes();
  s.reads_pinned = reads_pinned_.load(std::memory_order_relaxed);
  s.built_beside = built_beside_.load(std::memory_order_relaxed);
  {
    std::lock_guard g(queue_mu_);
    s.queued_writes = queued_;
  }
  for (auto& [name, c] : colls_) {
    s.memory_bytes += c->ids.memory_bytes();
    for (auto& [fid, index] : c->vindex) s.memory_bytes += index->memory_bytes();
    {  // put in place under these beside the readers (secondary(), build_beside)
      std::lock_guard g(c->text_mu);
      for (auto& [fid, ti] : c->tindex) s.memory_bytes += ti->memory_bytes();
    }
    std::lock_guard g(c->sec_mu);
    for (auto& si : c->sindex)
      if (si) s.memory_bytes += si->memory_bytes();
    s.collections.push_back({name, c->ids.size(), c->bytes});
  }
  return s;
}

Collection* Engine::find(std::string_view name) {
  auto it = colls_.find(name);
  return it == colls_.end() ? nullptr : it->second.get();
}

}  // namespace kitfox
