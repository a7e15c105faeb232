#include "plan.h"

#include <functional>

namespace kitfox {

void Plan::explain(bool analyze, std::vector<Value>* out) const {
  if (size_ == 0) return;
  // A node's time with its inputs'.
  std::vector<uint64_t> total(size_, 0);
  std::function<uint64_t(int)> sum = [&](int i) {
    uint64_t t = node(i).self_ns;
    for (int k : node(i).inputs)
      if (k >= 0) t += sum(k);
    return total[(size_t)i] = t;
  };
  int root = (int)size_ - 1;
  if (analyze) sum(root);
  int64_t step = 0;
  std::function<void(int, int64_t)> walk = [&](int i, int64_t depth) {
    const PlanNode& n = node(i);
    Value row = Value::object();
    row.append("step", Value::integer(++step));
    row.append("depth", Value::integer(depth));
    row.append("op", Value::text(n.op));
    row.append("detail", Value::text(n.detail));
    if (analyze) {
      row.append("rows_in", Value::integer((int64_t)n.rows_in));
      row.append("rows_out", Value::integer((int64_t)n.rows_out));
      row.append("ms", Value::real((double)total[(size_t)i] / 1e6));
    }
    out->push_back(std::move(row));
    for (int k : n.inputs)
      if (k >= 0) walk(k, depth + 1);
  };
  walk(root, 0);
}

}  // namespace kitfox
