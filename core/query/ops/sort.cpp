// sort: holds every row (undecoded, with its keys), then sends them ordered
// by the order keys (ties as they came: rows arrive in id order and the
// sort is stable); top-k when a limit says how many are wanted: a heap of
// that many, ties by id.
#include "ops.h"
#include "../../port.h"

namespace kitfox {

namespace {

class Sort : public Stage {
 public:
  Sort(ExecContext& x, int node, const std::vector<OrderKey>& keys, int64_t want)
      : Stage(x, node), keys_(keys), want_(want), part_(x.c), at_(keys.size()), made_(keys.size()) {
    for (const OrderKey& k : keys_) {
      if (k.expr) part_.need(*k.expr);
      else part_.need(k.path);
    }
    part_.shape();
    for (const OrderKey& k : keys_) place_.push_back(k.expr ? -1 : part_.place(k.path));
  }

  Status finish() override {
    KF_TRY(x_.err);
    if (want_ >= 0) {
      std::sort_heap(items_.begin(), items_.end(), [&](const Item& a, const Item& b) { return before(a, b); });
      for (Item& it : items_)
        if (!emit(it.row)) break;
    } else {
      // Every row: sorted as (the first key's sort_prefix, its place), 16
      // bytes each, the keys compared whole only where two prefixes are
      // equal; the rows stay where they are. Stable: ties as they came.
      const bool desc = keys_[0].desc;
      std::vector<Entry> order_of(items_.size());
      for (size_t i = 0; i < items_.size(); i++) {
        const uint64_t p = sort_prefix(items_[i].keys[0]);
        order_of[i] = {desc ? ~p : p, (uint64_t)i};
      }
      std::stable_sort(order_of.begin(), order_of.end(), [&](const Entry& a, const Entry& b) {
        if (a.prefix != b.prefix) return a.prefix < b.prefix;
        return order(items_[a.at].keys.data(), items_[b.at].keys.data()) < 0;
      });
      // Rows go out in the sort's order, their documents read at random:
      // each row's document is asked for a few rows ahead, its item further.
      constexpr size_t kAhead = 8;
      for (size_t k = 0; k < order_of.size(); k++) {
        if (k + 2 * kAhead < order_of.size()) sink_ += port::prefetch(&items_[order_of[k + 2 * kAhead].at], sizeof(Item));
        if (k + kAhead < order_of.size()) {
          const std::string_view b = items_[order_of[k + kAhead].at].row.body;
          sink_ += port::prefetch(b.data(), std::min<size_t>(b.size(), 128));
        }
        if (!emit(items_[order_of[k].at].row)) break;
      }
    }
    KF_TRY(x_.err);
    return Stage::finish();
  }

 protected:
  // A row's keys read from the fields they name alone (decoded for them,
  // or from the document where it came decoded), in place; a row is kept
  // undecoded (its body) and its keys copied only when it is held: with a
  // limit, only while it is among the first `want` (a heap, the last of
  // them at its top), so a top-k over a million documents decodes no
  // document and holds `want` rows.
  bool push(Row& r) override {
    if (want_ == 0) return false;  // nothing wanted: the source stops
    Status s;
    const Value* doc = &r.doc;
    if (!r.decoded) {
      s = part_.load(r.id, r.body);
      if (!s.is_ok()) return x_.fail(std::move(s));
      doc = &part_.doc();
    }
    for (size_t i = 0; i < keys_.size(); i++) {
      const OrderKey& k = keys_[i];
      if (k.expr) {
        s = x_.ev.eval(*k.expr, *doc, &made_[i]);
        if (!s.is_ok()) return x_.fail(std::move(s));
        at_[i] = &made_[i];
        continue;
      }
      at_[i] = !r.decoded && place_[i] >= 0 ? &doc->items()[(size_t)place_[i]] : &doc->at_path(k.path);
    }
    const bool top = want_ >= 0;
    if (top && items_.size() >= (uint64_t)want_) {
      // Not before the last of the first `want`: not among them.
      if (!before_last(r.id)) return true;
      std::pop_heap(items_.begin(), items_.end(), [&](const Item& a, const Item& b) { return before(a, b); });
      held_ -= items_.back().bytes;
      items_.pop_back();
    }
    Item it;
    it.keys.reserve(keys_.size());
    it.bytes = sizeof(Item) + (r.decoded ? RowBudget::bytes(r.doc) : 0);
    for (size_t i = 0; i < keys_.size(); i++) {
      it.keys.push_back(*at_[i]);
      it.bytes += RowBudget::bytes(it.keys.back());
    }
    // What is held (each row, its keys, its document where it came
    // decoded), charged as the most held at once grows; the rows sent on
    // are charged by whoever keeps them.
    held_ += it.bytes;
    if (held_ > peak_) {
      if (!x_.budget.take_bytes(held_ - peak_, &s)) return x_.fail(std::move(s));
      peak_ = held_;
    }
    it.row = std::move(r);
    items_.push_back(std::move(it));
    if (top) std::push_heap(items_.begin(), items_.end(), [&](const Item& a, const Item& b) { return before(a, b); });
    return true;
  }

 private:
  struct Item {
    std::vector<Value> keys;
    Row row;
    uint64_t bytes = 0;  // what holding it costs
  };
  struct Entry {
    uint64_t prefix;  // the first key's sort_prefix (inverted for desc)
    uint64_t at;      // the row's place in items_
  };
  // <0, 0, >0: a's keys before, level with, after b's, by the order.
  int order(const Value* a, const Value* b) const {
    for (size_t i = 0; i < keys_.size(); i++) {
      int c = compare(a[i], b[i]);
      if (c) return keys_[i].desc ? -c : c;
    }
    return 0;
  }
  // With a limit, ties go by id (as they come: every source gives rows in
  // id order, which the stable sort of all of them keeps).
  bool before(const Item& a, const Item& b) const {
    int c = order(a.keys.data(), b.keys.data());
    return c ? c < 0 : a.row.id < b.row.id;
  }
  // Whether the row whose keys are at_ comes before the last held.
  bool before_last(int64_t id) const {
    const Item& last = items_.front();
    for (size_t i = 0; i < keys_.size(); i++) {
      int c = compare(*at_[i], last.keys[i]);
      if (c) return keys_[i].desc ? c > 0 : c < 0;
    }
    return id < last.row.id;
  }
  const std::vector<OrderKey>& keys_;
  int64_t want_;
  PartialDoc part_;
  std::vector<int> place_;  // where each key that is a field lies in part_'s rows (-1: looked up)
  std::vector<const Value*> at_;  // push(): the row's keys, in place
  std::vector<Value> made_;       // push(): those made by an expression
  std::vector<Item> items_;
  uint64_t held_ = 0, peak_ = 0;  // the bytes held, the most held at once (charged)
  uint32_t sink_ = 0;             // what the loads ahead read where there is no prefetch (WASM: kept)
};

}  // namespace

int plan_sort(Plan& plan, const std::vector<OrderKey>& keys, int64_t want, int input) {
  int n = plan.add(want >= 0 ? "top-k" : "sort", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    for (size_t i = 0; i < keys.size(); i++)
      d += (i ? ", " : "") + (keys[i].expr ? keys[i].label : join(keys[i].path)) + (keys[i].desc ? " desc" : "");
    if (want >= 0) d += " (the first " + std::to_string(want) + ")";
  }
  return n;
}

std::unique_ptr<Stage> make_sort(ExecContext& x, int node, const std::vector<OrderKey>& keys, int64_t want) {
  return std::make_unique<Sort>(x, node, keys, want);
}

}  // namespace kitfox
