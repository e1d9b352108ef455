// The per-file half of the reader: lines -> records (record_parser), with the checks
// that need only this file (table rows, truncation, a second config, the file's rank).
#include "file_reader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "file_kind.hpp"
#include "json_error.hpp"
#include "line_source.hpp"
#include "record_parser.hpp"
#include "stdout_lines.hpp"
#include "../util/text.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::detail {
namespace {

// What a recorder error kind (docs/recorder.md, "Errors") means for the records, for the
// recorder-errors warning.
std::string_view recorder_error_effect(std::string_view kind) {
  static constexpr std::pair<std::string_view, std::string_view> kEffects[] = {
      {"write_failed", "records are missing"},
      {"open_failed", "records are missing"},
      {"depth_overflow", "region calls nested too deep are not recorded"},
      {"mismatched_exit", "some region calls are not recorded"},
      {"too_many_regions", "regions past the name limit are not recorded"},
      {"too_many_counters", "counters past the name limit are not recorded"},
      {"bad_argument",
       "a value refused is not recorded (a negative count or one beyond 2^53, a padding fraction outside [0, 1] or "
       "NaN, a negative or empty input shape, a negative sample index, more valid_tokens than token_slots, a bad "
       "micro-batch, an empty or too long name), one corrected is (a name's bad UTF-8 as U+FFFD), a step not above "
       "an earlier one is written, an unknown STEPPROF_CLOCK ignored; the record holds the count only: the host "
       "program's own calls say which (the C ABI's return value and stepprof_last_error)"},
      {"out_of_memory", "some data is not recorded"},
      {"device_events_exhausted", "some region calls have host time only"},
      {"device_record_failed", "some device times are missing"},
      {"device_pending_full", "some device times are missing"},
      {"device_read_failed", "some device times are missing"},
      {"device_sync_failed", "device times may arrive in later records"},
      {"device_threads_exhausted", "some threads have host time only"},
      {"open_at_end_update", "a region open at end_update: its time is in a later record"},
      {"open_at_begin_update", "a region open at begin_update: its time from before the restart is in this record"},
      {"log_deleted", "the log file was deleted while recorded to and made again: the records before this one are in "
                      "no file"},
      {"update_data_full", "per-update data past the recorder's limit (max_update_data_bytes) is not recorded"},
  };
  for (const auto& [k, effect] : kEffects)
    if (k == kind) return effect;
  return "see docs/recorder.md";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The first line of a Chrome/Kineto trace: "{" alone (pretty-printed), or an object
// that opens with one of a trace's top-level keys.
bool looks_like_trace_start(std::string_view first) {
  if (first == "{") return true;
  if (first.front() != '{') return false;
  const auto head = first.substr(0, 200);
  for (std::string_view key : {"\"traceEvents\"", "\"schemaVersion\"", "\"deviceProperties\"", "\"distributedInfo\""})
    if (head.find(key) != std::string_view::npos && head.find("\"type\"") == std::string_view::npos) return true;
  return false;
}

// True when `line` is a JSON array of objects, or its start: `[`, `[]` (blanks aside) or
// '[' then, after blanks, '{'. Not "[rank0]: ...", "[[TOC]]", "[ ] todo" or a bracketed
// time stamp, which a job or a document prints before its records.
bool json_array_start(std::string_view line) {
  if (!line.starts_with('[')) return false;
  const auto next = line.find_first_not_of(" \t\r", 1);
  if (next == std::string_view::npos || line[next] == '{') return true;
  return line[next] == ']' && line.find_first_not_of(" \t\r", next + 1) == std::string_view::npos;
}

// Where another record starts in `text` after its first byte; npos when none does.
// Finds records that lost the newline between them. A '{' where a JSON value goes (after
// ':', ',' or '[') is an object inside the record, not the start of another, even when
// it begins with "type": "update".
std::size_t next_record_start(std::string_view text) {
  for (std::size_t at = text.find('{', 1); at != std::string_view::npos; at = text.find('{', at + 1)) {
    const auto before = text.find_last_not_of(" \t", at - 1);
    if (before != std::string_view::npos && (text[before] == ',' || text[before] == '[')) continue;
    if (before != std::string_view::npos && text[before] == ':') {  // a value after its key: `"key": {`
      const auto key_end = before == 0 ? std::string_view::npos : text.find_last_not_of(" \t", before - 1);
      if (key_end != std::string_view::npos && text[key_end] == '"') continue;  // (not a logger's `INFO:root:{`)
    }
    if (record_starts_at(text, at)) return at;
  }
  return std::string_view::npos;
}

class FileParser {
 public:
  FileParser(const std::string& path, std::uint32_t file, const FileOptions& opt)
      : path_(path), file_(file), opt_(opt) {}

  // A PyTorch profiler trace: one rank's config and updates (include/stepprof/kineto.hpp).
  FileResult read_trace() {
    Diagnostics diag(opt_.strict);
    KinetoOptions kineto = opt_.kineto;
    kineto.cancel = opt_.cancel;
    auto trace = read_kineto_trace(path_, file_, out_.regions, out_.counters, diag, kineto);
    out_.diags = diag.kept();
    for (const auto& d : out_.diags) --out_.unkept[static_cast<int>(d.problem)][static_cast<int>(d.severity)];
    for (int p = 0; p < static_cast<int>(Problem::kCount_); ++p)  // beyond those kept: counted
      for (int sev = 0; sev < 3; ++sev) out_.unkept[p][sev] += diag.count(static_cast<Problem>(p), static_cast<Severity>(sev));
    out_.stopped = diag.should_stop();
    if (!trace) return std::move(out_);
    out_.config = std::move(trace->config);
    for (auto& u : trace->updates) {
      if (outside_window(u.step)) continue;
      out_.updates.push_back(std::move(u));
    }
    return std::move(out_);
  }

  FileResult run() {
    if (opt_.traces_only && !is_kineto_trace(path_) && starts_like_a_step_log(path_)) {
      report(Severity::kError, Problem::kBadTrace, 1, 1,
             "this is a step log, not a PyTorch profiler trace: give it to `stepprof report` (or html, trace, "
             "whatif) as it is");
      return std::move(out_);
    }
    // Data that is not text (another compression, UTF-16, binary) is one error, not
    // pages of zero-byte and malformed-JSON messages about a crash that did not happen.
    std::string head = read_head(path_);  // ("" for stdin, a pipe or a FIFO: looked at below)
    if (auto format = unreadable_format(head); !format.empty()) {
      report(Severity::kError, Problem::kUnreadable, 0, 0, format + gz_name_note(path_));
      return std::move(out_);
    }
    if (opt_.traces_only || is_kineto_trace(path_)) {
      if (auto own = stepprof_trace_export(head); !own.empty()) {  // (it has no distributedInfo: said so, wrongly)
        report(Severity::kError, Problem::kBadTrace, 1, 1, std::move(own));
        return std::move(out_);
      }
      return read_trace();
    }
    std::string err;
    auto src = LineSource::open(path_, err, std::size_t{1} << 20, opt_.cancel);
    if (!src) {
      report(Severity::kError, Problem::kUnreadable, 0, 0, fmt::format("cannot read: {}", err));
      return std::move(out_);
    }
    // stdin, a pipe or a FIFO could not be looked at before it was opened: it is now.
    struct stat st {};
    if (path_ == "-" || ::stat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      head = std::string(src->peek(std::size_t{1} << 16));
      if (auto format = unreadable_format(head); !format.empty()) {
        report(Severity::kError, Problem::kUnreadable, 0, 0, format);
        return std::move(out_);
      }
      if (!has_record_start(head)) {  // (a `stepprof trace` export piped in: malformed-json errors, one per line)
        if (auto own = stepprof_trace_export(head); !own.empty()) {
          report(Severity::kError, Problem::kBadTrace, 1, 1, std::move(own));
          return std::move(out_);
        }
      }
    }
    records_in_head_ = has_record_start(head);
    pretty_records_in_head_ = !records_in_head_ && has_pretty_record_start(head);
    table_rows_in_head_ = has_table_row(head);
    own_output_ = stepprof_output(head);
    // Format dispatch: JSON lines, or the same pasted as a markdown table (both
    // possibly gzip-compressed; LineSource decompresses).
    read_lines(*src);
    // (Here, on the worker thread: the dataset keeps this vector. A reserve that came
    // out close is kept as it is: shrinking would move every record once more.)
    if (out_.updates.capacity() - out_.updates.size() > out_.updates.size() / 16) out_.updates.shrink_to_fit();
    return std::move(out_);
  }

 private:
  // True when --steps leaves out the update of `step`: counted, with the steps it spans.
  bool outside_window(std::int64_t step) {
    if (!opt_.steps || opt_.steps->contains(step)) return false;
    out_.outside_first = out_.outside_window ? std::min(out_.outside_first, step) : step;
    out_.outside_last = out_.outside_window ? std::max(out_.outside_last, step) : step;
    ++out_.outside_window;
    if (step < opt_.steps->first) ++out_.before_window;
    return true;
  }

  void report(Severity sev, Problem p, std::uint64_t line, std::uint64_t col, std::string msg) {
    // A file of millions of bad lines keeps the first of each kind and counts the rest.
    if (++reported_[static_cast<int>(p)] <= Diagnostics::kDefaultMaxKept)
      out_.diags.push_back({sev, p, path_, line, col, std::move(msg)});
    else
      ++out_.unkept[static_cast<int>(p)][static_cast<int>(sev)];
    if (opt_.strict && sev != Severity::kNote) out_.stopped = true;
  }
  Severity truncation_severity() const { return opt_.strict ? Severity::kError : Severity::kWarning; }
  // Update records kept so far, later runs' too.
  std::size_t kept_updates() const {
    std::size_t n = out_.updates.size();
    for (const auto& r : out_.later_runs) n += r.updates.size();
    return n;
  }

  // A resumed part of a segment's records (the file's own: -1, or a RunSegment): the
  // records from `first` on came after the config record at `line`.
  struct Resume {
    std::ptrdiff_t segment = -1;
    std::size_t first = 0;
    std::uint64_t line = 0;
  };

  // A job resumed from a checkpoint runs again the steps after the checkpoint, and appends
  // them after its config record: each such step's earlier copy (work the restart lost) is
  // superseded by the later one. For each segment, from its last part back, a record is
  // left out when a later part has its step; each resume that superseded any says so,
  // with the steps, lines and update time of what it replaced. Records repeated within one
  // part stay duplicate steps (log_reader.cpp).
  void resolve_resumes(const std::vector<Resume>& resumes) {
    if (resumes.empty()) return;
    std::map<std::ptrdiff_t, std::vector<const Resume*>> by_segment;
    for (const auto& r : resumes) by_segment[r.segment].push_back(&r);
    for (const auto& [segment, parts] : by_segment) {
      std::vector<UpdateRecord>& v =
          segment < 0 ? out_.updates : out_.later_runs[static_cast<std::size_t>(segment)].updates;
      std::vector<char> superseded(v.size(), 0);
      std::vector<Superseded> replaced(parts.size());        // by the resume that replaced them
      std::unordered_map<std::int64_t, std::size_t> step_part;  // a later part's step -> its resume
      std::size_t end = v.size();
      for (std::size_t k = parts.size() + 1; k-- > 0;) {  // part k: [begin, end); part 0 precedes the first resume
        const std::size_t begin = k == 0 ? 0 : std::min(parts[k - 1]->first, end);
        for (std::size_t i = begin; i < end; ++i) {
          const auto it = step_part.find(v[i].step);
          if (it == step_part.end()) continue;
          superseded[i] = 1;
          replaced[it->second].add(v[i]);
        }
        // This part's steps, replaced by the resume that began it (the earliest later
        // part wins for steps several later parts repeat: it is the one run right after).
        if (k > 0)
          for (std::size_t i = begin; i < end; ++i) step_part[v[i].step] = k - 1;
        end = begin;
      }
      // Earlier records past the last resumed part's last step, from its first step on: steps
      // the resumed run has not run again yet (a log read while the job runs, or a run that
      // stopped sooner). They are kept, the only records of those steps, but the restart
      // went back over them too: the work it lost was said as the 51 steps run again where
      // 541 were (a helper).
      Superseded ahead;
      {
        const std::size_t last_begin = std::min(parts.back()->first, v.size());
        if (last_begin < v.size()) {
          std::int64_t lo = v[last_begin].step, hi = v[last_begin].step;
          for (std::size_t i = last_begin; i < v.size(); ++i) lo = std::min(lo, v[i].step), hi = std::max(hi, v[i].step);
          for (std::size_t i = 0; i < last_begin; ++i)
            if (!superseded[i] && v[i].step > hi && v[i].step >= lo) ahead.add(v[i]);
        }
      }
      std::size_t before_config = 0, kept = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (superseded[i]) {
          if (segment < 0 && i < out_.updates_before_config) ++before_config;
          continue;
        }
        if (kept != i) v[kept] = std::move(v[i]);
        ++kept;
      }
      v.resize(kept);
      if (segment < 0) out_.updates_before_config -= before_config;
      for (std::size_t k = 0; k < parts.size(); ++k) {
        const Superseded& r = replaced[k];
        const bool last = k + 1 == parts.size();
        if (r.records == 0 && !(last && ahead.records > 0)) continue;
        const auto& cfg = segment < 0 ? out_.config : out_.later_runs[static_cast<std::size_t>(segment)].config;
        std::string msg =
            r.records == 0
                ? fmt::format("{} resumed from a checkpoint after the config record at this line (appending to its "
                              "log)",
                              rank_text(cfg ? cfg->rank : std::nullopt))
                : fmt::format("{} of {} ran again after the config record at this line (a job resumed from a "
                              "checkpoint, appending to its log): the later copies are analyzed, and the {} earlier "
                              "update record(s) (lines {}..{}; {:.1f} ms of update time, work lost to the restart) "
                              "are left out",
                              r.steps(), rank_text(cfg ? cfg->rank : std::nullopt), r.records, r.first_line,
                              r.last_line, r.wall_ms);
        if (last && ahead.records > 0)
          msg += fmt::format("; the earlier run's {} of {} (lines {}..{}; {:.1f} ms of update time) are past the "
                             "resumed run's last step, not run again yet: kept, the only records of those steps, "
                             "though the restart went back over them too",
                             ahead.records == 1 ? "record" : fmt::format("{} records", ahead.records), ahead.steps(),
                             ahead.first_line, ahead.last_line, ahead.wall_ms);
        report(Severity::kWarning, Problem::kDuplicateStep, parts[k]->line, 0, std::move(msg));
      }
    }
  }

  bool records_in_head_ = false;  // a step-log record starts in the input's first 64 KiB
  bool pretty_records_in_head_ = false;  // none does, but one over several lines does
  bool table_rows_in_head_ = false;  // and a markdown table row holding one
  std::string own_output_;        // what it is, when the input is stepprof's own JSON output

  // Reserves room for the file's update records, estimated from the file's size and the
  // length of the first kSampleLines lines, so that the records are not moved each time
  // the vector grows. (A gzip file's compressed size underestimates: it grows as usual.)
  static constexpr std::uint64_t kSampleLines = 32;
  void reserve_for_file(std::uint64_t sampled_bytes) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    if (ec || sampled_bytes == 0) return;
    // (No update record is shorter than about 40 bytes: a file whose first lines are
    // short cannot ask for more than that allows. The reserve is only a hint: when the
    // memory is not there, the vector grows as usual.)
    const std::uint64_t per_line = std::max<std::uint64_t>(sampled_bytes / kSampleLines, 40);
    const std::uint64_t estimate = std::min<std::uint64_t>(size / per_line + 1, std::uint64_t{1} << 26);
    try {
      out_.updates.reserve(static_cast<std::size_t>(estimate));
    } catch (const std::bad_alloc&) {
    }
  }

