// `generate`: draws the random injections, finds when the slowest rank reaches each
// update's all-reduce, then writes one file per rank (several at once), and describes
// what it injected.
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "../util/made_directories.hpp"
#include "../util/parallel.hpp"
#include "../util/rank_numbers.hpp"
#include "model.hpp"
#include "stepprof/analysis/padding.hpp"
#include "stepprof/analysis/stats.hpp"
#include "stepprof/record_writer.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/synth.hpp"

namespace stepprof::synth {
namespace {

namespace fs = std::filesystem;
using detail::hash;
using detail::Model;
using detail::uniform;

enum InjectStream : std::uint64_t { iStraggler = 100, iFallback, iSpike };

std::int64_t last_step(const Options& o) { return o.first_step + o.updates - 1; }

// A random straggler's window [steps]: a tenth of the updates, 1 to 50.
std::int64_t random_straggler_window(const Options& o) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(50, o.updates / 10));
}

// Adds the random injections to the explicit ones: distinct (rank, step) pairs per kind,
// stragglers on distinct ranks while a rank has none, then in windows that overlap none
// of the rank's own.
Options with_random_injections(Options o) {
  const std::uint64_t seed = o.seed;
  auto pick = [&](std::uint64_t stream, std::int64_t i, std::uint64_t what) {
    return hash(seed, stream, static_cast<std::uint64_t>(i), what);
  };
  std::set<std::pair<std::int64_t, std::int64_t>> used;
  for (const auto& f : o.fallbacks) used.emplace(f.rank, f.step);
  for (std::int64_t i = 0, tries = 0; i < o.random_fallbacks && tries < 1000 * (o.random_fallbacks + 1); ++tries) {
    Fallback f;
    f.rank = static_cast<std::int64_t>(pick(iFallback, tries, 0) % static_cast<std::uint64_t>(o.ranks));
    f.step = o.first_step + static_cast<std::int64_t>(pick(iFallback, tries, 1) % static_cast<std::uint64_t>(o.updates));
    f.microbatches = 1 + static_cast<std::int64_t>(pick(iFallback, tries, 2) % static_cast<std::uint64_t>(o.accumulation));
    if (!used.emplace(f.rank, f.step).second) continue;
    o.fallbacks.push_back(f);
    ++i;
  }
  used.clear();
  for (const auto& s : o.padding_spikes) used.emplace(s.rank, s.step);
  for (std::int64_t i = 0, tries = 0; i < o.random_padding_spikes && tries < 1000 * (o.random_padding_spikes + 1);
       ++tries) {
    PaddingSpike s;
    s.rank = static_cast<std::int64_t>(pick(iSpike, tries, 0) % static_cast<std::uint64_t>(o.ranks));
    s.step = o.first_step + static_cast<std::int64_t>(pick(iSpike, tries, 1) % static_cast<std::uint64_t>(o.updates));
    s.length = Model::spike_length({});
    if (!used.emplace(s.rank, s.step).second) continue;
    o.padding_spikes.push_back(s);
    ++i;
  }
  std::set<std::int64_t> ranks;
  for (const auto& s : o.stragglers) ranks.insert(s.rank);
  const std::int64_t window = random_straggler_window(o);
  for (std::int64_t i = 0, tries = 0; i < o.random_stragglers && tries < 1000 * (o.random_stragglers + 1); ++tries) {
    Straggler s;
    s.rank = static_cast<std::int64_t>(pick(iStraggler, tries, 0) % static_cast<std::uint64_t>(o.ranks));
    if (ranks.count(s.rank) && static_cast<std::int64_t>(ranks.size()) < o.ranks) continue;
    s.first_step = o.first_step + static_cast<std::int64_t>(pick(iStraggler, tries, 1) %
                                                            static_cast<std::uint64_t>(o.updates - window + 1));
    s.last_step = s.first_step + window - 1;
    s.factor = std::round((1.25 + 0.25 * uniform(seed, iStraggler, static_cast<std::uint64_t>(tries), 3)) * 100) / 100;
    bool overlaps = false;
    for (const auto& x : o.stragglers)
      overlaps = overlaps || (x.rank == s.rank && x.first_step <= s.last_step && s.first_step <= x.last_step);
    if (overlaps) continue;
    ranks.insert(s.rank);
    o.stragglers.push_back(s);
    ++i;
  }
  return o;
}

