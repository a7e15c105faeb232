// The parsed form of a statement. Positions are byte offsets into the text.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "../schema.h"
#include "../value.h"

namespace kitfox {

enum class ExprKind : uint8_t {
  Literal,  // value
  Param,    // $n: param (1-based)
  Path,     // path: a field and optional json keys
  ListLit,  // kids
  ObjectLit,  // keys + kids
  Not,      // kids[0]
  And,
  Or,       // And, Or: two or more kids, none of the node's own kind
  Compare,  // kids[0] op kids[1]
  In,       // kids[0] in kids[1]; negate for `not in`
  Has,      // kids[0] has kids[1]
  IsNull,   // kids[0] is null; negate for `is not null`
  Call,     // name(kids...): cosine, l2, dot, norm
  Aggregate,  // count(*) (no kids), count/sum/avg/min/max(kids[0]): path[0] is the name
};

enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, Contains };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Where the parts of a list or object of literals stood, once the parser
// has folded it into one Literal's value (for the errors of a put): each
// list element's position, and each object's key positions (for an object
// literal: `key` alone; for a list: key_start[i] .. key_start[i + 1] are
// element i's, empty for an element that is not an object).
struct LiteralPositions {
  std::vector<int64_t> item;
  std::vector<uint32_t> key_start;
  std::vector<int64_t> key;
  // Where document i's keys stood: the object literal's own (`list` false),
  // or list element i's (none past the elements recorded).
  std::span<const int64_t> keys_of(size_t i, bool list) const {
    if (!list) return key;
    if (i >= item.size()) return {};
    return std::span<const int64_t>(key).subspan(key_start[i], key_start[i + 1] - key_start[i]);
  }
};

struct Expr {
  ExprKind kind;
  int64_t pos = 0;
  Value value;
  std::unique_ptr<LiteralPositions> parts;  // a folded list or object literal's, or a put body's with parameters
  // A put's or insert's folded body: its value in the codec's value
  // encoding (codec.h; null as tag 0), not in `value`.
  std::string encoded;
  int param = 0;
  CmpOp op = CmpOp::Eq;
  bool negate = false;
  std::vector<std::string> path;  // Path; Call: path[0] is the function name
  std::vector<std::string> keys;
  std::vector<ExprPtr> kids;
};

enum class StmtKind : uint8_t {
  CreateCollection, DropCollection, AlterAdd, AlterDrop, AlterRename, Collections, Describe,
  Put, Insert, Set, Del, Get, Checkpoint, Compact, CreateIndex, DropIndex,
  Begin, Commit, Rollback,
};

struct FieldDecl {
  std::string name;
  Type type;
  bool required = false;
  IndexSpec index;                  // @hnsw, @text
  std::vector<IndexKind> secondary;  // @hash, @unique, @sorted
  int64_t pos = 0;
};

// A select item or an order key: a field path, or an expression (then `expr`
// is set and `label`, its source text, names the output column).
struct OrderKey {
  std::vector<std::string> path;
  ExprPtr expr;
  std::string label;
  bool desc = false;
  int64_t pos = 0;
};

struct Assignment {
  std::vector<std::string> path;
  ExprPtr value;
  int64_t pos = 0;
};

struct SelectItem {
  std::vector<std::string> path;
  ExprPtr expr;
  std::string label;
  int64_t pos = 0;
};

// The key of its column in a row: an expression's text, or the path as
// written, its parts joined by dots (evaluator.cpp).
std::string column_name(const SelectItem& s);

// A path as text: a.b.c (evaluator.cpp).
std::string join(const std::vector<std::string>& p);

struct ParsedStatement;

// lookup C2 on child_field [= parent_field] [required] <child clauses>
struct Lookup {
  std::string collection;
  int64_t pos = 0;
  std::string child_field;
  int64_t child_pos = 0;
  std::vector<std::string> parent_path{"id"};
  bool required = false;
  std::unique_ptr<ParsedStatement> child;  // a get: select, where, order, limit, offset, lookup
};

struct ParsedStatement {
  StmtKind kind;
  int64_t pos = 0;
  // The highest parameter the text names ($3: 3), and where: a call that
  // gives fewer is refused before it runs, whatever the data (a filter over
  // an empty collection evaluated none).
  int64_t max_param = 0;
  int64_t max_param_pos = 0;
  std::string collection;
  int64_t collection_pos = 0;
  bool if_not_exists = false;
  bool if_exists = false;
  std::vector<FieldDecl> fields;    // create, alter add
  std::string field, new_name;      // alter drop / rename
  int64_t field_pos = 0;
  ExprPtr body;                     // put / insert
  std::vector<Assignment> assignments;  // set
  std::vector<SelectItem> select;   // get
  ExprPtr where;
  std::vector<OrderKey> order;
  std::vector<SelectItem> group;    // group keys (paths)
  ExprPtr limit, offset;
  bool count = false;
  // near FIELD VALUE [ef N] [exact]
  std::string near_field;
  int64_t near_pos = -1;
  ExprPtr near_value, near_ef;
  bool near_exact = false;
  // match FIELD VALUE; fuse [k N] [candidates N]; rerank FIELD VALUE [candidates N]
  std::string match_field, rerank_field;
  int64_t match_pos = -1, rerank_pos = -1, fuse_pos = -1;
  ExprPtr match_value, rerank_value, fuse_k, candidates;
  bool fuse = false;
  IndexSpec index;  // create index / drop index (kind None: every index on the path)
  std::vector<std::string> index_path;
  int64_t index_pos = 0;
  bool explain = false;
  bool analyze = false;  // explain analyze
  std::unique_ptr<Lookup> lookup;

  bool is_write() const {
    return kind != StmtKind::Get && kind != StmtKind::Collections && kind != StmtKind::Describe &&
           kind != StmtKind::Checkpoint && kind != StmtKind::Compact && kind != StmtKind::Begin &&
           kind != StmtKind::Commit && kind != StmtKind::Rollback;
  }
};

}  // namespace kitfox
