#include "engine.h"

#include <chrono>
#include <cstring>

#include "codec.h"
#include "engine_limits.h"
#include "query/parser.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string at(uint64_t off) { return "at offset " + std::to_string(off); }

constexpr size_t kSegmentBytes = 1 << 20;
constexpr size_t kDocsChunkBytes = 4 << 20;

}  // namespace

// ---------------------------------------------------------------- Arena

void Arena::reset(std::string seg0) {
  segs_.clear();
  segs_.push_back(std::make_unique<std::string>(std::move(seg0)));
}

uint64_t Arena::append(std::string_view bytes, const char** where) {
  std::string* cur = segs_.size() > 1 ? segs_.back().get() : nullptr;
  if (!cur || cur->capacity() - cur->size() < bytes.size()) {
    segs_.push_back(std::make_unique<std::string>());
    cur = segs_.back().get();
    cur->reserve(std::max(kSegmentBytes, bytes.size()));
  }
  uint64_t off = cur->size();
  cur->append(bytes);  // within capacity: never moves
  *where = cur->data() + off;
  return loc((uint32_t)(segs_.size() - 1), off);
}

std::string_view Arena::body(uint64_t l) const {
  const std::string& s = *segs_[l >> 40];
  Reader r(s.data() + (l & ((1ull << 40) - 1)), s.size() - (l & ((1ull << 40) - 1)));
  r.varint();  // id
  return r.str();
}

size_t Arena::memory_bytes() const {
  size_t n = 0;
  for (auto& s : segs_) n += s->capacity();
  return n;
}

// ---------------------------------------------------------------- definitions

void encode_def(const CollectionDef& d, int64_t next_id, std::string& out) {
  put_varint(out, d.id);
  put_str(out, d.name);
  put_varint(out, d.next_field_id);
  put_varint(out, zigzag(next_id));
  put_varint(out, d.fields.size());
  for (const Field& f : d.fields) {
    put_varint(out, f.id);
    put_str(out, f.name);
    put_u8(out, (uint8_t)f.type.kind);
    put_u8(out, (uint8_t)f.type.elem);
    put_varint(out, f.type.dim);
    put_u8(out, (f.type.f16 ? 1 : 0) | (f.required ? 2 : 0));
  }
}

Status decode_def(Reader& r, CollectionDef* d, int64_t* next_id) {
  d->id = (uint32_t)r.varint();
  d->name = std::string(r.str());
  d->next_field_id = (uint32_t)r.varint();
  *next_id = unzigzag(r.varint());
  uint64_t n = r.varint();
  if (n > kMaxFields) return Status(Code::Corrupt, "collection definition with too many fields");
  d->fields.clear();
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    Field f;
    f.id = (uint32_t)r.varint();
    f.name = std::string(r.str());
    f.type.kind = (TypeKind)r.u8();
    f.type.elem = (TypeKind)r.u8();
    f.type.dim = (uint32_t)r.varint();
    uint8_t flags = r.u8();
    f.type.f16 = flags & 1;
    f.required = flags & 2;
    if (f.type.kind < TypeKind::Bool || f.type.kind > TypeKind::Vector) return Status(Code::Corrupt, "unknown field type");
    d->fields.push_back(std::move(f));
  }
  if (!r.ok()) return Status(Code::Corrupt, "collection definition cut short");
  return Status::ok();
}

// ---------------------------------------------------------------- open

Engine::Engine(FileSystem& fs, std::string name, OpenOptions o) : fs_(fs), name_(std::move(name)), opts_(o) {}

Engine::~Engine() {
  if (!closed_) close();
}

static Status read_all(File& f, std::string* out) {
  KF_ASSIGN(uint64_t size, f.size());
  out->resize(size);
  if (size) KF_TRY(read_exact(f, 0, out->data(), size));
  return Status::ok();
}

// True when `bytes` hold a header and a whole image ending the file.
static bool whole_image(std::string_view bytes) {
  if (!check_header(bytes).empty()) return false;
  uint64_t off = format::kHeaderSize;
  RecordView r;
  while (read_record(bytes, off, &r) == ScanResult::Ok) {
    off = r.end;
    if (r.kind == format::kImageEnd) return off == bytes.size();
  }
  return false;
}

