// id lookup: the documents a where clause names by id (`id = c`, `id in
// [...]`), and the source every list of ids uses (an index's candidates).
#include "ops.h"

namespace kitfox {

bool id_lookup(const Evaluator& ev, const Expr* w, std::vector<int64_t>* ids) {
  if (!w) return false;
  auto is_id = [](const Expr& x) { return x.kind == ExprKind::Path && x.path.size() == 1 && x.path[0] == "id"; };
  if (w->kind == ExprKind::Compare && w->op == CmpOp::Eq) {
    const Expr* other = is_id(*w->kids[0]) ? w->kids[1].get() : is_id(*w->kids[1]) ? w->kids[0].get() : nullptr;
    if (!other || other->kind == ExprKind::Path) return false;
    const Value* v = ev.ref(*other);
    Value tmp;
    if (!v) {
      if (!ev.constant(*other, &tmp).is_ok()) return false;
      v = &tmp;
    }
    if (v->kind() == Kind::Int) ids->push_back(v->as_int());
    else if (!v->is_null() && !(v->kind() == Kind::Float && v->as_float() == std::floor(v->as_float()) && std::fabs(v->as_float()) < 9e18)) return false;
    else if (v->kind() == Kind::Float) ids->push_back((int64_t)v->as_float());
    return true;
  }
  if (w->kind == ExprKind::In && !w->negate && is_id(*w->kids[0]) && w->kids[1]->kind != ExprKind::Path) {
    Value v;
    if (!ev.constant(*w->kids[1], &v).is_ok() || v.kind() != Kind::List) return false;
    for (const Value& x : v.items()) {
      if (x.kind() != Kind::Int) return false;
      ids->push_back(x.as_int());
    }
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
    return true;
  }
  return false;
}

namespace {

class Ids : public Source {
 public:
  Ids(ExecContext& x, int node, std::vector<int64_t> ids) : Source(x, node), ids_(std::move(ids)) {}

 protected:
  Status produce() override {
    Row r;
    for (int64_t id : ids_) {
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

int plan_id_lookup(Plan& plan, size_t n) {
  int node = plan.add("id lookup");
  if (plan.describe()) plan.node(node).detail = std::to_string(n) + (n == 1 ? " id" : " ids");
  return node;
}

std::unique_ptr<Source> make_ids(ExecContext& x, int node, std::vector<int64_t> ids) {
  return std::make_unique<Ids>(x, node, std::move(ids));
}

}  // namespace kitfox
