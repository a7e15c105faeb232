#include "schema.h"

#include <cmath>
#include <cstdio>

#include "engine_limits.h"

namespace kitfox {

static const char* scalar_name(TypeKind k) {
  switch (k) {
    case TypeKind::Bool: return "bool";
    case TypeKind::Int: return "int";
    case TypeKind::Float: return "float";
    case TypeKind::Text: return "text";
    case TypeKind::Bytes: return "bytes";
    case TypeKind::Timestamp: return "timestamp";
    case TypeKind::Json: return "json";
    case TypeKind::List: return "list";
    case TypeKind::Vector: return "vector";
  }
  return "?";
}

std::string type_name(const Type& t) {
  if (t.kind == TypeKind::List) return std::string("[") + scalar_name(t.elem) + "]";
  if (t.kind == TypeKind::Vector)
    return "vector<" + std::to_string(t.dim) + (t.f16 ? ", f16>" : ">");
  return scalar_name(t.kind);
}

static std::string short_double(double d) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

std::string index_name(const IndexSpec& s) {
  if (s.kind == IndexKind::Text) return "text(k1=" + short_double(s.text.k1) + ", b=" + short_double(s.text.b) + ")";
  if (s.kind != IndexKind::Hnsw) return "";
  const char* m = s.hnsw.metric == Metric::L2 ? "l2" : s.hnsw.metric == Metric::Dot ? "dot" : "cosine";
  return std::string("hnsw(") + m + ", m=" + std::to_string(s.hnsw.m) + ", ef_construction=" +
         std::to_string(s.hnsw.ef_construction) + ", ef_search=" + std::to_string(s.hnsw.ef_search) + ")";
}

const char* secondary_name(IndexKind k) {
  return k == IndexKind::Unique ? "unique" : k == IndexKind::Sorted ? "sorted" : "hash";
}

const Field* CollectionDef::field(std::string_view n) const {
  for (const Field& f : fields)
    if (f.name == n) return &f;
  return nullptr;
}

const Field* CollectionDef::field_by_id(uint32_t fid) const {
  for (const Field& f : fields)
    if (f.id == fid) return &f;
  return nullptr;
}

static Status mismatch(const Value& in, const std::string& expected, const std::string& what) {
  return Status(Code::Type, "expected " + expected + " for '" + what + "', got " + kind_name(in.kind()));
}

static Status out_of_range(int64_t ms, const std::string& what) {
  return Status(Code::Type, "timestamp " + std::to_string(ms) + " ms for '" + what +
                                "' is out of range (at most 8.64e15 ms either side of 1970, as a JavaScript Date)");
}

static Status not_utf8(const std::string& what) {
  return Status(Code::Type, "'" + what + "' is not valid UTF-8 text");
}

// Where in a json field's value a member or an element lies: a chain up to
// the field, made into text only for an error ("'j.a[2]'").
struct JsonPlace {
  const std::string& field;
  const JsonPlace* up = nullptr;
  std::string_view key = {};  // a member's key, or
  size_t index = 0;      // an element's index
  bool element = false;
  std::string text() const {
    if (!up) return field;
    return up->text() + (element ? "[" + std::to_string(index) + "]" : "." + std::string(key));
  }
};

// json fields hold plain JSON: timestamps become ISO text, vectors number
// lists; texts and keys are UTF-8.
static Status to_json_value(const Value& in, const JsonPlace& at, int depth, Value* out) {
  if (depth > kMaxDepth) return Status(Code::Limit, "value of '" + at.text() + "' nested deeper than " + std::to_string(kMaxDepth) + " levels");
  switch (in.kind()) {
    case Kind::Text:
      if (!valid_utf8(in.as_string())) return not_utf8(at.text());
      *out = in;
      return Status::ok();
    case Kind::Timestamp:
      if (!in_date_range(in.as_int())) return out_of_range(in.as_int(), at.text());
      *out = Value::text(format_timestamp(in.as_int()));
      return Status::ok();
    case Kind::Bytes: return mismatch(in, "json", at.text());
    case Kind::Vector: {
      *out = Value::list();
      for (float f : in.vec()) {
        if (!std::isfinite(f)) return Status(Code::Type, "'" + at.text() + "' must be a finite number");
        out->push(Value::real(f));
      }
      return Status::ok();
    }
    case Kind::Float:
      if (!std::isfinite(in.as_float())) return Status(Code::Type, "'" + at.text() + "' must be a finite number");
      *out = in;
      return Status::ok();
    case Kind::List: {
      *out = Value::list();
      out->mutable_items().reserve(in.items().size());
      for (size_t i = 0; i < in.items().size(); i++) {
        Value c;
        KF_TRY(to_json_value(in.items()[i], JsonPlace{at.field, &at, {}, i, true}, depth + 1, &c));
        out->push(std::move(c));
      }
      return Status::ok();
    }
    case Kind::Object: {
      *out = Value::object();
      for (size_t i = 0; i < in.items().size(); i++) {
        if (!valid_utf8(in.keys()[i])) return not_utf8(at.text());
        Value c;
        KF_TRY(to_json_value(in.items()[i], JsonPlace{at.field, &at, in.keys()[i]}, depth + 1, &c));
        out->append(in.keys()[i], std::move(c));
      }
      return Status::ok();
    }
    default: *out = in; return Status::ok();
  }
}

static Status coerce_scalar(const Value& in, TypeKind k, const std::string& what, Value* out) {
  switch (k) {
    case TypeKind::Bool:
      if (in.kind() != Kind::Bool) return mismatch(in, "bool", what);
      *out = in;
      return Status::ok();
    case TypeKind::Int:
      if (in.kind() != Kind::Int) return mismatch(in, "int", what);
      *out = in;
      return Status::ok();
    case TypeKind::Float:
      if (in.kind() == Kind::Int) { *out = Value::real((double)in.as_int()); return Status::ok(); }
      if (in.kind() != Kind::Float) return mismatch(in, "float", what);
      if (!std::isfinite(in.as_float())) return Status(Code::Type, "'" + what + "' must be a finite number");
      *out = in;
      return Status::ok();
    case TypeKind::Text:
      if (in.kind() != Kind::Text) return mismatch(in, "text", what);
      if (!valid_utf8(in.as_string())) return not_utf8(what);
      *out = in;
      return Status::ok();
    case TypeKind::Bytes:
      if (in.kind() == Kind::Bytes) { *out = in; return Status::ok(); }
      if (in.kind() == Kind::Text) {
        std::string b;
        if (!base64_decode(in.as_string(), &b))
          return Status(Code::Type, "expected bytes (base64 text) for '" + what + "'");
        *out = Value::bytes(std::move(b));
        return Status::ok();
      }
      return mismatch(in, "bytes", what);
    case TypeKind::Timestamp: {
      int64_t ms;
      if (in.kind() == Kind::Timestamp || in.kind() == Kind::Int) {
        ms = in.as_int();
      } else if (in.kind() == Kind::Text) {
        if (!parse_timestamp(in.as_string(), &ms))
          return Status(Code::Type, "expected an ISO-8601 timestamp for '" + what + "', got \"" + in.as_string() + "\"");
      } else {
        return mismatch(in, "timestamp", what);
      }
      if (!in_date_range(ms)) return out_of_range(ms, what);
      *out = Value::timestamp(ms);
      return Status::ok();
    }
    case TypeKind::Json:
      return to_json_value(in, JsonPlace{what}, 0, out);
    default:
      return mismatch(in, scalar_name(k), what);
  }
}

Status coerce(const Value& in, const Type& t, const std::string& what, Value* out) {
  if (in.is_null()) { *out = Value(); return Status::ok(); }
  if (t.kind == TypeKind::List) {
    if (in.kind() == Kind::Vector) {
      Value l = Value::list();
      for (float f : in.vec()) l.push(Value::real(f));
      return coerce(l, t, what, out);
    }
    if (in.kind() != Kind::List) return mismatch(in, type_name(t), what);
    *out = Value::list();
    out->mutable_items().reserve(in.items().size());
    for (size_t i = 0; i < in.items().size(); i++) {
      const Value& e = in.items()[i];
      if (e.is_null()) return Status(Code::Type, "'" + what + "[" + std::to_string(i) + "]' is null; list elements may not be null");
      Value c;
      KF_TRY(coerce_scalar(e, t.elem, what + "[" + std::to_string(i) + "]", &c));
      out->push(std::move(c));
    }
    return Status::ok();
  }
  if (t.kind == TypeKind::Vector) {
    std::vector<float> v;
    if (in.kind() == Kind::Vector) {
      v = in.vec();
    } else if (in.kind() == Kind::List) {
      v.reserve(in.items().size());
      for (const Value& e : in.items()) {
        if (!e.is_number()) return Status(Code::Type, "expected numbers in vector '" + what + "', got " + kind_name(e.kind()));
        v.push_back((float)e.as_number());
      }
    } else {
      return mismatch(in, type_name(t), what);
    }
    if (v.size() != t.dim)
      return Status(Code::Type, "vector '" + what + "' has " + std::to_string(v.size()) + " dimensions, expected " + std::to_string(t.dim));
    for (size_t i = 0; i < v.size(); i++) {
      if (!std::isfinite(v[i]))
        return Status(Code::Type, "vector '" + what + "' has a non-finite value at " + std::to_string(i));
      if (t.f16 && std::fabs(v[i]) > 65504.0f)
        return Status(Code::Type, "vector '" + what + "' value at " + std::to_string(i) + " overflows f16 (max 65504)");
    }
    *out = Value::vector(std::move(v));
    return Status::ok();
  }
  return coerce_scalar(in, t.kind, what, out);
}

}  // namespace kitfox
