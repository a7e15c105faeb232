#include "distance.h"

#include <cstring>

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#include <immintrin.h>
#define KITFOX_X86 1
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace kitfox {

namespace {

inline float reduce8(const float a[8]) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

template <bool L2>
float scalar_kernel(const float* a, const float* b, size_t n) {
  float s[32] = {};
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32)
    for (int j = 0; j < 32; j++) {
      float d = L2 ? a[i + j] - b[i + j] : a[i + j];
      float p = L2 ? d * d : d * b[i + j];
      s[j] = s[j] + p;
    }
  float f[8];
  for (int k = 0; k < 8; k++) f[k] = (s[k] + s[k + 8]) + (s[k + 16] + s[k + 24]);
  float r = reduce8(f);
  for (size_t i = main; i < n; i++) {
    float d = L2 ? a[i] - b[i] : a[i];
    float p = L2 ? d * d : d * b[i];
    r = r + p;
  }
  return r;
}

#ifdef KITFOX_X86
template <bool L2>
__attribute__((target("avx2"))) float avx2_kernel(const float* a, const float* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32) {
    __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
    __m256 a2 = _mm256_loadu_ps(a + i + 16), a3 = _mm256_loadu_ps(a + i + 24);
    __m256 b0 = _mm256_loadu_ps(b + i), b1 = _mm256_loadu_ps(b + i + 8);
    __m256 b2 = _mm256_loadu_ps(b + i + 16), b3 = _mm256_loadu_ps(b + i + 24);
    if (L2) {
      a0 = _mm256_sub_ps(a0, b0), a1 = _mm256_sub_ps(a1, b1), a2 = _mm256_sub_ps(a2, b2), a3 = _mm256_sub_ps(a3, b3);
      b0 = a0, b1 = a1, b2 = a2, b3 = a3;
    }
    s0 = _mm256_add_ps(s0, _mm256_mul_ps(a0, b0));
    s1 = _mm256_add_ps(s1, _mm256_mul_ps(a1, b1));
    s2 = _mm256_add_ps(s2, _mm256_mul_ps(a2, b2));
    s3 = _mm256_add_ps(s3, _mm256_mul_ps(a3, b3));
  }
  __m256 f = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));  // s0+s1 = s[k]+s[k+8]
  float fa[8];
  _mm256_storeu_ps(fa, f);
  float r = reduce8(fa);
  for (size_t i = main; i < n; i++) {
    float d = L2 ? a[i] - b[i] : a[i];
    float p = L2 ? d * d : d * b[i];
    r = r + p;
  }
  return r;
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// GCC 12 warns about an uninitialised temporary inside its own AVX-512 headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Two 16-lane accumulators hold the same 32 partial sums; folding each one's
// 256-bit halves first keeps the canonical association
// (s[k] + s[k+8]) + (s[k+16] + s[k+24]).
template <bool L2>
__attribute__((target("avx512f,avx512dq,avx2"))) float avx512_kernel(const float* a, const float* b, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32) {
    __m512 a0 = _mm512_loadu_ps(a + i), a1 = _mm512_loadu_ps(a + i + 16);
    __m512 b0 = _mm512_loadu_ps(b + i), b1 = _mm512_loadu_ps(b + i + 16);
    if (L2) {
      a0 = _mm512_sub_ps(a0, b0), a1 = _mm512_sub_ps(a1, b1);
      b0 = a0, b1 = a1;
    }
    s0 = _mm512_add_ps(s0, _mm512_mul_ps(a0, b0));
    s1 = _mm512_add_ps(s1, _mm512_mul_ps(a1, b1));
  }
  __m256 lo = _mm256_add_ps(_mm512_castps512_ps256(s0), _mm512_extractf32x8_ps(s0, 1));
  __m256 hi = _mm256_add_ps(_mm512_castps512_ps256(s1), _mm512_extractf32x8_ps(s1, 1));
  float fa[8];
  _mm256_storeu_ps(fa, _mm256_add_ps(lo, hi));
  float r = reduce8(fa);
  for (size_t i = main; i < n; i++) {
    float d = L2 ? a[i] - b[i] : a[i];
    float p = L2 ? d * d : d * b[i];
    r = r + p;
  }
  return r;
}

