#include "stepprof/analysis/cross_rank.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "stepprof/analysis/stage_peers.hpp"
#include "stepprof/analysis/timeline.hpp"
#include "stepprof/schema.hpp"

namespace stepprof {

namespace {

// Collects the first few runs of steps: a step joins the run before it when it is the
// next step of the logs (index si) and has the same ranks.
class StepRuns {
 public:
  static constexpr std::size_t kMostRuns = 10;
  explicit StepRuns(std::vector<StepRun>& runs) : runs_(runs) {}
  void add(std::size_t si, std::int64_t step, std::vector<std::int64_t>&& ranks) {
    const bool joins = open_ && si == last_si_ + 1 && runs_.back().ranks == ranks;
    last_si_ = si;
    if (joins) {
      runs_.back().last_step = step;
      ++runs_.back().steps;
      return;
    }
    open_ = runs_.size() < kMostRuns;
    if (open_) runs_.push_back({step, step, 1, std::move(ranks)});
  }

 private:
  std::vector<StepRun>& runs_;
  std::size_t last_si_ = 0;
  bool open_ = false;  // the previous step is in runs_.back()
};

// Median and 1.4826 x MAD of `v` (reordered).
std::pair<double, double> median_and_robust_sd(std::vector<double>& v) {
  const double mid = *median(v);
  for (double& x : v) x = std::fabs(x - mid);
  return {mid, 1.4826 * *median(v)};
}

// P(X >= k) for X ~ Binomial(n, p): the chance that k or more of n updates are behind
// when each is with probability p on its own (sum of the probability mass function in
// log space, lgamma for the binomial coefficients).
double binomial_upper_tail(std::size_t k, std::size_t n, double p) {
  if (k == 0) return 1;
  if (k > n || p <= 0) return 0;
  if (p >= 1) return 1;
  const double ln_p = std::log(p), ln_q = std::log1p(-p), ln_n1 = std::lgamma(static_cast<double>(n) + 1);
  double sum = 0;
  for (std::size_t i = k; i <= n; ++i) {
    const double di = static_cast<double>(i);
    sum += std::exp(ln_n1 - std::lgamma(di + 1) - std::lgamma(static_cast<double>(n - i) + 1) + di * ln_p +
                    static_cast<double>(n - i) * ln_q);
  }
  return std::min(1.0, sum);
}

// The other ranks named beside an episode (StragglerEpisode::alongside): at most this many.
constexpr std::size_t kAlongsideUpTo = 8;

// A long stretch's company and price, for every long_stretch episode of `out` (their
// windows and thresholds set), on own work `ranks` over the aligned updates `per_update`,
// with `pooled_typical` the median of every rank's margin over every update.
// A long stretch's company: the ranks of other episodes behind (beyond their own
// threshold) in its behind updates. (Against the typical rank's bound, random delays
// would put every rank there now and then.)
// And its price: in each of its updates, its margin beyond the slowest of the other ranks
// that are not behind in an episode of their own there (those are the company: the
// findings share such waits), or beyond the typical rank's margin if that is larger (never below 0);
// the typical margin is the median of those bounds. Against the typical rank's margin
// alone, a stretch was priced 1.6-1.8x what removing it buys when fallbacks on the
// other ranks keep the slowest of them well behind the median rank.
void price_long_stretches(std::vector<StragglerEpisode>& out, const std::vector<UpdateSlowest>& per_update,
                          const std::vector<RankWork>& ranks, double pooled_typical) {
  if (ranks.empty() || std::none_of(out.begin(), out.end(), [](const auto& e) { return e.long_stretch; })) return;
  auto margin_of = [&](const RankWork& r, std::size_t i) { return (*r.compute_ms)[i] - per_update[i].median_compute_ms; };
  std::map<std::int64_t, const RankWork*> work_of;
  for (const RankWork& r : ranks) work_of[r.rank] = &r;
  auto first_of = [&](std::int64_t step) {
    return static_cast<std::size_t>(
        std::lower_bound(per_update.begin(), per_update.end(), step,
                         [](const UpdateSlowest& u, std::int64_t s) { return u.step < s; }) -
        per_update.begin());
  };
  // Per update, once (each episode's loop over every episode and every rank was
  // quadratic in the stragglers): the ranks behind in an episode of their own there,
  // lowest first, and the two largest margins of the other ranks, with their ranks.
  std::vector<std::vector<std::int64_t>> in_episode(per_update.size());
  for (const StragglerEpisode& o : out)
    for (std::size_t i = first_of(o.first_step); i < per_update.size() && per_update[i].step <= o.last_step; ++i)
      if (margin_of(*work_of[o.rank], i) > o.threshold_ms) in_episode[i].push_back(o.rank);
  struct Top {
    double margin = -std::numeric_limits<double>::infinity();
    std::int64_t rank = 0;
  };
  std::vector<std::array<Top, 2>> top(per_update.size());
  for (std::size_t i = 0; i < per_update.size(); ++i) {
    auto& e = in_episode[i];
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
    for (const RankWork& r : ranks) {
      if (std::binary_search(e.begin(), e.end(), r.rank)) continue;
      const Top t{margin_of(r, i), r.rank};
      if (t.margin > top[i][0].margin) top[i] = {t, top[i][0]};
      else if (t.margin > top[i][1].margin) top[i][1] = t;
    }
  }
  std::vector<double> bounds;
  for (StragglerEpisode& ep : out) {
    if (!ep.long_stretch) continue;
    ep.shared = 0;
    ep.alongside.clear();
    ep.excess_ms = 0;
    bounds.clear();
    for (std::size_t i = first_of(ep.first_step); i < per_update.size() && per_update[i].step <= ep.last_step; ++i) {
      const double m = margin_of(*work_of[ep.rank], i);
      // The company: the other ranks behind in an episode of their own here.
      const auto& e = in_episode[i];
      const bool self_in = std::binary_search(e.begin(), e.end(), ep.rank);
      if (m > ep.threshold_ms) {
        ep.shared += e.size() > (self_in ? 1u : 0u) ? 1 : 0;
        std::size_t taken = 0;  // (alongside keeps the kAlongsideUpTo lowest)
        for (const std::int64_t r : e) {
          if (taken == kAlongsideUpTo) break;
          if (r == ep.rank) continue;
          ep.alongside.push_back(r);
          ++taken;
        }
      }
      // The slowest of the others outside the company, or the typical rank's margin.
      const Top& t = top[i][0].rank != ep.rank ? top[i][0] : top[i][1];
      const double bound = std::max(pooled_typical, t.margin);
      bounds.push_back(bound);
      ep.excess_ms += std::max(0.0, m - bound);
    }
    ep.typical_margin_ms = bounds.empty() ? pooled_typical : *median(bounds);
    std::sort(ep.alongside.begin(), ep.alongside.end());
    ep.alongside.erase(std::unique(ep.alongside.begin(), ep.alongside.end()), ep.alongside.end());
    if (ep.alongside.size() > kAlongsideUpTo) ep.alongside.resize(kAlongsideUpTo);
  }
}

}  // namespace

std::vector<StragglerEpisode> find_straggler_episodes(const std::vector<UpdateSlowest>& per_update,
                                                      double& threshold_ms, const std::vector<RankWork>& ranks) {
  std::vector<StragglerEpisode> out;
  threshold_ms = 0;
  if (per_update.empty()) return out;
  std::vector<double> margins, work;
  margins.reserve(per_update.size() * std::max<std::size_t>(1, ranks.size()));  // (passes 2 and 3 hold every rank's)
  work.reserve(per_update.size());
  for (const auto& u : per_update) {
    margins.push_back(u.margin_ms);
    work.push_back(u.median_compute_ms);
  }
  const double floor_ms = 0.05 * *median(work);
  auto margin_of = [&](const RankWork& r, std::size_t i) { return (*r.compute_ms)[i] - per_update[i].median_compute_ms; };

  // Pass 1: against the slowest margins (how far behind the slowest of the ranks usually
  // is, so that a random delay on some rank in every update is not a straggler).
  const auto [typical, sd] = median_and_robust_sd(margins);
  threshold_ms = typical + std::max(3 * sd, floor_ms);
  // Pass 2, with `ranks`: against every rank's margin in every update, for long stretches
  // only (pass 1 misses them when they fill most updates: they are then the typical).
  double pooled_typical = 0, pooled_threshold = 0;
  if (!ranks.empty()) {
    margins.clear();
    for (const RankWork& r : ranks)
      for (std::size_t i = 0; i < per_update.size(); ++i) margins.push_back(margin_of(r, i));
    const auto [t, d] = median_and_robust_sd(margins);
    pooled_typical = t;
    pooled_threshold = std::max(t + std::max(3 * d, floor_ms), floor_ms);
  }
  // Pass 3, with `ranks`: the same on each rank's running lower quartile of margins (the
  // 4th smallest of the kWindow = 11 around each update), for long stretches that
  // frequent slow updates on every rank hide from pass 2: a straggler is slower in every
  // update, a fallback in some. With fallbacks in half the updates or more (rate 0.3-0.5
  // in synth), margins spread about 650-820 ms (robust standard deviation) around a 1.3x
  // straggler's 2000-2500, and pass 2 found none of 24 such stretches whole. A running
  // median is no good: where a quarter to a third of the updates have a fallback, a rank
  // has fallbacks in most of 9 updates now and then, and runs of 10-16 updates stood out
  // by chance. The bound is 6 robust standard deviations of all ranks' running quartiles
  // over their median, and at least 8 % of the own work: in 180 synth jobs without a
  // straggler (2-16 ranks, fallback rates 0.05-0.5) no rank's quartiles were beyond it in
  // more than 4 updates of a run (a stretch needs 10).
  constexpr std::size_t kWindow = 11;
  constexpr double kQuartile = 0.3, kSmoothSds = 6, kSmoothFloor = 0.08;
  std::vector<std::vector<double>> smooth;
  double smooth_threshold = 0;
  if (!ranks.empty()) {
    std::vector<double> series(per_update.size());
    margins.clear();
    for (const RankWork& r : ranks) {
      for (std::size_t i = 0; i < per_update.size(); ++i) series[i] = margin_of(r, i);
      smooth.push_back(running_quantile(series, kWindow, kQuartile));
      margins.insert(margins.end(), smooth.back().begin(), smooth.back().end());
    }
    const auto [t, d] = median_and_robust_sd(margins);
    const double smooth_floor = kSmoothFloor / 0.05 * floor_ms;  // (floor_ms is 5 % of the own work)
    smooth_threshold = std::max(t + std::max(kSmoothSds * d, smooth_floor), smooth_floor);
  }

  // Each pass's behind updates per rank (index into per_update, margin), and how many
  // ranks are behind in each update (pass 1).
  using Behind = std::map<std::int64_t, std::vector<std::pair<std::size_t, double>>>;
  Behind behind, behind_long, behind_smooth;
  std::vector<std::uint32_t> behind_in(per_update.size(), 0);
  for (std::size_t i = 0; i < per_update.size(); ++i) {
    const UpdateSlowest& u = per_update[i];
    if (ranks.empty()) {
      if (u.margin_ms > threshold_ms) {
        behind[u.slowest_rank].emplace_back(i, u.margin_ms);
        ++behind_in[i];
      }
      continue;
    }
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      const RankWork& r = ranks[k];
      const double m = margin_of(r, i);
      if (m > pooled_threshold) behind_long[r.rank].emplace_back(i, m);
      if (u.margin_ms <= threshold_ms || m <= threshold_ms) continue;
      behind[r.rank].emplace_back(i, m);
      ++behind_in[i];
    }
  }
  // Pass 3's behind updates: beyond the bound in their running quartile.
  for (std::size_t k = 0; k < smooth.size(); ++k)
    for (std::size_t i = 0; i < per_update.size(); ++i)
      if (smooth[k][i] > smooth_threshold) behind_smooth[ranks[k].rank].emplace_back(i, margin_of(ranks[k], i));
  // The ranks beyond `thr` in update i other than `rank` (for `alongside`, which keeps the
  // kAlongsideUpTo lowest): the lowest kAlongsideUpTo of them. Each update's ranks beyond
  // `thr` are found once and kept, lowest first (a search of every rank for each behind
  // update of each episode was quadratic in the ranks: minutes for 600 stragglers of 4,096).
  std::vector<std::optional<std::vector<std::int64_t>>> beyond(per_update.size());
  double beyond_thr = std::numeric_limits<double>::quiet_NaN();
  auto others_in = [&](std::size_t i, std::int64_t rank, double thr, std::vector<std::int64_t>& into) {
    if (!(thr == beyond_thr)) {
      for (auto& b : beyond) b.reset();
      beyond_thr = thr;
    }
    if (!beyond[i]) {
      auto& b = beyond[i].emplace();
      for (const RankWork& r : ranks)
        if (margin_of(r, i) > thr) b.push_back(r.rank);
      std::sort(b.begin(), b.end());
    }
    std::size_t taken = 0;
    for (const std::int64_t r : *beyond[i]) {
      if (taken == kAlongsideUpTo) break;
      if (r == rank) continue;
      into.push_back(r);
      ++taken;
    }
  };
  // Runs of one rank's behind updates with at most kMaxGap others between two of them.
  constexpr std::size_t kMaxGap = 2, kMinBehind = 3;
  constexpr double kChanceAtMost = 0.01;      // pass 1: a run's chance, over all the places it could start
  // Pass 2: at least this many behind (and beyond chance), a quarter of the window in
  // windows of fewer than 40 updates: there a stretch over nearly half the updates (9 of
  // 20) moves pass 1's median slowest margin, so that one other slow update (a padding
  // spike) lifted pass 1's bound from 0.6 to 8.8 s, and pass 2 asked for 10 updates.
  // A shorter stretch (kMinBehind or more) is kept too when it is beyond chance at the
  // job's rate as well (below): where padding spikes on random ranks made some rank slow
  // in 40 % of the steps or more, pass 1's bound (the slowest margins' median and spread)
  // rose above a 1.3x straggler's 4 updates (64 ranks x 40 updates: bound 5.5 s, the
  // straggler 2.1 s behind), and pass 2 asked for 10.
  const std::size_t kLongMinBehind = std::clamp<std::size_t>(per_update.size() / 4, kMinBehind, 10);
  // The share of every rank's updates beyond pass 2's bound: under no straggler every rank
  // is behind at about this rate (fallbacks, spikes), whatever its own few updates say.
  std::size_t pooled_behind = 0;
  for (const auto& [rank, at] : behind_long) pooled_behind += at.size();
  const double pooled_rate =
      ranks.empty() ? 0 : static_cast<double>(pooled_behind) / static_cast<double>(ranks.size() * per_update.size());
  constexpr double kLongMinDensity = 0.75;    // in at least this share of the stretch's updates
  std::vector<double> run_margins, edge_margins;
  auto collect = [&](const Behind& from, bool long_pass, double base, double thr, bool smoothed) {
    for (const auto& [rank, at] : from) {
      for (std::size_t first = 0; first < at.size();) {
        std::size_t e = first + 1;
        while (e < at.size() && at[e].first - at[e - 1].first <= kMaxGap + 1) ++e;
        // The run is cut to its part most likely to be one stretch: lags of the rank just
        // before or after a stretch (fallbacks, behind in a share p of the other updates)
        // joined it across the gaps, and a stretch started 3 to 16 updates early. Each
        // update scores its log-likelihood ratio of "in the stretch" (behind with the run's
        // density q) against "outside" (behind with p): log(q/p) if behind, else
        // log((1-q)/(1-p)); the run keeps its highest-scoring part (Kadane's maximum
        // subarray). A run without gaps, or no denser than outside, stays whole.
        const std::size_t run_end = e;  // (the next run starts after it, cut or not)
        if (e - first > 1) {
          const double span0 = static_cast<double>(at[e - 1].first - at[first].first + 1);
          const double q = static_cast<double>(e - first) / span0;
          const double p_out = static_cast<double>(at.size() - (e - first) + 1) /
                               (static_cast<double>(per_update.size()) - span0 + 2);
          if (q < 1 && q > p_out) {
            const double up = std::log(q / p_out), down = std::log((1 - q) / (1 - p_out));
            double cur = up, best = up;
            std::size_t start = first, best_first = first, best_end = first + 1;
            for (std::size_t k = first + 1; k < e; ++k) {
              const double extended = cur + static_cast<double>(at[k].first - at[k - 1].first - 1) * down + up;
              if (extended >= up) {
                cur = extended;
              } else {
                cur = up;
                start = k;
              }
              if (cur >= best) {
                best = cur;
                best_first = start;
                best_end = k + 1;
              }
            }
            first = best_first;
            e = best_end;
          }
        }
        // A long stretch (passes 2 and 3) is judged at its own level: beyond the bound, and
        // at least half its median margin. A straggler 1.5x slower is about 3.4 s behind the
        // median rank, a fallback 1 s: fallbacks next to the stretch joined it across the
        // gaps (synth --straggler 3:100:150:1.5 with fallbacks: steps 100..153). Its ends are
        // trimmed to updates beyond that level.
        double level = thr;
        const std::size_t run_lo = at[first].first, run_hi = at[e - 1].first;  // (before the trim)
        if (long_pass) {
          run_margins.clear();
          for (std::size_t k = first; k < e; ++k) run_margins.push_back(at[k].second);
          level = std::max(thr, 0.5 * *median(run_margins));
          while (first + 1 < e && at[first].second <= level) ++first;
          while (e - 1 > first && at[e - 1].second <= level) --e;
        }
        const std::size_t n = e - first, span = at[e - 1].first - at[first].first + 1;
        // Pass 1: a run must also be beyond chance. A rank behind in a share p of the
        // updates outside the run (rare fallbacks, say; (behind + 1) / (updates + 2), so
        // that none outside is not a certainty) has k of the run's updates behind by chance
        // with probability P(Binomial(span, p) >= k); over every place a run could start
        // (Bonferroni), that must stay below 1 %. With 2-3 ranks and occasional fallbacks,
        // 3 fallback updates within 6 made an episode in 7 of 10 jobs.
        const double p_rank = static_cast<double>(at.size() - n + 1) /
                              static_cast<double>(per_update.size() - span + 2);
        // Pass 2 asks the same of a long stretch, and that it fill most of its updates: with
        // fallbacks on every rank (rate 0.2), a rank 1.3x slower in 61 updates was behind
        // in 54 of them, and a rule of 90 % lost it.
        const bool beyond_chance =
            binomial_upper_tail(n, span, p_rank) * static_cast<double>(per_update.size()) < kChanceAtMost;
        // A stretch shorter than 10 updates (a short window's) must be beyond chance over
        // every rank as well: with 64 ranks and fallbacks in a fifth of the updates, some
        // rank is behind in 6 of 7 updates by chance now and then.
        const bool short_beyond_chance = n >= 10 || binomial_upper_tail(n, span, p_rank) *
                                                            static_cast<double>(per_update.size()) *
                                                            static_cast<double>(std::max<std::size_t>(ranks.size(), 1)) <
                                                        kChanceAtMost;
        // A pass-2 stretch shorter than kLongMinBehind: beyond chance over every rank at the
        // job's rate as well as the rank's own. A rank's own rate, estimated from 30 to 40
        // updates, was 1/38 for one whose fallbacks (job rate 0.36) fell mostly together, in 8 of
        // 9 updates (synth --ranks 64 --updates 40 --fallback-rate 0.2 --seed 4).
        const bool short_at_job_rate =
            !long_pass || smoothed || n >= kLongMinBehind ||
            binomial_upper_tail(n, span, std::max(p_rank, pooled_rate)) * static_cast<double>(per_update.size()) *
                    static_cast<double>(std::max<std::size_t>(ranks.size(), 1)) <
                kChanceAtMost;
        bool keep = beyond_chance && short_at_job_rate &&
                    (long_pass ? n >= (smoothed ? 10 : kMinBehind) && short_beyond_chance &&
                                                                  static_cast<double>(n) >=
                                                                                  kLongMinDensity * static_cast<double>(span)
                                                      : n >= kMinBehind);
        // Pass 2's stretch replaces the pieces pass 1 found of it (random delays on other
        // ranks can split a long stretch there). It is dropped when a piece reaches beyond
        // it, or when it spans half the run or more and a piece is more than twice as far
        // behind (a sharp episode of a rank a little behind throughout: the piece says more,
        // and the straggler finding prices the rest). A shorter stretch keeps its sharper
        // pieces (fallbacks on the straggler itself): a 61-update stretch gave way to 5 of
        // its updates, priced at an eighth of it.
        // A long stretch must then be beyond chance at that level, over every rank and
        // every place it could start (Bonferroni), with the rank's share p of updates
        // beyond the level outside it. A running quartile is beyond its bound wherever most
        // of 11 updates are, and a rank with fallbacks in a third of its updates has them in
        // 16 of 19 now and then: 64 ranks x 2,000 updates (synth --fallback-rate 0.2, seed
        // 9, no straggler) gave 8 "stretches" (14 of 14 updates, say) before. Pass 3's
        // stretch ends where a window's quartile is no longer the stretch's, 2 or more
        // updates early at each end: from its untrimmed ends it takes the updates around it
        // beyond the bound, up to half a window, as a run does (at most kMaxGap others
        // between two), and is then trimmed to updates beyond the level. (Extended from the
        // trimmed ends, over the level, a stretch whose own lag is below it and whose
        // fallbacks raise it lost its first updates: synth --ranks 8 --updates 400
        // --fallback-rate 0.3 --straggler 2:50:80:1.3 --seed 6 gave steps 57..80.) Its
        // updates "far behind" are those beyond the bound (a quartile beyond it is no update's).
        std::size_t lo = at[first].first, hi = at[e - 1].first, far_behind = n;
        edge_margins.clear();
        if (keep && long_pass) {
          const RankWork& w =
              *std::find_if(ranks.begin(), ranks.end(), [&, id = rank](const RankWork& r) { return r.rank == id; });
          if (smoothed) {
            const std::size_t in_lo = lo, in_hi = hi;  // (the trimmed run's ends)
            lo = run_lo;
            hi = run_hi;
            const std::size_t lo_most = lo >= kWindow / 2 ? lo - kWindow / 2 : 0,
                              hi_most = std::min(per_update.size() - 1, hi + kWindow / 2);
            for (std::size_t j = lo; j-- > lo_most && lo - j <= kMaxGap + 1;)
              if (margin_of(w, j) > thr) lo = j;
            for (std::size_t j = hi + 1; j <= hi_most && j - hi <= kMaxGap + 1; ++j)
              if (margin_of(w, j) > thr) hi = j;
            while (lo < in_lo && margin_of(w, lo) <= level) ++lo;
            while (hi > in_hi && margin_of(w, hi) <= level) --hi;
            for (std::size_t j = lo; j < in_lo; ++j)
              if (margin_of(w, j) > level) edge_margins.push_back(margin_of(w, j));
            for (std::size_t j = in_hi + 1; j <= hi; ++j)
              if (margin_of(w, j) > level) edge_margins.push_back(margin_of(w, j));
          }
          std::size_t inside = 0, outside = 0;
          far_behind = 0;
          for (std::size_t j = 0; j < per_update.size(); ++j) {
            const double m = margin_of(w, j);
            const bool in = j >= lo && j <= hi;
            if (m > level) ++(in ? inside : outside);
            if (in && m > thr) ++far_behind;
          }
          const std::size_t width = hi - lo + 1;
          const double p_level = static_cast<double>(outside + 1) / static_cast<double>(per_update.size() - width + 2);
          keep = binomial_upper_tail(inside, width, p_level) * static_cast<double>(per_update.size()) *
                     static_cast<double>(ranks.size()) <
                 kChanceAtMost;
        }
        bool known = false;
        if (keep && long_pass) {
          const std::int64_t who = rank, from_step = per_update[at[first].first].step,
                             to_step = per_update[at[e - 1].first].step;  // (clang 14: no capture of `rank`)
          auto overlaps = [&](const StragglerEpisode& x) {
            return x.rank == who && x.first_step <= to_step && from_step <= x.last_step;
          };
          run_margins.clear();
          for (std::size_t k = first; k < e; ++k) run_margins.push_back(at[k].second);
          const double stretch_margin = *median(run_margins);
          // (A stretch of fewer than 10, a short window's, only fills in where the first
          // pass found nothing of it: it is there for a first pass misled by the window.
          // Pass 3's stretch gives way to pass 2's, but replaces a short one of pass 2 as it
          // does pass 1's pieces: a 1.3x straggler's 31 updates among fallbacks (rate 0.3)
          // were beyond pass 2's bound in pieces of 5 and 6 updates.)
          const auto short_pass2 = [&](const StragglerEpisode& x) {
            return x.long_stretch && !x.running_quartile && x.behind < kLongMinBehind;
          };
          for (const auto& x : out) {
            if (!overlaps(x) || (smoothed && short_pass2(x))) continue;
            if (n < 10 || (smoothed && x.long_stretch) || x.first_step < from_step || x.last_step > to_step ||
                (2 * span >= per_update.size() && x.margin_ms > 2 * stretch_margin))
              known = true;
          }
          if (!known) out.erase(std::remove_if(out.begin(), out.end(), overlaps), out.end());
        }
        if (keep && !known) {
          StragglerEpisode ep;
          ep.rank = rank;
          ep.first_step = per_update[lo].step;
          ep.last_step = per_update[hi].step;
          ep.updates = hi - lo + 1;
          ep.behind = far_behind;
          ep.typical_margin_ms = base;
          ep.threshold_ms = thr;
          ep.long_stretch = long_pass;
          ep.running_quartile = smoothed;
          run_margins = edge_margins;
          for (std::size_t k = first; k < e; ++k) {
            run_margins.push_back(at[k].second);
            ep.excess_ms += at[k].second - base;
            if (!long_pass && behind_in[at[k].first] > 1) {  // (a long stretch's: below)
              ++ep.shared;
              others_in(at[k].first, rank, thr, ep.alongside);
            }
          }
          std::sort(ep.alongside.begin(), ep.alongside.end());
          ep.alongside.erase(std::unique(ep.alongside.begin(), ep.alongside.end()), ep.alongside.end());
          if (ep.alongside.size() > kAlongsideUpTo) ep.alongside.resize(kAlongsideUpTo);
          ep.margin_ms = *median(run_margins);
          out.push_back(std::move(ep));
        }
        first = run_end;
      }
    }
  };
  collect(behind, false, typical, threshold_ms, false);
  collect(behind_long, true, pooled_typical, pooled_threshold, false);
  // Pass 3's stretch likewise, unless pass 2 found one there (its own margins say more).
  collect(behind_smooth, true, pooled_typical, smooth_threshold, true);
  price_long_stretches(out, per_update, ranks, pooled_typical);
  std::sort(out.begin(), out.end(), [](const StragglerEpisode& x, const StragglerEpisode& y) {
    return std::tie(x.first_step, x.rank) < std::tie(y.first_step, y.rank);
  });
  return out;
}

