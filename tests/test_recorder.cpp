// The recorder, end to end in one process: what it writes is read back (with
// nlohmann-json, independently of stepprof's reader, and with stepprof's reader) and
// compared with independent measurements and hand-counted expectations.
#include <gtest/gtest.h>

#include <array>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include "recorder_test_util.hpp"
#include "stepprof/hierarchy.hpp"
#include "stepprof/line_sink.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

using namespace stepprof;
using namespace stepprof::test;

namespace {

Options host_only(const std::string& path) {
  Options o;
  o.path = path;
  o.device_timing = DeviceTiming::kOff;
  o.run_id = "test-run";
  return o;
}

// A sink that keeps what it is given in memory, failing the writes whose 1-based
// numbers are in `fail` (writing `partial` bytes of a failing write first).
class ScriptedSink final : public LineSink {
 public:
  std::vector<int> fail;
  std::size_t partial = 0;
  std::string text;
  int calls = 0;
  int write(std::string_view bytes, std::size_t& written) noexcept override {
    ++calls;
    for (int f : fail)
      if (f == calls) {
        written = std::min(partial, bytes.size());
        text.append(bytes.substr(0, written));
        return ENOSPC;
      }
    text.append(bytes);
    written = bytes.size();
    return 0;
  }
};

// Closes the recorder and checks that close() reports counted errors: its status is
// kWarnErrors and its message holds each of `parts`. Returns the message.
std::string expect_close_warns(std::initializer_list<std::string> parts, const std::string& context = {}) {
  std::string message;
  EXPECT_EQ(close(&message), Status::kWarnErrors) << context;
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << context << ": " << message;
  return message;
}

}  // namespace

// Tolerance for host times: the TSC's rate is calibrated against steady_clock over
// >= 10 ms with bracketed reads, so relative error is far below 0.2%; 5 us covers the
// clock reads themselves.
constexpr double kRelTol = 0.002, kAbsTolMs = 0.005;

TEST_F(RecorderTest, HostTimeMatchesAnIndependentClock) {
  TempLog log("host-time");
  const double before_open = now_ms();
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const double after_open = now_ms();
  struct Measured {
    double inner, outer, wall_lo, wall_hi;
  };
  std::vector<Measured> m;
  double update_lo = after_open, update_hi = before_open;
  for (int k = 0; k < 3; ++k) {
    const double o0 = now_ms();
    double i0 = 0, i1 = 0;
    {
      STEPPROF_REGION("timed_work");
      i0 = now_ms();
      spin_ms(3.0 + k);
      i1 = now_ms();
    }
    const double o1 = now_ms();
    const double e0 = now_ms();
    ASSERT_EQ(end_update(k), Status::kOk);
    const double e1 = now_ms();
    m.push_back({i1 - i0, o1 - o0, e0 - update_lo, e1 - update_hi});
    update_lo = e1;  // the next update starts inside end_update: between e0 and e1
    update_hi = e0;
  }
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  for (int k = 0; k < 3; ++k) {
    const Json& u = lines[static_cast<std::size_t>(k) + 1];
    EXPECT_EQ(u["step"], k);
    const double host = u["cpu_call_ms"]["timed_work"].get<double>();
    EXPECT_GE(host, m[static_cast<std::size_t>(k)].inner * (1 - kRelTol) - kAbsTolMs) << "update " << k;
    EXPECT_LE(host, m[static_cast<std::size_t>(k)].outer * (1 + kRelTol) + kAbsTolMs) << "update " << k;
    EXPECT_EQ(u["calls"]["timed_work"], 1);
    const double wall = u["wall_ms"].get<double>();
    EXPECT_GE(wall, m[static_cast<std::size_t>(k)].wall_lo - kAbsTolMs) << "update " << k;
    EXPECT_LE(wall, m[static_cast<std::size_t>(k)].wall_hi + kAbsTolMs) << "update " << k;
    EXPECT_FALSE(u.contains("cuda_stream_ms"));  // device timing off: absent, not 0
  }
}

TEST_F(RecorderTest, NestingParentsAndCalls) {
  TempLog log("nesting");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  {
    STEPPROF_REGION("n_outer");
    for (int i = 0; i < 3; ++i) {
      STEPPROF_REGION("n_inner");
      spin_ms(0.2);
    }
    {
      STEPPROF_REGION("n_other");
      spin_ms(0.2);
    }
  }
  { STEPPROF_REGION("n_top2"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  const Json& u = lines[1];
  EXPECT_EQ(u["calls"], (Json{{"n_outer", 1}, {"n_inner", 3}, {"n_other", 1}, {"n_top2", 1}}));
  EXPECT_EQ(u["parents"], (Json{{"n_outer", nullptr}, {"n_inner", "n_outer"}, {"n_other", "n_outer"}, {"n_top2", nullptr}}));
  const auto& h = u["cpu_call_ms"];
  // A parent's time includes its children's (nested regions overlap).
  EXPECT_GE(h["n_outer"].get<double>(), h["n_inner"].get<double>() + h["n_other"].get<double>());
  EXPECT_GE(h["n_inner"].get<double>(), 3 * 0.2 * (1 - kRelTol));
}

namespace {
// depth calls of itself, each spinning `ms`, inside region "r_rec".
void recurse(int depth, double ms) {
  STEPPROF_REGION("r_rec");
  spin_ms(ms);
  if (depth > 1) recurse(depth - 1, ms);
}
}  // namespace

TEST_F(RecorderTest, ARecursiveRegionCountsItsTimeOnceAndKeepsItsParent) {
  // A recursive function's nested calls added their time again (a 536 % share of the
  // update) and made the region its own parent.
  TempLog log("recursion");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  double outer_ms = 0;
  {
    STEPPROF_REGION("r_caller");
    const auto t0 = std::chrono::steady_clock::now();
    recurse(5, 0.3);
    outer_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    recurse(2, 0.3);  // a second outermost call
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  {
    STEPPROF_REGION("r_rec");  // directly inside itself, at the top level
    { STEPPROF_REGION("r_rec"); }
  }
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  const Json& u = lines[1];
  EXPECT_EQ(u["calls"]["r_rec"], 7);
  EXPECT_EQ(u["parents"]["r_rec"], "r_caller");
  const double rec = u["cpu_call_ms"]["r_rec"].get<double>(), caller = u["cpu_call_ms"]["r_caller"].get<double>();
  // Once: the two outermost calls (5 + 2 spins of 0.3 ms), not 5+4+3+2+1 + 2+1 spins.
  EXPECT_GE(rec, 7 * 0.3 * (1 - kRelTol));
  EXPECT_LE(rec, caller);
  EXPECT_GE(caller, outer_ms);
  EXPECT_EQ(lines[2]["calls"]["r_rec"], 2);
  EXPECT_EQ(lines[2]["parents"]["r_rec"], nullptr);
}

TEST_F(RecorderTest, AbsentRegionsAndCountersStayAbsent) {
  TempLog log("absent");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  for (int step = 0; step < 3; ++step) {
    if (step == 0) {
      STEPPROF_REGION("a_only_first");
      STEPPROF_COUNT("a_first_counter", 5);
    }
    { STEPPROF_REGION("a_always"); }
    STEPPROF_COUNT("a_always_counter", step);  // 0 in update 0: present with value 0
    ASSERT_EQ(end_update(step), Status::kOk);
  }
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1]["calls"], (Json{{"a_only_first", 1}, {"a_always", 1}}));
  EXPECT_EQ(lines[1]["counts"], (Json{{"a_first_counter", 5}, {"a_always_counter", 0}}));
  for (std::size_t i : {2u, 3u}) {
    EXPECT_EQ(lines[i]["calls"], (Json{{"a_always", 1}})) << i;
    EXPECT_FALSE(lines[i]["cpu_call_ms"].contains("a_only_first"));
    EXPECT_FALSE(lines[i]["parents"].contains("a_only_first"));
    EXPECT_EQ(lines[i]["counts"], (Json{{"a_always_counter", static_cast<int>(i) - 1}}));
    EXPECT_FALSE(lines[i].contains("frame_histogram"));
    EXPECT_FALSE(lines[i].contains("padding_fraction"));
  }
}

TEST_F(RecorderTest, MacroCountsOfAnyIntegerTypeAndUnsignedBeyondInt64) {
  // (A floating-point count does not compile: recorder_count_needs_an_integer.)
  TempLog log("macro_ints");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::size_t n = 3;
  const std::uint8_t small = 2;
  STEPPROF_COUNT("mi_size_t", n);
  STEPPROF_COUNT("mi_u8", small);
  STEPPROF_COUNT("mi_huge", std::numeric_limits<std::uint64_t>::max());  // beyond int64: rejected
  STEPPROF_FRAME_HISTOGRAM(n, small);
  STEPPROF_FRAME_HISTOGRAM(std::uint64_t{1} << 63, 1);  // rejected
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);  // (the two rejected values were counted)
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["counts"], (Json{{"mi_size_t", 3}, {"mi_u8", 2}}));
  EXPECT_EQ(lines[1]["frame_histogram"], (Json{{"3", 2}}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 2}}));
}

// STEPPROF_SAMPLE_INDICES of a std::vector<int>, <std::size_t> or <long long> did not
// compile (only std::int64_t was taken, a helper); any integer type is taken now, a bad
// index still records none of the call's indices.
TEST_F(RecorderTest, SampleIndicesOfAnyIntegerType) {
  TempLog log("indices-types");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::vector<int> ints{3, 1};
  const std::vector<std::size_t> sizes{9};
  const std::vector<long long> longs{(1LL << 53)};
  const std::array<std::uint16_t, 2> shorts{{65535, 0}};
  std::vector<std::uint32_t> many(1300);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::uint32_t>(i);
  STEPPROF_SAMPLE_INDICES(ints);
  STEPPROF_SAMPLE_INDICES(sizes);
  STEPPROF_SAMPLE_INDICES(longs);
  STEPPROF_SAMPLE_INDICES(shorts);
  STEPPROF_SAMPLE_INDICES((std::vector<int>{4, -1, 5}));  // none of these
  STEPPROF_SAMPLE_INDICES(std::vector<std::uint64_t>{(1ULL << 53) + 1});  // nor this
  ASSERT_EQ(end_update(0), Status::kOk);
  STEPPROF_SAMPLE_INDICES(many);  // (three chunks of the stack buffer)
  ASSERT_EQ(end_update(1), Status::kOk);
  close();
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["sample_indices"], (Json{3, 1, 9, std::int64_t{1} << 53, 65535, 0}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 2}}));
  Json expected = Json::array();
  for (std::size_t i = 0; i < many.size(); ++i) expected.push_back(i);
  EXPECT_EQ(lines[2]["sample_indices"], expected);
}

TEST_F(RecorderTest, PerUpdateDataAndPadding) {
  TempLog log("data");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  // Update 0: padding given explicitly; shapes counted per micro-batch.
  frame_histogram_add(9, 3);
  frame_histogram_add(3, 1);
  frame_histogram_add(9, 1);
  frame_histogram_add(5, 0);  // nothing added: no bucket "5" of 0 samples
  frame_histogram_add(9, 0);
  input_shape({8, 3154});
  input_shape({8, 3055});
  input_shape({8, 3154});
  const std::vector<std::int64_t> idx{1365027, 909435};
  sample_indices(idx);
  sample_indices(std::vector<std::int64_t>{7});
  EXPECT_EQ(set_padding_fraction(0.125), Status::kOk);
  EXPECT_EQ(set_padding_fraction(1.5), Status::kErrArgument);
  EXPECT_EQ(set_padding_fraction(std::nan("")), Status::kErrArgument);
  ASSERT_EQ(end_update(0), Status::kOk);
  // Update 1: padding derived from the token counters: 1 - 90/120 = 0.25.
  STEPPROF_COUNT("valid_tokens", 90);
  STEPPROF_COUNT("token_slots", 100);
  STEPPROF_COUNT("token_slots", 20);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);  // the two rejected padding fractions were counted

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  const Json& u0 = lines[1];
  EXPECT_EQ(u0["frame_histogram"], (Json{{"3", 1}, {"9", 4}}));
  EXPECT_EQ(u0["input_shapes"], (Json{{"(8, 3154)", 2}, {"(8, 3055)", 1}}));
  EXPECT_EQ(u0["sample_indices"], (Json{1365027, 909435, 7}));
  EXPECT_EQ(u0["padding_fraction"], 0.125);
  EXPECT_EQ(u0["recorder_errors"], (Json{{"bad_argument", 2}}));
  const Json& u1 = lines[2];
  EXPECT_EQ(u1["counts"].size(), 2u);
  EXPECT_EQ(u1["counts"]["valid_tokens"], 90);
  EXPECT_EQ(u1["counts"]["token_slots"], 120);
  EXPECT_DOUBLE_EQ(u1["padding_fraction"].get<double>(), 0.25);
  EXPECT_FALSE(u1.contains("input_shapes"));
  EXPECT_FALSE(u1.contains("recorder_errors"));  // reported once, in the record after them
}

