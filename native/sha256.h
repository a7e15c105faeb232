// SHA-256 (FIPS 180-4), for the name of the cross-process lock shared with
// the Node host (js/hosts/node-lock.js).
#pragma once
#include <string>
#include <string_view>

namespace kitfox {

// Lowercase hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace kitfox
