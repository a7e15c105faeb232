// The value codec: any bytes decode to a value or an error; a value decoded
// encodes and decodes again to the same value.
#include <cstdint>
#include <string>

#include "codec.h"
#include "fuzz_common.h"

using namespace kitfox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(std::string_view(reinterpret_cast<const char*>(data), size));
  Value v;
  // A top-level null is not stored (a field that is null is absent).
  if (!decode_value(r, &v).is_ok() || !r.ok() || v.is_null()) return 0;
  std::string enc;
  encode_value(enc, v, false);
  Reader r2(enc);
  Value w;
  if (!decode_value(r2, &w).is_ok() || !r2.ok() || !r2.done()) fuzz::fail("an encoded value does not decode");
  if (to_json(v) != to_json(w)) fuzz::fail("a value did not round-trip: " + to_json(v));
  return 0;
}
