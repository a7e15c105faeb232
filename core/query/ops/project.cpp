// project: the output row of each document: the fields selected (all when
// none are), the expressions' values, then what the search added (_score,
// _distance) and the lookup's child rows; each kept row is charged to the
// query's memory budget.
#include "ops.h"

namespace kitfox {

Value project_row(const ParsedStatement& st, Value doc, const Evaluator& ev, Status* err) {
  if (st.select.empty()) return doc;
  Value r = Value::object();
  r.reserve_keys(1 + st.select.size());
  r.append("id", *doc.get("id"));
  for (const SelectItem& s : st.select) {
    if (s.expr) {
      Value v;
      Status e = ev.eval(*s.expr, doc, &v);
      if (!e.is_ok() && err->is_ok()) *err = e;
      r.append(s.label, std::move(v));
      continue;
    }
    if (s.path.size() == 1 && s.path[0] == "id") continue;
    r.append(join(s.path), doc.at_path(s.path));
  }
  return r;
}

bool selects_id_only(const ParsedStatement& st) {
  if (st.select.empty()) return false;
  for (const SelectItem& s : st.select)
    if (s.expr || s.path.size() != 1 || s.path[0] != "id") return false;
  return true;
}

namespace {

class Project : public Stage {
 public:
  Project(ExecContext& x, int node, std::vector<Value>* out, ProjectAdds adds)
      : Stage(x, node), out_(out), adds_(adds) {
    ids_only_ = selects_id_only(x.st);  // no document is read
  }

 protected:
  bool push(Row& r) override {
    Value row;
    if (ids_only_) {
      row = Value::object();
      row.reserve_keys(2 + adds_.score + adds_.distance + r.has_children);
      row.append("id", Value::integer(r.id));
    } else {
      Status s = x_.decode(r);
      if (!s.is_ok()) return x_.fail(std::move(s));
      row = project_row(x_.st, std::move(r.doc), x_.ev, &s);
      r.decoded = false;
      if (!s.is_ok()) return x_.fail(std::move(s));
    }
    if (adds_.score) row.append("_score", Value::real(r.score));
    if (adds_.distance) row.append("_distance", Value::real(r.distance));
    if (r.has_children) row.append(x_.st.lookup->collection, std::move(r.children));
    Status s;
    if (!x_.budget.take(row, &s)) return x_.fail(std::move(s));
    out_->push_back(std::move(row));
    x_.plan.node(node_).rows_out++;
    return true;
  }

 private:
  std::vector<Value>* out_;
  ProjectAdds adds_;
  bool ids_only_;
};

}  // namespace

int plan_project(Plan& plan, const ParsedStatement& st, int input) {
  int n = plan.add("project", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    if (st.select.empty()) d = "whole documents";
    for (size_t i = 0; i < st.select.size(); i++)
      d += (i ? ", " : "") + (st.select[i].expr ? st.select[i].label : join(st.select[i].path));
  }
  return n;
}

std::unique_ptr<Stage> make_project(ExecContext& x, int node, std::vector<Value>* out, ProjectAdds adds) {
  return std::make_unique<Project>(x, node, out, adds);
}

}  // namespace kitfox
