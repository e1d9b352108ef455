// Cross-rank analysis (several ranks' logs of one run): who is the slowest rank in each
// update, by how much, and how long every other rank waits for it.
//
// Method. In synchronous data-parallel training every rank leaves the gradient
// collective together, so a rank that reaches it early waits inside its communication
// region. Per rank and update, compute_ms = wall_ms - (communication region time): the
// time the rank spends on its own work. The slowest rank of an update is the one with
// the largest compute_ms; every other rank's wait is estimated as
//   wait_ms = max over ranks of compute_ms - its own compute_ms,
// i.e. how much sooner it finished its own work than the slowest rank. If the
// communication region also holds compute (e.g. a backward pass that overlaps the
// all-reduce), differences in that compute are not seen, so the estimate is a lower bound.
//
// Straggler scores follow NVIDIA's straggler detection (nvidia-resiliency-ext, "Usage
// guide"): a score is reference time / measured time, in (0, 1], 1 = best.
//   relative score   = fastest rank's median compute_ms / this rank's median compute_ms
//   individual score = this rank's best (minimum) compute_ms / its median compute_ms
// A rank is flagged a straggler when its relative score is below the threshold (0.75 by
// default, the threshold NVIDIA's examples use) and at least kMinStragglerUpdates steps
// are compared: the median of one or two steps is a slow step, not a slow rank (a
// profiler trace often holds one step).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/code_paths.hpp"
#include "stepprof/analysis/group_stretches.hpp"
#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/rank_regions.hpp"
#include "stepprof/analysis/stats.hpp"
#include "stepprof/analysis/waiting.hpp"

