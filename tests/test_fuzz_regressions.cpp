// Replays every input the fuzzers found trouble with (tests/data/fuzz-regressions/,
// one directory per fuzz target; scripts/fuzz.sh) through the same harness: each must
// now be read without crashing, and a non-blank input must yield records or
// diagnostics (nothing is dropped silently).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(STEPPROF_SOURCE_DIR) / "tests/data/fuzz-regressions";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename Fn>
std::size_t replay(const std::string& target, Fn fn) {
  std::size_t n = 0;
  if (!fs::exists(kDir / target)) return 0;  // (nothing found for this target yet)
  for (const auto& e : fs::directory_iterator(kDir / target)) {
    if (!e.is_regular_file() || e.path().filename().string().starts_with(".")) continue;
    const std::string data = slurp(e.path());
    SCOPED_TRACE(e.path().string());
    const auto o = fn(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    if (o.nonblank_input) {
      EXPECT_GT(o.updates + o.diagnostics, 0u);
    }
    ++n;
  }
  return n;
}

}  // namespace

TEST(FuzzRegressions, RecordParser) { EXPECT_GT(replay("record", stepprof::fuzz::record), 0u); }

TEST(FuzzRegressions, LogReader) { EXPECT_GT(replay("log", stepprof::fuzz::log), 0u); }

TEST(FuzzRegressions, KinetoReader) {
  replay("kineto", stepprof::fuzz::kineto);
  // The fuzzer's seed (one step of a real trace, fuzz/kineto_seed.py) in every mode the
  // harness has: whole, gzip and forced-trace give its one update; gzip cut short gives
  // an error, not a crash.
  const std::string seed = slurp(fs::path(STEPPROF_SOURCE_DIR) / "fuzz/seeds/kineto-dlrm-one-step.json");
  ASSERT_GT(seed.size(), 1000u);
  for (const int mode : {0, 1, 2, 3}) {
    SCOPED_TRACE(mode);
    std::string input(1, static_cast<char>(mode));
    input += seed;
    const auto o = stepprof::fuzz::kineto(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    if (mode == 2) {
      EXPECT_EQ(o.updates, 0u);
      EXPECT_GT(o.diagnostics, 0u);
    } else {
      EXPECT_EQ(o.updates, 1u);
    }
  }
}
TEST(FuzzRegressions, Hierarchy) { replay("hierarchy", stepprof::fuzz::hierarchy); }
