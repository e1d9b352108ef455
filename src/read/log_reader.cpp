// Reads step logs: per file, lines -> records (file_reader, several files at once),
// then across files: ranks, duplicate steps, mixed runs, missing configs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../util/parallel.hpp"
#include "file_reader.hpp"
#include "dataset_checks.hpp"
#include "file_kind.hpp"
#include "stepprof/reader.hpp"

namespace stepprof {
namespace {

namespace fs = std::filesystem;

// Names of files read from a directory: step logs and profiler traces. Markdown tables
// and text files are read only when named (a directory often holds a README).
bool has_log_name(const std::string& name) {
  std::string n = name;
  if (n.size() > 3 && n.ends_with(".gz")) n.resize(n.size() - 3);
  for (const char* ext : {".jsonl", ".ndjson", ".json", ".log"})
    if (n.ends_with(ext)) return true;
  return false;
}

// For a log name compressed in a way stepprof does not read ("rank3.jsonl.zst"): how to
// undo it ("zstd -d"); empty for any other name.
std::string_view undo_compression(const std::string& name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kOther = {{
      {".xz", "xz -d"}, {".zst", "zstd -d"}, {".bz2", "bunzip2"}, {".lz4", "lz4 -d"}, {".zip", "unzip"}, {".7z", "7z x"}}};
  for (const auto& [ext, undo] : kOther)
    if (name.size() > ext.size() && name.ends_with(ext) && has_log_name(name.substr(0, name.size() - ext.size())))
      return undo;
  return {};
}

// One rank's records as read, before duplicate steps are resolved.
struct RankBucket {
  std::optional<std::int64_t> rank;
  std::optional<RunConfig> config;
  std::string config_where;  // file:line of the config, for messages
  std::vector<UpdateRecord> updates;
  std::vector<std::uint32_t> files;
  std::unordered_map<std::int64_t, SourceLocation> first_seen;  // strict mode: step -> where
  std::uint64_t rejected = 0;  // update records skipped with an error in files of its config
};

// A record skipped for repeating its rank's step: where it is, where the kept one is, and
// whether the two time alike (a copy of the log does; a rerun of the step does not).
struct SkippedDuplicate {
  SourceLocation at, kept;
  std::int64_t step = 0;
  bool same = false;
};

using detail::rank_text;
using detail::run_identity;

// Reads the files on worker threads (detail::read_file, one file per thread at a time)
// and merges their results in input order on the calling thread: ranks, configs across
// files, then (finish) duplicate steps, mixed runs and missing configs.
class Reader {
 public:
  Reader(const ReadOptions& opt, Diagnostics& diag) : opt_(opt), diag_(diag) {}

  Dataset run(const std::vector<std::string>& files) {
    ds_.files = files;
    const auto n = files.size();
    for (const auto& f : files) {
      std::error_code ec;
      if (f != "-")
        if (const auto size = fs::file_size(f, ec); !ec) total_bytes_ += size;
    }
    unsigned threads = opt_.threads ? opt_.threads : std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(threads, n)));

    detail::FileOptions fopt;
    fopt.steps = opt_.steps;
    fopt.strict = diag_.strict();
    fopt.traces_only = opt_.traces_only;
    fopt.kineto = opt_.kineto;
    fopt.kineto.lone = n == 1;  // (a lone trace without distributedInfo is rank 0 of 1)
    fopt.keep_sample_indices = opt_.keep_sample_indices;
    fopt.cancel = &abort_;
    fopt.on_bytes = [this](std::uint64_t b) { bytes_done_.fetch_add(b, std::memory_order_relaxed); };

    std::vector<std::optional<detail::FileResult>> results(n);
    std::mutex mutex;
    std::condition_variable ready;
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;  // e.g. std::bad_alloc on a worker: rethrown here
    auto worker = [&] {
      try {
        for (std::size_t i; !abort_.load() && (i = next.fetch_add(1)) < n;) {
          auto r = detail::read_file(files[i], static_cast<std::uint32_t>(i), fopt);
          std::lock_guard lock(mutex);
          results[i] = std::move(r);
          ready.notify_all();
        }
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        abort_ = true;
        ready.notify_all();
      }
    };
    std::vector<std::thread> pool;
    if (n > 0 && detail::start_threads(pool, threads, worker) == 0)
      worker();  // none at all: every file on this thread first

    for (std::size_t i = 0; i < n && !diag_.should_stop(); ++i) {
      std::optional<detail::FileResult> r;
      {
        std::unique_lock lock(mutex);
        while (!results[i] && !cancelled() && !error)
          if (!ready.wait_for(lock, std::chrono::milliseconds(100), [&] { return results[i] || error; })) {
            lock.unlock();
            report_progress();
            lock.lock();
          }
        if (!results[i]) break;  // cancelled, or a worker failed
        r = std::move(results[i]);
        results[i].reset();
      }
      merge(static_cast<std::uint32_t>(i), fopt, std::move(*r));
      report_progress();
      if (cancelled()) break;
    }
    abort_ = true;  // strict stop or cancel: the workers stop at their next check
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    if (!diag_.should_stop() && !cancelled()) finish();
    return std::move(ds_);
  }

 private:
  // True once the caller's cancel flag is set; the workers are then told to stop.
  bool cancelled() {
    if (!opt_.cancel || !opt_.cancel->load(std::memory_order_relaxed)) return false;
    abort_ = true;
    return true;
  }

  // Calls the caller's progress function, at most every 200 ms (calling thread only).
  void report_progress() {
    if (!opt_.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_progress_ < std::chrono::milliseconds(200)) return;
    last_progress_ = now;
    opt_.progress(bytes_done_.load(std::memory_order_relaxed), total_bytes_);
  }

  void report(Severity sev, Problem p, std::uint32_t file, std::uint64_t line, std::uint64_t col,
              std::string msg) {
    diag_.report({sev, p, ds_.files[file], line, col, std::move(msg)});
  }

