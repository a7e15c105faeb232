// near: the documents nearest a query vector, nearest first, each with its
// distance. How (chosen by the planner, planner.cpp, choose_near):
//   near graph     an HNSW search (ef), no filter;
//   near exact     every vector of the table, or, with a filter, the
//                  candidates an index gives or every document, tested;
//   near graph, filtered   the HNSW search testing the filter on the nodes
//                  it visits; when it finds too few, exact over the filtered.
// Without an index the documents' vectors are compared one by one.
#include "ops.h"

namespace kitfox {

double shown_distance(Metric m, float d) {
  // Rounding can make 1 - cos of a vector to itself a hair below 0 (and an
  // l2 square too): a distance shown is never negative, but dot's may be.
  if (m != Metric::Dot && d < 0) d = 0;
  return float_as_shortest_double(m == Metric::L2 ? std::sqrt(d) : d);
}

namespace {

void keep_best(std::vector<DocHit>& heap, size_t k, DocHit h) {
  if (heap.size() < k) {
    heap.push_back(h);
    std::push_heap(heap.begin(), heap.end());
  } else if (k && h < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = h;
    std::push_heap(heap.begin(), heap.end());
  }
}

}  // namespace

Status resolve_near(Collection& c, const ParsedStatement& st, const Evaluator& ev, size_t need, NearQuery* nq) {
  const Field* f = c.def.field(st.near_field);
  if (!f) return not_found_field(st.near_field, c.def, st.near_pos);
  if (f->type.kind != TypeKind::Vector)
    return Status(Code::Type, "'near' needs a vector field; '" + f->name + "' is " + type_name(f->type), st.near_pos);
  nq->field = f;
  nq->need = need;
  // A query vector given as one, of the field's dimension, is used in place
  // (prepare_query checks its values); anything else is coerced first.
  const Value* qvp = ev.ref(*st.near_value);
  Value raw, qv;
  if (!qvp || qvp->kind() != Kind::Vector || qvp->vec().size() != f->type.dim) {
    KF_TRY(ev.constant(*st.near_value, &raw));
    Type qt = f->type;
    qt.f16 = false;
    Status cs = coerce(raw, qt, "near " + f->name, &qv);
    if (!cs.is_ok()) return Status(cs.code(), cs.message(), st.near_value->pos);
    qvp = &qv;
  }
  KF_ASSIGN(int64_t ef, count_arg(ev, st.near_ef, "ef"));
  if (st.near_ef && (ef < 1 || ef > 100000)) return Status(Code::Invalid, "ef must be between 1 and 100000", st.near_ef->pos);
  auto it = c.vindex.find(f->id);
  nq->index = it == c.vindex.end() ? nullptr : it->second.get();
  HnswParams params = nq->index ? nq->index->params() : HnswParams{};
  nq->metric = params.metric;
  // Without an index, an index's shape prepares the query and the documents.
  if (!nq->index) nq->unindexed = std::make_unique<HnswIndex>(f->type.dim, false, params);
  Status ps = nq->shape().prepare_query(qvp->vec().data(), &nq->q, "near " + f->name);
  if (!ps.is_ok()) return Status(ps.code(), ps.message(), st.near_value->pos);
  nq->ef = ef < 0 ? params.ef_search : (size_t)ef;
  return Status::ok();
}

Status near_hits(ExecContext& x, NearQuery& nq, std::vector<DocHit>* out) {
  Collection& c = x.c;
  const ParsedStatement& st = x.st;
  HnswIndex* index = nq.index;
  const size_t need = nq.need;
  Status inner;
  RowFilter filter(x.ev, st.where.get(), c);
  auto passes = [&](int64_t id) {
    if (!st.where) return true;
    const uint64_t* loc = c.ids.find(id);
    if (!loc) return false;
    bool pass;
    inner = filter.test(id, x.body(*loc), &pass);
    return inner.is_ok() && pass;
  };
  std::vector<DocHit>& heap = *out;  // max-heap of the best `need`
  heap.clear();
  // The documents the filter passes, each: id, body.
  auto each_passing = [&](auto&& f) -> Status {
    auto visit = [&](int64_t id, std::string_view b) {
      bool pass = true;
      if (st.where) {
        inner = filter.test(id, b, &pass);
        if (!inner.is_ok()) return false;
      }
      if (pass) f(id, b);
      return true;
    };
    if (nq.narrowed) {
      for (int64_t id : nq.cand) {
        const uint64_t* loc = c.ids.find(id);
        if (loc && !visit(id, x.body(*loc))) break;
      }
    } else {
      c.ids.scan([&](const IdEntry& e) { return visit(e.id, x.body(e.loc)); });
    }
    return inner;
  };
  thread_local std::vector<int64_t> on_node, looked_up;
  auto exact_filtered = [&]() -> Status {
    heap.clear();
    if (index && nq.narrowed) {
      // The vectors are in the index: no document is decoded. A document
      // of the last image names its node (a reference, where the field's
      // index numbers its nodes as the image did: none retired or lost
      // since); one written since is looked up by id, after the others.
      const uint32_t fid = nq.field->id;
      const bool refs = !c.retired.count(fid) && !c.lost_tables.count(fid);
      looked_up.clear();
      KF_TRY(each_passing([&](int64_t id, std::string_view b) {
        const int64_t node = refs ? vector_ref(b, fid) : kNoVectorRef;
        if (node >= 0 && node < (int64_t)index->nodes())
          keep_best(heap, need, {index->distance_to(nq.q.data(), (uint32_t)node), id});
        else if (node != kNoVectorField)  // (a document without the field has no node)
          looked_up.push_back(id);
      }));
      if (looked_up.empty()) return Status::ok();
      // By the index's maps, or while they are unbuilt, by scans. Natively
      // reserved first: past what scans may answer, the read asks for the
      // maps to be built beside the lock and runs again; where it cannot
      // (a build that failed, definitions racing it), node_of counts them
      // and builds the maps past its guard, as without threads it counts
      // them as they go and builds the maps whole where due.
      bool reserved = port::kThreads && (index->maps_ready() || index->reserve(looked_up.size()));
      if (port::kThreads && !reserved && Engine::defer_maps(c, fid))
        return Status(Code::Invalid, "the vector maps of " + c.def.name + "." + nq.field->name + " are built first");
      for (int64_t id : looked_up) {
        const int64_t node = reserved ? index->find_node(id) : index->node_of(id);
        if (node >= 0) keep_best(heap, need, {index->distance_to(nq.q.data(), (uint32_t)node), id});
      }
      return Status::ok();
    }
    if (index) {
      // Every node and its documents, those the filter passes kept: the
      // same (distance, id) pairs as by document, with no document -> node
      // map (a pinned read's copy of the index has none built).
      for (uint32_t n = 0; n < index->nodes(); n++) {
        on_node.clear();
        index->docs_of(n, &on_node);
        float d = 0;
        bool have = false;
        for (int64_t id : on_node) {
          if (!passes(id)) {
            if (!inner.is_ok()) return inner;
            continue;
          }
          if (!have) d = index->distance_to(nq.q.data(), n), have = true;
          keep_best(heap, need, {d, id});
        }
      }
      return inner;
    }
    std::vector<float> v;
    Value fv;
    const Field* f = nq.field;
    return each_passing([&](int64_t id, std::string_view b) {
      inner = decode_field(b, f->id, &fv, &c);
      if (inner.is_ok() && fv.kind() == Kind::Vector && nq.shape().prepare_query(fv.vec().data(), &v, f->name).is_ok())
        keep_best(heap, need, {distance(nq.metric, nq.q.data(), v.data(), f->type.dim), id});
    });
  };
  thread_local std::vector<int64_t> ids;
  auto expand = [&](const std::vector<Hit>& hits) {
    heap.clear();
    for (const Hit& h : hits) index->prefetch_docs(h.node);  // the misses side by side
    for (const Hit& h : hits) {
      ids.clear();
      index->docs_of(h.node, &ids);
      for (int64_t id : ids)
        if (passes(id)) keep_best(heap, need, {h.distance, id});
    }
  };
  switch (nq.how) {
    case NearQuery::How::Exact:
      if (index && !st.where) {
        thread_local std::vector<Hit> hits;
        index->exact(nq.q.data(), need, nullptr, &hits, true);  // ties ordered by id, as everywhere
        expand(hits);
      } else {
        KF_TRY(exact_filtered());
      }
      break;
    case NearQuery::How::Graph: {
      thread_local std::vector<Hit> hits;
      if (!st.where) {
        index->search(nq.q.data(), need, nq.ef, nullptr, &hits);
        expand(hits);
        break;
      }
      std::vector<int64_t> tmp;
      std::function<bool(uint32_t)> accept = [&](uint32_t node) {
        tmp.clear();
        index->docs_of(node, &tmp);
        for (int64_t id : tmp)
          if (passes(id)) return true;
        return false;
      };
      index->search(nq.q.data(), need, nq.ef, accept, &hits);
      KF_TRY(inner);
      expand(hits);
      if (heap.size() < need) {
        nq.fell_back = true;
        KF_TRY(exact_filtered());
      }
      break;
    }
  }
  KF_TRY(inner);
  std::sort(heap.begin(), heap.end());
  return Status::ok();
}

namespace {

class Near : public Source {
 public:
  Near(ExecContext& x, int node, NearQuery nq) : Source(x, node), nq_(std::move(nq)) {}

