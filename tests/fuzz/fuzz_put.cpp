// A put's documents typed from their encoding, as kitfox import and POST
// /docs pass them (`$1` left encoded, Params),
// against the same bytes decoded into values first: the same error, at the
// same place, or the same {id} rows and the same documents stored. And a
// put of a body of parameters with every parameter left encoded
// (Params::listed, as POST /batch and the WASM binding give them) against
// the same list decoded. The input is the parameter list as the binding
// gets it.
#include <cstdint>
#include <string>

#include "codec.h"
#include "fuzz_common.h"

using namespace kitfox;

namespace {

const char* kSchema =
    "create collection p (b bool, n int, x float, s text, raw bytes, at timestamp, j json, l [int], "
    "v vector<2>, h vector<2, f16>, u text @unique, e vector<2> @hnsw(l2, m=4, ef_construction=8))";

struct Outcome {
  std::string status, rows, stored;
};

// Every parameter of a body in one run: a document, then fields.
const char* kListedPut = "put p [$1, {n: $2, x: $3, s: $4, j: $5, l: $6, v: $7, h: $8, e: $9, u: $10, at: $11}]";

enum class Way { Values, Documents, Listed };

Outcome run(std::string_view input, Way way) {
  auto fs = make_memory_file_system();
  auto r = Database::open(*fs, "p.kfdb", fuzz::quiet_options());
  if (!r.is_ok()) fuzz::fail("open a new database: " + r.status().to_string());
  auto db = std::move(r.value());
  if (!db->query(kSchema).is_ok()) fuzz::fail("create the collection");
  auto put = db->prepare(way == Way::Documents || way == Way::Values ? "put p $1" : kListedPut);
  if (!put.is_ok()) fuzz::fail("prepare the put");
  Outcome o;
  std::vector<Value> values;
  QueryResult out;
  Status s;
  if (way == Way::Documents) {  // $1 left in its encoding (Params), the rest values
    std::vector<std::string_view> items;
    s = Params::split_list(input, &items);
    if (s.is_ok()) {
      auto decoded = Params::listed(items.data(), items.size()).copy();
      s = decoded.status();
      if (s.is_ok()) values = std::move(*decoded);
    }
    if (s.is_ok() && !items.empty()) {
      values[0] = Value();
      s = put->query(Params(values, 0, items[0]), &out);
    } else if (s.is_ok()) {
      s = put->query(values, &out);
    }
  } else {
    s = decode_params(input, &values);
    if (s.is_ok()) s = put->query(values, &out);
  }
  o.status = s.to_string();
  for (const Value& row : out.rows) o.rows += to_json(row) + "\n";
  auto all = db->query("get p");
  if (!all.is_ok()) fuzz::fail("read back: " + all.status().to_string());
  for (const Value& row : all->rows) o.stored += to_json(row) + "\n";
  return o;
}

// kListedPut with the list as given (Params::split_list, Params::listed):
// the outcome, or nothing when the list is refused as malformed.
bool run_listed(std::string_view input, Outcome* o) {
  auto fs = make_memory_file_system();
  auto r = Database::open(*fs, "p.kfdb", fuzz::quiet_options());
  if (!r.is_ok()) fuzz::fail("open a new database: " + r.status().to_string());
  auto db = std::move(r.value());
  if (!db->query(kSchema).is_ok()) fuzz::fail("create the collection");
  auto put = db->prepare(kListedPut);
  if (!put.is_ok()) fuzz::fail("prepare the put");
  std::vector<std::string_view> items;
  if (!Params::split_list(input, &items).is_ok()) return false;
  QueryResult out;
  o->status = put->query(Params::listed(items.data(), items.size()), &out).to_string();
  for (const Value& row : out.rows) o->rows += to_json(row) + "\n";
  auto all = db->query("get p");
  if (!all.is_ok()) fuzz::fail("read back: " + all.status().to_string());
  for (const Value& row : all->rows) o->stored += to_json(row) + "\n";
  return true;
}

void same(const Outcome& a, const Outcome& b, const char* how) {
  if (a.status != b.status)
    fuzz::fail(std::string("the status differs: as values '") + a.status + "', " + how + " '" + b.status + "'");
  if (a.rows != b.rows) fuzz::fail("the rows differ: as values\n" + a.rows + how + "\n" + b.rows);
  if (a.stored != b.stored) fuzz::fail("the documents stored differ: as values\n" + a.stored + how + "\n" + b.stored);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  same(run(input, Way::Values), run(input, Way::Documents), "encoded");
  // Every parameter left encoded: refused as malformed exactly where
  // decode_params refuses the list.
  std::vector<Value> values;
  const bool decodes = decode_params(input, &values).is_ok();
  Outcome listed;
  if (run_listed(input, &listed) != decodes)
    fuzz::fail(decodes ? "a list decode_params reads was refused by Params::split_list"
                       : "a list decode_params refuses was taken by Params::split_list");
  if (decodes) same(run(input, Way::Listed), listed, "listed");
  return 0;
}
