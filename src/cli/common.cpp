#include "common.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "interrupt.hpp"
#include "out_of_memory.hpp"
#include "stepprof/reader.hpp"

namespace stepprof::cli {

std::string printable_lines(std::string_view text) {
  std::string out;
  for (std::size_t from = 0; from <= text.size();) {
    const std::size_t nl = std::min(text.find('\n', from), text.size());
    out += printable(text.substr(from, nl - from));
    if (nl == text.size()) break;
    out += '\n';
    from = nl + 1;
  }
  return out;
}

const CLI::Validator& non_empty_path() {
  static const CLI::Validator v(
      [](const std::string& s) { return s.empty() ? std::string("an empty file name") : std::string(); }, "PATH");
  return v;
}

CLI::Validator integer_from(std::int64_t lo, std::int64_t hi, std::string_view type) {
  return CLI::Validator(
      [lo, hi](const std::string& v) {
        std::int64_t x = 0;
        // (A leading '+', which from_chars refuses and CLI11's numbers took.)
        const std::string_view t = v.starts_with('+') && v.size() > 1 && v[1] != '-' ? std::string_view(v).substr(1) : v;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
        if (t.empty() || end != t.data() + t.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
          return fmt::format("\"{}\" is not a whole number: use one from {} to {}", v, lo, hi);
        if (ec == std::errc::result_out_of_range || x < lo || x > hi)
          return fmt::format("{} is out of range: use a whole number from {} to {}", v, lo, hi);
        return std::string();
      },
      fmt::format("{} in [{} - {}]", type, lo, hi));
}

void add_steps_option(CLI::App& cmd, std::string& steps, const std::string& help) {
  cmd.add_option("--steps", steps, help)
      ->check(CLI::Validator(
          [](const std::string& s) { return s.empty() ? std::string("an empty step window: give A:B, A:, :B or A") : std::string(); },
          "A:B"));
}

void add_input_options(CLI::App& cmd, InputOptions& opt) {
  cmd.add_option("LOG", opt.logs,
                 "step logs: .jsonl files (optionally .gz), markdown tables, directories, or - for stdin; "
                 "also PyTorch profiler traces (docs/kineto.md)")
      ->required()
      ->check(non_empty_path());
  add_steps_option(cmd, opt.steps, "analyze only updates A..B (inclusive): A:B, A:, :B or A");
  cmd.add_option("--hierarchy", opt.hierarchy,
                 "region nesting file (docs/hierarchy-format.md); default: the parents recorded in the log");
  cmd.add_flag("--strict", opt.strict, "stop at the first problem in the input (exit status 1)");
  cmd.add_option("--run", opt.run,
                 "with the records of several runs (a restart with another world size): analyze the one most ranks "
                 "have, on a tie the newest (most-ranks), or the one whose records reach the highest step (latest)")
      ->check(CLI::IsMember({"most-ranks", "latest"}))
      ->capture_default_str();
}

namespace {

// A --hierarchy file replaces the nesting the log records (its `parents`, and the config's
// `region_roles` and `region_alternatives`): where the two differ, one note says so, with
// up to three regions as examples. A helper's file that moved a region under another
// parent, or left out the roles, changed the self times, the communication region and the
// code paths without a word.
// Whether some update has region `name` (a name the log's `parents` give is in the region
// names without being a region of any update).
class RegionsOfUpdates {
 public:
  explicit RegionsOfUpdates(const Dataset& data) : data_(data), occurs_(data.regions.size(), 0) {
    for (const auto& rank : data.ranks)
      for (const auto& u : rank.updates)
        for (const auto& r : u.regions) occurs_[r.region] = 1;
  }
  [[nodiscard]] bool has(std::string_view name) const {
    const auto id = data_.regions.find(name);
    return id && occurs_[*id];
  }

 private:
  const Dataset& data_;
  std::vector<char> occurs_;
};

void note_replaced_nesting(const Hierarchy& file, const Dataset& data, const RegionsOfUpdates& regions,
                           const std::string& path, Diagnostics& diag) {
  Diagnostics scratch;  // (the log's own nesting problems are said when no file is given)
  const auto own = hierarchy_from_log(data, scratch);
  if (!own) return;
  constexpr std::size_t kExamples = 3;
  std::size_t differ = 0;
  std::string examples;
  auto quoted = [](std::string_view s) { return s.empty() ? std::string("none") : fmt::format("\"{}\"", printable(s)); };
  // A region's nearest ancestor that some update has ("" for none): a wrapper neither
  // side's updates have (a file's `train_loop`, or one the log's `parents` name) is no
  // level of the nesting, and was a difference (a review).
  auto parent_in_log = [&](const Hierarchy& h, const HierarchyNode& n) {
    std::string_view up = n.parent;
    for (std::size_t steps = 0; !up.empty() && !regions.has(up) && steps < h.nodes().size(); ++steps) {
      const HierarchyNode* p = h.find(up);
      up = p ? std::string_view(p->parent) : std::string_view();
    }
    return up;
  };
  for (const HierarchyNode& n : own->nodes()) {
    if (!regions.has(n.name)) continue;  // (a parent the log names that no update has)
    const HierarchyNode* f = file.find(n.name);
    std::string why;
    const std::string_view fp = f ? parent_in_log(file, *f) : std::string_view(), np = parent_in_log(*own, n);
    if (!f) why = "not in the file";
    else if (fp != np)
      why = fmt::format("parent {} in the file, {} in the log", fp.empty() ? "none (top level)" : quoted(fp),
                        np.empty() ? "none (top level)" : quoted(np));
    else if (f->role != n.role)
      why = fmt::format("role {} in the file, {} in the log", f->role == RegionRole::kNone ? "none" : role_name(f->role),
                        n.role == RegionRole::kNone ? "none" : role_name(n.role));
    else if (f->alt_group != n.alt_group)
      why = fmt::format("alternative group {} in the file, {} in the log", quoted(f->alt_group), quoted(n.alt_group));
    if (why.empty()) continue;
    if (differ++ < kExamples) examples += fmt::format("{}\"{}\": {}", examples.empty() ? "" : "; ", printable(n.name), why);
  }
  if (differ == 0) return;
  diag.report({Severity::kNote, Problem::kHierarchy, path, 0, 0,
               fmt::format("this file's nesting is used in place of the one the log records (its `parents`, "
                           "`region_roles` and `region_alternatives`), which differs for {} region(s): {}{}; leave "
                           "--hierarchy out to use the log's",
                           differ, examples, differ > kExamples ? fmt::format(" and {} more", differ - kExamples) : "")});
}

}  // namespace

std::optional<int> load_input(const InputOptions& opt, Diagnostics& diag, LoadedInput& out, ReadOptions ro) {
  ro.run = opt.run == "latest" ? ReadOptions::Run::kLatest : ReadOptions::Run::kMostRanks;
  if (!opt.steps.empty()) {
    std::string err;
    ro.steps = parse_step_range(opt.steps, err);
    if (!ro.steps) {
      print_stderr("stepprof: --steps: {}\n", err);
      return kUsage;
    }
  }
  if (!opt.hierarchy.empty()) {
    Diagnostics hdiag;
    out.hierarchy = load_hierarchy(opt.hierarchy, hdiag);
    if (!out.hierarchy) {
      finish(hdiag, "in the --hierarchy file", false);
      return kUsage;
    }
    for (const auto& d : hdiag.kept()) diag.report(d);  // (its warnings, listed with the input's)
  }
  const auto files = expand_inputs(opt.logs, diag);
  // -o (or a CSV table in --out DIR) naming one of the logs would replace it with the output.
  auto is_input = [&](const std::string& written) -> std::optional<std::string> {
    std::error_code ec;
    for (const auto& f : files)
      if (f != "-" && std::filesystem::equivalent(f, written, ec) && !ec) return f;
    return std::nullopt;
  };
  if (!opt.output.empty() && opt.output != "-")
    if (auto f = is_input(opt.output)) {
      print_stderr("stepprof: -o {} is one of the input logs ({}); write the output elsewhere\n", opt.output, *f);
      return kUsage;
    }
  for (const auto& table : opt.more_outputs)
    if (auto f = is_input(table)) {
      print_stderr("stepprof: --out would write {}, which is one of the input logs ({}); write the output elsewhere\n",
                 table, *f);
      return kUsage;
    }
  if (files.empty()) {
    std::string given;
    for (const auto& l : opt.logs) given += (given.empty() ? "" : " ") + l;
    diag.report({Severity::kError, Problem::kEmptyInput, given, 0, 0, "nothing to analyze: no log files to read"});
    finish(diag, "in the input", false);
    return kNoData;
  }
  install_interrupt_handler();
  ro.cancel = interrupt_flag();
  const bool show_progress = ::isatty(STDERR_FILENO) == 1;
  if (show_progress)
    ro.progress = [](std::uint64_t done, std::uint64_t total) {
      // GB from 1 GB of input up, MB below (0.04 GB read "0.00 of 0.04 GB").
      const bool gb = std::max(done, total) >= 1'000'000'000;
      const double unit = gb ? 1e9 : 1e6;
      const char* name = gb ? "GB" : "MB";
      if (total > 0)
        print_stderr("\rstepprof: reading {:.2f} of {:.2f} {} ({:.0f} %)\x1b[K", static_cast<double>(done) / unit,
                   static_cast<double>(total) / unit, name, 100.0 * static_cast<double>(done) / static_cast<double>(total));
      else
        print_stderr("\rstepprof: reading {:.2f} {}\x1b[K", static_cast<double>(done) / unit, name);
    };
  out.data = read_logs(files, ro, diag);
  if (show_progress) print_stderr("\r\x1b[K");  // clear the progress line
  if (interrupted()) {
    print_stderr("stepprof: interrupted\n");
    return kInterrupted;
  }
  auto strict_stop = [&] {
    finish(diag);
    print_stderr("stepprof: stopped at the first problem (--strict)\n");
    return kInputErrors;
  };
  if (diag.should_stop()) return strict_stop();
  if (out.data.update_count() == 0) {
    finish(diag, "in the input", false);
    return kNoData;
  }
  if (!out.hierarchy) {
    out.hierarchy = hierarchy_from_log(out.data, diag);
  } else if (std::none_of(out.hierarchy->nodes().begin(), out.hierarchy->nodes().end(),
                          [&](const HierarchyNode& n) { return out.data.regions.find(n.name).has_value(); })) {
    // A nesting file of another job: every analysis would treat the log as un-nested.
    diag.report({Severity::kWarning, Problem::kHierarchy, opt.hierarchy, 0, 0,
                 "no region of this nesting file occurs in the logs: is it the nesting of another job?"});
  } else {
    const RegionsOfUpdates regions(out.data);
    note_replaced_nesting(*out.hierarchy, out.data, regions, opt.hierarchy, diag);
    // A role other than background on a region no update has applies to no region (the
    // analyses look the role's region up by name; only background is inherited): a
    // `COMM role=communication` wrapper left the job without a communication region.
    for (const auto& n : out.hierarchy->nodes())
      if (n.role != RegionRole::kNone && n.role != RegionRole::kBackground && !regions.has(n.name))
        diag.report({Severity::kWarning, Problem::kHierarchy, opt.hierarchy, n.line, 0,
                     fmt::format("\"{}\" has role={} but no update of the logs has this region, so the role applies "
                                 "to none (only role=background passes to the regions below): give it to the region "
                                 "that does the work",
                                 printable(n.name), role_name(n.role))});
    // A counter named in the file that no update has (a typo): the code-path costs would
    // quietly fall back to another unit of work. (Only for a region that ran: a path that
    // never ran has no work to count.)
    for (const auto& n : out.hierarchy->nodes()) {
      if (!out.data.regions.find(n.name)) continue;
      for (const auto& [key, counter] : {std::pair<std::string_view, const std::string&>{"samples", n.samples_counter},
                                         {"frames", n.frames_counter},
                                         {"microbatches", n.microbatches_counter}})
        if (!counter.empty() && !out.data.counters.find(counter))
          diag.report({Severity::kWarning, Problem::kHierarchy, opt.hierarchy, n.line, 0,
                       fmt::format("\"{}\": {}={} names a counter that no update of the logs has, though the region "
                                   "ran; its cost per {} is unknown (a misspelt counter name?)",
                                   n.name, key, counter, key == "microbatches" ? "micro-batch" : key.substr(0, key.size() - 1))});
    }
  }
  if (out.hierarchy) check_optimizer_every_update(*out.hierarchy, out.data, diag);
  if (diag.should_stop()) return strict_stop();  // (a warning about the nesting, e.g. circular parents)
  return std::nullopt;
}

int finish(const Diagnostics& diag, std::string_view where, bool analyzed) {
  constexpr std::size_t kPerKind = 20;
  std::array<std::size_t, static_cast<int>(Problem::kCount_)> shown{};
  for (const auto& d : diag.kept()) {
    auto& n = shown[static_cast<int>(d.problem)];
    if (n++ < kPerKind) print_stderr("{}\n", format_diagnostic(d));
  }
  for (int p = 0; p < static_cast<int>(Problem::kCount_); ++p) {
    const auto total = diag.count(static_cast<Problem>(p));
    if (total > kPerKind)
      print_stderr("stepprof: ... {} more {} problem(s) not shown (`stepprof report --format json` lists up to {} of each kind)\n",
                 total - kPerKind, code_name(static_cast<Problem>(p)), Diagnostics::kDefaultMaxKept);
  }
  const auto errors = diag.count(Severity::kError), warnings = diag.count(Severity::kWarning);
  if (errors || warnings)
    print_stderr("stepprof: {} error(s), {} warning(s) {}{}\n", errors, warnings, where,
               !analyzed                         ? "; nothing was analyzed"
               : errors && !diag.strict()        ? "; what had errors was left out (see each message)"
                                                 : "");
  return errors ? kInputErrors : kOk;
}

namespace {

// Writes the pieces to the stream; false with errno set on failure, or when the command
// was interrupted (an output made as it is written, such as the page or the trace, stops
// at its next piece instead of being made to its end and then removed).
bool write_pieces(std::FILE* f, const OutputPieces& pieces) {
  return pieces([&](std::string_view piece) {
           return !interrupted() && std::fwrite(piece.data(), 1, piece.size(), f) == piece.size();
         }) &&
         std::fflush(f) == 0 && !std::ferror(f);
}

// Writes the pieces to the stream and closes it; false with errno set on failure.
bool write_all(std::FILE* f, const OutputPieces& pieces) {
  if (!f) return false;
  const bool ok = write_pieces(f, pieces);
  const int saved = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok) errno = saved;
  return ok && closed;
}

}  // namespace

int output_failed() {
  if (!interrupted()) return kUsage;
  print_stderr("stepprof: interrupted\n");
  return kInterrupted;
}

bool write_output(const std::string& path, const std::string& text, const std::string& shown) {
  return write_output_pieces(path, [&](const std::function<bool(std::string_view)>& write) { return write(text); },
                             shown);
}

bool write_output_pieces(const std::string& path, const OutputPieces& pieces, const std::string& shown) {
  namespace fs = std::filesystem;
  const std::string& name = shown.empty() ? path : shown;  // (in messages)
  auto fail = [&](const std::string& what) {
    if (!interrupted())
      print_stderr("stepprof: cannot write {}: {}\n", what, errno ? std::strerror(errno) : "write error");
    return false;
  };
  errno = 0;
  // stdout, a FIFO or a device is written in place and leaves nothing to remove: an
  // interrupt (still armed, after the analyses) ends the process at once, also while a
  // write blocks on a pipe nobody reads (the write is retried after a signal that
  // interrupts it halfway, so a flag would not be seen).
  if (path.empty() || path == "-") {
    return write_pieces(stdout, pieces) || fail("to stdout");
  }
  // A symlink, a FIFO or a device (/dev/stdout, /dev/null) is written in place, through
  // the path, so the link or the special file stays what it is.
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    return write_all(std::fopen(path.c_str(), "wb"), pieces) || fail(name);
  // An existing file is replaced only where the shell's `>` could write it, and keeps
  // its permissions (the rename below would otherwise replace a read-only file).
  const bool exists = !ec && fs::exists(st);
  if (exists && ::access(path.c_str(), W_OK) != 0) return fail(name);
  disarm_exit_on_interrupt();  // (from here the temporary file is removed on an interrupt)
  // A regular file is written next to the target, then renamed over it: the file is
  // complete or absent, also when the command is interrupted.
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    // Say which step failed: "No such file or directory" alone reads as if the output
    // had to exist already (for `-o /proc/version`, or a directory not made yet).
    const int saved = errno;
    const fs::path dir = fs::path(path).parent_path();
    if (!dir.empty() && !fs::is_directory(dir, ec))
      print_stderr("stepprof: cannot write {}: the directory {} does not exist\n", name, dir.string());
    else if (!shown.empty())
      print_stderr("stepprof: cannot write {}: cannot create a file in {}: {}\n", name,
                 dir.empty() ? std::string(".") : dir.string(), std::strerror(saved));
    else
      print_stderr("stepprof: cannot write {}: cannot create the temporary file {} beside it: {}\n", path, tmp,
                 std::strerror(saved));
    return false;
  }
  if (exists) fs::permissions(tmp, st.permissions(), ec);  // (best effort: the text is what matters)
  bool written = false;
  set_output_in_progress(tmp.c_str());  // (removed if memory runs out where it cannot be thrown)
  try {
    written = write_all(f, pieces);
  } catch (...) {  // (an output made as it is written can fail halfway: no file is left)
    set_output_in_progress(nullptr);
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  set_output_in_progress(nullptr);
  if (!written || interrupted() || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(tmp.c_str());
    errno = saved;
    return fail(name);
  }
  return true;
}

}  // namespace stepprof::cli
