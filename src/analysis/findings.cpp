#include "stepprof/analysis/findings.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "../util/rank_numbers.hpp"
#include "stepprof/analysis/stage_peers.hpp"
#include "stepprof/schema.hpp"

namespace stepprof {
namespace {

std::string join_ints(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += i + 1 == v.size() ? " or " : ", ";
    s += std::to_string(v[i]);
  }
  return s;
}

// A time for a finding's text: `digits` decimals from 1 ms up, two significant digits
// below (a CPU example's 0.043 ms per frame read "0.0 ms").
std::string ms_text(double v, int digits) {
  if (v == 0 || std::fabs(v) >= 1) return fmt::format("{:.{}f}", v, digits);
  return fmt::format("{:.2g}", v);
}

// A rank's time in the cross-rank findings: whole ms from 10 ms up, two significant digits
// below (own work of 2.0 against 2.4 ms read "2 ms against 2 ms"; 0.46 ms at stake "0 ms").
std::string rank_ms_text(double v) {
  if (v == 0 || std::fabs(v) >= 10) return fmt::format("{:.0f}", v);
  return fmt::format("{:.2g}", v);
}

std::string ranks_text(const std::vector<std::int64_t>& v) {
  return fmt::format("{} {}", v.size() == 1 ? "rank" : "ranks", detail::rank_numbers(v));
}

std::string capitalized(std::string s) {
  if (!s.empty() && s.front() >= 'a' && s.front() <= 'z') s.front() = static_cast<char>(s.front() - 'a' + 'A');
  return s;
}

const WaitingResult* first_waiting(const std::vector<WaitingResult>& w) {
  for (const auto& x : w)
    if (x.waiting) return &x;
  return nullptr;
}

void slow_paths(const FindingInputs& in, std::vector<Finding>& out) {
  const WaitingResult* wait = first_waiting(in.waiting);
  for (const auto& g : in.paths.groups) {
    if (!g.saving_ms_per_update || *g.saving_ms_per_update <= 0 || g.slow.empty()) continue;
    const PathCost* slow = nullptr;
    const PathCost* fast = nullptr;
    for (const auto& p : g.paths) {
      if (p.region == g.slow) slow = &p;
      if (p.region == g.fast) fast = &p;
    }
    const bool per_frame = g.unit == "frame";
    const double sc = *(per_frame ? slow->ms_per_frame : slow->ms_per_sample);
    const double fc = *(per_frame ? fast->ms_per_frame : fast->ms_per_sample);
    Finding f;
    f.kind = "slow-path";
    f.subject = g.group;
    // With several ranks' logs the mean over every rank's updates shrinks as 1/ranks while
    // a fallback on one rank holds up the whole step: the time at stake is per step, the
    // largest excess of a rank in it (an upper bound: it counts when that rank is the one
    // the step waits for).
    const bool several = in.cross_rank.ranks > 1 && g.step_saving_at_most_ms;
    f.ms_per_update = several ? *g.step_saving_at_most_ms : *g.saving_ms_per_update;
    f.title = fmt::format("{} of {} {}updates ran the slow path {} ({:.2f}x the cost per {} of {})",
                          g.updates_with_slow, g.updates, several ? "rank " : "", g.slow, *g.slow_over_fast, g.unit,
                          g.fast);
    // (An audit took 58.4 ms per frame for a measured figure: its only rank measured 45.8.)
    f.evidence = fmt::format("{}: {} ms per {}, {}: {} ms per {}{}", g.slow, ms_text(sc, 1), g.unit, g.fast,
                             ms_text(fc, 1), g.unit,
                             in.cross_rank.ranks > 1
                                 ? " (each rank's work weighted by its speed on the path most updates ran, over the "
                                   "updates around where its speed changed, so that a slower rank does not make a "
                                   "path look costly)"
                                 : "");
    if (several)
      f.evidence += fmt::format("; time at stake: up to {} ms per step (the largest excess of a rank in each step, "
                                "when the step waits for that rank; {} ms per rank and update over all ranks)",
                                ms_text(f.ms_per_update, 1), ms_text(*g.saving_ms_per_update, 1));
    // Frame counts explain the slow path when a frame count comes only with it, or when
    // what took it mixed frame counts more often than what took only the fast path: per
    // micro-batch where the per-micro-batch detail says which path each took (with
    // gradient accumulation, per update every update can look mixed), else per update.
    // When the log says frame counts and neither holds, grouping or padding frames would
    // not help: the advice says to look elsewhere; when it has none, it says so.
    const auto& mm = g.microbatch_mixing;
    auto more_often = [](std::size_t a, std::size_t n, std::size_t b, std::size_t m) {
      return a > 0 && static_cast<double>(a) / static_cast<double>(n) > static_cast<double>(b) / static_cast<double>(m);
    };
    bool frames_known = false, frames_explain = false;
    if (mm) {
      frames_known = true;
      frames_explain = !mm->frame_counts_only_with_slow.empty() || more_often(mm->slow_mixed, mm->slow, mm->fast_mixed, mm->fast);
      if (!mm->frame_counts_only_with_slow.empty())
        f.evidence += fmt::format("; every micro-batch with a sample of {} frames took {}",
                                  join_ints(mm->frame_counts_only_with_slow), g.slow);
      f.evidence += fmt::format("; {} of {} micro-batches that took it mixed frame counts, {} of {} that took {} did",
                                mm->slow_mixed, mm->slow, mm->fast_mixed, mm->fast, g.fast);
    } else if (!g.frame_counts.empty()) {
      if (!g.frame_counts_only_with_slow.empty() && g.updates_fast_only > 0)
        f.evidence += fmt::format("; every update with a sample of {} frames ran {}",
                                  join_ints(g.frame_counts_only_with_slow), g.slow);
      if (g.updates_with_slow > 0 && g.updates_fast_only > 0) {
        f.evidence += fmt::format("; {} of {} such updates mixed frame counts, {} of {} fast-only updates did",
                                  g.slow_updates_mixed_frames, g.updates_with_slow, g.fast_only_updates_mixed_frames,
                                  g.updates_fast_only);
        frames_known = true;
        frames_explain = !g.frame_counts_only_with_slow.empty() ||
                         more_often(g.slow_updates_mixed_frames, g.updates_with_slow, g.fast_only_updates_mixed_frames,
                                    g.updates_fast_only);
      }
    }
    // Micro-batch lengths (padded, else the longest sample's tokens) that tell the paths
    // apart: a length limit selects the slow path (a Python user's path chosen by padded
    // length > 120 got "the log has no frame counts to tell").
    const auto& ls = g.length_split;
    if (ls && ls->apart)
      f.evidence += fmt::format("; by micro-batch length (padded, else the longest sample's tokens): {}",
                                length_split_text(g, true));
    else if (ls)
      f.evidence += fmt::format("; micro-batch lengths do not tell them apart ({} {}..{} tokens, {} {}..{})", g.slow,
                                ls->slow_min, ls->slow_max, g.fast, ls->fast_min, ls->fast_max);
    if (!g.costliest.empty())
      f.evidence += fmt::format("; it cost most in {}", slow_updates_text(g.costliest, 3));
    if (ls && ls->apart && !frames_explain)
      f.action = fmt::format(
          "send every micro-batch down {}: the micro-batches that took {} are exactly those of {} tokens or {}, so a "
          "length limit selects it (a kernel's or a buffer's maximum sequence length, say): raise that limit if {} "
          "can take them, or cap or split those micro-batches' length (bucket samples by length in the sampler)",
          g.fast, g.slow, length_limit(*ls).first, length_limit(*ls).second, g.fast);
    else if (g.frame_counts.empty() && !mm)
      f.action = fmt::format(
          "send every micro-batch down {}: find what selects {} where the code chooses between them (a size limit, "
          "a flag, a fallback condition); {}",
          g.fast, g.slow,
          g.frames_logged ? "the log's frame counts are in micro-batches that do not say which path they took (or "
                            "list frames for one path only), so they cannot tell whether frames do"
                          : "the log has no frame counts (frame_histogram_add(), or microbatch() with frames) to tell "
                            "whether they do");
    else if (frames_known && !frames_explain)
      f.action = fmt::format(
          "send every micro-batch down {}: frame counts do not tell the {} {} from the others, so "
          "find what else selects it (a size limit, a flag, a fallback condition) where the code chooses between "
          "them",
          g.fast, mm ? "micro-batches that took" : "updates that ran", g.slow);
    else
      f.action = fmt::format(
          "send every micro-batch down {}: group samples by frame count in the sampler, or pad frames up to the "
          "micro-batch maximum",
          g.fast);
    if (wait && in.waiting.size() == 1)
      f.action += fmt::format(
          "; {} already waits about {:.0f} ms per update for other ranks, so the update time falls only if "
          "the slowest ranks gain as well",
          wait->rank ? fmt::format("rank {}", *wait->rank) : std::string("this rank"), wait->wait_ms->median);
    out.push_back(std::move(f));
  }
}

// Findings about single ranks: up to kEachUpTo of them each, more as one finding made by
// `group` (they would fill the list and hide every other finding).
template <class Group>
void each_or_grouped(std::vector<Finding>& found, std::vector<Finding>& out, Group group) {
  constexpr std::size_t kEachUpTo = 3;
  if (found.size() <= kEachUpTo) {
    for (auto& f : found) out.push_back(std::move(f));
    return;
  }
  Finding g;
  g.kind = found.front().kind;
  for (const auto& f : found) g.ms_per_update += f.ms_per_update;
  const auto worst = std::max_element(found.begin(), found.end(), [](const Finding& a, const Finding& b) {
    return a.ms_per_update < b.ms_per_update;
  });
  group(g, *worst);
  out.push_back(std::move(g));
}

// A rank of the slow group (cross_rank.hpp, SlowGroup): its time at stake, a mean over
// every update, holds its stretches of falling behind too.
bool in_group(const SlowGroup* g, std::int64_t rank) {
  return g && std::binary_search(g->slow.begin(), g->slow.end(), rank);
}

bool in_slow_group(const CrossRankResult& x, std::int64_t rank) {
  return in_group(x.slow_group ? &*x.slow_group : nullptr, rank);
}

// True when update `step` lies in one of `rank`'s stretches that are findings of their
// own (straggler episodes shorter than half the run, of a rank outside the slow group; a
// longer one is the straggler finding's own story, see straggler_episodes).
// The steps the episodes are found in: the aligned ones and those after a rank's log
// ended, compared among the ranks still logging (the denominator of their time at stake).
std::size_t episode_steps(const CrossRankResult& x) { return x.steps_aligned + x.steps_after_end; }

bool in_own_episode(const CrossRankResult& x, std::int64_t rank, std::int64_t step) {
  if (in_slow_group(x, rank)) return false;
  return std::any_of(x.episodes.begin(), x.episodes.end(), [&](const StragglerEpisode& e) {
    return e.rank == rank && 2 * e.updates < episode_steps(x) && e.first_step <= step && step <= e.last_step;
  });
}

// "; ... are in this time at stake": the slow group's stretches of falling behind, which
// are not findings of their own (they would count their updates twice); empty if none.
std::string group_stretches_text(const CrossRankResult& x) {
  std::vector<std::string> parts;
  for (const auto& e : x.episodes)
    if (in_slow_group(x, e.rank) && 2 * e.updates < episode_steps(x))
      parts.push_back(fmt::format("rank {} in steps {}..{}", e.rank, e.first_step, e.last_step));
  if (parts.empty()) return {};
  return fmt::format("; its stretches of falling further behind ({}) are in this time at stake, not findings of "
                     "their own",
                     fmt::join(parts, ", "));
}

// The updates a straggler finding about `r` judges: the aligned updates outside its own
// episodes (those are priced by the episode findings; counting them here too made one
// stretch of 60 slow updates of 200 both an episode and a straggler of the whole run).
struct OutsideEpisodes {
  std::size_t updates = 0;      ///< aligned updates outside r's own episodes [count]
  std::vector<double> margins;  ///< its margins over the median rank where it was the slowest [ms]
  std::size_t skipped = 0;      ///< aligned updates inside them [count]
};
OutsideEpisodes outside_episodes(const CrossRankResult& x, const RankStraggler& r) {
  OutsideEpisodes o;
  for (const auto& u : x.per_update) {
    if (in_own_episode(x, r.rank, u.step)) {
      ++o.skipped;
      continue;
    }
    ++o.updates;
    if (u.slowest_rank == r.rank) o.margins.push_back(u.margin_ms);
  }
  return o;
}

// True when the straggler finding speaks of `r`: flagged by score, or the slowest rank in
// most updates outside its own episodes, more often than chance would make it (with two
// ranks one of them is the slowest in most updates: 102 of 200 is chance), by at least
// 5 % of its own work (by a hair is chance too). Chance: k ranks equally fast make a rank
// the slowest in n/k of n updates, give or take sqrt(n (1/k) (1 - 1/k)) (binomial); more
// than 3 of those is not.
// Either way its lag (behind the fastest rank's own work, or behind the median rank when
// it is the slowest) must be at least kMaterialLag of its update (own work plus
// communication, medians): a rank whose own work is 0.07 against 0.05 ms of 100 ms
// updates scores 0.71, a straggler by NVIDIA's definition, with nothing to gain.
constexpr double kMaterialLag = 0.01;

bool straggler_finding_for(const CrossRankResult& x, const RankStraggler& r) {
  if (x.steps_aligned < kMinStragglerUpdates) return false;  // a slow step, not a slow rank
  const double update_ms = r.compute_ms.median + (r.comm_ms ? r.comm_ms->median : 0.0);
  const double lag_behind_fastest = r.compute_ms.median * (1 - r.relative_score);
  if (r.straggler && lag_behind_fastest >= kMaterialLag * update_ms) return true;
  const OutsideEpisodes o = outside_episodes(x, r);
  const double n = static_cast<double>(o.updates), p = 1.0 / static_cast<double>(std::max<std::size_t>(x.per_rank.size(), 1));
  const double slowest = static_cast<double>(o.margins.size());
  if (2 * slowest <= n || slowest <= n * p + 3 * std::sqrt(n * p * (1 - p))) return false;
  const auto margin = summarize(o.margins);
  // (With two ranks the margin over their mean is half the gap: the gap, as stragglers() prices it.)
  const double lag = margin ? margin->median * (x.per_rank.size() == 2 ? 2.0 : 1.0) : 0.0;
  return margin && lag >= 0.05 * r.compute_ms.median && lag >= kMaterialLag * update_ms;
}

bool straggler_finding_for(const CrossRankResult& x, std::int64_t rank) {
  return std::any_of(x.per_rank.begin(), x.per_rank.end(),
                     [&](const RankStraggler& r) { return r.rank == rank && straggler_finding_for(x, r); });
}

// The typical update of the ranks compared: own work plus communication, the median over
// ranks of their medians [ms]; 0 when none.
double typical_update_ms(const CrossRankResult& x) {
  std::vector<double> update_ms;
  for (const auto& r : x.per_rank) update_ms.push_back(r.compute_ms.median + (r.comm_ms ? r.comm_ms->median : 0.0));
  return median(update_ms).value_or(0.0);
}

// The slow group (cross_rank.hpp, SlowGroup) a slow-ranks finding is made of: a group of
// two or more ranks (the straggler finding then leaves its ranks to it: their lags are
// one time at stake, not one each), or of one rank the straggler finding does not name.
// Not when its time at stake is below kMaterialLag of the typical update (own work plus
// communication, the median over ranks of their medians).
const SlowGroup* reported_slow_group(const CrossRankResult& x) {
  if (!x.available || !x.slow_group) return nullptr;
  const SlowGroup& g = *x.slow_group;
  if (g.slow.size() == 1 && straggler_finding_for(x, g.slow.front())) return nullptr;
  if (g.at_stake_ms < kMaterialLag * typical_update_ms(x)) return nullptr;
  return &g;
}

// Own work is wall_ms minus the communication region: its compute there is not seen.
std::string own_work_caveat(const CrossRankResult& x) {
  const std::string skew = x.window_skew ? "; " + describe_window_skew(*x.window_skew) : std::string();
  if (x.comm_region.empty()) return skew;
  return fmt::format("; own work is wall_ms minus {0}: a lag inside {0} (a backward pass that overlaps its "
                     "all-reduce) is not counted: where {0} holds compute, these figures leave that part of the lag "
                     "out{1}",
                     x.comm_region, skew);
}

// The values of config field `d` other than `value`, listed: at most 5, then a count (a
// node's hostname against 1,023 others).
std::string other_values(const ConfigDifference& d, const std::string& value) {
  constexpr std::size_t kOthersUpTo = 5;
  std::vector<std::string> others;
  for (const auto& [v, r] : d.values)
    if (v != value && others.size() < kOthersUpTo) others.push_back(v.empty() ? std::string("absent") : v);
  std::string listed = fmt::format("{}", fmt::join(others, ", "));
  if (d.values.size() - 1 > others.size())
    listed += fmt::format(" and {} other values", d.values.size() - 1 - others.size());
  return listed;
}

// A config field whose value `slow` (ascending) alone have, all of them the same (e.g.
// a pipeline stage): the lag may be the work given to them, not their hardware. Empty
// when there is none.
struct SharedConfig {
  std::string key, value, others;
};
std::optional<SharedConfig> config_only_on(const FindingInputs& in, const std::vector<std::int64_t>& slow) {
  if (!in.run) return std::nullopt;
  for (const auto& d : in.run->config_differences) {
    // A field that sets each rank apart (a hostname, a pid, a trace id) sets every
    // straggler apart too: only one whose other values are shared by several ranks.
    const bool shared_elsewhere = std::any_of(d.values.begin(), d.values.end(), [&](const auto& v) {
      return v.second != slow && v.second.size() > 1;
    });
    if (!shared_elsewhere) continue;
    for (const auto& [value, ranks] : d.values) {
      if (value.empty() || ranks != slow) continue;
      return SharedConfig{d.key, value, other_values(d, value)};
    }
  }
  return std::nullopt;
}

// A config value (of a field other than `skip`, whose values are each held by two or more
// ranks: a node, not a hostname per rank) that every rank of `ranks` (ascending, two or
// more) has, and more than half of the compared ranks with it do (`of` of them): ranks
// that fell behind on one node, some of its ranks found (a slow node's ranks in 8 stages
// of 3, each compared with its stage's peers: 5 of its 8 were). nullopt when none does.
struct ConfigHolding {
  std::string key, value, others;
  std::size_t of = 0;  ///< the compared ranks with that value [count]
};
std::optional<ConfigHolding> config_value_holding(const FindingInputs& in, const std::vector<std::int64_t>& ranks,
                                                  const std::string& skip) {
  if (!in.run || ranks.size() < 2) return std::nullopt;
  std::vector<std::int64_t> compared;
  for (const auto& r : in.cross_rank.per_rank) compared.push_back(r.rank);
  std::sort(compared.begin(), compared.end());
  // (Fields naming hardware first: a node_rank before a dp_rank that splits the ranks alike.)
  std::vector<const ConfigDifference*> fields;
  for (const auto& d : in.run->config_differences) fields.push_back(&d);
  std::stable_partition(fields.begin(), fields.end(), [](const ConfigDifference* d) {
    return d->key.find("node") != std::string::npos || d->key.find("host") != std::string::npos;
  });
  for (const ConfigDifference* field : fields) {
    const ConfigDifference& d = *field;
    if (d.key == skip || std::any_of(d.values.begin(), d.values.end(), [](const auto& v) { return v.second.size() < 2; }))
      continue;
    for (const auto& [value, members] : d.values) {
      if (value.empty() || !std::includes(members.begin(), members.end(), ranks.begin(), ranks.end())) continue;
      std::vector<std::int64_t> with;
      std::set_intersection(members.begin(), members.end(), compared.begin(), compared.end(), std::back_inserter(with));
      if (2 * ranks.size() <= with.size()) continue;
      return ConfigHolding{d.key, value, other_values(d, value), with.size()};
    }
  }
  return std::nullopt;
}

// Slow ranks that a config field splits in two kinds (e.g. `stage` in a pipeline-parallel
// job): `whole`, the ranks of values that only slow ranks have (a stage heavier by design),
// and `within`, slow ranks of values that fast ranks have too (a slow GPU in a stage whose
// other ranks keep up). A slow-ranks group of both kinds mixes two causes: the helper's
// TP x PP x DP job, a 1.2x GPU in stage 1 and a last stage 1.5x heavier by design, was
// told to find what ranks 4, 5, 12..15 share.
struct ConfigSplit {
  std::string key;
  std::vector<std::string> whole_values;  ///< as written in the config, ascending by lowest rank
  std::vector<std::int64_t> whole, within, within_peers;  ///< ranks, ascending; peers: the fast ranks of `within`'s values
};

// The field with values held by two or more ranks each that puts the most of `slow`
// (ascending) in `whole` and some in `within` (on a tie, the fewer `within` values), or
// else all of `slow` in `whole` with two or more values and some compared rank outside
// (a pipeline whose first and last stages are both heavier by design: ranks 0, 3, 4, 7
// were told to look at their nodes or GPUs); nullopt when none does. A value absent
// from a rank's config is never `whole`.
std::optional<ConfigSplit> config_split(const FindingInputs& in, const std::vector<std::int64_t>& slow) {
  if (!in.run) return std::nullopt;
  // (Only the ranks compared: a peer left out for a short log has no own work to be fast with.)
  std::vector<std::int64_t> compared;
  for (const auto& r : in.cross_rank.per_rank) compared.push_back(r.rank);
  std::sort(compared.begin(), compared.end());
  std::optional<ConfigSplit> best;
  std::size_t best_within_values = 0;
  std::vector<std::int64_t> ranks;
  for (const auto& d : in.run->config_differences) {
    ConfigSplit s;
    s.key = d.key;
    std::size_t within_values = 0;
    bool usable = true;
    for (const auto& [value, all_ranks] : d.values) {
      ranks.clear();
      std::set_intersection(all_ranks.begin(), all_ranks.end(), compared.begin(), compared.end(),
                            std::back_inserter(ranks));
      std::vector<std::int64_t> in_slow;
      std::set_intersection(ranks.begin(), ranks.end(), slow.begin(), slow.end(), std::back_inserter(in_slow));
      if (in_slow.empty()) continue;
      // (A value of one rank says nothing of design against hardware: a hostname, a pid;
      // nor does the field's absence, which is no value to share.)
      if (ranks.size() < 2 || value.empty()) {
        usable = false;
        break;
      }
      if (in_slow.size() == ranks.size()) {
        s.whole_values.push_back(value);
        s.whole.insert(s.whole.end(), ranks.begin(), ranks.end());
      } else {
        ++within_values;
        s.within.insert(s.within.end(), in_slow.begin(), in_slow.end());
        std::set_difference(ranks.begin(), ranks.end(), in_slow.begin(), in_slow.end(),
                            std::back_inserter(s.within_peers));
      }
    }
    const bool several_whole = s.within.empty() && s.whole_values.size() >= 2 && s.whole.size() < compared.size();
    if (!usable || s.whole.empty() || (s.within.empty() && !several_whole)) continue;
    std::sort(s.whole.begin(), s.whole.end());
    std::sort(s.within.begin(), s.within.end());
    std::sort(s.within_peers.begin(), s.within_peers.end());
    if (!best || s.whole.size() > best->whole.size() ||
        (s.whole.size() == best->whole.size() && within_values < best_within_values)) {
      best = std::move(s);
      best_within_values = within_values;
    }
  }
  return best;
}

// The words that say a finding's time at stake is what balancing a pipeline's stages buys
// (price_stage_balance): the stage-straggler finding reads them (that price leaves a slow
// GPU's lag out, where the lead had held it).
constexpr std::string_view kBalanceStake = "time at stake: what balancing the pipeline stages buys at best";

// Slow ranks that are every rank of one or more values of the pipeline-stage field
// (pipeline_stage_field), `key`: the stages' work is unbalanced, and moving layers between
// stages buys at best the heaviest stage's own work less the mean over the stages (their
// total spread evenly), not the slow ranks' lead over the light stages (a helper's 120,
// 80, 80, 130 ms stages: the finding said 49 ms, what-if balanced-ranks 29; balance buys
// at most 27.5). Sets f's time at stake to that and says so.
void price_stage_balance(const FindingInputs& in, const std::string& key, const std::vector<std::int64_t>& slow,
                         Finding& f) {
  if (!in.run) return;
  const ConfigDifference* stage = pipeline_stage_field(in.run->config_differences);
  if (!stage || stage->key != key) return;
  // Another field whose value's ranks are the slow ones exactly (a node that holds one
  // stage): hardware or work, the finding cannot tell; the lead stays its price.
  std::vector<std::int64_t> compared;
  for (const auto& r : in.cross_rank.per_rank) compared.push_back(r.rank);
  std::sort(compared.begin(), compared.end());
  const bool also_other = std::any_of(
      in.run->config_differences.begin(), in.run->config_differences.end(), [&](const ConfigDifference& d) {
        return d.key != key && std::any_of(d.values.begin(), d.values.end(), [&](const auto& v) {
                 std::vector<std::int64_t> with;
                 std::set_intersection(v.second.begin(), v.second.end(), compared.begin(), compared.end(),
                                       std::back_inserter(with));
                 return !v.first.empty() && with == slow;
               });
      });
  std::vector<double> stage_ms;
  std::vector<std::string> shown;
  for (const auto& [value, members] : stage->values) {
    std::vector<double> v;
    for (const auto& r : in.cross_rank.per_rank)
      if (std::binary_search(members.begin(), members.end(), r.rank)) v.push_back(r.compute_ms.median);
    if (value.empty() || v.empty()) return;  // (a rank without the field, or a stage not compared)
    stage_ms.push_back(*median(v));
    if (shown.size() < 8) shown.push_back(fmt::format("{} {}: {} ms", key, value, rank_ms_text(stage_ms.back())));
  }
  if (stage_ms.size() < 2) return;
  const double mean = std::accumulate(stage_ms.begin(), stage_ms.end(), 0.0) / static_cast<double>(stage_ms.size());
  const double heaviest = *std::max_element(stage_ms.begin(), stage_ms.end());
  const double saving = std::max(0.0, heaviest - mean);
  if (saving >= f.ms_per_update) return;
  if (also_other) {
    f.evidence += fmt::format(
        "; another config field sets the same ranks apart, so their lead may be their hardware: if it is the "
        "stages' work, balancing them buys at most {} ms (the heaviest stage's own work, {} ms, less the mean over "
        "the {} stages, {} ms)",
        rank_ms_text(saving), rank_ms_text(heaviest), stage_ms.size(), rank_ms_text(mean));
    return;
  }
  f.evidence += fmt::format(
      "; {}, the heaviest stage's own work ({} ms) less the mean over the {} stages ({} ms: their work spread "
      "evenly; layers move whole, so less), not the slow ranks' lead over the light stages ({} ms); stage medians "
      "{}{}",
      kBalanceStake, rank_ms_text(heaviest), stage_ms.size(), rank_ms_text(mean), rank_ms_text(f.ms_per_update),
      fmt::join(shown, ", "), stage_ms.size() > shown.size() ? ", ..." : "");
  f.ms_per_update = saving;
}

// True when `c`'s slow ranks beside fast ranks of their own value (none, or each slower
// than its pipeline stage's other ranks: the stage-straggler finding prices those) leave
// the whole values' work to balance.
bool within_said_by_stage(const CrossRankResult& x, const ConfigSplit& c) {
  if (c.within.empty()) return true;
  return c.key == x.stage_field && std::all_of(c.within.begin(), c.within.end(), [&](std::int64_t r) {
           return std::any_of(x.stage_slow.begin(), x.stage_slow.end(), [&](const auto& s) { return s.rank == r; });
         });
}

// The evidence and action for a slow-ranks group that `c` splits in two kinds.
void say_config_split(const CrossRankResult& x, const ConfigSplit& c, Finding& f) {
  const auto median_of = [&](const std::vector<std::int64_t>& ranks) {
    std::vector<double> v;
    for (const auto& r : x.per_rank)
      if (std::binary_search(ranks.begin(), ranks.end(), r.rank)) v.push_back(r.compute_ms.median);
    return median(v).value_or(0.0);
  };
  const RankStraggler* worst = nullptr;  // the slowest of `within` (its partners wait for it)
  for (const auto& r : x.per_rank)
    if (std::binary_search(c.within.begin(), c.within.end(), r.rank) &&
        (!worst || r.compute_ms.median > worst->compute_ms.median))
      worst = &r;
  const std::string values = fmt::format("{} = {}", c.key, fmt::join(c.whole_values, " or "));
  if (c.within.empty()) {  // (only whole values: the work those values are given, or their hardware)
    std::vector<std::int64_t> others;
    for (const auto& r : x.per_rank)
      if (!std::binary_search(c.whole.begin(), c.whole.end(), r.rank)) others.push_back(r.rank);
    std::sort(others.begin(), others.end());
    f.evidence += fmt::format("; by {}: {} are every rank with {} ({} ms own work, median), and no other rank is "
                              "slow ({}: {} ms)",
                              c.key, ranks_text(c.whole), values, rank_ms_text(median_of(c.whole)),
                              ranks_text(others), rank_ms_text(median_of(others)));
    // (Ranks slower than their stage's peers among them, CrossRankResult::stage_slow, have
    // a finding of their own.)
    std::vector<std::int64_t> beside;
    if (c.key == x.stage_field)
      for (const auto& r : x.stage_slow)
        if (std::binary_search(c.whole.begin(), c.whole.end(), r.rank)) beside.push_back(r.rank);
    std::sort(beside.begin(), beside.end());
    f.action = fmt::format("{} sets {} apart: if it sets the work a rank does (pipeline stages, model shards), that "
                           "lag is the work: balance it (move layers between stages, re-shard), as {}; if it names "
                           "nodes or devices, look at that hardware",
                           values, ranks_text(c.whole),
                           beside.empty() ? fmt::format("no rank is slow beside others with the same {}", c.key)
                                          : fmt::format("every rank with that {} is slow ({} also slower than the "
                                                        "others of {} stage: the stage-straggler finding)",
                                                        c.key, ranks_text(beside), beside.size() == 1 ? "its" : "their"));
    return;
  }
  const bool one_within = c.within.size() == 1;
  f.evidence += fmt::format(
      "; by {}: {} {} every rank with {} ({} ms own work, median), while {} {} slower than {} with the same {} "
      "({} against {} ms)",
      c.key, ranks_text(c.whole), c.whole.size() == 1 ? "is" : "are", values, rank_ms_text(median_of(c.whole)),
      ranks_text(c.within), one_within ? "is" : "are", ranks_text(c.within_peers), c.key,
      rank_ms_text(median_of(c.within)), rank_ms_text(median_of(c.within_peers)));
  f.action = fmt::format(
      "two causes may be mixed here. {} sets {} apart: if it sets the work a rank does (a pipeline stage, a model "
      "shard), that lag is the work: balance it (move layers between stages, re-shard). {} {} behind {}, which "
      "have the same {}: unless the same {} means different work, look at {} (model, clocks, temperature, other "
      "processes){}",
      values, ranks_text(c.whole), capitalized(ranks_text(c.within)), one_within ? "is" : "are",
      ranks_text(c.within_peers), c.key, c.key, one_within ? "its node or GPU" : "their nodes or GPUs",
      !one_within && worst ? fmt::format(", rank {} first: it has the most own work of them (ranks that wait for each "
                                         "other inside their work, as tensor-parallel partners do, are slow together)",
                                         worst->rank)
                           : std::string());
}

// True when `rank` is one the cross-rank findings name as behind in any of `steps`: a
// straggler, one of the slower ranks, or in a stretch of falling behind that covers one.
bool behind_in(const CrossRankResult& x, std::int64_t rank, const std::vector<std::int64_t>& steps) {
  if (straggler_finding_for(x, rank) || in_group(reported_slow_group(x), rank)) return true;
  return std::any_of(x.episodes.begin(), x.episodes.end(), [&](const StragglerEpisode& e) {
    return e.rank == rank && std::any_of(steps.begin(), steps.end(), [&](std::int64_t step) {
             return e.first_step <= step && step <= e.last_step;
           });
  });
}

// How many of `steps` had a rank the cross-rank findings name as behind: all of them with
// a straggler or a slow group, else those inside a stretch of falling behind.
std::size_t steps_with_a_rank_behind(const CrossRankResult& x, const std::vector<std::int64_t>& steps) {
  const bool throughout =
      reported_slow_group(x) != nullptr ||
      std::any_of(x.per_rank.begin(), x.per_rank.end(), [&](const RankStraggler& r) { return straggler_finding_for(x, r); });
  if (throughout) return steps.size();
  return static_cast<std::size_t>(std::count_if(steps.begin(), steps.end(), [&](std::int64_t step) {
    return std::any_of(x.episodes.begin(), x.episodes.end(),
                       [&](const StragglerEpisode& e) { return e.first_step <= step && step <= e.last_step; });
  }));
}

// The other ranks' samples per update (median of their medians) when rank `r` processed
// at least 10 % more per update, by the samples counter; nullopt otherwise.
std::optional<double> more_samples_than_others(const CrossRankResult& x, const RankStraggler& r) {
  if (!r.samples_per_update) return std::nullopt;
  std::vector<double> others;
  for (const auto& o : x.per_rank)
    if (o.rank != r.rank && o.samples_per_update) others.push_back(*o.samples_per_update);
  const auto typical = median(others);
  if (!typical || !(*typical > 0) || !(*r.samples_per_update >= 1.1 * *typical)) return std::nullopt;
  return typical;
}

// The evidence and the first part of the action for SharedConfig `c` of `who`.
void say_shared_config(const SharedConfig& c, const std::string& who, bool one, Finding& f) {
  f.evidence += fmt::format("; {} alone {} {} = {} in {} config (the other ranks: {})", who, one ? "has" : "have",
                            c.key, c.value, one ? "its" : "their", c.others);
  f.action = fmt::format("{} = {} sets {} apart: if it sets the work a rank does (a pipeline stage, a model shard), "
                         "the lag is that work: balance it (move layers between stages, re-shard); if it names a "
                         "node or device, look at that hardware; otherwise, {}",
                         c.key, c.value, one ? "it" : "them", f.action);
}

void stragglers(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  if (!x.available || !x.margin_ms) return;
  const std::size_t n = x.steps_aligned;
  const SlowGroup* group = reported_slow_group(x);
  std::vector<Finding> found;
  std::vector<std::int64_t> ranks;
  for (const auto& r : x.per_rank) {
    if (!straggler_finding_for(x, r) || in_group(group, r.rank)) continue;
    double others_wait = 0;
    std::size_t others = 0;
    for (const auto& o : x.per_rank)
      if (o.rank != r.rank) {
        others_wait += o.wait_ms.median;
        ++others;
      }
    // Time at stake: its typical margin (median outside its own episodes, whose excess
    // beyond the typical margin those findings price) in every update it was the slowest.
    const OutsideEpisodes outside = outside_episodes(x, r);
    const std::size_t slowest_in = outside.margins.size();
    const auto margin = summarize(outside.margins);
    Finding f;
    f.kind = "straggler";
    f.subject = fmt::format("rank {}", r.rank);
    // With two ranks the median rank is their mean, half the gap that the other rank waits
    // and that the step loses (an audit: 1,706 ms at stake where the evidence said the
    // other rank waits 3,412): the gap to the other rank, as the stretches price it.
    const bool two = x.per_rank.size() == 2;
    const double gap = margin ? margin->median * (two ? 2.0 : 1.0) : 0.0;
    f.ms_per_update = gap * static_cast<double>(r.times_slowest) / static_cast<double>(n);
    // A slow group of this rank alone (cross_rank.hpp): its time at stake is the update's
    // gain without the rank's slowdown; the margin over the median rank misjudges it (with
    // two ranks the median is their mean: half the gap).
    const bool alone = x.slow_group && x.slow_group->slow.size() == 1 && x.slow_group->slow.front() == r.rank;
    if (alone) f.ms_per_update = x.slow_group->at_stake_ms;
    f.title = r.times_slowest == 0
                  ? fmt::format("rank {} is a straggler by its relative score ({:.2f}) but never the slowest rank: a "
                                "slower one always is",
                                r.rank, r.relative_score)
              : outside.skipped == 0
                  ? fmt::format("rank {} is {}the slowest rank in {} of {} updates (relative score {:.2f})", r.rank,
                                r.straggler ? "a straggler: " : "", r.times_slowest, n, r.relative_score)
                  : fmt::format("rank {} is {}the slowest rank in {} of {} updates outside its stretches of "
                                "falling behind (relative score {:.2f})",
                                r.rank, r.straggler ? "a straggler: " : "", slowest_in, outside.updates,
                                r.relative_score);
    f.evidence = fmt::format(
        "its own work (wall_ms minus {}) takes {} ms per update (median) against {} ms on the fastest rank; {}",
        x.comm_region.empty() ? std::string("nothing: no communication region") : x.comm_region,
        rank_ms_text(r.compute_ms.median), rank_ms_text(r.compute_ms.median * r.relative_score),
        margin ? fmt::format("when it is the slowest it is {} ms behind {}; the other ranks wait {} ms "
                             "per update on average (median per rank)",
                             rank_ms_text(gap), two ? "the other rank" : "the median rank",
                             rank_ms_text(others ? others_wait / static_cast<double>(others) : 0.0))
               : std::string("it is never the slowest rank (a slower one always is), so no time is at stake on it "
                             "alone, and what the other ranks wait is for the slower ones"));
    if (outside.skipped > 0)
      f.evidence += fmt::format(
          "; the {} updates of its stretches of falling behind are left out here: they are findings of their own",
          outside.skipped);
    if (alone)
      f.evidence += fmt::format(
                        "; time at stake: how much sooner the slowest rank would finish its own work without this "
                        "rank's lead, mean over updates: {} ms",
                        rank_ms_text(x.slow_group->at_stake_ms)) +
                    group_stretches_text(x);
    f.evidence += own_work_caveat(x);
    f.action = fmt::format(
        "find what differs on rank {}: its data (frames, tokens, code paths in its log), its host or its GPU; "
        "balancing the work across ranks saves the time at stake on every rank",
        r.rank);
    // Where its extra own work is (rank_regions.hpp): a Python user's straggler slept in
    // forward's own code, and the finding said only "find what differs on rank 2".
    // Unless its work is slower in proportion in every region (a GPU 1.5x slow in
    // everything: RankLag::proportional), which the finding says instead.
    std::vector<double> other_work;
    for (const auto& o : x.per_rank)
      if (o.rank != r.rank) other_work.push_back(o.compute_ms.median);
    const double others_work = median(other_work).value_or(0.0);
    if (r.lag.proportional && others_work > 0) {
      f.evidence += fmt::format(
          "; its work is slower throughout, not in one region: its own work is {:.2f}x the other ranks' (median), and "
          "each region that holds most of their time is slower by about as much (its excess within half of the "
          "{:.2f}x over all regions, either way)",
          r.compute_ms.median / others_work, r.lag.ratio);
      f.action = fmt::format(
          "rank {}'s work is slower in proportion, region by region: look at its GPU and host first (clocks and "
          "temperature, power, other processes, its PCIe or NVLink), then its data; balancing the work across ranks "
          "saves the time at stake on every rank",
          r.rank);
    } else if (!r.lag.regions.empty()) {
      std::vector<std::string> where, names;
      for (const auto& l : r.lag.regions) {
        where.push_back(fmt::format(
            "{} +{} ms ({} against {} ms, the other ranks' median){}", l.region, ms_text(l.rank_ms - l.others_ms, 1),
            ms_text(l.rank_ms, 1), ms_text(l.others_ms, 1),
            l.leaf ? std::string()
                   : l.outside_children_ms >= 0.5 * (l.rank_ms - l.others_ms)
                         ? fmt::format(", {} ms of it outside its child regions", ms_text(l.outside_children_ms, 1))
                         : std::string()));
        names.push_back(l.outside_children_ms >= 0.5 * (l.rank_ms - l.others_ms) && !l.leaf
                            ? fmt::format("{}'s own code (outside its child regions)", l.region)
                            : l.region);
      }
      f.evidence += fmt::format("; its extra own work per update (medians) is in {}", fmt::join(where, ", "));
      f.action = fmt::format("look first at {} on rank {} (where its extra time is); {}", fmt::join(names, " and "),
                             r.rank, f.action);
    }
    // More samples per update than the other ranks (its own accumulation or micro-batch
    // size): it is slower by its work. A rank given 3 micro-batches of 4 against the
    // others' 2 was sent to check its host and GPU.
    if (const auto more = more_samples_than_others(x, r)) {
      f.evidence += fmt::format("; it processed {:g} samples per update against {:g} on the other ranks (median of "
                                "their medians, the samples counter)",
                                *r.samples_per_update, *more);
      f.action = fmt::format(
          "rank {} is given more samples per update than the other ranks ({:g} against {:g}): its lag is likely that "
          "work; give every rank the same micro-batch size and accumulation (or balance the batch); if it should "
          "have them, {}",
          r.rank, *r.samples_per_update, *more, f.action);
    }
    if (const auto c = config_only_on(in, {r.rank}); c && x.per_rank.size() > 1)
      say_shared_config(*c, fmt::format("rank {}", r.rank), true, f);
    found.push_back(std::move(f));
    ranks.push_back(r.rank);
  }
  // Many slow ranks are one finding: its time at stake is theirs together, the margins of
  // the updates they were slowest in. When most ranks are slow the median rank is slow
  // too, so the margins understate it: the fast ranks' wait is then the time at stake.
  each_or_grouped(found, out, [&](Finding& g, const Finding& worst) {
    double fast_wait = 0;  // the largest median wait of a rank not listed
    for (const auto& r : x.per_rank)
      if (std::find(ranks.begin(), ranks.end(), r.rank) == ranks.end()) fast_wait = std::max(fast_wait, r.wait_ms.median);
    const bool most = 2 * ranks.size() > x.per_rank.size();
    if (most) g.ms_per_update = std::max(g.ms_per_update, fast_wait);
    g.subject = fmt::format("{} ranks", ranks.size());
    g.title = fmt::format("{} ranks are stragglers or the slowest rank in most updates: ranks {}", ranks.size(),
                          detail::rank_numbers(ranks));
    g.evidence = fmt::format("the worst, {}: {}{}", worst.subject, worst.evidence,
                             most ? fmt::format("; they are most of the {} ranks, so the median rank is slow too: the "
                                                "other ranks wait up to {} ms per update (median)",
                                                x.per_rank.size(), rank_ms_text(fast_wait))
                                  : std::string());
    g.action =
        "find what these ranks share: their nodes or GPUs (one host, one switch?), their data (frames, tokens, code "
        "paths in their logs); balancing the work across ranks saves the time at stake on every rank";
    std::vector<std::int64_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    if (const auto c = config_only_on(in, sorted)) {
      say_shared_config(*c, ranks_text(sorted), false, g);
      price_stage_balance(in, c->key, sorted, g);
    } else if (const auto c2 = config_split(in, sorted)) {
      say_config_split(x, *c2, g);
      if (within_said_by_stage(x, *c2)) price_stage_balance(in, c2->key, sorted, g);
    }
  });
}

// Ranks slower than the others together (cross_rank.hpp, SlowGroup).
void slow_group(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  const SlowGroup* g = reported_slow_group(x);
  if (!g) return;
  double low_score = 1, high_score = 0, fast_wait = 0;
  const RankStraggler* slowest = nullptr;
  std::vector<std::int64_t> flagged;
  for (const auto& r : x.per_rank) {
    if (in_group(g, r.rank)) {
      low_score = std::min(low_score, r.relative_score);
      high_score = std::max(high_score, r.relative_score);
      if (!slowest || r.compute_ms.median > slowest->compute_ms.median) slowest = &r;
      if (straggler_finding_for(x, r)) flagged.push_back(r.rank);
    } else {
      fast_wait = std::max(fast_wait, r.wait_ms.median);
    }
  }
  const std::string comm = x.comm_region.empty() ? std::string("nothing (no communication region)") : x.comm_region;
  Finding f;
  f.kind = "slow-ranks";
  f.subject = ranks_text(g->slow);
  f.ms_per_update = g->at_stake_ms;
  const bool one = g->slow.size() == 1;
  // The slow ranks' own range when they are tiers (1.08x and 1.65x): their median alone,
  // with two ranks their mean, read as if both were 1.36x slower.
  double least_mean = std::numeric_limits<double>::infinity(), most_mean = 0;
  for (const auto& r : x.per_rank)
    if (in_group(g, r.rank)) {
      least_mean = std::min(least_mean, r.compute_ms.mean);
      most_mean = std::max(most_mean, r.compute_ms.mean);
    }
  const bool tiers = !one && g->fast_ms > 0 && most_mean - least_mean >= 0.1 * g->fast_ms;
  const std::string factor =
      tiers ? fmt::format("{:.2f}x to {:.2f}x", least_mean / g->fast_ms, most_mean / g->fast_ms)
            : fmt::format("{:.2f}x", g->slow_ms / g->fast_ms);
  const std::string slow_ms_text =
      tiers ? fmt::format("{} to {}", rank_ms_text(least_mean), rank_ms_text(most_mean)) : rank_ms_text(g->slow_ms);
  f.title = fmt::format("{} of {} ranks {} slower {}: {} {} {} the own work of {} ({} against {} ms "
                        "per update, mean)",
                        g->slow.size(), x.per_rank.size(), one ? "is" : "are",
                        10 * g->updates_apart >= 9 * g->updates ? std::string("throughout")
                                                                : fmt::format("in {} of {} updates", g->updates_apart,
                                                                              g->updates),
                        ranks_text(g->slow), one ? "takes" : "take", factor, ranks_text(g->fast), slow_ms_text,
                        rank_ms_text(g->fast_ms));
  f.evidence = fmt::format(
      "own work = wall_ms minus {}; the ranks' {} own work splits at a gap of {} ms{}; in {} of {} updates the "
      "slow {} median own work exceeds the fast {} by at least half the difference, and in {} {} the slowest rank; {} (a straggler is below {:.2f}){}; time at stake: how much "
      "sooner the slowest rank would finish its own work without the slow {} lead (each keeping its own jitter), "
      "mean over updates (a lower bound if {} also holds compute); a fast rank waits up to {} ms per update "
      "(median)",
      comm, g->split_on == "means" ? "mean" : "median", rank_ms_text(g->gap_ms),
      g->fast.size() == 1
          ? std::string(" (one fast rank: no range of fast ranks to set it against)")
          : fmt::format(", wider than the fast ranks' whole range ({} ms)", rank_ms_text(g->spread_ms)),
      g->updates_apart, g->updates, one ? "rank's" : "ranks'", g->fast.size() == 1 ? "rank's" : "ranks'",
      g->updates_slowest, one ? "it was" : "one of them was",
      one ? fmt::format("its relative score is {:.2f}", low_score)
          : fmt::format("their relative scores are {:.2f} to {:.2f}", low_score, high_score),
      x.threshold,
      flagged.empty() ? std::string()
                      : fmt::format("; {} would be a straggler finding of {} own, counted here", ranks_text(flagged),
                                    flagged.size() == 1 ? "its" : "their"),
      one ? "rank's" : "ranks'", comm, rank_ms_text(fast_wait));
  if (slowest && g->slow.size() > 1)
    f.evidence += fmt::format("; the slowest of them is rank {} ({} ms own work, median)", slowest->rank,
                              rank_ms_text(slowest->compute_ms.median));
  f.evidence += group_stretches_text(x);
  f.action = fmt::format(
      "find what {} {} that {} {}: {} (model, clocks, temperature, other processes), {} data (frames, tokens, "
      "code paths in {}){}; bringing {} to the others' speed saves the time at stake on every rank",
      ranks_text(g->slow), one ? "has" : "share", ranks_text(g->fast), g->fast.size() == 1 ? "lacks" : "lack",
      one ? "its node or GPU" : "their nodes or GPUs", one ? "its" : "their", one ? "its log" : "their logs",
      g->fast.size() == 1 ? fmt::format(", or what makes rank {} faster (a smaller data shard?)", g->fast.front())
                          : std::string(),
      one ? "it" : "them");
  if (const auto c = config_only_on(in, g->slow)) {
    say_shared_config(*c, ranks_text(g->slow), one, f);
    price_stage_balance(in, c->key, g->slow, f);
  } else if (const auto s = config_split(in, g->slow)) {
    say_config_split(x, *s, f);
    if (within_said_by_stage(x, *s)) price_stage_balance(in, s->key, g->slow, f);
  }
  out.push_back(std::move(f));
}

// What a margin over the median rank is worth in time at stake: with two ranks the median
// rank is their mean, so a margin is half the gap the other rank waits (2); else 1.
double margin_to_gap(const CrossRankResult& x) { return x.per_rank.size() == 2 ? 2.0 : 1.0; }

// Stretches in the same updates are one wait, not one each (the job waits for the slowest
// rank): per update, the slowest rank's margin beyond the lowest typical margin of the
// stretches there, summed over the updates any of `stretches` covers [ms].
// A stretch found among one pipeline stage's ranks (StragglerEpisode::stage) counts its
// own excess per update (its mean over its updates) instead, summed over such stretches
// (compare_within_stages shares an update's gain among them): the slowest rank of the
// whole job there may be a heavier stage's. Per update, the larger of the two.
double union_excess_ms(const CrossRankResult& x, const std::vector<const StragglerEpisode*>& stretches) {
  double excess = 0;
  const double gap = margin_to_gap(x);
  for (const auto& u : x.per_update) {
    double typical = std::numeric_limits<double>::infinity(), stage_excess = 0;
    for (const StragglerEpisode* e : stretches) {
      if (e->first_step > u.step || u.step > e->last_step) continue;
      if (e->stage.empty()) typical = std::min(typical, e->typical_margin_ms);
      else if (e->updates > 0) stage_excess += e->excess_ms / static_cast<double>(e->updates);
    }
    excess += std::max(std::isfinite(typical) ? gap * std::max(0.0, u.margin_ms - typical) : 0.0, stage_excess);
  }
  // (Stretches after a rank's log ended lie in steps per_update does not hold: their own
  // excess, not shared.)
  for (const StragglerEpisode* e : stretches)
    if (e->among_ranks > 0) excess += gap * e->excess_ms;
  return excess;
}

// The job's update time in the steps of `stretches` (their union) above its mean in the
// other aligned steps outside every stretch (UpdateSlowest::update_ms), steps with a
// padding spike left out of both means (the padding finding's), and so are outliers of
// either side (see below: a collective stall of every rank, a warm-up step, another rank's
// periodic lag, each priced by a finding of its own, had been counted as the stretch's: a
// review).
// Where the communication region holds compute (a backward pass that overlaps its
// all-reduce, as DeepSpeed's and the synth logs' do), a straggler's lag there is no own
// work, and a stretch priced on own work alone was worth half to a quarter of what
// removing it bought (found by a helper: 155 ms per update where the same job without the
// straggler was 308 ms faster). Means, not medians: with fallbacks on every rank the
// update time is skewed, and medians were 10 to 25 % off what removing the stretch buys in
// synth jobs where means were within 10 %. Only stretches among every rank compared
// (`among_ranks` 0) have such steps. nullopt without a communication region (own work is
// then the whole update), or with fewer than 10 steps outside the stretches or none inside.
struct UpdateRise {
  double mean_ms = 0;       ///< the rise, mean over the stretches' steps [ms]
  double outside_ms = 0;    ///< the job's update time outside them, mean [ms]
  std::size_t updates = 0;  ///< the stretches' aligned steps [count]
  std::size_t left_out = 0;  ///< steps left out of the means as spikes or outliers [count]
  /// The rise over the steps not left out (a left-out step counts none: where a spike or
  /// stall of another rank set the step, removing the stretch saves less there, and
  /// counting it at the mean overclaimed with padding spikes in most steps: a review).
  [[nodiscard]] double total_ms() const { return std::max(0.0, mean_ms) * static_cast<double>(updates - left_out); }
};
// The rise is the time at stake where it is more than the own work's by this factor (a
// tenth: the two measure the same lag where the communication region holds none of it).
constexpr double kRiseOverOwn = 1.1;
// Per aligned update (CrossRankResult::per_update), 1 where one of `stretches` among every
// rank compared spans its step: marked range by range (a search of every stretch for each
// step and stretch made the findings quadratic in the stretches: 300 stretches of 16 ranks
// x 10,000 updates took 0.8 s more).
std::vector<char> steps_of(const CrossRankResult& x, const std::vector<const StragglerEpisode*>& stretches) {
  std::vector<char> in(x.per_update.size(), 0);
  const auto by_step = [](const UpdateSlowest& u, std::int64_t s) { return u.step < s; };
  for (const StragglerEpisode* e : stretches) {
    if (e->among_ranks != 0) continue;
    auto it = std::lower_bound(x.per_update.begin(), x.per_update.end(), e->first_step, by_step);
    for (; it != x.per_update.end() && it->step <= e->last_step; ++it) in[static_cast<std::size_t>(it - x.per_update.begin())] = 1;
  }
  return in;
}

// What the rises of a report's stretches are measured against, found once: the update
// times of the aligned steps outside every stretch and without a padding spike, and those
// steps with a padding spike (sorted).
struct RiseBaseline {
  std::vector<double> outside;
  std::vector<std::int64_t> spikes;
};
RiseBaseline rise_baseline(const FindingInputs& in) {
  const CrossRankResult& x = in.cross_rank;
  RiseBaseline b;
  for (const auto& [rank, step] : in.padding.spike_updates) b.spikes.push_back(step);
  std::sort(b.spikes.begin(), b.spikes.end());
  std::vector<const StragglerEpisode*> every;
  for (const auto& e : x.episodes) every.push_back(&e);
  const std::vector<char> in_every = steps_of(x, every);
  for (std::size_t i = 0; i < x.per_update.size(); ++i)
    if (!in_every[i] && !std::binary_search(b.spikes.begin(), b.spikes.end(), x.per_update[i].step))
      b.outside.push_back(x.per_update[i].update_ms);
  return b;
}

std::optional<UpdateRise> update_rise(const FindingInputs& in, const RiseBaseline& base,
                                      const std::vector<const StragglerEpisode*>& stretches) {
  const CrossRankResult& x = in.cross_rank;
  if (x.comm_region.empty()) return std::nullopt;
  const std::vector<char> mine = steps_of(x, stretches);
  std::vector<const UpdateSlowest*> inside;
  const std::vector<double>& outside = base.outside;
  std::size_t steps = 0, left_out = 0;
  for (std::size_t i = 0; i < x.per_update.size(); ++i) {
    if (!mine[i]) continue;
    ++steps;
    if (std::binary_search(base.spikes.begin(), base.spikes.end(), x.per_update[i].step)) ++left_out;
    else inside.push_back(&x.per_update[i]);
  }
  if (inside.empty() || outside.size() < 10) return std::nullopt;
  // Outliers: above the median by more than the larger of kOutlierSds robust standard
  // deviations and kOutlierShare of it. (3 and 5 % dropped a straggler's own slow steps
  // among fallbacks: 15 to 26 % below what removing it bought in synth jobs.) Inside the
  // stretches, only where the stretches' own ranks do not explain it: the step's slowest
  // rank (by own work) is another, or its margin over the median rank rose by less than a
  // quarter of the update time's rise (a stall of every rank, a warm-up step). A rank 1.9x
  // slower within its 1.3x stretch had its worst steps dropped as outliers (a review).
  constexpr double kOutlierSds = 4, kOutlierShare = 0.2, kOwnShare = 0.25;
  auto bound_of = [&](std::vector<double> v) {
    std::vector<double> sorted = v;
    const double m = *median(sorted);
    return std::pair{m, m + std::max(kOutlierSds * robust_sd(v, m), kOutlierShare * std::fabs(m))};
  };
  double out_sum = 0;
  std::size_t out_n = 0;
  const double out_bound = bound_of(outside).second;
  for (const double t : outside)
    if (t <= out_bound) out_sum += t, ++out_n;
  std::vector<double> in_times, in_margins;
  for (const UpdateSlowest* u : inside) in_times.push_back(u->update_ms), in_margins.push_back(u->margin_ms);
  const auto [in_median, in_bound] = bound_of(in_times);
  const double margin_median = *median(in_margins);
  double in_sum = 0;
  std::size_t in_n = 0;
  for (const UpdateSlowest* u : inside) {
    const bool own_rank = std::any_of(stretches.begin(), stretches.end(),
                                      [&](const StragglerEpisode* e) { return e->rank == u->slowest_rank; });
    const bool explained = own_rank && u->margin_ms - margin_median >= kOwnShare * (u->update_ms - in_median);
    if (u->update_ms > in_bound && !explained) {
      ++left_out;
      continue;
    }
    in_sum += u->update_ms;
    ++in_n;
  }
  const double out_mean = out_sum / static_cast<double>(out_n), in_mean = in_sum / static_cast<double>(in_n);
  return UpdateRise{in_mean - out_mean, out_mean, steps, left_out};
}

// What removing `stretches` together buys [ms, summed over the run], and whether it is
// the job's update-time rise: their own work's union excess (union_excess_ms), or that
// rise over their steps where it is more by kRiseOverOwn (update_rise: the lag inside the
// communication region); a stretch after some rank's log ended keeps its own excess
// beside it (those steps are not compared across every rank).
struct Stake {
  double ms = 0;
  bool by_rise = false;
};
Stake stretches_stake(const FindingInputs& in, const RiseBaseline& base,
                      const std::vector<const StragglerEpisode*>& stretches) {
  const double own = union_excess_ms(in.cross_rank, stretches);
  double after_end = 0;
  for (const StragglerEpisode* e : stretches)
    if (e->among_ranks > 0) after_end += margin_to_gap(in.cross_rank) * e->excess_ms;
  const auto rise = update_rise(in, base, stretches);
  if (rise && rise->total_ms() > kRiseOverOwn * (own - after_end)) return {rise->total_ms() + after_end, true};
  return {own, false};
}

// Listed one by one, stretches that overlap in updates would each claim the wait they
// share: two ranks behind in steps 40..49 claimed 172 and 105 ms per update where removing
// both buys 172. Each set of overlapping stretches keeps its union's time at stake
// (union_excess_ms), split in proportion to their own excesses, and says so.
void share_overlapping_stretches(const FindingInputs& in, const RiseBaseline& base,
                                 const std::vector<const StragglerEpisode*>& listed, std::vector<Finding>& found) {
  const CrossRankResult& x = in.cross_rank;
  const std::size_t n = listed.size();
  std::vector<std::size_t> set(n);  // union-find over "overlaps in steps"
  for (std::size_t i = 0; i < n; ++i) set[i] = i;
  auto root = [&](std::size_t i) {
    while (set[i] != i) i = set[i] = set[set[i]];
    return i;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      if (listed[i]->first_step <= listed[j]->last_step && listed[j]->first_step <= listed[i]->last_step)
        set[root(j)] = root(i);
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < n; ++i)
      if (root(i) == r) members.push_back(i);
    if (members.size() < 2) continue;
    std::vector<const StragglerEpisode*> stretches;
    double claimed = 0, own = 0;
    for (auto i : members) {
      stretches.push_back(listed[i]);
      claimed += found[i].ms_per_update;
      own += listed[i]->excess_ms;
    }
    const double together = stretches_stake(in, base, stretches).ms / static_cast<double>(episode_steps(x));
    if (claimed <= together || claimed <= 0) continue;
    for (auto i : members) {
      std::vector<std::int64_t> others;
      for (auto j : members)
        if (j != i) others.push_back(listed[j]->rank);
      std::sort(others.begin(), others.end());
      // (In proportion to the own excesses: priced on the update-time rise, every stretch
      // in the same steps claims the same rise.)
      found[i].ms_per_update = own > 0 ? together * listed[i]->excess_ms / own : together * found[i].ms_per_update / claimed;
      found[i].evidence += fmt::format(
          "; {} {} {} behind in some of the same updates, and the job waited once for the slowest: these "
          "stretches together hold {:.0f} ms per update, shared here in proportion to each one's excess",
          others.size() == 1 ? "rank" : "ranks", detail::rank_numbers(others), others.size() == 1 ? "was" : "were",
          together);
    }
  }
}

