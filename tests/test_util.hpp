// Scaffolding shared by the unit tests: a fixture with a fresh temporary directory per
// test and writers of plain and gzip files into it, and builders of in-memory datasets.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "stepprof/dataset.hpp"

namespace stepprof::test {

/// Fixture base: dir_ is a new directory for each test (named after the process, the
/// test suite and the test, so parallel test processes do not share it), removed after.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / ("stepprof_" + std::string(info->test_suite_name()) + "_" +
                                                     std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Writes `content` to dir_/name as it is; returns the path.
  std::string write(const std::string& name, const std::string& content) {
    const auto p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  /// Writes `content` gzip-compressed to dir_/name; returns the path.
  std::string write_gz(const std::string& name, const std::string& content) {
    const auto p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
    gzclose(f);
    return p;
  }

  std::filesystem::path dir_;
};

/// Appends region `name` (interned in d's region table) to `u`: device and host times
/// [ms] (absent when nullopt), calls [count], no parent.
inline void add_region(Dataset& d, UpdateRecord& u, std::string_view name, std::optional<double> device,
                       std::optional<double> host, std::int64_t calls = 1) {
  u.regions.push_back({d.regions.intern(name), std::nullopt, device, host, calls});
}

/// Appends counter `name` (interned in d's counter table) with value v [count] to `u`.
inline void add_counter(Dataset& d, UpdateRecord& u, std::string_view name, double v) {
  u.counters.push_back({d.counters.intern(name), v});
}

/// A dataset built in memory update by update: `ranks` ranks (0, 1, ...), all read
/// from one file named "mem".
struct DatasetBuilder {
  Dataset d;
  explicit DatasetBuilder(int ranks = 1) {
    d.files = {"mem"};
    for (int r = 0; r < ranks; ++r) {
      auto& rl = d.ranks.emplace_back();
      rl.rank = r;
      rl.files = {0};
    }
  }
  /// Appends an update of `rank` (step, wall time [ms]) and returns it.
  UpdateRecord& add(std::int64_t step, double wall, int rank = 0) {
    auto& u = d.ranks[static_cast<std::size_t>(rank)].updates.emplace_back();
    u.rank = rank;
    u.step = step;
    u.wall_ms = wall;
    return u;
  }
  void region(UpdateRecord& u, std::string_view name, std::optional<double> device, std::optional<double> host,
              std::int64_t calls = 1) {
    add_region(d, u, name, device, host, calls);
  }
  void counter(UpdateRecord& u, std::string_view name, double v) { add_counter(d, u, name, v); }
  /// A region's name and its device and host times [ms] (absent: not timed on that clock).
  struct Timed {
    std::string_view name;
    std::optional<double> device, host;
  };
  /// `parent` and its `children` in update `u`, each child's `parents` entry set to it.
  void family(UpdateRecord& u, const Timed& parent, std::initializer_list<Timed> children) {
    region(u, parent.name, parent.device, parent.host);
    const std::size_t at = u.regions.size() - 1;
    for (const Timed& c : children) {
      region(u, c.name, c.device, c.host);
      u.regions.back().parent = u.regions[at].region;
    }
  }
};

}  // namespace stepprof::test
