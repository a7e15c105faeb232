#include "engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "codec.h"
#include "engine_limits.h"
#include "huge_pages.h"
#include "query/binder.h"
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

int build_threads() {
#ifdef KITFOX_THREADS
  unsigned n = std::thread::hardware_concurrency();
  return n ? (int)std::min(n, 64u) : 1;
#else
  return 1;
#endif
}

// ---------------------------------------------------------------- Arena

void Arena::reset(std::string seg0) {
  segs_.clear();
  auto s = std::make_unique<Seg>();
  s->str = std::move(seg0);
  s->data = s->str.data();
  s->size = s->str.size();
  segs_.push_back(std::move(s));
}

void Arena::reset(std::unique_ptr<Mapping> seg0) {
  segs_.clear();
  auto s = std::make_unique<Seg>();
  s->data = seg0->data();
  s->size = seg0->size();
  s->map = std::move(seg0);
  segs_.push_back(std::move(s));
}

uint64_t Arena::append(std::string_view bytes, const char** where) {
  Seg* cur = segs_.size() > 1 ? segs_.back().get() : nullptr;
  if (!cur || cur->str.capacity() - cur->str.size() < bytes.size()) {
    segs_.push_back(std::make_unique<Seg>());
    cur = segs_.back().get();
    cur->str.reserve(std::max(kSegmentBytes, bytes.size()));
  }
  uint64_t off = cur->str.size();
  cur->str.append(bytes);  // within capacity: never moves
  cur->data = cur->str.data();
  cur->size = cur->str.size();
  *where = cur->data + off;
  return loc((uint32_t)(segs_.size() - 1), off);
}

std::string_view Arena::body(uint64_t l) const {
  const Seg& s = *segs_[l >> 40];
  uint64_t off = l & ((1ull << 40) - 1);
  Reader r(s.data + off, s.size - off);
  r.varint();  // id
  return r.str();
}

size_t Arena::memory_bytes() const {
  size_t n = 0;
  for (auto& s : segs_) n += s->map ? s->size : s->str.capacity();  // mapped pages count as held
  return n;
}

bool Collection::vector(uint32_t field_id, uint64_t node, Value* out) const {
  if (lost_tables.count(field_id)) {
    *out = Value();
    lost_refs++;
    return true;
  }
  for (auto* m : {&vindex, &retired}) {
    auto it = m->find(field_id);
    if (it == m->end()) continue;
    if (node >= it->second->nodes()) return false;
    std::vector<float> v;
    it->second->vector_of((uint32_t)node, &v);
    *out = Value::vector(std::move(v));
    return true;
  }
  return false;
}

void text_tokens(const Value& v, std::vector<std::string>* out) {
  out->clear();
  if (v.kind() == Kind::Text) tokenize_text(v.as_string(), out);
  else if (v.kind() == Kind::List)
    for (const Value& e : v.items())
      if (e.kind() == Kind::Text) tokenize_text(e.as_string(), out);
}

Status secondary_key(const Collection& c, const SecondaryDef& d, std::string_view body, Value* out) {
  KF_TRY(decode_field(body, d.field_id, out, &c));
  for (const std::string& k : d.subpath) {
    const Value* v = out->kind() == Kind::Object ? out->get(k) : nullptr;
    Value next = v ? *v : Value();
    *out = std::move(next);
  }
  return Status::ok();
}

Result<SecondaryIndex*> Engine::secondary(Collection& c, size_t i) {
  std::lock_guard g(c.sec_mu);
  if (c.sindex.size() < c.def.secondary.size()) c.sindex.resize(c.def.secondary.size());
  if (c.sindex[i]) return c.sindex[i].get();
  auto si = std::make_unique<SecondaryIndex>(c.def.secondary[i].kind);
  Status st;
  Value key;
  c.ids.scan([&](const IdEntry& e) {
    st = secondary_key(c, c.def.secondary[i], arena_.body(e.loc), &key);
    if (!st.is_ok()) return false;
    si->put(e.id, key);
    return true;
  });
  KF_TRY(st);
  c.sindex[i] = std::move(si);
  return c.sindex[i].get();
}

Result<TextIndex*> Engine::text_index(Collection& c, const Field& f) {
  std::lock_guard g(c.text_mu);
  auto it = c.tindex.find(f.id);
  if (it != c.tindex.end()) return it->second.get();
  auto ti = std::make_unique<TextIndex>(f.index.text.k1, f.index.text.b);
  Status st;
  Value v;
  std::vector<std::string> tokens;
  c.ids.scan([&](const IdEntry& e) {
    st = decode_field(arena_.body(e.loc), f.id, &v, &c);
    if (!st.is_ok()) return false;
    text_tokens(v, &tokens);
    if (!tokens.empty()) ti->put(e.id, tokens);
    return true;
  });
  KF_TRY(st);
  TextIndex* p = ti.get();
  c.tindex[f.id] = std::move(ti);
  return p;
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
    put_u8(out, (uint8_t)f.index.kind);
    if (f.index.kind == IndexKind::Hnsw) {
      put_u8(out, (uint8_t)f.index.hnsw.metric);
      put_varint(out, f.index.hnsw.m);
      put_varint(out, f.index.hnsw.ef_construction);
      put_varint(out, f.index.hnsw.ef_search);
    } else if (f.index.kind == IndexKind::Text) {
      out.append((const char*)&f.index.text.k1, 8);
      out.append((const char*)&f.index.text.b, 8);
    }
  }
  put_varint(out, d.secondary.size());
  for (const SecondaryDef& s : d.secondary) {
    put_varint(out, s.field_id);
    put_u8(out, (uint8_t)s.kind);
    put_varint(out, s.subpath.size());
    for (const std::string& k : s.subpath) put_str(out, k);
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
    f.index.kind = (IndexKind)r.u8();
    if (f.index.kind == IndexKind::Hnsw) {
      f.index.hnsw.metric = (Metric)r.u8();
      f.index.hnsw.m = (uint32_t)r.varint();
      f.index.hnsw.ef_construction = (uint32_t)r.varint();
      f.index.hnsw.ef_search = (uint32_t)r.varint();
      if (f.index.hnsw.metric < Metric::Cosine || f.index.hnsw.metric > Metric::Dot || f.index.hnsw.m < 2 ||
          f.index.hnsw.m > 256 || f.type.kind != TypeKind::Vector)
        return Status(Code::Corrupt, "bad index definition");
    } else if (f.index.kind == IndexKind::Text) {
      uint64_t a = r.u64(), b = r.u64();
      memcpy(&f.index.text.k1, &a, 8);
      memcpy(&f.index.text.b, &b, 8);
      if (f.type.kind != TypeKind::Text && !(f.type.kind == TypeKind::List && f.type.elem == TypeKind::Text))
        return Status(Code::Corrupt, "bad index definition");
    } else if (f.index.kind != IndexKind::None) {
      return Status(Code::Corrupt, "unknown index kind");
    }
    if (f.type.kind < TypeKind::Bool || f.type.kind > TypeKind::Vector) return Status(Code::Corrupt, "unknown field type");
    d->fields.push_back(std::move(f));
  }
  uint64_t ns = r.varint();
  if (ns > kMaxFields) return Status(Code::Corrupt, "collection definition with too many indexes");
  d->secondary.clear();
  for (uint64_t i = 0; i < ns && r.ok(); i++) {
    SecondaryDef sd;
    sd.field_id = (uint32_t)r.varint();
    sd.kind = (IndexKind)r.u8();
    uint64_t np = r.varint();
    if (np > kMaxDepth) return Status(Code::Corrupt, "index path too deep");
    for (uint64_t k = 0; k < np && r.ok(); k++) sd.subpath.emplace_back(r.str());
    if (sd.kind != IndexKind::Hash && sd.kind != IndexKind::Unique && sd.kind != IndexKind::Sorted)
      return Status(Code::Corrupt, "unknown index kind");
    d->secondary.push_back(std::move(sd));
  }
  if (!r.ok()) return Status(Code::Corrupt, "collection definition cut short");
  return Status::ok();
}