  // The bucket of `rank`, or nullptr. (Looked up, not searched: a search per file or per
  // config was quadratic in the ranks, 10 % of the time at 65,536 ranks.)
  const RankBucket* find_bucket(const std::optional<std::int64_t>& rank) const {
    const auto it = bucket_index_.find(rank);
    return it == bucket_index_.end() ? nullptr : &buckets_[it->second];
  }

  // Rebuilds bucket_index_ after buckets_ is reordered.
  void reindex_buckets() {
    bucket_index_.clear();
    for (std::size_t i = 0; i < buckets_.size(); ++i) bucket_index_.emplace(buckets_[i].rank, i);
    last_bucket_ = 0;
  }

  RankBucket& bucket(const std::optional<std::int64_t>& rank) {
    if (last_bucket_ < buckets_.size() && buckets_[last_bucket_].rank == rank) return buckets_[last_bucket_];
    if (const auto it = bucket_index_.find(rank); it != bucket_index_.end()) {
      last_bucket_ = it->second;
      return buckets_[it->second];
    }
    buckets_.push_back(RankBucket{rank, {}, {}, {}, {}, {}});
    last_bucket_ = buckets_.size() - 1;
    bucket_index_.emplace(rank, last_bucket_);
    return buckets_.back();
  }

  static void add_file(RankBucket& b, std::uint32_t fi) {
    if (b.files.empty() || b.files.back() != fi) b.files.push_back(fi);
  }

  // Adds one file's result, in the order reading the files one after another would
  // have: its diagnostics, updates and config, with its name ids made the dataset's.
  void merge(std::uint32_t fi, const detail::FileOptions& fopt, detail::FileResult r) {
    if (r.config && diag_.strict() && config_conflicts(*r.config)) {
      // Strict mode stops at this config, which differs from another file's: read the
      // file again only up to it, as reading the files in order would have.
      detail::FileOptions again = fopt;
      again.stop_after_line = r.config->source.line;
      again.config_rank = r.config->rank;  // (learned from an update record after the config, if it names none)
      again.on_bytes = nullptr;
      r = detail::read_file(ds_.files[fi], fi, again);
    }
    remap_names(r);
    // The steps --steps left out of the file, for telling a resume from a rerun (finish).
    if (r.outside_window) outside_span_[fi] = {r.outside_first, r.outside_last};
    const std::size_t d0 = r.config ? r.diags_before_config : r.diags.size();
    const std::size_t u0 = r.config ? r.updates_before_config : r.updates.size();
    // A file whose config is another run's than the one its rank already has: its records
    // would mix two runs' updates. They are kept aside; finish() keeps, for each rank, the
    // records of the run most ranks belong to. (--strict stops here instead.)
    const bool other_run = r.config && config_conflicts(*r.config);
    auto count_unkept = [&] {
      for (int p = 0; p < static_cast<int>(Problem::kCount_); ++p)
        for (int sev = 0; sev < 3; ++sev) diag_.count_unkept(static_cast<Severity>(sev), static_cast<Problem>(p), r.unkept[p][sev]);
    };
    if (other_run && !diag_.strict()) {
      for (auto& d : r.diags) diag_.report(std::move(d));
      count_unkept();
      others_.push_back({fi, std::move(*r.config), std::move(r.updates)});
    } else {
      for (std::size_t k = 0; k < d0; ++k) diag_.report(std::move(r.diags[k]));
      if (!other_run) add_updates(fi, r.updates, 0, u0);
      if (r.config) add_config(fi, *r.config, r.updates.size());
      for (std::size_t k = d0; k < r.diags.size(); ++k) diag_.report(std::move(r.diags[k]));
      count_unkept();
      if (!other_run) add_updates(fi, r.updates, u0, r.updates.size());
      if (r.config) bucket(r.config->rank).rejected += r.rejected_updates;
    }
    if (r.outside_window) {
      outside_first_ = ds_.updates_outside_window ? std::min(outside_first_, r.outside_first) : r.outside_first;
      outside_last_ = ds_.updates_outside_window ? std::max(outside_last_, r.outside_last) : r.outside_last;
    }
    ds_.updates_outside_window += r.outside_window;
    ds_.updates_before_window += r.before_window;
    // A file that holds two runs' configs is a job restarted with other settings that
    // appended to its logs: records of the run not kept are then skipped with warnings,
    // not errors (an elastic restart is not bad input).
    if (!r.later_runs.empty()) {
      std::set<std::string> runs;
      if (r.config) runs.insert(run_identity(*r.config));
      for (const auto& later : r.later_runs) runs.insert(run_identity(*later.config));
      if (runs.size() > 1) restart_runs_.insert(runs.begin(), runs.end());
    }
    // Runs appended to the file after a config of another run: as if each were a file of
    // its own (their diagnostics are the file's, reported above).
    for (auto& later : r.later_runs) {
      RunConfig& config = *later.config;
      if (config_conflicts(config) && diag_.strict()) {
        // (A rank's log in a file of several ranks' logs, of another run than that rank's
        // earlier files.)
        const RankBucket& b = *find_bucket(config.rank);
        report(Severity::kError, Problem::kMixedRuns, fi, config.source.line, 0,
               fmt::format("config for {} differs from the one in {} in its run settings ({}); stopping (--strict)",
                           rank_text(config.rank), b.config_where, detail::identity_difference(config, *b.config)));
        break;
      }
      if (config_conflicts(config)) {
        others_.push_back({fi, std::move(config), std::move(later.updates), true});
        continue;
      }
      add_config(fi, config, later.updates.size());
      add_updates(fi, later.updates, 0, later.updates.size());
    }
  }

