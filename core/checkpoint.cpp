// Checkpoints: a new image of the live documents, written beside the readers
// and, natively, beside the writers too. The steps, and who waits for each:
//   1. the pin (begin_image), under the gate and the shared lock: the
//      catalog, the collections whose documents refer into vector tables
//      (re-encoded now: their tables and graphs change in place), a copy of
//      every other collection's id index (16 bytes a document), the arena's
//      segments, and where the file's tail ends;
//   2. the rest of the image, built from the pin, written to NAME~~ and
//      flushed (finish_image, write_image) with no lock held: writes land
//      meanwhile in the old file's tail and in new arena segments;
//   3. those writes copied after the new image (carry_tail), in rounds while
//      they go on, and the last piece under the gate;
//   4. NAME~~ renamed over NAME and the engine switched to it under the write
//      lock (switch_image): collections no write touched since the pin read
//      from the new image at once;
//   5. the documents of the others that no write replaced pointed into the
//      new image a piece at a time under the write lock (move_to_image), and
//      the pin's segments freed.
// Where a collection's documents refer into vector tables (they are built at
// the pin, from tables and graphs writes change in place), where replace()
// is no atomic rename (OPFS's copy) or where there are no threads (WASM),
// the gate is held throughout and there is no tail to carry (the side file
// is then NAME~).
#include <algorithm>

#include "codec.h"
#include "engine.h"
#include "huge_pages.h"
#include "port.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox {

namespace {
constexpr size_t kDocsChunkBytes = 4 << 20;  // documents go in records of about this size
// The tail left to copy and flush under the gate, at most, unless the
// writers outrun kCarryRounds rounds of copying and flushing beside them.
constexpr uint64_t kLastPiece = 256 << 10;
constexpr int kCarryRounds = 8;
constexpr size_t kMovePiece = 1 << 15;  // documents moved into the new image per hold of the write lock
}  // namespace

bool Engine::checkpoint_worthwhile(bool closing) const {
  uint64_t tail = write_pos_ - image_bytes_;
  if (tail == 0) return false;
  if (closing) return tail >= (1u << 20) || tail * 4 >= image_bytes_;
  return tail >= (64u << 20) && tail >= image_bytes_;
}

// Appends a record (`head`, then the checksums of `bytes` and padding) and the
// Extent holding `bytes`, whose first byte lands 64-byte aligned in the file.
// Returns that offset.
static uint64_t append_with_extent(std::string& out, uint8_t kind, std::string head, std::string_view bytes,
                                   uint32_t item_bytes) {
  put_extent_checksums(head, bytes, extent_block_bytes(item_bytes));
  uint64_t start = out.size() + 5 + head.size() + 1 + 4 + 5;
  uint8_t pad = (uint8_t)((64 - start % 64) % 64);
  put_u8(head, pad);
  head.append(pad, '\0');
  append_record(out, kind, head);
  uint64_t at = out.size() + 5;
  append_record(out, format::kExtent, bytes);
  return at;
}

// A collection's documents in Docs records of about kDocsChunkBytes, then its
// IdIndex record. `body` gives each document's bytes as the image holds them;
// `ids` gets the entries' offsets in the image, `was` their locations.
template <typename Body>
static Status append_docs(std::string& out, uint32_t cid, const IdIndex& from, Body&& body, std::vector<IdEntry>* ids,
                          std::vector<uint64_t>* was, uint64_t* records) {
  ids->reserve(from.size());
  was->reserve(from.size());
  std::string chunk;
  std::vector<std::pair<int64_t, uint64_t>> pending;  // id, offset in chunk
  auto flush = [&] {
    if (pending.empty()) return;
    std::string head;
    put_varint(head, cid);
    put_varint(head, pending.size());
    uint64_t base = out.size() + 5 + head.size();
    for (auto& [id, o] : pending) ids->push_back({id, base + o});
    head += chunk;
    append_record(out, format::kDocs, head);
    (*records)++;
    chunk.clear();
    pending.clear();
  };
  Status bad;
  from.scan([&](const IdEntry& e) {
    std::string_view b;
    bad = body(e, &b);
    if (!bad.is_ok()) return false;
    pending.push_back({e.id, chunk.size()});
    was->push_back(e.loc);
    put_varint(chunk, zigzag(e.id));
    put_str(chunk, b);
    if (chunk.size() >= kDocsChunkBytes) flush();
    return true;
  });
  KF_TRY(bad);
  flush();
  std::string ib;
  put_varint(ib, cid);
  put_u64(ib, ids->size());
  ib.append((const char*)ids->data(), ids->size() * sizeof(IdEntry));
  append_record(out, format::kIdIndex, ib);
  (*records)++;
  return Status::ok();
}

