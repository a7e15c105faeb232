// scan: every document of the collection, in ascending id order.
#include "ops.h"

namespace kitfox {

namespace {

class Scan : public Source {
 public:
  using Source::Source;

 protected:
  Status produce() override {
    Row r;
    x_.c.ids.scan([&](const IdEntry& e) {
      r.id = e.id;
      r.body = x_.body(e.loc);
      r.decoded = false;
      return emit(r);
    });
    return Status::ok();
  }
};

}  // namespace

int plan_scan(Plan& plan, const Collection& c) {
  int n = plan.add("scan");
  if (plan.describe()) plan.node(n).detail = c.def.name + " in id order (" + std::to_string(c.ids.size()) + " documents)";
  return n;
}

std::unique_ptr<Source> make_scan(ExecContext& x, int node) { return std::make_unique<Scan>(x, node); }

}  // namespace kitfox
