// Parsing throughput on records in the real log's shape (one rank of `stepprof synth`,
// 2,000 updates, --fallback-rate 0.5: about 2.4 KB per record), against what simdjson
// itself does on the same bytes, per core:
//   BM_SimdjsonStructureOnly   stage 1 (structure, UTF-8) and skipping the record whole;
//   BM_SimdjsonEveryValue      visiting every value, every number read as a double;
//   BM_RecordParser/1          stepprof's record parser: every field validated and kept;
//   BM_RecordParser/0          the same, sample indices checked but not kept (as
//                              `stepprof report` reads them).
// bytes_per_second is of record text. docs/scale.md quotes the figures.
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "record_parser.hpp"
#include "stepprof/synth.hpp"

namespace {

namespace od = simdjson::ondemand;

// The update records, each followed by the parser's padding.
const std::vector<std::string>& records() {
  static const std::vector<std::string> lines = [] {
    const auto dir = std::filesystem::temp_directory_path() / "stepprof_bench_parse";
    stepprof::synth::Options o;
    o.ranks = 1;
    o.updates = 2000;
    o.fallback_rate = 0.5;
    const auto m = stepprof::synth::generate(o, dir.string());
    std::vector<std::string> out;
    std::ifstream in(m.files.at(0));
    for (std::string line; std::getline(in, line);)
      if (line.find("\"update\"") != std::string::npos) out.push_back(line + std::string(64, ' '));
    std::filesystem::remove_all(dir);
    return out;
  }();
  return lines;
}

std::size_t text_bytes() {
  std::size_t n = 0;
  for (const auto& l : records()) n += l.size() - 64;
  return n;
}

void BM_SimdjsonStructureOnly(benchmark::State& state) {
  od::parser parser;
  std::size_t sink = 0;
  for (auto _ : state)
    for (const auto& l : records()) {
      simdjson::padded_string_view text(l.data(), l.size() - 64, l.size());
      od::document doc = parser.iterate(text);
      od::object obj = doc.get_object();
      std::string_view raw = obj.raw_json();
      sink += raw.size();
    }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text_bytes()));
}
BENCHMARK(BM_SimdjsonStructureOnly)->Unit(benchmark::kMillisecond);

double visit(od::value v) {
  double sum = 0;
  switch (v.type()) {
    case od::json_type::object:
      for (auto f : v.get_object()) sum += visit(f.value());
      break;
    case od::json_type::array:
      for (auto x : v.get_array()) sum += visit(x.value());
      break;
    case od::json_type::number: sum += double(v.get_double()); break;
    case od::json_type::string: sum += static_cast<double>(std::string_view(v.get_string()).size()); break;
    default: break;
  }
  return sum;
}

void BM_SimdjsonEveryValue(benchmark::State& state) {
  od::parser parser;
  double sink = 0;
  for (auto _ : state)
    for (const auto& l : records()) {
      simdjson::padded_string_view text(l.data(), l.size() - 64, l.size());
      od::document doc = parser.iterate(text);
      for (auto f : doc.get_object()) sink += visit(f.value());
    }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text_bytes()));
}
BENCHMARK(BM_SimdjsonEveryValue)->Unit(benchmark::kMillisecond);

void BM_RecordParser(benchmark::State& state) {
  stepprof::NameTable regions, counters;
  stepprof::detail::RecordParser parser(regions, counters);
  parser.set_keep_sample_indices(state.range(0) != 0);
  std::vector<stepprof::RawField> config;
  stepprof::UpdateRecord u;
  std::string unknown;
  stepprof::detail::RecordError error;
  double sink = 0;
  for (auto _ : state)
    for (const auto& l : records()) {
      if (parser.parse(std::string_view(l.data(), l.size() - 64), config, u, unknown, error) !=
          stepprof::detail::RecordKind::kUpdate)
        state.SkipWithError("a record did not parse");
      sink += u.wall_ms;
    }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text_bytes()));
}
BENCHMARK(BM_RecordParser)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
