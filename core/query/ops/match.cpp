// match: full-text search, BM25 top-k over a @text index (WAND, testing the
// filter while merging), best first; fuse: its top candidates and a near
// search's merged by reciprocal rank fusion; rerank: its top candidates
// ordered by distance to a vector instead.
#include "ops.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "../../index/text.h"

namespace kitfox {

Status resolve_match(Engine& eng, Collection& c, const ParsedStatement& st, const Evaluator& ev, size_t need,
                     MatchQuery* mq) {
  if (st.count) return Status(Code::Syntax, "'count' cannot be combined with 'match'", st.match_pos);
  if (!st.order.empty())
    return Status(Code::Syntax, "'match' orders rows by score; it cannot be combined with 'order'", st.order[0].pos);
  if (st.near_pos >= 0 && !st.fuse)
    return Status(Code::Syntax, "'match' and 'near' together need 'fuse' (reciprocal rank fusion)", st.near_pos);
  if (st.fuse && st.near_pos < 0) return Status(Code::Syntax, "'fuse' needs both 'match' and 'near'", st.fuse_pos);
  if (st.fuse && st.rerank_pos >= 0) return Status(Code::Syntax, "'rerank' cannot be combined with 'fuse'", st.rerank_pos);
  const Field* f = c.def.field(st.match_field);
  if (!f) return not_found_field(st.match_field, c.def, st.match_pos);
  if (f->index.kind != IndexKind::Text)
    return Status(Code::Invalid, "'match' needs a @text index on '" + f->name + "' (create index on " + c.def.name + " (" +
                                     f->name + ") @text)", st.match_pos);
  mq->field = f;
  Value qv;
  KF_TRY(ev.constant(*st.match_value, &qv));
  if (qv.kind() != Kind::Text)
    return Status(Code::Type, std::string("'match' takes text, got ") + kind_name(qv.kind()), st.match_value->pos);
  tokenize_text(qv.as_string(), &mq->tokens);
  mq->need = need;
  KF_ASSIGN(mq->candidates, count_arg(ev, st.candidates, "candidates"));
  if (st.fuse) {
    KF_ASSIGN(int64_t k, count_arg(ev, st.fuse_k, "k"));
    mq->k = k < 0 ? 60.0 : (double)k;
  }
  if (st.rerank_pos >= 0) {
    const Field* vf = c.def.field(st.rerank_field);
    if (!vf) return not_found_field(st.rerank_field, c.def, st.rerank_pos);
    if (vf->type.kind != TypeKind::Vector)
      return Status(Code::Type, "'rerank' needs a vector field; '" + vf->name + "' is " + type_name(vf->type), st.rerank_pos);
    Value raw, rv;
    KF_TRY(ev.constant(*st.rerank_value, &raw));
    Type qt = vf->type;
    qt.f16 = false;
    Status cs = coerce(raw, qt, "rerank " + vf->name, &rv);
    if (!cs.is_ok()) return Status(cs.code(), cs.message(), st.rerank_value->pos);
    auto vi = c.vindex.find(vf->id);
    HnswParams params = vi != c.vindex.end() ? vi->second->params() : HnswParams{};
    mq->rerank = vf;
    mq->metric = params.metric;
    mq->shape = std::make_unique<HnswIndex>(vf->type.dim, false, params);
    Status ps = mq->shape->prepare_query(rv.vec().data(), &mq->rq, "rerank " + vf->name);
    if (!ps.is_ok()) return Status(ps.code(), ps.message(), st.rerank_value->pos);
  }
  KF_ASSIGN(mq->index, eng.text_index(c, *f));
  return Status::ok();
}

namespace {

class Match : public Source {
 public:
  Match(ExecContext& x, int node, MatchQuery mq, std::unique_ptr<NearQuery> nq)
      : Source(x, node), mq_(std::move(mq)), nq_(std::move(nq)) {}

