// The stepprof command: reads step logs and explains them.
#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"

int main(int argc, char** argv) {
  using namespace stepprof::cli;
  CLI::App app{"stepprof: per-update performance telemetry for distributed training"};
  app.set_version_flag("--version", "stepprof 0.1.0");
  app.require_subcommand(1);
  std::function<int()> action;
  auto set_action = [&action](std::function<int()> f) { action = std::move(f); };
  for (Register add : {add_report_command, add_trace_command, add_html_command, add_import_command,
                       add_synth_command, add_whatif_command})
    add(app, set_action);

  // An unknown command: CLI11 would say only "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const auto* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      fmt::print(stderr, "stepprof: unknown command \"{}\" (commands: {}; see stepprof --help)\n", argv[1], known);
      return kUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }
  try {
    return action ? action() : kUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "stepprof: internal error: {}\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
