// A put's documents typed from their encoding, as the WASM binding passes
// them (decode_params leaving `$1` encoded, Statement::query with Params),
// against the same bytes decoded into values first: the same error, at the
// same place, or the same {id} rows and the same documents stored. The
// input is the parameter list as the binding gets it.
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

Outcome run(std::string_view input, bool encoded) {
  auto fs = make_memory_file_system();
  auto r = Database::open(*fs, "p.kfdb", fuzz::quiet_options());
  if (!r.is_ok()) fuzz::fail("open a new database: " + r.status().to_string());
  auto db = std::move(r.value());
  if (!db->query(kSchema).is_ok()) fuzz::fail("create the collection");
  auto put = db->prepare("put p $1");
  if (!put.is_ok()) fuzz::fail("prepare the put");
  Outcome o;
  std::vector<Value> values;
  std::string_view bytes;
  Status s = decode_params(input, encoded ? put->documents_param() : 0, &values, encoded ? &bytes : nullptr);
  QueryResult out;
  if (s.is_ok()) s = encoded && !bytes.empty() ? put->query(Params(values, 0, bytes), &out) : put->query(values, &out);
  o.status = s.to_string();
  for (const Value& row : out.rows) o.rows += to_json(row) + "\n";
  auto all = db->query("get p");
  if (!all.is_ok()) fuzz::fail("read back: " + all.status().to_string());
  for (const Value& row : all->rows) o.stored += to_json(row) + "\n";
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Outcome a = run(input, false), b = run(input, true);
  if (a.status != b.status) fuzz::fail("the status differs: as values '" + a.status + "', encoded '" + b.status + "'");
  if (a.rows != b.rows) fuzz::fail("the rows differ: as values\n" + a.rows + "encoded\n" + b.rows);
  if (a.stored != b.stored) fuzz::fail("the documents stored differ: as values\n" + a.stored + "encoded\n" + b.stored);
  return 0;
}
