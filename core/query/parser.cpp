#include "parser.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "../codec.h"
#include "../engine_limits.h"
#include "lexer.h"

namespace kitfox {

namespace {

bool iequals(std::string_view a, const char* b);

// Where Parser::literal writes a list or object of literals: the codec's
// value encoding, one buffer, no value per field or element. A put keeps
// its documents so until the writer types them against their collection;
// any other literal is decoded into its Value once.
struct CodecOut {
  std::string* b;
  std::vector<std::pair<size_t, size_t>>* keys;  // the open objects' keys: offset and length in *b
  void integer(int64_t i) { put_u8(*b, kInt); put_varint(*b, zigzag(i)); }
  void real(double f) { put_u8(*b, kFloat); b->append((const char*)&f, 8); }
  void text(std::string_view s) { put_u8(*b, kText); put_str(*b, s); }
  void boolean(bool x) { put_u8(*b, x ? kTrue : kFalse); }
  void null() { put_u8(*b, kNull); }
  // A list's or object's count comes before its items: one byte is kept
  // for it, widened once the count is known to need more.
  static void count_at(std::string& b, size_t at, uint64_t n) {
    char buf[10];
    int k = 0;
    while (n >= 0x80) { buf[k++] = (char)(n | 0x80); n >>= 7; }
    buf[k++] = (char)n;
    b[at] = buf[0];
    if (k > 1) b.insert(at + 1, buf + 1, k - 1);
  }
  struct List;
  struct Object;
  List list(size_t);
  Object object(size_t);
};

struct CodecOut::List {
  CodecOut o;
  size_t at, n = 0;
  CodecOut item() { n++; return o; }
  size_t size() const { return n; }
  void done() { count_at(*o.b, at, n); }
};

struct CodecOut::Object {
  CodecOut o;
  size_t at, base;  // base: this object's first key in *o.keys
  size_t size() const { return o.keys->size() - base; }
  std::string_view key(size_t i) const {
    auto [p, n] = (*o.keys)[base + i];
    return std::string_view(*o.b).substr(p, n);
  }
  CodecOut value(std::string_view k) {
    put_varint(*o.b, k.size());
    o.keys->push_back({o.b->size(), k.size()});
    o.b->append(k);
    return o;
  }
  void done() {
    size_t n = size();
    o.keys->resize(base);
    count_at(*o.b, at, n);
  }
};

CodecOut::List CodecOut::list(size_t) {
  put_u8(*b, kList);
  b->push_back(0);
  return {*this, b->size() - 1};
}

CodecOut::Object CodecOut::object(size_t) {
  put_u8(*b, kObject);
  b->push_back(0);
  return {*this, b->size() - 1, keys->size()};
}

// An object expression's keys, as repeated() reads them.
struct KeyList {
  const std::vector<std::string>& keys;
  size_t size() const { return keys.size(); }
  std::string_view key(size_t i) const { return keys[i]; }
};

class Parser {
 public:
  Parser(std::vector<Token>& toks, const std::vector<std::string>& decoded, std::string_view text)
      : t_(toks), decoded_(decoded), text_(text) {}

  Status statement(ParsedStatement* st);

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { const Token& t = t_[i_]; if (i_ + 1 < t_.size()) i_++; return t; }
  bool is_kw(const char* kw, size_t k = 0) const {
    const Token& t = peek(k);
    return t.kind == Tok::Ident && iequals(t.text, kw);
  }
  bool accept_kw(const char* kw) {
    if (!is_kw(kw)) return false;
    next();
    return true;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  Status expected(const std::string& what) const {
    const Token& t = peek();
    std::string msg = "expected " + what + ", got ";
    if (t.kind == Tok::End) {
      msg += "end of statement";
    } else {
      msg += '\'';
      msg += t.text;
      msg += '\'';
    }
    return Status(Code::Syntax, std::move(msg), t.pos);
  }
  Status expect_kw(const char* kw) {
    if (accept_kw(kw)) return Status::ok();
    std::string what = "'";
    what += kw;
    what += '\'';
    return expected(what);
  }
  Status expect(Tok k) {
    if (accept(k)) return Status::ok();
    return expected(tok_name(k));
  }
  Status name(std::string* out, int64_t* pos, const char* what) {
    if (peek().kind != Tok::Ident) return expected(what);
    if (peek().text.size() > kMaxNameBytes) return Status(Code::Limit, std::string(what) + " is longer than 256 bytes", peek().pos);
    *pos = peek().pos;
    *out = std::string(next().text);
    return Status::ok();
  }
  Status path(std::vector<std::string>* out, int64_t* pos);
  Status type(Type* out);
  Status field_decl(FieldDecl* out);
  Status index_spec(IndexSpec* out);
  Status index_target(ParsedStatement* st);  // on C (path)
  // A literal, a parameter, a list or an object. `fold`: a list or object
  // of literals only becomes one Literal, parsed straight into its value.
  // `encode`: a folded list or object goes into Expr::encoded, not a Value.
  Status value_expr(ExprPtr* out, int depth, bool fold = true, bool encode = false);
  // A list or object of literals only (value_expr checked that no
  // parameter is among them), into `out`; false with *err set.
  // `keys`: an object's likely number of keys (its sibling's before it in
  // a list), 0 to count them first.
  bool literal(CodecOut out, int depth, LiteralPositions* parts, bool top, Status* err, size_t keys = 0);
  size_t last_keys_ = 0;  // the key count of the object literal() last finished
  std::vector<std::pair<size_t, size_t>> codec_keys_;  // CodecOut: the open objects' keys
  // How many elements (or keys) the list (or object) opening at token i
  // holds, at most: its commas one level down, plus one.
  size_t parts_in(size_t i) const {
    size_t commas = 0, open = 0;
    for (size_t j = i; j < t_.size(); j++) {
      Tok k = t_[j].kind;
      if (k == Tok::LBracket || k == Tok::LBrace) open++;
      else if (k == Tok::RBracket || k == Tok::RBrace) {
        if (--open == 0) break;
      } else if (k == Tok::Comma && open == 1) commas++;
      else if (k == Tok::End) break;
    }
    return commas + 1;
  }
  Status expr(ExprPtr* out, int depth);
  Status and_expr(ExprPtr* out, int depth);
  Status not_expr(ExprPtr* out, int depth);
  Status predicate(ExprPtr* out, int depth);
  Status operand(ExprPtr* out, int depth);
  Status get_clauses(ParsedStatement* st);
  // An object's keys so far, for the check that none is given twice: a
  // scan while there are few, a hash set past that (filled as it goes), so
  // an object of many keys is not checked in quadratic time.
  struct KeySet {
    std::unordered_set<std::string> set;
    size_t n = 0;  // keys[0..n) are in the set
  };
  template <typename Object>
  static bool repeated(const Object& obj, std::string_view key, KeySet* seen) {
    constexpr size_t kScan = 16;
    size_t n = obj.size();
    if (n <= kScan) {
      for (size_t i = 0; i < n; i++)
        if (obj.key(i) == key) return true;
      return false;
    }
    for (; seen->n < n; seen->n++) seen->set.insert(std::string(obj.key(seen->n)));
    return seen->set.count(std::string(key)) != 0;
  }
  Status depth_check(int depth) const {
    if (depth > kMaxDepth) return Status(Code::Limit, "statement nested deeper than " + std::to_string(kMaxDepth) + " levels", peek().pos);
    return Status::ok();
  }

  // A select item or order key: a path, or any expression labelled by its text.
  template <typename Item>
  Status item(Item* out);

  std::vector<Token>& t_;
  const std::vector<std::string>& decoded_;
  std::string_view text_;
  std::string_view str(const Token& t) const { return token_string(t, decoded_); }
  size_t i_ = 0;
  int depth_ = 0;  // lookup nesting
};

bool iequals(std::string_view a, const char* b) {
  size_t n = strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; i++) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c += 32;
    if (c != b[i]) return false;
  }
  return true;
}

}  // namespace