// More valid tokens than token slots in an update (counted in the wrong place): the
// recorder wrote both, and the reader reported the record (bad-field, exit status 1).
// Both are left out and counted as bad_argument, in that update's own record (it was
// in the next one, and the report named the wrong step).
TEST_F(RecorderTest, MoreValidTokensThanSlotsAreLeftOutAndCounted) {
  TempLog log("tokens");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  STEPPROF_COUNT("valid_tokens", 200);
  STEPPROF_COUNT("token_slots", 100);
  STEPPROF_COUNT("samples", 8);
  ASSERT_EQ(end_update(0), Status::kOk);
  STEPPROF_COUNT("valid_tokens", 100);
  STEPPROF_COUNT("token_slots", 100);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["counts"], (Json{{"samples", 8}}));
  EXPECT_FALSE(lines[1].contains("padding_fraction"));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 1}}));
  EXPECT_EQ(lines[2]["counts"], (Json{{"valid_tokens", 100}, {"token_slots", 100}}));
  EXPECT_EQ(lines[2]["padding_fraction"], 0.0);
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

TEST_F(RecorderTest, ConfigRecordAndPathTemplate) {
  TempLog log("config-rank3");
  const std::string tmpl = log.path.substr(0, log.path.find("rank3")) + "rank{rank}" +
                           log.path.substr(log.path.find("rank3") + 5);
  Options o = host_only(tmpl);
  o.rank = 3;
  o.world_size = 4;
  o.run_id = "job-42";
  o.config_json = R"({"micro_batch": 8, "accumulation": 2, "model": "/models/x"})";
  o.config = {{"seed", "42"}, {"supervised_token_loss", "true"}};
  o.region_alternatives = {{"vggt_batched", "geometry"}, {"vggt_single", "geometry"}};
  o.region_roles = {{"batch_fetch", "data"}, {"optimizer", "optimizer"}};
  ASSERT_EQ(open(o), Status::kOk);
  RecorderInfo info_out;
  ASSERT_EQ(info(info_out), Status::kOk);
  EXPECT_EQ(info_out.path, log.path);
  EXPECT_EQ(info_out.clock, clock_name());
  ASSERT_EQ(end_update(5), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  const Json& c = lines[0];
  std::vector<std::string> keys;
  for (auto it = c.begin(); it != c.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "schema", "run_id", "rank", "world_size", "clock", "device_timing",
                                            "region_alternatives", "region_roles", "micro_batch", "accumulation",
                                            "model", "seed", "supervised_token_loss"}));
  EXPECT_EQ(c["type"], "config");
  EXPECT_EQ(c["schema"], 1);
  EXPECT_EQ(c["run_id"], "job-42");
  EXPECT_EQ(c["rank"], 3);
  EXPECT_EQ(c["world_size"], 4);
  EXPECT_TRUE(c["clock"] == "tsc" || c["clock"] == "steady_clock");
  EXPECT_EQ(c["clock"], std::string(clock_name()));
  EXPECT_EQ(c["device_timing"], "off: disabled by the recorder options");
  EXPECT_EQ(c["region_alternatives"], (Json{{"vggt_batched", "geometry"}, {"vggt_single", "geometry"}}));
  EXPECT_EQ(c["region_roles"], (Json{{"batch_fetch", "data"}, {"optimizer", "optimizer"}}));
  EXPECT_EQ(lines[1]["rank"], 3);
  EXPECT_EQ(lines[1]["step"], 5);
}

// A config the recorder rejects (global_batch 16.5) records nothing for the whole run,
// and a loop that ignores open()'s status (as the README's example does) was told
// nothing: with print_warnings (the default) it is one stderr line now (a helper).
TEST_F(RecorderTest, ARejectedOpenIsSaidOnStderr) {
  TempLog log("rejected");
  Options o = host_only(log.path);
  o.config = {{"global_batch", "16.5"}};
  testing::internal::CaptureStderr();
  std::string message;
  const Status s = open(o, &message);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s, Status::kErrArgument);
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(said, "stepprof: open() failed, this process records nothing: " + message + "\n");
  EXPECT_FALSE(std::filesystem::exists(log.path));
  o.print_warnings = false;  // (a caller that reports it its own way: the Python package raises)
  testing::internal::CaptureStderr();
  EXPECT_EQ(open(o), Status::kErrArgument);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // A second open() while one is open: kErrState, and no line, as the first keeps
  // recording ("this process records nothing" was false: a review).
  Options good = host_only(log.path);
  ASSERT_EQ(open(good), Status::kOk);
  testing::internal::CaptureStderr();
  EXPECT_EQ(open(good), Status::kErrState);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
  EXPECT_EQ(read_lines(log.path).size(), 2u);
  // The C API's own options, rejected before open(): said too (`"device_timing": "of"`).
  stepprof_recorder* rec = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(stepprof_open(log.path.c_str(), 0, 1, "{}", R"({"device_timing": "of"})", &rec), STEPPROF_ERR_ARGUMENT);
  const std::string c_said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c_said, "stepprof: open() failed, this process records nothing: " + std::string(stepprof_last_error()) + "\n");
}

TEST_F(RecorderTest, RejectsBadOptionsWithoutWriting) {
  TempLog log("reject");
  auto attempt = [&](Options o) {
    std::string message;
    const Status s = open(o, &message);
    EXPECT_FALSE(message.empty());
    return s;
  };
  Options o = host_only(log.path);
  // The C ABI's limits on the device options: C++ clamped 2^32 - 1 events to 2^24, took
  // 0, and took 2^20 x 4096 events with device timing off and open() ok.
  for (const std::uint32_t bad : {0u, (1u << 20) + 1, 0xFFFFFFFFu}) {
    Options d = o;
    d.device_events_per_thread = bad;
    std::string message;
    EXPECT_EQ(open(d, &message), Status::kErrArgument) << bad;
    EXPECT_NE(message.find("device_events_per_thread must be in [1, 1048576]"), std::string::npos) << message;
    d = o;
    d.device_threads = bad;
    EXPECT_EQ(attempt(d), Status::kErrArgument) << bad;
  }
  o.config_json = "[1, 2]";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config_json = R"({"rank": 1})";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  // An update's times in the config: the reader takes such a config for a mistyped update
  // record and rejects it, settings and all.
  for (const char* times : {R"({"wall_ms": 5, "micro_batch": 2})", R"({"cpu_call_ms": {}})", R"({"cuda_stream_ms": 1})"}) {
    SCOPED_TRACE(times);
    o.config_json = times;
    std::string message;
    EXPECT_EQ(open(o, &message), Status::kErrArgument);
    EXPECT_NE(message.find("is an update record's field"), std::string::npos) << message;
  }
  o.config_json = R"({"a": 1, "a": 2})";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config_json = "";
  o.config = {{"seed", "forty-two"}};
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config.clear();
  o.region_roles = {{"loader", "backgorund"}};  // a misspelt role would be ignored by the analyzer
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.region_roles.clear();
  o.config_json = R"({"region_roles": {"nccl": "comms"}})";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config_json = R"({"region_alternatives": {"a": 1}})";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  // Values the reader would reject or leave out: every analysis of the log exited 1, or
  // printed "global batch -2".
  for (const char* bad : {R"({"micro_batch": "8"})", R"({"micro_batch": 8.5})", R"({"micro_batch": -1})",
                          R"({"accumulation": 0})", R"({"model": 5})"}) {
    SCOPED_TRACE(bad);
    o.config_json = bad;
    std::string message;
    EXPECT_EQ(open(o, &message), Status::kErrArgument);
    EXPECT_NE(message.find("config field"), std::string::npos) << message;
    // (the reader's words, "it is not used", read as if only the field were dropped)
    EXPECT_EQ(message.rfind("the config is rejected, as the reader would reject it (this recorder is not opened): ", 0), 0u)
        << message;
  }
  o.config_json = "";
  // A region listed twice in Options: the config's JSON object kept the last one.
  o.region_roles = {{"x", "data"}, {"x", "optimizer"}};
  std::string twice;
  EXPECT_EQ(open(o, &twice), Status::kErrArgument);
  EXPECT_EQ(twice, "region_roles: region \"x\" is given twice");
  o.region_roles.clear();
  o.region_alternatives = {{"a", "g"}, {"b", "g"}, {"a", "h"}};
  EXPECT_EQ(open(o, &twice), Status::kErrArgument);
  EXPECT_EQ(twice, "region_alternatives: region \"a\" is given twice");
  o.region_alternatives.clear();
  // The same in config_json (the C ABI's only way): the value written back kept one.
  o.config_json = R"({"region_roles": {"x": "data", "x": "optimizer"}})";
  EXPECT_EQ(open(o, &twice), Status::kErrArgument);
  EXPECT_EQ(twice, "config_json: key \"x\" appears twice in an object of field \"region_roles\"");
  o.config_json = R"({"region_alternatives": {"a": "g", "b": "g", "a": "h"}, "data": {"k": [{"z": 1, "z": 2}]}})";
  EXPECT_EQ(open(o, &twice), Status::kErrArgument);
  EXPECT_EQ(twice, "config_json: key \"a\" appears twice in an object of field \"region_alternatives\"");
  o.config_json = R"({"m": {"k": 1}, "n": {"k": 2}})";  // the same key in two objects is fine
  ASSERT_EQ(open(o, &twice), Status::kOk) << twice;
  ASSERT_EQ(close(), Status::kOk);
  o.config_json = "";
  // A world size the reader would not use (above 2^20 ranks).
  o.world_size = (std::int64_t{1} << 20) + 1;
  EXPECT_EQ(open(o, &twice), Status::kErrArgument);
  EXPECT_NE(twice.find("world_size must be at most 1048576"), std::string::npos) << twice;
  o.world_size = 1;
  o.config_json = "{\"x\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config_json = "{\"x\": " + std::string(200000, '[') + std::string(200000, ']') + "}";  // (overflowed the stack)
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o.config_json = R"({"region_roles": {"nccl": "comm", "loader": "background"}})";  // accepted
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  o.config_json = "";
  o.rank = 4;
  o.world_size = 4;
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  EXPECT_FALSE(is_open());
  std::remove(log.path.c_str());  // written by the accepted open above
  EXPECT_EQ(read_text(log.path), "");  // nothing created
  EXPECT_EQ(end_update(0), Status::kErrState);
  std::string closing;
  EXPECT_EQ(close(&closing), Status::kErrState);
  EXPECT_EQ(closing, "stepprof: close(): no recorder is open");  // (it was left empty)

  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  EXPECT_EQ(attempt(host_only(log.path)), Status::kErrState);  // one recorder per process
  // A wrong argument is that error while another recorder is open too (Python made it an
  // already_open warning: fixed only after a first run).
  o = host_only(log.path);
  o.rank = 7;
  o.world_size = 2;
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  o = host_only(log.path);
  o.config_json = R"({"micro_batch": -1})";
  EXPECT_EQ(attempt(o), Status::kErrArgument);
  EXPECT_TRUE(is_open());
}

TEST_F(RecorderTest, RunIdDefaults) {
  TempLog log("runid");
  for (const char* v : {"STEPPROF_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) unsetenv(v);
  Options o = host_only(log.path);
  o.run_id.clear();
  o.world_size = 2;
  ASSERT_EQ(open(o), Status::kOk);  // several ranks, no shared id: none written
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_FALSE(read_lines(log.path)[0].contains("run_id"));

  setenv("TORCHELASTIC_RUN_ID", "elastic-7", 1);
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(read_lines(log.path)[0]["run_id"], "elastic-7");
  unsetenv("TORCHELASTIC_RUN_ID");

  o.world_size = 1;  // one process: a generated id
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const std::string id = read_lines(log.path)[0]["run_id"];
  EXPECT_NE(id.find("-" + std::to_string(getpid()) + "-"), std::string::npos) << id;
}

TEST_F(RecorderTest, RegionsBeforeOpenAreNotReportedAndReopenWorks) {
  TempLog log("reopen");
  { STEPPROF_REGION("r_before_open"); }
  STEPPROF_COUNT("r_counter_before_open", 3);
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  { STEPPROF_REGION("r_after_open"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["calls"], (Json{{"r_after_open", 1}}));
  EXPECT_FALSE(lines[1].contains("counts"));

  { STEPPROF_REGION("r_before_open"); }  // between sessions: not reported either
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  { STEPPROF_REGION("r_after_open"); }
  { STEPPROF_REGION("r_after_open"); }
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);  // truncated, not appended
  EXPECT_EQ(lines[1]["calls"], (Json{{"r_after_open", 2}}));
}

// begin_update() starts the update over: what was recorded since the last end_update
// (an evaluation between updates, on this thread and another) is dropped with its time.
// It used to restart the wall clock only, and the next record held a 30 ms evaluation
// region against a wall_ms of about 5 ms.
TEST_F(RecorderTest, BeginUpdateDropsWhatWasRecordedBeforeIt) {
  TempLog log("begin");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  { STEPPROF_REGION("b_train"); }
  ASSERT_EQ(end_update(1), Status::kOk);
  {
    STEPPROF_REGION("b_eval");
    STEPPROF_COUNT("b_eval_samples", 100);
    frame_histogram_add(4, 2);
    input_shape({2, 7});
    sample_indices(std::vector<std::int64_t>{11});
    std::thread([] { STEPPROF_REGION("b_eval_worker"); }).join();
    spin_ms(30);
  }
  const double t0 = now_ms();
  ASSERT_EQ(begin_update(), Status::kOk);
  {
    STEPPROF_REGION("b_train");
    STEPPROF_COUNT("b_samples", 8);
    spin_ms(5);
  }
  ASSERT_EQ(end_update(2), Status::kOk);
  const double measured = now_ms() - t0;
  ASSERT_EQ(close(), Status::kOk);  // nothing dropped is an error
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  const Json& u = lines[2];
  EXPECT_EQ(u["calls"], (Json{{"b_train", 1}}));
  EXPECT_EQ(u["counts"], (Json{{"b_samples", 8}}));
  for (const char* field : {"frame_histogram", "input_shapes", "sample_indices", "recorder_errors"})
    EXPECT_FALSE(u.contains(field)) << field;
  EXPECT_GE(u["cpu_call_ms"]["b_train"].get<double>(), 4.5);
  EXPECT_LE(u["wall_ms"].get<double>(), measured);
  EXPECT_LE(u["cpu_call_ms"]["b_train"].get<double>(), u["wall_ms"].get<double>());
}

// The log file deleted while recorded to (a /tmp cleaner, rm -r of the run directory):
// the recorder wrote on into the unlinked file, and close() returned kOk with every
// record in no file (found by a helper). It now makes the file (and its directory)
// again, the config record first, and counts log_deleted in the next record and at close().
TEST_F(RecorderTest, ALogDeletedWhileRecordedToIsMadeAgain) {
  const std::string dir = testing::TempDir() + "/stepprof-deleted-" + std::to_string(getpid());
  const std::string path = dir + "/rank0.jsonl";
  std::filesystem::remove_all(dir);
  Options o = host_only(path);
  o.print_warnings = false;
  o.config_json = R"({"micro_batch": 4})";
  ASSERT_EQ(open(o), Status::kOk);
  for (int step = 0; step < 3; ++step) ASSERT_EQ(end_update(step), Status::kOk);
  std::filesystem::remove_all(dir);
  { STEPPROF_REGION("after_delete"); }
  ASSERT_EQ(end_update(3), Status::kOk);
  ASSERT_EQ(end_update(4), Status::kOk);
  std::string message;
  ASSERT_EQ(close(&message), Status::kWarnErrors);
  EXPECT_NE(message.find("log_deleted 1"), std::string::npos) << message;
  EXPECT_NE(message.find("deleted while recorded to and made again: 4 record(s) written before are in no file"),
            std::string::npos)
      << message;
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["type"], "config");
  EXPECT_EQ(lines[0]["micro_batch"], 4);
  EXPECT_EQ(lines[1]["step"], 3);
  EXPECT_EQ(lines[1]["calls"], (Json{{"after_delete", 1}}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"log_deleted", 1}}));
  EXPECT_EQ(lines[2]["step"], 4);
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
  std::filesystem::remove_all(dir);
}