std::optional<std::int64_t> recurring_period(const std::vector<std::int64_t>& steps) {
  std::vector<std::int64_t> starts;
  for (std::size_t j = 0; j < steps.size(); ++j)
    if (j == 0 || steps[j] != steps[j - 1] + 1) starts.push_back(steps[j]);
  if (starts.size() < 3) return std::nullopt;
  std::int64_t d = std::numeric_limits<std::int64_t>::max();
  for (std::size_t j = 1; j < starts.size(); ++j) d = std::min(d, starts[j] - starts[j - 1]);
  if (d < 2) return std::nullopt;  // (not ascending)
  std::size_t exact = 0;
  for (std::size_t j = 1; j < starts.size(); ++j) {
    const std::int64_t gap = starts[j] - starts[j - 1];
    if (gap % d != 0) return std::nullopt;
    exact += gap == d ? 1 : 0;
  }
  return 4 * exact >= 3 * (starts.size() - 1) ? std::optional<std::int64_t>(d) : std::nullopt;
}

std::vector<RecurringLag> find_recurring_lags(const std::vector<UpdateSlowest>& per_update, double threshold_ms,
                                              const std::vector<RankWork>& ranks,
                                              const std::vector<StragglerEpisode>& episodes,
                                              const std::vector<std::int64_t>& excluded,
                                              const std::vector<UpdateSlowest>* priced_per_update,
                                              const std::vector<RankWork>* priced_ranks) {
  constexpr std::size_t kMinUpdates = 10, kMinBehind = 3, kAroundEpisode = 5;
  constexpr double kChanceAtMost = 0.01;
  std::vector<RecurringLag> out;
  const std::size_t n = per_update.size(), nr = ranks.size();
  if (nr < 2 || n < kMinUpdates || !(threshold_ms > 0)) return out;
  const auto& p_updates = priced_per_update ? *priced_per_update : per_update;
  const auto& p_ranks = priced_ranks ? *priced_ranks : ranks;
  auto margin = [&](std::size_t k, std::size_t i) { return (*ranks[k].compute_ms)[i] - per_update[i].median_compute_ms; };
  auto priced_margin = [&](std::size_t k, std::size_t i) {
    return (*p_ranks[k].compute_ms)[i] - p_updates[i].median_compute_ms;
  };
  auto is_excluded = [&](std::size_t k) {
    return std::find(excluded.begin(), excluded.end(), ranks[k].rank) != excluded.end();
  };
  std::vector<std::vector<std::size_t>> behind(nr);
  std::vector<std::size_t> compared(nr, 0);
  std::vector<char> near(n);
  for (std::size_t k = 0; k < nr; ++k) {
    std::fill(near.begin(), near.end(), 0);
    for (const StragglerEpisode& e : episodes) {
      if (e.rank != ranks[k].rank) continue;
      const auto lo = std::lower_bound(per_update.begin(), per_update.end(), e.first_step,
                                       [](const UpdateSlowest& u, std::int64_t s) { return u.step < s; });
      const auto hi = std::upper_bound(per_update.begin(), per_update.end(), e.last_step,
                                       [](std::int64_t s, const UpdateSlowest& u) { return s < u.step; });
      const auto a = static_cast<std::size_t>(lo - per_update.begin()), b = static_cast<std::size_t>(hi - per_update.begin());
      if (a == b) continue;  // (a stretch after the aligned steps: steps_after_end)
      for (std::size_t i = a > kAroundEpisode ? a - kAroundEpisode : 0; i < std::min(n, b + kAroundEpisode); ++i) near[i] = 1;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (near[i]) continue;
      ++compared[k];
      if (margin(k, i) > threshold_ms) behind[k].push_back(i);
    }
  }
  // The chance rate: the other ranks' behind updates, excluded ranks (a straggler behind
  // in most of its updates) left out.
  std::size_t all_behind = 0, all_compared = 0;
  for (std::size_t k = 0; k < nr; ++k)
    if (!is_excluded(k)) {
      all_behind += behind[k].size();
      all_compared += compared[k];
    }
  for (std::size_t k = 0; k < nr; ++k) {
    const std::size_t kb = behind[k].size();
    if (is_excluded(k) || kb < kMinBehind || 2 * kb > compared[k]) continue;
    RecurringLag g;
    g.rank = ranks[k].rank;
    g.behind = kb;
    g.updates = compared[k];
    g.threshold_ms = threshold_ms;
    g.others_behind = all_behind - kb;
    g.others_compared = all_compared - compared[k];
    const double p = static_cast<double>(g.others_behind + 1) / static_cast<double>(g.others_compared + 2);
    if (!(binomial_upper_tail(kb, compared[k], p) * static_cast<double>(nr) < kChanceAtMost)) continue;
    std::vector<double> m;
    double stake = 0;
    for (const std::size_t i : behind[k]) {
      const double mine = priced_margin(k, i);
      m.push_back(mine);
      double other = -std::numeric_limits<double>::infinity();
      for (std::size_t o = 0; o < nr; ++o)
        if (o != k) other = std::max(other, priced_margin(o, i));
      const double beyond = std::max(0.0, mine - other);
      stake += beyond;
      g.behind_steps.push_back(per_update[i].step);
      g.stake_ms.push_back(beyond);
      g.margins_ms.push_back(mine);
      if (g.steps.size() < kRecurringStepsKept) g.steps.push_back(per_update[i].step);
    }
    g.margin_ms = *median(m);
    g.at_stake_ms = stake / static_cast<double>(n);
    g.every = recurring_period(g.behind_steps);
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RecurringLag& a, const RecurringLag& b) { return a.at_stake_ms > b.at_stake_ms; });
  return out;
}

