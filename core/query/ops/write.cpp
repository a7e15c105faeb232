// write: put, insert, set and del. Each builds all its documents (typed,
// checked, encoded) into one WriteBatch before anything lands, so a
// failed statement changes nothing; set and del find their documents
// through the access path the planner picks for the where clause.
#include "ops.h"

#include <map>
#include <set>

#include "../../engine_limits.h"
#include "../planner.h"

namespace kitfox {

namespace {

// Where each of a document's keys stood in the statement (none: at the
// document's position).
struct KeyPositions {
  const int64_t* at = nullptr;
  size_t n = 0;
};

// The kind of value an encoded value's tag stands for.
Kind tag_kind(uint8_t tag) {
  switch (tag) {
    case kNull: return Kind::Null;
    case kFalse: case kTrue: return Kind::Bool;
    case kInt: return Kind::Int;
    case kFloat: return Kind::Float;
    case kText: return Kind::Text;
    case kBytes: return Kind::Bytes;
    case kTimestamp: return Kind::Timestamp;
    case kList: return Kind::List;
    case kVecF32: case kVecF16: return Kind::Vector;
    default: return Kind::Object;
  }
}

// A vector for field `f`, refused (at dpos) where the field's index would refuse it.
Status check_indexed(const Collection& c, const Field& f, const float* v, int64_t dpos) {
  auto it = c.vindex.find(f.id);
  if (it == c.vindex.end()) return Status::ok();
  thread_local std::vector<float> prepared;  // the vector in the index's stored form
  Status ps = it->second->prepare(v, &prepared, f.name);
  return ps.is_ok() ? ps : Status(ps.code(), ps.message(), dpos);
}

// Reads one value at `v` that a field (or a list's element) of kind `k`
// stores as given: already of that kind, and what coerce would keep as it
// is (a finite float, text of valid UTF-8, a timestamp within a Date's
// range). False, `v` left anywhere, for anything else: coerce converts it
// or names its error.
static bool take_as_is(Reader& v, TypeKind k) {
  const uint8_t tag = v.u8();
  switch (k) {
    case TypeKind::Bool: return (tag == kTrue || tag == kFalse) && v.ok();
    case TypeKind::Int:
      if (tag != kInt) return false;
      v.varint();
      return v.ok();
    case TypeKind::Bytes:
      if (tag != kBytes) return false;
      v.str();
      return v.ok();
    case TypeKind::Text:
      return tag == kText && valid_utf8(v.str()) && v.ok();
    case TypeKind::Float: {
      if (tag != kFloat) return false;
      const uint64_t bits = v.u64();
      double d;
      memcpy(&d, &bits, 8);
      return v.ok() && std::isfinite(d);
    }
    case TypeKind::Timestamp:
      return tag == kTimestamp && in_date_range(unzigzag(v.varint())) && v.ok();
    default:
      return false;  // json: converted by coerce
  }
}

// One field's value of an encoded literal document, typed and encoded into
// `out` as the field stores it. The common cases (a value already of the
// field's kind, an int for a float, a list of numbers for a vector) are
// read straight from the bytes; the rest is decoded and coerced, so every
// error is the one a value would get, at its key (kpos) or, for a vector
// its index refuses, at its document (dpos). `r` ends past the value.
Status type_field(const Collection& c, const Field& f, Reader& r, int64_t kpos, int64_t dpos, std::string& out) {
  const char* at = r.pos();
  uint8_t tag = r.left() ? (uint8_t)*at : (uint8_t)kNull;
  const Type& t = f.type;
  switch (t.kind) {
    case TypeKind::Bool:
    case TypeKind::Int:
    case TypeKind::Bytes:
    case TypeKind::Text:
    case TypeKind::Timestamp: {  // stored as given, when given as the field's kind
      Reader v = r;
      if (!take_as_is(v, t.kind)) break;
      r = v;
      out.append(at, r.pos() - at);
      return Status::ok();
    }
    case TypeKind::Float: {
      if (tag != kFloat && tag != kInt) break;
      Reader v = r;
      v.u8();
      double d;
      if (tag == kInt) {
        d = (double)unzigzag(v.varint());
      } else {
        uint64_t bits = v.u64();
        memcpy(&d, &bits, 8);
        if (!std::isfinite(d)) break;
      }
      r = v;
      put_u8(out, kFloat);
      out.append((const char*)&d, 8);
      return Status::ok();
    }
    case TypeKind::Vector: {
      if (tag != kList && tag != kVecF32) break;
      Reader v = r;
      v.u8();
      if (v.varint() != t.dim) break;
      thread_local std::vector<float> floats;
      floats.resize(t.dim);
      auto fits = [&](float x) { return std::isfinite(x) && (!t.f16 || std::fabs(x) <= 65504.0f); };
      bool ok = true;
      if (tag == kVecF32) {  // a parameter's vector
        if (t.dim > v.left() / 4) break;
        memcpy(floats.data(), v.bytes(t.dim * 4).data(), t.dim * 4);
        for (uint32_t i = 0; i < t.dim && ok; i++) ok = fits(floats[i]);
      }
      for (uint32_t i = 0; i < t.dim && ok && tag == kList; i++) {
        uint8_t et = v.u8();
        float x;
        if (et == kInt) {
          x = (float)(double)unzigzag(v.varint());  // through double, as coerce converts it
        } else if (et == kFloat) {
          uint64_t bits = v.u64();
          double d;
          memcpy(&d, &bits, 8);
          x = (float)d;
        } else {
          ok = false;
          break;
        }
        ok = fits(x);
        floats[i] = x;
      }
      if (!ok || !v.ok()) break;
      r = v;
      KF_TRY(check_indexed(c, f, floats.data(), dpos));
      encode_vector(out, floats.data(), t.dim, t.f16);
      return Status::ok();
    }
    case TypeKind::List: {  // of scalars each already of its element's kind: stored as given
      if (tag != kList) break;
      Reader v = r;
      v.u8();
      const uint64_t n = v.varint();
      bool ok = v.ok() && n <= v.left();
      for (uint64_t i = 0; i < n && ok; i++) ok = take_as_is(v, t.elem);
      if (!ok) break;
      r = v;
      out.append(at, r.pos() - at);
      return Status::ok();
    }
    default:
      break;
  }
  Value v, typed;
  if (!decode_value(r, &v).is_ok())  // a parameter's value nested past the limit
    return Status(Code::Limit, "value of '" + f.name + "' nested deeper than " + std::to_string(kMaxDepth) + " levels",
                  kpos);
  Status st = coerce(v, t, f.name, &typed);
  if (!st.is_ok()) return Status(st.code(), st.message(), kpos);
  if (typed.kind() == Kind::Vector) KF_TRY(check_indexed(c, f, typed.vec().data(), dpos));
  encode_value(out, typed, t.kind == TypeKind::Vector && t.f16);
  return Status::ok();
}

// One document of a put's encoded literal body (the value at `r`) typed
// against the collection and appended to `bodies` as its stored body; an
// `id` key sets d->id. `keys`: where its keys stood in the statement.
Status type_literal_document(const Collection& c, Reader& r, KeyPositions keys, PreparedDocs::Doc* d,
                             std::string& bodies) {
  const CollectionDef& def = c.def;
  uint8_t tag = r.u8();
  if (tag != kObject)
    return Status(Code::Type, std::string("expected a document (an object), got ") + kind_name(tag_kind(tag)), d->pos);
  // Each field's typed value, in the order the document gives them (spans of
  // `typed`), then written in schema order.
  thread_local std::string typed;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> span;  // by field index: offset, length (0: absent)
  typed.clear();
  span.assign(def.fields.size(), {0, 0});
  size_t present = 0;
  bool id_seen = false;
  uint64_t n = r.varint();
  size_t next = 0;  // the field after the last one given: documents mostly give them in order
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    std::string_view k = r.str();
    int64_t kpos = i < keys.n ? keys.at[i] : d->pos;
    uint8_t vt = r.left() ? (uint8_t)*r.pos() : (uint8_t)kNull;
    // A key given twice (only a parameter's object can): the first counts,
    // null or not, as a document's first key of a name does when read.
    const bool is_id = k.size() == 2 && k[0] == 'i' && k[1] == 'd';
    const Field* f = nullptr;
    if (!is_id) {
      f = next < def.fields.size() && def.fields[next].name == k ? &def.fields[next] : def.field(k);
      if (!f) return not_found_field(std::string(k), def, kpos);
      next = f - def.fields.data() + 1;
    }
    std::pair<uint32_t, uint32_t>* sp = f ? &span[f - def.fields.data()] : nullptr;
    if (f ? sp->first || sp->second : id_seen) {
      skip_value(r);
      if (!r.ok()) return Status(Code::Limit, "value of '" + std::string(k) + "' nested deeper than " +
                                                  std::to_string(kMaxDepth) + " levels", kpos);
      continue;
    }
    if (!f) id_seen = true;
    if (vt == kNull) {  // a null field is not stored
      r.u8();
      if (sp) sp->first = 1;  // seen: {1, 0} is absent, but counted as given
      continue;
    }
    if (is_id) {
      if (vt != kInt) return Status(Code::Type, std::string("'id' must be an int, got ") + kind_name(tag_kind(vt)), kpos);
      r.u8();
      d->has_id = true;
      d->id = unzigzag(r.varint());
      continue;
    }
    size_t at = typed.size();
    KF_TRY(type_field(c, *f, r, kpos, d->pos, typed));
    span[f - def.fields.data()] = {(uint32_t)at, (uint32_t)(typed.size() - at)};
    present++;
  }
  if (!r.ok()) return Status(Code::Invalid, "internal: a put's parsed documents are damaged", d->pos);
  size_t start = bodies.size();
  put_varint(bodies, present);
  for (size_t i = 0; i < def.fields.size(); i++) {
    const Field& f = def.fields[i];
    if (!span[i].second) {
      if (f.required) return Status(Code::Constraint, "required field '" + f.name + "' is missing", d->pos);
      continue;
    }
    put_varint(bodies, f.id);
    bodies.append(typed, span[i].first, span[i].second);
  }
  d->at = start;
  d->len = bodies.size() - start;
  return Status::ok();
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
  if (v.is_null()) {  // null removes the key, as it removes a field; nothing is made on the way
    for (size_t i = from; i < path.size() && !cur->is_null(); i++) {
      if (cur->kind() != Kind::Object)
        return Status(Code::Type, "'" + join(std::vector<std::string>(path.begin(), path.begin() + i)) + "' is not an object", pos);
      if (i + 1 == path.size()) {
        cur->erase(path[i]);
        break;
      }
      Value* next = cur->get_mut(path[i]);
      if (!next) break;
      cur = next;
    }
    return Status::ok();
  }
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
  // `doc` holds the new field values by name; `number`: its number in a
  // put's list (from 1), which errors name it by (its id may be one the
  // put would have given), or 0: errors name it by its id.
  void add(int64_t id, const Value& doc, int64_t pos, size_t number = 0) {
    if (uniq_.empty()) return;
    Entry e{id, pos, number, {}};
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
    // A document written twice holds only its last copy's values: an entry
    // is superseded when a later one has its id (written_ holds each id once).
    if (written_.size() != entries_.size()) {
      std::set<int64_t> later;
      for (size_t i = entries_.size(); i-- > 0;) entries_[i].superseded = !later.insert(entries_[i].id).second;
    }
    for (size_t u = 0; u < uniq_.size(); u++) {
      const SecondaryDef& d = c_.def.secondary[uniq_[u]];
      std::string label = c_.def.field_by_id(d.field_id)->name;
      for (const std::string& k : d.subpath) label += "." + k;
      KF_ASSIGN(SecondaryIndex * idx, eng_.secondary(c_, uniq_[u]));
      std::map<std::string, const Entry*> seen;
      for (const Entry& e : entries_) {
        if (e.superseded) continue;
        const Value& key = e.keys[u];
        if (key.is_null()) continue;
        std::string kb = to_json(key);
        // A document of a put's list is named first by its number
        // ("document 3: ..."), as its other errors are.
        const std::string lead = e.number ? "document " + std::to_string(e.number) + ": " : std::string();
        auto it = seen.find(kb);
        if (it != seen.end() && it->second->id != e.id) {
          const Entry& first = *it->second;
          const std::string who = e.number ? "document " + std::to_string(first.number) + " too"
                                           : "the documents with ids " + std::to_string(first.id) + " and " + std::to_string(e.id);
          return Status(Code::Constraint, lead + "unique '" + label + "': " + kb + " is given to " + who + "; nothing was written", e.pos);
        }
        seen[kb] = &e;
        std::vector<int64_t> holders;
        idx->equal(key, &holders);
        for (int64_t h : holders)
          if (h != e.id && !written_.count(h))
            return Status(Code::Constraint, lead + "unique '" + label + "': " + kb + " is already held by the document with id " +
                                                std::to_string(h) + "; nothing was written", e.pos);
      }
    }
    return Status::ok();
  }

