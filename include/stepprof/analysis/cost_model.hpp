// Cost models: what each region's time per update costs per unit of the work that goes
// with it, fitted from the logs (docs/whatif.md "Cost models").
//
// Model family. For region R and update u,
//     t_R(u) = sum_j beta_j x_j(u),   beta_j >= 0,
// where t_R is the region's device time per update (host time where the log has no
// device time for R; 0 in updates where R is absent) [ms] and the x_j are work features
// of the update: R's own calls (a cost per call), per-update counters (samples, frames,
// token slots, valid tokens, supervised tokens, micro-batches), the frames, samples and
// micro-batches of each alternative code path (its counters; summed from the
// per-micro-batch detail when the log has none of them), and the sum over samples of
// frames squared (VGGT's global
// attention grows with the square of a sample's frame count), overall from the frame
// histogram and per path from the per-micro-batch detail. There is no free intercept: a
// region that does not run costs 0; its fixed cost is a cost per call. Coefficients are
// fitted by non-negative least squares (least_squares.hpp), so a cost is never negative.
//
// Features are chosen per region by forward selection on the leave-one-update-out error
// (least_squares.hpp select_columns). A model is used for predictions only when its
// held-out error, as a fraction of the region's mean time, is at most `threshold`
// (default 0.5), it was fitted on at least kMinUpdates updates, and the region is not
// the communication region (whose time is mostly waiting for other ranks).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stepprof/analysis/code_paths.hpp"
#include "stepprof/analysis/input.hpp"

namespace stepprof {

/// One work feature of an update.
struct Feature {
  enum class Kind : std::uint8_t {
    kCalls,         ///< calls of region `id` in the update [call]
    kCounter,       ///< counter `id` [its unit]
    kFramesSq,      ///< sum over the update's samples of frames^2, from frame_histogram [frame^2]
    kPathFramesSq,  ///< the same over the samples that took path region `id` (per-micro-batch detail) [frame^2]
    /// Path region `id`'s work summed over the update's micro-batches that name it, for a
    /// path the log has no counters of (PathCounters::work_from_microbatches):
    kPathFrames,        ///< their frames [frame]
    kPathSamples,       ///< their samples [sample]
    kPathMicrobatches,  ///< how many [micro-batch]
  };
  Kind kind = Kind::kCounter;
  NameTable::Id id = 0;  ///< region (kCalls and the kPath* kinds) or counter (kCounter)
  std::string name;      ///< e.g. "calls", "token_slots", "frames_sq", "vggt_single_frames_sq"
  std::string unit;      ///< singular unit: "call", "token slot", "frame", "sample", "micro-batch", "frame^2", ...
};

/// Which counters the cost models know by their role, by the dataset's counter ids.
struct WorkCounters {
  std::optional<NameTable::Id> samples, frames, token_slots, valid_tokens, supervised_tokens, micro_steps;
};

/// One alternative code path (alt= in the nesting) and the counters of its work.
struct PathCounters {
  std::string region;
  std::string group;
  std::optional<NameTable::Id> id;  ///< region id, when the log has the region
  std::optional<NameTable::Id> samples, frames, microbatches;  ///< counter ids, when the log has them
  /// The log has none of the three counters, the log has the path's region, and every
  /// update has per-micro-batch detail naming each micro-batch's path and frames
  /// (FeatureSpace::microbatch_frames): the path's work features are summed from that
  /// detail (Feature::Kind::kPathFrames, kPathSamples, kPathMicrobatches). (The code-path
  /// table, code_paths.hpp PathCost::work_from_microbatches, asks less: detail in every
  /// update that ran the path.)
  bool work_from_microbatches = false;
};

/// Every feature any model may use, and how to compute them for an update.
struct FeatureSpace {
  /// The work features (counters, frames^2, paths' frames^2), then the kCalls features
  /// (find() relies on that order).
  std::vector<Feature> features;
  WorkCounters counters;
  std::vector<PathCounters> paths;  ///< in nesting order
  /// True when every update has per-micro-batch detail with frames (kPathFramesSq features exist).
  bool microbatch_frames = false;
  /// Per region id: the updates that list it [count], and the index of its kCalls feature
  /// (regions in at least kMinUpdates updates, or in every update of a shorter log, have
  /// one; kNone otherwise: a log whose
  /// region names are new in every update made 50,000 features of 100 updates each).
  std::vector<std::size_t> region_updates, calls_feature;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  /// Index of a feature, or nullopt.
  [[nodiscard]] std::optional<std::size_t> find(Feature::Kind kind, NameTable::Id id) const;
  /// Index of path `p`'s work feature of kind `what`: its counter's feature, or with
  /// `p.work_from_microbatches` the one summed from the micro-batch detail; nullopt when
  /// the log has neither.
  [[nodiscard]] std::optional<std::size_t> path_feature(const PathCounters& p, PathWork what) const;
  /// The value of every feature for update `u` (same order as `features`); absent counters are 0.
  [[nodiscard]] std::vector<double> values(const UpdateRecord& u) const;
};

/// One term of a model: cost per unit of a feature.
struct CostTerm {
  std::size_t feature = 0;  ///< index into FeatureSpace::features
  double ms_per_unit = 0;   ///< [ms per unit of the feature], > 0
};

struct RegionModel {
  std::string region;
  NameTable::Id id = 0;
  bool device = false;             ///< fitted to device time (else host time)
  std::size_t updates = 0;         ///< updates it was fitted on (all ranks)
  double mean_ms = 0;              ///< mean time per update [ms]
  std::vector<std::size_t> candidates;  ///< features considered (indices)
  std::vector<CostTerm> terms;     ///< chosen, in the order selection added them
  std::optional<double> r2;        ///< 1 - RSS/TSS on the fitted updates; absent when the time is constant
  double heldout_rmse_ms = 0;      ///< leave-one-update-out RMSE [ms]
  double heldout_fraction = 0;     ///< heldout_rmse_ms / mean_ms [fraction]
  /// Held-out RMSE after each selection step (feature index, RMSE [ms]).
  std::vector<std::pair<std::size_t, double>> selection;
  bool usable = false;             ///< used for predictions
  std::string why_not;             ///< when not usable: why, in words
  /// An update of those the model was fitted on (all ranks pooled) without which, alone,
  /// the selection chooses other terms, and those terms (feature indices; empty: no
  /// feature gets a positive cost then).
  struct ChoiceFlip {
    std::optional<std::int64_t> rank;
    std::int64_t step = 0;
    std::vector<std::size_t> terms;
  };
  /// Whether the choice of terms was checked for updates that set it (a usable model
  /// fitted on at most kChoiceCheckUpdates updates): the selection is run again without
  /// each update in turn.
  bool choice_checked = false;
  /// The updates that set the choice, in update order; empty when it held, or was not
  /// checked.
  std::vector<ChoiceFlip> choice_set_by;

