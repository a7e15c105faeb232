#include "record.h"

#include <cstring>

#include "../crc32c.h"
#include "../engine_limits.h"
#include "format.h"

namespace kitfox {

size_t open_record(std::string& out, uint8_t kind) {
  size_t start = out.size();
  out.append(4, '\0');
  out.push_back((char)kind);
  return start;
}

void close_record(std::string& out, size_t start) {
  uint32_t len = (uint32_t)(out.size() - start - 5);
  memcpy(out.data() + start, &len, 4);
  uint8_t kind = (uint8_t)out[start + 4];
  uint32_t crc = crc32c(0, out.data() + start, kind == format::kExtent ? 5 : 5 + (size_t)len);
  out.append((const char*)&crc, 4);
}

void append_record(std::string& out, uint8_t kind, std::string_view body) {
  size_t start = open_record(out, kind);
  out.append(body);
  close_record(out, start);
}

void append_header(std::string& out) {
  char h[format::kHeaderSize] = {};
  memcpy(h, format::kMagic, 8);
  uint32_t v = format::kVersion;
  memcpy(h + 8, &v, 4);
  uint32_t crc = crc32c(0, h, 28);
  memcpy(h + 28, &crc, 4);
  out.append(h, sizeof h);
}

std::string check_header(std::string_view b) {
  if (b.size() < format::kHeaderSize || memcmp(b.data(), format::kMagic, 8) != 0)
    return "not a kitfox database (no kitfox header at offset 0)";
  uint32_t crc;
  memcpy(&crc, b.data() + 28, 4);
  if (crc != crc32c(0, b.data(), 28)) return "the file header is damaged (checksum mismatch at offset 0)";
  uint32_t v;
  memcpy(&v, b.data() + 8, 4);
  if (v != format::kVersion)
    return "file format version " + std::to_string(v) + " is not supported (this build reads version " +
           std::to_string(format::kVersion) + ")";
  return "";
}

ScanResult read_record(std::string_view file, uint64_t off, RecordView* rec) {
  if (off == file.size()) return ScanResult::End;
  if (file.size() - off < format::kFrameOverhead) return ScanResult::Torn;
  uint32_t len;
  memcpy(&len, file.data() + off, 4);
  if (len > kMaxRecordBytes) return ScanResult::Bad;
  if (file.size() - off < format::kFrameOverhead + len) return ScanResult::Torn;
  uint32_t crc;
  memcpy(&crc, file.data() + off + 5 + len, 4);
  // An Extent's bytes are checked in blocks by the record that owns it.
  bool extent = (uint8_t)file[off + 4] == format::kExtent;
  if (crc != crc32c(0, file.data() + off, extent ? 5 : 5 + len)) return ScanResult::Bad;
  rec->offset = off;
  rec->end = off + format::kFrameOverhead + len;
  rec->kind = (uint8_t)file[off + 4];
  rec->body = file.substr(off + 5, len);
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
  rec->body = file.substr(off + 5, len);
  return true;
}

}  // namespace kitfox
