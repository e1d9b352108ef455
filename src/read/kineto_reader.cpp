// Reads one PyTorch profiler (Kineto) trace: bytes -> top-level values and events
// (trace_scanner) -> event fields (kineto_event) -> compact tables and per-step records
// (kineto_model), plus the config record from the trace's metadata.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "byte_source.hpp"
#include "json_error.hpp"
#include "kineto_event.hpp"
#include "kineto_model.hpp"
#include "stepprof/kineto.hpp"

#include <sys/stat.h>
#include "stepprof/record_writer.hpp"
#include "stepprof/schema.hpp"
#include "trace_scanner.hpp"
#include "../util/text.hpp"

namespace stepprof {
namespace {

using detail::EventKind;
using detail::TextPosition;

// Events are parsed in place in the ByteSource buffer, which keeps this many readable
// bytes after its data.
static_assert(detail::ByteSource::padding >= simdjson::SIMDJSON_PADDING);

// Top-level values larger than this are not copied into the config (e.g. Kineto's INFO log).
constexpr std::size_t kMaxKeptValue = 1024;

bool contains_nccl(std::string_view name) {
  for (std::size_t i = 0; i + 4 <= name.size(); ++i)
    if ((name[i] | 0x20) == 'n' && (name[i + 1] | 0x20) == 'c' && (name[i + 2] | 0x20) == 'c' &&
        (name[i + 3] | 0x20) == 'l')
      return true;
  return false;
}

// ProfilerStep#N -> N.
bool step_number(std::string_view name, std::int64_t& n) {
  constexpr std::string_view prefix = "ProfilerStep#";
  if (!name.starts_with(prefix)) return false;
  const auto digits = name.substr(prefix.size());
  if (digits.empty() || digits[0] < '0' || digits[0] > '9') return false;  // (no sign: steps are >= 0)
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  return ec == std::errc() && p == digits.data() + digits.size();
}

// PyTorch's own record_function names for data loading and the optimizer step.
std::string_view role_of(std::string_view name) {
  if (name.starts_with("enumerate(DataLoader)#")) return "data";
  if (name.starts_with("Optimizer.step#")) return "optimizer";
  return {};
}

class TraceReader {
 public:
  TraceReader(const std::string& path, std::uint32_t fi, NameTable& regions, NameTable& counters, Diagnostics& diag,
              const KinetoOptions& opt)
      : path_(path), fi_(fi), regions_(regions), counters_(counters), diag_(diag), opt_(opt) {}

  bool cancelled() const { return opt_.cancel && opt_.cancel->load(std::memory_order_relaxed); }