  void read_lines(LineSource& src) {
    // The config the records are read under, and where they go: the file's first, then
    // each later run's (RunSegment).
    std::optional<RunConfig>* cur_config = &out_.config;
    std::vector<UpdateRecord>* kept = &out_.updates;
    std::uint64_t file_config_line = 0;
    // A file that holds several ranks' logs of one run (a log shipper's stream of every
    // rank's /dev/stdout, or rank files concatenated): each rank's config starts a segment
    // (the first is out_'s own, -1; the others RunSegments), and each update goes to its
    // rank's latest one.
    std::ptrdiff_t cur_segment = -1;
    std::unordered_map<std::int64_t, std::ptrdiff_t> segment_of_rank;
    // --strict: the line of each (rank, step) kept, so that reading stops at the first
    // duplicate step in line order (in a stream of several ranks too, whose records are
    // kept rank by rank; duplicates across files are found when the files are merged).
    std::map<std::pair<std::optional<std::int64_t>, std::int64_t>, std::uint64_t> strict_steps;
    // Where a config record of the same run started a resumed part (see kConfig), in order.
    std::vector<Resume> resumes;
    auto switch_to = [&](std::ptrdiff_t segment) {
      cur_segment = segment;
      cur_config = segment < 0 ? &out_.config : &out_.later_runs[static_cast<std::size_t>(segment)].config;
      kept = segment < 0 ? &out_.updates : &out_.later_runs[static_cast<std::size_t>(segment)].updates;
      file_config_line = (*cur_config)->source.line;
    };
    bool table_mode = false, mode_known = false, truncated = false, corrupt_tail = false;
    bool in_fence = false;  // (table mode) between a markdown document's ``` or ~~~ lines
    // Heading, comment and text lines before the first record: one note for all of them.
    std::uint64_t prelude_lines = 0, prelude_first = 0, prelude_last = 0;
    auto say_prelude = [&] {
      if (prelude_lines == 0) return;
      report(Severity::kNote, Problem::kUnknownRecord, prelude_first, 1,
             prelude_lines == 1 ? std::string("a heading, comment or text line before the first record; skipped")
                                : fmt::format("{} heading, comment or text lines before the first record (lines "
                                              "{}..{}); skipped",
                                              prelude_lines, prelude_first, prelude_last));
      prelude_lines = 0;
    };
    bool cut_said = false;  // the last line's warning said the input ends early
    bool bom_said = false;  // a note said a line after the first starts with a byte-order mark
    std::uint64_t records = 0, rejected_after_mix = 0, mixed_at = 0;
    // A job's stdout as a log (a log shipper's stream, a Slurm output file): lines that
    // carry a prefix before the record, and lines of other output, each said once.
    std::uint64_t prefixed = 0, prefixed_first = 0, prefixed_last = 0, other = 0;
    std::uint64_t coloured = 0, coloured_first = 0;  // lines with terminal codes after the record
    std::string coloured_example;
    // Update records whose step is below the one before them, and the first of them.
    std::uint64_t backwards = 0, last_config_line = 0;
    bool newer_schema_said = false;  // (a newer-schema warning given: one per file)
    // Segments (ranks) with a config record and no update record since (opened), with a
    // config record in this file (configured), and whose latest config record was their
    // first in the file (first_opened: the recorder's first open, not a resume).
    std::set<std::ptrdiff_t> opened, configured, first_opened;
    // Recorder error kinds whose effect a warning has told, and the line it was told at.
    std::map<std::string, std::uint64_t, std::less<>> error_kinds_told;
    // Per segment, the highest step since its latest config record (what the recorder
    // compares a new step with).
    std::map<std::ptrdiff_t, std::int64_t> top_step;
    struct {
      std::uint64_t line = 0;
      std::int64_t step = 0;
      std::uint64_t before_line = 0;
      std::int64_t before_step = 0;
    } backwards_first;
    std::string prefix_example, other_example;
    std::set<std::string, std::less<>> extra_seen;  // update fields not in the schema, checked once
    std::vector<std::uint64_t> other_lines;  // the first few
    constexpr std::size_t kOtherLinesNamed = 5;
    std::string cell;  // markdown cell with `\|` unescaped, plus parser padding
    RecordParser parser(out_.regions, out_.counters);
    parser.set_keep_sample_indices(opt_.keep_sample_indices);
    UpdateRecord u;  // scratch: parsed into, then copied compactly when kept
    std::vector<RawField> cfg_fields;
    std::string unknown_type;
    RecordError rerr;
    std::uint64_t bytes_reported = 0;
    std::uint64_t sampled_bytes = 0;  // bytes of the first kSampleLines lines (with their newlines)

    // Takes one parsed record (or its error) from line `ln`: `text` starts at column
    // `col_offset` + 1 of `line`, and `terminated` is false for a last line cut short.
    // A whole line that ends mid-record is an error, unless the next record is a config
    // record: a killed job's last record, then a restarted job's first (the recorder ends
    // a cut line before it appends), or the recorder's config record cut by a failed write
    // and written again. That is the record in flight lost, as at the end of a file, or
    // nothing lost: a warning. So its report waits for the next record (or the end).
    struct PendingCut {
      std::uint64_t line = 0, column = 0;
      std::string error;    // the message as an error
      std::string problem;  // what was wrong with the JSON
      std::size_t kept = 0;
    };
    std::optional<PendingCut> pending_cut;
    auto report_pending_cut = [&](bool restart) {
      if (!pending_cut) return;
      const PendingCut p = std::move(*pending_cut);
      pending_cut.reset();
      if (restart)
        report(Severity::kWarning, Problem::kTruncatedLine, p.line, p.column,
               fmt::format("this line ends mid-record and the next record is a config record (a job killed "
                           "mid-record, then restarted appending to the file; or a config record whose write failed, "
                           "written again): {}; the line is skipped, the {} update record(s) read before it are kept",
                           p.problem, p.kept));
      else
        report(Severity::kError, Problem::kMalformedJson, p.line, p.column, p.error);
    };
    // Terminal codes cut from the end of the line being read (a logger's colour reset):
    // counted with the first record taken from it.
    std::string_view line_colour_codes;
    auto take = [&](RecordKind kind, std::string_view text, std::uint64_t col_offset, std::uint64_t ln,
                    std::string_view line, bool terminated) {
      if (!line_colour_codes.empty() && kind != RecordKind::kError) {
        if (coloured++ == 0) {
          coloured_first = ln;
          coloured_example = printable(line_colour_codes.substr(0, 24));
        }
        line_colour_codes = {};
      }
      report_pending_cut(kind == RecordKind::kConfig);
      switch (kind) {
        case RecordKind::kError: {
          std::uint64_t col = rerr.column ? col_offset + rerr.column : 0;
          if (!terminated && !src.error().empty() && !src.cut_off()) {
            // The line is the last that could be read from a corrupt file (e.g. a bad gzip
            // CRC), not one cut off by a killed job: the read error below says so.
            corrupt_tail = true;
            break;
          }
          if (const auto cr = text.find("\r{"); cr != std::string_view::npos) {
            // Records separated by a carriage return alone (classic Mac line endings): one
            // "line" holds them all.
            report(Severity::kError, Problem::kMalformedJson, ln, col_offset + cr + 1,
                   fmt::format("records are separated by carriage returns alone (\\r, not \\n or \\r\\n), so "
                               "this line holds {} of them; convert the file (tr '\\r' '\\n' < IN > OUT) and read "
                               "it again",
                               std::count(text.begin(), text.end(), '\r') + 1));
            break;
          }
          // A last line without a newline is a record cut short, unless it is whole: it
          // ends with '}' and what is wrong is a field, not the JSON (a cut leaves every
          // value before it whole, so its first problem is the missing end).
          std::string_view whole = text;
          while (!whole.empty() && (whole.back() == ' ' || whole.back() == '\t' || whole.back() == '\r'))
            whole.remove_suffix(1);
          // (A JSON array is whole when it ends with ']': a one-line array is not a record.)
          const bool complete = (rerr.problem != Problem::kMalformedJson && whole.ends_with('}')) ||
                                (trim(text).starts_with('[') && whole.ends_with(']'));
          if (!terminated && !complete) {
            if (col == 0) col = line.size() + 1;  // where the record was cut
            truncated = true;
            // A compressed file that ends early cuts its last line too: one warning says both.
            const bool stream_cut = src.cut_off() && !src.error().empty();
            cut_said = stream_cut;
            report(truncation_severity(), Problem::kTruncatedLine, ln, col,
                   fmt::format("{}: {}; "
                               "{}",
                               stream_cut ? fmt::format("input ends early ({}): the file was cut off mid-record",
                                                        src.error())
                                          : std::string("the last line ends mid-record (was the writing job killed, or its disk full?)"),
                               rerr.message,
                               opt_.strict ? std::string("reading stops (--strict)")
                                           : fmt::format("the {} update record(s) read before it are kept", kept_updates())));
          } else if (!opt_.strict && rerr.problem == Problem::kMalformedJson &&
                     trim(text).starts_with('{') && !closing_bracket(trim(text))) {
            // (Only a record cut short, whose object never closes: a whole record with a bad
            // value or escape is that error, whatever follows.)
            pending_cut = PendingCut{ln, col,
                                     rerr.message + (rerr.cause.empty() ? "" : ": ") + std::string(rerr.cause) +
                                         "; record skipped",
                                     rerr.message, kept_updates()};
          } else {
            report(Severity::kError, rerr.problem, ln, col,
                   rerr.message + (rerr.cause.empty() ? "" : ": ") + std::string(rerr.cause) +
                       (opt_.strict ? "; reading stops (--strict)" : "; record skipped"));
          }
          break;
        }
        case RecordKind::kUnknownType:
          report(Severity::kWarning, Problem::kUnknownRecord, ln, 0,
                 fmt::format("unknown record type \"{}\" (expected \"config\" or \"update\"); skipped", unknown_type));
          break;
        case RecordKind::kConfig: {
          last_config_line = ln;  // (steps may start over after it: a restart)
          ++records;
          std::vector<std::string> problems;
          RunConfig cfg = make_config(std::move(cfg_fields), &problems);
          cfg_fields.clear();
          cfg.source = {.file = file_, .line = ln};
          for (auto& p : problems) report(Severity::kError, Problem::kBadField, ln, 0, std::move(p));
          if (cfg.schema && *cfg.schema > schema::kVersion && !newer_schema_said) {
            newer_schema_said = true;  // (once per file)
            report(Severity::kWarning, Problem::kNewerSchema, ln, 0,
                   fmt::format("the log is of schema version {}, written by a newer recorder; this stepprof reads "
                               "version {}: its records are read as that version, so fields or meanings that version "
                               "does not have may be misread or kept as the job's own (use a newer stepprof)",
                               *cfg.schema, schema::kVersion));
          }
          // In a file of several ranks' logs, a rank's later config is compared with its own
          // rank's latest one.
          if (!mixed_at && cfg.rank && segment_of_rank.contains(*cfg.rank)) switch_to(segment_of_rank.at(*cfg.rank));
          // A file holds one rank's log: a later config that names no rank is its rank's
          // (it was "a second config record, of unknown rank ... several ranks' logs", and
          // kept none of the settings it does not state).
          if (*cur_config && !cfg.rank && segment_of_rank.empty() && (*cur_config)->rank) cfg.rank = (*cur_config)->rank;
          if (*cur_config) inherit_run_settings(cfg, **cur_config);
          if (!(*cur_config)) {
            (*cur_config) = std::move(cfg);
            file_config_line = ln;
            if (!(*cur_config)->rank && opt_.config_rank) (*cur_config)->rank = opt_.config_rank;  // (strict's re-read)
            // The rank's bucket is looked up at this point when the files are merged.
            out_.diags_before_config = out_.diags.size();
            out_.updates_before_config = out_.updates.size();
          } else if (mixed_at && !segment_of_rank.empty()) {
            // (Skipped with the rest: the error at mixed_at said so.)
          } else if (cfg.rank && (*cur_config)->rank && cfg.rank != (*cur_config)->rank &&
                     !segment_of_rank.contains(*cfg.rank) && cfg.run_id && (*cur_config)->run_id &&
                     cfg.run_id != (*cur_config)->run_id && !mixed_at) {
            // Another rank's first config, of another job: two jobs' streams mixed.
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   fmt::format("a config record of {} with run_id \"{}\" follows the config of {} at line {} with "
                               "run_id \"{}\": this file mixes two jobs' records, which cannot be told apart in a "
                               "stream of several ranks' logs; records after this line are skipped (give each "
                               "job's logs apart, or one file per rank)",
                               rank_text(cfg.rank), printable(*cfg.run_id), rank_text((*cur_config)->rank),
                               file_config_line, printable(*(*cur_config)->run_id)));
            mixed_at = ln;
          } else if (!mixed_at && cfg.rank && (*cur_config)->rank && cfg.rank != (*cur_config)->rank &&
                     !segment_of_rank.contains(*cfg.rank)) {
            // Another rank's first config: the file holds several ranks' logs, and each
            // rank's later configs are compared with its own (below).
            if (segment_of_rank.empty()) {
              segment_of_rank.emplace(*(*cur_config)->rank, cur_segment);
              report(Severity::kNote, Problem::kSeveralRanks, ln, 0,
                     fmt::format("a config record of {} follows the config of {} at line {}: this file holds "
                                 "several ranks' logs (a log shipper's stream, or files concatenated); each update "
                                 "record is read as its rank's",
                                 rank_text(cfg.rank), rank_text((*cur_config)->rank), file_config_line));
            }
            const std::int64_t rank = *cfg.rank;
            out_.later_runs.push_back({std::move(cfg), {}});
            segment_of_rank[rank] = static_cast<std::ptrdiff_t>(out_.later_runs.size()) - 1;
            switch_to(static_cast<std::ptrdiff_t>(out_.later_runs.size()) - 1);
          } else if (!mixed_at && !segment_of_rank.empty() && !cfg.rank) {
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   "a config record without a rank in a file of several ranks' logs: whose log it starts cannot be "
                   "told; records after this line are skipped (give each rank's log as its own file)");
            mixed_at = ln;
          } else if (!mixed_at && !segment_of_rank.empty() && cfg.run_id && (*cur_config)->run_id &&
                     cfg.run_id != (*cur_config)->run_id) {
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   fmt::format("a config record of {} with run_id \"{}\" follows its config at line {} with run_id "
                               "\"{}\": this file mixes two jobs' records, which cannot be told apart in a stream of "
                               "several ranks' logs (a requeued job's too); records after this line are skipped "
                               "(give each job's logs apart, or one file per rank)",
                               rank_text(cfg.rank), printable(*cfg.run_id), file_config_line,
                               printable(*(*cur_config)->run_id)));
            mixed_at = ln;
          } else if (run_identity(cfg) == run_identity(*(*cur_config)) && cfg.rank != (*cur_config)->rank) {
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   fmt::format("a second config record, of {}, follows the config of {} at line {}: this file holds "
                               "several ranks' logs (concatenated?), and is read as {}'s; records after this line "
                               "are skipped (give each rank's log as its own file)",
                               rank_text(cfg.rank), rank_text((*cur_config)->rank), file_config_line,
                               rank_text((*cur_config)->rank)));
            if (!mixed_at) mixed_at = ln;  // skipping starts at the first
          } else if (run_identity(cfg) != run_identity(*(*cur_config)) && (opt_.strict || mixed_at)) {
            // (Strict mode stops here; after a concatenation's skip, skipping goes on.)
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   fmt::format("a second config record ({}) differs from the one at line {} in its run "
                               "settings ({}): this file mixes runs; records after this line are skipped",
                               rank_text(cfg.rank), file_config_line, identity_difference(cfg, *(*cur_config))));
            if (!mixed_at) mixed_at = ln;  // skipping starts at the first
          } else if (run_identity(cfg) != run_identity(*(*cur_config))) {
            // Another run appended (an elastic job restarted with another world size): its
            // records are read as its own, and the merge keeps the run most ranks have. A
            // note: a restart is not bad input, and the merge warns of the records it skips
            // (a warning here too said the same line twice).
            report(Severity::kNote, Problem::kMixedRuns, ln, 0,
                   fmt::format("a second config record ({}) differs from the one at line {} in its run "
                               "settings ({}): this file mixes runs (a job restarted with a new run_id or other settings, "
                               "and appended?); the records after it are read as that run's, and only one run is "
                               "analyzed (--run: the one most ranks have, or the latest)",
                               rank_text(cfg.rank), file_config_line, identity_difference(cfg, *(*cur_config))));
            // (A file holds one rank's log: a later config that names no rank is its rank's.)
            if (!cfg.rank && out_.config && out_.config->rank) cfg.rank = out_.config->rank;
            const std::optional<std::int64_t> rank = cfg.rank;
            out_.later_runs.push_back({std::move(cfg), {}});
            switch_to(static_cast<std::ptrdiff_t>(out_.later_runs.size()) - 1);
            if (!segment_of_rank.empty() && rank) segment_of_rank[*rank] = cur_segment;
          } else {
            // The same run again: a process resumed from a checkpoint that appended to its
            // log (the recorder's `append`). Steps it runs again supersede the copies before
            // this line (resolve_resumes, at the end of the file).
            report(Severity::kNote, Problem::kUnknownRecord, ln, 0,
                   fmt::format("a second config record of the same run as at line {} (the job resumed and "
                               "appended?): the updates after it are read as the same run; a step it runs again "
                               "replaces the copy before it",
                               file_config_line));
            resumes.push_back({cur_segment, kept->size(), ln});
            // (--strict: a step run again after the resume is not a duplicate-step error; one
            // repeated within either part still is. The resume's warning stops reading once
            // the file is read, as every warning does in strict mode.)
            if (opt_.strict)
              std::erase_if(strict_steps, [&](const auto& e) { return e.first.first == (*cur_config)->rank; });
          }
          opened.insert(cur_segment);  // (the segment this config record is now read under)
          top_step.erase(cur_segment);
          if (configured.insert(cur_segment).second)
            first_opened.insert(cur_segment);
          else
            first_opened.erase(cur_segment);
          break;
        }
        case RecordKind::kUpdate: {
          ++records;
          for (const auto& lo : parser.fields_left_out())  // (NaN in a field of the job's own)
            report(Severity::kError, lo.problem, ln, col_offset + lo.column, lo.message);
          for (const auto& f : u.extra)  // (a field of the job's own, or a misspelt one: said once per file)
            if (extra_seen.insert(f.key).second)
              if (const auto near = schema_field_near(f.key, f.json))
                report(Severity::kNote, Problem::kBadField, ln, 0,
                       fmt::format("field \"{}\" is not in the log schema: a misspelling of \"{}\"? It is kept as "
                                   "a field of the job's own, and its values are not analyzed (said for its first "
                                   "record in this file)",
                                   printable(f.key), *near));
          if (mixed_at) {
            ++rejected_after_mix;
            break;
          }
          if (!segment_of_rank.empty() && !u.rank) {
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   "update record without a rank in a file of several ranks' logs: whose it is cannot be told; "
                   "record skipped");
            break;  // (not counted as a rank's rejected update: it is no known rank's)
          }
          if (!segment_of_rank.empty() && u.rank != (*cur_config)->rank) {
            const auto it = segment_of_rank.find(*u.rank);
            if (it == segment_of_rank.end()) {
              report(Severity::kError, Problem::kMissingConfig, ln, 0,
                     fmt::format("update for {} in a file of several ranks' logs, before any config record of {}: "
                                 "which run it belongs to cannot be told; record skipped",
                                 rank_text(u.rank), rank_text(u.rank)));
              break;
            }
            switch_to(it->second);
          }
          if (u.rank && (*cur_config) && !(*cur_config)->rank) adopt_rank(*(*cur_config), file_config_line, *u.rank, ln);
          if (!u.rank && (*cur_config)) u.rank = (*cur_config)->rank;
          if ((*cur_config) && (*cur_config)->rank && u.rank != (*cur_config)->rank) {
            report(Severity::kError, Problem::kMixedRuns, ln, 0,
                   fmt::format("update for {} in a file whose config (line {}) is for rank {}, with no config "
                               "record of {} before it: a file holds one rank's log, or several ranks' logs each "
                               "after its own config record (another rank's log appended without its config? a "
                               "wrong rank in the records?); record skipped",
                               rank_text(u.rank), file_config_line, *(*cur_config)->rank, rank_text(u.rank)));
            ++out_.rejected_updates;
            break;
          }
          // (The first update of its segment, its rank's, after a config record: the recorder
          // opened there. One outside the window is not analyzed; the next is not the first.)
          const bool first_after_config = opened.erase(cur_segment) > 0;
          std::optional<std::int64_t> top_before;  // the highest step before this one since the config
          if (const auto t = top_step.find(cur_segment); t != top_step.end()) top_before = t->second;
          top_step[cur_segment] = std::max(top_before.value_or(u.step), u.step);
          if (outside_window(u.step)) break;
          // (A kind counted 0 times is no error: "0 write_failed (records are missing)".)
          if (std::any_of(u.recorder_errors.begin(), u.recorder_errors.end(), [](const auto& e) { return e.second > 0; })) {
            // Each kind's effect is told at its first record in the file; later ones point
            // there (a Python job with a bad step in every update had the 600-character
            // text on every line).
            std::string kinds;
            for (const auto& [k, n] : u.recorder_errors) {
              if (n == 0) continue;
              const auto [first, fresh] = error_kinds_told.try_emplace(k, ln);
              kinds += fmt::format("{}{} {} ({})", kinds.empty() ? "" : ", ", n, k,
                                   fresh ? recorder_error_effect(k) : fmt::format("as at line {}", first->second));
            }
            // A step not above the rank's step before it is one bad_argument the record
            // itself shows: said, since the count alone does not say which call it was.
            // (Against the highest step since the recorder opened, as the recorder checks;
            // not in the first update after a config record: the recorder starts afresh.)
            if (std::any_of(u.recorder_errors.begin(), u.recorder_errors.end(),
                            [](const auto& e) { return e.first == "bad_argument" && e.second > 0; }) &&
                !first_after_config && top_before && u.step <= *top_before)
              kinds += fmt::format("; here step {} is not above step {} before it, which the recorder counts as a "
                                   "bad_argument",
                                   u.step, *top_before);
            report(Severity::kWarning, Problem::kRecorderErrors, ln, 0,
                   fmt::format("the recorder counted errors since its previous record, up to the end of step {}: {}",
                               u.step, kinds));
          }
          if (opt_.strict) {
            const auto [it, fresh] = strict_steps.try_emplace({u.rank, u.step}, ln);
            if (!fresh) {
              report(Severity::kError, Problem::kDuplicateStep, ln, 1,
                     fmt::format("duplicate step {} for {} (first at line {}); stopping (--strict)", u.step,
                                 rank_text(u.rank), it->second));
              break;
            }
          }
          u.source = {.file = file_, .after_config = first_after_config,
                      .after_first_config = first_after_config && first_opened.contains(cur_segment), .line = ln};
          // A step below the one before it (same rank, same run: no config between): the
          // job's step counter went back. Analyzed in step order, as every input is.
          if (!kept->empty() && kept->back().rank == u.rank && u.step < kept->back().step &&
              kept->back().source.line > last_config_line && backwards++ == 0)
            backwards_first = {ln, u.step, kept->back().source.line, kept->back().step};
          kept->push_back(compact_copy(u, opt_.keep_sample_indices));
          break;
        }
      }
    };
    // A prefix before a record at line `ln` (a launcher's, a logger's, a progress bar):
    // counted, and said once for the file with the first as its example.
    auto note_prefix = [&](std::string_view prefix, std::uint64_t ln) {
      prefixed_last = ln;
      if (prefixed++ == 0) {
        prefixed_first = ln;
        prefix_example = printable(detail::prefix_at_character(trim(prefix), 48));
      }
    };
    // Other output of the job (a print, a progress bar) at line `ln`: counted, and said
    // once for the file (one warning per line under --strict).
    auto note_other = [&](std::string_view text, std::uint64_t ln, std::uint64_t col_offset) {
      if (other++ == 0) {
        other_example = printable(detail::prefix_at_character(text, 60));
      }
      if (other_lines.size() < kOtherLinesNamed) other_lines.push_back(ln);
      if (opt_.strict)
        report(Severity::kWarning, Problem::kOtherOutput, ln, col_offset + 1,
               "this line holds no record (other output of the job among the records?); reading stops (--strict)");
    };
    // The job's own JSON printed among its records (json_output_of_the_job): other output,
    // not an error; a prefix noted for its line is taken back (it was no record's).
    // After text that would be a record's prefix (a logger's `INFO:root:`), too.
    // A logger's structured fields before the record (`{'level': 'info'} {...}`, a Python
    // dict's print, or a JSON object of the job's own) are a prefix too: they were each a
    // record "cut short by another" (found by a helper), though the record was read.
    auto prefix_like = [](std::string_view t) {
      if (t.empty()) return false;
      if (t.front() == '{') return t.starts_with("{'") ? other_output(t) : json_output_of_the_job(t);
      return other_output(t) || t.find_first_of("\"{}") == std::string_view::npos;
    };
    auto job_json = [&](RecordKind kind, std::string_view text, std::uint64_t ln, std::uint64_t col_offset) {
      if (kind != RecordKind::kError || table_mode) return false;
      std::string_view json = text;
      if (!rerr.no_type) {
        const std::size_t brace = text.find('{');
        const std::size_t end = text.rfind('}');
        if (brace == std::string_view::npos || brace == 0 || end < brace || !trim(text.substr(end + 1)).empty() ||
            !prefix_like(trim(text.substr(0, brace))))
          return false;
        json = text.substr(brace, end + 1 - brace);
      }
      if (!json_output_of_the_job(json)) return false;
      if (prefixed > 0 && prefixed_last == ln) --prefixed;
      note_other(text, ln, col_offset);
      return true;
    };
    // Reads a line that holds several records (a lost newline, or a killed job's last
    // record with a restarted job's first after it) one record at a time. Text before a
    // record that is no piece of one (a logger's `INFO:root:`, a print whose newline came
    // after the record) is a prefix: skipped, and counted in the note on prefixes.
    auto read_joined = [&](std::string_view text, std::uint64_t col_offset, std::uint64_t ln, std::string_view line,
                           bool terminated) {
      for (std::size_t next; !out_.stopped && (next = next_record_start(text)) != std::string_view::npos;) {
        const std::string_view piece = trim(text.substr(0, next));
        const std::uint64_t next_column = col_offset + next + 1;
        std::string_view piece_read = piece;
        const bool text_before = prefix_like(piece);
        auto kind = text_before ? RecordKind::kError : parser.parse(piece, cfg_fields, u, unknown_type, rerr);
        if (kind == RecordKind::kError && !text_before) {
          // A whole record, then the next one's prefix (`{...}INFO:root:{...}`): the record
          // is read and the text after it counted as that prefix.
          const std::size_t end = piece.rfind('}');
          if (end != std::string_view::npos && prefix_like(trim(piece.substr(end + 1)))) {
            const std::string_view whole = piece.substr(0, end + 1);
            if (const auto k = parser.parse(whole, cfg_fields, u, unknown_type, rerr); k != RecordKind::kError) {
              kind = k;
              piece_read = whole;
              note_prefix(piece.substr(end + 1), ln);
            } else {  // (the error said is the whole piece's, as before)
              (void)parser.parse(piece, cfg_fields, u, unknown_type, rerr);
            }
          }
        }
        if (text_before) {
          note_prefix(piece, ln);
        } else if (kind == RecordKind::kError) {
          report(Severity::kError, rerr.problem, ln, rerr.column ? col_offset + rerr.column : 0,
                 fmt::format("{}: the record is cut short by another that starts at column {} of the same line (the "
                             "writing job was killed and another appended to the file?); {}",
                             rerr.message, next_column,
                             opt_.strict ? "reading stops (--strict)" : "record skipped, and the next one is read"));
        } else {
          report(Severity::kWarning, Problem::kJoinedRecords, ln, next_column,
                 "another record starts here, on the same line as the one before (a lost newline: two processes "
                 "writing to one file?); both are read");
          take(kind, piece_read, col_offset, ln, line, true);
        }
        col_offset += next;
        text.remove_prefix(next);
      }
      if (out_.stopped) return;
      const auto kind = parser.parse(text, cfg_fields, u, unknown_type, rerr);
      if (!job_json(kind, text, ln, col_offset)) take(kind, text, col_offset, ln, line, terminated);
    };

    // Lines a container runtime split into parts, joined per stream and read as one line
    // (a CRI log file's `TIME stdout P part` lines, then `TIME stdout F last part`; Docker's
    // json-file entries whose text has no final newline, then the one that has it), and
    // Docker's entries unwrapped; a part left without its last one at the end is read as
    // a line cut short.
    struct SplitParts {
      std::string text;
      std::uint64_t first_line = 0;
    };
    std::array<SplitParts, 2> split_parts;  // stdout's, stderr's
    std::string unwrapped;                  // the line joined or unescaped, plus parser padding
    std::uint64_t joined_lines = 0, joined_first = 0, docker_entries = 0, docker_first = 0;
    auto joined_line = [&](SplitParts& parts, std::string_view last) {
      if (!parts.text.empty() && joined_lines++ == 0) joined_first = parts.first_line;
      unwrapped.assign(parts.text).append(last);
      parts.text.clear();
      const std::size_t n = unwrapped.size();
      unwrapped.resize(n + LineSource::padding);
      return std::string_view(unwrapped.data(), n);
    };
    constexpr std::size_t kSplitPartsMax = std::size_t{64} << 20;  // a runaway line's parts are dropped beyond

    std::string_view line;
    bool terminated = true;
    for (;;) {
      if (out_.stopped) break;
      if (opt_.stop_after_line && src.line_number() >= opt_.stop_after_line) {
        out_.stopped = true;
        break;
      }
      bool drained = false;  // (line is what a split line's parts left at the end)
      if (!src.next(line, terminated)) {
        const auto left =
            std::find_if(split_parts.begin(), split_parts.end(), [](const SplitParts& p) { return !p.text.empty(); });
        if (left == split_parts.end() || !src.error().empty()) break;
        line = joined_line(*left, {});
        terminated = false;
        drained = true;
      }
      const std::uint64_t ln = src.line_number();
      if (ln <= kSampleLines) {
        sampled_bytes += line.size() + 1;
        if (ln == kSampleLines && path_ != "-") reserve_for_file(sampled_bytes);
      }
      if ((ln & 4095) == 0) {
        if (opt_.cancel && opt_.cancel->load(std::memory_order_relaxed)) break;
        if (opt_.on_bytes) {
          opt_.on_bytes(src.raw_bytes_read() - bytes_reported);
          bytes_reported = src.raw_bytes_read();
        }
      }
      if (!drained) {
        std::string_view content;
        bool split_form = false, partial = false, to_stderr = false;
        DockerLine docker;
        if (const CriLine cri = cri_line(line); cri.content_at > 0) {
          split_form = true;
          content = line.substr(cri.content_at);
          partial = cri.partial;
          to_stderr = cri.to_stderr;
        } else if (line.starts_with("{\"log\":") && (docker = docker_line(line)).is_docker) {
          if (docker_entries++ == 0) docker_first = ln;
          split_form = true;
          content = docker.text;
          partial = docker.partial;
          to_stderr = docker.to_stderr;
        }
        if (split_form) {
          SplitParts& parts = split_parts[to_stderr ? 1 : 0];
          if (partial) {
            if (parts.text.empty()) parts.first_line = ln;
            if (parts.text.size() + content.size() > kSplitPartsMax) {
              report(Severity::kError, Problem::kMalformedJson, parts.first_line, 0,
                     fmt::format("the container runtime's parts of one line (from line {}) run past {} MiB without "
                                 "a last part: not a record; skipped",
                                 parts.first_line, kSplitPartsMax >> 20));
              parts.text.clear();
              parts.first_line = ln;
            }
            parts.text.append(content);
            continue;
          }
          if (!parts.text.empty() || docker.is_docker) line = joined_line(parts, content);
        }
      }
      if (ln == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // a UTF-8 byte-order mark
      std::string_view text = trim(line);
      if (ln > 1 && text.starts_with("\xEF\xBB\xBF")) {
        // Files joined with cat, the second starting with a byte-order mark: it was "a
        // record cut short by another that starts at column 4".
        text = trim(text.substr(3));
        if (!bom_said)
          report(Severity::kNote, Problem::kJoinedRecords, ln, 1,
                 "a UTF-8 byte-order mark starts this line (files joined with cat, one starting with a mark?); "
                 "skipped");
        bom_said = true;
      }
      if (text.empty()) continue;
      if (!mode_known && table_rows_in_head_) {
        // A markdown document holding the table (rows `| {record} |` among its first
        // 64 KiB): read as a table from its first line, so that its prose, lists and code
        // are notes, and a record outside the table an error.
        mode_known = true;
        table_mode = true;
      }
      // A line of zero bytes alone before the first record (a file zero-filled by a crash
      // before its first write) is said, and leaves the format to the lines after it (a
      // heading after it was "other output of the job", review).
      if (!mode_known && text.find_first_not_of('\0') == std::string_view::npos) {
        const auto zeros = static_cast<std::uint64_t>(text.size()) + src.zeros_dropped();
        report(Severity::kWarning, Problem::kZeroBytes, ln, 1,
               fmt::format("{} zero byte{} skipped: a crash or power loss leaves zeros where a file was being "
                           "written, and records written there are lost",
                           zeros, zeros == 1 ? "" : "s"));
        continue;
      }
      // (A line with zero bytes is not prose: a crash's zero-filled tail, told below.)
      // (A JSON array is not prose: `[]` alone was "a heading, comment or text line". A
      // log prefix such as "[rank0]: ..." or "[2026-12-06 10:00:00] ..." still is.)
      if (!mode_known && text.find('\0') == std::string_view::npos && !json_array_start(text) &&
          (text.front() == '#' || text.find_first_of("{\"|") == std::string_view::npos ||
           (text.front() == '|' && !records_in_head_ && !has_record_start(text)))) {
        // A markdown heading, a comment or prose before the first record or table row
        // (nothing in it could be part of a record): the format is told by the first
        // line after it. So are table rows holding no record when the first 64 KiB hold
        // no record at all: a table's header, or a job's model summary printed before a
        // long stretch of other output.
        if (prelude_lines++ == 0) prelude_first = ln;
        prelude_last = ln;
        continue;
      }
      say_prelude();
      if (!mode_known) {
        mode_known = true;
        // (A table whose rows hold no record, in a file whose first 64 KiB hold records
        // outside any table, is the job's own output among its records.)
        table_mode = text.front() == '|' && !records_in_head_;
        // Files are sniffed before they are opened (is_kineto_trace); stdin cannot be,
        // so a trace arriving there is recognized here, by its first line.
        if (looks_like_trace_start(text) && !records_in_head_ && !own_output_.empty()) {
          report(Severity::kError, Problem::kMalformedJson, ln, 1,
                 own_output_ + ": give `stepprof report` the logs it was made from");
          return;
        }
        if (looks_like_trace_event_array(text) && !records_in_head_) {
          report(Severity::kError, Problem::kBadTrace, ln, 1,
                 fmt::format("this is {}: {}", kTraceEventArray, kTraceEventArrayWhy));
          return;
        }
        // (An array of them, as json.dump(records, f, indent=2) writes: 1,876 errors, one per
        // line, before this check saw its first line.)
        if ((looks_like_trace_start(text) || json_array_start(text)) && pretty_records_in_head_) {
          report(Severity::kError, Problem::kMalformedJson, ln, 1,
                 "the records span several lines each (pretty-printed JSON, as `jq .` writes it): a step log holds "
                 "one record per line; convert it first (`jq -c . FILE`, or `jq -c '.[]' FILE` for an array)");
          return;
        }
        if (looks_like_trace_start(text) && !records_in_head_) {  // (a lone "{" before records: damage)
          struct stat st {};
          const bool regular = path_ != "-" && ::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode);
          report(Severity::kError, Problem::kBadTrace, ln, 1,
                 !regular ? fmt::format("this looks like a PyTorch profiler trace, which stepprof reads from a "
                                        "regular file, not from {}: save it to a file, or convert it with "
                                        "`stepprof import kineto {} -o DIR`",
                                        path_ == "-" ? "stdin" : "a pipe", path_)
                 : st.st_size <= (off_t{16} << 20)  // (the whole file was looked at)
                     ? fmt::format("this file ({} bytes) starts like a JSON document but holds neither a step "
                                   "record (one per line) nor a PyTorch profiler trace's \"traceEvents\": it is "
                                   "read as neither",
                                   st.st_size)
                     : "this starts like a PyTorch profiler trace, but no \"traceEvents\" key is in its "
                       "first 16 MiB, so it is read as neither a trace nor a step log; if it is a trace, "
                       "convert it with `stepprof import kineto FILE -o DIR`");
          return;
        }
      }
      std::uint64_t col_offset = static_cast<std::uint64_t>(text.data() - line.data());
      if (table_mode) {
        // A fenced code block (``` or ~~~) of a markdown document holds examples: its
        // lines, table rows too, are notes (docs/log-schema.md).
        const bool fence = text.starts_with("```") || text.starts_with("~~~");
        if (fence) in_fence = !in_fence;
        if (in_fence && !fence) {
          report(Severity::kNote, Problem::kUnknownRecord, ln, col_offset + 1,
                 "inside a fenced code block of the markdown document (an example, not a record); skipped");
          continue;
        }
        if (text.front() != '|') {
          // Prose between a document's tables holds no record: a note. A record outside
          // the table is an error (it is not read).
          if (has_record_start(text))
            report(Severity::kError, Problem::kMalformedJson, ln, col_offset + 1,
                   "expected a markdown table row starting with '|' (this file is read as a table)");
          else
            report(Severity::kNote, Problem::kUnknownRecord, ln, col_offset + 1,
                   "markdown text, not a table row; skipped");
          continue;
        }
        text.remove_prefix(1);
        if (!text.empty() && text.back() == '|' && !(text.size() >= 2 && text[text.size() - 2] == '\\'))
          text.remove_suffix(1);
        text = trim(text);
        col_offset = static_cast<std::uint64_t>(text.data() - line.data());
        if (text.empty() || text.find_first_not_of("-:| ") == std::string_view::npos) continue;  // separator row
        // A record in inline code (`| `{...}` |`, as markdown shows JSON) is read as the
        // record: one or two backticks on each side, and a space inside them.
        for (const std::string_view ticks : {"``", "`"})
          if (text.size() > 2 * ticks.size() && text.starts_with(ticks) && text.ends_with(ticks)) {
            text = trim(text.substr(ticks.size(), text.size() - 2 * ticks.size()));
            col_offset = static_cast<std::uint64_t>(text.data() - line.data());
            break;
          }
        if (text.empty() || text.front() != '{') {
          // A row with a record that is not its only cell (a row number beside it, bold)
          // is not read: an error, not a header row's note (it was dropped in silence).
          if (has_record_start(text))
            report(Severity::kError, Problem::kMalformedJson, ln, col_offset + 1,
                   "table row holds a record that is not its only cell; not read (each row must be `| {...} |`: "
                   "the record alone, in backticks or not, with no other column or markup)");
          else
            report(Severity::kNote, Problem::kUnknownRecord, ln, col_offset + 1,
                   "table row holds no JSON record; skipped (a header row?)");
          continue;
        }
        if (text.find("\\|") != std::string_view::npos) {
          cell.clear();
          for (std::size_t i = 0; i < text.size(); ++i) {
            if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '|') continue;
            cell.push_back(text[i]);
          }
          const std::size_t n = cell.size();
          cell.resize(n + kParsePadding);
          text = std::string_view(cell.data(), n);
        }
      }

      if (!table_mode && text.front() != '{' && text.find('\0') == std::string_view::npos) {
        // A job's stdout as its log (stdout_lines.hpp): a launcher's or collector's prefix
        // before the line, then a record or other output of the job.
        if (const std::size_t at = known_prefix_length(text); at > 0 && at < text.size()) {
          const std::string_view rest = trim(text.substr(at));
          if (!rest.empty() && rest.front() == '{' && !rest.starts_with("{'")) note_prefix(text.substr(0, at), ln);
          col_offset += static_cast<std::uint64_t>(rest.data() - text.data());
          text = rest;
          if (text.empty()) continue;
        }
      }
      // A logger's colour reset after the record (`{...}\x1b[0m`): skipped, and said once
      // for the lines read as records. (Before the record such codes are a prefix.)
      line_colour_codes = {};
      if (!table_mode)
        if (const std::size_t n = trailing_terminal_codes(text); n > 0) {
          line_colour_codes = trim(text.substr(text.size() - n));
          text = trim(text.substr(0, text.size() - n));
        }
      if (!table_mode && (text.front() != '{' || text.starts_with("{'")) && other_output(text)) {
        note_other(text, ln, col_offset);
        continue;
      }
      auto kind = parser.parse(text, cfg_fields, u, unknown_type, rerr);
      if (kind == RecordKind::kError && text.find('\0') != std::string_view::npos) {
        // Zeros where a crash or power loss left the file's tail unwritten, then what a
        // restarted job appended: the text after the last zero is read as a record. Whole
        // records before zeros (whose newline the zero-fill took) are read too; what is
        // left of a record the zeros cut short is counted.
        const auto last = text.find_last_of('\0');
        const auto zeros = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\0')) +
                           src.zeros_dropped();  // long runs are cut short as they are read
        std::size_t cut = 0, whole = 0;
        for (std::size_t pos = 0; pos < last;) {
          const std::size_t zero = text.find('\0', pos);
          std::string_view seg = text.substr(pos, zero - pos);
          while (!trim(seg).empty()) {
            const std::size_t next = next_record_start(trim(seg));
            const std::string_view piece = trim(next == std::string_view::npos ? trim(seg) : trim(seg).substr(0, next));
            const auto k = parser.parse(piece, cfg_fields, u, unknown_type, rerr);
            if (k == RecordKind::kError) {
              cut += piece.size();
            } else {
              ++whole;
              take(k, piece, col_offset + static_cast<std::uint64_t>(piece.data() - text.data()), ln, line, true);
            }
            if (next == std::string_view::npos) break;
            seg = trim(seg).substr(next);
          }
          pos = text.find_first_not_of('\0', zero);
          if (pos == std::string_view::npos) break;
        }
        const std::string_view after = trim(text.substr(last + 1));
        report(Severity::kWarning, Problem::kZeroBytes, ln, col_offset + 1,
               fmt::format("{} zero byte{}{} skipped: a crash or power loss leaves zeros where a file was being "
                           "written, and records written there are lost{}{}",
                           zeros, zeros == 1 ? "" : "s",
                           cut ? fmt::format(" and {} byte{} of a record cut short by them", cut, cut == 1 ? "" : "s")
                               : "",
                           whole ? fmt::format("; the {} whole record(s) before them are read", whole) : "",
                           after.empty() ? "" : "; the text after them is read as a record"));
        if (after.empty()) continue;
        col_offset += static_cast<std::uint64_t>(after.data() - text.data()) + src.zeros_dropped();
        text = after;
        kind = parser.parse(text, cfg_fields, u, unknown_type, rerr);
      }
      if (kind == RecordKind::kError && text.find("\r{") == std::string_view::npos &&
          next_record_start(text) != std::string_view::npos) {
        read_joined(text, col_offset, ln, line, terminated);
        continue;
      }
      if (job_json(kind, text, ln, col_offset)) continue;
      take(kind, text, col_offset, ln, line, terminated);
    }
    report_pending_cut(false);
    if (opt_.on_bytes) opt_.on_bytes(src.raw_bytes_read() - bytes_reported);
    if (!src.error().empty() && src.cut_off()) {
      if (!cut_said)
        report(truncation_severity(), Problem::kTruncatedLine, src.line_number(), 0,
               fmt::format("input ends early ({}): the file was cut off; {}", src.error(),
                           opt_.strict ? std::string("reading stops (--strict)")
                                       : fmt::format("the {} update record(s) read before the cut are kept",
                                                     kept_updates())));
    } else if (!src.error().empty()) {
      // Either the last line read is the corrupt one (corrupt_tail: it is named), or
      // every line read was whole and what is corrupt comes after the last of them.
      const std::string where =
          corrupt_tail            ? std::string()
          : src.line_number() > 0 ? fmt::format(" after line {}", src.line_number())
                                  : std::string(" from its start");  // (it said "after line 0")
      // A failed gzip checksum: what was read decompressed, but not to what was written.
      const std::string altered =
          src.checksum_failed() ? ", but the gzip checksum over them failed: any of them may hold altered values "
                                  "(a changed digit still parses); copy the file again from its source"
                                : "";
      report(Severity::kError, Problem::kUnreadable, corrupt_tail ? src.line_number() : 0, 0,
             fmt::format("cannot read the rest of the file{} ({}): it is corrupt or unreadable; {}{}", where,
                         src.error(),
                         opt_.strict ? std::string("reading stops (--strict)")
                         : corrupt_tail ? fmt::format("the {} update record(s) read before this line are kept",
                                                      kept_updates())
                                        : fmt::format("the {} update record(s) read up to there are kept",
                                                      kept_updates()),
                         opt_.strict ? "" : altered));
    }
    if (docker_entries)
      report(Severity::kNote, Problem::kLinePrefix, docker_first, 1,
             fmt::format("{} line(s) are entries of Docker's json-file log (`{{\"log\": ...}}`); the job's line in "
                         "each is read",
                         docker_entries));
    if (joined_lines)
      report(Severity::kNote, Problem::kLinePrefix, joined_first, 1,
             fmt::format("{} line(s) of the job were split by the container runtime (CRI log lines tagged `P`, or "
                         "Docker entries without a final newline, from line {}) and are read joined",
                         joined_lines, joined_first));
    if (coloured)
      report(Severity::kNote, Problem::kLinePrefix, coloured_first, 1,
             fmt::format("{} record line(s) end with terminal control codes after the record, e.g. \"{}\" (a logger "
                         "that colours its lines); they are skipped and the record read",
                         coloured, coloured_example));
    if (prefixed)
      report(Severity::kNote, Problem::kLinePrefix, prefixed_first, 1,
             fmt::format("{} record line(s) carry a prefix before the record, e.g. \"{}\" (torchrun's --tee or "
                         "--log-line-prefix-template, srun --label, a log collector's timestamp, a logger's format, "
                         "or the job's own output without its newline); the prefix is skipped and the record read",
                         prefixed, prefix_example));
    if (other && !opt_.strict) {
      std::string lines;
      for (const auto l : other_lines) lines += fmt::format("{}{}", lines.empty() ? "" : ", ", l);
      report(Severity::kWarning, Problem::kOtherOutput, other_lines.front(), 1,
             fmt::format("{} line(s) hold no record (lines {}{}; the first: \"{}\"): other output of the job among "
                         "its records (prints, progress bars, library messages, its own JSON); skipped",
                         other, lines, other > other_lines.size() ? ", ..." : "", other_example));
    }
    if (backwards)
      report(Severity::kWarning, Problem::kStepsBackwards, backwards_first.line, 0,
             fmt::format("{} update record(s) have a step below the one before them, with no config record between "
                         "(the first: step {} here, after step {} at line {}): the job's step counter went back "
                         "(a restart appended without its config record, or two processes writing one file?); "
                         "records are analyzed in step order, not in the file's",
                         backwards, backwards_first.step, backwards_first.before_step, backwards_first.before_line));
    resolve_resumes(resumes);
    out_.rejected_updates += rejected_after_mix;
    if (rejected_after_mix)
      report(Severity::kError, Problem::kMixedRuns, mixed_at, 0,
             fmt::format("{} update record(s) after the differing config at line {} were skipped", rejected_after_mix,
                         mixed_at));
    say_prelude();
    if (records == 0 && !truncated && src.error().empty())
      report(Severity::kWarning, Problem::kEmptyInput, 0, 0, "file holds no records" + gz_name_note(path_));
  }

  // A config that names no usable rank (none, or a negative one) is the config of the
  // rank of the first update record after it that names one: a file holds one rank's
  // log. Without this its updates had no config ("no config record for rank 1") and the
  // config no updates. Later records of another rank are then "one file should hold one
  // rank" errors, as under a config that names its rank; a second config of the same
  // run and rank is the same run's.
  void adopt_rank(RunConfig& config, std::uint64_t config_line, std::int64_t rank, std::uint64_t update_line) {
    config.rank = rank;
    report(Severity::kNote, Problem::kMissingConfig, config_line, 0,
           fmt::format("the config names no rank; it is read as rank {}'s, the rank of the first update record "
                       "after it (line {}): a file holds one rank's log",
                       rank, update_line));
  }

  const std::string& path_;
  std::uint32_t file_;
  const FileOptions& opt_;
  FileResult out_;
  std::array<std::uint64_t, static_cast<int>(Problem::kCount_)> reported_{};
};

}  // namespace

