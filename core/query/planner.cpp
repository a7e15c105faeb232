#include "planner.h"

#include <cmath>

namespace kitfox {

namespace {

// Where the documents a where clause selects come from.
struct Access {
  enum class Kind { Scan, Ids, Index } kind = Kind::Scan;
  std::vector<int64_t> ids;  // Ids: exactly the matches; Index: a superset
  std::string detail;        // Index: what explain shows
};

// `not_range`: a path whose ranges a sorted walk would take as its bounds.
Access choose_access(ExecContext& x, const std::vector<std::string>* not_range = nullptr) {
  Access a;
  const Expr* where = x.st.where.get();
  if (id_lookup(x.ev, where, &a.ids)) {
    a.kind = Access::Kind::Ids;
  } else if (index_candidates(x.eng, x.c, x.ev, where, &a.ids, nullptr, x.plan.describe() ? &a.detail : nullptr,
                              not_range)) {
    a.kind = Access::Kind::Index;
  }
  return a;
}

// The source of an access path and, unless it is exact, the filter.
int add_access(ExecContext& x, Access a, Pipeline* p) {
  int node = -1;
  switch (a.kind) {
    case Access::Kind::Ids:
      node = plan_id_lookup(x.plan, a.ids.size());
      x.plan.node(node).gathered = a.ids.size();
      p->source = make_ids(x, node, std::move(a.ids));
      return node;  // the lookup is the whole clause: nothing to test
    case Access::Kind::Index:
      node = plan_index_lookup(x.plan, std::move(a.detail));
      x.plan.node(node).gathered = a.ids.size();
      p->source = make_ids(x, node, std::move(a.ids));
      break;
    case Access::Kind::Scan:
      node = plan_scan(x.plan, x.c);
      p->source = make_scan(x, node);
      break;
  }
  if (!x.st.where) return node;
  node = plan_filter(x.plan, *x.st.where, node);
  p->add(make_filter(x, node, x.st.where.get()));
  return node;
}

// A near search's way, by cost in documents tested. Testing a candidate
// costs about what visiting a graph node does. Exact: the candidates an
// index (or an id lookup) gives for the filter, else every document. The
// walk: testing the filter on the nodes it visits, about ef / (fraction
// passing) of them, the fraction estimated from a sample of the graph's
// nodes. That estimate assumes the filter is independent of the vectors:
// one that follows them (matches near the query) needs fewer nodes, one
// against them (matches far away) many more, up to every match and its
// neighbours. So an index's candidates are searched exactly when there are
// few of them, or not many more than twice the walk's estimate: the exact
// cost is known, the walk's is not.
Status choose_near(ExecContext& x, NearQuery* nq, std::string* why, std::string* access) {
  const ParsedStatement& st = x.st;
  HnswIndex* index = nq->index;
  auto narrow = [&] {
    Access a = choose_access(x);
    if (a.kind == Access::Kind::Scan) return;
    nq->narrowed = true;
    nq->cand = std::move(a.ids);
    if (x.plan.describe())
      *access = a.kind == Access::Kind::Ids ? "id lookup: " + std::to_string(nq->cand.size()) + " ids" : a.detail;
  };
  // How it goes decided, whether it reads every vector. A pinned read
  // (Engine::pinnable) chose exact under the lock over what its copy holds,
  // and chooses so again here; its index's copy has no graph to search.
  auto decided = [&] {
    if (x.pinned) nq->how = NearQuery::How::Exact;
    x.plan.exact_over_all = nq->how == NearQuery::How::Exact && !nq->narrowed;
    return Status::ok();
  };
  if (!index || !st.where || st.near_exact) {
    nq->how = index && !st.where && !st.near_exact ? NearQuery::How::Graph : NearQuery::How::Exact;
    if (st.where) narrow();
    if (st.where && x.plan.describe()) *why = "over the documents passing the filter";
    return decided();
  }
  narrow();
  RowFilter filter(x.ev, st.where.get(), x.c);
  size_t nodes = index->nodes(), sample = std::min<size_t>(nodes, 256), pass = 0, seen = 0;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < sample; i++) {
    ids.clear();
    index->docs_of((uint32_t)(i * nodes / sample), &ids);
    if (ids.empty()) continue;
    const uint64_t* loc = x.c.ids.find(ids[0]);
    if (!loc) continue;
    seen++;
    bool ok;
    KF_TRY(filter.test(ids[0], x.body(*loc), &ok));
    pass += ok;
  }
  double docs = (double)index->documents();
  double est = seen ? (double)pass / (double)seen * docs : 0;
  if (nq->narrowed) est = std::min(est, (double)nq->cand.size());
  size_t need = nq->need;
  double graph_cost = pass ? (double)std::max<size_t>(nq->ef, need) * docs / std::max(est, 1.0) : INFINITY;
  double exact_cost = (double)(nq->narrowed ? nq->cand.size() : x.c.ids.size());
  if (nq->narrowed && (exact_cost <= std::max<double>(4.0 * (double)need, 1000.0) || exact_cost <= 2 * graph_cost))
    exact_cost = 0;
  nq->how = exact_cost <= graph_cost ? NearQuery::How::Exact : NearQuery::How::Graph;
  if (x.plan.describe()) {
    *why = "about " + std::to_string((int64_t)est) + " documents pass the filter: ";
    if (nq->how == NearQuery::How::Graph) *why += "testing the filter on the nodes it visits";
    else *why += nq->narrowed ? "exact over the " + counted_text(nq->cand.size(), "candidate") : "exact over them";
  }
  return decided();
}

// The nodes of a lookup's child clauses, and of its own lookup.
Status plan_lookup_child(ExecContext& x, const Lookup& lk, LookupPlan* lp) {
  Engine& eng = x.eng;
  lp->lk = &lk;
  if (x.pinned_colls) {  // pinned: the copy made with the parent's (executor.cpp)
    auto it = x.pinned_colls->find(lk.collection);
    lp->child = it == x.pinned_colls->end() ? nullptr : it->second.get();
  } else {
    lp->child = eng.find(lk.collection);
  }
  if (!lp->child) return no_collection(lk.collection, lk.pos);
  Collection& cc = *lp->child;
  if (lp->hashed()) {
    int i = find_secondary(cc, {lk.child_field}, false);
    if (i < 0)
      return Status(Code::Invalid, "lookup on '" + lk.collection + "." + lk.child_field +
                                       "' needs it to be id or to carry @hash (create index on " + lk.collection + " (" +
                                       lk.child_field + ") @hash)", lk.child_pos);
    // A pinned read's copy: read through the live index while it answers
    // for the copy, else filled from it (LookupStage), never built here.
    if (x.pinned) {
      lp->pinned_index = i;
    } else {
      KF_ASSIGN(lp->index, eng.secondary(cc, (size_t)i));
    }
  }
  const ParsedStatement& cs = *lk.child;
  KF_ASSIGN(int64_t limit, count_arg(x.ev, cs.limit, "limit"));
  KF_ASSIGN(int64_t offset, count_arg(x.ev, cs.offset, "offset"));
  lp->offset = offset < 0 ? 0 : offset;
  lp->count = limit;
  Plan& plan = x.plan;
  int node = lp->source = plan.add(lp->hashed() ? "index lookup" : "id lookup");
  if (plan.describe())
    plan.node(node).detail = lp->hashed() ? lk.collection + "." + lk.child_field + " (@hash): equality, per parent row"
                                       : "the parent's " + join(lk.parent_path) + ", per parent row";
  if (cs.where) node = lp->filter = plan_filter(plan, *cs.where, node);
  if (!cs.order.empty()) node = lp->sort = plan_sort(plan, cs.order, -1, node);
  auto nested_lookup = [&] {
    lp->nested->node = plan_lookup(plan, *lp->nested, node);
    node = lp->nested->node;
  };
  if (cs.lookup) {
    lp->nested = std::make_unique<LookupPlan>();
    ExecContext cx(eng, cc, cs, x.ev, plan, x.analyze);
    cx.pinned = x.pinned;
    cx.pinned_colls = x.pinned_colls;
    KF_TRY(plan_lookup_child(cx, *cs.lookup, lp->nested.get()));
    if (cs.lookup->required) nested_lookup();
  }
  if (limit >= 0 || offset > 0) node = lp->limit = plan_limit(plan, lp->offset, limit, node);
  if (cs.lookup && !cs.lookup->required) nested_lookup();
  lp->project = plan_project(plan, cs, node);
  return Status::ok();
}

// The end of every row-returning plan: its lookup (before the limit when
// `required` may drop parents), the limit, the projection.
Status finish_rows(ExecContext& x, int node, int64_t offset, int64_t limit, ProjectAdds adds, std::vector<Value>* out,
                   Pipeline* p, std::unique_ptr<LookupPlan>* lookup) {
  const ParsedStatement& st = x.st;
  bool required = st.lookup && st.lookup->required;
  auto add_lookup = [&]() -> Status {
    *lookup = std::make_unique<LookupPlan>();
    KF_TRY(plan_lookup_child(x, *st.lookup, lookup->get()));
    node = (*lookup)->node = plan_lookup(x.plan, **lookup, node);
    p->add(make_lookup(x, node, **lookup));
    return Status::ok();
  };
  if (required) KF_TRY(add_lookup());
  if (limit >= 0 || offset > 0) {
    node = plan_limit(x.plan, offset, limit, node);
    p->add(make_limit(x, node, offset, limit));
  }
  if (st.lookup && !required) KF_TRY(add_lookup());
  node = plan_project(x.plan, st, node);
  p->add(make_project(x, node, out, adds));
  return Status::ok();
}

}  // namespace

