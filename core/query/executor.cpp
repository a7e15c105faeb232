// The executor: runs a bound statement. A read is planned (planner.cpp)
// into a pipeline of operators (ops/) and run; `explain` returns the plan
// instead, `explain analyze` runs it and returns the plan with what each
// operator did. A write builds every op first (ops/write.cpp,
// ops/define.cpp) and commits them as one record, so a failed statement
// changes nothing. Reads run under the shared lock, writes under the
// exclusive one (engine.cpp).
#include "../engine.h"
#include "binder.h"
#include "planner.h"

namespace kitfox {

namespace {
// A read whose sources sent on more documents than this ran long (Engine::may_run_long).
constexpr uint64_t kLongRead = 10000;
}  // namespace

// A long read runs pinned: one that scans a whole collection, or a near
// search that compares the query with every vector (exact, no candidates
// gathered). Under the shared lock it copies what it reads (pin_copy), lets
// the lock go and runs over the copy, so writers need not wait for it. It
// answers what it would have under the lock. Its lookups read copies of
// their collections made at the same time (through a @hash index: see
// live_equal). Reads an index answers are short and keep the lock
// (indexes change in place: a graph `near`, `match` and their kin, an
// exact near over the candidates an index gave); so do reads of a collection whose
// documents refer into a dropped index's or a lost table, and reads while
// a table's blocks are still to be checked.
bool Engine::pinnable(const Collection& c, const Plan& plan, const LookupPlan* lookup, const Field* exact_near,
                      bool limited) const {
  if (!port::kThreads) return false;  // no other thread to let in: the copy would be for nothing
  if (!plan.exact_over_all && !plan.has("scan")) return false;
  for (const char* op : {"near graph", "match", "fuse", "rerank"})
    if (plan.has(op)) return false;
  auto copyable = [](const Collection& k) {
    if (!k.retired.empty() || !k.lost_tables.empty()) return false;
    HnswIndex::ImageTable t;
    for (auto& [fid, index] : k.vindex)
      if (!index->image_table(&t)) return false;
    return true;
  };
  if (!copyable(c)) return false;
  if (exact_near) {  // the field of an exact near over every vector
    // Its index is copied but for the vectors in the last image: where that
    // copy would cost much of what the search does, it keeps the lock.
    auto it = c.vindex.find(exact_near->id);
    if (it != c.vindex.end() && !it->second->cheap_to_copy()) return false;
  }
  for (const LookupPlan* l = lookup; l; l = l->nested.get()) {
    if (!copyable(*l->child)) return false;
    // Through a @hash index, the read may fill one from its copy of the
    // collection (live_equal): where that could cost more than its scan (a
    // larger collection, or a limit that may end the scan early), it keeps
    // the lock.
    if (l->hashed() && (limited || l->child->ids.size() > c.ids.size())) return false;
  }
  return true;
}

// What a pinned read reads of c, under the shared lock: the collection's
// definition, its id index's blocks shared by reference, not copied, where
// each vector index's table lies in the last image (a document's
// reference into a vector table points into the part an image holds, which
// no write changes and the read's view of the arena keeps alive), and for
// an exact near, a copy of that field's index (HnswIndex::pinned_copy).
std::unique_ptr<Collection> Engine::pin_copy(const Collection& c, const Field* exact_near, bool child) const {
  auto snap = std::make_unique<Collection>();
  snap->def = c.def;
  // A pinned read builds no index (unlocked, it would read the live
  // documents); a lookup's child keeps the definitions, for its @hash index.
  if (!child) snap->def.secondary.clear();
  snap->changes = c.changes;
  snap->pinned_catalog = catalog_version_.load(std::memory_order_relaxed);
  snap->next_id = c.next_id;
  snap->ids.copy_from(c.ids);  // its blocks shared, not copied (id_index.h)
  snap->bytes = c.bytes;
  for (auto& [fid, index] : c.vindex) {
    if (exact_near && exact_near->id == fid) snap->vindex[fid] = index->pinned_copy();
    else index->image_table(&snap->pinned_tables[fid]);
  }
  return snap;
}

bool Engine::live_equal(const Collection& snap, size_t i, const Value& key, std::vector<int64_t>* ids,
                        LiveIndex* live) {
  if (lookup_hook) lookup_hook();
  std::shared_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) {  // a writer's turn to wait out
    if (live_wait_hook) live_wait_hook();
    if (++live->waits > live_waits) return false;
    lk.lock();
  }
  // The catalog as at the pin: the collection and the index found the first
  // time are still there (a drop or a definition changes it).
  if (catalog_version_.load(std::memory_order_relaxed) != snap.pinned_catalog) return false;
  if (!live->index) {
    auto it = by_id_.find(snap.def.id);
    if (it == by_id_.end()) return false;
    std::lock_guard g(it->second->sec_mu);
    if (i >= it->second->sindex.size() || !it->second->sindex[i]) return false;
    live->coll = it->second;
    live->index = it->second->sindex[i].get();
  }
  if (live->coll->changes != snap.changes) return false;
  live->index->equal(key, ids);
  return true;
}

