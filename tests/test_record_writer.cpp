// Writing records and reading them back gives the same records (the writer is what the
// recorder, the Kineto importer and the generator use).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "stepprof/reader.hpp"
#include "stepprof/record_writer.hpp"

using namespace stepprof;

TEST(RecordWriter, RealLogRoundTrips) {
  Diagnostics diag;
  const Dataset a = read_logs({std::string(STEPPROF_SOURCE_DIR) + "/examples/qwen-vggt/rank1.jsonl"}, {}, diag);
  ASSERT_EQ(diag.total(), 0u);
  const std::string path = testing::TempDir() + "/roundtrip.jsonl";
  {
    std::ofstream out(path);
    out << config_to_json(*a.ranks[0].config) << "\n";
    for (const auto& u : a.ranks[0].updates) out << update_to_json(u, a.regions, a.counters) << "\n";
  }
  const Dataset b = read_logs({path}, {}, diag);
  ASSERT_EQ(diag.total(), 0u);
  ASSERT_EQ(b.ranks.size(), 1u);
  const auto& ca = a.ranks[0].config->fields;
  const auto& cb = b.ranks[0].config->fields;
  ASSERT_EQ(ca.size(), cb.size());
  for (std::size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(ca[i].key, cb[i].key);
  ASSERT_EQ(a.ranks[0].updates.size(), b.ranks[0].updates.size());
  for (std::size_t i = 0; i < a.ranks[0].updates.size(); ++i) {
    const auto& x = a.ranks[0].updates[i];
    const auto& y = b.ranks[0].updates[i];
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.wall_ms, y.wall_ms);  // shortest round-trip formatting: exact
    ASSERT_EQ(x.regions.size(), y.regions.size());
    for (const auto& r : x.regions) {
      const auto id = b.regions.find(a.regions.name(r.region));
      ASSERT_TRUE(id);
      const RegionSample* s = y.region(*id);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(r.device_ms, s->device_ms);
      EXPECT_EQ(r.host_ms, s->host_ms);
      EXPECT_EQ(r.calls, s->calls);
    }
    ASSERT_EQ(x.counters.size(), y.counters.size());
    EXPECT_EQ(x.frame_histogram, y.frame_histogram);
    ASSERT_EQ(x.input_shapes.size(), y.input_shapes.size());
    for (std::size_t k = 0; k < x.input_shapes.size(); ++k) EXPECT_EQ(x.input_shapes[k].dims, y.input_shapes[k].dims);
    EXPECT_EQ(x.sample_indices, y.sample_indices);
    EXPECT_EQ(x.padding_fraction, y.padding_fraction);
  }
}

TEST(RecordWriter, ShapeOfAWrittenUpdate) {
  NameTable regions, counters;
  UpdateRecord u;
  u.rank = 0;
  u.step = 7;
  u.wall_ms = 12.5;
  const auto fwd = regions.intern("fwd");
  const auto top = regions.intern("top");
  u.regions.push_back({top, 10.0, 11.0, 1, kTopLevel});
  u.regions.push_back({fwd, std::nullopt, 3.0, 2, top});  // no device time: absent, not 0
  u.counters.push_back({counters.intern("samples"), 16});
  u.input_shapes.push_back({{8}, 1});
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"({"type":"update","rank":0,"step":7,"wall_ms":12.5,"cuda_stream_ms":{"top":10.0},)"
            R"("cpu_call_ms":{"top":11.0,"fwd":3.0},"calls":{"top":1,"fwd":2},"parents":{"top":null,"fwd":"top"},)"
            R"x("counts":{"samples":16},"input_shapes":{"(8,)":1}})x");
}
