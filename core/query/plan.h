// The plan of a read: a tree of operators, each a node here. The planner
// (planner.cpp) makes it from a bound statement, its parameters and the
// catalog; the executor runs it (ops/). `explain` shows it without running
// it; `explain analyze` runs it and adds what each operator did.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../db.h"

namespace kitfox {

struct PlanNode {
  const char* op = "";  // "scan", "filter", "near graph", ... (docs/query-language.md, "explain")
  std::string detail;   // what it works on; built only for explain
  int inputs[2] = {-1, -1};  // the nodes whose rows it takes (-1: none)
  // explain analyze
  uint64_t rows_in = 0, rows_out = 0;
  uint64_t self_ns = 0;  // time in this operator alone
  uint64_t gathered = 0;  // an id or index lookup: the ids found before it ran (not shown)
};

class Plan {
 public:
  // `describe`: explain will show it (else no detail is built).
  explicit Plan(bool describe) : describe_(describe) {}
  bool describe() const { return describe_; }
  int add(const char* op, int input = -1, int input2 = -1) {
    size_t i = size_++;
    PlanNode& n = i < kInline ? inline_[i] : (more_.emplace_back(), more_.back());
    n.op = op;
    n.inputs[0] = input;
    n.inputs[1] = input2;
    return (int)i;
  }
  PlanNode& node(int i) { return (size_t)i < kInline ? inline_[i] : more_[(size_t)i - kInline]; }
  const PlanNode& node(int i) const { return (size_t)i < kInline ? inline_[i] : more_[(size_t)i - kInline]; }
  size_t size() const { return size_; }
  bool has(std::string_view op) const {
    for (size_t i = 0; i < size_; i++)
      if (op == node((int)i).op) return true;
    return false;
  }
  // The documents the sources (the nodes with no input) went through in a
  // run: those they sent on, or the ids a lookup gathered, were they more.
  uint64_t source_rows() const {
    uint64_t n = 0;
    for (size_t i = 0; i < size_; i++)
      if (node((int)i).inputs[0] < 0) n += std::max(node((int)i).rows_out, node((int)i).gathered);
    return n;
  }
  // A near search chose to compare the query with every document's vector
  // (exact, no candidates gathered): a long read, run pinned (Engine::pinnable).
  bool exact_over_all = false;
  // The rows of explain: the tree from its root (the last node added) down,
  // each node with its depth; with `analyze`, rows in and out and the time
  // of the node with its inputs.
  void explain(bool analyze, std::vector<Value>* out) const;

 private:
  // A plan is a few nodes: they live here, not on the heap.
  static constexpr size_t kInline = 8;
  bool describe_;
  size_t size_ = 0;
  PlanNode inline_[kInline];
  std::vector<PlanNode> more_;
};

}  // namespace kitfox
