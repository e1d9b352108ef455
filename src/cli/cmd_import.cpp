// `stepprof import kineto TRACE... -o DIR`: converts PyTorch profiler traces into step
// logs, one per rank (DIR/rank<R>.jsonl), written by the one record serializer.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "../util/rank_numbers.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/record_writer.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::cli {
namespace {

struct ImportOptions {
  std::vector<std::string> traces;
  std::string output;
  std::string steps;
  std::optional<std::int64_t> rank, world_size;
  bool strict = false;
  std::string run = "most-ranks";
};

// One rank's log, as the file's text.
std::string rank_log_text(const RankLog& log, const Dataset& data) {
  std::string text;
  if (log.config) {
    // The trace's config gives its profiled steps as the window; the log holds the steps
    // kept (--steps, or several profiler windows of one rank merged), and states those:
    // `report DIR` took the steps not written for a job that stopped early.
    RunConfig config = *log.config;
    if (!log.updates.empty())
      for (auto& f : config.fields) {
        if (f.key == schema::kFirstStep) f.json = std::to_string(log.updates.front().step);
        if (f.key == schema::kLastStep) f.json = std::to_string(log.updates.back().step);
      }
    text += config_to_json(config) + '\n';
  }
  for (const auto& u : log.updates) text += update_to_json(u, data.regions, data.counters) + '\n';
  return text;
}

int run_import(const ImportOptions& opt) {
  if (opt.rank && opt.traces.size() != 1) {
    print_stderr("stepprof: --rank applies to one trace; {} were given\n", opt.traces.size());
    return kUsage;
  }
  if (opt.rank && opt.world_size && *opt.rank >= *opt.world_size) {
    print_stderr("stepprof: --rank {} is not below --world-size {}\n", *opt.rank, *opt.world_size);
    return kUsage;
  }
  // (Before reading: a trace of gigabytes was read, and its problems printed, before
  // "cannot create".)
  if (std::error_code ec; std::filesystem::exists(opt.output, ec) && !std::filesystem::is_directory(opt.output, ec)) {
    print_stderr("stepprof: -o {}: is a file, not a directory (import writes one log per rank into a directory)\n",
                 opt.output);
    return kUsage;
  }
  ReadOptions ro;
  ro.traces_only = true;
  ro.kineto.rank = opt.rank;
  ro.kineto.world_size = opt.world_size;
  InputOptions in_opt;
  in_opt.logs = opt.traces;
  in_opt.steps = opt.steps;
  in_opt.run = opt.run;
  in_opt.strict = opt.strict;
  Diagnostics diag(opt.strict);
  LoadedInput in;
  if (auto stop = load_input(in_opt, diag, in, ro)) return *stop;
  const Dataset& data = in.data;
  int status = finish(diag);

  std::error_code ec;
  const std::filesystem::path dir(opt.output);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    print_stderr("stepprof: cannot create {}: {}\n", opt.output, ec.message());
    return kUsage;
  }
  // An earlier import's (or another job's) logs that this one would not replace would be
  // read with the new ones by `stepprof report DIR`: nothing is written then.
  // DIR/rank<R>.jsonl, R zero-padded to the width of the world's last rank (as `synth`
  // names them), so that the names sort in rank order: rank0000 .. rank1023.
  // (A log the reader would reject, e.g. --world-size 2 for a trace of rank 3: not written,
  // nor does its rank set the names' width.)
  const auto rank_beyond_world = [](const RankLog& log) {
    return log.config && log.rank && log.config->world_size && *log.rank >= *log.config->world_size;
  };
  std::int64_t last_rank = 0;
  for (const auto& log : data.ranks) {
    if (!rank_beyond_world(log)) last_rank = std::max(last_rank, log.rank.value_or(0));
    if (log.config && log.config->world_size) last_rank = std::max(last_rank, *log.config->world_size - 1);
  }
  const int width = static_cast<int>(std::to_string(last_rank).size());
  const auto log_file = [&](std::int64_t rank) { return dir / fmt::format("rank{:0{}}.jsonl", rank, width); };
  std::vector<std::string> will_write;
  for (const auto& log : data.ranks)
    if (!log.updates.empty() && !rank_beyond_world(log)) will_write.push_back(log_file(log.rank.value_or(0)).string());
  // A log named as one of the traces read would replace that trace (`cp trace.json
  // d/rank0.jsonl; import kineto d/rank0.jsonl -o d` did, exit 0).
  for (const auto& out : will_write)
    for (const auto& f : data.files) {
      std::error_code same_ec;
      if (f != "-" && std::filesystem::equivalent(f, out, same_ec) && !same_ec) {
        print_stderr("stepprof: -o {}: the log {} would replace the trace {} it is made from; write to another "
                     "directory (nothing was written)\n",
                     opt.output, out, f);
        return kUsage;
      }
    }
  if (const auto stale = logs_besides(dir.string(), will_write); !stale.empty()) {
    print_stderr(
               "stepprof: {} holds {} log file(s) this import would not replace ({}): `stepprof report {}` would "
               "read them with the new ones; remove them or write to another directory (nothing was written)\n",
               opt.output, stale.size(), detail::file_list(stale),
               opt.output);
    return kUsage;
  }
  // One line per log written for the first kNamed, then one for the rest (a line per
  // rank was 1,045 lines for 1,024 traces).
  constexpr std::size_t kNamed = 8;
  std::size_t written = 0, updates_rest = 0;
  std::vector<std::int64_t> ranks_rest;
  for (const auto& log : data.ranks) {
    if (rank_beyond_world(log)) {
      print_stderr("stepprof: rank {} is not below the world size {}: its log is not written (the error above "
                   "says its records are read as that rank: so `report` reads the trace; a log is written only "
                   "without such an error)\n",
                   *log.rank, *log.config->world_size);
      status = kInputErrors;
      continue;
    }
    if (log.updates.empty()) {
      // (No update of this rank in the --steps window, while another rank has some: the
      // reader warned. A log of a config alone would be "no update records" to report;
      // and the line below read the first of no updates, a crash.)
      print_stderr("stepprof: rank {} has no update in the window: its log is not written\n", log.rank.value_or(0));
      continue;
    }
    const auto file = log_file(log.rank.value_or(0));
    std::error_code exists_ec;
    const bool replaced = std::filesystem::exists(file, exists_ec);  // (an earlier import's: said)
    // (Through a temporary file renamed into place: a full disk leaves no partial log,
    // which `report` would read as a job killed mid-write.)
    if (!write_output(file.string(), rank_log_text(log, data))) return output_failed();
    if (written++ < kNamed || replaced) {
      print_stderr("stepprof: wrote {}: rank {}, {} update(s), steps {}..{}{}\n", file.string(),
                 log.rank.value_or(0), log.updates.size(), log.updates.front().step, log.updates.back().step,
                 replaced ? " (it replaces the log that was there)" : "");
    } else {
      ranks_rest.push_back(log.rank.value_or(0));
      updates_rest += log.updates.size();
    }
  }
  if (!ranks_rest.empty())
    print_stderr("stepprof: wrote {} more log(s) to {}: {}, {} update(s)\n", ranks_rest.size(), opt.output,
               fmt::format("{} {}", ranks_rest.size() == 1 ? "rank" : "ranks", detail::rank_numbers(ranks_rest)),
               updates_rest);
  // Nothing written at all (every rank's log refused): nothing to analyze, as kineto.md
  // defines 3 (it was 1, "the rest written", with no rest).
  if (written == 0) return kNoData;
  return status;
}

}  // namespace

