// WriteBatch and BatchReader: a write's ops read back as they were written,
// one batch appended to another reads as both, and bytes cut short or an
// op of no known kind are refused (Corrupt) naming the op, never read past.
#include <doctest/doctest.h>

#include <string>

#include "batch.h"
#include "storage/format.h"

using namespace kitfox;

namespace {

CollectionDef sample_def() {
  CollectionDef d;
  d.id = 7;
  d.name = "notes";
  d.fields.push_back(Field{1, "title", Type{TypeKind::Text}, true, {}});
  d.fields.push_back(Field{2, "year", Type{TypeKind::Int}, false, {}});
  d.next_field_id = 3;
  d.secondary.push_back(SecondaryDef{2, {}, IndexKind::Sorted});
  return d;
}

WriteBatch sample_batch() {
  WriteBatch b;
  b.define(sample_def(), 42);
  b.put(7, 1, "first body");
  b.put(7, -5, std::string(300, 'x'));  // a negative id, a body longer than a one-byte length
  b.del(7, 1);
  b.put(7, INT64_MAX, "");
  b.drop(7);
  return b;
}

}  // namespace

TEST_CASE("a batch's ops read back in order, as they were written") {
  WriteBatch b = sample_batch();
  CHECK(b.count() == 6);
  CHECK_FALSE(b.empty());
  BatchReader r(b);
  BatchOp op;

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpDefine);
  CHECK(op.coll == 7);
  CHECK(op.next_id == 42);
  CHECK(op.def.name == "notes");
  REQUIRE(op.def.fields.size() == 2);
  CHECK(op.def.fields[0].name == "title");
  CHECK(op.def.fields[0].required);
  CHECK(op.def.fields[1].type.kind == TypeKind::Int);
  CHECK(op.def.next_field_id == 3);
  REQUIRE(op.def.secondary.size() == 1);
  CHECK(op.def.secondary[0].kind == IndexKind::Sorted);

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpPut);
  CHECK(op.coll == 7);
  CHECK(op.id == 1);
  CHECK(op.body == "first body");
  // The entry the arena points at: `zigzag id | varint len | body`.
  CHECK(b.ops().substr(op.entry_at, 3) == std::string("\x02\x0a" "f", 3));

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpPut);
  CHECK(op.id == -5);
  CHECK(op.body == std::string(300, 'x'));

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpDel);
  CHECK(op.coll == 7);
  CHECK(op.id == 1);

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpPut);
  CHECK(op.id == INT64_MAX);
  CHECK(op.body.empty());

  REQUIRE(r.next(&op));
  CHECK(op.kind == format::kOpDrop);
  CHECK(op.coll == 7);

  CHECK_FALSE(r.next(&op));
  CHECK(r.status().is_ok());
}

TEST_CASE("an empty batch reads as no ops; clear empties one") {
  WriteBatch b;
  CHECK(b.empty());
  BatchOp op;
  BatchReader r(b);
  CHECK_FALSE(r.next(&op));
  CHECK(r.status().is_ok());
  b = sample_batch();
  b.clear();
  CHECK(b.empty());
  CHECK(b.bytes() == 0);
}

TEST_CASE("one batch appended to another reads as the first's ops then the second's") {
  WriteBatch a, b;
  a.put(1, 10, "a");
  b.del(2, 20);
  b.put(2, 21, "b");
  a.append(b);
  CHECK(a.count() == 3);
  BatchReader r(a);
  BatchOp op;
  REQUIRE(r.next(&op));
  CHECK((op.kind == format::kOpPut && op.coll == 1 && op.id == 10 && op.body == "a"));
  REQUIRE(r.next(&op));
  CHECK((op.kind == format::kOpDel && op.coll == 2 && op.id == 20));
  REQUIRE(r.next(&op));
  CHECK((op.kind == format::kOpPut && op.coll == 2 && op.id == 21 && op.body == "b"));
  CHECK_FALSE(r.next(&op));
  CHECK(r.status().is_ok());
}

TEST_CASE("ops cut short anywhere are refused as Corrupt, naming the op, never read past") {
  WriteBatch b = sample_batch();
  const std::string whole(b.ops());
  // Every cut but the whole: the reader stops at the op the cut falls in.
  for (size_t n = 0; n < whole.size(); n++) {
    std::string cut = whole.substr(0, n);  // its own buffer, so ASan sees a read past it
    BatchReader r(cut, b.count());
    BatchOp op;
    uint64_t read = 0;
    while (r.next(&op)) read++;
    CAPTURE(n);
    CHECK(read < b.count());
    REQUIRE_FALSE(r.status().is_ok());
    CHECK(r.status().code() == Code::Corrupt);
    CHECK(r.status().message().find("op " + std::to_string(read + 1) + " of a write") != std::string::npos);
  }
  // More ops counted than the bytes hold is the same as a cut.
  BatchReader r(whole, b.count() + 1);
  BatchOp op;
  while (r.next(&op)) {}
  CHECK(r.status().code() == Code::Corrupt);
  CHECK(r.status().message().find("op 7 of a write: cut short") != std::string::npos);
}

TEST_CASE("an op of no known kind is refused, naming it") {
  WriteBatch b;
  b.put(1, 1, "x");
  std::string ops(b.ops());
  ops.push_back((char)99);
  BatchReader r(ops, 2);
  BatchOp op;
  REQUIRE(r.next(&op));
  CHECK_FALSE(r.next(&op));
  CHECK(r.status().code() == Code::Corrupt);
  CHECK(r.status().message().find("op 2 of a write: unknown op 99") != std::string::npos);
  CHECK_FALSE(r.next(&op));  // and stays stopped
}