  std::optional<KinetoTrace> run() {
    std::string err;
    auto src = detail::ByteSource::open(path_, err, std::size_t{1} << 20, opt_.cancel);
    if (cancelled()) return std::nullopt;
    if (!src) {
      report(Severity::kError, Problem::kUnreadable, {}, fmt::format("cannot read: {}", err));
      return std::nullopt;
    }
    detail::TraceScanner scan(*src);
    detail::TraceScanner::Piece piece;
    for (std::uint64_t n = 0;; ++n) {
      if (diag_.should_stop()) return std::nullopt;
      if (n % 4096 == 0 && cancelled()) return std::nullopt;
      const auto item = scan.next(piece);
      if (cancelled()) return std::nullopt;  // (a read it waited in was stopped: not a bad trace)
      if (item == detail::TraceScanner::Item::kEvent) {
        ++stats_.events;
        event(scan, piece);
      } else if (item == detail::TraceScanner::Item::kTopValue) {
        if (!top_value(piece)) return std::nullopt;
      } else if (item == detail::TraceScanner::Item::kEnd) {
        if (const auto z = scan.trailing_zero_bytes())
          report(Severity::kWarning, Problem::kZeroBytes, piece.where,
                 fmt::format("{} zero byte{} after the end of the trace skipped (a crash or power loss leaves zeros "
                             "where a file was being written)",
                             z, z == 1 ? "" : "s"));
        break;
      } else {
        report(Severity::kError, Problem::kBadTrace, piece.where,
               fmt::format("{}; nothing of this trace is used", piece.error));
        return std::nullopt;
      }
    }
    stats_.bytes = src->bytes_read();
    if (!scan.saw_trace_events()) {
      report(Severity::kError, Problem::kBadTrace, {},
             "no \"traceEvents\" array: this JSON object is not a PyTorch profiler trace");
      return std::nullopt;
    }
    // Alone, and not said to be one of several ranks (--world-size above 1 without --rank
    // is: which one cannot be told), a single-process job's trace.
    if (!opt_.rank && !dist_rank_ && !saw_dist_ && opt_.lone && (!opt_.world_size || *opt_.world_size == 1)) {
      dist_rank_ = 0;
      if (!opt_.world_size) dist_world_ = 1;  // (as if the trace said so: no --world-size to override it)
      report(Severity::kNote, Problem::kMissingField, {},
             "no \"distributedInfo\": taken as rank 0 of a world of 1 (a single-process job, as Holistic Trace "
             "Analysis takes it); with other ranks' traces, give each its rank with `stepprof import kineto --rank R "
             "--world-size W`");
    }
    if (!opt_.rank && !dist_rank_) {
      report(Severity::kError, Problem::kBadTrace, {},
             saw_dist_ ? "distributedInfo has no integer \"rank\": cannot tell which rank this trace is"
                       : "no \"distributedInfo\": the trace does not say its rank and world size (was it recorded "
                         "without torch.distributed?); `stepprof import kineto --rank R --world-size W` can supply "
                         "them; nothing of this trace is used");
      return std::nullopt;
    }
    if (model_.steps() == 0 && rejected_steps_ > 0) {
      report(Severity::kError, Problem::kBadTrace, {},
             fmt::format("no usable ProfilerStep#N range: the trace's {} {} rejected (the problems above), so it has "
                         "no optimizer updates to analyze",
                         rejected_steps_, rejected_steps_ == 1 ? "was" : "were"));
      return std::nullopt;
    }
    if (model_.steps() == 0) {
      report(Severity::kError, Problem::kBadTrace, {},
             fmt::format("no ProfilerStep#N range among {} events{}: the trace was not recorded with "
                         "torch.profiler's schedule and prof.step(), so it has no optimizer updates to analyze",
                         stats_.events,
                         stats_.not_complete ? fmt::format(" ({} events of the categories stepprof reads are not "
                                                           "complete events, \"ph\": \"X\", and were not read)",
                                                           stats_.not_complete)
                                             : std::string()));
      return std::nullopt;
    }
    if (other_pid_at_.line != 0) {
      report(Severity::kError, Problem::kBadTrace, other_pid_at_,
             fmt::format("ProfilerStep#N ranges of more than one process: this one's \"pid\" is {}, the first one's "
                         "(at {}:{}) is {} (a trace merged from several ranks' or processes' files?); a trace is one "
                         "process's, and a merged one would mix their steps and kernels; nothing of this trace is used",
                         shorten(other_pid_text_), step_pid_at_.line, step_pid_at_.column, shorten(step_pid_text_)));
      return std::nullopt;
    }
    KinetoTrace trace;
    stats_.model_bytes = model_.bytes();
    const std::string nccl = model_.has_annotation(kNcclRegion) ? std::string(kNcclRegion) + "_kernels"
                                                                : std::string(kNcclRegion);
    // (An annotation of that name would be merged with it: then none is written.)
    const std::string exposed = nccl + std::string(schema::kExposedSuffix);
    trace.updates =
        model_.build(regions_, counters_, nccl, model_.has_annotation(exposed) ? std::string() : exposed, fi_, stats_,
                     epoch_offset_ns());
    // A region's time summed over many events beyond the 1e12 ms a step log holds (each
    // event is within it): `import kineto` wrote a log that `report` then rejected. The
    // update is left out, as the step-log reader leaves out such a record.
    std::erase_if(trace.updates, [&](const UpdateRecord& u) {
      for (const RegionSample& r : u.regions)
        for (const OptionalMs t : {r.device_ms, r.host_ms})
          if (t && *t > 1e12) {
            report(Severity::kError, Problem::kBadField, {u.source.line, 0},
                   fmt::format("ProfilerStep#{}: the time of \"{}\" adds up to {:.4g} ms, beyond the 1e12 ms a step "
                               "log holds; not used as an update",
                               u.step, shorten(regions_.name(r.region)), *t));
            return true;
          }
      return false;
    });
    if (trace.updates.empty()) {
      report(Severity::kError, Problem::kBadTrace, {},
             "no usable ProfilerStep#N range: every step was rejected (the problems above), so the trace has no "
             "optimizer updates to analyze");
      return std::nullopt;
    }
    const std::int64_t rank = opt_.rank ? *opt_.rank : *dist_rank_;
    for (auto& u : trace.updates) u.rank = rank;
    trace.config = config(rank, trace.updates, nccl);
    trace.config.source = {.file = fi_, .line = 0};  // (from the trace's metadata: no one line)
    notes();
    trace.stats = stats_;
    return trace;
  }