Result<std::unique_ptr<Engine>> Engine::open(FileSystem& fs, const std::string& name, const OpenOptions& o) {
  std::unique_ptr<Engine> e(new Engine(fs, name, o));
  const std::string side = name + "~";

  // A leftover side file: a whole image wins (the checkpoint got as far as
  // flushing it), anything else is an unfinished checkpoint.
  KF_ASSIGN(bool side_exists, fs.exists(side));
  if (side_exists) {
    std::string bytes;
    {
      KF_ASSIGN(auto f, fs.open(side, OpenFlags{false, true}));
      KF_TRY(read_all(*f, &bytes));
    }
    if (whole_image(bytes)) {
      KF_TRY(fs.replace(side, name));
      e->report_.side_file_restored = true;
      e->report_.warnings.push_back("finished an interrupted checkpoint: the complete new image in '" + side +
                                    "' replaced the file");
    } else {
      KF_TRY(fs.remove(side));
    }
  }

  KF_ASSIGN(bool exists, fs.exists(name));
  if (!exists && !o.create) return Status(Code::NotFound, "database file '" + name + "' does not exist");
  KF_ASSIGN(e->file_, fs.open(name, OpenFlags{o.create, true}));
  std::string bytes;
  KF_TRY(read_all(*e->file_, &bytes));
  if (bytes.empty()) {
    // A new database: an empty image, flushed, so the file is whole from the start.
    std::vector<std::vector<IdEntry>> ids;
    bytes = e->build_image(&ids);
    KF_TRY(e->file_->write(0, bytes.data(), bytes.size()));
    KF_TRY(e->file_->sync());
  }
  KF_TRY(e->load(std::move(bytes)));
  e->last_sync_ms_ = now_ms();
#ifdef KITFOX_THREADS
  if (o.sync == SyncMode::Period) e->flusher_ = std::thread([p = e.get()] { p->flusher_loop(); });
#endif
  return e;
}

Status Engine::apply_image_record(const RecordView& r, std::vector<std::pair<uint32_t, uint64_t>>* doc_counts,
                                  std::map<uint32_t, std::vector<IdEntry>>* idx) {
  Reader rd(r.body);
  switch (r.kind) {
    case format::kCatalog: {
      next_coll_id_ = rd.u32();
      uint64_t n = rd.varint();
      for (uint64_t i = 0; i < n && rd.ok(); i++) {
        auto c = std::make_unique<Collection>();
        KF_TRY(decode_def(rd, &c->def, &c->next_id));
        if (by_id_.count(c->def.id) || colls_.count(c->def.name)) return Status(Code::Corrupt, "collection defined twice in the catalog " + at(r.offset));
        by_id_[c->def.id] = c.get();
        colls_[c->def.name] = std::move(c);
      }
      break;
    }
    case format::kDocs: {
      uint32_t cid = (uint32_t)rd.varint();
      uint64_t n = rd.varint();
      if (!by_id_.count(cid)) return Status(Code::Corrupt, "documents of an unknown collection " + at(r.offset));
      doc_counts->push_back({cid, n});
      break;
    }
    case format::kIdIndex: {
      uint32_t cid = (uint32_t)rd.varint();
      uint64_t n = rd.u64();
      std::string_view raw = rd.bytes(n * sizeof(IdEntry));
      if (!rd.ok()) return Status(Code::Corrupt, "id index cut short " + at(r.offset));
      std::vector<IdEntry> v(n);
      if (n) memcpy(v.data(), raw.data(), raw.size());
      (*idx)[cid] = std::move(v);
      break;
    }
    default:
      return Status(Code::Corrupt, "unexpected record kind " + std::to_string(r.kind) + " in the image " + at(r.offset));
  }
  if (!rd.ok()) return Status(Code::Corrupt, "record cut short " + at(r.offset));
  return Status::ok();
}

