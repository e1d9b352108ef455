// The step-log schema: record types and field names, shared by the recorder that
// writes logs and the reader that parses them (one definition, not two).
// docs/log-schema.md describes every field with its unit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stepprof::schema {

/// Version written by stepprof's own recorder in the config record's `schema` field.
/// Logs without the field (such as the bundled real log) are read as version 1.
inline constexpr int kVersion = 1;

/// Region and counter names are 1 to kMaxNameBytes bytes of UTF-8: the reader rejects a
/// record with an empty or longer one (a value written where a name goes, such as a path
/// or a prompt, would be printed whole in every table), and the recorder does not record
/// one (it counts a bad_argument error instead).
inline constexpr std::size_t kMaxNameBytes = 1024;

/// Largest count of samples (a `frame_histogram` bucket) or of micro-batches (an
/// `input_shapes` entry) in one update of one rank that the reader accepts: 2^32. A larger
/// one is no real batch, and the what-ifs expand these counts one entry per sample; the
/// recorder refuses an add that would pass it (counted as `bad_argument`).
inline constexpr std::int64_t kMaxBatchCount = std::int64_t{1} << 32;

/// Longest time a log can hold [ms]: 10^12 ms, about 31.7 years. The reader rejects a
/// record with a longer or a negative time (a corrupt value, which kept would turn sums
/// and spreads into inf); the recorder writes no such device time (a timer's reading
/// outside 0..kMaxTimeMs is counted as `device_read_failed` and left out).
inline constexpr double kMaxTimeMs = 1e12;

// Record types (the `type` field).
inline constexpr std::string_view kTypeConfig = "config";
inline constexpr std::string_view kTypeUpdate = "update";

// Fields of every record.
inline constexpr std::string_view kType = "type";
inline constexpr std::string_view kRank = "rank";

// Config record fields with a meaning to stepprof (all others are kept verbatim).
inline constexpr std::string_view kWorldSize = "world_size";
inline constexpr std::string_view kMicroBatch = "micro_batch";
inline constexpr std::string_view kAccumulation = "accumulation";
inline constexpr std::string_view kGlobalBatch = "global_batch";
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kFirstStep = "first_step";
inline constexpr std::string_view kLastStep = "last_step";
inline constexpr std::string_view kMaxSteps = "max_steps";
inline constexpr std::string_view kModel = "model";
inline constexpr std::string_view kRunId = "run_id";
inline constexpr std::string_view kSchema = "schema";
inline constexpr std::string_view kClock = "clock";
inline constexpr std::string_view kDeviceTiming = "device_timing";
inline constexpr std::string_view kNote = "note";
/// {region: group}: regions with the same group are alternative code paths (recorder).
inline constexpr std::string_view kRegionAlternatives = "region_alternatives";
/// {region: "communication" | "data" | "optimizer" | "background"} (recorder).
inline constexpr std::string_view kRegionRoles = "region_roles";
/// The roles `region_roles` (and a nesting file's `role=`) may give a region; "comm" is
/// read as "communication". docs/hierarchy-format.md says what each means.
inline constexpr std::array<std::string_view, 5> kRegionRoleNames = {"communication", "comm", "data", "optimizer",
                                                                     "background"};

// Update record fields.
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kWallMs = "wall_ms";
inline constexpr std::string_view kCudaStreamMs = "cuda_stream_ms";
inline constexpr std::string_view kCpuCallMs = "cpu_call_ms";
inline constexpr std::string_view kCalls = "calls";
inline constexpr std::string_view kParents = "parents";
inline constexpr std::string_view kCounts = "counts";
inline constexpr std::string_view kFrameHistogram = "frame_histogram";
inline constexpr std::string_view kInputShapes = "input_shapes";
inline constexpr std::string_view kSampleIndices = "sample_indices";
inline constexpr std::string_view kPaddingFraction = "padding_fraction";
inline constexpr std::string_view kRecorderErrors = "recorder_errors";
/// Optional per-micro-batch detail: [{"path", "frames", "tokens", "padded_length"}], one
/// object per micro-batch in order (docs/log-schema.md "Per-micro-batch detail").
inline constexpr std::string_view kMicrobatches = "microbatches";
namespace microbatch {
inline constexpr std::string_view kPath = "path";                  ///< code-path region taken (string)
inline constexpr std::string_view kFrames = "frames";              ///< frames per sample [count], in order
inline constexpr std::string_view kTokens = "tokens";              ///< valid tokens per sample [count], in order
inline constexpr std::string_view kPaddedLength = "padded_length";  ///< padded token length [tokens]
}  // namespace microbatch
/// Optional: host time at the update's entry [ms since the Unix epoch]. No current
/// recorder writes it; where every update has it, `stepprof trace` places updates at it.
inline constexpr std::string_view kStartUnixMs = "start_unix_ms";
/// Optional: the time within the update's wall time in which any of the rank's GPU
/// activity (kernel, memory copy, memset; any stream, any step's) ran: the union of their
/// intervals clipped to the update [ms]. `stepprof import kineto` writes it from a
/// profiler trace (docs/kineto.md); wall_ms minus it is the GPU's idle time. The reader
/// leaves out, with an error, one that is not a number from 0 to kMaxTimeMs.
inline constexpr std::string_view kGpuBusyMs = "gpu_busy_ms";
/// The largest `start_unix_ms` taken [ms]: about the year 5138 (a value in us or ns is
/// beyond it). The reader leaves out, with an error, one that is not a number in [0, this].
inline constexpr double kMaxStartUnixMs = 1e14;

// Counters with a meaning to the analyses (docs/log-schema.md).
namespace counter {
inline constexpr std::string_view kMicroSteps = "micro_steps";
inline constexpr std::string_view kSamples = "samples";
inline constexpr std::string_view kTokenSlots = "token_slots";
inline constexpr std::string_view kValidTokens = "valid_tokens";
inline constexpr std::string_view kSupervisedTokens = "supervised_tokens";
inline constexpr std::string_view kFrames = "frames";

/// True when an update's token counters contradict each other: one of token_slots and
/// valid_tokens without the other, or more valid tokens than slots (its padding would be
/// 100 % or negative). Both absent: false (an update without tokens). The reader reports
/// such updates (bad-field) and the padding analysis leaves them out.
inline bool token_counters_contradict(std::optional<double> slots, std::optional<double> valid) {
  if (!slots && !valid) return false;
  return !slots || !valid || *valid > *slots;
}
}  // namespace counter

/// The child of a communication region that holds the part of its kernels' time during
/// which no compute kernel of the step ran: `<communication region>_exposed` (written by
/// `stepprof import kineto`, docs/kineto.md "Exposed communication").
inline constexpr std::string_view kExposedSuffix = "_exposed";

}  // namespace stepprof::schema
