// `stepprof synth`: writes realistic multi-rank step logs with known injections.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include <sys/resource.h>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "out_of_memory.hpp"
#include "../util/made_directories.hpp"
#include "interrupt.hpp"
#include "stepprof/synth.hpp"

namespace stepprof::cli {
namespace {

struct SynthOptions {
  synth::Options model;
  std::string dir;
  std::string manifest;
  std::vector<std::string> stragglers, fallbacks, spikes;
  bool gzip = false;
  bool no_parents = false;
  unsigned threads = 0;
};

// "a:b:c" split at ':' into min_fields..max_fields fields, the first `ints` of them whole
// numbers (read as integers: a step of 2^53 + 3 read through a double was 2^53 + 4) and
// the rest numbers; false otherwise.
bool split(const std::string& text, std::size_t min_fields, std::size_t max_fields, std::size_t ints,
           std::vector<std::int64_t>& whole, std::vector<double>& other) {
  whole.clear();
  other.clear();
  std::size_t pos = 0, n = 0;
  while (pos <= text.size()) {
    const auto colon = std::min(text.find(':', pos), text.size());
    const char* b = text.data() + pos;
    const char* e = text.data() + colon;
    if (b == e) return false;
    if (n < ints) {
      std::int64_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return false;
      whole.push_back(v);
    } else {
      double v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec != std::errc() || p != e) return false;
      other.push_back(v);
    }
    ++n;
    pos = colon + 1;
  }
  return n >= min_fields && n <= max_fields;
}

std::optional<std::string> parse_specs(SynthOptions& o) {
  std::vector<std::int64_t> f;
  std::vector<double> rest;
  for (const auto& s : o.stragglers) {
    if (!split(s, 3, 4, 3, f, rest))
      return fmt::format("--straggler {}: expected RANK:FIRST:LAST[:FACTOR] (e.g. 5:100:120:1.3)", s);
    synth::Straggler x;
    x.rank = f[0];
    x.first_step = f[1];
    x.last_step = f[2];
    if (!rest.empty()) x.factor = rest[0];
    o.model.stragglers.push_back(x);
  }
  for (const auto& s : o.fallbacks) {
    if (!split(s, 2, 3, 3, f, rest))
      return fmt::format("--fallback {}: expected RANK:STEP[:MICROBATCHES] (e.g. 3:57 or 3:57:2)", s);
    synth::Fallback x;
    x.rank = f[0];
    x.step = f[1];
    if (f.size() == 3) x.microbatches = f[2];
    o.model.fallbacks.push_back(x);
  }
  for (const auto& s : o.spikes) {
    if (!split(s, 2, 3, 3, f, rest))
      return fmt::format("--padding-spike {}: expected RANK:STEP[:LENGTH] (e.g. 7:88 or 7:88:16000)", s);
    synth::PaddingSpike x;
    x.rank = f[0];
    x.step = f[1];
    if (f.size() == 3 && f[2] < 1)  // (0 would mean the default length in synth::PaddingSpike)
      return fmt::format("--padding-spike {}: LENGTH must be a positive number of tokens", s);
    if (f.size() == 3) x.length = f[2];
    o.model.padding_spikes.push_back(x);
  }
  o.model.parents = !o.no_parents;
  if (auto err = synth::validate(o.model); !err.empty()) return err;
  return std::nullopt;
}

// The memory this process can still take [bytes]: the least of /proc/meminfo's
// MemAvailable (what the kernel can give without swapping), the room left under a
// cgroup v2 limit (memory.max less memory.current: a container's, where MemAvailable is
// the host's) and the address-space limit (ulimit -v); nullopt where none can be read.
std::optional<std::uint64_t> available_memory_bytes() {
  std::optional<std::uint64_t> least;
  auto take = [&](std::uint64_t v) { least = std::min(least.value_or(v), v); };
  {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    std::uint64_t kb = 0;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        take(kb * 1024);
        break;
      }
    }
  }
  std::uint64_t max = 0, current = 0;
  if ((std::ifstream("/sys/fs/cgroup/memory.max") >> max) && (std::ifstream("/sys/fs/cgroup/memory.current") >> current))
    take(max > current ? max - current : 0);  // ("max", no limit, does not read as a number)
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) take(as.rlim_cur);
  return least;
}

// The paths of the manifest and of the logs' directory, made absolute and with the links
// of their existing part resolved (neither need exist yet); empty on an error.
std::pair<std::filesystem::path, std::filesystem::path> manifest_and_dir(const SynthOptions& opt) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path m = fs::absolute(opt.manifest, ec);
  if (ec) return {};
  // A link whose target does not exist yet (`ln -s logs/rank0.jsonl m.json` before the
  // logs are written): weakly_canonical stops at it, so it is followed here (up to 40 links,
  // as the kernel does).
  for (int links = 0; links < 40 && fs::is_symlink(m, ec); ++links) {
    const fs::path target = fs::read_symlink(m, ec);
    if (ec) return {};
    m = target.is_absolute() ? target : m.parent_path() / target;
  }
  m = fs::weakly_canonical(m, ec);
  if (ec) return {};
  fs::path d = fs::weakly_canonical(fs::absolute(opt.dir, ec), ec);
  if (ec) return {};
  return {m, d};
}

