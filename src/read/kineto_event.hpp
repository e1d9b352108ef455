// Parses one Chrome-trace event object of a PyTorch profiler (Kineto) trace into the
// few fields stepprof uses, with simdjson ondemand. Internal to the reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

/// What an event is, from its `ph` and `cat` (Kineto's activity categories).
enum class EventKind : std::uint8_t {
  kOther,           ///< anything stepprof does not use (metadata, instant, counters, ...)
  kCpuOp,           ///< cat "cpu_op" (an operator; used only when named ProfilerStep#N)
  kUserAnnotation,  ///< cat "user_annotation": a record_function range on a CPU thread
  kGpuAnnotation,   ///< cat "gpu_user_annotation": the GPU-side span of such a range
  kLaunch,          ///< cat "cuda_runtime" or "cuda_driver" with a correlation id
  kKernel,          ///< cat "kernel"
  kMemcpy,          ///< cat "gpu_memcpy"
  kMemset,          ///< cat "gpu_memset"
  kFlowStart,       ///< ph "s" of a CPU-to-GPU flow (cat "ac2g" or "async_cpu_to_gpu")
};

/// The fields of one event. Times are integral nanoseconds, converted exactly from
/// the trace's microseconds (up to three decimals). Views stay valid until the next parse.
struct TraceEvent {
  EventKind kind = EventKind::kOther;
  char ph = 0;
  std::string_view name;
  std::int64_t pid = 0, tid = 0;  ///< string ids (e.g. "Spans") are hashed
  std::string_view pid_text;      ///< the pid as written (for messages); empty without one
  std::int64_t ts_ns = 0, dur_ns = 0;
  bool has_ts = false, has_dur = false;
  bool has_tid = false;  ///< without it, tid is 0, which groups the event with no thread
  std::int64_t id = 0;  ///< flow id (ph "s"/"f")
  bool has_id = false;
  std::int64_t correlation = 0, stream = 0, device = 0;
  bool has_correlation = false, has_stream = false, has_device = false;
  /// Of a category stepprof uses, but not a complete event (ph "X"), e.g. a "B"/"E"
  /// pair or no ph: kind is then kOther, and the reader counts it as not read.
  bool not_complete = false;
  /// A complete event ("ph": "X") without "cat": what it is (kernel, annotation, runtime
  /// call) cannot be told; kind is kOther, and the reader counts it as not read.
  bool no_category = false;
};

/// Why an event was rejected: where in its text (0-based byte offset) and what.
struct EventError {
  Problem problem = Problem::kMalformedJson;  ///< kMalformedJson, or kBadField for a wrong type
  std::size_t offset = 0;
  std::string message;
};

/// Converts a JSON number in microseconds to integral nanoseconds: exact for up to
/// three decimals, rounded to the nearest nanosecond beyond (and for exponents).
/// Returns false for text that is not a finite number in int64 range.
bool microseconds_to_ns(std::string_view token, std::int64_t& ns);

class EventParser {
 public:
  /// Parses `text`, which must be followed by SIMDJSON_PADDING readable bytes.
  /// Returns false and fills `error` when the text is not a JSON object or a field
  /// stepprof uses has the wrong type.
  bool parse(std::string_view text, TraceEvent& ev, EventError& error);

 private:
  simdjson::ondemand::parser parser_;
};

}  // namespace stepprof::detail