// ---------------------------------------------------------------- open

Engine::Engine(FileSystem& fs, std::string name, OpenOptions o) : fs_(fs), name_(std::move(name)), opts_(o) {}

Engine::~Engine() {
  // An engine dropped half-way through its open must not checkpoint what
  // little it loaded over the file.
  if (opened_ && !closed_) close();
}

// The file read into memory that is not zeroed first (where it cannot be mapped).
class ReadBuffer final : public Mapping {
 public:
  explicit ReadBuffer(size_t n) : p_(new char[n]), n_(n) {}
  const char* data() const override { return p_.get(); }
  char* data() { return p_.get(); }
  size_t size() const override { return n_; }

 private:
  std::unique_ptr<char[]> p_;
  size_t n_;
};

static Result<std::unique_ptr<Mapping>> read_whole(File& f, uint64_t size) {
  auto buf = std::make_unique<ReadBuffer>((size_t)size);
  KF_TRY(read_exact(f, 0, buf->data(), size));
  return std::unique_ptr<Mapping>(std::move(buf));
}

// The file read into memory but for the bytes of its extents (vector tables,
// level-0 lists), which are read block by block when first used: the records
// are walked from the header, reading ahead 1 MiB at a time and stepping over
// each Extent's bytes. Anything unexpected (a length past the end) reads the
// rest whole, for load() to judge.
static Result<std::unique_ptr<Mapping>> read_lazily(File& f, uint64_t size) {
  constexpr uint64_t kReadAhead = 1 << 20;
  auto buf = std::make_unique<ReadBuffer>((size_t)size);
  char* p = buf->data();
  uint64_t have = 0;  // [0, have) is read, but for the extents stepped over
  auto ensure = [&](uint64_t end) -> Status {
    if (end <= have) return Status::ok();
    uint64_t to = std::min(size, std::max(end, have + kReadAhead));
    KF_TRY(read_exact(f, have, p + have, to - have));
    have = to;
    return Status::ok();
  };
  KF_TRY(ensure(std::min(size, format::kHeaderSize)));
  uint64_t off = format::kHeaderSize;
  while (off < size) {
    if (size - off < format::kFrameOverhead) {
      KF_TRY(ensure(size));
      break;
    }
    KF_TRY(ensure(off + 5));
    uint32_t len;
    memcpy(&len, p + off, 4);
    if (len > kMaxRecordBytes || size - off < format::kFrameOverhead + len) {
      KF_TRY(ensure(size));
      break;
    }
    uint64_t trailer = off + 5 + len;
    if ((uint8_t)p[off + 4] == format::kExtent && have < trailer) {
      KF_TRY(read_exact(f, trailer, p + trailer, 4));
      have = trailer + 4;
    } else {
      KF_TRY(ensure(trailer + 4));
    }
    off = trailer + 4;
  }
  return std::unique_ptr<Mapping>(std::move(buf));
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
  std::unique_ptr<Mapping> map;
  KF_ASSIGN(uint64_t fsize, e->file_->size());
  if (fsize) map = e->file_->map(fsize);
  e->lazy_ = o.lazy_extents && !o.recover;
  if (fsize && !map) {
    // A host whose calls cost more than reading the whole file (read_chunk)
    // gets one read; the checks are still left to first use.
    e->lazy_read_ = e->lazy_ && e->file_->read_chunk() < fsize;
    if (e->lazy_read_) {
      KF_ASSIGN(map, read_lazily(*e->file_, fsize));
    } else {
      KF_ASSIGN(map, read_whole(*e->file_, fsize));
    }
  }
  if (!map) {
    // A new database: an empty image, flushed, so the file is whole from the start.
    if (exists && !fsize)
      e->report_.warnings.push_back("'" + name + "' was an empty file (0 bytes): a new database was made in it");
    std::vector<std::vector<IdEntry>> ids;
    std::vector<TableAt> tables;
    KF_ASSIGN(bytes, e->build_image(&ids, &tables));
    KF_TRY(e->file_->write(0, bytes.data(), bytes.size()));
    KF_TRY(e->file_->sync());
  }
  KF_TRY(e->load(std::move(bytes), std::move(map)));
  e->last_sync_ms_ = now_ms();
  e->opened_ = true;
#ifdef KITFOX_THREADS
  if (o.sync == SyncMode::Period) e->flusher_ = std::thread([p = e.get()] { p->flusher_loop(); });
  if (e->lazy_ && !e->lazy_read_ && o.check_in_background) {
    uint64_t unchecked = 0;
    e->for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) { unchecked += idx.unread_bytes(); });
    if (unchecked) e->checker_ = std::thread([p = e.get()] { p->checker_loop(); });
  }
#endif
  return e;
}