int plan_where(ExecContext& x, Pipeline* p) { return add_access(x, choose_access(x), p); }

Status plan_get(ExecContext& x, std::vector<Value>* out, Pipeline* p) {
  const ParsedStatement& st = x.st;
  Engine& eng = x.eng;
  Collection& c = x.c;
  Plan& plan = x.plan;
  const Evaluator& ev = x.ev;
  KF_ASSIGN(int64_t limit, count_arg(ev, st.limit, "limit"));
  KF_ASSIGN(int64_t offset, count_arg(ev, st.offset, "offset"));
  if (offset < 0) offset = 0;
  p->lookup.reset();

  bool aggregate = !st.group.empty();
  for (const SelectItem& si : st.select) aggregate |= si.expr && si.expr->kind == ExprKind::Aggregate;
  for (const OrderKey& k : st.order) aggregate |= k.expr && k.expr->kind == ExprKind::Aggregate;
  if (aggregate) {
    if (st.near_pos >= 0 || st.match_pos >= 0 || st.count)
      return Status(Code::Syntax, "aggregates and group cannot be combined with near, match or count", st.pos);
    if (st.lookup) return Status(Code::Syntax, "'lookup' needs rows with ids (not aggregates)", st.lookup->pos);
    KF_ASSIGN(auto g, resolve_grouping(st, c.def, ev, offset, limit));
    const std::vector<std::string>* path;
    if (grouping_counts_only(*g, &path)) {
      int si = find_secondary(c, *path, false);
      if (si >= 0) {
        auto idx = eng.secondary(c, (size_t)si);
        if (idx.is_ok()) {
          int node = plan_group_from_index(plan, c, *path, si);
          p->source = make_group_from_index(x, node, std::move(g), *idx, *path, out);
          return Status::ok();
        }
      }
    }
    int node = plan_aggregate(plan, st, plan_where(x, p));
    p->add(make_aggregate(x, node, std::move(g), out));
    return Status::ok();
  }

  if (st.count) {  // one row, the number of documents the where takes: no clause shapes rows
    int64_t at = st.match_pos >= 0     ? st.match_pos
                 : st.near_pos >= 0    ? st.near_pos
                 : !st.select.empty()  ? st.select[0].pos
                 : !st.order.empty()   ? st.order[0].pos
                 : st.limit            ? st.limit->pos
                 : st.offset           ? st.offset->pos
                 : st.lookup           ? st.lookup->pos
                                       : -1;
    if (at >= 0) return Status(Code::Syntax, "'count' takes only 'where' (not select, order, limit, offset, near, match or lookup)", at);
  }
  if (st.match_pos < 0 && (st.fuse || st.rerank_pos >= 0))
    return Status(Code::Syntax, std::string(st.fuse ? "'fuse'" : "'rerank'") + " needs 'match'", st.fuse ? st.fuse_pos : st.rerank_pos);
  // The rows a near or match gives before its offset and limit: never more
  // than the collection holds (a limit of 2^62 reserves nothing), reckoned
  // in 64 bits before any size_t, which holds 32 in WASM.
  const size_t need = (size_t)std::min<uint64_t>((uint64_t)offset + (uint64_t)(limit < 0 ? 10 : limit), c.ids.size());
  if (st.match_pos >= 0) {
    MatchQuery mq;
    KF_TRY(resolve_match(eng, c, st, ev, need, &mq));
    std::unique_ptr<NearQuery> nq;
    int input = -1;
    if (st.fuse) {
      const size_t n = mq.candidates < 0 ? std::max<size_t>(100, need)
                                         : std::max<size_t>((size_t)std::min<uint64_t>((uint64_t)mq.candidates, c.ids.size()), need);
      nq = std::make_unique<NearQuery>();
      KF_TRY(resolve_near(c, st, ev, n, nq.get()));
      std::string why, access;
      KF_TRY(choose_near(x, nq.get(), &why, &access));
      input = plan_near(plan, c, *nq, why);
    }
    int node = plan_match(plan, c, st, mq, input);
    bool rerank = mq.rerank != nullptr;
    p->source = make_match(x, node, std::move(mq), std::move(nq));
    return finish_rows(x, node, offset, limit < 0 ? 10 : limit, {true, rerank}, out, p, &p->lookup);
  }
  if (st.near_pos >= 0) {
    if (!st.order.empty())
      return Status(Code::Syntax, "'near' orders rows by distance; it cannot be combined with 'order'", st.order[0].pos);
    NearQuery nq;
    KF_TRY(resolve_near(c, st, ev, need, &nq));
    std::string why, access;
    KF_TRY(choose_near(x, &nq, &why, &access));
    if (!access.empty()) why = access + "; " + why;
    int node = plan_near(plan, c, nq, why);
    p->source = make_near(x, node, std::move(nq));
    return finish_rows(x, node, offset, limit < 0 ? 10 : limit, {false, true}, out, p, &p->lookup);
  }

  if (st.count) {
    int64_t n = 0;
    std::string why;
    if (!st.where) {
      n = (int64_t)c.ids.size();
      why = "the collection's size";
    }
    if (!st.where || index_count(eng, c, ev, st.where.get(), &n, plan.describe() ? &why : nullptr)) {
      int node = plan_known_count(plan, why);
      p->source = make_known_count(x, node, n, out);
      return Status::ok();
    }
    int node = plan_count(plan, plan_where(x, p));
    p->add(make_count(x, node, out));
    return Status::ok();
  }

  bool required = st.lookup && st.lookup->required;
  // Ordered by one field with a @sorted index: walk the index in order (equal
  // keys by ascending id, as the sort gives), filter, stop at the limit; over
  // the keys in the range the where puts on that field, if it puts one.
  // Unless the where takes few candidates from an id lookup or another index:
  // the walk reads about want x N / candidates documents before it has `want`
  // rows (when the filter is independent of the order), sorting reads the
  // candidates once, so candidates^2 < want x N sorts them instead. The range
  // on the order's field is the walk's own: not gathered as candidates.
  Access access;
  bool chosen = false;
  if (st.order.size() == 1 && !st.order[0].expr) {
    int si = find_secondary(c, st.order[0].path, true);
    KeyRange range;
    if (si >= 0 && st.where) {
      std::vector<const Expr*> conj;
      conjuncts(st.where.get(), &conj);
      key_range(c, x.ev, conj, st.order[0].path, &range);
      access = choose_access(x, &st.order[0].path);
      chosen = true;
      double n = (double)c.ids.size(), k = (double)access.ids.size();
      double want = limit < 0 || required ? n : (double)offset + (double)limit;  // (each may be 2^63 - 1)
      if (access.kind != Access::Kind::Scan && k * k < want * n) si = -1;
    }
    if (si >= 0) {
      KF_ASSIGN(SecondaryIndex * idx, eng.secondary(c, (size_t)si));
      int node = plan_sorted_walk(plan, c, st.order[0], &range);
      p->source = make_sorted_walk(x, node, idx, st.order[0].desc, std::move(range));
      if (st.where) {
        node = plan_filter(plan, *st.where, node);
        p->add(make_filter(x, node, st.where.get()));
      }
      return finish_rows(x, node, offset, limit, {}, out, p, &p->lookup);
    }
  }
  int node = add_access(x, chosen ? std::move(access) : choose_access(x), p);
  if (!st.order.empty()) {
    int64_t want = limit < 0 || required ? -1 : limit > INT64_MAX - offset ? INT64_MAX : offset + limit;
    node = plan_sort(plan, st.order, want, node);
    p->add(make_sort(x, node, st.order, want));
  }
  return finish_rows(x, node, offset, limit, {}, out, p, &p->lookup);
}

}  // namespace kitfox
