#include "binder.h"

#include "../codec.h"
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

// The keys of a put's or insert's documents written in the statement: each
// `id` or a field of the collection, as the run would find (a document
// given as a parameter is checked when it runs).
Status check_keys(const CollectionDef& def, const Expr& doc) {
  auto check = [&](std::string_view k, int64_t pos) {
    return k == "id" || def.field(k) ? Status::ok() : not_found_field(std::string(k), def, pos);
  };
  switch (doc.kind) {
    case ExprKind::ObjectLit:
      for (size_t i = 0; i < doc.keys.size(); i++) KF_TRY(check(doc.keys[i], doc.kids[i]->pos));
      return Status::ok();
    case ExprKind::ListLit:
      for (const ExprPtr& k : doc.kids) KF_TRY(check_keys(def, *k));
      return Status::ok();
    case ExprKind::Literal: {
      if (doc.encoded.empty()) {  // a document of literals among parameters, folded into its value
        if (doc.value.kind() != Kind::Object) return Status::ok();
        const std::span<const int64_t> at = doc.parts ? doc.parts->keys_of(0, false) : std::span<const int64_t>();
        for (size_t j = 0; j < doc.value.keys().size(); j++)
          KF_TRY(check(doc.value.keys()[j], j < at.size() ? at[j] : doc.pos));
        return Status::ok();
      }
      // Folded literals: one document or a list of them, in the codec's
      // encoding; where each key stood in doc.parts (as the run reads them).
      const LiteralPositions* lp = doc.parts.get();
      Reader r(doc.encoded);
      const bool list = (uint8_t)doc.encoded[0] == kList;
      uint64_t n = 1;
      if (list) {
        r.u8();
        n = r.varint();
      }
      for (uint64_t i = 0; i < n && r.ok(); i++) {
        if (!r.left() || (uint8_t)*r.pos() != kObject) {  // not a document: the run says so
          skip_value(r);
          continue;
        }
        r.u8();
        const uint64_t keys = r.varint();
        const std::span<const int64_t> at = lp ? lp->keys_of(i, list) : std::span<const int64_t>();
        const int64_t doc_pos = lp && list && i < lp->item.size() ? lp->item[i] : doc.pos;
        for (uint64_t j = 0; j < keys && r.ok(); j++) {
          const std::string_view k = r.str();
          KF_TRY(check(k, j < at.size() ? at[j] : doc_pos));
          skip_value(r);
        }
      }
      return Status::ok();
    }
    default: return Status::ok();
  }
}

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

Status check_document_keys(const Engine& eng, const ParsedStatement& st) {
  if ((st.kind != StmtKind::Put && st.kind != StmtKind::Insert) || !st.body) return Status::ok();
  const CollectionDef* def = def_of(eng, st.collection);
  return def ? check_keys(*def, *st.body) : Status::ok();
}

}  // namespace kitfox
