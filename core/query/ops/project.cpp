// project: the output row of each document: the fields selected (all when
// none are), the expressions' values, then what the search added (_score,
// _distance) and the lookup's child rows; each kept row is charged to the
// query's memory budget.
#include "ops.h"

#include <algorithm>
#include <cmath>

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
    // A select of top-level fields alone (each once, besides the id): each
    // row's fields decoded straight into it, in one walk of the document.
    fields_only_ = !ids_only_ && !x.st.select.empty();
    for (const SelectItem& s : x.st.select) {
      if (!fields_only_) break;
      if (s.path.size() == 1 && s.path[0] == "id" && !s.expr) continue;
      const Field* f = !s.expr && s.path.size() == 1 ? x.c.def.field(s.path[0]) : nullptr;
      if (!f || nfields_ == kMaxFields || std::find(field_ids_, field_ids_ + nfields_, f->id) != field_ids_ + nfields_)
        fields_only_ = false;
      else
        field_ids_[nfields_++] = f->id;
    }
  }

 protected:
  bool push(Row& r) override {
    Value row;
    if (ids_only_) {
      row = Value::object();
      row.reserve_keys(2 + adds_.score + adds_.distance + r.has_children);
      row.append("id", Value::integer(r.id));
    } else if (fields_only_ && !r.decoded && fields_row(r, &row)) {
      // (as a filter reads them: the document up to its last field selected,
      // the fields it steps over not decoded; where that much does not
      // decode, the whole document below, for its error)
    } else {
      Status s = x_.decode(r);
      if (!s.is_ok()) return x_.fail(std::move(s));
      row = project_row(x_.st, std::move(r.doc), x_.ev, &s);
      r.decoded = false;
      if (!s.is_ok()) return x_.fail(std::move(s));
    }
    if (adds_.score) row.append("_score", Value::real(r.score));
    if (adds_.distance) row.append("_distance", std::isnan(r.distance) ? Value() : Value::real(r.distance));  // (NaN: a rerank's match with no vector)
    if (r.has_children) row.append(x_.st.lookup->collection, std::move(r.children));
    Status s;
    if (!x_.budget.take(row, &s)) return x_.fail(std::move(s));
    out_->push_back(std::move(row));
    x_.plan.node(node_).rows_out++;
    return true;
  }

 private:
  // The row of a select of fields alone, as project_row makes it (the id,
  // then each field by its name, null where the document has none); false
  // when the document does not decode.
  bool fields_row(const Row& r, Value* row) {
    *row = Value::object();
    row->reserve_keys(1 + nfields_ + adds_.score + adds_.distance + r.has_children);
    row->append("id", Value::integer(r.id));
    for (const SelectItem& s : x_.st.select)
      if (s.path[0] != "id") row->append(s.path[0], Value());
    return decode_fields(r.body, field_ids_, nfields_, &row->mutable_items()[1], &x_.c).is_ok();
  }

  std::vector<Value>* out_;
  ProjectAdds adds_;
  bool ids_only_, fields_only_;
  static constexpr size_t kMaxFields = 16;  // (more: the whole document, then the fields)
  uint32_t field_ids_[kMaxFields];          // fields_only_: the fields selected, in order
  size_t nfields_ = 0;
};

}  // namespace

int plan_project(Plan& plan, const ParsedStatement& st, int input) {
  int n = plan.add("project", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    if (st.select.empty()) d = "whole documents";
    for (size_t i = 0; i < st.select.size(); i++)
      d += (i ? ", " : "") + column_name(st.select[i]);
  }
  return n;
}

std::unique_ptr<Stage> make_project(ExecContext& x, int node, std::vector<Value>* out, ProjectAdds adds) {
  return std::make_unique<Project>(x, node, out, adds);
}

}  // namespace kitfox
