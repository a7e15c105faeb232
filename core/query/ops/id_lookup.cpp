// id lookup: the documents a where clause names by id (`id = c`, `id in
// [...]`), and the source every list of ids uses (an index's candidates).
#include "ops.h"

namespace kitfox {

namespace {

bool is_id(const Expr& x) { return x.kind == ExprKind::Path && x.path.size() == 1 && x.path[0] == "id"; }

// `id = c` (either way round): c, or null when the clause is not of that form.
const Expr* id_operand(const Expr* w) {
  if (w->kind != ExprKind::Compare || w->op != CmpOp::Eq) return nullptr;
  const Expr* other = is_id(*w->kids[0]) ? w->kids[1].get() : is_id(*w->kids[1]) ? w->kids[0].get() : nullptr;
  return other && other->kind != ExprKind::Path ? other : nullptr;
}

// `id in c` (c not a path): c, or null when the clause is not of that form.
const Expr* id_list_operand(const Expr* w) {
  return w->kind == ExprKind::In && !w->negate && is_id(*w->kids[0]) && w->kids[1]->kind != ExprKind::Path
             ? w->kids[1].get()
             : nullptr;
}

// `id = c`: 1 with the id in *id, 0 when c is null (no document), -1 when
// the clause is not of that form or c is not an integral number.
int id_equal(const Evaluator& ev, const Expr* w, int64_t* id) {
  const Expr* other = id_operand(w);
  return other ? id_value(ev, *other, id) : -1;
}

}  // namespace

int id_value(const Evaluator& ev, const Expr& x, int64_t* id) {
  const Value* v = ev.ref(x);
  if (v && v->kind() == Kind::Int) {  // a parameter, as a prepared read has it
    *id = v->as_int();
    return 1;
  }
  Value tmp;
  if (!v) {
    if (!ev.constant(x, &tmp).is_ok()) return -1;
    v = &tmp;
  }
  if (v->is_null()) return 0;
  return id_of(*v, id) ? 1 : -1;
}

bool id_of(const Value& v, int64_t* id) {
  if (v.kind() == Kind::Int) {
    *id = v.as_int();
    return true;
  }
  if (v.kind() == Kind::Float && v.as_float() == std::floor(v.as_float()) && std::fabs(v.as_float()) < 9e18) {
    *id = (int64_t)v.as_float();
    return true;
  }
  return false;
}

bool names_ids(const Expr* w) { return w && (id_operand(w) || id_list_operand(w)); }

namespace {

// The ids `id = c` or `id in c` name with these values, each(id) for each
// (a list's in its order, duplicates too, the list read in place when it is
// a parameter or a literal): false when they are no integer ids (the plan
// then scans); null names none.
template <typename Each>
bool each_named_id(const Evaluator& ev, const Expr* w, const Each& each) {
  if (!w) return false;
  int64_t id;
  switch (id_equal(ev, w, &id)) {
    case 1: each(id); return true;
    case 0: return true;
    default: break;
  }
  const Expr* list = id_list_operand(w);
  if (!list) return false;
  const Value* v = ev.ref(*list);
  Value tmp;
  if (!v) {
    if (!ev.constant(*list, &tmp).is_ok()) return false;
    v = &tmp;
  }
  if (v->kind() != Kind::List) return false;
  for (const Value& x : v->items())
    if (x.kind() != Kind::Int) return false;
  for (const Value& x : v->items()) each(x.as_int());
  return true;
}

}  // namespace

int64_t ids_named(const Evaluator& ev, const Expr* w) {
  int64_t n = 0;
  return each_named_id(ev, w, [&](int64_t) { n++; }) ? n : -1;
}

bool id_lookup(const Evaluator& ev, const Expr* w, std::vector<int64_t>* ids) {
  if (!each_named_id(ev, w, [&](int64_t id) { ids->push_back(id); })) return false;
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  return true;
}

namespace {

class Ids : public Source {
 public:
  Ids(ExecContext& x, int node, std::vector<int64_t> ids) : Source(x, node), ids_(std::move(ids)) {}

 protected:
  Status produce() override {
    Row r;
    for (size_t i = 0; i < ids_.size(); i++) {
      x_.load_ahead(i, ids_.size(), [&](size_t k) { return ids_[k]; });
      const int64_t id = ids_[i];
      const uint64_t* loc = x_.c.ids.find(id);
      if (!loc) continue;
      r.id = id;
      r.body = x_.body(*loc);
      r.decoded = false;
      if (!emit(r)) break;
    }
    return Status::ok();
  }

 private:
  std::vector<int64_t> ids_;
};

}  // namespace

// The point read, `get C where id = X` with no other clause (whole
// documents or selected fields): the plan an id lookup and a project, run
// as one step with no pipeline built, since it is the read an application
// makes most. Its shape is known once parsed (Prepared::point_id);
// explain (and explain analyze) show and run the same plan through plan_get.
const Expr* point_read(const ParsedStatement& st) {
  if (st.kind != StmtKind::Get || !st.where || st.explain || !st.order.empty() || !st.group.empty() || st.limit ||
      st.offset || st.count || st.near_pos >= 0 || st.match_pos >= 0 || st.fuse || st.rerank_pos >= 0 || st.lookup)
    return nullptr;
  for (const SelectItem& s : st.select)
    if (s.expr && s.expr->kind == ExprKind::Aggregate) return nullptr;
  return id_operand(st.where.get());
}

Status read_point(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev, int64_t id,
                  std::vector<Value>* rows) {
  // The document's likely place loads beside its entry (IdIndex::find).
  const uint64_t* loc = c.ids.find(id, [&](uint64_t guess) { eng.prefetch_body(guess); });
  if (!loc) {
    rows->clear();
    return Status::ok();
  }
  rows->resize(1);  // the row of the last read, if any, written over
  Value& row = rows->front();
  Status err;
  if (selects_id_only(st)) {  // no document read, as the project stage does
    row.member(0, "id") = Value::integer(id);
    row.keep_members(1);
  } else if (st.select.empty()) {
    err = decode_document(c.def, id, eng.body(*loc), &row, &c);
  } else {
    Value doc;
    err = decode_document(c.def, id, eng.body(*loc), &doc, &c);
    if (err.is_ok()) row = project_row(st, std::move(doc), ev, &err);
  }
  RowBudget budget(eng.options().max_result_bytes);
  if (err.is_ok()) budget.take(row, &err);
  if (!err.is_ok()) rows->clear();
  return err;
}

int plan_id_lookup(Plan& plan, size_t n) {
  int node = plan.add("id lookup");
  if (plan.describe()) plan.node(node).detail = std::to_string(n) + (n == 1 ? " id" : " ids");
  return node;
}

std::unique_ptr<Source> make_ids(ExecContext& x, int node, std::vector<int64_t> ids) {
  return std::make_unique<Ids>(x, node, std::move(ids));
}

}  // namespace kitfox