 private:
  void report(Severity sev, Problem p, TextPosition where, std::string msg) {
    diag_.report({sev, p, path_, where.line, where.column, std::move(msg)});
  }

  void event(const detail::TraceScanner& scan, const detail::TraceScanner::Piece& piece) {
    detail::EventError err;
    if (!parser_.parse(piece.text, ev_, err)) {
      // (A ProfilerStep event rejected for a bad field: the trace then has no step
      // because of it, not for want of torch.profiler's schedule.)
      if (piece.text.find("\"ProfilerStep#") != std::string_view::npos) ++rejected_steps_;
      report(Severity::kError, err.problem, scan.position(piece.text.data() + err.offset),
             err.message + "; event skipped");
      return;
    }
    const auto& ev = ev_;
    switch (ev.kind) {
      case EventKind::kOther:
        if (ev.not_complete) {
          ++stats_.not_complete;
          if (stats_.not_complete == 1) first_not_complete_ = scan.position(piece.text.data());
        }
        if (ev.no_category) {
          ++stats_.no_category;
          if (stats_.no_category == 1) first_no_category_ = scan.position(piece.text.data());
        }
        return;
      case EventKind::kGpuAnnotation:
        ++stats_.gpu_annotations;
        return;
      case EventKind::kFlowStart:  // (the launch point of the GPU activity with its id)
        if (!ev.has_id) return missing(scan, piece, "id");
        if (!ev.has_ts) return missing(scan, piece, "ts");
        if (!ev.has_tid) return missing(scan, piece, "tid");
        model_.add_flow(ev.id, ev.tid, ev.ts_ns);
        return;
      case EventKind::kLaunch:
        if (!ev.has_ts) return missing(scan, piece, "ts");
        if (!ev.has_tid) return missing(scan, piece, "tid");  // (its thread finds the annotation it is in)
        ++stats_.launches;
        model_.add_launch(ev.correlation, ev.tid, ev.ts_ns);
        return;
      default:
        break;
    }
    // Ranges: ProfilerStep, annotations and GPU activities need ts and dur >= 0; steps
    // and annotations a thread too (a launch is in the annotations open on its thread: an
    // annotation without one held no launch, and its device time was lost without a word).
    if (!ev.has_ts) return missing(scan, piece, "ts");
    if (!ev.has_dur) return missing(scan, piece, "dur");
    if (!ev.has_tid && (ev.kind == EventKind::kUserAnnotation || ev.name.starts_with("ProfilerStep#")))
      return missing(scan, piece, "tid");
    if (ev.dur_ns < 0) {
      if (ev.name.starts_with("ProfilerStep#")) ++rejected_steps_;
      report(Severity::kError, Problem::kNegativeTime, scan.position(piece.text.data()),
             fmt::format("event \"{}\" has a negative duration ({} us); event skipped", shorten(ev.name),
                         static_cast<double>(ev.dur_ns) / 1e3));
      return;
    }
    std::int64_t end = 0;
    // (Each below 9.2e15 us, as read; their sum in ns may still overflow: it was wrapped,
    // and the kernel's time landed nowhere without a word.)
    if (__builtin_add_overflow(ev.ts_ns, ev.dur_ns, &end)) {
      if (ev.name.starts_with("ProfilerStep#")) ++rejected_steps_;
      report(Severity::kError, Problem::kBadField, scan.position(piece.text.data()),
             fmt::format("event \"{}\" ends beyond the int64 nanosecond range (ts {} us + dur {} us); event skipped",
                         shorten(ev.name), static_cast<double>(ev.ts_ns) / 1e3, static_cast<double>(ev.dur_ns) / 1e3));
      return;
    }
    // A step log holds times up to 1e12 ms (log-schema.md): a longer step, region or
    // kernel would be a log that `report` rejects after `import kineto` wrote it.
    if (ev.dur_ns > std::int64_t{1'000'000'000'000'000'000}) {
      const bool step = ev.name.starts_with("ProfilerStep#");
      if (step) ++rejected_steps_;
      report(Severity::kError, Problem::kBadField, scan.position(piece.text.data()),
             fmt::format("{}\"{}\" lasts {} us, beyond the 1e12 ms a step log holds; {}", step ? "" : "event ",
                         shorten(ev.name), static_cast<double>(ev.dur_ns) / 1e3,
                         step ? "not used as an update" : "event skipped"));
      return;
    }
    // A step takes time: a ProfilerStep of 0 us holds no work, and its update would say 0 ms.
    if (ev.dur_ns == 0 && ev.name.starts_with("ProfilerStep#") &&
        (ev.kind == EventKind::kCpuOp || ev.kind == EventKind::kUserAnnotation)) {
      ++rejected_steps_;
      report(Severity::kError, Problem::kBadField, scan.position(piece.text.data()),
             fmt::format("\"{}\" lasts 0 us (a damaged \"dur\": a step takes time); not used as an update",
                         shorten(ev.name)));
      return;
    }
    switch (ev.kind) {
      case EventKind::kCpuOp:
      case EventKind::kUserAnnotation: {
        std::int64_t n = 0;
        if (ev.name.starts_with("ProfilerStep#")) {
          if (!step_number(ev.name, n)) {
            const auto digits = ev.name.substr(std::string_view("ProfilerStep#").size());
            const bool all_digits = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
            const bool negative = digits.size() > 1 && digits[0] == '-' &&
                                  digits.find_first_not_of("0123456789", 1) == std::string_view::npos;
            ++rejected_steps_;
            // (An error: the step and its work are left out, as for a negative dur.)
            report(Severity::kError, Problem::kBadField, scan.position(piece.text.data()),
                   fmt::format("\"{}\" {}; not used as an update", shorten(ev.name),
                               all_digits ? std::string("has a step number beyond the int64 range")
                               : negative ? std::string("has a negative step number (steps are >= 0)")
                               : digits.empty()
                                   ? std::string("has no step number after '#'")
                                   : fmt::format("has \"{}\" after '#', not a step number", shorten(digits))));
            return;
          }
          ++stats_.steps;
          const TextPosition at = scan.position(piece.text.data());
          // (Steps of a second process: a trace merged from several ranks' files.)
          // (A step without a pid is of no other process that can be named: not compared.)
          if (!ev.pid_text.empty()) {
            if (step_pid_at_.line == 0) step_pid_ = ev.pid, step_pid_at_ = at, step_pid_text_ = ev.pid_text;
            else if (ev.pid != step_pid_ && other_pid_at_.line == 0)
              other_pid_at_ = at, other_pid_text_ = ev.pid_text;
          }
          model_.add_step(n, ev.tid, ev.ts_ns, end, at.line);
        } else if (ev.kind == EventKind::kUserAnnotation) {
          ++stats_.annotations;
          model_.add_annotation(ev.name, ev.tid, ev.ts_ns, end);
        }
        return;
      }
      case EventKind::kKernel:
      case EventKind::kMemcpy:
      case EventKind::kMemset: {
        ++stats_.gpu_ops;
        const auto kind = ev.kind == EventKind::kKernel   ? detail::GpuKind::kKernel
                          : ev.kind == EventKind::kMemcpy ? detail::GpuKind::kMemcpy
                                                          : detail::GpuKind::kMemset;
        model_.add_gpu(kind, ev.kind == EventKind::kKernel && contains_nccl(ev.name),
                       ev.has_correlation ? std::optional(ev.correlation) : std::nullopt,
                       ev.has_device ? ev.device : ev.pid, ev.has_stream ? ev.stream : ev.tid, ev.ts_ns, end);
        return;
      }
      default:
        return;
    }
  }

