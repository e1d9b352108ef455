#include "kineto_event.hpp"
#include "json_error.hpp"
#include "ondemand_alloc.hpp"
#include "stepprof/schema.hpp"
#include "../util/text.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace stepprof::detail {
namespace {

namespace od = simdjson::ondemand;

// True when the raw key (the bytes after its opening quote) is exactly `lit`.
bool key_is(const char* raw, std::string_view lit) {
  return std::memcmp(raw, lit.data(), lit.size()) == 0 && raw[lit.size()] == '"';
}

// FNV-1a: a stable integer for string process / thread ids such as "Spans".
std::int64_t hash_id(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return static_cast<std::int64_t>(h | (1ull << 62));
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

// Kineto's categories; older traces spell some of them differently ("Kernel", "Runtime").
EventKind kind_of_category(std::string_view cat) {
  if (iequal(cat, "cpu_op") || iequal(cat, "operator")) return EventKind::kCpuOp;
  if (iequal(cat, "user_annotation")) return EventKind::kUserAnnotation;
  if (iequal(cat, "gpu_user_annotation")) return EventKind::kGpuAnnotation;
  if (iequal(cat, "cuda_runtime") || iequal(cat, "cuda_driver") || iequal(cat, "runtime")) return EventKind::kLaunch;
  if (iequal(cat, "kernel")) return EventKind::kKernel;
  if (iequal(cat, "gpu_memcpy") || iequal(cat, "memcpy")) return EventKind::kMemcpy;
  if (iequal(cat, "gpu_memset") || iequal(cat, "memset")) return EventKind::kMemset;
  if (iequal(cat, "ac2g") || iequal(cat, "async_cpu_to_gpu")) return EventKind::kFlowStart;
  return EventKind::kOther;
}

std::string_view trim_token(std::string_view t) {
  while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

class Fields {
 public:
  Fields(std::string_view text, EventError& err) : text_(text), err_(err) {}
  bool fail(const char* at, std::string msg, Problem p = Problem::kMalformedJson) {
    err_.problem = p;
    err_.offset = at && at >= text_.data() && at <= text_.data() + text_.size()
                      ? static_cast<std::size_t>(at - text_.data())
                      : 0;
    err_.message = std::move(msg);
    return false;
  }
  bool fail_json(simdjson::error_code e, const char* at, std::string_view what) {
    std::optional<std::size_t> fault;
    const std::string why = describe_json_error(e, text_, fault);
    if (fault) at = text_.data() + *fault;
    return fail(at, fmt::format("malformed JSON in {}: {}", what, why));
  }

 private:
  std::string_view text_;
  EventError& err_;
};

// An integer field (pid, tid, id, correlation, stream, device); strings are hashed.
bool read_id(od::value v, Fields& f, std::string_view what, std::int64_t& out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return f.fail_json(e, nullptr, what);
  if (t == od::json_type::string) {
    std::string_view s;
    if (auto e = v.get_string().get(s)) return f.fail_json(e, nullptr, what);
    out = hash_id(s);
    return true;
  }
  if (t != od::json_type::number) {
    std::string_view raw = trim_token(v.raw_json_token());
    return f.fail(raw.data(), fmt::format("\"{}\" should be a number or a string, found {}", what, prefix_at_character(raw, 40)),
                  Problem::kBadField);
  }
  std::int64_t i = 0;
  if (!v.get_int64().get(i)) {
    out = i;
    return true;
  }
  double d = 0;
  const std::string_view raw = trim_token(v.raw_json_token());
  const auto e = v.get_double().get(d);
  if (e && !json_number_syntax(raw)) return f.fail_json(e, nullptr, what);
  if (e || !(std::fabs(d) < 9.0e18)) {  // (e: a JSON number beyond a double's range)
    return f.fail(raw.data(), fmt::format("\"{}\" is out of range: {}", what, prefix_at_character(raw, 40)), Problem::kBadField);
  }
  // (1.5 and 1.7 were both id 1: a kernel joined another launch. From 2^52 on a double
  // holds no fraction: 4503599627370497.5 was read as ...498, another launch's id. An id
  // written as an integer was read exactly above.)
  if (d != std::trunc(d) || std::fabs(d) >= 4503599627370496.0)
    return f.fail(raw.data(),
                  fmt::format("\"{}\" should be a whole number{}, found {}", what,
                              d == std::trunc(d) ? " written as an integer (a fraction beyond 2^52 cannot be told)" : "", prefix_at_character(raw, 40)),
                  Problem::kBadField);
  out = static_cast<std::int64_t>(d);
  return true;
}

// A string field (ph, cat, name): another JSON type is a bad field; a bare token that is
// no JSON value (`"ph": X`) is malformed JSON, as `"dur": NaN` is.
bool read_string(od::value v, Fields& f, const char* at, std::string_view what, std::string_view& out) {
  const std::string_view raw = trim_token(v.raw_json_token());
  if (auto e = v.get_string().get(out)) {
    // (An array's or object's token is its first character: say which it is.)
    if (e == simdjson::INCORRECT_TYPE && !raw.empty() && raw[0] != '"') {
      const bool other_json = raw[0] == '[' || raw[0] == '{' || raw == "true" || raw == "false" || raw == "null" ||
                              json_number_syntax(raw);
      return f.fail(at,
                    fmt::format("\"{}\" should be a string, found {}", what,
                                raw[0] == '[' ? std::string_view("an array")
                                : raw[0] == '{' ? std::string_view("an object")
                                                : prefix_at_character(raw, 40)),
                    other_json ? Problem::kBadField : Problem::kMalformedJson);
    }
    return f.fail_json(e, at, fmt::format("\"{}\"", what));
  }
  return true;
}

bool read_time(od::value v, Fields& f, std::string_view what, std::int64_t& out) {
  std::string_view raw = trim_token(v.raw_json_token());
  if (!microseconds_to_ns(raw, out)) {
    // A JSON value of another type is a bad field; anything else is not JSON.
    od::json_type t;
    const bool other_json = !v.type().get(t) && t != od::json_type::number && !raw.empty() &&
                            (raw[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw == "true" || raw == "false" ||
                             raw == "null");
    // A JSON number (the type alone says only that it starts like one; one beyond a
    // double's range fails get_double), but not a time.
    double as_double = 0;
    if (!v.type().get(t) && t == od::json_type::number && (!v.get_double().get(as_double) || json_number_syntax(raw)))
      return f.fail(raw.data(),
                    fmt::format("\"{}\" is not a time stepprof reads: {} (expected microseconds, as Kineto writes "
                                "them, below 9.2e15 in magnitude (9e15 with an exponent): the time in nanoseconds must fit "
                                "in 64 bits)",
                                what, prefix_at_character(raw, 40)),
                    Problem::kBadField);
    return f.fail(raw.data(),
                  fmt::format("\"{}\" should be a number of microseconds, found {}", what, prefix_at_character(raw, 40)),
                  other_json ? Problem::kBadField : Problem::kMalformedJson);
  }
  return true;
}

}  // namespace

bool microseconds_to_ns(std::string_view t, std::int64_t& ns) {
  if (t.empty()) return false;
  std::size_t i = 0;
  const bool neg = t[0] == '-';
  if (neg) ++i;
  std::int64_t whole = 0;
  std::size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    if (whole > (INT64_MAX - 9) / 10) return false;
    whole = whole * 10 + (t[i] - '0');
    ++i;
    ++digits;
  }
  if (digits == 0) return false;
  std::int64_t frac = 0;
  int frac_digits = 0;
  bool round_up = false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    std::size_t fd = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      if (frac_digits < 3) {
        frac = frac * 10 + (t[i] - '0');
        ++frac_digits;
      } else if (frac_digits == 3) {
        round_up = t[i] >= '5';
        ++frac_digits;
      }
      ++i;
      ++fd;
    }
    if (fd == 0) return false;
  }
  if (i < t.size()) {
    if (t[i] != 'e' && t[i] != 'E') return false;
    // An exponent: rare in traces; go through double.
    double d = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (ec != std::errc() || p != t.data() + t.size() || !std::isfinite(d) || std::fabs(d) > 9.0e15) return false;
    ns = static_cast<std::int64_t>(std::llround(d * 1000.0));
    return true;
  }
  while (frac_digits < 3) {
    frac *= 10;
    ++frac_digits;
  }
  if (whole > (INT64_MAX - 1000) / 1000) return false;
  std::int64_t v = whole * 1000 + frac + (round_up ? 1 : 0);
  ns = neg ? -v : v;
  return true;
}