  /// The model's time for feature values `x` [ms].
  [[nodiscard]] double predict(std::span<const double> x) const;
};

struct CostModelOptions {
  double threshold = 0.5;     ///< largest held-out error fraction of a usable model
  double min_gain = 0.05;     ///< see SelectionOptions
  std::size_t max_terms = 4;  ///< most features per model
};

inline constexpr std::size_t kMinUpdates = 5;  ///< fewer updates: no usable model
/// Up to this many updates, a usable model's choice of terms is checked for updates that
/// alone set it (RegionModel::choice_set_by): the selection again without each update,
/// about n^2 x candidates x rounds small refits. On few updates a term's margin over the
/// model to beat can rest on one update (the bundled log's language_forward: cost per
/// token slot over cost per call by 8.7 % on 20 updates, by less than --min-gain without
/// step 16, 19 or 30); on many, one update moves a held-out error little.
inline constexpr std::size_t kChoiceCheckUpdates = 32;
/// A usable model with a lower R² that prices a what-if's change gets a "weak point" note
/// (the prediction then rests on proportionality, not on the variation seen).
inline constexpr double kWeakR2 = 0.3;

struct CostModelSet {
  FeatureSpace space;
  std::vector<RegionModel> models;  ///< one per region that ran, in region-id order
  double threshold = 0.5;
  std::size_t updates = 0;          ///< updates fitted on (all ranks)
  std::string heldout_method;       ///< "exact refits" or "PRESS shortcut (more than 256 updates)"
  std::string comm_region;          ///< not modeled (its time is mostly waiting); empty if none

  [[nodiscard]] const RegionModel* find(std::string_view region) const;
};

/// The feature space of the input: candidates from the counters the analyses know
/// (schema.hpp counter::), the alternative paths of the nesting, and every region's calls.
FeatureSpace build_feature_space(const AnalysisInput& in);

/// The features a region's model may choose from, in order of preference (ties in the
/// selection go to the earlier one): for an alternative path, its own frames, samples,
/// frames^2 and micro-batches, then its calls (a path's cost is reported per unit of its
/// work where the data cannot tell that from a cost per call); for any other region, its
/// calls (a fixed cost per call is the model to beat), the update's token slots, valid
/// tokens, frames, samples, frames^2, supervised tokens and micro-batches, and every
/// path's frames, samples, frames^2 and micro-batches.
std::vector<std::size_t> candidate_features(const FeatureSpace& space, NameTable::Id region);

/// The time a model is fitted to for one update: device time when `device`, else host
/// time; 0 when the region is absent [ms].
double region_time(const UpdateRecord& u, NameTable::Id region, bool device);

/// Fits every region's model over all updates of all ranks in the input.
CostModelSet fit_cost_models(const AnalysisInput& in, const CostModelOptions& options = {});

/// A model's term features for every update, row-major (updates x model.terms.size()):
/// element [i * terms + j] is x[i][model.terms[j].feature]. `x` holds one feature vector
/// per update (FeatureSpace::values). The what-if bootstrap reduces it per step
/// (reduce_groups) and refits the model's terms on resampled steps (nnls_groups).
std::vector<double> term_rows(const RegionModel& model, const std::vector<std::vector<double>>& x);

}  // namespace stepprof
