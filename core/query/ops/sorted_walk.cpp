// sorted walk: the documents in the order of a @sorted index (equal keys by
// ascending id, as a sort gives them), so `order f limit k` reads about as
// many documents as it returns instead of sorting them all; with a range
// the where clause puts on f, only the keys in it, from the end the order
// starts at.
#include "ops.h"

namespace kitfox {

namespace {

class SortedWalk : public Source {
 public:
  SortedWalk(ExecContext& x, int node, SecondaryIndex* idx, bool desc, KeyRange range)
      : Source(x, node), idx_(idx), desc_(desc), range_(std::move(range)) {}

 protected:
  Status produce() override {
    Row r;
    auto visit = [&](const Value&, int64_t id) {
      const uint64_t* loc = x_.c.ids.find(id);
      if (!loc) return true;
      r.id = id;
      r.body = x_.body(*loc);
      r.decoded = false;
      return emit(r);
    };
    if (!range_.has_lo && !range_.has_hi) idx_->ordered(desc_, visit);
    else
      idx_->ordered_range(desc_, range_.has_lo ? &range_.lo : nullptr, range_.lo_incl,
                          range_.has_hi ? &range_.hi : nullptr, range_.hi_incl, visit);
    return Status::ok();
  }

 private:
  SecondaryIndex* idx_;
  bool desc_;
  KeyRange range_;
};

}  // namespace

int plan_sorted_walk(Plan& plan, const Collection& c, const OrderKey& k, const KeyRange* range) {
  int n = plan.add("sorted walk");
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    d = "index " + c.def.name + "." + join(k.path) + " (@sorted) gives the order" + (k.desc ? " (descending)" : "");
    if (range && range->has_lo) d += std::string(", keys ") + (range->lo_incl ? ">= " : "> ") + to_json(range->lo);
    if (range && range->has_hi)
      d += std::string(range->has_lo ? " and " : ", keys ") + (range->hi_incl ? "<= " : "< ") + to_json(range->hi);
  }
  return n;
}

std::unique_ptr<Source> make_sorted_walk(ExecContext& x, int node, SecondaryIndex* idx, bool desc, KeyRange range) {
  return std::make_unique<SortedWalk>(x, node, idx, desc, std::move(range));
}

}  // namespace kitfox