// The pin, under a lock that keeps writes out (the gate and the shared lock,
// or the write lock): the header and catalog, the collections with vector
// tables whole, a copy of the others' id indexes to build them from.
Status Engine::begin_image(NewImage* img, bool carry) {
  std::string& out = img->bytes;
  uint64_t total = format::kHeaderSize + 64;
  for (auto& [name, c] : colls_) {
    total += c->bytes + c->ids.size() * 28 + 64;
    for (auto& [fid, index] : c->vindex) total += index->memory_bytes() + index->nodes() * index->dim() * 4;
  }
  out.reserve(total);
  advise_huge_pages(out.data(), out.capacity());  // it becomes the memory of tables and lists
  append_header(out);
  img->side = name_ + (carry ? "~~" : "~");

  std::string body;
  put_u32(body, next_coll_id_);
  put_varint(body, colls_.size());
  for (auto& [name, c] : colls_) encode_def(c->def, c->next_id, body);
  append_record(out, format::kCatalog, body);
  img->records = 1;

  for (auto& entry : colls_) {
    Collection* c = entry.second.get();  // not a structured binding: the lambda below captures it (clang 14)
    ImageColl& ic = img->colls.emplace_back();
    ic.id = c->def.id;
    ic.changes = c->changes;
    // Documents with indexed vectors refer to the vector table instead of
    // repeating the vector; other documents are copied as they are, later
    // from a copy of the id index when writes go on beside the checkpoint,
    // now when they wait.
    ic.rewritten = refers_to_tables(*c);
    if (!ic.rewritten && carry) {
      pin_ids(c->ids, &ic.pinned);
      continue;
    }
    ic.built = true;
    if (!ic.rewritten) {
      auto copy = [&](const IdEntry& e, std::string_view* b) {
        *b = arena_.body(e.loc);
        return Status::ok();
      };
      KF_TRY(append_docs(out, c->def.id, c->ids, copy, &ic.ids, &ic.was, &img->records));
      img->docs += ic.ids.size();
      continue;
    }
    std::string nb;
    Value doc;
    auto rewrite = [&](const IdEntry& e, std::string_view* b) -> Status {
      // Writes are refused when their documents would not decode, so this
      // fails only on damage; the checkpoint stops and the old file stays.
      Status ds = decode_document(c->def, e.id, arena_.body(e.loc), &doc, c);
      if (!ds.is_ok())
        return Status(Code::Corrupt, "checkpoint stopped: document " + std::to_string(e.id) + " of '" + c->def.name +
                                         "' does not decode (" + ds.message() + "); the file is unchanged");
      nb.clear();
      size_t count = 0;
      for (const Field& f : c->def.fields) {
        const Value* v = doc.get(f.name);
        if (v && !v->is_null()) count++;
      }
      put_varint(nb, count);
      for (const Field& f : c->def.fields) {
        const Value* v = doc.get(f.name);
        if (!v || v->is_null()) continue;
        put_varint(nb, f.id);
        auto vi = c->vindex.find(f.id);
        int64_t node = vi != c->vindex.end() && v->kind() == Kind::Vector ? vi->second->node_of(e.id) : -1;
        if (node >= 0) encode_vector_ref(nb, (uint64_t)node);
        else encode_value(nb, *v, f.type.kind == TypeKind::Vector && f.type.f16);
      }
      *b = nb;
      return Status::ok();
    };
    KF_TRY(append_docs(out, c->def.id, c->ids, rewrite, &ic.ids, &ic.was, &img->records));
    img->docs += ic.ids.size();
    for (auto& [fid, index] : c->vindex) {
      std::string meta, vec, graph, links;
      index->serialize(meta, vec, graph, links);
      std::string head;
      put_varint(head, c->def.id);
      put_varint(head, fid);
      put_str(head, meta);
      uint64_t table_at = append_with_extent(out, format::kVectors, head, vec, index->table_item_bytes());
      head.clear();
      put_varint(head, c->def.id);
      put_varint(head, fid);
      put_u64(head, seq_);
      put_str(head, graph);
      uint64_t links_at = append_with_extent(out, format::kGraph, head, links, index->links_item_bytes());
      img->tables.push_back({c->def.id, fid, table_at, links_at});
      img->records += 4;
    }
  }
  img->seq = seq_;
  img->pos = write_pos_;
  img->tail_records = tail_records_;
  img->sealed = arena_.seal();  // what lands from now on goes to new segments
  img->view = arena_.view();
  return Status::ok();
}

// The rest of the image from the pin; needs no lock.
Status Engine::finish_image(NewImage* img) {
  for (ImageColl& ic : img->colls) {
    if (ic.built) continue;
    const Arena::View& view = img->view;
    auto copy = [&](const IdEntry& e, std::string_view* b) {
      *b = view.body(e.loc);
      return Status::ok();
    };
    KF_TRY(append_docs(img->bytes, ic.id, ic.pinned, copy, &ic.ids, &ic.was, &img->records));
    img->docs += ic.ids.size();
    unpin(&ic.pinned);
  }
  std::string end;
  put_u64(end, img->seq);
  put_u64(end, img->records);
  put_u64(end, img->docs);
  append_record(img->bytes, format::kImageEnd, end);
  img->size = img->bytes.size();
  return Status::ok();
}

