// Reads PyTorch profiler (Kineto) traces - Chrome Trace Event JSON, plain or gzip - into
// the step-log model, so the same analyses explain them. One trace is one rank.
//
// What each trace becomes (docs/kineto.md has the details and the reasons):
//  - config record: `rank` and `world_size` from the trace's `distributedInfo`, the GPU's
//    `deviceProperties`, the other top-level metadata, `first_step`/`last_step`, a `note`
//    on how to read the times and `region_roles` ({"nccl": "communication", ...}).
//  - one update per `ProfilerStep#N` range: step N, `wall_ms` = its duration [ms].
//  - regions: every user annotation (`record_function` range, category
//    `user_annotation`) that starts inside the step. A name called from several places
//    (under different enclosing annotations) is one region per place, named
//    "NAME (in PARENT)" (KinetoStats::names_at_several_places; over 1,000 extra places, or
//    nested over 64 deep: one region per name, KinetoStats::places_not_used).
//      cpu_call_ms  sum of the durations of its calls in the step [ms]; a call whose
//                   enclosing annotation has its own name is counted in `calls` but not
//                   again in the time.
//      calls        number of calls in the step.
//      parents      the innermost annotation of another name that was open on the same
//                   thread when the call started; for a call on another thread with no
//                   such annotation (PyTorch runs backward on autograd worker threads),
//                   the innermost one open at that moment on the thread that runs the
//                   ProfilerStep. Top level when none (or when that one is in another step).
//      cuda_stream_ms  GPU busy time of the work launched from inside the region: the GPU
//                   kernels, memory copies and memsets whose launching runtime call
//                   (found by the activity's `correlation` id, or the `ac2g` flow) lies
//                   inside a call of the region - directly or in a nested annotation, or
//                   through the thread rule above - taken as the union of their
//                   [ts, ts + dur) intervals on each (device, stream), summed over
//                   streams [ms]. Absent when the region launched no GPU work in the step.
//  - region `nccl`: the NCCL kernels (name contains "nccl", any case) launched in the
//    step: cuda_stream_ms = the union of their intervals over every stream (the time
//    some NCCL kernel ran; it is subtracted from wall_ms for a rank's own work), calls =
//    kernels.
//    NCCL kernels spin while they wait for peers, so this includes waiting.
//  - counts: gpu_kernels, gpu_memcpys, gpu_memsets, nccl_kernels launched in the step.
// GPU work belongs to the step whose ProfilerStep range holds its launch.
//
// Streaming: the trace is split into events as it is decompressed and each event is
// parsed on its own; the reader keeps a few tens of bytes per annotation, runtime call
// and GPU activity (Kineto writes all GPU activity after all CPU events, so a step's
// GPU work is only known at the end), never the trace text.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/diagnostics.hpp"
#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof {

/// Name of the region that groups a step's NCCL kernels (role "communication").
inline constexpr std::string_view kNcclRegion = "nccl";

/// Settings for reading traces.
struct KinetoOptions {
  /// Rank and world size for a trace without `distributedInfo` (otherwise an error);
  /// when given they also override the trace's own.
  std::optional<std::int64_t> rank;
  std::optional<std::int64_t> world_size;
  /// The trace is the only input: one without `distributedInfo` (and no `rank` given) is
  /// taken as rank 0 of a world of 1, a single-process job, as Holistic Trace Analysis
  /// takes it, and a note says so (with other inputs it is an error: which rank it is
  /// cannot be told).
  bool lone = false;
  /// Polled while reading: once set, a read (or a FIFO's open) that waits for data stops,
  /// and so does the parse, and read_kineto_trace returns nullopt with no diagnostic (the
  /// caller set it and knows why). Null: never stops.
  const std::atomic<bool>* cancel = nullptr;
};

