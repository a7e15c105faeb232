// The clustered embedding generator used by the tests and the benchmarks.
//
// `clusters` centres are drawn uniformly on the unit sphere; each point is a
// centre plus Gaussian noise of standard deviation spread/sqrt(dim) per
// dimension, so the noise has a norm of about `spread` (0.25 by default:
// points stay near their centre but a cluster's neighbourhoods overlap, as
// in real embeddings), seeded so every run produces the same data. Queries come from the
// same distribution with a different seed: they are held out, never members
// of the dataset.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace kitfox::bench {

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t x = (s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double gauss() {
    double u = uniform(), v = uniform();
    if (u < 1e-300) u = 1e-300;
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

struct Clustered {
  uint32_t dim;
  std::vector<float> centres;  // clusters x dim
  float spread;

  Clustered(uint32_t dim_, uint32_t clusters, uint64_t seed = 42, float spread_ = 0.25f) : dim(dim_), spread(spread_) {
    Rng r(seed);
    centres.resize((size_t)clusters * dim);
    for (uint32_t c = 0; c < clusters; c++) {
      double n2 = 0;
      for (uint32_t i = 0; i < dim; i++) {
        double g = r.gauss();
        centres[(size_t)c * dim + i] = (float)g;
        n2 += g * g;
      }
      double inv = 1.0 / std::sqrt(n2);
      for (uint32_t i = 0; i < dim; i++) centres[(size_t)c * dim + i] *= (float)inv;
    }
  }

  // n points (n x dim, row-major) from stream `seed`; cluster of point i is
  // chosen by the stream too.
  std::vector<float> points(size_t n, uint64_t seed, std::vector<uint32_t>* cluster_of = nullptr) const {
    Rng r(seed);
    size_t clusters = centres.size() / dim;
    std::vector<float> out(n * dim);
    float noise = spread / std::sqrt((float)dim);
    for (size_t p = 0; p < n; p++) {
      uint32_t c = (uint32_t)(r.next() % clusters);
      if (cluster_of) cluster_of->push_back(c);
      for (uint32_t i = 0; i < dim; i++) out[p * dim + i] = centres[(size_t)c * dim + i] + noise * (float)r.gauss();
    }
    return out;
  }
};

}  // namespace kitfox::bench
