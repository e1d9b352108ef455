// A report laid out as sections of fields, tables, paragraphs and lists, so the text,
// markdown (and HTML) renderers share one layout and differ only in syntax. Internal.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "stepprof/analysis/report.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

struct Fields {
  std::vector<std::pair<std::string, std::string>> items;  ///< label, value
};
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> depth;  ///< per row: nesting depth of the first cell (0 = none)
};
struct Paragraph {
  std::string text;
};
struct ListItem {
  std::string title;
  std::vector<std::pair<std::string, std::string>> details;  ///< label, text
};
struct NumberedList {
  std::vector<ListItem> items;
};
using Block = std::variant<Fields, Table, Paragraph, NumberedList>;

struct Section {
  std::string id;     ///< stable anchor, e.g. "regions"
  std::string title;  ///< e.g. "3. Regions"
  std::vector<Block> blocks;
};

struct Document {
  std::string title;
  std::vector<Section> sections;
};

Document build_document(const Report& report, const Diagnostics& diag);

}  // namespace stepprof::detail
