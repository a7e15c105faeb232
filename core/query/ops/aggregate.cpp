// aggregate: count, sum, avg, min and max over a whole result or per group,
// the groups then ordered and paged; and group from index, which answers a
// counting group from a secondary index's keys alone.
#include "ops.h"

#include <span>

#include "../binder.h"
#include "../../huge_pages.h"

namespace kitfox {

namespace {

std::string normalize_label(const std::string& s) {
  std::string o;
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n') o += (c >= 'A' && c <= 'Z') ? char(c + 32) : c;
  return o;
}

// An aggregate's state in one group (32 bytes; a min's or a max's value
// lies beside, in the group's bests). An int sum is isum + wraps * 2^64:
// a running total may leave int64 and come back (9223372036854775807 + 1
// - 1), so only the whole sum is checked, and the answer does not depend
// on the order of the rows.
struct Acc {
  int64_t count = 0;
  int64_t isum = 0;
  double fsum = 0;
  bool any = false, is_float = false;
  int32_t wraps = 0;
  // The int sum as a double, wraps included.
  double int_sum() const { return (double)isum + (double)wraps * 18446744073709551616.0; }
};

// The groups' numbers found by their key's bytes (key_bytes: equal for keys
// that compare equal), with open addressing: a slot holds 32 bits of the
// key's hash (which also place it) and the group's number + 1, so that a key
// met for the first time (every row of a group a document) costs one look at
// one slot, and a key met before one more at its bytes. The keys' bytes lie
// one after another in one buffer; growing the table places the slots anew
// from the bits they hold, touching no key.
class GroupTable {
 public:
  // The number of the group whose key's bytes are `k`; when there is none,
  // `next` (the number of groups so far), and *made is set.
  uint32_t find_or_add(std::string_view k, uint32_t next, bool* made) {
    if ((size_t)next * 2 >= size_) grow();
    // (Spread to 64 bits: std::hash gives 32 where size_t is 32 bits, WASM.)
    const uint64_t h = (uint64_t)std::hash<std::string_view>()(k) * 0x9E3779B97F4A7C15ull;
    const uint32_t tag = (uint32_t)(h >> 32);
    uint64_t* slots = slots_.get();
    for (size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots[i];
      if (!slot) {
        slots[i] = (uint64_t)tag << 32 | (next + 1);
        bytes_.append(k.data(), k.size());
        ends_.push_back(bytes_.size());
        *made = true;
        return next;
      }
      if ((uint32_t)(slot >> 32) == tag) {
        const uint32_t g = (uint32_t)slot - 1;
        const size_t begin = g ? ends_[g - 1] : 0;
        if (std::string_view(bytes_.data() + begin, ends_[g] - begin) == k) return g;
      }
    }
  }

 private:
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  // Twice the slots, zeroed by the system where it maps them (calloc) and
  // asked for huge pages before they are touched (read at random).
  void grow() {
    const size_t n = size_ ? size_ * 2 : 64;
    std::unique_ptr<uint64_t[], Free> slots((uint64_t*)std::calloc(n, sizeof(uint64_t)));
    if (!slots) std::abort();  // out of memory, as a std::vector would
    advise_huge_pages(slots.get(), n * sizeof(uint64_t));
    mask_ = n - 1;
    for (size_t j = 0; j < size_; j++) {
      const uint64_t slot = slots_[j];
      if (!slot) continue;
      size_t i = (slot >> 32) & mask_;
      while (slots[i]) i = (i + 1) & mask_;
      slots[i] = slot;
    }
    slots_ = std::move(slots);
    size_ = n;
  }
  std::unique_ptr<uint64_t[], Free> slots_;
  size_t size_ = 0, mask_ = 0;
  std::string bytes_;             // the keys' bytes, group after group
  std::vector<size_t> ends_;      // where each group's end in bytes_
};

}  // namespace

// The columns of an aggregate query and the groups it fills: resolved once
// by the planner (the errors of a bad select or order come from here).
class Grouping {
 public:
  Grouping(const ParsedStatement& st, const Evaluator& ev, int64_t offset, int64_t limit)
      : st_(st), ev_(ev), offset_(offset), limit_(limit) {}
  Grouping(const Grouping&) = delete;  // (whole_ points into whole_accs_)
  Grouping& operator=(const Grouping&) = delete;

