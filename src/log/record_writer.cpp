#include "stepprof/record_writer.hpp"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "stepprof/schema.hpp"

namespace stepprof {
namespace {

using Json = nlohmann::ordered_json;

Json raw_value(const std::string& text) {
  auto v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? Json(text) : v;
}

// Counters are counts: write integral values as JSON integers, as the real log does.
Json number(double v) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: every integer up to it is a double
  if (std::isfinite(v) && v == std::nearbyint(v) && std::fabs(v) <= kExact)
    return Json(static_cast<std::int64_t>(v));
  return Json(v);
}

std::string tuple_text(const std::vector<std::int64_t>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

std::string key(std::string_view k) { return std::string(k); }

}  // namespace

std::string config_to_json(const RunConfig& config) {
  Json j = Json::object();
  j[key(schema::kType)] = schema::kTypeConfig;
  for (const auto& f : config.fields) {
    if (f.key == schema::kType) continue;
    j[f.key] = raw_value(f.json);
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string update_to_json(const UpdateRecord& u, const NameTable& regions,
                           const NameTable& counters) {
  namespace s = schema;
  Json j = Json::object();
  j[key(s::kType)] = s::kTypeUpdate;
  if (u.rank) j[key(s::kRank)] = *u.rank;
  j[key(s::kStep)] = u.step;
  j[key(s::kWallMs)] = u.wall_ms;

  Json device = Json::object(), host = Json::object(), calls = Json::object(),
       parents = Json::object();
  for (const auto& r : u.regions) {
    const std::string name(regions.name(r.region));
    if (r.device_ms) device[name] = *r.device_ms;
    if (r.host_ms) host[name] = *r.host_ms;
    if (r.calls) calls[name] = *r.calls;
    if (r.parent)
      parents[name] = *r.parent == kTopLevel ? Json(nullptr) : Json(std::string(regions.name(*r.parent)));
  }
  if (!device.empty()) j[key(s::kCudaStreamMs)] = std::move(device);
  if (!host.empty()) j[key(s::kCpuCallMs)] = std::move(host);
  if (!calls.empty()) j[key(s::kCalls)] = std::move(calls);
  if (!parents.empty()) j[key(s::kParents)] = std::move(parents);

  if (!u.counters.empty()) {
    Json c = Json::object();
    for (const auto& ctr : u.counters) c[std::string(counters.name(ctr.name))] = number(ctr.value);
    j[key(s::kCounts)] = std::move(c);
  }
  if (!u.frame_histogram.empty()) {
    Json h = Json::object();
    for (const auto& [frames, samples] : u.frame_histogram) h[std::to_string(frames)] = samples;
    j[key(s::kFrameHistogram)] = std::move(h);
  }
  if (!u.input_shapes.empty()) {
    Json h = Json::object();
    for (const auto& shape : u.input_shapes) h[tuple_text(shape.dims)] = shape.microbatches;
    j[key(s::kInputShapes)] = std::move(h);
  }
  if (!u.sample_indices.empty()) j[key(s::kSampleIndices)] = u.sample_indices;
  if (u.padding_fraction) j[key(s::kPaddingFraction)] = *u.padding_fraction;
  if (!u.microbatches.empty()) {
    Json list = Json::array();
    for (const auto& mb : u.microbatches) {
      Json m = Json::object();
      if (mb.path) m[key(s::microbatch::kPath)] = std::string(regions.name(*mb.path));
      if (!mb.frames.empty()) m[key(s::microbatch::kFrames)] = mb.frames;
      if (!mb.tokens.empty()) m[key(s::microbatch::kTokens)] = mb.tokens;
      if (mb.padded_length) m[key(s::microbatch::kPaddedLength)] = *mb.padded_length;
      list.push_back(std::move(m));
    }
    j[key(s::kMicrobatches)] = std::move(list);
  }
  if (!u.recorder_errors.empty()) {
    Json e = Json::object();
    for (const auto& [kind, n] : u.recorder_errors) e[kind] = n;
    j[key(s::kRecorderErrors)] = std::move(e);
  }
  for (const auto& f : u.extra) j[f.key] = raw_value(f.json);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string json_string(std::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string as_written(std::string_view text) {
  return Json::parse(json_string(text)).get<std::string>();
}

std::string json_string_map(const std::vector<std::pair<std::string, std::string>>& entries) {
  Json j = Json::object();
  for (const auto& [k, v] : entries) j[k] = v;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace stepprof
