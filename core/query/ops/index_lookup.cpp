// index lookup: the candidates a secondary index gives for one conjunct of
// a where clause (equality, in, a range), a superset of the matches that
// the filter then tests; and the counts an index answers exactly.
#include "ops.h"

#include <span>

namespace kitfox {

// The secondary index of collection c on `path` (field plus json keys), of
// an acceptable kind, or -1.
int find_secondary(const Collection& c, const std::vector<std::string>& path, bool need_sorted) {
  const Field* f = c.def.field(path[0]);
  if (!f) return -1;
  int best = -1;
  for (size_t i = 0; i < c.def.secondary.size(); i++) {
    const SecondaryDef& d = c.def.secondary[i];
    if (d.field_id != f->id || d.subpath.size() + 1 != path.size()) continue;
    if (!std::equal(d.subpath.begin(), d.subpath.end(), path.begin() + 1)) continue;
    if (need_sorted && d.kind != IndexKind::Sorted) continue;
    if (best < 0 || d.kind == IndexKind::Unique) best = (int)i;
  }
  return best;
}

// A constant as the index holds the field's values, as comparisons align
// them: ISO text and ints become timestamps for a timestamp field, and a
// timestamp becomes its ms for an int field. Nothing when it cannot match
// anything; Unusable when the index cannot answer it: a timestamp against
// any other field (text and json: the filter compares the time the text
// spells, and many texts spell one time, in no order the index keeps).
enum class IndexKey { Key, Nothing, Unusable };
IndexKey index_constant(const Collection& c, const std::vector<std::string>& path, Value v, Value* out) {
  const Field* f = c.def.field(path[0]);
  const TypeKind k = path.size() == 1 && f ? f->type.kind : TypeKind::Json;  // a path into json: any value
  if (k == TypeKind::Timestamp) {
    if (v.kind() == Kind::Text) {
      int64_t ms;
      if (!parse_timestamp(v.as_string(), &ms)) return IndexKey::Nothing;
      v = Value::timestamp(ms);
    } else if (v.kind() == Kind::Int) {
      v = Value::timestamp(v.as_int());
    }
  } else if (v.kind() == Kind::Timestamp) {
    if (k != TypeKind::Int) return IndexKey::Unusable;
    v = Value::integer(v.as_int());
  }
  *out = std::move(v);
  return IndexKey::Key;
}

// One conjunct an index can answer: `path op constant` (either side; the op
// as seen from the path: 5 < x is x > 5; never != or ~) or `path in
// constant`. False for anything else.
struct IndexTerm {
  const Expr* path = nullptr;
  const Expr* konst = nullptr;
  CmpOp op = CmpOp::Eq;  // Eq for in
  bool in = false;
};
bool index_term(const Expr& e, IndexTerm* t) {
  auto is_const = [](const Expr& x) { return x.kind == ExprKind::Literal || x.kind == ExprKind::Param || x.kind == ExprKind::ListLit; };
  *t = IndexTerm{};
  if (e.kind == ExprKind::Compare && e.op != CmpOp::Ne && e.op != CmpOp::Contains) {
    bool left = e.kids[0]->kind == ExprKind::Path && is_const(*e.kids[1]);
    bool right = e.kids[1]->kind == ExprKind::Path && is_const(*e.kids[0]);
    if (!left && !right) return false;
    t->path = left ? e.kids[0].get() : e.kids[1].get();
    t->konst = left ? e.kids[1].get() : e.kids[0].get();
    CmpOp op = e.op;
    if (right) op = op == CmpOp::Lt ? CmpOp::Gt : op == CmpOp::Gt ? CmpOp::Lt : op == CmpOp::Le ? CmpOp::Ge : op == CmpOp::Ge ? CmpOp::Le : op;
    t->op = op;
    return true;
  }
  if (e.kind == ExprKind::In && !e.negate && e.kids[0]->kind == ExprKind::Path && is_const(*e.kids[1])) {
    t->path = e.kids[0].get();
    t->konst = e.kids[1].get();
    t->in = true;
    return true;
  }
  return false;
}

void conjuncts(const Expr* where, std::vector<const Expr*>* out) {
  out->clear();
  if (!where) return;
  std::vector<const Expr*> stack{where};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (e->kind == ExprKind::And) {
      for (size_t i = e->kids.size(); i-- > 0;) stack.push_back(e->kids[i].get());
    } else {
      out->push_back(e);
    }
  }
}