Status Engine::apply_image_record(const RecordView& r, std::vector<std::pair<uint32_t, uint64_t>>* doc_counts,
                                  std::map<uint32_t, std::vector<IdEntry>>* idx) {
  if (r.kind == format::kExtent) {
    if (!pending_extent_) return Status(Code::Corrupt, "an extent with no record before it " + at(r.offset));
    ExtentRef* e = pending_extent_;
    pending_extent_ = nullptr;
    e->bytes = r.body;
    e->file_offset = r.offset + 5;
    if (!extent_fits(*e, r.body.size())) return Status(Code::Corrupt, "an extent that does not fit its checksums " + at(r.offset));
    if (!lazy_) {
      int64_t b = first_bad_block(*e);
      if (b >= 0) {
        // The graph is derived (rebuilt); the vector table is data.
        for (auto& [key, vr] : vector_records_) {
          if (&vr.links == e) {
            vr.graph_bad = true;
            return Status::ok();
          }
          if (&vr.table == e && opts_.recover) {
            // Recovering: the table is given up (its documents keep their
            // other fields), the rest of the image is kept.
            vr.has_table = false;
            given_up_tables_++;
            report_.warnings.push_back("recovered '" + name_ + "': a damaged block in a vector table " +
                                       at(e->file_offset + (uint64_t)b * e->block_bytes));
            return Status::ok();
          }
        }
        return Status(Code::Corrupt, "a damaged block (checksum mismatch) in the vector table " +
                                         at(e->file_offset + (uint64_t)b * e->block_bytes));
      }
    }
    return Status::ok();
  }
  if (pending_extent_) return Status(Code::Corrupt, "a vector index record without its extent " + at(r.offset));
  if (r.kind == format::kVectors || r.kind == format::kGraph) {
    Reader rd(r.body);
    uint64_t key = rd.varint() << 32;
    key |= rd.varint();
    VectorRecords& vr = vector_records_[key];
    if (r.kind == format::kVectors) {
      vr.meta = rd.str();
      vr.has_table = true;
      pending_extent_ = &vr.table;
    } else {
      vr.graph_seq = rd.u64();
      vr.graph = rd.str();
      vr.has_graph = true;
      pending_extent_ = &vr.links;
    }
    if (!get_extent_checksums(rd, pending_extent_)) return Status(Code::Corrupt, "vector index record cut short " + at(r.offset));
    uint8_t pad = rd.u8();
    rd.bytes(pad);
    if (!rd.ok() || !rd.done()) return Status(Code::Corrupt, "vector index record cut short " + at(r.offset));
    return Status::ok();
  }
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

// The vector index record whose Extent never came (damaged, or cut off)
// is as if absent.
void Engine::drop_pending_extent() {
  if (!pending_extent_) return;
  for (auto& [key, vr] : vector_records_) {
    if (&vr.table == pending_extent_) vr.has_table = false;
    if (&vr.links == pending_extent_) vr.has_graph = false;
  }
  pending_extent_ = nullptr;
}

// Recovering: the damaged image records that can be stepped over, because
// they are derived (IdIndex, Graph, rebuilt) or vector tables (given up,
// their documents kept), and their length still leads to a whole record. Only
// when the image reaches its ImageEnd and holds as many documents as it says:
// a record whose kind byte was damaged could be documents, and then the
// count tells.
static std::vector<uint64_t> steppable_damage(std::string_view file) {
  std::vector<uint64_t> out;
  uint64_t off = format::kHeaderSize, docs = 0;
  RecordView r;
  for (;;) {
    ScanResult s = read_record(file, off, &r);
    if (s == ScanResult::Ok) {
      Reader rd(r.body);
      if (r.kind == format::kDocs) {
        rd.varint();
        docs += rd.varint();
      } else if (r.kind == format::kImageEnd) {
        rd.u64();
        rd.u64();
        return rd.ok() && rd.u64() == docs ? out : std::vector<uint64_t>{};
      }
      off = r.end;
      continue;
    }
    if (s != ScanResult::Bad) return {};
    uint8_t kind = (uint8_t)file[off + 4];
    uint32_t len;
    memcpy(&len, file.data() + off, 4);
    uint64_t end = off + format::kFrameOverhead + len;
    RecordView next;
    bool derived = kind == format::kIdIndex || kind == format::kGraph || kind == format::kVectors || kind == format::kExtent;
    if (!derived || end > file.size() || read_record(file, end, &next) != ScanResult::Ok) return {};
    out.push_back(off);
    off = end;
  }
}

Status Engine::load(std::string bytes, std::unique_ptr<Mapping> map) {
  std::string_view file = map ? std::string_view(map->data(), map->size()) : std::string_view(bytes);
  std::string err = check_header(file);
  if (!err.empty()) return Status(Code::Corrupt, "'" + name_ + "': " + err);
  uint64_t off = format::kHeaderSize;
  std::vector<std::pair<uint32_t, uint64_t>> doc_counts;
  std::map<uint32_t, std::vector<IdEntry>> idx;
  std::vector<RecordView> docs_records;
  uint64_t damage = 0;
  std::string damage_what;
  bool image_done = false;
  RecordView r;

  // Damaged records `recover` kept or stepped over (the file is rewritten).
  uint64_t repaired = 0;

  // The image.
  std::vector<uint64_t> steppable;
  if (opts_.recover) steppable = steppable_damage(file);
  while (!image_done) {
    ScanResult s = read_record(file, off, &r);
    if (s == ScanResult::Bad && std::find(steppable.begin(), steppable.end(), off) != steppable.end()) {
      uint8_t kind = (uint8_t)file[off + 4];
      uint32_t len;
      memcpy(&len, file.data() + off, 4);
      report_.warnings.push_back("recovered '" + name_ + "': stepped over a damaged " +
                                 (kind == format::kIdIndex ? "id index (rebuilt from the documents)"
                                  : kind == format::kVectors ? "vector table record (its vectors are lost)"
                                  : kind == format::kExtent  ? "extent"
                                                             : "HNSW graph (rebuilt from the vector table)") +
                                 " " + at(off));
      off += format::kFrameOverhead + len;
      if (kind == format::kExtent) drop_pending_extent();
      // A vector index record's extent goes with it.
      RecordView x;
      if ((kind == format::kVectors || kind == format::kGraph) && read_record(file, off, &x) == ScanResult::Ok &&
          x.kind == format::kExtent)
        off = x.end;
      repaired++;
      continue;
    }
    if (s != ScanResult::Ok) {
      damage = off;
      damage_what = s == ScanResult::End || s == ScanResult::Torn ? "the image is cut short" : "a damaged record (checksum mismatch)";
      break;
    }
    if (r.kind == format::kImageEnd && pending_extent_) {
      damage = off;
      damage_what = "a vector index record without its extent";
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
  drop_pending_extent();  // kept up to damage: a record whose extent was lost is as if absent

  // The tail. A bad record is a torn last write only when nothing whole
  // follows it; a record whose only fault is its length (it checks with the
  // length that ends it where the next write starts, or at the end of the
  // file) is damage too, and `recover` keeps it.
  uint64_t good_end = off;
  std::vector<RecordView> writes;
  while (damage == 0) {
    ScanResult s = read_record(file, off, &r);
    if (s == ScanResult::End) break;
    uint64_t want_seq = seq_ + writes.size() + 1;
    auto in_order = [&](const RecordView& w) {
      uint64_t seq = 0;
      if (w.kind == format::kWrite && w.body.size() >= 8) memcpy(&seq, w.body.data(), 8);
      return seq == want_seq;
    };
    if (s == ScanResult::Ok && in_order(r)) {
      writes.push_back(r);
      off = r.end;
      good_end = off;
      continue;
    }
    uint64_t next = next_write_after(file, off, want_seq - 1);
    RecordView fixed;
    bool only_length = s != ScanResult::Ok && whole_but_length(file, off, next ? next : file.size(), &fixed) &&
                       in_order(fixed);
    if (!next && !only_length) {
      report_.torn_bytes = file.size() - off;  // an unfinished last write: never acknowledged
      break;
    }
    if (only_length && opts_.recover) {
      writes.push_back(fixed);
      repaired++;
      report_.warnings.push_back("recovered '" + name_ + "': the write record " + at(off) +
                                 " had a damaged length field; its checksum holds with the length put right, so it was kept");
      off = fixed.end;
      good_end = off;
      continue;
    }
    damage = off;
    damage_what = only_length ? "a write record with a damaged length field (whole otherwise)"
                  : s != ScanResult::Ok ? "a damaged record (checksum mismatch or bad length) in the write log, with later writes after it"
                                        : "an out-of-order record in the write log";
    break;
  }

  repaired += given_up_tables_;
  if (damage || repaired) {
    if (damage && !opts_.recover)
      return Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(damage) + ": " + damage_what +
                                       ". Nothing was changed; open with recover (kitfox --recover) to keep everything before it");
    // Keep the damaged original beside the file, then keep what came before.
    KF_ASSIGN(auto copy, fs_.open(name_ + ".damaged", OpenFlags{true, false}));
    KF_TRY(copy->truncate(0));
    KF_TRY(copy->write(0, file.data(), file.size()));
    KF_TRY(copy->sync());
  }
  if (damage) {
    report_.recovered_offset = damage;
    report_.recovered_bytes = file.size() - damage;
    report_.warnings.push_back("recovered '" + name_ + "': dropped " + std::to_string(report_.recovered_bytes) +
                               " bytes from offset " + std::to_string(damage) + " (" + damage_what +
                               "); the damaged original is saved as '" + name_ + ".damaged'");
    good_end = damage;
  } else if (repaired) {
    report_.warnings.push_back("the damaged original is saved as '" + name_ + ".damaged'");
  }

  // Documents: the derived id index is checked against the Docs records and
  // rebuilt from them when anything disagrees.
  // The documents stay where the file was read (or mapped).
  if (map) arena_.reset(std::move(map));
  else arena_.reset(std::move(bytes));
  file = arena_.segment(0);
  for (auto& [cid, coll] : by_id_) {
    uint64_t expected = 0;
    for (auto& [c, n] : doc_counts)
      if (c == cid) expected += n;
    auto it = idx.find(cid);
    bool valid = it != idx.end() && it->second.size() == expected;
    // The collection's document bytes are summed on the same pass.
    uint64_t bytes_total = 0;
    if (valid) {
      int64_t prev = 0;
      for (size_t i = 0; i < it->second.size() && valid; i++) {
        const IdEntry& en = it->second[i];
        if ((i && en.id <= prev) || en.loc >= image_bytes_) { valid = false; break; }
        Reader rd(file.data() + en.loc, image_bytes_ - en.loc);
        if (unzigzag(rd.varint()) != en.id) valid = false;
        bytes_total += rd.str().size();
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
      bytes_total = 0;
      for (const RecordView& d : docs_records) {
        Reader rd(d.body);
        if ((uint32_t)rd.varint() != cid) continue;
        uint64_t n = rd.varint();
        for (uint64_t k = 0; k < n && rd.ok(); k++) {
          uint64_t loc = rd.pos() - file.data();
          int64_t id = unzigzag(rd.varint());
          bytes_total += rd.str().size();
          if (rd.ok()) v.push_back({id, loc});
        }
        if (!rd.ok()) return Status(Code::Corrupt, "documents cut short " + at(d.offset));
      }
      std::sort(v.begin(), v.end(), [](const IdEntry& a, const IdEntry& b) { return a.id < b.id; });
      it = idx.insert_or_assign(cid, std::move(v)).first;
    }
    coll->bytes = bytes_total;
    coll->ids.assign(std::move(it->second));

    // Vector indexes: the persisted table and graph, or a rebuild.
    for (const Field& f : coll->def.fields) {
      if (f.index.kind != IndexKind::Hnsw) continue;
      uint64_t key = (uint64_t)cid << 32 | f.id;
      auto v = vector_records_.find(key);
      auto index = std::make_unique<HnswIndex>(f.type.dim, f.type.f16, f.index.hnsw);
      if (v == vector_records_.end() || !v->second.has_table) {
        // No table: the documents hold their vectors; index them. Recovering,
        // a document's reference into a lost table reads as null.
        if (opts_.recover) coll->lost_tables.insert(f.id);
        KF_TRY(build_index(coll, f, &index));
        report_.index_rebuilt = true;
        report_.warnings.push_back("the vector index of '" + coll->def.name + "." + f.name + "' was built from the documents");
        if (coll->lost_refs) {
          report_.warnings.push_back("recovered '" + name_ + "': the vector table of '" + coll->def.name + "." + f.name +
                                     "' was lost: " + std::to_string(coll->lost_refs.load()) +
                                     " documents keep their other fields, their '" + f.name + "' is now null");
          coll->lost_refs = 0;
        }
      } else {
        VectorRecords& vr = v->second;
        // The table is data (image documents refer to it): it must load.
        if (!index->load_table(vr.meta, vr.table, extent_load()) || index->documents() > coll->ids.size())
          return Status(Code::Corrupt, "'" + name_ + "': the vector table of '" + coll->def.name + "." + f.name +
                                           "' does not match its documents");
        // The graph is derived: rebuilt when it does not validate.
        if (!vr.has_graph || vr.graph_bad || vr.graph_seq != seq_ || !index->load_graph(vr.graph, vr.links, extent_load())) {
          index->rebuild_graph(build_threads());
          report_.index_rebuilt = true;
          report_.warnings.push_back("the HNSW graph of '" + coll->def.name + "." + f.name +
                                     "' was missing or did not validate and was rebuilt from its vector table");
        }
      }
      coll->vindex[f.id] = std::move(index);
    }
  }
  vector_records_.clear();

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
  if (damage || repaired || !image_done) {
    // Rewrite a whole file from what was kept.
    KF_TRY(checkpoint_locked());
  }
  return Status::ok();
}

// ---------------------------------------------------------------- writes

Status Engine::apply_write(std::string_view body, uint32_t seg, uint64_t body_off, bool replay) {
  Reader head(body);
  uint64_t seq = head.u64();
  uint64_t nops = head.varint();
  if (!head.ok()) return Status(Code::Corrupt, "write record cut short");
  size_t skip = head.pos() - body.data();
  KF_TRY(apply_ops(body.substr(skip), nops, seg, body_off + skip, nullptr));
  (void)replay;
  link_touched();
  seq_ = seq;
  return Status::ok();
}

void Engine::link_touched() {
  // New vectors are linked once per record: the same writes give the same graph.
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (HnswIndex* index : touched_) index->link_pending(build_threads());
  touched_.clear();
}

Status Engine::apply_ops(std::string_view body, uint64_t nops, uint32_t seg, uint64_t body_off, std::vector<Undo>* undo) {
  Reader r(body);
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
        if (undo) remember(c, id, undo);
        uint64_t old = c->ids.put(id, loc);
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        c->bytes += b.size();
        if (id >= c->next_id) c->next_id = id == INT64_MAX ? id : id + 1;
        for (auto& [fid, index] : c->vindex) {
          Value v;
          KF_TRY(decode_field(b, fid, &v, c));
          if (v.kind() == Kind::Vector && v.vec().size() == index->dim()) {
            KF_TRY(index->prepare(v.vec().data(), &prepared_, "vector"));
            index->put(id, prepared_.data());
          } else {
            index->remove(id);
          }
          touched_.push_back(index.get());
        }
        for (auto& [fid, ti] : c->tindex) {
          Value v;
          KF_TRY(decode_field(b, fid, &v, c));
          text_tokens(v, &tokens_);
          ti->put(id, tokens_);
        }
        for (size_t i = 0; i < c->sindex.size(); i++) {
          if (!c->sindex[i]) continue;
          Value key;
          KF_TRY(secondary_key(*c, c->def.secondary[i], b, &key));
          c->sindex[i]->put(id, key);
        }
        break;
      }
      case format::kOpDel: {
        Collection* c = coll_of((uint32_t)r.varint());
        int64_t id = unzigzag(r.varint());
        if (!c) return Status(Code::Corrupt, "a delete for an unknown collection");
        if (undo) remember(c, id, undo);
        uint64_t old = c->ids.erase(id);
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        for (auto& [fid, index] : c->vindex) index->remove(id);
        for (auto& [fid, ti] : c->tindex) ti->remove(id);
        for (auto& si : c->sindex)
          if (si) si->remove(id);
        break;
      }
      case format::kOpDefine: {
        if (undo) return Status(Code::Invalid, "collection and index changes cannot be part of a batch");
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
          KF_TRY(sync_indexes(c.get()));
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
          KF_TRY(sync_indexes(c));
        }
        catalog_version_++;
        break;
      }
      case format::kOpDrop: {
        if (undo) return Status(Code::Invalid, "collection and index changes cannot be part of a batch");
        uint32_t cid = (uint32_t)r.varint();
        Collection* c = coll_of(cid);
        if (!c) return Status(Code::Corrupt, "a drop of an unknown collection");
        by_id_.erase(cid);
        colls_.erase(c->def.name);
        catalog_version_++;
        break;
      }
      default: return Status(Code::Corrupt, "unknown op " + std::to_string(op));
    }
  }
  if (!r.ok()) return Status(Code::Corrupt, "write record cut short");
  return Status::ok();
}

