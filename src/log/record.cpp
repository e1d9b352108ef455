#include "stepprof/record.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <locale.h>
#include <cstdlib>
#include <limits>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "stepprof/dataset.hpp"
#include "stepprof/diagnostics.hpp"
#include "stepprof/schema.hpp"
#include "../util/json_brackets.hpp"
#include "json_grammar.hpp"

namespace stepprof {

const RawField* RunConfig::find(std::string_view key) const {
  for (const auto& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

namespace {

void note(std::vector<std::string>* problems, std::string msg) {
  if (problems) problems->push_back(std::move(msg));
}

void take_int(const RawField& f, std::optional<std::int64_t>& out,
              std::vector<std::string>* problems) {
  auto v = nlohmann::json::parse(f.json, nullptr, /*allow_exceptions=*/false);
  if (v.is_null()) return;  // not known (Python's None): as if not given
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    // (a seed from torch.seed() may be up to 2^64 - 1: kept as written, not used)
    if (f.key != schema::kSeed)
      note(problems, fmt::format("config field \"{}\" is out of range ({}; at most 2^63 - 1)", f.key, f.json));
    return;
  }
  if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    // A whole number written as a float ("8.0"), or an integer too long for 64 bits, which
    // the JSON parser reads as a float ("world_size": 7777...74, 73 digits, from a fuzzer):
    // converting a double outside the int64 range is undefined behaviour, so it is checked
    // first. 2^63 is exact in a double; every double below it converts.
    const double d = v.get<double>();
    constexpr double kTwo63 = 9223372036854775808.0;
    const bool seed = f.key == schema::kSeed;  // (up to 2^64 - 1, as torch.seed() gives)
    if (!(d >= -kTwo63 && d < (seed ? 2 * kTwo63 : kTwo63)))
      note(problems, fmt::format("config field \"{}\" is out of range ({}; an integer from -2^63 to {})", f.key,
                                 f.json, seed ? "2^64 - 1" : "2^63 - 1"));
    else if (d == std::trunc(d) && std::fabs(d) >= 0x1p53)  // (9007199254740993.0 reads as ...992)
      note(problems, fmt::format("config field \"{}\" is an integer written as a floating-point number of 2^53 "
                                 "or more ({}), which cannot be read exactly; write it without a fraction or "
                                 "exponent",
                                 f.key, f.json));
    else if (d == std::trunc(d))
      out = static_cast<std::int64_t>(d);
    else
      note(problems, fmt::format("config field \"{}\" should be an integer, found {}", f.key, f.json));
  } else if (const auto* text = v.get_ptr<const std::string*>();
             text && text->size() > (text->starts_with('-') ? 1u : 0u) &&
             text->find_first_not_of("0123456789", text->starts_with('-') ? 1 : 0) == std::string::npos) {
    // An integer written as text: beyond 64 bits (the Python recorder's config keeps such
    // a value as text rather than let a JSON reader round it to a double), or quoted.
    std::int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), parsed);
    note(problems, ec == std::errc::result_out_of_range
                       ? fmt::format("config field \"{}\" should be an integer, found the text {}: an integer "
                                     "beyond the 64-bit range, written as text",
                                     f.key, f.json)
                       : fmt::format("config field \"{}\" should be an integer, found the text {} (write the "
                                     "number without quotes)",
                                     f.key, f.json));
  } else {
    note(problems, fmt::format("config field \"{}\" should be an integer, found {}", f.key, f.json));
  }
}

void take_string(const RawField& f, std::optional<std::string>& out,
                 std::vector<std::string>* problems) {
  auto v = nlohmann::json::parse(f.json, nullptr, false);
  if (v.is_null()) return;  // not known: as if not given
  if (v.is_string()) {
    out = v.get<std::string>();
  } else {
    note(problems, fmt::format("config field \"{}\" should be a string, found {}", f.key, f.json));
  }
}

