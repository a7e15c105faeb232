// The encoder and the reader of a write's ops (batch.h).
#include "batch.h"

#include "catalog.h"

namespace kitfox {

void WriteBatch::define(const CollectionDef& d, int64_t next_id) {
  put_u8(ops_, format::kOpDefine);
  encode_def(d, next_id, ops_);
  count_++;
}

void WriteBatch::drop(uint32_t coll) {
  put_u8(ops_, format::kOpDrop);
  put_varint(ops_, coll);
  count_++;
}

void WriteBatch::append(const WriteBatch& o) {
  ops_.append(o.ops_);
  count_ += o.count_;
}

bool BatchReader::fail(std::string what) {
  status_ = Status(Code::Corrupt, "op " + std::to_string(read_ + 1) + " of a write: " + what);
  left_ = 0;
  return false;
}

// Every op but a put (next() reads those), and the end of the bytes.
bool BatchReader::next_other(BatchOp* op) {
  Reader r(ops_.data() + pos_, ops_.size() - pos_);
  op->kind = r.u8();
  switch (op->kind) {
    case format::kOpDel:
      op->coll = (uint32_t)r.varint();
      op->id = unzigzag(r.varint());
      break;
    case format::kOpDefine: {
      Status s = decode_def(r, &op->def, &op->next_id);
      if (!s.is_ok()) return fail(s.message());
      op->coll = op->def.id;
      break;
    }
    case format::kOpDrop:
      op->coll = (uint32_t)r.varint();
      break;
    default:
      if (!r.ok()) return fail("cut short");
      return fail("unknown op " + std::to_string(op->kind));
  }
  if (!r.ok()) return fail("cut short");
  pos_ = (size_t)(r.pos() - ops_.data());
  left_--;
  read_++;
  return true;
}

}  // namespace kitfox