Status Engine::load(std::string bytes) {
  std::string err = check_header(bytes);
  if (!err.empty()) return Status(Code::Corrupt, "'" + name_ + "': " + err);
  std::string_view file(bytes);
  uint64_t off = format::kHeaderSize;
  std::vector<std::pair<uint32_t, uint64_t>> doc_counts;
  std::map<uint32_t, std::vector<IdEntry>> idx;
  std::vector<RecordView> docs_records;
  uint64_t damage = 0;
  std::string damage_what;
  bool image_done = false;
  RecordView r;

  // The image.
  while (!image_done) {
    ScanResult s = read_record(file, off, &r);
    if (s != ScanResult::Ok) {
      damage = off;
      damage_what = s == ScanResult::End || s == ScanResult::Torn ? "the image is cut short" : "a damaged record (checksum mismatch)";
      break;
    }
    if (r.kind == format::kImageEnd) {
      Reader rd(r.body);
      seq_ = rd.u64();
      image_done = true;
    } else {
      Status st = apply_image_record(r, &doc_counts, &idx);
      if (!st.is_ok()) {
        damage = off;
        damage_what = st.message();
        break;
      }
      if (r.kind == format::kDocs) docs_records.push_back(r);
    }
    off = r.end;
  }
  image_bytes_ = image_done ? off : 0;

  // The tail.
  uint64_t good_end = off;
  std::vector<RecordView> writes;
  while (damage == 0) {
    ScanResult s = read_record(file, off, &r);
    if (s == ScanResult::End) break;
    bool bad = s != ScanResult::Ok || r.kind != format::kWrite || r.body.size() < 8;
    if (!bad) {
      uint64_t seq;
      memcpy(&seq, r.body.data(), 8);
      bad = seq != seq_ + writes.size() + 1;
    }
    if (bad) {
      if (s == ScanResult::Torn || !valid_record_after(file, off)) {
        report_.torn_bytes = file.size() - off;  // an unfinished last write: never acknowledged
      } else {
        damage = off;
        damage_what = s == ScanResult::Bad ? "a damaged record (checksum mismatch) in the write log"
                                           : "an out-of-order record in the write log";
      }
      break;
    }
    writes.push_back(r);
    off = r.end;
    good_end = off;
  }

  if (damage) {
    if (!opts_.recover)
      return Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(damage) + ": " + damage_what +
                                       ". Nothing was changed; open with recover (kitfox --recover) to keep everything before it");
    // Keep the damaged original beside the file, then keep what came before.
    KF_ASSIGN(auto copy, fs_.open(name_ + ".damaged", OpenFlags{true, false}));
    KF_TRY(copy->truncate(0));
    KF_TRY(copy->write(0, bytes.data(), bytes.size()));
    KF_TRY(copy->sync());
    report_.recovered_offset = damage;
    report_.recovered_bytes = file.size() - damage;
    report_.warnings.push_back("recovered '" + name_ + "': dropped " + std::to_string(report_.recovered_bytes) +
                               " bytes from offset " + std::to_string(damage) + " (" + damage_what +
                               "); the damaged original is saved as '" + name_ + ".damaged'");
    good_end = damage;
  }

  // Documents: the derived id index is checked against the Docs records and
  // rebuilt from them when anything disagrees.
  arena_.reset(std::move(bytes));
  file = arena_.segment(0);
  for (auto& [cid, coll] : by_id_) {
    uint64_t expected = 0;
    for (auto& [c, n] : doc_counts)
      if (c == cid) expected += n;
    auto it = idx.find(cid);
    bool valid = it != idx.end() && it->second.size() == expected;
    if (valid) {
      int64_t prev = 0;
      for (size_t i = 0; i < it->second.size() && valid; i++) {
        const IdEntry& en = it->second[i];
        if ((i && en.id <= prev) || en.loc >= image_bytes_) { valid = false; break; }
        Reader rd(file.data() + en.loc, image_bytes_ - en.loc);
        if (unzigzag(rd.varint()) != en.id) valid = false;
        rd.str();
        if (!rd.ok()) valid = false;
        prev = en.id;
      }
    }
    if (!valid) {
      if (image_done) {
        report_.index_rebuilt = true;
        report_.warnings.push_back("the id index of collection '" + coll->def.name + "' did not match its documents and was rebuilt");
      }
      std::vector<IdEntry> v;
      for (const RecordView& d : docs_records) {
        Reader rd(d.body);
        if ((uint32_t)rd.varint() != cid) continue;
        uint64_t n = rd.varint();
        for (uint64_t k = 0; k < n && rd.ok(); k++) {
          uint64_t loc = rd.pos() - file.data();
          int64_t id = unzigzag(rd.varint());
          rd.str();
          if (rd.ok()) v.push_back({id, loc});
        }
        if (!rd.ok()) return Status(Code::Corrupt, "documents cut short " + at(d.offset));
      }
      std::sort(v.begin(), v.end(), [](const IdEntry& a, const IdEntry& b) { return a.id < b.id; });
      it = idx.insert_or_assign(cid, std::move(v)).first;
    }
    uint64_t bytes_total = 0;
    for (const IdEntry& en : it->second) bytes_total += arena_.body(en.loc).size();
    coll->bytes = bytes_total;
    coll->ids.assign(std::move(it->second));
  }

  // Replay the tail over the image.
  for (const RecordView& w : writes) {
    if (damage && w.offset >= damage) break;
    Status st = apply_write(w.body, 0, w.body.data() - file.data(), true);
    if (!st.is_ok()) return Status(Code::Corrupt, "'" + name_ + "': bad write record " + at(w.offset) + ": " + st.message());
    tail_records_++;
  }
  report_.tail_records = tail_records_;
  written_seq_ = synced_seq_ = seq_;
  write_pos_ = good_end;

  if (report_.torn_bytes) {
    KF_TRY(file_->truncate(good_end));
    KF_TRY(file_->sync());
  }
  if (damage || !image_done) {
    // Rewrite a whole file from what was kept.
    KF_TRY(checkpoint_locked());
  }
  return Status::ok();
}

