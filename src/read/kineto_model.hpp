// The compact tables the Kineto reader keeps while it streams a trace (steps, user
// annotations, runtime launches, CPU-to-GPU flows, GPU activities, a few tens of bytes
// each), and the attribution that turns them into update records at the end of the
// trace. include/stepprof/kineto.hpp states the definitions. Internal to the reader.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/kineto.hpp"
#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof::detail {

/// A GPU activity longer than the trace's steps (from the first one's start to the last
/// one's end) by more than kGpuLongMs is said (a collective that waited long for a late
/// rank, or a corrupt "dur"), and by more than kGpuLongestMs (beyond any collective's
/// timeout) it is not counted [ms].
inline constexpr double kGpuLongMs = 1000, kGpuLongestMs = 3.6e6;

/// What a GPU activity is.
enum class GpuKind : std::uint8_t { kKernel, kMemcpy, kMemset };

class KinetoModel {
 public:
  /// A ProfilerStep#`step` range on thread `tid`, [start_ns, end_ns); `line` of its event.
  void add_step(std::int64_t step, std::int64_t tid, std::int64_t start_ns, std::int64_t end_ns,
                std::uint64_t line);
  /// A user annotation (record_function range) on CPU thread `tid`.
  void add_annotation(std::string_view name, std::int64_t tid, std::int64_t start_ns, std::int64_t end_ns);
  /// A runtime or driver call (e.g. cudaLaunchKernel) with its correlation id.
  void add_launch(std::int64_t correlation, std::int64_t tid, std::int64_t ts_ns);
  /// The start ("s") of a CPU-to-GPU flow: the launch point of activity `id`.
  void add_flow(std::int64_t id, std::int64_t tid, std::int64_t ts_ns);
  /// A kernel, memory copy or memset on (device, stream), [start_ns, end_ns).
  /// `correlation`: the launch's id, or none (the activity is then charged to the step it
  /// started in on the GPU, to no region).
  void add_gpu(GpuKind kind, bool nccl, std::optional<std::int64_t> correlation, std::int64_t device,
               std::int64_t stream, std::int64_t start_ns, std::int64_t end_ns);

  [[nodiscard]] std::size_t steps() const { return steps_.size(); }
  [[nodiscard]] bool has_annotation(std::string_view name) const { return names_.find(name).has_value(); }
  /// Devices that ran GPU activity, sorted.
  [[nodiscard]] std::vector<std::int64_t> devices() const;
  /// Bytes held by the tables (their elements; the deques' block overhead is not counted).
  [[nodiscard]] std::size_t bytes() const;

  /// The update records, sorted by step (then start), with regions interned into
  /// `regions` and counters into `counters`; `nccl_region` names the NCCL group, and
  /// `exposed_name` (unless empty) its child holding the exposed part: per step, the time
  /// in the union of the step's NCCL kernel intervals (all streams) during which none of
  /// its other kernels ran [ms]. Fills the attribution counts of `stats`. `file_index`
  /// goes into each SourceLocation. `epoch_offset_ns`: what to add to the trace's times
  /// for Unix time [ns] (its baseTimeNanoseconds, else 0); each update then gets
  /// `start_unix_ms`, its step's start, when the first step's lies from 2001 to 5138
  /// (1e12 to 1e14 ms; otherwise the times are relative to something unknown: none gets it).
  std::vector<UpdateRecord> build(NameTable& regions, NameTable& counters, std::string_view nccl_region,
                                  std::string_view exposed_name, std::uint32_t file_index, KinetoStats& stats,
                                  std::int64_t epoch_offset_ns = 0);

 private:
  // Leaves out the ProfilerStep ranges of a group more than an hour from the other steps
  // in which no annotation, launch or GPU activity starts, while another group's do
  // (KinetoStats::steps_astray); steps_ sorted by start.
  void drop_astray_steps(KinetoStats& stats);
  // Leaves out each ProfilerStep range that repeats an earlier one exactly (number,
  // thread, start, end: KinetoStats::repeated_steps); steps_ sorted by start, stably.
  void drop_repeated_steps(KinetoStats& stats);
  struct Step {
    std::int64_t step, tid, start, end;
    std::uint64_t line;
  };
  struct Annotation {
    std::int64_t tid, start, end;
    std::uint32_t name;
  };
  struct Launch {
    std::int64_t correlation, tid, ts;
  };
  struct Gpu {
    std::int64_t correlation, device, stream, start, end;
    GpuKind kind;
    bool nccl, has_correlation;
  };

  /// Regions by place (see build()). Per annotation that starts in a step: its place id,
  /// the nearest enclosing annotation of another name in its step (-1: none) and whether
  /// it is a recursive call (inside a call of its own name: the same region, no time
  /// added). Per place id: its region name, unique: the annotation's name, or, for a name
  /// at several places, "name (in parent's region name)" or "name (other thread)".
  /// by_name: places were not used (over 1,000 beyond each name's first, or nested over 64
  /// deep on one thread): one
  /// region per name, place ids being name ids.
  struct PlaceTable {
    std::vector<std::uint32_t> of;
    std::vector<std::int32_t> place_parent;
    std::vector<std::uint8_t> recursive;
    std::vector<std::string> display;
    std::uint64_t names_at_several_places = 0;
    std::string first_split_name;  // the first such name
    bool by_name = false;
  };
  /// `parent`: per annotation, its enclosing annotation (on its thread, else on the step's
  /// thread) or -1; `step_of_ann`: its step, -1 for none.
  [[nodiscard]] PlaceTable make_places(const std::vector<std::int32_t>& parent,
                                       const std::vector<std::int32_t>& step_of_ann) const;

  NameTable names_;  // annotation names
  // Deques, not vectors: a vector that doubles leaves its old blocks behind, and the
  // command's allocator keeps freed pages (src/cli/allocator.cpp), so the peak held the
  // tables about twice over (114 MB on a 1,027 MB trace; docs/kineto.md).
  std::deque<Step> steps_;
  std::deque<Annotation> annotations_;
  std::deque<Launch> launches_, flows_;
  std::deque<Gpu> gpu_;
};

}  // namespace stepprof::detail
