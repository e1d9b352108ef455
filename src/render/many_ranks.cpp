#include "many_ranks.hpp"

#include <fmt/format.h>

namespace stepprof::detail {

std::string file_list(const std::vector<std::string>& files) {
  std::string s;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files.size() > kListedUpTo && i == 2) return s + fmt::format(", ... ({} files in all), {}", files.size(), files.back());
    s += (s.empty() ? "" : ", ") + files[i];
  }
  return s;
}

}  // namespace stepprof::detail
