// Chrome Trace Event Format (the JSON that the Perfetto UI and chrome://tracing open):
// https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
// Events are written with fmt (one per line); names and other text go through
// nlohmann-json's string escaping, once per distinct name.
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pieces.hpp"
#include "stepprof/render/exports.hpp"

namespace stepprof {
namespace {

using Json = nlohmann::ordered_json;

// JSON string literals (with quotes) of names, escaped once each.
class Quoted {
 public:
  const std::string& operator()(std::string_view text) {
    auto it = cache_.find(text);
    if (it == cache_.end()) {
      it = cache_.emplace(std::string(text), quote(text)).first;
    }
    return it->second;
  }
  static std::string quote(std::string_view text) {
    return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::string, Hash, std::equal_to<>> cache_;
};

}  // namespace

std::string render_trace(const Timeline& t) {
  std::string all;
  render_trace(t, [&](std::string_view piece) {
    all.append(piece);
    return true;
  });
  return all;
}

bool render_trace(const Timeline& t, const std::function<bool(std::string_view)>& write) {
  detail::Pieces out(write);
  auto it = std::back_inserter(out.text());
  auto hand_on = [&] { out.hand_on(); };  // (after each event: a piece ends between events)
  Quoted q;
  bool first = true;
  auto sep = [&] {
    fmt::format_to(it, "{}", first ? "\n" : ",\n");
    first = false;
  };
  auto metadata = [&](std::string_view name, std::int64_t pid, std::int64_t tid, std::string_view key,
                      const std::string& value_json) {
    sep();
    fmt::format_to(it, R"({{"name":"{}","ph":"M","pid":{},"tid":{},"args":{{"{}":{}}}}})", name, pid, tid, key,
                   value_json);
  };
  const std::string update_layout =
      Quoted::quote(t.real_timestamps ? "logged start_unix_ms" : "synthetic: one update after another");
  const std::string region_layout = Quoted::quote("synthetic from per-update sums");

  fmt::format_to(it, "{{\"displayTimeUnit\": \"ms\",\n\"otherData\": {},\n\"traceEvents\": [",
                 Json{{"generator", "stepprof trace"},
                      {"layout", t.notes},
                      {"nesting_known", t.nesting_known},
                      {"real_timestamps", t.real_timestamps},
                      {"shrunk_slices", t.shrunk_slices}}
                     .dump(-1, ' ', false, Json::error_handler_t::replace));
  for (std::size_t pi = 0; pi < t.processes.size(); ++pi) {
    const TimelineProcess& p = t.processes[pi];
    metadata("process_name", p.pid, 0, "name", q(p.name));
    metadata("process_sort_index", p.pid, 0, "sort_index", std::to_string(pi));
    for (std::size_t ti = 0; ti < p.tracks.size(); ++ti) {
      const TimelineTrack& track = p.tracks[ti];
      const auto tid = static_cast<std::int64_t>(ti + 1);
      metadata("thread_name", p.pid, tid, "name", q(track.name));
      metadata("thread_sort_index", p.pid, tid, "sort_index", std::to_string(tid));
      const std::string_view clock = track.clock == Clock::kDevice ? "device" : "host";
      for (const TimelineSlice& s : track.slices) {
        sep();
        if (s.update) {
          fmt::format_to(it,
                         R"({{"name":"update {}","cat":"update","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},)"
                         R"("args":{{"step":{},"wall_ms":{},"layout":{})",
                         s.step, s.start_us, s.dur_us, p.pid, tid, s.step, s.recorded_ms, update_layout);
        } else {
          fmt::format_to(it,
                         R"({{"name":{},"cat":"region","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},)"
                         R"("args":{{"step":{},"recorded_ms":{},"clock":"{}",)",
                         q(s.region), s.start_us, s.dur_us, p.pid, tid, s.step, s.recorded_ms, clock);
          if (s.calls) fmt::format_to(it, R"("calls":{},)", *s.calls);
          fmt::format_to(it, R"("layout":{})", region_layout);
        }
        if (s.scale) fmt::format_to(it, R"(,"scale":{})", *s.scale);
        fmt::format_to(it, "}}}}");
        hand_on();
        if (!out.ok()) return false;
      }
    }
    for (const TimelineCounter& c : p.counters)
      for (const auto& sample : c.samples) {
        sep();
        fmt::format_to(it, R"({{"name":{},"cat":"counter","ph":"C","ts":{},"pid":{},"tid":0,"args":{{)", q(c.name),
                       sample.ts_us, p.pid);
        bool first_arg = true;
        for (std::size_t i = 0; i < c.series.size(); ++i) {
          if (!sample.values[i]) continue;
          fmt::format_to(it, "{}{}:{}", first_arg ? "" : ",", q(c.series[i]), *sample.values[i]);
          first_arg = false;
        }
        fmt::format_to(it, "}}}}");
        hand_on();
        if (!out.ok()) return false;
      }
  }
  fmt::format_to(it, "\n]}}\n");
  return out.finish();
}

}  // namespace stepprof