  // Ids in a file's records refer to its own name tables; intern the names in the
  // dataset's tables in the file's order (which gives the ids reading the files in
  // order would have given) and rewrite the ids.
  void remap_names(detail::FileResult& r) {
    auto table_map = [](const NameTable& from, NameTable& to, std::vector<NameTable::Id>& map) {
      map.resize(from.size());
      bool identity = true;
      for (NameTable::Id id = 0; id < from.size(); ++id) {
        map[id] = to.intern(from.name(id));
        identity = identity && map[id] == id;
      }
      return identity;
    };
    std::vector<NameTable::Id> rmap, cmap;
    const bool rsame = table_map(r.regions, ds_.regions, rmap);
    const bool csame = table_map(r.counters, ds_.counters, cmap);
    if (rsame && csame) return;
    std::vector<std::vector<UpdateRecord>*> lists{&r.updates};
    for (auto& later : r.later_runs) lists.push_back(&later.updates);
    for (auto* list : lists) {
      for (auto& u : *list) {
        if (!rsame) {
          for (auto& s : u.regions) {
            s.region = rmap[s.region];
            if (s.parent && *s.parent != kTopLevel) s.parent = rmap[*s.parent];
          }
          for (auto& mb : u.microbatches)
            if (mb.path) mb.path = rmap[*mb.path];
        }
        if (!csame)
          for (auto& c : u.counters) c.name = cmap[c.name];
      }
    }
    r.regions = NameTable();
    r.counters = NameTable();
  }

  void add_updates(std::uint32_t fi, std::vector<UpdateRecord>& updates, std::size_t from, std::size_t to) {
    if (from < to) {  // a file's records usually share one rank
      RankBucket& b = bucket(updates[from].rank);
      const auto same_rank = [&] {
        return std::all_of(updates.begin() + static_cast<std::ptrdiff_t>(from),
                           updates.begin() + static_cast<std::ptrdiff_t>(to),
                           [&](const UpdateRecord& u) { return u.rank == b.rank; });
      };
      if (!diag_.strict() && b.updates.empty() && from == 0 && to == updates.size() && same_rank()) {
        add_file(b, fi);
        b.updates = std::move(updates);  // all of them, without moving each
        return;
      }
      if (b.updates.capacity() < b.updates.size() + (to - from))  // make room for them at once
        b.updates.reserve(std::max(2 * b.updates.capacity(), b.updates.size() + (to - from)));
    }
    for (std::size_t k = from; k < to; ++k) {
      RankBucket& b = bucket(updates[k].rank);
      add_file(b, fi);
      if (diag_.strict()) {
        // Strict mode stops at the first duplicate step as it is read (finish() finds
        // them all otherwise, after sorting).
        const auto [it, fresh] = b.first_seen.try_emplace(updates[k].step, updates[k].source);
        if (!fresh) {
          report(Severity::kError, Problem::kDuplicateStep, updates[k].source.file, updates[k].source.line, 1,
                 fmt::format("duplicate step {} for {} (first at {}:{}){}; stopping (--strict)", updates[k].step,
                             rank_text(b.rank), ds_.files[it->second.file], it->second.line,
                             rankless_hint(b.rank, updates[k].source.file, it->second.file)));
          return;
        }
      }
      b.updates.push_back(std::move(updates[k]));
    }
  }

  // True when add_config would report `config` as another run's.
  bool config_conflicts(const RunConfig& config) const {
    const RankBucket* b = find_bucket(config.rank);
    return b && b->config && run_identity(*b->config) != run_identity(config);
  }

  // File `fi`, whose `config` is another run's than rank bucket `b` holds: its `updates`
  // records are skipped.
  // (`appended`: the config starts a later run in its file, RunSegment.)
  void report_other_run(std::uint32_t fi, const RunConfig& config, const RankBucket& b, std::size_t updates,
                        bool appended = false) {
    // (With a --steps window its records may all lie outside it: "the 0 update record(s)
    // after it are skipped" read as if it held none.)
    const std::string skipped =
        updates == 0 && opt_.steps
            ? std::string(appended ? "none of the update records after it is in the --steps window"
                                   : "none of this file's update records is in the --steps window")
            : fmt::format("{} {} update record(s){} are skipped", appended ? "the" : "this file's", updates,
                          appended ? " after it" : "");
    report(appended ? Severity::kWarning : Severity::kError, Problem::kMixedRuns, fi, config.source.line, 0,
           fmt::format("config for {} differs from the one in {} in its run settings ({}): {}; {}",
                       rank_text(config.rank), b.config_where, detail::identity_difference(config, *b.config),
                       appended ? "it is another run's, appended to the file" : "these files come from different runs",
                       skipped));
    skipped_other_run_ += updates;
  }

  // The file's first config: its rank's bucket takes it, or compares it with the one
  // it already has from another file (the file's `updates` records are then skipped).
  void add_config(std::uint32_t fi, const RunConfig& config, std::size_t updates) {
    RankBucket& b = bucket(config.rank);
    if (!b.config) {
      add_file(b, fi);
      b.config = config;
      b.config_where = config.source.line ? fmt::format("{}:{}", ds_.files[fi], config.source.line) : ds_.files[fi];
    } else if (run_identity(*b.config) != run_identity(config)) {
      report_other_run(fi, config, b, updates);
    } else {
      add_file(b, fi);
    }
  }

  // Which run is kept, for messages.
  std::string_view run_rule() const {
    return opt_.run == ReadOptions::Run::kLatest ? "the run whose records reach the highest step (--run latest)"
                                                 : "the run most ranks belong to, on a tie the newest (--run latest takes the newest)";
  }