void add_import_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  CLI::App* cmd = app.add_subcommand("import", "convert other tools' output into stepprof step logs");
  cmd->require_subcommand(1);
  auto opt = std::make_shared<ImportOptions>();
  CLI::App* kin = cmd->add_subcommand(
      "kineto", "PyTorch profiler (Kineto) traces, plain or .gz: one step log per rank, DIR/rank<R>.jsonl");
  kin->add_option("TRACE", opt->traces, "trace files (JSON or JSON.gz), directories, or - for stdin")
      ->required()
      ->check(non_empty_path());
  kin->add_option("-o,--output", opt->output, "directory for the step logs (created if missing)")->required()->check(kDirectoryPath);
  add_steps_option(*kin, opt->steps, "keep only updates A..B (inclusive): A:B, A:, :B or A");
  // (Checked before CLI11 converts them: it clamped 10^20 to 2^63 - 1. A world size above
  // kMaxWorldSize would be written into a log the reader rejects.)
  kin->add_option("--rank", opt->rank, "rank of a trace without distributedInfo (overrides the trace's)")
      ->check(integer_from(0, kMaxWorldSize - 1, "RANK"));
  kin->add_option("--world-size", opt->world_size, "world size of a trace without distributedInfo (overrides the trace's)")
      ->check(integer_from(1, kMaxWorldSize, "WORLD_SIZE"));
  kin->add_flag("--strict", opt->strict, "stop at the first problem in the input (exit status 1)");
  kin->add_option("--run", opt->run,
                  "with the traces of several runs (jobs of other world sizes): convert the one most ranks have "
                  "(most-ranks) or the one whose records reach the highest step (latest)")
      ->check(CLI::IsMember({"most-ranks", "latest"}))
      ->capture_default_str();
  kin->callback([opt, set_action] { set_action([opt] { return run_import(*opt); }); });
}

}  // namespace stepprof::cli