namespace stepprof {

/// The slowest rank of one update.
struct UpdateSlowest {
  std::int64_t step = 0;
  std::int64_t slowest_rank = -1;
  double slowest_compute_ms = 0;  ///< its compute_ms [ms]
  double median_compute_ms = 0;   ///< median over ranks [ms]
  double margin_ms = 0;           ///< slowest - median [ms]
  /// The job's update time in this step: the median over the ranks of wall_ms [ms]
  /// (own work plus the communication region, which the ranks wait in together).
  double update_ms = 0;
  /// Median over the ranks other than the slowest [ms]: with 2 ranks the median is their
  /// mean, which half of one rank's growth moved (slow_updates' "every rank grew").
  double others_median_compute_ms = 0;
};

/// One rank over the aligned updates.
struct RankStraggler {
  std::int64_t rank = -1;
  Summary compute_ms;              ///< wall_ms - communication time, per update [ms]
  Summary wait_ms;                 ///< estimated wait per update [ms] (0 when it is the slowest)
  std::optional<Summary> comm_ms;  ///< its communication region per compared step, as compute_ms [ms]
  double relative_score = 1;       ///< (0, 1]; see the file comment
  double individual_score = 1;     ///< (0, 1]
  std::size_t times_slowest = 0;   ///< updates in which it was the slowest rank
  bool straggler = false;
  /// The single-rank estimate (waiting.hpp) for the same rank, for comparison.
  std::optional<double> single_rank_wait_median_ms;
  bool single_rank_waiting = false;
  /// Median over its updates of the `samples` counter (samples it processed per update)
  /// [count]; nullopt when its log has none. A rank given more samples than the others
  /// (another accumulation or micro-batch size) is slower by its work, not its hardware.
  std::optional<double> samples_per_update;
  /// For a rank flagged as a straggler or the slowest in most updates: the regions where
  /// its own work exceeds the other ranks' (rank_regions.hpp), largest first, at most 3,
  /// and whether it is slower in proportion everywhere.
  RankLag lag;
};

/// A stretch of updates in which a rank fell far behind the others: a straggler for a
/// while (a throttled GPU, a noisy neighbour, a run of long samples) rather than over the
/// whole run, which the median-based scores do not flag. See find_straggler_episodes.
struct StragglerEpisode {
  std::int64_t rank = -1;
  std::int64_t first_step = 0;  ///< first update in which it was behind
  std::int64_t last_step = 0;   ///< last update in which it was behind
  std::size_t updates = 0;      ///< aligned updates from first_step to last_step [count]
  std::size_t behind = 0;       ///< of those, updates in which its own work exceeded the median rank's by more than threshold_ms [count]
  double margin_ms = 0;         ///< median margin (its own work - the median rank's) in those updates [ms]
  /// The typical margin it is measured against [ms]: the slowest rank's (median over the
  /// aligned updates); for a long stretch, the median over its updates (behind or not) of the
  /// slowest other rank's margin (ranks behind in an episode of their own there left out),
  /// or of any rank's typical margin (median over ranks and updates) where that is larger.
  double typical_margin_ms = 0;
  double threshold_ms = 0;      ///< the margin above which it counts as behind [ms]
  bool long_stretch = false;    ///< found by the second or third pass (see find_straggler_episodes)
  /// Found by the third pass, on running lower quartiles of margins; threshold_ms is then
  /// their bound.
  bool running_quartile = false;
  /// Found on own work less the slow code paths' excess over the fast ones' cost
  /// (analyze_cross_rank with `paths`), in 10 updates or more: its window, `behind` and
  /// threshold_ms are of that work; margin_ms (the median over every update of the window),
  /// typical_margin_ms and excess_ms are of own work as measured, priced as every long
  /// stretch (the job still waits for the slowest other rank, fallbacks included).
  bool paths_scaled = false;
  /// Sum over its behind updates of (margin - typical margin) [ms]; for a long stretch,
  /// over all its updates of (margin - that update's bound, never below 0): what removing
  /// its lag alone buys.
  double excess_ms = 0;
  /// Of the `behind` updates, those in which another rank was behind too [count]. There
  /// the job waited for the slowest of them, so removing this rank's lag alone buys less
  /// than excess_ms (nothing where another rank was further behind).
  std::size_t shared = 0;  ///< (for a long stretch: other episodes' ranks, beyond their thresholds)
  std::vector<std::int64_t> alongside;  ///< the other ranks behind in some of those updates (ascending, at most 8)
  /// 0 when found among every rank compared; else found in steps after some rank's log
  /// ended (CrossRankResult::steps_after_end), among the `among_ranks` ranks still logging
  /// [count]. `updates` then counts those steps.
  std::size_t among_ranks = 0;
  /// Steps of the compared ranks' logs from first_step to last_step that were not compared
  /// (some rank lacks its record there, or its update lacks the communication region or a
  /// wall time): `updates` leaves them out, so a stretch of 21 steps over 5 lost records
  /// reads "16 of 16" [count].
  std::size_t steps_not_compared = 0;
  /// Empty when found among every rank compared; else the value (JSON text) of the
  /// pipeline-stage field (CrossRankResult::stage_field) among whose ranks it was found
  /// (compare_within_stages, stage_peers.hpp): the median rank, thresholds and margins are
  /// that stage's.
  std::string stage;
};

/// Each rank's own work per aligned update, in the order of `per_update` (for
/// find_straggler_episodes: several ranks can fall behind in the same updates).
struct RankWork {
  std::int64_t rank = -1;
  const std::vector<double>* compute_ms = nullptr;  ///< one per aligned update [ms]
};

/// The straggler episodes of `per_update` (aligned updates, in step order). A rank's
/// margin in an update is its own work minus the median rank's.
/// First pass: a rank is behind in an update when its margin exceeds
///   typical + max(3 x 1.4826 x MAD, 5 % of the median rank's own work),
/// with typical the median over all updates of the slowest rank's margin and MAD the
/// median absolute deviation from it (1.4826 x MAD estimates the standard deviation of
/// normal data; Rousseeuw and Croux, "Alternatives to the median absolute deviation",
/// JASA 1993). Calibrated on the slowest rank, it does not take the random delays that
/// hit some rank in every update for stragglers. With `ranks` given, every rank is
/// compared (two stragglers at once are both found); without, only each update's slowest.
/// An episode is a run of one rank's behind updates with at most 2 other updates between
/// two of them (other ranks' outlying updates among them do not end it), and at least 3
/// behind updates (a single slow update is update-time variance, not a straggler), and
/// beyond chance: for a rank behind in a share p of the n updates outside the run
/// ((behind there + 1) / (outside + 2)), a run of k behind among its L updates must have
/// P(Binomial(L, p) >= k) x n < 1 % (Bonferroni over the places a run can start), so that
/// occasional slow updates (rare fallbacks) that happen to cluster are not an episode.
/// Before these tests, a run with gaps is cut to its highest-scoring part, each update
/// scoring log(q/p) when behind and log((1-q)/(1-p)) when not (q the run's density of
/// behind updates, p as above: the log-likelihood ratio of "in the stretch" against
/// "outside"; Kadane's maximum subarray): lags just before or after a stretch no longer
/// join it across the gaps (on 120 `stepprof synth` jobs with a 1.2x to 1.5x straggler
/// and fallbacks, found boundaries exact in 71 instead of 54, more than 3 updates off or
/// in pieces in 16 instead of 35; none got worse).
/// Second pass, with `ranks`: when stragglers fill most updates (one rank behind for most
/// of the run, or ranks behind in turn), their lag is the first pass's typical value and
/// they are missed. So the same bound is computed over every rank's margin in every
/// update (a typical rank, not the slowest), and a run of at least 10 updates beyond it
/// that fill at least 75 % of the run's updates, beyond chance as in the first pass, is an
/// episode too (`long_stretch`). In a window of fewer than 40 updates, a quarter of them
/// (at least 3) is enough, beyond chance over every rank as well (the chance times the
/// ranks below 1 %), where the first pass found nothing of it: there a stretch over nearly half the updates moves the first pass's
/// median, and one padding spike hid a rank 1.5x slower in 9 of 20 updates (in 120 synth
/// jobs of 10-39 updates, 2-64 ranks, half with a straggler: 53 found against 41, two more
/// jobs with an episode where none was injected: fallback clusters, priced at 0 to 0.12 s
/// in all, below the slowest other rank's margin). A shorter run, of 3 or more, is
/// kept too when it is beyond chance over every rank at the job's share p_job of (rank,
/// update) pairs beyond the bound as well as at the rank's own: P(Binomial(L, max(p,
/// p_job)) >= k) x n x ranks < 1 %. Padding spikes on random ranks in 40 % of the steps or
/// more raise the first pass's median and spread above a short straggler's lag (64 ranks
/// x 40 updates, a 1.3x straggler in 4: bound 5.5 s, its lag 2.1 s); the job's share keeps
/// a rank whose fallbacks happened to fall together out (its own share, from 30-odd
/// updates, can be near 0). On 600 synth jobs (4-64 ranks, 40-200 updates, fallback rate 0
/// or 0.2, spikes in 0-60 % of the steps, half with a 3-6 update straggler): 151 of 300
/// stragglers found against 104, the same 20 episodes where none was injected. A third-pass
/// stretch replaces such a short one as it does the first pass's pieces.
/// It replaces the first pass's episodes of the rank inside
/// it (random delays on other ranks can split a long stretch there; fallbacks on the rank
/// make sharper pieces of it), and is dropped when one of them reaches beyond it, or when
/// it spans half the aligned updates or more and one of them is more than twice as far
/// behind (a sharp episode of a rank a little behind throughout: it says more, and the
/// straggler finding prices the rest). Density, length and the chance test keep random
/// delays out.
/// Third pass, with `ranks`: frequent slow updates on every rank (fallbacks in half the
/// updates) spread the margins as widely as a straggler's lag, and pass 2 misses its
/// stretch. Each rank's margins are replaced by their running lower quartile (the 4th
/// smallest of the 11 updates centred on each: a straggler is slower in every update, a
/// fallback in some), and a run as in pass 2 beyond median + max(6 x 1.4826 x MAD, 8 % of
/// the median rank's own work) of all ranks' running quartiles is a long stretch too
/// (`running_quartile`), unless pass 2 found one of the rank there; it takes the updates
/// around its run (before the trim below) whose own margin is beyond the bound (up to 5
/// each side, as a run does: the quartile of a window the stretch fills less of is not
/// the stretch's), its ends then trimmed to updates beyond its level (below).
/// A long stretch (second or third pass) is judged at its own level, the larger of the
/// bound and half its median margin: its ends are trimmed to updates beyond it (fallbacks
/// next to a straggler's stretch joined it across the gaps), and its updates beyond it
/// must be beyond chance over every rank (P(Binomial(L, p) >= k), p the rank's share of
/// updates beyond the level outside it, times the aligned updates times the ranks, below
/// 1 %: with fallbacks in a third of the updates, 32-64 ranks x 1,000-2,000 updates gave
/// 1-8 "stretches" of 14-19 updates by chance). For a third-pass stretch `behind` counts
/// its updates whose own margin is beyond the bound. A long stretch is priced per update of it (behind the
/// threshold or not: a straggler is slower throughout) against the slowest other rank
/// there (see typical_margin_ms): with fallbacks on the other ranks the job still waits
/// for one of them without it.
/// `threshold_ms` is set to the first pass's threshold (0 when `per_update` is empty).
/// Episodes are in step order (then rank order).
std::vector<StragglerEpisode> find_straggler_episodes(const std::vector<UpdateSlowest>& per_update,
                                                      double& threshold_ms, const std::vector<RankWork>& ranks = {});

/// Puts the stretches found by a second search, on own work less the slow code paths'
/// excess (`scaled`, from find_straggler_episodes on that work), among `episodes` (the
/// first search's, on own work as measured). A scaled stretch of 10 updates or more is
/// kept, marked `paths_scaled`, where `episodes` has nothing of its rank's overlapping it
/// (among_ranks == 0 episodes only), or where everything of its rank's overlapping it lies
/// inside it and covers fewer of its steps (overlapping pieces counted once); those pieces
/// are then removed. Shorter scaled stretches are dropped (3 to 8 updates came by chance
/// where fallbacks are nearly everywhere). The result is in step order, then rank order.
/// Pricing the kept ones is the caller's (price_long_stretches, on own work as measured).
void merge_paths_scaled_episodes(std::vector<StragglerEpisode>& episodes, std::vector<StragglerEpisode> scaled);

/// Ranks slower than the others together, in most updates: a slower node or GPU model, a
/// data shard of longer samples. Half the ranks 1.3x slower has no straggler (relative
/// score 0.77 >= 0.75), no rank that is the slowest in most updates (each update's slowest
/// is one of the slow half, by chance) and no episode (their lag is every update's
/// typical), yet the other half waits about 23 % of the slow ranks' own work in every
/// update. See find_slow_group.
struct SlowGroup {
  std::vector<std::int64_t> slow;  ///< the slower ranks (ascending)
  std::vector<std::int64_t> fast;  ///< the other ranks (ascending)
  double slow_ms = 0;    ///< median over the slow ranks of their mean own work [ms]
  double fast_ms = 0;    ///< median over the fast ranks of their mean own work [ms]
  /// What the ranks were split on: "medians" (each rank's median own work) or "means"
  /// (its mean: tried too, see find_slow_group). gap_ms and the spreads are of it.
  std::string split_on;
  /// The slow ranks' least median own work - the fast ranks' greatest [ms] (the fast
  /// ranks without those slow only in a stretch, which the split put on the fast side).
  double gap_ms = 0;
  double spread_ms = 0;       ///< the fast ranks' range of median own work [ms] (as gap_ms)
  double slow_spread_ms = 0;  ///< the slow ranks' range of median own work [ms]
  /// Mean over the aligned updates of how much sooner the slowest rank would finish its
  /// own work without the slowdown [ms]: the slowest rank's own work minus the larger of
  /// the slowest fast rank's and the slowest of (each slow rank's own work less that
  /// update's lead), so the slow ranks' own jitter stays. A lower bound when the
  /// communication region also holds compute (see the file comment); an estimate under
  /// noise.
  double at_stake_ms = 0;
  /// The lead (per update, the slow ranks' median own work - the fast ranks') as a t
  /// statistic: its median over its standard error (1.2533 x the mean's); nullopt when the
  /// lead is the same in every update.
  std::optional<double> lead_t;
  std::size_t updates = 0;  ///< aligned updates [count]
  /// Of those, the updates in which the slow ranks' median own work exceeded the fast
  /// ranks' by at least half of slow_ms - fast_ms [count].
  std::size_t updates_apart = 0;
  std::size_t updates_slowest = 0;  ///< updates in which a slow rank was the slowest [count]
};

/// The ranks of `ranks` (own work per aligned update, as for find_straggler_episodes) split
/// in two where their median own work has a clear, large gap. Medians, since a group is
/// slower in most updates (the lead rule below), while a rank slow only in a stretch has a
/// raised mean: by means it sat between the fast and the slow ranks, narrowing the gap and
/// widening the fast ranks' range. The splits of the ranks ordered by mean own work are
/// tried too (gap and spreads then of means): with fallbacks in about half the updates a
/// rank's median falls in either mode, and the fast ranks' medians spread wider than their
/// gap to ranks 1.2x slower throughout. Of the splits that meet
///   gap > spread (the fast ranks are closer to each other than to the slow ones) and
///   slow_spread minus the slow side's largest inner gap <= gap (the slow side may hold
///   two tiers, e.g. 1.2x and 2x, but ranks spread evenly, 100, 104, ..., 120 ms, are not
///   a group of all but the fastest),
///   slow_ms - fast_ms >= 5 % of fast_ms (the floor the episodes use), and so is every
///   slow rank's mean (a rank 0.8 % slower is no tier of a 1.4x one),
///   the lead (per update, the slow ranks' median own work minus the fast ranks') has a
///   median at least 5 standard errors above 0 (not chance: the best-looking split of
///   equal ranks has a lead too; the median, as a stretch of updates moves the mean only)
///   and at least half its mean (slower in most updates, not in a stretch of them: that
///   is an episode),
///   every slow rank is slower in most updates itself: its own work less the fast ranks'
///   median, per update, has a median >= 5 % of fast_ms, over the updates outside its
///   own `episodes` that span less than half of them (unless those cover half the
///   updates together: a lag found in pieces is the rank's own) (a stretch can raise a rank's
///   median above the gap; with fallbacks on every rank, a rank 1.3x slower in a third
///   of the updates was slower by 5 % in most of them; such ranks are put on the fast
///   side, once, and the rest of the slow side is judged again, its gap measured without
///   them), and at_stake_ms > 0,
/// the slow group is the one with the largest at_stake_ms (with tiers, the top tier
/// alone would leave the lower one unnamed). slow_ms and fast_ms are medians of the
/// ranks' means. nullopt when none meets them, and with fewer than 2 ranks or no update.
/// `per_update` (the aligned updates, as for find_straggler_episodes) gives the steps of
/// `ranks`' updates, for `episodes`; without them every update counts.
std::optional<SlowGroup> find_slow_group(const std::vector<RankWork>& ranks,
                                         const std::vector<UpdateSlowest>& per_update = {},
                                         const std::vector<StragglerEpisode>& episodes = {});

/// A rank far behind the median rank in scattered updates, not in a stretch: work that
/// one rank does every k-th step (a checkpoint, evaluation or logging on rank 0 only, a
/// garbage collection) or now and then. Neither the median-based scores (most of its
/// updates are as fast as the others') nor the episodes (a run with at most 2 other
/// updates between two behind ones) see it. See find_recurring_lags.
struct RecurringLag {
  std::int64_t rank = -1;
  std::size_t behind = 0;     ///< updates in which it was more than threshold_ms behind [count]
  std::size_t updates = 0;    ///< aligned updates compared (outside its own episodes) [count]
  double margin_ms = 0;       ///< its own work over the median rank's, median over the `behind` updates [ms]
  /// The margin beyond which a rank is behind: CrossRankResult::episode_threshold_ms, or
  /// with paths_scaled the bound by the same rule computed on own work less the slow
  /// paths' excess [ms].
  double threshold_ms = 0;
  /// What the job waits for it, per aligned update: over its behind updates, its margin
  /// beyond the slowest other rank's, summed and divided by all aligned updates [ms].
  double at_stake_ms = 0;
  std::size_t others_behind = 0;    ///< the other ranks' behind updates, all together [count]
  std::size_t others_compared = 0;  ///< the other ranks' updates compared [count]
  /// The step interval when the behind steps are evenly spaced (every k-th step); absent
  /// otherwise.
  std::optional<std::int64_t> every;
  std::vector<std::int64_t> steps;  ///< the behind steps, ascending (the first kRecurringStepsKept)
  /// Every behind step, ascending, and what each adds to at_stake_ms times the aligned
  /// updates (its margin beyond the slowest other rank's) [ms]: the findings take out
  /// the steps that are its padding spikes (the padding finding prices those).
  std::vector<std::int64_t> behind_steps;
  std::vector<double> stake_ms;
  std::vector<double> margins_ms;  ///< its margin in each behind step, as margin_ms [ms]
  /// Found on own work less what slow code paths took beyond the fast paths' cost (where
  /// any update ran one): `threshold_ms` and which updates are behind are of that work;
  /// `margin_ms` and `at_stake_ms` of own work as measured (the job still waits for the
  /// other ranks' fallbacks).
  bool paths_scaled = false;
  /// As StragglerEpisode::stage: empty, or the pipeline stage among whose ranks it was found.
  std::string stage;
};
inline constexpr std::size_t kRecurringStepsKept = 20;

/// The period of behind steps (ascending): consecutive steps are merged into runs (a
/// checkpoint that spills into the next step: 10, 11, 20, 21, ...), and with 3 or more
/// runs, the smallest gap between run starts when every gap is a multiple of it and 3/4
/// of them are that one (a step missed now and then keeps the period); nullopt otherwise.
std::optional<std::int64_t> recurring_period(const std::vector<std::int64_t>& steps);

/// The ranks behind in scattered updates (`per_update` and `ranks` as for
/// find_straggler_episodes; `threshold_ms` its first pass's bound). A rank's updates
/// within 5 updates of one of its own `episodes` are left out (the stretch's ragged
/// edges); ranks in `excluded` (flagged stragglers, a slow group: their findings say
/// more) are not searched. A rank counts with at least 3 behind updates, in at most half
/// of those compared, more than chance gives: P(Binomial(n, p) >= k) x ranks < 1 %, with
/// p the other ranks' share of behind updates ((behind + 1) / (compared + 2)), over every
/// rank (Bonferroni), excluded ranks left out of that share. Needs 2 ranks and 10 aligned
/// updates. `every` is recurring_period() of the behind steps. A rank behind every 2nd
/// or 3rd step is a stretch (episodes allow 2 other updates between two behind ones),
/// not this.
/// `priced_per_update` and `priced_ranks` (the same updates, own work as measured; default:
/// `per_update` and `ranks`) give margin_ms and at_stake_ms where the search ran on other
/// work. Ordered by at_stake_ms, largest first.
std::vector<RecurringLag> find_recurring_lags(const std::vector<UpdateSlowest>& per_update, double threshold_ms,
                                              const std::vector<RankWork>& ranks,
                                              const std::vector<StragglerEpisode>& episodes,
                                              const std::vector<std::int64_t>& excluded,
                                              const std::vector<UpdateSlowest>* priced_per_update = nullptr,
                                              const std::vector<RankWork>* priced_ranks = nullptr);

/// A run of steps, consecutive in the steps of the logs, that share a set of ranks (the
/// ranks that lack them, or whose update there lacks the communication region).
struct StepRun {
  std::int64_t first_step = 0, last_step = 0;
  std::size_t steps = 0;  ///< steps in the run [count]
  std::vector<std::int64_t> ranks;
};

/// The fewest steps compared for a rank to be flagged a straggler (by its score or by
/// being the slowest in most updates) or ranks a slow group [count].
inline constexpr std::size_t kMinStragglerUpdates = 3;

/// A rank's log is short when it holds fewer than half of the steps the ranks' logs hold
/// together (`rank_steps` of `all_steps` distinct steps): the rank comparison
/// (CrossRankResult::ranks_short) and the what-if's synchronization leave such a rank out
/// while two or more others remain, so that the others' steps are still compared.
constexpr bool short_log(std::size_t rank_steps, std::size_t all_steps) { return 2 * rank_steps < all_steps; }

/// Why a comparison of aligned steps leaves a rank out (ranks_left_out).
enum class RankLeftOut : std::uint8_t {
  kKept,
  kShort,  ///< its log holds under half of the steps (short_log)
  kLate,   ///< its log starts late: every step from its first to the last, and no earlier one
  kLost,   ///< its log lacks a few steps between its first and last (lost records), where under half are compared
};

/// Which ranks a comparison of the steps every rank holds leaves out, by the rules of
/// CrossRankResult::ranks_short, shared by the rank comparison and the what-if's
/// synchronization (which give it different ranks: the comparison first leaves out ranks
/// without the communication region, the what-if passes every rank with updates). First the short logs (short_log against the union of every rank's
/// steps), when two or more ranks remain. Then, among the remaining ranks (n of them,
/// their steps' union S), the ranks whose logs start late, when they are at most
/// max(1, n / 10), at least 2 ranks remain, and leaving them out keeps more (rank, step)
/// pairs than leaving out the steps they lack ((n - late) x aligned' > n x aligned, where
/// aligned is the number of steps of S every rank holds), gaining at least 3 steps and a
/// tenth of |S|. Last, when under half of the remaining ranks' steps (their union) are
/// held by every one of them: ranks lacking a few steps (at most max(1, |S| / 20))
/// before their own last one (lost records, or a late start: kLate / kLost; never a rank
/// that only stopped early, nor one that lost more: often the sick rank itself), at most
/// max(1, n / 10) with the late ones, leaving 2 or more. Greedily the one that alone lacks the most steps
/// goes first (then the one lacking the most steps), and the prefix of that order that
/// keeps the most (rank, step) pairs is left out, when it gains at least 3 aligned steps
/// and a tenth of the union (40 of 4,096 ranks that each lost one record at a different
/// step of 40 left no step compared).
/// `rank_steps[i]`: rank i's distinct steps, ascending (an empty list is never late).
/// Returns one entry per rank, in the same order.
/// `keep[i]` (when given): rank i is never left out by the last rule (slowest_often: a
/// straggler that lost a record stays, and so do the steps it lacks).
std::vector<RankLeftOut> ranks_left_out(const std::vector<std::vector<std::int64_t>>& rank_steps,
                                        const std::vector<bool>& keep = {});

/// Per rank: true when it had the most own work of the ranks holding a step in at least 2
/// steps and in more than twice its share of the steps it holds (their number over the
/// number of ranks): a straggler, whatever records it lost, which ranks_left_out's last
/// rule must not leave out (a review: a 1.5x straggler that had lost one record was left
/// out by the order of equal ranks, and no straggler was found). `own[i]`: rank i's
/// (step, own work [ms]) where its own work is known, each step once.
std::vector<bool> slowest_often(const std::vector<std::vector<std::pair<std::int64_t, double>>>& own);

/// Ranks that entered their steps far apart but left them together, from logged start
/// times (`start_unix_ms`: `import kineto` writes each ProfilerStep's start; the ranks'
/// clocks must agree, as on one node or under NTP to well under a millisecond). A rank
/// that enters a step late was slow before it (in the previous step, outside the trace
/// when it holds one step), and the others wait for it in this step's collectives: own
/// work, which compares the work inside each step, then misses it, and the waiting shows
/// as communication (8 DLRM traces: rank 7 entered 7.5 ms after rank 1, every rank left
/// within 0.9 ms; the others' NCCL time was mostly waiting for rank 7, while own work
/// named rank 5). Consecutive steps share their boundaries (a rank enters a step where it
/// left the one before), so ranks that leave a step together enter the next together: the
/// skew shows at the first step compared, and the rule below (medians over the steps)
/// finds it where one or two steps are compared, as in a trace of one step.
struct WindowSkew {
  std::size_t steps = 0;         ///< aligned steps with every rank's start time [count]
  double start_spread_ms = 0;    ///< median over them of the latest entry minus the earliest [ms]
  double end_spread_ms = 0;      ///< likewise of the exits (start + wall_ms) [ms]
  std::int64_t last_rank = 0;    ///< the rank that entered last in the most of them (lowest rank on ties, in a step and between counts)
  std::size_t times_last = 0;    ///< in how many of them it did [count]
  std::int64_t first_rank = 0;   ///< the rank that entered first in the most of them
  /// Set only when start_spread_ms is at least 1 ms and 10 % of the median update (the
  /// slowest rank's wall_ms) and end_spread_ms at most half of start_spread_ms.
};

/// The WindowSkew of aligned steps, from per step and rank (step-major, `nr` ranks per
/// step) the start [ms since the epoch, NaN when unknown] and wall time [ms]; `ranks` the
/// rank numbers in the same order. nullopt when no step has every rank's start, or the
/// spreads do not meet the rule above.
std::optional<WindowSkew> find_window_skew(const std::vector<double>& start_ms, const std::vector<double>& wall_ms,
                                          const std::vector<std::int64_t>& ranks);

/// The skew in words, for the report's cross-rank section and the findings it bears on.
std::string describe_window_skew(const WindowSkew& x);

struct CrossRankResult {
  bool available = false;
  std::string why_not;             ///< when not available, e.g. "one rank only"
  std::string comm_region;         ///< empty: no communication region, compute_ms = wall_ms
  std::string comm_found_by;
  double threshold = 0.75;         ///< relative score below which a rank is a straggler
  std::size_t ranks = 0;            ///< ranks with update records, those left out (ranks_short, ...) included
  std::size_t steps_aligned = 0;   ///< steps present in every rank's log
  std::size_t steps_incomplete = 0;  ///< steps missing from at least one rank (not analyzed)
  /// The first few runs of incomplete steps (consecutive in the steps of the logs, each
  /// lacking the same ranks), with the ranks that lack them.
  std::vector<StepRun> incomplete_examples;
  /// Steps in every rank's log in which some rank's update lacks the communication region
  /// (neither device nor host time): that rank's own work is unknown, as its wall time
  /// holds its wait; not analyzed. With the first few runs of them and those ranks.
  std::size_t steps_without_comm = 0;
  std::vector<StepRun> without_comm_examples;
  /// Steps in every rank's log in which some rank's update has a wall time of 0 (its
  /// clock was never started) or shorter than its communication region: its own work
  /// would read 0 and every other rank wait for it; not analyzed. With the first few
  /// runs of them and those ranks.
  std::size_t steps_bad_wall = 0;
  std::vector<StepRun> bad_wall_examples;
  std::vector<std::int64_t> ranks_missing;  ///< 0..world_size-1 without a log
  /// Ranks whose log ends before the last step of any rank's log (a crash, a hang, a
  /// killed job), ascending rank: its last step, and the next step any rank logged (a
  /// job that logs every k-th update: k later). Filled with two or more ranks.
  struct EndedEarly {
    std::int64_t rank = -1, last_step = 0, next_step = 0;
  };
  std::vector<EndedEarly> ended_early;
  /// Steps after a rank's log ended (every rank lacking them ended before; the other ranks
  /// hold them, at least 2) that are searched for stretches of falling behind among the
  /// ranks still logging: runs of 3 or more steps lacking the same ranks, each searched as
  /// the aligned steps are (find_straggler_episodes). They stay incomplete steps for
  /// everything else (scores, waits, per_update). A rank stopping at step 250 of 400 left a
  /// straggler in steps 300..350 unseen. [count]
  std::size_t steps_after_end = 0;
  /// Ranks whose logs never have comm_region (e.g. it is named differently there), or have
  /// it in under half of their updates, left out of the comparison: their own work would
  /// be their whole wall_ms, waits included, so they would look slow and the others fast.
  std::vector<std::int64_t> ranks_without_comm;
  /// Ranks whose logs hold fewer than half of the steps found in the ranks' logs together
  /// (their union: a job that crashed or whose log was cut), left out of the comparison
  /// when two or more ranks remain: with them, only the steps they hold would be compared,
  /// and a straggler elsewhere could go unseen. Then, likewise, ranks whose logs start late
  /// (every step from their first to the last), when they are at most a tenth of the
  /// ranks and leaving them out keeps more (rank, step) pairs than leaving out the steps
  /// they lack, gaining at least 3 steps and a tenth of them (not a rank that lost a
  /// record or stopped early: often the sick rank itself).
  /// (rank, its steps), ascending rank.
  std::vector<std::pair<std::int64_t, std::size_t>> ranks_short;
  std::size_t steps_total = 0;  ///< steps in any compared rank's log (their union)
  std::vector<UpdateSlowest> per_update;    ///< one per aligned step
  std::vector<RankStraggler> per_rank;      ///< ascending rank
  std::vector<std::int64_t> stragglers;     ///< ranks flagged
  std::optional<Summary> margin_ms;         ///< slowest - median, over updates [ms]
  std::vector<StragglerEpisode> episodes;   ///< stretches in which a rank fell far behind
  std::vector<RecurringLag> recurring;      ///< ranks far behind in scattered updates (find_recurring_lags)
  double episode_threshold_ms = 0;          ///< median over ranks of the margin above which a rank counts as behind [ms]
  std::optional<SlowGroup> slow_group;      ///< ranks slower than the others together, in most updates
  /// Ranks sharing a config value that slowed down together for a few updates (a node);
  /// found only where analyze_cross_rank is given `classes`.
  std::vector<GroupStretch> group_stretches;
  std::optional<WindowSkew> window_skew;    ///< ranks that entered their steps far apart (see WindowSkew)
  /// The config field naming pipeline stages (pipeline_stage_field), when each stage's
  /// ranks were also compared among themselves (compare_within_stages); empty otherwise.
  std::string stage_field;
  std::size_t stages_compared = 0;  ///< stages of kMinStageRanks or more compared ranks [count]
  /// Each compared stage's value (JSON text) and the median own work of its ranks over the
  /// aligned updates [ms], in the field's value order: the heaviest stage sets a
  /// pipeline's pace, so a lighter stage's lag below it may not lengthen the update.
  std::vector<std::pair<std::string, double>> stage_own_ms;
  /// Ranks slower than the other ranks of their pipeline stage throughout (a GPU or node
  /// slower than its peers, which against every rank hides among the heavier stages):
  /// see compare_within_stages.
  struct StageSlowRank {
    std::int64_t rank = -1;
    std::string stage;      ///< its stage's value (JSON text)
    double own_ms = 0;      ///< its median own work over the compared steps [ms]
    double peers_ms = 0;    ///< the median over its stage's other ranks of theirs [ms]
    std::size_t ahead = 0;  ///< compared steps in which its own work was 5 % or more above its stage's other ranks' median [count]
  };
  std::vector<StageSlowRank> stage_slow;
  /// What the job gains per update without their lags, each at its stage's other ranks'
  /// median: the mean over the compared steps of the slowest rank's own work less the
  /// slowest with those lags gone [ms].
  double stage_slow_at_stake_ms = 0;
};

/// A rank's own work in one update (see Method above): wall_ms less the communication
/// region's time, that region's device time, else its host time in an update without a
/// device time for it [ms]. The one rule analyze_cross_rank and the slow-update analysis
/// (a left-out rank's margin) both apply.
struct OwnWork {
  enum class Kind : std::uint8_t {
    kKnown,    ///< `ms` holds the own work
    kNoComm,   ///< the update lacks the communication region: its wall time holds the wait
    kBadWall,  ///< wall_ms is 0 (a clock never started) or shorter than the region's time
  };
  Kind kind = Kind::kKnown;
  double ms = 0;       ///< wall_ms - comm_ms where kKnown [ms]
  double comm_ms = 0;  ///< the region's time, 0 where the update lacks it [ms]
};

/// The own work of `log.updates[j]`; `first` is in.first_update_of(log), `comm` the
/// communication region (nullopt: none, the own work is the whole wall time) and
/// `comm_dev` whether its device time is used (AnalysisInput::has_device_time).
OwnWork own_work(const AnalysisInput& in, const RankLog& log, std::optional<std::size_t> first, std::size_t j,
                 std::optional<NameTable::Id> comm, bool comm_dev);

/// `waiting` are the single-rank results of the same ranks (for the comparison columns);
/// `world_size` from the config when known. With `paths` (the code-path analysis of the
/// same input) that has a slow path, straggler stretches are also searched for on each
/// rank's own work less its slow paths' excess over the fast paths' cost for the same
/// work (path_excess_ms); such a stretch is kept where the search on own work found none
/// of the rank's there, or replaces the shorter pieces it found inside it
/// (StragglerEpisode::paths_scaled). With `classes` (RunSummary::config_differences of the
/// same input), ranks that share a config value and slowed down together for a few
/// updates are searched for (find_group_stretches).
CrossRankResult analyze_cross_rank(const AnalysisInput& in, const std::vector<WaitingResult>& waiting,
                                   std::optional<std::int64_t> world_size, double threshold = 0.75,
                                   const CodePathResult* paths = nullptr,
                                   const std::vector<ConfigDifference>* classes = nullptr);

}  // namespace stepprof