  // The run the dataset keeps: the one most ranks have a config of (a rank's files of
  // another run count for that run too); on a tie, the one whose records reach the highest
  // step (a job requeued with the same world size and a new run_id: its continuation, not
  // the run that crashed), then the lowest rank's first. With --run latest: the run whose
  // records reach the highest step (an elastic restart continues the step numbers); on a
  // tie, the one most ranks have.
  std::string majority_run() const {
    std::map<std::string, std::size_t> votes;
    std::set<std::pair<std::optional<std::int64_t>, std::string>> voted;  // (rank, run)
    std::string lowest;
    for (const auto& b : buckets_)
      if (b.config) {
        const auto id = run_identity(*b.config);
        if (voted.insert({b.rank, id}).second) ++votes[id];
        if (lowest.empty()) lowest = id;
      }
    for (const auto& o : others_) {
      const auto id = run_identity(o.config);
      if (voted.insert({o.config.rank, id}).second) ++votes[id];
    }
    if (votes.size() <= 1 && opt_.run != ReadOptions::Run::kLatest)  // (one run: nothing to choose)
      return votes.empty() ? lowest : votes.begin()->first;
    std::map<std::string, std::int64_t> reach;  // each run's highest step
    auto see = [&](const std::string& id, const std::vector<UpdateRecord>& updates) {
      if (updates.empty()) return;
      std::int64_t top = updates.front().step;
      for (const auto& u : updates) top = std::max(top, u.step);
      if (const auto [it, fresh] = reach.try_emplace(id, top); !fresh) it->second = std::max(it->second, top);
    };
    for (const auto& b : buckets_)
      if (b.config) see(run_identity(*b.config), b.updates);
    for (const auto& o : others_) see(run_identity(o.config), o.updates);
    auto reaches_further = [&](const std::string& a, const std::string& b) {
      return reach.contains(a) && (!reach.contains(b) || reach.at(a) > reach.at(b));
    };
    std::string best = lowest;
    for (const auto& [id, n] : votes)
      if (n > votes[best] || (n == votes[best] && reaches_further(id, best))) best = id;
    if (opt_.run == ReadOptions::Run::kLatest)
      for (const auto& [id, step] : reach)
        if (reaches_further(id, best)) best = id;
    return best;
  }

  // The files kept aside by merge(): for each rank, the records of `run` stay.
  void settle_other_runs(const std::string& run) {
    for (auto& o : others_) {
      RankBucket& b = bucket(o.config.rank);
      const std::string id = run_identity(o.config), held = run_identity(*b.config);
      const std::string where =
          o.config.source.line ? fmt::format("{}:{}", ds_.files[o.file], o.config.source.line) : ds_.files[o.file];
      if (id == held) {  // another file of the run this rank now holds
        add_file(b, o.file);
        for (auto& u : o.updates) b.updates.push_back(std::move(u));
        continue;
      }
      if (id == run && held != run) {
        // The rank's first files were of another run than most ranks': those are skipped.
        report(restarted(held, run) ? Severity::kWarning : Severity::kError, Problem::kMixedRuns,
               b.config->source.file, b.config->source.line, 0,
               fmt::format("config for {} is not of {} (as in {}; run settings: {}): {}; the {} update record(s) "
                           "read for {} with this config are skipped",
                           rank_text(b.rank), run_rule(), where, detail::identity_difference(*b.config, o.config),
                           restarted(held, run) ? "the job restarted (a new run_id or other settings) and appended to its logs"
                                                : "these files come from different runs",
                           b.updates.size(), rank_text(b.rank)));
        skipped_other_run_ += b.updates.size();
        b.config = std::move(o.config);
        b.config_where = where;
        b.updates = std::move(o.updates);
        b.files = {o.file};
        continue;
      }
      report_other_run(o.file, o.config, b, o.updates.size(), o.appended);
    }
    others_.clear();
  }