// A stretch of ranks slowed down together (group_stretches.hpp) is a finding where its
// updates' excess is at least kMaterialLag of the typical update (a node's stretch in a
// pipeline stage faster than the slowest stage costs little): reported_group_stretches.
// The group stretches that are findings (reported_group_stretch), found once: the episode
// check below runs for every episode.
std::vector<const GroupStretch*> reported_group_stretches(const CrossRankResult& x) {
  std::vector<const GroupStretch*> out;
  if (x.group_stretches.empty()) return out;
  const double typical = typical_update_ms(x);
  for (const auto& g : x.group_stretches)
    if (x.available && g.excess_ms >= kMaterialLag * typical) out.push_back(&g);
  return out;
}

// True when episode `e` is of a rank of a reported group stretch (`reported`) and at least
// 3/4 of its steps lie within the stretch's: the group's finding holds it (8 ranks of 16
// slowed down together were 8 stretches of one rank each, priced against a median rank
// that was half of them; one of them a step longer was priced again, review). An episode
// mostly outside the stretch is its own finding.
bool in_group_stretch(const std::vector<const GroupStretch*>& reported, const StragglerEpisode& e) {
  return std::any_of(reported.begin(), reported.end(), [&](const GroupStretch* g) {
    const std::int64_t overlap = std::min(e.last_step, g->last_step) - std::max(e.first_step, g->first_step) + 1;
    return std::binary_search(g->ranks.begin(), g->ranks.end(), e.rank) &&
           4 * overlap >= 3 * (e.last_step - e.first_step + 1);
  });
}

