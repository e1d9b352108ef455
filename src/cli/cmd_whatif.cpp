// `stepprof whatif SCENARIO LOG...`: what a change would buy, from the cost models
// fitted to the logs (docs/whatif.md).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof::cli {
namespace {

struct WhatIfCliOptions {
  InputOptions input;
  std::string scenario;
  std::string format = "text";
  std::string output;
  WhatIfOptions whatif;
};

int run_whatif_command(WhatIfCliOptions opt) {
  const auto scenario = parse_scenario(opt.scenario);
  if (!scenario) {
    print_stderr("stepprof: unknown scenario \"{}\" (batched-geometry, no-padding, balanced-ranks)\n",
               opt.scenario);
    return kUsage;
  }
  opt.whatif.scenario = *scenario;
  for (const auto& [given, name] : {std::pair{&opt.whatif.variant, "--variant"}, {&opt.whatif.group, "--group"},
                                     {&opt.whatif.path, "--path"}})
    if (!given->empty() && *scenario != Scenario::kBatchedGeometry) {
      print_stderr("stepprof: {} goes with batched-geometry\n", name);
      return kUsage;
    }
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (auto stop = load_input(input, diag, in)) {
    // --format json: a document even when no record could be read, or --strict stopped,
    // saying why.
    if ((*stop == kNoData || *stop == kInputErrors) && opt.format == "json" && !write_output(opt.output, render_whatif_json_unanalyzed(diag)))
      return output_failed();
    return *stop;
  }
  arm_exit_on_interrupt();  // (until the output is written)
  // A --group the nesting does not have is a mistake on the command line, not a scenario
  // the data cannot answer.
  if (!opt.whatif.group.empty()) {
    std::vector<std::string> groups;
    if (in.hierarchy)
      for (const auto& [group, members] : in.hierarchy->alternatives()) groups.push_back(group);
    if (std::find(groups.begin(), groups.end(), opt.whatif.group) == groups.end()) {
      if (!in.hierarchy)
        print_stderr(
                   "stepprof: --group {}: groups of alternative code paths come from the region nesting, and there "
                   "is none: give --hierarchy FILE, or a log with parents\n",
                   opt.whatif.group);
      else
        print_stderr("stepprof: --group {}: the nesting ({}) has no such group of alternative code paths ({})\n",
                   opt.whatif.group, in.hierarchy->source,
                   groups.empty() ? std::string("it has none") : fmt::format("groups: {}", fmt::join(groups, ", ")));
      return kUsage;
    }
  }
  // So is a --path that is not one of the group's (or, without --group, any group's) paths.
  if (!opt.whatif.path.empty()) {
    std::vector<std::string> paths;
    std::string group_of_path;
    if (in.hierarchy)
      for (const auto& [group, members] : in.hierarchy->alternatives())
        if (opt.whatif.group.empty() || group == opt.whatif.group)
          for (const auto* m : members) {
            paths.push_back(m->name);
            if (m->name == opt.whatif.path && group_of_path.empty()) group_of_path = group;
          }
    if (opt.whatif.group.empty()) opt.whatif.group = group_of_path;  // the path's own group, not the first
    if (std::find(paths.begin(), paths.end(), opt.whatif.path) == paths.end()) {
      print_stderr("stepprof: --path {}: not an alternative code path {} ({})\n", opt.whatif.path,
                 opt.whatif.group.empty() ? std::string("of the nesting") : "of group " + opt.whatif.group,
                 paths.empty() ? std::string("it has none") : fmt::format("paths: {}", fmt::join(paths, ", ")));
      return kUsage;
    }
  }
  const AnalysisInput plain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const UpdateIndex index(plain.updates(), in.data.regions.size(), in.data.counters.size());
  const AnalysisInput ain{in.data, plain.hierarchy, &index};
  const WhatIfResult result = run_whatif(ain, opt.whatif);
  std::string text;
  if (opt.format == "json") text = render_whatif_json(result, diag);
  else if (opt.format == "markdown") text = render_whatif_markdown(result, diag);
  else text = render_whatif_text(result, diag);
  const int status = finish(diag);
  if (!write_output(opt.output, text)) return output_failed();
  const bool any = std::any_of(result.predictions.begin(), result.predictions.end(),
                               [](const Prediction& p) { return p.available; });
  if (!any) {
    for (const auto& p : result.predictions)
      print_stderr("stepprof: whatif {}{}: not available: {}\n", opt.scenario,
                 p.variant.empty() ? "" : " (" + p.variant + ")", p.why_not);
    return kNoData;  // (whatever else was wrong in the input: nothing was predicted)
  }
  return status;
}

// `text` as a whole number without sign, or nullopt (CLI11 took "-1" as 2^64 - 1, and
// 10^23 as 2^64 - 1 too).
std::optional<std::uint64_t> whole_number(std::string_view text) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

// A finite number from lo to hi, with a message that says which of the three is wrong
// (CLI::Range said "Value abc not in range" for a word, and let NaN through).
// A finite number from lo to hi; `type` names it in --help (e.g. FRACTION in [0 - 1]).
CLI::Validator number_from(double lo, double hi, std::string_view type) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size()) return fmt::format("\"{}\" is not a number", v);
        if (!std::isfinite(x)) return std::string("use a finite number");
        return x >= lo && x <= hi ? std::string() : fmt::format("use a number from {} to {}", lo, hi);
      },
      fmt::format("{} in [{} - {}]", type, lo, hi));
}

}  // namespace

