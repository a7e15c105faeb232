// The operators the planner builds plans from, one file each:
//
//   sources   scan.cpp, id_lookup.cpp, index_lookup.cpp, sorted_walk.cpp,
//             near.cpp, match.cpp (match, fuse, rerank), aggregate.cpp
//             (group from index), count.cpp (count from index)
//   stages    filter.cpp, sort.cpp (sort, top-k), limit.cpp, lookup.cpp,
//             project.cpp, aggregate.cpp, count.cpp
//   writes    write.cpp (put, insert, set, del), define.cpp (collections,
//             fields, indexes)
//
// Each has a plan_X (adds its node to a Plan, with the detail explain
// shows) and a make_X (the operator that runs it).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../index/hnsw.h"
#include "../../index/secondary.h"
#include "../binder.h"
#include "operator.h"

namespace kitfox {

class TextIndex;

// ---- scan, id lookup, index lookup, sorted walk
int plan_scan(Plan& plan, const Collection& c);
std::unique_ptr<Source> make_scan(ExecContext& x, int node);

// The ids a where clause pins down exactly (id = c, id in [...]), if any.
bool id_lookup(const Evaluator& ev, const Expr* where, std::vector<int64_t>* ids);
// Whether a where clause has that form (its values not looked at).
bool names_ids(const Expr* where);
// Of a where clause of that form, how many ids its values give (a list's
// items, duplicates counted), or -1 when they are no integer ids (its plan
// then scans); null names none (0).
int64_t ids_named(const Evaluator& ev, const Expr* where);
int plan_id_lookup(Plan& plan, size_t n);
// `get C where id = X` and nothing else: X (null for any other statement).
// id_value gives the id X holds: 1 with *id set, 0 when X is null (no
// document), -1 when it is no integral number (then the plan answers).
// read_point then answers it with no pipeline (id_lookup.cpp): *rows
// becomes the one row, written over the first row it held (a statement run
// again into one result reuses its storage), or none.
const Expr* point_read(const ParsedStatement& st);
int id_value(const Evaluator& ev, const Expr& x, int64_t* id);
// The id an integral number names (an int, or a float such as 2.0, as
// `id = 2.0` compares): false for any other value.
bool id_of(const Value& v, int64_t* id);
Status read_point(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev, int64_t id,
                  std::vector<Value>* rows);
// Rows for a list of ids, in its order (missing ones skipped).
std::unique_ptr<Source> make_ids(ExecContext& x, int node, std::vector<int64_t> ids);

// The secondary index of collection c on `path` (field plus json keys), of
// an acceptable kind, or -1.
int find_secondary(const Collection& c, const std::vector<std::string>& path, bool need_sorted);
// Candidate ids from a secondary index for one of the where clause's
// conjuncts: a superset of the matches (the whole clause is still tested
// on each), so the answer is exactly the scan's. With `count`, a range only
// counts its candidates (*count; ids stays empty); other candidates are
// collected, and *count is their number. `detail`: what explain shows.
// `not_range`: a path whose ranges give no candidates (a sorted walk on it
// takes them as its bounds).
bool index_candidates(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, std::vector<int64_t>* ids,
                      size_t* count, std::string* detail, const std::vector<std::string>* not_range = nullptr);
// The top-level conjuncts of a where clause (its `and`s flattened).
void conjuncts(const Expr* where, std::vector<const Expr*>* out);
// The bounds conjuncts put on `path` (`path < c`, `c <= path`, ...; the
// first lower and the first upper, as the index holds the constants);
// false when none does.
struct KeyRange {
  Value lo, hi;
  bool has_lo = false, has_hi = false, lo_incl = false, hi_incl = false;
};
bool key_range(const Collection& c, const Evaluator& ev, const std::vector<const Expr*>& conj,
               const std::vector<std::string>& path, KeyRange* r);
// The count of a where clause an index answers exactly (see the comment there).
bool index_count(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, int64_t* n, std::string* detail);
int plan_index_lookup(Plan& plan, std::string detail);

// `range` (may be null): only the keys in it, walked from the end the order starts at.
int plan_sorted_walk(Plan& plan, const Collection& c, const OrderKey& k, const KeyRange* range);
std::unique_ptr<Source> make_sorted_walk(ExecContext& x, int node, SecondaryIndex* idx, bool desc, KeyRange range);

// ---- filter, sort, limit, project
int plan_filter(Plan& plan, const Expr& where, int input);
std::unique_ptr<Stage> make_filter(ExecContext& x, int node, const Expr* where);

// want >= 0: only the first `want` rows are wanted (top-k).
int plan_sort(Plan& plan, const std::vector<OrderKey>& keys, int64_t want, int input);
std::unique_ptr<Stage> make_sort(ExecContext& x, int node, const std::vector<OrderKey>& keys, int64_t want);

int plan_limit(Plan& plan, int64_t offset, int64_t limit, int input);
std::unique_ptr<Stage> make_limit(ExecContext& x, int node, int64_t offset, int64_t limit);

// What a search adds to each row.
struct ProjectAdds {
  bool score = false;     // _score
  bool distance = false;  // _distance
};
Value project_row(const ParsedStatement& st, Value doc, const Evaluator& ev, Status* err);
// `select id` alone (a common shape for a search): its rows need no document read.
bool selects_id_only(const ParsedStatement& st);
int plan_project(Plan& plan, const ParsedStatement& st, int input);
std::unique_ptr<Stage> make_project(ExecContext& x, int node, std::vector<Value>* out, ProjectAdds adds);

// ---- near
struct DocHit {
  float distance;
  int64_t id;
  bool operator<(const DocHit& o) const { return distance < o.distance || (distance == o.distance && id < o.id); }
};

// The distance shown to users: cosine 1 - cos, l2 Euclidean, dot -a.b. It is
// a float; shown as the double with the float's shortest decimal form (0.1,
// not 0.10000000149011612).
double shown_distance(Metric m, float d);

// A near search, resolved (resolve_near) and planned (planner.cpp, choose_near).
struct NearQuery {
  const Field* field = nullptr;
  HnswIndex* index = nullptr;               // the field's, if it has one
  std::unique_ptr<HnswIndex> unindexed;     // else an index's shape (prepares vectors)
  HnswIndex& shape() { return index ? *index : *unindexed; }
  Metric metric = Metric::Cosine;
  std::vector<float> q;  // the query vector, prepared
  size_t ef = 0, need = 0;
  enum class How { Graph, Exact } how = How::Exact;
  bool narrowed = false;        // the filter's candidates are `cand` (an index or an id lookup gave them)
  std::vector<int64_t> cand;
  bool fell_back = false;       // the filtered walk found too few: exact over the filtered
};
Status resolve_near(Collection& c, const ParsedStatement& st, const Evaluator& ev, size_t need, NearQuery* nq);
// The `need` nearest documents passing the where clause, nearest first.
Status near_hits(ExecContext& x, NearQuery& nq, std::vector<DocHit>* out);
int plan_near(Plan& plan, const Collection& c, const NearQuery& nq, std::string why);
std::unique_ptr<Source> make_near(ExecContext& x, int node, NearQuery nq);

// ---- match, fuse, rerank
struct MatchQuery {
  const Field* field = nullptr;
  TextIndex* index = nullptr;
  std::vector<std::string> tokens;
  size_t need = 0;
  int64_t candidates = -1;
  double k = 60;  // fuse
  const Field* rerank = nullptr;
  std::unique_ptr<HnswIndex> shape;  // rerank: prepares the vectors
  std::vector<float> rq;
  Metric metric = Metric::Cosine;
};
Status resolve_match(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev, size_t need,
                     MatchQuery* mq);
int plan_match(Plan& plan, const Collection& c, const ParsedStatement& st, const MatchQuery& mq, int input);
// nq: fuse's near search (null: no fuse).
std::unique_ptr<Source> make_match(ExecContext& x, int node, MatchQuery mq, std::unique_ptr<NearQuery> nq);

// ---- lookup
struct LookupPlan {
  const Lookup* lk = nullptr;
  Collection* child = nullptr;
  SecondaryIndex* index = nullptr;  // on child_field (none: by id, or pinned below)
  // A pinned read's lookup through a @hash index: the index's place in the
  // child copy's definitions (Engine::live_equal), and the index filled
  // from the copy once the live one no longer answers for it (-1: none).
  int pinned_index = -1;
  mutable Engine::LiveIndex live;
  mutable std::unique_ptr<SecondaryIndex> own;
  // Through a @hash index on child_field (not by id).
  bool hashed() const { return lk->child_field != "id"; }
  // The child clauses' nodes (-1: none).
  int source = -1, filter = -1, sort = -1, limit = -1, project = -1, node = -1;
  int64_t offset = 0, count = -1;
  std::unique_ptr<LookupPlan> nested;
};
int plan_lookup(Plan& plan, const LookupPlan& lp, int input);

// The pipeline the planner made: a source and its stages, in order.
struct Pipeline {
  std::unique_ptr<Source> source;
  std::unique_ptr<LookupPlan> lookup;  // what a lookup stage runs
  void add(std::unique_ptr<Stage> s) {
    if (n_) stages_[n_ - 1]->then(s.get());
    stages_[n_++] = std::move(s);
  }
  Status run() { return source->run(n_ ? stages_[0].get() : nullptr); }

