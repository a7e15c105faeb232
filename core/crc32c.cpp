#include "crc32c.h"

#include <cstring>
#include <initializer_list>

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#include <nmmintrin.h>
#define KITFOX_CRC_HW 1
#endif

namespace kitfox {

namespace {

// Slicing-by-8 tables for the reflected polynomial 0x82F63B78.
struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
      for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

uint32_t crc_soft(uint32_t crc, const unsigned char* p, size_t n) {
  const Tables& T = tables();
  while (n >= 8) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = T.t[7][lo & 0xFF] ^ T.t[6][(lo >> 8) & 0xFF] ^ T.t[5][(lo >> 16) & 0xFF] ^ T.t[4][lo >> 24] ^
          T.t[3][hi & 0xFF] ^ T.t[2][(hi >> 8) & 0xFF] ^ T.t[1][(hi >> 16) & 0xFF] ^ T.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ T.t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

// Three independent CRC streams hide the crc32 instruction's latency; the
// streams are joined by advancing a register over a lane's length of zero
// bytes (the CRC is linear), done with four 256-entry tables of that map.
// Long buffers go in lanes of kLane, what is left (3 to 24 KiB) in lanes
// of kSmallLane.
constexpr size_t kLane = 8192, kSmallLane = 1024;

struct Shift {
  uint32_t t[4][256];
  explicit Shift(size_t lane) {
    // The map of one zero byte on the (reflected) register, as 32 columns.
    uint32_t m[32], r[32];
    for (int i = 0; i < 32; i++) {
      uint32_t x = 1u << i;
      m[i] = tables().t[0][x & 0xFF] ^ (x >> 8);
    }
    auto apply = [](const uint32_t* mat, uint32_t v) {
      uint32_t out = 0;
      for (int i = 0; v; i++, v >>= 1)
        if (v & 1) out ^= mat[i];
      return out;
    };
    auto mul = [&](const uint32_t* a, const uint32_t* b, uint32_t* out) {
      uint32_t tmp[32];
      for (int i = 0; i < 32; i++) tmp[i] = apply(a, b[i]);
      memcpy(out, tmp, sizeof tmp);
    };
    for (int i = 0; i < 32; i++) r[i] = 1u << i;  // identity
    for (size_t n = lane; n; n >>= 1) {           // r = m^lane
      if (n & 1) mul(m, r, r);
      mul(m, m, m);
    }
    // Each entry from a smaller one and one column (it runs on every page
    // load in the browser, before the code is optimised).
    for (int b = 0; b < 4; b++) {
      t[b][0] = 0;
      for (uint32_t v = 1; v < 256; v++) t[b][v] = t[b][v & (v - 1)] ^ r[8 * b + __builtin_ctz(v)];
    }
  }
  uint32_t operator()(uint32_t c) const { return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24]; }
};

// The software CRC in three interleaved streams (as crc_hw3): the table
// lookups of one stream overlap the others' (this is the WASM build's CRC).
inline uint32_t step8(const Tables& T, uint32_t crc, const unsigned char* p) {
  uint32_t lo, hi;
  memcpy(&lo, p, 4);
  memcpy(&hi, p + 4, 4);
  lo ^= crc;
  return T.t[7][lo & 0xFF] ^ T.t[6][(lo >> 8) & 0xFF] ^ T.t[5][(lo >> 16) & 0xFF] ^ T.t[4][lo >> 24] ^
         T.t[3][hi & 0xFF] ^ T.t[2][(hi >> 8) & 0xFF] ^ T.t[1][(hi >> 16) & 0xFF] ^ T.t[0][hi >> 24];
}

uint32_t crc_soft3(uint32_t crc, const unsigned char* p, size_t n) {
  static const Shift big(kLane), small(kSmallLane);
  const Tables& T = tables();
  for (size_t lane : {kLane, kSmallLane}) {
    const Shift& shift = lane == kLane ? big : small;
    while (n >= 3 * lane) {
      uint32_t c0 = crc, c1 = 0, c2 = 0;
      for (size_t i = 0; i < lane; i += 8) {
        c0 = step8(T, c0, p + i);
        c1 = step8(T, c1, p + lane + i);
        c2 = step8(T, c2, p + 2 * lane + i);
      }
      crc = shift(c0) ^ c1;
      crc = shift(crc) ^ c2;
      p += 3 * lane;
      n -= 3 * lane;
    }
  }
  return crc_soft(crc, p, n);
}

#ifdef KITFOX_CRC_HW
__attribute__((target("sse4.2"))) uint32_t crc_hw(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}

// Three independent streams of `body` bytes (a multiple of 8).
__attribute__((target("sse4.2"))) void crc3_hw(const unsigned char* const p[3], size_t body, uint64_t* c0,
                                               uint64_t* c1, uint64_t* c2) {
  uint64_t x = *c0, y = *c1, z = *c2;
  for (size_t i = 0; i < body; i += 8) {
    uint64_t a, b, c;
    memcpy(&a, p[0] + i, 8);
    memcpy(&b, p[1] + i, 8);
    memcpy(&c, p[2] + i, 8);
    x = _mm_crc32_u64(x, a);
    y = _mm_crc32_u64(y, b);
    z = _mm_crc32_u64(z, c);
  }
  *c0 = x, *c1 = y, *c2 = z;
}

__attribute__((target("sse4.2"))) uint32_t crc_hw3(uint32_t crc, const unsigned char* p, size_t n) {
  static const Shift big(kLane), small(kSmallLane);
  for (size_t lane : {kLane, kSmallLane}) {
    const Shift& shift = lane == kLane ? big : small;
    while (n >= 3 * lane) {
      uint64_t c0 = crc, c1 = 0, c2 = 0;
      for (size_t i = 0; i < lane; i += 8) {
        uint64_t a, b, c;
        memcpy(&a, p + i, 8);
        memcpy(&b, p + lane + i, 8);
        memcpy(&c, p + 2 * lane + i, 8);
        c0 = _mm_crc32_u64(c0, a);
        c1 = _mm_crc32_u64(c1, b);
        c2 = _mm_crc32_u64(c2, c);
      }
      crc = shift((uint32_t)c0) ^ (uint32_t)c1;
      crc = shift(crc) ^ (uint32_t)c2;
      p += 3 * lane;
      n -= 3 * lane;
    }
  }
  return crc_hw(crc, p, n);
}
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#ifdef KITFOX_CRC_HW
  if (has_sse42()) return ~(n >= 3 * kSmallLane ? crc_hw3(crc, p, n) : crc_hw(crc, p, n));
#endif
  return ~(n >= 3 * kSmallLane ? crc_soft3(crc, p, n) : crc_soft(crc, p, n));
}

void crc32c_3(const void* a, const void* b, const void* c, size_t n, uint32_t out[3]) {
  const unsigned char* p[3] = {static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b),
                               static_cast<const unsigned char*>(c)};
  size_t body = n & ~(size_t)7;
#ifdef KITFOX_CRC_HW
  if (has_sse42()) {
    uint64_t c0 = ~0u, c1 = ~0u, c2 = ~0u;
    crc3_hw(p, body, &c0, &c1, &c2);
    uint64_t cs[3] = {c0, c1, c2};
    for (int k = 0; k < 3; k++) out[k] = ~crc_hw((uint32_t)cs[k], p[k] + body, n - body);
    return;
  }
#endif
  const Tables& T = tables();
  uint32_t c0 = ~0u, c1 = ~0u, c2 = ~0u;
  for (size_t i = 0; i < body; i += 8) {
    c0 = step8(T, c0, p[0] + i);
    c1 = step8(T, c1, p[1] + i);
    c2 = step8(T, c2, p[2] + i);
  }
  uint32_t cs[3] = {c0, c1, c2};
  for (int k = 0; k < 3; k++) out[k] = ~crc_soft(cs[k], p[k] + body, n - body);
}

uint32_t crc32c_software(uint32_t crc, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  return ~(n >= 3 * kLane ? crc_soft3(crc, p, n) : crc_soft(crc, p, n));
}

}  // namespace kitfox
