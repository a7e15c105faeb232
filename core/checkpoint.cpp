// Checkpoints: a new image of the live documents, written beside the readers
// and, natively, beside the writers too. The steps, and who waits for each:
//   1. the pin (begin_image), under the gate and the shared lock: the
//      catalog, every collection's id index (its blocks shared, not copied),
//      of each vector index what writes change in place (HnswIndex::pin:
//      its graph copied, into memory taken before the gate natively
//      (make_pin_room), its level-0 lists' blocks shared, a write copying
//      a block it changes; the table is appended to only: what the last
//      image does not hold is frozen just before, a moment under the write
//      lock, and shared, not copied), the arena's segments, and where the
//      file's tail ends;
//   2. the rest of the image, built from the pin, written to NAME~~ a
//      piece behind another and flushed (finish_image, write_image) with no
//      lock held: writes land meanwhile in the old file's tail and in new
//      arena segments. Natively the documents, the vector tables and
//      their pages are done on a thread at idle priority (image_documents,
//      image_vectors, write_pages), told to hurry past a budget;
//   3. those writes copied after the new image (carry_tail), in rounds while
//      they go on, and the last piece under the gate;
//   4. NAME~~ renamed over NAME and the engine switched to it under the write
//      lock (switch_image): collections no write touched since the pin read
//      from the new image at once, vector indexes from its tables;
//   5. the documents of the others that no write replaced pointed into the
//      new image a piece at a time under the write lock (move_to_image), and
//      the pin's segments freed.
// Where a collection's documents refer into a table no index holds (a
// dropped index's, one a recovery lost), where replace() is no atomic
// rename (OPFS's copy) or where there are no threads (WASM), the image is
// built at the pin, the gate is held throughout and there is no tail to
// carry (the side file is then NAME~).
#include <algorithm>
#include <atomic>
#include <optional>
#include <tuple>

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
constexpr uint64_t kFreePiece = 1 << 20;  // an old file's bytes freed at a time (free_in_pieces)
constexpr size_t kMovePiece = 1 << 15;  // documents moved into the new image per hold of the write lock
// Beside the writers the image is written in pieces of this size (write_image).
constexpr size_t kImagePiece = 1 << 20;
// A build at idle priority looks whether to hurry after this many documents
// (about 0.2 ms), and is told to after at most this long.
constexpr uint32_t kHurryCheck = 4096;
constexpr uint64_t kHurryMaxMs = 2000;
}  // namespace

bool Engine::checkpoint_worthwhile(bool closing) const {
  uint64_t tail = write_pos_ - image_bytes_;
  if (tail == 0) return false;
  if (closing) return tail >= (1u << 20) || tail * 4 >= image_bytes_;
  return tail >= (64u << 20) && tail >= image_bytes_;
}

// A collection's documents in Docs records of about kDocsChunkBytes, each
// written straight into the image, in id order. A document
// goes as the entry it is (`zigzag id | varint len | body`): copied from
// where it lies, entries lying one after another in one copy (an image's
// documents no write replaced, most of them), or, where `rewrite` changes
// its body, encoded anew. `ids` gets the entries' offsets in the image,
// `was` their locations.
class DocsRecords {
 public:
  DocsRecords(std::string& out, uint32_t cid, IdBlocks* ids, std::vector<uint64_t>* was, uint64_t* records,
              uint64_t short_max)
      : out_(out), cid_(cid), ids_(ids), was_(was), records_(records), short_max_(short_max) {}

