// Each subcommand lives in its own cmd_*.cpp and registers itself here.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace stepprof::cli {

/// Registers a subcommand on `app`. When the command line selects it, the subcommand
/// passes `set_action` the function main() runs; its return value is the exit status.
using Register = void (*)(CLI::App& app, std::function<void(std::function<int()>)> set_action);

void add_report_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);
void add_trace_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);
void add_html_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);
void add_import_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);
void add_synth_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);
void add_whatif_command(CLI::App& app, std::function<void(std::function<int()>)> set_action);

}  // namespace stepprof::cli
