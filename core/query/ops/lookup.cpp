// lookup: each parent row's child documents, `lookup C2 on child_field [=
// parent_field]`, found by id or through a @hash index on child_field, then
// run through the child clauses (filter, order, limit, project, a nested
// lookup) into a list the parent row carries; `required` drops the parents
// that have none.
#include "ops.h"

namespace kitfox {

namespace {

class LookupStage : public Stage {
 public:
  LookupStage(ExecContext& x, int node, const LookupPlan& lp) : Stage(x, node), lp_(lp) {}

 protected:
  bool push(Row& r) override {
    Status s = x_.decode(r);
    if (!s.is_ok()) return x_.fail(std::move(s));
    const Lookup& lk = *lp_.lk;
    // The parent's key.
    const Value* key = &r.doc;
    for (const std::string& k : lk.parent_path) {
      key = key->kind() == Kind::Object ? key->get(k) : nullptr;
      if (!key) break;
    }
    std::vector<int64_t> ids;
    if (lp_.index) {
      if (key) lp_.index->equal(*key, &ids);
    } else if (port::kThreads && lp_.pinned_index >= 0) {  // pinned: never without threads
      if (key) {
        s = pinned_ids(*key, &ids);
        if (!s.is_ok()) return x_.fail(std::move(s));
      }
    } else if (int64_t id; key && id_of(*key, &id)) {
      ids.push_back(id);
    }
    r.children = Value::list();
    uint64_t t0 = x_.analyze ? ExecContext::now_ns() : 0;
    s = run_child(std::move(ids), &r.children.mutable_items());
    if (x_.analyze) x_.nested_ns += ExecContext::now_ns() - t0;
    if (!s.is_ok()) return x_.fail(std::move(s));
    if (lk.required && r.children.items().empty()) return true;
    r.has_children = true;
    return emit(r);
  }

 private:
  // The child clauses over `ids`, into `out`.
  Status run_child(std::vector<int64_t> ids, std::vector<Value>* out) {
    const ParsedStatement& cs = *lp_.lk->child;
    ExecContext cx(x_.eng, *lp_.child, cs, x_.ev, x_.plan, x_.analyze);
    cx.pinned = x_.pinned;  // a pinned read's child: its copy, read from the pinned view
    Pipeline p;
    p.source = make_ids(cx, lp_.source, std::move(ids));
    if (lp_.filter >= 0) p.add(make_filter(cx, lp_.filter, cs.where.get()));
    if (lp_.sort >= 0) p.add(make_sort(cx, lp_.sort, cs.order, -1));
    if (lp_.nested && lp_.nested->lk->required) p.add(make_lookup(cx, lp_.nested->node, *lp_.nested));
    if (lp_.limit >= 0) p.add(make_limit(cx, lp_.limit, lp_.offset, lp_.count));
    if (lp_.nested && !lp_.nested->lk->required) p.add(make_lookup(cx, lp_.nested->node, *lp_.nested));
    p.add(make_project(cx, lp_.project, out, {}));
    return p.run();
  }

  // A pinned read's lookup through a @hash index: the live index's ids
  // while it answers for the pin (Engine::live_equal); then the index
  // filled from the pinned copy, once for the read.
  Status pinned_ids(const Value& key, std::vector<int64_t>* ids) {
    const size_t i = (size_t)lp_.pinned_index;
    if (!lp_.own) {
      if (x_.eng.live_equal(*lp_.child, i, key, ids, &lp_.live)) return Status::ok();
      KF_ASSIGN(lp_.own, pinned_secondary(*lp_.child, i, *x_.pinned));
      x_.eng.pinned_fills.fetch_add(1, std::memory_order_relaxed);
    }
    lp_.own->equal(key, ids);
    return Status::ok();
  }

  const LookupPlan& lp_;
};

}  // namespace

int plan_lookup(Plan& plan, const LookupPlan& lp, int input) {
  int n = plan.add("lookup", input, lp.project);
  if (plan.describe()) {
    const Lookup& lk = *lp.lk;
    plan.node(n).detail = lk.collection + " on " + lk.child_field + " = " + join(lk.parent_path) +
                          (lp.hashed() ? " (@hash index on " + lk.collection + "." + lk.child_field + ")" : "") +
                          (lk.required ? ", required" : "");
  }
  return n;
}

std::unique_ptr<Stage> make_lookup(ExecContext& x, int node, const LookupPlan& lp) {
  return std::make_unique<LookupStage>(x, node, lp);
}

}  // namespace kitfox
