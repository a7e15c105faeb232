#include "distance.h"

#include "../codec.h"

#include <cstring>
#include <vector>

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#include <cpuid.h>
#include <immintrin.h>
#define KITFOX_X86 1
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace kitfox {

namespace {

inline float reduce8(const float a[8]) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

inline float load_elem(const float* b, size_t i) { return b[i]; }
inline float load_elem(const uint16_t* b, size_t i) { return half_to_float(b[i]); }

// The dimensions after the last full block of 32, one by one.
template <bool L2, typename B>
inline float add_tail(float r, const float* a, const B* b, size_t main, size_t n) {
  for (size_t i = main; i < n; i++) {
    float x = load_elem(b, i);
    float d = L2 ? a[i] - x : a[i];
    float p = L2 ? d * d : d * x;
    r = r + p;
  }
  return r;
}

// The canonical order, one element at a time; `B` is float (f32 storage) or
// uint16_t (f16 storage, decoded as it is read).
template <bool L2, typename B>
float scalar_kernel(const float* a, const B* b, size_t n) {
  float s[32] = {};
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32)
    for (int j = 0; j < 32; j++) {
      float x = load_elem(b, i + j);
      float d = L2 ? a[i + j] - x : a[i + j];
      float p = L2 ? d * d : d * x;
      s[j] = s[j] + p;
    }
  float f[8];
  for (int k = 0; k < 8; k++) f[k] = (s[k] + s[k + 8]) + (s[k + 16] + s[k + 24]);
  return add_tail<L2>(reduce8(f), a, b, main, n);
}

#ifdef KITFOX_X86
__attribute__((target("avx2"))) inline __m256 load8(const float* b) { return _mm256_loadu_ps(b); }
__attribute__((target("avx2,f16c"))) inline __m256 load8(const uint16_t* b) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
}

template <bool L2, typename B>
__attribute__((target("avx2,f16c"))) float avx2_kernel(const float* a, const B* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32) {
    __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
    __m256 a2 = _mm256_loadu_ps(a + i + 16), a3 = _mm256_loadu_ps(a + i + 24);
    __m256 b0 = load8(b + i), b1 = load8(b + i + 8);
    __m256 b2 = load8(b + i + 16), b3 = load8(b + i + 24);
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
  return add_tail<L2>(reduce8(fa), a, b, main, n);
}

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports knows no "f16c").
static bool cpu_has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && cpu_has_f16c();
  return yes;
}

// GCC 12 warns about an uninitialised temporary inside its own AVX-512 headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Two 16-lane accumulators hold the same 32 partial sums; folding each one's
// 256-bit halves first keeps the canonical association
// (s[k] + s[k+8]) + (s[k+16] + s[k+24]).
__attribute__((target("avx512f"))) inline __m512 load16(const float* b) { return _mm512_loadu_ps(b); }
__attribute__((target("avx512f"))) inline __m512 load16(const uint16_t* b) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
}

template <bool L2, typename B>
__attribute__((target("avx512f,avx512dq,avx2,f16c"))) float avx512_kernel(const float* a, const B* b, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32) {
    __m512 a0 = _mm512_loadu_ps(a + i), a1 = _mm512_loadu_ps(a + i + 16);
    __m512 b0 = load16(b + i), b1 = load16(b + i + 16);
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
  return add_tail<L2>(reduce8(fa), a, b, main, n);
}

#pragma GCC diagnostic pop

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}
#endif