  Status resolve(const CollectionDef& def) {
    for (const SelectItem& g : st_.group) group_labels_.push_back(join(g.path));
    auto agg_index = [&](const Expr* e, const std::string& label) -> int {
      std::string n = normalize_label(label);
      for (size_t i = 0; i < agg_labels_.size(); i++)
        if (agg_labels_[i] == n) return (int)i;
      aggs_.push_back(e);
      agg_labels_.push_back(n);
      return (int)aggs_.size() - 1;
    };
    auto column = [&](const std::vector<std::string>& path, const ExprPtr& expr, const std::string& label, int64_t pos,
                      Column* col) -> Status {
      if (expr) {
        if (expr->kind != ExprKind::Aggregate)
          return Status(Code::Syntax, "with aggregates, select and order take group keys and aggregates only", pos);
        if (expr->path[0] != "count" || !expr->kids.empty()) KF_TRY(check_expr(def, *expr->kids[0]));
        col->label = label;
        col->agg = agg_index(expr.get(), label);
        return Status::ok();
      }
      std::string j = join(path);
      for (size_t i = 0; i < group_labels_.size(); i++)
        if (group_labels_[i] == j) {
          col->label = j;
          col->group = (int)i;
          return Status::ok();
        }
      return Status(Code::Syntax, "'" + j + "' is neither a group key nor an aggregate", pos);
    };
    if (st_.select.empty())
      for (size_t i = 0; i < group_labels_.size(); i++) cols_.push_back({group_labels_[i], (int)i, -1});
    for (const SelectItem& si : st_.select) {
      Column col;
      KF_TRY(column(si.path, si.expr, si.label, si.pos, &col));
      cols_.push_back(col);
    }
    for (const OrderKey& k : st_.order) {
      Column col;
      KF_TRY(column(k.path, k.expr, k.label, k.pos, &col));
      order_cols_.push_back(col);
    }
    for (const Expr* e : aggs_) {
      const std::string& f = e->path[0];
      // (The parser makes aggregates of these five names only.)
      fns_.push_back(f == "sum" ? Fn::Sum : f == "avg" ? Fn::Avg : f == "min" ? Fn::Min : f == "max" ? Fn::Max : Fn::Count);
      best_of_.push_back(fns_.back() == Fn::Min || fns_.back() == Fn::Max ? (int)nbests_++ : -1);
    }
    if (st_.group.empty()) {  // a whole-result aggregate has one row, even over nothing (no chunk made)
      whole_accs_.resize(aggs_.size());
      whole_bests_.resize(nbests_);
      whole_ = whole_accs_.data();
    }
    return Status::ok();
  }

  // The fields the groups and aggregates read.
  void needs(PartialDoc* part) const {
    for (const SelectItem& g : st_.group) part->need(g.path);
    for (const Expr* e : aggs_)
      if (!e->kids.empty()) part->need(*e->kids[0]);
  }
  // After the partial decode is shaped: where each group key and each
  // aggregate's argument that is a field lies in its rows (add() reads them
  // there, with no lookup by name).
  void placed(const PartialDoc& part) {
    key_at_.clear();
    for (const SelectItem& g : st_.group) key_at_.push_back(part.place(g.path));
    arg_at_.clear();
    for (const Expr* e : aggs_)
      arg_at_.push_back(!e->kids.empty() && e->kids[0]->kind == ExprKind::Path ? part.place(e->kids[0]->path) : -1);
  }