// What a document was before a write in a transaction, to put it back.
void Engine::remember(Collection* c, int64_t id, std::vector<Undo>* undo) {
  Undo u;
  u.coll = c->def.id;
  u.id = id;
  u.next_id = c->next_id;
  const uint64_t* loc = c->ids.find(id);
  u.loc = loc ? *loc : IdIndex::kDead;
  for (auto& [fid, index] : c->vindex) {
    int64_t node = index->node_of(id);
    if (node < 0) continue;
    std::vector<float> v;
    index->vector_of((uint32_t)node, &v);
    u.vectors.push_back({fid, std::move(v)});
  }
  undo->push_back(std::move(u));
}

void Engine::rollback(std::vector<Undo>& undo) {
  for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
    Collection* c = by_id_[it->coll];
    uint64_t cur = c->ids.erase(it->id);
    if (cur != IdIndex::kDead) c->bytes -= arena_.body(cur).size();
    if (it->loc != IdIndex::kDead) {
      c->ids.put(it->id, it->loc);
      c->bytes += arena_.body(it->loc).size();
    }
    c->next_id = it->next_id;
    for (auto& [fid, index] : c->vindex) index->remove(it->id);
    for (auto& [fid, v] : it->vectors) c->vindex[fid]->put(it->id, v.data());  // revives its node
    // The text and secondary indexes take the document as it was back.
    std::string_view was = it->loc != IdIndex::kDead ? arena_.body(it->loc) : std::string_view();
    for (auto& [fid, ti] : c->tindex) {
      Value v;
      if (it->loc != IdIndex::kDead && decode_field(was, fid, &v, c).is_ok()) {
        text_tokens(v, &tokens_);
        ti->put(it->id, tokens_);
      } else {
        ti->remove(it->id);
      }
    }
    for (size_t i = 0; i < c->sindex.size(); i++) {
      if (!c->sindex[i]) continue;
      Value key;
      if (it->loc != IdIndex::kDead && secondary_key(*c, c->def.secondary[i], was, &key).is_ok()) c->sindex[i]->put(it->id, key);
      else c->sindex[i]->remove(it->id);
    }
  }
  for (auto& [name, c] : colls_)
    for (auto& [fid, index] : c->vindex) index->drop_pending();
  touched_.clear();
  undo.clear();
}