// ---------------------------------------------------------------- writes

Status Engine::apply_write(std::string_view body, uint32_t seg, uint64_t body_off, bool replay) {
  Reader r(body);
  uint64_t seq = r.u64();
  uint64_t nops = r.varint();
  auto coll_of = [&](uint32_t cid) -> Collection* {
    auto it = by_id_.find(cid);
    return it == by_id_.end() ? nullptr : it->second;
  };
  for (uint64_t i = 0; i < nops && r.ok(); i++) {
    uint8_t op = r.u8();
    switch (op) {
      case format::kOpPut: {
        Collection* c = coll_of((uint32_t)r.varint());
        uint64_t loc = Arena::loc(seg, body_off + (r.pos() - body.data()));
        int64_t id = unzigzag(r.varint());
        std::string_view b = r.str();
        if (!c) return Status(Code::Corrupt, "a document for an unknown collection");
        if (!r.ok()) break;
        uint64_t old = c->ids.put(id, loc);
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        c->bytes += b.size();
        if (id >= c->next_id) c->next_id = id == INT64_MAX ? id : id + 1;
        break;
      }
      case format::kOpDel: {
        Collection* c = coll_of((uint32_t)r.varint());
        int64_t id = unzigzag(r.varint());
        if (!c) return Status(Code::Corrupt, "a delete for an unknown collection");
        uint64_t old = c->ids.erase(id);
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        break;
      }
      case format::kOpDefine: {
        CollectionDef d;
        int64_t next_id;
        KF_TRY(decode_def(r, &d, &next_id));
        auto it = by_id_.find(d.id);
        if (it == by_id_.end()) {
          if (colls_.count(d.name)) return Status(Code::Corrupt, "collection '" + d.name + "' defined twice");
          auto c = std::make_unique<Collection>();
          c->def = std::move(d);
          c->next_id = next_id;
          by_id_[c->def.id] = c.get();
          next_coll_id_ = std::max(next_coll_id_, c->def.id + 1);
          colls_[c->def.name] = std::move(c);
        } else {
          Collection* c = it->second;
          std::string old_name = c->def.name;
          c->def = std::move(d);
          if (old_name != c->def.name) {
            auto node = colls_.extract(old_name);
            node.key() = c->def.name;
            colls_.insert(std::move(node));
          }
        }
        break;
      }
      case format::kOpDrop: {
        uint32_t cid = (uint32_t)r.varint();
        Collection* c = coll_of(cid);
        if (!c) return Status(Code::Corrupt, "a drop of an unknown collection");
        by_id_.erase(cid);
        colls_.erase(c->def.name);
        break;
      }
      default: return Status(Code::Corrupt, "unknown op " + std::to_string(op));
    }
  }
  if (!r.ok()) return Status(Code::Corrupt, "write record cut short");
  (void)replay;
  seq_ = seq;
  return Status::ok();
}