  // Counting groups over one path, which a secondary index can answer.
  bool counts_only(const std::vector<std::string>** path) const {
    if (st_.where || st_.group.size() != 1) return false;
    *path = &st_.group[0].path;
    for (const Expr* e : aggs_) {
      if (e->path[0] != "count") return false;
      if (!e->kids.empty() && (e->kids[0]->kind != ExprKind::Path || e->kids[0]->path != **path)) return false;
    }
    return true;
  }
  // A group of n documents holding the non-null key `key` (counting groups only).
  bool add_counted(Value key, uint64_t n) {
    const Value* k = &key;
    Acc* accs;
    Value* bests;
    if (!group_of({&k, 1}, &accs, &bests)) return false;
    for (size_t i = 0; i < aggs_.size(); i++) accs[i].count += (int64_t)n;
    return true;
  }
  bool add_nulls(uint64_t n) {
    const Value null;
    const Value* k = &null;
    Acc* accs;
    Value* bests;
    if (!group_of({&k, 1}, &accs, &bests)) return false;
    for (size_t i = 0; i < aggs_.size(); i++)
      if (aggs_[i]->kids.empty()) accs[i].count += (int64_t)n;  // count(key) skips nulls
    return true;
  }
  size_t groups() const { return groups_ + (whole_ != nullptr); }
  const Status& error() const { return inner_; }

  // Once every row is in: false (inner_ set) when an int sum is outside int64.
  bool sums_fit() {
    if (unsettled_ == 0) return true;
    for (size_t g = 0; g < (whole_ ? 1 : groups_); g++) {
      const Acc* accs = accs_of(whole_ ? kWhole : g);
      for (size_t i = 0; i < aggs_.size(); i++)
        if (accs[i].wraps != 0 && fns_[i] == Fn::Sum) return sum_overflows(i);
    }
    return true;
  }

  bool add(const Value& doc) {
    Acc* accs = whole_;
    Value* bests = whole_bests_.data();
    if (!accs) {  // the key's values in place; copied for a group met first
      keys_.clear();
      for (size_t i = 0; i < st_.group.size(); i++)
        keys_.push_back(i < key_at_.size() && key_at_[i] >= 0 ? &doc.items()[(size_t)key_at_[i]]
                                                              : &doc.at_path(st_.group[i].path));
      if (!group_of(keys_, &accs, &bests)) return false;
    }
    for (size_t i = 0; i < aggs_.size(); i++) {
      const Expr& e = *aggs_[i];
      const Fn fn = fns_[i];
      Acc& a = accs[i];
      if (e.kids.empty()) {  // count(*)
        a.count++;
        continue;
      }
      // The value in place (a field of the document: no copy), copied
      // only where it becomes a min or a max.
      const Value* pv = nullptr;
      if (i < arg_at_.size() && arg_at_[i] >= 0) {
        pv = &doc.items()[(size_t)arg_at_[i]];
      } else {
        inner_ = ev_.operand(*e.kids[0], doc, &tmp_, &pv);
        if (!inner_.is_ok()) return false;
      }
      const Value& v = *pv;
      if (v.is_null()) continue;
      a.count++;
      if (fn == Fn::Sum || fn == Fn::Avg) {
        if (!v.is_number()) {
          inner_ = Status(Code::Type, e.path[0] + "() needs numbers, got " + kind_name(v.kind()), e.pos);
          return false;
        }
        if (v.kind() == Kind::Float && !a.is_float) {
          a.is_float = true;
          a.fsum = a.int_sum();
          if (fn == Fn::Sum) unsettled_ -= a.wraps != 0;
          a.wraps = 0;
        }
        if (a.is_float) {
          a.fsum += v.as_number();
        } else {
          int64_t sum;
          if (!__builtin_add_overflow(a.isum, v.as_int(), &sum)) {
            a.isum = sum;
          } else {
            // The total wrapped: counted, and checked once every row is in
            // (finish): a sum outside int64 fails, an average is taken of
            // the whole total, so neither depends on the order of the rows.
            // 2^30 wraps away from int64 would take as many rows to come
            // back: such a sum fails here, such an average goes on in
            // floating point.
            a.isum = sum;
            const bool was = a.wraps != 0;
            a.wraps += v.as_int() < 0 ? -1 : 1;
            if (fn == Fn::Sum) unsettled_ += (a.wraps != 0) - was;
            if (a.wraps > (1 << 30) || a.wraps < -(1 << 30)) {
              if (fn == Fn::Sum) return sum_overflows(i);
              a.is_float = true;
              a.fsum = a.int_sum();
              a.wraps = 0;
            }
          }
        }
      } else if (fn == Fn::Min || fn == Fn::Max) {
        Value& best = bests[best_of_[i]];
        if (!a.any || (fn == Fn::Min ? compare(v, best) < 0 : compare(v, best) > 0)) best = v;
      }
      a.any = true;
    }
    return true;
  }

