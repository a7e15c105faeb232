// Runs parsed statements against the engine. Reads run under the shared lock,
// writes under the exclusive one; a write builds every op first and commits
// them as one record, so a failed statement changes nothing.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <optional>

#include "../codec.h"
#include "../engine.h"
#include "../engine_limits.h"
#include "../storage/format.h"
#include "../engine.h"
#include "../index/text.h"
#include "binder.h"
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace kitfox {

namespace {

std::string join(const std::vector<std::string>& p) {
  std::string s;
  for (size_t i = 0; i < p.size(); i++) {
    if (i) s += '.';
    s += p[i];
  }
  return s;
}

}  // namespace

class Evaluator {
 public:
  Evaluator(const std::vector<Value>& params) : params_(params) {}

  // A literal or a given parameter, in place (no copy); else null.
  const Value* ref(const Expr& e) const {
    if (e.kind == ExprKind::Literal) return &e.value;
    if (e.kind == ExprKind::Param && e.param >= 1 && (size_t)e.param <= params_.size()) return &params_[e.param - 1];
    return nullptr;
  }

  // Values without a document: literals, params, list/object literals.
  Status constant(const Expr& e, Value* out) const {
    switch (e.kind) {
      case ExprKind::Literal: *out = e.value; return Status::ok();
      case ExprKind::Param:
        if (e.param < 1 || (size_t)e.param > params_.size())
          return Status(Code::Invalid, "parameter $" + std::to_string(e.param) + " was not given (" +
                                           std::to_string(params_.size()) + " given)", e.pos);
        *out = params_[e.param - 1];
        return Status::ok();
      case ExprKind::ListLit: {
        *out = Value::list();
        out->mutable_items().reserve(e.kids.size());
        for (const ExprPtr& k : e.kids) {
          Value v;
          KF_TRY(constant(*k, &v));
          out->push(std::move(v));
        }
        return Status::ok();
      }
      case ExprKind::ObjectLit: {
        *out = Value::object();
        for (size_t i = 0; i < e.kids.size(); i++) {
          Value v;
          KF_TRY(constant(*e.kids[i], &v));
          out->append(e.keys[i], std::move(v));
        }
        return Status::ok();
      }
      default: return Status(Code::Syntax, "expected a value here", e.pos);
    }
  }

  // As constant(), moving literal values out of the expression (which must
  // not be evaluated again).
  Status take(Expr& e, Value* out) const {
    switch (e.kind) {
      case ExprKind::Literal: *out = std::move(e.value); return Status::ok();
      case ExprKind::ListLit: {
        *out = Value::list();
        out->mutable_items().resize(e.kids.size());
        for (size_t i = 0; i < e.kids.size(); i++) KF_TRY(take(*e.kids[i], &out->mutable_items()[i]));
        return Status::ok();
      }
      case ExprKind::ObjectLit: {
        *out = Value::object();
        for (size_t i = 0; i < e.kids.size(); i++) {
          Value v;
          KF_TRY(take(*e.kids[i], &v));
          out->append(std::move(e.keys[i]), std::move(v));
        }
        return Status::ok();
      }
      default: return constant(e, out);
    }
  }

  // Evaluates against a decoded document. Predicates give Bool, or Null when
  // unknown (a comparison with null); `where` keeps rows that give true.
  Status eval(const Expr& e, const Value& doc, Value* out) const {
    switch (e.kind) {
      case ExprKind::Path: {
        const Value* v = &doc;
        for (const std::string& k : e.path) {
          if (v->kind() != Kind::Object) { v = nullptr; break; }
          v = v->get(k);
          if (!v) break;
        }
        *out = v ? *v : Value();
        return Status::ok();
      }
      case ExprKind::Not: {
        Value v;
        KF_TRY(eval(*e.kids[0], doc, &v));
        *out = v.is_null() ? Value() : Value::boolean(!truthy(v));
        return Status::ok();
      }
      case ExprKind::And:
      case ExprKind::Or: {
        // Three-valued: one decisive term decides; else null if any was null.
        bool is_and = e.kind == ExprKind::And, any_null = false;
        for (const ExprPtr& k : e.kids) {
          Value v;
          KF_TRY(eval(*k, doc, &v));
          if (v.is_null()) any_null = true;
          else if (truthy(v) != is_and) { *out = Value::boolean(!is_and); return Status::ok(); }
        }
        *out = any_null ? Value() : Value::boolean(is_and);
        return Status::ok();
      }
      case ExprKind::Compare: {
        Value a, b;
        KF_TRY(eval(*e.kids[0], doc, &a));
        KF_TRY(eval(*e.kids[1], doc, &b));
        return compare_op(e, a, b, out);
      }
      case ExprKind::In:
      case ExprKind::Has: {
        Value a, b;
        KF_TRY(eval(*e.kids[0], doc, &a));
        KF_TRY(eval(*e.kids[1], doc, &b));
        const Value& list = e.kind == ExprKind::In ? b : a;
        const Value& item = e.kind == ExprKind::In ? a : b;
        if (list.is_null() || item.is_null()) { *out = Value(); return Status::ok(); }
        if (list.kind() != Kind::List)
          return Status(Code::Type, std::string(e.kind == ExprKind::In ? "'in' needs a list on its right" : "'has' needs a list on its left") +
                                        ", got " + kind_name(list.kind()), e.pos);
        bool found = false;
        for (const Value& x : list.items())
          if (equal_loose(x, item)) { found = true; break; }
        *out = Value::boolean(found != e.negate);
        return Status::ok();
      }
      case ExprKind::IsNull: {
        Value a;
        KF_TRY(eval(*e.kids[0], doc, &a));
        *out = Value::boolean(a.is_null() != e.negate);
        return Status::ok();
      }
      case ExprKind::Call: return call(e, doc, out);
      case ExprKind::Aggregate:
        return Status(Code::Syntax, e.path[0] + "() is an aggregate: it belongs in select or order, over a whole result or a group", e.pos);
      default: return constant(e, out);
    }
  }

  static bool truthy(const Value& v) { return v.kind() == Kind::Bool ? v.as_bool() : !v.is_null(); }

 private:
  // Vector functions, in double precision: cosine(a, b) similarity, l2(a, b)
  // Euclidean distance, dot(a, b), norm(v). Null in, null out.
  Status call(const Expr& e, const Value& doc, Value* out) const {
    const std::string& fn = e.path[0];
    std::vector<double> v[2];
    for (size_t i = 0; i < e.kids.size(); i++) {
      Value a;
      KF_TRY(eval(*e.kids[i], doc, &a));
      if (a.is_null()) { *out = Value(); return Status::ok(); }
      if (a.kind() == Kind::Vector) {
        v[i].assign(a.vec().begin(), a.vec().end());
      } else if (a.kind() == Kind::List) {
        for (const Value& x : a.items()) {
          if (!x.is_number()) return Status(Code::Type, fn + "() needs vectors or lists of numbers", e.kids[i]->pos);
          v[i].push_back(x.as_number());
        }
      } else {
        return Status(Code::Type, fn + "() needs vectors, got " + kind_name(a.kind()), e.kids[i]->pos);
      }
    }
    if (e.kids.size() == 2 && v[0].size() != v[1].size())
      return Status(Code::Type, fn + "(): vectors of " + std::to_string(v[0].size()) + " and " + std::to_string(v[1].size()) + " dimensions", e.pos);
    double dot = 0, n0 = 0, n1 = 0, l2 = 0;
    for (size_t i = 0; i < v[0].size(); i++) {
      n0 += v[0][i] * v[0][i];
      if (e.kids.size() == 2) {
        dot += v[0][i] * v[1][i];
        n1 += v[1][i] * v[1][i];
        l2 += (v[0][i] - v[1][i]) * (v[0][i] - v[1][i]);
      }
    }
    if (fn == "norm") *out = Value::real(std::sqrt(n0));
    else if (fn == "dot") *out = Value::real(dot);
    else if (fn == "l2") *out = Value::real(std::sqrt(l2));
    // Rounding can take |cos| a hair past 1 (cosine(e, e) of 1.0000000000000002).
    else *out = n0 > 0 && n1 > 0 ? Value::real(std::clamp(dot / (std::sqrt(n0) * std::sqrt(n1)), -1.0, 1.0)) : Value();
    return Status::ok();
  }

  // Timestamps compare with ISO text and with ints (ms).
  static bool align(const Value& a, const Value& b, Value* a2, Value* b2) {
    *a2 = a;
    *b2 = b;
    if (a.kind() == Kind::Timestamp || b.kind() == Kind::Timestamp) {
      for (Value* v : {a2, b2}) {
        if (v->kind() == Kind::Text) {
          int64_t ms;
          if (!parse_timestamp(v->as_string(), &ms)) return false;
          *v = Value::timestamp(ms);
        } else if (v->kind() == Kind::Int) {
          *v = Value::timestamp(v->as_int());
        }
      }
    }
    return true;
  }
  static bool comparable(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) return true;
    return a.kind() == b.kind();
  }
  static bool equal_loose(const Value& a, const Value& b) {
    Value a2, b2;
    if (!align(a, b, &a2, &b2)) return false;
    return comparable(a2, b2) && equal(a2, b2);
  }
  static bool contains_ci(const std::string& hay, const std::string& needle) {
    if (needle.empty()) return true;
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c + 32) : c; };
    auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                          [&](char x, char y) { return lower(x) == lower(y); });
    return it != hay.end();
  }
  Status compare_op(const Expr& e, const Value& a, const Value& b, Value* out) const {
    if (a.is_null() || b.is_null()) { *out = Value(); return Status::ok(); }
    if (e.op == CmpOp::Contains) {
      if (a.kind() != Kind::Text || b.kind() != Kind::Text)
        return Status(Code::Type, std::string("'~' compares text with text, got ") + kind_name(a.kind()) + " and " + kind_name(b.kind()), e.pos);
      *out = Value::boolean(contains_ci(a.as_string(), b.as_string()));
      return Status::ok();
    }
    Value a2, b2;
    if (!align(a, b, &a2, &b2) || !comparable(a2, b2)) {
      // Different kinds are never equal; ordering them is meaningless.
      *out = e.op == CmpOp::Ne ? Value::boolean(true) : e.op == CmpOp::Eq ? Value::boolean(false) : Value();
      return Status::ok();
    }
    int c = compare(a2, b2);
    bool r = false;
    switch (e.op) {
      case CmpOp::Eq: r = c == 0; break;
      case CmpOp::Ne: r = c != 0; break;
      case CmpOp::Lt: r = c < 0; break;
      case CmpOp::Le: r = c <= 0; break;
      case CmpOp::Gt: r = c > 0; break;
      case CmpOp::Ge: r = c >= 0; break;
      default: break;
    }
    *out = Value::boolean(r);
    return Status::ok();
  }

  const std::vector<Value>& params_;
};

