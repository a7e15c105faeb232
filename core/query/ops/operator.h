// Operators: a read runs as a pipeline that a source (scan, id lookup, an
// index, a near or match search) pushes rows into, stage by stage (filter,
// sort, limit, lookup, project, aggregate, count). Each is one node of the
// plan (../plan.h), in a file of its own in this directory; the planner
// (../planner.cpp) picks and joins them.
#pragma once
#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "../../engine.h"
#include "../evaluator.h"
#include "../plan.h"

namespace kitfox {

// One document on its way through a pipeline.
struct Row {
  int64_t id = 0;
  std::string_view body;  // as stored
  Value doc;              // decoded (when `decoded`)
  bool decoded = false;
  double distance = 0;    // near, rerank: as shown (_distance; NaN: a rerank's match with no vector)
  double score = 0;       // match, fuse (_score)
  Value children;         // lookup: the child rows
  bool has_children = false;
};

// What every operator of one run shares.
struct ExecContext {
  ExecContext(Engine& e, Collection& coll, const ParsedStatement& s, const Evaluator& v, Plan& p, bool an)
      : eng(e), c(coll), st(s), ev(v), plan(p), analyze(an), budget(e.options().max_result_bytes) {}
  Engine& eng;
  Collection& c;
  const ParsedStatement& st;  // the statement (or a lookup's child statement) this pipeline runs
  const Evaluator& ev;
  Plan& plan;
  bool analyze;
  RowBudget budget;
  uint64_t nested_ns = 0;  // analyze: time the stages a stage called took
  Status err;              // the first error a stage met (it then asks to stop)
  const Arena::View* pinned = nullptr;  // a pinned read's documents (executor.cpp)
  // A pinned read's copies of the collections its lookups read, by name.
  const std::map<std::string, std::unique_ptr<Collection>, std::less<>>* pinned_colls = nullptr;

  // A stored document's bytes.
  std::string_view body(uint64_t loc) const { return pinned ? pinned->body(loc) : eng.body(loc); }

  // For a source that reads documents by id, one after another (an id
  // list): called before reading the i-th of n,
  // it starts loading the id index entries and the likely documents of
  // the ids eight ahead (IdIndex::prefetch), so that their memory misses
  // overlap instead of following each other.
  static constexpr size_t kIdsAhead = 8;
  template <typename IdAt>
  void load_ahead(size_t i, size_t n, const IdAt& id_at) const {
    auto ahead = [&](uint64_t loc) {
      if (!pinned) eng.prefetch_body(loc);
    };
    if (i == 0)
      for (size_t k = 0; k < n && k < kIdsAhead; k++) c.ids.prefetch(id_at(k), ahead);
    if (i + kIdsAhead < n) c.ids.prefetch(id_at(i + kIdsAhead), ahead);
  }

  // The row's document, decoded once.
  Status decode(Row& r) {
    if (r.decoded) return Status::ok();
    KF_TRY(decode_document(c.def, r.id, r.body, &r.doc, &c));
    r.decoded = true;
    return Status::ok();
  }
  bool fail(Status s) {
    if (err.is_ok()) err = std::move(s);
    return false;
  }
  static uint64_t now_ns() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Operators are made and freed for every read: their memory is kept per
// thread, by size, and used again, so a point read asks malloc for none.
class OpMemory {
 public:
  static void* get(size_t n) {
    size_t c = cls(n);
    if (c >= kClasses) return ::operator new(n);
    Free*& head = lists().heads[c];
    if (!head) return ::operator new((c + 1) * kGrain);
    Free* f = head;
    head = f->next;
    return f;
  }
  static void put(void* p, size_t n) {
    size_t c = cls(n);
    if (c >= kClasses) return ::operator delete(p);
    Free* f = static_cast<Free*>(p);
    f->next = lists().heads[c];
    lists().heads[c] = f;
  }

 private:
  struct Free {
    Free* next;
  };
  static constexpr size_t kGrain = 64, kClasses = 16;  // blocks of 64 .. 1024 bytes
  static size_t cls(size_t n) { return (n + kGrain - 1) / kGrain - 1; }
  struct Lists {
    Free* heads[kClasses] = {};
    ~Lists() {
      for (Free* h : heads)
        while (h) {
          Free* n = h->next;
          ::operator delete(h);
          h = n;
        }
    }
  };
  static Lists& lists() {
    thread_local Lists l;
    return l;
  }
};

// A stage takes the rows of the operator before it.
class Stage {
 public:
  static void* operator new(size_t n) { return OpMemory::get(n); }
  static void operator delete(void* p, size_t n) { OpMemory::put(p, n); }
  Stage(ExecContext& x, int node) : x_(x), node_(node) {}
  virtual ~Stage() = default;
  // One row; false asks the sender to stop (enough rows, or x.err is set).
  bool take(Row& r) {
    PlanNode& n = x_.plan.node(node_);
    n.rows_in++;
    if (!x_.analyze) return push(r);
    uint64_t t0 = ExecContext::now_ns(), outer = x_.nested_ns;
    x_.nested_ns = 0;
    bool more = push(r);
    uint64_t spent = ExecContext::now_ns() - t0;
    n.self_ns += spent - x_.nested_ns;
    x_.nested_ns = outer + spent;
    return more;
  }
  // No more rows: a stage that holds rows (a sort) sends them now.
  virtual Status finish() { return next_ ? next_->finish() : Status::ok(); }
  void then(Stage* next) { next_ = next; }
  int node() const { return node_; }

 protected:
  virtual bool push(Row& r) = 0;
  bool emit(Row& r) {
    x_.plan.node(node_).rows_out++;
    return next_->take(r);
  }
  ExecContext& x_;
  int node_;
  Stage* next_ = nullptr;
};

// A source finds rows and pushes them into its first stage.
class Source {
 public:
  static void* operator new(size_t n) { return OpMemory::get(n); }
  static void operator delete(void* p, size_t n) { OpMemory::put(p, n); }
  Source(ExecContext& x, int node) : x_(x), node_(node) {}
  virtual ~Source() = default;
  // Runs to the end (or until a stage asks to stop), then finishes the stages.
  Status run(Stage* first) {
    first_ = first;
    uint64_t t0 = x_.analyze ? ExecContext::now_ns() : 0;
    Status s = produce();
    if (x_.analyze) x_.plan.node(node_).self_ns += ExecContext::now_ns() - t0 - x_.nested_ns;
    x_.nested_ns = 0;
    KF_TRY(s);
    KF_TRY(x_.err);
    return first_ ? first_->finish() : Status::ok();
  }
  int node() const { return node_; }

 protected:
  virtual Status produce() = 0;
  // Sends the stored document `id` on; false: stop.
  bool emit(Row& r) {
    x_.plan.node(node_).rows_out++;
    return first_->take(r);
  }
  ExecContext& x_;
  int node_;
  Stage* first_ = nullptr;
};

}  // namespace kitfox
