#include "record.h"

#include <cstring>

#include "../crc32c.h"

namespace kitfox {

size_t open_record(std::string& out, uint8_t kind, uint64_t expect, uint64_t short_max) {
  size_t start = out.size();
  if (frame_head_bytes(expect, short_max) == format::kLongFrameHead) {
    const uint32_t mark = format::kLongFrame;
    out.append((const char*)&mark, 4);
    out.push_back((char)kind);
    out.append(8, '\0');
  } else {
    out.append(4, '\0');
    out.push_back((char)kind);
  }
  return start;
}

void close_record(std::string& out, size_t start, uint64_t short_max) {
  uint32_t mark;
  memcpy(&mark, out.data() + start, 4);
  if (mark != format::kLongFrame && frame_head_bytes(out.size() - start - 5, short_max) != 5) {
    // Longer than its opener expected: the body moves up for the long head.
    out.insert(start + 5, 8, '\0');
    mark = format::kLongFrame;
    memcpy(out.data() + start, &mark, 4);
  }
  const size_t end = out.size();
  out.append(4, '\0');
  close_record_at(out, start, end);
}

void close_record_at(std::string& out, size_t start, size_t end) {
  uint32_t mark;
  memcpy(&mark, out.data() + start, 4);
  const uint64_t head = mark == format::kLongFrame ? format::kLongFrameHead : 5;
  const uint64_t len = end - start - head;
  if (head == 5) {
    uint32_t len32 = (uint32_t)len;
    memcpy(out.data() + start, &len32, 4);
  } else {
    memcpy(out.data() + start + 5, &len, 8);
  }
  uint8_t kind = (uint8_t)out[start + 4];
  uint32_t crc = crc32c(0, out.data() + start, kind == format::kExtent ? head : head + len);
  memcpy(out.data() + end, &crc, 4);
}

void append_record(std::string& out, uint8_t kind, std::string_view body, uint64_t short_max) {
  size_t start = open_record(out, kind, body.size(), short_max);
  out.append(body);
  close_record(out, start, short_max);
}

void append_header(std::string& out, uint32_t version) {
  char h[format::kHeaderSize] = {};
  memcpy(h, format::kMagic, 8);
  memcpy(h + 8, &version, 4);
  uint32_t crc = crc32c(0, h, 28);
  memcpy(h + 28, &crc, 4);
  out.append(h, sizeof h);
}

void set_image_version(std::string& image) {
  bool long_frame = false;
  uint64_t head, body;
  for (uint64_t off = format::kHeaderSize; !long_frame && off < image.size(); off += head + body + 4) {
    if (frame_head(image.data() + off, image.size() - off, &head, &body) != ScanResult::Ok) break;
    long_frame = head == format::kLongFrameHead;
  }
  std::string h;
  append_header(h, long_frame ? format::kVersionLongFrames : format::kVersion);
  memcpy(image.data(), h.data(), h.size());
}

std::string check_header(std::string_view b) {
  if (b.size() < format::kHeaderSize || memcmp(b.data(), format::kMagic, 8) != 0)
    return "not a kitfox database (no kitfox header at offset 0)";
  uint32_t crc;
  memcpy(&crc, b.data() + 28, 4);
  if (crc != crc32c(0, b.data(), 28)) return "the file header is damaged (checksum mismatch at offset 0)";
  uint32_t v;
  memcpy(&v, b.data() + 8, 4);
  if (v != format::kVersion && v != format::kVersionLongFrames)
    return "file format version " + std::to_string(v) + " is not supported (this build reads versions " +
           std::to_string(format::kVersion) + " and " + std::to_string(format::kVersionLongFrames) + ")";
  return "";
}

ScanResult frame_head(const char* p, uint64_t avail, uint64_t* head, uint64_t* body) {
  if (avail < 5) return ScanResult::Torn;
  uint32_t len;
  memcpy(&len, p, 4);
  uint64_t h = 5, b = len;
  if (len == format::kLongFrame) {
    if (avail < format::kLongFrameHead) return ScanResult::Torn;
    memcpy(&b, p + 5, 8);
    h = format::kLongFrameHead;
  } else if (len > kMaxRecordBytes) {
    return ScanResult::Bad;
  }
  if (avail < h + 4 || avail - h - 4 < b) return ScanResult::Torn;  // the body or its checksum past the end
  *head = h;
  *body = b;
  return ScanResult::Ok;
}

ScanResult read_record(std::string_view file, uint64_t off, RecordView* rec) {
  if (off == file.size()) return ScanResult::End;
  const uint64_t avail = file.size() - off;
  if (avail < format::kFrameOverhead) return ScanResult::Torn;
  uint64_t head, len;
  ScanResult h = frame_head(file.data() + off, avail, &head, &len);
  if (h != ScanResult::Ok) return h;
  uint32_t crc;
  memcpy(&crc, file.data() + off + head + len, 4);
  // An Extent's bytes are checked in blocks by the record that owns it.
  bool extent = (uint8_t)file[off + 4] == format::kExtent;
  if (crc != crc32c(0, file.data() + off, extent ? head : head + len)) return ScanResult::Bad;
  rec->offset = off;
  rec->end = off + head + len + 4;
  rec->kind = (uint8_t)file[off + 4];
  rec->head = (uint8_t)head;
  rec->body = file.substr(off + head, len);
  return ScanResult::Ok;
}

uint64_t next_write_after(std::string_view file, uint64_t offset, uint64_t seq) {
  RecordView r;
  for (uint64_t p = offset + 1; p + format::kFrameOverhead + 8 <= file.size(); p++) {
    // A tail record is a Write whose body starts with its sequence number:
    // the kind and the sequence are tested before any checksum is computed.
    if ((uint8_t)file[p + 4] != format::kWrite) continue;
    uint64_t s;
    memcpy(&s, file.data() + p + 5, 8);
    if (s <= seq || s - seq > file.size()) continue;
    if (read_record(file, p, &r) == ScanResult::Ok && r.body.size() >= 8) return p;
  }
  return 0;
}

bool whole_but_length(std::string_view file, uint64_t off, uint64_t end, RecordView* rec) {
  if (end > file.size() || end < off + format::kFrameOverhead) return false;
  uint64_t len = end - off - format::kFrameOverhead;
  if (len > kMaxRecordBytes) return false;
  uint32_t len32 = (uint32_t)len, crc;
  memcpy(&crc, file.data() + end - 4, 4);
  uint8_t kind = (uint8_t)file[off + 4];
  uint32_t c = crc32c(0, &len32, 4);
  c = crc32c(c, file.data() + off + 4, kind == format::kExtent ? 1 : 1 + len);
  if (c != crc) return false;
  rec->offset = off;
  rec->end = end;
  rec->kind = kind;
  rec->head = 5;
  rec->body = file.substr(off + 5, len);
  return true;
}

}  // namespace kitfox