std::optional<SlowGroup> find_slow_group(const std::vector<RankWork>& ranks,
                                         const std::vector<UpdateSlowest>& per_update,
                                         const std::vector<StragglerEpisode>& episodes) {
  constexpr double kMinT = 5;  // the lead's t statistic at least (the split is chosen from the data)
  const std::size_t n = ranks.size();
  if (n < 2) return std::nullopt;
  const std::size_t updates = ranks.front().compute_ms->size();
  if (updates < kMinStragglerUpdates) return std::nullopt;  // (two values make any lead look steady)
  std::vector<double> mean(n, 0), typical(n, 0), v;
  for (std::size_t i = 0; i < n; ++i) {
    for (const double c : *ranks[i].compute_ms) mean[i] += c;
    mean[i] /= static_cast<double>(updates);
    v = *ranks[i].compute_ms;
    typical[i] = *median(v);
  }
  // The split is chosen on each rank's median own work: a rank slow only in a stretch has
  // the mean of a slightly slow rank, and by means it sat between the fast and the slow
  // ranks, narrowing the gap and widening the fast side (ranks 1.15-1.2x slower throughout
  // were then no group, or a group with it). A group is slower in most updates (the lead
  // rule below), so its ranks' medians are slow too. The splits by means are tried as
  // well: with fallbacks in about half the updates (rate 0.3) a rank's median falls in
  // either mode, and the fast ranks' medians spread wider than the gap to ranks 1.2x
  // slower throughout, whose means stand apart.
  std::vector<std::size_t> order(n);
  const std::vector<double>* split_on = &typical;
  auto t = [&](std::size_t k) { return (*split_on)[order[k]]; };
  auto m = [&](std::size_t k) { return mean[order[k]]; };
  std::vector<std::size_t> splits;
  std::vector<double> slow_row, fast_row, lead, fast_median, own;
  std::optional<SlowGroup> best;
  // Per rank (as in `ranks`) and update: 1 in an episode of the rank spanning less than
  // half the updates, unless its episodes together cover half or more (a rank slow
  // throughout whose lag was found in pieces is judged on all its updates).
  std::vector<std::vector<char>> in_stretch(n, std::vector<char>(updates, 0));
  std::unordered_map<std::int64_t, std::vector<const StragglerEpisode*>> episodes_of;  // (a search per rank was quadratic)
  for (const auto& e : episodes)
    if (2 * e.updates < updates) episodes_of[e.rank].push_back(&e);
  for (std::size_t r = 0; r < n && per_update.size() == updates; ++r) {
    const auto it = episodes_of.find(ranks[r].rank);
    if (it == episodes_of.end()) continue;
    std::size_t covered = 0;
    for (std::size_t i = 0; i < updates; ++i) {
      const std::int64_t step = per_update[i].step;
      in_stretch[r][i] = std::any_of(it->second.begin(), it->second.end(), [&](const StragglerEpisode* e) {
        return e->first_step <= step && step <= e->last_step;
      });
      covered += in_stretch[r][i] ? 1 : 0;
    }
    if (2 * covered >= updates) std::fill(in_stretch[r].begin(), in_stretch[r].end(), 0);
  }
  // Judges a split given its slow side (`is_slow`, by place in `order`): the rules after
  // the gap rules, and the time at stake. Slow-side ranks that are not slower in most
  // updates themselves are put in `stretch_only`, and nullopt is returned.
  std::vector<std::size_t> stretch_only;
  auto judge = [&](SlowGroup g, const std::vector<char>& is_slow) -> std::optional<SlowGroup> {
    stretch_only.clear();
    v.clear();
    for (std::size_t k = 0; k < n; ++k)
      if (!is_slow[k]) v.push_back(m(k));
    g.fast_ms = *median(v);
    v.clear();
    for (std::size_t k = 0; k < n; ++k)
      if (is_slow[k]) v.push_back(m(k));
    g.slow_ms = *median(v);
    // Each slow rank 5 % slower, not only their median: with two slow ranks the median is
    // their mean, and a rank 0.8 % slower joined a 1.4x straggler as a "tier" (a real
    // 4-rank gloo job: ranks 2, 3 against 0, 1, where rank 2 alone was slow).
    double slow_least = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < n; ++k)
      if (is_slow[k]) slow_least = std::min(slow_least, m(k));
    if (!(g.fast_ms > 0) || g.slow_ms - g.fast_ms < 0.05 * g.fast_ms || slow_least - g.fast_ms < 0.05 * g.fast_ms)
      return std::nullopt;
    // Per update, the slow ranks' lead: their median own work minus the fast ranks'.
    lead.clear();
    fast_median.clear();
    for (std::size_t i = 0; i < updates; ++i) {
      slow_row.clear();
      fast_row.clear();
      for (std::size_t k = 0; k < n; ++k) (is_slow[k] ? slow_row : fast_row).push_back((*ranks[order[k]].compute_ms)[i]);
      fast_median.push_back(*median(fast_row));
      lead.push_back(*median(slow_row) - fast_median.back());
      if (lead.back() >= 0.5 * (g.slow_ms - g.fast_ms)) ++g.updates_apart;
    }
    double sum = 0, sq = 0;
    for (const double d : lead) sum += d;
    const double lead_mean = sum / static_cast<double>(updates);
    for (const double d : lead) sq += (d - lead_mean) * (d - lead_mean);
    const double se = std::sqrt(sq / static_cast<double>(updates - 1) / static_cast<double>(updates));
    v = lead;
    const double lead_median = *median(v);
    // Slower in most updates, beyond chance: the lead's median (a stretch of updates moves
    // the mean, not the median) at least kMinT standard errors above 0 (1.2533 x the
    // mean's, for normal data), and at least half its mean.
    const double se_median = 1.2533 * se;
    if (!(lead_median > 0) || (se_median > 0 && lead_median < kMinT * se_median) || lead_median < 0.5 * lead_mean)
      return std::nullopt;
    if (se_median > 0) g.lead_t = lead_median / se_median;
    // Each slow rank slower in most updates itself, as the group is: its own lead (its own
    // work less the fast ranks' median, per update) has a median of at least 5 % of
    // fast_ms, outside its own stretches shorter than half the run. A rank slow only in a
    // stretch is not: it joined ranks slower throughout; with fallbacks, its stretch and
    // its fallbacks outside it made most of its updates.
    for (std::size_t k = 0; k < n; ++k) {
      if (!is_slow[k]) continue;
      own.clear();
      for (std::size_t i = 0; i < updates; ++i)
        if (!in_stretch[order[k]][i]) own.push_back((*ranks[order[k]].compute_ms)[i] - fast_median[i]);
      if (own.empty() || *median(own) < 0.05 * g.fast_ms) stretch_only.push_back(k);
    }
    if (!stretch_only.empty()) return std::nullopt;
    g.updates = updates;
    // The update without the slowdown: each slow rank's own work less that update's lead,
    // scaled by the rank's own excess over the fast ranks (a 2x tier's is 5 times a 1.2x
    // tier's), against the fast ranks'; each keeps its own jitter.
    double gain = 0;
    for (std::size_t i = 0; i < updates; ++i) {
      double all = -std::numeric_limits<double>::infinity(), fast = all, without = all;
      const double shift = std::max(0.0, lead[i]);
      for (std::size_t k = 0; k < n; ++k) {
        const double c = (*ranks[order[k]].compute_ms)[i];
        all = std::max(all, c);
        if (!is_slow[k]) fast = std::max(fast, c);
        else without = std::max(without, c - shift * std::max(0.0, m(k) - g.fast_ms) / (g.slow_ms - g.fast_ms));
      }
      gain += all - std::max(fast, without);
      if (all > fast) ++g.updates_slowest;
    }
    g.at_stake_ms = gain / static_cast<double>(updates);
    if (!(g.at_stake_ms > 0)) return std::nullopt;
    for (std::size_t k = 0; k < n; ++k) (is_slow[k] ? g.slow : g.fast).push_back(ranks[order[k]].rank);
    std::sort(g.fast.begin(), g.fast.end());
    std::sort(g.slow.begin(), g.slow.end());
    return g;
  };
  // Every qualifying split of the ranks ordered by `stat`, judged; keeps the best.
  auto try_splits = [&](const std::vector<double>& stat, const char* name) {
    split_on = &stat;
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return stat[a] < stat[b]; });
    // Splits (order[k..] slow) by decreasing gap; on a tie, the fewer slow ranks first.
    splits.clear();
    for (std::size_t k = 1; k < n; ++k) splits.push_back(k);
    // The largest gap between consecutive ranks above each place (a scan per split was
    // quadratic in the ranks: 7 s at 65,536 ranks).
    std::vector<double> inner_above(n + 1, 0.0);  // [k]: max of t(j) - t(j - 1) over j > k
    for (std::size_t k = n - 1; k-- > 0;) inner_above[k] = std::max(inner_above[k + 1], t(k + 1) - t(k));
    std::stable_sort(splits.begin(), splits.end(), [&](std::size_t a, std::size_t b) {
      const double ga = t(a) - t(a - 1), gb = t(b) - t(b - 1);
      return ga != gb ? ga > gb : a > b;
    });
    for (const std::size_t split : splits) {
      SlowGroup g;
      g.split_on = name;
      g.gap_ms = t(split) - t(split - 1);
      g.spread_ms = t(split - 1) - t(0);
      g.slow_spread_ms = t(n - 1) - t(split);
      // The slow side may hold two tiers (1.2x and 2x): its range less its largest inner gap
      // must not exceed the gap; ranks spread evenly (100, 104, ..., 120 ms) do not pass.
      const double inner = inner_above[split];
      if (!(g.gap_ms > g.spread_ms) || g.slow_spread_ms - inner > g.gap_ms) continue;
      std::vector<char> is_slow(n, 0);
      for (std::size_t k = split; k < n; ++k) is_slow[k] = 1;
      std::optional<SlowGroup> judged = judge(g, is_slow);
      // Ranks slow only in a stretch (the stretch raised their median above the gap) go to
      // the fast side, once, and the others are judged again: the gap is then the others'
      // least median over the fast ranks' greatest, and the fast ranks' range is as before.
      if (!judged && !stretch_only.empty() && stretch_only.size() < n - split) {
        for (const std::size_t k : stretch_only) is_slow[k] = 0;
        double least = std::numeric_limits<double>::infinity(), most = -least;
        for (std::size_t k = split; k < n; ++k)
          if (is_slow[k]) {
            least = std::min(least, t(k));
            most = std::max(most, t(k));
          }
        g.gap_ms = least - t(split - 1);
        g.slow_spread_ms = most - least;
        judged = judge(g, is_slow);
      }
      if (!judged) continue;
      g = std::move(*judged);
      // Of the splits that qualify, the one whose slowdown costs most: with tiers (ranks 0-2
      // at 1.2x, rank 3 at 2x), rank 3 alone leaves the 1.2x tier unnamed.
      if (!best || g.at_stake_ms > best->at_stake_ms) best = std::move(g);
    }
  };
  try_splits(typical, "medians");
  try_splits(mean, "means");
  return best;
}

