// The log generator: its logs read back without a single diagnostic, hold together as
// a real log does (checked field by field with arithmetic written out here), nest like
// the bundled real log's hierarchy file, and carry the injections the manifest lists.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "stepprof/hierarchy.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/synth.hpp"

namespace fs = std::filesystem;
using namespace stepprof;

namespace {

const std::string kSource = STEPPROF_SOURCE_DIR;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stepprof_synth_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Dataset read(const synth::Manifest& m) {
    return read_logs(m.files, {}, diag_);
  }

  fs::path dir_;
  Diagnostics diag_;
};

const UpdateRecord* find_update(const Dataset& d, std::int64_t rank, std::int64_t step) {
  for (const auto& r : d.ranks)
    if (r.rank == rank)
      for (const auto& u : r.updates)
        if (u.step == step) return &u;
  return nullptr;
}

double device(const Dataset& d, const UpdateRecord& u, std::string_view region) {
  const auto id = d.regions.find(region);
  if (!id) return 0;
  const RegionSample* s = u.region(*id);
  return s && s->device_ms ? *s->device_ms : 0;
}

double count(const Dataset& d, const UpdateRecord& u, std::string_view counter) {
  const auto id = d.counters.find(counter);
  return id ? u.counter(*id).value_or(0) : 0;
}

}  // namespace