bool key_range(const Collection& c, const Evaluator& ev, const std::vector<const Expr*>& conj,
               const std::vector<std::string>& path, KeyRange* r) {
  *r = KeyRange{};
  for (const Expr* e : conj) {
    IndexTerm t;
    if (!index_term(*e, &t) || t.in || t.path->path != path) continue;
    const CmpOp o = t.op;
    const bool upper = o == CmpOp::Lt || o == CmpOp::Le, lower = o == CmpOp::Gt || o == CmpOp::Ge;
    if ((upper && r->has_hi) || (lower && r->has_lo) || (!upper && !lower)) continue;
    Value v, k;
    if (!ev.constant(*t.konst, &v).is_ok() || index_constant(c, path, std::move(v), &k) != IndexKey::Key) continue;
    if (upper) r->hi = std::move(k), r->has_hi = true, r->hi_incl = o == CmpOp::Le;
    else r->lo = std::move(k), r->has_lo = true, r->lo_incl = o == CmpOp::Ge;
  }
  return r->has_lo || r->has_hi;
}

// Candidate ids from a secondary index for one of the where clause's
// conjuncts: a superset of the matches (the whole clause is still evaluated
// on each), so the answer is exactly the scan's. With `count`, a range only
// counts its candidates (*count; ids stays empty); other candidates are
// collected, and *count is their number.
bool index_candidates(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, std::vector<int64_t>* ids,
                      size_t* count, std::string* detail, const std::vector<std::string>* not_range) {
  if (!where || c.def.secondary.empty()) return false;
  std::vector<const Expr*> conj;
  conjuncts(where, &conj);
  // Pass 1: equality and in (any kind; unique first). Pass 2: ranges (sorted).
  for (int pass = 0; pass < 2; pass++)
    for (const Expr* e : conj) {
      IndexTerm term;
      if (!index_term(*e, &term)) continue;
      const Expr* path = term.path;
      const Expr* konst = term.konst;
      CmpOp op = term.op;
      if (path->path[0] == "id") continue;
      bool range = !term.in && op != CmpOp::Eq;
      if ((pass == 0) == range) continue;
      if (range && not_range && path->path == *not_range) continue;
      int i = find_secondary(c, path->path, range);
      if (i < 0) continue;
      Value kv;
      if (!ev.constant(*konst, &kv).is_ok()) return false;  // the scan reports the error
      if (term.in && kv.kind() != Kind::List) return false;
      // The keys first: a constant the index cannot answer leaves the
      // conjunct to the filter (another conjunct's index, or the scan).
      std::vector<Value> keys;
      bool usable = true;
      for (const Value& x : term.in ? kv.items() : std::span<const Value>(&kv, 1)) {
        Value k;
        IndexKey r = index_constant(c, path->path, x, &k);
        if (r == IndexKey::Key) keys.push_back(std::move(k));
        usable &= r != IndexKey::Unusable;
      }
      if (!usable) continue;
      auto si = eng.secondary(c, (size_t)i);
      if (!si.is_ok()) return false;
      auto name = [&] { return c.def.name + "." + expr_text(*path) + " (@" + secondary_name(c.def.secondary[i].kind) + ")"; };
      ids->clear();
      bool counted = false;
      if (term.in) {
        std::vector<int64_t> part;
        for (const Value& k : keys) {
          (*si)->equal(k, &part);
          ids->insert(ids->end(), part.begin(), part.end());
        }
        std::sort(ids->begin(), ids->end());
        ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
        if (detail) *detail = name() + ": in, " + counted_text(ids->size(), "candidate");
      } else {
        if (!keys.empty()) {  // none: it cannot match anything
          if (op == CmpOp::Eq) (*si)->equal(keys[0], ids);
          else {
            // Both bounds when another conjunct bounds the same path the other way.
            KeyRange r;
            key_range(c, ev, conj, path->path, &r);
            const Value* lo = r.has_lo ? &r.lo : nullptr;
            const Value* hi = r.has_hi ? &r.hi : nullptr;
            if (count) *count = (*si)->count_range(lo, r.lo_incl, hi, r.hi_incl), counted = true;
            else (*si)->range(lo, r.lo_incl, hi, r.hi_incl, ids);
          }
        }
        if (detail)
          *detail = name() + (op == CmpOp::Eq ? ": equality, " : ": range, ") +
                    counted_text(counted ? *count : ids->size(), "candidate");
      }
      if (count && !counted) *count = ids->size();
      return true;
    }
  return false;
}

