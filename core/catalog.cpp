// The catalog's codec (definitions in records) and the index lifecycle:
// secondary and text indexes built on first use, vector indexes built to
// match a definition.
#include "catalog.h"

#include <algorithm>
#include <unordered_set>

#include "codec.h"
#include "engine.h"
#include "engine_limits.h"
#include "port.h"

namespace kitfox {

bool Collection::vector(uint32_t field_id, uint64_t node, Value* out) const {
  if (auto t = pinned_tables.find(field_id); t != pinned_tables.end()) {
    if (node >= t->second.nodes) return false;
    std::vector<float> v;
    t->second.vector_of((uint32_t)node, &v);
    *out = Value::vector(std::move(v));
    return true;
  }
  if (lost_tables.count(field_id)) {
    *out = Value();
    lost_refs++;
    return true;
  }
  // A retired index first: image documents refer into the table the field's
  // index had at the last checkpoint, and once that index is retired, one
  // made since numbers its nodes afresh (documents written since hold their
  // vectors, not references).
  for (auto* m : {&retired, &vindex}) {
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

Status text_entry(const Collection& c, uint32_t fid, TextIndex& ti, int64_t id, std::string_view body) {
  thread_local Value v;
  thread_local std::vector<std::string> tokens;
  KF_TRY(decode_field(body, fid, &v, &c));
  text_tokens(v, &tokens);
  ti.put(id, tokens);
  return Status::ok();
}

Status secondary_entry(const Collection& c, const SecondaryDef& d, SecondaryIndex& si, int64_t id,
                       std::string_view body) {
  thread_local Value key;
  KF_TRY(secondary_key(c, d, body, &key));
  si.put(id, key);
  return Status::ok();
}

void text_unentry(const Collection& c, uint32_t fid, TextIndex& ti, int64_t id, std::string_view old) {
  thread_local Value v;
  thread_local std::vector<std::string> tokens;
  tokens.clear();
  const bool decoded = decode_field(old, fid, &v, &c).is_ok();
  if (decoded) text_tokens(v, &tokens);
  // A version with no text put nothing; one whose tokens the index does not
  // hold for it, or one that does not decode, is looked for through every term.
  if (!decoded || (!tokens.empty() && !ti.remove(id, tokens))) ti.remove_any(id);
}

void secondary_unentry(const Collection& c, const SecondaryDef& d, SecondaryIndex& si, int64_t id,
                       std::string_view old) {
  thread_local Value key;
  if (!secondary_key(c, d, old, &key).is_ok() || !si.remove(id, key)) si.remove_any(id);
}

Status Engine::ready_maps(Prepared& p, uint64_t lookups, std::shared_lock<FairSharedMutex>& lk) {
  // Without threads no one else waits for the lock: the maps are built
  // whole where first needed.
  if constexpr (!port::kThreads) return Status::ok();
  for (;;) {
    // An index whose maps another thread builds (a write would restart
    // it), or whose scans left cannot take this statement's lookups: they
    // are reserved in every index of the collection or in none (from the
    // first reservation on, an index builds its maps inside a write only
    // as a guard, HnswIndex::kOverrun).
    HnswIndex* idx = nullptr;
    if (p.collection) {
      auto& vindex = p.collection->vindex;
      for (auto& [fid, x] : vindex)
        if (maps_building_.load() == x.get()) idx = x.get();
      for (auto it = vindex.begin(); !idx && it != vindex.end(); ++it) {
        if (it->second->reserve(lookups)) continue;
        idx = it->second.get();
        for (auto back = vindex.begin(); back != it; ++back) back->second->unreserve(lookups);  // all or none
      }
    }
    if (!idx) return Status::ok();
    build_maps_beside(idx, lk);
    KF_TRY(bound(p));
  }
}

bool Engine::build_maps_beside(HnswIndex* idx, std::shared_lock<FairSharedMutex>& lk) {
  if constexpr (!port::kThreads) return true;  // (never asked: built whole where needed)
  constexpr uint32_t kPiece = 4096;  // nodes a hold of the shared lock: about 1 ms
  if (maps_building_.load() == idx && maps_wait_hook) maps_wait_hook();
  if (!claim_build(lk)) return false;
  BuildHeld held{building_};
  struct Named {  // (a pointer only: a definition may drop the index)
    std::atomic<const HnswIndex*>& at;
    ~Named() { at.store(nullptr); }
  } named{maps_building_};
  maps_building_.store(idx);
  HnswIndex::MapBuild b;
  const uint64_t at = catalog_version_.load(std::memory_order_relaxed);
  // A definition between two pieces may have dropped the index.
  bool built = !idx->maps_ready();
  while (built && !idx->build_maps_piece(&b, kPiece)) {
    lk.unlock();
    if (beside_hook) beside_hook();
    lk.lock();
    built = catalog_version_.load(std::memory_order_relaxed) == at;
  }
  if (built) built_beside_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace {

thread_local std::vector<Engine::IndexNeed>* t_deferred = nullptr;

// A text or secondary index being filled: a document's entries put
// (fill_all: one a document), or changed from those of its version `old`
// to those of `now` (either absent: not there).
class Fill {
 public:
  virtual ~Fill() = default;
  virtual Status put(const Collection& c, int64_t id, std::string_view body) = 0;
  virtual Status change(const Collection& c, int64_t id, const std::string_view* old, const std::string_view* now) = 0;
  // Around fill_all's puts, one a document: a sorted index gathers them
  // and sorts them once.
  virtual void loading(size_t) {}
  virtual void loaded() {}
  // Puts the index in its place in c, unless one is there already.
  virtual void install(Collection& c) = 0;
};

class SecondaryFill final : public Fill {
 public:
  SecondaryFill(const SecondaryDef& d, size_t i) : idx(std::make_unique<SecondaryIndex>(d.kind)), d_(d), i_(i) {}
  Status put(const Collection& c, int64_t id, std::string_view body) override {
    return secondary_entry(c, d_, *idx, id, body);
  }
  Status change(const Collection& c, int64_t id, const std::string_view* old, const std::string_view* now) override {
    if (old) secondary_unentry(c, d_, *idx, id, *old);
    return now ? secondary_entry(c, d_, *idx, id, *now) : Status::ok();
  }
  void loading(size_t n) override { idx->begin_load(n); }
  void loaded() override { idx->end_load(); }
  void install(Collection& c) override {
    std::lock_guard g(c.sec_mu);
    if (c.sindex.size() < c.def.secondary.size()) c.sindex.resize(c.def.secondary.size());
    if (!c.sindex[i_]) c.sindex[i_] = std::move(idx);
  }
  std::unique_ptr<SecondaryIndex> idx;

 private:
  SecondaryDef d_;
  size_t i_;
};

class TextFill final : public Fill {
 public:
  explicit TextFill(const Field& f) : idx(std::make_unique<TextIndex>(f.index.text.k1, f.index.text.b)), fid_(f.id) {}
  Status put(const Collection& c, int64_t id, std::string_view body) override {
    return text_entry(c, fid_, *idx, id, body);
  }
  Status change(const Collection& c, int64_t id, const std::string_view* old, const std::string_view* now) override {
    if (old) text_unentry(c, fid_, *idx, id, *old);
    return now ? text_entry(c, fid_, *idx, id, *now) : Status::ok();
  }
  void install(Collection& c) override {
    std::lock_guard g(c.text_mu);
    if (!c.tindex.count(fid_)) c.tindex[fid_] = std::move(idx);
  }
  std::unique_ptr<TextIndex> idx;

 private:
  uint32_t fid_;
};

// Every document of c into f, its bodies read through `body`.
template <typename Body>
Status fill_all(const Collection& c, Fill& f, const Body& body) {
  Status st;
  f.loading(c.ids.size());
  c.ids.scan([&](const IdEntry& e) {
    st = f.put(c, e.id, body(e.loc));
    return st.is_ok();
  });
  f.loaded();
  return st;
}

// c's secondary index i, filled from every document (their bodies read
// through `body`).
template <typename Body>
Result<std::unique_ptr<SecondaryIndex>> filled_secondary(const Collection& c, size_t i, const Body& body) {
  SecondaryFill f(c.def.secondary[i], i);
  KF_TRY(fill_all(c, f, body));
  return std::move(f.idx);
}

}  // namespace

// A definition may have dropped it, another thread built it.
bool Engine::unbuilt(Collection& c, const IndexNeed& n) {
  if (n.kind == IndexNeed::VectorMaps) {
    auto it = c.vindex.find(n.which);
    return it != c.vindex.end() && !it->second->maps_ready();
  }
  if (n.kind == IndexNeed::Text) {
    const Field* f = c.def.field_by_id(n.which);
    std::lock_guard g(c.text_mu);
    return f && f->index.kind == IndexKind::Text && !c.tindex.count(n.which);
  }
  std::lock_guard g(c.sec_mu);
  return n.which < c.def.secondary.size() && (n.which >= c.sindex.size() || !c.sindex[n.which]);
}

bool Engine::any_unbuilt(Collection& c) {
  for (uint32_t i = 0; i < c.def.secondary.size(); i++)
    if (unbuilt(c, {c.def.id, IndexNeed::Secondary, i})) return true;
  for (const Field& f : c.def.fields)
    if (f.index.kind == IndexKind::Text && unbuilt(c, {c.def.id, IndexNeed::Text, f.id})) return true;
  return false;
}

bool Engine::claim_build(std::shared_lock<FairSharedMutex>& lk) {
  bool idle = false;
  if (building_.compare_exchange_strong(idle, true)) return true;
  lk.unlock();
  port::sleep_ms(1);
  lk.lock();
  return false;
}

void Engine::build_needs(const std::vector<IndexNeed>& needs, int* tries, std::shared_lock<FairSharedMutex>& lk) {
  if (building_.load(std::memory_order_relaxed)) *tries = -1;  // the caller's loop counts it back to 0
  for (const IndexNeed& n : needs)
    if (!build_beside(n, lk).is_ok()) {
      *tries = kBuildTries - 1;
      return;
    }
}

Engine::DeferBuilds::DeferBuilds(std::vector<IndexNeed>* needs) : prev_(t_deferred) { t_deferred = needs; }
Engine::DeferBuilds::~DeferBuilds() { t_deferred = prev_; }
std::vector<Engine::IndexNeed>* Engine::DeferBuilds::current() { return t_deferred; }

bool Engine::defer_maps(const Collection& c, uint32_t fid) {
  if (!port::kThreads || !t_deferred) return false;
  t_deferred->push_back({c.def.id, IndexNeed::VectorMaps, fid});
  return true;
}

Result<SecondaryIndex*> Engine::secondary(Collection& c, size_t i) {
  std::lock_guard g(c.sec_mu);
  if (c.sindex.size() < c.def.secondary.size()) c.sindex.resize(c.def.secondary.size());
  if (c.sindex[i]) return c.sindex[i].get();
  if (t_deferred) {
    t_deferred->push_back({c.def.id, IndexNeed::Secondary, (uint32_t)i});
    return Status(Code::Invalid, "the index on " + c.def.name + " is built first");
  }
  KF_ASSIGN(c.sindex[i], filled_secondary(c, i, [&](uint64_t loc) { return arena_.body(loc); }));
  return c.sindex[i].get();
}

Result<std::unique_ptr<SecondaryIndex>> pinned_secondary(const Collection& c, size_t i, const Arena::View& view) {
  return filled_secondary(c, i, [&](uint64_t loc) { return view.body(loc); });
}

Result<TextIndex*> Engine::text_index(Collection& c, const Field& f) {
  std::lock_guard g(c.text_mu);
  auto it = c.tindex.find(f.id);
  if (it != c.tindex.end()) return it->second.get();
  if (t_deferred) {
    t_deferred->push_back({c.def.id, IndexNeed::Text, f.id});
    return Status(Code::Invalid, "the text index on " + c.def.name + "." + f.name + " is built first");
  }
  TextFill fill(f);
  KF_TRY(fill_all(c, fill, [&](uint64_t loc) { return arena_.body(loc); }));
  TextIndex* p = fill.idx.get();
  c.tindex[f.id] = std::move(fill.idx);
  return p;
}

Status Engine::build_beside(const IndexNeed& need, std::shared_lock<FairSharedMutex>& lk) {
  // Rounds of the documents written meanwhile taken with no lock held, and
  // how few are left for the last, under the shared lock.
  constexpr int kRounds = 4;
  constexpr size_t kLastChanges = 256;
  auto cit = by_id_.find(need.coll);
  if (cit == by_id_.end() || !unbuilt(*cit->second, need)) return Status::ok();
  Collection* c = cit->second;
  if (need.kind == IndexNeed::VectorMaps) {
    // While another thread builds (these maps or an index), waited for
    // here, not by running the read again each time.
    while (!build_maps_beside(c->vindex.at(need.which).get(), lk)) {
      cit = by_id_.find(need.coll);
      if (cit == by_id_.end() || !unbuilt(*cit->second, need)) break;
      c = cit->second;
    }
    return Status::ok();
  }
  std::unique_ptr<Fill> f;
  if (need.kind == IndexNeed::Text) f = std::make_unique<TextFill>(*c->def.field_by_id(need.which));
  else f = std::make_unique<SecondaryFill>(c->def.secondary[need.which], need.which);
  // Where a pin cannot read every document (references into a dropped
  // index's or a lost table) or there is no other thread, built whole here.
  if (!port::kThreads || !c->retired.empty() || !c->lost_tables.empty()) {
    KF_TRY(fill_all(*c, *f, [&](uint64_t loc) { return arena_.body(loc); }));
    f->install(*c);
    return Status::ok();
  }
  if (!claim_build(lk)) return Status::ok();
  BuildHeld held{building_};
  const uint64_t at = catalog_version_.load(std::memory_order_relaxed);
  // The writes from the pin on are noted (under the write lock) from now.
  auto stop_noting = [&] {
    auto it = by_id_.find(need.coll);
    if (it != by_id_.end() && it->second == c) {
      c->noting = false;
      std::vector<int64_t>().swap(c->changed);  // (shrink_to_fit does nothing without exceptions)
    }
  };
  // The pin the index was last filled from, and its memory: each document
  // written since, taken again, first takes out what its version there put.
  std::unique_ptr<Collection> snap = pin_copy(*c, nullptr);
  Arena::View view = arena_.view();
  c->noting = true;
  c->changed.clear();
  size_t from = 0;
  std::vector<int64_t> again;
  lk.unlock();
  if (beside_hook) beside_hook();
  Status st = fill_all(*snap, *f, [&](uint64_t loc) { return view.body(loc); });
  lk.lock();
  for (int round = 0;; round++) {
    if (catalog_version_.load(std::memory_order_relaxed) != at || !st.is_ok()) {
      stop_noting();  // a definition meanwhile: the caller asks again
      return st;
    }
    // Each document written since, as it is now: from the live collection
    // for the last few, under this hold, then the index put in place.
    auto take_again = [&](const Collection& src, const auto& body) {
      for (int64_t id : again) {
        const uint64_t* was = snap->ids.find(id);
        const uint64_t* loc = src.ids.find(id);
        std::string_view old, now;
        if (was) old = view.body(*was);
        if (loc) now = body(*loc);
        st = f->change(src, id, was ? &old : nullptr, loc ? &now : nullptr);
        if (!st.is_ok()) return;
      }
    };
    again.assign(c->changed.begin() + (ptrdiff_t)from, c->changed.end());
    from = c->changed.size();
    std::sort(again.begin(), again.end());  // a document written twice is taken once
    again.erase(std::unique(again.begin(), again.end()), again.end());
    if (again.size() <= kLastChanges || round == kRounds) {
      take_again(*c, [&](uint64_t loc) { return arena_.body(loc); });
      stop_noting();
      KF_TRY(st);
      f->install(*c);
      built_beside_.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
    std::unique_ptr<Collection> next = pin_copy(*c, nullptr);
    Arena::View next_view = arena_.view();
    lk.unlock();
    if (beside_hook) beside_hook();
    take_again(*next, [&](uint64_t loc) { return next_view.body(loc); });
    snap = std::move(next);
    view = std::move(next_view);
    lk.lock();
  }
}

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
  std::unordered_set<uint32_t> ids;  // each once (a linear check: a log may replay many wide definitions)
  std::unordered_set<std::string> names;
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
      if (!f.index.hnsw.valid() || f.type.kind != TypeKind::Vector) return Status(Code::Corrupt, "bad index definition");
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
    // What the parser and the definitions it makes guarantee, and the rest
    // of the engine takes for granted.
    if (f.type.kind == TypeKind::Vector && (f.type.dim < 1 || f.type.dim > kMaxVectorDim))
      return Status(Code::Corrupt, "bad vector dimension");
    if (f.id >= d->next_field_id || !ids.insert(f.id).second || !names.insert(f.name).second)
      return Status(Code::Corrupt, "a field defined twice");
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
    if (!ids.count(sd.field_id)) return Status(Code::Corrupt, "an index on no field");
    d->secondary.push_back(std::move(sd));
  }
  if (!r.ok()) return Status(Code::Corrupt, "collection definition cut short");
  return Status::ok();
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
  index->link_pending(port::cores());
  *out = std::move(index);
  return Status::ok();
}

Status Engine::sync_indexes(Collection* c) {
  c->tindex.clear();  // rebuilt on first use against the new definition
  c->sindex.clear();
  for (auto it = c->vindex.begin(); it != c->vindex.end();) {
    const Field* f = c->def.field_by_id(it->first);
    if (!f || f->index.kind != IndexKind::Hnsw || !(f->index.hnsw == it->second->params())) {
      // Image documents may still refer to its table; an index retired
      // earlier since the last checkpoint holds the table they refer to, and
      // this one (made since) none they do.
      if (!c->retired.count(it->first)) c->retired[it->first] = std::move(it->second);
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

}  // namespace kitfox