bool is_put_text(std::string_view text) {
  const std::string_view w = first_word(text);
  return iequals(w, "put") || iequals(w, "insert");
}

namespace {

ExprPtr make(ExprKind k, int64_t pos) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->pos = pos;
  return e;
}

Status Parser::path(std::vector<std::string>* out, int64_t* pos) {
  std::string n;
  KF_TRY(name(&n, pos, "a field name"));
  out->push_back(std::move(n));
  while (peek().kind == Tok::Dot) {
    next();
    int64_t p;
    if (peek().kind == Tok::String) {  // meta."odd key"
      out->push_back(std::string(str(next())));
      continue;
    }
    KF_TRY(name(&n, &p, "a key after '.'"));
    out->push_back(std::move(n));
  }
  return Status::ok();
}

Status Parser::type(Type* out) {
  const Token& t = peek();
  if (accept(Tok::LBracket)) {
    Type elem;
    KF_TRY(type(&elem));
    if (elem.kind == TypeKind::List || elem.kind == TypeKind::Vector)
      return Status(Code::Syntax, "list elements must be a scalar type or json", t.pos + 1);
    KF_TRY(expect(Tok::RBracket));
    out->kind = TypeKind::List;
    out->elem = elem.kind;
    return Status::ok();
  }
  static const struct { const char* n; TypeKind k; } kScalars[] = {
      {"bool", TypeKind::Bool}, {"int", TypeKind::Int}, {"float", TypeKind::Float},
      {"text", TypeKind::Text}, {"bytes", TypeKind::Bytes}, {"timestamp", TypeKind::Timestamp},
      {"json", TypeKind::Json}};
  for (auto& s : kScalars)
    if (accept_kw(s.n)) {
      out->kind = s.k;
      return Status::ok();
    }
  if (accept_kw("vector")) {
    KF_TRY(expect(Tok::Lt));
    if (peek().kind != Tok::Int) return expected("the vector's dimension");
    const Token& d = next();
    if (d.i < 1 || d.i > kMaxVectorDim)
      return Status(Code::Limit, "vector dimension must be between 1 and " + std::to_string(kMaxVectorDim), d.pos);
    out->kind = TypeKind::Vector;
    out->dim = (uint32_t)d.i;
    if (accept(Tok::Comma)) {
      if (accept_kw("f16")) out->f16 = true;
      else if (!accept_kw("f32")) return expected("'f16' or 'f32'");
    }
    return expect(Tok::Gt);
  }
  return expected("a type (bool, int, float, text, bytes, timestamp, json, [T], vector<N>)");
}

Status Parser::field_decl(FieldDecl* out) {
  KF_TRY(name(&out->name, &out->pos, "a field name"));
  if (out->name == "id") return Status(Code::Invalid, "'id' is every document's id and cannot be declared", out->pos);
  KF_TRY(type(&out->type));
  out->required = accept_kw("required");
  while (peek().kind == Tok::At) {
    int64_t at = peek().pos;
    IndexSpec spec;
    KF_TRY(index_spec(&spec));
    if (spec.kind == IndexKind::Hash || spec.kind == IndexKind::Unique || spec.kind == IndexKind::Sorted) {
      if (std::find(out->secondary.begin(), out->secondary.end(), spec.kind) != out->secondary.end())
        return Status(Code::Syntax, "'" + out->name + "' is given @" + secondary_name(spec.kind) + " twice", at);
      out->secondary.push_back(spec.kind);
      continue;
    }
    if (out->index.kind != IndexKind::None) return Status(Code::Syntax, "a field takes one @hnsw or @text index", at);
    out->index = spec;
    if (out->index.kind == IndexKind::Hnsw && out->type.kind != TypeKind::Vector)
      return Status(Code::Type, "@hnsw indexes vector fields; '" + out->name + "' is " + type_name(out->type), at);
    if (out->index.kind == IndexKind::Text && out->type.kind != TypeKind::Text &&
        !(out->type.kind == TypeKind::List && out->type.elem == TypeKind::Text))
      return Status(Code::Type, "@text indexes text fields; '" + out->name + "' is " + type_name(out->type), at);
  }
  return Status::ok();
}

