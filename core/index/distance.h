// Distance kernels. Every kernel sums in one canonical order, so the native
// (AVX2) and the WASM (SIMD128) builds compute bit-identical distances and
// therefore build the same HNSW graph:
//
//   32 partial sums, lane j taking dimensions i = j (mod 32) of the first
//   floor(n/32)*32 dimensions; folded to 8 lanes as
//   a[k] = (s[k] + s[k+8]) + (s[k+16] + s[k+24]); reduced as
//   ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)); then the remaining dimensions are
//   added one by one. Products and sums are separate roundings (no FMA):
//   the build uses -ffp-contract=off. AVX-512 (16 lanes) and AVX2 (8 lanes)
//   are chosen at run time natively, SIMD128 in WASM; all keep that order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "params.h"

namespace kitfox {

// sum a[i]*b[i]
float dot_f32(const float* a, const float* b, size_t n);
// sum (a[i]-b[i])^2
float l2sq_f32(const float* a, const float* b, size_t n);

// The kernel functions themselves, resolved for this CPU once.
using DistanceKernel = float (*)(const float*, const float*, size_t);
DistanceKernel dot_kernel();
DistanceKernel l2sq_kernel();

// Half-precision storage: the same kernels with b given as f16, each value
// decoded exactly as it is read, so the result has the same bits as
// decoding b first and calling the f32 kernel.
using DistanceKernelF16 = float (*)(const float*, const uint16_t*, size_t);
DistanceKernelF16 dot_f16_kernel();
DistanceKernelF16 l2sq_f16_kernel();

// Every implementation this CPU can run, fastest first (the first is the one
// in use; natively the last is the scalar one); for tests that hold them all
// to the same bits.
struct KernelSet {
  const char* name;
  DistanceKernel dot, l2sq;
  DistanceKernelF16 dot16, l2sq16;
};
std::vector<KernelSet> kernel_sets();

// Decodes f16 to f32, exactly and without branches.
void f16_to_f32(const uint16_t* in, float* out, size_t n);

// The distance the index orders by (smaller is nearer): cosine 1 - a.b
// (vectors are normalised at write), l2 squared, dot -a.b.
inline float distance(Metric m, const float* a, const float* b, size_t n) {
  switch (m) {
    case Metric::L2: return l2sq_f32(a, b, n);
    case Metric::Cosine: return 1.0f - dot_f32(a, b, n);
    default: return -dot_f32(a, b, n);
  }
}

// The kernel in use: "avx512", "avx2", "simd128" or "scalar".
const char* kernel_name();

}  // namespace kitfox
