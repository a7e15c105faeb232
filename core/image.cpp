// The image: opening a file (the image read, mapped or read on demand, and
// the tail of write records replayed over it, torn tails and damage told
// apart), and the extents' checks. A new image is built by checkpoint.cpp.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "codec.h"
#include "engine.h"
#include "engine_limits.h"
#include "port.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox {

namespace {
std::string at(uint64_t off) { return "at offset " + std::to_string(off); }
}  // namespace

// The file read into memory that is not zeroed first (where it cannot be mapped).
class ReadBuffer final : public Mapping {
 public:
  bool of_file() const override { return false; }  // bytes read: the file may be cut short under it
  // A file too big for this build's memory (a WASM build's 4 GiB, or what
  // the host gives it) is an error, not an abort.
  static Result<std::unique_ptr<ReadBuffer>> make(const std::string& name, uint64_t n) {
    std::unique_ptr<ReadBuffer> b(new ReadBuffer);
    if (n <= SIZE_MAX) b->p_.reset(new (std::nothrow) char[(size_t)n]);
    if (!b->p_)
      return Status(Code::Limit, "'" + name + "' is " + std::to_string(n) +
                                     " bytes, more than this build can read into its memory");
    b->n_ = (size_t)n;
    return b;
  }
  const char* data() const override { return p_.get(); }
  char* data() { return p_.get(); }
  size_t size() const override { return n_; }

 private:
  ReadBuffer() = default;
  std::unique_ptr<char[]> p_;
  size_t n_ = 0;
};

static Result<std::unique_ptr<Mapping>> read_whole(File& f, const std::string& name, uint64_t size) {
  KF_ASSIGN(auto buf, ReadBuffer::make(name, size));
  KF_TRY(read_exact(f, 0, buf->data(), size));
  return std::unique_ptr<Mapping>(std::move(buf));
}