Status Parser::index_target(ParsedStatement* st) {
  KF_TRY(expect_kw("on"));
  KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
  KF_TRY(expect(Tok::LParen));
  KF_TRY(path(&st->index_path, &st->field_pos));
  st->field = st->index_path[0];
  return expect(Tok::RParen);
}

// @hnsw [( [metric] [, m=N] [, ef_construction=N] [, ef_search=N] )]
Status Parser::index_spec(IndexSpec* out) {
  KF_TRY(expect(Tok::At));
  if (accept_kw("hash")) { out->kind = IndexKind::Hash; return Status::ok(); }
  if (accept_kw("unique")) { out->kind = IndexKind::Unique; return Status::ok(); }
  if (accept_kw("sorted")) { out->kind = IndexKind::Sorted; return Status::ok(); }
  if (accept_kw("text")) {
    out->kind = IndexKind::Text;
    if (!accept(Tok::LParen)) return Status::ok();
    if (accept(Tok::RParen)) return Status::ok();
    for (;;) {
      if (!is_kw("k1") && !is_kw("b")) return expected("k1= or b=");
      bool k1 = is_kw("k1");
      next();
      KF_TRY(expect(Tok::Eq));
      const Token& v = peek();
      if (v.kind != Tok::Int && v.kind != Tok::Float) return expected("a number");
      double x = v.kind == Tok::Int ? (double)v.i : v.f;
      next();
      if (k1 && (x < 0 || x > 100)) return Status(Code::Invalid, "k1 must be between 0 and 100", v.pos);
      if (!k1 && (x < 0 || x > 1)) return Status(Code::Invalid, "b must be between 0 and 1", v.pos);
      (k1 ? out->text.k1 : out->text.b) = x;
      if (accept(Tok::Comma)) continue;
      return expect(Tok::RParen);
    }
  }
  if (!accept_kw("hnsw")) return expected("an index kind (@hash, @unique, @sorted, @text, @hnsw)");
  out->kind = IndexKind::Hnsw;
  if (!accept(Tok::LParen)) return Status::ok();
  if (accept(Tok::RParen)) return Status::ok();
  for (;;) {
    const Token& t = peek();
    if (accept_kw("cosine")) out->hnsw.metric = Metric::Cosine;
    else if (accept_kw("l2")) out->hnsw.metric = Metric::L2;
    else if (accept_kw("dot")) out->hnsw.metric = Metric::Dot;
    else if (t.kind == Tok::Ident && (is_kw("m") || is_kw("ef_construction") || is_kw("ef_search") || is_kw("metric"))) {
      std::string key(next().text);
      KF_TRY(expect(Tok::Eq));
      if (key == "metric") {
        if (accept_kw("cosine")) out->hnsw.metric = Metric::Cosine;
        else if (accept_kw("l2")) out->hnsw.metric = Metric::L2;
        else if (accept_kw("dot")) out->hnsw.metric = Metric::Dot;
        else return expected("cosine, l2 or dot");
      } else {
        if (peek().kind != Tok::Int) return expected("a number");
        const Token& v = next();
        if (key == "m") {
          if (v.i < HnswParams::kMinM || v.i > HnswParams::kMaxM)
            return Status(Code::Invalid, "m must be between " + std::to_string(HnswParams::kMinM) + " and " +
                                             std::to_string(HnswParams::kMaxM), v.pos);
          out->hnsw.m = (uint32_t)v.i;
        } else {
          if (v.i < HnswParams::kMinEf || v.i > HnswParams::kMaxEf)
            return Status(Code::Invalid, key + " must be between " + std::to_string(HnswParams::kMinEf) + " and " +
                                             std::to_string(HnswParams::kMaxEf), v.pos);
          (key == "ef_construction" ? out->hnsw.ef_construction : out->hnsw.ef_search) = (uint32_t)v.i;
        }
      }
    } else {
      return expected("cosine, l2, dot, m=, ef_construction= or ef_search=");
    }
    if (accept(Tok::Comma)) continue;
    return expect(Tok::RParen);
  }
}

// Where a put body's documents (a list's items, or the object itself) and
// their keys stood: as `literal` records them for a folded body.
static void body_positions(const Expr& body, LiteralPositions* lp) {
  auto keys_of = [&](const Expr& e) {
    if (e.kind == ExprKind::ObjectLit)
      for (const ExprPtr& k : e.kids) lp->key.push_back(k->pos);
    else if (e.parts)  // an element of literals only, folded
      lp->key.insert(lp->key.end(), e.parts->key.begin(), e.parts->key.end());
  };
  if (body.kind != ExprKind::ListLit) return keys_of(body);
  for (const ExprPtr& k : body.kids) {
    lp->item.push_back(k->pos);
    lp->key_start.push_back((uint32_t)lp->key.size());
    keys_of(*k);
  }
  lp->key_start.push_back((uint32_t)lp->key.size());
}