TEST_F(SynthTest, ValidateNamesWhatIsWrong) {
  synth::Options o;
  o.ranks = 4;
  o.updates = 10;
  EXPECT_EQ(synth::validate(o), "");
  o.stragglers.push_back({7, 1, 2, 1.3});
  EXPECT_NE(synth::validate(o).find("rank 7 is not in 0..3"), std::string::npos);
  o.stragglers = {{1, 5, 4, 1.3}};
  EXPECT_NE(synth::validate(o).find("before its first"), std::string::npos);
  o.stragglers = {{1, 2, 4, 0.9}};
  EXPECT_NE(synth::validate(o).find("factor"), std::string::npos);
  o.stragglers = {{1, 2, 4, 1.3}, {1, 4, 6, 1.2}};
  EXPECT_NE(synth::validate(o).find("overlap"), std::string::npos);
  o.stragglers.clear();
  o.fallbacks = {{0, 11, 1}};
  EXPECT_NE(synth::validate(o).find("step 11 is not in 1..10"), std::string::npos);
  o.fallbacks = {{0, 3, 3}};
  EXPECT_NE(synth::validate(o).find("micro-batches must be in 1..2"), std::string::npos);
  o.fallbacks = {{1, 3, 1}, {1, 3, 1}};  // (printed and counted twice, found once)
  EXPECT_NE(synth::validate(o).find("rank 1 step 3 is given twice"), std::string::npos);
  o.fallbacks = {{1, 3, 1}, {2, 3, 1}};
  EXPECT_EQ(synth::validate(o), "");
  o.fallbacks.clear();
  o.padding_spikes = {{0, 3, 100}};
  EXPECT_NE(synth::validate(o).find("length must be above"), std::string::npos);
  o.padding_spikes = {{2, 5, 0}, {2, 5, 20000}};
  EXPECT_NE(synth::validate(o).find("rank 2 step 5 is given twice"), std::string::npos);
  o.padding_spikes.clear();
  o.fallback_rate = 1.5;
  EXPECT_NE(synth::validate(o).find("--fallback-rate"), std::string::npos);
  EXPECT_THROW(synth::generate(o, (dir_ / "x").string()), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // A micro-batch of one sample can neither mix frame counts nor pad: a padding spike
  // was accepted, listed in the manifest and absent from the logs (0.0 % padding).
  o.fallback_rate = 0;
  o.micro_batch = 1;
  EXPECT_EQ(synth::validate(o), "");
  for (const auto& [field, why] : std::vector<std::pair<std::string, std::string>>{
           {"fallback", "fallbacks"}, {"random_fallbacks", "fallbacks"}, {"rate", "fallbacks"},
           {"spike", "padding spikes"}, {"random_spikes", "padding spikes"}}) {
    synth::Options one = o;
    if (field == "fallback") one.fallbacks = {{0, 3, 1}};
    if (field == "random_fallbacks") one.random_fallbacks = 1;
    if (field == "rate") one.fallback_rate = 0.5;
    if (field == "spike") one.padding_spikes = {{0, 3, 0}};
    if (field == "random_spikes") one.random_padding_spikes = 1;
    EXPECT_TRUE(synth::validate(one).starts_with(why + " (")) << field << ": " << synth::validate(one);
    EXPECT_NE(synth::validate(one).find("need --micro-batch >= 2"), std::string::npos) << field;
  }
}

TEST_F(SynthTest, LogsReadBackCleanAndHoldTogether) {
  synth::Options o;
  o.ranks = 3;
  o.updates = 50;
  o.first_step = 11;
  o.seed = 4;
  o.fallback_rate = 0.3;
  const auto m = synth::generate(o, dir_.string(), false, 2);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(fs::path(m.files[0]).filename(), "rank0.jsonl");
  const Dataset d = read(m);
  EXPECT_EQ(diag_.total(), 0u) << (diag_.kept().empty() ? "" : format_diagnostic(diag_.kept()[0]));
  ASSERT_EQ(d.ranks.size(), 3u);
  std::uint64_t bytes = 0;
  for (const auto& f : m.files) bytes += fs::file_size(f);
  EXPECT_EQ(m.bytes, bytes);
  for (std::size_t r = 0; r < 3; ++r) {
    const RankLog& log = d.ranks[r];
    EXPECT_EQ(log.rank, static_cast<std::int64_t>(r));
    ASSERT_TRUE(log.config);
    EXPECT_EQ(log.config->world_size, 3);
    EXPECT_EQ(log.config->global_batch, 8 * 2 * 3);
    ASSERT_EQ(log.updates.size(), 50u);
    EXPECT_EQ(log.updates.front().step, 11);
    for (const auto& u : log.updates) {
      // Counters agree with the histogram, the shapes and the indices.
      EXPECT_EQ(count(d, u, "samples"), 16);
      EXPECT_EQ(count(d, u, "micro_steps"), 2);
      double frames = 0, samples = 0, slots = 0;
      for (const auto& [f, n] : u.frame_histogram) {
        frames += static_cast<double>(f * n);
        samples += static_cast<double>(n);
      }
      for (const auto& s : u.input_shapes) slots += static_cast<double>(s.dims[0] * s.dims[1] * s.microbatches);
      EXPECT_EQ(count(d, u, "frames"), frames);
      EXPECT_EQ(samples, 16);
      EXPECT_EQ(count(d, u, "token_slots"), slots);
      EXPECT_EQ(u.sample_indices.size(), 16u);
      ASSERT_TRUE(u.padding_fraction);
      EXPECT_DOUBLE_EQ(*u.padding_fraction, 1 - count(d, u, "valid_tokens") / count(d, u, "token_slots"));
      // The work counters of the two paths add up to all samples and frames.
      EXPECT_EQ(count(d, u, "vggt_single_samples") + count(d, u, "vggt_batched_samples"), 16);
      EXPECT_EQ(count(d, u, "vggt_single_frames") + count(d, u, "vggt_batched_frames"), frames);
      // Nesting: a parent's device time covers its children's (within float rounding).
      const double fwd = device(d, u, "forward_and_loss");
      const double kids = device(d, u, "prepare_inputs") + device(d, u, "vision_forward") +
                          device(d, u, "geometry_total") + device(d, u, "language_forward");
      EXPECT_GE(fwd + 0.01, kids);
      EXPECT_GE(device(d, u, "micro_step_total") + 0.01, fwd + device(d, u, "backward_and_engine_step"));
      EXPECT_GT(u.wall_ms, device(d, u, "micro_step_total"));
      // Every region says who its parent is.
      for (const auto& s : u.regions) EXPECT_TRUE(s.parent.has_value()) << d.regions.name(s.region);
    }
  }
}

TEST_F(SynthTest, NestingIsTheRealLogsHierarchy) {
  synth::Options o;
  o.ranks = 1;
  o.updates = 40;
  o.fallback_rate = 0.5;  // both paths occur
  const auto m = synth::generate(o, dir_.string());
  const Dataset d = read(m);
  const auto from_log = hierarchy_from_log(d, diag_);
  ASSERT_TRUE(from_log);
  Diagnostics hdiag;
  const auto real = load_hierarchy(kSource + "/examples/qwen-vggt/hierarchy.txt", hdiag);
  ASSERT_TRUE(real);
  ASSERT_EQ(from_log->nodes().size(), real->nodes().size());
  for (const auto& node : real->nodes()) {
    const HierarchyNode* mine = from_log->find(node.name);
    ASSERT_NE(mine, nullptr) << node.name;
    EXPECT_EQ(mine->parent, node.parent) << node.name;
    EXPECT_EQ(mine->alt_group, node.alt_group) << node.name;
    EXPECT_EQ(mine->role, node.role) << node.name;
  }
}

TEST_F(SynthTest, InjectionsAreWhereTheManifestSays) {
  synth::Options o;
  o.ranks = 4;
  o.updates = 60;
  o.seed = 21;
  o.stragglers = {{1, 10, 19, 1.4}};
  o.fallbacks = {{2, 30, 1}, {3, 31, 2}};
  o.padding_spikes = {{0, 40, 0}, {2, 41, 9000}};
  o.random_fallbacks = 3;
  o.random_padding_spikes = 2;
  const auto m = synth::generate(o, dir_.string());
  const Dataset d = read(m);
  ASSERT_EQ(diag_.total(), 0u);
  ASSERT_EQ(m.fallbacks.size(), 5u);
  ASSERT_EQ(m.padding_spikes.size(), 4u);
  EXPECT_EQ(m.background_fallback_updates, 0);
  std::set<std::pair<std::int64_t, std::int64_t>> fallback_places;
  for (const auto& f : m.fallbacks) {
    fallback_places.emplace(f.spec.rank, f.spec.step);
    const UpdateRecord* u = find_update(d, f.spec.rank, f.spec.step);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(count(d, *u, "vggt_fallback_microbatches"), static_cast<double>(f.spec.microbatches));
    EXPECT_EQ(count(d, *u, "vggt_single_samples"), static_cast<double>(8 * f.spec.microbatches));
    std::set<std::int64_t> counts;
    for (const auto& [frames, n] : u->frame_histogram) counts.insert(frames);
    EXPECT_EQ(std::vector<std::int64_t>(counts.begin(), counts.end()), f.frame_counts);
  }
  EXPECT_EQ(fallback_places.size(), 5u);  // distinct places
  // Without background fallbacks, only the injected updates ran vggt_single.
  const auto single = d.regions.find("vggt_single");
  ASSERT_TRUE(single);
  std::size_t with_single = 0;
  for (const auto& r : d.ranks)
    for (const auto& u : r.updates)
      if (u.region(*single)) {
        ++with_single;
        EXPECT_TRUE(fallback_places.count({*u.rank, u.step})) << *u.rank << " " << u.step;
      }
  EXPECT_EQ(with_single, 5u);
  for (const auto& s : m.padding_spikes) {
    const UpdateRecord* u = find_update(d, s.spec.rank, s.spec.step);
    ASSERT_NE(u, nullptr);
    std::int64_t longest = 0;
    for (const auto& shape : u->input_shapes) longest = std::max(longest, shape.dims[1]);
    EXPECT_EQ(longest, s.padded_length);
    EXPECT_EQ(s.padded_length, s.spec.length);
    EXPECT_DOUBLE_EQ(*u->padding_fraction, s.padding_fraction);
  }
  EXPECT_EQ(m.padding_spikes[0].spec.length, 13000);  // the default: 4 x the longest normal sample
  // The straggler's compute is 1.4x its own without the slowdown; it holds up the job.
  ASSERT_EQ(m.stragglers.size(), 1u);
  const auto& st = m.stragglers[0];
  EXPECT_GE(st.slowest_updates, 8);  // a random injection elsewhere may outdo it once
  EXPECT_GT(st.lead_ms, 1000);
  for (std::int64_t step = 10; step <= 19; ++step) {
    const UpdateRecord* slow = find_update(d, 1, step);
    const UpdateRecord* other = find_update(d, 0, step);
    // (vision_forward does not depend on sequence lengths: only the speed differs.)
    EXPECT_GT(device(d, *slow, "vision_forward"), 1.25 * device(d, *other, "vision_forward"));
    // The others wait in their communication region; the straggler does not.
    EXPECT_GT(device(d, *other, "backward_and_communication"), device(d, *slow, "backward_and_communication"));
  }
  // Synchronous data parallelism: every rank's update takes about as long.
  for (std::int64_t step = 1; step <= 60; ++step) {
    const double w0 = find_update(d, 0, step)->wall_ms;
    for (std::int64_t r = 1; r < 4; ++r) EXPECT_NEAR(find_update(d, r, step)->wall_ms, w0, 0.01 * w0);
  }
}

TEST_F(SynthTest, CancelRemovesPartialFiles) {
  synth::Options o;
  o.ranks = 2;
  o.updates = 500;
  int calls = 0;
  EXPECT_THROW(synth::generate(o, dir_.string(), false, 1, [&] { return ++calls > 50; }), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir_ / "rank0.jsonl"));
  EXPECT_FALSE(fs::exists(dir_ / "rank1.jsonl"));
}

TEST_F(SynthTest, ManifestJsonAndDescription) {
  synth::Options o;
  o.ranks = 2;
  o.updates = 20;
  o.fallbacks = {{1, 5, 1}};
  const auto m = synth::generate(o, dir_.string());
  const std::string j = synth::manifest_to_json(m);
  EXPECT_NE(j.find("\"schema\": \"stepprof.synth-manifest/1\""), std::string::npos);
  EXPECT_NE(j.find("\"fallbacks\""), std::string::npos);
  EXPECT_NE(synth::describe(m).find("fallback: rank 1, step 5 (1 of 2 micro-batches"), std::string::npos);
}
