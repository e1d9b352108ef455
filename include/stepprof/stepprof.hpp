// stepprof's recorder, C++ API: writes the step log (docs/log-schema.md) from inside a
// training job. One JSON line per optimizer update per rank, after a config line.
//
//   stepprof::Options o;
//   o.path = "logs/rank{rank}.jsonl"; o.rank = rank; o.world_size = world;
//   o.config_json = R"({"micro_batch": 8, "accumulation": 2})";
//   stepprof::open(o);
//   for (step ...) {
//     { STEPPROF_REGION("forward_and_loss"); ... }   // host (+ device) time, calls, parent
//     STEPPROF_COUNT("samples", 16);                   // per-update counter: 2 micro-batches of 8
//     stepprof::end_update(step);                      // writes one record
//   }
//   stepprof::close();
//
// Compile-out: define STEPPROF_DISABLE (e.g. -DSTEPPROF_DISABLE) before including this
// header and every STEPPROF_* macro records nothing, the device ones too: REGION expands
// to a static_assert that its name is a constant string, the others to code that checks
// their arguments' types as the recording build does and names them without evaluating them (as
// assert() under NDEBUG: no unused-variable warning, no side effect; DEVICE_STREAM's is
// not named, as a CPU-only build may not declare it), and those that
// return a Status (END_UPDATE, PADDING_FRACTION, DEVICE_STREAM) give Status::kOk; the
// functions become inline no-ops returning Status::kOk, so code that calls them still
// compiles and needs no stepprof library. TUs built with and without it can be mixed in
// one program (the two variants live in different inline namespaces).
//
// Errors never reach the training loop as exceptions: every function is noexcept; those
// that can fail where the caller should know (open, end_update, close, ...) return a
// Status, the per-call ones (region_enter, count, frame_histogram_add, input_shape,
// sample_indices) return nothing. What the recorder cannot do (a failed write, too many
// regions, a device event pool that ran out) it counts, reports in the next record's
// `recorder_errors` and at close(). Full documentation: docs/recorder.md.
#pragma once

// (C++17 and earlier: GCC 10's -std=c++20 says 201709L.)
#if __cplusplus <= 201703L && !(defined(_MSVC_LANG) && _MSVC_LANG > 201703L)
#error "stepprof/stepprof.hpp needs C++20 (g++/clang++/nvcc: -std=c++20); a C or C++17 file can use stepprof/stepprof.h"
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace stepprof {

class DeviceTimer;  // stepprof/device_timer.hpp
class LineSink;     // stepprof/line_sink.hpp

/// Result of a recorder call. 0 is success, > 0 a warning (the call did its work, or the
/// recorder keeps running and counts what it could not do), < 0 an error (nothing done).
/// The values are those of the C ABI's STEPPROF_* status codes (stepprof/stepprof.h).
enum class Status : int {
  kOk = 0,
  kWarnIo = 1,        ///< the log could not be opened or a record could not be written (counted)
  kWarnErrors = 2,    ///< close(): the recorder counted errors during the run (see the message); open(): a
                      ///< setting of the environment was ignored (STEPPROF_CLOCK naming no clock; counted);
                      ///< microbatch(): stored without its path (counted)
  kWarnMismatch = 3,  ///< region_exit(): not the innermost open region (counted as mismatched_exit)
  kErrArgument = -1,  ///< a bad argument (e.g. config JSON that is not an object, a bad id)
  kErrState = -2,     ///< wrong state (e.g. open() while a recorder is open, end_update() while none is)
  kErrNoMemory = -3,  ///< out of memory
};

/// Stable lowercase name of a status, e.g. "ok", "warn-io", "error-state".
constexpr std::string_view status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kWarnIo: return "warn-io";
    case Status::kWarnErrors: return "warn-errors";
    case Status::kWarnMismatch: return "warn-mismatch";
    case Status::kErrArgument: return "error-argument";
    case Status::kErrState: return "error-state";
    case Status::kErrNoMemory: return "error-no-memory";
  }
  return "unknown";
}

/// Whether to time regions on the GPU stream.
enum class DeviceTiming : std::uint8_t {
  kAuto,  ///< CUDA events when libcuda.so.1 loads and a device is present, else off (the config says why)
  kOff,   ///< host time only
};

