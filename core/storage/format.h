// The kitfox file format (version 1). Every integer is little-endian.
//
//   header   32 bytes: "KITFOXDB" | u32 version | u32 flags | u64 0 | u32 0 |
//            u32 crc32c of the first 28 bytes
//   records  [u32 length of body][u8 kind][body][u32 crc32c of length+kind+body]
//            (a short frame: bodies up to kMaxRecordBytes), or
//            [u32 0xFFFFFFFF][u8 kind][u64 length of body][body][u32 crc32c
//            of the 13 bytes before the body + body] (a long frame: an image
//            record past 4 GiB, a vector table of 1.05M vectors of 1,024
//            floats). A file holding a long
//            frame is version 3, so that a build that reads version 2 only
//            refuses it instead of taking it for damage; one with none is
//            written as version 2. Write records are always short (1 GiB at
//            most, kMaxWriteBytes).
//
// The records form an image followed by a tail:
//
//   image  Catalog, then per collection Docs records (chunks of entries
//          `zigzag varint id | varint len | body`, in id order; an open builds
//          the id index from them), per vector index a Vectors record
//          and its Extent (the vector table, data), a Graph record and its
//          Extent (the level-0 links, derived), then ImageEnd. Written whole by
//          a checkpoint into `NAME~`, flushed, then put in place of NAME.
//   tail   one Write record per write statement, batch or transaction, each
//          `u64 sequence | ops...`, appended after ImageEnd.
//
// Opening reads the file in one pass. A bad tail record (past the end of the
// file, a checksum mismatch, a sequence behind the one due) with no whole later
// Write after it is a torn tail: it is cut off and reported (it was never
// acknowledged as durable, as an acknowledged write is flushed whole). Any
// other bad record is damage: a whole Write past the one due (each Write lies
// where the one before it ends, so one is missing), and one that checks with
// the length that ends it where the
// next Write starts or at the end of the file (the checksum covers the
// length: only the length field changed). Damage fails the open with an error
// naming the offset, unless `recover` is asked for, which keeps a record whose
// only fault is its length, everything before other damage, and saves the
// damaged original as NAME.damaged (NAME.damaged.2, ... when that is taken:
// an earlier one is never written over).
//
// An Extent record holds the big array of the record before it; that record
// carries the Extent's checksums per block of about 1 KiB (storage/extent.h),
// and the Extent's frame checksum covers only its head (length and kind), so a
// reader can step over it and read its blocks when they are first needed.
//
// Derived records (IdIndex, Graph) are checked on open: a count, range or
// version that disagrees rebuilds them (from the Docs records, from the vector
// table) and warns.
//
// Replacing the image: on a file system with atomic rename, NAME~~ is renamed
// over NAME (a checkpoint that lets writes go on beside it, natively, copies
// those writes from NAME's tail after its image): NAME~~ is only ever made
// the file by the rename, and a leftover one is deleted on open (it may lack
// writes that NAME holds). NAME~ is then never touched: backup tools leave
// a user's copy there. Where there is no atomic rename (OPFS), the host
// copies NAME~ over NAME. On open, a NAME~ that holds a whole image
// (ImageEnd and nothing after it) wins and replaces NAME, unless NAME holds
// Writes past that image's sequence (the image was put in place already and
// a write landed after it: a leftover whose removal did not last); that one,
// and any other NAME~ (a checkpoint that never finished), is deleted.
#pragma once
#include <cstdint>

namespace kitfox::format {

constexpr char kMagic[8] = {'K', 'I', 'T', 'F', 'O', 'X', 'D', 'B'};
constexpr uint32_t kVersion = 2;            // a file of short frames only
constexpr uint32_t kVersionLongFrames = 3;  // a file holding a long frame
constexpr uint64_t kHeaderSize = 32;
constexpr uint64_t kFrameOverhead = 9;  // length + kind + crc, of a short frame
constexpr uint32_t kLongFrame = 0xFFFFFFFFu;  // the length field of a long frame
constexpr uint64_t kLongFrameHead = 13;       // its mark, kind and u64 length

enum Kind : uint8_t {
  kCatalog = 1,   // u32 next collection id, varint count, collection definitions
  kDocs = 2,      // varint collection id, varint count, entries
  kIdIndex = 3,   // varint collection id, u64 count, count x {i64 id, u64 file offset}: written by
                  // images before 2026-12-07 (derived), checked as a record and not read
  kImageEnd = 4,  // u64 last sequence, u64 image records before this one, u64 documents
  kVectors = 5,   // varint collection, varint field, varint len + meta (node -> documents),
                  // extent checksums, u8 pad, pad bytes (so the Extent's bytes start
                  // 64-byte aligned in the file). Its Extent: the vector table,
                  // nodes x dim x (4 or 2). Data: image documents refer to it
                  // (value tag 12, codec.h) instead of repeating vectors.
  kGraph = 6,     // varint collection, varint field, u64 sequence, varint len + the HNSW graph
                  // but its level-0 lists (index/hnsw.cpp), extent checksums, u8 pad, pad
                  // bytes. Its Extent: the level-0 lists. Derived: rebuilt from the
                  // table when it does not validate.
  kExtent = 7,    // the bytes of the record before it; frame checksum over its head
  kWrite = 16,    // u64 sequence, varint op count, ops
};

// Ops inside a Write record.
enum Op : uint8_t {
  kOpPut = 1,     // varint collection, zigzag varint id, varint len, body
  kOpDel = 2,     // varint collection, zigzag varint id
  kOpDefine = 3,  // a collection definition (create or alter)
  kOpDrop = 4,    // varint collection
};

}  // namespace kitfox::format