// The same, where the file cannot be made again (its directory replaced by a plain
// file): close() said the file was "made again" after the warning had said it could not.
TEST_F(RecorderTest, ALogDeletedThatCannotBeMadeAgainIsSaidSo) {
  const std::string dir = testing::TempDir() + "/stepprof-deleted-nodir-" + std::to_string(getpid());
  const std::string path = dir + "/rank0.jsonl";
  std::filesystem::remove_all(dir);
  Options o = host_only(path);
  o.print_warnings = false;
  ASSERT_EQ(open(o), Status::kOk);
  for (int step = 0; step < 2; ++step) ASSERT_EQ(end_update(step), Status::kOk);
  std::filesystem::remove_all(dir);
  { std::ofstream(dir) << "not a directory\n"; }
  ASSERT_EQ(end_update(2), Status::kWarnIo);  // (the record could not be written: counted)
  std::string message;
  ASSERT_EQ(close(&message), Status::kWarnErrors);
  EXPECT_NE(message.find("deleted while recorded to and could not be made again (later records: write_failed): 3 "
                         "record(s) written before are in no file"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("and made again"), std::string::npos) << message;
  EXPECT_NE(message.find("write_failed 1"), std::string::npos) << message;
  std::filesystem::remove(dir);
}

// A log path that leads to the deleted file itself (/dev/stdout, /proc/self/fd/N of a
// file that was then deleted): made "again" it is the same deleted file, and every later
// update counted log_deleted, wrote the config record again and said so (found by a
// reviewer). It is counted once, and the records go on into that file.
TEST_F(RecorderTest, ALogThatLeadsToTheDeletedFileIsCountedOnce) {
  TempLog file("deleted-fd");
  const int fd = ::open(file.path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  Options o = host_only("/proc/self/fd/" + std::to_string(fd));
  o.print_warnings = false;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(::unlink(file.path.c_str()), 0);
  for (int step = 1; step < 4; ++step) ASSERT_EQ(end_update(step), Status::kOk);
  std::string message;
  ASSERT_EQ(close(&message), Status::kWarnErrors);
  EXPECT_NE(message.find("log_deleted 1)"), std::string::npos) << message;
  EXPECT_NE(message.find("leads to a file deleted while recorded to"), std::string::npos) << message;
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  ASSERT_GT(n, 0);
  text.resize(static_cast<std::size_t>(n));
  std::size_t configs = 0, updates = 0;
  for (std::size_t at = 0; (at = text.find("\"type\":\"", at)) != std::string::npos; ++at)
    (text.compare(at + 8, 6, "config") == 0 ? configs : updates) += 1;
  EXPECT_EQ(configs, 1u) << text;
  EXPECT_EQ(updates, 4u) << text;
}

namespace {
// This process's descriptor open on `path`, or -1.
int descriptor_of(const std::string& path) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec) == std::filesystem::weakly_canonical(path))
      return std::stoi(e.path().filename().string());
  }
  return -1;
}
}  // namespace

// The program closes the log's descriptor (a daemonizing "close every descriptor" loop,
// a library that closes what it did not open) and the number is reused for a file of
// its own, here a checkpoint: the recorder wrote its next records into that file, each
// end_update() kOk and nothing counted (found by a helper). It now sees that the
// descriptor leads to another file, writes nothing more through it (nor closes it: it
// is the program's), and counts each record it could not write.
TEST_F(RecorderTest, ALogDescriptorReusedByTheProgramIsNotWrittenTo) {
  TempLog log("fd-reused");
  TempLog checkpoint("fd-reused-checkpoint");
  Options o = host_only(log.path);
  o.print_warnings = false;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  const int log_fd = descriptor_of(log.path);  // the recorder's
  ASSERT_GE(log_fd, 0);
  const int ckpt = ::open(checkpoint.path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(ckpt, 0);
  ASSERT_EQ(::dup2(ckpt, log_fd), log_fd);  // (closes the log's descriptor; the number now leads to the checkpoint)
  ::close(ckpt);
  EXPECT_EQ(end_update(1), Status::kWarnIo);
  EXPECT_EQ(end_update(2), Status::kWarnIo);
  expect_close_warns({"(write_failed 2)", "now leads to another file"});
  // The checkpoint got nothing, and the program's descriptor is still open.
  struct stat st {};
  EXPECT_EQ(::fstat(log_fd, &st), 0);
  EXPECT_EQ(st.st_size, 0);
  ::close(log_fd);
  EXPECT_EQ(read_lines(log.path).size(), 2u);  // the config and step 0
}

// The same after the last update, the usual order of a shutdown: close() closed the
// program's file (and released its lock), and flush() wrote to it (found by a reviewer).
TEST_F(RecorderTest, ALogDescriptorReusedAfterTheLastUpdateIsNotClosed) {
  TempLog log("fd-reused-close");
  TempLog checkpoint("fd-reused-close-checkpoint");
  Options o = host_only(log.path);
  o.print_warnings = false;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  const int log_fd = descriptor_of(log.path);
  ASSERT_GE(log_fd, 0);
  const int ckpt = ::open(checkpoint.path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(ckpt, 0);
  ASSERT_EQ(::dup2(ckpt, log_fd), log_fd);
  ::close(ckpt);
  EXPECT_EQ(stepprof::flush(), Status::kWarnIo);  // (nothing flushed: the file is not the log)
  std::string message;
  EXPECT_EQ(close(&message), Status::kOk) << message;  // (no record was lost)
  struct stat st {};
  EXPECT_EQ(::fstat(log_fd, &st), 0) << "close() closed the program's descriptor";
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(::write(log_fd, "x", 1), 1);
  ::close(log_fd);
  EXPECT_EQ(read_lines(log.path).size(), 2u);
}

TEST_F(RecorderTest, AppendKeepsEarlierRecords) {
  TempLog log("append");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  Options o = host_only(log.path);
  o.append = true;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3]["step"], 1);
}

// A job resumed (same run_id) without `append` truncates the log of its own run: every
// record before the restart is lost, and nothing said so. open() now gives a note (kOk).
TEST_F(RecorderTest, TruncatingALogOfTheSameRunGivesANote) {
  TempLog log("same-run");
  Options o = host_only(log.path);
  o.run_id = "job-17";
  o.print_warnings = false;
  std::string message;
  ASSERT_EQ(open(o, &message), Status::kOk);
  EXPECT_EQ(message, "");
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  ASSERT_EQ(open(o, &message), Status::kOk);  // the same run again, not appending
  EXPECT_NE(message.find("held records of this run (run_id \"job-17\"), and was truncated"), std::string::npos)
      << message;
  EXPECT_NE(message.find("append (Options::append; append=True in Python)"), std::string::npos) << message;
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(read_lines(log.path).size(), 1u);  // (truncated: the config alone)
  // With append, or another run's log: no note.
  o.append = true;
  ASSERT_EQ(open(o, &message), Status::kOk);
  EXPECT_EQ(message, "");
  ASSERT_EQ(close(), Status::kOk);
  o.append = false;
  o.run_id = "job-18";
  ASSERT_EQ(open(o, &message), Status::kOk);
  EXPECT_EQ(message, "");
  ASSERT_EQ(close(), Status::kOk);
  // With another warning (STEPPROF_CLOCK naming no clock), the message says both.
  ::setenv("STEPPROF_CLOCK", "bogus", 1);
  const Status with_clock = open(o, &message);
  ::unsetenv("STEPPROF_CLOCK");
  EXPECT_EQ(with_clock, Status::kWarnErrors);
  EXPECT_NE(message.find("STEPPROF_CLOCK=bogus"), std::string::npos) << message;
  EXPECT_NE(message.find("held records of this run (run_id \"job-18\"), and was truncated"), std::string::npos)
      << message;
  close();
  // Through the C API: the note is stepprof_last_error() of a STEPPROF_OK open.
  stepprof_recorder* rec = nullptr;
  ASSERT_EQ(stepprof_open(log.path.c_str(), 0, 1, nullptr, R"({"run_id": "job-18", "print_warnings": false})", &rec),
            STEPPROF_OK);
  EXPECT_NE(std::string(stepprof_last_error()).find("held records of this run"), std::string::npos);
  ASSERT_EQ(stepprof_close(rec), STEPPROF_OK);
}