namespace {

// The steps after some ranks' logs ended (each rank lacking a step ended before it; at
// least 2 ranks hold it, every one with a known own work): runs of 3 or more consecutive
// such steps lacking the same ranks are searched for stretches of falling behind among the
// ranks still logging, and what is found is added to out.episodes (among_ranks set).
// `compute_at` is [step index * ranks + rank index]: own work, NaN where lacking, < 0
// where unknown.
void search_after_ends(const std::vector<const RankLog*>& ranks, const std::vector<std::int64_t>& steps,
                       const std::vector<double>& compute_at, CrossRankResult& out) {
  const std::size_t nr = ranks.size();
  std::vector<std::int64_t> last(nr);
  for (std::size_t i = 0; i < nr; ++i) last[i] = ranks[i]->updates.back().step;  // (sorted by step)
  // Per step: the lacking ranks' indices when it is such a step, else nullopt.
  auto lacking_after_end = [&](std::size_t si) -> std::optional<std::vector<std::size_t>> {
    std::vector<std::size_t> lacking;
    std::size_t known = 0;
    for (std::size_t i = 0; i < nr; ++i) {
      const double c = compute_at[si * nr + i];
      if (std::isnan(c)) {
        if (last[i] >= steps[si]) return std::nullopt;  // a record lost, or a late start: not after an end
        lacking.push_back(i);
      } else if (c < 0) {
        return std::nullopt;  // an own work unknown (no communication region, a bad wall time)
      } else {
        ++known;
      }
    }
    if (lacking.empty() || known < 2) return std::nullopt;
    return lacking;
  };
  for (std::size_t si = 0; si < steps.size();) {
    const auto lacking = lacking_after_end(si);
    if (!lacking) {
      ++si;
      continue;
    }
    std::size_t end = si + 1;
    while (end < steps.size() && lacking_after_end(end) == lacking) ++end;
    const std::size_t n = end - si;
    if (n >= kMinStragglerUpdates) {
      std::vector<std::size_t> present;
      for (std::size_t i = 0, k = 0; i < nr; ++i) {
        if (k < lacking->size() && (*lacking)[k] == i) {
          ++k;
          continue;
        }
        present.push_back(i);
      }
      std::vector<UpdateSlowest> per_update;
      std::vector<std::vector<double>> compute(present.size());
      std::vector<double> v;
      for (std::size_t j = si; j < end; ++j) {
        v.clear();
        for (const std::size_t i : present) v.push_back(compute_at[j * nr + i]);
        for (std::size_t k = 0; k < present.size(); ++k) compute[k].push_back(v[k]);
        const auto slow = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
        const double slowest = v[slow];
        const double mid = *median(v);
        per_update.push_back({steps[j], *ranks[present[slow]]->rank, slowest, mid, slowest - mid});
      }
      std::vector<RankWork> work;
      for (std::size_t k = 0; k < present.size(); ++k) work.push_back({*ranks[present[k]]->rank, &compute[k]});
      double threshold_ms = 0;
      for (StragglerEpisode& e : find_straggler_episodes(per_update, threshold_ms, work)) {
        e.among_ranks = present.size();
        out.episodes.push_back(std::move(e));
      }
      out.steps_after_end += n;
    }
    si = end;
  }
  std::sort(out.episodes.begin(), out.episodes.end(), [](const StragglerEpisode& x, const StragglerEpisode& y) {
    return std::tie(x.first_step, x.rank) < std::tie(y.first_step, y.rank);
  });
}

}  // namespace