// A document decoded only as far as some expressions read it: the id and
// each top-level field they name (null when the document lacks it, which a
// path reads the same way), each decoded alone. One object shape, reused
// from document to document: a filter or a group on one small field need
// not decode a document's text and vectors (a 128-dim vector is 512 bytes
// to copy) for every row.
class PartialDoc {
 public:
  explicit PartialDoc(const Collection& c) : c_(c) {}
  void need(const Expr& e) {
    if (e.kind == ExprKind::Path) need(e.path);
    for (const ExprPtr& k : e.kids) need(*k);
  }
  void need(const std::vector<std::string>& path) {
    const Field* f = path.empty() ? nullptr : c_.def.field(path[0]);
    if (f && std::find(fields_.begin(), fields_.end(), f) == fields_.end()) fields_.push_back(f);
  }
  // After the need() calls.
  void shape() {
    doc_ = Value::object();
    doc_.reserve_keys(1 + fields_.size());
    doc_.append("id", Value());
    for (const Field* f : fields_) doc_.append(f->name, Value());
  }
  Status load(int64_t id, std::string_view body) {
    std::vector<Value>& v = doc_.mutable_items();
    v[0] = Value::integer(id);
    for (size_t i = 0; i < fields_.size(); i++) KF_TRY(decode_field(body, fields_[i]->id, &v[i + 1], &c_));
    return Status::ok();
  }
  const Value& doc() const { return doc_; }

 private:
  const Collection& c_;
  std::vector<const Field*> fields_;
  Value doc_;
};

// A where clause tested on the fields it reads.
class RowFilter {
 public:
  RowFilter(const Evaluator& ev, const Expr* where, const Collection& c) : ev_(ev), where_(where), doc_(c) {
    if (!where) return;
    doc_.need(*where);
    doc_.shape();
  }
  // Whether document `id` (stored as `body`) passes; every document passes
  // an absent clause. A document that does not decode is an error.
  Status test(int64_t id, std::string_view body, bool* pass) {
    *pass = true;
    if (!where_) return Status::ok();
    KF_TRY(doc_.load(id, body));
    KF_TRY(ev_.eval(*where_, doc_.doc(), &t_));
    *pass = Evaluator::truthy(t_);
    return Status::ok();
  }

 private:
  const Evaluator& ev_;
  const Expr* where_;
  PartialDoc doc_;
  Value t_;
};

namespace {

Result<int64_t> count_arg(const Evaluator& ev, const ExprPtr& e, const char* what) {
  if (!e) return (int64_t)-1;
  Value v;
  KF_TRY(ev.constant(*e, &v));
  if (v.kind() != Kind::Int || v.as_int() < 0)
    return Status(Code::Type, std::string(what) + " must be a non-negative integer", e->pos);
  return v.as_int();
}

// The memory one query's rows may take (OpenOptions.max_result_bytes),
// charged as each row (or each document a sort holds) is kept: an estimate
// of the values' memory, strings and vectors by their bytes.
class RowBudget {
 public:
  explicit RowBudget(uint64_t max) : max_(max), left_(max) {}
  // False, with *err set, once what is kept passes the budget.
  bool take(const Value& v, Status* err) {
    uint64_t n = bytes(v);
    if (n > left_) {
      *err = Status(Code::Limit, "the rows of this query take more than " + std::to_string(max_ >> 20) +
                                     " MiB (max_result_bytes): add a limit or select fewer fields");
      return false;
    }
    left_ -= n;
    return true;
  }