// A job killed mid-record and resumed with `append`: the cut line is ended before the
// first new record, so the new records are lines of their own and the reader loses only
// the record that was in flight.
TEST_F(RecorderTest, AppendAfterACutRecordStartsOnANewLine) {
  TempLog log("append-cut");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  {
    std::ofstream cut(log.path, std::ios::app);
    cut << R"({"type":"update","rank":0,"step":1,"wall_ms":1)";  // no newline: the kill
  }
  Options o = host_only(log.path);
  o.append = true;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(2), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(lines[2].is_string());  // the cut record, alone on its line
  EXPECT_EQ(lines[3]["type"], "config");
  EXPECT_EQ(lines[4]["step"], 2);
}

// Another process recording to the same file (here: another open of it holding the lock,
// as a second recorder's would): open() neither truncates nor writes it, and says why.
TEST_F(RecorderTest, AFileAnotherProcessRecordsToIsLeftAlone) {
  TempLog log("locked");
  {
    std::ofstream earlier(log.path);
    earlier << "{\"type\":\"config\",\"schema\":1}\n";
  }
  const int holder = ::open(log.path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX | LOCK_NB), 0);
  std::string message;
  EXPECT_EQ(open(host_only(log.path), &message), Status::kWarnIo);
  EXPECT_NE(message.find("another process is recording to this file"), std::string::npos) << message;
  ASSERT_EQ(end_update(0), Status::kWarnIo);
  close();
  ::close(holder);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["schema"], 1);
  // Once the other process is gone (its lock with it), the file is the recorder's.
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(read_lines(log.path).size(), 2u);
}

// Dimensions, indices and micro-batch counts above 2^53 are not exact in a record: the
// reader rejected the whole record (its regions and counters lost, with no error said).
// They are not recorded, and counted; the record stays readable.
TEST_F(RecorderTest, ValuesARecordCannotHoldAreCountedNotWritten) {
  TempLog log("huge");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  constexpr std::int64_t kOver = (std::int64_t{1} << 53) + 1;
  { STEPPROF_REGION("huge_region"); }
  input_shape({INT64_MAX, 3});
  input_shape({2, kOver});
  const std::int64_t idx[] = {1, kOver};
  sample_indices(idx);
  const std::int64_t frames[] = {kOver}, tokens[] = {10};
  EXPECT_EQ(microbatch(frames, tokens), Status::kErrArgument);
  input_shape({2, std::int64_t{1} << 53});  // 2^53 itself is exact: recorded
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["input_shapes"], (Json{{"(2, 9007199254740992)", 1}}));
  EXPECT_FALSE(lines[1].contains("sample_indices"));
  EXPECT_EQ(lines[1]["recorder_errors"]["bad_argument"], 4);
  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.count(Severity::kError), 0u);  // (a warning says the recorder counted errors)
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_EQ(d.ranks[0].updates.size(), 1u);
  EXPECT_TRUE(d.regions.find("huge_region"));
}

// A launcher that opens the recorder and then forks its ranks: each child's updates
// record nothing (the recorder and its log are the parent's), and only the return codes,
// which the examples ignore, said so (a helper). The child's first end_update() says it
// once on stderr.
TEST_F(RecorderTest, EndUpdateInAForkChildIsSaidOnce) {
  TempLog log("fork-said");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  int err[2];
  ASSERT_EQ(::pipe(err), 0);
  std::fflush(stderr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(err[1], 2);
    ::close(err[0]);
    ::close(err[1]);
    bool state = end_update(1) == Status::kErrState && end_update(2) == Status::kErrState;
    std::fflush(stderr);
    // A child's child says it once too (it kept no word of the first: a review).
    const pid_t grandchild = ::fork();
    if (grandchild == 0) ::_exit(end_update(3) == Status::kErrState ? 0 : 1);
    int gs = 0;
    ::waitpid(grandchild, &gs, 0);
    state = state && WIFEXITED(gs) && WEXITSTATUS(gs) == 0;
    std::fflush(stderr);
    ::_exit(state ? 0 : 1);
  }
  ::close(err[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
  ::close(err[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string self = std::to_string(::getpid());
  // (The grandchild's line comes after the child's: it says its own parent, the child.)
  const auto second = said.find("stepprof: end_update() in process ", 1);
  ASSERT_NE(second, std::string::npos) << said;
  EXPECT_NE(said.find(", a fork() child of process " + std::to_string(child) + ", records nothing: the recorder and its "
                      "log are process " + self + "'s", second),
            std::string::npos)
      << said;
  said.resize(second);
  EXPECT_EQ(said, "stepprof: end_update() in process " + std::to_string(child) + ", a fork() child of process " + self +
                      ", records nothing: the recorder and its log are process " + self + "'s, open when it forked; "
                      "open a recorder in this process (a log of its own) to record here\n");
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
}

// A fork() child (a persistent DataLoader worker) outlives the parent's close(): its copy
// of the file held the lock, and the parent's next open() of its own log was refused.
TEST_F(RecorderTest, AForkedChildDoesNotKeepTheLogLocked) {
  TempLog log("fork-lock");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // (the fork handlers have run when fork() returns here)
    const char c = 1;
    (void)!::write(ready[1], &c, 1);
    ::sleep(30);  // (killed below)
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(close(), Status::kOk);
  Options o = host_only(log.path);
  o.append = true;
  std::string message;
  EXPECT_EQ(open(o, &message), Status::kOk) << message;
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(read_lines(log.path).size(), 4u);  // config, 0, config, 1
}

// A fork() child that ends with exit() (a DataLoader worker) runs LeakSanitizer's check
// in an ASan build of the job: what its copy of the recorder lets go of was reported as a
// leak, and the worker exited 1. (Only an ASan build can fail this.)
TEST_F(RecorderTest, AForkedChildThatExitsLeaksNothing) {
  TempLog log("fork-exit");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) std::exit(0);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(close(), Status::kOk);
}

// The child's fork handler (which closes its copy of the log) may run after the parent's
// close(): the lock then outlived close(), and reopening the log at once was refused in
// about a third of runs (the session's records lost). A raw clone, which runs no fork
// handler, holds its copy for sure.
TEST_F(RecorderTest, ALogIsUnlockedAtCloseEvenWhileAForkedChildHoldsItsCopy) {
  TempLog log("fork-lock-race");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  const long child = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);  // (no fork handlers run)
  ASSERT_GE(child, 0);
  if (child == 0) {
    const timespec t{30, 0};
    ::syscall(SYS_nanosleep, &t, nullptr);  // (killed below)
    ::syscall(SYS_exit_group, 0);
  }
  ASSERT_EQ(close(), Status::kOk);
  Options o = host_only(log.path);
  o.append = true;
  std::string message;
  EXPECT_EQ(open(o, &message), Status::kOk) << message;
  EXPECT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
  ::kill(static_cast<pid_t>(child), SIGKILL);
  ::waitpid(static_cast<pid_t>(child), nullptr, 0);
  EXPECT_EQ(read_lines(log.path).size(), 4u);  // config, 0, config, 1
}

// An empty path was taken, and warned about as a file that cannot be opened.
TEST_F(RecorderTest, AnEmptyPathIsABadArgument) {
  std::string message;
  EXPECT_EQ(open(host_only(""), &message), Status::kErrArgument);
  EXPECT_NE(message.find("the log path is empty"), std::string::npos) << message;
  EXPECT_EQ(end_update(0), Status::kErrState);  // (nothing was opened)
}

// A FIFO that no process reads blocked open() forever.
TEST_F(RecorderTest, AFifoWithoutAReaderIsAnErrorNotAHang) {
  TempLog log("fifo");
  ASSERT_EQ(::mkfifo(log.path.c_str(), 0600), 0);
  std::string message;
  EXPECT_EQ(open(host_only(log.path), &message), Status::kWarnIo);
  EXPECT_NE(message.find("FIFO (named pipe) that no process reads"), std::string::npos) << message;
  EXPECT_EQ(end_update(0), Status::kWarnIo);
  close();
}

// A config line over 1 MiB (60,000 shard paths) was not read back: the resumed run got a
// new generated run_id, and the reader skipped its records as another run's.
TEST_F(RecorderTest, AppendKeepsTheRunIdOfAConfigLineOverOneMebibyte) {
  TempLog log("append-big");
  for (const char* v : {"STEPPROF_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) unsetenv(v);
  Options o = host_only(log.path);
  o.run_id = "first-run";  // (as if generated by the killed process)
  o.config = {{"shards", "\"" + std::string(1500000, 's') + "\""}};
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  o.run_id.clear();  // generated: replaced by the log's
  o.append = true;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2]["run_id"], "first-run");
}

TEST_F(RecorderTest, StepprofReaderReadsWhatTheRecorderWrote) {
  TempLog log("reader");
  Options o = host_only(log.path);
  o.config_json = R"({"micro_batch": 2, "accumulation": 1})";
  o.region_alternatives = {{"rr_batched", "geometry"}, {"rr_single", "geometry"}};
  o.region_roles = {{"rr_fetch", "data"}};
  ASSERT_EQ(open(o), Status::kOk);
  for (int step = 10; step < 13; ++step) {
    { STEPPROF_REGION("rr_fetch"); }
    {
      STEPPROF_REGION("rr_micro");
      if (step % 2) {
        STEPPROF_REGION("rr_batched");
      } else {
        STEPPROF_REGION("rr_single");
      }
    }
    STEPPROF_COUNT("samples", 2);
    ASSERT_EQ(end_update(step), Status::kOk);
  }
  ASSERT_EQ(close(), Status::kOk);

  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.total(), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  const auto& cfg = *d.ranks[0].config;
  EXPECT_EQ(cfg.schema, 1);
  EXPECT_EQ(cfg.run_id, "test-run");
  EXPECT_EQ(cfg.clock, std::string(clock_name()));
  EXPECT_EQ(cfg.device_timing, "off: disabled by the recorder options");
  EXPECT_EQ(cfg.micro_batch, 2);
  ASSERT_EQ(d.ranks[0].updates.size(), 3u);
  const auto batched = d.regions.find("rr_batched");
  ASSERT_TRUE(batched);
  EXPECT_EQ(d.ranks[0].updates[0].region(*batched), nullptr);  // step 10 is even: absent
  ASSERT_NE(d.ranks[0].updates[1].region(*batched), nullptr);
  EXPECT_EQ(d.ranks[0].updates[1].region(*batched)->calls, 1);

  const auto h = hierarchy_from_log(d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(diag.total(), 0u);
  ASSERT_NE(h->find("rr_batched"), nullptr);
  EXPECT_EQ(h->find("rr_batched")->parent, "rr_micro");
  EXPECT_EQ(h->find("rr_batched")->alt_group, "geometry");
  EXPECT_EQ(h->find("rr_fetch")->role, RegionRole::kData);
  EXPECT_EQ(h->find("rr_micro")->parent, "");
}

// ---- Errors: counted, reported in the next record and at close, never thrown. ----

TEST_F(RecorderTest, FailedWritesAreCountedAndReportedInTheNextRecord) {
  auto sink = std::make_shared<ScriptedSink>();
  sink->fail = {2, 3};  // write 1 is the config record; updates 0 and 1 fail
  Options o = host_only("scripted");
  o.sink = sink;
  ASSERT_EQ(open(o), Status::kOk);
  EXPECT_EQ(end_update(0), Status::kWarnIo);
  EXPECT_EQ(end_update(1), Status::kWarnIo);
  EXPECT_EQ(end_update(2), Status::kOk);
  EXPECT_EQ(end_update(3), Status::kOk);
  std::vector<std::pair<std::string, std::int64_t>> counts;
  ASSERT_EQ(error_counts(counts), Status::kOk);
  EXPECT_EQ(counts, (std::vector<std::pair<std::string, std::int64_t>>{{"write_failed", 2}}));
  expect_close_warns({"write_failed 2", "No space left on device"});

  std::vector<Json> lines;
  for (std::size_t pos = 0, nl; (nl = sink->text.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(Json::parse(sink->text.substr(pos, nl - pos)));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"write_failed", 2}}));
  EXPECT_EQ(lines[2]["step"], 3);
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

// A full disk at open(): the config record was never written again, so the log had no
// config (the reader's missing-config) although the disk had room again one update later.
TEST_F(RecorderTest, AConfigRecordWhoseWriteFailedIsWrittenWithTheNextUpdate) {
  auto sink = std::make_shared<ScriptedSink>();
  sink->fail = {1, 2};  // the config record, then update 0 (with the config in front) fail
  Options o = host_only("config-retry");
  o.sink = sink;
  o.rank = 3;
  o.world_size = 4;
  EXPECT_EQ(open(o), Status::kWarnIo);
  EXPECT_EQ(end_update(0), Status::kWarnIo);
  EXPECT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(end_update(2), Status::kOk);
  // One record was lost (update 0); the config record was written late, not lost.
  std::vector<std::pair<std::string, std::int64_t>> counts;
  ASSERT_EQ(error_counts(counts), Status::kOk);
  EXPECT_EQ(counts, (std::vector<std::pair<std::string, std::int64_t>>{{"write_failed", 1}}));
  expect_close_warns({"(write_failed 1); 3 record(s) written"});

  std::vector<Json> lines;
  for (std::size_t pos = 0, nl; (nl = sink->text.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(Json::parse(sink->text.substr(pos, nl - pos)));
  ASSERT_EQ(lines.size(), 3u);  // the config once, then updates 1 and 2
  EXPECT_EQ(lines[0]["type"], "config");
  EXPECT_EQ(lines[0]["rank"], 3);
  EXPECT_EQ(lines[1]["step"], 1);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"write_failed", 1}}));
  EXPECT_EQ(lines[2]["step"], 2);

  TempLog log("config-retry");
  std::ofstream(log.path, std::ios::binary) << sink->text;
  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.count(Problem::kMissingConfig), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].rank, 3);
  EXPECT_EQ(d.ranks[0].updates.size(), 2u);
}