// The compared ranks of pipeline stage `stage` (CrossRankResult::stage_field), ascending.
std::vector<std::int64_t> stage_ranks(const FindingInputs& in, const std::string& stage) {
  std::vector<std::int64_t> out;
  if (!in.run) return out;
  for (const auto& d : in.run->config_differences)
    if (d.key == in.cross_rank.stage_field)
      for (const auto& [value, members] : d.values)
        if (value == stage)
          for (const std::int64_t r : members)
            if (std::any_of(in.cross_rank.per_rank.begin(), in.cross_rank.per_rank.end(),
                            [&](const RankStraggler& p) { return p.rank == r; }))
              out.push_back(r);
  return out;
}

// True when every compared rank of the stage is a straggler or in the slow group: the
// comparison of every rank named them for their stage's work, which says nothing of a
// stretch found among them.
bool whole_stage_named(const FindingInputs& in, const std::string& stage) {
  const auto& x = in.cross_rank;
  const auto ranks = stage_ranks(in, stage);
  return !ranks.empty() && std::all_of(ranks.begin(), ranks.end(), [&](std::int64_t r) {
    return std::find(x.stragglers.begin(), x.stragglers.end(), r) != x.stragglers.end() ||
           (x.slow_group && std::binary_search(x.slow_group->slow.begin(), x.slow_group->slow.end(), r));
  });
}

