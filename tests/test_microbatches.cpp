// The per-micro-batch detail of the step log (`microbatches`, docs/log-schema.md):
// read into the log model, written back by the record writer, old logs unaffected, and
// every malformed form rejected with the field named. Expected values are the ones
// written in each test's input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "stepprof/reader.hpp"
#include "stepprof/record_writer.hpp"

namespace fs = std::filesystem;
using namespace stepprof;

namespace {

const std::string kConfig = R"({"type": "config", "rank": 0, "world_size": 1, "micro_batch": 2, "accumulation": 2})";

std::string update(int step, const std::string& microbatches) {
  return R"({"type": "update", "rank": 0, "step": )" + std::to_string(step) +
         R"(, "wall_ms": 10.0, "cpu_call_ms": {"vggt_batched": 1.0, "vggt_single": 1.0}, "counts": {"samples": 4}, )"
         R"("microbatches": )" +
         microbatches + "}";
}

class MicroBatchTest : public ::testing::Test {
 protected:
  Dataset read_text(const std::string& text) {
    const fs::path p = fs::path(testing::TempDir()) /
                       (std::string("stepprof_mb_") + testing::UnitTest::GetInstance()->current_test_info()->name() +
                        ".jsonl");
    std::ofstream(p, std::ios::binary) << text;
    diag_ = Diagnostics();
    Dataset d = read_logs({p.string()}, {}, diag_);
    fs::remove(p);
    return d;
  }
  const Diagnostic* first(Problem p) const {
    for (const auto& d : diag_.kept())
      if (d.problem == p) return &d;
    return nullptr;
  }
  Diagnostics diag_;
};

}  // namespace

TEST_F(MicroBatchTest, ReadsEveryField) {
  const Dataset d = read_text(
      kConfig + "\n" +
      update(1, R"([{"path": "vggt_batched", "frames": [9, 9], "tokens": [120, 101], "padded_length": 128},)"
                R"( {"path": "vggt_single", "frames": [3, 9], "tokens": [40, 90]}])") +
      "\n");
  ASSERT_EQ(diag_.total(), 0u);
  ASSERT_EQ(d.ranks.size(), 1u);
  const auto& mbs = d.ranks[0].updates.at(0).microbatches;
  ASSERT_EQ(mbs.size(), 2u);
  ASSERT_TRUE(mbs[0].path);
  EXPECT_EQ(d.regions.name(*mbs[0].path), "vggt_batched");
  EXPECT_EQ(mbs[0].frames, (std::vector<std::int64_t>{9, 9}));
  EXPECT_EQ(mbs[0].tokens, (std::vector<std::int64_t>{120, 101}));
  EXPECT_EQ(mbs[0].padded_length, 128);
  EXPECT_EQ(mbs[0].samples(), 2u);
  ASSERT_TRUE(mbs[1].path);
  EXPECT_EQ(d.regions.name(*mbs[1].path), "vggt_single");  // interned with the regions
  EXPECT_FALSE(mbs[1].padded_length);
}

