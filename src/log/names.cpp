#include "stepprof/names.hpp"

namespace stepprof {

NameTable::Id NameTable::intern(std::string_view name) {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  const auto id = static_cast<Id>(names_.size());
  const std::string& stored = names_.emplace_back(name);
  index_.emplace(std::string_view(stored), id);
  return id;
}

std::optional<NameTable::Id> NameTable::find(std::string_view name) const {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  return std::nullopt;
}

}  // namespace stepprof