void inherit_run_settings(RunConfig& later, const RunConfig& run) {
  if (!later.run_id || later.run_id != run.run_id || later.rank != run.rank) return;
  if (!later.world_size) later.world_size = run.world_size;
  if (!later.micro_batch) later.micro_batch = run.micro_batch;
  if (!later.accumulation) later.accumulation = run.accumulation;
  if (!later.global_batch) later.global_batch = run.global_batch;
  if (!later.seed) later.seed = run.seed;
  if (!later.model) later.model = run.model;
}

namespace {
// The run settings of `c` that are present, in a fixed order, as (key, value text).
std::vector<std::pair<std::string, std::string>> identity_fields(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](std::string_view k, const auto& v) {
    if (v) out.emplace_back(std::string(k), fmt::format("{}", *v));
  };
  auto add_text = [&](std::string_view k, const std::optional<std::string>& v) {  // quoted: "a b" against "a"
    if (v) out.emplace_back(std::string(k), fmt::format("\"{}\"", *v));
  };
  add_text(schema::kRunId, c.run_id);
  add(schema::kWorldSize, c.world_size);
  add(schema::kMicroBatch, c.micro_batch);
  add(schema::kAccumulation, c.accumulation);
  add(schema::kGlobalBatch, c.global_batch);
  add(schema::kSeed, c.seed);
  add_text(schema::kModel, c.model);
  // A config imported from a profiler trace has no run_id (and rarely more than the world
  // size): the GPU model tells two jobs' traces of one rank apart.
  if (c.find("trace_format"))
    if (const RawField* gpu = c.find("gpu_name")) add(std::string_view("gpu_name"), std::optional<std::string>(gpu->json));
  return out;
}
}  // namespace

