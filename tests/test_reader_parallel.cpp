// Reading files in parallel gives exactly what reading them one after another gives:
// the same records, the same name ids, the same diagnostics in the same order, also in
// strict mode and across every kind of bad input. And the records are stored compactly.
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "stepprof/reader.hpp"
#include "stepprof/record_writer.hpp"
#include "stepprof/synth.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace stepprof;

namespace {

const std::string kSource = STEPPROF_SOURCE_DIR;

std::string cfg(int rank, int seed = 1) {
  return R"({"type": "config", "rank": )" + std::to_string(rank) +
         R"(, "world_size": 4, "micro_batch": 8, "accumulation": 2, "seed": )" + std::to_string(seed) + "}\n";
}

// An update whose regions come in the order given (so files intern names differently).
std::string upd(int step, const std::vector<std::string>& regions, const std::string& counter = "samples") {
  std::string dev, calls;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    dev += (i ? ", " : "") + ("\"" + regions[i] + "\": " + std::to_string(10.0 + static_cast<double>(i) + step));
    calls += (i ? ", " : "") + ("\"" + regions[i] + "\": 1");
  }
  return R"({"type": "update", "step": )" + std::to_string(step) + R"(, "wall_ms": )" + std::to_string(100 + step) +
         R"(, "cuda_stream_ms": {)" + dev + R"(}, "calls": {)" + calls + R"(}, "counts": {")" + counter +
         R"(": 16}})" + "\n";
}

class ParallelReaderTest : public test::TempDirTest {
 protected:

  // Everything a Dataset holds, names and ids included, plus every diagnostic in order.
  static std::string canonical(const Dataset& d, const Diagnostics& diag) {
    std::string s;
    for (std::size_t i = 0; i < d.regions.size(); ++i) s += "region " + std::string(d.regions.name(static_cast<NameTable::Id>(i))) + "\n";
    for (std::size_t i = 0; i < d.counters.size(); ++i) s += "counter " + std::string(d.counters.name(static_cast<NameTable::Id>(i))) + "\n";
    s += "outside " + std::to_string(d.updates_outside_window) + "\n";
    for (const auto& r : d.ranks) {
      s += "rank " + (r.rank ? std::to_string(*r.rank) : std::string("?")) + " files";
      for (auto f : r.files) s += " " + std::to_string(f);
      s += "\n";
      if (r.config) s += config_to_json(*r.config) + " @" + std::to_string(r.config->source.line) + "\n";
      for (const auto& u : r.updates) {
        s += update_to_json(u, d.regions, d.counters) + " @" + std::to_string(u.source.file) + ":" +
             std::to_string(u.source.line);
        for (const auto& g : u.regions) s += " " + std::to_string(g.region);  // ids, not just names
        for (const auto& c : u.counters) s += " c" + std::to_string(c.name);
        s += "\n";
      }
    }
    for (const auto& x : diag.kept()) s += format_diagnostic(x) + "\n";
    s += "counts " + std::to_string(diag.count(Severity::kError)) + " " + std::to_string(diag.count(Severity::kWarning)) +
         " " + std::to_string(diag.count(Severity::kNote)) + "\n";
    return s;
  }

  std::string read(const std::vector<std::string>& inputs, unsigned threads, bool strict = false,
                   std::optional<StepRange> steps = {}) {
    Diagnostics diag(strict);
    ReadOptions opt;
    opt.threads = threads;
    opt.steps = steps;
    const Dataset d = read_logs(expand_inputs(inputs, diag), opt, diag);
    return canonical(d, diag);
  }

  // A directory that holds every kind of input and problem the reader knows.
  std::vector<std::string> messy_inputs() {
    write("a_rank0.jsonl", cfg(0) + upd(1, {"fwd", "bwd"}) + upd(2, {"fwd", "bwd", "opt"}) + upd(3, {"bwd", "fwd"}));
    write("b_rank1.jsonl", cfg(1) + upd(1, {"data", "fwd", "bwd"}, "frames") + "{\"type\": \"update\", \"step\": 9, \"wall_ms\": }\n" +
                               "{\"type\": \"checkpoint\"}\n" + upd(2, {"bwd", "data"}) + upd(2, {"fwd"}));
    write("c_rank0_again.jsonl", cfg(0) + upd(3, {"zzz", "fwd"}) + upd(4, {"fwd"}));
    write("d_other_run.jsonl", cfg(2, 99) + upd(1, {"fwd"}));
    write_gz("e_rank3.jsonl.gz", cfg(3) + upd(1, {"gz_only", "fwd"}) + upd(2, {"fwd"}));
    std::string table = "| record |\n| --- |\n";
    for (const std::string& line : {cfg(1), upd(5, {"tbl", "fwd"})}) table += "| " + line.substr(0, line.size() - 1) + " |\n";
    write("f_rank1_table.md", table);
    write("g_no_config.jsonl", upd(7, {"fwd"}) + upd(8, {"solo"}));
    write("h_mixed.jsonl", cfg(2) + upd(1, {"fwd"}) + cfg(3) + upd(2, {"fwd"}));
    write("i_empty.jsonl", "");
    write("j_cut.jsonl", cfg(3) + upd(3, {"fwd", "cut"}) + R"({"type": "update", "step": 4, "wall_ms": 1)");
    write("k_errors.jsonl", cfg(1) + R"({"type": "update", "step": 6, "wall_ms": -1})" + "\n" +
                                R"({"type": "update", "step": 7, "wall_ms": 5, "recorder_errors": {"write_failed": 2}})" + "\n");
    std::string newer = cfg(3);
    newer.insert(1, R"("schema": 2, )");
    write("l_newer_schema.jsonl", newer + upd(9, {"fwd", "new"}));
    write("notes.csv", "not a log");
    return {dir_.string()};
  }

};

}  // namespace