// Each file is read with its own name tables and merged into the dataset's: a micro-batch's
// path is a region id, so it must name the same region after the merge. Rank 0 meets
// `fast` first, rank 1 meets `slow` first (and a region that is only a path).
TEST_F(MicroBatchTest, PathsNameTheirRegionAfterFilesAreMerged) {
  const fs::path dir = fs::path(testing::TempDir()) / "stepprof_mb_merge";
  fs::create_directories(dir);
  auto rank = [](int r, const std::string& first, const std::string& second) {
    const std::string rs = std::to_string(r);
    std::string text = R"({"type": "config", "rank": )" + rs + R"(, "world_size": 2})" "\n";
    for (int step = 1; step <= 3; ++step)
      text += R"({"type": "update", "rank": )" + rs + R"(, "step": )" + std::to_string(step) +
              R"(, "wall_ms": 10.0, "cpu_call_ms": {")" + first + R"(": 1.0, ")" + second +
              R"(": 2.0}, "microbatches": [{"path": ")" + first + R"(", "frames": [1]}, {"path": ")" + second +
              R"(", "frames": [3]}, {"path": "only_a_path_)" + rs + R"(", "frames": [5]}]})" "\n";
    return text;
  };
  std::ofstream(dir / "rank0.jsonl", std::ios::binary) << rank(0, "fast", "slow");
  std::ofstream(dir / "rank1.jsonl", std::ios::binary) << rank(1, "slow", "fast");
  for (const unsigned threads : {1u, 2u}) {
    ReadOptions opt;
    opt.threads = threads;
    Diagnostics diag;
    const Dataset d = read_logs({(dir / "rank0.jsonl").string(), (dir / "rank1.jsonl").string()}, opt, diag);
    ASSERT_EQ(d.ranks.size(), 2u);
    for (const auto& r : d.ranks)
      for (const auto& u : r.updates) {
        ASSERT_EQ(u.microbatches.size(), 3u);
        const std::string first = *r.rank == 0 ? "fast" : "slow", second = *r.rank == 0 ? "slow" : "fast";
        EXPECT_EQ(d.regions.name(*u.microbatches[0].path), first) << "rank " << *r.rank << ", threads " << threads;
        EXPECT_EQ(d.regions.name(*u.microbatches[1].path), second);
        EXPECT_EQ(d.regions.name(*u.microbatches[2].path), "only_a_path_" + std::to_string(*r.rank));
      }
  }
  fs::remove_all(dir);
}

TEST_F(MicroBatchTest, EveryKeyIsOptional) {
  const Dataset d = read_text(kConfig + "\n" + update(1, R"([{"frames": [4]}, {"tokens": [7, 8, 9]}, {}])") + "\n");
  ASSERT_EQ(diag_.total(), 0u);
  const auto& mbs = d.ranks[0].updates.at(0).microbatches;
  ASSERT_EQ(mbs.size(), 3u);
  EXPECT_FALSE(mbs[0].path);
  EXPECT_EQ(mbs[0].samples(), 1u);
  EXPECT_TRUE(mbs[0].tokens.empty());
  EXPECT_EQ(mbs[1].samples(), 3u);
  EXPECT_EQ(mbs[2].samples(), 0u);
}

TEST_F(MicroBatchTest, OldLogsHaveNoDetail) {
  Diagnostics diag;
  const Dataset d = read_logs({std::string(STEPPROF_SOURCE_DIR) + "/examples/qwen-vggt/rank1.jsonl"}, {}, diag);
  ASSERT_EQ(diag.total(), 0u);
  for (const auto& u : d.ranks.at(0).updates) EXPECT_TRUE(u.microbatches.empty());
}

TEST_F(MicroBatchTest, MalformedDetailIsRejectedWithTheFieldNamed) {
  struct Case {
    std::string detail, message;
  };
  const Case cases[] = {
      {R"({"frames": [1]})", "microbatches: expected an array"},
      {R"([5])", "microbatches[0]: expected an object"},
      {R"([{"frames": [9, -1]}])", "microbatches[0].frames[1]: negative count"},
      {R"([{"frames": [9, 9], "tokens": [5]}])", "2 frame counts but 1 token counts"},
      {R"([{"tokens": [5, 200], "padded_length": 100}])", "more than padded_length 100"},
      {R"([{"path": 3}])", "microbatches[0].path: expected a region name"},
      {R"([{}, {"ms": 3}])", "microbatches[1]: unknown key \"ms\""},
      {R"([{" path": "a"}])", "microbatches[0]: unknown key \" path\""},  // (its space was dropped)
      {R"([{"frames": "9"}])", "microbatches[0].frames: expected an array"},
      {R"([{"frames": [1.5]}])", "expected an integer"},
  };
  for (const auto& c : cases) {
    const Dataset d = read_text(kConfig + "\n" + update(1, c.detail) + "\n" + update(2, "[]") + "\n");
    const Diagnostic* e = first(Problem::kBadField);
    if (!e) e = first(Problem::kNegativeTime);
    ASSERT_NE(e, nullptr) << c.detail;
    EXPECT_EQ(e->line, 2u) << c.detail;
    EXPECT_NE(e->message.find(c.message), std::string::npos) << c.detail << " -> " << e->message;
    ASSERT_EQ(d.ranks.size(), 1u);
    ASSERT_EQ(d.ranks[0].updates.size(), 1u) << c.detail;  // the bad record is skipped, the next is read
    EXPECT_EQ(d.ranks[0].updates[0].step, 2);
  }
}

