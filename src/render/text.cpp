#include <fmt/format.h>

#include "document.hpp"
#include "format.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof {
namespace {

constexpr std::size_t kWidth = 110;
// A table's first column (a region, path or rank) is shortened beyond this many columns,
// so that one long name does not push every other column off the screen.
constexpr std::size_t kNameColumns = 48;

// Word-wraps `text` to kWidth columns; continuation lines start with `hang` spaces.
std::string wrap(const std::string& text, std::size_t first_col, std::size_t hang) {
  std::string out;
  std::size_t col = first_col;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    const std::string word = text.substr(i, j - i);
    if (col > hang && col + 1 + word.size() > kWidth) {
      out += "\n" + std::string(hang, ' ');
      col = hang;
    } else if (i > 0) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    i = j + 1;
  }
  return out;
}

void block(const detail::Block& b, std::string& out) {
  if (const auto* f = std::get_if<detail::Fields>(&b)) {
    std::size_t w = 0;
    for (const auto& [k, v] : f->items) w = std::max(w, k.size());
    w = std::min<std::size_t>(w, 30);
    for (const auto& [k, v] : f->items) {
      const std::string label = fmt::format("  {:<{}}  ", printable(k), w);
      out += label + wrap(printable(v), label.size(), label.size()) + "\n";
    }
  } else if (const auto* t = std::get_if<detail::Table>(&b)) {
    auto header = t->header;  // (a header may hold a name from the input: a code path's)
    for (auto& cell : header) cell = printable(cell);
    detail::TextTable tt(std::move(header), t->text_last);
    bool shortened = false;
    for (std::size_t i = 0; i < t->rows.size(); ++i) {
      auto row = t->rows[i];
      const std::string raw_name = row.empty() ? std::string() : row[0];  // (cut as written, then escaped)
      for (auto& cell : row) cell = printable(cell);
      const int depth = i < t->depth.size() ? t->depth[i] : 0;
      if (!row.empty()) {
        std::string name = detail::shorten_middle(raw_name, kNameColumns);
        shortened = shortened || name != row[0];
        row[0] = detail::indented("  ", depth, name);
      }
      tt.add(std::move(row));
    }
    out += tt.str();
    if (shortened)
      out += fmt::format("  (names over {} columns are shortened in the middle, at \u2026; --format json has them whole)\n",
                         kNameColumns);
  } else if (const auto* p = std::get_if<detail::Paragraph>(&b)) {
    out += "  " + wrap(printable(p->text), 2, 2) + "\n";
  } else if (const auto* l = std::get_if<detail::NumberedList>(&b)) {
    for (std::size_t i = 0; i < l->items.size(); ++i) {
      const auto& item = l->items[i];
      const std::string head = fmt::format("  {}. ", i + 1);
      out += head + wrap(printable(item.title), head.size(), head.size()) + "\n";
      for (const auto& [k, v] : item.details) {
        const std::string label = fmt::format("{}{}: ", std::string(head.size(), ' '), k);
        out += label + wrap(printable(v), label.size(), head.size() + 2) + "\n";
      }
    }
  }
}

}  // namespace

std::string detail::text_of(const detail::Document& doc) {
  std::string out = doc.title + "\n" + std::string(doc.title.size(), '=') + "\n";
  for (const auto& s : doc.sections) {
    out += "\n" + s.title + "\n";
    for (const auto& b : s.blocks) block(b, out);
  }
  return out;
}

std::string render_text(const Report& report, const Diagnostics& diag) {
  return detail::text_of(detail::build_document(report, diag));
}

std::string render_whatif_text(const WhatIfResult& result, const Diagnostics& diag) {
  return detail::text_of(detail::build_whatif_document(result, diag));
}

}  // namespace stepprof