bool Parser::literal(CodecOut out, int depth, LiteralPositions* parts, bool top, Status* err, size_t keys) {
  *err = depth_check(depth);
  if (!err->is_ok()) return false;
  Token& t = t_[i_];
  switch (t.kind) {
    case Tok::Int: out.integer(next().i); return true;
    case Tok::Float: out.real(next().f); return true;
    case Tok::String: out.text(str(t)); next(); return true;
    case Tok::Minus: {
      const Token& n = peek(1);
      if (n.kind == Tok::Int) {
        next();
        int64_t v = next().i;
        out.integer(v == INT64_MIN ? v : -v);
        return true;
      }
      if (n.kind == Tok::Float) {
        next();
        out.real(-next().f);
        return true;
      }
      *err = Status(Code::Syntax, "expected a number after '-'", n.pos);
      return false;
    }
    case Tok::Ident:
      if (is_kw("true") || is_kw("false")) {
        out.boolean(is_kw("true"));
        next();
        return true;
      }
      if (is_kw("null")) {
        next();
        out.null();
        return true;
      }
      *err = expected("a value");
      return false;
    case Tok::LBracket: {
      size_t n = parts_in(i_);
      next();
      auto items = out.list(n);
      if (top) {
        parts->item.reserve(n);
        parts->key_start.reserve(n + 1);
      }
      if (!accept(Tok::RBracket)) {
        for (;;) {
          if (top) {
            // After the first document, room for as many keys in each, but
            // no more than the statement's tokens could hold (a key takes
            // three: the key, the colon, the value).
            if (items.size() == 1) parts->key.reserve(std::min(parts->key.size() * n, t_.size() / 3 + 1));
            parts->item.push_back(peek().pos);
            parts->key_start.push_back((uint32_t)parts->key.size());
          }
          size_t sibling = items.size() ? last_keys_ : 0;
          if (!literal(items.item(), depth + 1, top && peek().kind == Tok::LBrace ? parts : nullptr, false, err, sibling))
            return false;
          if (accept(Tok::Comma)) {
            if (accept(Tok::RBracket)) break;  // trailing comma
            continue;
          }
          if (!accept(Tok::RBracket)) {
            *err = expect(Tok::RBracket);
            return false;
          }
          break;
        }
      }
      items.done();
      if (top) parts->key_start.push_back((uint32_t)parts->key.size());
      return true;
    }
    case Tok::LBrace: {
      size_t n = keys ? keys : parts_in(i_);  // a guess too few or too many only costs a regrowth
      next();
      auto obj = out.object(n);
      KeySet seen;
      std::string dotted;
      while (peek().kind != Tok::RBrace) {
        const Token& k = peek();
        std::string_view key;
        if (k.kind == Tok::Ident) key = k.text;
        else if (k.kind == Tok::String) key = str(k);
        else {
          *err = expected("a key");
          return false;
        }
        int64_t kpos = k.pos;
        next();
        if (peek().kind == Tok::Dot) {  // a dotted key, as value_expr joins it
          dotted = key;
          while (peek().kind == Tok::Dot) {
            next();
            const Token& k2 = peek();
            if (k2.kind != Tok::Ident && k2.kind != Tok::String) {
              *err = expected("a key after '.'");
              return false;
            }
            dotted += '.';
            dotted += k2.kind == Tok::Ident ? std::string_view(k2.text) : str(k2);
            next();
          }
          key = dotted;
        }
        if (repeated(obj, key, &seen)) {
          *err = Status(Code::Syntax, "key '" + std::string(key) + "' appears twice", kpos);
          return false;
        }
        if (!accept(Tok::Colon)) {
          *err = expect(Tok::Colon);
          return false;
        }
        if (parts) parts->key.push_back(kpos);
        if (!literal(obj.value(key), depth + 1, nullptr, false, err)) return false;  // in its place
        if (accept(Tok::Comma)) continue;
        if (peek().kind != Tok::RBrace) {
          *err = expect(Tok::RBrace);
          return false;
        }
      }
      next();
      last_keys_ = obj.size();
      obj.done();
      return true;
    }
    default:
      *err = expected("a value");
      return false;
  }
}