TEST_F(MicroBatchTest, WriterRoundTrips) {
  NameTable regions, counters;
  UpdateRecord u;
  u.rank = 0;
  u.step = 3;
  u.wall_ms = 5.0;
  MicroBatch a;
  a.path = regions.intern("vggt_single");
  a.frames = {3, 9};
  a.tokens = {40, 90};
  a.padded_length = 96;
  MicroBatch b;
  b.frames = {2};
  u.microbatches = {a, b};
  RegionSample ran;  // (the path's region, as a recorder times it: a path that is none is warned of)
  ran.region = *a.path;
  ran.host_ms = 1.5;
  u.regions.push_back(ran);
  const std::string line = update_to_json(u, regions, counters);
  EXPECT_EQ(line, R"({"type":"update","rank":0,"step":3,"wall_ms":5.0,"cpu_call_ms":{"vggt_single":1.5},)"
                  R"("microbatches":[{"path":"vggt_single",)"
                  R"("frames":[3,9],"tokens":[40,90],"padded_length":96},{"frames":[2]}]})");
  const Dataset d = read_text(kConfig + "\n" + line + "\n");
  ASSERT_EQ(diag_.total(), 0u);
  const auto& mbs = d.ranks.at(0).updates.at(0).microbatches;
  ASSERT_EQ(mbs.size(), 2u);
  EXPECT_EQ(d.regions.name(*mbs[0].path), "vggt_single");
  EXPECT_EQ(mbs[0].frames, a.frames);
  EXPECT_EQ(mbs[0].tokens, a.tokens);
  EXPECT_EQ(mbs[0].padded_length, 96);
  EXPECT_EQ(mbs[1].frames, b.frames);
  EXPECT_FALSE(mbs[1].path);
}

// Token counts from the detail: where every micro-batch lists its samples' tokens and the
// record counts neither token_slots nor valid_tokens, the reader adds them (slots: the
// padded length, else the longest sample's tokens, times the samples), so that the
// padding figures and `whatif no-padding` need no counters besides the detail. A record
// that counts them keeps its own; one with a micro-batch without tokens gets none.
TEST_F(MicroBatchTest, TokenCountersComeFromTheDetailWhereTheRecordHasNone) {
  const Dataset d = read_text(
      kConfig + "\n" + update(1, R"([{"tokens": [10, 20], "padded_length": 40}, {"tokens": [30, 25]}])") + "\n" +
      update(2, R"([{"tokens": [10, 20]}, {"frames": [3, 3]}])") + "\n" +
      R"({"type": "update", "rank": 0, "step": 3, "wall_ms": 10.0, "counts": {"token_slots": 100, "valid_tokens": 55},)"
      R"( "microbatches": [{"tokens": [10, 10]}]})" + "\n");
  ASSERT_EQ(diag_.total(), 0u);
  const auto slots = d.counters.find("token_slots"), valid = d.counters.find("valid_tokens");
  ASSERT_TRUE(slots && valid);
  const auto& u = d.ranks[0].updates;
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].counter(*slots), 40 * 2 + 30 * 2);  // 140
  EXPECT_EQ(u[0].counter(*valid), 10 + 20 + 30 + 25);
  EXPECT_FALSE(u[1].counter(*slots));  // (the second micro-batch lists no tokens)
  EXPECT_FALSE(u[1].counter(*valid));
  EXPECT_EQ(u[2].counter(*slots), 100);
  EXPECT_EQ(u[2].counter(*valid), 55);
}