Status Engine::build_index(Collection* c, const Field& f, std::unique_ptr<HnswIndex>* out) {
  auto index = std::make_unique<HnswIndex>(f.type.dim, f.type.f16, f.index.hnsw);
  Status st;
  Value v;
  c->ids.scan([&](const IdEntry& e) {
    st = decode_field(arena_.body(e.loc), f.id, &v, c);
    if (st.is_ok() && v.kind() == Kind::Vector && v.vec().size() == f.type.dim) {
      st = index->prepare(v.vec().data(), &prepared_, f.name);
      if (st.is_ok()) index->put(e.id, prepared_.data());
    }
    return st.is_ok();
  });
  KF_TRY(st);
  index->link_pending(build_threads());
  *out = std::move(index);
  return Status::ok();
}

Status Engine::sync_indexes(Collection* c) {
  c->tindex.clear();  // rebuilt on first use against the new definition
  c->sindex.clear();
  for (auto it = c->vindex.begin(); it != c->vindex.end();) {
    const Field* f = c->def.field_by_id(it->first);
    if (!f || f->index.kind != IndexKind::Hnsw || !(f->index.hnsw == it->second->params())) {
      c->retired[it->first] = std::move(it->second);  // image documents may still refer to its table
      it = c->vindex.erase(it);
    } else {
      ++it;
    }
  }
  for (const Field& f : c->def.fields) {
    if (f.index.kind != IndexKind::Hnsw || c->vindex.count(f.id)) continue;
    std::unique_ptr<HnswIndex> index;
    KF_TRY(build_index(c, f, &index));
    if (index->nodes()) checkpoint_soon_ = true;
    c->vindex[f.id] = std::move(index);
  }
  return Status::ok();
}

