#include <fmt/format.h>

#include "document.hpp"
#include "format.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof {
namespace {

// Escapes text for a markdown table cell or paragraph: pipes, and characters that
// would start markup or HTML.
std::string esc(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (const std::size_t n = control_bytes(s, i)) {  // (as the text report: \xNN)
      out += printable(std::string_view(s).substr(i, n));
      i += n - 1;
      continue;
    }
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '*': case '_': case '`': case '[': case ']': case '\\':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

void block(const detail::Block& b, std::string& out) {
  if (const auto* f = std::get_if<detail::Fields>(&b)) {
    out += "| | |\n|---|---|\n";
    for (const auto& [k, v] : f->items) out += fmt::format("| {} | {} |\n", esc(k), esc(v));
    out += "\n";
  } else if (const auto* t = std::get_if<detail::Table>(&b)) {
    out += "|";
    for (const auto& h : t->header) out += " " + esc(h) + " |";
    out += "\n|";
    for (std::size_t i = 0; i < t->header.size(); ++i)  // (as the text report: numbers right, names and prose left)
      out += i == 0 || (t->text_last && i + 1 == t->header.size()) ? "---|" : "---:|";
    out += "\n";
    for (std::size_t r = 0; r < t->rows.size(); ++r) {
      out += "|";
      for (std::size_t i = 0; i < t->rows[r].size(); ++i) {
        std::string cell = esc(t->rows[r][i]);
        if (i == 0 && r < t->depth.size()) cell = detail::indented("&nbsp;&nbsp;", t->depth[r], cell);
        out += " " + cell + " |";
      }
      out += "\n";
    }
    out += "\n";
  } else if (const auto* p = std::get_if<detail::Paragraph>(&b)) {
    out += esc(p->text) + "\n\n";
  } else if (const auto* l = std::get_if<detail::NumberedList>(&b)) {
    for (std::size_t i = 0; i < l->items.size(); ++i) {
      out += fmt::format("{}. **{}**\n", i + 1, esc(l->items[i].title));
      for (const auto& [k, v] : l->items[i].details) out += fmt::format("   - {}: {}\n", esc(k), esc(v));
    }
    out += "\n";
  }
}

}  // namespace

std::string render_markdown(const Report& report, const Diagnostics& diag) {
  return detail::markdown_of(detail::build_document(report, diag));
}

std::string render_whatif_markdown(const WhatIfResult& result, const Diagnostics& diag) {
  return detail::markdown_of(detail::build_whatif_document(result, diag));
}

std::string detail::markdown_of(const detail::Document& doc) {
  std::string out = "# " + doc.title + "\n";
  for (const auto& s : doc.sections) {
    out += "\n## " + esc(s.title) + "\n\n";
    for (const auto& b : s.blocks) block(b, out);
  }
  return out;
}

}  // namespace stepprof
