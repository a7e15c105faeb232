// Binary encoding: the little-endian primitives every record uses, and the
// document codec.
//
// A document body is  varint(field count) then, per field in schema order,
//   varint(field id) value
// and a value is a tag byte and its payload:
//   1 false | 2 true | 3 int: zigzag varint | 4 float: 8 bytes IEEE-754
//   5 text: varint len, UTF-8 | 6 bytes: varint len, bytes
//   7 timestamp: zigzag varint ms | 8 list: varint n, n values
//   9 object: varint n, n x (varint len, key, value)
//   10 vector f32: varint dim, dim x 4 bytes | 11 vector f16: varint dim, dim x 2 bytes
//   12 vector in the field's vector table: varint node (image documents only)
// Null fields are not stored. The document id is kept outside the body.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "schema.h"
#include "status.h"
#include "value.h"

namespace kitfox {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "kitfox's file format is little-endian");

inline void put_u8(std::string& o, uint8_t v) { o.push_back((char)v); }
inline void put_u32(std::string& o, uint32_t v) { o.append((const char*)&v, 4); }
inline void put_u64(std::string& o, uint64_t v) { o.append((const char*)&v, 8); }
inline void put_varint(std::string& o, uint64_t v) {
  if (v < 0x80) {  // most: counts, field ids, lengths, small numbers
    o.push_back((char)v);
    return;
  }
  char buf[10];
  int n = 0;
  while (v >= 0x80) { buf[n++] = (char)(v | 0x80); v >>= 7; }
  buf[n++] = (char)v;
  o.append(buf, n);
}
// The value tags above; 0 stands for null inside a list or an object.
enum Tag : uint8_t { kNull = 0, kFalse, kTrue, kInt, kFloat, kText, kBytes, kTimestamp, kList, kObject, kVecF32, kVecF16, kVecRef };

inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }
inline void put_str(std::string& o, std::string_view s) { put_varint(o, s.size()); o.append(s); }