Status Engine::check_writable() const {
  if (failed_.load()) return Status(Code::Failed, failure_ + "; the database refuses writes until it is reopened");
  if (closed_) return Status(Code::Invalid, "the database is closed");
  return Status::ok();
}

Result<uint64_t> Engine::commit(std::string_view ops, uint32_t nops) {
  KF_TRY(check_writable());
  if (in_txn_) {
    // Inside a batch: applied now (later statements see it), written at the end.
    const char* where;
    uint64_t l = arena_.append(ops, &where);
    KF_TRY(apply_ops(std::string_view(where, ops.size()), nops, (uint32_t)(l >> 40), l & ((1ull << 40) - 1), &undo_));
    txn_ops_.append(ops);
    txn_nops_ += nops;
    return seq_;
  }
  return write_record(ops, nops, true);
}

Result<uint64_t> Engine::write_record(std::string_view ops, uint32_t nops, bool apply) {
  std::string body;
  body.reserve(ops.size() + 16);
  put_u64(body, seq_ + 1);
  put_varint(body, nops);
  body.append(ops);
  if (body.size() > kMaxWriteBytes) return Status(Code::Limit, "one write is larger than the 1 GiB record limit");
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
  if (apply) {
    const char* where;
    uint64_t l = arena_.append(body, &where);
    Status ap = apply_write(std::string_view(where, body.size()), (uint32_t)(l >> 40), l & ((1ull << 40) - 1), false);
    if (!ap.is_ok()) {
      // Ops built by the executor always apply; should one not, the record
      // is in the file but not in memory: no further write may land.
      failure_ = "a write did not apply in memory (" + ap.message() + ")";
      failed_ = true;
      return Status(Code::Failed, failure_);
    }
  } else {
    link_touched();
    seq_++;
  }
  tail_records_++;
  {
    std::lock_guard g(sync_mu_);
    written_seq_ = seq_;
  }
  if (opts_.auto_checkpoint && (checkpoint_worthwhile(false) || checkpoint_soon_)) {
    checkpoint_soon_ = false;
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
void Engine::checker_loop() {
  // Slices of 256 KiB: a writer waits for at most one.
  constexpr uint64_t kSlice = 256 << 10;
  while (!stop_checker_.load(std::memory_order_relaxed)) {
    std::shared_lock lk(mu_);
    uint64_t done = 0, left = 0;
    for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) {
      if (done < kSlice) done += idx.warm(kSlice - done);
      left += idx.unread_bytes();
    });
    if (!left) return;
  }
}

void Engine::stop_checker() {
  if (!checker_.joinable()) return;
  stop_checker_ = true;
  checker_.join();
}

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

Result<std::string> Engine::build_image(std::vector<std::vector<IdEntry>>* new_ids, std::vector<TableAt>* tables) {
  std::string out;
  uint64_t total = format::kHeaderSize + 64;
  for (auto& [name, c] : colls_) {
    total += c->bytes + c->ids.size() * 28 + 64;
    for (auto& [fid, index] : c->vindex) total += index->memory_bytes() + index->nodes() * index->dim() * 4;
  }
  tables->clear();
  out.reserve(total);
  advise_huge_pages(out.data(), out.capacity());  // it becomes the memory of tables and lists
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
    // Documents with indexed vectors refer to the vector table instead of
    // repeating the vector; other documents are copied as they are.
    bool rewrite = !c->vindex.empty() || !c->retired.empty();
    std::string nb;
    Value doc;
    Status bad;
    c->ids.scan([&](const IdEntry& e) {
      std::string_view b = arena_.body(e.loc);
      if (rewrite) {
        // Writes are refused when their documents would not decode, so this
        // fails only on damage; the checkpoint stops and the old file stays.
        Status ds = decode_document(c->def, e.id, b, &doc, c);
        if (!ds.is_ok()) {
          bad = Status(Code::Corrupt, "checkpoint stopped: document " + std::to_string(e.id) + " of '" + c->def.name +
                                          "' does not decode (" + ds.message() + "); the file is unchanged");
          return false;
        }
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
        b = nb;
      }
      pending.push_back({e.id, chunk.size()});
      put_varint(chunk, zigzag(e.id));
      put_str(chunk, b);
      if (chunk.size() >= kDocsChunkBytes) flush();
      return true;
    });
    KF_TRY(bad);
    flush();
    docs += ids.size();
    std::string ib;
    put_varint(ib, c->def.id);
    put_u64(ib, ids.size());
    ib.append((const char*)ids.data(), ids.size() * sizeof(IdEntry));
    append_record(out, format::kIdIndex, ib);
    records++;
    new_ids->push_back(std::move(ids));

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
      tables->push_back({index.get(), table_at, links_at});
      records += 4;
    }
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
  if (lazy_) {
    // Every block is checked before the image is written from them: a
    // damaged graph is rebuilt, a damaged vector table stops the checkpoint
    // (it would carry zeros in place of the vectors).
    for_each_vindex([](Collection&, uint32_t, HnswIndex& idx) { idx.warm(UINT64_MAX); });
    bool repaired = false;
    KF_TRY(check_extents(&repaired));
  }
  std::vector<std::vector<IdEntry>> new_ids;
  std::vector<TableAt> tables;
  KF_ASSIGN(std::string image, build_image(&new_ids, &tables));
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
  for (const TableAt& t : tables) t.index->rebase(arena_.segment(0).data() + t.table, arena_.segment(0).data() + t.links);
  for (auto& [name, c] : colls_) {
    c->retired.clear();
    c->lost_tables.clear();  // the documents no longer refer to a lost table
  }
  return Status::ok();
}