void add_whatif_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<WhatIfCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "whatif", "predict what a change would buy (cost models fitted to the logs, checked by leave-one-out)");
  cmd->add_option("SCENARIO", opt->scenario, "batched-geometry, no-padding or balanced-ranks")
      ->required()
      // A log given first (`stepprof whatif rank1.jsonl`) said only that the path is
      // "not in {batched-geometry,...}".
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            std::error_code ec;
            if (v != "batched-geometry" && v != "no-padding" && v != "balanced-ranks" &&
                std::filesystem::exists(v, ec))
              return fmt::format("{} is a file or directory: give the scenario first, then the logs "
                                 "(stepprof whatif SCENARIO LOG..., SCENARIO one of batched-geometry, "
                                 "no-padding, balanced-ranks)",
                                 v);
            return {};
          },
          "", "scenario, not a path"))
      ->check(CLI::IsMember({"batched-geometry", "no-padding", "balanced-ranks"}));
  add_input_options(*cmd, opt->input);
  cmd->add_option("--format", opt->format, "text (default), json or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  cmd->add_option("-o,--output", opt->output, "write to FILE instead of stdout")->check(kNonEmptyPath);
  cmd->add_option("--variant", opt->whatif.variant,
                  "batched-geometry: pad (frames padded to the micro-batch's largest) or group (samples grouped by "
                  "frame count); default both")
      ->check(CLI::IsMember({"pad", "group"}));
  cmd->add_option("--group", opt->whatif.group, "batched-geometry: the alternative group (default: the first in the nesting)");
  cmd->add_option("--path", opt->whatif.path,
                  "batched-geometry: the path every micro-batch takes (default: the group's cheapest per frame)");
  cmd->add_option("--bootstrap", opt->whatif.bootstrap, "bootstrap replicates for the intervals (default 200; 0: none)")
      ->check(CLI::Validator(
          [](std::string& v) {
            // A 90 % interval from a handful of replicates would be its extremes, not an interval.
            const auto n = whole_number(v);
            return n && (*n == 0 || (*n >= 20 && *n <= 100000))
                       ? std::string()
                       : std::string("use 0 (no intervals) or 20 to 100000 replicates");
          },
          "0 OR 20..100000"));
  cmd->add_option("--threshold", opt->whatif.models.threshold,
                  "largest held-out error, as a fraction of a region's mean time, of a model used for predictions "
                  "(0 to 10; default 0.5, i.e. 50 %)")
      ->check(number_from(0.0, 10.0, "FRACTION"));
  cmd->add_option("--min-gain", opt->whatif.models.min_gain,
                  "a feature enters a model only if it lowers the held-out error by this fraction (default 0.05)")
      ->check(number_from(0.0, 1.0, "FRACTION"));
  cmd->add_option("--seed", opt->whatif.seed, "seed of the random draws and the bootstrap (default 20240607)")
      ->check(CLI::Validator(
          [](std::string& v) { return whole_number(v) ? std::string() : std::string("use a whole number 0..2^64-1"); },
          "0..2^64-1"));
  cmd->callback([opt, set_action] { set_action([opt] { return run_whatif_command(*opt); }); });
}

}  // namespace stepprof::cli
