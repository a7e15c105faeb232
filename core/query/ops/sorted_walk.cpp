// sorted walk: the documents in the order of a @sorted index (equal keys by
// ascending id, as a sort gives them), so `order f limit k` reads about as
// many documents as it returns instead of sorting them all.
#include "ops.h"

namespace kitfox {

namespace {

class SortedWalk : public Source {
 public:
  SortedWalk(ExecContext& x, int node, SecondaryIndex* idx, bool desc) : Source(x, node), idx_(idx), desc_(desc) {}

 protected:
  Status produce() override {
    Row r;
    idx_->ordered(desc_, [&](const Value&, int64_t id) {
      const uint64_t* loc = x_.c.ids.find(id);
      if (!loc) return true;
      r.id = id;
      r.body = x_.body(*loc);
      r.decoded = false;
      return emit(r);
    });
    return Status::ok();
  }

 private:
  SecondaryIndex* idx_;
  bool desc_;
};

}  // namespace

int plan_sorted_walk(Plan& plan, const Collection& c, const OrderKey& k) {
  int n = plan.add("sorted walk");
  if (plan.describe())
    plan.node(n).detail = "index " + c.def.name + "." + join(k.path) + " (@sorted) gives the order" + (k.desc ? " (descending)" : "");
  return n;
}

std::unique_ptr<Source> make_sorted_walk(ExecContext& x, int node, SecondaryIndex* idx, bool desc) {
  return std::make_unique<SortedWalk>(x, node, idx, desc);
}

}  // namespace kitfox