 private:
  // Scalars inside a list or object are counted in place (no call each):
  // a row's estimate costs about 1% of a point read.
  static uint64_t bytes(const Value& v) {
    switch (v.kind()) {
      case Kind::Text:
      case Kind::Bytes: return sizeof(Value) + v.as_string().size();
      case Kind::Vector: return sizeof(Value) + v.vec().size() * sizeof(float);
      case Kind::List:
      case Kind::Object: {
        uint64_t n = sizeof(Value) + v.items().size() * sizeof(Value);
        for (const Value& k : v.items()) {
          Kind kk = k.kind();
          if (kk == Kind::Text || kk == Kind::Bytes) n += k.as_string().size();
          else if (kk == Kind::List || kk == Kind::Object || kk == Kind::Vector) n += bytes(k) - sizeof(Value);
        }
        // Keys are short (kept inside the string) but for long ones.
        if (v.kind() == Kind::Object) n += v.keys().size() * sizeof(std::string);
        return n;
      }
      default: return sizeof(Value);
    }
  }
  uint64_t max_, left_;
};

// The ids a where clause pins down exactly (id = c, id in [...]), if any.
bool id_lookup(const Evaluator& ev, const Expr* w, std::vector<int64_t>* ids) {
  if (!w) return false;
  auto is_id = [](const Expr& x) { return x.kind == ExprKind::Path && x.path.size() == 1 && x.path[0] == "id"; };
  if (w->kind == ExprKind::Compare && w->op == CmpOp::Eq) {
    const Expr* other = is_id(*w->kids[0]) ? w->kids[1].get() : is_id(*w->kids[1]) ? w->kids[0].get() : nullptr;
    if (!other || other->kind == ExprKind::Path) return false;
    Value v;
    if (!ev.constant(*other, &v).is_ok()) return false;
    if (v.kind() == Kind::Int) ids->push_back(v.as_int());
    else if (!v.is_null() && !(v.kind() == Kind::Float && v.as_float() == std::floor(v.as_float()) && std::fabs(v.as_float()) < 9e18)) return false;
    else if (v.kind() == Kind::Float) ids->push_back((int64_t)v.as_float());
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

// explain: the steps a query took, when asked for. The text of a step is
// built only then.
thread_local std::vector<std::string>* t_plan = nullptr;
#define KF_NOTE(...)                              \
  do {                                            \
    if (t_plan) t_plan->push_back(__VA_ARGS__);   \
  } while (0)

std::string expr_text(const Expr& e);

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

// A constant as the index holds the field's values: ISO text and ints become
// timestamps for a timestamp field (as comparisons align them). False when it
// cannot match anything.
bool index_constant(const Collection& c, const std::vector<std::string>& path, Value v, Value* out) {
  const Field* f = c.def.field(path[0]);
  if (path.size() == 1 && f && f->type.kind == TypeKind::Timestamp) {
    if (v.kind() == Kind::Text) {
      int64_t ms;
      if (!parse_timestamp(v.as_string(), &ms)) return false;
      v = Value::timestamp(ms);
    } else if (v.kind() == Kind::Int) {
      v = Value::timestamp(v.as_int());
    }
  }
  *out = std::move(v);
  return true;
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

// Candidate ids from a secondary index for one of the where clause's
// conjuncts: a superset of the matches (the whole clause is still evaluated
// on each), so the answer is exactly the scan's. With `count`, a range only
// counts its candidates (*count; ids stays empty); other candidates are
// collected, and *count is their number.
bool index_candidates(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, std::vector<int64_t>* ids,
                      size_t* count = nullptr) {
  if (!where || c.def.secondary.empty()) return false;
  std::vector<const Expr*> conj, stack{where};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (e->kind == ExprKind::And) {
      for (size_t i = e->kids.size(); i-- > 0;) stack.push_back(e->kids[i].get());
    } else {
      conj.push_back(e);
    }
  }
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
      int i = find_secondary(c, path->path, range);
      if (i < 0) continue;
      Value kv;
      if (!ev.constant(*konst, &kv).is_ok()) return false;  // the scan reports the error
      auto si = eng.secondary(c, (size_t)i);
      if (!si.is_ok()) return false;
      std::string name = c.def.name + "." + expr_text(*path) + " (@" + secondary_name(c.def.secondary[i].kind) + ")";
      ids->clear();
      bool counted = false;
      if (term.in) {
        if (kv.kind() != Kind::List) return false;
        std::vector<int64_t> part;
        for (const Value& x : kv.items()) {
          Value k;
          if (!index_constant(c, path->path, x, &k)) continue;
          (*si)->equal(k, &part);
          ids->insert(ids->end(), part.begin(), part.end());
        }
        std::sort(ids->begin(), ids->end());
        ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
        KF_NOTE("index " + name + ": in, " + std::to_string(ids->size()) + " candidates");
      } else {
        Value k;
        if (index_constant(c, path->path, kv, &k)) {
          if (op == CmpOp::Eq) (*si)->equal(k, ids);
          else {
            // Both bounds when another conjunct bounds the same path the other way.
            Value lo, hi;
            bool has_lo = false, has_hi = false, lo_incl = false, hi_incl = false;
            auto take = [&](CmpOp o, Value v) {
              if ((o == CmpOp::Lt || o == CmpOp::Le) && !has_hi) hi = std::move(v), has_hi = true, hi_incl = o == CmpOp::Le;
              else if ((o == CmpOp::Gt || o == CmpOp::Ge) && !has_lo) lo = std::move(v), has_lo = true, lo_incl = o == CmpOp::Ge;
            };
            take(op, k);
            for (const Expr* o : conj) {
              IndexTerm t2;
              if (o == e || !index_term(*o, &t2) || t2.in || t2.path->path != path->path) continue;
              Value v2, k2;
              if (!ev.constant(*t2.konst, &v2).is_ok()) continue;
              if (index_constant(c, path->path, v2, &k2)) take(t2.op, std::move(k2));
            }
            if (count) *count = (*si)->count_range(has_lo ? &lo : nullptr, lo_incl, has_hi ? &hi : nullptr, hi_incl), counted = true;
            else (*si)->range(has_lo ? &lo : nullptr, lo_incl, has_hi ? &hi : nullptr, hi_incl, ids);
          }
        }
        KF_NOTE("index " + name + (op == CmpOp::Eq ? ": equality, " : ": range, ") +
             std::to_string(counted ? *count : ids->size()) + " candidates");
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
bool index_count(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, int64_t* n) {
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
    if (!index_constant(c, *path, kv, &key)) return false;
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
  if (!index_candidates(eng, c, ev, where, &ids, &count)) return false;
  KF_NOTE("count: the index's candidates, exactly the documents the where selects");
  *n = (int64_t)count;
  return true;
}

// Visits the documents a where clause selects, in ascending id order (or an
// index's candidate order), until f returns false. Each is decoded into `doc`.
// kWhole false: f takes the id and the stored body, and no document is
// decoded beyond the fields the filter reads (scan_where_ids).
template <bool kWhole = true, typename F>
Status scan_where(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, F&& f) {
  Value doc;
  std::vector<int64_t> ids;
  // An id lookup answers the whole clause: no document is tested.
  bool by_id = id_lookup(ev, where, &ids);
  RowFilter filter(ev, by_id ? nullptr : where, c);
  auto visit = [&](int64_t id, uint64_t loc, bool* more) -> Status {
    std::string_view b = eng.body(loc);
    bool pass;
    KF_TRY(filter.test(id, b, &pass));
    if (!pass) return Status::ok();
    if constexpr (kWhole) {
      KF_TRY(decode_document(c.def, id, b, &doc, &c));
      *more = f(doc);
    } else {
      *more = f(id, b);
    }
    return Status::ok();
  };
  bool more = true;
  if (by_id) KF_NOTE("id lookup: " + std::to_string(ids.size()) + (ids.size() == 1 ? " id" : " ids"));
  if (by_id || index_candidates(eng, c, ev, where, &ids)) {
    if (where && !by_id) KF_NOTE("filter: where " + expr_text(*where));
    for (int64_t id : ids) {
      const uint64_t* loc = c.ids.find(id);
      if (!loc) continue;
      KF_TRY(visit(id, *loc, &more));
      if (!more) break;
    }
    return Status::ok();
  }
  KF_NOTE("scan " + c.def.name + " in id order (" + std::to_string(c.ids.size()) + " documents)");
  if (where) KF_NOTE("filter: where " + expr_text(*where));
  Status st;
  c.ids.scan([&](const IdEntry& e) {
    st = visit(e.id, e.loc, &more);
    return st.is_ok() && more;
  });
  return st;
}

// The ids of the documents a where clause selects, as scan_where visits them.
template <typename F>
Status scan_where_ids(Engine& eng, Collection& c, const Evaluator& ev, const Expr* where, F&& f) {
  return scan_where<false>(eng, c, ev, where, std::forward<F>(f));
}

// The source-like text of an expression, for explain.
std::string expr_text(const Expr& e) {
  static const char* ops[] = {"=", "!=", "<", "<=", ">", ">=", "~"};
  switch (e.kind) {
    case ExprKind::Literal: return to_json(e.value);
    case ExprKind::Param: return "$" + std::to_string(e.param);
    case ExprKind::Path: return join(e.path);
    case ExprKind::ListLit:
    case ExprKind::ObjectLit: {
      std::string s = e.kind == ExprKind::ListLit ? "[" : "{";
      for (size_t i = 0; i < e.kids.size(); i++) {
        if (i) s += ", ";
        if (e.kind == ExprKind::ObjectLit) s += e.keys[i] + ": ";
        s += expr_text(*e.kids[i]);
      }
      return s + (e.kind == ExprKind::ListLit ? "]" : "}");
    }
    case ExprKind::Not: return "not " + expr_text(*e.kids[0]);
    case ExprKind::And:
    case ExprKind::Or: {
      std::string s = "(";
      for (size_t i = 0; i < e.kids.size(); i++) {
        if (i) s += e.kind == ExprKind::And ? " and " : " or ";
        s += expr_text(*e.kids[i]);
      }
      return s + ")";
    }
    case ExprKind::Compare: return expr_text(*e.kids[0]) + " " + ops[(int)e.op] + " " + expr_text(*e.kids[1]);
    case ExprKind::In: return expr_text(*e.kids[0]) + (e.negate ? " not in " : " in ") + expr_text(*e.kids[1]);
    case ExprKind::Has: return expr_text(*e.kids[0]) + " has " + expr_text(*e.kids[1]);
    case ExprKind::IsNull: return expr_text(*e.kids[0]) + (e.negate ? " is not null" : " is null");
    case ExprKind::Call:
    case ExprKind::Aggregate: {
      std::string s = e.path[0] + "(";
      if (e.kind == ExprKind::Aggregate && e.kids.empty()) s += "*";
      for (size_t i = 0; i < e.kids.size(); i++) s += (i ? ", " : "") + expr_text(*e.kids[i]);
      return s + ")";
    }
  }
  return "?";
}

}  // namespace

Value project_row(const ParsedStatement& st, Value doc, const Evaluator& ev, Status* err) {
  if (st.select.empty()) return doc;
  Value r = Value::object();
  r.append("id", *doc.get("id"));
  for (const SelectItem& s : st.select) {
    if (s.expr) {
      Value v;
      Status e = ev.eval(*s.expr, doc, &v);
      if (!e.is_ok() && err->is_ok()) *err = e;
      r.append(s.label, std::move(v));
      continue;
    }
    if (s.path.size() == 1 && s.path[0] == "id") continue;
    const Value* v = &doc;
    for (const std::string& k : s.path) {
      v = v->kind() == Kind::Object ? v->get(k) : nullptr;
      if (!v) break;
    }
    r.append(join(s.path), v ? *v : Value());
  }
  return r;
}

namespace {

Value row1(const char* k, Value v) {
  Value r = Value::object();
  r.append(k, std::move(v));
  return r;
}

}  // namespace

// ---------------------------------------------------------------- reads

Result<QueryResult> Engine::execute_read(const ParsedStatement& st, const std::vector<Value>& params) {
  if (st.explain) {
    // Runs the query, then returns one row per step and the row count.
    std::vector<std::string> plan;
    t_plan = &plan;
    auto r = read(st, params);
    t_plan = nullptr;
    KF_TRY(r.status());
    QueryResult out;
    for (size_t i = 0; i < plan.size(); i++) {
      Value row = Value::object();
      row.append("step", Value::integer((int64_t)i + 1));
      row.append("plan", Value::text(plan[i]));
      out.rows.push_back(std::move(row));
    }
    Value last = Value::object();
    last.append("rows", Value::integer((int64_t)r->rows.size()));
    out.rows.push_back(std::move(last));
    return out;
  }
  return read(st, params);
}

Result<QueryResult> Engine::read(const ParsedStatement& st, const std::vector<Value>& params) {
  if (st.lookup) {
    // The base query first (unpaged when `required` may drop parents), then
    // each parent's children.
    auto r = read_rows(st, params, !st.lookup->required);
    KF_TRY(r.status());
    Collection* c = find(st.collection);
    Evaluator ev(params);
    QueryResult out;
    Value doc;
    RowBudget budget(opts_.max_result_bytes);
    Status over;
    for (Value& row : r->rows) {
      const Value* idv = row.get("id");
      if (!idv || idv->kind() != Kind::Int)
        return Status(Code::Syntax, "'lookup' needs rows with ids (not aggregates)", st.lookup->pos);
      const uint64_t* loc = c->ids.find(idv->as_int());
      if (!loc) continue;
      KF_TRY(decode_document(c->def, idv->as_int(), body(*loc), &doc, c));
      Value children;
      KF_TRY(lookup_children(*st.lookup, doc, ev, &children));
      if (st.lookup->required && children.items().empty()) continue;
      row.append(st.lookup->collection, std::move(children));
      if (!budget.take(row, &over)) return over;
      out.rows.push_back(std::move(row));
    }
    if (st.lookup->required) {
      KF_ASSIGN(int64_t limit, count_arg(ev, st.limit, "limit"));
      KF_ASSIGN(int64_t offset, count_arg(ev, st.offset, "offset"));
      if (offset < 0) offset = 0;
      std::vector<Value> paged;
      for (size_t i = (size_t)offset; i < out.rows.size() && (limit < 0 || paged.size() < (size_t)limit); i++)
        paged.push_back(std::move(out.rows[i]));
      out.rows = std::move(paged);
    }
    return out;
  }
  return read_rows(st, params, true);
}

// A read without its lookup; `paged` false: without its limit and offset.
Result<QueryResult> Engine::read_rows(const ParsedStatement& st, const std::vector<Value>& params, bool paged) {
  QueryResult res;
  if (st.kind == StmtKind::Collections) {
    for (auto& [name, c] : colls_) {
      Value r = Value::object();
      r.append("name", Value::text(name));
      r.append("documents", Value::integer((int64_t)c->ids.size()));
      res.rows.push_back(std::move(r));
    }
    return res;
  }
  Collection* c = find(st.collection);
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
    return res;
  }

  // get
  Evaluator ev(params);
  KF_ASSIGN(int64_t limit, count_arg(ev, st.limit, "limit"));
  KF_ASSIGN(int64_t offset, count_arg(ev, st.offset, "offset"));
  if (offset < 0 || !paged) offset = 0;
  if (!paged) limit = -1;

  bool aggregate = !st.group.empty();
  for (const SelectItem& si : st.select) aggregate |= si.expr && si.expr->kind == ExprKind::Aggregate;
  for (const OrderKey& k : st.order) aggregate |= k.expr && k.expr->kind == ExprKind::Aggregate;
  if (aggregate) {
    if (st.near_pos >= 0 || st.match_pos >= 0 || st.count)
      return Status(Code::Syntax, "aggregates and group cannot be combined with near, match or count", st.pos);
    return aggregate_query(*c, st, ev, limit, offset);
  }
  if (st.match_pos < 0 && (st.fuse || st.rerank_pos >= 0))
    return Status(Code::Syntax, std::string(st.fuse ? "'fuse'" : "'rerank'") + " needs 'match'", st.fuse ? st.fuse_pos : st.rerank_pos);
  if (st.match_pos >= 0) return match_query(*c, st, ev, limit, offset);
  if (st.near_pos >= 0) return near_query(*c, st, ev, limit, offset);

  if (st.count) {
    int64_t n = 0;
    if (!st.where) n = (int64_t)c->ids.size();
    else if (!index_count(*this, *c, ev, st.where.get(), &n))
      KF_TRY(scan_where_ids(*this, *c, ev, st.where.get(), [&](int64_t, std::string_view) { n++; return true; }));
    res.rows.push_back(row1("count", Value::integer(n)));
    return res;
  }

  Status perr;
  auto project = [&](Value doc) -> Value { return project_row(st, std::move(doc), ev, &perr); };
  RowBudget budget(opts_.max_result_bytes);

  if (st.order.empty()) {
    int64_t skipped = 0;
    KF_TRY(scan_where(*this, *c, ev, st.where.get(), [&](Value& doc) {
      if (skipped < offset) { skipped++; return true; }
      if (limit >= 0 && (int64_t)res.rows.size() >= limit) return false;
      res.rows.push_back(project(std::move(doc)));
      if (perr.is_ok()) budget.take(res.rows.back(), &perr);
      return perr.is_ok() && (limit < 0 || (int64_t)res.rows.size() < limit);
    }));
    KF_TRY(perr);
    return res;
  }

  // Ordered by one field with a @sorted index: walk the index in order (equal
  // keys by ascending id, as the sort gives), filter, stop at the limit.
  // Unless the where takes few candidates from an id lookup or another index:
  // the walk reads about want x N / candidates documents before it has `want`
  // rows (when the filter is independent of the order), sorting reads the
  // candidates once, so candidates^2 < want x N sorts them instead.
  if (st.order.size() == 1 && !st.order[0].expr) {
    int si = find_secondary(*c, st.order[0].path, true);
    if (si >= 0 && st.where) {
      std::vector<int64_t> cand;
      std::vector<std::string>* plan = t_plan;
      t_plan = nullptr;  // a probe: scan_where plans again (and notes) if it wins
      bool narrowed = id_lookup(ev, st.where.get(), &cand) || index_candidates(*this, *c, ev, st.where.get(), &cand);
      t_plan = plan;
      double n = (double)c->ids.size(), k = (double)cand.size();
      double want = limit < 0 ? n : (double)(offset + limit);
      if (narrowed && k * k < want * n) si = -1;
    }
    if (si >= 0) {
      KF_ASSIGN(SecondaryIndex * idx, secondary(*c, (size_t)si));
      KF_NOTE("index " + c->def.name + "." + join(st.order[0].path) + " (@sorted) gives the order" +
           (st.order[0].desc ? " (descending)" : ""));
      if (st.where) KF_NOTE("filter: where " + expr_text(*st.where));
      int64_t skipped = 0;
      Value doc;
      Status inner;
      RowFilter filter(ev, st.where.get(), *c);
      idx->ordered(st.order[0].desc, [&](const Value&, int64_t id) {
        if (limit >= 0 && (int64_t)res.rows.size() >= limit) return false;
        const uint64_t* loc = c->ids.find(id);
        if (!loc) return true;
        bool pass;
        inner = filter.test(id, body(*loc), &pass);
        if (inner.is_ok() && pass) inner = decode_document(c->def, id, body(*loc), &doc, c);
        if (!inner.is_ok()) return false;
        if (!pass) return true;
        if (skipped < offset) {
          skipped++;
          return true;
        }
        res.rows.push_back(project(doc));
        return perr.is_ok() && budget.take(res.rows.back(), &perr);
      });
      KF_TRY(inner);
      KF_TRY(perr);
      return res;
    }
  }
  KF_NOTE(std::string("sort by ") + (st.order[0].expr ? st.order[0].label : join(st.order[0].path)) +
       (st.order.size() > 1 ? " and more" : "") + (limit >= 0 ? " (top " + std::to_string(offset + limit) + ")" : ""));

  // Ordered: collect keys, sort (ties by id: the scan is in id order and the
  // sort is stable), page.
  struct Item {
    std::vector<Value> keys;
    Value doc;
  };
  std::vector<Item> items;
  KF_TRY(scan_where(*this, *c, ev, st.where.get(), [&](const Value& doc) {
    Item it;
    for (const OrderKey& k : st.order) {
      if (k.expr) {
        Value kv;
        perr = ev.eval(*k.expr, doc, &kv);
        if (!perr.is_ok()) return false;
        it.keys.push_back(std::move(kv));
        continue;
      }
      const Value* v = &doc;
      for (const std::string& p : k.path) {
        v = v->kind() == Kind::Object ? v->get(p) : nullptr;
        if (!v) break;
      }
      it.keys.push_back(v ? *v : Value());
    }
    it.doc = doc;
    if (!budget.take(it.doc, &perr)) return false;
    items.push_back(std::move(it));
    return true;
  }));
  KF_TRY(perr);
  auto less = [&](const Item& a, const Item& b) {
    for (size_t i = 0; i < st.order.size(); i++) {
      int c2 = compare(a.keys[i], b.keys[i]);
      if (c2) return st.order[i].desc ? c2 > 0 : c2 < 0;
    }
    return false;
  };
  size_t want = limit < 0 ? items.size() : std::min<size_t>(items.size(), (size_t)(offset + limit));
  if (want < items.size() / 4) {
    // Top-k: stable via the id as the last key.
    auto less_id = [&](const Item& a, const Item& b) {
      if (less(a, b)) return true;
      if (less(b, a)) return false;
      return a.doc.items()[0].as_int() < b.doc.items()[0].as_int();
    };
    std::partial_sort(items.begin(), items.begin() + want, items.end(), less_id);
  } else {
    std::stable_sort(items.begin(), items.end(), less);
  }
  for (size_t i = (size_t)offset; i < want; i++) res.rows.push_back(project(std::move(items[i].doc)));
  KF_TRY(perr);
  return res;
}


// ---------------------------------------------------------------- near

struct DocHit {
  float distance;
  int64_t id;
  bool operator<(const DocHit& o) const { return distance < o.distance || (distance == o.distance && id < o.id); }
};


namespace {

// The distance shown to users: cosine 1 - cos, l2 Euclidean, dot -a.b. It is
// a float; shown as the double with the float's shortest decimal form (0.1,
// not 0.10000000149011612).
double shown_distance(Metric m, float d) {
  // Rounding can make 1 - cos of a vector to itself a hair below 0 (and an
  // l2 square too): a distance shown is never negative, but dot's may be.
  if (m != Metric::Dot && d < 0) d = 0;
  return float_as_shortest_double(m == Metric::L2 ? std::sqrt(d) : d);
}



void keep_best(std::vector<DocHit>& heap, size_t k, DocHit h) {
  if (heap.size() < k) {
    heap.push_back(h);
    std::push_heap(heap.begin(), heap.end());
  } else if (k && h < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = h;
    std::push_heap(heap.begin(), heap.end());
  }
}

}  // namespace

Result<QueryResult> Engine::near_query(Collection& c, const ParsedStatement& st, const Evaluator& ev, int64_t limit,
                                       int64_t offset) {
  if (st.count) return Status(Code::Syntax, "'count' cannot be combined with 'near'", st.near_pos);
  if (!st.order.empty()) return Status(Code::Syntax, "'near' orders rows by distance; it cannot be combined with 'order'", st.order[0].pos);
  size_t need = (size_t)offset + (limit < 0 ? 10 : (size_t)limit);
  thread_local std::vector<DocHit> heap;
  Metric metric;
  KF_TRY(near_hits(c, st, ev, need, &heap, &metric));
  QueryResult res;
  res.rows.reserve(heap.size() - std::min(heap.size(), (size_t)offset));
  // `select id` (a common shape for a search): the rows need no document.
  bool ids_only = !st.select.empty();
  for (const SelectItem& s : st.select)
    if (s.expr || s.path.size() != 1 || s.path[0] != "id") ids_only = false;
  for (size_t i = (size_t)offset; i < heap.size(); i++) {
    Value row;
    if (ids_only) {
      // Every document an index names exists (writes keep both in step).
      row = Value::object();
      row.reserve_keys(2);
      row.append("id", Value::integer(heap[i].id));
    } else {
      const uint64_t* loc = c.ids.find(heap[i].id);
      if (!loc) continue;
      Value d;
      KF_TRY(decode_document(c.def, heap[i].id, body(*loc), &d, &c));
      Status perr;
      row = project_row(st, std::move(d), ev, &perr);
      KF_TRY(perr);
    }
    row.append("_distance", Value::real(shown_distance(metric, heap[i].distance)));
    res.rows.push_back(std::move(row));
  }
  return res;
}

// The `need` nearest documents passing the filter, nearest first.
Status Engine::near_hits(Collection& c, const ParsedStatement& st, const Evaluator& ev, size_t need,
                         std::vector<DocHit>* out, Metric* metric_out) {
  const Field* f = c.def.field(st.near_field);
  if (!f) return not_found_field(st.near_field, c.def, st.near_pos);
  if (f->type.kind != TypeKind::Vector)
    return Status(Code::Type, "'near' needs a vector field; '" + f->name + "' is " + type_name(f->type), st.near_pos);
  // A query vector given as one, of the field's dimension, is used in place
  // (prepare_query checks its values); anything else is coerced first.
  const Value* qvp = ev.ref(*st.near_value);
  Value raw, qv;
  if (!qvp || qvp->kind() != Kind::Vector || qvp->vec().size() != f->type.dim) {
    KF_TRY(ev.constant(*st.near_value, &raw));
    Type qt = f->type;
    qt.f16 = false;
    Status cs = coerce(raw, qt, "near " + f->name, &qv);
    if (!cs.is_ok()) return Status(cs.code(), cs.message(), st.near_value->pos);
    qvp = &qv;
  }
  KF_ASSIGN(int64_t ef, count_arg(ev, st.near_ef, "ef"));
  if (st.near_ef && (ef < 1 || ef > 100000)) return Status(Code::Invalid, "ef must be between 1 and 100000", st.near_ef->pos);

  auto it = c.vindex.find(f->id);
  HnswIndex* index = it == c.vindex.end() ? nullptr : it->second.get();
  HnswParams params = index ? index->params() : HnswParams{};
  *metric_out = params.metric;
  // Without an index, an index's shape prepares the query and the documents.
  std::optional<HnswIndex> unindexed;
  if (!index) unindexed.emplace(f->type.dim, false, params);
  HnswIndex& shape = index ? *index : *unindexed;
  thread_local std::vector<float> q;  // reused: a search allocates nothing once warm
  Status ps = shape.prepare_query(qvp->vec().data(), &q, "near " + f->name);
  if (!ps.is_ok()) return Status(ps.code(), ps.message(), st.near_value->pos);
  if (ef < 0) ef = params.ef_search;

  // Filter test of one document.
  Status inner;
  RowFilter filter(ev, st.where.get(), c);
  auto passes = [&](int64_t id) {
    if (!st.where) return true;
    const uint64_t* loc = c.ids.find(id);
    if (!loc) return false;
    bool pass;
    inner = filter.test(id, body(*loc), &pass);
    return inner.is_ok() && pass;
  };

  std::vector<DocHit>& heap = *out;  // max-heap of the best `need`
  heap.clear();
  thread_local std::vector<int64_t> ids;
  auto exact_filtered = [&]() -> Status {
    heap.clear();
    if (index)  // the vectors are in the index: no document is decoded
      return scan_where_ids(*this, c, ev, st.where.get(), [&](int64_t id, std::string_view) {
        int64_t node = index->node_of(id);
        if (node >= 0) keep_best(heap, need, {index->distance_to(q.data(), (uint32_t)node), id});
        return true;
      });
    std::vector<float> v;
    return scan_where(*this, c, ev, st.where.get(), [&](const Value& d) {
      const Value* fv = d.get(f->name);
      if (fv && fv->kind() == Kind::Vector && shape.prepare_query(fv->vec().data(), &v, f->name).is_ok())
        keep_best(heap, need, {distance(params.metric, q.data(), v.data(), f->type.dim), d.items()[0].as_int()});
      return true;
    });
  };
  auto expand = [&](const std::vector<Hit>& hits) {
    heap.clear();
    for (const Hit& h : hits) index->prefetch_docs(h.node);  // the misses side by side
    for (const Hit& h : hits) {
      ids.clear();
      index->docs_of(h.node, &ids);
      for (int64_t id : ids)
        if (passes(id)) keep_best(heap, need, {h.distance, id});
    }
  };

  std::string fname = t_plan ? c.def.name + "." + f->name : std::string();  // for explain's notes
  if (!index) {
    KF_NOTE("near " + fname + ": exact scan of the documents (no index), cosine");
    KF_TRY(exact_filtered());
  } else if (!st.where) {
    thread_local std::vector<Hit> hits;
    if (st.near_exact) index->exact(q.data(), need, nullptr, &hits);
    else index->search(q.data(), need, (size_t)ef, nullptr, &hits);
    if (t_plan) KF_NOTE("near " + fname + (st.near_exact ? ": exact scan of the vector table" : ": hnsw search, ef " + std::to_string(ef)));
    expand(hits);
  } else if (st.near_exact) {
    KF_NOTE("near " + fname + ": exact over the documents passing the filter");
    KF_TRY(exact_filtered());
  } else {
    // Plan by cost, in documents decoded and tested. Exact: the candidates an
    // index (or an id lookup) gives for the filter, else every document.
    // Graph: walking it with the filter tests about ef / (fraction passing)
    // nodes, the fraction estimated from a sample of the graph's nodes (an
    // upper bound: a filter that follows the vectors needs fewer).
    std::vector<int64_t> cand;
    bool narrowed = id_lookup(ev, st.where.get(), &cand) || index_candidates(*this, c, ev, st.where.get(), &cand);
    size_t nodes = index->nodes(), sample = std::min<size_t>(nodes, 256), pass = 0, seen = 0;
    for (size_t i = 0; i < sample; i++) {
      ids.clear();
      index->docs_of((uint32_t)(i * nodes / sample), &ids);
      if (ids.empty()) continue;
      seen++;
      pass += passes(ids[0]);
      KF_TRY(inner);
    }
    double docs = (double)index->documents();
    double est = seen ? (double)pass / (double)seen * docs : 0;
    if (narrowed) est = std::min(est, (double)cand.size());
    // Testing a candidate costs about what visiting a graph node does. The
    // walk's estimate assumes the filter is independent of the vectors: one
    // that follows them (matches near the query) needs fewer nodes, one
    // against them (matches far away) many more, up to every match and its
    // neighbours. So an index's candidates are searched exactly when there
    // are few of them, or not many more than twice the walk's estimate: the
    // exact cost is known, the walk's is not.
    double graph_cost = pass ? (double)std::max<size_t>((size_t)ef, need) * docs / std::max(est, 1.0) : INFINITY;
    double exact_cost = (double)(narrowed ? cand.size() : c.ids.size());
    if (narrowed && (exact_cost <= std::max<double>(4.0 * (double)need, 1000.0) || exact_cost <= 2 * graph_cost))
      exact_cost = 0;
    auto exact_plan = [&]() -> Status {
      if (!narrowed) return exact_filtered();
      heap.clear();
      KF_NOTE("filter: where " + expr_text(*st.where));
      for (int64_t id : cand) {
        int64_t node = index->node_of(id);
        if (node >= 0 && passes(id)) keep_best(heap, need, {index->distance_to(q.data(), (uint32_t)node), id});
        KF_TRY(inner);
      }
      return Status::ok();
    };
    std::string about = "near " + fname + ": about " + std::to_string((int64_t)est) + " documents pass the filter: ";
    if (exact_cost <= graph_cost) {
      KF_NOTE(about + "exact over " +
           (narrowed ? "the " + std::to_string(cand.size()) + " candidates of an index" : std::string("them")));
      KF_TRY(exact_plan());  // few match: searching them all is cheap and exact
    } else {
      KF_NOTE(about + "hnsw search, ef " + std::to_string(ef) + ", testing candidates");
      std::vector<int64_t> tmp;
      std::function<bool(uint32_t)> accept = [&](uint32_t node) {
        tmp.clear();
        index->docs_of(node, &tmp);
        for (int64_t id : tmp)
          if (passes(id)) return true;
        return false;
      };
      std::vector<Hit> hits;
      index->search(q.data(), need, (size_t)ef, accept, &hits);
      KF_TRY(inner);
      expand(hits);
      if (heap.size() < need) {
        KF_NOTE("near " + fname + ": the graph gave too few: exact over the filtered documents");
        KF_TRY(exact_plan());
      }
    }
  }
  KF_TRY(inner);
  std::sort(heap.begin(), heap.end());
  return Status::ok();
}

// ---------------------------------------------------------------- match

Result<QueryResult> Engine::match_query(Collection& c, const ParsedStatement& st, const Evaluator& ev, int64_t limit,
                                        int64_t offset) {
  if (st.count) return Status(Code::Syntax, "'count' cannot be combined with 'match'", st.match_pos);
  if (!st.order.empty())
    return Status(Code::Syntax, "'match' orders rows by score; it cannot be combined with 'order'", st.order[0].pos);
  if (st.near_pos >= 0 && !st.fuse)
    return Status(Code::Syntax, "'match' and 'near' together need 'fuse' (reciprocal rank fusion)", st.near_pos);
  if (st.fuse && st.near_pos < 0) return Status(Code::Syntax, "'fuse' needs both 'match' and 'near'", st.fuse_pos);
  if (st.fuse && st.rerank_pos >= 0) return Status(Code::Syntax, "'rerank' cannot be combined with 'fuse'", st.rerank_pos);
  const Field* f = c.def.field(st.match_field);
  if (!f) return not_found_field(st.match_field, c.def, st.match_pos);
  if (f->index.kind != IndexKind::Text)
    return Status(Code::Invalid, "'match' needs a @text index on '" + f->name + "' (create index on " + c.def.name + " (" +
                                     f->name + ") @text)", st.match_pos);
  Value qv;
  KF_TRY(ev.constant(*st.match_value, &qv));
  if (qv.kind() != Kind::Text)
    return Status(Code::Type, std::string("'match' takes text, got ") + kind_name(qv.kind()), st.match_value->pos);
  std::vector<std::string> tokens;
  tokenize_text(qv.as_string(), &tokens);
  size_t need = (size_t)offset + (limit < 0 ? 10 : (size_t)limit);
  KF_ASSIGN(int64_t cand, count_arg(ev, st.candidates, "candidates"));
  KF_ASSIGN(TextIndex * ti, text_index(c, *f));
  KF_NOTE("match " + c.def.name + "." + f->name + ": bm25 top-k (wand) over " + std::to_string(tokens.size()) + " tokens" +
       (st.where ? ", filtering while merging" : ""));

  Status inner;
  RowFilter filter(ev, st.where.get(), c);
  std::function<bool(int64_t)> accept;
  if (st.where)
    accept = [&](int64_t id) {
      const uint64_t* loc = c.ids.find(id);
      if (!loc) return false;
      bool pass;
      inner = filter.test(id, body(*loc), &pass);
      return inner.is_ok() && pass;
    };

  struct Out {
    int64_t id;
    double score;
    double distance;  // rerank
  };
  std::vector<Out> rows;
  std::vector<TextHit> hits;
  Metric metric = Metric::Cosine;
  if (st.fuse) {
    KF_ASSIGN(int64_t k, count_arg(ev, st.fuse_k, "k"));
    double kk = k < 0 ? 60.0 : (double)k;
    size_t n = cand < 0 ? std::max<size_t>(100, need) : std::max<size_t>((size_t)cand, need);
    ti->search(tokens, n, accept, &hits);
    KF_TRY(inner);
    std::vector<DocHit> near;
    KF_TRY(near_hits(c, st, ev, n, &near, &metric));
    std::unordered_map<int64_t, double> fused;
    for (size_t i = 0; i < hits.size(); i++) fused[hits[i].id] += 1.0 / (kk + (double)(i + 1));
    for (size_t i = 0; i < near.size(); i++) fused[near[i].id] += 1.0 / (kk + (double)(i + 1));
    for (auto& [id, sc] : fused) rows.push_back({id, sc, 0});
    std::sort(rows.begin(), rows.end(), [](const Out& a, const Out& b) { return a.score > b.score || (a.score == b.score && a.id < b.id); });
  } else if (st.rerank_pos >= 0) {
    const Field* vf = c.def.field(st.rerank_field);
    if (!vf) return not_found_field(st.rerank_field, c.def, st.rerank_pos);
    if (vf->type.kind != TypeKind::Vector)
      return Status(Code::Type, "'rerank' needs a vector field; '" + vf->name + "' is " + type_name(vf->type), st.rerank_pos);
    Value raw, rv;
    KF_TRY(ev.constant(*st.rerank_value, &raw));
    Type qt = vf->type;
    qt.f16 = false;
    Status cs = coerce(raw, qt, "rerank " + vf->name, &rv);
    if (!cs.is_ok()) return Status(cs.code(), cs.message(), st.rerank_value->pos);
    auto vi = c.vindex.find(vf->id);
    HnswParams params = vi != c.vindex.end() ? vi->second->params() : HnswParams{};
    metric = params.metric;
    HnswIndex shape(vf->type.dim, false, params);
    std::vector<float> q, v;
    Status ps = shape.prepare_query(rv.vec().data(), &q, "rerank " + vf->name);
    if (!ps.is_ok()) return Status(ps.code(), ps.message(), st.rerank_value->pos);
    size_t n = cand < 0 ? std::max<size_t>(100, need) : (size_t)cand;
    ti->search(tokens, n, accept, &hits);
    KF_TRY(inner);
    for (const TextHit& h : hits) {
      const uint64_t* loc = c.ids.find(h.id);
      if (!loc) continue;
      Value fvv;
      KF_TRY(decode_field(body(*loc), vf->id, &fvv, &c));
      if (fvv.kind() != Kind::Vector || !shape.prepare_query(fvv.vec().data(), &v, vf->name).is_ok()) continue;
      rows.push_back({h.id, h.score, (double)distance(metric, q.data(), v.data(), vf->type.dim)});
    }
    std::sort(rows.begin(), rows.end(), [](const Out& a, const Out& b) { return a.distance < b.distance || (a.distance == b.distance && a.id < b.id); });
  } else {
    ti->search(tokens, need, accept, &hits);
    KF_TRY(inner);
    for (const TextHit& h : hits) rows.push_back({h.id, h.score, 0});
  }

  QueryResult res;
  for (size_t i = (size_t)offset; i < rows.size() && i < need; i++) {
    const uint64_t* loc = c.ids.find(rows[i].id);
    if (!loc) continue;
    Value d;
    KF_TRY(decode_document(c.def, rows[i].id, body(*loc), &d, &c));
    Status perr;
    Value row = project_row(st, std::move(d), ev, &perr);
    KF_TRY(perr);
    row.append("_score", Value::real(rows[i].score));
    if (st.rerank_pos >= 0) row.append("_distance", Value::real(shown_distance(metric, (float)rows[i].distance)));
    res.rows.push_back(std::move(row));
  }
  return res;
}



// ---------------------------------------------------------------- lookup

Status Engine::lookup_children(const Lookup& lk, const Value& parent, const Evaluator& ev, Value* out) {
  Collection* c = find(lk.collection);
  if (!c) return no_collection(lk.collection, lk.pos);
  const ParsedStatement& cs = *lk.child;
  *out = Value::list();
  // The parent's key.
  const Value* key = &parent;
  for (const std::string& k : lk.parent_path) {
    key = key->kind() == Kind::Object ? key->get(k) : nullptr;
    if (!key) break;
  }
  std::vector<int64_t> ids;
  if (lk.child_field == "id") {
    if (key && key->kind() == Kind::Int) ids.push_back(key->as_int());
  } else {
    if (!c->def.field(lk.child_field)) return not_found_field(lk.child_field, c->def, lk.child_pos);
    int i = find_secondary(*c, {lk.child_field}, false);
    if (i < 0)
      return Status(Code::Invalid, "lookup on '" + lk.collection + "." + lk.child_field +
                                       "' needs it to be id or to carry @hash (create index on " + lk.collection + " (" +
                                       lk.child_field + ") @hash)", lk.child_pos);
    KF_ASSIGN(SecondaryIndex * si, secondary(*c, (size_t)i));
    if (key) si->equal(*key, &ids);
  }
  KF_ASSIGN(int64_t limit, count_arg(ev, cs.limit, "limit"));
  KF_ASSIGN(int64_t offset, count_arg(ev, cs.offset, "offset"));
  if (offset < 0) offset = 0;
  struct Child {
    std::vector<Value> keys;
    Value doc;
  };
  std::vector<Child> kids;
  Value doc;
  RowFilter filter(ev, cs.where.get(), *c);
  for (int64_t id : ids) {
    const uint64_t* loc = c->ids.find(id);
    if (!loc) continue;
    bool pass;
    KF_TRY(filter.test(id, body(*loc), &pass));
    if (!pass) continue;
    KF_TRY(decode_document(c->def, id, body(*loc), &doc, c));
    Child ch;
    for (const OrderKey& k : cs.order) {
      Value kv;
      if (k.expr) {
        KF_TRY(ev.eval(*k.expr, doc, &kv));
      } else {
        const Value* v = &doc;
        for (const std::string& p : k.path) {
          v = v->kind() == Kind::Object ? v->get(p) : nullptr;
          if (!v) break;
        }
        if (v) kv = *v;
      }
      ch.keys.push_back(std::move(kv));
    }
    ch.doc = doc;
    kids.push_back(std::move(ch));
  }
  std::stable_sort(kids.begin(), kids.end(), [&](const Child& a, const Child& b) {
    for (size_t i = 0; i < cs.order.size(); i++) {
      int c2 = compare(a.keys[i], b.keys[i]);
      if (c2) return cs.order[i].desc ? c2 > 0 : c2 < 0;
    }
    return false;
  });
  for (size_t i = (size_t)offset; i < kids.size() && (limit < 0 || out->items().size() < (size_t)limit); i++) {
    Status perr;
    Value row = project_row(cs, kids[i].doc, ev, &perr);
    KF_TRY(perr);
    if (cs.lookup) {
      Value grand;
      KF_TRY(lookup_children(*cs.lookup, kids[i].doc, ev, &grand));
      if (cs.lookup->required && grand.items().empty()) continue;
      row.append(cs.lookup->collection, std::move(grand));
    }
    out->push(std::move(row));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- aggregates

namespace {

std::string normalize_label(const std::string& s) {
  std::string o;
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n') o += (c >= 'A' && c <= 'Z') ? char(c + 32) : c;
  return o;
}

struct Acc {
  int64_t count = 0;
  bool any = false, is_float = false;
  int64_t isum = 0;
  double fsum = 0;
  Value best;
};

struct GroupLess {
  bool operator()(const std::vector<Value>& a, const std::vector<Value>& b) const {
    for (size_t i = 0; i < a.size(); i++)
      if (int c = compare(a[i], b[i])) return c < 0;
    return false;
  }
};

}  // namespace

namespace {

// A group over one field that has a secondary index, counting, with no
// filter: the groups and their sizes are the index's keys and how many
// documents hold each, and no document is read but one per group, the first
// (lowest id) holding the key, whose value names the group as a scan would
// show it (the index keeps 2.0 as 2). Documents the index has no key for
// form the null group.
bool groups_from_index(Engine& eng, Collection& c, const ParsedStatement& st, const std::vector<const Expr*>& aggs,
                       std::map<std::vector<Value>, std::vector<Acc>, GroupLess>* groups) {
  if (st.where || st.group.size() != 1) return false;
  const std::vector<std::string>& path = st.group[0].path;
  for (const Expr* e : aggs) {
    if (e->path[0] != "count") return false;
    if (!e->kids.empty() && (e->kids[0]->kind != ExprKind::Path || e->kids[0]->path != path)) return false;
  }
  int si = find_secondary(c, path, false);
  if (si < 0) return false;
  auto idx = eng.secondary(c, (size_t)si);
  if (!idx.is_ok()) return false;  // the scan reports it
  const Field* f = c.def.field(path[0]);
  uint64_t keyed = 0;
  bool ok = true;
  (*idx)->groups([&](int64_t first, size_t n) {
    const uint64_t* loc = c.ids.find(first);
    Value v;
    if (!loc || !decode_field(eng.body(*loc), f->id, &v, &c).is_ok()) return ok = false;
    for (size_t i = 1; i < path.size() && !v.is_null(); i++) {
      const Value* x = v.kind() == Kind::Object ? v.get(path[i]) : nullptr;
      v = x ? *x : Value();
    }
    std::vector<Acc>& accs = (*groups)[{std::move(v)}];
    accs.resize(aggs.size());
    for (Acc& a : accs) a.count += (int64_t)n;
    keyed += n;
    return true;
  });
  if (!ok) {
    groups->clear();
    return false;
  }
  if (keyed < c.ids.size()) {
    std::vector<Acc>& accs = (*groups)[{Value()}];
    accs.resize(aggs.size());
    for (size_t i = 0; i < aggs.size(); i++)
      if (aggs[i]->kids.empty()) accs[i].count += (int64_t)(c.ids.size() - keyed);  // count(key) skips nulls
  }
  KF_NOTE("group " + join(path) + ": the keys and counts of index " + c.def.name + "." + join(path) + " (@" +
          secondary_name(c.def.secondary[(size_t)si].kind) + "), " + std::to_string(groups->size()) + " groups");
  return true;
}

}  // namespace

Result<QueryResult> Engine::aggregate_query(Collection& c, const ParsedStatement& st, const Evaluator& ev, int64_t limit,
                                            int64_t offset) {
  std::vector<std::string> group_labels;
  for (const SelectItem& g : st.group) group_labels.push_back(join(g.path));
  // The aggregates computed: those selected, then those only ordered by.
  std::vector<const Expr*> aggs;
  std::vector<std::string> agg_labels;
  auto agg_index = [&](const Expr* e, const std::string& label) -> int {
    std::string n = normalize_label(label);
    for (size_t i = 0; i < agg_labels.size(); i++)
      if (agg_labels[i] == n) return (int)i;
    aggs.push_back(e);
    agg_labels.push_back(n);
    return (int)aggs.size() - 1;
  };
  struct Column {
    std::string label;
    int group = -1;  // a group key
    int agg = -1;    // or an aggregate
  };
  auto resolve = [&](const std::vector<std::string>& path, const ExprPtr& expr, const std::string& label, int64_t pos,
                     Column* col) -> Status {
    if (expr) {
      if (expr->kind != ExprKind::Aggregate)
        return Status(Code::Syntax, "with aggregates, select and order take group keys and aggregates only", pos);
      if (expr->path[0] != "count" || !expr->kids.empty()) KF_TRY(check_expr(c.def, *expr->kids[0]));
      col->label = label;
      col->agg = agg_index(expr.get(), label);
      return Status::ok();
    }
    std::string j = join(path);
    for (size_t i = 0; i < group_labels.size(); i++)
      if (group_labels[i] == j) {
        col->label = j;
        col->group = (int)i;
        return Status::ok();
      }
    return Status(Code::Syntax, "'" + j + "' is neither a group key nor an aggregate", pos);
  };
  std::vector<Column> cols, order_cols;
  if (st.select.empty()) {
    for (size_t i = 0; i < group_labels.size(); i++) cols.push_back({group_labels[i], (int)i, -1});
  }
  for (const SelectItem& si : st.select) {
    Column col;
    KF_TRY(resolve(si.path, si.expr, si.label, si.pos, &col));
    cols.push_back(col);
  }
  for (const OrderKey& k : st.order) {
    Column col;
    KF_TRY(resolve(k.path, k.expr, k.label, k.pos, &col));
    order_cols.push_back(col);
  }

  std::map<std::vector<Value>, std::vector<Acc>, GroupLess> groups;
  if (st.group.empty()) groups[{}].resize(aggs.size());  // a whole-result aggregate has one row, even over nothing
  Status inner;
  std::vector<Value> key;
  auto add = [&](const Value& doc) -> bool {
    key.clear();
    for (const SelectItem& g : st.group) {
      const Value* v = &doc;
      for (const std::string& p : g.path) {
        v = v->kind() == Kind::Object ? v->get(p) : nullptr;
        if (!v) break;
      }
      key.push_back(v ? *v : Value());
    }
    auto& accs = groups[key];
    if (accs.empty()) accs.resize(aggs.size());
    for (size_t i = 0; i < aggs.size(); i++) {
      const Expr& e = *aggs[i];
      const std::string& fn = e.path[0];
      Acc& a = accs[i];
      if (e.kids.empty()) {  // count(*)
        a.count++;
        continue;
      }
      Value v;
      inner = ev.eval(*e.kids[0], doc, &v);
      if (!inner.is_ok()) return false;
      if (v.is_null()) continue;
      a.count++;
      if (fn == "sum" || fn == "avg") {
        if (!v.is_number()) {
          inner = Status(Code::Type, fn + "() needs numbers, got " + kind_name(v.kind()), e.pos);
          return false;
        }
        if (v.kind() == Kind::Float && !a.is_float) {
          a.is_float = true;
          a.fsum = (double)a.isum;
        }
        if (a.is_float) {
          a.fsum += v.as_number();
        } else {
          int64_t sum;
          if (!__builtin_add_overflow(a.isum, v.as_int(), &sum)) {
            a.isum = sum;
          } else if (fn == "avg") {  // an average continues in floating point
            a.is_float = true;
            a.fsum = (double)a.isum + (double)v.as_int();
          } else {
            inner = Status(Code::Limit, agg_labels[i] + " overflows int64", e.pos);
            return false;
          }
        }
      } else if (fn == "min" || fn == "max") {
        if (!a.any || (fn == "min" ? compare(v, a.best) < 0 : compare(v, a.best) > 0)) a.best = v;
      }
      a.any = true;
    }
    return true;
  };
  if (!groups_from_index(*this, c, st, aggs, &groups)) {
    // Each document decoded as far as the groups and aggregates read it.
    PartialDoc part(c);
    for (const SelectItem& g : st.group) part.need(g.path);
    for (const Expr* e : aggs)
      if (!e->kids.empty()) part.need(*e->kids[0]);
    part.shape();
    KF_TRY(scan_where_ids(*this, c, ev, st.where.get(), [&](int64_t id, std::string_view b) {
      inner = part.load(id, b);
      return inner.is_ok() && add(part.doc());
    }));
  }
  KF_TRY(inner);

  struct Row {
    const std::vector<Value>* key;
    std::vector<Value> aggs;
  };
  std::vector<Row> rows;
  for (auto& [k, accs] : groups) {
    Row r{&k, {}};
    for (size_t i = 0; i < aggs.size(); i++) {
      const std::string& fn = aggs[i]->path[0];
      const Acc& a = accs[i];
      if (fn == "count") r.aggs.push_back(Value::integer(a.count));
      else if (!a.any) r.aggs.push_back(Value());
      else if (fn == "sum") r.aggs.push_back(a.is_float ? Value::real(a.fsum) : Value::integer(a.isum));
      else if (fn == "avg") r.aggs.push_back(Value::real((a.is_float ? a.fsum : (double)a.isum) / (double)a.count));
      else r.aggs.push_back(a.best);
    }
    rows.push_back(std::move(r));
  }
  auto value_of = [&](const Row& r, const Column& col) -> const Value& {
    return col.group >= 0 ? (*r.key)[col.group] : r.aggs[col.agg];
  };
  if (!order_cols.empty()) {
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      for (size_t i = 0; i < order_cols.size(); i++) {
        int c2 = compare(value_of(a, order_cols[i]), value_of(b, order_cols[i]));
        if (c2) return st.order[i].desc ? c2 > 0 : c2 < 0;
      }
      return false;  // ties keep group-key order
    });
  }
  QueryResult res;
  size_t end = limit < 0 ? rows.size() : std::min(rows.size(), (size_t)(offset + limit));
  for (size_t i = (size_t)offset; i < end; i++) {
    Value out = Value::object();
    for (const Column& col : cols) out.append(col.label, value_of(rows[i], col));
    res.rows.push_back(std::move(out));
  }
  return res;
}

// ---------------------------------------------------------------- writes

namespace {

// Builds the typed field values of one document from its given value.
// A value that already has its field's type needs no conversion (and is moved).
bool already_typed(const Value& v, const Type& t) {
  switch (t.kind) {
    case TypeKind::Bool: return v.kind() == Kind::Bool;
    case TypeKind::Int: return v.kind() == Kind::Int;
    case TypeKind::Text: return v.kind() == Kind::Text;
    case TypeKind::Timestamp: return v.kind() == Kind::Timestamp;
    case TypeKind::Float: return v.kind() == Kind::Float && std::isfinite(v.as_float());
    default: return false;
  }
}

// Builds a document's typed fields from `in`, whose values it may move from.
Status build_document(const CollectionDef& def, Value& in, const Expr* lit, int64_t pos, Value* fields,
                      bool* has_id, int64_t* id) {
  if (in.kind() != Kind::Object)
    return Status(Code::Type, std::string("expected a document (an object), got ") + kind_name(in.kind()), pos);
  *fields = Value::object();
  *has_id = false;
  for (size_t i = 0; i < in.keys().size(); i++) {
    const std::string& k = in.keys()[i];
    Value& v = in.mutable_items()[i];
    int64_t kpos = lit && lit->kind == ExprKind::ObjectLit && i < lit->kids.size() ? lit->kids[i]->pos : pos;
    if (k == "id") {
      if (v.is_null()) continue;
      if (v.kind() != Kind::Int) return Status(Code::Type, std::string("'id' must be an int, got ") + kind_name(v.kind()), kpos);
      *has_id = true;
      *id = v.as_int();
      continue;
    }
    const Field* f = def.field(k);
    if (!f) return not_found_field(k, def, kpos);
    if (already_typed(v, f->type)) {
      if (v.kind() == Kind::Text && !valid_utf8(v.as_string()))
        return Status(Code::Type, "'" + k + "' is not valid UTF-8 text", kpos);
      fields->append(k, std::move(v));
      continue;
    }
    Value t;
    Status st = coerce(v, f->type, k, &t);
    if (!st.is_ok()) return Status(st.code(), st.message(), kpos);
    if (t.kind() == Kind::Text && !valid_utf8(t.as_string()))
      return Status(Code::Type, "'" + k + "' is not valid UTF-8 text", kpos);
    fields->append(k, std::move(t));
  }
  for (const Field& f : def.fields) {
    if (!f.required) continue;
    const Value* v = fields->get(f.name);
    if (!v || v->is_null()) return Status(Code::Constraint, "required field '" + f.name + "' is missing", pos);
  }
  return Status::ok();
}

void op_put(std::string& ops, uint32_t cid, int64_t id, std::string_view body) {
  put_u8(ops, format::kOpPut);
  put_varint(ops, cid);
  put_varint(ops, zigzag(id));
  put_str(ops, body);
}

Status check_doc_size(size_t n, int64_t pos) {
  if (n > kMaxDocumentBytes) return Status(Code::Limit, "document is larger than 16 MiB encoded", pos);
  return Status::ok();
}

// The depth of the deepest value inside `v` (0 for a scalar or an empty
// list or object), as the codec counts it.
int nested_depth(const Value& v) {
  if (v.kind() != Kind::List && v.kind() != Kind::Object) return 0;
  int d = 0;
  for (const Value& k : v.items()) d = std::max(d, 1 + nested_depth(k));
  return d;
}

// json path assignment: creates objects along the way.
Status assign_path(Value* root, const std::vector<std::string>& path, size_t from, Value v, int64_t pos) {
  Value* cur = root;
  for (size_t i = from; i < path.size(); i++) {
    if (cur->is_null()) *cur = Value::object();
    if (cur->kind() != Kind::Object)
      return Status(Code::Type, "'" + join(std::vector<std::string>(path.begin(), path.begin() + i)) + "' is not an object", pos);
    if (i + 1 == path.size()) {
      cur->set(path[i], std::move(v));
      return Status::ok();
    }
    Value* next = cur->get_mut(path[i]);
    if (!next) {
      cur->set(path[i], Value::object());
      next = cur->get_mut(path[i]);
    }
    cur = next;
  }
  return Status::ok();
}

}  // namespace


// @unique: the documents a statement writes, checked together against each
// other and against the index (a document the statement rewrites no longer
// holds its old value).
class UniqueCheck {
 public:
  UniqueCheck(Engine& eng, Collection& c) : eng_(eng), c_(c) {
    for (size_t i = 0; i < c.def.secondary.size(); i++)
      if (c.def.secondary[i].kind == IndexKind::Unique) uniq_.push_back(i);
  }
  bool active() const { return !uniq_.empty(); }
  // `doc` holds the new field values by name.
  void add(int64_t id, const Value& doc, int64_t pos) {
    if (uniq_.empty()) return;
    Entry e{id, pos, {}};
    for (size_t i : uniq_) {
      const SecondaryDef& d = c_.def.secondary[i];
      const Field* f = c_.def.field_by_id(d.field_id);
      const Value* v = f ? doc.get(f->name) : nullptr;
      for (const std::string& k : d.subpath) v = v && v->kind() == Kind::Object ? v->get(k) : nullptr;
      e.keys.push_back(v ? SecondaryIndex::normalize(*v) : Value());
    }
    written_.insert(id);
    entries_.push_back(std::move(e));
  }
  Status check() {
    for (size_t u = 0; u < uniq_.size(); u++) {
      const SecondaryDef& d = c_.def.secondary[uniq_[u]];
      std::string label = c_.def.field_by_id(d.field_id)->name;
      for (const std::string& k : d.subpath) label += "." + k;
      KF_ASSIGN(SecondaryIndex * idx, eng_.secondary(c_, uniq_[u]));
      std::map<std::string, int64_t> seen;
      for (const Entry& e : entries_) {
        const Value& key = e.keys[u];
        if (key.is_null()) continue;
        std::string kb = to_json(key);
        auto it = seen.find(kb);
        if (it != seen.end() && it->second != e.id)
          return Status(Code::Constraint, "unique '" + label + "': " + kb + " is given to documents " +
                                              std::to_string(it->second) + " and " + std::to_string(e.id) + "; nothing was written", e.pos);
        seen[kb] = e.id;
        std::vector<int64_t> holders;
        idx->equal(key, &holders);
        for (int64_t h : holders)
          if (h != e.id && !written_.count(h))
            return Status(Code::Constraint, "unique '" + label + "': " + kb + " is already held by document " +
                                                std::to_string(h) + "; nothing was written", e.pos);
      }
    }
    return Status::ok();
  }

 private:
  struct Entry {
    int64_t id;
    int64_t pos;
    std::vector<Value> keys;
  };
  Engine& eng_;
  Collection& c_;
  std::vector<size_t> uniq_;
  std::vector<Entry> entries_;
  std::set<int64_t> written_;
};

Result<QueryResult> Engine::execute_write(const ParsedStatement& st, const std::vector<Value>& params,
                                          ParsedStatement* owned) {
  QueryResult res;
  Evaluator ev(params);
  std::string ops;
  uint32_t nops = 0;
  Collection* c = nullptr;
  if (st.kind != StmtKind::CreateCollection) {
    c = find(st.collection);
    if (!c) {
      if (st.kind == StmtKind::DropCollection && st.if_exists) return res;
      return no_collection(st.collection, st.collection_pos);
    }
  }

  switch (st.kind) {
    case StmtKind::CreateCollection: {
      if (find(st.collection)) {
        if (st.if_not_exists) return res;
        return Status(Code::Exists, "collection '" + st.collection + "' already exists", st.collection_pos);
      }
      CollectionDef d;
      d.id = next_coll_id_;
      d.name = st.collection;
      for (const FieldDecl& fd : st.fields) {
        d.fields.push_back(Field{d.next_field_id++, fd.name, fd.type, fd.required, fd.index});
        for (IndexKind k : fd.secondary) {
          if (fd.type.kind == TypeKind::Vector || fd.type.kind == TypeKind::Bytes)
            return Status(Code::Type, std::string("@") + secondary_name(k) + " does not index " + type_name(fd.type) + " fields", fd.pos);
          d.secondary.push_back(SecondaryDef{d.fields.back().id, {}, k});
        }
      }
      put_u8(ops, format::kOpDefine);
      encode_def(d, 1, ops);
      nops = 1;
      break;
    }
    case StmtKind::DropCollection:
      put_u8(ops, format::kOpDrop);
      put_varint(ops, c->def.id);
      nops = 1;
      break;
    case StmtKind::AlterAdd:
    case StmtKind::AlterDrop:
    case StmtKind::AlterRename: {
      CollectionDef d = c->def;
      if (st.kind == StmtKind::AlterAdd) {
        const FieldDecl& fd = st.fields[0];
        if (d.field(fd.name)) return Status(Code::Exists, "field '" + fd.name + "' already exists in '" + d.name + "'", fd.pos);
        if (fd.required && c->ids.size())
          return Status(Code::Constraint, "cannot add required field '" + fd.name + "': '" + d.name + "' has documents without it", fd.pos);
        if (d.fields.size() >= kMaxFields) return Status(Code::Limit, "too many fields", fd.pos);
        d.fields.push_back(Field{d.next_field_id++, fd.name, fd.type, fd.required, fd.index});
        for (IndexKind k : fd.secondary) d.secondary.push_back(SecondaryDef{d.fields.back().id, {}, k});
      } else {
        auto it = std::find_if(d.fields.begin(), d.fields.end(), [&](const Field& f) { return f.name == st.field; });
        if (it == d.fields.end()) return not_found_field(st.field, d, st.field_pos);
        if (st.kind == StmtKind::AlterDrop) {
          uint32_t gone = it->id;
          d.fields.erase(it);
          d.secondary.erase(std::remove_if(d.secondary.begin(), d.secondary.end(),
                                           [&](const SecondaryDef& x) { return x.field_id == gone; }),
                            d.secondary.end());
        } else {
          if (d.field(st.new_name)) return Status(Code::Exists, "field '" + st.new_name + "' already exists in '" + d.name + "'", st.field_pos);
          it->name = st.new_name;
        }
      }
      put_u8(ops, format::kOpDefine);
      encode_def(d, c->next_id, ops);
      nops = 1;
      break;
    }
    case StmtKind::CreateIndex:
    case StmtKind::DropIndex: {
      CollectionDef d = c->def;
      Field* f = nullptr;
      for (Field& x : d.fields)
        if (x.name == st.field) f = &x;
      if (!f) return not_found_field(st.field, d, st.field_pos);
      std::vector<std::string> sub(st.index_path.begin() + 1, st.index_path.end());
      if (!sub.empty() && f->type.kind != TypeKind::Json)
        return Status(Code::Type, "field '" + f->name + "' is " + type_name(f->type) + "; only json fields have keys", st.field_pos);
      bool secondary = st.index.kind == IndexKind::Hash || st.index.kind == IndexKind::Unique || st.index.kind == IndexKind::Sorted;
      if (st.kind == StmtKind::DropIndex) {
        size_t before = d.secondary.size();
        d.secondary.erase(std::remove_if(d.secondary.begin(), d.secondary.end(), [&](const SecondaryDef& x) {
          return x.field_id == f->id && x.subpath == sub && (st.index.kind == IndexKind::None || x.kind == st.index.kind);
        }), d.secondary.end());
        bool dropped = d.secondary.size() != before;
        if (sub.empty() && f->index.kind != IndexKind::None &&
            (st.index.kind == IndexKind::None || st.index.kind == f->index.kind)) {
          f->index = IndexSpec{};
          dropped = true;
        }
        if (!dropped) {
          if (st.if_exists) return res;
          return Status(Code::NotFound, "'" + join(st.index_path) + "' has no such index", st.field_pos);
        }
      } else if (secondary) {
        for (const SecondaryDef& x : d.secondary)
          if (x.field_id == f->id && x.subpath == sub && x.kind == st.index.kind) {
            if (st.if_not_exists) return res;
            return Status(Code::Exists, "'" + join(st.index_path) + "' already has a @" + secondary_name(x.kind) + " index", st.field_pos);
          }
        if (f->type.kind == TypeKind::Vector || f->type.kind == TypeKind::Bytes)
          return Status(Code::Type, std::string("@") + secondary_name(st.index.kind) + " does not index " + type_name(f->type) + " fields", st.index_pos);
        SecondaryDef sd{f->id, sub, st.index.kind};
        if (sd.kind == IndexKind::Unique) {
          // Refused over existing duplicates, naming the value and the documents.
          SecondaryIndex tmp(IndexKind::Unique);
          Status dup;
          Value key;
          c->ids.scan([&](const IdEntry& e) {
            dup = secondary_key(*c, sd, body(e.loc), &key);
            if (!dup.is_ok()) return false;
            int64_t other = tmp.holder(key, e.id);
            if (other >= 0) {
              dup = Status(Code::Constraint, "cannot create @unique on '" + join(st.index_path) + "': documents " +
                                                 std::to_string(other) + " and " + std::to_string(e.id) + " both hold " + to_json(key), st.index_pos);
              return false;
            }
            tmp.put(e.id, key);
            return true;
          });
          KF_TRY(dup);
        }
        d.secondary.push_back(std::move(sd));
      } else if (!sub.empty()) {
        return Status(Code::Syntax, "@text and @hnsw index whole fields, not json paths", st.index_pos);
      } else if (st.index.kind == IndexKind::Text) {
        if (f->type.kind != TypeKind::Text && !(f->type.kind == TypeKind::List && f->type.elem == TypeKind::Text))
          return Status(Code::Type, "@text indexes text fields; '" + f->name + "' is " + type_name(f->type), st.index_pos);
        if (f->index.kind != IndexKind::None) {
          if (st.if_not_exists) return res;
          return Status(Code::Exists, "field '" + f->name + "' already has an index: " + index_name(f->index), st.field_pos);
        }
        f->index = st.index;
      } else {
        if (f->type.kind != TypeKind::Vector)
          return Status(Code::Type, "@hnsw indexes vector fields; '" + f->name + "' is " + type_name(f->type), st.index_pos);
        if (f->index.kind != IndexKind::None) {
          if (st.if_not_exists) return res;
          return Status(Code::Exists, "field '" + f->name + "' already has an index: " + index_name(f->index), st.field_pos);
        }
        // Every stored vector must suit the index (cosine needs a direction).
        HnswIndex shape(f->type.dim, f->type.f16, st.index.hnsw);
        std::vector<float> tmp;
        Status bad;
        Value v;
        c->ids.scan([&](const IdEntry& e) {
          bad = decode_field(body(e.loc), f->id, &v, c);
          if (bad.is_ok() && v.kind() == Kind::Vector) bad = shape.prepare(v.vec().data(), &tmp, f->name);
          if (!bad.is_ok()) bad = Status(bad.code(), "document " + std::to_string(e.id) + ": " + bad.message(), st.index_pos);
          return bad.is_ok();
        });
        KF_TRY(bad);
        f->index = st.index;
      }
      put_u8(ops, format::kOpDefine);
      encode_def(d, c->next_id, ops);
      nops = 1;
      break;
    }
    case StmtKind::Put:
    case StmtKind::Insert: {
      Value body;
      // A statement that runs once (`owned`) gives its literals up rather
      // than having them copied.
      KF_TRY(owned ? ev.take(*owned->body, &body) : ev.constant(*st.body, &body));
      const bool is_list = body.kind() == Kind::List;
      size_t n = is_list ? body.items().size() : 1;
      int64_t next_id = c->next_id;
      UniqueCheck unique(*this, *c);
      std::vector<int64_t> seen;  // insert: ids given in this statement
      std::string enc;
      Value fields;
      res.rows.reserve(n);
      for (size_t i = 0; i < n; i++) {
        Value& dv = is_list ? body.mutable_items()[i] : body;
        const Expr* lit = st.body->kind == ExprKind::ListLit ? st.body->kids[i].get()
                          : st.body->kind == ExprKind::ObjectLit ? st.body.get() : nullptr;
        int64_t pos = lit ? lit->pos : st.body->pos;
        bool has_id = false;
        int64_t id = 0;
        Status s = build_document(c->def, dv, lit, pos, &fields, &has_id, &id);
        if (!s.is_ok()) {
          if (is_list && !lit) return Status(s.code(), "document " + std::to_string(i + 1) + ": " + s.message(), s.position());
          return s;
        }
        for (auto& [fid, index] : c->vindex) {
          const Field* vf = c->def.field_by_id(fid);
          const Value* vv = vf ? fields.get(vf->name) : nullptr;
          if (vv && vv->kind() == Kind::Vector) {
            Status ps = index->prepare(vv->vec().data(), &prepared_, vf->name);
            if (!ps.is_ok()) return Status(ps.code(), ps.message(), pos);
          }
        }
        if (!has_id) {
          if (next_id == INT64_MAX) return Status(Code::Limit, "no ids left in '" + c->def.name + "'", pos);
          id = next_id++;
        } else if (id >= next_id) {
          next_id = id == INT64_MAX ? id : id + 1;
        }
        if (st.kind == StmtKind::Insert) {
          if (c->ids.find(id)) return Status(Code::Exists, "id " + std::to_string(id) + " already exists in '" + c->def.name + "'; nothing was inserted", pos);
          seen.push_back(id);
        }
        enc.clear();
        encode_document(c->def, fields, enc);
        KF_TRY(check_doc_size(enc.size(), pos));
        op_put(ops, c->def.id, id, enc);
        nops++;
        unique.add(id, fields, pos);
        res.rows.push_back(row1("id", Value::integer(id)));
      }
      KF_TRY(unique.check());
      if (seen.size() > 1) {
        std::vector<int64_t> s2 = seen;
        std::sort(s2.begin(), s2.end());
        auto d = std::adjacent_find(s2.begin(), s2.end());
        if (d != s2.end()) return Status(Code::Exists, "id " + std::to_string(*d) + " is given twice; nothing was inserted", st.body->pos);
      }
      break;
    }
    case StmtKind::Set: {
      // Resolve and type the assigned values once.
      struct Assign {
        const Field* field;
        const std::vector<std::string>* path;
        Value value;
        int64_t pos;
      };
      std::vector<Assign> as;
      for (const Assignment& a : st.assignments) {
        const Field* f = c->def.field(a.path[0]);
        Value raw, typed;
        KF_TRY(ev.constant(*a.value, &raw));
        Type t = a.path.size() > 1 ? Type{TypeKind::Json} : f->type;
        Status s = coerce(raw, t, join(a.path), &typed);
        if (!s.is_ok()) return Status(s.code(), s.message(), a.pos);
        // A value set at a.b.c sits two levels down in a's value: the
        // document written must decode again.
        if (a.path.size() - 1 + nested_depth(typed) > (size_t)kMaxDepth)
          return Status(Code::Limit, "'" + join(a.path) + "' would nest a value deeper than " + std::to_string(kMaxDepth) +
                                         " levels",
                        a.pos);
        if (a.path.size() == 1 && f->required && typed.is_null())
          return Status(Code::Constraint, "required field '" + f->name + "' cannot be set to null", a.pos);
        auto vi = c->vindex.find(f->id);
        if (a.path.size() == 1 && vi != c->vindex.end() && typed.kind() == Kind::Vector) {
          Status ps = vi->second->prepare(typed.vec().data(), &prepared_, f->name);
          if (!ps.is_ok()) return Status(ps.code(), ps.message(), a.pos);
        }
        as.push_back({f, &a.path, std::move(typed), a.pos});
      }
      int64_t n = 0;
      std::string enc;
      Status inner;
      UniqueCheck unique(*this, *c);
      KF_TRY(scan_where(*this, *c, ev, st.where.get(), [&](const Value& doc) {
        Value d = doc;
        for (Assign& a : as) {
          if (a.path->size() == 1) {
            d.set(a.field->name, a.value);
          } else {
            Value* fv = d.get_mut(a.field->name);
            Value cur = fv ? *fv : Value();
            inner = assign_path(&cur, *a.path, 1, a.value, a.pos);
            if (!inner.is_ok()) {
              inner = Status(inner.code(), "document " + std::to_string(doc.items()[0].as_int()) + ": " + inner.message(), a.pos);
              return false;
            }
            d.set(a.field->name, std::move(cur));
          }
        }
        enc.clear();
        encode_document(c->def, d, enc);
        inner = check_doc_size(enc.size(), st.pos);
        if (!inner.is_ok()) return false;
        op_put(ops, c->def.id, doc.items()[0].as_int(), enc);
        nops++;
        n++;
        unique.add(doc.items()[0].as_int(), d, st.pos);
        return true;
      }));
      KF_TRY(inner);
      KF_TRY(unique.check());
      res.rows.push_back(row1("updated", Value::integer(n)));
      break;
    }
    case StmtKind::Del: {
      int64_t n = 0;
      KF_TRY(scan_where_ids(*this, *c, ev, st.where.get(), [&](int64_t id, std::string_view) {
        put_u8(ops, format::kOpDel);
        put_varint(ops, c->def.id);
        put_varint(ops, zigzag(id));
        nops++;
        n++;
        return true;
      }));
      res.rows.push_back(row1("deleted", Value::integer(n)));
      break;
    }
    default:
      return Status(Code::Invalid, "not a write statement", st.pos);
  }
  if (nops) KF_TRY(commit(ops, nops).status());
  return res;
}

}  // namespace kitfox