// The image written to the side file and flushed.
Status Engine::write_image(NewImage* img) {
  KF_ASSIGN(img->file, fs_.open(img->side, OpenFlags{true, true}));
  KF_TRY(img->file->truncate(0));
  KF_TRY(img->file->write(0, img->bytes.data(), img->bytes.size()));
  return img->file->sync();
}

// Copies the old file's tail from where the copy stands up to `to` after the
// new image: the write records, as they are (they hold no file offsets).
Status Engine::carry_tail(NewImage& img, uint64_t to) {
  std::string buf;
  for (uint64_t from = img.pos + img.carried; from < to; from = img.pos + img.carried) {
    size_t n = (size_t)std::min<uint64_t>(to - from, 1 << 20);
    buf.resize(n);
    KF_TRY(read_exact(*file_, from, buf.data(), n));
    KF_TRY(img.file->write(img.size + img.carried, buf.data(), n));
    img.carried += n;
  }
  return Status::ok();
}

// The side file replaces the file (renamed over it, the directory
// flushed). Readers read memory, not the file: this needs no engine lock,
// only no write (the gate) and no flush running on the old file.
Status Engine::replace_file(const NewImage& img) {
  std::unique_lock lk(sync_mu_);
  sync_cv_.wait(lk, [&] { return !syncing_; });
  Status st = fs_.replace(img.side, name_);
  if (!st.is_ok()) fs_.remove(img.side);
  return st;
}

// Under the write lock (and the gate), once replace_file() did: the new file
// is the engine's, with the carried tail after its image. A collection no
// write touched since the pin reads from the image now (its dead versions
// gone); the others wait for move_to_image, or, where their documents refer
// into vector tables that changed, for the next checkpoint.
void Engine::switch_image(NewImage& img) {
  {
    std::unique_lock lk(sync_mu_);
    sync_cv_.wait(lk, [&] { return !syncing_; });  // no flush may be running on the file that goes
    std::swap(file_, img.file);  // the old file is closed with img, after the lock (freeing its blocks takes time)
    synced_seq_ = written_seq_ = seq_;  // the carried tail was flushed with the image
    write_pos_ = written_end_ = filled_end_ = img.size + img.carried;
    fill_failed_ = false;
    last_sync_ms_ = port::now_ms();
  }
  image_bytes_ = img.size;
  tail_records_ -= img.tail_records;
  bool changed = seq_ != img.seq;
  for (ImageColl& ic : img.colls) {
    auto it = by_id_.find(ic.id);
    changed = changed || it == by_id_.end() || it->second->changes != ic.changes;
  }
  // Nothing changed: the image is all the documents' memory. Otherwise it is
  // a segment beside those written since the pin. What goes is let go with
  // img, after the lock: unmapping the old file frees its blocks.
  img.view = arena_.view();
  img.segment = changed ? arena_.add(std::move(img.bytes)) : (arena_.reset(std::move(img.bytes)), 0);
  const char* base = arena_.segment(img.segment).data();
  for (ImageColl& ic : img.colls) {
    auto it = by_id_.find(ic.id);
    if (it == by_id_.end()) continue;  // dropped since the pin
    Collection* c = it->second;
    if (c->changes != ic.changes) {
      // A collection that refers into vector tables is checkpointed with
      // the writers held, so it cannot have changed; were it to, its
      // documents keep the pin's memory.
      if (ic.rewritten) img.keep_old = true;
      else img.to_move.push_back(&ic);
      continue;
    }
    if (img.segment)
      for (IdEntry& e : ic.ids) e.loc = Arena::loc(img.segment, e.loc);
    c->ids.swap_in(ic.ids);  // the old entries freed with img
    for (const TableAt& t : img.tables)
      if (t.coll == ic.id) c->vindex.at(t.field)->rebase(base + t.table, base + t.links);
    c->retired.clear();
    c->lost_tables.clear();  // the documents no longer refer to a lost table
  }
}

// After the switch, with writes going on: each document no write replaced
// since the pin is pointed at its copy in the new image, kMovePiece at a time
// under the write lock; then the pin's segments are freed (a pinned read
// still holding one keeps it), unless a collection still refers to them.
void Engine::move_to_image(NewImage& img) {
  if (!img.segment) return;  // the switch made the image the only segment
  for (ImageColl* ic : img.to_move) {
    for (size_t i = 0; i < ic->ids.size(); i += kMovePiece) {
      std::unique_lock lk(mu_);
      auto it = by_id_.find(ic->id);
      if (it == by_id_.end()) break;
      IdIndex& ids = it->second->ids;
      size_t end = std::min(ic->ids.size(), i + kMovePiece);
      for (size_t j = i; j < end; j++) ids.move_if_at(ic->ids[j].id, ic->was[j], Arena::loc(img.segment, ic->ids[j].loc));
    }
  }
  if (img.keep_old) return;
  Arena::View old;
  {
    std::unique_lock lk(mu_);
    old = arena_.view();  // the segments are freed as it goes, after the lock
    arena_.drop_before(img.sealed);
  }
}

