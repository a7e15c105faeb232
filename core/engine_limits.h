// Limits of the engine. Exceeding one is an error, never a truncation.
#pragma once
#include <cstdint>

namespace kitfox {

constexpr int kMaxDepth = 64;                       // nesting of lists/objects in values
constexpr uint64_t kMaxDocumentBytes = 16u << 20;   // one encoded document
constexpr uint64_t kMaxRecordBytes = 0xFFFFFF00u;    // one record in the file (a vector table may be large)
constexpr uint64_t kMaxWriteBytes = 1u << 30;       // one write statement's record
constexpr uint64_t kMaxStatementBytes = 256u << 20; // one statement's text
constexpr uint32_t kMaxVectorDim = 65536;
constexpr uint32_t kMaxFields = 4096;               // fields per collection
constexpr uint64_t kMaxNameBytes = 256;             // collection and field names
// Timestamps, in ms from the epoch: the range of JavaScript's Date (years
// -271821 to 275760), so a stored timestamp reads back in every build.
constexpr int64_t kMaxTimestampMs = 8640000000000000;
constexpr bool in_date_range(int64_t ms) { return ms >= -kMaxTimestampMs && ms <= kMaxTimestampMs; }

}  // namespace kitfox