// The file read into memory but for the bytes of its extents (vector tables,
// level-0 lists), which are read block by block when first used: the records
// are walked from the header, reading ahead 1 MiB at a time and stepping over
// each Extent's bytes. Anything unexpected (a length past the end) reads the
// rest whole, for load() to judge.
static Result<std::unique_ptr<Mapping>> read_lazily(File& f, const std::string& name, uint64_t size) {
  constexpr uint64_t kReadAhead = 1 << 20;
  KF_ASSIGN(auto buf, ReadBuffer::make(name, size));
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
    KF_TRY(ensure(std::min(size, off + format::kLongFrameHead)));
    uint64_t head, len;
    if (frame_head(p + off, size - off, &head, &len) != ScanResult::Ok) {
      KF_TRY(ensure(size));
      break;
    }
    uint64_t trailer = off + head + len;
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


// What a file's bytes hold: a header and a whole image (ImageEnd read),
// the image's last sequence, and the last of the whole write records in
// order after it.
struct ImageSpan {
  bool whole = false;        // a header and an image up to its ImageEnd
  bool ends_file = false;    // nothing after the ImageEnd
  uint64_t image_seq = 0;    // the ImageEnd's last sequence
  uint64_t last_seq = 0;     // the last write's after it, in order (image_seq if none)
};

static ImageSpan image_span(std::string_view bytes) {
  ImageSpan out;
  if (!check_header(bytes).empty()) return out;
  uint64_t off = format::kHeaderSize;
  RecordView r;
  while (read_record(bytes, off, &r) == ScanResult::Ok) {
    off = r.end;
    if (r.kind != format::kImageEnd) continue;
    if (r.body.size() < 8) return out;
    out.whole = true;
    out.ends_file = off == bytes.size();
    memcpy(&out.image_seq, r.body.data(), 8);
    out.last_seq = out.image_seq;
    while (read_record(bytes, off, &r) == ScanResult::Ok && r.kind == format::kWrite && r.body.size() >= 8) {
      uint64_t seq;
      memcpy(&seq, r.body.data(), 8);
      if (seq != out.last_seq + 1) break;
      out.last_seq = seq;
      off = r.end;
    }
    return out;
  }
  return out;
}

Result<std::unique_ptr<Engine>> Engine::open(FileSystem& fs, const std::string& name, const OpenOptions& o) {
  std::unique_ptr<Engine> e(new Engine(fs, name, o));
  const std::string side = name + "~";
  // With an atomic rename (natively, in Node) NAME is whole at every moment:
  // a checkpoint's side file, NAME~~, is only ever made the file by the
  // rename, and one left over is deleted (it may lack writes that NAME
  // holds). NAME~ is then never read, written or removed: backup tools (mv
  // -b, cp -b, rsync -b) leave the user's copy of the file there.
  if (fs.atomic_replace()) {
    KF_ASSIGN(bool carried_exists, fs.exists(name + "~~"));
    if (carried_exists) KF_TRY(fs.remove(name + "~~"));
  }

  // Without one (OPFS, a host's copy), a leftover NAME~: a whole image wins
  // (the checkpoint got as far as flushing it, and NAME may be half
  // copied), anything else is an unfinished checkpoint.
  KF_ASSIGN(bool side_exists, fs.atomic_replace() ? Result<bool>(false) : fs.exists(side));
  if (side_exists) {
    std::unique_ptr<Mapping> bytes;
    {
      KF_ASSIGN(auto f, fs.open(side, OpenFlags{false, true}));
      KF_ASSIGN(uint64_t size, f->size());
      KF_ASSIGN(bytes, read_whole(*f, side, size));
    }
    const ImageSpan given = image_span({bytes->data(), bytes->size()});
    bytes.reset();
    bool stale = false;
    if (given.whole && given.ends_file) {
      // NAME holding writes past the side file's image had the image put in
      // its place already (a write lands in NAME only after that): the side
      // file is left over, from a host whose removal of it did not last.
      KF_ASSIGN(bool name_exists, fs.exists(name));
      if (name_exists) {
        KF_ASSIGN(auto f, fs.open(name, OpenFlags{false, true}));
        KF_ASSIGN(uint64_t size, f->size());
        KF_ASSIGN(auto held, read_whole(*f, name, size));
        const ImageSpan now = image_span({held->data(), held->size()});
        // (An image of sequence 0 is never stale: `recover` writes one when
        // it stops inside the image, beside a NAME that has writes.)
        stale = given.image_seq > 0 && now.whole && now.last_seq > given.image_seq;
      }
    }
    if (given.whole && given.ends_file && !stale) {
      KF_TRY(fs.replace(side, name));
      e->report_.side_file_restored = true;
      e->report_.warnings.push_back("finished an interrupted checkpoint: the complete new image in '" + side +
                                    "' replaced the file");
    } else {
      KF_TRY(fs.remove(side));
      if (stale)
        e->report_.warnings.push_back("removed '" + side + "', a checkpoint's image that '" + name +
                                      "' holds already, with later writes");
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
      KF_ASSIGN(map, read_lazily(*e->file_, name, fsize));
    } else {
      KF_ASSIGN(map, read_whole(*e->file_, name, fsize));
    }
  }
  if (!map) {
    // A new database: an empty image, flushed, so the file is whole from the start.
    if (exists && !fsize)
      e->report_.warnings.push_back("'" + name + "' was an empty file (0 bytes): a new database was made in it");
    NewImage img;
    KF_TRY(e->begin_image(&img, false));
    KF_TRY(e->finish_image(&img));
    bytes = std::move(img.bytes);
    KF_TRY(e->file_->write(0, bytes.data(), bytes.size()));
    KF_TRY(e->file_->sync());
  }
  KF_TRY(e->load(std::move(bytes), std::move(map)));
  e->last_sync_ms_ = port::now_ms();
  e->opened_ = true;
  // Background work (natively: port.h runs none without threads).
  if (o.sync != SyncMode::Off) e->flusher_.start([p = e.get()] { p->flusher_loop(); });
  if (o.auto_checkpoint) e->checkpointer_.start([p = e.get()] { p->checkpointer_loop(); });
  if (port::kThreads && e->lazy_ && !e->lazy_read_ && o.check_in_background) {
    uint64_t unchecked = 0;
    e->for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) { unchecked += idx.unread_bytes(); });
    if (unchecked) e->checker_.start([p = e.get()] { p->checker_loop(); });
  }
  return e;
}

// A collection's id index, built while the image's Docs records are read
// (an image writes them in id order; any other order is sorted at the end),
// and its documents' bytes summed on the same pass.
struct Engine::ImageIds {
  IdBlocks ids;
  uint64_t bytes = 0;
  int64_t last = 0;
  bool any = false, ordered = true;
  IdEntry run[256];  // appended a run at a time
  size_t in_run = 0;

