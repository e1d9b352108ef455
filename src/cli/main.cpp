// The stepprof command: reads step logs and explains them.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <exception>
#include <new>
#include <regex>
#include <string>

#include <fmt/format.h>

#include "../read/byte_source.hpp"
#include "allocator.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace {

// Memory set aside for running out of it. nlohmann::json's destructor allocates (it moves
// nested values onto a stack to destroy them without recursion) and is noexcept, so a
// std::bad_alloc unwinding through JSON values ended in std::terminate: exit 134 instead
// of the out-of-memory message, and an output's temporary file left behind (`html` under
// `ulimit -v` of 80-100 MB). The first allocation that fails frees this and fails as it
// would have, so the unwinding has memory to finish with. (In blocks of 128 KiB and 2 MiB:
// jemalloc does not split a freed block for a request 64 times smaller, so one block of
// 6 MB did not help.)
constexpr std::size_t kReserveBlocks = 34;
constexpr std::size_t reserve_block_size(std::size_t i) { return i < 32 ? std::size_t{128} << 10 : std::size_t{2} << 20; }
std::array<char*, kReserveBlocks> g_reserve{};
std::atomic<bool> g_reserve_held{false};

void release_reserve_and_fail() {
  if (g_reserve_held.exchange(false))
    for (char*& block : g_reserve) {
      delete[] block;
      block = nullptr;
    }
  throw std::bad_alloc();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stepprof::cli;
  for (std::size_t i = 0; i < kReserveBlocks; ++i)  // (none under a very low limit)
    g_reserve[i] = new (std::nothrow) char[reserve_block_size(i)];
  g_reserve_held = true;
  std::set_new_handler(release_reserve_and_fail);
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
      fmt::print(stderr, "{}: a command is required (commands: {}; see {} --help)\n", path, known, path);
      return kUsage;
    }
    const std::string word = argv[i];
    if (at == &app && word == "--version" && argc > 2) {
      fmt::print(stderr, "stepprof: --version takes nothing after it\n");
      return kUsage;
    }
    if (word == "-h" || word == "--help" || (at == &app && word == "--version")) break;
    CLI::App* next = nullptr;
    for (auto* sub : subs)
      if (sub->get_name() == word) next = sub;
    if (!next) {
      fmt::print(stderr, "{}: {} \"{}\" (commands: {}; see {} --help)\n", path,
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
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
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
    fmt::print(stderr, "{}: {} (see {} --help)\n", path, what, path);
    return kUsage;
  }
  try {
    return action ? action() : kUsage;
  } catch (const std::bad_alloc&) {
    struct rlimit as {};
    std::string limit;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
      limit = fmt::format(" (the address-space limit, ulimit -v, is {} MB)", as.rlim_cur >> 20);
    // A line of tens of MB (a record with a huge unknown field, a log that lost its
    // newlines) is held whole while it is read, at 2.5 to 5 times its size: reading fewer
    // updates does not help then. (The buffer doubles when a line fills more than half of
    // it, less half a 1 MiB chunk: the line was longer than half the buffer, less 1 MB.)
    std::string long_line;
    if (const std::size_t held = stepprof::detail::largest_buffer_bytes(); held >= (std::size_t{64} << 20))
      long_line = fmt::format(
          "; a line (or trace event) longer than {} MB was read: it is held whole while it is read and takes 2.5 to "
          "5 times its size (docs/scale.md, \"Memory\"): split or shorten such lines",
          (held >> 21) - 1);
    fmt::print(stderr,
               "stepprof: out of memory{}: stepprof keeps every update's summary (about 2 KB per update record for a "
               "report; html and whatif about 4 KB, docs/scale.md); "
               "allow more memory, or read fewer updates (--steps A:B) or fewer files{}\n",
               limit, long_line);
    return kOutOfMemory;
  } catch (const std::exception& e) {
    fmt::print(stderr, "stepprof: internal error: {}\n", e.what());
    return kInternal;
  }
}