// True when --manifest is the logs' directory itself.
bool names_dir(const SynthOptions& opt) {
  const auto [m, d] = manifest_and_dir(opt);
  return !m.empty() && m == d;
}

// True when --manifest is the logs' directory or one of the logs this run writes: the
// manifest, written last, would replace that log (which `report` then lists as
// stepprof's own output, not a log: a rank silently gone).
bool manifest_names_a_log(const SynthOptions& opt) {
  const auto [m, d] = manifest_and_dir(opt);
  if (m.empty()) return false;
  if (m == d) return true;
  if (m.parent_path() != d) return false;
  const std::string name = m.filename().string();
  for (std::int64_t r = 0; r < opt.model.ranks; ++r)
    if (synth::log_file_name(r, opt.model.ranks, opt.gzip) == name) return true;
  return false;
}

int run_synth(SynthOptions& opt) {
  if (auto err = parse_specs(opt)) {
    print_stderr("stepprof synth: {}\n", *err);
    return kUsage;
  }
  detail::MadeDirectories manifest_dir;  // the manifest's, removed again (where empty) when no logs are written
  if (!opt.manifest.empty() && opt.manifest != "-") {
    // Checked before the logs are written, which may take long: the manifest comes last.
    // Its directory is made as the logs' is.
    namespace fs = std::filesystem;
    // (Before any directory is made: a refused run leaves none behind.)
    if (manifest_names_a_log(opt)) {
      print_stderr("stepprof synth: --manifest {}: is {}; give the manifest another name\n", opt.manifest,
                   names_dir(opt) ? "the logs' directory (-o)" : "the path of one of the logs this run writes, "
                                                                 "which it would replace");
      return kUsage;
    }
    std::error_code ec;
    const fs::path m(opt.manifest);
    if (m.has_parent_path()) manifest_dir.make(m.parent_path(), ec);
    // (A manifest inside the logs' directory is fine: `stepprof report DIR` sees from
    // its schema that it is not a log, and lists it as a note.)
    std::error_code dir_ec;
    if (ec || fs::is_directory(m, dir_ec)) {
      print_stderr("stepprof synth: --manifest {}: {}\n", opt.manifest,
                 ec ? "cannot make its directory: " + ec.message() : std::string("is a directory"));
      return kUsage;
    }
  }
  // The job's timing is held in memory first (24 bytes per update): a size that is not
  // there is refused now (exit status 4), not found by the kernel's out-of-memory killer minutes later.
  const std::uint64_t need = synth::kJobBytesPerUpdate * static_cast<std::uint64_t>(opt.model.updates);
  // (Three quarters of what is available at most: the rest of the machine, the page cache
  // of the logs being written, and the kernel's own accounting need room too.)
  if (const auto available = available_memory_bytes(); available && need > *available / 4 * 3) {
    print_stderr(
               "stepprof synth: out of memory: {} updates need {:.1f} GB for the job's timing ({} bytes per update), "
               "and {:.1f} GB is available (at most three quarters of it is taken); ask for fewer --updates\n",
               opt.model.updates, static_cast<double>(need) / 1e9, synth::kJobBytesPerUpdate,
               static_cast<double>(*available) / 1e9);
    return kOutOfMemory;
  }
  install_interrupt_handler();
  // The logs' directory and its missing parents, made here so that a run that fails leaves
  // none of them behind (a failure to make them is generate()'s to report).
  detail::MadeDirectories logs_dir;
  std::error_code mk_ec;
  logs_dir.make(opt.dir, mk_ec);
  synth::Manifest man;
  try {
    const ThrowOnOutOfMemory cleaned_up_here;  // (partial files are removed as it unwinds)
    man = synth::generate(opt.model, opt.dir, opt.gzip, opt.threads, [] { return interrupted(); });
  } catch (const std::bad_alloc&) {
    logs_dir.remove_empty();
    manifest_dir.remove_empty();
    print_stderr("stepprof synth: out of memory: {} updates hold {:.1f} GB for the job's timing ({} bytes per "
               "update) besides each file's buffers; ask for fewer --updates, or allow more memory\n",
               opt.model.updates, static_cast<double>(need) / 1e9, synth::kJobBytesPerUpdate);
    return kOutOfMemory;
  } catch (const std::exception& e) {
    logs_dir.remove_empty();
    manifest_dir.remove_empty();
    if (interrupted()) {
      print_stderr("stepprof synth: interrupted; partial files removed\n");
      return kInterrupted;
    }
    print_stderr("stepprof synth: {}\n", e.what());
    return kUsage;
  }
  const double mb = static_cast<double>(man.bytes) / 1e6;
  print_stderr("stepprof synth: wrote {} file(s), {} updates each, {}, to {}\n", man.files.size(),
             opt.model.updates,
             mb >= 1000 ? fmt::format("{:.2f} GB", mb / 1000)
                        : (mb >= 1 ? fmt::format("{:.1f} MB", mb) : fmt::format("{:.0f} KB", mb * 1000)),
             opt.dir);
  const std::string where = synth::describe(man);
  print_stderr("{}", Lines{where.empty() ? std::string_view("nothing injected\n") : std::string_view(where)});
  // Once more now that the logs exist, for a link (written through, not replaced; a hard
  // link's file is replaced by the new one, its log untouched): one the check before could
  // not follow (a link to a link that did not exist then).
  std::error_code link_ec;
  if (!opt.manifest.empty() && opt.manifest != "-" && std::filesystem::is_symlink(opt.manifest, link_ec))
    for (const auto& f : man.files) {
      std::error_code same_ec;
      if (std::filesystem::equivalent(opt.manifest, f, same_ec) && !same_ec) {
        print_stderr("stepprof synth: --manifest {}: is the log {} (a link to it?); the manifest was not written, "
                     "the logs were\n",
                     opt.manifest, f);
        return kUsage;
      }
    }
  if (!opt.manifest.empty() && !write_output(opt.manifest, synth::manifest_to_json(man))) {
    // Logs without the manifest that says what was injected where are partial output:
    // removed, as every command removes its own (README, exit status 2).
    std::size_t kept = 0;
    std::string why;
    for (const auto& f : man.files) {
      std::error_code rm_ec;
      if (!std::filesystem::remove(f, rm_ec) && rm_ec && !kept++) why = fmt::format("{}: {}", f, rm_ec.message());
    }
    logs_dir.remove_empty();
    manifest_dir.remove_empty();
    if (kept == 0)
      print_stderr("stepprof synth: the manifest was not written, so the {} log(s) written were removed\n",
                   man.files.size());
    else
      print_stderr("stepprof synth: the manifest was not written; {} of the {} log(s) written could not be removed "
                   "(first: {})\n",
                   kept, man.files.size(), why);
    return output_failed();
  }
  return kOk;
}

}  // namespace

