// Region nesting and region roles. Logs such as the bundled real one store flat region
// names; the nesting comes from a small text file (`--hierarchy FILE`, format in
// docs/hierarchy-format.md) or from the `parents` that stepprof's recorder writes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepprof/dataset.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof {

/// What a region does, for the analyses that look for it.
enum class RegionRole : std::uint8_t {
  kNone,
  kCommunication,  ///< holds collective communication (waits for other ranks)
  kData,           ///< fetches input data
  kOptimizer,      ///< the optimizer step at the accumulation boundary
  /// runs alongside the update on another thread (a data-loader or logging thread): not a
  /// consecutive part of its parent or of the update, so its time is not subtracted from
  /// them and does not count against the nesting
  kBackground,
};

/// Hierarchy::source of a nesting built from the parents the log recorded.
inline constexpr std::string_view kNestingFromLog = "parents recorded in the log";

std::string_view role_name(RegionRole r);

struct HierarchyNode {
  std::string name;
  std::string parent;     ///< "" for a top-level region (child of the whole update)
  std::string alt_group;  ///< regions with the same group are alternative code paths for the same work
  RegionRole role = RegionRole::kNone;
  /// Counters that measure this region's work; empty means the default
  /// `<name>_samples`, `<name>_frames`, `<name>_microbatches`.
  std::string samples_counter, frames_counter, microbatches_counter;
  std::uint64_t line = 0;  ///< line in the hierarchy file (0 when taken from the log)

  [[nodiscard]] std::string samples() const { return samples_counter.empty() ? name + "_samples" : samples_counter; }
  [[nodiscard]] std::string frames() const { return frames_counter.empty() ? name + "_frames" : frames_counter; }
  [[nodiscard]] std::string microbatches() const {
    return microbatches_counter.empty() ? name + "_microbatches" : microbatches_counter;
  }
};

/// A forest of regions under the update. Nodes are kept in definition order.
class Hierarchy {
 public:
  std::string source;  ///< where the nesting came from, for reports: a file name or kNestingFromLog

  /// Adds a node. Its parent must have been added before (or be ""): a parent that is
  /// not in the hierarchy yet leaves the node at the top level for depth(), is_ancestor()
  /// and in_background(). So no chain of parents can loop. A second node of a name is
  /// kept in nodes() and children() but find() returns the first.
  void add(HierarchyNode node);
  [[nodiscard]] const std::vector<HierarchyNode>& nodes() const { return nodes_; }
  [[nodiscard]] const HierarchyNode* find(std::string_view name) const;
  /// Direct children of `parent` ("" for the top level), in definition order.
  [[nodiscard]] std::vector<const HierarchyNode*> children(std::string_view parent) const;
  /// True when `ancestor` is a (possibly indirect) parent of `name`. O(log depth).
  [[nodiscard]] bool is_ancestor(std::string_view ancestor, std::string_view name) const;
  /// True when `name` or one of its ancestors has the role "background" (regions nested in
  /// a background region run on its thread too).
  [[nodiscard]] bool in_background(std::string_view name) const;
  /// 0 for top-level regions; -1 for a region not in the hierarchy. O(1).
  [[nodiscard]] int depth(std::string_view name) const;
  /// Alternative-path groups in definition order, each with its member regions.
  [[nodiscard]] std::vector<std::pair<std::string, std::vector<const HierarchyNode*>>> alternatives() const;

 private:
  // Looked up by name without a copy of the key (C++20 heterogeneous lookup).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using ByName = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

  std::vector<HierarchyNode> nodes_;
  // Per node, set when it is added: its parent node, depth, whether it or an ancestor
  // is a background region, and a jump pointer to an ancestor higher up, so that
  // is_ancestor() climbs a chain of any depth in O(log depth) steps (the skew-binary
  // jump pointers of E. W. Myers, "An applicative random-access stack", Information
  // Processing Letters 17(5), 1983). A nesting thousands of levels deep was walked level
  // by level, for each pair of regions compared.
  struct Link {
    std::size_t parent;  // kNoParent at the top level
    std::size_t jump;    // an ancestor (the node itself at the top level)
    int depth;
    bool background;
  };
  static constexpr std::size_t kNoParent = static_cast<std::size_t>(-1);
  std::vector<Link> links_;
  [[nodiscard]] std::size_t ancestor_at_depth(std::size_t node, int depth) const;
  // find() and children() in constant time: a log with a region name per update (a name
  // made with the step number in it) has thousands of regions, and the timeline asked
  // for each one's children in each update (cubic in the updates).
  ByName<std::size_t> index_;                   // name -> its first node
  ByName<std::vector<std::size_t>> children_;  // parent name ("" top level) -> nodes, in order
};

/// Parses the hierarchy format. Every problem is reported as a Problem::kHierarchy
/// error with `file_name:line:column`; returns nullopt when there was any.
std::optional<Hierarchy> parse_hierarchy(std::string_view text, const std::string& file_name, Diagnostics& diag);

/// Reads and parses a hierarchy file; an unreadable file is a kUnreadable error.
std::optional<Hierarchy> load_hierarchy(const std::string& path, Diagnostics& diag);

/// The nesting the log itself records: the `parents` of update records, plus the
/// config fields `region_alternatives` ({region: group}) and `region_roles`
/// ({region: "communication"|"data"|"optimizer"|"background"}). Returns nullopt when the log records
/// no parents. Conflicting parents for one region are reported as kHierarchy warnings.
std::optional<Hierarchy> hierarchy_from_log(const Dataset& data, Diagnostics& diag);

/// A region of role optimizer in `h` that, on every rank that has it, ran in every k-th
/// update only (k >= 2, evenly through the rank's window, in 3 or more updates, the rank's
/// updates consecutive steps, at least 6 of them): each update record is likely a
/// micro-batch, not an optimizer update (prof.step() or end_update() called per
/// micro-batch under gradient accumulation, as tutorials' loops do), and every per-update
/// figure is per micro-batch. A kOptimizerNotEveryUpdate warning at the first update with
/// the region names the region and k. (A helper's trace of accumulation 4 read as updates
/// of 20 ms where each took 80.)
void check_optimizer_every_update(const Hierarchy& h, const Dataset& data, Diagnostics& diag);

}  // namespace stepprof