// Every block is checked before an image is written from them: a damaged
// graph is rebuilt, a damaged vector table stops the checkpoint (it would
// carry zeros in place of the vectors).
Status Engine::check_all_extents() {
  for_each_vindex([](Collection&, uint32_t, HnswIndex& idx) { idx.warm(UINT64_MAX); });
  bool repaired = false;
  return check_extents(&repaired);
}

// A checkpoint by a caller holding the write lock (open's recovery, close):
// nothing lands beside it.
Status Engine::checkpoint_locked() {
  if (lazy_) KF_TRY(check_all_extents());
  KF_TRY(check_writable());
  NewImage img;
  KF_TRY(begin_image(&img, false));
  KF_TRY(finish_image(&img));
  KF_TRY(write_image(&img));
  KF_TRY(replace_file(img));
  switch_image(img);
  return Status::ok();
}

Status Engine::checkpoint() {
  std::lock_guard one(checkpoint_mu_);
  std::unique_lock gate(write_gate_);
  if (closed_) return Status(Code::Invalid, "the database is closed");
  if (lazy_) {
    bool damaged;
    {
      std::shared_lock lk(mu_);  // blocks are read and checked beside the readers
      for_each_vindex([](Collection&, uint32_t, HnswIndex& idx) { idx.warm(UINT64_MAX); });
      damaged = extents_damaged();
    }
    if (damaged) {
      std::unique_lock lk(mu_);  // a graph to rebuild needs the database alone
      bool repaired = false;
      KF_TRY(check_extents(&repaired));
    }
  }
  // Natively, with an atomic rename, writes go on beside the checkpoint and
  // are carried over, unless a collection's documents refer into vector
  // tables: those are built at the pin, whole, from tables and graphs that
  // writes change in place, and the writers wait throughout, as where there
  // is no atomic rename or no thread.
  bool carry = port::kThreads && fs_.atomic_replace();
  NewImage img;
  {
    std::shared_lock lk(mu_);
    KF_TRY(check_writable());
    for (auto& [name, c] : colls_) carry = carry && !refers_to_tables(*c);
    KF_TRY(begin_image(&img, carry));
  }
  carrying_ = carry;
  if (carry) gate.unlock();  // writes go on, into the old file's tail
  Status st = finish_image(&img);
  if (st.is_ok()) st = write_image(&img);
  // The old file's writes flushed now, beside the readers and writers: the
  // rename's flush of the directory would otherwise wait for them under the
  // gate (ext4 commits them with it), as long as `sync = off` let them pile up.
  if (st.is_ok()) st = sync();
  // The writes that landed meanwhile, copied in rounds while more land, the
  // copy flushed once it holds more than a last piece: the gate then waits
  // for at most a last piece copied and two flushed.
  uint64_t unflushed = 0;
  for (int round = 0; st.is_ok() && carry && round < kCarryRounds; round++) {
    uint64_t end;
    {
      std::lock_guard g(sync_mu_);
      end = written_end_;
    }
    uint64_t left = end - (img.pos + img.carried);
    if (left <= kLastPiece && unflushed <= kLastPiece) break;
    st = carry_tail(img, end);
    unflushed += left;
    if (st.is_ok() && unflushed > kLastPiece) {
      st = img.file->sync();
      unflushed = 0;
    }
  }
  if (carry) gate.lock();
  carrying_ = false;
  if (st.is_ok()) st = check_writable();
  if (st.is_ok() && img.pos + img.carried < write_pos_) {  // the gate is held: write_pos_ stands still
    unflushed += write_pos_ - (img.pos + img.carried);
    st = carry_tail(img, write_pos_);
  }
  if (st.is_ok() && unflushed) st = img.file->sync();  // every carried write durable before the rename
  if (st.is_ok()) {
    st = replace_file(img);
  } else if (img.file) {
    img.file.reset();
    fs_.remove(img.side);  // the old file holds everything
  }
  KF_TRY(st);
  {
    std::unique_lock lk(mu_);
    switch_image(img);
    // The writes carried over may be a tail worth a checkpoint of their own.
    if (opts_.auto_checkpoint && checkpoint_worthwhile(false)) checkpoint_due_ = true;
  }
  gate.unlock();
  move_to_image(img);
  return Status::ok();
}

}  // namespace kitfox
