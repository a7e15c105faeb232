// define: the statements that change the catalog (create, alter and drop
// collection; create and drop index), checked against the collection as it
// is, each one definition record (a collection's whole new definition).
#include "ops.h"

#include "../../engine_limits.h"

namespace kitfox {

namespace {
// What a definition record may hold (decode_def refuses more), checked
// before it is logged: a statement past it changes nothing. (An index's
// json path, the other such limit, is checked where `create index` reads it.)
Status within_limits(const CollectionDef& d, int64_t pos) {
  if (d.secondary.size() > kMaxFields)
    return Status(Code::Limit, "'" + d.name + "' would have more than " + std::to_string(kMaxFields) + " secondary indexes", pos);
  return Status::ok();
}
}  // namespace

Status define(Engine& eng, const ParsedStatement& st, WriteBatch* batch) {
  Collection* c = nullptr;
  if (st.kind != StmtKind::CreateCollection) {
    c = eng.find(st.collection);
    if (!c) {
      if (st.kind == StmtKind::DropCollection && st.if_exists) return Status::ok();
      return no_collection(st.collection, st.collection_pos);
    }
  }
  switch (st.kind) {
    case StmtKind::CreateCollection: {
      if (eng.find(st.collection)) {
        if (st.if_not_exists) return Status::ok();
        return Status(Code::Exists, "collection '" + st.collection + "' already exists", st.collection_pos);
      }
      CollectionDef d;
      d.id = eng.next_collection_id();
      d.name = st.collection;
      for (const FieldDecl& fd : st.fields) {
        d.fields.push_back(Field{d.next_field_id++, fd.name, fd.type, fd.required, fd.index});
        for (IndexKind k : fd.secondary) {
          if (fd.type.kind == TypeKind::Vector || fd.type.kind == TypeKind::Bytes)
            return Status(Code::Type, std::string("@") + secondary_name(k) + " does not index " + type_name(fd.type) + " fields", fd.pos);
          d.secondary.push_back(SecondaryDef{d.fields.back().id, {}, k});
        }
      }
      KF_TRY(within_limits(d, st.collection_pos));
      batch->define(d, 1);
      break;
    }
    case StmtKind::DropCollection:
      batch->drop(c->def.id);
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
        for (IndexKind k : fd.secondary)
          if (fd.type.kind == TypeKind::Vector || fd.type.kind == TypeKind::Bytes)
            return Status(Code::Type, std::string("@") + secondary_name(k) + " does not index " + type_name(fd.type) + " fields", fd.pos);
        d.fields.push_back(Field{d.next_field_id++, fd.name, fd.type, fd.required, fd.index});
        for (IndexKind k : fd.secondary) d.secondary.push_back(SecondaryDef{d.fields.back().id, {}, k});
        KF_TRY(within_limits(d, fd.pos));
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
      batch->define(d, c->next_id);
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
      if (sub.size() > (size_t)kMaxDepth)
        return Status(Code::Limit, "an index's json path goes at most " + std::to_string(kMaxDepth) + " keys deep", st.field_pos);
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
          if (st.if_exists) return Status::ok();
          return Status(Code::NotFound, "'" + join(st.index_path) + "' has no such index", st.field_pos);
        }
      } else if (secondary) {
        for (const SecondaryDef& x : d.secondary)
          if (x.field_id == f->id && x.subpath == sub && x.kind == st.index.kind) {
            if (st.if_not_exists) return Status::ok();
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
            dup = secondary_key(*c, sd, eng.body(e.loc), &key);
            if (!dup.is_ok()) return false;
            int64_t other = tmp.holder(key, e.id);
            if (other >= 0) {
              dup = Status(Code::Constraint, "cannot create @unique on '" + join(st.index_path) + "': the documents with ids " +
                                                 std::to_string(other) + " and " + std::to_string(e.id) + " both hold " + to_json(key), st.index_pos);
              return false;
            }
            tmp.put(e.id, key);
            return true;
          });
          KF_TRY(dup);
        }
        d.secondary.push_back(std::move(sd));
        KF_TRY(within_limits(d, st.index_pos));
      } else if (!sub.empty()) {
        return Status(Code::Syntax, "@text and @hnsw index whole fields, not json paths", st.index_pos);
      } else if (st.index.kind == IndexKind::Text) {
        if (f->type.kind != TypeKind::Text && !(f->type.kind == TypeKind::List && f->type.elem == TypeKind::Text))
          return Status(Code::Type, "@text indexes text fields; '" + f->name + "' is " + type_name(f->type), st.index_pos);
        if (f->index.kind != IndexKind::None) {
          if (st.if_not_exists) return Status::ok();
          return Status(Code::Exists, "field '" + f->name + "' already has an index: " + index_name(f->index), st.field_pos);
        }
        f->index = st.index;
      } else {
        if (f->type.kind != TypeKind::Vector)
          return Status(Code::Type, "@hnsw indexes vector fields; '" + f->name + "' is " + type_name(f->type), st.index_pos);
        if (f->index.kind != IndexKind::None) {
          if (st.if_not_exists) return Status::ok();
          return Status(Code::Exists, "field '" + f->name + "' already has an index: " + index_name(f->index), st.field_pos);
        }
        // Every stored vector must suit the index (cosine needs a direction).
        HnswIndex shape(f->type.dim, f->type.f16, st.index.hnsw);
        std::vector<float> tmp;
        Status bad;
        Value v;
        c->ids.scan([&](const IdEntry& e) {
          bad = decode_field(eng.body(e.loc), f->id, &v, c);
          if (bad.is_ok() && v.kind() == Kind::Vector) bad = shape.prepare(v.vec().data(), &tmp, f->name);
          if (!bad.is_ok()) bad = Status(bad.code(), "the document with id " + std::to_string(e.id) + ": " + bad.message(), st.index_pos);
          return bad.is_ok();
        });
        KF_TRY(bad);
        f->index = st.index;
      }
      batch->define(d, c->next_id);
      break;
    }
    default:
      return Status(Code::Invalid, "not a definition", st.pos);
  }
  return Status::ok();
}

}  // namespace kitfox
