// EncodedWhere (evaluator.h): a where clause of comparisons tested on each
// document's encoding. A file of its own: a scan's hot loop, compiled for
// speed in WASM (wasm/Makefile) where the rest of the evaluator is compiled
// for size.
#include "evaluator.h"

namespace kitfox {

int EncodedWhere::slot_of(const Expr& e, const CollectionDef& def) {
  if (e.kind != ExprKind::Path || e.path.size() != 1) return -2;
  if (e.path[0] == "id") return -1;
  const Field* f = def.field(e.path[0]);
  // (A list or a vector field always holds what the evaluator reads.)
  if (!f || f->type.kind == TypeKind::List || f->type.kind == TypeKind::Vector) return -2;
  for (size_t i = 0; i < fids_.size(); i++)
    if (fids_[i] == f->id) return (int)i;
  if (fids_.size() == kMaxFields) return -2;
  fids_.push_back(f->id);
  return (int)fids_.size() - 1;
}

// The node testing e, or -1 where this form does not test it.
int EncodedWhere::add(const Evaluator& ev, const Expr& e, const CollectionDef& def) {
  Node n;
  switch (e.kind) {
    case ExprKind::And:
    case ExprKind::Or:
    case ExprKind::Not: {
      n.op = e.kind == ExprKind::And ? Op::And : e.kind == ExprKind::Or ? Op::Or : Op::Not;
      std::vector<int> kids;
      for (const ExprPtr& k : e.kids) {
        int c = add(ev, *k, def);
        if (c < 0) return -1;
        kids.push_back(c);
      }
      n.first = (uint32_t)kids_.size();
      n.count = (uint32_t)kids.size();
      kids_.insert(kids_.end(), kids.begin(), kids.end());
      break;
    }
    case ExprKind::Compare: {
      n.cmp = e.op;
      n.op = e.op == CmpOp::Contains ? Op::Contains : Op::Compare;
      int s = slot_of(*e.kids[0], def);
      const Value* c = ev.ref(*e.kids[1]);
      if ((s < -1 || !c) && n.op == Op::Compare) {  // the constant first
        s = slot_of(*e.kids[1], def);
        c = ev.ref(*e.kids[0]);
        n.constant_first = true;
      }
      if (s < -1 || !c) return -1;
      n.slot = s;
      n.constant = c;
      if (n.op == Op::Compare && s >= 0) {
        int64_t ms;
        if (c->kind() == Kind::Int) {
          n.as_timestamp = Value::timestamp(c->as_int());
        } else if (c->kind() == Kind::Text && parse_timestamp(c->as_string(), &ms)) {
          n.as_timestamp = Value::timestamp(ms);
        }
        const Field* f = def.field(e.kids[n.constant_first ? 1 : 0]->path[0]);
        std::string raw;
        if (f && f->type.kind == TypeKind::Bytes && c->kind() == Kind::Text && base64_decode(c->as_string(), &raw))
          n.as_bytes = Value::bytes(std::move(raw));
      }
      break;
    }
    case ExprKind::In:
    case ExprKind::IsNull:
      n.op = e.kind == ExprKind::In ? Op::In : Op::IsNull;
      n.negate = e.negate;
      n.slot = slot_of(*e.kids[0], def);
      if (n.slot < -1) return -1;
      if (e.kind == ExprKind::In && !(n.constant = ev.ref(*e.kids[1]))) return -1;
      break;
    default: return -1;
  }
  nodes_.push_back(n);
  return (int)nodes_.size() - 1;
}

bool EncodedWhere::compile(const Evaluator& ev, const Expr& where, const CollectionDef& def) {
  root_ = add(ev, where, def);
  vals_.resize(fids_.size());
  return root_ >= 0;
}

Truth EncodedWhere::eval(int i) {
  const Node& n = nodes_[(size_t)i];
  switch (n.op) {
    case Op::And:
    case Op::Or: {  // three-valued, as Evaluator::eval: one decisive term decides
      const bool is_and = n.op == Op::And;
      bool any_null = false;
      for (uint32_t k = 0; k < n.count; k++) {
        const Truth t = eval(kids_[n.first + k]);
        if (t == Truth::Ask) return t;
        if (t == Truth::Null) any_null = true;
        else if ((t == Truth::True) != is_and) return is_and ? Truth::False : Truth::True;
      }
      return any_null ? Truth::Null : is_and ? Truth::True : Truth::False;
    }
    case Op::Not: {
      const Truth t = eval(kids_[n.first]);
      return t == Truth::True ? Truth::False : t == Truth::False ? Truth::True : t;
    }
    default: break;
  }
  if (n.slot >= 0 && (in_place_ >> n.slot & 1)) {
    // A text where it lies in the document, against a text: no copy.
    if (n.op == Op::IsNull) return n.negate ? Truth::True : Truth::False;
    const std::string_view t = texts_[(size_t)n.slot];
    const Value& k = *n.constant;  // Compare, Contains, In: never null
    if ((n.op == Op::Compare || n.op == Op::Contains) && k.is_null()) return Truth::Null;
    if (n.op == Op::Compare && k.kind() == Kind::Text) {
      const int c = t.compare(k.as_string());
      const int sign = (c > 0) - (c < 0);
      return Evaluator::truth_of(n.cmp, n.constant_first ? -sign : sign);
    }
    if (n.op == Op::Contains && k.kind() == Kind::Text)
      return Evaluator::contains_ci(t, k.as_string()) ? Truth::True : Truth::False;
  }
  const Value& v = operand(n);
  switch (n.op) {
    case Op::IsNull: return v.is_null() != n.negate ? Truth::True : Truth::False;
    case Op::Compare: {
      if (v.is_null() || n.constant->is_null()) return Truth::Null;
      const Value& c = v.kind() == Kind::Timestamp && !n.as_timestamp.is_null() ? n.as_timestamp
                       : v.kind() == Kind::Bytes && !n.as_bytes.is_null()       ? n.as_bytes
                                                                               : *n.constant;
      return n.constant_first ? Evaluator::compare_values(n.cmp, c, v) : Evaluator::compare_values(n.cmp, v, c);
    }
    case Op::Contains:
      if (v.is_null() || n.constant->is_null()) return Truth::Null;
      if (v.kind() != Kind::Text || n.constant->kind() != Kind::Text) return Truth::Ask;  // the evaluator's error
      return Evaluator::contains_ci(v.as_string(), n.constant->as_string()) ? Truth::True : Truth::False;
    case Op::In: {
      const Value& list = *n.constant;
      if (list.is_null() || v.is_null()) return Truth::Null;
      if (list.kind() != Kind::List) return Truth::Ask;  // the evaluator's error
      bool found = false;
      for (const Value& x : list.items())
        if (Evaluator::equal_loose(x, v)) {
          found = true;
          break;
        }
      return found != n.negate ? Truth::True : Truth::False;
    }
    default: return Truth::Ask;
  }
}

Truth EncodedWhere::test(int64_t id, std::string_view body) {
  id_.assign_scalar(Kind::Int, id);
  // decode_fields' walk, inline and stopping at the first field it does not
  // read as a scalar (out of line, and decoding lists and vectors whole, it
  // cost a scan 5-15%). A field's value is read over the one the last
  // document gave it (text into the same string); seen_ says which this
  // document holds.
  const size_t want = fids_.size();
  seen_ = 0;
  in_place_ = 0;
  Reader r(body);
  const uint64_t n = r.varint();
  size_t found = 0;
  for (uint64_t i = 0; i < n && found < want && r.ok(); i++) {
    const uint32_t fid = (uint32_t)r.varint();
    size_t s = 0;
    while (s < want && (fids_[s] != fid || (seen_ >> s & 1))) s++;  // a field given twice: its first
    if (s == want) {
      skip_field(r);
      continue;
    }
    // A list, an object, a vector (or nothing left): the evaluator decodes
    // every field the clause reads before it tests any (a field that does
    // not decode is its error, whatever the clause would have decided).
    if (!r.done() && (uint8_t)*r.pos() == kText) {
      r.u8();
      texts_[s] = r.str();  // made a value only where a comparison needs one (operand)
      in_place_ |= 1u << s;
    } else if (!decode_scalar(r, &vals_[s])) {
      return Truth::Ask;
    }
    seen_ |= 1u << s;
    found++;
  }
  if (!r.ok()) return Truth::Ask;
  return eval(root_);
}

}  // namespace kitfox
