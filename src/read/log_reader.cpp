// Reads step logs: per file, lines -> records (record_parser), then across files:
// ranks, duplicate steps, mixed runs, missing configs.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>

#include "line_source.hpp"
#include "record_parser.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/schema.hpp"

namespace stepprof {
namespace {

namespace fs = std::filesystem;

bool has_log_name(const std::string& name) {
  std::string n = name;
  if (n.size() > 3 && n.ends_with(".gz")) n.resize(n.size() - 3);
  for (const char* ext : {".jsonl", ".ndjson", ".json", ".log", ".md", ".txt"})
    if (n.ends_with(ext)) return true;
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The settings that identify a run: records whose configs differ in any of these
// come from different runs. Rank is compared separately.
std::string run_identity(const RunConfig& c) {
  std::string id;
  auto add = [&](std::string_view k, const auto& v) {
    if (v) id += fmt::format("{}{}={}", id.empty() ? "" : ", ", k, *v);
  };
  add(schema::kRunId, c.run_id);
  add(schema::kWorldSize, c.world_size);
  add(schema::kMicroBatch, c.micro_batch);
  add(schema::kAccumulation, c.accumulation);
  add(schema::kGlobalBatch, c.global_batch);
  add(schema::kSeed, c.seed);
  add(schema::kModel, c.model);
  return id.empty() ? "(no run settings)" : id;
}

std::string rank_text(const std::optional<std::int64_t>& r) {
  return r ? fmt::format("rank {}", *r) : std::string("unknown rank");
}

// One rank's records as read, before duplicate steps are resolved.
struct RankBucket {
  std::optional<std::int64_t> rank;
  std::optional<RunConfig> config;
  std::string config_where;  // file:line of the config, for messages
  std::vector<UpdateRecord> updates;
  std::vector<std::uint32_t> files;
};

class Reader {
 public:
  Reader(const ReadOptions& opt, Diagnostics& diag) : opt_(opt), diag_(diag) {}

  Dataset run(const std::vector<std::string>& files) {
    ds_.files = files;
    for (std::uint32_t i = 0; i < files.size() && !diag_.should_stop(); ++i) read_file(i);
    if (!diag_.should_stop()) finish();
    return std::move(ds_);
  }

 private:
  void report(Severity sev, Problem p, std::uint32_t file, std::uint64_t line, std::uint64_t col,
              std::string msg) {
    diag_.report({sev, p, ds_.files[file], line, col, std::move(msg)});
  }

  RankBucket& bucket(const std::optional<std::int64_t>& rank) {
    for (auto& b : buckets_)
      if (b.rank == rank) return b;
    buckets_.push_back(RankBucket{rank, {}, {}, {}, {}});
    return buckets_.back();
  }

  void read_file(std::uint32_t fi) {
    const std::string& name = ds_.files[fi];
    std::string err;
    auto src = detail::LineSource::open(name, err);
    if (!src) {
      report(Severity::kError, Problem::kUnreadable, fi, 0, 0, fmt::format("cannot read: {}", err));
      return;
    }
    std::optional<RunConfig> file_config;
    std::uint64_t file_config_line = 0;
    bool table_mode = false, mode_known = false, truncated = false;
    std::uint64_t records = 0, rejected_after_mix = 0, mixed_at = 0;
    std::string cell;  // markdown cell with `\|` unescaped, plus parser padding

    std::string_view line;
    bool terminated = true;
    while (!diag_.should_stop() && src->next(line, terminated)) {
      const std::uint64_t ln = src->line_number();
      std::string_view text = trim(line);
      if (text.empty()) continue;
      if (!mode_known) {
        mode_known = true;
        table_mode = text.front() == '|';
      }
      std::uint64_t col_offset = static_cast<std::uint64_t>(text.data() - line.data());
      if (table_mode) {
        if (text.front() != '|') {
          report(Severity::kError, Problem::kMalformedJson, fi, ln, col_offset + 1,
                 "expected a markdown table row starting with '|' (this file is read as a table)");
          continue;
        }
        text.remove_prefix(1);
        if (!text.empty() && text.back() == '|' && !(text.size() >= 2 && text[text.size() - 2] == '\\'))
          text.remove_suffix(1);
        const std::string_view untrimmed = text;
        text = trim(text);
        col_offset = static_cast<std::uint64_t>(text.data() - line.data());
        (void)untrimmed;
        if (text.empty() || text.find_first_not_of("-:| ") == std::string_view::npos) continue;  // separator row
        if (text.front() != '{') {
          report(Severity::kNote, Problem::kUnknownRecord, fi, ln, col_offset + 1,
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
          cell.resize(n + detail::kParsePadding);
          text = std::string_view(cell.data(), n);
        }
      }

      std::vector<RawField> cfg_fields;
      std::string unknown_type;
      detail::RecordError rerr;
      UpdateRecord u;
      const auto kind = parser_.parse(text, cfg_fields, u, unknown_type, rerr);
      switch (kind) {
        case detail::RecordKind::kError: {
          const std::uint64_t col = rerr.column ? col_offset + rerr.column : 0;
          if (!terminated) {
            truncated = true;
            report(diag_.strict() ? Severity::kError : Severity::kWarning, Problem::kTruncatedLine, fi, ln, col,
                   fmt::format("the last line ends mid-record (was the writing job killed?): {}; "
                               "the {} complete record(s) before it are analyzed",
                               rerr.message, records));
          } else {
            report(Severity::kError, rerr.problem, fi, ln, col, rerr.message + "; record skipped");
          }
          break;
        }
        case detail::RecordKind::kUnknownType:
          report(Severity::kWarning, Problem::kUnknownRecord, fi, ln, 0,
                 fmt::format("unknown record type \"{}\" (expected \"config\" or \"update\"); skipped", unknown_type));
          break;
        case detail::RecordKind::kConfig: {
          ++records;
          std::vector<std::string> problems;
          RunConfig cfg = make_config(std::move(cfg_fields), &problems);
          cfg.source = {fi, ln};
          for (auto& p : problems) report(Severity::kError, Problem::kBadField, fi, ln, 0, std::move(p));
          if (!file_config) {
            file_config = std::move(cfg);
            file_config_line = ln;
          } else if (run_identity(cfg) != run_identity(*file_config) || cfg.rank != file_config->rank) {
            report(Severity::kError, Problem::kMixedRuns, fi, ln, 0,
                   fmt::format("a second config record ({}, {}) differs from the first at line {} ({}, {}): "
                               "this file mixes runs; records after this line are skipped",
                               rank_text(cfg.rank), run_identity(cfg), file_config_line,
                               rank_text(file_config->rank), run_identity(*file_config)));
            mixed_at = ln;
          }
          if (file_config_line == ln) {
            RankBucket& b = bucket(file_config->rank);
            add_file(b, fi);
            if (!b.config) {
              b.config = *file_config;
              b.config_where = fmt::format("{}:{}", name, ln);
            } else if (run_identity(*b.config) != run_identity(*file_config)) {
              report(Severity::kError, Problem::kMixedRuns, fi, ln, 0,
                     fmt::format("config for {} ({}) differs from the one in {} ({}): these files come from "
                                 "different runs; this file's records are kept with the first config",
                                 rank_text(file_config->rank), run_identity(*file_config), b.config_where,
                                 run_identity(*b.config)));
            }
          }
          break;
        }
        case detail::RecordKind::kUpdate: {
          ++records;
          if (mixed_at) {
            ++rejected_after_mix;
            break;
          }
          if (!u.rank && file_config) u.rank = file_config->rank;
          if (file_config && file_config->rank && u.rank != file_config->rank) {
            report(Severity::kError, Problem::kMixedRuns, fi, ln, 0,
                   fmt::format("update for {} in a file whose config (line {}) is for rank {}: "
                               "one file should hold one rank; record skipped",
                               rank_text(u.rank), file_config_line, *file_config->rank));
            break;
          }
          if (opt_.steps && !opt_.steps->contains(u.step)) {
            ++ds_.updates_outside_window;
            break;
          }
          if (!u.recorder_errors.empty()) {
            std::string kinds;
            for (const auto& [k, n] : u.recorder_errors) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
            report(Severity::kWarning, Problem::kRecorderErrors, fi, ln, 0,
                   fmt::format("the recorder reported errors before step {}: {} (records may be missing)", u.step,
                               kinds));
          }
          u.source = {fi, ln};
          RankBucket& b = bucket(u.rank);
          add_file(b, fi);
          b.updates.push_back(std::move(u));
          break;
        }
      }
    }
    if (!src->error().empty()) {
      report(diag_.strict() ? Severity::kError : Severity::kWarning, Problem::kTruncatedLine, fi,
             src->line_number(), 0,
             fmt::format("input ends early ({}): the file was cut off; the {} complete record(s) before the cut "
                         "are analyzed",
                         src->error(), records));
    }
    if (rejected_after_mix)
      report(Severity::kError, Problem::kMixedRuns, fi, mixed_at, 0,
             fmt::format("{} update record(s) after the differing config at line {} were skipped", rejected_after_mix,
                         mixed_at));
    if (records == 0 && !truncated && src->error().empty())
      report(Severity::kWarning, Problem::kEmptyInput, fi, 0, 0, "file holds no records");
  }

  static void add_file(RankBucket& b, std::uint32_t fi) {
    if (b.files.empty() || b.files.back() != fi) b.files.push_back(fi);
  }

  void finish() {
    // Updates that carry a rank but came from a file without config land in their own
    // bucket; merge a bucket without rank into the only ranked one if there is one.
    std::sort(buckets_.begin(), buckets_.end(), [](const RankBucket& a, const RankBucket& b) {
      return a.rank.value_or(-1) < b.rank.value_or(-1);
    });

    // Mixed runs across ranks: all configs must share the run identity of the first.
    // (Taken before the loop below moves the configs out of the buckets.)
    const RankBucket* ref = nullptr;
    for (const auto& b : buckets_)
      if (b.config) {
        ref = &b;
        break;
      }
    const std::string ref_identity = ref ? run_identity(*ref->config) : std::string();
    const std::string ref_rank = ref ? rank_text(ref->rank) : std::string();

    for (auto& b : buckets_) {
      if (b.updates.empty() && !b.config) continue;
      if (ref && b.config && &b != ref && run_identity(*b.config) != ref_identity) {
        report(Severity::kError, Problem::kMixedRuns, b.config->source.file, b.config->source.line, 0,
               fmt::format("{} comes from a different run ({}) than {} ({}); its {} update record(s) are skipped",
                           rank_text(b.rank), run_identity(*b.config), ref_rank, ref_identity,
                           b.updates.size()));
        continue;
      }
      if (!b.config && !b.updates.empty()) {
        const auto& first = b.updates.front().source;
        report(Severity::kWarning, Problem::kMissingConfig, first.file, 0, 0,
               fmt::format("no config record for {}: micro-batch, accumulation and world size are unknown, so "
                           "figures that need them are not reported",
                           rank_text(b.rank)));
      }
      RankLog log;
      log.rank = b.rank;
      log.config = std::move(b.config);
      log.files = std::move(b.files);
      std::stable_sort(b.updates.begin(), b.updates.end(),
                       [](const UpdateRecord& x, const UpdateRecord& y) { return x.step < y.step; });
      for (auto& u : b.updates) {
        if (!log.updates.empty() && log.updates.back().step == u.step) {
          const auto& kept = log.updates.back().source;
          report(Severity::kError, Problem::kDuplicateStep, u.source.file, u.source.line, 0,
                 fmt::format("duplicate step {} for {} (first at {}:{}); this record is skipped", u.step,
                             rank_text(b.rank), ds_.files[kept.file], kept.line));
          continue;
        }
        log.updates.push_back(std::move(u));
      }
      ds_.ranks.push_back(std::move(log));
    }
    if (ds_.update_count() == 0) {
      std::string why = ds_.updates_outside_window
                            ? fmt::format("all {} update records are outside the --steps window",
                                          ds_.updates_outside_window)
                            : std::string("no update records were read");
      diag_.report({Severity::kError, Problem::kEmptyInput,
                    ds_.files.empty() ? std::string("(input)") : ds_.files.front(), 0, 0,
                    fmt::format("nothing to analyze: {}", why)});
    }
  }

  const ReadOptions& opt_;
  Diagnostics& diag_;
  Dataset ds_;
  detail::RecordParser parser_{ds_.regions, ds_.counters};
  std::vector<RankBucket> buckets_;
};

}  // namespace

std::optional<StepRange> parse_step_range(std::string_view text, std::string& error) {
  auto parse = [&](std::string_view s, std::int64_t& out) {
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, out);
    return ec == std::errc() && p == end;
  };
  StepRange r;
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    if (!parse(text, r.first)) {
      error = fmt::format("bad step window \"{}\": expected A:B, A:, :B or A (integers)", text);
      return std::nullopt;
    }
    r.last = r.first;
    return r;
  }
  const auto a = text.substr(0, colon), b = text.substr(colon + 1);
  if ((!a.empty() && !parse(a, r.first)) || (!b.empty() && !parse(b, r.last))) {
    error = fmt::format("bad step window \"{}\": expected A:B, A:, :B or A (integers)", text);
    return std::nullopt;
  }
  if (r.first > r.last) {
    error = fmt::format("bad step window \"{}\": the first step is after the last", text);
    return std::nullopt;
  }
  return r;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, Diagnostics& diag) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (in != "-" && fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in, ec)) {
        if (!e.is_regular_file(ec)) continue;
        const std::string fname = e.path().filename().string();
        if (fname.starts_with(".")) continue;
        if (has_log_name(fname))
          found.push_back(e.path().string());
        else
          diag.report({Severity::kNote, Problem::kUnknownRecord, e.path().string(), 0, 0,
                       "not read: the name does not end in .jsonl, .ndjson, .json, .log, .md or .txt (optionally .gz)"});
      }
      if (ec)
        diag.report({Severity::kError, Problem::kUnreadable, in, 0, 0, fmt::format("cannot list: {}", ec.message())});
      std::sort(found.begin(), found.end());
      if (found.empty())
        diag.report({Severity::kWarning, Problem::kEmptyInput, in, 0, 0, "directory holds no log files"});
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

Dataset read_logs(const std::vector<std::string>& inputs, const ReadOptions& options, Diagnostics& diag) {
  Reader reader(options, diag);
  return reader.run(inputs);
}

}  // namespace stepprof
