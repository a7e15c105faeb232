// The planner: from a bound statement, its parameters and the catalog, the
// plan of a read (plan.h) as a pipeline of operators (ops/). The rules that
// pick an access path and weigh costs live here:
//
//   where     an id lookup (`id = c`, `id in [...]`: exact, no filter), else
//             the candidates of a secondary index for one conjunct
//             (equality and in first, @unique first, then a range on a
//             @sorted index) and the filter, else a scan and the filter;
//   order     one field with a @sorted index: walk it (and stop at the
//             limit) unless the where clause's candidates are few enough
//             that sorting them costs less; else a sort, top-k when limited;
//   near      by cost: an HNSW walk testing the filter, or exact over the
//             filter's candidates (choose_near);
//   group     a counting group over an indexed field: the index's keys and
//             counts; else each document decoded as far as the groups read;
//   count     an index's exact count, or the collection's size.
#pragma once
#include <vector>

#include "ops/ops.h"

namespace kitfox {

// Plans a get into `p`, whose rows go to `out`.
Status plan_get(ExecContext& x, std::vector<Value>* out, Pipeline* p);

// The access path of x.st's where clause (a source, and a filter when the
// source does not answer the clause exactly); returns its last node.
int plan_where(ExecContext& x, Pipeline* p);

// Calls f(Row&) for each document x.st's where clause selects, found as
// plan_where finds them (decoded first when `decode`); f returns false to stop.
template <typename F>
Status visit_where(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev, bool decode, F f) {
  class Visit : public Stage {
   public:
    Visit(ExecContext& x, int node, bool decode, F& f) : Stage(x, node), decode_(decode), f_(f) {}

   protected:
    bool push(Row& r) override {
      if (decode_) {
        Status s = x_.decode(r);
        if (!s.is_ok()) return x_.fail(std::move(s));
      }
      return f_(r);
    }

   private:
    bool decode_;
    F& f_;
  };
  Plan plan(false);
  ExecContext x(eng, c, st, ev, plan, false);
  Pipeline p;
  int input = plan_where(x, &p);
  p.add(std::make_unique<Visit>(x, plan.add(st.kind == StmtKind::Del ? "del" : "set", input), decode, f));
  return p.run();
}

}  // namespace kitfox