Status Engine::check_writable() const {
  if (failed_.load()) return Status(Code::Failed, failure_ + "; the database refuses writes until it is reopened");
  if (closed_) return Status(Code::Invalid, "the database is closed");
  return Status::ok();
}

Result<uint64_t> Engine::commit(std::string_view ops, uint32_t nops) {
  KF_TRY(check_writable());
  std::string body;
  body.reserve(ops.size() + 16);
  put_u64(body, seq_ + 1);
  put_varint(body, nops);
  body.append(ops);
  if (body.size() > kMaxRecordBytes) return Status(Code::Limit, "one write is larger than the 1 GiB record limit");
  std::string frame;
  frame.reserve(body.size() + format::kFrameOverhead);
  append_record(frame, format::kWrite, body);
  Status st = file_->write(write_pos_, frame.data(), frame.size());
  if (!st.is_ok()) {
    // A partial record may be in the file; the next open cuts it off.
    failure_ = "a write to the file failed (" + st.message() + ")";
    failed_ = true;
    return st;
  }
  write_pos_ += frame.size();
  const char* where;
  uint64_t l = arena_.append(body, &where);
  Status ap = apply_write(std::string_view(where, body.size()), (uint32_t)(l >> 40), l & ((1ull << 40) - 1), false);
  if (!ap.is_ok()) std::abort();  // ops built by the executor always apply
  tail_records_++;
  {
    std::lock_guard g(sync_mu_);
    written_seq_ = seq_;
  }
  if (opts_.auto_checkpoint && checkpoint_worthwhile(false)) {
    Status cs = checkpoint_locked();
    if (!cs.is_ok() && !failed_) {
      // The write itself is in the file; a failed automatic checkpoint leaves it there.
      report_.warnings.push_back("automatic checkpoint failed: " + cs.message());
    }
  }
  return seq_;
}

bool Engine::checkpoint_worthwhile(bool closing) const {
  uint64_t tail = write_pos_ - image_bytes_;
  if (tail == 0) return false;
  if (closing) return tail >= (1u << 20) || tail * 4 >= image_bytes_;
  return tail >= (64u << 20) && tail >= image_bytes_;
}

// ---------------------------------------------------------------- durability

Status Engine::sync_to(uint64_t seq) {
  std::unique_lock lk(sync_mu_);
  for (;;) {
    if (failed_) return Status(Code::Failed, failure_);
    if (synced_seq_ >= seq) return Status::ok();
    if (!syncing_) {
      // Lead a flush that covers every write so far; later writers share it.
      syncing_ = true;
      uint64_t target = written_seq_;
      lk.unlock();
      Status st = file_->sync();
      lk.lock();
      syncing_ = false;
      if (st.is_ok()) {
        synced_seq_ = std::max(synced_seq_, target);
        last_sync_ms_ = now_ms();
      } else {
        failure_ = "flushing the file failed (" + st.message() + ")";
        failed_ = true;  // never retried: what the OS dropped is unknown
      }
      sync_cv_.notify_all();
      if (!st.is_ok()) return Status(Code::Failed, failure_);
    } else {
      sync_cv_.wait(lk);
    }
  }
}

Status Engine::sync() {
  uint64_t target;
  {
    std::lock_guard g(sync_mu_);
    target = written_seq_;
  }
  return sync_to(target);
}