  // An entry in memory that outlives the record (the arena's).
  void stored(const IdEntry& e, std::string_view entry) {
    add(e);
    if (!runs_.empty() && runs_.back().data() + runs_.back().size() == entry.data())
      runs_.back() = std::string_view(runs_.back().data(), runs_.back().size() + entry.size());
    else
      runs_.push_back(entry);
    bytes_ += entry.size();
    if (bytes_ >= kDocsChunkBytes) flush();
  }
  // A body encoded anew.
  void rewritten(const IdEntry& e, std::string_view body) {
    add(e);
    const size_t before = scratch_.size();
    put_varint(scratch_, zigzag(e.id));
    put_str(scratch_, body);
    bytes_ += scratch_.size() - before;
    if (bytes_ >= kDocsChunkBytes) flush();
  }
  void flush() {
    if (pending_.empty()) return;
    const size_t start = open_record(out_, format::kDocs, bytes_ + 20, short_max_);
    put_varint(out_, cid_);
    put_varint(out_, pending_.size());
    const uint64_t base = out_.size();
    for (auto& [id, o] : pending_) ids_->push_back({id, base + o});
    for (std::string_view r : runs_) out_.append(r);
    out_.append(scratch_);
    close_record(out_, start, short_max_);
    (*records_)++;
    pending_.clear();
    runs_.clear();
    scratch_.clear();
    bytes_ = 0;
  }
 private:
  void add(const IdEntry& e) {
    pending_.push_back({e.id, bytes_});
    was_->push_back(e.loc);
  }
  std::string& out_;
  const uint32_t cid_;
  IdBlocks* ids_;
  std::vector<uint64_t>* was_;
  uint64_t* records_;
  const uint64_t short_max_;
  std::vector<std::pair<int64_t, uint64_t>> pending_;  // id, offset among the record's documents
  std::vector<std::string_view> runs_;                 // stored entries, those adjacent joined
  std::string scratch_;                                // or the entries encoded anew
  uint64_t bytes_ = 0;
};

namespace {

// Documents as an image holds them. Where a field's vector index was pinned
// and the document's vector is on a node of it, the body refers to that node
// (tag 12) instead of holding the vector; a reference into a table no index
// holds any more (a dropped index's, or one a recovery lost: only while
// writes wait, through `vs`) becomes the vector itself, or nothing. Every
// other value is copied as it is.
class ImageBodies {
 public:
  ImageBodies(const std::string& name, const Collection* vs) : name_(name), vs_(vs) {}
  void add_index(uint32_t field, const HnswIndex::Pin& pin) {
    Indexed& x = indexed_.emplace_back();
    x.field = field;
    pin.doc_nodes(&x.nodes);
  }
  bool needed() const { return !indexed_.empty() || vs_; }

  Status body(int64_t id, std::string_view in, std::string_view* out) {
    Reader r(in);
    uint64_t n = r.varint();
    fields_.clear();
    uint64_t count = 0;
    for (uint64_t i = 0; i < n && r.ok(); i++) {
      uint32_t fid = (uint32_t)r.varint();
      const char* at = r.pos();
      skip_value(r);
      if (!r.ok()) break;
      std::string_view v(at, r.pos() - at);
      uint8_t tag = (uint8_t)v[0];
      if (tag == kVecF32 || tag == kVecF16 || tag == kVecRef) {
        int64_t node = node_of(fid, id);
        if (node >= 0) {
          put_varint(fields_, fid);
          encode_vector_ref(fields_, (uint64_t)node);
          count++;
          continue;
        }
        if (tag == kVecRef) {
          Reader ref(v);
          ref.u8();
          uint64_t at_node = ref.varint();
          const Field* f = vs_ ? vs_->def.field_by_id(fid) : nullptr;
          if (!vs_ || !vs_->vector(fid, at_node, &value_))
            return damaged(id, "a vector reference no table resolves");
          if (!f || value_.is_null()) continue;  // a dropped field, or a lost table's vector: gone
          put_varint(fields_, fid);
          encode_value(fields_, value_, f->type.kind == TypeKind::Vector && f->type.f16);
          count++;
          continue;
        }
      }
      put_varint(fields_, fid);
      fields_.append(v);
      count++;
    }
    if (!r.ok()) return damaged(id, "its body is cut short or damaged");
    body_.clear();
    put_varint(body_, count);
    body_ += fields_;
    *out = body_;
    return Status::ok();
  }

