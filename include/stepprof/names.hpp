// Interned names: regions and counters are stored as small integer ids in records,
// so analyses compare and index ids instead of hashing strings.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace stepprof {

/// A table of distinct names; `Id` is the position of first insertion (0, 1, 2, ...).
/// Ids are stable for the table's lifetime and string_views returned by name() stay
/// valid. Not thread-safe.
class NameTable {
 public:
  using Id = std::uint32_t;

  /// Returns the id of `name`, adding it if new.
  Id intern(std::string_view name);
  /// Returns the id of `name` if present.
  [[nodiscard]] std::optional<Id> find(std::string_view name) const;
  /// The name of `id`; `id` must be < size().
  [[nodiscard]] std::string_view name(Id id) const { return names_[id]; }
  [[nodiscard]] std::size_t size() const { return names_.size(); }

 private:
  std::deque<std::string> names_;  // deque: element addresses never move
  std::unordered_map<std::string_view, Id> index_;
};

}  // namespace stepprof