OwnWork own_work(const AnalysisInput& in, const RankLog& log, std::optional<std::size_t> first, std::size_t j,
                 std::optional<NameTable::Id> comm, bool comm_dev) {
  const UpdateRecord& u = log.updates[j];
  const auto time = [&](bool device) {
    return first ? in.region_ms_of(*first + j, u, *comm, device) : region_ms(u, *comm, device);
  };
  OwnWork w;
  bool known = true;
  if (comm) {
    auto t = time(comm_dev);
    if (!t && comm_dev) t = time(false);
    if (t) w.comm_ms = *t;
    else known = false;
  }
  if (!(u.wall_ms > 0) || (known && w.comm_ms > u.wall_ms)) w.kind = OwnWork::Kind::kBadWall;
  else if (!known) w.kind = OwnWork::Kind::kNoComm;
  else w.ms = u.wall_ms - w.comm_ms;
  return w;
}

namespace {

// The last rule of ranks_left_out: ranks that lack a few steps inside the others' run
// (a record or two lost, or a late start by a step or two), where every step lacks some
// rank, or most do: at 4,096 ranks, 40 that lost one record each at a different step left
// no step compared at all. Greedily, the rank that alone lacks the most steps (then the
// one lacking the most) goes first; the prefix of that order that keeps the most (rank,
// step) pairs is left out, if it gains as the late rule asks. A rank that lacks more than
// max(1, a twentieth of the steps) is never one: a rank that loses many records is often
// the sick one, and its other steps are compared (a review: a straggler that had lost 10
// of 30 records was left out, and no straggler found). Nor is a rank whose steps all come
// before the others' last step without a gap (it stopped early): the steps after its end
// are searched among the other ranks (search_after_ends). At most a tenth of the ranks
// (one below 20) in all, with those the late rule left out. `out` holds the earlier
// rules' verdicts.
void leave_out_lost_records(const std::vector<std::vector<std::int64_t>>& rank_steps, std::vector<RankLeftOut>& out,
                            const std::vector<std::int64_t>& steps, const std::vector<bool>& keep) {
  const auto n = static_cast<std::size_t>(std::count(out.begin(), out.end(), RankLeftOut::kKept));
  const auto late = static_cast<std::size_t>(std::count(out.begin(), out.end(), RankLeftOut::kLate));
  const std::size_t tenth = std::max<std::size_t>(1, (n + late) / 10);
  const std::size_t cap = std::min(tenth > late ? tenth - late : 0, n >= 2 ? n - 2 : 0);
  const std::size_t few = std::max<std::size_t>(1, steps.size() / 20);  // steps a candidate may lack
  if (cap == 0 || steps.empty()) return;
  std::vector<std::uint32_t> lacking(steps.size(), 0);  // kept ranks lacking each step
  std::vector<std::size_t> lacking_xor(steps.size(), 0);  // XOR of their indices: the one left when 1 lacks it
  std::vector<std::size_t> candidates;
  std::vector<std::vector<std::uint32_t>> missing;  // per candidate: the step indices it lacks
  std::vector<std::uint32_t> missing_mine;
  for (std::size_t i = 0; i < rank_steps.size(); ++i) {
    const auto& mine = rank_steps[i];
    if (out[i] != RankLeftOut::kKept || mine.size() == steps.size()) continue;
    missing_mine.clear();
    std::size_t k = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      if (k < mine.size() && mine[k] == steps[s]) {
        ++k;
        continue;
      }
      missing_mine.push_back(static_cast<std::uint32_t>(s));
      ++lacking[s];
      lacking_xor[s] ^= i;
    }
    // Stopped early: every step it lacks comes after its last one.
    const bool stopped_early = mine.empty() || steps[missing_mine.front()] > mine.back();
    if (!stopped_early && missing_mine.size() <= few && !(i < keep.size() && keep[i])) {
      candidates.push_back(i);
      missing.push_back(missing_mine);
    }
  }
  if (candidates.empty()) return;
  const auto aligned0 = static_cast<std::size_t>(std::count(lacking.begin(), lacking.end(), 0u));
  if (2 * aligned0 >= steps.size()) return;  // (most steps compared: a lost record costs its step only)
  std::unordered_map<std::size_t, std::size_t> slot;  // rank index -> candidate index
  for (std::size_t c = 0; c < candidates.size(); ++c) slot[candidates[c]] = c;
  std::vector<std::uint32_t> alone(candidates.size(), 0);  // steps only it lacks
  for (std::size_t s = 0; s < steps.size(); ++s)
    if (lacking[s] == 1)
      if (const auto it = slot.find(lacking_xor[s]); it != slot.end()) ++alone[it->second];
  using Key = std::tuple<std::uint32_t, std::size_t, std::size_t>;  // (alone, lacks, -index as max - c)
  std::vector<Key> heap;
  auto push = [&](std::size_t c) {
    heap.emplace_back(alone[c], missing[c].size(), candidates.size() - c);
    std::push_heap(heap.begin(), heap.end());
  };
  for (std::size_t c = 0; c < candidates.size(); ++c) push(c);
  std::vector<bool> gone(candidates.size(), false);
  std::vector<std::size_t> order;
  std::size_t aligned = aligned0, best_k = 0, best_aligned = aligned0;
  while (order.size() < cap && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const auto [a, lacks, neg] = heap.back();
    heap.pop_back();
    const std::size_t c = candidates.size() - neg;
    if (gone[c] || a != alone[c]) continue;  // (a stale entry)
    gone[c] = true;
    order.push_back(c);
    for (const std::uint32_t s : missing[c]) {
      --lacking[s];
      lacking_xor[s] ^= candidates[c];
      if (lacking[s] == 0) ++aligned;
      else if (lacking[s] == 1)
        if (const auto it = slot.find(lacking_xor[s]); it != slot.end() && !gone[it->second]) {
          ++alone[it->second];
          push(it->second);
        }
    }
    if ((n - order.size()) * aligned > (n - best_k) * best_aligned) {
      best_k = order.size();
      best_aligned = aligned;
    }
  }
  const std::size_t gain = best_aligned - aligned0;
  if (best_k == 0 || gain < 3 || 10 * gain < steps.size()) return;
  for (std::size_t k = 0; k < best_k; ++k) {
    const std::size_t i = candidates[order[k]];
    const auto& mine = rank_steps[i];
    const bool starts_late = mine.back() == steps.back() && steps[missing[order[k]].back()] < mine.front();
    out[i] = starts_late ? RankLeftOut::kLate : RankLeftOut::kLost;
  }
}

}  // namespace

