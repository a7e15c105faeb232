// The evaluator: expressions over documents (three-valued, as
// docs/query-language.md defines them), and what reads documents for it: a
// partial decode of the fields an expression names, the where-clause test
// built on it, and the memory budget of a query's rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../codec.h"
#include "../engine.h"
#include "ast.h"

namespace kitfox {

// A predicate's answer, three-valued; Ask where a test on a document's
// encoding leaves the document to the evaluator (EncodedWhere).
enum class Truth : uint8_t { False, True, Null, Ask };

class Evaluator {
 public:
  Evaluator(const Params& params) : params_(params) {}
  const Params& params() const { return params_; }

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
      case ExprKind::ListLit: {  // each item made in its place
        *out = Value::list();
        std::vector<Value>& items = out->mutable_items();
        items.resize(e.kids.size());
        for (size_t i = 0; i < e.kids.size(); i++) KF_TRY(constant(*e.kids[i], &items[i]));
        return Status::ok();
      }
      case ExprKind::ObjectLit: {
        *out = Value::object();
        out->reserve_keys(e.kids.size());
        for (size_t i = 0; i < e.kids.size(); i++) {
          out->append(e.keys[i], Value());
          KF_TRY(constant(*e.kids[i], &out->mutable_items().back()));
        }
        return Status::ok();
      }
      default: return Status(Code::Syntax, "expected a value here", e.pos);
    }
  }

  // Evaluates against a decoded document. Predicates give Bool, or Null when
  // unknown (a comparison with null); `where` keeps rows that give true.
  Status eval(const Expr& e, const Value& doc, Value* out) const {
    switch (e.kind) {
      case ExprKind::Path: {
        const Value* v;
        KF_TRY(operand(e, doc, out, &v));
        *out = *v;
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
        Value ta, tb;
        const Value *a, *b;
        KF_TRY(operand(*e.kids[0], doc, &ta, &a));
        KF_TRY(operand(*e.kids[1], doc, &tb, &b));
        return compare_op(e, *a, *b, out);
      }
      case ExprKind::In:
      case ExprKind::Has: {
        Value ta, tb;
        const Value *a, *b;
        KF_TRY(operand(*e.kids[0], doc, &ta, &a));
        KF_TRY(operand(*e.kids[1], doc, &tb, &b));
        const Value& list = e.kind == ExprKind::In ? *b : *a;
        const Value& item = e.kind == ExprKind::In ? *a : *b;
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
        Value ta;
        const Value* a;
        KF_TRY(operand(*e.kids[0], doc, &ta, &a));
        *out = Value::boolean(a->is_null() != e.negate);
        return Status::ok();
      }
      case ExprKind::Call: return call(e, doc, out);
      case ExprKind::Aggregate:
        return Status(Code::Syntax, e.path[0] + "() is an aggregate: it belongs in select or order, over a whole result or a group", e.pos);
      default: return constant(e, out);
    }
  }

  static bool truthy(const Value& v) { return v.kind() == Kind::Bool ? v.as_bool() : !v.is_null(); }

  // a <op> b for an op other than ~, neither of them null: the answer of a
  // comparison (null: values of kinds that do not order). Numbers and texts
  // inline (what compare() answers, sooner), other kinds out of line.
  static Truth compare_values(CmpOp op, const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) return truth_of(op, compare_numbers(a, b));
    if (a.kind() == Kind::Text && b.kind() == Kind::Text) return truth_of(op, a.as_string().compare(b.as_string()));
    return compare_other(op, a, b);
  }
  // The answer of `op` between operands whose compare() is `c`.
  static Truth truth_of(CmpOp op, int c) {
    bool r = false;
    switch (op) {
      case CmpOp::Eq: r = c == 0; break;
      case CmpOp::Ne: r = c != 0; break;
      case CmpOp::Lt: r = c < 0; break;
      case CmpOp::Le: r = c <= 0; break;
      case CmpOp::Gt: r = c > 0; break;
      case CmpOp::Ge: r = c >= 0; break;
      default: break;
    }
    return r ? Truth::True : Truth::False;
  }
  // Whether `in` finds b in a list holding a.
  static bool equal_loose(const Value& a, const Value& b) {
    if (a.kind() == Kind::Int && b.kind() == Kind::Int) return a.as_int() == b.as_int();  // (sooner)
    if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
    if (a.kind() == Kind::Text && b.kind() == Kind::Text) return a.as_string() == b.as_string();
    return equal_other(a, b);
  }
  // hay ~ needle: holds it, ASCII letters in any case.
  static bool contains_ci(std::string_view hay, std::string_view needle) {
    if (needle.empty()) return true;
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c + 32) : c; };
    auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                          [&](char x, char y) { return lower(x) == lower(y); });
    return it != hay.end();
  }

  // An operand where it lies (a path into the document, a literal, a
  // parameter: no copy, so a compare of text with text copies no string),
  // else evaluated into *tmp.
  Status operand(const Expr& e, const Value& doc, Value* tmp, const Value** out) const {
    if (e.kind == ExprKind::Path) {
      *out = &doc.at_path(e.path);
      return Status::ok();
    }
    if (const Value* r = ref(e)) {
      *out = r;
      return Status::ok();
    }
    KF_TRY(eval(e, doc, tmp));
    *out = tmp;
    return Status::ok();
  }

 private:
  // compare_values' and equal_loose's cases but numbers and texts.
  static Truth compare_other(CmpOp op, const Value& a, const Value& b);
  static bool equal_other(const Value& a, const Value& b);
  // a and b as a compare sees them: a timestamp's other side (text or an
  // int) read as a timestamp, bytes' other side (text) as base64, into
  // *a2 / *b2 (false: text that is none).
  // Else they stay where they are.
  static bool aligned(const Value& a, const Value& b, Value* a2, Value* b2, const Value** pa, const Value** pb) {
    *pa = &a;
    *pb = &b;
    if (a.kind() == b.kind() || !(a.kind() == Kind::Timestamp || b.kind() == Kind::Timestamp ||
                                  (a.kind() == Kind::Bytes && b.kind() == Kind::Text) || (a.kind() == Kind::Text && b.kind() == Kind::Bytes)))
      return true;
    if (!align(a, b, a2, b2)) return false;
    *pa = a2;
    *pb = b2;
    return true;
  }
  // Vector functions, in double precision: cosine(a, b) similarity, l2(a, b)
  // Euclidean distance, dot(a, b), norm(v). Null in, null out.
  Status call(const Expr& e, const Value& doc, Value* out) const {
    const std::string& fn = e.path[0];
    std::vector<double> v[2];
    for (size_t i = 0; i < e.kids.size(); i++) {
      Value ta;
      const Value* pa;
      KF_TRY(operand(*e.kids[i], doc, &ta, &pa));
      const Value& a = *pa;
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

  // Timestamps compare with ISO text and with ints (ms); bytes with their
  // base64 text, as a literal writes them.
  static bool align(const Value& a, const Value& b, Value* a2, Value* b2) {
    *a2 = a;
    *b2 = b;
    if ((a.kind() == Kind::Bytes && b.kind() == Kind::Text) || (a.kind() == Kind::Text && b.kind() == Kind::Bytes)) {
      Value* t = a2->kind() == Kind::Text ? a2 : b2;
      std::string raw;
      if (!base64_decode(t->as_string(), &raw)) return false;
      *t = Value::bytes(std::move(raw));
    } else if (a.kind() == Kind::Timestamp || b.kind() == Kind::Timestamp) {
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
  Status compare_op(const Expr& e, const Value& a, const Value& b, Value* out) const {
    if (a.is_null() || b.is_null()) { *out = Value(); return Status::ok(); }
    if (e.op == CmpOp::Contains) {
      if (a.kind() != Kind::Text || b.kind() != Kind::Text)
        return Status(Code::Type, std::string("'~' compares text with text, got ") + kind_name(a.kind()) + " and " + kind_name(b.kind()), e.pos);
      *out = Value::boolean(contains_ci(a.as_string(), b.as_string()));
      return Status::ok();
    }
    const Truth t = compare_values(e.op, a, b);
    *out = t == Truth::Null ? Value() : Value::boolean(t == Truth::True);
    return Status::ok();
  }

  Params params_;
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
    for (const Field* f : fields_) {
      doc_.append(f->name, Value());
      ids_.push_back(f->id);
    }
  }
  Status load(int64_t id, std::string_view body) {
    std::vector<Value>& v = doc_.mutable_items();
    v[0].assign_scalar(Kind::Int, id);
    return decode_fields(body, ids_.data(), ids_.size(), &v[1], &c_);  // one walk of the document
  }
  const Value& doc() const { return doc_; }
  const CollectionDef& def() const { return c_.def; }
  // After shape(): where a path's value lies in doc()'s items when it is the
  // id or a top-level field read here (read there with no lookup by name);
  // else -1.
  int place(const std::vector<std::string>& path) const {
    if (path.size() != 1) return -1;
    if (path[0] == "id") return 0;
    for (size_t i = 0; i < fields_.size(); i++)
      if (fields_[i]->name == path[0]) return (int)i + 1;
    return -1;
  }

 private:
  const Collection& c_;
  std::vector<const Field*> fields_;
  std::vector<uint32_t> ids_;  // theirs
  Value doc_;
};

// A where clause of comparisons (=, !=, <, <=, >, >=, ~), `in` and `is
// null` of the id or a top-level field with a literal or a parameter, joined
// by and, or and not, tested on a document's encoding: one walk of the
// document finds the fields it reads (each read as decode_fields reads it, a
// text left where it lies in the document and compared there with a text),
// and no object is made.
// The evaluator's own comparisons answer (Evaluator::compare_values,
// equal_loose, contains_ci). Where a field the clause reads holds what this
// form does not read (a list, an object, a vector), a ~ or an `in` meets
// what the evaluator refuses, or the document does not walk, the answer is
// Truth::Ask and the evaluator tests the document (its answer or its error).
class EncodedWhere {
 public:
  // False when the clause has a part this form does not test.
  bool compile(const Evaluator& ev, const Expr& where, const CollectionDef& def);
  Truth test(int64_t id, std::string_view body);

 private:
  enum class Op : uint8_t { And, Or, Not, Compare, In, IsNull, Contains };
  struct Node {
    Op op;
    CmpOp cmp = CmpOp::Eq;
    bool negate = false;
    bool constant_first = false;  // Compare: `$1 < n`
    int slot = -1;                // the field's place in fids_; -1 the id
    const Value* constant = nullptr;
    // Compare: the constant as a timestamp (a text that reads as one, an
    // int), for a document whose field holds a timestamp: what the
    // evaluator's alignment makes of it for each document, made once; null
    // where it reads as none.
    Value as_timestamp;
    Value as_bytes;  // a text constant as base64, for a bytes field
    uint32_t first = 0, count = 0;  // And, Or, Not: the kids' nodes in kids_
  };
  int add(const Evaluator& ev, const Expr& e, const CollectionDef& def);
  int slot_of(const Expr& e, const CollectionDef& def);
  Truth eval(int n);
  const Value& operand(const Node& n) {
    if (n.slot < 0) return id_;
    if (!(seen_ >> n.slot & 1)) return null_;
    if (in_place_ >> n.slot & 1) {
      vals_[(size_t)n.slot].assign_string(Kind::Text, texts_[(size_t)n.slot]);
      in_place_ &= ~(1u << n.slot);
    }
    return vals_[(size_t)n.slot];
  }

  static constexpr size_t kMaxFields = 32;
  std::vector<Node> nodes_;
  std::vector<int> kids_;
  int root_ = -1;
  std::vector<uint32_t> fids_;  // the fields read
  // Each one's value in this document where seen_ has its bit and in_place_
  // has not (a value kept from document to document: a text into the same string).
  std::vector<Value> vals_;
  uint32_t seen_ = 0;           // (a bit a field) given by this document
  // Of those, the texts left where they lie (texts_), copied into vals_ once
  // a comparison asks for the value.
  uint32_t in_place_ = 0;
  std::string_view texts_[kMaxFields];
  Value id_, null_;
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
    if (tested_ < kCompileAfter && ++tested_ == kCompileAfter) encoded_ = fast_.compile(ev_, *where_, doc_.def());
    if (encoded_) {
      const Truth t = fast_.test(id, body);
      if (t != Truth::Ask) {
        *pass = t == Truth::True;
        return Status::ok();
      }
    }
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
  // The clause is compiled for its encoded test at the kCompileAfter-th
  // document (a read of a few documents makes nothing).
  static constexpr uint32_t kCompileAfter = 8;
  uint32_t tested_ = 0;
  EncodedWhere fast_;
  bool encoded_ = false;
};

// The memory one query's rows may take (OpenOptions.max_result_bytes),
// charged as each row (or each document a sort holds) is kept: an estimate
// of the values' memory, strings and vectors by their bytes.
class RowBudget {
 public:
  // A batch's reads share one budget: what is left of it for the read that
  // runs now on this thread (Engine::run_batch sets it around each).
  static inline thread_local uint64_t batch_left = UINT64_MAX;

  explicit RowBudget(uint64_t max)
      : max_(max), in_batch_(batch_left != UINT64_MAX), left_(std::min(max, batch_left)) {}
  // False, with *err set, once what is kept passes the budget.
  bool take(const Value& v, Status* err) { return take_bytes(bytes(v), err); }
  bool take_bytes(uint64_t n, Status* err) {
    if (n > left_) {
      *err = Status(Code::Limit, std::string(in_batch_ ? "the rows of this batch's reads" : "the rows of this query") +
                                     " take more than " + std::to_string(max_ >> 20) +
                                     " MiB (max_result_bytes): add a limit or select fewer fields");
      return false;
    }
    left_ -= n;
    return true;
  }

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

 private:
  uint64_t max_;
  bool in_batch_;  // left_ is what a batch's earlier reads left
  uint64_t left_;
};

// A limit, offset, ef, k or candidates argument: a non-negative integer, or
// -1 when absent.
Result<int64_t> count_arg(const Evaluator& ev, const ExprPtr& e, const char* what);

// The source-like text of an expression (explain shows it).
std::string expr_text(const Expr& e);

// "1 candidate", "2 candidates".
std::string counted_text(uint64_t n, const char* noun);

// A one-field row: {k: v}.
Value row1(const char* k, Value v);

}  // namespace kitfox