  // The rows of the groups, ordered and paged.
  void write(std::vector<Value>* out) const {
    // A column's value for a group: its key's, or its aggregate's (made in
    // *tmp, or the min or max it holds).
    auto value_of = [&](size_t g, const Column& col, Value* tmp) -> const Value& {
      if (col.group >= 0) return key_of(g)[col.group];
      const Acc& a = accs_of(g)[col.agg];
      const Fn fn = fns_[col.agg];
      if (fn == Fn::Count) tmp->assign_scalar(Kind::Int, a.count);
      else if (!a.any) *tmp = Value();
      else if (fn == Fn::Sum) *tmp = a.is_float ? Value::real(a.fsum) : Value::integer(a.isum);
      else if (fn == Fn::Avg) *tmp = Value::real((a.is_float ? a.fsum : a.int_sum()) / (double)a.count);
      else return bests_of(g)[best_of_[col.agg]];
      return *tmp;
    };
    // By the order's columns, ties (and every group without an order) by
    // key: one total order, so only as many groups as the page shows are
    // sorted (a partial sort), and no row is made for the others.
    std::vector<size_t> groups(whole_ ? 1 : groups_);
    for (size_t i = 0; i < groups.size(); i++) groups[i] = whole_ ? kWhole : i;
    auto before = [&](size_t a, size_t b) {
      Value ta, tb;
      for (size_t i = 0; i < order_cols_.size(); i++) {
        int c = compare(value_of(a, order_cols_[i], &ta), value_of(b, order_cols_[i], &tb));
        if (c) return st_.order[i].desc ? c > 0 : c < 0;
      }
      const Value *ka = key_of(a), *kb = key_of(b);
      for (size_t i = 0; i < nkeys_; i++)
        if (int c = compare(ka[i], kb[i])) return c < 0;
      return false;
    };
    // In 64 bits: size_t holds 32 in WASM.
    const size_t n = groups.size(), skip = (size_t)std::min<uint64_t>(n, (uint64_t)offset_);
    const size_t page = limit_ < 0 ? n : skip + (size_t)std::min<uint64_t>(n - skip, (uint64_t)limit_);  // (no sum to overflow)
    if (page < groups.size()) std::partial_sort(groups.begin(), groups.begin() + (ptrdiff_t)page, groups.end(), before);
    else std::sort(groups.begin(), groups.end(), before);
    Value tmp;
    for (size_t i = skip; i < page; i++) {
      Value o = Value::object();
      for (const Column& col : cols_) o.append(col.label, value_of(groups[i], col, &tmp));
      out->push_back(std::move(o));
    }
  }