std::vector<bool> slowest_often(const std::vector<std::vector<std::pair<std::int64_t, double>>>& own) {
  std::map<std::int64_t, std::pair<double, std::size_t>> most;  // step -> (most own work, its rank)
  for (std::size_t i = 0; i < own.size(); ++i)
    for (const auto& [step, ms] : own[i]) {
      const auto [it, fresh] = most.try_emplace(step, ms, i);
      if (!fresh && ms > it->second.first) it->second = {ms, i};
    }
  std::vector<std::size_t> slowest(own.size(), 0);
  for (const auto& [step, m] : most) ++slowest[m.second];
  std::vector<bool> keep(own.size(), false);
  for (std::size_t i = 0; i < own.size(); ++i)
    keep[i] = slowest[i] >= 2 && slowest[i] * own.size() > 2 * own[i].size();
  return keep;
}

std::vector<RankLeftOut> ranks_left_out(const std::vector<std::vector<std::int64_t>>& rank_steps,
                                        const std::vector<bool>& keep) {
  std::vector<RankLeftOut> out(rank_steps.size(), RankLeftOut::kKept);
  auto union_of_kept = [&] {
    std::vector<std::int64_t> steps, merged;
    for (std::size_t i = 0; i < rank_steps.size(); ++i) {
      if (out[i] != RankLeftOut::kKept || rank_steps[i] == steps) continue;
      merged.clear();
      std::set_union(steps.begin(), steps.end(), rank_steps[i].begin(), rank_steps[i].end(),
                     std::back_inserter(merged));
      steps.swap(merged);
    }
    return steps;
  };
  // A rank whose log holds under half of the steps (a crashed job, a cut log) would leave
  // every other rank's remaining steps out of the comparison: it is left out itself while
  // two or more ranks remain.
  {
    const std::size_t all = union_of_kept().size();
    std::size_t n_short = 0;
    for (const auto& mine : rank_steps) n_short += short_log(mine.size(), all) ? 1 : 0;
    if (n_short > 0 && rank_steps.size() - n_short >= 2)
      for (std::size_t i = 0; i < rank_steps.size(); ++i)
        if (short_log(rank_steps[i].size(), all)) out[i] = RankLeftOut::kShort;
  }
  // Likewise ranks whose logs start late (they hold every step from their first to the
  // last), when leaving them out keeps more of the comparison than leaving out the steps
  // they lack, (ranks - k) x aligned' against ranks x aligned, and gains at least 3 steps
  // and a tenth of them: 64 of 2,048 ranks that started logging at step 21 of 60 left
  // steps 1..20 uncompared, and a straggler there unseen. At most a tenth of the ranks (one
  // in a job of fewer than 20) are left out so. (Not a rank that lost a record or stopped
  // early: that is often the sick rank itself, and its other steps are compared; the steps
  // after a log ended are searched for stretches among the other ranks, search_after_ends.
  // A rank that lost a record or two may be, where under half of the steps would be
  // compared: leave_out_lost_records.)
  const auto steps = union_of_kept();
  const auto n = static_cast<std::size_t>(std::count(out.begin(), out.end(), RankLeftOut::kKept));
  std::vector<std::size_t> lacking;
  std::vector<bool> late;
  std::vector<std::uint32_t> all(steps.size(), 0), others(steps.size(), 0);  // lacking ranks holding each step
  std::size_t n_late = 0;
  for (std::size_t i = 0; i < rank_steps.size(); ++i) {
    const auto& mine = rank_steps[i];
    if (out[i] != RankLeftOut::kKept || mine.size() == steps.size()) continue;
    const bool starts_late =
        !mine.empty() && mine.back() == steps.back() &&
        static_cast<std::size_t>(steps.end() - std::lower_bound(steps.begin(), steps.end(), mine.front())) ==
            mine.size();
    lacking.push_back(i);
    late.push_back(starts_late);
    n_late += starts_late ? 1 : 0;
    for (const std::int64_t st : mine) {
      const auto at = static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), st) - steps.begin());
      ++all[at];
      if (!starts_late) ++others[at];
    }
  }
  // (At most one in a job of fewer than 20 ranks: with 8 ranks a tenth is none, and one
  // rank starting at step 60 of 200 left a straggler in steps 20..40 unseen.)
  if (n_late > 0 && n_late <= std::max<std::size_t>(1, n / 10) && n - n_late >= 2) {
    const auto aligned_with = static_cast<std::size_t>(
        std::count(all.begin(), all.end(), static_cast<std::uint32_t>(lacking.size())));
    const auto aligned_without = static_cast<std::size_t>(
        std::count(others.begin(), others.end(), static_cast<std::uint32_t>(lacking.size() - n_late)));
    const std::size_t gain = aligned_without - std::min(aligned_without, aligned_with);
    if ((n - n_late) * aligned_without > n * aligned_with && gain >= 3 && 10 * gain >= steps.size())
      for (std::size_t k = 0; k < lacking.size(); ++k)
        if (late[k]) out[lacking[k]] = RankLeftOut::kLate;
  }
  leave_out_lost_records(rank_steps, out, union_of_kept(), keep);
  return out;
}

std::optional<WindowSkew> find_window_skew(const std::vector<double>& start_ms, const std::vector<double>& wall_ms,
                                          const std::vector<std::int64_t>& ranks) {
  const std::size_t nr = ranks.size();
  if (nr < 2 || start_ms.size() != wall_ms.size() || start_ms.size() % nr != 0) return std::nullopt;
  std::vector<double> start_spread, end_spread, slowest;
  std::vector<std::size_t> last(nr, 0), first(nr, 0);
  for (std::size_t k = 0; k < start_ms.size(); k += nr) {
    const double* st = &start_ms[k];
    const double* w = &wall_ms[k];
    if (std::any_of(st, st + nr, [](double v) { return std::isnan(v); })) continue;
    // (The first of equal starts: the lowest rank, where `ranks` ascends.)
    const double* lo = st;
    const double* hi = st;
    for (const double* q = st + 1; q != st + nr; ++q) {
      if (*q < *lo) lo = q;
      if (*q > *hi) hi = q;
    }
    double end_lo = std::numeric_limits<double>::infinity(), end_hi = -end_lo;
    for (std::size_t i = 0; i < nr; ++i) end_lo = std::min(end_lo, st[i] + w[i]), end_hi = std::max(end_hi, st[i] + w[i]);
    start_spread.push_back(*hi - *lo);
    end_spread.push_back(end_hi - end_lo);
    slowest.push_back(*std::max_element(w, w + nr));
    ++last[static_cast<std::size_t>(hi - st)];
    ++first[static_cast<std::size_t>(lo - st)];
  }
  if (start_spread.empty()) return std::nullopt;
  WindowSkew x;
  x.steps = start_spread.size();
  x.start_spread_ms = *median(start_spread);
  x.end_spread_ms = *median(end_spread);
  const double typical = *median(slowest);
  if (!(x.start_spread_ms >= 1.0 && x.start_spread_ms >= 0.1 * typical && x.end_spread_ms <= 0.5 * x.start_spread_ms))
    return std::nullopt;
  // (max_element: the first of equal counts, so the lowest rank where `ranks` ascends.)
  const auto l = static_cast<std::size_t>(std::max_element(last.begin(), last.end()) - last.begin());
  const auto f = static_cast<std::size_t>(std::max_element(first.begin(), first.end()) - first.begin());
  x.last_rank = ranks[l];
  x.times_last = last[l];
  x.first_rank = ranks[f];
  return x;
}

std::string describe_window_skew(const WindowSkew& x) {
  return fmt::format(
      "the ranks entered their steps {:.3g} ms apart and left them within {:.3g} ms ({}; rank {} entered last{}, rank "
      "{} first): a rank that enters late was slow before the step{}, and the others wait for it in the step's "
      "collectives, which own work (the work inside each step) does not show; rank {} may be the rank they wait for",
      x.start_spread_ms, x.end_spread_ms, x.steps == 1 ? std::string("one step") : fmt::format("medians over {} steps", x.steps),
      x.last_rank, x.steps == 1 ? std::string() : fmt::format(" in {} of them", x.times_last), x.first_rank,
      x.steps == 1 ? " (before this step, the only one compared: in a trace of one step, outside it)" : "",
      x.last_rank);
}

void merge_paths_scaled_episodes(std::vector<StragglerEpisode>& episodes, std::vector<StragglerEpisode> scaled) {
  for (StragglerEpisode& e : scaled) {
    // Stretches of 10 updates or more: shorter runs on this work (3 to 8 updates) came
    // by chance where fallbacks are nearly everywhere (a review: 3 ranks at a rate of
    // 0.95, 2 of 20 jobs without a straggler), or from padding spikes.
    if (e.updates < 10) continue;
    auto overlaps = [&](const StragglerEpisode& x) {
      return x.rank == e.rank && x.among_ranks == 0 && x.first_step <= e.last_step && e.first_step <= x.last_step;
    };
    auto inside = [&](const StragglerEpisode& x) { return x.first_step >= e.first_step && x.last_step <= e.last_step; };
    bool all_inside = true;
    std::vector<std::pair<std::int64_t, std::int64_t>> pieces;  // (the steps the first search found of it)
    for (const auto& x : episodes)
      if (overlaps(x)) all_inside = all_inside && inside(x), pieces.emplace_back(x.first_step, x.last_step);
    // Steps its pieces cover, overlapping pieces once (a running quartile's stretch and a
    // first-pass piece inside it counted twice, and the whole stretch was dropped).
    std::sort(pieces.begin(), pieces.end());
    std::int64_t covered = 0, upto = INT64_MIN;
    for (const auto& [lo, hi] : pieces) {
      const std::int64_t from = std::max(lo, upto == INT64_MIN ? lo : upto + 1);
      if (hi >= from) covered += hi - from + 1;
      upto = std::max(upto, hi);
    }
    // A first-search stretch that holds this one and more: its updates beyond this one
    // were behind by their slow paths' excess only (which the slow-path finding prices),
    // and this one is the rank's own lag (review: rank 5 slow in steps 88..99 was found in
    // 81..99, its fallbacks in 81, 83, 84, 85 and 87 taken for its lag).
    const bool holds_it = pieces.size() == 1 && pieces.front().first <= e.first_step &&
                          e.last_step <= pieces.front().second &&
                          pieces.front().second - pieces.front().first > e.last_step - e.first_step;
    if (!pieces.empty() && !holds_it && (!all_inside || covered >= e.last_step - e.first_step + 1)) continue;
    episodes.erase(std::remove_if(episodes.begin(), episodes.end(), overlaps), episodes.end());
    e.paths_scaled = true;
    episodes.push_back(std::move(e));
  }
  std::sort(episodes.begin(), episodes.end(), [](const StragglerEpisode& x, const StragglerEpisode& y) {
    return std::tie(x.first_step, x.rank) < std::tie(y.first_step, y.rank);
  });
}

