// count: how many rows reach it (`get ... count`); count from index: the
// number an index's candidates give when they are exactly the documents
// the where clause selects (index_lookup.cpp, index_count), or the
// collection's size when there is no where.
#include "ops.h"

namespace kitfox {

namespace {

class Count : public Stage {
 public:
  Count(ExecContext& x, int node, std::vector<Value>* out) : Stage(x, node), out_(out) {}
  Status finish() override {
    KF_TRY(x_.err);
    out_->push_back(row1("count", Value::integer(n_)));
    x_.plan.node(node_).rows_out = 1;
    return Status::ok();
  }

 protected:
  bool push(Row&) override {
    n_++;
    return true;
  }

 private:
  std::vector<Value>* out_;
  int64_t n_ = 0;
};

class Known : public Source {
 public:
  Known(ExecContext& x, int node, int64_t n, std::vector<Value>* out) : Source(x, node), n_(n), out_(out) {}

 protected:
  Status produce() override {
    out_->push_back(row1("count", Value::integer(n_)));
    x_.plan.node(node_).rows_out = 1;
    return Status::ok();
  }

 private:
  int64_t n_;
  std::vector<Value>* out_;
};

}  // namespace

int plan_count(Plan& plan, int input) { return plan.add("count", input); }

int plan_known_count(Plan& plan, const std::string& why) {
  int n = plan.add("count from index");
  plan.node(n).detail = why;
  return n;
}

std::unique_ptr<Stage> make_count(ExecContext& x, int node, std::vector<Value>* out) {
  return std::make_unique<Count>(x, node, out);
}

std::unique_ptr<Source> make_known_count(ExecContext& x, int node, int64_t n, std::vector<Value>* out) {
  return std::make_unique<Known>(x, node, n, out);
}

}  // namespace kitfox