TEST_F(ParallelReaderTest, EveryKindOfInputReadsTheSameOnAnyNumberOfThreads) {
  const auto inputs = messy_inputs();
  const std::string one = read(inputs, 1);
  // Sanity: the input really does exercise the cross-file checks.
  for (const char* code : {"[duplicate-step]", "[mixed-runs]", "[malformed-json]", "[unknown-record]",
                           "[missing-config]", "[truncated-line]", "[empty-input]", "[negative-value]",
                           "[recorder-errors]", "[newer-schema]"})
    EXPECT_NE(one.find(code), std::string::npos) << code;
  for (unsigned threads : {2u, 3u, 8u, 0u}) EXPECT_EQ(read(inputs, threads), one) << threads << " threads";
  const StepRange window{2, 3};
  EXPECT_EQ(read(inputs, 4, false, window), read(inputs, 1, false, window));
}

TEST_F(ParallelReaderTest, StrictModeStopsAtTheSameProblem) {
  // The first problem is a cross-file one (rank 0's second config is another run's),
  // found only when the files are put together: reading stops at that config line.
  write("a.jsonl", cfg(0) + upd(1, {"fwd"}) + upd(2, {"fwd"}));
  write("b.jsonl", cfg(0, 7) + upd(3, {"fwd"}) + "{bad\n" + upd(4, {"fwd"}));
  write("c.jsonl", "{bad\n");
  const std::string one = read({dir_.string()}, 1, true);
  EXPECT_NE(one.find("[mixed-runs]"), std::string::npos);
  EXPECT_EQ(one.find("[malformed-json]"), std::string::npos);  // never reached
  for (unsigned threads : {2u, 3u}) EXPECT_EQ(read({dir_.string()}, threads, true), one);
  // And a file's own first problem.
  const auto inputs = messy_inputs();
  EXPECT_EQ(read(inputs, 4, true), read(inputs, 1, true));
}

TEST_F(ParallelReaderTest, ManyRanksAndTheRealLog) {
  synth::Options o;
  o.ranks = 6;
  o.updates = 40;
  o.fallback_rate = 0.5;
  o.padding_spikes = {{2, 10, 0}};
  synth::generate(o, (dir_ / "synth").string());
  fs::copy_file(kSource + "/examples/qwen-vggt/rank1.jsonl", dir_ / "real.jsonl");
  const std::vector<std::string> inputs{(dir_ / "synth").string(), (dir_ / "real.jsonl").string(),
                                        kSource + "/examples/qwen-vggt/rank1.table.md"};
  const std::string one = read(inputs, 1);
  for (unsigned threads : {2u, 5u}) EXPECT_EQ(read(inputs, threads), one);
}

TEST_F(ParallelReaderTest, RecordsKeepNoSpareCapacity) {
  Diagnostics diag;
  const Dataset d = read_logs({kSource + "/examples/qwen-vggt/rank1.jsonl"}, {}, diag);
  ASSERT_EQ(d.ranks.size(), 1u);
  for (const auto& u : d.ranks[0].updates) {
    EXPECT_EQ(u.regions.capacity(), u.regions.size());
    EXPECT_EQ(u.counters.capacity(), u.counters.size());
    EXPECT_EQ(u.sample_indices.capacity(), u.sample_indices.size());
    EXPECT_EQ(u.frame_histogram.capacity(), u.frame_histogram.size());
    EXPECT_EQ(u.input_shapes.capacity(), u.input_shapes.size());
  }
}

TEST_F(ParallelReaderTest, CancelAndProgress) {
  synth::Options o;
  o.ranks = 4;
  o.updates = 3000;
  const auto m = synth::generate(o, (dir_ / "synth").string());
  std::atomic<bool> cancel{true};
  ReadOptions opt;
  opt.cancel = &cancel;
  Diagnostics diag;
  const Dataset stopped = read_logs(m.files, opt, diag);
  EXPECT_LT(stopped.update_count(), 4u * 3000u);  // stopped early: incomplete, to be discarded

  cancel = false;
  std::uint64_t last_done = 0, total = 0;
  int calls = 0;
  opt.progress = [&](std::uint64_t done, std::uint64_t all) {
    EXPECT_GE(done, last_done);
    last_done = done;
    total = all;
    ++calls;
  };
  Diagnostics diag2;
  const Dataset full = read_logs(m.files, opt, diag2);
  EXPECT_EQ(full.update_count(), 4u * 3000u);
  EXPECT_EQ(diag2.total(), 0u);
  if (calls > 0) {  // called at most every 200 ms: a fast machine may not need it
    EXPECT_EQ(total, m.bytes);
    EXPECT_LE(last_done, m.bytes);
  }
}