  void missing(const detail::TraceScanner& scan, const detail::TraceScanner::Piece& piece, std::string_view field) {
    if (ev_.name.starts_with("ProfilerStep#")) ++rejected_steps_;
    report(Severity::kError, Problem::kMissingField, scan.position(piece.text.data()),
           fmt::format("event \"{}\" has no \"{}\"; event skipped", shorten(ev_.name), field));
  }

  static std::string shorten(std::string_view s) {
    return s.size() > 60 ? fmt::format("{}...", detail::prefix_at_character(s, 57)) : std::string(s);
  }

  // The trace's baseTimeNanoseconds (newer PyTorch writes times relative to it), else 0.
  std::int64_t epoch_offset_ns() const {
    for (const RawField& m : metadata_) {
      if (m.key != "kineto_baseTimeNanoseconds") continue;
      std::int64_t ns = 0;
      const auto [p, ec] = std::from_chars(m.json.data(), m.json.data() + m.json.size(), ns);
      return ec == std::errc() && p == m.json.data() + m.json.size() && ns >= 0 ? ns : 0;
    }
    return 0;
  }

  // A metadata value of the trace object; false when the trace cannot be used.
  bool top_value(const detail::TraceScanner::Piece& piece) {
    const std::string key(piece.key);
    // A key given twice: JSON parsers differ on which one wins (the last one silently
    // did here). Which rank the trace is would be ambiguous; other metadata keeps the
    // first, with a warning.
    if (!top_keys_.insert(key).second) {
      if (key == "distributedInfo") return ambiguous(piece, "a second \"distributedInfo\" key", true);  // (not read)
      report(Severity::kWarning, Problem::kBadTrace, piece.where,
             fmt::format("a second \"{}\" key in the trace object; the first one is kept", shorten(key)));
      return true;
    }
    if (key == "distributedInfo") {
      saw_dist_ = true;
      return distributed(piece);
    } else if (key == "deviceProperties") {
      device_properties_ = std::string(piece.text);
    } else if (piece.text.size() <= kMaxKeptValue) {
      metadata_.push_back({"kineto_" + key, std::string(piece.text)});
    } else {
      omitted_.push_back(fmt::format("{} ({} bytes)", key, piece.text.size()));
    }
    return true;
  }