 private:
  struct Column {
    std::string label;
    int group = -1;  // a group key
    int agg = -1;    // or an aggregate
  };
  const ParsedStatement& st_;
  const Evaluator& ev_;
  int64_t offset_, limit_;
  std::vector<std::string> group_labels_;
  std::vector<const Expr*> aggs_;  // the aggregates computed: those selected, then those only ordered by
  std::vector<std::string> agg_labels_;
  std::vector<Column> cols_, order_cols_;
  // The groups, numbered as they are met, in chunks of kChunk (one
  // allocation for a chunk's keys and one for its accumulators; each group
  // stays where it is made), found by their key's bytes (GroupTable) with
  // no copy of the key but the first; sorted once, when written (write()).
  static constexpr size_t kChunk = 256;
  static constexpr size_t kWhole = SIZE_MAX;  // write(): the whole result's group
  struct Chunk {
    std::unique_ptr<Value[]> keys;  // kChunk x nkeys_
    std::unique_ptr<Acc[]> accs;    // kChunk x aggs_.size()
    std::unique_ptr<Value[]> bests;  // kChunk x nbests_ (none without a min or a max)
  };
  std::vector<Chunk> chunks_;
  size_t groups_ = 0, nkeys_ = 0;
  GroupTable table_;
  std::string key_bytes_;
  const Value* key_of(size_t g) const {
    return g == kWhole ? nullptr : &chunks_[g / kChunk].keys[(g % kChunk) * nkeys_];
  }
  const Acc* accs_of(size_t g) const {
    return g == kWhole ? whole_ : &chunks_[g / kChunk].accs[(g % kChunk) * aggs_.size()];
  }
  const Value* bests_of(size_t g) const {
    return g == kWhole ? whole_bests_.data() : &chunks_[g / kChunk].bests[(g % kChunk) * nbests_];
  }
  // The accumulators and bests of the group of `key`, made when it is met
  // first; false (inner_ set) past the most groups a query may make.
  bool group_of(std::span<const Value* const> key, Acc** accs, Value** bests) {
    key_bytes_.clear();
    for (const Value* v : key) key_bytes(key_bytes_, *v);
    bool made = false;
    const size_t g = table_.find_or_add(key_bytes_, (uint32_t)groups_, &made);
    if (made) {
      if (groups_ >= kMaxGroups) {
        inner_ = Status(Code::Limit, "a query may make at most " + std::to_string(kMaxGroups) + " groups");
        return false;
      }
      nkeys_ = key.size();
      if (groups_ % kChunk == 0)
        chunks_.push_back({std::make_unique<Value[]>(kChunk * nkeys_), std::make_unique<Acc[]>(kChunk * aggs_.size()),
                           nbests_ ? std::make_unique<Value[]>(kChunk * nbests_) : nullptr});
      Value* k = &chunks_.back().keys[(groups_ % kChunk) * nkeys_];
      for (size_t i = 0; i < nkeys_; i++) k[i] = *key[i];
      groups_++;
    }
    Chunk& c = chunks_[g / kChunk];
    *accs = &c.accs[(g % kChunk) * aggs_.size()];
    *bests = nbests_ ? &c.bests[(g % kChunk) * nbests_] : nullptr;
    return true;
  }
  // (GroupTable numbers groups in 32 bits, and places them by 32 bits of
  // their hash in at most twice as many slots.)
  static constexpr size_t kMaxGroups = (size_t(1) << 31) - 1;
  std::vector<const Value*> keys_;  // add(): the row's key, in place
  std::vector<int> key_at_, arg_at_;  // placed(): where each key and argument lies in a row (-1: looked up)
  enum class Fn : uint8_t { Count, Sum, Avg, Min, Max };
  std::vector<Fn> fns_;               // each aggregate's function (add() compares no names)
  std::vector<Acc> whole_accs_;    // with no group: the one group's accumulators
  std::vector<Value> whole_bests_;  // and its mins and maxes
  Acc* whole_ = nullptr;           // (pointing into whole_accs_ then)
  std::vector<int> best_of_;       // each aggregate's place in a group's bests (-1: not a min or a max)
  size_t nbests_ = 0;
  Value tmp_;                          // add(): an aggregate's argument that is no field
  int64_t unsettled_ = 0;              // the int sums outside int64 now (Acc::wraps not 0)
  Status inner_;

  bool sum_overflows(size_t i) {
    inner_ = Status(Code::Limit, agg_labels_[i] + " overflows int64", aggs_[i]->pos);
    return false;
  }
};

namespace {

// The rows pushed in, each decoded as far as the groups and aggregates read it.
class Aggregate : public Stage {
 public:
  Aggregate(ExecContext& x, int node, GroupingPtr g, std::vector<Value>* out)
      : Stage(x, node), g_(std::move(g)), part_(x.c), out_(out) {
    g_->needs(&part_);
    part_.shape();
    g_->placed(part_);
  }
  Status finish() override {
    KF_TRY(x_.err);
    if (!g_->sums_fit()) return g_->error();
    g_->write(out_);
    x_.plan.node(node_).rows_out += out_->size();
    return Status::ok();
  }

 protected:
  bool push(Row& r) override {
    Status s = part_.load(r.id, r.body);
    if (!s.is_ok()) return x_.fail(std::move(s));
    if (!g_->add(part_.doc())) return x_.fail(g_->error());
    return true;
  }

