// CRC32C (Castagnoli), the checksum of every record in the file.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kitfox {

// Extends `crc` (0 to start) over n bytes.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// The CRC32C of three buffers of n bytes each, computed side by side (the
// three streams overlap, as one long buffer's do): out[k] = crc32c(0, buf k, n).
void crc32c_3(const void* a, const void* b, const void* c, size_t n, uint32_t out[3]);
// The table-driven implementation alone (what the WASM build runs), for tests.
uint32_t crc32c_software(uint32_t crc, const void* data, size_t n);

}  // namespace kitfox