// Ranks slower than the other ranks of their pipeline stage throughout
// (CrossRankResult::stage_slow): one finding for them all, their lags one wait per update.
void stage_slow_ranks(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  if (!x.available || x.stage_slow.empty()) return;
  std::vector<std::int64_t> ranks;
  double low = 0, high = 0;
  for (const auto& r : x.stage_slow) {
    const double factor = r.peers_ms > 0 ? r.own_ms / r.peers_ms : 1;
    low = ranks.empty() ? factor : std::min(low, factor);
    high = ranks.empty() ? factor : std::max(high, factor);
    ranks.push_back(r.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  const auto& first = x.stage_slow.front();
  Finding f;
  f.kind = "stage-straggler";
  f.subject = ranks_text(ranks);
  f.ms_per_update = x.stage_slow_at_stake_ms;
  f.title = ranks.size() == 1
                ? fmt::format("rank {} is slower than the other ranks of its pipeline stage ({} {}) throughout: {:.2f}x "
                              "their own work ({} against {} ms per update, medians)",
                              first.rank, x.stage_field, first.stage, high, rank_ms_text(first.own_ms),
                              rank_ms_text(first.peers_ms))
                : fmt::format("{} ranks are slower than the other ranks of their pipeline stages throughout: {}, "
                              "{:.2f}x to {:.2f}x their stages' own work",
                              ranks.size(), ranks_text(ranks), low, high);
  std::vector<std::string> each;
  for (const auto& r : x.stage_slow)
    each.push_back(fmt::format("rank {} ({} {}): {} against {} ms, ahead in {} of {} steps", r.rank, x.stage_field,
                               r.stage, rank_ms_text(r.own_ms), rank_ms_text(r.peers_ms), r.ahead, x.steps_aligned));
  f.evidence = fmt::format(
      "own work = wall_ms minus {}; each pipeline stage's ranks are compared among themselves (the stages do different "
      "work: against every rank such a lag hides among the heavier stages); a rank counts when its median own work is "
      "{:.0f} % or more above the median of its stage's other ranks' and its own work is {:.0f} % or more above theirs "
      "(median) in 3/4 of the steps: {}; time at stake: the job waits for the slowest rank of every stage, so it is "
      "the slowest own work less the slowest with each of them at its stage's other ranks' median, mean over the {} "
      "steps compared (where a heavier stage sets the pace, little)",
      x.comm_region.empty() ? std::string("nothing (no communication region)") : x.comm_region, 100 * kMinStageLag,
      100 * (kStageAhead - 1), fmt::join(each, "; "), x.steps_aligned);
  // (A rank that the straggler or slow-ranks finding names too, with a pipeline's heavy
  // stages: that finding's time at stake holds this rank's lag as well.)
  std::vector<std::int64_t> named;
  for (const auto& r : x.stage_slow)
    if (straggler_finding_for(x, r.rank) || in_group(reported_slow_group(x), r.rank)) named.push_back(r.rank);
  std::sort(named.begin(), named.end());
  const bool balance_priced = std::any_of(out.begin(), out.end(), [](const Finding& o) {
    return (o.kind == "slow-ranks" || o.kind == "straggler") && o.evidence.find(kBalanceStake) != std::string::npos;
  });
  if (!named.empty())
    f.evidence += balance_priced
                      ? fmt::format("; the {} finding names {} too, with the heavier stages, and prices balancing the "
                                    "stages (their medians), which leaves {} lag out: the two add up",
                                    reported_slow_group(x) ? "slow-ranks" : "straggler", ranks_text(named),
                                    named.size() == 1 ? "its" : "their")
                      : fmt::format("; the {} finding names {} too, with the heavier stages, and its time at stake "
                                    "holds {} lag as well: the two overlap",
                                    reported_slow_group(x) ? "slow-ranks" : "straggler", ranks_text(named),
                                    named.size() == 1 ? "its" : "their");
  f.evidence += own_work_caveat(x);
  if (const auto c = config_value_holding(in, ranks, x.stage_field)) {
    f.title += c->of == ranks.size() ? fmt::format(": every rank with {} = {}", c->key, c->value)
                                     : fmt::format(": {} of the {} ranks with {} = {}, and no other", ranks.size(), c->of,
                                                   c->key, c->value);
    f.action = fmt::format(
        "look at what {} = {} names (a node, a GPU model, a data shard), as only ranks with it are slow: GPU clocks "
        "and temperature, power, other processes or jobs, links (nvidia-smi, dmesg); if it names a node, drain it; the "
        "other values are {}",
        c->key, c->value, c->others);
  } else {
    f.action = fmt::format(
        "look at {} GPU and host: clocks and temperature, power, other processes, links (nvidia-smi, dmesg); the "
        "stage's other ranks run the same layers, so their work is not the cause, unless the data they are given "
        "differs",
        ranks.size() == 1 ? fmt::format("rank {}'s", first.rank) : fmt::format("these ranks'"));
  }
  out.push_back(std::move(f));
}

// Ranks sharing a config value that slowed down together for a few updates
// (group_stretches.hpp): a node throttled or shared for a while, each reported one a
// finding at its own time at stake.
void group_stretches(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  const std::string comm = x.comm_region.empty() ? std::string("nothing (no communication region)") : x.comm_region;
  for (const GroupStretch* stretch : reported_group_stretches(x)) {
    const GroupStretch& g = *stretch;
    Finding f;
    f.kind = "group-stretch";
    f.subject = ranks_text(g.ranks);
    f.ms_per_update = g.at_stake_ms;
    const std::string steps = g.first_step == g.last_step ? fmt::format("step {}", g.first_step)
                                                          : fmt::format("steps {}..{}", g.first_step, g.last_step);
    f.title = fmt::format("{} ({} = {}) slowed down together in {}: {:.2f}x their usual own work, the other ranks "
                          "{:.2f}x",
                          ranks_text(g.ranks), g.key, g.value, steps, g.factor, g.others_factor);
    f.evidence = fmt::format(
        "own work = wall_ms minus {}; in {} consecutive updates at least 3/4 of these ranks took {:.2f}x their own "
        "median own work or more, and at most 1/4 of the other ranks did; these {} ranks are the ranks compared with "
        "{} = {} in their config; the slowest rank finished its own work {} ms later in those updates than with these ranks at their "
        "usual speed (mean), {} ms per update over the {} updates compared",
        comm, g.updates, kGroupFactor, g.ranks.size(), g.key, g.value, rank_ms_text(g.excess_ms),
        rank_ms_text(g.at_stake_ms), x.steps_aligned);
    f.action = fmt::format(
        "ranks that slow down together share something: if {} = {} names a node, look at that node in {} (GPU "
        "clocks and temperature, its power, other processes or jobs on it, its network links: nvidia-smi, dmesg, "
        "the scheduler's log); if it recurs, drain the node; if {} sets the work a rank does (a pipeline stage), look "
        "at what that work was given in {}",
        g.key, g.value, steps, g.key, steps);
    out.push_back(std::move(f));
  }
}

// "the median rank"; for a stretch or lag found among the ranks of one pipeline stage
// (stage_peers.hpp), "the median rank of its pipeline stage (stage 1)".
std::string median_rank(const CrossRankResult& x, const std::string& stage) {
  return stage.empty() ? std::string("the median rank")
                       : fmt::format("the median rank of its pipeline stage ({} {})", x.stage_field, stage);
}

// For a stretch or lag found among one pipeline stage's ranks: why, which ranks, and how
// it is priced (`margin_ms` its lag over its stage's median rank [ms]).
std::string stage_note(const FindingInputs& in, const std::string& stage, double margin_ms, bool say_stake) {
  const auto& x = in.cross_rank;
  if (stage.empty()) return {};
  const auto ranks = stage_ranks(in, stage);
  const auto own = std::find_if(x.stage_own_ms.begin(), x.stage_own_ms.end(), [&](const auto& s) { return s.first == stage; });
  const auto heaviest = std::max_element(x.stage_own_ms.begin(), x.stage_own_ms.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string pace;
  if (own != x.stage_own_ms.end() && heaviest != x.stage_own_ms.end() && heaviest->first != stage &&
      own->second + margin_ms < heaviest->second)
    pace = fmt::format(" (with its lag its own work, {:.0f} ms against its stage's median {:.0f} ms, stays below "
                       "stage {}'s, {:.0f} ms, which sets the pace: little or nothing to gain in the update time, "
                       "while its stage's ranks waited for it; a sick GPU or host, worth a look before it gets worse)",
                       own->second + margin_ms, own->second, heaviest->first, heaviest->second);
  return fmt::format("; compared with the ranks of its pipeline stage only ({} {}{}), whose median rank and bounds "
                     "these are: the stages do different work, so against every rank its lag is hidden or taken for "
                     "its stage's{}{}",
                     x.stage_field, stage,
                     ranks.empty() ? std::string()
                                   : fmt::format(": {} {}", ranks.size() == 1 ? "rank" : "ranks", detail::rank_numbers(ranks)),
                     say_stake ? "; time at stake: the job waits for the slowest rank of every stage, so only its own "
                                 "work beyond every other rank's counts"
                               : "",
                     pace);
}

// A rank that fell far behind for a stretch of updates (cross_rank.hpp, StragglerEpisode).
void straggler_episodes(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  if (!x.available || !x.margin_ms || x.steps_aligned == 0) return;
  const SlowGroup* group = reported_slow_group(x);
  std::vector<Finding> found;
  std::vector<std::int64_t> ranks;
  std::vector<const StragglerEpisode*> listed;
  const std::vector<const GroupStretch*> groups = reported_group_stretches(x);
  const RiseBaseline base = rise_baseline(in);
  for (const auto& e : x.episodes) {
    // A rank the straggler or slow-ranks finding names already, behind for half the run
    // or more: the same issue, not counted twice.
    // (A stretch found within a pipeline stage whose every rank the comparison of every
    // rank named is not that finding's: it named them for their stage's work.)
    const bool named = straggler_finding_for(x, e.rank) || in_group(group, e.rank);
    if ((e.stage.empty() || !whole_stage_named(in, e.stage)) &&
        ((named && 2 * e.updates >= episode_steps(x)) || in_slow_group(x, e.rank) || in_group_stretch(groups, e)))
      continue;
    Finding f;
    f.kind = "straggler_episode";
    f.subject = fmt::format("rank {}", e.rank);
    f.ms_per_update = margin_to_gap(x) * e.excess_ms / static_cast<double>(episode_steps(x));
    // (Steps in the range not compared, records lost or times missing, are said: "16 of
    // those 16" for 21 steps read as if none were.)
    f.title = e.steps_not_compared == 0
                  ? fmt::format("rank {} fell behind in steps {}..{}: far behind {} in {} of those {} updates",
                                e.rank, e.first_step, e.last_step, median_rank(x, e.stage), e.behind, e.updates)
                  : fmt::format("rank {} fell behind in steps {}..{}: far behind {} in {} of the {} updates compared "
                                "({} more step(s) in that range were not compared: a rank's record, communication "
                                "region or wall time is missing there)",
                                e.rank, e.first_step, e.last_step, median_rank(x, e.stage), e.behind, e.updates,
                                e.steps_not_compared);
    if (e.paths_scaled) f.title += ", once each rank's slow code paths' excess is taken out";
    const std::string long_rule =
        e.running_quartile
            ? fmt::format("a long stretch among frequent slow updates counts when a rank's running lower quartile of "
                          "margins (the 4th smallest of the 11 updates around each) is more than {:.0f} ms (all "
                          "ranks' median plus the larger of 6 robust standard deviations and 8 % of the own work)",
                          e.threshold_ms)
            : fmt::format("a long stretch counts when a rank is more than {:.0f} ms behind the median rank (a typical "
                          "rank's margin plus the larger of 3 robust standard deviations of all ranks' margins and 5 % "
                          "of the own work)",
                          e.threshold_ms);
    // (A second-pass stretch of fewer than 10 behind updates: kept where it is beyond chance
    // over every rank, cross_rank.hpp.)
    const std::string long_count = !e.running_quartile && e.behind < 10
                                       ? "in at least 3 updates and 75 % of the stretch, more than chance gives over "
                                         "every rank at the job's share of updates that far behind"
                                       : "in at least 10 updates and 75 % of the stretch";
    // The lag inside the communication region (update_rise), where it is more than the
    // own work's (kRiseOverOwn): the time at stake is the job's update-time rise, and the
    // evidence says that stake alone (it had said the margin, then the rise: a review).
    const auto rise = e.among_ranks == 0 ? update_rise(in, base, {&e}) : std::nullopt;
    const bool by_rise = rise && rise->total_ms() > kRiseOverOwn * margin_to_gap(x) * e.excess_ms;
    f.evidence =
        e.long_stretch
            ? fmt::format(
                  "there its own work took {:.0f} ms more than the median rank's (median), against {:.0f} ms for "
                  "the slowest other rank (median), which the job would still wait for without it; {} {}{}",
                  e.margin_ms, e.typical_margin_ms, long_rule, long_count,
                  by_rise || !e.stage.empty() ? "" : "; time at stake: per update, its margin beyond the slowest other rank's")
            : fmt::format(
                  "there its own work took {:.0f} ms more than the median rank's (median), against {:.0f} ms for "
                  "the slowest rank in a typical update; a rank counts as behind when it is more than {:.0f} ms "
                  "behind the median rank (that typical margin plus the larger of 3 robust standard deviations and "
                  "5 % of the own work); the median rank and every faster one waited at least that long",
                  e.margin_ms, e.typical_margin_ms, e.threshold_ms);
    f.evidence += stage_note(in, e.stage, e.margin_ms, !by_rise);
    if (margin_to_gap(x) != 1 && !by_rise)
      f.evidence += "; with two ranks the median rank is their mean, so the other rank waited twice that margin, "
                    "which the time at stake counts";
    if (e.paths_scaled)
      f.evidence += fmt::format(
          "; found on each rank's own work less what its slow code paths took beyond the fast paths' cost for the "
          "same work (fallbacks hid it in the own work itself): the {} updates far behind and the {:.0f} ms bound "
          "are of that work, its margin (median over the stretch){} of own work as measured, since the job still "
          "waits for the slowest other rank, fallbacks included",
          e.behind, e.threshold_ms, by_rise ? "" : " and the time at stake");
    if (by_rise) {
      f.ms_per_update = rise->total_ms() / static_cast<double>(episode_steps(x));
      f.evidence += fmt::format(
          "; time at stake: the job's update time (the compared ranks' median wall_ms) in these {} steps was {:.0f} "
          "ms above its mean outside every stretch ({:.0f} ms; means, outliers and steps with a padding spike left "
          "out{}), more than the own work's margin accounts for: the rest of its lag is inside {} (a backward pass "
          "that overlaps its all-reduce)",
          rise->updates, rise->mean_ms, rise->outside_ms,
          rise->left_out > 0 ? fmt::format(": {} of these steps, counted as no rise", rise->left_out) : "",
          x.comm_region);
    } else {
      f.evidence += own_work_caveat(x);
    }
    if (e.among_ranks > 0) {
      std::vector<std::int64_t> ended;
      for (const auto& end : x.ended_early)
        if (end.last_step < e.first_step) ended.push_back(end.rank);
      f.evidence += fmt::format("; found among the {} ranks still logging: these steps come after the log of {} {} "
                                "ended",
                                e.among_ranks, ended.size() == 1 ? "rank" : "ranks", detail::rank_numbers(ended));
    }
    if (e.shared > 0)
      f.evidence += fmt::format(
          "; in {} of these {} updates another rank was behind too ({} {}), and the job waited for the slowest of "
          "them, so speeding up rank {} alone buys less than this",
          e.shared, e.behind, e.alongside.size() == 1 ? "rank" : "ranks", detail::rank_numbers(e.alongside), e.rank);
    f.action = fmt::format(
        "look at what rank {} did in steps {}..{}: its data (frames, tokens, code paths in its log), its host and GPU "
        "at that time (clocks, temperature, other processes)",
        e.rank, e.first_step, e.last_step);
    found.push_back(std::move(f));
    ranks.push_back(e.rank);
    listed.push_back(&e);
  }
  share_overlapping_stretches(in, base, listed, found);
  each_or_grouped(found, out, [&](Finding& g, const Finding& worst) {
    const Stake stake = stretches_stake(in, base, listed);
    g.ms_per_update = std::min(g.ms_per_update, stake.ms / static_cast<double>(episode_steps(x)));
    g.subject = fmt::format("{} stretches", found.size());
    g.title = fmt::format("in {} stretches of updates a rank fell far behind (ranks {})", found.size(),
                          detail::rank_numbers(ranks));
    g.evidence = fmt::format(
        "the longest wait, {}: {}; every stretch is listed in the waiting section; time at stake (these stretches "
        "together): {}",
        worst.title, worst.evidence,
        stake.by_rise ? fmt::format("the job's update time over their steps above its mean outside every stretch "
                                    "(means, outliers and steps with a padding spike left out), as above: the lag "
                                    "inside {} counted",
                                    x.comm_region)
                      : std::string("per update, the slowest rank's margin beyond the typical one, over the updates "
                                    "of these stretches (stretches in the same updates are one wait, not one each)"));
    g.action =
        "look for what these stretches share: the same host or GPU, the same data, a periodic job on the nodes "
        "(checkpoints, evaluation, logging)";
    // Ranks that alone have a config value (a node), each behind the other ranks of its
    // pipeline stage: that value is what they share (a slow node holds a rank of every stage).
    std::vector<std::int64_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (const auto c = config_value_holding(in, sorted, x.stage_field)) {
      g.title += c->of == sorted.size() ? fmt::format(": every rank with {} = {}", c->key, c->value)
                                        : fmt::format(": {} of the {} ranks with {} = {}, and no other", sorted.size(),
                                                      c->of, c->key, c->value);
      g.action = fmt::format("look at what {} = {} names (a node, a GPU model, a data shard): only ranks with it fell "
                             "behind{}; the other values are {}",
                             c->key, c->value,
                             std::all_of(listed.begin(), listed.end(), [](const StragglerEpisode* e) { return !e->stage.empty(); })
                                 ? " the other ranks of their pipeline stages"
                                 : "",
                             c->others);
    }
  });
}

// "5th", "21st", "12th".
std::string ordinal(std::int64_t n) {
  const std::int64_t tens = n % 100, ones = n % 10;
  const char* suffix = tens >= 11 && tens <= 13 ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
  return fmt::format("{}{}", n, suffix);
}

// A rank far behind in scattered updates (CrossRankResult::recurring): work it does
// every k-th step or now and then, which the medians and the stretches do not see.
void recurring_lags(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  if (!x.available || x.per_update.empty()) return;
  for (const RecurringLag& lag : x.recurring) {
    // Its padding spikes are the padding finding's: left out of its behind steps here
    // (count, margin, period, steps and time at stake), and no finding when they are half
    // of them or more.
    RecurringLag g = lag;
    g.behind_steps.clear();
    g.stake_ms.clear();
    g.margins_ms.clear();
    g.steps.clear();
    std::size_t spikes = 0;
    double stake = 0;
    for (std::size_t j = 0; j < lag.behind_steps.size(); ++j) {
      if (std::binary_search(in.padding.spike_updates.begin(), in.padding.spike_updates.end(),
                             std::pair<std::int64_t, std::int64_t>{lag.rank, lag.behind_steps[j]})) {
        ++spikes;
        continue;
      }
      g.behind_steps.push_back(lag.behind_steps[j]);
      g.stake_ms.push_back(lag.stake_ms[j]);
      g.margins_ms.push_back(lag.margins_ms[j]);
      if (g.steps.size() < kRecurringStepsKept) g.steps.push_back(lag.behind_steps[j]);
      stake += lag.stake_ms[j];
    }
    if (2 * spikes >= lag.behind) continue;
    g.behind = g.behind_steps.size();
    std::vector<double> margins = g.margins_ms;
    g.margin_ms = *median(margins);
    g.every = recurring_period(g.behind_steps);
    const double at_stake = stake / static_cast<double>(x.per_update.size());
    // Like a straggler's, a lag under 1 % of the update is no finding (a rank a little
    // noisier than the others is behind 3 times in 200 updates beyond chance).
    // (A lag within a pipeline stage counts what its stage's ranks waited: a light stage's
    // checkpoint may cost the job little while a heavier stage sets the pace, yet it is
    // that rank's.)
    double stage_wait = 0;
    if (!g.stage.empty())
      for (const double m : g.margins_ms) stage_wait += m / static_cast<double>(x.per_update.size());
    if (std::max(at_stake, stage_wait) < kMaterialLag * typical_update_ms(x)) continue;
    std::vector<std::string> shown;
    for (std::size_t i = 0; i < g.steps.size() && i < 6; ++i) shown.push_back(std::to_string(g.steps[i]));
    const std::string steps = fmt::format("{}{}", fmt::join(shown, ", "), g.behind > shown.size() ? ", ..." : "");
    Finding f;
    f.kind = "recurring_lag";
    f.subject = fmt::format("rank {}", g.rank);
    f.ms_per_update = at_stake;
    f.title = fmt::format("rank {} falls behind {}: {:.0f} ms behind {} in {} of {} updates (steps {})", g.rank,
                          g.every ? "every " + ordinal(*g.every) + " step" : std::string("now and then"), g.margin_ms,
                          median_rank(x, g.stage), g.behind, g.updates, steps);
    f.evidence =
        g.paths_scaled
            ? fmt::format("a rank counts as behind when its own work less what its slow code paths took beyond the "
                          "fast paths' cost is more than {:.0f} ms beyond the median rank's (so fallbacks are not what "
                          "it is; its margin and the time at stake are of own work as measured)",
                          g.threshold_ms)
            : fmt::format("a rank counts as behind when it is more than {:.0f} ms behind the median rank (as for the "
                          "stretches in the waiting section)",
                          g.threshold_ms);
    f.evidence += fmt::format(
        "; the other ranks were that far behind in {} of their {} updates, so {} is beyond chance (under 1 % over "
        "every rank); these updates are scattered, not a stretch, and most of its updates are as fast as the "
        "others', so neither the straggler scores (medians) nor the stretches name it; time at stake: per update, "
        "its margin beyond the slowest other rank's in those updates, over all {}",
        g.others_behind, g.others_compared, g.behind, x.per_update.size());
    if (spikes > 0)
      f.evidence += fmt::format("; in {} more steps it was behind with a padding spike: the padding finding prices "
                                "those, and they are left out here",
                                spikes);
    f.evidence += stage_note(in, g.stage, g.margin_ms, false);
    f.evidence += own_work_caveat(x);
    f.action = fmt::format(
        "look at what rank {} does in those steps that the other ranks do not: {}a checkpoint, evaluation, logging or "
        "profiling on that rank only, a garbage collection, its data there (frames, tokens and code paths in its log)",
        g.rank, g.every ? "a periodic job (every " + std::to_string(*g.every) + " steps): " : std::string());
    out.push_back(std::move(f));
  }
}

// Per-rank waiting findings of several ranks, each of the same kind and region, as one:
// with 4,096 ranks that could not be compared (every step lacked some rank), 8 findings
// "rank N waits in ..." had pushed every other finding out. `spike`: the kind of each
// finding of out[from..] (waits in a few updates, or throughout).
void merge_rank_waits(const FindingInputs& in, std::vector<Finding>& out, std::size_t from,
                      const std::vector<bool>& spike, const std::vector<std::int64_t>& ranks) {
  std::vector<Finding> merged;
  std::vector<bool> done(out.size() - from, false);
  for (std::size_t a = 0; a < done.size(); ++a) {
    if (done[a]) continue;
    std::vector<std::size_t> same;
    for (std::size_t b = a; b < done.size(); ++b)
      if (!done[b] && spike[b] == spike[a] && out[from + b].subject == out[from + a].subject) {
        same.push_back(b);
        done[b] = true;
      }
    if (same.size() == 1) {
      merged.push_back(std::move(out[from + a]));
      continue;
    }
    std::vector<double> ms;
    std::vector<std::int64_t> who;
    std::size_t top = same.front();
    for (const std::size_t b : same) {
      ms.push_back(out[from + b].ms_per_update);
      who.push_back(ranks[b]);
      if (out[from + b].ms_per_update > out[from + top].ms_per_update) top = b;
    }
    std::sort(who.begin(), who.end());
    const double lo = *std::min_element(ms.begin(), ms.end()), hi = *std::max_element(ms.begin(), ms.end());
    Finding f;
    f.kind = "waiting";
    f.subject = out[from + a].subject;
    f.ms_per_update = *median(ms);
    f.title = spike[a] ? fmt::format("{} ranks wait in {} in some updates while their own work stays typical",
                                     same.size(), f.subject)
                       : fmt::format("{} ranks wait for a slower rank in {}: their update time is set by another rank",
                                     same.size(), f.subject);
    const std::string why =
        in.cross_rank.why_not.empty() ? std::string() : fmt::format(" ({})", in.cross_rank.why_not);
    f.evidence = fmt::format(
        "each rank's log read alone, as the ranks could not be compared{}: {}; {:.0f} ms per update at stake "
        "(median over these ranks; {:.0f} to {:.0f} ms); the most, rank {}: {}",
        why, ranks_text(who), f.ms_per_update, lo, hi, ranks[top], out[from + top].evidence);
    f.action = spike[a] ? fmt::format("make the ranks' logs comparable{}, so that the slowest rank of each step "
                                      "they waited in, and what grew on it, are named; if no rank was slower there, "
                                      "look at the network in those steps",
                                      why)
                        : fmt::format("make the ranks' logs comparable{}, so that each step's slowest rank is named "
                                      "(the straggler findings), then act on that rank; speeding up the ranks that "
                                      "wait will not shorten the update",
                                      why);
    merged.push_back(std::move(f));
  }
  out.resize(from);
  for (auto& f : merged) out.push_back(std::move(f));
}

void waiting(const FindingInputs& in, std::vector<Finding>& out) {
  if (in.cross_rank.available) return;  // every rank's log: the straggler finding says it better
  const std::size_t from = out.size();
  std::vector<bool> spike;
  std::vector<std::int64_t> ranks;
  const bool several = std::count_if(in.waiting.begin(), in.waiting.end(), [](const WaitingResult& w) {
                         return w.rank.has_value();
                       }) >= 2;
  auto pushed = [&](const WaitingResult& w, bool is_spike) {
    spike.push_back(is_spike);
    ranks.push_back(w.rank.value_or(-1));
  };
  for (const auto& w : in.waiting) {
    if (!w.waiting && !w.spike_steps.empty()) {
      // Waits in a few updates only: the anti-correlation misses them when the rank's own
      // compute hardly varies (another rank's long input in those steps).
      Finding f;
      f.kind = "waiting";
      f.subject = w.comm_region;
      f.ms_per_update = w.spike_ms_per_update;
      const std::string who = w.rank ? fmt::format("rank {}", *w.rank) : std::string("this rank");
      f.title = fmt::format("{} waits in {} in {} of {} updates while its own work stays typical", who,
                            w.comm_region, w.spike_steps.size(), w.updates);
      f.evidence = fmt::format(
          "in {} {} {} takes {:.0f} ms more than its median ({}above {:.0f} ms) while wall_ms "
          "minus {} stays within its usual range: the time went to waiting for a rank slower in {}, or "
          "to a slow collective (the network), which one rank's log cannot tell apart",
          w.spike_steps.size() == 1 ? "step" : "steps", detail::rank_numbers(w.spike_steps), w.comm_region,
          w.spike_excess_ms, w.spike_steps.size() == 1 ? "" : "median over them; ", w.spike_threshold_ms,
          w.comm_region, w.spike_steps.size() == 1 ? "that step" : "those steps");
      f.action = "run `stepprof report` on every rank's log: it names each step's slowest rank and what grew on it "
                 "(a long input, a fallback); if no rank was slower there, look at the network in those steps";
      out.push_back(std::move(f));
      pushed(w, true);
      continue;
    }
    if (!w.waiting || !w.wait_ms) continue;
    Finding f;
    f.kind = "waiting";
    f.subject = w.comm_region;
    f.ms_per_update = w.wait_ms->median;
    f.title = fmt::format("{} waits for a slower rank in {}: its update time is set by another rank",
                          w.rank ? fmt::format("rank {}", *w.rank) : std::string("this rank"), w.comm_region);
    f.evidence = fmt::format(
        "time saved in {} reappears in {} (r = {:.2f}); their sum varies by {:.0f} ms (sd) against {:.0f} and "
        "{:.0f} ms alone; estimated wait {:.0f} ms per update (median; {} above its lowest value {:.0f} ms)",
        w.compute_region, w.comm_region, *w.correlation, w.sum_sd_ms, w.compute_sd_ms, w.comm_sd_ms,
        w.wait_ms->median, w.comm_region, w.comm_floor_ms);
    f.action =
        "find the slowest rank (run `stepprof report` on every rank's log) and balance its work; speeding up this "
        "rank alone will not shorten the update";
    // The wait split by this rank's own slow path. Running it raises this rank's own work,
    // so its wait drops whatever the cause. When it hardly waits then (at most half the
    // wait of the other updates), its own slow path sets the update time there; what it
    // waits for in the others, another rank's slow path or a rank slower throughout, one
    // rank's log cannot tell (both give this split), so the action says both.
    constexpr std::size_t kEachAtLeast = 3;  // updates of each kind
    for (const auto& g : in.paths.groups) {
      if (g.slow.empty() || g.fast.empty()) continue;
      const auto pw = std::find_if(w.path_waits.begin(), w.path_waits.end(),
                                   [&](const PathWait& p) { return p.region == g.slow; });
      if (pw == w.path_waits.end() || pw->updates_with < kEachAtLeast || pw->updates_without < kEachAtLeast ||
          !(pw->wait_with_ms < pw->wait_without_ms))
        continue;
      f.evidence += fmt::format("; it waits {:.0f} ms (median) in the {} updates in which it did not run {}, {:.0f} ms "
                                "in the {} in which it did",
                                pw->wait_without_ms, pw->updates_without, g.slow, pw->wait_with_ms, pw->updates_with);
      if (!(pw->wait_with_ms <= 0.5 * pw->wait_without_ms)) break;
      f.action = fmt::format(
          "where it ran {0} it hardly waits: its own slow path sets the update time there; in the other updates "
          "it waits for another rank, which one rank's log cannot name: if the other ranks run {0} as often (the "
          "same data pipeline), sending every micro-batch down {1} on every rank removes those waits as well, and "
          "if one rank is slower throughout, balance its work; `stepprof report` on every rank's log names each "
          "update's slowest rank",
          g.slow, g.fast);
      break;
    }
    out.push_back(std::move(f));
    pushed(w, false);
  }
  if (several && out.size() - from >= 2) merge_rank_waits(in, out, from, spike, ranks);
}

// Ranks of the job without a log, while the ranks given wait, by their own logs, much
// longer than for one another: the rank they wait for may be one without a log (with
// the straggler's log missing, the comparison said "no straggler" and waits of 67 ms
// where each rank's own log showed 1.5 s).
void missing_ranks(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  if (!x.available || x.ranks_missing.empty() || x.per_rank.empty()) return;
  // Each rank's wait by its own log (its communication time above its lowest, waiting.hpp)
  // against its wait for the ranks given: what the latter leaves unexplained must be at
  // least 5 % of the ranks' own work (median over the ranks given; a job with every rank
  // given shows no such gap, and the wait by one log holds communication jitter too).
  std::vector<double> single, among, unexplained, own;
  for (const auto& r : x.per_rank) {
    if (!r.single_rank_wait_median_ms) return;
    single.push_back(*r.single_rank_wait_median_ms);
    among.push_back(r.wait_ms.median);
    unexplained.push_back(*r.single_rank_wait_median_ms - r.wait_ms.median);
    own.push_back(r.compute_ms.median);
  }
  const double single_ms = *median(single), among_ms = *median(among), unexplained_ms = *median(unexplained);
  if (!(unexplained_ms > 0.05 * *median(own))) return;
  Finding f;
  f.kind = "missing-ranks";
  f.subject = x.comm_region;
  f.ms_per_update = unexplained_ms;
  const std::string missing = ranks_text(x.ranks_missing);
  f.title = fmt::format("the ranks given wait in {} for more than they explain: no update records from {}",
                        x.comm_region, missing);
  f.evidence = fmt::format(
      "by their own logs ({} above its lowest value) the {} ranks given wait at least {:.0f} ms per update (median "
      "over them), against {:.0f} ms that the comparison among them finds; no update records from {}; a lower "
      "bound: a rank that is late in every update raises {}'s lowest value too, so the wait for it can be several "
      "times this (its log gives the wait itself)",
      x.comm_region, x.per_rank.size(), single_ms, among_ms, missing, x.comm_region);
  f.action = fmt::format(
      "add {}'s log (or fix the input errors that skipped its records): the rank everyone waits for may be one "
      "without records; until then the stragglers, waits and slowest ranks here compare the ranks given only",
      missing);
  out.push_back(std::move(f));
}

// A rank whose log ended first, the other ranks' logs ending within two steps of it: in a
// data-parallel job the others block in the next collective when one rank stops (a
// crash, an out-of-memory kill, a hang), log a step or two more and stop too. Where the
// config plans more steps than any log holds (RunSummary::stopped_early) the job stopped
// there: the finding comes first (kind "stopped-rank"); without that plan a time limit
// or kill that caught the ranks a step apart looks the same, and it comes last (0 ms).
// The section on cross-rank waits listed the rank only, and no finding said the job
// stopped on it.
void stopped_rank(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& x = in.cross_rank;
  // (Not when --steps left records after the window out: the logs go on beyond it.)
  if (x.ended_early.empty() || !in.run || !in.run->last_step ||
      in.run->updates_outside_window != in.run->updates_before_window)
    return;
  const std::int64_t last = *in.run->last_step, stride = std::max<std::int64_t>(in.run->step_stride, 1);
  const std::size_t ranks = in.run->ranks.size();
  // The ranks that ended first (the lowest last step), a few of the ranks.
  std::int64_t first_end = x.ended_early.front().last_step;
  for (const auto& e : x.ended_early) first_end = std::min(first_end, e.last_step);
  std::vector<std::int64_t> first_ranks;
  for (const auto& e : x.ended_early)
    if (e.last_step == first_end) first_ranks.push_back(e.rank);
  if (first_ranks.size() > std::max<std::size_t>(1, ranks / 10) || first_ranks.size() >= ranks) return;
  // The others stopped soon after (within two strides): not a rank that left while the
  // job went on. Their logs end from `others_end` to `last`.
  if (last - first_end > 2 * stride) return;
  std::int64_t others_end = last;
  for (const auto& e : x.ended_early)
    if (e.last_step != first_end) others_end = std::min(others_end, e.last_step);
  const std::string others_steps =
      others_end == last ? fmt::format("step {}", last) : fmt::format("steps {}..{}", others_end, last);
  const auto& planned = in.run->stopped_early;
  Finding f;
  f.kind = "stopped-rank";
  f.subject = ranks_text(first_ranks);
  f.ms_per_update = 0;
  const std::string who = ranks_text(first_ranks);
  const bool one = first_ranks.size() == 1;
  f.title = planned ? fmt::format("the job stopped at step {}, before the {} {} of its config, and {}'s log ended "
                                  "first (step {})",
                                  last, planned->field, planned->value, who, first_end)
                    : fmt::format("{}'s log ended first (step {}); the other ranks' logs end at {}", who,
                                  first_end, others_steps);
  f.evidence = fmt::format("{}'s last update record is step {}; the other {} rank(s) logged up to {} and then "
                           "stopped too: in a data-parallel job the others wait in the next collective for a rank "
                           "that stopped{}",
                           who, first_end, ranks - first_ranks.size(), others_steps,
                           planned ? ""
                                   : " (or a time limit or kill caught the ranks a step apart: the config "
                                     "states no max_steps or last_step to tell)");
  f.action = fmt::format("find out why {} stopped{}: {} stderr and exit status (a crash, an out-of-memory kill: "
                         "dmesg), or a hang (py-spy dump or gdb on the process; NCCL_DEBUG=INFO; a collective "
                         "timeout turns a hang into an error the other ranks report); the other ranks stopped "
                         "waiting for {}",
                         who, planned ? "" : ", if the job did not end as planned", one ? "its" : "their",
                         one ? "it" : "them");
  out.push_back(std::move(f));
}

void padding(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& p = in.padding;
  if (!p.available || !p.cost_ms_per_update || p.fraction <= 0.01) return;
  std::string regions;
  for (const auto& r : p.token_bound)
    regions += fmt::format("{}{} (r = {:.2f})", regions.empty() ? "" : ", ", r.region, r.correlation);
  Finding f;
  f.kind = "padding";
  f.ms_per_update = *p.cost_ms_per_update;
  f.title = fmt::format("{:.1f} % of token slots are padding ({:.0f} slots per update)", p.fraction * 100,
                        p.padding_slots_per_update);
  // (The cost is the padding fraction of those regions' median time: the regions the
  // padding analysis found to follow token slots, forward or backward alike.)
  const bool one = p.token_bound.size() == 1;
  f.evidence = fmt::format(
      "token-weighted over the window; if the time of {} is proportional to token slots, padding costs {} ms "
      "per update in {} alone{}",
      regions, ms_text(*p.cost_ms_per_update, 0), one ? "that region" : "those regions",
      in.cross_rank.ranks > 1
          ? std::string(" (per rank; a rank's padded update delays every rank: `stepprof whatif no-padding` prices "
                        "that for the job)")
          : fmt::format(" (an upper bound where part of {} time is fixed; `stepprof whatif no-padding` prices padding "
                        "with cost models fitted region by region, which may find no fixed part, or other regions that "
                        "follow token slots)",
                        one ? "its" : "their"));
  f.action = "bucket samples by length or pack sequences so token slots approach valid tokens";
  if (p.spike_count > 0 && p.spike_threshold) {
    std::string where;
    for (std::size_t i = 0; i < p.spikes.size() && i < 3; ++i) {
      const PaddingSpike& k = p.spikes[i];
      where += fmt::format("{}{}step {} ({:.1f} %)", i ? ", " : "", k.rank >= 0 ? fmt::format("rank {} ", k.rank) : "",
                           k.step, k.fraction * 100);
    }
    f.evidence += fmt::format("; {} update(s) spike above {:.1f} % padding: {}{}", p.spike_count,
                              *p.spike_threshold * 100, where, p.spike_count > 3 ? ", ..." : "");
    f.action += "; a spike is usually one long sample padding its whole micro-batch: cap sequence length or put "
                "long samples in micro-batches of their own";
  }
  out.push_back(std::move(f));
}

// True when `name` or a region around it has the role "communication" in the nesting.
bool is_comm_role(const FindingInputs& in, const std::string& name) {
  if (!in.hierarchy) return false;
  for (const HierarchyNode* n = in.hierarchy->find(name); n; n = n->parent.empty() ? nullptr : in.hierarchy->find(n->parent))
    if (n->role == RegionRole::kCommunication) return true;
  return false;
}

// Collectives return on the host before their kernels finish by design: a device-host
// gap there is not a finding.
bool is_comm(const FindingInputs& in, const std::string& name) {
  if (in.hierarchy)
    if (const HierarchyNode* n = in.hierarchy->find(name); n && n->role == RegionRole::kCommunication) return true;
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("nccl") != std::string::npos || lower.find("comm") != std::string::npos ||
         lower.find("all_reduce") != std::string::npos || lower.find("allreduce") != std::string::npos;
}

// True when an ancestor or descendant of `row` has a larger gap in the same direction:
// one finding per chain, for the region that shows the gap most.
bool outgapped(const FindingInputs& in, const RegionRow& row) {
  if (!in.hierarchy) return false;
  for (const auto& other : in.regions.rows) {
    if (&other == &row || other.gap != row.gap || !other.gap_ms) continue;
    const bool related = in.hierarchy->is_ancestor(other.name, row.name) || in.hierarchy->is_ancestor(row.name, other.name);
    if (related && !is_comm(in, other.name) && std::fabs(*other.gap_ms) > std::fabs(*row.gap_ms)) return true;
  }
  return false;
}

void region_findings(const FindingInputs& in, std::vector<Finding>& out) {
  for (const auto& row : in.regions.rows) {
    if (row.background) continue;  // another thread's time: not time the update could save
    // A region that spans updates (the nesting finding says so) is no update's part: its
    // time "per update" would be several updates' (401 % of an update for an epoch).
    if (std::any_of(in.regions.violations.begin(), in.regions.violations.end(),
                    [&](const NestingViolation& v) { return v.longer_child == row.name; }))
      continue;
    const HierarchyNode* node = in.hierarchy ? in.hierarchy->find(row.name) : nullptr;
    const auto& basis = row.device_ms ? row.device_ms : row.host_ms;
    // (Negligible data loading, under 1 % of the time and 1 ms, is no finding.)
    if (node && node->role == RegionRole::kData && basis && (row.share >= 0.01 || basis->median > 1.0)) {
      Finding f;
      f.kind = "data-loading";
      f.subject = row.name;
      // Priced at its mean over the window's updates when that is well above the median:
      // a loader that stalls in some updates (p90 3.8 s against a median of 30 ms) costs
      // its stalls, which the median left out (30 ms at stake beside "16 % of all update
      // time" in the evidence, found by an independent check).
      // With several ranks' logs, per step at its slowest rank (RegionRow::step_max_ms).
      const auto& step = row.step_max_ms;
      const double median = step ? step->median : basis->median;
      const double mean =
          step ? step->mean : basis->sum / static_cast<double>(std::max<std::size_t>(1, in.regions.updates));
      const bool stalls = mean > 1.5 * median && mean > median + 1.0;
      f.ms_per_update = stalls ? mean : median;
      const char* per = step ? "per step at the slowest rank" : "per update";
      f.title = stalls ? fmt::format("data loading ({}) takes {:.1f} ms {} on average ({:.1f} ms median: "
                                     "it stalls in some {})",
                                     row.name, mean, per, median, step ? "steps" : "updates")
                       : fmt::format("data loading ({}) takes {:.1f} ms {}", row.name, median, per);
      // (The heading's share is the median against the median update; this one is the
      // sum over the window against all update time: with uneven updates they differ.)
      f.evidence = fmt::format("median {:.1f} ms, p90 {:.1f} ms, max {:.1f} ms per update; summed over the window, "
                               "{:.1f} % of all update time",
                               basis->median, basis->p90, basis->max, row.share * 100);
      if (step)
        f.evidence += fmt::format("; per step, the slowest rank's: median {:.1f} ms, p90 {:.1f} ms, max {:.1f} ms (a "
                                  "step waits for its slowest rank)",
                                  step->median, step->p90, step->max);
      // (The time at stake is all of it, which prefetching would hide; the stalls alone are
      // the mean beyond the median, what a user measuring only the stalls finds.)
      if (stalls)
        f.evidence += fmt::format("; time at stake: the mean, since workers that prefetch hide the loading as a "
                                  "whole; the stalls beyond the median are {:.1f} ms of it",
                                  mean - median);
      f.action = stalls ? "the training loop waits for the data loader in some updates: add data-loader workers or "
                          "prefetch, or look at what those updates load (a stall in the first update alone is the "
                          "workers' start-up: leave it out with --steps)"
                        : "if this grows, add data-loader workers or prefetch; the training loop waits for it";
      if (const auto& slow = row.step_max_rank) {
        f.title += fmt::format(", set by rank {}", slow->rank);
        f.evidence += fmt::format("; rank {} takes the longest in {} of the {} steps, {:.1f} ms per update (median) "
                                  "against {:.1f} ms on the other ranks (the median of their medians): the loader is "
                                  "slow on that rank",
                                  slow->rank, slow->steps_largest, slow->steps, slow->median_ms,
                                  slow->others_median_ms);
        if (straggler_finding_for(in.cross_rank, slow->rank))
          f.evidence += fmt::format(" (the straggler finding of rank {} holds this time too: one cause, not two)",
                                    slow->rank);
        f.action = fmt::format(
            "look at rank {}'s data loading first: its workers, its storage or file system, the samples it is given; "
            "the other ranks load in {:.1f} ms and every step waits for rank {}",
            slow->rank, slow->others_median_ms, slow->rank);
      }
      out.push_back(std::move(f));
    }
    const auto& self = row.self_ms;
    if (self && row.self_share && *row.self_share >= 0.004 && self->median > 1.0) {
      Finding f;
      f.kind = "exclusive-time";
      f.subject = row.name;
      f.ms_per_update = self->median;
      f.title = fmt::format("{} spends {:.1f} ms per update outside its child regions", row.name, self->median);
      f.evidence = fmt::format("exclusive time median {:.1f} ms, max {:.1f} ms per update; summed over the window, "
                               "{:.1f} % of all update time",
                               self->median, self->max, *row.self_share * 100);
      f.action = "add regions inside it to see where that time goes";
      out.push_back(std::move(f));
    }
    // Only host-bound regions are findings: a device that runs behind the host is the
    // normal asynchronous case (the table still flags it).
    if (row.gap == TimeGap::kHostLonger && row.gap_ms && !is_comm(in, row.name) && !outgapped(in, row)) {
      Finding f;
      f.kind = "time-gap";
      f.subject = row.name;
      f.ms_per_update = std::fabs(*row.gap_ms);
      f.title = row.gap == TimeGap::kDeviceLonger
                    ? fmt::format("{}: the host returns {:.1f} ms before the device finishes", row.name, *row.gap_ms)
                    : fmt::format("{}: the host works {:.1f} ms longer than the device (host-bound)", row.name,
                                  -*row.gap_ms);
      f.evidence = fmt::format("median device {:.1f} ms vs host {:.1f} ms per update",
                               row.device_ms ? row.device_ms->median : 0.0, row.host_ms ? row.host_ms->median : 0.0);
      f.action = row.gap == TimeGap::kDeviceLonger
                     ? "the device is the bottleneck here (or it waits on a stream dependency)"
                     : "the GPU idles while the host prepares work: move host work off the critical path";
      if (in.regions.device_busy_union) {
        // A trace's device time is the busy time of the region's own GPU work, not a span
        // on the stream: a host that outlasts it may be waiting for kernels launched
        // before the region (a synchronize, a blocking copy) while the GPU is busy.
        f.title = fmt::format("{}: the host spends {:.1f} ms longer in it than the GPU spends on the work it "
                              "launches",
                              row.name, -*row.gap_ms);
        f.evidence = fmt::format("median GPU busy time of its own kernels and copies {:.1f} ms vs host {:.1f} ms "
                                 "per update; a trace's device time is busy time, so it does not say whether the "
                                 "GPU idled meanwhile or ran work launched earlier",
                                 row.device_ms ? row.device_ms->median : 0.0,
                                 row.host_ms ? row.host_ms->median : 0.0);
        f.action = "look at the GPU timeline over this region in the trace: if the GPU idles there, the host is the "
                   "bottleneck (move host work off the critical path); if it runs work launched earlier, the "
                   "region waits for the GPU (a synchronize or blocking copy), and that earlier work is what to "
                   "shorten";
      }
      out.push_back(std::move(f));
    }
  }
  // Time outside the top-level regions means something only when the nesting lists
  // every region of the log.
  if (const auto& o = in.regions.outside_regions_ms; o && o->median > 1.0 && in.regions.not_in_nesting.empty()) {
    Finding f;
    f.kind = "untracked-time";
    f.ms_per_update = o->median;
    f.title = fmt::format("{:.1f} ms per update fall outside every region", o->median);
    f.evidence = fmt::format("wall_ms minus the top-level regions' host time: median {:.1f} ms, max {:.1f} ms",
                             o->median, o->max);
    f.action = "wrap the rest of the training loop in regions if this matters";
    out.push_back(std::move(f));
  }
  const auto& t = in.regions;
  if (t.nesting_known && !t.not_in_nesting.empty()) {
    const bool none = t.not_in_nesting.size() == t.rows.size();
    std::string names;
    for (std::size_t i = 0; i < t.not_in_nesting.size() && i < 6; ++i)
      names += fmt::format("{}{}", i ? ", " : "", t.not_in_nesting[i]);
    if (t.not_in_nesting.size() > 6) names += ", ...";
    Finding f;
    f.kind = "nesting";
    f.title = none ? fmt::format("none of the log's {} regions is in the nesting ({}): is it the right file?",
                                 t.rows.size(), t.nesting_source)
                   : fmt::format("{} of the log's regions are not in the nesting ({})", t.not_in_nesting.size(),
                                 t.nesting_source);
    f.evidence = "not in the nesting: " + names;
    f.action = "add them to the --hierarchy file; exclusive times of their parents are wrong until then";
    out.push_back(std::move(f));
  }
  if (t.violation_count > 0) {
    const auto& v = t.violations.front();
    Finding f;
    f.kind = "nesting";
    f.subject = v.parent;
    f.title = fmt::format("the nesting does not fit the data in {} place(s): exclusive times are not to be trusted",
                          t.violation_count);
    f.evidence = fmt::format("e.g. step {}: the children of {} take {:.1f} ms{}, more than its {:.1f} ms", v.step,
                             v.parent, v.children_ms, violation_children_text(v), v.parent_ms);
    // Regions that add up to more than what holds them ran at the same time: on another
    // thread (the recorder nests per thread), or, in a nesting file, under the wrong parent.
    const bool whole_update = v.parent == kUpdateAsParent;
    const bool from_file = t.nesting_source != kNestingFromLog;
    // (Three causes, which the log alone cannot tell apart: the advice named the first
    // only, also to a thread pool's regions and to a region left open across updates.)
    f.action = fmt::format(
        "{}regions that ran at the same time as one another overlap {}: a data-loader thread's regions alongside it: "
        "give them the role \"background\" (region_roles) so that they are not counted as its parts; a thread "
        "pool's regions doing its work in parallel (each thread's time counts, so they add up to more than the wall "
        "time): time the pool's work as one region on the thread that waits for it, or give the pool's regions the "
        "role \"background\"; on one thread, a region left open across end_update() (e.g. a loop body's region "
        "around it: each record then holds the previous update's region; the recorder counts open_at_end_update): "
        "end it before end_update(){}",
        from_file ? "check the --hierarchy file (a region may sit under the wrong parent); or " : "",
        whole_update ? "the update" : v.parent,
        // (A pipeline's `comm` region around both its sends inside forward_backward and its
        // all-reduce at the top: the nesting broke in every update, and the action named
        // only the three causes above.)
        from_file ? ""
                  : "; or one region name entered under different parents in an update (a `comm` region around "
                    "both the sends inside the forward pass and the all-reduce after it): a record holds one parent "
                    "per region, the last one, so all of its time is put there: give each place its own region name "
                    "(comm_p2p, comm_allreduce), with the same role");
    if (!v.longer_child.empty() && v.longer_child_calls > 1)
      // Several calls adding up to more than the update: most often threads running it at
      // once (4 worker threads' region "worker" was first told it spans updates).
      f.action = fmt::format(
          "{} alone takes {:.1f} ms over its {} calls in step {}, longer than that update: several threads ran it at "
          "the same time (each thread's time counts), or it spans updates (entered before an earlier end_update()); "
          "{}",
          v.longer_child, v.longer_child_ms, v.longer_child_calls, v.step, f.action);
    else if (!v.longer_child.empty())
      f.action = fmt::format(
          "{} alone takes {:.1f} ms in step {}, longer than that update: it spans updates (entered before an earlier "
          "end_update(), e.g. around an epoch), and a region counts in the update it exits in, with the regions "
          "inside it as its children; end regions before end_update() (time an epoch outside the recorder, or as a "
          "counter); otherwise, {}",
          v.longer_child, v.longer_child_ms, v.step, f.action);
    out.push_back(std::move(f));
  }
}

// True when `s`'s first chain holds the communication region of a one-rank analysis.
bool waited_alone(const FindingInputs& in, const SlowUpdates& s) {
  if (in.cross_rank.available || in.waiting.size() != 1 || in.waiting.front().comm_region.empty()) return false;
  return std::any_of(s.grew.begin(), s.grew.begin() + static_cast<std::ptrdiff_t>(s.first_chain),
                     [&](const auto& g) { return g.region == in.waiting.front().comm_region; });
}

// The logs' first update stands out from the other slow ones when it is beyond the median
// by more than this times the next slowest update.
constexpr double kFirstStandsOut = 1.5;

// What to do when the logs' first update stands out: its wall time counts from open() (or
// the last begin_update()), so it holds what ran before the training loop, and warm-up.
std::string first_update_advice(const RunSummary& run) {
  return fmt::format(
      "step {} is the first update: its time counts from when the recorder opened (or from the last "
      "begin_update()), so it holds whatever ran before the training loop (model loading, compilation) and the "
      "first update's warm-up (CUDA context, autotuning, allocator growth); call begin_update() (Python: "
      "rec.begin_update()) just before the loop, and leave it out with --steps {}: to see how the other updates "
      "vary; then ",
      *run.first_step, *run.first_step + run.step_stride);
}

void variability(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& t = in.time.update_ms;
  if (!t || t->n < 3 || !(t->cv >= 0.05)) return;  // (NaN: no mean to vary around)
  Finding f;
  f.kind = "variability";
  f.ms_per_update = t->p90 - t->median;
  f.title = fmt::format("update time varies: coefficient of variation {:.1f} %", t->cv * 100);
  f.evidence = fmt::format("median {} ms, p90 {} ms, max {} ms", ms_text(t->median, 1), ms_text(t->p90, 1),
                           ms_text(t->max, 1));
  f.action = "compare the slow updates' regions and counters with the median ones";
  std::string stopped;  // the action's start when a slow step follows a rank's last record
  if (const auto& s = in.slow; s && !s->steps.empty()) {
    f.ms_per_update = s->excess_ms_per_update;
    // Which updates, and where their extra time went (step numbers written as rank lists are).
    f.evidence += s->steps.size() == 1
                      ? fmt::format("; the slowest, above {} ms (step {}), takes {} ms", ms_text(s->threshold_ms, 1),
                                    detail::rank_numbers(s->steps), ms_text(s->slow_ms, 1))
                      : fmt::format("; the {} slowest, above {} ms (steps {}), take {} ms (median)", s->steps.size(),
                                    ms_text(s->threshold_ms, 1), detail::rank_numbers(s->steps),
                                    ms_text(s->slow_ms, 1));
    // With many, the slowest few by name: in step order they were buried in "118 more".
    constexpr std::size_t kSlowestNamed = 3, kNamedFrom = 8;
    if (s->steps.size() > kNamedFrom && s->steps_ms.size() == s->steps.size()) {
      std::vector<std::size_t> order(s->steps.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return s->steps_ms[a] > s->steps_ms[b]; });
      std::vector<std::string> named;
      for (std::size_t i = 0; i < kSlowestNamed; ++i)
        named.push_back(fmt::format("step {} ({} ms)", s->steps[order[i]], ms_text(s->steps_ms[order[i]], 1)));
      f.evidence += fmt::format(", the slowest of them {}", fmt::join(named, ", "));
    }
    std::string grew;
    for (const auto& g : s->grew)
      grew += fmt::format("{}{} +{} ms ({} against {})", grew.empty() ? "" : ", ", g.region, ms_text(g.grew_ms(), 1),
                          ms_text(g.slow_ms, 1), ms_text(g.typical_ms, 1));
    // Which rank's regions (SlowUpdates::by_own_work), and whether to name one: the rank
    // the others waited for, when it was that rank in at least 2/3 of the steps and not
    // every rank's own work grew.
    std::string on, on_rank;
    const bool every_rank = s->by_own_work && s->most_own_work_grew_ms > 0 &&
                            s->others_own_work_grew_ms >= 0.5 * s->most_own_work_grew_ms;
    if (every_rank)
      on = fmt::format(", on each step's rank with the most own work (every rank's own work grew: the other "
                       "ranks' (median) by {:.1f} ms)",
                       s->others_own_work_grew_ms);
    else if (s->by_own_work && s->set_by_rank && s->set_by_steps == s->steps.size())
      on = fmt::format(", on rank {} (the rank the others waited for)", *s->set_by_rank);
    else if (s->by_own_work && s->set_by_rank)
      on = fmt::format(", on each step's rank with the most own work (the one the others waited for; rank {} "
                       "in {} of the {})",
                       *s->set_by_rank, s->set_by_steps, s->steps.size());
    if (every_rank) on_rank = " on every rank";
    else if (s->by_own_work && s->set_by_rank && 3 * s->set_by_steps >= 2 * s->steps.size())
      on_rank = fmt::format(" on rank {}", *s->set_by_rank);
    else if (s->by_own_work) on_rank = " on the rank with the most own work in each step";
    // A slow step right after a rank's last record: the others likely waited for it (a
    // crashed or hung rank, found by a collective's timeout), whatever grew.
    std::vector<std::string> after_end;
    for (const auto& e : in.cross_rank.ended_early)
      if (std::find(s->steps.begin(), s->steps.end(), e.next_step) != s->steps.end())
        after_end.push_back(fmt::format("step {} is the first after rank {}'s last record", e.next_step, e.rank));
    if (!after_end.empty()) {
      f.evidence += fmt::format("; {}", fmt::join(after_end, ", "));
      stopped = fmt::format("first find out why {} stopped (did it crash or hang? the other ranks may have waited "
                            "for it until a collective's timeout); then ",
                            after_end.size() == 1 ? "that rank" : "those ranks");
    }
    if (!grew.empty()) {
      f.evidence += fmt::format("; in them{}{} {}", on, on.empty() ? "" : ":", grew);
      const RegionGrowth& deepest = s->grew[s->first_chain - 1];
      // (A region absent from the median update did not get slower: it ran only there.)
      const bool slow_path = deepest.typical_ms == 0 &&
                             std::any_of(in.paths.groups.begin(), in.paths.groups.end(),
                                         [&](const PathGroup& g) { return g.slow == deepest.region; });
      // A communication region, or a region inside one (a pipeline's recv), is waiting:
      // what grew there is another rank's lateness, not this region's inputs.
      const std::string& comm = in.cross_rank.comm_region;
      auto waits = [&](const std::string& region) {
        return is_comm_role(in, region) ||
               (!comm.empty() && (region == comm || (in.hierarchy && in.hierarchy->is_ancestor(comm, region))));
      };
      // The region of work that grew most besides the waiting ones, if any.
      const auto work = std::find_if(s->grew.begin() + static_cast<std::ptrdiff_t>(s->first_chain), s->grew.end(),
                                     [&](const RegionGrowth& g) { return !waits(g.region); });
      const std::string work_grew = work == s->grew.end()
                                        ? std::string()
                                        : fmt::format(": of the regions of work, {} grew most (+{:.1f} ms)",
                                                      work->region, work->grew_ms());
      if (waits(deepest.region) && s->by_own_work) {
        // Measured on each step's rank with the most own work, which no rank compared kept
        // waiting: what grew in its communication region is work inside it (a backward
        // pass overlapped with its all-reduce) or the collective itself, not a wait (review:
        // padding spikes on ranks 0 and 2 were "a wait for a rank that was late").
        // (Own work leaves the communication region out: a rank whose extra work is inside
        // its own communication region is not seen as the one with the most, and then this
        // growth is a wait for it, which the action names as the third possibility.)
        f.action = fmt::format("those steps grew in {}{}; {} waited for no rank compared there by own work: what "
                               "grew is work inside {} (compute it holds, such as a backward pass overlapped with its "
                               "all-reduce), a slower collective (the network), or a wait for a rank whose extra work "
                               "is itself inside {} (own work leaves it out){}",
                               deepest.region, on_rank,
                               every_rank ? "the rank the others waited for in each step"
                                          : "that rank, the one the others waited for,",
                               deepest.region, deepest.region,
                               work_grew.empty() ? std::string() : "; " + work_grew.substr(2));
      } else if (waits(deepest.region)) {
        // (The region of work that grew most besides, if any: likely what the late rank did.)
        f.action = fmt::format("those steps waited in {}{}: a wait for a rank or pipeline stage that was late to "
                               "the transfer or collective, not work of its own; find what grew on the rank that "
                               "was late{} (the cross-rank section names who waits)",
                               deepest.region, on_rank,
                               work_grew.empty() ? std::string(" (its own regions in those steps)") : work_grew);
      }
      // (A region that ran only in those steps ran on the rank whose regions these are, not
      // on every rank because every rank's own work grew: a checkpoint on one rank of a
      // pipeline "ran on every rank".)
      else if (slow_path)
        f.action = fmt::format("those steps ran the slow path {}{} (it takes no time in the median update): the "
                               "code-path analysis prices it per unit of work and says what goes with it",
                               deepest.region, every_rank ? " on the rank with the most own work in each step" : on_rank);
      else if (deepest.typical_ms == 0)
        f.action = fmt::format("look at what makes those steps run {}{} (it takes no time in the median update): "
                               "their inputs (frames, tokens, code paths in the log) and the host and GPU at that time",
                               deepest.region, every_rank ? " on the rank with the most own work in each step" : on_rank);
      else
        f.action = fmt::format("look at what makes {} slower{} in those steps: its inputs (frames, tokens, code paths "
                               "in the log) and the host and GPU at that time",
                               deepest.region, on_rank);
      if (s->own_work_typical) {
        // No rank given had more own work than usual: every rank waited in those steps.
        const auto& x = in.cross_rank;
        f.evidence += fmt::format("; no rank compared had more own work than usual in them (the most of any rank {:+.1f} "
                                  "ms against its median): every rank waited",
                                  s->most_own_work_grew_ms);
        // Ranks left out of the comparison were given, but not compared: one of them may be
        // what the others waited for (a late-starting rank slow in these steps).
        std::vector<std::int64_t> left_out;
        for (const auto& [rank, held] : x.ranks_short) left_out.push_back(rank);
        left_out.insert(left_out.end(), x.ranks_without_comm.begin(), x.ranks_without_comm.end());
        std::sort(left_out.begin(), left_out.end());
        if (const auto& l = s->left_out_rank) {
          const auto held = std::find_if(x.ranks_short.begin(), x.ranks_short.end(),
                                         [&](const auto& r) { return r.first == l->rank; });
          f.evidence += fmt::format("; but rank {}, left out of the comparison (its log holds {} of the {} steps), "
                                    "had {:.1f} ms more own work than the median compared rank beyond its usual margin, "
                                    "in the {} slow steps it holds (median)",
                                    l->rank, held->second, x.steps_total, l->grew_ms, l->slow_steps_held);
          f.action = fmt::format("these steps waited for rank {}: look at its host and GPU in those steps (and at why "
                                 "its log holds only {} of the {} steps: it started late, stopped or lost records)",
                                 l->rank, held->second, x.steps_total);
        } else {
          f.action = fmt::format(
              "these steps waited for something outside the ranks compared: {}{}a rank that stopped, or a slow "
              "collective (the network); look there, not at {}'s inputs",
              x.ranks_missing.empty()
                  ? std::string()
                  : fmt::format("a rank without update records ({}), ", ranks_text(x.ranks_missing)),
              left_out.empty() ? std::string()
                               : fmt::format("a rank left out of the comparison ({}: see the cross-rank section), ",
                                             ranks_text(left_out)),
              s->grew[s->first_chain - 1].region);
        }
      }
      // Slow steps whose own cause the medians hide (a loader stall every 10th step among
      // steps that ran a slow path).
      std::vector<std::string> others;
      for (const auto& c : s->other_causes)
        others.push_back(fmt::format("{} in {} {} (+{} ms{})", c.region, c.steps.size() == 1 ? "step" : "steps",
                                     detail::rank_numbers(c.steps), ms_text(c.grew_ms, 1),
                                     c.steps.size() == 1 ? std::string() : std::string(", median over them")));
      if (!others.empty()) {
        f.evidence += fmt::format("; some slow steps have a cause of their own, the region that grew most in each: {}",
                                  fmt::join(others, "; "));
        std::string also;
        for (const auto& c : s->other_causes)
          also += waits(c.region)
                      ? fmt::format("; in {} {} the wait in {} grew instead: find the rank or stage that was late there",
                                    c.steps.size() == 1 ? "step" : "steps", detail::rank_numbers(c.steps), c.region)
                      : fmt::format("; in {} {}, look at {} instead", c.steps.size() == 1 ? "step" : "steps",
                                    detail::rank_numbers(c.steps), c.region);
        f.action += also;
      }
      // Growth in the communication region, with a rank found behind: these steps waited
      // for it. Its own findings say which rank and price the wait; "look at its inputs"
      // pointed at the wrong thing (a 1.3x straggler in steps 20..80 of 200).
      const auto& x = in.cross_rank;
      // (Not where the regions are each step's rank with the most own work's: that rank
      // kept no other waiting, set_by_other and the branch after it below.)
      const bool waited = !s->by_own_work && !x.comm_region.empty() &&
                          std::any_of(s->grew.begin(), s->grew.begin() + static_cast<std::ptrdiff_t>(s->first_chain),
                                      [&](const auto& g) { return g.region == x.comm_region; });
      std::vector<std::string> behind;
      for (const auto& o : out)
        if (o.kind == "straggler" || o.kind == "slow-ranks" || o.kind == "straggler_episode") behind.push_back(o.subject);
      // One rank's log: its communication region grew in these steps while its own work
      // stayed typical (the waiting finding's spikes): they waited for another rank.
      std::size_t spiked = 0;
      for (const auto& w : in.waiting)
        for (const auto step : w.spike_steps)
          spiked += std::count(s->steps.begin(), s->steps.end(), step);
      // The ranks behind explain these steps only where they were behind in most of them:
      // with padding spikes on random ranks of a 64-rank job setting 78 of 87 slow steps,
      // two short stretches were made the first thing to act on.
      const std::size_t with_behind = steps_with_a_rank_behind(x, s->steps);
      const bool behind_most = 2 * with_behind >= s->steps.size();
      // The rank that set most of these steps by its own work is not one found behind: a
      // whole-run straggler is behind in every step, but a padding spike on another rank
      // made these steps slower than the straggler's usual ones (review: "these steps
      // waited for rank 1" when rank 0 and rank 2 had the most own work in them).
      // (Only where the ranks found behind set at most a quarter of them: review found a
      // tie, the straggler in 3 of 6 and rank 0 in 3, said to be "another rank".)
      std::size_t by_behind = 0;
      for (const auto& [rank, n] : s->setters)
        if (behind_in(x, rank, s->steps)) by_behind += n;
      const bool set_by_other = s->by_own_work && s->set_by_rank && !behind.empty() &&
                                !behind_in(x, *s->set_by_rank, s->steps) && 4 * by_behind <= s->steps.size();
      if (waited_alone(in, *s) && 2 * spiked >= s->steps.size()) {
        f.evidence += fmt::format("; in {} of them {} grew while the rank's own work stayed typical: it waited there",
                                  spiked, x.comm_region.empty() ? in.waiting.front().comm_region : x.comm_region);
        f.action = "these steps waited for another rank (or a slow collective): run `stepprof report` on every "
                   "rank's log to name the rank and what grew on it";
      } else if (!behind.empty() && !behind_most && (waited || s->by_own_work)) {
        // (None of them: "behind in 0 of them only: those findings price that part" said
        // a stretch elsewhere priced part of these steps.)
        f.evidence += with_behind == 0
                          ? fmt::format("; a rank was behind ({}) in other steps, in none of these", fmt::join(behind, "; "))
                          : fmt::format("; a rank was behind ({}) in {} of them only: those findings price that part",
                                        fmt::join(behind, "; "), with_behind);
      } else if (set_by_other) {
        f.evidence += fmt::format(
            "; a rank was behind ({}), but the rank with the most own work in these steps was another (rank {} in {} "
            "of them), so they did not wait for it",
            fmt::join(behind, "; "), *s->set_by_rank, s->set_by_steps);
      } else if (waited && !behind.empty()) {
        f.evidence += fmt::format("; {} holds the wait for the slowest rank, and a rank was behind ({}): much of "
                                  "this time is that wait, which those findings price",
                                  x.comm_region, fmt::join(behind, "; "));
        f.action = fmt::format("first act on the slower rank ({}): these steps waited for it in {}; what is left "
                               "after that is this variability's own",
                               fmt::join(behind, "; "), x.comm_region);
      } else if (s->by_own_work && !behind.empty() && (!s->set_by_rank || behind_in(x, *s->set_by_rank, s->steps))) {
        // The slow steps' regions are already the rank's that was behind (not when another
        // rank set them: a one-off on rank 1 was sent to the slow ranks 2, 3).
        f.evidence += fmt::format("; a rank was behind ({}): those findings price its lag", fmt::join(behind, "; "));
        f.action = fmt::format("first act on the slower rank ({}); then {}", fmt::join(behind, "; "), f.action);
      }
    }
    // The logs' first update among the slow ones: its wall time counts from open() (or
    // the last begin_update()), so it holds what ran before the loop, and warm-up.
    const RunSummary* run = in.run;
    // The advice leads only when that update is the slowest: as one of 87 slow steps of
    // padding spikes, no slower than the others, it led the action all the same.
    if (run && run->first_step && run->updates_before_window == 0 &&
        std::find(s->steps.begin(), s->steps.end(), *run->first_step) != s->steps.end()) {
      // ... and only when it stands out from the other slow ones: as the slowest by a hair
      // of 7 steps that ran a slow path, it was sent to warm-up.
      const auto& next = in.time.next_slowest_ms;
      const bool stands_out =
          s->steps.size() == 1 || !next || t->max - t->median > kFirstStandsOut * (*next - t->median);
      if (in.time.slowest_step == run->first_step && stands_out) {
        f.evidence += fmt::format("; step {} is the logs' first update, and the slowest", *run->first_step);
        stopped += first_update_advice(*run);
      } else if (in.time.slowest_step == run->first_step) {
        f.evidence += fmt::format("; step {} is the logs' first update, the slowest by little ({:.1f} against {:.1f} "
                                  "ms for the next)",
                                  *run->first_step, t->max, *next);
      } else {
        f.evidence += fmt::format("; step {} is the logs' first update (not the slowest)", *run->first_step);
      }
    }
    // Likewise the first update after the recorder opened again (a resumed job): its time
    // holds the restart. Steps 10 and 18 of a job resumed twice were sent to their inputs.
    std::vector<std::int64_t> reopened;
    if (run)
      for (const auto& [step, ranks] : run->reopened_at)
        if (std::binary_search(s->steps.begin(), s->steps.end(), step)) reopened.push_back(step);
    if (!reopened.empty()) {
      const bool one = reopened.size() == 1;
      const bool slowest = in.time.slowest_step &&
                           std::find(reopened.begin(), reopened.end(), *in.time.slowest_step) != reopened.end();
      f.evidence += fmt::format("; {} {} {} the first {} after the recorder opened again (a config record "
                                "before {}: a restart, or a rank's late start){}",
                                one ? "step" : "steps", detail::rank_numbers(reopened), one ? "is" : "are",
                                one ? "update" : "updates", one ? "it" : "them",
                                !slowest ? "" : one ? ", and the slowest" : ", one of them the slowest");
      if (slowest)
        stopped += fmt::format("{} {} {} the first update after a restart: {} time counts from when the recorder "
                               "opened again, so {} the restart (start-up, loading the checkpoint, warm-up), "
                               "not training; call begin_update() (Python: rec.begin_update()) just before the loop "
                               "so that it is left out; then ",
                               one ? "step" : "steps", detail::rank_numbers(reopened),
                               one ? "is" : "are each", one ? "its" : "their", one ? "it holds" : "each holds");
    }
  }
  // Too few steps for the slowest ones to be named (slow_updates.cpp), but the longest is
  // the logs' first: it alone may make the spread (a data loader's start-up of 4 s in 8
  // updates of 3 s was this finding's whole 1.4 s, ranked first, with no word of step 1).
  const RunSummary* run = in.run;
  if (!(in.slow && !in.slow->steps.empty()) && run && run->first_step && run->updates_before_window == 0 &&
      in.time.slowest_step == run->first_step && t->max > t->median * 1.1) {
    f.evidence += fmt::format("; the longest update is step {}, the logs' first", *run->first_step);
    stopped += first_update_advice(*run);
  }
  f.action = stopped + f.action;
  out.push_back(std::move(f));
}

// Communication that overlaps no compute (a trace's `<comm>_exposed` child, written by
// the Kineto import: docs/kineto.md): the update waits for it, or for another rank in it.
void exposed_communication(const FindingInputs& in, std::vector<Finding>& out) {
  std::string comm = in.cross_rank.comm_region;
  for (const auto& w : in.waiting)
    if (comm.empty()) comm = w.comm_region;
  if (comm.empty()) return;
  const std::string name = comm + std::string(schema::kExposedSuffix);
  const RegionRow* exposed = nullptr;
  const RegionRow* whole = nullptr;
  for (const auto& r : in.regions.rows) {
    if (r.name == name) exposed = &r;  // (its parent is comm unless a nesting file says otherwise)
    if (r.name == comm) whole = &r;
  }
  if (!exposed || !whole || !exposed->device_ms || !whole->device_ms || !(whole->share > 0)) return;
  // In every update: its median. In some only (NCCL in one update of four, a trace whose
  // prof.step() marks micro-batches): the mean over the window, the others counting 0; their
  // median put one update's 10 ms at stake in each (found by an independent check).
  const bool every = exposed->device_ms->n >= in.regions.updates;
  const double ms = every ? exposed->device_ms->median
                          : exposed->device_ms->sum / static_cast<double>(std::max<std::size_t>(1, in.regions.updates));
  if (ms < 1.0 || exposed->share < 0.01) return;
  Finding f;
  f.kind = "exposed-communication";
  f.subject = comm;
  f.ms_per_update = ms;
  f.title = fmt::format("{:.1f} ms per update of {}'s kernel time overlaps no compute kernel", ms, comm);
  f.evidence = fmt::format(
      "{}: {} busy {:.1f} ms (the union of its kernels over every stream), of which {:.1f} ms with no compute "
      "kernel of the update running ({}){}; over the window {:.0f} % of its kernel time is exposed (the rest overlaps "
      "compute kernels); exposed time includes waiting for other ranks, which the straggler "
      "findings price too when every rank's trace is given",
      every ? std::string("median per update")
            : fmt::format("in the {} of {} updates with exposed time, medians", exposed->device_ms->n,
                          in.regions.updates),
      comm, whole->device_ms->median, exposed->device_ms->median, name,
      every ? std::string() : fmt::format(", {:.1f} ms per update over the window", ms),
      100 * exposed->share / whole->share);
  if (in.cross_rank.window_skew) f.evidence += "; " + describe_window_skew(*in.cross_rank.window_skew);
  f.action = fmt::format(
      "start communication earlier so that compute hides it (DDP: smaller gradient buckets, bucket_cap_mb, so the "
      "all-reduce starts during backward; FSDP: backward and forward prefetch; launch all-to-alls before compute "
      "that does not need their result); with every rank's trace, exposed time that differs between ranks is "
      "waiting for the slowest rank (see the straggler findings)");
  if (const auto& skew = in.cross_rank.window_skew)
    f.action = fmt::format(
        "first find why rank {} enters its steps late (what it does before the step: the previous step's work after "
        "its last collective, the optimizer, data loading, a checkpoint): the other ranks' exposed time is then largely "
        "waiting for it, which earlier communication would not hide; then {}",
        skew->last_rank, f.action);
  out.push_back(std::move(f));
}

// The GPU idle for a large part of each update (a trace's `gpu_busy_ms`, gpu_busy.hpp):
// the host does not keep it fed. Holistic Trace Analysis's "idle time".
void gpu_idle(const FindingInputs& in, std::vector<Finding>& out) {
  const auto& g = in.time.gpu_busy;
  if (!g || g->idle_fraction.median < 0.2 || g->idle_ms.median < 1.0) return;
  Finding f;
  f.kind = "gpu-idle";
  f.subject = "GPU";
  f.ms_per_update = g->idle_ms.median;
  f.title = fmt::format("the GPU is idle {:.1f} ms per update: no kernel, copy or memset runs then",
                        g->idle_ms.median);
  f.evidence = fmt::format(
      "no GPU activity ran on any stream for {:.1f} ms of the update, busy {:.1f} ms (medians; busy: the union of "
      "every kernel, copy and memset within the update's wall time, gpu_busy_ms), over {}; the idle share of each "
      "update {:.0f} % (median; p10 {:.0f} %, p90 {:.0f} %)",
      g->idle_ms.median, g->busy_ms.median, describe_gpu_busy_updates(*g), 100 * g->idle_fraction.median,
      100 * g->idle_fraction.p10, 100 * g->idle_fraction.p90);
  if (g->most_idle_rank)
    f.evidence += fmt::format("; rank {} is the most idle ({:.0f} %, its median)", *g->most_idle_rank,
                              100 * g->most_idle_fraction);
  f.action =
      "look at what the host does in the trace's gaps between kernels: many small kernels each waiting for its "
      "launch (CUDA graphs, torch.compile with mode=\"reduce-overhead\", fused ops), a call that waits for the GPU "
      "(.item(), .cpu(), a copy to pageable memory: pin_memory and non_blocking=True), data loading or Python work on "
      "the training thread (more DataLoader workers, prefetching); the regions flagged host>>device in the region "
      "table are where the host outlasts its kernels";
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> derive_findings(const FindingInputs& in, std::size_t max_findings) {
  std::vector<Finding> out;
  slow_paths(in, out);
  stragglers(in, out);
  slow_group(in, out);
  straggler_episodes(in, out);
  recurring_lags(in, out);
  stage_slow_ranks(in, out);
  group_stretches(in, out);
  waiting(in, out);
  missing_ranks(in, out);
  stopped_rank(in, out);
  padding(in, out);
  exposed_communication(in, out);
  gpu_idle(in, out);
  region_findings(in, out);
  variability(in, out);
  const double median = in.time.update_ms ? in.time.update_ms->median : 0;
  for (auto& f : out)  // (none beyond a double: a median update of 5e-324 ms)
    f.share = median > 0 && std::isfinite(f.ms_per_update / median) ? std::optional<double>(f.ms_per_update / median)
                                                                     : std::nullopt;
  // Problems with the nesting come first: they make other figures wrong. Then a job that
  // stopped before its planned end on a rank that stopped first: what ended the run.
  auto tier = [&](const Finding& f) {
    return f.kind == "nesting" ? 0 : f.kind == "stopped-rank" && in.run && in.run->stopped_early ? 1 : 2;
  };
  std::stable_sort(out.begin(), out.end(), [&](const Finding& a, const Finding& b) {
    const int ta = tier(a), tb = tier(b);
    if (ta != tb) return ta < tb;
    return a.ms_per_update > b.ms_per_update;
  });
  if (out.size() > max_findings) out.resize(max_findings);
  return out;
}

}  // namespace stepprof