// The config record cut short at open(), then written whole with the next update: the
// reader finds the cut line and the config after it, and no record is said to be lost.
TEST_F(RecorderTest, AConfigRecordCutShortAtOpenIsWrittenWholeAfterIt) {
  auto sink = std::make_shared<ScriptedSink>();
  sink->fail = {1};
  sink->partial = 15;  // `{"type":"confi`
  Options o = host_only("config-cut");
  o.sink = sink;
  o.rank = 1;
  o.world_size = 4;
  EXPECT_EQ(open(o), Status::kWarnIo);
  EXPECT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);  // nothing was lost
  EXPECT_EQ(sink->text.substr(0, 16), std::string(R"({"type":"config)") + "\n");

  TempLog log("config-cut");
  std::ofstream(log.path, std::ios::binary) << sink->text;
  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.count(Problem::kMissingConfig), 0u);
  // Line 1, the cut config, followed by the whole one: a warning, not an error.
  EXPECT_EQ(diag.count(Problem::kMalformedJson), 0u);
  EXPECT_EQ(diag.count(Problem::kTruncatedLine), 1u);
  EXPECT_EQ(diag.count(Severity::kError), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  EXPECT_EQ(d.ranks[0].rank, 1);
  ASSERT_EQ(d.ranks[0].updates.size(), 2u);
  EXPECT_TRUE(d.ranks[0].updates[0].recorder_errors.empty());
  EXPECT_EQ(diag.count(Problem::kRecorderErrors), 0u);
}

TEST_F(RecorderTest, PartialWriteIsTerminatedSoLaterRecordsRead) {
  auto sink = std::make_shared<ScriptedSink>();
  sink->fail = {3};
  sink->partial = 20;  // update 1 is cut after 20 bytes
  Options o = host_only("partial");
  o.sink = sink;
  ASSERT_EQ(open(o), Status::kOk);
  EXPECT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(end_update(1), Status::kWarnIo);
  EXPECT_EQ(end_update(2), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);

  TempLog log("partial");
  std::ofstream(log.path, std::ios::binary) << sink->text;
  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.count(Problem::kMalformedJson), 1u);  // the cut record, line 3
  EXPECT_EQ(diag.count(Problem::kRecorderErrors), 1u);  // update 2 says a write failed
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_EQ(d.ranks[0].updates.size(), 2u);
  EXPECT_EQ(d.ranks[0].updates[1].step, 2);
  EXPECT_EQ(d.ranks[0].updates[1].recorder_errors,
            (std::vector<std::pair<std::string, std::int64_t>>{{"write_failed", 1}}));
}

// A log written to a pipe (a log shipper on stdout, `/dev/stdout | tee`) whose reader
// exits: the write raised SIGPIPE, whose default action ended the training job.
TEST_F(RecorderTest, APipeWhoseReaderExitedIsAWriteErrorNotASignal) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const auto before = std::signal(SIGPIPE, SIG_DFL);  // (the default: the process ends)
  Options o = host_only("/proc/self/fd/" + std::to_string(fds[1]));
  ASSERT_EQ(open(o), Status::kOk);
  ::close(fds[0]);  // the reader goes away
  for (int step = 0; step < 5; ++step) {
    { STEPPROF_REGION("pipe_work"); }
    EXPECT_EQ(end_update(step), Status::kWarnIo);
  }
  expect_close_warns({"write_failed 5", "Broken pipe"});
  std::signal(SIGPIPE, before);
  ::close(fds[1]);
}

// A pipe's reader that stops reading: end_update blocked in write(2) once the pipe's
// buffer was full, and the training job with it. Now records wait in a bounded queue,
// those beyond it are counted as failed writes, and close() gives the reader a second
// to take what waits. Every line that arrives is whole.
TEST_F(RecorderTest, AStalledPipeReaderNeverBlocksTheJob) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Options o = host_only("/proc/self/fd/" + std::to_string(fds[1]));
  std::atomic<bool> done{false};
  std::thread watchdog([&] {  // a hang fails the test instead of timing it out
    for (int i = 0; i < 600 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done) {
      std::fprintf(stderr, "end_update blocked on a full pipe\n");
      std::_Exit(1);
    }
  });
  ASSERT_EQ(open(o), Status::kOk);
  constexpr int kUpdates = 20'000;  // (about 5 MB of records: beyond the 64 KB pipe and the 1 MiB queue)
  int failed = 0;
  for (int step = 0; step < kUpdates; ++step) {
    { STEPPROF_REGION("stall_work"); }
    stepprof::sample_indices(std::vector<std::int64_t>(16, step));
    if (end_update(step) != Status::kOk) ++failed;
  }
  done = true;
  watchdog.join();
  EXPECT_GT(failed, 0);
  // The reader catches up while close() waits.
  std::string text;
  std::thread reader([&] {
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  });
  std::string message;
  const Status closed = close(&message);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  std::size_t lines = 0;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1, ++lines)
    EXPECT_TRUE(Json::accept(text.substr(pos, nl - pos))) << "line " << lines + 1;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  // Every update is either a line that arrived or a failed write, counted.
  EXPECT_EQ(closed, Status::kWarnErrors);
  EXPECT_NE(message.find("write_failed " + std::to_string(kUpdates + 1 - lines)), std::string::npos)
      << message << " (" << lines << " lines arrived)";
}