  void finish() {
    // Updates that carry a rank but came from a file without config land in their own
    // bucket; merge a bucket without rank into the only ranked one if there is one.
    std::sort(buckets_.begin(), buckets_.end(), [](const RankBucket& a, const RankBucket& b) {
      return a.rank.value_or(-1) < b.rank.value_or(-1);
    });
    reindex_buckets();
    // Mixed runs: every rank's records must be of the run most ranks belong to.
    const std::string run = majority_run();
    settle_other_runs(run);
    const RankBucket* ref = nullptr;
    for (const auto& b : buckets_)
      if (b.config && run_identity(*b.config) == run) {
        ref = &b;
        break;
      }
    const std::string ref_identity = ref ? run : std::string();
    const std::string ref_rank = ref ? rank_text(ref->rank) : std::string();
    // (A copy: the loop below moves each bucket's config into the dataset, ref's among them.)
    const std::optional<RunConfig> ref_config = ref ? ref->config : std::nullopt;
    for (auto& b : buckets_) {
      if (b.updates.empty() && !b.config) continue;
      if (ref && b.config && &b != ref && run_identity(*b.config) != ref_identity) {
        const bool restart = restarted(run_identity(*b.config), ref_identity);
        report(restart ? Severity::kWarning : Severity::kError, Problem::kMixedRuns, b.config->source.file,
               b.config->source.line, 0,
               fmt::format("{} comes from a different run than {} (run settings: {}{}); its {} update record(s) are "
                           "skipped",
                           rank_text(b.rank), ref_rank, detail::identity_difference(*b.config, *ref_config),
                           restart ? "; the job restarted (a new run_id or other settings): other ranks' logs hold both runs" : "",
                           b.updates.size()));
        skipped_other_run_ += b.updates.size();
        continue;
      }
      if (b.config && b.updates.empty())
        report(Severity::kWarning, Problem::kEmptyInput, b.config->source.file, b.config->source.line, 0,
               // (Records skipped with errors, or left out by the window, are the likely reason.)
               b.rejected > 0
                   ? fmt::format("{} has a config but none of its update records were kept: {} update record(s) "
                                 "in its file(s) were skipped with the errors above",
                                 rank_text(b.rank), b.rejected)
               : opt_.steps && ds_.updates_outside_window > 0
                   ? fmt::format("{} has a config but no update records in the --steps window (update records "
                                 "outside it are left out)",
                                 rank_text(b.rank))
                   : fmt::format("{} has a config but no update records{}: did its job stop before the first "
                                 "optimizer update ended?",
                                 rank_text(b.rank), opt_.steps ? " in the --steps window" : ""));
      if (!b.config && !b.updates.empty()) {
        const auto& first = b.updates.front().source;
        report(Severity::kWarning, Problem::kMissingConfig, first.file, 0, 0,
               fmt::format("no config record{}: micro-batch, accumulation and world size are unknown, so "
                           "figures that need them are not reported",
                           // (It said "for unknown rank".)
                           b.rank ? " for " + rank_text(b.rank) : std::string(", and the records name no rank")));
      }
      RankLog log;
      log.rank = b.rank;
      log.config = std::move(b.config);
      log.files = std::move(b.files);
      auto by_step = [](const UpdateRecord& x, const UpdateRecord& y) { return x.step < y.step; };
      if (!std::is_sorted(b.updates.begin(), b.updates.end(), by_step))
        std::stable_sort(b.updates.begin(), b.updates.end(), by_step);
      const bool unique = std::adjacent_find(b.updates.begin(), b.updates.end(), [](const auto& x, const auto& y) {
                            return x.step == y.step;
                          }) == b.updates.end();
      if (unique) {
        log.updates = std::move(b.updates);
        // A bucket that grew by doubling is shrunk; one a file's reader sized from the file
        // (within 1/16, file_reader.cpp) is kept: shrinking moves every record.
        if (log.updates.capacity() - log.updates.size() > log.updates.size() / 16) log.updates.shrink_to_fit();
        ds_.ranks.push_back(std::move(log));
        continue;
      }
      // Each file's first and last step of this rank: a file that starts later than another
      // holding the same steps, and goes on beyond its end, is a job resumed from a
      // checkpoint into a new file (see below); one that ends inside the other's steps is
      // a rerun of some of them, or another job's log.
      std::unordered_map<std::uint32_t, std::pair<std::int64_t, std::int64_t>> file_span;
      // (The whole file's steps: with a --steps window its kept steps of two files could
      // start or end together.)
      for (const auto& u : b.updates) {
        const auto [it, fresh] = file_span.try_emplace(u.source.file, u.step, u.step);
        it->second.first = std::min(it->second.first, u.step);
        it->second.second = std::max(it->second.second, u.step);
      }
      for (auto& [file, span] : file_span)
        if (const auto out = outside_span_.find(file); out != outside_span_.end()) {
          span.first = std::min(span.first, out->second.first);
          span.second = std::max(span.second, out->second.second);
        }
      auto resumes = [&](std::uint32_t later, std::uint32_t earlier) {
        const auto& l = file_span.at(later);
        const auto& e = file_span.at(earlier);
        return l.first > e.first && l.second > e.second;
      };
      std::vector<SkippedDuplicate> skipped;
      // The earlier file's copies of steps a file starting later ran again (a job resumed
      // from a checkpoint into a new file), left out: (later file, earlier file) -> them.
      std::map<std::pair<std::uint32_t, std::uint32_t>, detail::Superseded> resumed;
      for (auto& u : b.updates) {
        if (!log.updates.empty() && log.updates.back().step == u.step) {
          UpdateRecord& kept = log.updates.back();
          const bool same = same_timing(kept, u);
          const std::uint32_t fu = u.source.file, fk = kept.source.file;
          if (!same && fu != fk && (resumes(fu, fk) || resumes(fk, fu))) {
            // Two files of the rank hold the step with other times, and one starts later and
            // goes on beyond the other: the resumed job's copy is kept whatever the files'
            // order; the other is work the restart lost. One warning per pair of files.
            const bool u_later = resumes(fu, fk);
            resumed[u_later ? std::pair(fu, fk) : std::pair(fk, fu)].add(u_later ? kept : u);
            if (u_later) kept = std::move(u);
            continue;
          }
          skipped.push_back({u.source, kept.source, u.step, same});
          continue;
        }
        log.updates.push_back(std::move(u));
      }
      report_duplicates(b.rank, skipped);
      for (const auto& [files, r] : resumed)
        report(Severity::kWarning, Problem::kDuplicateStep, files.first, 0, 0,
               fmt::format("{} of {} in {} ran again in this file, which starts later (at step {}) and goes on "
                           "beyond its end: a job resumed "
                           "from a checkpoint into a new file? This file's copies are analyzed, and the {} earlier "
                           "update record(s) ({:.1f} ms of update time, work lost to the restart) are left out",
                           r.steps(), rank_text(b.rank), ds_.files[files.second], file_span.at(files.first).first, r.records,
                           r.wall_ms));
      log.updates.shrink_to_fit();
      ds_.ranks.push_back(std::move(log));
    }
    say_reruns();
    ds_.updates_of_other_runs = skipped_other_run_;
    if (ds_.update_count() == 0) {
      std::string why = ds_.updates_outside_window
                            ? fmt::format("all {} update records are outside the --steps window {} (the input "
                                          "holds steps {} to {})",
                                          ds_.updates_outside_window, step_range_text(*opt_.steps), outside_first_,
                                          outside_last_)
                            : std::string("no update records were read");
      // (Records of another run were skipped whole: the window may have held only those.)
      if (ds_.updates_outside_window && skipped_other_run_)
        why = fmt::format("{} update records are outside the --steps window, and the {} inside it are of another "
                          "run than the one analyzed ({}) and were skipped (see "
                          "the mixed-runs diagnostics; --run chooses the run)",
                          ds_.updates_outside_window, skipped_other_run_, run_rule());
      diag_.report({Severity::kError, Problem::kEmptyInput,
                    ds_.files.size() == 1 ? ds_.files.front() : std::string("(input)"), 0, 0,
                    fmt::format("nothing to analyze: {}", why)});
    }
  }

