// A where clause tested on each document's encoding (EncodedWhere) against
// the evaluator: `get p select id where CLAUSE` and the same clause with
// `and true` after it (which keeps it from the encoded form) give the same
// rows, or errors of the same code and message. The input is the clause, a
// newline, then the documents as a list literal (put after eight fixed
// documents, so that every one of them is past the eighth a filter tests the
// general way); the parameters are fixed.
#include <cstdint>
#include <string>

#include "codec.h"
#include "fuzz_common.h"

using namespace kitfox;

namespace {

const char* kSchema =
    "create collection p (b bool, n int, x float, s text, raw bytes, at timestamp, j json, l [int], v vector<2>)";

const char* kFirst =
    "put p [{b: true, n: 3, x: 2.5, s: \"Ken\", at: 1700000000000, j: 3, l: [1]}, {n: -7, s: \"ken\", j: \"a\"}, "
    "{x: -0.0, j: [1, \"a\"], v: [1, 2]}, {s: \"\", j: {k: 1}}, {}, {n: 9007199254740993, x: 9007199254740992.0}, "
    "{raw: \"AAE=\", j: null, b: false}, {s: \"2024-01-01T00:00:00Z\", at: \"2024-01-01T00:00:00Z\", j: 2.0}]";

std::string outcome(const Result<QueryResult>& r) {
  if (!r.is_ok()) return std::string(code_name(r.status().code())) + ": " + r.status().message();
  std::string s;
  for (const Value& row : r.value().rows) s += to_json(row) + " ";  // (an id, or what a clause's tail asked)
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  if (nl == std::string_view::npos || nl == 0 || nl > 512) return 0;
  const std::string clause(input.substr(0, nl));
  if (clause.find_first_of("\n\r") != std::string::npos) return 0;
  auto fs = make_memory_file_system();
  auto r = Database::open(*fs, "w.kfdb", fuzz::quiet_options());
  if (!r.is_ok()) fuzz::fail("open a new database: " + r.status().to_string());
  auto db = std::move(r.value());
  if (!db->query(kSchema).is_ok() || !db->query(kFirst).is_ok()) fuzz::fail("set up the collection");
  (void)db->query("put p " + std::string(input.substr(nl + 1)));  // refused documents change nothing
  const std::vector<Value> params = {Value::integer(3), Value::text("ke"),
                                     Value::list({Value::integer(1), Value::text("a"), Value()}), Value(),
                                     Value::real(2.5), Value::timestamp(1700000000000)};
  const std::string plain = outcome(db->query("get p select id where " + clause, params));
  const std::string evaluated = outcome(db->query("get p select id where (" + clause + ") and true", params));
  // A clause that does not parse alone may parse inside the parentheses
  // (`a) or (b`): only clauses that parse both ways are compared.
  if (plain.rfind("syntax", 0) == 0 || evaluated.rfind("syntax", 0) == 0) return 0;
  if (plain != evaluated)
    fuzz::fail("where " + clause + ": tested on the encoding '" + plain + "', by the evaluator '" + evaluated + "'");
  return 0;
}