#if defined(__wasm_simd128__)
inline v128_t load4(const float* b) { return wasm_v128_load(b); }
// Four halves to f32 at once, the same arithmetic as half_to_float.
inline v128_t half4_to_float4(v128_t h) {
  v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
  v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7FFF));
  v128_t normal = wasm_i32x4_add(wasm_i32x4_shl(em, 13), wasm_i32x4_splat(112 << 23));
  v128_t is_inf = wasm_u32x4_ge(em, wasm_i32x4_splat(0x7C00));
  normal = wasm_v128_or(normal, wasm_v128_and(is_inf, wasm_i32x4_splat(0x7F800000)));
  v128_t sub = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(em), wasm_f32x4_splat(5.9604644775390625e-08f));
  v128_t is_sub = wasm_u32x4_lt(em, wasm_i32x4_splat(0x0400));
  return wasm_v128_or(sign, wasm_v128_bitselect(sub, normal, is_sub));
}
inline v128_t load4(const uint16_t* b) { return half4_to_float4(wasm_u32x4_load16x4(b)); }

template <bool L2, typename B>
float simd128_kernel(const float* a, const B* b, size_t n) {
  v128_t w[8];
  for (auto& x : w) x = wasm_f32x4_splat(0.0f);
  size_t main = n / 32 * 32;
  for (size_t i = 0; i < main; i += 32)
    for (int m = 0; m < 8; m++) {
      v128_t x = wasm_v128_load(a + i + 4 * m), y = load4(b + i + 4 * m);
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
  return add_tail<L2>(reduce8(fa), a, b, main, n);
}
#endif

}  // namespace

#ifdef KITFOX_X86
// The hardware conversion (F16C) is exact too, so results do not change.
static __attribute__((target("f16c,avx"))) void f16_to_f32_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

static bool has_f16c() {
  static const bool yes = cpu_has_f16c() && __builtin_cpu_supports("avx");
  return yes;
}
#endif

// Exact for every half value (half_to_float). No branches.
void f16_to_f32(const uint16_t* in, float* out, size_t n) {
#ifdef KITFOX_X86
  if (has_f16c()) return f16_to_f32_f16c(in, out, n);
#endif
  size_t i = 0;
#if defined(__wasm_simd128__)
  for (; i + 4 <= n; i += 4) wasm_v128_store(out + i, load4(in + i));
#endif
  for (; i < n; i++) out[i] = half_to_float(in[i]);
}

std::vector<KernelSet> kernel_sets() {
  std::vector<KernelSet> out;
#ifdef KITFOX_X86
  if (has_avx512())
    out.push_back({"avx512", avx512_kernel<false, float>, avx512_kernel<true, float>, avx512_kernel<false, uint16_t>,
                   avx512_kernel<true, uint16_t>});
  if (has_avx2())
    out.push_back({"avx2", avx2_kernel<false, float>, avx2_kernel<true, float>, avx2_kernel<false, uint16_t>,
                   avx2_kernel<true, uint16_t>});
#endif
#if defined(__wasm_simd128__)
  out.push_back({"simd128", simd128_kernel<false, float>, simd128_kernel<true, float>, simd128_kernel<false, uint16_t>,
                 simd128_kernel<true, uint16_t>});
#else  // (in WASM the scalar kernels would only add size)
  out.push_back({"scalar", scalar_kernel<false, float>, scalar_kernel<true, float>, scalar_kernel<false, uint16_t>,
                 scalar_kernel<true, uint16_t>});
#endif
  return out;
}

// The kernels in use: the fastest set this CPU runs (one choice, made once).
static const KernelSet& in_use() {
  static const KernelSet k = kernel_sets().front();
  return k;
}

DistanceKernel dot_kernel() { return in_use().dot; }
DistanceKernel l2sq_kernel() { return in_use().l2sq; }
DistanceKernelF16 dot_f16_kernel() { return in_use().dot16; }
DistanceKernelF16 l2sq_f16_kernel() { return in_use().l2sq16; }

float dot_f32(const float* a, const float* b, size_t n) {
  static const DistanceKernel k = dot_kernel();
  return k(a, b, n);
}

float l2sq_f32(const float* a, const float* b, size_t n) {
  static const DistanceKernel k = l2sq_kernel();
  return k(a, b, n);
}

const char* kernel_name() { return in_use().name; }

}  // namespace kitfox