std::string run_identity(const RunConfig& c) {
  std::string id;
  for (const auto& [k, v] : identity_fields(c)) id += fmt::format("{}{}={}", id.empty() ? "" : ", ", k, v);
  return id.empty() ? "(no run settings)" : id;
}

std::string identity_difference(const RunConfig& a, const RunConfig& b) {
  const auto fa = identity_fields(a), fb = identity_fields(b);
  auto value = [](const auto& fields, const std::string& key) -> std::optional<std::string> {
    for (const auto& [k, v] : fields)
      if (k == key) return v;
    return std::nullopt;
  };
  std::vector<std::string> keys;
  for (const auto* fields : {&fa, &fb})
    for (const auto& [k, v] : *fields)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::string out;
  for (const auto& k : keys) {
    const auto va = value(fa, k), vb = value(fb, k);
    if (va != vb)
      out += fmt::format("{}{} {} against {}", out.empty() ? "" : ", ", k, va.value_or("absent"), vb.value_or("absent"));
  }
  return out;
}

std::string rank_text(const std::optional<std::int64_t>& r) {
  return r ? fmt::format("rank {}", *r) : std::string("unknown rank");
}

void Superseded::add(const UpdateRecord& u) {
  first_step = records == 0 ? u.step : std::min(first_step, u.step);
  last_step = records == 0 ? u.step : std::max(last_step, u.step);
  first_line = records == 0 ? u.source.line : std::min(first_line, u.source.line);
  last_line = std::max(last_line, u.source.line);
  wall_ms += u.wall_ms;
  ++records;
}

