// Directories a command makes for its output, removed again (where still empty) when the
// command fails or is interrupted, so that a failure leaves no empty directory behind
// (`stepprof report --format csv --out DIR`, `stepprof synth -o DIR`). Internal.
#pragma once

#include <filesystem>
#include <system_error>
#include <vector>

namespace stepprof::detail {

class MadeDirectories {
 public:
  /// Makes `dir` and whichever of its parents are missing, noting which it made; false
  /// with `ec` set when it cannot (then nothing it made is left).
  bool make(const std::filesystem::path& dir, std::error_code& ec) {
    namespace fs = std::filesystem;
    std::vector<fs::path> missing;  // innermost first
    std::error_code exists_ec;
    // (symlink_status: a dangling link is there, not missing: create_directories then fails
    // on it, and remove_empty() must not delete the user's link.)
    for (fs::path p = dir.lexically_normal(); !p.empty() && !fs::exists(fs::symlink_status(p, exists_ec));
         p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    made_.insert(made_.begin(), missing.begin(), missing.end());
    fs::create_directories(dir, ec);
    if (ec) remove_empty();
    return !ec;
  }
  /// Removes the directories make() made, innermost first; one that holds anything stays.
  void remove_empty() {
    std::error_code ec;
    for (const auto& d : made_)  // (remove() leaves a non-empty directory; what is no longer one stays)
      if (std::filesystem::is_directory(std::filesystem::symlink_status(d, ec))) std::filesystem::remove(d, ec);
    made_.clear();
  }

 private:
  std::vector<std::filesystem::path> made_;  // innermost first
};

}  // namespace stepprof::detail
