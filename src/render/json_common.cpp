#include "json_common.hpp"

namespace stepprof::detail {

Json diagnostics_json(const Diagnostics& d) {
  Json items = Json::array();
  for (const auto& x : d.kept())
    items.push_back({{"severity", severity_name(x.severity)},
                     {"code", code_name(x.problem)},
                     {"file", x.file},
                     {"line", x.line},
                     {"column", x.column},
                     {"message", x.message}});
  return Json{{"errors", d.count(Severity::kError)},
              {"warnings", d.count(Severity::kWarning)},
              {"notes", d.count(Severity::kNote)},
              {"items", items}};
}

Json unanalyzed_json(const char* schema, const Diagnostics& d) {
  return Json{{"schema", schema}, {"analyzed", false}, {"diagnostics", diagnostics_json(d)}};
}

std::string dump_json(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"; }

}  // namespace stepprof::detail