/// What was read, for messages and benchmarks.
struct KinetoStats {
  std::uint64_t bytes = 0;        ///< decompressed bytes read [bytes]
  std::uint64_t events = 0;       ///< elements of traceEvents [count]
  std::uint64_t steps = 0;        ///< ProfilerStep ranges [count]
  std::uint64_t annotations = 0;  ///< user annotations, ProfilerStep excluded [count]
  std::uint64_t launches = 0;     ///< runtime/driver calls with a correlation id [count]
  std::uint64_t gpu_ops = 0;      ///< kernels, memory copies and memsets [count]
  std::uint64_t annotations_outside_steps = 0;  ///< annotations that start in no step [count]
  std::uint64_t gpu_ops_without_launch = 0;     ///< GPU activity whose launch is not in the trace [count]
  std::uint64_t gpu_ops_outside_steps = 0;      ///< GPU activity launched outside every step [count]
  std::uint64_t gpu_annotations = 0;            ///< gpu_user_annotation spans (not used for times) [count]
  /// GPU activity longer than the trace's ProfilerStep ranges from the first one's start to
  /// the last one's end (`steps_span_ms`) plus an hour: it cannot have run in the trace (a
  /// corrupt "dur"; a collective times out sooner), and is not counted [count]; the
  /// longest such [ms]. Longer than the span plus 1 s only: counted, and said
  /// (`gpu_ops_long`: a collective that waited long for a late rank, or a corrupt "dur").
  std::uint64_t gpu_ops_too_long = 0, gpu_ops_long = 0;
  double longest_too_long_ms = 0, longest_long_ms = 0, steps_span_ms = 0;
  /// GPU activity that starts more than 1 ms before the runtime call that launched it
  /// (real traces: 5 us or more after it): the GPU and CPU clocks disagree [count]; the
  /// largest such lead [ms]. Still counted for its launch's step and annotation.
  std::uint64_t gpu_ops_before_launch = 0;
  double most_before_launch_ms = 0;
  /// Events of a category that is read but not complete events (ph "X"), e.g. "B"/"E"
  /// pairs: not read, reported as a warning [count].
  std::uint64_t not_complete = 0;
  /// Complete events ("ph": "X") without "cat": not read (a kernel without it was dropped
  /// without a word: a helper), reported as a warning [count]. Real traces have none.
  std::uint64_t no_category = 0;
  /// ProfilerStep ranges that start before an earlier one ends (work in the overlap
  /// counts for the later step), with the first such range's line and step [count].
  std::uint64_t overlapping_steps = 0;
  std::uint64_t first_overlap_line = 0;
  std::int64_t first_overlap_step = 0;
  /// ProfilerStep events that repeat an earlier one exactly (step number, thread, start
  /// and end; an event written twice): one of each is used, the repeats are not [count];
  /// the first repeat's line and step. Without this the repeat, which "started last",
  /// took the step's work and was then skipped as a duplicate step.
  std::uint64_t repeated_steps = 0;
  std::uint64_t first_repeat_line = 0;
  std::int64_t first_repeat_step = 0;
  /// ProfilerStep ranges of a group of steps more than an hour (kGpuLongestMs) from the
  /// others in which no user annotation, runtime launch or GPU activity starts, while
  /// another group's steps hold work: a damaged "ts" (e.g. 0 or -1 among Unix times; two
  /// steps damaged alike form a group). Not used as updates (an update with its time and
  /// none of its work; the first step's start also sets start_unix_ms) [count]; the first
  /// such step's number and line, and its distance to the nearest step kept [ms].
  std::uint64_t steps_astray = 0;
  std::int64_t first_astray_step = 0;
  std::uint64_t first_astray_line = 0;
  double first_astray_gap_ms = 0;
  std::uint64_t model_bytes = 0;  ///< memory held for the compact event tables at the end [bytes]
  /// Annotation names called from several places (under different enclosing annotations,
  /// or at the top of a worker thread): each place is a region of its own, "name (in
  /// parent)" or "name (other thread)", so that
  /// a parent holds only its own children's calls [count]; the first such name.
  std::uint64_t names_at_several_places = 0;
  std::string first_split_name;
  /// True when places would have been over 1,000 beyond each name's first, or nested over
  /// 64 deep on one thread (a generated or crafted trace): one region per name then, its
  /// parent its first call's.
  bool places_not_used = false;
};

/// One trace in the log model: one rank's config and its updates (sorted by step).
/// Region and counter ids refer to the NameTables given to read_kineto_trace().
struct KinetoTrace {
  RunConfig config;
  std::vector<UpdateRecord> updates;
  KinetoStats stats;
};

/// True when the file (plain or gzip) holds a JSON object whose first key is one of a
/// Chrome/Kineto trace's (`traceEvents`, `schemaVersion`, `deviceProperties`,
/// `distributedInfo`, ...), or whose first key is another one than `type` and whose first
/// 16 MiB hold a `"traceEvents"` key (the search stops early when the first line is a
/// whole object, as a step log's record is). False for step logs, unreadable files, "-"
/// and anything but a regular file (a pipe or FIFO is never sniffed: its bytes would be
/// consumed).
bool is_kineto_trace(const std::string& path);

/// Reads one trace. Problems are reported to `diag` with `path:line:column`:
///  - not JSON, not an object, no `traceEvents` array, truncated (gzip or JSON),
///    no `distributedInfo` (and no options.rank), no `ProfilerStep#N` range:
///    a `bad-trace` error, and nullopt (nothing of the file is used);
///  - a malformed event: a `malformed-json` error (or `bad-field` / `negative-value`
///    for a used field), the event skipped and the rest read;
///  - work that cannot be attributed (annotations outside every step, GPU activity
///    without a launch or launched outside every step): one note each, with counts.
/// `file_index` is stored in each record's SourceLocation, whose line is that of the
/// ProfilerStep event.
std::optional<KinetoTrace> read_kineto_trace(const std::string& path, std::uint32_t file_index,
                                             NameTable& regions, NameTable& counters, Diagnostics& diag,
                                             const KinetoOptions& options = {});

}  // namespace stepprof