  // Whether two records of one step hold the same data: every field the reader keeps,
  // regions and counters in any order (a copy re-serialized with sorted keys is a copy),
  // everything else as read. What a copy of a log has; a rerun of the step does not.
  static bool same_timing(const UpdateRecord& a, const UpdateRecord& b) {
    if (a.wall_ms != b.wall_ms || a.regions.size() != b.regions.size() || a.counters.size() != b.counters.size())
      return false;
    auto key = [](const RegionSample& x) {
      return std::tuple(x.region, x.parent.value_or(kTopLevel - 1), x.device_ms.value_or(-1.0), x.host_ms.value_or(-1.0),
                        x.calls.value_or(-1), x.parent.has_value(), x.device_ms.has_value(), x.host_ms.has_value(),
                        x.calls.has_value());
    };
    std::vector<decltype(key(RegionSample{}))> ra, rb;
    for (const auto& x : a.regions) ra.push_back(key(x));
    for (const auto& x : b.regions) rb.push_back(key(x));
    std::sort(ra.begin(), ra.end());
    std::sort(rb.begin(), rb.end());
    std::vector<std::pair<NameTable::Id, double>> ca, cb;
    for (const auto& c : a.counters) ca.emplace_back(c.name, c.value);
    for (const auto& c : b.counters) cb.emplace_back(c.name, c.value);
    std::sort(ca.begin(), ca.end());
    std::sort(cb.begin(), cb.end());
    // frame_histogram and input_shapes are JSON objects: in any key order. (Compared in
    // file order, a copy written with sorted keys was one duplicate-step error per record.)
    auto sorted = [](auto v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    auto shapes = [](const UpdateRecord& u) {
      std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>> v;
      for (const auto& x : u.input_shapes) v.emplace_back(x.dims, x.microbatches);
      std::sort(v.begin(), v.end());
      return v;
    };
    auto same_mb = [](const MicroBatch& x, const MicroBatch& y) {
      return x.path == y.path && x.frames == y.frames && x.tokens == y.tokens && x.padded_length == y.padded_length;
    };
    // The job's own fields by key, their values as JSON values: key order and spacing
    // inside them are not data.
    auto fields = [](const UpdateRecord& u) {
      std::vector<std::pair<std::string_view, const std::string*>> v;
      for (const auto& f : u.extra) v.emplace_back(f.key, &f.json);
      std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      return v;
    };
    auto same_fields = [&]() {
      const auto fa = fields(a), fb = fields(b);
      if (fa.size() != fb.size()) return false;
      for (std::size_t k = 0; k < fa.size(); ++k) {
        if (fa[k].first != fb[k].first) return false;
        if (*fa[k].second == *fb[k].second) continue;
        const auto ja = nlohmann::json::parse(*fa[k].second, nullptr, false);
        const auto jb = nlohmann::json::parse(*fb[k].second, nullptr, false);
        if (ja.is_discarded() || jb.is_discarded() || ja != jb) return false;
      }
      return true;
    };
    return ra == rb && ca == cb && sorted(a.frame_histogram) == sorted(b.frame_histogram) && shapes(a) == shapes(b) &&
           a.sample_indices == b.sample_indices && a.padding_fraction == b.padding_fraction &&
           std::equal(a.microbatches.begin(), a.microbatches.end(), b.microbatches.begin(), b.microbatches.end(),
                      same_mb) &&
           a.recorder_errors == b.recorder_errors && same_fields();
  }

  // Logs without a rank are all one rank here: two such files repeat each other's steps.
  // What a duplicate step's message adds then ("" otherwise).
  static const char* rankless_hint(const std::optional<std::int64_t>& rank, std::uint32_t file, std::uint32_t kept_file) {
    return !rank && file != kept_file ? " (logs without a rank are read as one rank: give each log's config "
                                        "line its \"rank\", or read them one at a time)"
                                      : "";
  }

  // The duplicate steps of one rank, skipped: those timed alike in one file and the file of
  // the records kept (a copy of the log, whole or overlapping) are one warning per pair of
  // files; any other is an error each (a rerun of the step, or another job's log).
  void report_duplicates(const std::optional<std::int64_t>& rank, const std::vector<SkippedDuplicate>& skipped) {
    struct Copied {
      std::size_t records = 0;
      std::int64_t first = 0, last = 0;
      std::uint64_t line = 0, kept_line = 0;  // the first repeating record's line, the one it repeats
    };
    std::map<std::pair<std::uint32_t, std::uint32_t>, Copied> copied;  // (file, file of the kept records)
    for (const auto& s : skipped) {
      if (s.same) {
        Copied& c = copied[{s.at.file, s.kept.file}];
        if (c.records == 0 || s.at.line < c.line) c.line = s.at.line, c.kept_line = s.kept.line;
        c.first = c.records++ == 0 ? s.step : std::min(c.first, s.step);
        c.last = std::max(c.last, s.step);
        continue;
      }
      report(Severity::kError, Problem::kDuplicateStep, s.at.file, s.at.line, 1,
             fmt::format("duplicate step {} for {} (first at {}:{}); this record is skipped{}", s.step, rank_text(rank),
                         ds_.files[s.kept.file], s.kept.line, rankless_hint(rank, s.at.file, s.kept.file)));
      if (rank && s.at.file != s.kept.file) {
        Rerun& r = reruns_[{s.at.file, s.kept.file}];
        r.rank = *rank;
        r.first = r.records++ == 0 ? s.step : std::min(r.first, s.step);
        r.last = std::max(r.last, s.step);
      }
    }
    for (const auto& [files, c] : copied) {
      // (At the first repeating record: where to look, also for a copy of one step.)
      const std::string where = files.first == files.second
                                    ? fmt::format("earlier ones in the same file (this one repeats line {})", c.kept_line)
                                    : fmt::format("those in {} (this one repeats line {})", ds_.files[files.second],
                                                  c.kept_line);
      report(Severity::kWarning, Problem::kDuplicateStep, files.first, c.line, 0,
             fmt::format("{} update record(s) of {} (steps {}..{}) repeat {} with the same times: a copy of that "
                         "log? each step is read once",
                         c.records, rank_text(rank), c.first, c.last, where));
    }
  }

  // Files whose records repeat the steps of another file of the same rank with other
  // times, (file, file of the kept records) -> what (report_duplicates): several runs of
  // the same settings read together are said once (say_reruns).
  struct Rerun {
    std::int64_t rank = 0, first = 0, last = 0;
    std::size_t records = 0;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, Rerun> reruns_;
  // Each file's first and last step left out by --steps (files with any), by file index.
  std::unordered_map<std::uint32_t, std::pair<std::int64_t, std::int64_t>> outside_span_;

  // A directory of several runs, each in its own folder, with no run_id: every rank's
  // steps of the later runs were hundreds of duplicate-step errors, and nothing said why.
  void say_reruns() {
    std::size_t files = 0;
    const std::pair<const std::pair<std::uint32_t, std::uint32_t>, Rerun>* example = nullptr;
    std::set<std::uint32_t> counted;
    for (const auto& entry : reruns_) {
      if (entry.second.records < 2) continue;  // one step repeated: a rerun of that step
      if (counted.insert(entry.first.first).second) ++files;
      if (!example || entry.second.records > example->second.records) example = &entry;
    }
    if (!example) return;
    const auto& [pair, r] = *example;
    report(Severity::kNote, Problem::kMixedRuns, pair.first, 0, 0,
           fmt::format("{} file(s) repeat the steps of other files of the same rank with other times (this one: "
                       "{} update record(s) of rank {}, steps {}..{}, against {}): several runs of the same "
                       "settings read together? Each step of a rank is read once, from the first file that "
                       "has it; give one run's logs at a time (a directory per run), or give each run a run_id "
                       "(STEPPROF_RUN_ID, or the recorder's run_id option) so that they are told apart",
                       files, r.records, r.rank, r.first, r.last, ds_.files[pair.second]));
  }

  const ReadOptions& opt_;
  Diagnostics& diag_;
  Dataset ds_;
  std::vector<RankBucket> buckets_;
  // A file whose config is another run's than its rank's bucket has (kept until finish).
  struct OtherRun {
    std::uint32_t file;
    RunConfig config;
    std::vector<UpdateRecord> updates;
    bool appended = false;  ///< a later run in the file (RunSegment), not the whole file
  };
  std::vector<OtherRun> others_;
  // Run identities of which some file holds two or more (a job restarted with other
  // settings that appended to its logs): skipping one of them is a warning.
  std::set<std::string> restart_runs_;
  bool restarted(const std::string& a, const std::string& b) const {
    return restart_runs_.contains(a) && restart_runs_.contains(b);
  }
  std::uint64_t skipped_other_run_ = 0;  // update records skipped as another run's
  std::int64_t outside_first_ = 0, outside_last_ = 0;  // steps of the records outside --steps
  std::size_t last_bucket_ = 0;
  // Rank (nullopt: records whose rank is unknown) -> index in buckets_.
  std::unordered_map<std::optional<std::int64_t>, std::size_t> bucket_index_;
  std::atomic<bool> abort_{false};
  std::atomic<std::uint64_t> bytes_done_{0};
  std::uint64_t total_bytes_ = 0;
  std::chrono::steady_clock::time_point last_progress_{};
};

}  // namespace

namespace {

// "A:B", "A:", ":B" or "A" of integers >= 0, for steps (`one` "step", `window` "step
// window") or ranks ("rank", "rank range").
std::optional<StepRange> parse_range(std::string_view text, std::string_view one, std::string_view window,
                                     std::string& error) {
  bool out_of_range = false;
  auto parse = [&](std::string_view s, std::int64_t& out) {
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, out);
    if (ec == std::errc::result_out_of_range && p == end) out_of_range = true;
    return ec == std::errc() && p == end;
  };
  auto bad = [&](std::string_view why) {
    error = fmt::format("bad {} \"{}\": {}", window, text, why);
    return std::nullopt;
  };
  constexpr std::string_view kForm = "expected A:B, A:, :B or A (integers >= 0)";
  StepRange r;
  if (text.empty()) {
    error = fmt::format("empty {}: {}", window, kForm);
    return std::nullopt;
  }
  const auto colon = text.find(':');
  const auto a = text.substr(0, colon), b = colon == std::string_view::npos ? a : text.substr(colon + 1);
  const bool given_a = !a.empty(), given_b = !b.empty();
  if ((given_a && !parse(a, r.first)) || (given_b && !parse(b, r.last)))
    return bad(out_of_range ? fmt::format("a {} beyond 9223372036854775807", one) : std::string(kForm));
  if (colon != std::string_view::npos && !given_a && !given_b) return bad(kForm);
  if ((given_a && r.first < 0) || (given_b && r.last < 0)) return bad(fmt::format("{}s are >= 0", one));
  if (r.first > r.last) return bad(fmt::format("the first {} is after the last", one));
  return r;
}

}  // namespace