Status Parser::value_expr(ExprPtr* out, int depth, bool fold, bool encode) {
  KF_TRY(depth_check(depth));
  const Token& t = peek();
  if (fold && (t.kind == Tok::LBracket || t.kind == Tok::LBrace)) {
    // Literals straight into their value; a parameter among them sends the
    // whole back to the expression nodes below.
    // Literals only, up to the closing bracket? (Then the strings can be
    // moved out of their tokens: nothing is parsed twice.)
    bool only = true;
    for (size_t j = i_, open = 0; j < t_.size(); j++) {
      Tok k = t_[j].kind;
      if (k == Tok::LBracket || k == Tok::LBrace) open++;
      else if (k == Tok::RBracket || k == Tok::RBrace) {
        if (--open == 0) break;
      } else if (k == Tok::Param || k == Tok::End || k == Tok::LParen) {
        only = false;
        break;
      }
    }
    if (!only) return value_expr(out, depth, false);
    auto parts = std::make_unique<LiteralPositions>();
    Status err;
    int64_t pos = t.pos;
    ExprPtr e = make(ExprKind::Literal, pos);
    // About as many bytes as the text, in one allocation.
    e->encoded.reserve(std::min<size_t>(text_.size() - t.pos, size_t(64) << 20));
    codec_keys_.clear();
    if (!literal(CodecOut{&e->encoded, &codec_keys_}, depth, parts.get(), true, &err)) return err;
    if (!encode) {
      Reader r(e->encoded);
      KF_TRY(decode_value(r, &e->value));
      std::string().swap(e->encoded);
    }
    e->parts = std::move(parts);
    *out = std::move(e);
    return Status::ok();
  }
  switch (t.kind) {
    case Tok::Int: *out = make(ExprKind::Literal, t.pos); (*out)->value = Value::integer(next().i); return Status::ok();
    case Tok::Float: *out = make(ExprKind::Literal, t.pos); (*out)->value = Value::real(next().f); return Status::ok();
    case Tok::String: *out = make(ExprKind::Literal, t.pos); (*out)->value = Value::text(std::string(str(next()))); return Status::ok();
    case Tok::Param: *out = make(ExprKind::Param, t.pos); (*out)->param = (int)next().i; return Status::ok();
    case Tok::Minus: {
      int64_t pos = next().pos;
      const Token& n = peek();
      if (n.kind == Tok::Int) {
        *out = make(ExprKind::Literal, pos);
        int64_t v = next().i;
        (*out)->value = Value::integer(v == INT64_MIN ? v : -v);
        return Status::ok();
      }
      if (n.kind == Tok::Float) {
        *out = make(ExprKind::Literal, pos);
        (*out)->value = Value::real(-next().f);
        return Status::ok();
      }
      return expected("a number after '-'");
    }
    case Tok::LBracket: {
      *out = make(ExprKind::ListLit, next().pos);
      if (accept(Tok::RBracket)) return Status::ok();
      for (;;) {
        ExprPtr e;
        KF_TRY(value_expr(&e, depth + 1));
        (*out)->kids.push_back(std::move(e));
        if (accept(Tok::Comma)) {
          if (accept(Tok::RBracket)) return Status::ok();  // trailing comma
          continue;
        }
        return expect(Tok::RBracket);
      }
    }
    case Tok::LBrace: {
      *out = make(ExprKind::ObjectLit, next().pos);
      if (accept(Tok::RBrace)) return Status::ok();
      KeySet seen;
      for (;;) {
        const Token& k = peek();
        std::string key;
        if (k.kind == Tok::Ident) key = std::string(k.text);
        else if (k.kind == Tok::String) key = std::string(str(k));
        else return expected("a key");
        next();
        // Keys may be dotted paths (set t {meta.a: 1}); joined with '.' here,
        // split again by the executor.
        while (peek().kind == Tok::Dot) {
          next();
          const Token& k2 = peek();
          if (k2.kind != Tok::Ident && k2.kind != Tok::String) return expected("a key after '.'");
          key += '.';
          key += k2.kind == Tok::Ident ? std::string_view(k2.text) : str(k2);
          next();
        }
        if (repeated(KeyList{(*out)->keys}, key, &seen)) return Status(Code::Syntax, "key '" + key + "' appears twice", k.pos);
        KF_TRY(expect(Tok::Colon));
        ExprPtr e;
        KF_TRY(value_expr(&e, depth + 1));
        e->pos = k.pos;  // errors about a value point at its key
        (*out)->keys.push_back(std::move(key));
        (*out)->kids.push_back(std::move(e));
        if (accept(Tok::Comma)) {
          if (accept(Tok::RBrace)) return Status::ok();
          continue;
        }
        return expect(Tok::RBrace);
      }
    }
    case Tok::Ident:
      if (is_kw("true") || is_kw("false")) {
        *out = make(ExprKind::Literal, t.pos);
        (*out)->value = Value::boolean(is_kw("true"));
        next();
        return Status::ok();
      }
      if (is_kw("null")) {
        *out = make(ExprKind::Literal, next().pos);
        return Status::ok();
      }
      [[fallthrough]];
    default:
      return expected("a value");
  }
}

Status Parser::operand(ExprPtr* out, int depth) {
  KF_TRY(depth_check(depth));
  const Token& t = peek();
  if (t.kind == Tok::LParen) {
    next();
    KF_TRY(expr(out, depth + 1));
    return expect(Tok::RParen);
  }
  if (t.kind == Tok::Ident && peek(1).kind == Tok::LParen) {
    static const char* kFunctions[] = {"cosine", "l2", "dot", "norm", "count", "sum", "avg", "min", "max"};
    std::string fname(t.text);
    bool known = false;
    for (const char* f : kFunctions) known |= iequals(t.text, f);
    if (!known)
      return Status(Code::Syntax, "unknown function '" + fname + "' (functions: cosine, l2, dot, norm, count, sum, avg, min, max)", t.pos);
    for (char& ch : fname) ch = (ch >= 'A' && ch <= 'Z') ? char(ch + 32) : ch;
    bool aggregate = fname == "count" || fname == "sum" || fname == "avg" || fname == "min" || fname == "max";
    *out = make(aggregate ? ExprKind::Aggregate : ExprKind::Call, t.pos);
    (*out)->path.push_back(fname);
    next();
    next();
    if (fname == "count" && peek().kind == Tok::Star) {  // count(*)
      next();
      return expect(Tok::RParen);
    }
    if (aggregate && fname == "count" && peek().kind == Tok::RParen) return expected("'*' or a field");
    if (!accept(Tok::RParen)) {
      for (;;) {
        ExprPtr a;
        KF_TRY(expr(&a, depth + 1));
        (*out)->kids.push_back(std::move(a));
        if (accept(Tok::Comma)) continue;
        KF_TRY(expect(Tok::RParen));
        break;
      }
    }
    size_t want = fname == "norm" || aggregate ? 1 : 2;
    if ((*out)->kids.size() != want)
      return Status(Code::Syntax, fname + "() takes " + std::to_string(want) + (want == 1 ? " argument" : " arguments"), t.pos);
    return Status::ok();
  }
  if (t.kind == Tok::Ident && !is_kw("true") && !is_kw("false") && !is_kw("null")) {
    *out = make(ExprKind::Path, t.pos);
    int64_t p;
    return path(&(*out)->path, &p);
  }
  return value_expr(out, depth);
}

