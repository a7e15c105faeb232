// Record framing (see format.h) and a scanner over a file image in memory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "../engine_limits.h"
#include "format.h"

namespace kitfox {

// A body of more than `short_max` bytes goes in a long frame (format.h).
// `short_max` is kMaxRecordBytes but in tests, which lower it to make long
// frames of small records.
constexpr uint64_t frame_head_bytes(uint64_t body, uint64_t short_max = kMaxRecordBytes) {
  return body > short_max || body > kMaxRecordBytes ? format::kLongFrameHead : 5;
}

// Appends one framed record to `out`.
void append_record(std::string& out, uint8_t kind, std::string_view body, uint64_t short_max = kMaxRecordBytes);
// A record built in place: open_record appends its head and returns where
// it starts, the caller appends the body, close_record sets the length and
// appends the checksum. A body the caller expects to be longer than
// `short_max` (`expect`, at least the body's length) gets a long frame at
// once; one that turns out longer in a short frame is moved 8 bytes up into
// a long one (a copy of it), and an offset into the body taken before then
// is 8 short: callers that keep such offsets expect enough.
size_t open_record(std::string& out, uint8_t kind, uint64_t expect = 0, uint64_t short_max = kMaxRecordBytes);
void close_record(std::string& out, size_t start, uint64_t short_max = kMaxRecordBytes);
// Closes a record opened at `start` whose body ends at `end`, where 4 bytes
// are kept for its checksum: one that more bytes follow before it can be
// closed (its frame chosen by open_record for a body no longer than it is).
void close_record_at(std::string& out, size_t start, size_t end);
// Writes the 32-byte file header.
void append_header(std::string& out, uint32_t version = format::kVersion);
// An image built whole (a header, then records as the calls above make
// them): its header says version 3 when one of its records has a long frame.
void set_image_version(std::string& image);
// "" when the header is valid, else what is wrong.
std::string check_header(std::string_view bytes);

struct RecordView {
  uint64_t offset = 0;  // of the frame
  uint64_t end = 0;     // offset after the frame
  uint8_t kind = 0;
  uint8_t head = 5;     // bytes of the frame before the body (13 in a long frame)
  std::string_view body;
};

enum class ScanResult { Ok, End, Torn, Bad };

// The lengths in the frame head at `p`, `avail` bytes of the file from
// there: Ok with `head` and `body` set; Torn when the head is cut short;
// Bad when its length field is none (past kMaxRecordBytes and not the long
// frame's mark); Torn too when the body or its checksum runs past `avail`.
ScanResult frame_head(const char* p, uint64_t avail, uint64_t* head, uint64_t* body);

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
// Short frames only: this is for the log's Write records.
bool whole_but_length(std::string_view file, uint64_t offset, uint64_t end, RecordView* rec);

}  // namespace kitfox