// A record too big for a stalled pipe's queue is cut (the pipe took its first 64 KB), and
// the next records wait in the queue, where close() leaves them: the newline that ends
// the cut line, queued in front of the next record, was counted as one more lost record
// ("write_failed 5" for 4 lost updates, "0 record(s) written" though the config record
// arrived), and info() counted the queued records as written.
TEST_F(RecorderTest, ACutRecordInAStalledPipeIsCountedOnce) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(open(host_only("/proc/self/fd/" + std::to_string(fds[1]))), Status::kOk);
  stepprof::sample_indices(std::vector<std::int64_t>(300'000, 123456));  // (2.4 MB: beyond the 1 MiB queue)
  EXPECT_EQ(end_update(0), Status::kWarnIo);
  for (int step = 1; step <= 3; ++step) {
    STEPPROF_COUNT("n", 1);
    EXPECT_EQ(end_update(step), Status::kOk);  // (queued)
  }
  RecorderInfo info_now;
  ASSERT_EQ(stepprof::info(info_now), Status::kOk);
  EXPECT_EQ(info_now.records_written, 1);  // the config record; steps 1..3 wait
  std::string message;
  EXPECT_EQ(close(&message), Status::kWarnErrors);  // (no one reads: the queue is given up after 1 s)
  ::close(fds[1]);
  std::string text;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  // What arrived: the config record whole, then the cut start of step 0's.
  const std::size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_TRUE(Json::accept(text.substr(0, nl)));
  EXPECT_EQ(text.find('\n', nl + 1), std::string::npos);
  EXPECT_GT(text.size(), nl + 1);
  EXPECT_NE(message.find("(write_failed 4)"), std::string::npos) << message;
  EXPECT_NE(message.find("; 1 record(s) written"), std::string::npos) << message;
}

// A pipe shared with the job's own prints (a log shipper on stdout) and a reader that
// falls behind: records that waited were written as one block, which the pipe took in
// part, and the job's next print landed inside a record (599 of 2,000 records lost in a
// fresh user's run, none counted). Records now go one write each, which a pipe takes
// whole (up to PIPE_BUF bytes), so every line that arrives is a whole record or a print.
TEST_F(RecorderTest, PrintsIntoTheLogsPipeNeverLandInsideARecord) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string text;
  std::thread reader([&] {  // a slow reader: 4 KiB at a time, 1 ms apart
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
      text.append(buf, static_cast<std::size_t>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ASSERT_EQ(open(host_only("/proc/self/fd/" + std::to_string(fds[1]))), Status::kOk);
  constexpr int kUpdates = 1'500;
  for (int step = 0; step < kUpdates; ++step) {
    for (int r = 0; r < 20; ++r) {
      const auto id = region_id("layer." + std::to_string(r) + ".mlp");
      region_enter(id);
      region_exit(id);
    }
    const std::string print = "step " + std::to_string(step) + " loss 0.5\n";  // (one write: whole)
    (void)!::write(fds[1], print.data(), print.size());
    (void)end_update(step);
  }
  std::string message;
  (void)close(&message);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  std::size_t records = 0, prints = 0, line = 0;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string_view l = std::string_view(text).substr(pos, nl - pos);
    ++line;
    if (l.starts_with("step ")) {
      ++prints;
      EXPECT_TRUE(l.ends_with(" loss 0.5")) << "line " << line << ": " << l.substr(0, 80);
    } else {
      ++records;
      EXPECT_TRUE(Json::accept(l)) << "line " << line << ": " << l.substr(0, 80);
    }
  }
  EXPECT_EQ(prints, static_cast<std::size_t>(kUpdates));
  EXPECT_GT(records, 1u);
  // Records that did not arrive are counted (the queue is bounded).
  const std::size_t updates_arrived = records - 1;  // (the config)
  if (updates_arrived < static_cast<std::size_t>(kUpdates)) {
    EXPECT_NE(message.find("write_failed " + std::to_string(kUpdates - updates_arrived)), std::string::npos)
        << message << " (" << updates_arrived << " updates arrived)";
  }
}

// An id region_id() never returned: region_enter() took it as the unrecorded region of
// names past the limit, but region_exit() of the same id did not find it open, so the
// level stayed open for good (open_at_end_update at every update after).
TEST_F(RecorderTest, AnIdNeverRegisteredIsEnteredAndExitedAlike) {
  TempLog log("unregistered-id");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const RegionId bogus = 0xFFFFFFF0u;
  for (int step = 0; step < 3; ++step) {
    region_enter(bogus);
    EXPECT_EQ(region_exit(bogus), Status::kOk);
    EXPECT_EQ(end_update(step), Status::kOk);
  }
  std::string message;
  EXPECT_EQ(close(&message), Status::kOk) << message;
}

// A path with a NUL in it opened the part before the NUL, with status ok; and the
// message of a failed open() stayed in `message` after a later open() that succeeded.
TEST_F(RecorderTest, APathWithANulIsRefusedAndASuccessfulOpenLeavesNoMessage) {
  TempLog log("nul-path");
  std::string message;
  EXPECT_EQ(open(host_only(log.path + std::string("\0b.jsonl", 8)), &message), Status::kErrArgument);
  EXPECT_NE(message.find("NUL"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(log.path));
  EXPECT_EQ(open(host_only(log.path), &message), Status::kOk);
  EXPECT_EQ(message, "");
  EXPECT_EQ(close(), Status::kOk);
}

TEST_F(RecorderTest, DiskFullNeverThrowsAndIsReportedAtClose) {
  Options o = host_only("/dev/full");  // every write fails with ENOSPC
  std::string message;
  EXPECT_EQ(open(o, &message), Status::kWarnIo);
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
  for (int step = 0; step < 3; ++step) {
    { STEPPROF_REGION("full_work"); }
    EXPECT_EQ(end_update(step), Status::kWarnIo);
  }
  expect_close_warns({"write_failed 4", "0 record(s) written"});  // config + 3 updates
}

// A C or C++ job past its file size limit (`ulimit -f`, RLIMIT_FSIZE): the write raised
// SIGXFSZ, whose default action ended the training job (Python ignores SIGXFSZ, so only
// native jobs died). Run in a child, whose limit and signal disposition are its own.
TEST_F(RecorderTest, AFileSizeLimitIsAWriteErrorNotASignal) {
  TempLog log("fsize");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_DFL);  // (the default: the process ends)
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
    if (open(host_only(log.path)) != Status::kOk) ::_exit(4);
    for (int step = 0; step < 50; ++step) {
      { STEPPROF_REGION("fsize_work"); }
      (void)end_update(step);
    }
    std::string message;
    const Status closed = close(&message);
    // Exit 0 only when the failed writes were counted and named.
    ::_exit(closed == Status::kWarnErrors && message.find("write_failed") != std::string::npos &&
                    message.find("File too large") != std::string::npos
                ? 0
                : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // What was written before the limit is whole lines, but for the record cut at the
  // limit (the last line, as a killed job leaves it).
  const auto lines = read_lines(log.path);
  ASSERT_GE(lines.size(), 2u);
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) EXPECT_TRUE(lines[i].is_object()) << lines[i].dump();
  EXPECT_LE(std::filesystem::file_size(log.path), 4096u);
}

// Two ranks of one run sharing the job's stdout file as their log (/dev/stdout, `(rank0;
// rank1) > out.txt`): the second found the first's records of its run there and said the
// file "was truncated" (a helper); the file is never truncated, and keeps both.
TEST_F(RecorderTest, AStdoutFileWithThisRunsRecordsIsNotSaidTruncated) {
  TempLog out("stdout-shared");
  std::fflush(stdout);
  const int saved = ::dup(1);
  ASSERT_GE(saved, 0);
  const int file = ::open(out.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::dup2(file, 1), 1);
  ::close(file);
  std::string first, second;
  Status opened[2] = {Status::kErrState, Status::kErrState};
  for (int rank = 0; rank < 2; ++rank) {
    Options o = host_only("/dev/stdout");
    o.run_id = "job8";
    o.rank = rank;
    o.world_size = 2;
    o.print_warnings = false;
    opened[rank] = open(o, rank == 0 ? &first : &second);
    (void)end_update(1);
    (void)close();
  }
  ::dup2(saved, 1);
  ::close(saved);
  EXPECT_EQ(opened[0], Status::kOk);
  EXPECT_EQ(opened[1], Status::kOk);
  EXPECT_EQ(first, "");
  EXPECT_EQ(second, "");
  EXPECT_EQ(read_lines(out.path).size(), 4u);  // both configs and updates
}

// A log given as /dev/stdout while the job's stdout is a file opened without O_APPEND
// (`python train.py > out.txt`): the log had a file offset of its own, and each print
// of the job overwrote the records before it. The records now go through stdout's own
// descriptor, so records and prints follow one another.
TEST_F(RecorderTest, ALogOnTheJobsStdoutFileIsNotOverwrittenByItsPrints) {
  TempLog out("stdout-file");
  std::fflush(stdout);
  const int saved = ::dup(1);
  ASSERT_GE(saved, 0);
  const int file = ::open(out.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);  // `>`, not `>>`
  ASSERT_GE(file, 0);
  ASSERT_EQ(::dup2(file, 1), 1);
  ::close(file);
  const Status opened = open(host_only("/dev/stdout"));
  for (int step = 0; step < 5 && opened == Status::kOk; ++step) {
    { STEPPROF_REGION("stdout_work"); }
    const std::string print = "step " + std::to_string(step) + " loss 0.5\n";
    (void)!::write(1, print.data(), print.size());
    (void)end_update(step);
  }
  const Status closed = close();
  ::dup2(saved, 1);
  ::close(saved);
  ASSERT_EQ(opened, Status::kOk);
  EXPECT_EQ(closed, Status::kOk);
  const auto lines = read_lines(out.path);
  ASSERT_EQ(lines.size(), 11u);  // config, then each update after its print
  auto field = [&](std::size_t i, const char* key) { return lines[i].is_object() ? lines[i].value(key, Json()) : Json(); };
  EXPECT_EQ(field(0, "type"), "config") << lines[0].dump();
  for (int step = 0; step < 5; ++step) {
    EXPECT_EQ(lines[1 + 2 * step], Json("step " + std::to_string(step) + " loss 0.5"));  // (a line that is not JSON)
    EXPECT_EQ(field(2 + 2 * step, "step"), step) << lines[2 + 2 * step].dump();
  }
}

TEST_F(RecorderTest, UnwritablePathKeepsRecordingAndSaysSoAtClose) {
  // A "directory" that is a regular file: the log cannot be created under it.
  TempLog file("not-a-dir");
  std::ofstream(file.path) << "x\n";
  Options o = host_only(file.path + "/rank{rank}.jsonl");
  std::string message;
  EXPECT_EQ(open(o, &message), Status::kWarnIo);
  EXPECT_NE(message.find("cannot open the log " + file.path + "/rank0.jsonl"), std::string::npos) << message;
  EXPECT_TRUE(is_open());
  { STEPPROF_REGION("unwritable_work"); }
  EXPECT_EQ(end_update(0), Status::kWarnIo);
  expect_close_warns({"open_failed 1", "write_failed 2", "Not a directory"});
}

TEST_F(RecorderTest, MissingLogDirectoriesAreCreated) {
  const std::string dir = testing::TempDir() + "/stepprof-newdir-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(open(host_only(dir + "/logs/rank{rank}.jsonl")), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(read_lines(dir + "/logs/rank0.jsonl").size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST_F(RecorderTest, ALogDirectoryThatCannotBeMadeIsNamedAsSuch) {
  // /proc refuses new directories (ENOENT, for root too). The message said only "No such
  // file or directory" (or "Permission denied" elsewhere), as if the file were the
  // problem (found by a helper); it now names the directory that could not be made.
  const std::string dir = "/proc/stepprof-no-such-dir-" + std::to_string(getpid());
  std::string message;
  EXPECT_EQ(open(host_only(dir + "/logs/rank{rank}.jsonl"), &message), Status::kWarnIo);
  EXPECT_NE(message.find("cannot open the log " + dir + "/logs/rank0.jsonl: its directory " + dir +
                         "/logs does not exist and could not be created: " + std::strerror(ENOENT)),
            std::string::npos)
      << message;
  expect_close_warns({"its directory " + dir + "/logs does not exist and could not be created"});
}

TEST_F(RecorderTest, APathsControlCharactersAreEscapedInMessages) {
  // The log path went to stderr as given: a newline in it forged a line of the job's
  // output, an escape sequence reached the terminal. Now \xNN, as the analyzer writes
  // names; the path itself is used as given.
  const std::string dir = "/proc/stepprof-\n\x1b[2Jforged-" + std::to_string(getpid());
  const std::string shown = "/proc/stepprof-\\x0a\\x1b[2Jforged-" + std::to_string(getpid());
  std::string message;
  EXPECT_EQ(open(host_only(dir + "/rank{rank}.jsonl"), &message), Status::kWarnIo);
  EXPECT_NE(message.find("cannot open the log " + shown + "/rank0.jsonl: its directory " + shown + " does not exist"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  expect_close_warns({"while recording to " + shown + "/rank0.jsonl", "its directory " + shown + " does not exist"});
}

TEST_F(RecorderTest, CountsBelowZeroOrBeyondADoublesIntegersAreLeftOutAndCounted) {
  TempLog log("badcount");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const CounterId ok = counter_id("bc_ok"), neg = counter_id("bc_negative"), big = counter_id("bc_big");
  const CounterId one_bad = counter_id("bc_one_bad");
  count(ok, 5);
  count(neg, -1);                            // ignored: bc_negative stays absent
  // One add above 2^53 is no count: it alone is ignored. (It made the update's sum
  // unrecordable, and the valid 8 was lost with it.)
  count(one_bad, 8);
  count(one_bad, (std::int64_t{1} << 53) + 1);
  count(big, (std::int64_t{1} << 53) - 1);   // 2^53 - 1 + 2 > 2^53: left out
  count(big, 2);
  ASSERT_EQ(end_update(0), Status::kOk);
  count(big, std::int64_t{1} << 53);  // exactly 2^53: kept
  frame_histogram_add(9, std::int64_t{1} << 62);
  frame_histogram_add(9, std::int64_t{1} << 62);  // past 2^53 (and, summed, past int64): left out
  frame_histogram_add(3, 2);
  // A bucket holds at most 2^32 samples (the reader's bound for one batch): the recorder
  // wrote 2^32 + 1, and the reader then skipped the whole update record.
  frame_histogram_add(5, std::int64_t{1} << 32);
  frame_histogram_add(5, 1);                          // past 2^32: left out
  frame_histogram_add(7, (std::int64_t{1} << 32) + 1);  // likewise
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);  // it says so at close
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["counts"], (Json{{"bc_ok", 5}, {"bc_one_bad", 8}}));
  EXPECT_EQ(lines[2]["counts"], (Json{{"bc_big", std::int64_t{1} << 53}}));
  EXPECT_TRUE(lines[2]["counts"]["bc_big"].is_number_integer());  // written 9007199254740992, not 9.007e+15
  EXPECT_EQ(lines[2]["frame_histogram"], (Json{{"3", 2}, {"5", std::int64_t{1} << 32}}));
  // The three were counted before the first record was written, which reports them; the
  // four histogram adds before the second.
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 3}}));
  EXPECT_EQ(lines[2]["recorder_errors"], (Json{{"bad_argument", 4}}));
  Diagnostics diag;  // and the reader takes both records
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(d.update_count(), 2u);
}

TEST_F(RecorderTest, AppendingToTheLogOfAnEarlierProcessKeepsItsGeneratedRunId) {
  TempLog log("append-runid");
  for (const char* v : {"STEPPROF_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) unsetenv(v);
  Options o = host_only(log.path);
  o.run_id.clear();
  // The earlier process: its generated id is in the file.
  std::ofstream(log.path) << R"({"type":"config","schema":1,"run_id":"host-1-2","rank":0,"world_size":1})" << "\n"
                          << R"({"type":"update","step":0,"wall_ms":1})" << "\n";
  o.append = true;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2]["run_id"], "host-1-2");
  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(d.update_count(), 2u);
  EXPECT_EQ(diag.count(Problem::kMixedRuns), 0u);
}