Status Parser::predicate(ExprPtr* out, int depth) {
  ExprPtr lhs;
  KF_TRY(operand(&lhs, depth));
  const Token& t = peek();
  CmpOp op;
  bool cmp = true;
  switch (t.kind) {
    case Tok::Eq: op = CmpOp::Eq; break;
    case Tok::Ne: op = CmpOp::Ne; break;
    case Tok::Lt: op = CmpOp::Lt; break;
    case Tok::Le: op = CmpOp::Le; break;
    case Tok::Gt: op = CmpOp::Gt; break;
    case Tok::Ge: op = CmpOp::Ge; break;
    case Tok::Tilde: op = CmpOp::Contains; break;
    default: cmp = false; op = CmpOp::Eq;
  }
  if (cmp) {
    auto e = make(ExprKind::Compare, next().pos);
    e->op = op;
    ExprPtr rhs;
    KF_TRY(operand(&rhs, depth));
    e->kids.push_back(std::move(lhs));
    e->kids.push_back(std::move(rhs));
    *out = std::move(e);
    return Status::ok();
  }
  if (is_kw("has") || is_kw("in") || (is_kw("not") && is_kw("in", 1))) {
    bool neg = accept_kw("not");
    bool has = is_kw("has");
    auto e = make(has ? ExprKind::Has : ExprKind::In, next().pos);
    e->negate = neg;
    ExprPtr rhs;
    KF_TRY(operand(&rhs, depth));
    e->kids.push_back(std::move(lhs));
    e->kids.push_back(std::move(rhs));
    *out = std::move(e);
    return Status::ok();
  }
  if (is_kw("is")) {
    auto e = make(ExprKind::IsNull, next().pos);
    e->negate = accept_kw("not");
    KF_TRY(expect_kw("null"));
    e->kids.push_back(std::move(lhs));
    *out = std::move(e);
    return Status::ok();
  }
  *out = std::move(lhs);
  return Status::ok();
}

Status Parser::not_expr(ExprPtr* out, int depth) {
  KF_TRY(depth_check(depth));
  if (is_kw("not")) {
    auto e = make(ExprKind::Not, next().pos);
    ExprPtr k;
    KF_TRY(not_expr(&k, depth + 1));
    e->kids.push_back(std::move(k));
    *out = std::move(e);
    return Status::ok();
  }
  return predicate(out, depth);
}

// `and` and `or` chains are one node each, their terms its kids in order (a
// parenthesised chain of the same kind joins it): a chain of any length
// nests no deeper than one term, so nothing recurses once per term.
static void join(ExprKind kind, int64_t pos, ExprPtr* out, ExprPtr rhs) {
  if ((*out)->kind != kind) {
    ExprPtr e = make(kind, pos);
    e->kids.push_back(std::move(*out));
    *out = std::move(e);
  }
  if (rhs->kind == kind) {
    for (ExprPtr& k : rhs->kids) (*out)->kids.push_back(std::move(k));
  } else {
    (*out)->kids.push_back(std::move(rhs));
  }
}

Status Parser::and_expr(ExprPtr* out, int depth) {
  KF_TRY(not_expr(out, depth));
  while (is_kw("and")) {
    int64_t pos = next().pos;
    ExprPtr rhs;
    KF_TRY(not_expr(&rhs, depth));
    join(ExprKind::And, pos, out, std::move(rhs));
  }
  return Status::ok();
}

Status Parser::expr(ExprPtr* out, int depth) {
  KF_TRY(depth_check(depth));
  KF_TRY(and_expr(out, depth));
  while (is_kw("or")) {
    int64_t pos = next().pos;
    ExprPtr rhs;
    KF_TRY(and_expr(&rhs, depth));
    join(ExprKind::Or, pos, out, std::move(rhs));
  }
  return Status::ok();
}

template <typename Item>
Status Parser::item(Item* out) {
  out->pos = peek().pos;
  if (peek().kind == Tok::End) return expected("a field name");
  if (peek().kind == Tok::Ident && peek(1).kind != Tok::LParen) return path(&out->path, &out->pos);
  size_t first = i_;
  KF_TRY(operand(&out->expr, 0));
  const Token& last = t_[i_ - 1];
  size_t end = last.pos + last.text.size();
  out->label = std::string(text_.substr(t_[first].pos, end - t_[first].pos));
  return Status::ok();
}

