// filter: the rows whose document passes the where clause, tested on the
// fields it reads alone (evaluator.h, RowFilter).
#include "ops.h"

namespace kitfox {

namespace {

class Filter : public Stage {
 public:
  Filter(ExecContext& x, int node, const Expr* where) : Stage(x, node), filter_(x.ev, where, x.c) {}

 protected:
  bool push(Row& r) override {
    bool pass;
    Status s = filter_.test(r.id, r.body, &pass);
    if (!s.is_ok()) return x_.fail(std::move(s));
    return !pass || emit(r);
  }

 private:
  RowFilter filter_;
};

}  // namespace

int plan_filter(Plan& plan, const Expr& where, int input) {
  int n = plan.add("filter", input);
  if (plan.describe()) plan.node(n).detail = "where " + expr_text(where);
  return n;
}

std::unique_ptr<Stage> make_filter(ExecContext& x, int node, const Expr* where) {
  return std::make_unique<Filter>(x, node, where);
}

}  // namespace kitfox