Status Engine::execute_read(const Prepared& prep, Collection* c, const Params& params, QueryResult* out,
                            std::shared_lock<FairSharedMutex>* lock) {
  const ParsedStatement& st = prep.st;
  Evaluator ev(params);
  if (c && prep.point_id) {  // over the row out holds
    int64_t id = 0;
    switch (id_value(ev, *prep.point_id, &id)) {
      case 1: return read_point(*this, *c, st, ev, id, &out->rows);
      case 0: out->rows.clear(); return Status::ok();
      default: break;  // not an id: the plan answers
    }
  }
  out->rows.clear();
  QueryResult& res = *out;
  if (st.kind == StmtKind::Collections) {
    for (auto& [name, coll] : colls_) {
      Value r = Value::object();
      r.append("name", Value::text(name));
      r.append("documents", Value::integer((int64_t)coll->ids.size()));
      res.rows.push_back(std::move(r));
    }
    return Status::ok();
  }
  if (!c) return no_collection(st.collection, st.collection_pos);
  if (st.kind == StmtKind::Describe) {
    Value idr = Value::object();
    idr.append("field", Value::text("id"));
    idr.append("type", Value::text("int"));
    idr.append("required", Value::boolean(true));
    res.rows.push_back(std::move(idr));
    for (const Field& f : c->def.fields) {
      Value r = Value::object();
      r.append("field", Value::text(f.name));
      r.append("type", Value::text(type_name(f.type)));
      r.append("required", Value::boolean(f.required));
      std::string idx = f.index.kind != IndexKind::None ? index_name(f.index) : "";
      for (const SecondaryDef& d : c->def.secondary)
        if (d.field_id == f.id && d.subpath.empty()) idx += std::string(idx.empty() ? "" : ", ") + secondary_name(d.kind);
      if (!idx.empty()) r.append("index", Value::text(idx));
      res.rows.push_back(std::move(r));
    }
    for (const SecondaryDef& d : c->def.secondary) {
      if (d.subpath.empty()) continue;
      std::vector<std::string> p{c->def.field_by_id(d.field_id)->name};
      p.insert(p.end(), d.subpath.begin(), d.subpath.end());
      Value r = Value::object();
      r.append("field", Value::text(join(p)));
      r.append("type", Value::text("json path"));
      r.append("required", Value::boolean(false));
      r.append("index", Value::text(secondary_name(d.kind)));
      res.rows.push_back(std::move(r));
    }
    return Status::ok();
  }

  Plan plan(st.explain);
  ExecContext x(*this, *c, st, ev, plan, st.analyze);
  Pipeline p;
  KF_TRY(plan_get(x, &res.rows, &p));
  // It would have built an index: the caller builds it beside the lock and plans again.
  if (const auto* needs = DeferBuilds::current(); needs && !needs->empty()) return Status::ok();
  // Pinned: the same plan over a copy, with no lock held.
  std::unique_ptr<Collection> snap;
  std::map<std::string, std::unique_ptr<Collection>, std::less<>> snap_children;  // its lookups'
  Arena::View view;
  std::unique_ptr<Plan> plan2;
  std::unique_ptr<ExecContext> x2;
  Pipeline p2;
  const Field* exact_near = plan.exact_over_all ? c->def.field(st.near_field) : nullptr;
  if (port::kThreads && lock && !(st.explain && !st.analyze) &&
      pinnable(*c, plan, p.lookup.get(), exact_near, st.limit != nullptr)) {
    snap = pin_copy(*c, exact_near);
    for (const LookupPlan* l = p.lookup.get(); l; l = l->nested.get())
      if (!snap_children.count(l->child->def.name))
        snap_children[l->child->def.name] = pin_copy(*l->child, nullptr, true);
    view = arena_.view();
    lock->unlock();
    reads_pinned_.fetch_add(1, std::memory_order_relaxed);
    if (pinned_hook) pinned_hook();
    plan2 = std::make_unique<Plan>(st.explain);
    x2 = std::make_unique<ExecContext>(*this, *snap, st, ev, *plan2, st.analyze);
    x2->pinned = &view;
    x2->pinned_colls = &snap_children;
    KF_TRY(plan_get(*x2, &res.rows, &p2));
  }
  Plan& used = plan2 ? *plan2 : plan;
  // How it ran, for may_run_long, which judges the next run by it.
  auto note = [&](bool ran_long) {
    const uint64_t v = catalog_version_.load(std::memory_order_relaxed) << 1 | ran_long;
    if (prep.ran.load(std::memory_order_relaxed) != v) prep.ran.store(v, std::memory_order_relaxed);
  };
  if (st.explain && !st.analyze) {
    res.rows.clear();
    plan.explain(false, &res.rows);
    note(plan.source_rows() > kLongRead);  // planned, not run: its lookup's ids gathered (the first may have built an index)
    return Status::ok();
  }
  uint64_t t0 = st.analyze ? ExecContext::now_ns() : 0;
  Status ran = plan2 ? p2.run() : p.run();
  if (snap)  // an exact near's index copy: its arrays kept for this thread's next
    for (auto& [fid, index] : snap->vindex) HnswIndex::keep_copy(std::move(index));
  // Long when it scanned, searched vectors exactly or went through many
  // documents (a walk, a range or a lookup over most of a collection).
  note(used.has("scan") || used.has("near exact") || used.source_rows() > kLongRead);
  KF_TRY(ran);
  if (!st.analyze) return Status::ok();
  const size_t n = res.rows.size();
  res.rows.clear();
  used.explain(true, &res.rows);
  Value last = Value::object();
  last.append("rows", Value::integer((int64_t)n));
  last.append("ms", Value::real((double)(ExecContext::now_ns() - t0) / 1e6));
  res.rows.push_back(std::move(last));
  return Status::ok();
}