  void flush() {
    ids.append(run, in_run);
    in_run = 0;
  }
  // A full run into the index: out of line, once every 256 entries (kept
  // out of the loop below, which is flattened).
  [[gnu::noinline]] void spill(size_t k) { ids.append(run, k); }
  // The n entries of Docs record r, from where rd stands (rd fails where
  // they are cut short). Out of line: inside apply_image_record the
  // compiler stops inlining the varints. Flattened (its calls inlined; GCC
  // also inlines theirs): the WASM build compiles this file for size, which
  // left the reader's calls out of line (an open in Node took 10-15% longer).
  [[gnu::noinline, gnu::flatten]] void read(Reader* rd, uint64_t n, const RecordView& r) {
    // Each entry's place is known only once the one before it is read: the
    // loads are started a stretch ahead (natively), or every line would be a
    // miss of its own. The state (the reader's too) in locals: the entries'
    // stores could otherwise change it, as far as the compiler knows.
    constexpr size_t kAhead = 1024;
    const char* const end = r.body.data() + r.body.size();
    const char* ahead = rd->pos();
    const uint64_t base = r.offset + r.head;  // of the body in the file
    uint64_t sum = bytes;
    int64_t prev = last;
    bool seen = any, in_order = ordered;
    size_t k_run = in_run;
    Reader in = *rd;
    for (uint64_t k = 0; k < n; k++) {
      if constexpr (port::kPrefetch)
        for (const char* want = std::min(end, in.pos() + kAhead); ahead < want; ahead += 64) port::prefetch(ahead, 1);
      const uint64_t loc = base + (uint64_t)(in.pos() - r.body.data());
      // Each call here at the first level, for the flattening to reach it
      // (clang inlines one level): ids take more than a byte from 64 on.
      const int64_t id = unzigzag(in.varint_long());
      sum += in.bytes(in.varint()).size();
      if (!in.ok()) break;
      in_order = in_order && (!seen || id > prev);
      seen = true;
      prev = id;
      run[k_run++] = {id, loc};
      if (k_run == std::size(run)) {
        spill(k_run);
        k_run = 0;
      }
    }
    *rd = in;
    bytes = sum;
    last = prev;
    any = seen;
    ordered = in_order;
    in_run = k_run;
  }
  struct Mark {
    size_t size;
    uint64_t bytes;
    int64_t last;
    bool any, ordered;
  };
  Mark mark() const { return {ids.size() + in_run, bytes, last, any, ordered}; }
  void back_to(const Mark& m) {
    flush();
    ids.truncate(m.size);
    bytes = m.bytes;
    last = m.last;
    any = m.any;
    ordered = m.ordered;
  }
};

// Each collection's documents as its image's Docs records count them, each
// count bounded by what its record's bytes could hold (an entry takes two
// bytes at least): read before the records' checks, only to take the
// memory of its id index ahead (IdBlocks::expect).
static std::map<uint32_t, uint64_t> counted_documents(std::string_view file) {
  std::map<uint32_t, uint64_t> n;
  uint64_t off = format::kHeaderSize;
  while (off < file.size()) {
    uint64_t head, len;
    if (frame_head(file.data() + off, file.size() - off, &head, &len) != ScanResult::Ok) break;
    const uint8_t kind = (uint8_t)file[off + 4];
    if (kind == format::kImageEnd) break;
    if (kind == format::kDocs) {
      Reader rd(file.data() + off + head, (size_t)len);
      const uint32_t cid = (uint32_t)rd.varint();
      const uint64_t count = rd.varint();
      if (rd.ok()) n[cid] += std::min<uint64_t>(count, rd.left() / 2);
    }
    off += head + len + 4;
  }
  return n;
}