TEST_F(RecorderTest, DepthOverflowAndMismatchedExitsAreCounted) {
  TempLog log("depth");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const RegionId deep = region_id("d_deep");
  for (int i = 0; i < 70; ++i) region_enter(deep);  // 64 recorded levels, 6 past the limit
  for (int i = 0; i < 70; ++i) EXPECT_EQ(region_exit(deep), Status::kOk);
  const RegionId a = region_id("d_a"), b = region_id("d_b"), never = region_id("d_never_entered");
  region_enter(a);
  region_enter(b);
  EXPECT_EQ(region_exit(a), Status::kWarnMismatch);      // closes b unrecorded, then a
  EXPECT_EQ(region_exit(never), Status::kWarnMismatch);  // nothing open with that id, ignored
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["calls"], (Json{{"d_deep", 64}, {"d_a", 1}}));
  EXPECT_EQ(lines[1]["parents"]["d_deep"], nullptr);  // the outermost call exits last
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"depth_overflow", 6}, {"mismatched_exit", 2}}));
}

TEST_F(RecorderTest, DataRecordedAfterTheLastUpdateIsCountedAtClose) {
  // Each kind of per-update data, recorded after the last end_update(), is not written:
  // close() counts it once and says so; with nothing after the last update it is kOk.
  using namespace stepprof::recording;
  const std::vector<std::pair<std::string, std::function<void()>>> kinds = {
      {"region", [] { STEPPROF_REGION("after_last_update"); }},
      {"counter", [] { count(counter_id("after_last_update_count"), 0); }},
      {"histogram", [] { frame_histogram_add(3, 1); }},
      {"shape", [] { input_shape({2, 5}); }},
      {"indices", [] { const std::int64_t i[] = {7}; sample_indices(i); }},
      {"padding", [] { set_padding_fraction(0.25); }},
      {"microbatch", [] { const std::int64_t f[] = {1}; microbatch(f, {}); }},
  };
  for (const auto& [what, record] : kinds) {
    TempLog log("unwritten-" + what);
    ASSERT_EQ(open(host_only(log.path)), Status::kOk);
    { STEPPROF_REGION("written_work"); }
    ASSERT_EQ(end_update(0), Status::kOk);
    record();
    expect_close_warns({"unwritten_at_close 1", "after the last end_update() was not written"}, what);
    EXPECT_EQ(read_lines(log.path).size(), 2u) << what;  // the config and update 0

    ASSERT_EQ(open(host_only(log.path)), Status::kOk);  // the next session starts clean
    record();
    ASSERT_EQ(end_update(0), Status::kOk);
    std::string message;
    EXPECT_EQ(close(&message), Status::kOk) << what << ": " << message;
  }
}

// A data-loader thread's region (role "background") that ends after the last update made
// every run with such a thread end in a warning (unwritten_at_close), which teaches users to
// ignore it. Roles given in Options and in the config's region_roles are both seen.
TEST_F(RecorderTest, ABackgroundRegionEndingAfterTheLastUpdateIsNotCountedAtClose) {
  for (const bool in_config : {false, true}) {
    TempLog log(in_config ? "bg-config" : "bg-options");
    Options o = host_only(log.path);
    if (in_config) o.config_json = R"({"region_roles": {"loader": "background", "fwd": "communication"}})";
    else o.region_roles = {{"loader", "background"}};
    ASSERT_EQ(open(o), Status::kOk);
    { STEPPROF_REGION("fwd"); }
    ASSERT_EQ(end_update(0), Status::kOk);
    std::thread([] {  // after the last update, with a region nested in it (background too)
      STEPPROF_REGION("loader");
      STEPPROF_REGION("decode");
    }).join();
    std::string message;
    EXPECT_EQ(close(&message), Status::kOk) << message;
    // Any other region after the last update still is.
    ASSERT_EQ(open(o), Status::kOk);
    ASSERT_EQ(end_update(0), Status::kOk);
    std::thread([] {
      { STEPPROF_REGION("loader"); }
      STEPPROF_REGION("not_background");
    }).join();
    expect_close_warns({"unwritten_at_close 1"});
  }
}

// end_update() inside a region of its own thread (the loop body's region around it): each
// record held the previous update's region, and nothing said so.
TEST_F(RecorderTest, EndUpdateInsideARegionIsCounted) {
  TempLog log("open-at-end-update");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  for (std::int64_t step = 0; step < 3; ++step) {
    STEPPROF_REGION("train_step");
    end_update(step);  // (kOk: the error is counted, and reported in this record)
  }
  ASSERT_EQ(end_update(3), Status::kOk);  // outside: not counted
  expect_close_warns({"open_at_end_update 3", "end_update() was called inside a region 3 time(s)"});
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 5u);
  for (std::size_t i = 1; i <= 3; ++i) EXPECT_EQ(lines[i]["recorder_errors"], (Json{{"open_at_end_update", 1}}));
  EXPECT_FALSE(lines[4].contains("recorder_errors"));
  EXPECT_FALSE(lines[1].contains("calls"));  // the first record has none: it ended inside the region
  EXPECT_EQ(lines[2]["calls"]["train_step"], 1);
}

// begin_update() inside a region of its own thread: the region kept its time from before
// the restart, the record held it against a wall_ms without it (a helper's 26.5 ms region
// in a 3.1 ms update), and nothing was counted or said.
TEST_F(RecorderTest, BeginUpdateInsideARegionIsCounted) {
  TempLog log("open-at-begin-update");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  {
    STEPPROF_REGION("outer");
    EXPECT_EQ(begin_update(), Status::kOk);  // (the error is counted, and reported in the next record)
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(begin_update(), Status::kOk);  // outside: not counted
  ASSERT_EQ(end_update(1), Status::kOk);
  expect_close_warns({"open_at_begin_update 1", "begin_update() was called inside a region 1 time(s)"});
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"open_at_begin_update", 1}}));
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

// Per-update data past Options::max_update_data_bytes: a loop that appends sample
// indices without ever calling end_update() grew the job's memory without bound. Past
// the limit a call records nothing and is counted; the next update has the whole limit
// again. Here 1,050 bytes: 100 indices (800), a micro-batch of 10 frames (64 + 80) and a
// histogram bucket (64) fit, 13 more indices (104) and a second bucket do not, a frame
// count already bucketed does, and an add refused for its count takes no room.
TEST_F(RecorderTest, PerUpdateDataPastItsLimitIsCountedAndNotRecorded) {
  TempLog log("update-data-full");
  Options o = host_only(log.path);
  o.max_update_data_bytes = 1050;
  ASSERT_EQ(open(o), Status::kOk);
  std::vector<std::int64_t> indices(100);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<std::int64_t>(i);
  sample_indices(indices);
  const std::vector<std::int64_t> frames(10, 3);
  EXPECT_EQ(microbatch(frames, {}, {}, -1), Status::kOk);
  frame_histogram_add(7, std::int64_t{1} << 33);  // refused (bad_argument): holds nothing, so counts nothing
  frame_histogram_add(3, 10);
  sample_indices(std::span(indices).first(13));    // 1,008 + 104: past it
  frame_histogram_add(4, 1);                        // a new bucket: past it
  EXPECT_EQ(microbatch(frames, {}, {}, -1), Status::kErrNoMemory);
  frame_histogram_add(3, 1);  // (the same bucket: nothing more to hold)
  ASSERT_EQ(end_update(0), Status::kOk);
  sample_indices(indices);  // the next update: the whole limit again
  ASSERT_EQ(end_update(1), Status::kOk);
  close();
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["sample_indices"].size(), 100u);
  EXPECT_EQ(lines[1]["microbatches"].size(), 1u);
  EXPECT_EQ(lines[1]["frame_histogram"], (Json{{"3", 11}}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 1}, {"update_data_full", 3}}));
  EXPECT_EQ(lines[2]["sample_indices"].size(), 100u);
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

namespace {
// A SIGTERM-style handler that closes the recorder, and a sink that delivers the signal to
// its own thread while end_update() writes (inside the recorder, holding its lock).
volatile std::sig_atomic_t g_handler_status = 99;
std::string g_handler_message;
void close_in_handler(int) {
  g_handler_status = static_cast<int>(close(&g_handler_message));
}
class SignallingSink final : public LineSink {
 public:
  int write(std::string_view bytes, std::size_t& written) noexcept override {
    if (++calls == 2) std::raise(SIGUSR1);  // (the first write is the config record)
    written = bytes.size();
    return 0;
  }
  int calls = 0;
};
}  // namespace

// A signal handler that calls close() while its thread is inside end_update(): it waited
// for itself forever (a helper's job hung in close()'s lock, and a later SIGTERM could
// not end it). It returns kErrState now, and the recorder goes on. Run in a child, with
// an alarm: the bug hung the process.
TEST_F(RecorderTest, ACloseFromASignalHandlerInsideTheRecorderReturnsInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(10);
        std::signal(SIGUSR1, close_in_handler);
        Options o = host_only("");
        o.sink = std::make_shared<SignallingSink>();
        if (open(o) != Status::kOk) std::_Exit(2);
        { STEPPROF_REGION("work"); }
        const Status s = end_update(0);
        const bool said = g_handler_message.find("inside the recorder (from a signal handler?)") != std::string::npos;
        const bool ok = s == Status::kOk && g_handler_status == static_cast<int>(Status::kErrState) && said &&
                        close() == Status::kOk;
        std::_Exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(RecorderTest, ACounterSumThatWrapsAroundInt64IsLeftOutAndCounted) {
  TempLog log("wrapcount");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const CounterId wrap = counter_id("wc_wrap"), ok = counter_id("wc_ok");
  for (int i = 0; i < 2048; ++i) count(wrap, std::int64_t{1} << 53);  // 2^11 * 2^53 = 2^64: wraps to 0
  count(ok, 7);
  ASSERT_EQ(end_update(0), Status::kOk);
  count(wrap, 3);  // the next update starts afresh
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["counts"], (Json{{"wc_ok", 7}}));  // not {"wc_wrap": 0}
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 1}}));
  EXPECT_EQ(lines[2]["counts"], (Json{{"wc_wrap", 3}}));
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

TEST_F(RecorderTest, NamesThatAreNotUtf8AreOneKeyAsWrittenAndCounted) {
  // "a\xff" and "a\xfe" were both written as "a" U+FFFD: one update held the same key
  // twice, and the reader rejected every record ("region listed twice").
  TempLog log("utf8names");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::string replaced = "u8_bad\xEF\xBF\xBD";  // U+FFFD, as a valid name
  for (int step = 0; step < 2; ++step) {
    { Region r(region_id("u8_bad\xFF")); }
    { Region r(region_id("u8_bad\xFE")); }
    { Region r(region_id(replaced.c_str())); }
    count(counter_id("u8_count\xFF"), 2);
    count(counter_id("u8_count\xFE"), 3);
    ASSERT_EQ(end_update(step), Status::kOk);
  }
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["calls"], (Json{{replaced, 3}}));
  EXPECT_EQ(lines[1]["counts"], (Json{{"u8_count\xEF\xBF\xBD", 5}}));
  // Each lookup of a bad name is counted: four per update here.
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 4}}));
  EXPECT_EQ(lines[2]["recorder_errors"], (Json{{"bad_argument", 4}}));

  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(d.update_count(), 2u);
  EXPECT_EQ(diag.count(Problem::kBadField), 0u);
}

TEST_F(RecorderTest, NamesAndIndicesTheReaderWouldRejectAreNotRecorded) {
  // An empty or 1025-byte region or counter name, or a negative sample index, made
  // records the reader rejects whole: every update holding one was lost at analysis.
  TempLog log("rejectable");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::string longest(1024, 'n'), too_long(1025, 'n');
  { Region r(region_id("")); }
  { Region r(region_id(too_long)); }
  { Region r(region_id(longest)); }
  // 1023 bytes and a bad byte: written with U+FFFD (3 bytes) it would be 1026.
  { Region r(region_id(std::string(1023, 'u') + "\xff")); }
  count(counter_id(""), 1);
  count(counter_id(too_long), 1);
  const std::vector<std::int64_t> bad{3, -1}, good{4, 5};
  sample_indices(bad);
  sample_indices(good);
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["calls"], (Json{{longest, 1}}));
  EXPECT_FALSE(lines[1].contains("counts"));
  EXPECT_EQ(lines[1]["sample_indices"], (Json{4, 5}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 7}}));  // (the bad byte, then the length)

  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(d.update_count(), 1u);
  EXPECT_EQ(diag.count(Severity::kError), 0u);
}