 private:
  struct Indexed {
    uint32_t field;
    std::vector<std::pair<int64_t, uint32_t>> nodes;  // by document
  };
  int64_t node_of(uint32_t fid, int64_t id) const {
    for (const Indexed& x : indexed_) {
      if (x.field != fid) continue;
      auto it = std::upper_bound(x.nodes.begin(), x.nodes.end(), id, [](int64_t d, const auto& e) { return d < e.first; });
      if (it == x.nodes.begin() || (it - 1)->first != id) return -1;
      return (it - 1)->second;
    }
    return -1;
  }
  // Writes are refused when their documents would not decode, so this is
  // damage; the checkpoint stops and the old file stays.
  Status damaged(int64_t id, const char* what) const {
    return Status(Code::Corrupt, "checkpoint stopped: document " + std::to_string(id) + " of '" + name_ + "': " +
                                     what + "; the file is unchanged");
  }

  const std::string& name_;
  const Collection* vs_;
  std::vector<Indexed> indexed_;
  std::string fields_, body_;
  Value value_;
};

}  // namespace

Status Engine::append_documents(NewImage* img, ImageColl& ic, const IdIndex& ids, const Arena::View& view,
                                const Collection* vs, std::atomic<bool>* hurry) {
  std::string& out = img->bytes;
  ImageBodies bodies(ic.name, vs);
  for (const VectorPin& vp : ic.vectors) bodies.add_index(vp.field, vp.pin);
  if (!ic.resumed) {
    ic.was.reserve(ids.size());
    ic.ids.expect(ids.size());
  }
  DocsRecords docs(out, ic.id, &ic.ids, &ic.was, &img->records, short_frame_bytes);
  Status bad;
  bool stopped = false;
  uint32_t until_check = kHurryCheck;
  // After each kHurryCheck documents: told to hurry, it stops there, for
  // the caller to go on from the next id.
  auto go_on = [&](int64_t id) {
    if (!hurry || --until_check) return true;
    until_check = kHurryCheck;
    if (!told_to_hurry(hurry, IdleStep::Documents)) return true;
    ic.done_through = id;
    stopped = true;
    return false;
  };
  // Resumed: from the id after the last one done (none after INT64_MAX).
  const bool none_left = ic.resumed && ic.done_through == INT64_MAX;
  const int64_t first = ic.resumed && !none_left ? ic.done_through + 1 : INT64_MIN;
  if (none_left) {
    // its last document was the one it stopped at
  } else if (bodies.needed()) {
    ids.scan_from(first, [&](const IdEntry& e) {
      std::string_view b;
      bad = bodies.body(e.id, view.body(e.loc), &b);
      if (bad.is_ok()) docs.rewritten(e, b);
      return bad.is_ok() && go_on(e.id);
    });
  } else {
    ids.scan_from(first, [&](const IdEntry& e) {
      int64_t id;
      std::string_view entry = view.entry(e.loc, &id);
      if (entry.empty() || id != e.id) {
        bad = Status(Code::Corrupt, "checkpoint stopped: document " + std::to_string(e.id) + " of '" + ic.name +
                                        "' is damaged in memory; the file is unchanged");
        return false;
      }
      docs.stored(e, entry);
      return go_on(e.id);
    });
  }
  KF_TRY(bad);
  // The last record (or the last before the stop). The image holds no id
  // index: an open builds it on its pass over the documents (image.cpp).
  docs.flush();
  ic.resumed = stopped;
  img->hurried = img->hurried || stopped;
  if (!stopped) {
    ic.docs_done = true;
    img->docs += ic.ids.size();
  }
  return Status::ok();
}

bool Engine::told_to_hurry(std::atomic<bool>* hurry, IdleStep step) {
  if (idle_hook) idle_hook(step, *hurry);
  return hurry->load(std::memory_order_relaxed);
}

