#include "binder.h"

#include "../engine.h"

namespace kitfox {

Status no_collection(const std::string& name, int64_t pos) {
  return Status(Code::NotFound, "collection '" + name + "' does not exist", pos);
}

Status not_found_field(const std::string& name, const CollectionDef& def, int64_t pos) {
  return Status(Code::NotFound, "unknown field '" + name + "' in collection '" + def.name + "'", pos);
}

Status check_path(const CollectionDef& def, const std::vector<std::string>& path, int64_t pos) {
  if (path[0] == "id") {
    if (path.size() > 1) return Status(Code::Type, "'id' is an int and has no keys", pos);
    return Status::ok();
  }
  const Field* f = def.field(path[0]);
  if (!f) return not_found_field(path[0], def, pos);
  if (path.size() > 1 && f->type.kind != TypeKind::Json)
    return Status(Code::Type, "field '" + path[0] + "' is " + type_name(f->type) + "; only json fields have keys", pos);
  return Status::ok();
}

Status check_expr(const CollectionDef& def, const Expr& e) {
  if (e.kind == ExprKind::Path) return check_path(def, e.path, e.pos);
  for (const ExprPtr& k : e.kids) KF_TRY(check_expr(def, *k));
  return Status::ok();
}

namespace {

const CollectionDef* def_of(const Engine& eng, const std::string& name) {
  auto it = eng.collections().find(name);
  return it == eng.collections().end() ? nullptr : &it->second->def;
}

// The clauses of a get (and of a lookup's child, and its own lookup).
Status bind_get(const Engine& eng, const CollectionDef& def, const ParsedStatement& st) {
  if (st.where) KF_TRY(check_expr(def, *st.where));
  for (const SelectItem& s : st.select) KF_TRY(s.expr ? check_expr(def, *s.expr) : check_path(def, s.path, s.pos));
  for (const OrderKey& k : st.order) KF_TRY(k.expr ? check_expr(def, *k.expr) : check_path(def, k.path, k.pos));
  for (const SelectItem& g : st.group) KF_TRY(check_path(def, g.path, g.pos));
  if (const Lookup* lk = st.lookup.get()) {
    const CollectionDef* child = def_of(eng, lk->collection);
    if (!child) return no_collection(lk->collection, lk->pos);
    if (lk->child_field != "id" && !child->field(lk->child_field))
      return not_found_field(lk->child_field, *child, lk->child_pos);
    KF_TRY(check_path(def, lk->parent_path, lk->pos));
    KF_TRY(bind_get(eng, *child, *lk->child));
  }
  return Status::ok();
}

}  // namespace

Status bind(const Engine& eng, const ParsedStatement& st) {
  switch (st.kind) {
    case StmtKind::Get:
    case StmtKind::Put:
    case StmtKind::Insert:
    case StmtKind::Set:
    case StmtKind::Del:
    case StmtKind::Describe:
      break;
    default:
      return Status::ok();  // definitions check their names as they run
  }
  const CollectionDef* def = def_of(eng, st.collection);
  if (!def) return no_collection(st.collection, st.collection_pos);
  switch (st.kind) {
    case StmtKind::Get: return bind_get(eng, *def, st);
    case StmtKind::Set:
    case StmtKind::Del:
      if (st.where) KF_TRY(check_expr(*def, *st.where));
      for (const Assignment& a : st.assignments) {
        if (a.path[0] == "id") return Status(Code::Invalid, "a document's id cannot be changed", a.pos);
        KF_TRY(check_path(*def, a.path, a.pos));
      }
      return Status::ok();
    default: return Status::ok();
  }
}

}  // namespace kitfox
