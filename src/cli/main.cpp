// The stepprof command: reads step logs and explains them.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <regex>
#include <string>

#include <fmt/format.h>

#include "allocator.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "out_of_memory.hpp"

namespace {

// `status` once the help or version text CLI11 printed on stdout has reached it;
// otherwise (`stepprof --help > /dev/full`) kUsage, as for any output not written.
int written_to_stdout(int status) {
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0) return status;
  stepprof::cli::print_stderr("stepprof: the text could not be written to stdout\n");
  return stepprof::cli::kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stepprof::cli;
  install_out_of_memory_handler();
  // A file-size limit (`ulimit -f`) makes a write past it fail with EFBIG, which every
  // writer reports (exit status 2, partial output removed), instead of SIGXFSZ ending the
  // process with its output half-written.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"stepprof: per-update performance telemetry for distributed training"};
  app.set_version_flag("--version", "stepprof 0.1.0\nallocator: " + allocator_description());
  app.require_subcommand(1);
  std::function<int()> action;
  auto set_action = [&action](std::function<int()> f) { action = std::move(f); };
  for (Register add : {add_report_command, add_trace_command, add_html_command, add_import_command,
                       add_synth_command, add_whatif_command})
    add(app, set_action);

  // An unknown command (`stepprof foo`, `stepprof import foo`) or an option before any:
  // CLI11 would say only "A subcommand is required".
  std::string path = "stepprof";
  for (CLI::App* at = &app; at;) {
    const auto subs = at->get_subcommands({});
    const int i = static_cast<int>(std::count(path.begin(), path.end(), ' ')) + 1;  // argv index of the next word
    if (subs.empty()) break;
    std::string known;
    for (auto* sub : subs) known += (known.empty() ? "" : ", ") + sub->get_name();
    if (i >= argc) {
      print_stderr("{}: a command is required (commands: {}; see {} --help)\n", path, known, path);
      return kUsage;
    }
    const std::string word = argv[i];
    if (at == &app && word == "--version" && argc > 2) {
      print_stderr("stepprof: --version takes nothing after it\n");
      return kUsage;
    }
    if (word == "-h" || word == "--help" || (at == &app && word == "--version")) break;
    CLI::App* next = nullptr;
    for (auto* sub : subs)
      if (sub->get_name() == word) next = sub;
    if (!next) {
      print_stderr("{}: {} \"{}\" (commands: {}; see {} --help)\n", path,
                 word.starts_with('-') ? "a command comes first, not the option" : "unknown command", word, known,
                 path);
      return kUsage;
    }
    path += " " + word;
    at = next;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return written_to_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return written_to_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return written_to_stdout(app.exit(e));
  } catch (const CLI::ParseError& e) {
    // CLI11's own text ("The following argument was not expected: --bogus"), after the
    // command it is about, as stepprof's other messages are.
    std::string what = e.what();
    // An option given twice: "--steps: At Most 1 required but received 2" (CLI11 2.x's words).
    static const std::regex twice(R"(^(.+): At Most 1 required but received (\d+)$)");
    if (std::smatch m; std::regex_match(what, m, twice))
      what = fmt::format("{} is given {} times; give it once", m[1].str(), m[2].str());
    if (what.size() > 1 && std::isupper(static_cast<unsigned char>(what[0])) &&
        std::islower(static_cast<unsigned char>(what[1])))
      what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
    print_stderr("{}: {} (see {} --help)\n", path, what, path);
    return kUsage;
  }
  try {
    return action ? action() : kUsage;
  } catch (const std::bad_alloc&) {
    print_out_of_memory_message();
    return kOutOfMemory;
  } catch (const std::exception& e) {
    print_stderr("stepprof: internal error: {}\n", e.what());
    return kInternal;
  }
}
