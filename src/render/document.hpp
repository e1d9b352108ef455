// A report laid out as sections of fields, tables, paragraphs and lists, so the text,
// markdown (and HTML) renderers share one layout and differ only in syntax. Internal.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "stepprof/analysis/report.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

struct Fields {
  std::vector<std::pair<std::string, std::string>> items;  ///< label, value
};
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> depth;  ///< per row: nesting depth of the first cell (0 = none)
  bool text_last = false;  ///< the last column is prose: left-aligned in plain text
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

/// The diagnostics as a section ("Input problems").
Section input_section(const Diagnostics& diag);

/// `stepprof whatif`: input, cost models, one section per prediction, input problems
/// (whatif_document.cpp).
Document build_whatif_document(const WhatIfResult& result, const Diagnostics& diag);

/// The what-if section of the HTML report: the cost models once, then every prediction.
Section whatif_section(const std::vector<WhatIfResult>& results, const std::string& title);

/// Text and markdown of a laid-out document (text.cpp, markdown.cpp).
std::string text_of(const Document& doc);
std::string markdown_of(const Document& doc);

}  // namespace stepprof::detail