Status Engine::prepare_write(const ParsedStatement& st, const Params& params,
                             PreparedDocs* docs) {
  if (st.kind != StmtKind::Put && st.kind != StmtKind::Insert) return Status::ok();
  Collection* c = find(st.collection);
  if (!c) return no_collection(st.collection, st.collection_pos);
  Evaluator ev(params);
  KF_TRY(prepare_documents(*this, *c, st, ev, docs));
  docs->coll = c;
  return Status::ok();
}

uint64_t Engine::vector_lookups(const ParsedStatement& st, const Params& params) {
  constexpr uint64_t kEach = 4, kUnknown = UINT64_MAX;
  switch (st.kind) {
    case StmtKind::Put:
    case StmtKind::Insert: {
      const Expr& b = *st.body;
      if (b.kind == ExprKind::Param) {
        std::string_view given = params.encoded(b.param);
        if (!given.empty()) {  // documents left encoded: a list's count is in its head
          Reader r(given);
          return kEach * (r.u8() == kList ? r.varint() : 1);
        }
        const Value* v = Evaluator(params).ref(b);
        return kEach * (v && v->kind() == Kind::List ? v->items().size() : 1);
      }
      return kEach * (b.parts && !b.parts->item.empty() ? b.parts->item.size() : 1);  // a list's items, or one
    }
    case StmtKind::Set:
    case StmtKind::Del: {
      const int64_t n = names_ids(st.where.get()) ? ids_named(Evaluator(params), st.where.get()) : -1;
      return n < 0 ? kUnknown : kEach * (uint64_t)n;
    }
    default:
      return kUnknown;
  }
}

