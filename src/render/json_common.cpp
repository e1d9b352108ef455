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

namespace {
std::string dump_value(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace); }
}  // namespace

std::string dump_json(const Json& j) { return dump_value(j) + "\n"; }

void JsonWriter::next_item() {
  if (after_key_) {  // (the value of the member whose key was just written)
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;  // (the document itself)
  out_.text() += levels_.back().items++ ? ",\n" : "\n";
  indent(levels_.size());
}

void JsonWriter::key(std::string_view k) {
  next_item();
  out_.text() += dump_value(Json(std::string(k)));
  out_.text() += ": ";
  after_key_ = true;
}

void JsonWriter::open(char bracket) {
  next_item();
  out_.text() += bracket;
  levels_.push_back({bracket == '{', 0});
}

void JsonWriter::close(char bracket) {
  const bool empty = levels_.back().items == 0;
  levels_.pop_back();
  if (!empty) {  // (an empty object or array is "{}" or "[]", as nlohmann writes it)
    out_.text() += '\n';
    indent(levels_.size());
  }
  out_.text() += bracket;
  out_.hand_on();
}

// nlohmann writes `v` as if at the top level; each of its line breaks (never inside a
// string, where it is escaped) gets the indent of the level it is written at.
void JsonWriter::value(const Json& v) {
  next_item();
  const std::string text = dump_value(v);
  const std::size_t width = 2 * levels_.size();
  std::size_t from = 0;
  for (std::size_t nl; (nl = text.find('\n', from)) != std::string::npos; from = nl + 1) {
    out_.text().append(text, from, nl + 1 - from);
    out_.text().append(width, ' ');
  }
  out_.text().append(text, from);
  out_.hand_on();
}

void JsonWriter::object_with_array(const Json& head, std::string_view array_key, std::size_t n,
                                   const std::function<Json(std::size_t)>& element) {
  begin_object();
  for (auto it = head.begin(); it != head.end(); ++it) {
    key(it.key());
    if (it.key() != array_key) {
      value(it.value());
      continue;
    }
    begin_array();
    for (std::size_t i = 0; i < n && ok(); ++i) value(element(i));
    end_array();
  }
  end_object();
}

bool JsonWriter::finish() {
  out_ += '\n';
  return out_.finish();
}

}  // namespace stepprof::detail
