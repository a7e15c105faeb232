// `kitfox import`: NDJSON or one JSON array of objects, read in chunks of
// any size, put into a collection in batches (one write each), with a
// progress line on a terminal. Bad input stops the import at the bad
// document, naming its line (and byte, in an array); what came before it is
// written.
//
// The input is parsed with simdjson's On-Demand API, a region of about
// `region_bytes` at a time: NDJSON as whole lines through `iterate_many`, an
// array as a run of whole elements through `iterate_many` with
// `allow_comma_separated` (the elements are found by a scan for the commas
// between them, so that memory stays bounded however big the array). Each
// document goes straight into a Value, and an array of numbers for a
// top-level `vector<N>` field straight into a Value::vector, without a Value
// per number. Documents are put with `put COLLECTION $1` and a list
// parameter, the one way in, so the engine encodes and checks them as it
// does any put.
//
// Whatever the fast reader does not take as it is (a malformed document, a
// big integer, two documents on one line, a '\f' the old reader trimmed, ...)
// is read again from the start of its line or element by the plain reader
// (kitfox::parse_json on each line or element), so that what is imported and
// every error message are exactly what parse_json gives.
//
// Batches are written by a thread of their own while the next one is parsed
// (ImportOptions::writer_thread); what is written and reported is the same
// either way.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "db.h"

namespace kitfox {

// A position in a statement the user did not write means nothing to them.
inline Status without_position(const Status& s) { return Status(s.code(), s.message()); }

struct ImportOptions {
  uint64_t batch = 1000;         // documents per write
  // ... and at most about this many bytes of them (encoded): a batch of
  // large documents is cut sooner, far below a write's 1 GiB limit.
  uint64_t batch_bytes = 64ull << 20;
  uint64_t total_bytes = 0;      // the size of the input when known (the progress bar)
  size_t region_bytes = 1 << 20; // input parsed at once (a longer document makes its region longer)
  bool writer_thread = true;     // write each batch on a thread of its own while the next is parsed
  bool progress = false;         // a progress line on stderr (a terminal)
  bool fast = true;              // false: read every document with parse_json (the reference the tests compare with)
  // Where messages go (each one line, without "kitfox: "); stderr when empty.
  void (*report)(void* ctx, const std::string& line) = nullptr;
  void* report_ctx = nullptr;
};

class Importer {
 public:
  // Learns the collection's vector fields (`describe`) once.
  Importer(Database& db, std::string collection, std::string source, ImportOptions options);
  ~Importer();
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;

  // Consumes the next chunk of input; false once an error was reported.
  bool feed(std::string_view chunk);
  // The end of the input: the rest is read and written. False on an error.
  bool finish();
  // The input ends early (it could not be read): waits for the batches
  // already complete to be written, as finish() does, and reads no more.
  void stop();

  uint64_t imported() const;        // documents written
  uint64_t read_slowly() const;     // documents the plain reader read (0 for clean input)
  double seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace kitfox