Status Parser::get_clauses(ParsedStatement* st) {
  bool seen_select = false, seen_order = false;
  for (;;) {
    const Token& t = peek();
    if (accept_kw("select")) {
      if (seen_select) return Status(Code::Syntax, "'select' given twice", t.pos);
      seen_select = true;
      std::unordered_set<std::string> columns;  // each named once
      do {
        SelectItem s;
        KF_TRY(item(&s));
        // A row holds each key once: a column named twice (`n, n`, or
        // `j."a.b", j.a.b`, both named j.a.b) would lose one (id is always
        // the first column, and may be named again).
        std::string name = column_name(s);
        if (name != "id" && !columns.insert(name).second)
          return Status(Code::Syntax, "the column '" + name + "' is selected twice", s.pos);
        st->select.push_back(std::move(s));
      } while (accept(Tok::Comma));
    } else if (accept_kw("where")) {
      if (st->where) return Status(Code::Syntax, "'where' given twice", t.pos);
      KF_TRY(expr(&st->where, 0));
    } else if (accept_kw("order")) {
      if (seen_order) return Status(Code::Syntax, "'order' given twice", t.pos);
      seen_order = true;
      accept_kw("by");
      do {
        OrderKey k;
        KF_TRY(item(&k));
        if (accept_kw("desc")) k.desc = true;
        else accept_kw("asc");
        st->order.push_back(std::move(k));
      } while (accept(Tok::Comma));
    } else if (accept_kw("limit")) {
      if (st->limit) return Status(Code::Syntax, "'limit' given twice", t.pos);
      KF_TRY(value_expr(&st->limit, 0));
    } else if (accept_kw("offset")) {
      if (st->offset) return Status(Code::Syntax, "'offset' given twice", t.pos);
      KF_TRY(value_expr(&st->offset, 0));
    } else if (accept_kw("count")) {
      st->count = true;
    } else if (accept_kw("lookup")) {
      // Everything after `lookup ... on ...` belongs to the looked-up
      // collection: its clauses, and a nested lookup.
      if (depth_ > 4) return Status(Code::Limit, "a lookup nests at most 4 more inside it (5 in a chain)", t.pos);
      auto lk = std::make_unique<Lookup>();
      lk->pos = t.pos;
      KF_TRY(name(&lk->collection, &lk->pos, "a collection name"));
      KF_TRY(expect_kw("on"));
      KF_TRY(name(&lk->child_field, &lk->child_pos, "the child's key field"));
      if (accept(Tok::Eq)) {
        lk->parent_path.clear();
        int64_t p;
        KF_TRY(path(&lk->parent_path, &p));
      }
      lk->required = accept_kw("required");
      lk->child = std::make_unique<ParsedStatement>();
      lk->child->kind = StmtKind::Get;
      lk->child->collection = lk->collection;
      lk->child->pos = t.pos;
      depth_++;
      Status cs = get_clauses(lk->child.get());
      depth_--;
      KF_TRY(cs);
      if (lk->child->count || lk->child->near_pos >= 0 || lk->child->match_pos >= 0 || !lk->child->group.empty())
        return Status(Code::Syntax, "a lookup takes select, where, order, limit, offset and lookup", t.pos);
      st->lookup = std::move(lk);
    } else if (accept_kw("group")) {
      if (!st->group.empty()) return Status(Code::Syntax, "'group' given twice", t.pos);
      accept_kw("by");
      do {
        SelectItem g;
        KF_TRY(path(&g.path, &g.pos));
        st->group.push_back(std::move(g));
      } while (accept(Tok::Comma));
    } else if (accept_kw("match")) {
      if (st->match_pos >= 0) return Status(Code::Syntax, "'match' given twice", t.pos);
      KF_TRY(name(&st->match_field, &st->match_pos, "a text field"));
      KF_TRY(value_expr(&st->match_value, 0));
    } else if (accept_kw("fuse")) {
      if (st->fuse) return Status(Code::Syntax, "'fuse' given twice", t.pos);
      st->fuse = true;
      st->fuse_pos = t.pos;
      for (;;) {
        if (accept_kw("k")) KF_TRY(value_expr(&st->fuse_k, 0));
        else if (accept_kw("candidates")) KF_TRY(value_expr(&st->candidates, 0));
        else break;
      }
    } else if (accept_kw("rerank")) {
      if (st->rerank_pos >= 0) return Status(Code::Syntax, "'rerank' given twice", t.pos);
      KF_TRY(name(&st->rerank_field, &st->rerank_pos, "a vector field"));
      KF_TRY(value_expr(&st->rerank_value, 0));
      if (accept_kw("candidates")) KF_TRY(value_expr(&st->candidates, 0));
    } else if (accept_kw("near")) {
      if (st->near_pos >= 0) return Status(Code::Syntax, "'near' given twice", t.pos);
      KF_TRY(name(&st->near_field, &st->near_pos, "a vector field"));
      KF_TRY(value_expr(&st->near_value, 0));
      for (;;) {
        if (accept_kw("ef")) {
          if (st->near_ef) return Status(Code::Syntax, "'ef' given twice", t.pos);
          KF_TRY(value_expr(&st->near_ef, 0));
        } else if (accept_kw("exact")) {
          st->near_exact = true;
        } else {
          break;
        }
      }
    } else {
      return Status::ok();
    }
  }
}

// `set {j.a.b: 2, j.a: 1}`: one path inside another, where the later would
// undo the earlier. Sorted, a path comes right before the paths inside it.
static Status overlapping_paths(const std::vector<Assignment>& as) {
  std::vector<const Assignment*> by;
  by.reserve(as.size());
  for (const Assignment& a : as) by.push_back(&a);
  std::sort(by.begin(), by.end(), [](const Assignment* x, const Assignment* y) { return x->path < y->path; });
  for (size_t i = 1; i < by.size(); i++) {
    const auto& outer = by[i - 1]->path;
    const auto& inner = by[i]->path;
    if (inner.size() > outer.size() && std::equal(outer.begin(), outer.end(), inner.begin())) {
      const Assignment* later = by[i - 1]->pos > by[i]->pos ? by[i - 1] : by[i];
      return Status(Code::Syntax, "'" + kitfox::join(inner) + "' is inside '" + kitfox::join(outer) + "': set one or the other", later->pos);
    }
  }
  return Status::ok();
}