std::string Superseded::steps() const {
  return first_step == last_step ? fmt::format("step {}", first_step)
                                 : fmt::format("steps {}..{}", first_step, last_step);
}

UpdateRecord compact_copy(const UpdateRecord& u, bool keep_sample_indices) {
  UpdateRecord c;
  c.rank = u.rank;
  c.step = u.step;
  c.wall_ms = u.wall_ms;
  // A vector constructed from a range holds exactly its elements.
  c.regions = std::vector<RegionSample>(u.regions.begin(), u.regions.end());
  c.counters = std::vector<Counter>(u.counters.begin(), u.counters.end());
  c.frame_histogram = std::vector<std::pair<std::int64_t, std::int64_t>>(u.frame_histogram.begin(), u.frame_histogram.end());
  c.input_shapes.reserve(u.input_shapes.size());
  for (const auto& s : u.input_shapes)
    c.input_shapes.push_back({std::vector<std::int64_t>(s.dims.begin(), s.dims.end()), s.microbatches});
  if (keep_sample_indices)
    c.sample_indices = std::vector<std::int64_t>(u.sample_indices.begin(), u.sample_indices.end());
  c.padding_fraction = u.padding_fraction;
  c.microbatches.reserve(u.microbatches.size());
  for (const auto& m : u.microbatches)
    c.microbatches.push_back({m.path, std::vector<std::int64_t>(m.frames.begin(), m.frames.end()),
                              std::vector<std::int64_t>(m.tokens.begin(), m.tokens.end()), m.padded_length});
  c.recorder_errors = u.recorder_errors;
  c.extra = u.extra;
  c.source = u.source;
  return c;
}

FileResult read_file(const std::string& path, std::uint32_t file, const FileOptions& options) {
  return FileParser(path, file, options).run();
}

}  // namespace stepprof::detail