// The deepest nesting of arrays and objects in JSON text (strings skipped).
std::size_t nesting_depth(std::string_view json) {
  std::size_t depth = 0, deepest = 0;
  detail::find_bracket(json, [&](std::size_t, char ch) {
    if (ch == '[' || ch == '{') deepest = std::max(deepest, ++depth);
    else if (depth > 0) --depth;
    return false;
  });
  return deepest;
}

// A config value stepprof keeps verbatim must be one JSON value that other tools (and
// stepprof's JSON report, which writes it out) can read back.
std::string check_value(std::string_view json) {
  if (const auto d = nesting_depth(json); d > kMaxConfigDepth)
    return fmt::format("is nested {} levels deep (more than {})", d, kMaxConfigDepth);
  if (!nlohmann::json::accept(json.begin(), json.end())) {
    std::string lower(json);
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.find("nan") != std::string::npos || lower.find("inf") != std::string::npos)
      return "holds a non-finite number (NaN or Infinity), which JSON does not allow (Python's json writes one for "
             "a non-finite float)";
    try {
      [[maybe_unused]] const auto parsed = nlohmann::json::parse(json.begin(), json.end());  // (for its exception)
    } catch (const nlohmann::json::exception& e) {
      if (e.id == 406) return fmt::format("holds a number out of range ({})", json);  // number overflow
    }
    return "is not valid JSON";
  }
  return {};
}

}  // namespace

std::optional<std::string> repeated_json_key(std::string_view json) {
  if (json.find('{') == std::string_view::npos) return std::nullopt;  // (no object, no key)
  auto problem = detail::json_value_problem(json);
  if (!problem) return std::nullopt;
  return std::move(problem->repeated_key);
}