TEST_F(RecorderTest, CloseInsideARegionIsCounted) {
  // close() inside `with region:` left the region's time unwritten without a word.
  TempLog log("close-inside");
  Options o = host_only(log.path);
  o.print_warnings = false;
  ASSERT_EQ(open(o), Status::kOk);
  ASSERT_EQ(end_update(0), Status::kOk);
  std::string message;
  Status closed = Status::kOk;
  {
    STEPPROF_REGION("ci_outer");
    closed = close(&message);
  }
  EXPECT_EQ(closed, Status::kWarnErrors);
  EXPECT_NE(message.find("unwritten_at_close 1"), std::string::npos) << message;
  EXPECT_NE(message.find("regions were still open on the closing thread"), std::string::npos) << message;
  // Outside a region, after end_update: nothing counted.
  ASSERT_EQ(open(o), Status::kOk);
  { STEPPROF_REGION("ci_outer"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
}

TEST_F(RecorderTest, AnUnknownClockInTheEnvironmentIsCounted) {
  // STEPPROF_CLOCK=bogus was ignored without a word.
  TempLog log("clock-env");
  ::setenv("STEPPROF_CLOCK", "bogus", 1);
  Options o = host_only(log.path);
  o.print_warnings = false;
  std::string message;
  const Status opened = open(o, &message);
  ::unsetenv("STEPPROF_CLOCK");
  // Said by open() itself (a caller that prints nothing, the Python package, had no word
  // of it until close()).
  ASSERT_EQ(opened, Status::kWarnErrors);
  EXPECT_NE(message.find("STEPPROF_CLOCK=bogus is not a clock stepprof knows"), std::string::npos) << message;
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 1}}));
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
  // The names it knows are not counted.
  for (const char* known : {"tsc", "steady_clock", ""}) {  // (set but empty, STEPPROF_CLOCK= : unset)
    ::setenv("STEPPROF_CLOCK", known, 1);
    ASSERT_EQ(open(o), Status::kOk);
    ::unsetenv("STEPPROF_CLOCK");
    ASSERT_EQ(end_update(0), Status::kOk);
    EXPECT_EQ(close(), Status::kOk) << known;
  }
}

TEST_F(RecorderTest, AStepNotAboveEveryEarlierOneOrBelowZeroIsCounted) {
  // end_update(5), (5), (3), (-1) were taken without a word; the report then found
  // duplicate steps. A step is judged against the highest before it: after 7 and -2, a
  // 5 (written already) went uncounted when only the previous step (-2) was compared.
  TempLog log("steps");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  // A step below 0 was written too, with the errors it carried, and the reader rejected
  // that record and them with it: now it does nothing (kErrArgument), the update goes on,
  // and the error goes in the next record.
  const std::vector<std::int64_t> given{4, 5, 5, 3, 6, -1, 7, -2, 5, 8};
  std::vector<Status> returned;
  for (const std::int64_t step : given) {
    if (step < 0) count(counter_id("dropped_with_it"), 1);
    returned.push_back(end_update(step));
  }
  const Status ok = Status::kOk, bad = Status::kErrArgument;
  EXPECT_EQ(returned, (std::vector<Status>{ok, ok, ok, ok, ok, bad, ok, bad, ok, ok}));
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  std::vector<std::int64_t> steps;
  std::vector<std::int64_t> counted;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    steps.push_back(lines[i]["step"].get<std::int64_t>());
    const Json& e = lines[i].contains("recorder_errors") ? lines[i]["recorder_errors"] : Json::object();
    counted.push_back(e.value("bad_argument", std::int64_t{0}));
    // (What was recorded before a negative step went on into the next record.)
    const bool after_negative = i == 6 || i == 7;  // the records of steps 7 and (the second) 5
    EXPECT_EQ(lines[i].contains("counts"), after_negative) << lines[i].dump();
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{4, 5, 5, 3, 6, 7, 5, 8}));
  EXPECT_EQ(counted, (std::vector<std::int64_t>{0, 0, 1, 1, 0, 1, 2, 0}));
}

TEST_F(RecorderTest, AScopedRegionLeftUnbalancedIsCountedNotDoubleCounted) {
  TempLog log("scoped-mismatch");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const RegionId inner = region_id("sm_inner"), closed = region_id("sm_closed_early");
  {
    STEPPROF_REGION("sm_outer");
    region_enter(inner);  // never exited: dropped when sm_outer ends
  }
  {
    Region r(closed);
    region_exit(closed);  // closes it; the destructor must not record it again
  }
  {
    STEPPROF_REGION("sm_fine");  // balanced use still works afterwards, at depth 0
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["calls"], (Json{{"sm_closed_early", 1}, {"sm_outer", 1}, {"sm_fine", 1}}));  // in id order
  EXPECT_EQ(lines[1]["parents"]["sm_fine"], nullptr);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"mismatched_exit", 2}}));
}

TEST_F(RecorderTest, AThreadThatExitsWithARegionOpenIsCounted) {
  TempLog log("thread-exit-open");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  std::thread([] { region_enter(region_id("te_left_open")); }).join();
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[1].contains("calls"));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"mismatched_exit", 1}}));
}

// fork() while another thread holds a recorder lock used to leave that lock held forever
// in the child (a PyTorch DataLoader worker, a subprocess launcher). The child must not
// block and must not write into the parent's log.
TEST_F(RecorderTest, AForkedChildNeitherBlocksNorWritesTheParentsLog) {
  TempLog log("fork");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // takes every lock of the recorder, over and over
    const std::vector<std::int64_t> idx{1, 2, 3}, dims{8, 512};
    for (std::int64_t k = 0; !stop.load(); ++k) {
      {
        STEPPROF_REGION("fk_busy");
        sample_indices(idx);
        input_shape(dims);
        STEPPROF_COUNT("fk_items", 1);
      }
      if (k % 64 == 63) end_update(k / 64);  // (outside the region: inside, it is an error)
    }
  });
  int blocked = 0, wrong = 0;
  for (int i = 0; i < 40; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      alarm(2);  // a child that blocks is killed by SIGALRM
      const std::vector<std::int64_t> idx{7};
      sample_indices(idx);
      { STEPPROF_REGION("fk_child"); }
      const bool closed = end_update(1'000'000'000 + i) == Status::kErrState;  // the child's copy is closed
      _exit(closed ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) ++blocked;
    else if (WEXITSTATUS(status) != 0) ++wrong;
  }
  stop = true;
  busy.join();
  EXPECT_EQ(blocked, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(end_update(999'999'999), Status::kOk);  // writes what the busy thread recorded last
  EXPECT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_GE(lines.size(), 1u);
  std::int64_t last = -1;
  for (std::size_t k = 1; k < lines.size(); ++k) {  // only the parent's updates, each once
    const std::int64_t step = lines[k]["step"].get<std::int64_t>();
    EXPECT_GT(step, last);
    EXPECT_LT(step, 1'000'000'000);
    last = step;
  }
}

// A fork() child inherited the forking thread's open regions: a recorder it opened gave
// the child's regions the parent's region as their parent and counted open_at_end_update
// and unwritten_at_close. The child's stack starts empty, and the exits of the regions
// entered in the parent (with region_exit or a scoped Region) are not errors there.
TEST_F(RecorderTest, AForkChildStartsWithAnEmptyRegionStack) {
  TempLog log("fork-stack"), child_log("fork-stack-child");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const RegionId outer = region_id("fs_outer"), inner = region_id("fs_inner");
  pid_t pid = -1;
  region_enter(outer);
  {
    STEPPROF_REGION("fs_scoped");
    region_enter(inner);
    pid = fork();
    if (pid == 0) {  // the child: reports through its exit status only
      alarm(10);
      if (open(host_only(child_log.path)) != Status::kOk) _exit(2);
      { STEPPROF_REGION("fs_child_work"); }
      if (end_update(1) != Status::kOk) _exit(3);
      if (region_exit(inner) != Status::kOk) _exit(4);  // entered in the parent
    } else {
      region_exit(inner);
    }
  }  // fs_scoped ends, in the child too
  if (pid == 0) {
    if (region_exit(outer) != Status::kOk) _exit(5);
    { STEPPROF_REGION("fs_child_work"); }
    if (end_update(2) != Status::kOk) _exit(6);
    _exit(close() == Status::kOk ? 0 : 7);  // kWarnErrors: errors were counted
  }
  ASSERT_GT(pid, 0) << std::strerror(errno);
  region_exit(outer);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kOk);
  const auto parent = read_lines(log.path);
  ASSERT_EQ(parent.size(), 2u);
  EXPECT_EQ(parent[1]["parents"], (Json{{"fs_outer", nullptr}, {"fs_inner", "fs_scoped"}, {"fs_scoped", "fs_outer"}}));
  const auto child = read_lines(child_log.path);
  ASSERT_EQ(child.size(), 3u);
  for (std::size_t k = 1; k < child.size(); ++k) {
    EXPECT_EQ(child[k]["parents"], (Json{{"fs_child_work", nullptr}})) << child[k].dump();
    EXPECT_FALSE(child[k].contains("recorder_errors")) << child[k].dump();
  }
}

TEST_F(RecorderTest, InputShapeMacroTakesAnyIntegerType) {
  TempLog log("shape-types");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::vector<int> batch(8);
  const unsigned short len = 3154;
  STEPPROF_INPUT_SHAPE(batch.size(), len);  // size_t and unsigned short: no cast needed
  STEPPROF_INPUT_SHAPE(std::int64_t{8}, 3154);
  STEPPROF_INPUT_SHAPE(std::uint64_t{1} << 63, 2);  // beyond int64: rejected like a negative
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["input_shapes"], (Json{{"(8, 3154)", 2}}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 1}}));
}

TEST_F(RecorderTest, PerMicroBatchDetail) {
  TempLog log("microbatches");
  ASSERT_EQ(open(host_only(log.path)), Status::kOk);
  const std::vector<std::int64_t> f1{9, 9}, t1{120, 101}, f2{3, 9}, t2{40, 90};
  EXPECT_EQ(microbatch(f1, t1, "vggt_batched", 128), Status::kOk);
  EXPECT_EQ(microbatch(f2, t2, "vggt_single"), Status::kOk);
  EXPECT_EQ(microbatch(f2, {}, {}), Status::kOk);                        // frames only, no path
  EXPECT_EQ(microbatch(f1, t2, "x", 50), Status::kErrArgument);          // 90 tokens > 50
  EXPECT_EQ(microbatch(std::vector<std::int64_t>{-1}, {}), Status::kErrArgument);
  EXPECT_EQ(microbatch(f1, std::vector<std::int64_t>{1}), Status::kErrArgument);  // lengths differ
  // A path that cannot be a region name (over 1024 bytes): stored without it, and said so
  // (it returned kOk, the path gone; found by a helper).
  EXPECT_EQ(microbatch({}, t2, std::string(2000, 'p')), Status::kWarnErrors);
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);  // no detail: the field is absent
  ASSERT_EQ(close(), Status::kWarnErrors);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["microbatches"],
            Json::parse(R"([{"path": "vggt_batched", "frames": [9, 9], "tokens": [120, 101], "padded_length": 128},
                            {"path": "vggt_single", "frames": [3, 9], "tokens": [40, 90]}, {"frames": [3, 9]},
                            {"tokens": [40, 90]}])"));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"bad_argument", 4}}));
  EXPECT_FALSE(lines[2].contains("microbatches"));

  Diagnostics diag;
  const Dataset d = read_logs({log.path}, {}, diag);
  EXPECT_EQ(diag.count(Severity::kError), 0u);
  const auto& mbs = d.ranks.at(0).updates.at(0).microbatches;
  ASSERT_EQ(mbs.size(), 4u);
  EXPECT_EQ(d.regions.name(*mbs[1].path), "vggt_single");
  EXPECT_EQ(mbs[1].tokens, t2);
  // A path name is not a region of the update unless the region ran.
  EXPECT_FALSE(d.ranks[0].updates[0].region(*mbs[0].path));
}
