// Documents from JSON text, read with simdjson's On-Demand API straight
// into the value encoding of the Values parse_json makes of them (no Value
// built: what a put takes as a parameter left encoded), but for one thing:
// an array of numbers for a top-level `vector<N>` field of the collection
// goes straight into f32, without a value per number (the engine checks
// its dimension and values as for any put). Used by `kitfox import`
// (importer.cpp) and by `POST /docs` of `kitfox serve` (http_api.cpp).
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

// Documents in the value encoding one after another, after room for the
// head of the list they make: the parameter of a put left encoded
// (`put C $1`, kitfox::Params).
class EncodedDocs {
 public:
  // Where a document's encoding is appended; added() counts it.
  std::string& bytes() { return enc_; }
  void added() { n_++; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t byte_size() const { return enc_.size() - kHead; }
  void clear() {
    enc_.resize(kHead);
    n_ = 0;
  }
  void reserve(size_t bytes) { enc_.reserve(kHead + bytes); }
  // The documents as one encoded list (its head written just before them).
  std::string_view list();

 private:
  static constexpr size_t kHead = 11;  // the list's tag and its count's varint, at most
  std::string enc_ = std::string(kHead, '\0');
  size_t n_ = 0;
};

class DocumentReader {
 public:
  DocumentReader() = default;
  // Learns the collection's top-level vector fields (`describe`); none
  // when there is no such collection.
  DocumentReader(Database& db, std::string_view collection);

  // One document (an object) appended to *out in the value encoding
  // (core/codec.h) of the Value parse_json would make of it, with no Value
  // built. False when it is not an object, is malformed, holds what only
  // parse_json takes, or gives a key twice (parse_json keeps the last
  // value at the first place): the caller reads it another way then; *out
  // may hold part of it.
  bool encode(simdjson::ondemand::document_reference& d, std::string* out) const;
  // Any value, as a list's item (a null as its tag), at the level `depth`
  // for the nesting limit (as parse_json's root_depth); its objects' arrays
  // stay lists.
  bool encode(simdjson::ondemand::value v, std::string* out, int depth) const { return encode_value(v, out, depth); }

  // A whole JSON array of documents, or NDJSON (a document a line, blank
  // lines skipped), into *out; false as above, for any document. `depth`:
  // the level of the documents' field values for the nesting limit (1: each
  // document counted from itself, as a line of NDJSON; 2: in a list
  // parameter counted from the list).
  bool read_array(const simdjson::padded_string& text, EncodedDocs* out, int depth) const;
  bool read_lines(const simdjson::padded_string& text, EncodedDocs* out) const;

 private:
  // A top-level field of type vector<N>.
  struct VectorField {
    std::string name;
    uint32_t dim = 0;
  };
  const VectorField* vector_field(std::string_view key) const;
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

// A JSON array of numbers at p (its `[`), appended to *out in the value
// encoding of the list parse_json makes of it (each number an int64 or the
// nearest double, as parse_json reads it). Returns the end of the array
// (past its `]`), or nullptr when p holds anything else (not only numbers,
// malformed, an integer beyond int64): *out may then hold part of it. At
// least 64 readable bytes must follow the array (simdjson's padding).
const char* encode_number_list(const char* p, std::string* out);

}  // namespace kitfox