bool Engine::append_vectors(NewImage* img, ImageColl& ic, std::atomic<bool>* hurry) {
  std::string& out = img->bytes;
  // With `hurry`, it looks before each step (the first right after begin()).
  auto copy = [&](ExtentCopy& x) {
    do {
      if (hurry && told_to_hurry(hurry, IdleStep::Vectors)) {
        img->hurried = true;
        return false;
      }
    } while (!x.step(out, vector_step_bytes));
    return true;
  };
  for (VectorPin& vp : ic.vectors) {
    if (vp.copied) continue;
    // The records' heads: a few bytes made at the pin, then the pin's meta
    // or graph, referred to, not copied.
    if (!vp.table.begun()) {
      // The table's two parts (the last image's, the rest) copied once, into the image.
      vp.table.begin(out, format::kVectors, vp.table_head, vp.pin.meta, vp.pin.table, vp.pin.table_item_bytes,
                     short_frame_bytes);
    }
    if (!copy(vp.table)) return false;
    if (!vp.links.begun()) {
      vp.links.begin(out, format::kGraph, vp.links_head, vp.pin.graph, vp.pin.links0, vp.pin.links_item_bytes,
                     short_frame_bytes);
    }
    if (!copy(vp.links)) return false;
    img->tables.push_back({ic.id, vp.field, vp.table.at(), vp.links.at(), vp.pin.nodes});  // reserved at the pin
    img->records += 4;
    vp.copied = true;
  }
  return true;
}

// The pins' copies let go once they are in the image (on the checkpoint's
// thread: not at idle priority, where a free could hold another thread's
// heap lock while it waits for a CPU); but what the pins share with the
// indexes (a table's frozen part, the level-0 lists' chunks), which an
// index lets go at the switch under the locks: freed after them
// (release_tables), not there.
void Engine::release_vectors(ImageColl& ic) {
  for (VectorPin& vp : ic.vectors) {
    HnswIndex::Pin kept;
    kept.rest_owner = std::move(vp.pin.rest_owner);
    kept.links0_owners = std::move(vp.pin.links0_owners);
    vp.pin = std::move(kept);
  }
}

void Engine::release_tables(NewImage& img) {
  for (ImageColl& ic : img.colls)
    for (VectorPin& vp : ic.vectors) {
      vp.pin.rest_owner.reset();
      vp.pin.links0_owners.clear();
    }
}

// The pin, under a lock that keeps writes out (the gate and the shared lock,
// or the write lock): the header and catalog, and of each collection a
// copy of its id index and its vector indexes' pins (HnswIndex::pin), to
// build it from with no lock held (`carry`), or its records now.
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
  // With an atomic rename the side file is NAME~~, never NAME~: backup
  // tools (mv -b, cp -b, rsync -b) leave a user's copy there.
  img->side = name_ + (carry || fs_.atomic_replace() ? "~~" : "~");
  img->seq = seq_;

  std::string body;
  put_u32(body, next_coll_id_);
  put_varint(body, colls_.size());
  for (auto& [name, c] : colls_) encode_def(c->def, c->next_id, body);
  append_record(out, format::kCatalog, body);
  img->records = 1;

  Arena::View now;
  if (!carry) now = arena_.view();
  for (auto& [name, c] : colls_) {
    ImageColl& ic = img->colls.emplace_back();
    ic.id = c->def.id;
    ic.name = c->def.name;
    ic.changes = c->changes;
    for (auto& [fid, index] : c->vindex) {
      VectorPin& vp = ic.vectors.emplace_back();
      vp.field = fid;
      const Field* f = c->def.field_by_id(fid);
      vp.name = f ? f->name : "#" + std::to_string(fid);
      vp.index = index.get();
      for (auto& [of, room] : img->rooms)
        if (of == index.get()) {
          vp.pin = std::move(room);
          break;
        }
      index->pin(&vp.pin);
      // The heads of its records in the image, before the pin's meta and
      // graph (made here: the idle thread that may copy them allocates none).
      put_varint(vp.table_head, ic.id);
      put_varint(vp.table_head, fid);
      put_varint(vp.table_head, vp.pin.meta.size());
      put_varint(vp.links_head, ic.id);
      put_varint(vp.links_head, fid);
      put_u64(vp.links_head, img->seq);
      put_varint(vp.links_head, vp.pin.graph.size());
    }
    if (carry) {
      ic.pinned.copy_from(c->ids);  // its blocks shared, not copied (id_index.h)
    } else {
      ic.built = true;
      KF_TRY(append_documents(img, ic, c->ids, now, refers_to_tables(*c) ? c.get() : nullptr, nullptr));
      append_vectors(img, ic, nullptr);
      release_vectors(ic);
    }
  }
  size_t pins = 0;
  for (const ImageColl& ic : img->colls) pins += ic.vectors.size();
  img->tables.reserve(pins);  // filled on the idle thread: no growth there
  img->pos = write_pos_;
  img->tail_records = tail_records_;
  img->sealed = arena_.seal();  // what lands from now on goes to new segments
  img->view = arena_.view();
  return Status::ok();
}