// Buffered output to a plain or gzip file.
class Sink {
 public:
  Sink(const std::string& path, bool gzip) : path_(path) {
    if (gzip) gz_ = gzopen(path.c_str(), "wb6");
    else file_ = std::fopen(path.c_str(), "wb");
    if (!gz_ && !file_) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    buf_.reserve(kFlush + 65536);
  }
  ~Sink() {
    if (file_) std::fclose(file_);
    if (gz_) gzclose(gz_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void line(const std::string& text) {
    buf_ += text;
    buf_ += '\n';
    bytes_ += text.size() + 1;
    if (buf_.size() >= kFlush) flush();
  }
  void close() {
    flush();
    std::string why;  // (said with the path: a gzip file's full disk gave no reason)
    if (file_ && std::fclose(file_) != 0) why = std::strerror(errno);
    if (gz_)
      if (const int rc = gzclose(gz_); rc != Z_OK) why = rc == Z_ERRNO ? std::strerror(errno) : zError(rc);
    file_ = nullptr;
    gz_ = nullptr;
    if (!why.empty()) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, why));
  }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

 private:
  void flush() {
    if (buf_.empty()) return;
    const bool ok = file_ ? std::fwrite(buf_.data(), 1, buf_.size(), file_) == buf_.size()
                          : gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) == static_cast<int>(buf_.size());
    if (!ok) {
      int zerr = Z_OK;
      const char* zmsg = gz_ ? gzerror(gz_, &zerr) : nullptr;
      throw std::runtime_error(
          fmt::format("cannot write {}: {}", path_, gz_ && zerr != Z_ERRNO && zmsg ? zmsg : std::strerror(errno)));
    }
    buf_.clear();
  }
  static constexpr std::size_t kFlush = 1 << 20;
  std::string path_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
  std::string buf_;
  std::uint64_t bytes_ = 0;
};


// Files in `dir` or below that `stepprof report DIR` would read (.jsonl, .ndjson, .json,
// .log, each also .gz) and a run writing `files` would not overwrite, relative to `dir`
// and sorted.
}  // namespace

std::string log_file_name(std::int64_t rank, std::int64_t ranks, bool gzip) {
  const int width = static_cast<int>(std::to_string(std::max<std::int64_t>(ranks - 1, 0)).size());
  return fmt::format("rank{:0{}}.jsonl{}", rank, width, gzip ? ".gz" : "");
}