  // distributedInfo, or its rank or world size, given twice: the trace cannot be used
  // unless --rank says which rank it is (and then a world size given twice is not used
  // unless --world-size replaces it).
  bool ambiguous(const detail::TraceScanner::Piece& piece, std::string_view what, bool world) {
    if (!opt_.rank) {
      report(Severity::kError, Problem::kBadTrace, piece.where,
             fmt::format("{}: cannot tell which rank this trace is; nothing of this trace is used", what));
      return false;
    }
    if (world) {
      dist_world_.reset();
      world_ambiguous_ = true;
    }
    report(Severity::kWarning, Problem::kBadTrace, piece.where,
           fmt::format("{}: --rank {} is used{}", what, *opt_.rank,
                       opt_.world_size ? fmt::format(", and --world-size {}", *opt_.world_size)
                       : world         ? std::string(", and the trace's world size is not (give --world-size)")
                                       : std::string()));
    return true;
  }

  bool distributed(const detail::TraceScanner::Piece& piece) {
    simdjson::dom::element root;
    if (auto e = dom_.parse(piece.text.data(), piece.text.size(), true).get(root)) {
      report(Severity::kError, Problem::kMalformedJson, piece.where,
             fmt::format("malformed JSON in distributedInfo: {}", detail::json_error_text(e)));
      return true;
    }
    simdjson::dom::object obj;
    if (root.get_object().get(obj)) {
      report(Severity::kError, Problem::kBadField, piece.where, "distributedInfo should be a JSON object");
      return true;
    }
    std::set<std::string_view> keys;
    for (auto [k, v] : obj) {
      std::int64_t n = 0;
      if (!keys.insert(k).second) {
        if (k == "rank" || k == "world_size") {
          if (!ambiguous(piece, fmt::format("distributedInfo.{} given twice", k), k == "world_size")) return false;
          continue;
        }
        report(Severity::kWarning, Problem::kBadTrace, piece.where,
               fmt::format("distributedInfo.{} given twice; the first one is kept", shorten(k)));
        continue;
      }
      if (k == "rank") {
        if (v.get_int64().get(n) || n < 0)
          report(Severity::kError, Problem::kBadField, piece.where,
                 fmt::format("distributedInfo.rank should be an integer >= 0, found {}", simdjson::minify(v)));
        else dist_rank_ = n;
      } else if (k == "world_size") {
        if (v.get_int64().get(n) || n < 1)
          report(Severity::kError, Problem::kBadField, piece.where,
                 fmt::format("distributedInfo.world_size should be an integer >= 1, found {}", simdjson::minify(v)));
        else if (!world_ambiguous_) dist_world_ = n;
      } else {
        std::string raw = simdjson::minify(v);
        if (raw.size() <= kMaxKeptValue) distributed_.push_back({"distributed_" + std::string(k), std::move(raw)});
        else omitted_.push_back(fmt::format("distributedInfo.{} ({} bytes)", k, raw.size()));
      }
    }
    return true;
  }