/// How the recorder is opened. Only `path`, `rank` and `world_size` are usually set.
struct Options {
  /// Output file; `{rank}` is replaced by the rank. The file is truncated unless `append`.
  std::string path = "stepprof-rank{rank}.jsonl";
  std::int64_t rank = 0;        ///< data-parallel rank of this process
  std::int64_t world_size = 1;  ///< number of ranks
  /// Identifies the run in the config record; must be the same on every rank. Empty:
  /// taken from $STEPPROF_RUN_ID, $TORCHELASTIC_RUN_ID or $SLURM_JOB_ID; with none of
  /// those, generated (host-pid-time) when world_size == 1 and left out otherwise (a
  /// per-process id would make the ranks of one run look like different runs). With
  /// `append`, a generated id is instead the run_id of the config on the file's first
  /// line, when it has one (a resumed job continues its run).
  std::string run_id;
  /// The user's config fields as one JSON object, e.g. {"micro_batch": 8, "accumulation": 2,
  /// "global_batch": 64, "model": "..."}; written in the config record in this order.
  std::string config_json;
  /// More config fields: (key, value as JSON text), e.g. {"seed", "42"}, {"model", "\"m\""}.
  std::vector<std::pair<std::string, std::string>> config;
  /// Alternative code paths: (region, group), written as `region_alternatives`.
  std::vector<std::pair<std::string, std::string>> region_alternatives;
  /// Region roles: (region, "communication" | "data" | "optimizer" | "background"), written
  /// as `region_roles`; "background": runs alongside the update on another thread.
  std::vector<std::pair<std::string, std::string>> region_roles;
  DeviceTiming device_timing = DeviceTiming::kAuto;
  /// Wait for the device streams in end_update() before taking the update's time, so
  /// device and host time agree per update (the real log does). Off: end_update never
  /// waits; device times of regions whose events are not complete yet are reported in a
  /// later record.
  bool sync_at_update = true;
  /// CUstream the opening thread's regions are timed on; nullptr: the legacy default stream.
  void* cuda_stream = nullptr;
  /// CUDA device whose primary context is used when the opening thread has no current
  /// context; -1: device 0.
  int cuda_device = -1;
  /// Device events per thread (a ring; each region call uses 2 until end_update reads
  /// them back), 1 to 2^20 (else open() is kErrArgument). Rounded up to a power of two,
  /// at least 8. When device_events_per_thread x device_threads events cannot be
  /// reserved, device timing is off and the config record's device_timing says why.
  std::uint32_t device_events_per_thread = 1024;
  /// Most threads that may time regions on the device (each has its own event ring), 1 to 2^20.
  std::uint32_t device_threads = 8;
  bool append = false;  ///< append to the file instead of truncating it (see run_id)
  /// Most memory one update's data other than regions and counters may take [bytes]:
  /// frame histogram, input shapes, sample indices and micro-batch detail, counted as 8
  /// bytes per integer stored plus 64 per histogram bucket, distinct shape and
  /// micro-batch. A call that would take the update past it records nothing and is
  /// counted as `update_data_full` (microbatch() returns kErrNoMemory), so that a loop that
  /// never calls end_update(), or appends a dataset's indices each step, cannot grow the
  /// job's memory without bound. 0: no limit. The default, 64 MiB, holds 8 million sample
  /// indices.
  std::size_t max_update_data_bytes = std::size_t{64} << 20;
  /// Print the open and close problems (the log cannot be opened or written; errors were
  /// counted) as one stderr line each, besides returning them. Off for callers that report
  /// them their own way (the Python package raises RecorderWarning).
  bool print_warnings = true;
  /// Replaces the CUDA device timer (tests: FakeDeviceClock). Ignored when device_timing is kOff.
  std::shared_ptr<DeviceTimer> device_timer;
  /// Replaces the output file (tests: a writer that fails). `path` is then only a label.
  std::shared_ptr<LineSink> sink;
};

/// What an open recorder writes to and how it measures.
struct RecorderInfo {
  std::string path;           ///< the output file, `{rank}` expanded
  std::string run_id;         ///< "" when none is written
  std::string clock;          ///< "tsc" or "steady_clock"
  std::string device_timing;  ///< e.g. "cuda-events", "fake", "off: libcuda.so.1 not found"
  /// Config and update records written whole so far. For a pipe or FIFO, those handed to
  /// it: records that wait in the queue for a slow reader count once they are sent.
  std::int64_t records_written = 0;
};

