// Rank numbers and file lists written for people, for jobs of any size (findings,
// reports, messages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepprof::detail {

/// Rank lists longer than this are written as ranges (rank_numbers).
inline constexpr std::size_t kListedUpTo = 16;

/// Rank numbers for prose: "0, 1, 2" up to kListedUpTo of them, with runs of 4 or more
/// consecutive ranks as ranges ("4088..4095"); more as ascending runs ("0..511,
/// 513..1023", runs of 3 or more as ranges), of which the first kListedUpTo are written
/// and the rest counted ("... and 12 more"). Repeats count once.
std::string rank_numbers(std::vector<std::int64_t> v);

/// File names for prose: all of them up to kListedUpTo, else the first two, the count
/// and the last ("a, b, ... (1024 files in all), z").
std::string file_list(const std::vector<std::string>& files);

}  // namespace stepprof::detail
