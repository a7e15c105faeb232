// Index declarations, as the schema stores them.
#pragma once
#include <cstdint>

namespace kitfox {

enum class Metric : uint8_t { Cosine = 1, L2 = 2, Dot = 3 };

struct HnswParams {
  // What a definition may say (the parser's bounds; a catalog past them is damage).
  static constexpr uint32_t kMinM = 2, kMaxM = 256, kMinEf = 1, kMaxEf = 100000;
  Metric metric = Metric::Cosine;
  uint32_t m = 16;                 // links per node per layer (2m on layer 0)
  uint32_t ef_construction = 200;  // candidates while linking
  uint32_t ef_search = 100;        // default candidates while searching
  bool operator==(const HnswParams&) const = default;
  bool valid() const {
    return metric >= Metric::Cosine && metric <= Metric::Dot && m >= kMinM && m <= kMaxM &&
           ef_construction >= kMinEf && ef_construction <= kMaxEf && ef_search >= kMinEf && ef_search <= kMaxEf;
  }
};

struct TextParams {
  double k1 = 1.2;  // term-frequency saturation
  double b = 0.75;  // length normalisation
  bool operator==(const TextParams&) const = default;
};

enum class IndexKind : uint8_t { None = 0, Hnsw = 1, Text = 2, Hash = 3, Unique = 4, Sorted = 5 };

struct IndexSpec {
  IndexKind kind = IndexKind::None;
  HnswParams hnsw;
  TextParams text;
  bool operator==(const IndexSpec&) const = default;
};

}  // namespace kitfox