 private:
  GroupingPtr g_;
  PartialDoc part_;
  std::vector<Value>* out_;
};

// A group over one field that has a secondary index, counting, with no
// filter: the groups and their sizes are the index's keys and how many
// documents hold each, and no document is read but one per group, the first
// (lowest id) holding the key, whose value names the group as a scan would
// show it (the index keeps 2.0 as 2). Documents the index has no key for
// form the null group.
class GroupFromIndex : public Source {
 public:
  GroupFromIndex(ExecContext& x, int node, GroupingPtr g, SecondaryIndex* idx,
                 const std::vector<std::string>& path, std::vector<Value>* out)
      : Source(x, node), g_(std::move(g)), idx_(idx), path_(path), out_(out) {}

 protected:
  Status produce() override {
    const Field* f = x_.c.def.field(path_[0]);
    uint64_t keyed = 0;
    Status bad;
    idx_->groups([&](int64_t first, size_t n) {
      const uint64_t* loc = x_.c.ids.find(first);
      if (!loc) {
        bad = Status(Code::Corrupt, "index of '" + join(path_) + "' names a missing document " + std::to_string(first));
        return false;
      }
      Value v;
      bad = decode_field(x_.body(*loc), f->id, &v, &x_.c);
      if (!bad.is_ok()) return false;
      for (size_t i = 1; i < path_.size() && !v.is_null(); i++) {
        const Value* x = v.kind() == Kind::Object ? v.get(path_[i]) : nullptr;
        v = x ? *x : Value();
      }
      if (!g_->add_counted(std::move(v), n)) {
        bad = g_->error();
        return false;
      }
      keyed += n;
      return true;
    });
    KF_TRY(bad);
    if (keyed < x_.c.ids.size() && !g_->add_nulls(x_.c.ids.size() - keyed)) return g_->error();
    g_->write(out_);
    x_.plan.node(node_).rows_out += out_->size();  // the page passed on, as the scanned group's
    return Status::ok();
  }

 private:
  GroupingPtr g_;
  SecondaryIndex* idx_;
  const std::vector<std::string>& path_;
  std::vector<Value>* out_;
};

}  // namespace

void GroupingFree::operator()(Grouping* g) const { delete g; }

Result<GroupingPtr> resolve_grouping(const ParsedStatement& st, const CollectionDef& def, const Evaluator& ev,
                                     int64_t offset, int64_t limit) {
  GroupingPtr g(new Grouping(st, ev, offset, limit));
  KF_TRY(g->resolve(def));
  return g;
}

bool grouping_counts_only(const Grouping& g, const std::vector<std::string>** path) { return g.counts_only(path); }

int plan_aggregate(Plan& plan, const ParsedStatement& st, int input) {
  int n = plan.add("aggregate", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    for (size_t i = 0; i < st.select.size(); i++) d += (i ? ", " : "") + column_name(st.select[i]);
    if (!st.group.empty()) {
      d += std::string(d.empty() ? "" : " ") + "by";
      for (size_t i = 0; i < st.group.size(); i++) d += (i ? ", " : " ") + join(st.group[i].path);
    }
  }
  return n;
}

int plan_group_from_index(Plan& plan, const Collection& c, const std::vector<std::string>& path, int si) {
  int n = plan.add("group from index");
  if (plan.describe())
    plan.node(n).detail = join(path) + ": the keys and counts of index " + c.def.name + "." + join(path) + " (@" +
                          secondary_name(c.def.secondary[(size_t)si].kind) + ")";
  return n;
}

std::unique_ptr<Stage> make_aggregate(ExecContext& x, int node, GroupingPtr g, std::vector<Value>* out) {
  return std::make_unique<Aggregate>(x, node, std::move(g), out);
}

std::unique_ptr<Source> make_group_from_index(ExecContext& x, int node, GroupingPtr g, SecondaryIndex* idx,
                                              const std::vector<std::string>& path, std::vector<Value>* out) {
  return std::make_unique<GroupFromIndex>(x, node, std::move(g), idx, path, out);
}

}  // namespace kitfox
