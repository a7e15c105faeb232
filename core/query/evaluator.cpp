#include "evaluator.h"

namespace kitfox {

bool Evaluator::equal_other(const Value& a, const Value& b) {
  Value a2, b2;
  const Value *pa, *pb;
  if (!aligned(a, b, &a2, &b2, &pa, &pb)) return false;
  return comparable(*pa, *pb) && equal(*pa, *pb);
}

Truth Evaluator::compare_other(CmpOp op, const Value& a, const Value& b) {
  Value a2, b2;
  const Value *pa, *pb;
  if (!aligned(a, b, &a2, &b2, &pa, &pb) || !comparable(*pa, *pb))  // different kinds are never equal
    return op == CmpOp::Ne ? Truth::True : op == CmpOp::Eq ? Truth::False : Truth::Null;
  return truth_of(op, compare(*pa, *pb));
}

Result<int64_t> count_arg(const Evaluator& ev, const ExprPtr& e, const char* what) {
  if (!e) return (int64_t)-1;
  Value v;
  KF_TRY(ev.constant(*e, &v));
  if (v.kind() != Kind::Int || v.as_int() < 0)
    return Status(Code::Type, std::string(what) + " must be a non-negative integer", e->pos);
  return v.as_int();
}

namespace {

// A literal as a statement writes it: [1, 2], {a: "x"}.
std::string literal_text(const Value& v) {
  if (v.kind() != Kind::List && v.kind() != Kind::Object) return to_json(v);
  bool obj = v.kind() == Kind::Object;
  std::string s = obj ? "{" : "[";
  for (size_t i = 0; i < v.items().size(); i++) {
    if (i) s += ", ";
    if (obj) s += v.keys()[i] + ": ";
    s += literal_text(v.items()[i]);
  }
  return s + (obj ? "}" : "]");
}

}  // namespace

// The source-like text of an expression, for explain.
std::string expr_text(const Expr& e) {
  static const char* ops[] = {"=", "!=", "<", "<=", ">", ">=", "~"};
  switch (e.kind) {
    case ExprKind::Literal: return literal_text(e.value);
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

std::string join(const std::vector<std::string>& p) {
  std::string s;
  for (size_t i = 0; i < p.size(); i++) {
    if (i) s += '.';
    s += p[i];
  }
  return s;
}

std::string column_name(const SelectItem& s) { return s.expr ? s.label : join(s.path); }

Value row1(const char* k, Value v) {
  Value r = Value::object();
  r.append(k, std::move(v));
  return r;
}

std::string counted_text(uint64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace kitfox
