// Documents from JSON text, read with simdjson's On-Demand API straight
// into Values, the way parse_json reads them, or straight into the value
// encoding of those Values (encode: no Value built, what a put takes as a
// parameter left encoded), but for one thing: an array of numbers for a
// top-level `vector<N>` field of the collection goes straight into f32,
// without a Value per number (the engine checks its dimension and values
// as for any put). Used by `kitfox import` (importer.cpp, encoded) and by
// `POST /docs` of `kitfox serve` (http_api.cpp).
//
// Every reader here is a fast path: it answers false for whatever it does
// not take as it is (malformed text, a big integer, a non-object, two
// documents on one line), and the caller then reads the same text with
// parse_json, whose values and error messages are the reference.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "db.h"
#include "simdjson.h"

namespace kitfox {

class DocumentReader {
 public:
  DocumentReader() = default;
  // Learns the collection's top-level vector fields (`describe`); none
  // when there is no such collection.
  DocumentReader(Database& db, std::string_view collection);

  // One document (an object) as parse_json would make it; false when it is
  // not an object, is malformed, or holds what only parse_json takes.
  bool document(simdjson::ondemand::document_reference& d, Value* out) const;
  bool document(simdjson::ondemand::value v, Value* out) const;

  // One document appended to *out in the value encoding (core/codec.h) of
  // the Value document() makes, with no Value built: the form a put's
  // documents take as a parameter left encoded (kitfox::Params). False as
  // document() is, and for an object that gives a key twice (document()
  // takes the last value at the first place): the caller reads it another
  // way then; *out may hold part of it.
  bool encode(simdjson::ondemand::document_reference& d, std::string* out) const;

  // A whole JSON array of documents, or NDJSON (a document a line, blank
  // lines skipped); false as above, for any document.
  bool read_array(const simdjson::padded_string& text, std::vector<Value>* out) const;
  bool read_lines(const simdjson::padded_string& text, std::vector<Value>* out) const;

 private:
  // A top-level field of type vector<N>.
  struct VectorField {
    std::string name;
    uint32_t dim = 0;
  };
  const VectorField* vector_field(std::string_view key) const;
  bool to_object(simdjson::ondemand::object& obj, Value* out, int depth, bool vectors) const;
  bool to_value(simdjson::ondemand::value v, Value* out, int depth) const;
  bool encode_object(simdjson::ondemand::object& obj, std::string* out, int depth, bool vectors) const;
  bool encode_value(simdjson::ondemand::value v, std::string* out, int depth) const;

  std::vector<VectorField> vectors_;
};

// Reads a JSON array of numbers ("[1, 2.5, -3e2]" and white space after it)
// into f32 the way the engine converts a list of numbers for a vector field:
// each number as parse_json reads it (an int64, or the nearest double), then
// to float. False when the text is anything else (not an array of numbers,
// malformed, an integer out of int64's range, a number it does not convert
// exactly): the caller takes the general path. At least 64 readable bytes
// must follow the text.
bool parse_number_array(std::string_view text, std::vector<float>* out);

}  // namespace kitfox
