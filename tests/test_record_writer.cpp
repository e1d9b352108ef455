// Writing records and reading them back gives the same records (the writer is what the
// recorder, the Kineto importer and the generator use).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "stepprof/hierarchy.hpp"
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
  u.regions.push_back({top, kTopLevel, 10.0, 11.0, 1});
  u.regions.push_back({fwd, top, std::nullopt, 3.0, 2});  // no device time: absent, not 0
  u.counters.push_back({counters.intern("samples"), 16});
  u.input_shapes.push_back({{8}, 1});
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"({"type":"update","rank":0,"step":7,"wall_ms":12.5,"cuda_stream_ms":{"top":10.0},)"
            R"("cpu_call_ms":{"top":11.0,"fwd":3.0},"calls":{"top":1,"fwd":2},"parents":{"top":null,"fwd":"top"},)"
            R"x("counts":{"samples":16},"input_shapes":{"(8,)":1}})x");
}

// The sample indices are written as text between the fields before them and those after
// (a JSON array of millions of them ended the training job when memory ran out while it
// was destroyed: test_recorder_oom.cpp); the record is the text it was, field for field.
// An unknown field of the record goes last, and one named like a field written above
// replaces it in its place, the indices' included (a review: the indices were then
// written twice).
TEST(RecordWriter, SampleIndicesAndTheFieldsAroundThem) {
  NameTable regions, counters;
  UpdateRecord u;
  u.step = 1;
  u.wall_ms = 2;
  u.input_shapes.push_back({{4, 8}, 1});
  u.sample_indices = {0, -1, 9223372036854775807, 42};
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"x({"type":"update","step":1,"wall_ms":2.0,"input_shapes":{"(4, 8)":1},)x"
            R"("sample_indices":[0,-1,9223372036854775807,42]})");
  u.padding_fraction = 0.25;
  u.recorder_errors = {{"write_failed", 2}};
  u.extra = {{"loss", "1.5"}, {"step", "5"}};
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"x({"type":"update","step":5,"wall_ms":2.0,"input_shapes":{"(4, 8)":1},)x"
            R"("sample_indices":[0,-1,9223372036854775807,42],"padding_fraction":0.25,)"
            R"("recorder_errors":{"write_failed":2},"loss":1.5})");
  u.extra.push_back({"sample_indices", "[9]"});
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"x({"type":"update","step":5,"wall_ms":2.0,"input_shapes":{"(4, 8)":1},"sample_indices":[9],)x"
            R"("padding_fraction":0.25,"recorder_errors":{"write_failed":2},"loss":1.5})");
  u.sample_indices.clear();  // (no indices: the field is the record's own, written last)
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"x({"type":"update","step":5,"wall_ms":2.0,"input_shapes":{"(4, 8)":1},"padding_fraction":0.25,)x"
            R"("recorder_errors":{"write_failed":2},"loss":1.5,"sample_indices":[9]})");
}

// A record that lists a name twice (only a hand-built one can) still writes each name
// once: the later entry's values replace the earlier ones where the earlier one stood.
TEST(RecordWriter, ANameListedTwiceIsWrittenOnce) {
  NameTable regions, counters;
  UpdateRecord u;
  u.step = 1;
  u.wall_ms = 2;
  const auto a = regions.intern("a");
  const auto b = regions.intern("b");
  u.regions.push_back({a, kTopLevel, std::nullopt, 1.5, 1});
  u.regions.push_back({b, kTopLevel, std::nullopt, 2.5, 1});
  u.regions.push_back({a, kTopLevel, std::nullopt, 4.5, 3});
  const auto n = counters.intern("n");
  u.counters.push_back({n, 1});
  u.counters.push_back({n, 2});
  EXPECT_EQ(update_to_json(u, regions, counters),
            R"({"type":"update","step":1,"wall_ms":2.0,"cpu_call_ms":{"a":4.5,"b":2.5},"calls":{"a":3,"b":1},)"
            R"("parents":{"a":null,"b":null},"counts":{"n":2}})");
}

