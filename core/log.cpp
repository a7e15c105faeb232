// The record log: a write's ops become one record appended to the file
// (and replayed from it on open), applied to the documents and indexes;
// inside a batch, an undo log puts everything back when one statement fails.
#include <algorithm>

#include "batch.h"
#include "codec.h"
#include "engine.h"
#include "engine_limits.h"
#include "port.h"
#include "storage/format.h"
#include "storage/record.h"

namespace kitfox {


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

// The entries of document `id`'s version `old` out of c's text and
// secondary indexes.
void Engine::unentry(Collection* c, int64_t id, std::string_view old) {
  for (auto& [fid, ti] : c->tindex) text_unentry(*c, fid, *ti, id, old);
  for (size_t i = 0; i < c->sindex.size(); i++)
    if (SecondaryIndex* si = c->sindex[i].get()) secondary_unentry(*c, c->def.secondary[i], *si, id, old);
}

void Engine::link_touched() {
  // New vectors are linked once per record: the same writes give the same graph.
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (HnswIndex* index : touched_) index->link_pending(port::cores());
  touched_.clear();
}

Status Engine::apply_ops(std::string_view ops, uint64_t nops, uint32_t seg, uint64_t ops_off, std::vector<Undo>* undo) {
  auto coll_of = [&](uint32_t cid) -> Collection* {
    auto it = by_id_.find(cid);
    return it == by_id_.end() ? nullptr : it->second;
  };
  BatchReader r(ops, nops);
  BatchOp op;
  while (r.next(&op)) {
    switch (op.kind) {
      case format::kOpPut: {
        Collection* c = coll_of(op.coll);
        if (!c) return Status(Code::Corrupt, "a document for an unknown collection");
        const int64_t id = op.id;
        std::string_view b = op.body;
        if (undo) remember(c, id, undo);
        c->changes++;
        if (c->noting) c->changed.push_back(id);
        uint64_t old = c->ids.put(id, Arena::loc(seg, ops_off + op.entry_at));
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        // The old version's text and secondary entries out first, before
        // anything below can fail: an index then holds the new version's
        // entries or none, both of which an undo handles.
        if (old != IdIndex::kDead) unentry(c, id, arena_.body(old));
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
        for (auto& [fid, ti] : c->tindex) KF_TRY(text_entry(*c, fid, *ti, id, b));
        for (size_t i = 0; i < c->sindex.size(); i++)
          if (SecondaryIndex* si = c->sindex[i].get()) KF_TRY(secondary_entry(*c, c->def.secondary[i], *si, id, b));
        break;
      }
      case format::kOpDel: {
        Collection* c = coll_of(op.coll);
        if (!c) return Status(Code::Corrupt, "a delete for an unknown collection");
        const int64_t id = op.id;
        if (undo) remember(c, id, undo);
        c->changes++;
        if (c->noting) c->changed.push_back(id);
        uint64_t old = c->ids.erase(id);
        if (old != IdIndex::kDead) c->bytes -= arena_.body(old).size();
        for (auto& [fid, index] : c->vindex) index->remove(id);
        if (old != IdIndex::kDead) unentry(c, id, arena_.body(old));
        break;
      }
      case format::kOpDefine: {
        if (undo) return Status(Code::Invalid, "collection and index changes cannot be part of a batch");
        CollectionDef& d = op.def;
        auto it = by_id_.find(d.id);
        if (it == by_id_.end()) {
          if (colls_.count(d.name)) return Status(Code::Corrupt, "collection '" + d.name + "' defined twice");
          auto c = std::make_unique<Collection>();
          c->def = std::move(d);
          c->next_id = op.next_id;
          by_id_[c->def.id] = c.get();
          next_coll_id_ = std::max(next_coll_id_, c->def.id + 1);
          KF_TRY(sync_indexes(c.get()));
          colls_[c->def.name] = std::move(c);
        } else {
          Collection* c = it->second;
          // A new name another collection holds: only damage writes that (a
          // rename to a taken name is refused before it is logged).
          if (d.name != c->def.name && colls_.count(d.name))
            return Status(Code::Corrupt, "collection '" + d.name + "' defined twice");
          c->changes++;
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
        Collection* c = coll_of(op.coll);
        if (!c) return Status(Code::Corrupt, "a drop of an unknown collection");
        by_id_.erase(op.coll);
        colls_.erase(c->def.name);
        catalog_version_++;
        break;
      }
    }
  }
  return r.status();
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
    c->changes++;
    if (c->noting) c->changed.push_back(it->id);
    uint64_t cur = c->ids.erase(it->id);
    if (cur != IdIndex::kDead) c->bytes -= arena_.body(cur).size();
    // The text and secondary indexes take out what the version undone put there.
    if (cur != IdIndex::kDead) unentry(c, it->id, arena_.body(cur));
    if (it->loc != IdIndex::kDead) {
      c->ids.put(it->id, it->loc);
      c->bytes += arena_.body(it->loc).size();
    }
    c->next_id = it->next_id;
    for (auto& [fid, index] : c->vindex) index->remove(it->id);
    for (auto& [fid, v] : it->vectors) c->vindex[fid]->put(it->id, v.data());  // revives its node
    // The text and secondary indexes take the document as it was back.
    std::string_view was = it->loc != IdIndex::kDead ? arena_.body(it->loc) : std::string_view();
    const bool back = it->loc != IdIndex::kDead;
    for (auto& [fid, ti] : c->tindex)
      if (back) (void)text_entry(*c, fid, *ti, it->id, was);
    for (size_t i = 0; i < c->sindex.size(); i++)
      if (c->sindex[i] && back) (void)secondary_entry(*c, c->def.secondary[i], *c->sindex[i], it->id, was);
  }
  for (auto& [name, c] : colls_)
    for (auto& [fid, index] : c->vindex) index->drop_pending();
  touched_.clear();
  undo.clear();
}

Status Engine::check_writable() const {
  if (failed_.load()) return Status(Code::Failed, failure_ + "; the database refuses writes until it is reopened");
  if (closed_) return Status(Code::Invalid, "the database is closed");
  return Status::ok();
}

Result<uint64_t> Engine::commit(const WriteBatch& b) {
  KF_TRY(check_writable());
  if (in_txn_) {
    // Inside a batch: applied now (later statements see it), written at the end.
    const char* where;
    uint64_t l = arena_.append(b.ops(), &where);
    KF_TRY(apply_ops(std::string_view(where, b.bytes()), b.count(), (uint32_t)(l >> 40), l & ((1ull << 40) - 1), &undo_));
    txn_.append(b);
    return seq_;
  }
  return write_record(b, true);
}

// In `always` mode, where the file says it pays (file.h, fills_ahead), the
// log's next megabyte is written as zeros before the writes come, so that
// each durable write's flush writes into bytes the file has and commits no
// new size. An open takes zeros after the last record for the end of the
// log (image.cpp). Writes that landed more than 64 KiB go without: they
// would write their bytes twice for one flush.
void Engine::fill_ahead(uint64_t landed) {
  // Nothing landed: nothing to fill for (and a close may have let the file go).
  if (!landed || fill_failed_ || failed_ || landed > kFillAhead / 16 || !fills_ahead(*file_)) return;
  uint64_t from = std::max(filled_end_, write_pos_);
  if (from - write_pos_ >= kFillAhead / 2) return;
  uint64_t to = write_pos_ + kFillAhead;
  // Zeros past the log are never data: a failed write of them (a full
  // disk) only ends the filling, until the next checkpoint's file.
  if (write_zeros(*file_, from, to).is_ok()) filled_end_ = to;
  else fill_failed_ = true;
}

Status Engine::write_zeros(File& f, uint64_t from, uint64_t to) {
  const std::string zeros(to - from, '\0');
  return f.write(from, zeros.data(), zeros.size());
}

Result<uint64_t> Engine::write_record(const WriteBatch& b, bool apply) {
  std::string_view ops = b.ops();
  // The record built in place: the ops are copied once into it, and the
  // arena takes its body from it.
  if (ops.size() + 32 > kMaxWriteBytes) return Status(Code::Limit, "one write is larger than the 1 GiB record limit");
  std::string frame;
  frame.reserve(ops.size() + 32);
  size_t start = open_record(frame, format::kWrite);
  put_u64(frame, seq_ + 1);
  put_varint(frame, b.count());
  frame.append(ops);
  std::string_view body(frame.data() + start + 5, frame.size() - start - 5);
  close_record(frame, start);
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
    written_end_ = write_pos_;
  }
  // While a checkpoint carries the tail, the image it replaces is no measure
  // (its switch looks again).
  if (opts_.auto_checkpoint && ((!carrying_ && checkpoint_worthwhile(false)) || checkpoint_soon_)) {
    checkpoint_soon_ = false;
    checkpoint_due_ = true;  // run once the write lock is let go (checkpoint_if_due)
  }
  return seq_;
}

}  // namespace kitfox