Status Engine::apply_image_record(const RecordView& r, const std::map<uint32_t, uint64_t>* counted,
                                  std::map<uint32_t, ImageIds>* ids) {
  if (r.kind == format::kExtent) {
    if (!pending_extent_) return Status(Code::Corrupt, "an extent with no record before it " + at(r.offset));
    ExtentRef* e = pending_extent_;
    pending_extent_ = nullptr;
    e->bytes = r.body;
    e->file_offset = r.offset + r.head;
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
      const uint32_t cid = (uint32_t)rd.varint();
      if (!by_id_.count(cid)) return Status(Code::Corrupt, "documents of an unknown collection " + at(r.offset));
      const uint64_t n = rd.varint();
      if (!rd.ok() || n > rd.left() / 2) return Status(Code::Corrupt, "a documents record cut short " + at(r.offset));
      ImageIds& x = (*ids)[cid];
      const ImageIds::Mark before = x.mark();  // a record that fails adds nothing
      if (!x.any) {
        const auto c = counted->find(cid);
        if (c != counted->end()) x.ids.expect((size_t)std::min<uint64_t>(c->second, SIZE_MAX));
      }
      x.read(&rd, n, r);
      if (!rd.ok() || !rd.done()) {
        x.back_to(before);
        return Status(Code::Corrupt, "a documents record that its count does not fill " + at(r.offset));
      }
      break;
    }
    case format::kIdIndex:
      // Images before 2026-12-07 held each collection's id index; it is
      // derived, and built from the documents as they are read instead.
      rd.bytes(rd.left());
      break;
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
    uint64_t head, len;
    if (frame_head(file.data() + off, file.size() - off, &head, &len) != ScanResult::Ok) return {};
    RecordView next;
    bool derived = kind == format::kIdIndex || kind == format::kGraph || kind == format::kVectors || kind == format::kExtent;
    if (!derived) return {};
    const uint64_t end = off + head + len + 4;
    if (read_record(file, end, &next) != ScanResult::Ok) return {};
    out.push_back(off);
    off = end;
  }
}

// The image's documents read: each collection's entries in id order. The
// same id twice is no file kitfox writes: refused, or with `recover` the
// one stored later kept.
Status Engine::finish_image_ids(std::string_view file, std::map<uint32_t, ImageIds>* all, uint64_t* repaired) {
  for (auto& [cid, x] : *all) {
    x.flush();
    if (x.ordered) continue;
    std::vector<IdEntry> v(x.ids.size());
    for (size_t i = 0; i < v.size(); i++) v[i] = x.ids[i];
    std::sort(v.begin(), v.end(), [](const IdEntry& a, const IdEntry& b) { return a.id < b.id || (a.id == b.id && a.loc < b.loc); });
    size_t out = 0;
    uint64_t dropped = 0;
    for (size_t i = 0; i < v.size(); i++) {
      if (out && v[out - 1].id == v[i].id) {
        if (!opts_.recover)
          return Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(v[i].loc) + ": document " +
                                           std::to_string(v[i].id) + " twice in the image (also " + at(v[out - 1].loc) +
                                           "). Nothing was changed; open with recover (kitfox --recover) to keep the one stored later");
        if (!dropped++)
          report_.warnings.push_back("recovered '" + name_ + "': document " + std::to_string(v[i].id) +
                                     " was twice in the image; the one " + at(v[i].loc) + " was kept");
        Reader rd(file.data() + v[out - 1].loc, file.size() - v[out - 1].loc);  // read whole before
        rd.varint();
        x.bytes -= rd.str().size();
        v[out - 1] = v[i];
        continue;
      }
      v[out++] = v[i];
    }
    if (dropped) {
      (*repaired)++;
      if (dropped > 1)
        report_.warnings.push_back("recovered '" + name_ + "': " + std::to_string(dropped) +
                                   " documents were twice in the image; the ones stored later were kept");
    }
    x.ids.clear();
    x.ids.expect(out);
    x.ids.append(v.data(), out);
  }
  return Status::ok();
}