/// Static metadata of one region call site: its name and, once registered, its id.
/// STEPPROF_REGION makes one per call site (constant-initialized, no guard); the name
/// must outlive the site's first use (a string literal does).
struct RegionSite {
  const char* name;
  mutable std::atomic<std::uint32_t> id{0xFFFFFFFFu};
  constexpr explicit RegionSite(const char* n) noexcept : name(n) {}
};

/// Static metadata of one counter call site (STEPPROF_COUNT).
struct CounterSite {
  const char* name;
  mutable std::atomic<std::uint32_t> id{0xFFFFFFFFu};
  constexpr explicit CounterSite(const char* n) noexcept : name(n) {}
};

using RegionId = std::uint32_t;   ///< a registered region name (process-wide)
using CounterId = std::uint32_t;  ///< a registered counter name (process-wide)

namespace detail {
/// Whether T is what STEPPROF_COUNT and STEPPROF_FRAME_HISTOGRAM take: an integer type,
/// not bool. The same in a build with STEPPROF_DISABLE, so that code which compiles
/// there compiles with recording on.
template <typename T>
inline constexpr bool kIntegerArg =
    std::is_integral_v<std::remove_cvref_t<T>> && !std::is_same_v<std::remove_cvref_t<T>, bool>;
#define STEPPROF_INTEGER_ARG_MESSAGE_ \
  "stepprof: counts, frames and samples are integers (a floating-point value would be truncated)"
/// A call-site name (STEPPROF_REGION, STEPPROF_COUNT): a constant `const char*`, as a
/// string literal is; used in a constant expression to check that it is one.
constexpr bool site_name(const char*) noexcept { return true; }
}  // namespace detail

/// A floating-point count, frame count or sample count given to count() or
/// frame_histogram_add() does not compile, as with STEPPROF_COUNT: the implicit
/// conversion to int64 truncated it (3.7 recorded as 3), undefined behaviour for NaN or
/// beyond int64. (Here, outside the recording and disabled namespaces, for both builds.)
template <typename T>
  requires std::is_floating_point_v<T>
void count(CounterId, T) noexcept {
  static_assert(!std::is_floating_point_v<T>, STEPPROF_INTEGER_ARG_MESSAGE_);
}
template <typename T>
  requires std::is_floating_point_v<T>
void count(const CounterSite&, T) noexcept {
  static_assert(!std::is_floating_point_v<T>, STEPPROF_INTEGER_ARG_MESSAGE_);
}
template <typename F, typename S = std::int64_t>
  requires(std::is_floating_point_v<F> || std::is_floating_point_v<S>)
void frame_histogram_add(F, S = 1) noexcept {
  static_assert(!std::is_floating_point_v<F> && !std::is_floating_point_v<S>, STEPPROF_INTEGER_ARG_MESSAGE_);
}

}  // namespace stepprof

#define STEPPROF_CONCAT_(a, b) a##b
#define STEPPROF_CONCAT(a, b) STEPPROF_CONCAT_(a, b)

#if !defined(STEPPROF_DISABLE)

#include "stepprof/detail/recorder_hot.hpp"

