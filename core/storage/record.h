// Record framing (see format.h) and a scanner over a file image in memory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kitfox {

// Appends one framed record to `out`.
void append_record(std::string& out, uint8_t kind, std::string_view body);
// A record built in place: open_record appends its head and returns where
// it starts, the caller appends the body, close_record sets the length and
// appends the checksum.
size_t open_record(std::string& out, uint8_t kind);
void close_record(std::string& out, size_t start);
// Writes the 32-byte file header.
void append_header(std::string& out);
// "" when the header is valid, else what is wrong.
std::string check_header(std::string_view bytes);

struct RecordView {
  uint64_t offset = 0;  // of the frame
  uint64_t end = 0;     // offset after the frame
  uint8_t kind = 0;
  std::string_view body;
};

enum class ScanResult { Ok, End, Torn, Bad };

// Reads the record at `offset` of `file`. Torn: the frame runs past the end.
// Bad: the frame is inside the file but its checksum or length is wrong.
ScanResult read_record(std::string_view file, uint64_t offset, RecordView* rec);

// The offset of the first whole Write record after `offset` whose sequence
// is above `seq`, or 0 when there is none. A torn tail can only be the last
// write, cut short: a whole later write after a bad record proves damage.
uint64_t next_write_after(std::string_view file, uint64_t offset, uint64_t seq);

// When the record at `offset` is whole but for its length field: with the
// length that makes it end at `end`, its checksum holds (the checksum covers
// the length, so a torn record never passes). Fills `rec` and returns true.
bool whole_but_length(std::string_view file, uint64_t offset, uint64_t end, RecordView* rec);

}  // namespace kitfox
