// What every `stepprof` subcommand that reads logs shares: input options, reading,
// diagnostics on stderr and the exit status (README "Exit status").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "stepprof/dataset.hpp"
#include "stepprof/diagnostics.hpp"
#include "stepprof/hierarchy.hpp"
#include "stepprof/reader.hpp"

namespace stepprof::cli {

/// `text` with its control characters and bytes that are no valid UTF-8 written as \xNN
/// (printable()), line by line: the line breaks of a message stepprof built stay.
std::string printable_lines(std::string_view text);

/// An argument of print_stderr that is several lines of stepprof's own (synth's list of
/// what it injected): printed line by line, its line breaks kept.
struct Lines {
  std::string_view text;
};

}  // namespace stepprof::cli

// (For print_stderr's compile-time check of its format; the text printed is shown_arg's.)
template <>
struct fmt::formatter<stepprof::cli::Lines> : fmt::formatter<std::string_view> {
  auto format(const stepprof::cli::Lines& l, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(l.text, ctx);
  }
};

namespace stepprof::cli {

// A message's argument as printed: text (a path or value from the command line, a name
// from a log) made printable, a line break included (a value cannot start a line of its
// own); Lines line by line; anything else as it is.
template <typename T>
decltype(auto) shown_arg(T&& a) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Lines>) return printable_lines(a.text);
  else if constexpr (std::is_same_v<U, std::filesystem::path>) return printable(a.string());
  else if constexpr (std::is_convertible_v<const U&, std::string_view>) return printable(std::string_view(a));
  else return std::forward<T>(a);
}

/// Prints a message on stderr. Text arguments (paths and values the user typed, names
/// read from logs) are made printable, so that a path holding a terminal escape cannot
/// drive the terminal; the format's own text (the progress line's \r and erase) is
/// printed as written. Never throws: a stderr that cannot be written (closed with
/// `2>&-`, a full disk) loses the message, not the command's output or its exit status
/// (fmt::print throws std::system_error when the write fails).
template <typename... Args>
void print_stderr(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    // (The format was checked against Args at compile time; text arguments become strings.)
    fmt::print(stderr, fmt::runtime(fmt::string_view(format)), shown_arg(std::forward<Args>(args))...);
  } catch (...) {  // (the message is lost; nothing else can say so)
  }
}

/// Exit statuses of the stepprof command.
enum Exit : int {
  kOk = 0,          ///< analyzed; warnings (e.g. a truncated last line) may have been printed
  kInputErrors = 1, ///< some input was rejected (or --strict stopped at the first problem)
  kUsage = 2,       ///< bad command line, bad --hierarchy file, output not writable
  kNoData = 3,      ///< nothing to analyze: no update records could be read
  kOutOfMemory = 4, ///< memory ran out (std::bad_alloc): the input needs more than the limit allows
  kInternal = 70,   ///< a bug: an exception no command expects (EX_SOFTWARE)
};

struct InputOptions {
  std::vector<std::string> logs;
  std::string steps;      ///< --steps A:B
  std::string hierarchy;  ///< --hierarchy FILE
  std::string run = "most-ranks";  ///< --run most-ranks|latest
  bool strict = false;
  /// The command's output file (-o FILE), if any: it must not be one of the inputs.
  std::string output;
  /// Further files the command writes (the CSV tables in --out DIR): none may be an input.
  std::vector<std::string> more_outputs;
};

/// Refuses an empty -o (it wrote to stdout, as if none had been given).
inline const CLI::Validator kNonEmptyPath(
    [](const std::string& s) { return s.empty() ? std::string("an empty path: give a file name, or - for stdout") : std::string(); },
    "PATH");

/// For an output that is a directory (one log per rank: synth, import): refuses an empty
/// path and "-" (which made a directory named "-").
inline const CLI::Validator kDirectoryPath(
    [](const std::string& s) {
      if (s.empty()) return std::string("an empty path: give a directory");
      if (s == "-") return std::string("- (stdout): one log per rank is written; give a directory");
      return std::string();
    },
    "DIR");

/// A whole number from `lo` to `hi`, with a message that says which is wrong: not a
/// whole number ("abc", "1.5", "-"), or out of the range (CLI::Range printed its bounds
/// as 300-digit doubles, and an integer beyond 2^63 was clamped to 2^63 - 1 before any
/// check). `type` names it in --help (e.g. RANK).
CLI::Validator integer_from(std::int64_t lo, std::int64_t hi, std::string_view type);

/// Checks that a path given on the command line is not "" (a usage error).
const CLI::Validator& non_empty_path();

/// Adds --steps A:B to a subcommand; an empty window is a usage error.
void add_steps_option(CLI::App& cmd, std::string& steps, const std::string& help);

/// Adds LOG..., --steps, --hierarchy and --strict to a subcommand.
void add_input_options(CLI::App& cmd, InputOptions& opt);

struct LoadedInput {
  Dataset data;
  std::optional<Hierarchy> hierarchy;  ///< from --hierarchy, else from the log's parents
};

/// Reader options for the analysis commands: sample indices are validated but not kept
/// (no analysis reads them).
inline ReadOptions analysis_read_options() {
  ReadOptions ro;
  ro.keep_sample_indices = false;
  return ro;
}

/// Reads the logs (and the nesting). Returns the exit status to stop with, or nullopt
/// to go on and analyze `out`. Diagnostics are printed to stderr by finish(). Shows
/// progress on stderr when it is a terminal; Ctrl-C stops reading (kInterrupted).
/// `base` sets reader options the command needs beyond `opt` (e.g. traces_only, or
/// keeping sample indices for `import`).
std::optional<int> load_input(const InputOptions& opt, Diagnostics& diag, LoadedInput& out,
                              ReadOptions base = analysis_read_options());

/// Prints the diagnostics to stderr (at most 20 per kind, then a count) and a summary
/// line that counts them `where` (e.g. "in the input") and, unless `analyzed` is false
/// ("nothing was analyzed"), says that what had errors (records, fields) was left out; returns the
/// exit status they call for.
int finish(const Diagnostics& diag, std::string_view where = "in the input", bool analyzed = true);

/// Writes `text` to `path` ("-" or empty: stdout). A regular file is written through a
/// temporary file renamed into place, so no partial file is left; a symlink, FIFO or
/// device is written in place, through the path (the link or special file stays). Returns
/// false on failure (and prints why, unless the command was interrupted: the caller then
/// exits with kInterrupted). Messages name `shown` when given (the file the user asked for,
/// when `path` is a staging file of the caller's), else `path`.
bool write_output(const std::string& path, const std::string& text, const std::string& shown = {});

/// Hands each piece of an output, in order, to its argument, and returns false as soon as
/// that returns false (a write failed).
using OutputPieces = std::function<bool(const std::function<bool(std::string_view)>&)>;
/// write_output for an output made in pieces as it is written (a trace of gigabytes is
/// not held whole): the same places, temporary file and messages.
bool write_output_pieces(const std::string& path, const OutputPieces& pieces, const std::string& shown = {});

/// The exit status after write_output failed: kInterrupted (saying so) when an interrupt
/// stopped it, else kUsage (write_output has said why).
int output_failed();

}  // namespace stepprof::cli