// The documents of the image from the pin; needs no lock. With `hurry`,
// it stops soon after *hurry is set, for another call to go on from there.
Status Engine::image_documents(NewImage* img, std::atomic<bool>* hurry) {
  for (ImageColl& ic : img->colls) {
    if (ic.built || ic.docs_done) continue;
    KF_TRY(append_documents(img, ic, ic.pinned, img->view, nullptr, hurry));
    if (!ic.docs_done) break;  // told to hurry
  }
  return Status::ok();
}

// The vector tables and graphs of the image from the pin, once all its
// documents are in it (a copy stopped midway is taken up before anything
// else is appended); needs no lock. With `hurry`, as image_documents().
void Engine::image_vectors(NewImage* img, std::atomic<bool>* hurry) {
  for (const ImageColl& ic : img->colls)
    if (!ic.built && !ic.docs_done) return;
  for (ImageColl& ic : img->colls)
    if (!ic.built && !append_vectors(img, ic, hurry)) return;
}

// The rest of the image from the pin: the documents and vectors
// image_documents() and image_vectors() did not write, the end; needs no
// lock.
Status Engine::finish_image(NewImage* img) {
  KF_TRY(image_documents(img, nullptr));
  for (ImageColl& ic : img->colls) {
    if (ic.built) continue;
    ic.pinned.clear();  // the blocks it shared let go
    append_vectors(img, ic, nullptr);
    release_vectors(ic);
  }
  std::string end;
  put_u64(end, img->seq);
  put_u64(end, img->records);
  put_u64(end, img->docs);
  append_record(img->bytes, format::kImageEnd, end);
  set_image_version(img->bytes);  // 3 when a record took a long frame
  img->size = img->bytes.size();
  return Status::ok();
}

// The side file, empty (on the checkpoint's thread: opening it takes a
// process-wide lock, emptying it a file system's journal).
Status Engine::open_side(NewImage* img) {
  KF_ASSIGN(img->file, fs_.open(img->side, OpenFlags{true, true}));
  return img->file->truncate(0);
}

// The image's bytes from img->written on, written into the side file a
// piece at a time; with `start`, each piece started to the device once the
// one before is there (File::write_behind), else left in the file's pages;
// with `hurry`, stopped between pieces once *hurry is set.
Status Engine::write_pages(NewImage* img, bool start, const std::atomic<bool>* hurry) {
  while (img->written < img->bytes.size()) {
    if (hurry && hurry->load(std::memory_order_relaxed)) break;
    const size_t n = std::min<size_t>(kImagePiece, img->bytes.size() - img->written);
    KF_TRY(img->file->write(img->written, img->bytes.data() + img->written, n));
    if (start) img->file->write_behind(img->written, n);
    img->written += n;
  }
  return Status::ok();
}

