#include "codec.h"

#include "engine_limits.h"

namespace kitfox {

void encode_vector_ref(std::string& out, uint64_t node) {
  put_u8(out, kVecRef);
  put_varint(out, node);
}

uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (exp >= 31) return (uint16_t)(sign | 0x7C00);  // overflow (validated before)
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;  // may carry into the exponent: correct
  return (uint16_t)h;
}

void encode_value(std::string& out, const Value& v, bool f16) {
  switch (v.kind()) {
    case Kind::Null: return;  // not stored
    case Kind::Bool: put_u8(out, v.as_bool() ? kTrue : kFalse); return;
    case Kind::Int: put_u8(out, kInt); put_varint(out, zigzag(v.as_int())); return;
    case Kind::Float: {
      put_u8(out, kFloat);
      double d = v.as_float();
      out.append((const char*)&d, 8);
      return;
    }
    case Kind::Text: put_u8(out, kText); put_str(out, v.as_string()); return;
    case Kind::Bytes: put_u8(out, kBytes); put_str(out, v.as_string()); return;
    case Kind::Timestamp: put_u8(out, kTimestamp); put_varint(out, zigzag(v.as_int())); return;
    case Kind::List:
      put_u8(out, kList);
      put_varint(out, v.items().size());
      for (const Value& e : v.items()) encode_item(out, e, f16);  // json lists may hold null
      return;
    case Kind::Object:
      put_u8(out, kObject);
      put_varint(out, v.items().size());
      for (size_t i = 0; i < v.items().size(); i++) {
        put_str(out, v.keys()[i]);
        encode_item(out, v.items()[i], f16);
      }
      return;
    case Kind::Vector: encode_vector(out, v.vec().data(), v.vec().size(), f16); return;
  }
}

void encode_item(std::string& out, const Value& v, bool f16) {
  if (v.is_null()) put_u8(out, kNull);
  else encode_value(out, v, f16);
}

void encode_vector(std::string& out, const float* v, size_t n, bool f16) {
  put_u8(out, f16 ? kVecF16 : kVecF32);
  put_varint(out, n);
  if (!f16) {
    out.append((const char*)v, n * 4);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint16_t h = float_to_half(v[i]);
    out.append((const char*)&h, 2);
  }
}

Status decode_value(Reader& r, Value* out, int depth) {
  if (depth > kMaxDepth) return Status(Code::Corrupt, "document nested too deeply");
  if (decode_scalar(r, out)) return r.ok() ? Status::ok() : Status(Code::Corrupt, "document cut short");
  uint8_t tag = r.u8();
  switch (tag) {
    case kList: {
      uint64_t n = r.varint();
      if (n > r.left()) return Status(Code::Corrupt, "list length beyond the document");
      *out = Value::list();
      out->mutable_items().resize(n);
      for (uint64_t i = 0; i < n; i++) KF_TRY(decode_value(r, &out->mutable_items()[i], depth + 1));
      break;
    }
    case kObject: {
      uint64_t n = r.varint();
      if (n > r.left()) return Status(Code::Corrupt, "object size beyond the document");
      *out = Value::object();
      for (uint64_t i = 0; i < n; i++) {
        std::string key(r.str());
        Value v;
        KF_TRY(decode_value(r, &v, depth + 1));
        out->append(std::move(key), std::move(v));
      }
      break;
    }
    case kVecF32: {
      uint64_t n = r.varint();
      if (n > r.left() / 4) return Status(Code::Corrupt, "vector length beyond the document");
      std::string_view b = r.bytes(n * 4);
      if (!r.ok()) break;
      std::vector<float> v(n);
      if (n) memcpy(v.data(), b.data(), n * 4);
      *out = Value::vector(std::move(v));
      break;
    }
    case kVecF16: {
      uint64_t n = r.varint();
      if (n > r.left() / 2) return Status(Code::Corrupt, "vector length beyond the document");
      std::string_view b = r.bytes(n * 2);
      if (!r.ok()) break;
      std::vector<float> v(n);
      for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, b.data() + 2 * i, 2);
        v[i] = half_to_float(h);
      }
      *out = Value::vector(std::move(v));
      break;
    }
    default: return Status(Code::Corrupt, "unknown value tag " + std::to_string(tag));
  }
  if (!r.ok()) return Status(Code::Corrupt, "document cut short");
  return Status::ok();
}