 protected:
  Status produce() override {
    thread_local std::vector<DocHit> heap;
    KF_TRY(near_hits(x_, nq_, &heap));
    if (nq_.fell_back && x_.plan.describe())
      x_.plan.node(node_).detail += "; the graph gave too few: exact over the filtered documents";
    Row r;
    for (const DocHit& h : heap) {
      const uint64_t* loc = x_.c.ids.find(h.id);
      if (!loc) continue;
      r.id = h.id;
      r.body = x_.body(*loc);
      r.decoded = false;
      r.distance = shown_distance(nq_.metric, h.distance);
      if (!emit(r)) break;
    }
    return Status::ok();
  }

 private:
  NearQuery nq_;
};

}  // namespace

int plan_near(Plan& plan, const Collection& c, const NearQuery& nq, std::string why) {
  int n = plan.add(nq.how == NearQuery::How::Graph ? "near graph" : "near exact");
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    d = c.def.name + "." + nq.field->name + ": ";
    if (!nq.index) d += "the documents' vectors, no index";
    else if (nq.how == NearQuery::How::Graph) d += "hnsw search, ef " + std::to_string(nq.ef);
    else d += "the vector table";
    if (!why.empty()) d += "; " + why;
  }
  return n;
}

std::unique_ptr<Source> make_near(ExecContext& x, int node, NearQuery nq) {
  return std::make_unique<Near>(x, node, std::move(nq));
}

}  // namespace kitfox