// The image written to the side file and flushed, in pieces of 1 MiB.
// Beside the writers each is started to the device once the one before is
// there: a writer's flush of the log meanwhile queues behind a piece or
// two, not behind the whole image as when the image's own flush wrote it
// all. What write_pages() wrote at idle priority is started the same way
// first, its header written again (finish_image sets the version last).
Status Engine::write_image(NewImage* img) {
  if (!img->file) KF_TRY(open_side(img));
  if (img->written) KF_TRY(img->file->write(0, img->bytes.data(), format::kHeaderSize));
  if (img->beside_writers)
    for (uint64_t at = 0; at < img->written; at += kImagePiece)
      img->file->write_behind(at, std::min<uint64_t>(kImagePiece, img->written - at));
  KF_TRY(write_pages(img, img->beside_writers, nullptr));
  const uint64_t size = img->bytes.size();
  // The log's first megabyte after it as zeros, flushed with it, where the
  // log fills ahead (log.cpp): the first durable writes after the switch
  // then write over bytes the file has, as every other does, instead of
  // the first one writing and flushing that megabyte inside its write. A
  // failed write of them only leaves that to the log.
  if (img->beside_writers && fills_ahead(*img->file) && write_zeros(*img->file, size, size + kFillAhead).is_ok())
    img->filled = size + kFillAhead;
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
  // A side file shorter than what was written to it (a host that took a
  // failed write for done) is never put in the database's place.
  const uint64_t written = img.size + img.carried;
  auto held = img.file->size();
  if (!held.is_ok() || *held < written) {
    fs_.remove(img.side);
    return Status(Code::Io, "a checkpoint's new image '" + img.side + "' holds " +
                                (held.is_ok() ? std::to_string(*held) : "an unknown number of") + " bytes of the " +
                                std::to_string(written) + " written to it; the database is left as it was");
  }
  Status st = fs_.replace(img.side, name_);
  if (st.is_ok()) {
    img.file->renamed(name_);  // its errors name the file, not NAME~~
    return st;
  }
  if (!fs_.atomic_replace()) {
    // A copy protocol (OPFS): the file may be half copied over. The side
    // file is whole and flushed, and the next open finishes the copy from
    // it; no write may land before.
    failure_ = "a checkpoint's copy of its new image over the database failed (" + st.message() +
               "); the next open finishes it";
    failed_ = true;
    return Status(Code::Failed, failure_ + "; the database refuses writes until it is reopened");
  }
  auto there = fs_.exists(img.side);
  if (there.is_ok() && *there) {
    fs_.remove(img.side);  // not renamed: the old file holds everything
    return st;
  }
  // Renamed (or not known), but not accounted for: the directory's flush
  // failed after the rename. The name may lead to the new file, which holds
  // every write so far, or after a crash to the old one, which does too
  // once flushed here; a write now would go to the old file alone, which
  // the name may no longer lead to. So no write may land until the
  // database is reopened.
  (void)file_->sync();
  failure_ = "a checkpoint's new file was renamed over the database, but the rename is not known to be durable (" +
             st.message() + ")";
  failed_ = true;
  return Status(Code::Failed, failure_ + "; the database refuses writes until it is reopened");
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
    write_pos_ = written_end_ = img.size + img.carried;
    filled_end_ = std::max(write_pos_, img.filled);
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
      // Written since the pin: its documents that no write replaced move
      // into the image in pieces (move_to_image), their vectors referring
      // to the same nodes of the same indexes, whose pinned part now lies in
      // the image. Were an index created, dropped or rebuilt meanwhile, the
      // documents keep the pin's memory instead.
      bool same = c->retired.empty() && c->lost_tables.empty() && c->vindex.size() == ic.vectors.size();
      for (const VectorPin& vp : ic.vectors) {
        auto v = c->vindex.find(vp.field);
        same = same && v != c->vindex.end() && v->second.get() == vp.index;
      }
      if (!same) {
        img.keep_old = true;
        continue;
      }
      for (const TableAt& t : img.tables)
        if (t.coll == ic.id) c->vindex.at(t.field)->rebase_prefix(base + t.table, base + t.links, t.nodes);
      img.to_move.push_back(&ic);
      continue;
    }
    if (img.segment)
      ic.ids.for_each_run_mut([&](IdEntry* e, size_t n) {
        for (size_t i = 0; i < n; i++) e[i].loc = Arena::loc(img.segment, e[i].loc);
      });
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
      const size_t end = std::min(ic->ids.size(), i + kMovePiece);
      ids.move_ascending(end - i, [&](size_t k) {
        const IdEntry& e = ic->ids[i + k];
        return std::tuple<int64_t, uint64_t, uint64_t>{e.id, ic->was[i + k], Arena::loc(img.segment, e.loc)};
      });
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
  for_each_vindex([](Collection&, uint32_t, HnswIndex& idx) { idx.freeze(); });
  NewImage img;
  KF_TRY(begin_image(&img, false));
  KF_TRY(finish_image(&img));
  KF_TRY(write_image(&img));
  KF_TRY(replace_file(img));
  switch_image(img);
  return Status::ok();
}