 protected:
  Status produce() override {
    Collection& c = x_.c;
    const ParsedStatement& st = x_.st;
    Status inner;
    RowFilter filter(x_.ev, st.where.get(), c);
    std::function<bool(int64_t)> accept;
    if (st.where)
      accept = [&](int64_t id) {
        const uint64_t* loc = c.ids.find(id);
        if (!loc) return false;
        bool pass;
        inner = filter.test(id, x_.body(*loc), &pass);
        return inner.is_ok() && pass;
      };
    struct Out {
      int64_t id;
      double score;
      double distance;  // rerank
    };
    std::vector<Out> rows;
    std::vector<TextHit> hits;
    const size_t need = mq_.need;
    const int64_t cand = mq_.candidates;
    // Candidates past the collection's documents are all of them (in 64
    // bits: size_t holds 32 in WASM).
    const size_t cands = cand < 0 ? 0 : (size_t)std::min<uint64_t>((uint64_t)cand, c.ids.size());
    if (nq_) {  // fuse
      size_t n = cand < 0 ? std::max<size_t>(100, need) : std::max<size_t>(cands, need);
      mq_.index->search(mq_.tokens, n, accept, &hits);
      KF_TRY(inner);
      std::vector<DocHit> near;
      KF_TRY(near_hits(x_, *nq_, &near));
      std::unordered_map<int64_t, double> fused;
      for (size_t i = 0; i < hits.size(); i++) fused[hits[i].id] += 1.0 / (mq_.k + (double)(i + 1));
      for (size_t i = 0; i < near.size(); i++) fused[near[i].id] += 1.0 / (mq_.k + (double)(i + 1));
      for (auto& [id, sc] : fused) rows.push_back({id, sc, 0});
      std::sort(rows.begin(), rows.end(), [](const Out& a, const Out& b) { return a.score > b.score || (a.score == b.score && a.id < b.id); });
    } else if (mq_.rerank) {
      const Field* vf = mq_.rerank;
      std::vector<float> v;
      size_t n = cand < 0 ? std::max<size_t>(100, need) : cands;
      mq_.index->search(mq_.tokens, n, accept, &hits);
      KF_TRY(inner);
      std::vector<Out> without;  // matches with no vector (or none a distance takes): last, in their text order
      for (const TextHit& h : hits) {
        const uint64_t* loc = c.ids.find(h.id);
        if (!loc) continue;
        Value fvv;
        KF_TRY(decode_field(x_.body(*loc), vf->id, &fvv, &c));
        if (fvv.kind() != Kind::Vector || !mq_.shape->prepare_query(fvv.vec().data(), &v, vf->name).is_ok())
          without.push_back({h.id, h.score, std::numeric_limits<double>::quiet_NaN()});
        else
          rows.push_back({h.id, h.score, (double)distance(mq_.metric, mq_.rq.data(), v.data(), vf->type.dim)});
      }
      std::sort(rows.begin(), rows.end(), [](const Out& a, const Out& b) { return a.distance < b.distance || (a.distance == b.distance && a.id < b.id); });
      rows.insert(rows.end(), without.begin(), without.end());
    } else {
      mq_.index->search(mq_.tokens, need, accept, &hits);
      KF_TRY(inner);
      for (const TextHit& h : hits) rows.push_back({h.id, h.score, 0});
    }
    Row r;
    for (size_t i = 0; i < rows.size() && i < need; i++) {
      const uint64_t* loc = c.ids.find(rows[i].id);
      if (!loc) continue;
      r.id = rows[i].id;
      r.body = x_.body(*loc);
      r.decoded = false;
      r.score = rows[i].score;
      r.distance = !mq_.rerank ? 0 : std::isnan(rows[i].distance) ? rows[i].distance : shown_distance(mq_.metric, (float)rows[i].distance);
      if (!emit(r)) break;
    }
    return Status::ok();
  }

 private:
  MatchQuery mq_;
  std::unique_ptr<NearQuery> nq_;
};

}  // namespace

int plan_match(Plan& plan, const Collection& c, const ParsedStatement& st, const MatchQuery& mq, int input) {
  int n = plan.add(st.fuse ? "fuse" : st.rerank_pos >= 0 ? "rerank" : "match", input);
  if (plan.describe()) {
    std::string& d = plan.node(n).detail;
    d = "match " + c.def.name + "." + mq.field->name + ": bm25 top-k (wand) over " + counted_text(mq.tokens.size(), "token") +
        (st.where ? ", filtering while merging" : "");
    if (st.fuse) d += "; reciprocal rank fusion with the near search, k " + std::to_string((int64_t)mq.k);
    if (mq.rerank) d += "; the candidates ordered by distance to " + mq.rerank->name;
  }
  return n;
}

std::unique_ptr<Source> make_match(ExecContext& x, int node, MatchQuery mq, std::unique_ptr<NearQuery> nq) {
  return std::make_unique<Match>(x, node, std::move(mq), std::move(nq));
}

}  // namespace kitfox