// Bounds-checked reader over untrusted bytes: once a read fails, ok() is false
// and every later read returns zero.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_((const uint8_t*)p), end_((const uint8_t*)p + n) {}
  explicit Reader(std::string_view s) : Reader(s.data(), s.size()) {}
  bool ok() const { return ok_; }
  bool done() const { return p_ == end_; }
  size_t left() const { return end_ - p_; }
  const char* pos() const { return (const char*)p_; }
  uint8_t u8() { if (!need(1)) return 0; return *p_++; }
  uint32_t u32() { uint32_t v = 0; if (need(4)) { memcpy(&v, p_, 4); p_ += 4; } return v; }
  uint64_t u64() { uint64_t v = 0; if (need(8)) { memcpy(&v, p_, 8); p_ += 8; } return v; }
  uint64_t varint() {
    if (p_ != end_ && *p_ < 0x80) return *p_++;  // one byte: ids, lengths, small ints
    return varint_long();
  }
  uint64_t varint_long() {
    if (end_ - p_ >= 10) {  // room for the longest: no bound to check a byte
      uint64_t v = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = *p_++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return v;
      }
      fail();
      return 0;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!need(1)) return 0;
      uint8_t b = *p_++;
      v |= (uint64_t)(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  // n is 64 bits wide: a length read from a varint is checked before it
  // narrows to a 32-bit size_t (wasm32), where 2^32 + 3 would read as 3.
  std::string_view bytes(uint64_t n) {
    if (!need(n)) return {};
    std::string_view s((const char*)p_, (size_t)n);
    p_ += n;
    return s;
  }
  std::string_view str() { return bytes(varint()); }
  // Steps over a varint, failing where varint() fails, without its value.
  void skip_varint() {
    const uint8_t* lim = end_ - p_ > 10 ? p_ + 10 : end_;
    const uint8_t* p = p_;
    while (p != lim && (*p & 0x80)) p++;
    if (p == lim) return fail();  // no last byte: past the end, or longer than 64 bits hold
    p_ = p + 1;
  }
  void fail() { ok_ = false; p_ = end_; }

 private:
  // A failed reader stands at its end (fail()), so the length alone says.
  bool need(uint64_t n) {
    if ((uint64_t)(end_ - p_) >= n) return true;
    fail();
    return false;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

uint16_t float_to_half(float f);

// A half to f32, exactly, without branches (the distance kernels decode with
// it as they read f16 vectors): normals rebias the exponent, subnormals are
// scaled by a float multiply, inf/nan keep their payload.
inline float half_to_float(uint16_t half) {
  uint32_t h = half;
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t em = h & 0x7FFFu;
  // Normal numbers: shift into place and rebias (112 << 23).
  uint32_t normal = (em << 13) + (112u << 23);
  // Inf/NaN: exponent all ones.
  uint32_t is_inf = 0u - (uint32_t)(em >= 0x7C00u);
  normal |= is_inf & 0x7F800000u;
  // Subnormals and zero: em * 2^-24, exact in float.
  float sub = (float)em * 5.9604644775390625e-08f;
  uint32_t subbits;
  memcpy(&subbits, &sub, 4);
  uint32_t is_sub = 0u - (uint32_t)(em < 0x0400u);
  uint32_t bits = sign | ((normal & ~is_sub) | (subbits & is_sub));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// Resolves tag-12 references: the vector of `node` in field `field_id`'s table.
class VectorSource {
 public:
  virtual ~VectorSource() = default;
  virtual bool vector(uint32_t field_id, uint64_t node, Value* out) const = 0;
};

// Encodes one typed value (already coerced to its field's type).
void encode_value(std::string& out, const Value& v, bool f16);
// A member of a list or an object: a null as its tag (encode_value stores
// nothing for a null, which is a field's absence).
void encode_item(std::string& out, const Value& v, bool f16);
// A vector value (tag and dimension first), as f32 or as halves.
void encode_vector(std::string& out, const float* v, size_t n, bool f16);
Status decode_value(Reader& r, Value* out, int depth = 0);
// The scalars of decode_value (null, bool, int, float, timestamp, text,
// bytes), inline for the readers of documents; false, reading nothing, for
// any other tag. A value cut short fails the reader.
[[gnu::always_inline]] inline bool decode_scalar(Reader& r, Value* out) {
  if (r.done()) return false;
  const uint8_t tag = (uint8_t)*r.pos();
  switch (tag) {
    case kNull: r.u8(); out->assign_scalar(Kind::Null, 0); return true;
    case kFalse: case kTrue: r.u8(); out->assign_scalar(Kind::Bool, tag == kTrue); return true;
    case kFloat: {
      r.u8();
      const uint64_t bits = r.u64();
      double d;
      std::memcpy(&d, &bits, 8);
      out->assign_real(d);
      return true;
    }
    case kInt: r.u8(); out->assign_scalar(Kind::Int, unzigzag(r.varint())); return true;
    case kTimestamp: r.u8(); out->assign_scalar(Kind::Timestamp, unzigzag(r.varint())); return true;
    case kText: r.u8(); out->assign_string(Kind::Text, r.str()); return true;
    case kBytes: r.u8(); out->assign_string(Kind::Bytes, r.str()); return true;
    default: return false;
  }
}
// Steps over one value; a damaged one (nested too deeply, a length beyond
// the document) fails the reader, as does a vector reference (tag 12, which
// only a stored document's field holds) unless `refs`.
void skip_value(Reader& r, int depth = 0, bool refs = true);
// A document's field value stepped over (as skip_value steps), a scalar inline.
[[gnu::always_inline]] inline void skip_field(Reader& r) {
  if (r.done()) return skip_value(r);
  switch ((uint8_t)*r.pos()) {
    case kNull: case kFalse: case kTrue: r.u8(); return;
    case kInt: case kTimestamp: r.u8(); r.varint(); return;
    case kFloat: r.bytes(9); return;
    case kText: case kBytes: r.u8(); r.str(); return;
    default: skip_value(r);
  }
}
void encode_vector_ref(std::string& out, uint64_t node);
// A statement's parameters given as one encoded list value (as the WASM
// binding gets them), each decoded into `values`. (Left in their encoding
// instead: Params::split_list.)
Status decode_params(std::string_view list, std::vector<Value>* values);

// `fields` holds the document's typed values by field name (no id); the body
// is appended to `out`.
void encode_document(const CollectionDef& def, const Value& fields, std::string& out);
// Decodes a body into an Object {id, fields in schema order}; null fields are
// left out. *out is written over: an object it holds keeps its storage (its
// members' vectors, keys and texts) for this one, so a row read again and
// again into one Value allocates nothing.
Status decode_document(const CollectionDef& def, int64_t id, std::string_view body, Value* out,
                       const VectorSource* vs = nullptr);
// A field's value at r (its tag next): a tag-12 reference resolved through
// `vs`, else decode_value's.
Status decode_field_value(Reader& r, uint32_t fid, Value* out, const VectorSource* vs);
// Decodes just one field (Null when absent).
Status decode_field(std::string_view body, uint32_t field_id, Value* out, const VectorSource* vs = nullptr);
// The fields `ids` (n of them, distinct) into out[0..n), in one walk of the
// document: each as decode_field reads it (its first, null where the
// document has none). A damaged document fails as decode_field would fail
// for some id (Code::Corrupt), its message naming the damage met first in
// the document's order.
Status decode_fields(std::string_view body, const uint32_t* ids, size_t n, Value* out, const VectorSource* vs = nullptr);
// The node a document's field names by reference (tag 12, as an image
// writes an indexed vector: a node of the table its field's index had
// then); kNoVectorRef when the field holds its vector itself (or the body
// is damaged), kNoVectorField when the document lacks the field.
constexpr int64_t kNoVectorRef = -1, kNoVectorField = -2;
int64_t vector_ref(std::string_view body, uint32_t field_id);

}  // namespace kitfox