std::string canonical_json(std::string_view json) {
  const auto v = nlohmann::json::parse(json, nullptr, false);
  if (v.is_discarded()) return std::string(json);
  // A number beyond 64-bit integers is parsed as a double, and two such numbers could
  // compare equal: such text is compared as written.
  bool inexact = false;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& x) {
    if (x.is_number_float() && std::fabs(x.get<double>()) >= 9007199254740992.0) inexact = true;
    else if (x.is_structured())
      for (const auto& e : x) walk(e);
  };
  walk(v);
  if (inexact) return std::string(json);
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string check_region_map(std::string_view key, std::string_view json) {
  namespace s = schema;
  std::string problems;  // every bad entry, "; "-separated
  auto add = [&](std::string p) { problems += (problems.empty() ? "" : "; ") + std::move(p); };
  std::vector<std::string> keys;  // a region given twice would keep only its last value
  auto each = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) add(fmt::format("region \"{}\" is given twice", k));
      keys.push_back(k);
    }
    return true;
  };
  auto v = nlohmann::json::parse(json.begin(), json.end(), each, false);
  if (!v.is_object())
    return fmt::format("should be an object {{region: {}}}, found {}", key == s::kRegionRoles ? "role" : "group", json);
  for (auto& [region, value] : v.items()) {
    if (!value.is_string()) {
      add(fmt::format("region \"{}\" should have a string, found {}", region,
                      value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
      continue;
    }
    if (key != s::kRegionRoles) continue;
    const auto& role = value.get_ref<const std::string&>();
    if (std::find(s::kRegionRoleNames.begin(), s::kRegionRoleNames.end(), role) == s::kRegionRoleNames.end())
      add(fmt::format("region \"{}\" has the unknown role \"{}\" (known: communication or comm, data, "
                      "optimizer, background)",
                      region, role));
  }
  return problems;
}

RunConfig make_config(std::vector<RawField> fields, std::vector<std::string>* problems) {
  namespace s = schema;
  RunConfig c;
  c.fields = std::move(fields);
  std::erase_if(c.fields, [&](const RawField& f) {
    auto p = check_value(f.json);
    // (The region maps say which region is given twice themselves, and keep the rest.)
    if (p.empty() && f.key != schema::kRegionRoles && f.key != schema::kRegionAlternatives)
      if (const auto k = repeated_json_key(f.json))
        p = fmt::format("gives the key \"{}\" twice in one object (which value is meant?)", printable(*k));
    if (!p.empty()) note(problems, fmt::format("config field \"{}\" {}; it is left out", f.key, p));
    return !p.empty();
  });
  for (const auto& f : c.fields) {
    if (f.key == s::kRank) take_int(f, c.rank, problems);
    else if (f.key == s::kWorldSize) take_int(f, c.world_size, problems);
    else if (f.key == s::kMicroBatch) take_int(f, c.micro_batch, problems);
    else if (f.key == s::kAccumulation) take_int(f, c.accumulation, problems);
    else if (f.key == s::kGlobalBatch) take_int(f, c.global_batch, problems);
    else if (f.key == s::kSeed) take_int(f, c.seed, problems);
    else if (f.key == s::kFirstStep) take_int(f, c.first_step, problems);
    else if (f.key == s::kLastStep) take_int(f, c.last_step, problems);
    else if (f.key == s::kMaxSteps) take_int(f, c.max_steps, problems);
    else if (f.key == s::kSchema) take_int(f, c.schema, problems);
    else if (f.key == s::kModel) take_string(f, c.model, problems);
    else if (f.key == s::kRunId) take_string(f, c.run_id, problems);
    else if (f.key == s::kClock) take_string(f, c.clock, problems);
    else if (f.key == s::kDeviceTiming) take_string(f, c.device_timing, problems);
    else if (f.key == s::kRegionRoles || f.key == s::kRegionAlternatives) {
      if (auto p = check_region_map(f.key, f.json); !p.empty())
        note(problems, fmt::format("config field \"{}\": {}; {} not used", f.key, p,
                                   p.find("; ") == std::string::npos ? "that entry is" : "those entries are"));
    }
  }
  // Batch sizes count samples and micro-batches: below 1 they would make every rate and
  // the global batch nonsense (micro_batch -1: "global batch -2"), and their product
  // must not overflow (2^62 x 4 printed "global batch 0").
  constexpr std::int64_t kMaxBatch = std::int64_t{1} << 32;
  const std::pair<std::string_view, std::optional<std::int64_t>*> batch_sizes[] = {
      {s::kMicroBatch, &c.micro_batch}, {s::kAccumulation, &c.accumulation}, {s::kGlobalBatch, &c.global_batch}};
  for (const auto& [key, value] : batch_sizes)
    if (*value && (**value < 1 || **value > kMaxBatch)) {
      note(problems, fmt::format("config field \"{}\" should be 1 to 2^32, found {}; it is not used", key, **value));
      value->reset();
    }
  // Ranks are numbered 0 .. world_size - 1. A negative one is not used: the reader then
  // takes the file's rank from its update records (file_reader.cpp).
  if (c.rank && *c.rank < 0) {
    note(problems, fmt::format("config field \"rank\" is negative ({}); it is not used (the rank is then that of the "
                               "file's first update record after it that names one)",
                               *c.rank));
    c.rank.reset();
  }
  // The window the job was to run: a last step before the first (a swapped pair, a typo)
  // would give every "stopped early?" and stride check a window that cannot be.
  if (c.first_step && c.last_step && *c.last_step < *c.first_step) {
    note(problems, fmt::format("config fields \"first_step\" ({}) and \"last_step\" ({}): the last step is before "
                               "the first; neither is used",
                               *c.first_step, *c.last_step));
    c.first_step.reset();
    c.last_step.reset();
  }
  if (c.world_size && *c.world_size > kMaxWorldSize) {
    note(problems, fmt::format("config field \"world_size\" is {}, above the {} ranks stepprof reads; it is not used",
                               *c.world_size, kMaxWorldSize));
    c.world_size.reset();
  }
  if (c.world_size && *c.world_size < 1) {
    note(problems, fmt::format("config field \"world_size\" should be at least 1, found {}; it is not used",
                               *c.world_size));
    c.world_size.reset();
  } else if (c.rank && c.world_size && *c.rank >= *c.world_size)
    note(problems, fmt::format("config field \"rank\" ({}) is not below \"world_size\" ({}): ranks are numbered 0 to "
                               "world_size - 1; its records are still read as rank {} (is world_size wrong?)",
                               *c.rank, *c.world_size, *c.rank));
  return c;
}

bool parse_object_fields(std::string_view json_object, std::vector<RawField>& out, std::string& error) {
  out.clear();
  // Written back with nlohmann's recursive dump(): 100,000 levels overflowed the stack
  // (a segfault in the training job's open()). The object is one level; its values may
  // hold kMaxConfigDepth more.
  if (const auto d = nesting_depth(json_object); d > kMaxConfigDepth + 1) {
    error = fmt::format("a value is nested {} levels deep (more than {})", d - 1, kMaxConfigDepth);
    return false;
  }
  // ordered_json keeps the key order; duplicates are found on the way in, in every object
  // (the value written back would keep one of them: `region_roles` {"x": "data", "x":
  // "optimizer"} became {"x": "optimizer"} without a word).
  std::vector<std::vector<std::string>> keys;  // of each object open, outermost first
  std::string dup;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::ordered_json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      auto& here = keys.back();
      if (dup.empty() && std::find(here.begin(), here.end(), k) != here.end())
        dup = depth == 1 ? fmt::format("key \"{}\" appears twice", k)
                         : fmt::format("key \"{}\" appears twice in an object of field \"{}\"", k, keys.front().back());
      here.push_back(k);
    }
    return true;
  };
  auto j = nlohmann::ordered_json::parse(json_object.begin(), json_object.end(), check, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = "not valid JSON";
    return false;
  }
  if (!j.is_object()) {
    error = fmt::format("expected a JSON object {{...}}, found {}", j.type_name());
    return false;
  }
  if (!dup.empty()) {
    error = dup;
    return false;
  }
  for (auto& [k, v] : j.items()) out.push_back({k, v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  return true;
}

// Records usually list their regions (and counters) in the order the names were
// first seen, so the entry for an id is most often at that index: try it first.
const RegionSample* UpdateRecord::region(NameTable::Id id) const {
  if (id < regions.size() && regions[id].region == id) return &regions[id];
  for (const auto& r : regions)
    if (r.region == id) return &r;
  return nullptr;
}

std::optional<double> UpdateRecord::counter(NameTable::Id id) const {
  if (id < counters.size() && counters[id].name == id) return counters[id].value;
  for (const auto& c : counters)
    if (c.name == id) return c.value;
  return std::nullopt;
}

const RawField* UpdateRecord::find_extra(std::string_view key) const {
  for (const auto& f : extra)
    if (f.key == key) return &f;
  return nullptr;
}

std::optional<double> json_number_value(std::string_view json) {
  double v = 0;
  const char* end = json.data() + json.size();
  const auto [ptr, ec] = std::from_chars(json.data(), end, v);
  if (ptr != end) return std::nullopt;
  if (ec == std::errc()) return v;
  if (ec != std::errc::result_out_of_range) return std::nullopt;
  // Too large or too small for a double: strtod (in the C locale, whatever the process's)
  // says which, ERANGE with HUGE_VAL for an overflow and 0 or a subnormal for an underflow.
  static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", locale_t{});
  if (!c_locale) return std::nullopt;
  const std::string text(json);
  v = ::strtod_l(text.c_str(), nullptr, c_locale);
  return std::fabs(v) < std::numeric_limits<double>::min() ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> UpdateRecord::extra_number(std::string_view key) const {
  const RawField* f = find_extra(key);
  if (!f) return std::nullopt;
  return json_number_value(f->json);
}

std::size_t Dataset::update_count() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.updates.size();
  return n;
}

}  // namespace stepprof