Status Engine::checkpoint() {
  std::unique_lock lk(mu_);
  return checkpoint_locked();
}

Status Engine::close() {
  if (closed_) return Status::ok();
#ifdef KITFOX_THREADS
  stop_checker();
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
    for (auto& [fid, index] : c->vindex) s.memory_bytes += index->memory_bytes();
    for (auto& [fid, ti] : c->tindex) s.memory_bytes += ti->memory_bytes();
    for (auto& si : c->sindex)
      if (si) s.memory_bytes += si->memory_bytes();
    s.collections.push_back({name, c->ids.size(), c->bytes});
  }
  return s;
}

Collection* Engine::find(std::string_view name) {
  auto it = colls_.find(std::string(name));
  return it == colls_.end() ? nullptr : it->second.get();
}

ExtentLoad Engine::extent_load() {
  ExtentLoad how;
  how.lazy = lazy_;
  how.chunk = lazy_read_ ? file_->read_chunk() : 0;  // checks alone go block by block
  // file_ changes only at a checkpoint, which reads every block first and
  // rebases the indexes onto the new image.
  if (lazy_read_) how.read = [this](uint64_t off, char* dst, size_t n) { return read_exact(*file_, off, dst, n); };
  return how;
}

bool Engine::extents_damaged() {
  if (!lazy_) return false;
  bool damaged = false;
  for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) {
    damaged = damaged || idx.graph_damaged_at() || idx.table_damaged_at();
  });
  return damaged;
}

Status Engine::check_extents(bool* repaired) {
  *repaired = false;
  if (!lazy_) return Status::ok();
  Status bad = Status::ok();
  for_each_vindex([&](Collection& c, uint32_t fid, HnswIndex& idx) {
    std::string what = "'" + c.def.name;
    for (const Field& f : c.def.fields)
      if (f.id == fid) what += "." + f.name;
    what += "'";
    if (uint64_t off = idx.graph_damaged_at()) {
      report_.index_rebuilt = true;
      report_.warnings.push_back("the HNSW graph of " + what + " was damaged " + at(off) +
                                 " and was rebuilt from its vector table");
      idx.rebuild_graph(build_threads());
      *repaired = true;
    }
    if (uint64_t off = idx.table_damaged_at(); off && bad.is_ok())
      bad = Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(off) + ": the vector table of " + what + " (" +
                                      idx.table_damage() + "). Open with recover (kitfox --recover) to keep what is whole");
  });
  return bad;
}

uint64_t Engine::warm(uint64_t budget) {
  std::unique_lock lk(mu_);
  uint64_t done = 0, left = 0;
  for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) {
    if (done < budget) done += idx.warm(budget - done);
    left += idx.unread_bytes();
  });
  return left;
}

Result<std::shared_ptr<Prepared>> Engine::prepare(std::string_view text, bool cache) {
  if (cache && text.size() <= StatementCache::kMaxText)
    if (auto p = cache_.find(text)) return p;
  auto p = std::make_shared<Prepared>();
  p->text = std::string(text);
  KF_TRY(parse_statement(p->text, &p->st));
  if (cache) cache_.add(p);
  return p;
}

Status Engine::bound(Prepared& p) {
  uint64_t v = catalog_version_.load(std::memory_order_relaxed);
  if (p.bound_at.load(std::memory_order_acquire) == v) return Status::ok();
  std::lock_guard g(p.bind_mu);
  if (p.bound_at.load(std::memory_order_relaxed) == v) return Status::ok();
  KF_TRY(bind(*this, p.st));
  p.bound_at.store(v, std::memory_order_release);
  return Status::ok();
}

Status Engine::bind_now(Prepared& p) {
  std::shared_lock lk(mu_);
  return bound(p);
}