void encode_document(const CollectionDef& def, const Value& fields, std::string& out) {
  // Each field's value looked up once (the count goes first).
  constexpr size_t kOnStack = 32;
  const Value* on_stack[kOnStack];
  std::vector<const Value*> on_heap;
  const Value** found = on_stack;
  if (def.fields.size() > kOnStack) {
    on_heap.resize(def.fields.size());
    found = on_heap.data();
  }
  size_t count = 0;
  for (size_t i = 0; i < def.fields.size(); i++) {
    const Value* v = fields.get(def.fields[i].name);
    found[i] = v && !v->is_null() ? v : nullptr;
    count += found[i] != nullptr;
  }
  put_varint(out, count);
  for (size_t i = 0; i < def.fields.size(); i++) {
    if (!found[i]) continue;
    const Field& f = def.fields[i];
    put_varint(out, f.id);
    encode_value(out, *found[i], f.type.kind == TypeKind::Vector && f.type.f16);
  }
}

void skip_value(Reader& r, int depth, bool refs) {
  if (depth > kMaxDepth) return r.fail();
  uint8_t tag = r.u8();
  switch (tag) {
    case kVecRef: if (!refs) return r.fail(); r.varint(); return;
    case kInt: case kTimestamp: r.varint(); return;
    case kFloat: r.u64(); return;
    case kText: case kBytes: r.str(); return;
    case kList: {
      uint64_t n = r.varint();
      for (uint64_t i = 0; i < n && r.ok(); i++) {
        // Numbers stepped over here: lists of them (embeddings) are the long ones.
        const uint8_t item = r.left() ? (uint8_t)*r.pos() : (uint8_t)kNull;
        if (item == kFloat && depth < kMaxDepth) {
          r.bytes(9);
        } else if (item == kInt && depth < kMaxDepth) {
          r.u8();
          r.skip_varint();
        } else {
          skip_value(r, depth + 1, refs);
        }
      }
      return;
    }
    case kObject: { uint64_t n = r.varint(); for (uint64_t i = 0; i < n && r.ok(); i++) { r.str(); skip_value(r, depth + 1, refs); } return; }
    case kVecF32: case kVecF16: {
      uint64_t n = r.varint(), item = tag == kVecF32 ? 4 : 2;
      if (n > r.left() / item) return r.fail();
      r.bytes(n * item);
      return;
    }
    case kNull: case kFalse: case kTrue: return;
    default: r.fail();
  }
}

Status decode_params(std::string_view list, std::vector<Value>* values) {
  values->clear();
  Reader rd(list);
  if (rd.u8() != kList) return Status(Code::Invalid, "parameters must be a list");
  uint64_t n = rd.varint();
  if (!rd.ok() || n > rd.left()) return Status(Code::Invalid, "malformed parameters");
  values->resize(n);
  // Each parameter nests as deep as a value given alone (the list around
  // them counts no level), as the CLI's --param JSON does.
  for (uint64_t i = 0; i < n; i++)
    if (!decode_value(rd, &(*values)[i], 0).is_ok()) return Status(Code::Invalid, "malformed parameters");
  if (!rd.done()) return Status(Code::Invalid, "malformed parameters");
  return Status::ok();
}

