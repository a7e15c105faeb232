#include "record.h"

#include <cstring>

#include "../crc32c.h"
#include "../engine_limits.h"
#include "format.h"

namespace kitfox {

void append_record(std::string& out, uint8_t kind, std::string_view body) {
  uint32_t len = (uint32_t)body.size();
  size_t start = out.size();
  out.append((const char*)&len, 4);
  out.push_back((char)kind);
  out.append(body);
  uint32_t crc = crc32c(0, out.data() + start, kind == format::kExtent ? 5 : 5 + body.size());
  out.append((const char*)&crc, 4);
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
    return "not a kitfox database (no kitfox header)";
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

bool valid_record_after(std::string_view file, uint64_t offset) {
  RecordView r;
  for (uint64_t p = offset + 1; p + format::kFrameOverhead <= file.size(); p++) {
    // A tail record is a Write whose body starts with its sequence number.
    if ((uint8_t)file[p + 4] != format::kWrite) continue;
    if (read_record(file, p, &r) == ScanResult::Ok && r.body.size() >= 8) return true;
  }
  return false;
}

}  // namespace kitfox