 private:
  struct Entry {
    int64_t id;
    int64_t pos;
    size_t number;  // in a put's list, from 1; or 0
    std::vector<Value> keys;
    bool superseded = false;  // a later entry writes the same document
  };
  Engine& eng_;
  Collection& c_;
  std::vector<size_t> uniq_;
  std::vector<Entry> entries_;
  std::set<int64_t> written_;
};


// Documents given in the codec's value encoding (`enc`: one object, or a
// list of them), each typed from its bytes, no Value built for it. `lp`:
// where each document and each key stood in the statement (null: all at
// `pos`); `numbered`: errors name the document by its number in the list.
static Status type_encoded_documents(const Collection& c, std::string_view enc, const LiteralPositions* lp, int64_t pos,
                                     bool numbered, PreparedDocs* out) {
  Reader r(enc);
  bool is_list = !enc.empty() && (uint8_t)enc[0] == kList;
  size_t n = 1;
  if (is_list) {
    r.u8();
    n = r.varint();
    if (!r.ok() || n > r.left()) return Status(Code::Invalid, "internal: a put's documents are damaged", pos);
  }
  bool unique = false;
  for (const SecondaryDef& d : c.def.secondary) unique |= d.kind == IndexKind::Unique;
  out->docs.clear();
  out->docs.resize(n);
  out->listed = is_list;
  out->bodies.clear();
  for (size_t i = 0; i < n; i++) {
    PreparedDocs::Doc& d = out->docs[i];
    KeyPositions keys;
    d.pos = pos;
    if (lp) {
      if (is_list) d.pos = lp->item[i];
      const std::span<const int64_t> at = lp->keys_of(i, is_list);
      keys = {at.data(), at.size()};
    }
    Status s = type_literal_document(c, r, keys, &d, out->bodies);
    if (s.is_ok()) s = check_doc_size(d.len, d.pos);
    if (!s.is_ok()) {
      if (numbered && is_list) return Status(s.code(), "document " + std::to_string(i + 1) + ": " + s.message(), s.position());
      return s;
    }
    // Room for n documents like the first, up to 64 MiB (past that it grows
    // as it goes): grown once, not doubled ten times.
    if (i == 0 && n > 1) out->bodies.reserve(std::min<size_t>(d.len * n, size_t(64) << 20));
    if (unique) KF_TRY(decode_document(c.def, 0, out->body(d), &d.fields));
  }
  out->ready = true;
  return Status::ok();
}

// A put's body of literals and parameters only, in the codec's value
// encoding as the parser encodes a body of literals alone: false where it
// holds anything else (or a parameter not given, whose error the Value
// path gives).
static bool encode_body(const Expr& e, const Evaluator& ev, std::string& out) {
  switch (e.kind) {
    case ExprKind::Param:
      if (std::string_view given = ev.params().encoded(e.param); !given.empty()) {  // already a list item's encoding
        out.append(given);
        return true;
      }
      [[fallthrough]];
    case ExprKind::Literal: {
      const Value* v = ev.ref(e);
      if (!v) return false;
      encode_item(out, *v, false);  // a null too: a field given as null is typed as absent
      return true;
    }
    case ExprKind::ListLit:
      put_u8(out, kList);
      put_varint(out, e.kids.size());
      for (const ExprPtr& k : e.kids)
        if (!encode_body(*k, ev, out)) return false;
      return true;
    case ExprKind::ObjectLit:
      put_u8(out, kObject);
      put_varint(out, e.kids.size());
      for (size_t i = 0; i < e.kids.size(); i++) {
        put_str(out, e.keys[i]);
        if (!encode_body(*e.kids[i], ev, out)) return false;
      }
      return true;
    default:
      return false;
  }
}

Status prepare_documents(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev,
                         PreparedDocs* out) {
  (void)eng;
  const Expr& body = *st.body;
  if (!body.encoded.empty()) return type_encoded_documents(c, body.encoded, body.parts.get(), body.pos, false, out);
  // Documents a host left in their encoding (Params): typed from it.
  if (body.kind == ExprKind::Param) {
    std::string_view given = ev.params().encoded(body.param);
    if (!given.empty()) return type_encoded_documents(c, given, body.parts.get(), body.pos, true, out);
  }
  // Literals and parameters (`put t {name: $1, n: $2}`, `put t $1`):
  // encoded as the parser encodes literals, then typed the same way.
  thread_local std::string enc;
  enc.clear();
  if (!encode_body(body, ev, enc)) {
    Value v;  // what is not a value, or a parameter not given: its error
    KF_TRY(ev.constant(body, &v));
    return Status(Code::Invalid, "internal: a put's body did not encode", body.pos);
  }
  // A list or object of them holds where its documents and keys stood
  // (the parser's); a parameter's documents are named by their number.
  Status s = type_encoded_documents(c, enc, body.parts.get(), body.pos, body.kind == ExprKind::Param, out);
  // A thread keeps what a put of small documents needs, not the largest
  // put it ever made (a server thread's import).
  if (enc.capacity() > (size_t(1) << 20)) std::string().swap(enc);
  return s;
}

void PreparedDocs::landed_rows(std::vector<Value>* rows) const {
  if (!landed) return;
  // Written over the rows *rows held (a host's result reused call after
  // call: the last put's {id} rows take no allocation again).
  rows->resize(docs.size());
  for (size_t i = 0; i < docs.size(); i++) {
    Value& row = (*rows)[i];
    row.member(0, "id") = Value::integer(docs[i].id);
    row.keep_members(1);
  }
}

Status land_documents(Engine& eng, Collection& c, const ParsedStatement& st, PreparedDocs& docs, WriteBatch* batch) {
  int64_t next_id = c.next_id;
  UniqueCheck unique(eng, c);
  std::vector<int64_t> seen;  // insert: ids given in this statement
  docs.landed = false;
  batch->reserve(batch->bytes() + docs.bodies.size() + docs.docs.size() * 16);  // each op: a body and a few varints
  const bool listed = docs.listed;
  for (size_t i = 0; i < docs.docs.size(); i++) {
    PreparedDocs::Doc& d = docs.docs[i];
    int64_t id = d.id;
    if (!d.has_id) {
      if (next_id == INT64_MAX) return Status(Code::Limit, "no ids left in '" + c.def.name + "'", d.pos);
      id = next_id++;
    } else if (id >= next_id) {
      next_id = id == INT64_MAX ? id : id + 1;
    }
    if (st.kind == StmtKind::Insert) {
      if (c.ids.find(id))
        return Status(Code::Exists, "id " + std::to_string(id) + " already exists in '" + c.def.name + "'; nothing was inserted", d.pos);
      seen.push_back(id);
    }
    batch->put(c.def.id, id, docs.body(d));
    if (unique.active()) unique.add(id, d.fields, d.pos, listed ? i + 1 : 0);
    d.id = id;  // for its row (an id it gave stays as given)
  }
  docs.landed = true;
  KF_TRY(unique.check());
  if (seen.size() > 1) {
    std::sort(seen.begin(), seen.end());
    auto dup = std::adjacent_find(seen.begin(), seen.end());
    if (dup != seen.end()) return Status(Code::Exists, "id " + std::to_string(*dup) + " is given twice; nothing was inserted", st.body->pos);
  }
  return Status::ok();
}

Status write_documents(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev,
                       PreparedDocs* docs, WriteBatch* batch, QueryResult* res) {
  switch (st.kind) {
    case StmtKind::Put:
    case StmtKind::Insert: {
      PreparedDocs own;
      if (!docs || !docs->ready) {
        KF_TRY(prepare_documents(eng, c, st, ev, &own));
        KF_TRY(land_documents(eng, c, st, own, batch));
        own.landed_rows(&res->rows);  // made here: no caller holds them
        break;
      }
      KF_TRY(land_documents(eng, c, st, *docs, batch));
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
        const Field* f = c.def.field(a.path[0]);
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
        if (a.path.size() == 1 && typed.kind() == Kind::Vector) KF_TRY(check_indexed(c, *f, typed.vec().data(), a.pos));
        as.push_back({f, &a.path, std::move(typed), a.pos});
      }
      int64_t n = 0;
      std::string enc;
      Status inner;
      UniqueCheck unique(eng, c);
      KF_TRY(visit_where(eng, c, st, ev, true, [&](Row& row) {
        Value d = std::move(row.doc);
        row.decoded = false;
        for (Assign& a : as) {
          if (a.path->size() == 1) {
            d.set(a.field->name, a.value);
          } else {
            Value* fv = d.get_mut(a.field->name);
            Value cur = fv ? *fv : Value();
            inner = assign_path(&cur, *a.path, 1, a.value, a.pos);
            if (!inner.is_ok()) {
              inner = Status(inner.code(), "the document with id " + std::to_string(row.id) + ": " + inner.message(), a.pos);
              return false;
            }
            d.set(a.field->name, std::move(cur));
          }
        }
        enc.clear();
        encode_document(c.def, d, enc);
        inner = check_doc_size(enc.size(), st.pos);
        if (!inner.is_ok()) return false;
        batch->put(c.def.id, row.id, enc);
        n++;
        unique.add(row.id, d, st.pos);
        return true;
      }));
      KF_TRY(inner);
      KF_TRY(unique.check());
      res->rows.push_back(row1("updated", Value::integer(n)));
      break;
    }
    case StmtKind::Del: {
      int64_t n = 0;
      KF_TRY(visit_where(eng, c, st, ev, false, [&](Row& row) {
        int64_t id = row.id;
        batch->del(c.def.id, id);
        n++;
        return true;
      }));
      res->rows.push_back(row1("deleted", Value::integer(n)));
      break;
    }
    default:
      return Status(Code::Invalid, "not a write statement", st.pos);
  }
  return Status::ok();
}

}  // namespace kitfox