 private:
  std::unique_ptr<Stage> stages_[8];  // filter, sort, lookup, limit, lookup, project: never more
  size_t n_ = 0;
};
std::unique_ptr<Stage> make_lookup(ExecContext& x, int node, const LookupPlan& lp);

// ---- aggregate, count
class Grouping;
struct GroupingFree {
  void operator()(Grouping* g) const;
};
using GroupingPtr = std::unique_ptr<Grouping, GroupingFree>;
Result<GroupingPtr> resolve_grouping(const ParsedStatement& st, const CollectionDef& def,
                                                   const Evaluator& ev, int64_t offset, int64_t limit);
// A grouping of counts over one path (which an index may answer).
bool grouping_counts_only(const Grouping& g, const std::vector<std::string>** path);
int plan_aggregate(Plan& plan, const ParsedStatement& st, int input);
int plan_group_from_index(Plan& plan, const Collection& c, const std::vector<std::string>& path, int si);
std::unique_ptr<Stage> make_aggregate(ExecContext& x, int node, GroupingPtr g, std::vector<Value>* out);
std::unique_ptr<Source> make_group_from_index(ExecContext& x, int node, GroupingPtr g, SecondaryIndex* idx,
                                              const std::vector<std::string>& path, std::vector<Value>* out);

int plan_count(Plan& plan, int input);
int plan_known_count(Plan& plan, const std::string& why);
std::unique_ptr<Stage> make_count(ExecContext& x, int node, std::vector<Value>* out);
std::unique_ptr<Source> make_known_count(ExecContext& x, int node, int64_t n, std::vector<Value>* out);

// ---- writes
// Collections, fields and indexes: the op of the change into *batch, or an
// answer without one (`if not exists` and the like): the batch stays empty.
Status define(Engine& eng, const ParsedStatement& st, WriteBatch* batch);
// PreparedDocs (engine.h): the documents of a put or insert, made before the write lock.
Status prepare_documents(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev,
                         PreparedDocs* out);
// Their ids decided and their ops into *batch; the caller makes their rows
// once the write lock is let go (PreparedDocs::landed_rows).
Status land_documents(Engine& eng, Collection& c, const ParsedStatement& st, PreparedDocs& docs, WriteBatch* batch);
// put, insert, set, del: the ops of the write into *batch, and its result rows. `docs`: a put's or insert's
// documents, prepared already (or null); for those the caller makes the
// rows after the write lock (landed_rows). Set and del find their documents
// through the access path the planner picks for the where clause.
Status write_documents(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev,
                       PreparedDocs* docs, WriteBatch* batch, QueryResult* res);

}  // namespace kitfox