#pragma GCC diagnostic pop

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}
#endif

#if defined(__wasm_simd128__)
template <bool L2>
float simd128_kernel(const float* a, const float* b, size_t n) {
  v128_t w[8];
  for (auto& x : w) x = wasm_f32x4_splat(0.0f);
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32)
    for (int m = 0; m < 8; m++) {
      v128_t x = wasm_v128_load(a + i + 4 * m), y = wasm_v128_load(b + i + 4 * m);
      if (L2) {
        x = wasm_f32x4_sub(x, y);
        y = x;
      }
      w[m] = wasm_f32x4_add(w[m], wasm_f32x4_mul(x, y));
    }
  // Lanes 0-3 of the 8-lane fold come from w0,w2,w4,w6; lanes 4-7 from w1,w3,w5,w7.
  v128_t lo = wasm_f32x4_add(wasm_f32x4_add(w[0], w[2]), wasm_f32x4_add(w[4], w[6]));
  v128_t hi = wasm_f32x4_add(wasm_f32x4_add(w[1], w[3]), wasm_f32x4_add(w[5], w[7]));
  float fa[8];
  wasm_v128_store(fa, lo);
  wasm_v128_store(fa + 4, hi);
  float r = reduce8(fa);
  for (size_t i = main; i < n; i++) {
    float d = L2 ? a[i] - b[i] : a[i];
    float p = L2 ? d * d : d * b[i];
    r = r + p;
  }
  return r;
}
#endif

}  // namespace

// Exact for every half value: normals rebias the exponent, subnormals are
// scaled by a float multiply, inf/nan keep their payload. No branches.
void f16_to_f32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t h = in[i];
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t em = h & 0x7FFFu;
    // Normal numbers: shift into place and rebias (112 << 23).
    uint32_t normal = (em << 13) + (112u << 23);
    // Inf/NaN: exponent all ones.
    uint32_t is_inf = 0u - (uint32_t)(em >= 0x7C00u);
    normal |= is_inf & 0x7F800000u;
    // Subnormals and zero: em * 2^-24, exact in float.
    float sub = (float)em * 5.9604644775390625e-08f;
    uint32_t subbits;
    memcpy(&subbits, &sub, 4);
    uint32_t is_sub = 0u - (uint32_t)(em < 0x0400u);
    uint32_t bits = sign | ((normal & ~is_sub) | (subbits & is_sub));
    memcpy(&out[i], &bits, 4);
  }
}

DistanceKernel dot_kernel() {
#ifdef KITFOX_X86
  if (has_avx512()) return avx512_kernel<false>;
  if (has_avx2()) return avx2_kernel<false>;
#endif
#if defined(__wasm_simd128__)
  return simd128_kernel<false>;
#else
  return scalar_kernel<false>;
#endif
}

DistanceKernel l2sq_kernel() {
#ifdef KITFOX_X86
  if (has_avx512()) return avx512_kernel<true>;
  if (has_avx2()) return avx2_kernel<true>;
#endif
#if defined(__wasm_simd128__)
  return simd128_kernel<true>;
#else
  return scalar_kernel<true>;
#endif
}

float dot_f32(const float* a, const float* b, size_t n) {
  static const DistanceKernel k = dot_kernel();
  return k(a, b, n);
}

float l2sq_f32(const float* a, const float* b, size_t n) {
  static const DistanceKernel k = l2sq_kernel();
  return k(a, b, n);
}

const char* kernel_name() {
#ifdef KITFOX_X86
  if (has_avx512()) return "avx512";
  if (has_avx2()) return "avx2";
#endif
#if defined(__wasm_simd128__)
  return "simd128";
#else
  return "scalar";
#endif
}

}  // namespace kitfox