Status Parser::statement(ParsedStatement* st) {
  const Token& first = peek();
  st->pos = first.pos;
  if (accept_kw("explain")) {
    st->explain = true;
    st->analyze = accept_kw("analyze");
    if (!is_kw("get")) return expected(st->analyze ? "'get' after 'explain analyze'" : "'get' or 'analyze' after 'explain'");
  }
  if (is_kw("create") && is_kw("index", 1)) {
    next();
    next();
    st->kind = StmtKind::CreateIndex;
    if (accept_kw("if")) {
      KF_TRY(expect_kw("not"));
      KF_TRY(expect_kw("exists"));
      st->if_not_exists = true;
    }
    KF_TRY(index_target(st));
    st->index_pos = peek().pos;
    KF_TRY(index_spec(&st->index));
  } else if (is_kw("drop") && is_kw("index", 1)) {
    next();
    next();
    st->kind = StmtKind::DropIndex;
    if (accept_kw("if")) {
      KF_TRY(expect_kw("exists"));
      st->if_exists = true;
    }
    KF_TRY(index_target(st));
    if (peek().kind == Tok::At) KF_TRY(index_spec(&st->index));
  } else if (accept_kw("create")) {
    KF_TRY(expect_kw("collection"));
    st->kind = StmtKind::CreateCollection;
    if (accept_kw("if")) {
      KF_TRY(expect_kw("not"));
      KF_TRY(expect_kw("exists"));
      st->if_not_exists = true;
    }
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    KF_TRY(expect(Tok::LParen));
    if (!accept(Tok::RParen)) {
      for (;;) {
        FieldDecl f;
        KF_TRY(field_decl(&f));
        for (const FieldDecl& g : st->fields)
          if (g.name == f.name) return Status(Code::Exists, "field '" + f.name + "' is declared twice", f.pos);
        st->fields.push_back(std::move(f));
        if (st->fields.size() > kMaxFields) return Status(Code::Limit, "too many fields", peek().pos);
        if (accept(Tok::Comma)) continue;
        KF_TRY(expect(Tok::RParen));
        break;
      }
    }
  } else if (accept_kw("drop")) {
    KF_TRY(expect_kw("collection"));
    st->kind = StmtKind::DropCollection;
    if (accept_kw("if")) {
      KF_TRY(expect_kw("exists"));
      st->if_exists = true;
    }
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
  } else if (accept_kw("alter")) {
    KF_TRY(expect_kw("collection"));
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    if (accept_kw("add")) {
      accept_kw("field");
      st->kind = StmtKind::AlterAdd;
      FieldDecl f;
      KF_TRY(field_decl(&f));
      st->fields.push_back(std::move(f));
    } else if (accept_kw("drop")) {
      accept_kw("field");
      st->kind = StmtKind::AlterDrop;
      KF_TRY(name(&st->field, &st->field_pos, "a field name"));
    } else if (accept_kw("rename")) {
      accept_kw("field");
      st->kind = StmtKind::AlterRename;
      KF_TRY(name(&st->field, &st->field_pos, "a field name"));
      KF_TRY(expect_kw("to"));
      int64_t p;
      KF_TRY(name(&st->new_name, &p, "the new field name"));
      if (st->new_name == "id") return Status(Code::Invalid, "'id' is reserved for the document id", p);
    } else {
      return expected("'add', 'drop' or 'rename'");
    }
  } else if (accept_kw("collections")) {
    st->kind = StmtKind::Collections;
  } else if (accept_kw("describe")) {
    st->kind = StmtKind::Describe;
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
  } else if (is_kw("put") || is_kw("insert")) {
    st->kind = is_kw("put") ? StmtKind::Put : StmtKind::Insert;
    next();
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    const Token& b = peek();
    if (b.kind != Tok::LBrace && b.kind != Tok::LBracket && b.kind != Tok::Param)
      return expected("a document {...}, a list of documents [...] or a parameter");
    KF_TRY(value_expr(&st->body, 0, true, true));
    // A list or object with parameters among its literals: where its
    // documents and their keys stood, for the errors of every run.
    if (st->body->kind == ExprKind::ListLit || st->body->kind == ExprKind::ObjectLit) {
      st->body->parts = std::make_unique<LiteralPositions>();
      body_positions(*st->body, st->body->parts.get());
    }
  } else if (accept_kw("set")) {
    st->kind = StmtKind::Set;
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    if (peek().kind != Tok::LBrace) return expected("'{' with the fields to set");
    ExprPtr obj;
    KF_TRY(value_expr(&obj, 0, false));
    if (obj->keys.empty()) return Status(Code::Syntax, "'set' needs at least one field", obj->pos);
    for (size_t k = 0; k < obj->keys.size(); k++) {
      Assignment a;
      a.pos = obj->kids[k]->pos;
      std::string& key = obj->keys[k];
      size_t s = 0;
      for (;;) {
        size_t d = key.find('.', s);
        a.path.push_back(key.substr(s, d == std::string::npos ? std::string::npos : d - s));
        if (d == std::string::npos) break;
        s = d + 1;
      }
      a.value = std::move(obj->kids[k]);
      st->assignments.push_back(std::move(a));
    }
    KF_TRY(overlapping_paths(st->assignments));
    if (accept_kw("where")) KF_TRY(expr(&st->where, 0));
  } else if (accept_kw("del") || accept_kw("delete")) {
    st->kind = StmtKind::Del;
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    if (accept_kw("where")) KF_TRY(expr(&st->where, 0));
  } else if (accept_kw("get")) {
    st->kind = StmtKind::Get;
    KF_TRY(name(&st->collection, &st->collection_pos, "a collection name"));
    KF_TRY(get_clauses(st));
  } else if (accept_kw("checkpoint")) {
    st->kind = StmtKind::Checkpoint;
  } else if (accept_kw("compact")) {
    st->kind = StmtKind::Compact;
  } else if (accept_kw("begin")) {
    st->kind = StmtKind::Begin;
  } else if (accept_kw("commit")) {
    st->kind = StmtKind::Commit;
  } else if (accept_kw("rollback")) {
    st->kind = StmtKind::Rollback;
  } else {
    return expected("a statement (create, drop, alter, put, insert, set, del, get, collections, describe, begin, commit, rollback)");
  }
  accept(Tok::Semicolon);
  if (peek().kind != Tok::End) {
    if (st->kind == StmtKind::Get) return expected("select, where, group, near, match, lookup, order, limit, offset, count or the end");
    return expected("the end of the statement");
  }
  return Status::ok();
}

}  // namespace

Status parse_statement(std::string_view text, ParsedStatement* out) {
  if (text.size() > kMaxStatementBytes) return Status(Code::Limit, "statement longer than 256 MiB", 0);
  // Reused per thread: a large statement's token array is not mapped afresh each time.
  thread_local std::vector<Token> toks;
  thread_local std::vector<std::string> decoded;
  KF_TRY(tokenize(text, &toks, &decoded));
  Parser p(toks, decoded, text);
  Status st = p.statement(out);
  if (st.is_ok())
    for (const Token& t : toks)
      if (t.kind == Tok::Param && t.i > out->max_param) {
        out->max_param = t.i;
        out->max_param_pos = t.pos;
      }
  if (toks.capacity() > (1u << 20)) std::vector<Token>().swap(toks);  // do not keep a huge one
  else toks.clear();
  std::vector<std::string>().swap(decoded);  // the strings with escapes, kept by nothing now
  return st;
}

}  // namespace kitfox