std::optional<StepRange> parse_step_range(std::string_view text, std::string& error) {
  // (Steps are >= 0: an update record with a negative step is rejected.)
  return parse_range(text, "step", "step window", error);
}

std::string step_range_text(const StepRange& range) {
  const StepRange all;
  if (range.first == range.last) return std::to_string(range.first);
  return (range.first == all.first ? std::string() : std::to_string(range.first)) + ":" +
         (range.last == all.last ? std::string() : std::to_string(range.last));
}

std::optional<std::vector<RankRange>> parse_rank_list(std::string_view text, std::string& error) {
  std::vector<RankRange> out;
  if (text.empty()) {
    error = "empty rank list: expected ranks and ranges A:B, A:, :B, comma-separated (e.g. 0:7,4095)";
    return std::nullopt;
  }
  for (std::size_t at = 0;;) {
    const auto comma = text.find(',', at);
    const auto item = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    const auto r = parse_range(item, "rank", "rank range", error);
    if (!r) return std::nullopt;
    out.push_back(*r);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, Diagnostics& diag) {
  std::vector<std::string> files;
  constexpr int kMaxDirectoryDepth = 8;  // subdirectory levels read below a named directory
  // A file named twice (or found twice through directories) is read once. It is known by
  // its device and inode, so that "-", /dev/stdin and /dev/fd/0 on one pipe are one input
  // (two readers of one pipe would each get half of its lines), else by its path.
  // (Maps: a list searched for every file was quadratic in the files, 1.7 s of 65,536.)
  std::map<std::pair<dev_t, ino_t>, std::string> seen_ids;  // id -> the path it was first read as
  std::map<fs::path, std::string> seen_paths;
  auto add = [&](const std::string& path) {
    struct stat st {};
    const bool known = path == "-" ? ::fstat(STDIN_FILENO, &st) == 0 : ::stat(path.c_str(), &st) == 0;
    const std::string* first = nullptr;
    if (known) {
      const auto [it, fresh] = seen_ids.try_emplace({st.st_dev, st.st_ino}, path);
      if (!fresh) first = &it->second;
    } else if (path != "-") {
      std::error_code ec;
      const fs::path canon = fs::weakly_canonical(path, ec);
      if (!ec) {
        const auto [it, fresh] = seen_paths.try_emplace(canon, path);
        if (!fresh) first = &it->second;
      }
    }
    if (first) {
      diag.report({Severity::kNote, Problem::kUnknownRecord, path, 0, 0,
                   *first == path ? std::string("given more than once; read once")
                                  : fmt::format("the same file as {} (a link, or named twice); read once", *first)});
      return;
    }
    files.push_back(path);
  };
  for (const auto& in : inputs) {
    std::error_code ec;
    if (in == "-" || !fs::is_directory(in, ec)) {
      add(in);
      continue;
    }
    // A directory: its log files, in its subdirectories too (e.g. logs/rank3/...), sorted.
    // One that cannot be listed is an error (the iterator below would skip it as empty).
    if (::access(in.c_str(), R_OK | X_OK) != 0) {
      diag.report({Severity::kError, Problem::kUnreadable, in, 0, 0,
                   fmt::format("cannot list the directory: {}", std::strerror(errno))});
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string fname = it->path().filename().string();
      if (fname.starts_with(".")) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_directory(ec)) {
        // Entered down to kMaxDirectoryDepth levels below the named directory; said otherwise.
        std::string why;
        if (it->is_symlink(ec))
          why = "not read: a symbolic link to a directory (not followed); name it to read it";
        else if (it.depth() >= kMaxDirectoryDepth)
          why = fmt::format("not read: directories are read {} levels down; name this one to read it",
                            kMaxDirectoryDepth);
        bool unreadable = false;
        if (why.empty() && ::access(it->path().c_str(), R_OK | X_OK) != 0) {
          why = fmt::format("cannot list the directory: {}; a rank's log may be in it", std::strerror(errno));
          unreadable = true;
        }
        if (!why.empty()) {
          it.disable_recursion_pending();
          diag.report({unreadable ? Severity::kWarning : Severity::kNote,
                       unreadable ? Problem::kUnreadable : Problem::kUnknownRecord, it->path().string(), 0, 0, why});
        }
        ec.clear();
        continue;
      }
      ec.clear();
      if (!it->is_regular_file(ec)) {
        // Directories are walked; anything else that is not a regular file is said.
        if (!it->is_directory(ec)) {
          const bool link = it->is_symlink(ec);
          struct stat target {};
          const int why = link && ::stat(it->path().c_str(), &target) != 0 ? errno : 0;
          diag.report({Severity::kNote, Problem::kUnknownRecord, it->path().string(), 0, 0,
                       !link              ? std::string("not read from the directory: not a regular file (a FIFO, "
                                                        "socket or device)")
                       : why == ELOOP     ? std::string("not read from the directory: a symbolic link that loops "
                                                        "(it leads back to itself)")
                       : why == ENOENT    ? std::string("not read from the directory: a symbolic link to nothing "
                                                        "(its target does not exist)")
                       : why != 0         ? fmt::format("not read from the directory: a symbolic link whose target "
                                                        "cannot be reached: {}", std::strerror(why))
                                          : std::string("not read from the directory: a symbolic link to something "
                                                        "that is not a regular file")});
        }
        ec.clear();
        continue;
      }
      if (has_log_name(fname)) {
        // A run directory holds more than logs: a config.json, a training log, stepprof's
        // own report. Those are listed, not read as broken logs.
        if (auto why = detail::not_a_log(it->path().string()); !why.empty())
          diag.report({Severity::kNote, Problem::kUnknownRecord, it->path().string(), 0, 0,
                       fmt::format("not read from the directory: {}; name it to read it as a log anyway", why)});
        else
          found.push_back(it->path().string());
      } else if (const auto undo = undo_compression(fname); !undo.empty()) {
        // A log compressed another way than gzip: a rank's log, not read.
        diag.report({Severity::kError, Problem::kUnreadable, it->path().string(), 0, 0,
                     fmt::format("a log compressed in a format stepprof does not read (it reads plain text and "
                                 "gzip): decompress it first (`{} FILE`), or recompress it with gzip",
                                 undo)});
      } else {
        diag.report({Severity::kNote, Problem::kUnknownRecord, it->path().string(), 0, 0,
                     "not read from the directory: logs end in .jsonl, .ndjson, .log or .json (optionally .gz); "
                     "name a markdown-table log explicitly to read it"});
      }
    }
    if (ec) diag.report({Severity::kError, Problem::kUnreadable, in, 0, 0, fmt::format("cannot list: {}", ec.message())});
    std::sort(found.begin(), found.end());
    if (found.empty()) diag.report({Severity::kWarning, Problem::kEmptyInput, in, 0, 0, "directory holds no log files"});
    for (const auto& f : found) add(f);
  }
  return files;
}

std::vector<std::string> logs_besides(const std::string& dir, const std::vector<std::string>& files) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  Diagnostics scratch;  // (what else the directory holds is not the writer's business)
  const fs::path base = fs::path(dir).lexically_normal();
  std::vector<std::string> out;
  for (const auto& f : expand_inputs({dir}, scratch)) {
    const fs::path p = fs::path(f).lexically_normal();
    if (std::none_of(files.begin(), files.end(), [&](const std::string& w) { return fs::path(w).lexically_normal() == p; }))
      out.push_back(p.lexically_relative(base).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Dataset read_logs(const std::vector<std::string>& inputs, const ReadOptions& options, Diagnostics& diag) {
  Reader reader(options, diag);
  Dataset data = reader.run(inputs);
  detail::check_dataset(data, diag);
  return data;
}

}  // namespace stepprof