Status Engine::load(std::string bytes, std::unique_ptr<Mapping> map) {
  std::string_view file = map ? std::string_view(map->data(), map->size()) : std::string_view(bytes);
  // Damaged records `recover` kept or stepped over (the file is rewritten).
  uint64_t repaired = 0;
  RecordView r;
  std::string err = check_header(file);
  if (!err.empty()) {
    // A header whose checksum fails, its magic whole, with the catalog
    // whole after it: `recover` writes a new one (the header holds nothing
    // else the records need; the file is read as of the newest version).
    const bool rebuilt = opts_.recover && err.find("checksum mismatch") != std::string::npos &&
                         read_record(file, format::kHeaderSize, &r) == ScanResult::Ok && r.kind == format::kCatalog;
    if (!rebuilt)
      return Status(Code::Corrupt, "'" + name_ + "': " + err +
                                       (err.find("checksum mismatch") != std::string::npos && !opts_.recover
                                            ? ". Nothing was changed; open with recover (kitfox --recover) to rebuild it if the records after it are whole"
                                            : ""));
    repaired++;
    report_.warnings.push_back("recovered '" + name_ + "': " + err + ", with whole records after it: the header was rebuilt");
  }
  uint64_t off = format::kHeaderSize;
  const std::map<uint32_t, uint64_t> counted = counted_documents(file);
  std::map<uint32_t, ImageIds> built;  // each collection's id index
  uint64_t damage = 0;
  std::string damage_what;
  bool image_done = false;

  // The image.
  std::vector<uint64_t> steppable;
  if (opts_.recover) steppable = steppable_damage(file);
  while (!image_done) {
    ScanResult s = read_record(file, off, &r);
    if (s == ScanResult::Bad && std::find(steppable.begin(), steppable.end(), off) != steppable.end()) {
      uint8_t kind = (uint8_t)file[off + 4];
      uint64_t head = 5, len = 0;
      frame_head(file.data() + off, file.size() - off, &head, &len);  // steppable: it reads
      report_.warnings.push_back("recovered '" + name_ + "': stepped over a damaged " +
                                 (kind == format::kIdIndex ? "id index (rebuilt from the documents)"
                                  : kind == format::kVectors ? "vector table record (its vectors are lost)"
                                  : kind == format::kExtent  ? "extent"
                                                             : "HNSW graph (rebuilt from the vector table)") +
                                 " " + at(off));
      off += head + len + 4;
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
      Status st = apply_image_record(r, &counted, &built);
      if (!st.is_ok()) {
        damage = off;
        damage_what = st.message();
        break;
      }
    }
    off = r.end;
  }
  image_bytes_ = image_done ? off : 0;
  drop_pending_extent();  // kept up to damage: a record whose extent was lost is as if absent
  KF_TRY(finish_image_ids(file, &built, &repaired));

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
    auto seq_of = [](const RecordView& w) {
      uint64_t seq = 0;
      if (w.kind == format::kWrite && w.body.size() >= 8) memcpy(&seq, w.body.data(), 8);
      return seq;
    };
    auto in_order = [&](const RecordView& w) { return seq_of(w) == want_seq; };
    if (s == ScanResult::Ok && in_order(r)) {
      writes.push_back(r);
      off = r.end;
      good_end = off;
      continue;
    }
    // Zeros after the last record were written ahead of the log (log.cpp,
    // fill_ahead): they are its end.
    uint64_t data_end = file.size();
    while (data_end > off && file[data_end - 1] == 0) data_end--;
    if (data_end == off) {
      filled_end_ = file.size();
      break;
    }
    uint64_t next = next_write_after(file, off, want_seq - 1);
    RecordView fixed;
    bool only_length = false;
    if (s != ScanResult::Ok) {
      if (next) {
        only_length = whole_but_length(file, off, next, &fixed) && in_order(fixed);
      } else {
        // The last record ends at the end of the file or, with zeros after
        // it, at most four bytes (its checksum's) past the last that is not.
        for (uint64_t end : {(uint64_t)file.size(), data_end, data_end + 1, data_end + 2, data_end + 3, data_end + 4})
          if (end <= file.size() && whole_but_length(file, off, end, &fixed) && in_order(fixed)) {
            only_length = true;
            break;
          }
      }
    }
    // A whole write past the one due where the one due should start: no
    // crash leaves that (each write lies where the one before it ends), so
    // a write is missing: damage, not a torn tail.
    const bool ahead = s == ScanResult::Ok && seq_of(r) > want_seq;
    // The next write's head (its kind and sequence number) where this one's
    // length says it ends, though that one is not whole: a torn write is
    // the last one, so this is damage too (bytes across the two were hit,
    // its checksum and the next one's length), not a tail to cut off.
    bool followed = false;
    uint64_t fh, fb;
    if (!next && s != ScanResult::Ok && frame_head(file.data() + off, file.size() - off, &fh, &fb) == ScanResult::Ok) {
      const uint64_t e = off + fh + fb + 4;
      uint64_t after = 0;
      if (e + 13 <= file.size() && (uint8_t)file[e + 4] == format::kWrite) memcpy(&after, file.data() + e + 5, 8);
      followed = after == want_seq + 1;
    }
    if (!next && !only_length && !ahead && !followed) {
      report_.torn_bytes = data_end - off;  // an unfinished last write: never acknowledged
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
                  : followed ? "a damaged write record, where write " + std::to_string(want_seq + 1) + " starts after it"
                  : s != ScanResult::Ok ? "a damaged record (checksum mismatch or bad length) in the write log, with later writes after it"
                  : ahead ? "write " + std::to_string(seq_of(r)) + " where write " + std::to_string(want_seq) +
                                " should be (a write before it is missing)"
                          : "an out-of-order record in the write log";
    break;
  }

  repaired += given_up_tables_;
  std::string damaged_name;
  if (damage || repaired) {
    if (damage && !opts_.recover)
      return Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(damage) + ": " + damage_what +
                                       ". Nothing was changed; open with recover (kitfox --recover) to keep everything before it");
    // Keep the damaged original beside the file, then keep what came before.
    // A copy an earlier recovery saved may hold the only copy of the writes
    // it dropped: it is never written over, the next free name is taken
    // (NAME.damaged, NAME.damaged.2, ...).
    for (int n = 1;; n++) {
      damaged_name = name_ + ".damaged" + (n > 1 ? "." + std::to_string(n) : std::string());
      KF_ASSIGN(bool taken, fs_.exists(damaged_name));
      if (!taken) break;
      if (n == 1000)
        return Status(Code::Io, "'" + name_ + "' needs recovering, but " + name_ + ".damaged up to .1000 are all taken by earlier recoveries. Nothing was changed; move them away first");
    }
    KF_ASSIGN(auto copy, fs_.open(damaged_name, OpenFlags{true, false}));
    KF_TRY(copy->truncate(0));
    KF_TRY(copy->write(0, file.data(), file.size()));
    KF_TRY(copy->sync());
  }
  if (damage) {
    report_.recovered_offset = damage;
    report_.recovered_bytes = file.size() - damage;
    report_.warnings.push_back("recovered '" + name_ + "': dropped " + std::to_string(report_.recovered_bytes) +
                               " bytes from offset " + std::to_string(damage) + " (" + damage_what +
                               "); the damaged original is saved as '" + damaged_name + "'");
    good_end = damage;
  } else if (repaired) {
    report_.warnings.push_back("the damaged original is saved as '" + damaged_name + "'");
  }

  // Documents: they stay where the file was read (or mapped).
  if (map) arena_.reset(std::move(map));
  else arena_.reset(std::move(bytes));
  file = arena_.segment(0);
  for (auto& [cid, coll] : by_id_) {
    if (auto it = built.find(cid); it != built.end()) {
      coll->bytes = it->second.bytes;
      coll->ids.assign(std::move(it->second.ids));
    }

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
          index->rebuild_graph(port::cores());
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
  write_pos_ = written_end_ = good_end;

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

ExtentLoad Engine::extent_load() {
  ExtentLoad how;
  how.lazy = lazy_;
  how.chunk = lazy_read_ ? file_->read_chunk() : 0;  // checks alone go block by block
  // file_ changes only at a checkpoint, which reads every block first and
  // rebases the indexes onto the new image.
  if (lazy_read_) how.read = [this](uint64_t off, char* dst, size_t n) { return read_exact(*file_, off, dst, n); };
  return how;
}

bool Engine::vindex_damaged() {
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
    // (Named only where damage is found: every write asks, twice.)
    auto what = [&] {
      std::string w = "'" + c.def.name;
      for (const Field& f : c.def.fields)
        if (f.id == fid) w += "." + f.name;
      return w + "'";
    };
    if (uint64_t off = idx.graph_damaged_at()) {
      {
        std::lock_guard g(report_mu_);
        report_.index_rebuilt = true;
        report_.warnings.push_back("the HNSW graph of " + what() + " was damaged " + at(off) +
                                   " and was rebuilt from its vector table");
      }
      idx.rebuild_graph(port::cores());
      *repaired = true;
    }
    if (uint64_t off = idx.table_damaged_at(); off && bad.is_ok())
      bad = Status(Code::Corrupt, "'" + name_ + "' is damaged " + at(off) + ": the vector table of " + what() + " (" +
                                      idx.table_damage() + "). Open with recover (kitfox --recover) to keep what is whole");
  });
  return bad;
}

uint64_t Engine::warm(uint64_t budget) {
  CallsInFlight::Scope in(calls_);
  if (!in) return 0;
  std::shared_lock lk(mu_);  // blocks are read and checked beside the readers
  uint64_t done = 0, left = 0;
  for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) {
    if (done < budget) done += idx.warm(budget - done);
    left += idx.unread_bytes();
  });
  return left;
}

}  // namespace kitfox