// A field value: a tag-12 reference is resolved through `vs`.
Status decode_field_value(Reader& r, uint32_t fid, Value* out, const VectorSource* vs) {
  if (r.left() && (uint8_t)*r.pos() == kVecRef) {
    r.u8();
    uint64_t node = r.varint();
    if (!r.ok() || !vs || !vs->vector(fid, node, out))
      return Status(Code::Corrupt, "a vector reference to node " + std::to_string(node) + " that its table does not hold");
    return Status::ok();
  }
  return decode_value(r, out, 0);
}

Status decode_document(const CollectionDef& def, int64_t id, std::string_view body, Value* out,
                       const VectorSource* vs) {
  Reader r(body);
  uint64_t n = r.varint();
  // Written over what *out holds (Value::member): an object read before
  // gives its storage to this one.
  if (out->kind() != Kind::Object) *out = Value::object();
  out->reserve_keys(1 + (size_t)std::min<uint64_t>(n, def.fields.size()));  // grown once, not field by field
  size_t k = 0;
  out->member(k++, "id").assign_scalar(Kind::Int, id);
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    uint32_t fid = (uint32_t)r.varint();
    const Field* f = def.field_by_id(fid);
    if (!f) {  // a dropped field: skipped unread
      skip_value(r);
      continue;
    }
    Value& slot = out->member(k++, f->name);  // in its place
    if (!decode_scalar(r, &slot)) KF_TRY(decode_field_value(r, fid, &slot, vs));
  }
  out->keep_members(k);
  if (!r.ok()) return Status(Code::Corrupt, "the document with id " + std::to_string(id) + " is cut short");
  return Status::ok();
}


Status decode_field(std::string_view body, uint32_t field_id, Value* out, const VectorSource* vs) {
  Reader r(body);
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    uint32_t fid = (uint32_t)r.varint();
    if (fid == field_id) {
      if (decode_scalar(r, out)) return r.ok() ? Status::ok() : Status(Code::Corrupt, "document cut short");
      return decode_field_value(r, fid, out, vs);
    }
    skip_field(r);
  }
  if (!r.ok()) return Status(Code::Corrupt, "document cut short");
  *out = Value();
  return Status::ok();
}

Status decode_fields(std::string_view body, const uint32_t* ids, size_t n, Value* out, const VectorSource* vs) {
  if (n == 0) return Status::ok();
  if (n == 1) return decode_field(body, ids[0], out, vs);
  if (n > 64) {  // (a mask of 64 bits below)
    for (size_t i = 0; i < n; i++) KF_TRY(decode_field(body, ids[i], &out[i], vs));
    return Status::ok();
  }
  uint64_t taken = 0;
  size_t found = 0;
  Reader r(body);
  uint64_t count = r.varint();
  for (uint64_t f = 0; f < count && found < n && r.ok(); f++) {
    const uint32_t fid = (uint32_t)r.varint();
    size_t i = 0;
    while (i < n && (ids[i] != fid || (taken >> i & 1))) i++;
    if (i == n) {
      skip_field(r);
      continue;
    }
    taken |= 1ull << i;  // (a field given twice: its first, as decode_field reads)
    found++;
    if (!decode_scalar(r, &out[i])) KF_TRY(decode_field_value(r, fid, &out[i], vs));
  }
  if (!r.ok()) return Status(Code::Corrupt, "document cut short");
  for (size_t i = 0; i < n; i++)
    if (!(taken >> i & 1)) out[i] = Value();
  return Status::ok();
}

int64_t vector_ref(std::string_view body, uint32_t field_id) {
  Reader r(body);
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    uint32_t fid = (uint32_t)r.varint();
    if (fid != field_id) {
      skip_value(r);
      continue;
    }
    if (r.done() || (uint8_t)*r.pos() != kVecRef) return kNoVectorRef;
    r.u8();
    uint64_t node = r.varint();
    return r.ok() && node <= UINT32_MAX ? (int64_t)node : kNoVectorRef;
  }
  return r.ok() ? kNoVectorField : kNoVectorRef;
}

}  // namespace kitfox