void add_synth_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "write realistic multi-rank step logs with stragglers, fallbacks and padding spikes at known places");
  auto& m = opt->model;
  cmd->add_option("-o,--output", opt->dir, "directory for the logs (one rank<N>.jsonl per rank)")->required()->check(kDirectoryPath);
  cmd->add_option("--ranks", m.ranks, "world size: number of ranks (files)")->capture_default_str();
  cmd->add_option("--updates", m.updates, "optimizer updates per rank")->capture_default_str();
  cmd->add_option("--first-step", m.first_step, "step number of the first update")->capture_default_str();
  cmd->add_option("--seed", m.seed, "random seed; the same options and seed give the same files")
      ->capture_default_str()
      ->check(CLI::Validator(  // (CLI11 reads -1 as 2^64 - 1)
          [](const std::string& s) { return s.starts_with('-') ? std::string("must not be negative") : std::string(); },
          "SEED"));
  cmd->add_option("--micro-batch", m.micro_batch, "samples per micro-batch")->capture_default_str();
  cmd->add_option("--accumulation", m.accumulation, "micro-batches per update")->capture_default_str();
  cmd->add_option("--fallback-rate", m.fallback_rate,
                  "probability that a micro-batch mixes frame counts on its own (background fallbacks)")
      ->capture_default_str();
  cmd->add_option("--straggler", opt->stragglers,
                  "RANK:FIRST:LAST[:FACTOR]: the rank's compute is FACTOR (default 1.3) times slower in steps "
                  "FIRST..LAST (repeatable)");
  cmd->add_option("--fallback", opt->fallbacks,
                  "RANK:STEP[:MICROBATCHES]: that many micro-batches (default 1) mix frame counts and take "
                  "vggt_single (repeatable)");
  cmd->add_option("--padding-spike", opt->spikes,
                  "RANK:STEP[:LENGTH]: one sample of LENGTH tokens (default 13000) pads its micro-batch (repeatable)");
  cmd->add_option("--random-stragglers", m.random_stragglers, "add N stragglers at random ranks and windows");
  cmd->add_option("--random-fallbacks", m.random_fallbacks, "add N fallbacks at random ranks and updates");
  cmd->add_option("--random-padding-spikes", m.random_padding_spikes, "add N padding spikes at random places");
  cmd->add_option("--manifest", opt->manifest,
                  "also write what was injected where as JSON to FILE (its directory is made, as the logs' is)")
      ->check(kNonEmptyPath);
  cmd->add_flag("--gzip", opt->gzip, "write rank<N>.jsonl.gz");
  cmd->add_flag("--no-parents", opt->no_parents,
                "leave out `parents` (like the real log; the nesting must then come from --hierarchy)");
  cmd->add_option("-j,--threads", opt->threads, "files written at once (default: one per hardware thread)");
  cmd->callback([opt, set_action] { set_action([opt] { return run_synth(*opt); }); });
}

}  // namespace stepprof::cli