namespace stepprof {
namespace detail {
RegionId register_region(const RegionSite& site) noexcept;
CounterId register_counter(const CounterSite& site) noexcept;
void add_count(CounterId id, std::int64_t n) noexcept;

/// An integer argument of STEPPROF_COUNT and STEPPROF_FRAME_HISTOGRAM as an int64: an
/// unsigned value beyond int64 becomes -1, which the recorder rejects and counts as
/// `bad_argument`, as a negative one. A floating-point value (or a bool) does not
/// compile: converting it was truncation (3.7 recorded as 3), and undefined behaviour
/// beyond int64 or for NaN.
template <typename T>
constexpr std::int64_t integer_arg(T n) noexcept {
  static_assert(kIntegerArg<T>, STEPPROF_INTEGER_ARG_MESSAGE_);
  if constexpr (std::is_unsigned_v<T>)
    return static_cast<std::uint64_t>(n) > static_cast<std::uint64_t>(INT64_MAX) ? std::int64_t{-1}
                                                                                   : static_cast<std::int64_t>(n);
  else
    return static_cast<std::int64_t>(n);
}
}  // namespace detail

inline namespace recording {

/// True in TUs where recording is compiled in.
inline constexpr bool kEnabled = true;

// ---- Lifecycle: call from one thread at a time (they are serialized by a mutex). ----

/// Opens the process's recorder and writes the config record. Errors (< 0): config_json
/// is not a JSON object, a config field the recorder sets itself (schema, run_id, rank,
/// world_size, clock, device_timing) is given again, an update record's field (wall_ms,
/// cpu_call_ms, cuda_stream_ms) is given, a rank outside [0, world_size), an
/// empty path without a sink or one holding a NUL character (kErrArgument, checked
/// first: also while another recorder is open); then a recorder is already open (kErrState).
/// kWarnIo: the file could not be opened (the message gives the reason, e.g. a read-only
/// file system where its directory would be made); the recorder runs anyway, counts every record
/// it cannot write and says so at close(). `message` (optional) is cleared, and gets a
/// sentence on any non-kOk status, and on kOk when the file held records of this same
/// run_id and was truncated (a job resumed without `append`: its earlier records are
/// gone; printed too with print_warnings). The calling thread's regions are timed on `cuda_stream`.
Status open(const Options& options, std::string* message = nullptr) noexcept;

/// Ends optimizer update `step`: (with sync_at_update) waits for the device streams,
/// reads back device events, and writes one update record holding everything since the
/// previous end_update() (or open()). kWarnIo when the record could not be written (it
/// is counted and reported in the next record); kErrState when no recorder is open;
/// kErrNoMemory when memory ran out while the record was made (e.g. millions of sample
/// indices under a memory limit): that update's record is lost, regions and all, and
/// `out_of_memory` is counted and reported in the next record.
/// A region of the calling thread still open is counted as `open_at_end_update`: its time
/// goes into the next update's record (end it before end_update()).
/// Steps are update indices: a step not above every earlier one is written and counted
/// as bad_argument (the reader reports a repeated step as duplicate-step); a step below 0
/// is kErrArgument and does nothing else (the update goes on, so what it recorded goes in
/// the next record, with the error counted; a record of it would be rejected by the
/// reader, and with it the errors it carries).
Status end_update(std::int64_t step) noexcept;

/// Starts the current update over (e.g. after evaluation between updates, or before the
/// training loop, after model loading): restarts its wall clock and drops what every
/// thread recorded since the last end_update() or open() (region times and calls,
/// counters, frame histogram, shapes, sample indices, padding, micro-batches), so that the
/// next record holds only what follows. Regions open across it end in the next record,
/// with their time from before it (one open on the calling thread is counted as
/// open_at_begin_update; call it outside regions).
/// With device timing and sync_at_update, synchronizes the streams first (their work
/// before it is dropped too; without sync_at_update, device work not finished by then
/// lands in a later record, as at end_update). kErrState when no recorder is open.
Status begin_update() noexcept;

/// Records are written whole and unbuffered by end_update(); flush() also asks the OS to
/// persist them (fdatasync), which may block on the disk. Not needed for correctness.
Status flush() noexcept;

/// Closes the recorder: releases device events, closes the file. kWarnErrors when the
/// recorder counted errors since open() (`message` and a stderr line say which);
/// kErrState when none is open (`message` says so; a second close() included).
/// Call after other threads that time regions on the device have finished.
Status close(std::string* message = nullptr) noexcept;

/// True while a recorder is open.
bool is_open() noexcept;

/// Errors counted since open(), by kind (e.g. {"write_failed", 2}); empty when none.
/// After close(), until the next open(): the closed session's final counts, those close()
/// counted included (e.g. unwritten_at_close). kErrState when no recorder was ever opened.
Status error_counts(std::vector<std::pair<std::string, std::int64_t>>& out) noexcept;

/// The open recorder's output path, run id, clock and device-timing status.
Status info(RecorderInfo& out) noexcept;

/// The host clock regions are timed with: "tsc" (invariant TSC, calibrated to ns) or "steady_clock".
std::string_view clock_name() noexcept;

// ---- Regions: any thread. After a thread's first region, enter/exit do no hashing,
// allocation or locking; its first one takes the thread registry's lock and allocates
// the thread's state (about 53 KB, kept for the process's life and reused by later
// threads), and STEPPROF_REGION's first use registers the name (hashes, locks). Not
// async-signal-safe (docs/recorder.md). ----

/// The id of `name`, registering it on first use (hashes the name: call once, keep the id).
/// Past 1024 distinct names, returns an id whose regions are not recorded (counted as
/// `too_many_regions`). A name that is empty or longer than 1024 bytes as written
/// returns such an id too, counted as `bad_argument`: the reader would reject every
/// record holding it. Bytes that are not UTF-8 are written as U+FFFD (so "a\xff" and
/// "a\xfe" are one region), each such call counted as `bad_argument` too. The limit on names is per process
/// and outlives close() (docs/recorder.md).
RegionId region_id(std::string_view name) noexcept;

/// The id of a call site's region (registered on the site's first use).
inline RegionId region_id(const RegionSite& site) noexcept {
  const RegionId id = site.id.load(std::memory_order_relaxed);
  return id != detail::kUnsetId ? id : detail::register_region(site);
}

/// Enters region `id` on the calling thread (for C and Python callers; C++ uses Region).
/// An id that region_id() never returned is the region of names past the limit: not
/// recorded; region_exit() of the same id closes it.
inline void region_enter(RegionId id) noexcept {
  detail::enter(id <= detail::kOverflowRegion ? id : detail::kOverflowRegion);
}

/// Exits region `id` on the calling thread. When `id` is not the innermost open region,
/// the exit is counted as `mismatched_exit`; regions opened inside `id` are closed
/// unrecorded if `id` is open further out, else the call is ignored. Returns kOk, or
/// kWarnMismatch for such an exit (the count is kept either way). Past detail::kMaxDepth (64)
/// open levels an exit closes the innermost level whatever its id (those levels are not
/// recorded): kOk.
Status region_exit(RegionId id) noexcept;

/// RAII region: host time (and device time, on a device-timing thread) from construction
/// to destruction, summed per update with the calls; its parent is the region open
/// around it on the same thread.
///
/// Misuse is counted as `mismatched_exit`, as with region_exit(): regions entered inside
/// it and still open at its destruction are closed unrecorded; when it was already
/// closed (region_exit() on it), the destructor records nothing.
class Region {
 public:
  explicit Region(const RegionSite& site) noexcept : e_(detail::enter(region_id(site))) {}
  explicit Region(RegionId id) noexcept
      : e_(detail::enter(id <= detail::kOverflowRegion ? id : detail::kOverflowRegion)) {}
  [[gnu::always_inline]] ~Region() { detail::leave_checked(e_); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  detail::Entered e_;
};

// ---- Per-update data: any thread. Counters are lock-free atomic adds; the others take
// a short lock and may allocate (not for inner loops). All are summed into the update
// that end_update() closes next; none are recorded while no recorder is open. ----

/// The id of counter `name`, registering it on first use (up to 1024 names; past them, or
/// for a name that is empty or over 1024 bytes as written, an id whose counts are not
/// recorded, counted as `too_many_counters` or `bad_argument`).
CounterId counter_id(std::string_view name) noexcept;

/// Adds `n` to counter `id` for this update [count]. A counter never added to in an
/// update is absent from its record; adding 0 makes it present with value 0. Counts are
/// 0 to 2^53: a negative `n` or one above 2^53 is ignored (the update's other adds stay),
/// and an update's sum above 2^53 is left out of the record; each is counted as a
/// `bad_argument` error.
/// Names the analyzer reads (docs/log-schema.md, "Counters"): `samples` and `frames` (the
/// update's work: throughput, and each code path's where it ran alone in its group),
/// `token_slots` and `valid_tokens` (padding), and per code-path region `<region>_samples`,
/// `<region>_frames`, `<region>_microbatches` (its cost per unit of work in the code-path
/// table; microbatch() gives the same). Other names are kept and charted, not interpreted.
inline void count(CounterId id, std::int64_t n) noexcept { detail::add_count(id, n); }
inline void count(const CounterSite& site, std::int64_t n) noexcept {
  const CounterId id = site.id.load(std::memory_order_relaxed);
  detail::add_count(id != detail::kUnsetId ? id : detail::register_counter(site), n);
}

/// Adds `samples` samples with `frames` frames each to the update's `frame_histogram`.
/// Negative values, values above 2^53, and an add that would take the update's count for
/// `frames` above 2^32 (schema::kMaxBatchCount: no real batch, and the reader rejects the
/// record) are ignored and counted as `bad_argument`. Adding 0 samples does nothing (no
/// bucket of 0 samples is written).
void frame_histogram_add(std::int64_t frames, std::int64_t samples = 1) noexcept;

/// Counts one micro-batch whose token tensor has shape `dims`, {batch, padded_length}, in
/// the update's `input_shapes` (the padding analysis reads the padded length; a shape of
/// another number of dimensions is written, and not used for padding: the reader warns). No dimensions, or one that is negative or above 2^53 (what
/// a record holds exactly): ignored and counted as `bad_argument`.
void input_shape(std::span<const std::int64_t> dims) noexcept;
inline void input_shape(std::initializer_list<std::int64_t> dims) noexcept {
  input_shape(std::span<const std::int64_t>(dims.begin(), dims.size()));
}
/// input_shape() of dimensions of any integer types (what STEPPROF_INPUT_SHAPE calls, so
/// that `x.size()` (size_t) needs no cast); a value beyond int64 is rejected like a
/// negative one.
template <typename... Dims>
  requires(sizeof...(Dims) > 0 && (std::is_integral_v<Dims> && ...))
inline void input_shape_of(Dims... dims) noexcept {
  constexpr auto kMax = static_cast<std::uint64_t>(INT64_MAX);
  const std::int64_t d[] = {(std::is_unsigned_v<Dims> && static_cast<std::uint64_t>(dims) > kMax)
                                ? std::int64_t{-1}
                                : static_cast<std::int64_t>(dims)...};
  input_shape(std::span<const std::int64_t>(d));
}

/// Appends dataset indices of the update's samples to `sample_indices`, in order. A call
/// with an index that is negative or above 2^53 records none of its indices (and counts a
/// bad_argument error).
void sample_indices(std::span<const std::int64_t> indices) noexcept;
/// sample_indices() of a contiguous range of any integer type (what
/// STEPPROF_SAMPLE_INDICES calls, so that a std::vector<int> or <std::size_t> of indices
/// needs no copy: only std::int64_t was taken). Each index is checked first: one that is
/// negative or above 2^53 records none of them (a bad_argument error, as above); the
/// others are passed on in chunks of 512 converted on the stack, so a call past the
/// update's data limit (Options::max_update_data_bytes) may keep its first chunks, and
/// another thread's indices may land between two chunks (std::int64_t ranges go in one
/// call, as sample_indices()).
template <std::ranges::contiguous_range R>
  requires(std::is_integral_v<std::ranges::range_value_t<R>> && !std::is_same_v<std::ranges::range_value_t<R>, bool>)
inline void sample_indices_of(const R& indices) noexcept {
  using T = std::ranges::range_value_t<R>;
  const T* p = std::ranges::data(indices);
  const std::size_t n = std::ranges::size(indices);
  if constexpr (std::is_same_v<T, std::int64_t>) {
    sample_indices(std::span<const std::int64_t>(p, n));
  } else {
    constexpr std::uint64_t kMax = std::uint64_t{1} << 53;
    for (std::size_t i = 0; i < n; ++i) {
      bool bad = false;
      if constexpr (std::is_signed_v<T>) bad = p[i] < 0;
      if (bad || static_cast<std::uint64_t>(p[i]) > kMax) {
        const std::int64_t rejected[] = {-1};  // (counted as the call's bad_argument)
        sample_indices(std::span<const std::int64_t>(rejected));
        return;
      }
    }
    constexpr std::size_t kChunk = 512;
    std::int64_t chunk[kChunk];
    for (std::size_t at = 0; at < n; at += kChunk) {
      const std::size_t m = n - at < kChunk ? n - at : kChunk;
      for (std::size_t i = 0; i < m; ++i) chunk[i] = static_cast<std::int64_t>(p[at + i]);
      sample_indices(std::span<const std::int64_t>(chunk, m));
    }
  }
}

/// Records one micro-batch of the update's per-micro-batch detail (`microbatches`, in call
/// order): each sample's frame count and valid (non-padding) token count, the code-path
/// region it took (e.g. "vggt_batched"; empty: not said) and the token length it was
/// padded to (< 0: the longest sample's tokens). `frames` or `tokens` may be empty; when
/// both are given they hold one entry per sample. Counts that are negative or above 2^53,
/// different lengths, or a padded length below a sample's tokens are rejected (counted as
/// `bad_argument`, kErrArgument); a micro-batch that could not be stored for want of memory
/// is counted as `out_of_memory`, one past the update's Options::max_update_data_bytes as
/// `update_data_full` (kErrNoMemory either way). A `path` that cannot be a region name
/// (over 1024 bytes, or past the 1024 region names: counted as `bad_argument` or
/// `too_many_regions`) is left out and the micro-batch stored without it: kWarnErrors. The
/// code-path table (each path's samples and frames, where the log has no <path>_* counters),
/// the padding section (tokens) and the what-if analyses (docs/whatif.md) use this detail
/// when present.
Status microbatch(std::span<const std::int64_t> frames, std::span<const std::int64_t> tokens,
                  std::string_view path = {}, std::int64_t padded_length = -1) noexcept;

/// Sets the update's `padding_fraction` [0, 1]. When never set in an update, it is
/// derived as 1 - valid_tokens / token_slots from those counters when both are present.
/// A value outside [0, 1] or not finite is rejected (kErrArgument). An update with more
/// valid_tokens than token_slots is written without either counter (the reader rejects
/// the pair), counted as bad_argument in that update's own record.
Status set_padding_fraction(double fraction) noexcept;

/// Times the calling thread's regions on device stream `cu_stream` (a CUstream; nullptr:
/// the legacy default stream) from now on. Threads other than the one that opened the
/// recorder have host time only until they call this (after open()). kErrState when the
/// recorder is not open or has no device timing, or all `device_threads` are taken.
Status set_device_stream(void* cu_stream) noexcept;

}  // namespace recording
}  // namespace stepprof

/// Times the rest of the enclosing scope as region `name` (a string literal). The call
/// site's name and id live in a constant-initialized static (no guard, no hashing).
#define STEPPROF_REGION(name) STEPPROF_REGION_N_(name, __COUNTER__)
#define STEPPROF_REGION_N_(name, n)                                                       \
  static constinit ::stepprof::RegionSite STEPPROF_CONCAT(stepprof_site_, n){name};        \
  const ::stepprof::Region STEPPROF_CONCAT(stepprof_region_, n) {                          \
    STEPPROF_CONCAT(stepprof_site_, n)                                                     \
  }
/// Adds `n` (an integer; a floating-point value does not compile) to counter `name` (a
/// string literal) for this update.
#define STEPPROF_COUNT(name, n)                                                  \
  do {                                                                           \
    static constinit ::stepprof::CounterSite stepprof_counter_site_{name};       \
    ::stepprof::count(stepprof_counter_site_, ::stepprof::detail::integer_arg(n)); \
  } while (0)
/// Adds `samples` samples with `frames` frames each to the frame histogram.
#define STEPPROF_FRAME_HISTOGRAM(frames, samples) \
  ::stepprof::frame_histogram_add(::stepprof::detail::integer_arg(frames), ::stepprof::detail::integer_arg(samples))
/// Counts a micro-batch of token-tensor shape `{d0, d1, ...}`.
#define STEPPROF_INPUT_SHAPE(...) ::stepprof::input_shape_of(__VA_ARGS__)
/// Appends the update's sample indices (a contiguous container or span of any integer type).
#define STEPPROF_SAMPLE_INDICES(indices) ::stepprof::sample_indices_of(indices)
#define STEPPROF_PADDING_FRACTION(fraction) ::stepprof::set_padding_fraction(fraction)
/// Device macro: times this thread's regions on CUstream `stream`.
#define STEPPROF_DEVICE_STREAM(stream) ::stepprof::set_device_stream(stream)
#define STEPPROF_END_UPDATE(step) ::stepprof::end_update(step)

#else  // STEPPROF_DISABLE: stubs, no library needed.

namespace stepprof {
inline namespace disabled {

inline constexpr bool kEnabled = false;

inline Status open(const Options&, std::string* = nullptr) noexcept { return Status::kOk; }
inline Status end_update(std::int64_t) noexcept { return Status::kOk; }
inline Status begin_update() noexcept { return Status::kOk; }
inline Status flush() noexcept { return Status::kOk; }
inline Status close(std::string* = nullptr) noexcept { return Status::kOk; }
inline bool is_open() noexcept { return false; }
inline Status error_counts(std::vector<std::pair<std::string, std::int64_t>>& out) noexcept {
  out.clear();
  return Status::kOk;
}
inline Status info(RecorderInfo&) noexcept { return Status::kErrState; }  // (no recorder to describe)
inline std::string_view clock_name() noexcept { return "off"; }
inline RegionId region_id(std::string_view) noexcept { return 0; }
inline RegionId region_id(const RegionSite&) noexcept { return 0; }
inline void region_enter(RegionId) noexcept {}
inline Status region_exit(RegionId) noexcept { return Status::kOk; }
class Region {
 public:
  explicit Region(const RegionSite&) noexcept {}
  explicit Region(RegionId) noexcept {}
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};
inline CounterId counter_id(std::string_view) noexcept { return 0; }
inline void count(CounterId, std::int64_t) noexcept {}
inline void count(const CounterSite&, std::int64_t) noexcept {}
inline void frame_histogram_add(std::int64_t, std::int64_t = 1) noexcept {}
inline void input_shape(std::span<const std::int64_t>) noexcept {}
inline void input_shape(std::initializer_list<std::int64_t>) noexcept {}
inline void sample_indices(std::span<const std::int64_t>) noexcept {}
template <std::ranges::contiguous_range R>
  requires(std::is_integral_v<std::ranges::range_value_t<R>> && !std::is_same_v<std::ranges::range_value_t<R>, bool>)
inline void sample_indices_of(const R&) noexcept {}
inline Status set_padding_fraction(double) noexcept { return Status::kOk; }
inline Status microbatch(std::span<const std::int64_t>, std::span<const std::int64_t>, std::string_view = {},
                         std::int64_t = -1) noexcept {
  return Status::kOk;
}
inline Status set_device_stream(void*) noexcept { return Status::kOk; }
template <typename... Dims>
  requires(sizeof...(Dims) > 0 && (std::is_integral_v<Dims> && ...))
inline void input_shape_of(Dims...) noexcept {}

/// For STEPPROF_COUNT and STEPPROF_FRAME_HISTOGRAM, inside sizeof (the macros below name
/// their arguments there: used, so no unused-variable warning, but never evaluated, as
/// assert()'s under NDEBUG): its return type is deduced, so naming it instantiates the
/// check (as recording's detail::integer_arg does).
template <typename... T>
constexpr auto compiled_out_integers(const T&...) noexcept {
  static_assert((detail::kIntegerArg<T> && ...), STEPPROF_INTEGER_ARG_MESSAGE_);
  return 0;
}

/// kOk, for the macros that return a Status when recording is compiled in.
inline constexpr Status compiled_out_status(std::size_t) noexcept { return Status::kOk; }

}  // namespace disabled
}  // namespace stepprof

// The arguments are checked as the recording build checks them (a name that is not a
// constant string, a floating-point count, a shape of non-integers, indices that are not
// int64 do not compile), so that code built with STEPPROF_DISABLE builds without it.
// STEPPROF_REGION is two declarations, as with recording on (a constant flag in place of
// the call site, a local in place of the Region), so that a statement the recording build
// refuses is refused here too: a case label or goto jumping past it ("crosses
// initialization"), or `if (c) STEPPROF_REGION("x");` (its second half out of scope).
#define STEPPROF_REGION(name) STEPPROF_REGION_OFF_(name, __COUNTER__)
#define STEPPROF_REGION_OFF_(name, n)                                                       \
  [[maybe_unused]] static constexpr bool STEPPROF_CONCAT(stepprof_site_, n) =               \
      ::stepprof::detail::site_name(name);                                                  \
  [[maybe_unused]] const bool STEPPROF_CONCAT(stepprof_region_, n) { STEPPROF_CONCAT(stepprof_site_, n) }
#define STEPPROF_COUNT(name, n)                                                                \
  static_cast<void>(sizeof(std::integral_constant<bool, ::stepprof::detail::site_name(name)>) + \
                    sizeof(::stepprof::compiled_out_integers(n)))
#define STEPPROF_FRAME_HISTOGRAM(frames, samples) \
  static_cast<void>(sizeof(::stepprof::compiled_out_integers(frames, samples)))
#define STEPPROF_INPUT_SHAPE(...) static_cast<void>(sizeof((::stepprof::input_shape_of(__VA_ARGS__), 0)))
#define STEPPROF_SAMPLE_INDICES(indices) static_cast<void>(sizeof((::stepprof::sample_indices_of(indices), 0)))
#define STEPPROF_PADDING_FRACTION(fraction) \
  ::stepprof::compiled_out_status(sizeof(::stepprof::set_padding_fraction(fraction)))
// (Its argument is not named: a CPU-only build may not declare it, e.g. cudaStreamPerThread.)
#define STEPPROF_DEVICE_STREAM(stream) ::stepprof::compiled_out_status(0)
#define STEPPROF_END_UPDATE(step) ::stepprof::compiled_out_status(sizeof(::stepprof::end_update(step)))

#endif  // STEPPROF_DISABLE
