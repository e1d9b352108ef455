#include "stepprof/record_writer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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

// Adds `name: value` to the object `obj`. With `unique`, the caller knows `name` is not
// there yet, and the member is appended without looking: nlohmann's ordered_map looks
// for a key linearly, which made a record of R regions cost O(R^2) (2 ms at the
// recorder's 1,024 regions, on the training loop's thread). Otherwise a repeated name
// replaces the earlier value, where the first one stood.
void put(Json& obj, bool unique, std::string name, Json value) {
  if (!unique) {
    obj[std::move(name)] = std::move(value);
    return;
  }
  auto& members = static_cast<Json::object_t::Container&>(obj.get_ref<Json::object_t&>());
  members.emplace_back(std::move(name), std::move(value));
}

// True when no id is listed twice (a record lists a name at most once; a hand-built
// one may not). O(n log n).
template <class Items, class Id>
bool ids_unique(const Items& items, Id id) {
  std::vector<std::uint32_t> ids;
  ids.reserve(items.size());
  for (const auto& item : items) ids.push_back(id(item));
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) == ids.end();
}

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

// `j` as one line of JSON text appended to `out` (invalid UTF-8 replaced), as
// Json::dump(-1, ' ', false, replace) writes it, without a string of its own.
// (nlohmann::json's serializer and output adapter are in its detail namespace; dump()
// is built on the same two.)
void dump_to(const Json& j, std::string& out) {
  nlohmann::detail::serializer<Json> ser(nlohmann::detail::output_adapter<char, std::string>(out), ' ',
                                         Json::error_handler_t::replace);
  ser.dump(j, /*pretty_print=*/false, /*ensure_ascii=*/false, /*indent_step=*/0);
}

std::string update_to_json(const UpdateRecord& u, const NameTable& regions,
                           const NameTable& counters) {
  std::string out;
  append_update_json(u, regions, counters, out);
  return out;
}

void append_update_json(const UpdateRecord& u, const NameTable& regions, const NameTable& counters,
                        std::string& out) {
  namespace s = schema;
  Json j = Json::object();
  j[key(s::kType)] = s::kTypeUpdate;
  if (u.rank) j[key(s::kRank)] = *u.rank;
  j[key(s::kStep)] = u.step;
  j[key(s::kWallMs)] = u.wall_ms;

  Json device = Json::object(), host = Json::object(), calls = Json::object(),
       parents = Json::object();
  const bool unique_regions = ids_unique(u.regions, [](const RegionSample& r) { return r.region; });
  for (const auto& r : u.regions) {
    const std::string name(regions.name(r.region));
    if (r.device_ms) put(device, unique_regions, name, *r.device_ms);
    if (r.host_ms) put(host, unique_regions, name, *r.host_ms);
    if (r.calls) put(calls, unique_regions, name, *r.calls);
    if (r.parent)
      put(parents, unique_regions, name,
          *r.parent == kTopLevel ? Json(nullptr) : Json(std::string(regions.name(*r.parent))));
  }
  if (!device.empty()) j[key(s::kCudaStreamMs)] = std::move(device);
  if (!host.empty()) j[key(s::kCpuCallMs)] = std::move(host);
  if (!calls.empty()) j[key(s::kCalls)] = std::move(calls);
  if (!parents.empty()) j[key(s::kParents)] = std::move(parents);

  if (!u.counters.empty()) {
    Json c = Json::object();
    const bool unique = ids_unique(u.counters, [](const Counter& x) { return x.name; });
    for (const auto& ctr : u.counters) put(c, unique, std::string(counters.name(ctr.name)), number(ctr.value));
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
  // The fields after the sample indices, in an object of their own: the indices (millions
  // of them in some jobs) are written as text between the two, never as a JSON array.
  // nlohmann's destructor of an array allocates a stack as large as the array, and under a
  // memory limit that allocation threw inside a noexcept destructor while the exception of
  // a failed allocation unwound: std::terminate, the training job killed (a helper: 8
  // million indices under `ulimit -v 400000`), where end_update() returns kErrNoMemory.
  Json tail = Json::object();
  if (u.padding_fraction) tail[key(s::kPaddingFraction)] = *u.padding_fraction;
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
    tail[key(s::kMicrobatches)] = std::move(list);
  }
  if (!u.recorder_errors.empty()) {
    Json e = Json::object();
    for (const auto& [kind, n] : u.recorder_errors) e[kind] = n;
    tail[key(s::kRecorderErrors)] = std::move(e);
  }
  // (A field of the job's own that repeats a field written above replaces it there, the
  // sample indices' place included.)
  bool indices_replaced = false;
  for (const auto& f : u.extra) {
    const bool indices = f.key == s::kSampleIndices && !u.sample_indices.empty();
    indices_replaced = indices_replaced || indices;
    (j.contains(f.key) || indices ? j : tail)[f.key] = raw_value(f.json);
  }
  dump_to(j, out);  // {"type":...} (never empty)
  if (!u.sample_indices.empty() && !indices_replaced) {
    out.pop_back();  // its '}'
    out += ",\"";
    out += s::kSampleIndices;
    out += "\":[";
    char digits[24];
    for (std::size_t i = 0; i < u.sample_indices.size(); ++i) {
      if (i) out += ',';
      const auto r = std::to_chars(digits, digits + sizeof digits, u.sample_indices[i]);
      out.append(digits, r.ptr);
    }
    out += "]}";
  }
  if (!tail.empty()) {
    out.pop_back();  // the '}' before it
    const std::size_t at = out.size();
    dump_to(tail, out);
    out[at] = ',';  // (its '{')
  }
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