CrossRankResult analyze_cross_rank(const AnalysisInput& in, const std::vector<WaitingResult>& waiting,
                                   std::optional<std::int64_t> world_size, double threshold,
                                   const CodePathResult* paths, const std::vector<ConfigDifference>* classes) {
  CrossRankResult out;
  out.threshold = threshold;
  std::vector<const RankLog*> ranks;
  for (const auto& r : in.data.ranks)
    if (r.rank && !r.updates.empty()) ranks.push_back(&r);
  out.ranks = ranks.size();
  if (world_size && *world_size > 0) {  // (a search of the ranks for each was quadratic)
    std::vector<bool> present(static_cast<std::size_t>(*world_size), false);
    for (const RankLog* l : ranks)
      if (*l->rank >= 0 && *l->rank < *world_size) present[static_cast<std::size_t>(*l->rank)] = true;
    for (std::int64_t r = 0; r < *world_size; ++r)
      if (!present[static_cast<std::size_t>(r)]) out.ranks_missing.push_back(r);
  }
  if (ranks.size() >= 2) {
    std::int64_t last = INT64_MIN;
    for (const RankLog* r : ranks) last = std::max(last, r->updates.back().step);  // (sorted by step)
    for (const RankLog* r : ranks) {
      const std::int64_t end = r->updates.back().step;
      if (end >= last) continue;
      std::int64_t next = last;  // the first step after `end` in any rank's log
      for (const RankLog* o : ranks) {
        const auto it = std::upper_bound(o->updates.begin(), o->updates.end(), end,
                                         [](std::int64_t s, const UpdateRecord& u) { return s < u.step; });
        if (it != o->updates.end()) next = std::min(next, it->step);
      }
      out.ended_early.push_back({*r->rank, end, next});
    }
  }
  if (ranks.size() < 2) {
    out.why_not = ranks.size() != 1                  ? "no rank numbers in the logs"
                  : world_size && *world_size == 1 ? "one rank only: the job's world size is 1, no other rank to compare"
                                                   : "one rank only: give every rank's log";
    return out;
  }

  std::optional<NameTable::Id> comm;
  if (auto found = find_comm_region(in)) {
    comm = found->id;
    out.comm_region = std::string(in.data.regions.name(found->id));
    out.comm_found_by = found->found_by;
  }
  const bool comm_dev = comm && in.has_device_time(*comm);
  // A rank whose log never has the communication region (named differently there) cannot
  // be compared: its own work would be its whole wall_ms, waits included, and it would
  // look like the straggler. It is left out, and named.
  // The same for a rank whose log has it in under half of its updates: compared in those
  // only, it would leave every other update of every rank out.
  if (comm) {
    std::vector<const RankLog*> with;
    for (const auto* r : ranks) {
      const auto n = std::count_if(r->updates.begin(), r->updates.end(),
                                   [&](const UpdateRecord& u) { return u.region(*comm) != nullptr; });
      const bool has = n > 0 && 2 * static_cast<std::size_t>(n) >= r->updates.size();
      if (has) with.push_back(r);
      else out.ranks_without_comm.push_back(*r->rank);
    }
    if (with.size() < 2) {
      out.why_not = fmt::format("only {} of the {} ranks' logs have the communication region {}; does the others' "
                                "log name it differently?",
                                with.size(), ranks.size(), out.comm_region);
      return out;
    }
    ranks.swap(with);
  }

  // Every step of any rank, ascending; each rank's updates are in step order.
  // (Usually every rank has the same steps: a rank's list is merged in only when it differs.)
  std::vector<std::int64_t> steps;
  std::vector<std::size_t> steps_of(ranks.size());  // each rank's distinct steps
  auto gather_steps = [&] {
    std::vector<std::int64_t> mine, merged;
    steps.clear();
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      mine.clear();
      for (const auto& u : ranks[i]->updates) mine.push_back(u.step);
      if (!std::is_sorted(mine.begin(), mine.end())) std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
      steps_of[i] = mine.size();
      if (mine == steps) continue;
      merged.clear();
      std::set_union(steps.begin(), steps.end(), mine.begin(), mine.end(), std::back_inserter(merged));
      steps.swap(merged);
    }
  };
  gather_steps();
  // Ranks whose logs are short or start late are left out (ranks_left_out, the rules
  // CrossRankResult::ranks_short gives), and named.
  {
    std::vector<std::vector<std::int64_t>> rank_steps(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      auto& mine = rank_steps[i];
      mine.reserve(ranks[i]->updates.size());
      for (const auto& u : ranks[i]->updates) mine.push_back(u.step);
      if (!std::is_sorted(mine.begin(), mine.end())) std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    }
    // (Own work where it is known: the ranks the lost-records rule must keep; only where
    // some rank lacks a step, as that rule leaves out none otherwise.)
    const bool gaps = std::any_of(rank_steps.begin(), rank_steps.end(),
                                  [&](const auto& mine) { return mine.size() != steps.size(); });
    std::vector<std::vector<std::pair<std::int64_t, double>>> own(gaps ? ranks.size() : 0);
    for (std::size_t i = 0; i < own.size(); ++i) {
      const auto first = in.first_update_of(*ranks[i]);
      for (std::size_t j = 0; j < ranks[i]->updates.size(); ++j)
        if (const OwnWork w = own_work(in, *ranks[i], first, j, comm, comm_dev); w.kind == OwnWork::Kind::kKnown)
          own[i].emplace_back(ranks[i]->updates[j].step, w.ms);
    }
    const auto left_out = ranks_left_out(rank_steps, slowest_often(own));
    if (std::find(left_out.begin(), left_out.end(), RankLeftOut::kKept) != left_out.end() &&
        std::any_of(left_out.begin(), left_out.end(), [](RankLeftOut w) { return w != RankLeftOut::kKept; })) {
      std::vector<const RankLog*> kept;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (left_out[i] == RankLeftOut::kKept) kept.push_back(ranks[i]);
        else out.ranks_short.emplace_back(*ranks[i]->rank, rank_steps[i].size());
      }
      std::sort(out.ranks_short.begin(), out.ranks_short.end());
      ranks.swap(kept);
      steps_of.resize(ranks.size());
      gather_steps();
    }
  }
  out.steps_total = steps.size();
  // compute_ms [step index * ranks + rank index]; NaN where the rank lacks the step,
  // kNoComm where its update lacks the communication region.
  // kZeroWall where its wall time is 0 (a clock never started: a `zero-wall-time`
  // warning says so) or shorter than its communication region (the nesting check says
  // so): its own work would read 0 and every other rank would wait for it.
  constexpr double kNoComm = -1, kZeroWall = -2;
  const std::size_t nr = ranks.size();
  std::vector<double> compute_at(steps.size() * nr, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> comm_at(steps.size() * nr, 0.0);  // its communication time [ms]
  // Its own work less what its slow code paths took beyond the fast ones' cost for the
  // same work (path_excess_ms), where `paths` has a slow path: for a second search of
  // straggler stretches, below.
  const bool scaled = paths && std::any_of(paths->groups.begin(), paths->groups.end(), [](const PathGroup& g) {
    return !g.fast.empty() && !g.slow.empty();
  });
  std::vector<double> scaled_at(scaled ? compute_at.size() : 0);
  bool any_excess = false;
  // When each rank entered each step, where the logs say (a trace's ProfilerStep starts),
  // and its wall time: for find_window_skew.
  const bool starts = std::any_of(ranks.begin(), ranks.end(), [](const RankLog* r) {
    return !r->updates.empty() && logged_start_unix_ms(r->updates.front());
  });
  std::vector<double> start_at(starts ? compute_at.size() : 0, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> wall_at(starts ? compute_at.size() : 0, 0.0);
  for (std::size_t i = 0; i < nr; ++i) {
    const auto first = in.first_update_of(*ranks[i]);
    std::size_t s = 0;
    for (std::size_t j = 0; j < ranks[i]->updates.size(); ++j) {
      const UpdateRecord& u = ranks[i]->updates[j];
      if (s + 1 < steps.size() && steps[s + 1] == u.step) ++s;  // usually the next step
      else if (steps[s] != u.step)  // any order is found
        s = static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), u.step) - steps.begin());
      const OwnWork w = own_work(in, *ranks[i], first, j, comm, comm_dev);
      compute_at[s * nr + i] = w.kind == OwnWork::Kind::kKnown    ? w.ms
                               : w.kind == OwnWork::Kind::kNoComm ? kNoComm
                                                                  : kZeroWall;
      comm_at[s * nr + i] = w.comm_ms;
      if (starts) {
        start_at[s * nr + i] = logged_start_unix_ms(u).value_or(std::numeric_limits<double>::quiet_NaN());
        wall_at[s * nr + i] = u.wall_ms;
      }
      if (scaled && w.kind == OwnWork::Kind::kKnown) {
        const double excess = first ? path_excess_ms(*paths, *first + j) : 0.0;
        any_excess = any_excess || excess > 0;
        scaled_at[s * nr + i] = w.ms - excess;
      }
    }
  }

  // Per rank, over the steps compared (every rank has the step, its own work known):
  // the three summaries of a `per_rank` row cover the same updates.
  std::vector<std::vector<double>> compute(nr), wait(nr), comm_ms(nr), scaled_compute(any_excess ? nr : 0);
  std::vector<UpdateSlowest> scaled_per_update;
  std::vector<std::size_t> slowest_count(nr, 0);
  std::vector<double> margins, v(nr);
  std::vector<double> aligned_start, aligned_wall;  // (the aligned steps' rows of start_at, wall_at)
  StepRuns incomplete_runs{out.incomplete_examples}, without_comm_runs{out.without_comm_examples},
      zero_wall_runs{out.bad_wall_examples};
  for (std::size_t si = 0; si < steps.size(); ++si) {
    const std::int64_t step = steps[si];
    const double* row = &compute_at[si * nr];
    std::vector<std::int64_t> lacking, without_comm, zero_wall;
    for (std::size_t i = 0; i < nr; ++i) {
      if (std::isnan(row[i])) lacking.push_back(*ranks[i]->rank);
      else if (row[i] == kZeroWall) zero_wall.push_back(*ranks[i]->rank);
      else if (row[i] == kNoComm) without_comm.push_back(*ranks[i]->rank);
    }
    if (!lacking.empty()) {
      ++out.steps_incomplete;
      incomplete_runs.add(si, step, std::move(lacking));
      continue;
    }
    if (!zero_wall.empty()) {
      ++out.steps_bad_wall;
      zero_wall_runs.add(si, step, std::move(zero_wall));
      continue;
    }
    if (!without_comm.empty()) {
      ++out.steps_without_comm;
      without_comm_runs.add(si, step, std::move(without_comm));
      continue;
    }
    ++out.steps_aligned;
    if (starts) {
      aligned_start.insert(aligned_start.end(), &start_at[si * nr], &start_at[si * nr] + nr);
      aligned_wall.insert(aligned_wall.end(), &wall_at[si * nr], &wall_at[si * nr] + nr);
    }
    v.assign(row, row + nr);
    const auto slow = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    const double median = *stepprof::median(v);  // (reorders v: read v[slow] first)
    const double slowest = row[slow];
    v.clear();
    for (std::size_t i = 0; i < nr; ++i)
      if (i != slow) v.push_back(row[i]);
    const double others_median = stepprof::median(v).value_or(slowest);
    // The job's update time: each rank's wall time is its own work plus its communication.
    v.resize(nr);
    for (std::size_t i = 0; i < nr; ++i) v[i] = row[i] + comm_at[si * nr + i];
    const double update_ms = *stepprof::median(v);
    out.per_update.push_back({step, *ranks[slow]->rank, slowest, median, slowest - median, update_ms, others_median});
    margins.push_back(slowest - median);
    ++slowest_count[slow];
    if (any_excess) {
      const double* srow = &scaled_at[si * nr];
      v.assign(srow, srow + nr);
      const auto s_slow = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
      const double s_median = *stepprof::median(v);
      scaled_per_update.push_back({step, *ranks[s_slow]->rank, srow[s_slow], s_median, srow[s_slow] - s_median});
      for (std::size_t i = 0; i < nr; ++i) scaled_compute[i].push_back(srow[i]);
    }
    for (std::size_t i = 0; i < nr; ++i) {
      compute[i].push_back(row[i]);
      // A rank waits inside its communication region only: with wall times that do not
      // line up (one rank's update holds time the others did not wait through, e.g. a
      // checkpoint after the collective) the difference of own work would exceed it.
      wait[i].push_back(std::min(slowest - row[i], comm ? comm_at[si * nr + i] : slowest - row[i]));
      if (comm) comm_ms[i].push_back(comm_at[si * nr + i]);
    }
  }
  if (out.steps_aligned == 0) {
    out.why_not = out.steps_bad_wall > 0 && out.steps_without_comm == 0
                      ? std::string("in every step some rank's update has a wall time of 0 or shorter than its communication "
                                  "region, so its own work is unknown")
                  : out.steps_without_comm > 0
                      ? fmt::format("in every step some rank's update lacks the communication region {}, so its own "
                                    "work is unknown",
                                    out.comm_region)
                      : std::string("no step is present in every rank's log");
    return out;
  }
  out.available = true;
  out.margin_ms = summarize(margins);
  if (starts) {
    std::vector<std::int64_t> rank_numbers(nr);
    for (std::size_t i = 0; i < nr; ++i) rank_numbers[i] = *ranks[i]->rank;
    out.window_skew = find_window_skew(aligned_start, aligned_wall, rank_numbers);
  }
  std::vector<RankWork> work(nr);
  for (std::size_t i = 0; i < nr; ++i) work[i] = {*ranks[i]->rank, &compute[i]};
  out.episodes = find_straggler_episodes(out.per_update, out.episode_threshold_ms, work);
  std::vector<RankWork> scaled_work;  // (with any_excess: own work less the slow paths' excess)
  double scaled_threshold = 0;
  if (any_excess) {
    // The same search on own work with the slow paths' excess taken out: where fallbacks
    // are frequent, they move the median rank's work from update to update as much as a
    // 1.3x straggler's lag, and the search found a 20-update stretch as 3 updates, or not
    // at all (synth --accumulation 1 --fallback-rate 0.5: half of 40 stretches). A stretch
    // it finds is kept where the first search found nothing of the rank's there, or
    // replaces what it found there when all of that lies inside it.
    scaled_work.resize(nr);
    for (std::size_t i = 0; i < nr; ++i) scaled_work[i] = {*ranks[i]->rank, &scaled_compute[i]};
    merge_paths_scaled_episodes(out.episodes, find_straggler_episodes(scaled_per_update, scaled_threshold, scaled_work));
    // Such a stretch is priced on own work, as every long stretch is: the job waits for
    // the slowest other rank, fallbacks included (priced on the scaled work, a 1.3x
    // straggler among fallbacks at a rate of 0.3 bought 548 ms per update where removing
    // it buys 447). Its margin is the median of its own-work margins over its updates.
    if (std::any_of(out.episodes.begin(), out.episodes.end(), [](const auto& e) { return e.paths_scaled; })) {
      std::vector<double> all;
      all.reserve(nr * out.per_update.size());
      for (std::size_t i = 0; i < nr; ++i)
        for (std::size_t k = 0; k < out.per_update.size(); ++k) all.push_back(compute[i][k] - out.per_update[k].median_compute_ms);
      const double pooled_typical = median_and_robust_sd(all).first;
      std::vector<double> m;
      for (StragglerEpisode& e : out.episodes) {
        if (!e.paths_scaled) continue;
        e.long_stretch = true;
        const auto i = static_cast<std::size_t>(
            std::find_if(ranks.begin(), ranks.end(), [&](const RankLog* r) { return *r->rank == e.rank; }) -
            ranks.begin());
        m.clear();
        for (std::size_t k = 0; k < out.per_update.size(); ++k)
          if (out.per_update[k].step >= e.first_step && out.per_update[k].step <= e.last_step)
            m.push_back(compute[i][k] - out.per_update[k].median_compute_ms);
        if (!m.empty()) e.margin_ms = *median(m);
      }
      price_long_stretches(out.episodes, out.per_update, work, pooled_typical);
    }
  }

  double fastest_median = 0;
  bool first = true;
  std::unordered_map<std::int64_t, const WaitingResult*> waiting_of;  // the last of a rank's, as before
  for (const auto& w : waiting)
    if (w.rank && w.wait_ms) waiting_of[*w.rank] = &w;
  const auto samples_id = in.counter(schema::counter::kSamples);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    RankStraggler r;
    r.rank = *ranks[i]->rank;
    r.compute_ms = *summarize(compute[i]);
    r.wait_ms = *summarize(wait[i]);
    r.comm_ms = summarize(comm_ms[i]);
    r.times_slowest = slowest_count[i];
    if (first || r.compute_ms.median < fastest_median) fastest_median = r.compute_ms.median;
    first = false;
    if (const auto it = waiting_of.find(r.rank); it != waiting_of.end()) {
      r.single_rank_wait_median_ms = it->second->wait_ms->median;
      r.single_rank_waiting = it->second->waiting;
    }
    if (samples_id) {
      std::vector<double> n;
      const auto first_k = in.first_update_of(*ranks[i]);
      for (std::size_t j = 0; j < ranks[i]->updates.size(); ++j) {
        const UpdateRecord& u = ranks[i]->updates[j];
        if (const auto c = first_k ? in.counter_of(*first_k + j, u, *samples_id) : u.counter(*samples_id)) n.push_back(*c);
      }
      r.samples_per_update = median(n);
    }
    out.per_rank.push_back(r);
  }
  search_after_ends(ranks, steps, compute_at, out);
  out.slow_group = find_slow_group(work, out.per_update, out.episodes);
  if (classes) out.group_stretches = find_group_stretches(work, out.per_update, *classes);
  for (auto& r : out.per_rank) {
    r.relative_score = r.compute_ms.median > 0 ? fastest_median / r.compute_ms.median : 1;
    r.individual_score = r.compute_ms.median > 0 ? r.compute_ms.min / r.compute_ms.median : 1;
    r.straggler = r.relative_score < threshold && out.steps_aligned >= kMinStragglerUpdates;
    if (r.straggler) out.stragglers.push_back(r.rank);
  }
  {
    std::vector<std::int64_t> excluded = out.stragglers;
    if (out.slow_group) excluded.insert(excluded.end(), out.slow_group->slow.begin(), out.slow_group->slow.end());
    // On own work less the slow paths' excess where there is some: a rank whose fallbacks
    // fall in scattered updates is the slow-path finding's story, not a lag of its own.
    out.recurring = any_excess ? find_recurring_lags(scaled_per_update, scaled_threshold, scaled_work, out.episodes,
                                                     excluded, &out.per_update, &work)
                               : find_recurring_lags(out.per_update, out.episode_threshold_ms, work, out.episodes, excluded);
    for (auto& g : out.recurring) g.paths_scaled = any_excess;
  }
  // A pipeline's stages do different work: each rank is compared with its stage's ranks too.
  if (classes)
    if (const ConfigDifference* stage = pipeline_stage_field(*classes))
      compare_within_stages(*stage, work, out.per_update, threshold, out);
  for (auto& e : out.episodes) {
    const auto lo = std::lower_bound(steps.begin(), steps.end(), e.first_step);
    const auto hi = std::upper_bound(lo, steps.end(), e.last_step);
    const auto in_range = static_cast<std::size_t>(hi - lo);
    e.steps_not_compared = in_range > e.updates ? in_range - e.updates : 0;
  }
  // Where a straggler's extra own work goes (its finding names the regions).
  // (The region times are computed once, for every rank, when some rank needs them.)
  std::optional<RankRegionTimes> region_times;
  std::vector<double> others;
  for (auto& r : out.per_rank) {
    if (!r.straggler && 2 * r.times_slowest <= out.steps_aligned) continue;
    others.clear();
    for (const auto& o : out.per_rank)
      if (o.rank != r.rank) others.push_back(o.compute_ms.median);
    const auto typical = median(others);
    if (!typical || !in.hierarchy) continue;
    if (!region_times) region_times.emplace(in, in.updates(), out.comm_region);
    r.lag = region_times->lag_of(r.rank, r.compute_ms.median - *typical);
  }
  return out;
}

}  // namespace stepprof
