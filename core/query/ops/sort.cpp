// sort: holds every row, then sends them ordered by the order keys (ties by
// id: rows arrive in id order and the sort is stable); top-k when only the
// first few are wanted (then the id is the last key).
#include "ops.h"

namespace kitfox {

namespace {

class Sort : public Stage {
 public:
  Sort(ExecContext& x, int node, const std::vector<OrderKey>& keys, int64_t want)
      : Stage(x, node), keys_(keys), want_(want) {}

  Status finish() override {
    KF_TRY(x_.err);
    auto less = [&](const Item& a, const Item& b) {
      for (size_t i = 0; i < keys_.size(); i++) {
        int c = compare(a.keys[i], b.keys[i]);
        if (c) return keys_[i].desc ? c > 0 : c < 0;
      }
      return false;
    };
    size_t want = want_ < 0 ? items_.size() : std::min<size_t>(items_.size(), (size_t)want_);
    if (want < items_.size() / 4) {
      auto less_id = [&](const Item& a, const Item& b) {
        if (less(a, b)) return true;
        if (less(b, a)) return false;
        return a.row.id < b.row.id;
      };
      std::partial_sort(items_.begin(), items_.begin() + (ptrdiff_t)want, items_.end(), less_id);
    } else {
      std::stable_sort(items_.begin(), items_.end(), less);
    }
    for (size_t i = 0; i < want; i++)
      if (!emit(items_[i].row)) break;
    KF_TRY(x_.err);
    return Stage::finish();
  }

 protected:
  bool push(Row& r) override {
    Status s = x_.decode(r);
    if (!s.is_ok()) return x_.fail(std::move(s));
    Item it;
    for (const OrderKey& k : keys_) {
      if (k.expr) {
        Value kv;
        s = x_.ev.eval(*k.expr, r.doc, &kv);
        if (!s.is_ok()) return x_.fail(std::move(s));
        it.keys.push_back(std::move(kv));
        continue;
      }
      const Value* v = &r.doc;
      for (const std::string& p : k.path) {
        v = v->kind() == Kind::Object ? v->get(p) : nullptr;
        if (!v) break;
      }
      it.keys.push_back(v ? *v : Value());
    }
    if (!x_.budget.take(r.doc, &s)) return x_.fail(std::move(s));
    it.row = std::move(r);
    items_.push_back(std::move(it));
    return true;
  }

 private:
  struct Item {
    std::vector<Value> keys;
    Row row;
  };
  const std::vector<OrderKey>& keys_;
  int64_t want_;
  std::vector<Item> items_;
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
