// Record framing (see format.h) and a scanner over a file image in memory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kitfox {

// Appends one framed record to `out`.
void append_record(std::string& out, uint8_t kind, std::string_view body);
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

// True when some valid record starts after `offset`: tells damage in the
// middle of a tail from a torn last write.
bool valid_record_after(std::string_view file, uint64_t offset);

}  // namespace kitfox