Status Engine::ready_indexes(Prepared& p, const Params& params, uint64_t lookups,
                             std::shared_lock<FairSharedMutex>& lk) {
  if constexpr (!port::kThreads) return Status::ok();
  const ParsedStatement& st = p.st;
  // What it could build: the @unique indexes a put, insert or set checks;
  // what a read plans (for a where, an order, a group, a match or a
  // lookup), or a set or del not by id. Nothing else looks at a text or
  // secondary index (a write's hot path locks no index's mutex).
  const bool checks_unique = st.kind == StmtKind::Put || st.kind == StmtKind::Insert || st.kind == StmtKind::Set;
  const bool plans =
      (st.kind == StmtKind::Get &&
       (st.where || !st.order.empty() || !st.group.empty() || !st.match_field.empty() || st.lookup)) ||
      ((st.kind == StmtKind::Set || st.kind == StmtKind::Del) && st.where && !names_ids(st.where.get()));
  const Collection* mapped = nullptr;  // its lookups reserved once (again only in another collection)
  for (int tries = 0;; tries++) {
    if (needs_maps(st) && (tries == 0 || p.collection != mapped)) {
      KF_TRY(ready_maps(p, lookups, lk));
      mapped = p.collection;
    }
    Collection* c = p.collection;
    // Definitions racing it round after round: built where planned.
    if (!c || tries >= kBuildTries || (!checks_unique && !plans)) return Status::ok();
    std::vector<IndexNeed> needs;
    if (checks_unique)
      for (uint32_t i = 0; i < c->def.secondary.size(); i++)
        if (c->def.secondary[i].kind == IndexKind::Unique && unbuilt(*c, {c->def.id, IndexNeed::Secondary, i}))
          needs.push_back({c->def.id, IndexNeed::Secondary, i});
    // Its lookups' collections too: a @hash index a lookup goes through.
    auto unbuilt_below = [&] {
      for (const Lookup* l = st.lookup.get(); l; l = l->child ? l->child->lookup.get() : nullptr)
        if (Collection* cc = find(l->collection); cc && any_unbuilt(*cc)) return true;
      return false;
    };
    if (plans && (any_unbuilt(*c) || unbuilt_below())) {  // planned as it will be, building nothing
      DeferBuilds defer(&needs);
      Evaluator ev(params);
      Plan plan(false);
      ExecContext x(*this, *c, st, ev, plan, false);
      Pipeline pipe;
      std::vector<Value> rows;
      if (st.kind == StmtKind::Get) (void)plan_get(x, &rows, &pipe);
      else plan_where(x, &pipe);
    }
    if (needs.empty()) return Status::ok();
    build_needs(needs, &tries, lk);
    KF_TRY(bound(p));
  }
}

Status Engine::execute_write(const ParsedStatement& st, const Params& params,
                             PreparedDocs* docs, WriteBatch* batch, QueryResult* out) {
  Evaluator ev(params);
  out->rows.clear();
  switch (st.kind) {
    case StmtKind::Put:
    case StmtKind::Insert:
    case StmtKind::Set:
    case StmtKind::Del: {
      Collection* c = docs && docs->ready && docs->coll ? docs->coll : find(st.collection);
      if (!c) return no_collection(st.collection, st.collection_pos);
      return write_documents(*this, *c, st, ev, docs, batch, out);
    }
    default:
      return define(*this, st, batch);
  }
}

}  // namespace kitfox
