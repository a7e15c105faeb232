// WriteBatch: the operations of one write, encoded as a Write record's body
// holds them after its head (storage/format.h: kOpPut, kOpDel, kOpDefine,
// kOpDrop). It has one encoder (WriteBatch's methods) and one reader
// (BatchReader): the executor builds a batch and returns it, the engine
// writes it as one record and applies it, and an open replays the records
// through the same reader.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "codec.h"
#include "schema.h"
#include "status.h"
#include "storage/format.h"

namespace kitfox {

class WriteBatch {
 public:
  // A document's body written at id in collection `coll` (a new one, or in
  // place of the one there).
  void put(uint32_t coll, int64_t id, std::string_view body) {
    put_u8(ops_, format::kOpPut);
    put_varint(ops_, coll);
    put_varint(ops_, zigzag(id));
    put_str(ops_, body);
    count_++;
  }
  void del(uint32_t coll, int64_t id) {
    put_u8(ops_, format::kOpDel);
    put_varint(ops_, coll);
    put_varint(ops_, zigzag(id));
    count_++;
  }
  // A collection made or changed (d.id says which), its next id beside it.
  void define(const CollectionDef& d, int64_t next_id);
  void drop(uint32_t coll);
  // The ops of `o` after these (a transaction's statements, one record).
  void append(const WriteBatch& o);
  void reserve(size_t bytes) { ops_.reserve(bytes); }
  void clear() {
    ops_.clear();
    count_ = 0;
  }

  uint32_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The encoded ops, as a record's body holds them after its head.
  std::string_view ops() const { return ops_; }
  size_t bytes() const { return ops_.size(); }

 private:
  std::string ops_;
  uint32_t count_ = 0;
};

// One op as BatchReader reads it; its views point into the reader's bytes.
struct BatchOp {
  uint8_t kind = 0;  // format::kOpPut, kOpDel, kOpDefine or kOpDrop
  uint32_t coll = 0;  // the collection (a define's: def.id)
  int64_t id = 0;     // put, del
  // put: the document's body, and the offset in the ops of its entry
  // (`zigzag id | varint len | body`, the shape the arena's locations point at).
  std::string_view body;
  size_t entry_at = 0;
  // define: the definition and its next id.
  CollectionDef def;
  int64_t next_id = 0;
};

// Reads `count` ops from `ops` one at a time. next() is false at the end, or
// when the bytes are cut short or hold an op it does not know: status() then
// says which (Code::Corrupt), naming the op.
class BatchReader {
 public:
  BatchReader(std::string_view ops, uint64_t count) : ops_(ops), pos_(0), left_(count) {}
  explicit BatchReader(const WriteBatch& b) : BatchReader(b.ops(), b.count()) {}
  bool next(BatchOp* op) {
    if (!left_) return false;
    // A put, the op of almost every write, read here; the rest out of line.
    if (pos_ < ops_.size() && (uint8_t)ops_[pos_] == format::kOpPut) {
      Reader r(ops_.data() + pos_ + 1, ops_.size() - pos_ - 1);
      op->kind = format::kOpPut;
      op->coll = (uint32_t)r.varint();
      op->entry_at = (size_t)(r.pos() - ops_.data());
      op->id = unzigzag(r.varint());
      op->body = r.str();
      if (!r.ok()) return fail("cut short");
      pos_ = (size_t)(r.pos() - ops_.data());
      left_--;
      read_++;
      return true;
    }
    return next_other(op);
  }
  const Status& status() const { return status_; }

 private:
  bool next_other(BatchOp* op);
  bool fail(std::string what);
  std::string_view ops_;
  size_t pos_;
  uint64_t left_;
  uint64_t read_ = 0;
  Status status_;
};

}  // namespace kitfox