// Each vector index's pin takes its memory, 25-30 bytes a node, and
// touches its pages here, before the gate: faulted in under it, they kept
// the writers waiting (100,000 nodes: 1.3 of the pin's 1.5 ms). Sized under
// the shared lock, taken with no lock held. An index made or dropped
// meanwhile misses its room, or leaves one unused (or, made at a dropped
// one's address, takes that one's: pin() grows what is short).
void Engine::make_pin_room(NewImage* img) {
  std::vector<std::pair<size_t, size_t>> bytes;
  {
    std::shared_lock lk(mu_);
    for (auto& [name, c] : colls_)
      for (auto& [fid, idx] : c->vindex) {  // the pinned ones (begin_image), not the retired
        img->rooms.emplace_back(idx.get(), HnswIndex::Pin());
        bytes.push_back(idx->pin_bytes());
      }
  }
  for (size_t i = 0; i < bytes.size(); i++) {  // room for the nodes writes add before the pin
    auto [meta, graph] = bytes[i];
    img->rooms[i].second.make_room(meta + meta / 64 + 1024, graph + graph / 64 + 1024);
  }
}

Status Engine::checkpoint() {
  CallsInFlight::Scope in(calls_);
  if (!in) return closed_error();
  return checkpoint_now();
}

Status Engine::checkpoint_now() {
  std::lock_guard one(checkpoint_mu_);
  NewImage img;
  if (port::kThreads) make_pin_room(&img);
  std::unique_lock gate(write_gate_);
  // While it holds the gate writers wait for it (long_write_running).
  std::optional<LongWrites> holding(std::in_place, long_writes_, true);
  if (closed_) return closed_error();
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
  // are carried over, unless a collection's documents refer into a table
  // no index holds (a dropped index's, one a recovery lost): those are
  // resolved at the pin through tables that are let go at the switch, and
  // the writers wait throughout, as where there is no atomic rename or no
  // thread.
  bool carry = port::kThreads && fs_.atomic_replace();
  // The vector tables' parts since the last image frozen, for the pins to
  // share, not copy: a moment under the write lock (readers read there),
  // taken only when there is one (the gate keeps the tables as they are).
  bool to_freeze = false;
  {
    std::shared_lock lk(mu_);
    for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) { to_freeze = to_freeze || idx.would_freeze(); });
  }
  if (to_freeze) {
    std::unique_lock lk(mu_);
    for_each_vindex([](Collection&, uint32_t, HnswIndex& idx) { idx.freeze(); });
  }
  {
    std::shared_lock lk(mu_);
    KF_TRY(check_writable());
    for (auto& [name, c] : colls_) carry = carry && c->retired.empty() && c->lost_tables.empty();
    KF_TRY(begin_image(&img, carry));
  }
  carrying_ = carry;
  img.beside_writers = carry;  // built and written from here with no lock held
  if (carry) {
    gate.unlock();  // writes go on, into the old file's tail
    holding.reset();
  }
  img.rooms = decltype(img.rooms)();  // those no pin took, freed
  // Beside the writers most of a checkpoint's CPU time, its documents and
  // vector tables copied into the image and those bytes into the side
  // file's pages, is spent on CPU time the readers and writers leave
  // (port::run_idle): that takes no engine lock, lets go of no pin and only
  // writes into the file's pages (the file is opened and emptied here, its
  // pages started to the device and flushed here: a file system's journal
  // may wait for those). Past a budget (about 20 times what it takes with a
  // core of its own: 1 ms a thousand documents, 1 ms for 64 KiB of vectors)
  // the rest is done here at this thread's priority: a machine kept busy
  // slows a checkpoint down, no more.
  Status st;
  if (carry) {
    std::atomic<bool> hurry{false};
    uint64_t documents = 0, vector_bytes = 0;
    for (const ImageColl& ic : img.colls) {
      documents += ic.pinned.size();
      for (const VectorPin& vp : ic.vectors) vector_bytes += parts_bytes(vp.pin.table) + parts_bytes(vp.pin.links0);
    }
    const int budget_ms = idle_budget_ms >= 0
                              ? idle_budget_ms
                              : (int)std::min<uint64_t>(kHurryMaxMs, 100 + documents / 1000 + (vector_bytes >> 16));
    st = open_side(&img);
    if (st.is_ok())
      port::run_idle(
          [&] {
            if (idle_hook) idle_hook(IdleStep::Start, hurry);
            st = image_documents(&img, &hurry);
            if (st.is_ok()) image_vectors(&img, &hurry);
            // Only a whole image: a vector copy stopped midway has bytes
            // still to fill in (ExtentCopy). (Told to hurry, write_pages
            // would stop at once anyway: the flag stays set; this says it.)
            if (st.is_ok() && !img.hurried) st = write_pages(&img, false, &hurry);
          },
          budget_ms, &hurry);
    // Its build or its page writes left for this thread.
    if (img.hurried || img.written < img.bytes.size()) builds_hurried++;
  }
  if (st.is_ok()) st = finish_image(&img);
  if (st.is_ok()) st = write_image(&img);
  // The old file's writes flushed now, beside the readers and writers: the
  // rename's flush of the directory would otherwise wait for them under the
  // gate (ext4 commits them with it), as long as `sync = off` let them pile up.
  if (st.is_ok()) st = sync_to_written();
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
  if (carry) {
    gate.lock();
    holding.emplace(long_writes_, true);
  }
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
  holding.reset();
  release_tables(img);
  move_to_image(img);
  img.view = Arena::View();  // its hold on the old image (the file an open mapped, on the first one)
  if (carry) free_in_pieces(*img.file);
  return Status::ok();
}

// The old file, its blocks freed from its end a piece at a time before it
// is closed, beside the writers: where the file system discards the blocks
// it frees (ext4 mounted with `discard`, as on the benchmark machine), a
// whole image freed at once queues its discards ahead of every writer's
// flush (an 80 MiB file held a concurrent fdatasync 13-20 ms there; in
// pieces of 1 MiB, 1.4 ms). Not while the file is still mapped (the file
// an open mapped, which a pinned read may still hold): a read of its pages
// past the new end would fault. It is then closed whole.
void Engine::free_in_pieces(File& old) {
  if (arena_.maps_a_file()) return;
  Result<uint64_t> size = old.size();
  if (!size.is_ok()) return;
  for (uint64_t at = *size; at > 0;) {
    at = at > kFreePiece ? at - kFreePiece : 0;
    if (!old.truncate(at).is_ok()) return;  // the rest freed when it is closed
  }
}

}  // namespace kitfox
