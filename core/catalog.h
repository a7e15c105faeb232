// The catalog: the collections, each with its definition, its documents'
// id index and its indexes (vector, text, secondary), and the codec of
// definitions in records. The index lifecycle (built on first use, kept up
// to date by writes, rebuilt to match a new definition) is in catalog.cpp.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codec.h"
#include "index/hnsw.h"
#include "index/secondary.h"
#include "index/text.h"
#include "schema.h"
#include "storage/arena.h"
#include "storage/id_index.h"
#include "value.h"

namespace kitfox {

struct Collection : VectorSource {
  CollectionDef def;
  int64_t next_id = 1;
  IdIndex ids;
  uint64_t bytes = 0;  // live encoded bytes
  // Bumped by every op applied to it and every undo (under the write lock):
  // a checkpoint's switch asks whether the collection changed since its pin.
  uint64_t changes = 0;
  std::map<uint32_t, std::unique_ptr<HnswIndex>> vindex;  // by field id
  // Dropped or replaced indexes whose tables image documents still refer to,
  // until the next checkpoint rewrites them: for each field the index it had
  // at the last checkpoint, whose table is the one those references number
  // into (Collection::vector resolves them here first).
  std::map<uint32_t, std::unique_ptr<HnswIndex>> retired;
  // Full-text indexes, built on first use (so opening stays fast), then kept
  // up to date by writes.
  std::map<uint32_t, std::unique_ptr<TextIndex>> tindex;
  std::mutex text_mu;
  // @hash/@unique/@sorted, parallel to def.secondary; built on first use.
  std::vector<std::unique_ptr<SecondaryIndex>> sindex;
  std::mutex sec_mu;
  // While one of its text or secondary indexes is built beside the lock
  // (Engine::build_beside), the ids of the documents writes change, noted
  // under the write lock for the build to take again.
  bool noting = false;
  std::vector<int64_t> changed;

  // Fields whose vector table a recovery lost: image documents' references
  // into it read as null (counted) until the recovery's checkpoint rewrites them.
  std::set<uint32_t> lost_tables;
  mutable std::atomic<uint64_t> lost_refs{0};

  // A pinned read's copy (executor.cpp) has no vector index but a copy of
  // the one its exact near searches: its documents' references resolve into
  // each index's table as an image holds it, which is where every reference
  // points (documents written since hold their vectors) and which no write
  // changes.
  std::map<uint32_t, HnswIndex::ImageTable> pinned_tables;
  // A pinned copy: the catalog's version when it was made (its `changes`
  // are the collection's then), by which a lookup through the live
  // collection's @hash index knows that index still holds what the copy's
  // documents give (Engine::live_equal).
  uint64_t pinned_catalog = 0;

  bool vector(uint32_t field_id, uint64_t node, Value* out) const override;
};

// The key a secondary index takes from a document body.
Status secondary_key(const Collection& c, const SecondaryDef& d, std::string_view body, Value* out);

// The tokens of a text or [text] value (none for others).
void text_tokens(const Value& v, std::vector<std::string>* out);

// Document `id`'s entries, from its body, in the text index of field `fid`
// and in a secondary index, which hold none for it (text_unentry and
// secondary_unentry took out the old ones): how every write, undo and build
// fills them.
Status text_entry(const Collection& c, uint32_t fid, TextIndex& ti, int64_t id, std::string_view body);
Status secondary_entry(const Collection& c, const SecondaryDef& d, SecondaryIndex& si, int64_t id,
                       std::string_view body);
// Takes out of a text or secondary index the entries document `id` had
// from its version `old` (looking through the whole index if that version
// gives no tokens or key the index holds for it).
void text_unentry(const Collection& c, uint32_t fid, TextIndex& ti, int64_t id, std::string_view old);
// A pinned copy's secondary index i (def.secondary[i]) filled from its
// documents, read through the pin's view of the arena (with no lock held).
Result<std::unique_ptr<SecondaryIndex>> pinned_secondary(const Collection& c, size_t i, const Arena::View& view);
void secondary_unentry(const Collection& c, const SecondaryDef& d, SecondaryIndex& si, int64_t id,
                       std::string_view old);


// Collection definitions in records.
void encode_def(const CollectionDef& d, int64_t next_id, std::string& out);
Status decode_def(class Reader& r, CollectionDef* d, int64_t* next_id);

}  // namespace kitfox