bool EventParser::parse(std::string_view text, TraceEvent& ev, EventError& error) {
  ev = TraceEvent{};
  Fields f(text, error);
  od::document doc;
  reserve_or_throw(parser_, text.size());
  if (auto e = parser_.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc))
    return f.fail_json(e, nullptr, "an event");
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    const char* at = nullptr;
    if (doc.current_location().get(at)) at = nullptr;
    return f.fail(at ? at : text.data(), e == simdjson::INCORRECT_TYPE
                                             ? std::string("an event should be a JSON object")
                                             : fmt::format("malformed JSON in an event: {}", json_error_text(e)));
  }
  std::string_view cat;
  bool have_cat = false, have_name = false;
  const char* name_at = nullptr;  // the "name" key
  // The fields stepprof reads, each at most once: a repeated one would silently win.
  unsigned seen = 0;
  auto once = [&](unsigned bit, const char* at, std::string_view key) {
    if (seen & bit)
      return f.fail(at, fmt::format("field \"{}\" appears twice in the event", key), Problem::kBadField);
    seen |= bit;
    return true;
  };
  for (auto field : obj) {
    od::field fld;
    if (auto e = std::move(field).get(fld)) {
      const char* at = nullptr;
      if (doc.current_location().get(at)) at = nullptr;
      return f.fail_json(e, at, "an event");
    }
    const char* k = fld.key().raw();
    od::value v = fld.value();
    switch (k[0]) {
      case 'p':
        if (key_is(k, "ph")) {
          if (!once(1u << 0, k, "ph")) return false;
          std::string_view ph;
          if (!read_string(v, f, k, "ph", ph)) return false;
          // (Phases are one letter: "Xyz" is none that stepprof reads, not a complete event.)
          ev.ph = ph.size() == 1 ? ph[0] : '?';
          if (ev.ph == 'f' || ev.ph == 'M' || ev.ph == 'i' || ev.ph == 'C') {  // not used
            ev.kind = EventKind::kOther;
            return true;
          }
        } else if (key_is(k, "pid")) {
          if (!once(1u << 1, k, "pid")) return false;
          ev.pid_text = trim_token(v.raw_json_token());
          if (!read_id(v, f, "pid", ev.pid)) return false;
        }
        break;
      case 'c':
        if (key_is(k, "cat")) {
          if (!once(1u << 2, k, "cat")) return false;
          if (!read_string(v, f, k, "cat", cat)) return false;
          have_cat = true;
          ev.kind = kind_of_category(cat);
          if (ev.kind == EventKind::kOther) return true;
          if (ev.kind == EventKind::kCpuOp && have_name && !ev.name.starts_with("ProfilerStep#")) {
            ev.kind = EventKind::kOther;
            return true;
          }
        }
        break;
      case 'n':
        if (key_is(k, "name")) {
          if (!once(1u << 3, k, "name")) return false;
          std::string_view name;
          if (!read_string(v, f, k, "name", name)) return false;
          ev.name = name;
          have_name = true;
          name_at = k;
          // An operator matters only as the ProfilerStep#N range; stop reading the others.
          if (have_cat && ev.kind == EventKind::kCpuOp && !name.starts_with("ProfilerStep#")) {
            ev.kind = EventKind::kOther;
            return true;
          }
        }
        break;
      case 't':
        if (key_is(k, "ts")) {
          if (!once(1u << 4, k, "ts")) return false;
          if (!read_time(v, f, "ts", ev.ts_ns)) return false;
          ev.has_ts = true;
        } else if (key_is(k, "tid")) {
          if (!once(1u << 5, k, "tid")) return false;
          if (!read_id(v, f, "tid", ev.tid)) return false;
          ev.has_tid = true;
        }
        break;
      case 'd':
        if (key_is(k, "dur")) {
          if (!once(1u << 6, k, "dur")) return false;
          if (!read_time(v, f, "dur", ev.dur_ns)) return false;
          ev.has_dur = true;
        }
        break;
      case 'i':
        if (key_is(k, "id")) {
          if (!once(1u << 7, k, "id")) return false;
          if (!read_id(v, f, "id", ev.id)) return false;
          ev.has_id = true;
        }
        break;
      case 'a':
        if (key_is(k, "args")) {
          if (!once(1u << 8, k, "args")) return false;
          od::object args;
          if (v.get_object().get(args)) break;  // args of another shape: nothing stepprof uses
          for (auto af : args) {
            od::field a;
            if (auto e = std::move(af).get(a)) return f.fail_json(e, nullptr, "\"args\"");
            const char* ak = a.key().raw();
            // (Each at most once, as the event's own fields: a repeated correlation moved a
            // kernel to another launch's step without a word.)
            if (key_is(ak, "correlation")) {
              if (!once(1u << 9, ak, "args.correlation")) return false;
              if (!read_id(a.value(), f, "args.correlation", ev.correlation)) return false;
              ev.has_correlation = true;
            } else if (key_is(ak, "stream")) {
              if (!once(1u << 10, ak, "args.stream")) return false;
              if (!read_id(a.value(), f, "args.stream", ev.stream)) return false;
              ev.has_stream = true;
            } else if (key_is(ak, "device")) {
              if (!once(1u << 11, ak, "args.device")) return false;
              if (!read_id(a.value(), f, "args.device", ev.device)) return false;
              ev.has_device = true;
            }
          }
        }
        break;
      default:
        break;
    }
  }
  if (!have_cat) {
    ev.kind = EventKind::kOther;
    ev.no_category = ev.ph == 'X';
  }
  if (ev.kind == EventKind::kFlowStart && ev.ph != 's') ev.kind = EventKind::kOther;
  if (ev.kind != EventKind::kFlowStart && ev.ph != 'X') {
    ev.not_complete = ev.kind != EventKind::kOther;
    ev.kind = EventKind::kOther;
  }
  if (ev.kind == EventKind::kLaunch && !ev.has_correlation) ev.kind = EventKind::kOther;
  // An annotation is a region by its name: without one it would be a region named "",
  // which no step log may hold (`import kineto` wrote logs `report` then rejected).
  // Nor one longer than a step log's names may be.
  // A kernel is told NCCL communication or compute by its name: without one it was taken
  // for compute without a word (`"name": null` is a bad field).
  if (ev.kind == EventKind::kKernel && ev.name.empty())
    return have_name ? f.fail(name_at, "a kernel's \"name\" is empty (it tells NCCL communication from compute)",
                              Problem::kBadField)
                     : f.fail(text.data(), "a kernel has no \"name\" (it tells NCCL communication from compute)",
                              Problem::kMissingField);
  if (ev.kind == EventKind::kUserAnnotation || ev.kind == EventKind::kGpuAnnotation) {
    if (ev.name.empty())
      return have_name ? f.fail(name_at, "an annotation's \"name\" is empty", Problem::kBadField)
                       : f.fail(text.data(), "an annotation has no \"name\"", Problem::kMissingField);
    if (ev.name.size() > schema::kMaxNameBytes)
      return f.fail(name_at,
                    fmt::format("an annotation's \"name\" of {} bytes is longer than a region name may be ({} bytes)",
                                ev.name.size(), schema::kMaxNameBytes),
                    Problem::kBadField);
  }
  return true;
}

}  // namespace stepprof::detail
