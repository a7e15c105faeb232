// CRC32C (Castagnoli), the checksum of every record in the file.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kitfox {

// Extends `crc` (0 to start) over n bytes.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// The table-driven implementation alone (what the WASM build runs), for tests.
uint32_t crc32c_software(uint32_t crc, const void* data, size_t n);

}  // namespace kitfox