// append_update_json appends to what the buffer holds and gives update_to_json's text;
// a record of many regions lists them in its order.
TEST(RecordWriter, AppendWritesTheSameTextAfterTheBuffersContent) {
  NameTable regions, counters;
  UpdateRecord u;
  u.step = 3;
  u.wall_ms = 1;
  std::string expected_host;
  for (int i = 0; i < 300; ++i) {
    const auto id = regions.intern("layer." + std::to_string(299 - i));
    u.regions.push_back({id, kTopLevel, std::nullopt, 0.25, std::nullopt});
    expected_host += (i ? "," : "") + std::string("\"layer.") + std::to_string(299 - i) + "\":0.25";
  }
  std::string out = "kept|";
  append_update_json(u, regions, counters, out);
  EXPECT_EQ(out, "kept|" + update_to_json(u, regions, counters));
  EXPECT_NE(out.find("\"cpu_call_ms\":{" + expected_host + "}"), std::string::npos);
}

// The helpers the recorder builds its config record with.
TEST(RecordWriter, JsonStringEscapes) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c\nd"), R"("a\"b\\c\nd")");
  EXPECT_EQ(json_string(std::string("x\x01y", 3)), R"("x\u0001y")");
  EXPECT_EQ(json_string_map({{"vggt_batched", "geometry"}, {"vggt_single", "geometry"}}),
            R"({"vggt_batched":"geometry","vggt_single":"geometry"})");
}

TEST(RecordModel, ParseObjectFieldsKeepsOrderAndRejectsBadInput) {
  std::vector<RawField> f;
  std::string err;
  ASSERT_TRUE(parse_object_fields(R"({"z": 1, "a": "m", "o": {"k": [1, 2.5]}, "t": true})", f, err)) << err;
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].key, "z");
  EXPECT_EQ(f[0].json, "1");
  EXPECT_EQ(f[1].key, "a");
  EXPECT_EQ(f[1].json, "\"m\"");
  EXPECT_EQ(f[2].json, R"({"k":[1,2.5]})");
  EXPECT_EQ(f[3].json, "true");
  EXPECT_FALSE(parse_object_fields("[1]", f, err));
  EXPECT_NE(err.find("expected a JSON object"), std::string::npos) << err;
  EXPECT_FALSE(parse_object_fields(R"({"a": 1, "a": 2})", f, err));
  EXPECT_NE(err.find("\"a\" appears twice"), std::string::npos) << err;
  EXPECT_FALSE(parse_object_fields(R"({"a": )", f, err));
  EXPECT_EQ(err, "not valid JSON");
  // Nested objects may repeat their parents' keys.
  EXPECT_TRUE(parse_object_fields(R"({"a": {"a": 1}})", f, err)) << err;
}

// A config record with the recorder's fields reads back into the typed members, and
// its region_alternatives / region_roles reach the nesting taken from the log.
TEST(RecordWriter, RecorderConfigFieldsReadBack) {
  NameTable regions, counters;
  RunConfig c;
  c.fields = {{"schema", "1"},
              {"run_id", json_string("r-1")},
              {"rank", "0"},
              {"world_size", "1"},
              {"clock", json_string("tsc")},
              {"device_timing", json_string("off: libcuda.so.1 not found")},
              {"region_alternatives", json_string_map({{"fast", "g"}, {"slow", "g"}})},
              {"region_roles", json_string_map({{"fetch", "data"}})}};
  UpdateRecord u;
  u.step = 1;
  u.wall_ms = 2;
  const auto top = regions.intern("top"), fast = regions.intern("fast"), fetch = regions.intern("fetch");
  u.regions = {{top, kTopLevel, std::nullopt, 1.5, 1}, {fast, top, std::nullopt, 1.0, 1}, {fetch, kTopLevel, std::nullopt, 0.1, 1}};
  const std::string path = testing::TempDir() + "/recorder-config.jsonl";
  {
    std::ofstream out(path);
    out << config_to_json(c) << "\n" << update_to_json(u, regions, counters) << "\n";
  }
  Diagnostics diag;
  const Dataset d = read_logs({path}, {}, diag);
  ASSERT_EQ(diag.total(), 0u);
  const RunConfig& rc = *d.ranks[0].config;
  EXPECT_EQ(rc.schema, 1);
  EXPECT_EQ(rc.run_id, "r-1");
  EXPECT_EQ(rc.clock, "tsc");
  EXPECT_EQ(rc.device_timing, "off: libcuda.so.1 not found");
  const auto h = hierarchy_from_log(d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->find("fast")->parent, "top");
  EXPECT_EQ(h->find("fast")->alt_group, "g");
  EXPECT_EQ(h->find("fetch")->role, RegionRole::kData);
}