Result<QueryResult> Engine::run(Prepared& p, const std::vector<Value>& params, bool owned) {
  const ParsedStatement& st = p.st;
  if (closed_) return Status(Code::Invalid, "the database is closed");
  switch (st.kind) {
    case StmtKind::Checkpoint:
    case StmtKind::Compact:
      KF_TRY(checkpoint());
      return QueryResult{};
    case StmtKind::Begin:
    case StmtKind::Commit:
    case StmtKind::Rollback:
      return Status(Code::Invalid, "transactions belong to a Database handle", st.pos);
    default: break;
  }
  bool repaired = false;
  if (!st.is_write()) {
    {
      std::shared_lock lk(mu_);
      KF_TRY(bound(p));
      Result<QueryResult> r = execute_read(st, params);
      if (!extents_damaged()) return r;
    }
    // A block found damaged: rebuilding a graph needs the database alone.
    std::unique_lock lk(mu_);
    KF_TRY(check_extents(&repaired));
    KF_TRY(bound(p));
    return execute_read(st, params);  // from the rebuilt graph
  }
  uint64_t wait_seq = 0;
  Result<QueryResult> r = Status(Code::Invalid, "no result");
  {
    std::unique_lock lk(mu_);
    KF_TRY(check_writable());
    KF_TRY(bound(p));
    r = execute_write(st, params, owned ? &p.st : nullptr);
    if (r.is_ok()) wait_seq = seq_;
    KF_TRY(check_extents(&repaired));
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

namespace {
Status in_statement(size_t i, const Status& s) {
  return Status(s.code(), "statement " + std::to_string(i + 1) + ": " + s.message(), s.position());
}
}  // namespace

Result<std::vector<QueryResult>> Engine::batch(const std::vector<BatchItem>& items) {
  std::vector<PreparedItem> prepared(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    auto p = prepare(items[i].text, true);
    if (!p.is_ok()) return in_statement(i, p.status());
    prepared[i] = {std::move(p.value()), items[i].params};
  }
  return run_batch(prepared, false);
}

Result<std::vector<QueryResult>> Engine::run_batch(const std::vector<PreparedItem>& items, bool dry_run) {
  for (size_t i = 0; i < items.size(); i++) {
    StmtKind k = items[i].p->st.kind;
    if (k != StmtKind::Put && k != StmtKind::Insert && k != StmtKind::Set && k != StmtKind::Del && k != StmtKind::Get &&
        k != StmtKind::Collections && k != StmtKind::Describe)
      return in_statement(i, Status(Code::Invalid, "only put, insert, set, del and reads can be part of a batch",
                                    items[i].p->st.pos));
  }
  if (closed_) return Status(Code::Invalid, "the database is closed");
  std::vector<QueryResult> out;
  uint64_t wait_seq = 0;
  bool wrote = false;
  {
    std::unique_lock lk(mu_);
    KF_TRY(check_writable());
    in_txn_ = true;
    txn_ops_.clear();
    txn_nops_ = 0;
    undo_.clear();
    for (size_t i = 0; i < items.size(); i++) {
      const ParsedStatement& st = items[i].p->st;
      Status b = bound(*items[i].p);
      auto r = !b.is_ok() ? Result<QueryResult>(b)
               : st.is_write() ? execute_write(st, items[i].params) : execute_read(st, items[i].params);
      if (!r.is_ok()) {
        rollback(undo_);
        in_txn_ = false;
        return in_statement(i, r.status());
      }
      out.push_back(std::move(r.value()));
    }
    in_txn_ = false;
    bool repaired = false;
    Status damaged = check_extents(&repaired);
    if (!damaged.is_ok() || dry_run) {
      rollback(undo_);
      if (!damaged.is_ok()) return damaged;
      return out;
    }
    if (txn_nops_) {
      auto w = write_record(txn_ops_, txn_nops_, false);
      if (!w.is_ok()) {
        rollback(undo_);
        return w.status();
      }
      wait_seq = seq_;
      wrote = true;
    }
    undo_.clear();
    txn_ops_.clear();
  }
  if (wrote && opts_.sync == SyncMode::Always) KF_TRY(sync_to(wait_seq));
  return out;
}

// ---------------------------------------------------------------- Database

// The statements a thread queued since its begin, by thread.
struct Database::Transactions {
  std::mutex mu;
  std::map<std::thread::id, std::vector<Engine::PreparedItem>> open;
  std::atomic<size_t> count{0};  // open.size(), read without mu: none open, none to look up
};

Database::Database() : txns_(std::make_unique<Transactions>()) {}
Database::~Database() = default;

Result<std::unique_ptr<Database>> Database::open(FileSystem& fs, const std::string& name, const OpenOptions& o) {
  KF_ASSIGN(auto e, Engine::open(fs, name, o));
  std::unique_ptr<Database> db(new Database());
  db->engine_ = std::move(e);
  return db;
}

Result<QueryResult> Database::query(std::string_view text, const std::vector<Value>& params) {
  KF_ASSIGN(auto p, engine_->prepare(text, true));
  return run(p, params, p.use_count() == 1);
}

Result<Statement> Database::prepare(std::string_view text) {
  KF_ASSIGN(auto p, engine_->prepare(text, false));
  Statement s;
  s.db_ = this;
  s.p_ = std::move(p);
  KF_TRY(engine_->bind_now(*s.p_));
  return s;
}

Result<QueryResult> Database::run(const std::shared_ptr<Prepared>& p, const std::vector<Value>& params, bool owned) {
  const StmtKind kind = p->st.kind;
  auto me = std::this_thread::get_id();
  Transactions& t = *txns_;
  switch (kind) {
    case StmtKind::Begin: {
      std::lock_guard g(t.mu);
      if (t.open.count(me)) return Status(Code::Invalid, "a transaction is already open (begin was given twice)", p->st.pos);
      t.open[me];
      t.count = t.open.size();
      return QueryResult{};
    }
    case StmtKind::Rollback: {
      std::lock_guard g(t.mu);
      if (!t.open.erase(me)) return Status(Code::Invalid, "no transaction is open (rollback without begin)", p->st.pos);
      t.count = t.open.size();
      return QueryResult{};
    }
    case StmtKind::Commit: {
      std::vector<Engine::PreparedItem> items;
      {
        std::lock_guard g(t.mu);
        auto it = t.open.find(me);
        if (it == t.open.end()) return Status(Code::Invalid, "no transaction is open (commit without begin)", p->st.pos);
        items = std::move(it->second);
        t.open.erase(it);
        t.count = t.open.size();
      }
      KF_ASSIGN(auto results, engine_->run_batch(items, false));
      QueryResult all;
      for (auto& r : results)
        for (auto& row : r.rows) all.rows.push_back(std::move(row));
      return all;
    }
    default: break;
  }
  // Only this thread opens or closes its own transaction, so with none open
  // at all this thread has none.
  if (t.count.load(std::memory_order_acquire) == 0) return engine_->run(*p, params, owned);
  std::unique_lock g(t.mu);
  auto it = t.open.find(me);
  if (it == t.open.end()) {
    g.unlock();
    return engine_->run(*p, params, owned);
  }
  std::vector<Engine::PreparedItem>& queue = it->second;
  bool is_read = kind == StmtKind::Get || kind == StmtKind::Collections || kind == StmtKind::Describe;
  if (!is_read && kind != StmtKind::Put && kind != StmtKind::Insert && kind != StmtKind::Set && kind != StmtKind::Del)
    return Status(Code::Invalid, "only put, insert, set, del and reads can be part of a transaction", p->st.pos);
  if (!is_read) {
    KF_TRY(engine_->bind_now(*p));  // an unknown name is reported now, not at commit
    queue.push_back({p, params});
    Value row = Value::object();
    row.append("queued", Value::integer((int64_t)queue.size()));
    QueryResult r;
    r.rows.push_back(std::move(row));
    return r;
  }
  if (queue.empty()) {
    g.unlock();
    return engine_->run(*p, params, owned);
  }
  // A read sees the transaction's writes: they run before it, then are undone.
  std::vector<Engine::PreparedItem> items = queue;
  g.unlock();
  items.push_back({p, params});
  KF_ASSIGN(auto results, engine_->run_batch(items, true));
  return std::move(results.back());
}

Result<QueryResult> Statement::query(const std::vector<Value>& params) const {
  if (!p_) return Status(Code::Invalid, "an empty statement (not prepared)");
  return db_->run(p_, params, false);
}
const std::string& Statement::text() const {
  static const std::string none;
  return p_ ? p_->text : none;
}
bool Statement::is_write() const { return p_ && p_->st.is_write(); }

Result<std::vector<QueryResult>> Database::batch(const std::vector<BatchItem>& items) { return engine_->batch(items); }
Status Database::checkpoint() { return engine_->checkpoint(); }
Status Database::compact() { return engine_->checkpoint(); }
Status Database::sync() { return engine_->sync(); }
uint64_t Database::warm(uint64_t budget) { return engine_->warm(budget); }
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