// The count of a where clause that an index answers exactly, without
// testing any document: the index's candidates are then exactly the
// documents the clause selects. The clause is on one top-level field of a
// scalar type (int, float, text, bool, timestamp) that has an index, and is
// either one `field = constant` / `field in [constants]`, or a range on a
// @sorted index: one bound, or a lower and an upper one. No constant is
// null, and a range's constants are of the field's kind (numbers for int and
// float), as are the keys of a typed field; a range never yields null keys.
// The index keys each document by the field's value, compared as the
// language compares it (5 and 5.0 are one key, ISO text matches a
// timestamp), and is updated with every write.
bool index_count(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, int64_t* n, std::string* detail) {
  if (!where) return false;
  std::vector<const Expr*> conj{where};
  if (where->kind == ExprKind::And) {
    if (where->kids.size() != 2) return false;
    conj = {where->kids[0].get(), where->kids[1].get()};
  }
  const std::vector<std::string>* path = nullptr;
  int lower = 0, upper = 0, equal = 0;
  for (const Expr* e : conj) {
    IndexTerm term;
    if (!index_term(*e, &term)) return false;
    const Expr* konst = term.konst;
    CmpOp op = term.op;
    if (path && term.path->path != *path) return false;
    path = &term.path->path;
    if (path->size() != 1 || (*path)[0] == "id") return false;
    const Field* f = c.def.field((*path)[0]);
    if (!f) return false;
    TypeKind k = f->type.kind;
    if (k != TypeKind::Int && k != TypeKind::Float && k != TypeKind::Text && k != TypeKind::Bool && k != TypeKind::Timestamp)
      return false;
    Value kv;
    if (!ev.constant(*konst, &kv).is_ok() || kv.is_null()) return false;
    if (term.in) {
      if (kv.kind() != Kind::List) return false;
      for (const Value& x : kv.items())
        if (x.is_null()) return false;
      equal++;
      continue;
    }
    if (op == CmpOp::Eq) {
      equal++;
      continue;
    }
    Value key;
    if (index_constant(c, *path, kv, &key) != IndexKey::Key) return false;
    bool numeric = k == TypeKind::Int || k == TypeKind::Float;
    bool same = numeric ? key.kind() == Kind::Int || key.kind() == Kind::Float
                        : key.kind() == (k == TypeKind::Text ? Kind::Text : k == TypeKind::Bool ? Kind::Bool : Kind::Timestamp);
    if (!same) return false;
    (op == CmpOp::Gt || op == CmpOp::Ge ? lower : upper)++;
  }
  bool exact = conj.size() == 1 ? equal + lower + upper == 1 : lower == 1 && upper == 1;
  if (!exact || find_secondary(c, *path, lower + upper > 0) < 0) return false;
  std::vector<int64_t> ids;
  size_t count = 0;
  if (!index_candidates(eng, c, ev, where, &ids, &count, detail)) return false;
  *n = (int64_t)count;
  return true;
}

int plan_index_lookup(Plan& plan, std::string detail) {
  int node = plan.add("index lookup");
  plan.node(node).detail = std::move(detail);
  return node;
}

}  // namespace kitfox
