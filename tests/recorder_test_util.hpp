// Helpers shared by the recorder's tests: temporary log paths, reading a log back with
// nlohmann-json (independently of stepprof's own reader), known-duration busy waits.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepprof/stepprof.hpp"

namespace stepprof::test {

using Json = nlohmann::ordered_json;

/// A log path in the test temp dir, removed at the end of the test.
struct TempLog {
  std::string path;
  explicit TempLog(const std::string& name)
      : path(testing::TempDir() + "/stepprof-" + name + "-" + std::to_string(getpid()) + ".jsonl") {
    std::remove(path.c_str());
  }
  ~TempLog() { std::remove(path.c_str()); }
};

/// Every line of `path` parsed as JSON (a line that does not parse becomes a string).
inline std::vector<Json> read_lines(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    out.push_back(j.is_discarded() ? Json(line) : j);
  }
  return out;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// steady_clock now [ms] (the independent measurement tests compare against).
inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Busy-waits `ms` milliseconds of steady_clock time.
inline void spin_ms(double ms) {
  const double end = now_ms() + ms;
  while (now_ms() < end) {
  }
}

/// Closes the recorder after each test, whatever the test did.
class RecorderTest : public testing::Test {
 protected:
  void TearDown() override {
    if (stepprof::is_open()) stepprof::close();
  }
};

}  // namespace stepprof::test