#ifdef KITFOX_THREADS
void Engine::flusher_loop() {
  std::unique_lock lk(sync_mu_);
  while (!stop_flusher_) {
    sync_cv_.wait_for(lk, std::chrono::milliseconds(opts_.sync_period_ms ? opts_.sync_period_ms : 1));
    if (stop_flusher_ || failed_) continue;
    if (synced_seq_ < written_seq_ && !syncing_) {
      uint64_t target = written_seq_;
      lk.unlock();
      sync_to(target);
      lk.lock();
    }
  }
}
#endif

// ---------------------------------------------------------------- checkpoint

std::string Engine::build_image(std::vector<std::vector<IdEntry>>* new_ids) {
  std::string out;
  uint64_t total = format::kHeaderSize + 64;
  for (auto& [name, c] : colls_) total += c->bytes + c->ids.size() * 28 + 64;
  out.reserve(total);
  append_header(out);
  uint64_t records = 0, docs = 0;

  std::string body;
  put_u32(body, next_coll_id_);
  put_varint(body, colls_.size());
  for (auto& [name, c] : colls_) encode_def(c->def, c->next_id, body);
  append_record(out, format::kCatalog, body);
  records++;

  new_ids->clear();
  for (auto& entry : colls_) {
    Collection* c = entry.second.get();  // not a structured binding: the lambdas below capture it (clang 14)
    std::vector<IdEntry> ids;
    ids.reserve(c->ids.size());
    // Chunks of documents; entry offsets are known once the chunk header is.
    std::string chunk;
    std::vector<std::pair<int64_t, uint64_t>> pending;  // id, offset in chunk
    auto flush = [&] {
      if (pending.empty()) return;
      std::string head;
      put_varint(head, c->def.id);
      put_varint(head, pending.size());
      uint64_t base = out.size() + 5 + head.size();
      for (auto& [id, o] : pending) ids.push_back({id, base + o});
      head += chunk;
      append_record(out, format::kDocs, head);
      records++;
      chunk.clear();
      pending.clear();
    };
    c->ids.scan([&](const IdEntry& e) {
      std::string_view b = arena_.body(e.loc);
      pending.push_back({e.id, chunk.size()});
      put_varint(chunk, zigzag(e.id));
      put_str(chunk, b);
      if (chunk.size() >= kDocsChunkBytes) flush();
      return true;
    });
    flush();
    docs += ids.size();
    std::string ib;
    put_varint(ib, c->def.id);
    put_u64(ib, ids.size());
    ib.append((const char*)ids.data(), ids.size() * sizeof(IdEntry));
    append_record(out, format::kIdIndex, ib);
    records++;
    new_ids->push_back(std::move(ids));
  }
  std::string end;
  put_u64(end, seq_);
  put_u64(end, records);
  put_u64(end, docs);
  append_record(out, format::kImageEnd, end);
  return out;
}

Status Engine::checkpoint_locked() {
  KF_TRY(check_writable());
  std::vector<std::vector<IdEntry>> new_ids;
  std::string image = build_image(&new_ids);
  const std::string side = name_ + "~";
  {
    KF_ASSIGN(auto f, fs_.open(side, OpenFlags{true, true}));
    KF_TRY(f->truncate(0));
    KF_TRY(f->write(0, image.data(), image.size()));
    KF_TRY(f->sync());
    // No flush may be running on the old file while it is replaced.
    std::unique_lock lk(sync_mu_);
    sync_cv_.wait(lk, [&] { return !syncing_; });
    Status st = fs_.replace(side, name_);
    if (!st.is_ok()) {
      fs_.remove(side);
      return st;
    }
    file_ = std::move(f);
    synced_seq_ = written_seq_ = seq_;
    last_sync_ms_ = now_ms();
  }
  write_pos_ = image_bytes_ = image.size();
  tail_records_ = 0;
  // The image becomes the documents' memory: dead versions are gone from both.
  arena_.reset(std::move(image));
  size_t i = 0;
  for (auto& [name, c] : colls_) c->ids.assign(std::move(new_ids[i++]));
  return Status::ok();
}

Status Engine::checkpoint() {
  std::unique_lock lk(mu_);
  return checkpoint_locked();
}

