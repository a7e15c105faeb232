// limit: skips `offset` rows, then passes `limit` (all when -1) and stops
// the rows before it.
#include "ops.h"

namespace kitfox {

namespace {

class Limit : public Stage {
 public:
  Limit(ExecContext& x, int node, int64_t offset, int64_t limit) : Stage(x, node), skip_(offset), left_(limit) {}

 protected:
  bool push(Row& r) override {
    if (skip_ > 0) {
      skip_--;
      return true;
    }
    if (left_ == 0) return false;
    if (left_ > 0) left_--;
    return emit(r) && left_ != 0;
  }

 private:
  int64_t skip_, left_;
};

}  // namespace

int plan_limit(Plan& plan, int64_t offset, int64_t limit, int input) {
  int n = plan.add("limit", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    if (limit >= 0) d = std::to_string(limit);
    if (offset > 0) d += std::string(d.empty() ? "" : ", ") + "offset " + std::to_string(offset);
  }
  return n;
}

std::unique_ptr<Stage> make_limit(ExecContext& x, int node, int64_t offset, int64_t limit) {
  return std::make_unique<Limit>(x, node, offset, limit);
}

}  // namespace kitfox