  RunConfig config(std::int64_t rank, const std::vector<UpdateRecord>& updates, const std::string& nccl) {
    std::vector<RawField> f;
    f.push_back({std::string(schema::kRank), std::to_string(rank)});
    if (auto w = opt_.world_size ? opt_.world_size : dist_world_)
      f.push_back({std::string(schema::kWorldSize), std::to_string(*w)});
    if (!updates.empty()) {
      f.push_back({std::string(schema::kFirstStep), std::to_string(updates.front().step)});
      f.push_back({std::string(schema::kLastStep), std::to_string(updates.back().step)});
    }
    f.push_back({"trace_format", json_string("pytorch-profiler (kineto)")});
    // The properties of the GPU(s) this rank ran on; deviceProperties lists every visible one.
    if (!device_properties_.empty()) {
      simdjson::dom::element root;
      simdjson::dom::array arr;
      if (!dom_.parse(device_properties_).get(root) && !root.get_array().get(arr)) {
        const auto used = model_.devices();
        std::string kept = "[";
        std::string gpu_name;
        std::size_t visible = 0;
        for (auto d : arr) {
          ++visible;
          std::int64_t id = -1;
          if (d["id"].get_int64().get(id)) continue;
          if (!std::binary_search(used.begin(), used.end(), id)) continue;
          if (kept.size() > 1) kept += ",";
          kept += simdjson::minify(d);
          std::string_view name;
          if (gpu_name.empty() && !d["name"].get_string().get(name)) gpu_name = std::string(name);
        }
        kept += "]";
        if (!gpu_name.empty()) f.push_back({"gpu_name", json_string(gpu_name)});
        f.push_back({"visible_gpus", std::to_string(visible)});
        if (kept.size() > 2) f.push_back({"device_properties", kept});
      }
    }
    for (auto& m : distributed_) f.push_back(m);
    for (auto& m : metadata_) f.push_back(m);
    if (!omitted_.empty()) {
      nlohmann::json o = omitted_;
      f.push_back({"kineto_omitted", o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    }
    nlohmann::ordered_json roles = nlohmann::ordered_json::object();
    for (const auto& u : updates)
      for (const auto& r : u.regions) {
        const auto name = regions_.name(r.region);
        if (name == nccl) roles[nccl] = "communication";
        else if (auto role = role_of(name); !role.empty()) roles[std::string(name)] = role;
      }
    // (Names from the trace may hold invalid UTF-8: replaced, never thrown on.)
    if (!roles.empty())
      f.push_back({"region_roles", roles.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)});
    f.push_back({std::string(schema::kDeviceTiming),
                 json_string("kineto: union of GPU kernel, memcpy and memset intervals per stream")});
    f.push_back({std::string(schema::kNote),
                 json_string(fmt::format(
                     "Imported from a PyTorch profiler trace. wall_ms: ProfilerStep duration (host). cpu_call_ms: "
                     "host time of record_function ranges. cuda_stream_ms: GPU busy time of the kernels and copies "
                     "launched inside the range (union per stream, summed over streams; idle gaps excluded). {}: "
                     "NCCL kernels (union over every stream), which include time spent waiting for other ranks.",
                     nccl))});
    std::vector<std::string> problems;
    RunConfig c = make_config(std::move(f), &problems);
    for (auto& p : problems) report(Severity::kError, Problem::kBadField, {}, std::move(p));
    return c;
  }

  void notes() {
    // --rank and --world-size are for traces without distributedInfo; given for one that
    // has it, they win, and the difference is said.
    auto overridden = [&](const char* what, const std::optional<std::int64_t>& given,
                          const std::optional<std::int64_t>& traced) {
      if (given && traced && *given != *traced)
        report(Severity::kWarning, Problem::kBadTrace, {},
               fmt::format("the trace's distributedInfo says {} {}; --{} {} is used instead", what, *traced,
                           what == std::string_view("rank") ? "rank" : "world-size", *given));
    };
    overridden("rank", opt_.rank, dist_rank_);
    overridden("world size", opt_.world_size, dist_world_);
    if (stats_.repeated_steps)
      report(Severity::kWarning, Problem::kDuplicateStep, {stats_.first_repeat_line, 0},
             fmt::format("{} ProfilerStep event(s) repeat an earlier one exactly (step number, thread, start and "
                         "end; the first: ProfilerStep#{}): one of each is used",
                         stats_.repeated_steps, stats_.first_repeat_step));
    if (stats_.overlapping_steps)
      report(Severity::kWarning, Problem::kBadTrace, {stats_.first_overlap_line, 0},
             fmt::format("{} ProfilerStep range(s) start before an earlier one ends (the first: ProfilerStep#{}); "
                         "work in an overlap is counted for the step that started last",
                         stats_.overlapping_steps, stats_.first_overlap_step));
    if (stats_.steps_astray)
      report(Severity::kError, Problem::kBadField, {stats_.first_astray_line, 0},
             fmt::format("{} ProfilerStep range(s) lie more than an hour from the trace's other steps and hold none "
                         "of its work (no annotation, launch or GPU activity starts in them; the first: ProfilerStep#{}, "
                         "{:.3g} hours from the nearest step kept): a damaged \"ts\"; not used as updates",
                         stats_.steps_astray, stats_.first_astray_step, stats_.first_astray_gap_ms / 3.6e6));
    if (stats_.not_complete)
      report(Severity::kWarning, Problem::kUnattributed, first_not_complete_,
             fmt::format("{} event(s) of the categories stepprof reads (user annotations, runtime calls, kernels, "
                         "copies) are not complete events (\"ph\": \"X\"), e.g. \"B\"/\"E\" pairs or no \"ph\" (the "
                         "first is here); they are not counted",
                         stats_.not_complete));
    if (stats_.no_category)
      report(Severity::kWarning, Problem::kMissingField, first_no_category_,
             fmt::format("{} complete event(s) (\"ph\": \"X\") have no \"cat\", which tells a kernel, a copy, an "
                         "annotation or a runtime call apart (the first is here); they are not counted",
                         stats_.no_category));
    if (stats_.annotations_outside_steps)
      report(Severity::kNote, Problem::kUnattributed, {},
             fmt::format("{} of {} user annotation call(s) start outside every ProfilerStep range and are not "
                         "counted",
                         stats_.annotations_outside_steps, stats_.annotations));
    if (stats_.gpu_ops_outside_steps)
      report(Severity::kNote, Problem::kUnattributed, {},
             fmt::format("{} of {} GPU kernel(s)/copies were launched outside every ProfilerStep range (or, with no "
                         "launch in the trace, ran outside every range) and are not counted in any step's regions "
                         "or counters (their time within a step still counts in its gpu_busy_ms)",
                         stats_.gpu_ops_outside_steps, stats_.gpu_ops));
    if (stats_.gpu_ops == 0)
      report(Severity::kNote, Problem::kMissingField, {},
             "no GPU kernel, copy or memset in the trace (a CPU-only run, or recorded without "
             "ProfilerActivity.CUDA): regions have host times only, and there is no NCCL kernel time");
    if (stats_.gpu_ops_too_long)
      report(Severity::kError, Problem::kBadField, {},
             fmt::format("{} GPU kernel(s)/copies last longer than the trace's ProfilerStep ranges together ({:.6g} ms "
                         "from the first one's start to the last one's end) plus an hour, the longest {:.6g} ms: they "
                         "cannot have run in this trace (a corrupt \"dur\"; a collective times out sooner); not "
                         "counted",
                         stats_.gpu_ops_too_long, stats_.steps_span_ms, stats_.longest_too_long_ms));
    if (stats_.gpu_ops_long)
      report(Severity::kWarning, Problem::kBadTrace, {},
             fmt::format("{} GPU kernel(s)/copies last over 1 s longer than the trace's ProfilerStep ranges together "
                         "({:.6g} ms), the longest {:.6g} ms: a collective that waited long for a late rank (a "
                         "checkpoint or an evaluation on one rank), or a corrupt \"dur\"; counted as written",
                         stats_.gpu_ops_long, stats_.steps_span_ms, stats_.longest_long_ms));
    if (stats_.gpu_ops_before_launch)
      report(Severity::kWarning, Problem::kBadTrace, {},
             fmt::format("{} of {} GPU kernel(s)/copies start more than 1 ms before the runtime call that launched "
                         "them (by up to {:.6g} ms; in a consistent trace they start after it): the trace's GPU and CPU "
                         "clocks disagree. Each still counts for its launch's step and annotation, but GPU work "
                         "without a launch is placed in a step by its GPU start",
                         stats_.gpu_ops_before_launch, stats_.gpu_ops, stats_.most_before_launch_ms));
    if (stats_.names_at_several_places)
      report(Severity::kNote, Problem::kHierarchy, {},
             fmt::format("{} annotation name(s) are called from several places (the first: \"{}\"): "
                         "each place is a region of its own, named \"NAME (in PARENT)\", so that a parent's self "
                         "time holds only its own children's calls",
                         stats_.names_at_several_places, stats_.first_split_name));
    if (stats_.places_not_used)
      report(Severity::kWarning, Problem::kHierarchy, {},
             "the annotation names are called from over 1,000 places beyond each name's first (distinct paths "
             "of enclosing annotations), or nested over 64 deep on one thread: each name is one region, under its "
             "first call's parent, so a parent's self time may be understated where a name is called from "
             "several places");
    if (stats_.gpu_ops_without_launch)
      report(Severity::kNote, Problem::kUnattributed, {},
             fmt::format("{} of {} GPU kernel(s)/copies have no launching runtime call or flow in the trace (by "
                         "correlation id): each counts for the step it ran in, but for no annotation",
                         stats_.gpu_ops_without_launch, stats_.gpu_ops));
  }

  TextPosition first_not_complete_;
  TextPosition first_no_category_;
  std::int64_t step_pid_ = 0;  // the first ProfilerStep's pid (of those with one)
  std::string step_pid_text_, other_pid_text_;  // it as written; a later one's that differs
  TextPosition step_pid_at_, other_pid_at_;
  std::uint64_t rejected_steps_ = 0;  // ProfilerStep#N events rejected (bad ts, dur or step number)
  const std::string& path_;
  std::uint32_t fi_;
  NameTable& regions_;
  NameTable& counters_;
  Diagnostics& diag_;
  const KinetoOptions& opt_;
  detail::EventParser parser_;
  detail::TraceEvent ev_;
  detail::KinetoModel model_;
  simdjson::dom::parser dom_;
  KinetoStats stats_;
  bool saw_dist_ = false;
  std::optional<std::int64_t> dist_rank_, dist_world_;
  bool world_ambiguous_ = false;  // distributedInfo's world size given twice (see ambiguous())
  std::string device_properties_;
  std::vector<RawField> distributed_, metadata_;
  std::vector<std::string> omitted_;
  std::set<std::string, std::less<>> top_keys_;  // the trace object's keys seen
};

}  // namespace

bool is_kineto_trace(const std::string& path) {
  // Only a regular file can be looked at and then read again: a pipe's bytes would be
  // gone, and a FIFO's open would wait for a second writer.
  struct stat st {};
  if (path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::string err;
  auto src = detail::ByteSource::open(path, err, 1 << 16);
  if (!src) return false;
  constexpr std::size_t kSniff = 1 << 16;          // bytes looked at for the first key
  constexpr std::size_t kSearch = std::size_t{16} << 20;  // and for "traceEvents" after another one
  while (src->size() < kSniff && src->fill()) {
  }
  std::string_view s(src->data(), src->size());
  if (s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
  auto skip = [&] {
    while (!s.empty() && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) s.remove_prefix(1);
  };
  skip();
  if (s.empty() || s[0] != '{') return false;
  s.remove_prefix(1);
  skip();
  if (s.empty() || s[0] != '"') return false;
  s.remove_prefix(1);
  const auto q = s.find('"');
  if (q == std::string_view::npos) return false;
  const std::string_view key = s.substr(0, q);
  constexpr std::array<std::string_view, 7> keys = {"schemaVersion", "traceEvents",  "deviceProperties",
                                                    "distributedInfo", "displayTimeUnit", "traceName",
                                                    "baseTimeNanoseconds"};
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return true;
  if (key == "type") return false;
  // Another first key (traces may start with any metadata): a trace has "traceEvents" at
  // its top level, a step log's record never has that key. A first line that is a whole
  // object ("{...}") is a step log's record; otherwise look further, up to 16 MiB (a
  // trace on one line, or pretty-printed, may begin with a large metadata value).
  std::size_t scanned = 0;
  for (;;) {
    const std::string_view all(src->data(), src->size());
    if (all.find("\"traceEvents\"", scanned > 12 ? scanned - 12 : 0) != std::string_view::npos) return true;
    if (const auto nl = all.find('\n'); nl != std::string_view::npos) {
      std::string_view first = all.substr(0, nl);
      while (!first.empty() && (first.back() == '\r' || first.back() == ' ' || first.back() == '\t'))
        first.remove_suffix(1);
      if (first.ends_with('}')) return false;
    }
    scanned = all.size();
    if (scanned >= kSearch || !src->fill()) return false;
  }
}

std::optional<KinetoTrace> read_kineto_trace(const std::string& path, std::uint32_t file_index, NameTable& regions,
                                             NameTable& counters, Diagnostics& diag, const KinetoOptions& options) {
  TraceReader reader(path, file_index, regions, counters, diag, options);
  return reader.run();
}

}  // namespace stepprof
