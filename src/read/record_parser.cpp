#include "record_parser.hpp"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "stepprof/schema.hpp"

namespace stepprof::detail {
namespace {

using simdjson::error_code;
namespace od = simdjson::ondemand;
namespace s = schema;

// Context for one record: the text (for columns) and where the first error goes.
class Ctx {
 public:
  Ctx(std::string_view text, RecordError& err) : text_(text), err_(err) {}

  std::uint64_t column(const char* p) const {
    if (p >= text_.data() && p <= text_.data() + text_.size())
      return static_cast<std::uint64_t>(p - text_.data()) + 1;
    return 0;
  }
  // Records the first error and returns false, so callers can `return c.fail(...)`.
  bool fail(Problem p, const char* where, std::string msg) {
    err_.problem = p;
    err_.column = where ? column(where) : 0;
    err_.message = std::move(msg);
    return false;
  }
  bool fail_json(error_code e, const char* where, std::string_view context) {
    return fail(Problem::kMalformedJson, where,
                fmt::format("malformed JSON {}: {}", context, simdjson::error_message(e)));
  }

 private:
  std::string_view text_;
  RecordError& err_;
};

// Where the parser is in the record, or nullptr when it cannot tell.
const char* location(od::document& doc) {
  const char* at = nullptr;
  if (doc.current_location().get(at)) return nullptr;
  return at;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The value's text for messages, shortened.
std::string shown(std::string_view tok) {
  tok = trim(tok);
  if (tok.size() > 40) return fmt::format("{}...", tok.substr(0, 37));
  return std::string(tok);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_non_finite_literal(std::string_view tok) {
  for (std::string_view lit : {"NaN", "-NaN", "Infinity", "-Infinity", "+Infinity", "inf", "-inf", "nan"})
    if (starts_with(tok, lit)) return true;
  return false;
}

// Reads a finite number. `path` names the field for messages.
bool read_number(od::value v, Ctx& c, std::string_view path, double& out) {
  std::string_view tok;
  tok = trim(v.raw_json_token());
  if (tok.empty() || tok[0] == '}' || tok[0] == ']' || tok[0] == ',' || tok[0] == ':')
    return c.fail(Problem::kMalformedJson, tok.empty() ? nullptr : tok.data(),
                  fmt::format("malformed JSON at {}: expected a value, found '{}'", path,
                              tok.empty() ? std::string("end of line") : std::string(1, tok[0])));
  if (is_non_finite_literal(tok))
    return c.fail(Problem::kNonFinite, tok.data(),
                  fmt::format("{}: non-finite number {} (expected a finite number)", path, shown(tok)));
  double d = 0;
  if (auto e = v.get_double().get(d)) {
    if (e == simdjson::NUMBER_ERROR && !tok.empty() && (tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9')))
      return c.fail(Problem::kNonFinite, tok.data(),
                    fmt::format("{}: number {} is out of range (expected a finite number)", path, shown(tok)));
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("{}: expected a number, found {}", path, shown(tok)));
  }
  if (!std::isfinite(d))
    return c.fail(Problem::kNonFinite, tok.data(), fmt::format("{}: non-finite number {}", path, shown(tok)));
  out = d;
  return true;
}

// Reads an integer; an integral floating-point value such as 2.0 is accepted.
bool read_int(od::value v, Ctx& c, std::string_view path, std::int64_t& out) {
  double d = 0;
  std::string_view tok;
  tok = v.raw_json_token();
  if (!read_number(v, c, path, d)) return false;
  if (d != std::nearbyint(d) || std::fabs(d) > 9.0e18)
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: expected an integer, found {}", path, shown(tok)));
  out = static_cast<std::int64_t>(d);
  return true;
}

bool read_time(od::value v, Ctx& c, std::string_view path, double& out) {
  std::string_view tok;
  tok = v.raw_json_token();
  if (!read_number(v, c, path, out)) return false;
  if (out < 0)
    return c.fail(Problem::kNegativeTime, trim(tok).data(),
                  fmt::format("{}: negative time {} ms (times are durations, >= 0)", path, shown(tok)));
  return true;
}

bool read_count(od::value v, Ctx& c, std::string_view path, std::int64_t& out) {
  std::string_view tok;
  tok = v.raw_json_token();
  if (!read_int(v, c, path, out)) return false;
  if (out < 0)
    return c.fail(Problem::kNegativeTime, trim(tok).data(),
                  fmt::format("{}: negative count {} (expected >= 0)", path, shown(tok)));
  return true;
}

bool get_object(od::value v, Ctx& c, std::string_view path, od::object& obj) {
  std::string_view tok;
  tok = v.raw_json_token();
  if (v.get_object().get(obj))
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("{}: expected an object {{...}}, found {}", path, shown(tok)));
  return true;
}

// Parses "(8, 3154)" (Python tuple text) into dims.
bool parse_tuple(std::string_view key, std::vector<std::int64_t>& dims) {
  key = trim(key);
  if (key.size() < 2 || key.front() != '(' || key.back() != ')') return false;
  key = key.substr(1, key.size() - 2);
  dims.clear();
  while (!key.empty()) {
    key = trim(key);
    if (key.empty()) break;
    std::int64_t v = 0;
    std::size_t i = 0;
    bool neg = false;
    if (key[0] == '-') { neg = true; i = 1; }
    std::size_t digits = 0;
    for (; i < key.size() && key[i] >= '0' && key[i] <= '9'; ++i, ++digits)
      v = v * 10 + (key[i] - '0');
    if (digits == 0 || neg) return false;
    dims.push_back(v);
    key = trim(key.substr(i));
    if (!key.empty()) {
      if (key[0] != ',') return false;
      key.remove_prefix(1);
    }
  }
  return !dims.empty();
}

bool parse_int_key(std::string_view key, std::int64_t& out) {
  if (key.empty() || key.size() > 18) return false;
  out = 0;
  for (char ch : key) {
    if (ch < '0' || ch > '9') return false;
    out = out * 10 + (ch - '0');
  }
  return true;
}

// Reads `microbatches`: [{"path": str, "frames": [int], "tokens": [int], "padded_length": int}]
// (docs/log-schema.md "Per-micro-batch detail"). Every key is optional; an unknown key, a
// negative count, per-sample arrays of different lengths or a padded length below a
// sample's tokens reject the record.
bool read_microbatches(od::value v, Ctx& c, NameTable& regions, std::vector<MicroBatch>& out) {
  namespace m = s::microbatch;
  od::array list;
  std::string_view tok;
  tok = v.raw_json_token();
  if (v.get_array().get(list))
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("microbatches: expected an array of objects, found {}", shown(tok)));
  auto read_counts = [&](od::value fv, std::string_view path, std::vector<std::int64_t>& dst) {
    od::array a;
    std::string_view t;
    t = fv.raw_json_token();
    if (fv.get_array().get(a))
      return c.fail(Problem::kBadField, t.data(), fmt::format("{}: expected an array of counts, found {}", path, shown(t)));
    for (auto elem : a) {
      od::value ev;
      if (auto e = elem.get(ev)) return c.fail_json(e, nullptr, fmt::format("in {}", path));
      std::int64_t n = 0;
      if (!read_count(ev, c, path, n)) return false;
      dst.push_back(n);
    }
    return true;
  };
  std::size_t index = 0;
  for (auto elem : list) {
    const std::string where = fmt::format("microbatches[{}]", index++);
    od::value ev;
    if (auto e = elem.get(ev)) return c.fail_json(e, nullptr, fmt::format("in {}", where));
    od::object obj;
    if (!get_object(ev, c, where, obj)) return false;
    MicroBatch mb;
    for (auto f : obj) {
      std::string_view key;
      od::value fv;
      if (auto e = f.unescaped_key().get(key)) return c.fail_json(e, nullptr, fmt::format("in {}", where));
      if (auto e = f.value().get(fv)) return c.fail_json(e, nullptr, fmt::format("in {}", where));
      const std::string path = fmt::format("{}.{}", where, key);
      if (key == m::kPath) {
        std::string_view name, t;
        t = fv.raw_json_token();
        if (fv.get_string().get(name))
          return c.fail(Problem::kBadField, t.data(), fmt::format("{}: expected a region name, found {}", path, shown(t)));
        mb.path = regions.intern(name);
      } else if (key == m::kFrames || key == m::kTokens) {
        if (!read_counts(fv, path, key == m::kFrames ? mb.frames : mb.tokens)) return false;
      } else if (key == m::kPaddedLength) {
        std::int64_t n = 0;
        if (!read_count(fv, c, path, n)) return false;
        mb.padded_length = n;
      } else {
        return c.fail(Problem::kBadField, nullptr,
                      fmt::format("{}: unknown key \"{}\" (expected path, frames, tokens, padded_length)", where,
                                  shown(key)));
      }
    }
    if (!mb.frames.empty() && !mb.tokens.empty() && mb.frames.size() != mb.tokens.size())
      return c.fail(Problem::kBadField, nullptr,
                    fmt::format("{}: {} frame counts but {} token counts (one of each per sample)", where,
                                mb.frames.size(), mb.tokens.size()));
    if (mb.padded_length)
      for (const std::int64_t t : mb.tokens)
        if (t > *mb.padded_length)
          return c.fail(Problem::kBadField, nullptr,
                        fmt::format("{}: a sample has {} tokens, more than padded_length {}", where, t,
                                    *mb.padded_length));
    out.push_back(std::move(mb));
  }
  return true;
}

}  // namespace

NameTable::Id RecordParser::KeyCache::lookup(std::size_t pos, std::string_view key, NameTable& table) {
  if (pos < slots.size() && slots[pos].first == key) return slots[pos].second;
  const NameTable::Id id = table.intern(key);
  if (pos >= slots.size()) slots.resize(pos + 1);
  slots[pos] = {std::string(key), id};
  return id;
}

RecordKind RecordParser::parse(std::string_view text, std::vector<RawField>& config_fields,
                               UpdateRecord& u, std::string& unknown_type, RecordError& error) {
  Ctx c(text, error);
  od::document doc;
  simdjson::padded_string_view padded(text.data(), text.size(), text.size() + kParsePadding);
  if (auto e = parser_.iterate(padded).get(doc)) {
    c.fail_json(e, nullptr, "");
    return RecordKind::kError;
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    const char* at = nullptr;
    at = location(doc);
    if (e == simdjson::INCORRECT_TYPE)
      c.fail(Problem::kMalformedJson, at, "expected a JSON object {...} for the record");
    else
      c.fail_json(e, at, "");
    return RecordKind::kError;
  }

  // The record type decides how the other fields are read; it is usually first.
  std::string_view type;
  if (auto e = obj.find_field_unordered(s::kType).get_string().get(type)) {
    const char* at = nullptr;
    at = location(doc);
    if (e == simdjson::NO_SUCH_FIELD)
      c.fail(Problem::kMissingField, nullptr, "record has no \"type\" field (expected \"config\" or \"update\")");
    else if (e == simdjson::INCORRECT_TYPE)
      c.fail(Problem::kBadField, at, "\"type\" should be a string (\"config\" or \"update\")");
    else
      c.fail_json(e, at, "");
    return RecordKind::kError;
  }
  RecordKind kind = RecordKind::kUnknownType;
  if (type == s::kTypeConfig) kind = RecordKind::kConfig;
  else if (type == s::kTypeUpdate) kind = RecordKind::kUpdate;
  else unknown_type.assign(type);
  if (kind == RecordKind::kUnknownType) return kind;

  doc.rewind();
  if (auto e = doc.get_object().get(obj)) {
    c.fail_json(e, nullptr, "");
    return RecordKind::kError;
  }

  bool ok = true;
  if (kind == RecordKind::kConfig) {
    config_fields.clear();
    for (auto field : obj) {
      std::string_view key;
      od::value v;
      const char* at = nullptr;
      at = location(doc);
      if (auto e = field.unescaped_key().get(key)) { ok = c.fail_json(e, at, "in a key"); break; }
      if (auto e = field.value().get(v)) { ok = c.fail_json(e, at, fmt::format("at \"{}\"", key)); break; }
      if (key == s::kType) continue;
      std::string k(key);
      std::string_view raw;
      if (auto e = simdjson::to_json_string(v).get(raw)) {
        at = location(doc);
        ok = c.fail_json(e, at, fmt::format("in config field \"{}\"", k));
        break;
      }
      config_fields.push_back({std::move(k), std::string(trim(raw))});
    }
  } else {
    ok = parse_update(doc, obj, text, u, error);
  }
  // After the whole object, the document must be at its end (one record per line).
  if (const char* at = nullptr; ok && !doc.current_location().get(at))
    ok = c.fail(Problem::kMalformedJson, at, "unexpected text after the end of the record");
  return ok ? kind : RecordKind::kError;
}

bool RecordParser::parse_update(od::document& doc, od::object& obj, std::string_view text,
                                UpdateRecord& u, RecordError& error) {
  Ctx c(text, error);
  u.rank.reset();
  u.step = 0;
  u.wall_ms = 0;
  u.regions.clear();
  u.counters.clear();
  u.frame_histogram.clear();
  u.input_shapes.clear();
  u.sample_indices.clear();
  u.padding_fraction.reset();
  u.microbatches.clear();
  u.recorder_errors.clear();
  u.extra.clear();

  bool have_step = false, have_wall = false;
  auto slot = [&](NameTable::Id id) -> RegionSample& {
    if (id >= slot_of_region_.size()) slot_of_region_.resize(id + 1, -1);
    std::int32_t& s = slot_of_region_[id];
    if (s < 0) {
      s = static_cast<std::int32_t>(u.regions.size());
      u.regions.push_back(RegionSample{id, {}, {}, {}, {}});
    }
    return u.regions[static_cast<std::size_t>(s)];
  };
  auto clear_slots = [&] {
    for (const auto& r : u.regions) slot_of_region_[r.region] = -1;
  };

  // Reads one per-region map (`cuda_stream_ms`, `cpu_call_ms`, `calls`, `parents`).
  auto region_map = [&](od::value v, std::string_view field, KeyCache& cache, auto&& take) -> bool {
    od::object m;
    if (!get_object(v, c, field, m)) return false;
    std::size_t pos = 0;
    for (auto f : m) {
      std::string_view key;
      od::value fv;
      const char* at = nullptr;
      at = location(doc);
      if (auto e = f.unescaped_key().get(key)) return c.fail_json(e, at, fmt::format("in {}", field));
      if (auto e = f.value().get(fv)) return c.fail_json(e, at, fmt::format("in {}", field));
      const NameTable::Id id = cache.lookup(pos++, key, regions_);
      if (!take(fv, slot(id), key)) return false;
    }
    return true;
  };

  bool ok = true;
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    const char* at = nullptr;
    at = location(doc);
    if (auto e = field.unescaped_key().get(key)) { ok = c.fail_json(e, at, "in a key"); break; }
    if (auto e = field.value().get(v)) { ok = c.fail_json(e, at, fmt::format("at \"{}\"", key)); break; }

    if (key == s::kType) {
      continue;
    } else if (key == s::kRank) {
      std::int64_t r = 0;
      ok = read_int(v, c, key, r);
      u.rank = r;
    } else if (key == s::kStep) {
      ok = read_int(v, c, key, u.step);
      have_step = true;
    } else if (key == s::kWallMs) {
      ok = read_time(v, c, key, u.wall_ms);
      have_wall = true;
    } else if (key == s::kCudaStreamMs || key == s::kCpuCallMs) {
      const bool device = key == s::kCudaStreamMs;
      ok = region_map(v, key, device ? device_keys_ : host_keys_,
                      [&](od::value fv, RegionSample& r, std::string_view name) {
                        auto& dst = device ? r.device_ms : r.host_ms;
                        const std::string path = fmt::format("{}.{}", device ? s::kCudaStreamMs : s::kCpuCallMs, name);
                        if (dst) return c.fail(Problem::kBadField, nullptr, fmt::format("{}: region listed twice", path));
                        double t = 0;
                        if (!read_time(fv, c, path, t)) return false;
                        dst = t;
                        return true;
                      });
    } else if (key == s::kCalls) {
      ok = region_map(v, key, calls_keys_, [&](od::value fv, RegionSample& r, std::string_view name) {
        const std::string path = fmt::format("calls.{}", name);
        if (r.calls) return c.fail(Problem::kBadField, nullptr, fmt::format("{}: region listed twice", path));
        std::int64_t n = 0;
        if (!read_count(fv, c, path, n)) return false;
        r.calls = n;
        return true;
      });
    } else if (key == s::kParents) {
      ok = region_map(v, key, parent_keys_, [&](od::value fv, RegionSample& r, std::string_view name) {
        std::string_view tok;
        tok = fv.raw_json_token();
        if (fv.is_null()) {
          r.parent = kTopLevel;
          return true;
        }
        std::string_view parent;
        if (fv.get_string().get(parent))
          return c.fail(Problem::kBadField, tok.data(),
                        fmt::format("parents.{}: expected a region name or null, found {}", name, shown(tok)));
        r.parent = regions_.intern(parent);
        return true;
      });
    } else if (key == s::kCounts) {
      od::object m;
      ok = get_object(v, c, key, m);
      std::size_t pos = 0;
      for (auto f : m) {
        if (!ok) break;
        std::string_view name;
        od::value fv;
        if (auto e = f.unescaped_key().get(name)) { ok = c.fail_json(e, nullptr, "in counts"); break; }
        if (auto e = f.value().get(fv)) { ok = c.fail_json(e, nullptr, "in counts"); break; }
        double x = 0;
        ok = read_number(fv, c, fmt::format("counts.{}", name), x);
        u.counters.push_back({counter_keys_.lookup(pos++, name, counters_), x});
      }
    } else if (key == s::kFrameHistogram) {
      od::object m;
      ok = get_object(v, c, key, m);
      for (auto f : m) {
        if (!ok) break;
        std::string_view name;
        od::value fv;
        if (auto e = f.unescaped_key().get(name)) { ok = c.fail_json(e, nullptr, "in frame_histogram"); break; }
        if (auto e = f.value().get(fv)) { ok = c.fail_json(e, nullptr, "in frame_histogram"); break; }
        std::int64_t frames = 0, samples = 0;
        if (!parse_int_key(name, frames)) {
          ok = c.fail(Problem::kBadField, nullptr,
                      fmt::format("frame_histogram: key \"{}\" should be a frame count (a non-negative integer)", shown(name)));
          break;
        }
        ok = read_count(fv, c, fmt::format("frame_histogram.{}", name), samples);
        u.frame_histogram.emplace_back(frames, samples);
      }
    } else if (key == s::kInputShapes) {
      od::object m;
      ok = get_object(v, c, key, m);
      for (auto f : m) {
        if (!ok) break;
        std::string_view name;
        od::value fv;
        if (auto e = f.unescaped_key().get(name)) { ok = c.fail_json(e, nullptr, "in input_shapes"); break; }
        if (auto e = f.value().get(fv)) { ok = c.fail_json(e, nullptr, "in input_shapes"); break; }
        InputShape shape;
        if (!parse_tuple(name, shape.dims)) {
          ok = c.fail(Problem::kBadField, nullptr,
                      fmt::format("input_shapes: key \"{}\" should be a shape such as \"(8, 3154)\"", shown(name)));
          break;
        }
        ok = read_count(fv, c, fmt::format("input_shapes.{}", name), shape.microbatches);
        u.input_shapes.push_back(std::move(shape));
      }
    } else if (key == s::kSampleIndices) {
      od::array a;
      std::string_view tok;
      tok = v.raw_json_token();
      if (v.get_array().get(a)) {
        ok = c.fail(Problem::kBadField, tok.data(),
                    fmt::format("sample_indices: expected an array of integers, found {}", shown(tok)));
        break;
      }
      for (auto elem : a) {
        od::value ev;
        if (auto e = elem.get(ev)) { ok = c.fail_json(e, nullptr, "in sample_indices"); break; }
        std::int64_t idx = 0;
        if (!(ok = read_int(ev, c, "sample_indices[]", idx))) break;
        u.sample_indices.push_back(idx);
      }
    } else if (key == s::kPaddingFraction) {
      std::string_view tok;
      tok = v.raw_json_token();
      double p = 0;
      ok = read_number(v, c, key, p);
      if (ok && (p < 0 || p > 1))
        ok = c.fail(Problem::kBadField, trim(tok).data(),
                    fmt::format("padding_fraction: {} is outside [0, 1]", shown(tok)));
      u.padding_fraction = p;
    } else if (key == s::kMicrobatches) {
      ok = read_microbatches(v, c, regions_, u.microbatches);
    } else if (key == s::kRecorderErrors) {
      od::object m;
      ok = get_object(v, c, key, m);
      for (auto f : m) {
        if (!ok) break;
        std::string_view name;
        od::value fv;
        if (auto e = f.unescaped_key().get(name)) { ok = c.fail_json(e, nullptr, "in recorder_errors"); break; }
        if (auto e = f.value().get(fv)) { ok = c.fail_json(e, nullptr, "in recorder_errors"); break; }
        std::int64_t n = 0;
        ok = read_count(fv, c, fmt::format("recorder_errors.{}", name), n);
        u.recorder_errors.emplace_back(std::string(name), n);
      }
    } else {
      std::string k(key);
      std::string_view raw;
      if (auto e = simdjson::to_json_string(v).get(raw)) {
        ok = c.fail_json(e, at, fmt::format("in field \"{}\"", k));
        break;
      }
      u.extra.push_back({std::move(k), std::string(trim(raw))});
    }
    if (!ok) break;
  }
  clear_slots();
  if (!ok) return false;
  if (!have_step) return c.fail(Problem::kMissingField, nullptr, "update record has no \"step\" field");
  if (!have_wall) return c.fail(Problem::kMissingField, nullptr, "update record has no \"wall_ms\" field");
  return true;
}

}  // namespace stepprof::detail