std::string validate(const Options& o) {
  if (o.ranks < 1 || o.ranks > 1'000'000) return "--ranks must be between 1 and 1000000";
  // (Per update, the job keeps kJobBytesPerUpdate bytes of the ranks' shared timing: 10^9
  // updates is 24 GB; the CLI checks the memory available first.)
  if (o.updates < 1 || o.updates > 1'000'000'000) return "--updates must be between 1 and 1000000000";
  if (o.micro_batch < 1 || o.micro_batch > 4096) return "--micro-batch must be between 1 and 4096";
  if (o.accumulation < 1 || o.accumulation > 4096) return "--accumulation must be between 1 and 4096";
  if (o.first_step < 0 || o.first_step > std::numeric_limits<std::int64_t>::max() / 2 - o.updates)
    return fmt::format("--first-step must be between 0 and {} (for {} updates)",
                       std::numeric_limits<std::int64_t>::max() / 2 - o.updates, o.updates);
  if (o.seed > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return "--seed must be below 2^63 (it is written as a JSON integer)";
  if (!(o.fallback_rate >= 0 && o.fallback_rate <= 1)) return "--fallback-rate must be in [0, 1]";
  if (o.random_stragglers < 0 || o.random_fallbacks < 0 || o.random_padding_spikes < 0)
    return "random injection counts must be >= 0";
  if (o.random_fallbacks + static_cast<std::int64_t>(o.fallbacks.size()) > o.ranks * o.updates ||
      o.random_padding_spikes + static_cast<std::int64_t>(o.padding_spikes.size()) > o.ranks * o.updates)
    return "more injections than updates";
  // (A bound for the draws; which fit is the draw's to say: a rank takes a second
  // straggler in a window that overlaps none of its own.)
  if (const std::int64_t window = random_straggler_window(o); o.random_stragglers > o.ranks * (o.updates / window))
    return fmt::format("more random stragglers than windows of {} steps fit on {} ranks x {} updates", window, o.ranks,
                       o.updates);
  // A micro-batch of one sample neither mixes frame counts (a fallback) nor pads (its
  // only sample is the longest): what was asked for would be in the manifest, not the logs.
  if (o.micro_batch < 2) {
    if (!o.fallbacks.empty() || o.random_fallbacks > 0 || o.fallback_rate > 0)
      return "fallbacks (--fallback, --random-fallbacks, --fallback-rate) need --micro-batch >= 2 (a micro-batch of "
             "one sample cannot mix frame counts)";
    if (!o.padding_spikes.empty() || o.random_padding_spikes > 0)
      return "padding spikes (--padding-spike, --random-padding-spikes) need --micro-batch >= 2 (a micro-batch of one "
             "sample is padded to its own length: it has no padding)";
  }
  const std::int64_t last = last_step(o);
  auto where = [&](std::int64_t rank, std::int64_t step) -> std::string {
    if (rank < 0 || rank >= o.ranks) return fmt::format("rank {} is not in 0..{}", rank, o.ranks - 1);
    if (step < o.first_step || step > last) return fmt::format("step {} is not in {}..{}", step, o.first_step, last);
    return "";
  };
  for (const auto& s : o.stragglers) {
    if (auto e = where(s.rank, s.first_step); !e.empty()) return "--straggler: " + e;
    if (auto e = where(s.rank, s.last_step); !e.empty()) return "--straggler: " + e;
    if (s.last_step < s.first_step) return "--straggler: the window's last step is before its first";
    if (!(s.factor > 1 && s.factor <= 100)) return "--straggler: the factor must be > 1 and <= 100";
    for (const auto& x : o.stragglers)
      if (&x != &s && x.rank == s.rank && x.first_step <= s.last_step && s.first_step <= x.last_step)
        return fmt::format("--straggler: two windows overlap on rank {}", s.rank);
  }
  for (const auto& f : o.fallbacks) {
    if (auto e = where(f.rank, f.step); !e.empty()) return "--fallback: " + e;
    if (f.microbatches < 1 || f.microbatches > o.accumulation)
      return fmt::format("--fallback: micro-batches must be in 1..{} (the accumulation)", o.accumulation);
    for (const auto& x : o.fallbacks)
      if (&x != &f && x.rank == f.rank && x.step == f.step)
        return fmt::format("--fallback: rank {} step {} is given twice (give it once, with its micro-batches: RANK:STEP:MICROBATCHES)",
                           f.rank, f.step);
  }
  for (const auto& s : o.padding_spikes) {
    if (auto e = where(s.rank, s.step); !e.empty()) return "--padding-spike: " + e;
    if (s.length != 0 && (s.length <= detail::kMaxLength || s.length > 10'000'000))
      return fmt::format("--padding-spike: the length must be above {} (the longest normal sample) and at most 1e7",
                         detail::kMaxLength);
    for (const auto& x : o.padding_spikes)
      if (&x != &s && x.rank == s.rank && x.step == s.step)
        return fmt::format("--padding-spike: rank {} step {} is given twice", s.rank, s.step);
  }
  return "";
}

namespace {

// Room for the logs: a size the disk does not have is refused before anything is written
// (or computed: the job's timing of 10^9 updates takes minutes), not found after minutes
// of writing. Estimated from the first update's records of up to 4 ranks (the records of
// one job differ little in size); gzip is taken as 10x smaller (these logs compress
// 5-8x), so that only what surely does not fit is refused. The logs this run replaces
// free their room. Throws std::runtime_error naming the sizes.
void check_room(const Options& o, const Model& model, const std::string& dir, bool gzip) {
  std::uint64_t sample = 0;
  const std::int64_t sampled = std::min<std::int64_t>(o.ranks, 4);
  for (std::int64_t r = 0; r < sampled; ++r) {
    const auto plan = model.plan(r, o.first_step);
    sample += update_to_json(model.record(plan, r, o.first_step, plan.arrival_ms), model.regions(), model.counters())
                  .size() +
              1;
  }
  const double need = static_cast<double>(sample) / static_cast<double>(sampled) * static_cast<double>(o.ranks) *
                      static_cast<double>(o.updates) / (gzip ? 10.0 : 1.0);
  // The nearest directory that exists (the logs' is made later), of the absolute path: a
  // relative `-o big` has no parent to go up to, and the check was skipped.
  std::error_code ec;
  fs::path at = fs::absolute(dir, ec);
  if (ec) return;
  while (!fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  const auto space = fs::space(at, ec);
  if (ec) return;  // (unknown: writing will say)
  std::uint64_t replaced = 0;
  for (std::int64_t r = 0; r < o.ranks; ++r) {
    std::error_code size_ec;
    const auto n = fs::file_size(fs::path(dir) / log_file_name(r, o.ranks, gzip), size_ec);
    if (!size_ec) replaced += n;
  }
  const double free = static_cast<double>(space.available) + static_cast<double>(replaced);
  const auto size = [](double bytes) {
    return bytes >= 1e9 ? fmt::format("{:.1f} GB", bytes / 1e9) : fmt::format("{:.1f} MB", bytes / 1e6);
  };
  if (need > free)
    throw std::runtime_error(fmt::format(
        "no space for the logs: {} ranks x {} updates need about {}{}, and {} has {} free; ask for fewer --updates "
        "or --ranks{}, or write elsewhere",
        o.ranks, o.updates, size(need), gzip ? " (with gzip, taken as 10x smaller)" : "", at.string(), size(free),
        gzip ? "" : ", or use --gzip"));
}

}  // namespace

Manifest generate(const Options& options, const std::string& dir, bool gzip, unsigned threads,
                  const std::function<bool()>& cancelled) {
  if (auto err = validate(options); !err.empty()) throw std::runtime_error(err);
  const Options o = with_random_injections(options);
  // Fewer random injections than asked for fit (every rank a straggler already, every
  // place taken): said, not left out silently.
  auto shortfall = [](const char* what, std::int64_t asked, std::size_t explicit_ones, std::size_t all) {
    const auto got = static_cast<std::int64_t>(all - explicit_ones);
    if (got < asked)
      throw std::runtime_error(fmt::format("{} {}: only {} fit besides the {} given (each rank and update holds at "
                                           "most one; a random straggler takes a rank without one while any is left, then a window "
                                           "that overlaps none of that rank's); ask for fewer",
                                           what, asked, got, explicit_ones));
  };
  shortfall("--random-stragglers", options.random_stragglers, options.stragglers.size(), o.stragglers.size());
  shortfall("--random-fallbacks", options.random_fallbacks, options.fallbacks.size(), o.fallbacks.size());
  shortfall("--random-padding-spikes", options.random_padding_spikes, options.padding_spikes.size(),
            o.padding_spikes.size());
  const Model model(o);
  check_room(o, model, dir, gzip);
  // An earlier run's logs that this one would not replace (more ranks, the other of
  // .jsonl and .jsonl.gz, other logs anywhere below): `stepprof report DIR` would read
  // them with the new ones. (Before pass 1: at 10^5 updates that pass took seconds.)
  std::vector<std::string> files;
  for (std::int64_t r = 0; r < o.ranks; ++r) files.push_back((fs::path(dir) / log_file_name(r, o.ranks, gzip)).string());
  if (const auto stale = logs_besides(dir, files); !stale.empty())
    throw std::runtime_error(fmt::format(
        "{} holds {} log file(s) this run would not replace ({}): `stepprof report {}` would read them with the "
        "new ones; remove them or write to another directory",
        dir, stale.size(), ::stepprof::detail::file_list(stale), dir));
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::int64_t>(threads, o.ranks));

  // Pass 1: when does the slowest rank reach each update's all-reduce?
  // (kJobBytesPerUpdate bytes per update.)
  std::vector<double> sync(static_cast<std::size_t>(o.updates), 0.0);
  std::vector<std::int64_t> slowest(sync.size(), 0);
  std::vector<double> second(sync.size(), 0.0);  // the next slowest rank's arrival
  std::atomic<bool> stop_early{false};
  stepprof::detail::parallel_for(static_cast<std::size_t>(o.updates), std::max(1u, threads), [&](std::int64_t i) {
    // (An interrupt is seen within 4096 updates: 10^9 of them take minutes.)
    if (stop_early.load(std::memory_order_relaxed) || ((i & 4095) == 0 && cancelled && cancelled())) {
      stop_early = true;
      return;
    }
    double best = -1, next = -1;
    std::int64_t who = 0;
    for (std::int64_t r = 0; r < o.ranks; ++r) {
      const double a = model.plan(r, o.first_step + i).arrival_ms;
      if (a > best) {
        next = best;
        best = a;
        who = r;
      } else if (a > next) {
        next = a;
      }
    }
    sync[static_cast<std::size_t>(i)] = best;
    slowest[static_cast<std::size_t>(i)] = who;
    second[static_cast<std::size_t>(i)] = next < 0 ? best : next;
  });

  if (stop_early) throw std::runtime_error("interrupted");

  // Pass 2: the files.
  std::error_code ec;
  stepprof::detail::MadeDirectories made;  // removed again (where empty) when this fails
  if (!made.make(dir, ec)) throw std::runtime_error(fmt::format("cannot create {}: {}", dir, ec.message()));
  Manifest man;
  man.options = options;
  man.files = std::move(files);
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::int64_t> background{0};
  std::atomic<bool> stop{false};
  // Every update's padding fraction, to check the spikes against the report's threshold.
  const bool check_spikes = !o.padding_spikes.empty() && o.ranks * o.updates <= kSpikeCheckUpTo;
  std::vector<double> padding(check_spikes ? static_cast<std::size_t>(o.ranks * o.updates) : 0);
  // The ranks whose file this run opened (each written by its rank's task alone): a run that
  // fails removes those only, not another rank's file of an earlier run it never reached.
  std::vector<char> opened(static_cast<std::size_t>(o.ranks), 0);
  const auto remove_opened = [&] {
    for (std::size_t k = 0; k < man.files.size(); ++k)
      if (opened[k]) fs::remove(man.files[k], ec);
  };
  try {
    stepprof::detail::parallel_for(static_cast<std::size_t>(o.ranks), std::max(1u, threads), [&](std::int64_t r) {
      Sink out(man.files[static_cast<std::size_t>(r)], gzip);
      opened[static_cast<std::size_t>(r)] = 1;
      out.line(config_to_json(model.config(r)));
      std::int64_t bg = 0;
      for (std::int64_t i = 0; i < o.updates; ++i) {
        if (stop || (cancelled && cancelled())) {
          stop = true;
          return;
        }
        const std::int64_t step = o.first_step + i;
        const auto plan = model.plan(r, step);
        if (plan.any_mixed && !plan.injected_fallback) ++bg;
        const UpdateRecord record = model.record(plan, r, step, sync[static_cast<std::size_t>(i)]);
        if (check_spikes) padding[static_cast<std::size_t>(r * o.updates + i)] = record.padding_fraction.value_or(0);
        out.line(update_to_json(record, model.regions(), model.counters()));
      }
      out.close();
      bytes += out.bytes();
      background += bg;
    });
  } catch (...) {
    remove_opened();
    made.remove_empty();
    throw;
  }
  if (stop) {
    remove_opened();
    made.remove_empty();
    throw std::runtime_error("interrupted");
  }
  man.bytes = bytes;
  man.background_fallback_updates = background;
  if (const auto p = check_spikes ? summarize(std::move(padding)) : std::nullopt)
    man.padding_spike_threshold = p->p90 + PaddingResult::kSpikeMargin;

  for (const auto& s : o.stragglers) {
    InjectedStraggler x{s, 0, 0, 0};
    for (std::int64_t step = s.first_step; step <= s.last_step; ++step) {
      const auto i = static_cast<std::size_t>(step - o.first_step);
      const double with = model.plan(s.rank, step).arrival_ms;
      x.extra_ms += with - model.plan(s.rank, step, false).arrival_ms;
      // How far ahead of everyone else: the slowest other rank is `second` when this
      // rank is the slowest, else the slowest.
      x.lead_ms += with - (slowest[i] == s.rank ? second[i] : sync[i]);
      if (slowest[i] == s.rank) ++x.slowest_updates;
    }
    const auto n = static_cast<double>(s.last_step - s.first_step + 1);
    x.extra_ms /= n;
    x.lead_ms /= n;
    man.stragglers.push_back(x);
  }
  for (const auto& f : o.fallbacks) {
    InjectedFallback x{f, {}, 0, 0};
    const auto plan = model.plan(f.rank, f.step);
    std::set<std::int64_t> counts;
    for (const auto& mb : plan.mbs)
      if (mb.mixed) {
        counts.insert(mb.frames.begin(), mb.frames.end());
        x.single_samples += static_cast<std::int64_t>(mb.frames.size());
        ++x.mixed_microbatches;
      }
    x.frame_counts.assign(counts.begin(), counts.end());
    man.fallbacks.push_back(x);
  }
  for (const auto& s : o.padding_spikes) {
    InjectedPaddingSpike x{s, 0, 0, std::nullopt};
    x.spec.length = Model::spike_length(s);
    const auto plan = model.plan(s.rank, s.step);
    x.padded_length = plan.mbs.front().padded;
    const auto i = static_cast<std::size_t>(s.step - o.first_step);
    x.padding_fraction = *model.record(plan, s.rank, s.step, sync[i]).padding_fraction;
    if (man.padding_spike_threshold) x.above_report_threshold = x.padding_fraction > *man.padding_spike_threshold;
    man.padding_spikes.push_back(x);
  }
  return man;
}

std::string manifest_to_json(const Manifest& m) {
  using Json = nlohmann::ordered_json;
  const Options& o = m.options;
  Json stragglers = Json::array(), fallbacks = Json::array(), spikes = Json::array();
  for (const auto& s : m.stragglers)
    stragglers.push_back({{"rank", s.spec.rank},
                          {"first_step", s.spec.first_step},
                          {"last_step", s.spec.last_step},
                          {"factor", s.spec.factor},
                          {"extra_ms", s.extra_ms},
                          {"lead_ms", s.lead_ms},
                          {"slowest_updates", s.slowest_updates}});
  for (const auto& f : m.fallbacks)
    fallbacks.push_back({{"rank", f.spec.rank},
                         {"step", f.spec.step},
                         {"microbatches", f.spec.microbatches},
                         {"single_samples", f.single_samples},
                         {"mixed_microbatches", f.mixed_microbatches},
                         {"frame_counts", f.frame_counts}});
  for (const auto& s : m.padding_spikes)
    spikes.push_back({{"rank", s.spec.rank},
                      {"step", s.spec.step},
                      {"length", s.spec.length},
                      {"padded_length", s.padded_length},
                      {"padding_fraction", s.padding_fraction},
                      {"above_report_threshold", s.above_report_threshold ? Json(*s.above_report_threshold) : Json()}});
  Json j{{"schema", "stepprof.synth-manifest/1"},
         {"seed", o.seed},
         {"ranks", o.ranks},
         {"updates", o.updates},
         {"first_step", o.first_step},
         {"last_step", last_step(o)},
         {"micro_batch", o.micro_batch},
         {"accumulation", o.accumulation},
         {"fallback_rate", o.fallback_rate},
         {"parents", o.parents},
         {"files", m.files},
         {"bytes", m.bytes},
         {"injections", {{"stragglers", stragglers}, {"fallbacks", fallbacks}, {"padding_spikes", spikes}}},
         {"padding_spike_threshold", m.padding_spike_threshold ? Json(*m.padding_spike_threshold) : Json()},
         {"background_fallback_updates", m.background_fallback_updates}};
  return j.dump(2) + "\n";
}

std::string describe(const Manifest& m) {
  std::string s;
  for (const auto& x : m.stragglers)
    // (lead_ms > 0: it reached the all-reduce after the slowest other rank. It said "more
    // own work", which `stepprof report` measures as wall_ms less the communication
    // region: the slowed backward pass inside that region is not in it, and the report's
    // figure was 2.0 s against this 3.5 s.)
    s += m.options.ranks == 1  // (no other rank to reach the all-reduce before or after)
             ? fmt::format("straggler: rank {}, steps {}..{}, compute x{:.2f} (+{:.0f} ms per update)\n", x.spec.rank,
                           x.spec.first_step, x.spec.last_step, x.spec.factor, x.extra_ms)
             : fmt::format("straggler: rank {}, steps {}..{}, compute x{:.2f} (+{:.0f} ms per update; reached the "
                           "all-reduce {:.0f} ms {} than the slowest other rank on average, slowest in {} of {} "
                           "updates)\n",
                           x.spec.rank, x.spec.first_step, x.spec.last_step, x.spec.factor, x.extra_ms,
                           std::fabs(x.lead_ms), x.lead_ms >= 0 ? "later" : "earlier", x.slowest_updates,
                           x.spec.last_step - x.spec.first_step + 1);
  for (const auto& x : m.fallbacks) {
    std::string counts;
    for (auto c : x.frame_counts) counts += fmt::format("{}{}", counts.empty() ? "" : ", ", c);
    s += fmt::format("fallback: rank {}, step {} ({} of {} micro-batches{} mix frame counts {}; {} samples took "
                     "vggt_single)\n",
                     x.spec.rank, x.spec.step, x.mixed_microbatches, m.options.accumulation,
                     x.mixed_microbatches > x.spec.microbatches
                         ? fmt::format(" ({} injected, {} by --fallback-rate)", x.spec.microbatches,
                                       x.mixed_microbatches - x.spec.microbatches)
                         : std::string(),
                     counts, x.single_samples);
  }
  for (const auto& x : m.padding_spikes)
    s += fmt::format("padding spike: rank {}, step {} (one sample of {} tokens pads its micro-batch to {}; update "
                     "padding {:.1f} %){}\n",
                     x.spec.rank, x.spec.step, x.spec.length, x.padded_length, x.padding_fraction * 100,
                     x.above_report_threshold.value_or(true)
                         ? std::string()
                         : fmt::format(": not above the report's spike threshold on these logs, {:.1f} % (the 90th "
                                       "percentile of every update's padding plus {:.0f} points), so `stepprof "
                                       "report` will not list it; give more updates, fewer spikes or a longer one",
                                       *m.padding_spike_threshold * 100, PaddingResult::kSpikeMargin * 100));
  if (m.background_fallback_updates)
    s += fmt::format("background: {} update(s) took vggt_single without an injection (--fallback-rate {})\n",
                     m.background_fallback_updates, m.options.fallback_rate);
  return s;
}

}  // namespace stepprof::synth