Status Engine::close() {
  if (closed_) return Status::ok();
#ifdef KITFOX_THREADS
  if (flusher_.joinable()) {
    {
      std::lock_guard g(sync_mu_);
      stop_flusher_ = true;
    }
    sync_cv_.notify_all();
    flusher_.join();
  }
#endif
  Status st;
  {
    std::unique_lock lk(mu_);
    if (!failed_ && opts_.auto_checkpoint && checkpoint_worthwhile(true)) st = checkpoint_locked();
  }
  if (st.is_ok() && !failed_) st = sync();
  closed_ = true;
  file_.reset();
  return st;
}

Stats Engine::stats() {
  std::shared_lock lk(mu_);
  Stats s;
  s.file_bytes = write_pos_;
  s.image_bytes = image_bytes_;
  s.tail_bytes = write_pos_ - image_bytes_;
  s.tail_records = tail_records_;
  s.memory_bytes = arena_.memory_bytes();
  for (auto& [name, c] : colls_) {
    s.memory_bytes += c->ids.memory_bytes();
    s.collections.push_back({name, c->ids.size(), c->bytes});
  }
  return s;
}

Collection* Engine::find(std::string_view name) {
  auto it = colls_.find(std::string(name));
  return it == colls_.end() ? nullptr : it->second.get();
}

Result<QueryResult> Engine::query(std::string_view text, const std::vector<Value>& params) {
  Statement st;
  KF_TRY(parse_statement(text, &st));
  if (closed_) return Status(Code::Invalid, "the database is closed");
  if (st.kind == StmtKind::Checkpoint || st.kind == StmtKind::Compact) {
    KF_TRY(checkpoint());
    return QueryResult{};
  }
  if (!st.is_write()) {
    std::shared_lock lk(mu_);
    return execute_read(st, params);
  }
  uint64_t wait_seq = 0;
  Result<QueryResult> r = Status(Code::Invalid, "no result");
  {
    std::unique_lock lk(mu_);
    KF_TRY(check_writable());
    r = execute_write(st, params);
    if (r.is_ok()) wait_seq = seq_;
  }
  if (!r.is_ok()) return r;
  if (opts_.sync == SyncMode::Always) {
    KF_TRY(sync_to(wait_seq));
  } else if (opts_.sync == SyncMode::Period) {
#ifndef KITFOX_THREADS
    if (now_ms() - last_sync_ms_ >= (int64_t)opts_.sync_period_ms) KF_TRY(sync_to(wait_seq));
#endif
  }
  return r;
}

// ---------------------------------------------------------------- Database

Database::Database() = default;
Database::~Database() = default;

Result<std::unique_ptr<Database>> Database::open(FileSystem& fs, const std::string& name, const OpenOptions& o) {
  KF_ASSIGN(auto e, Engine::open(fs, name, o));
  std::unique_ptr<Database> db(new Database());
  db->engine_ = std::move(e);
  return db;
}

Result<QueryResult> Database::query(std::string_view text, const std::vector<Value>& params) {
  return engine_->query(text, params);
}
Status Database::checkpoint() { return engine_->checkpoint(); }
Status Database::compact() { return engine_->checkpoint(); }
Status Database::sync() { return engine_->sync(); }
Status Database::close() { return engine_->close(); }
Stats Database::stats() { return engine_->stats(); }
const OpenReport& Database::open_report() const { return engine_->report(); }

Result<OpenOptions> parse_sync_option(std::string_view s, OpenOptions o) {
  if (s == "always") { o.sync = SyncMode::Always; return o; }
  if (s == "off") { o.sync = SyncMode::Off; return o; }
  std::string_view n = s;
  if (n.size() > 2 && n.substr(n.size() - 2) == "ms") n.remove_suffix(2);
  uint64_t v = 0;
  if (n.empty() || n.size() > 9) return Status(Code::Invalid, "sync must be 'always', 'off' or a period in milliseconds, got '" + std::string(s) + "'");
  for (char c : n) {
    if (c < '0' || c > '9') return Status(Code::Invalid, "sync must be 'always', 'off' or a period in milliseconds, got '" + std::string(s) + "'");
    v = v * 10 + (c - '0');
  }
  o.sync = SyncMode::Period;
  o.sync_period_ms = (uint32_t)v;
  return o;
}

}  // namespace kitfox
