#include "format.hpp"

#include <locale.h>
#include <wchar.h>

#include <algorithm>
#include <cmath>
#include <cwchar>
#include <locale>
#include <optional>

#include <fmt/format.h>

#include "stepprof/diagnostics.hpp"
#include "../util/text.hpp"

namespace stepprof::detail {
namespace {

struct Grouping : std::numpunct<char> {
  char do_thousands_sep() const override { return ','; }
  std::string do_grouping() const override { return "\3"; }
  char do_decimal_point() const override { return '.'; }
};

const std::locale& grouped() {
  static const std::locale loc(std::locale::classic(), new Grouping);
  return loc;
}

}  // namespace

std::string num(double v) {
  if (std::fabs(v) < 5e-4) v = 0;  // no "-0.000"
  const double a = std::fabs(v);
  if (a >= 10 || a == 0) return fmt::format(grouped(), "{:.1Lf}", v);
  if (a >= 0.1) return fmt::format(grouped(), "{:.2Lf}", v);
  return fmt::format(grouped(), "{:.3Lf}", v);
}

std::string ms(std::optional<double> v) { return v ? num(*v) + " ms" : std::string("-"); }

std::string pct(double fraction) { return std::isfinite(fraction) ? fmt::format("{:.1f} %", fraction * 100) : std::string("-"); }

std::string sig3(double v) {
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format(grouped(), "{:.0Lf}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

std::string integer(double v) { return fmt::format(grouped(), "{:.0Lf}", v); }

}  // namespace stepprof::detail

namespace stepprof::detail {

namespace {
// Calls f(byte offset, bytes, columns) for each character of UTF-8 text, with its display
// width in a terminal's columns: wcwidth(3) in glibc's C.UTF-8 locale (an East Asian wide
// character or an emoji takes 2 columns, a combining mark 0). A byte that is not UTF-8, or
// a character wcwidth does not know, counts 1; so does every character when the locale is
// missing (code points then).
template <class F>
void each_char(const std::string& s, F&& f) {
  static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  const locale_t before = utf8 ? ::uselocale(utf8) : locale_t{};  // (this thread only)
  std::mbstate_t state{};
  for (std::size_t i = 0; i < s.size();) {
    wchar_t c = 0;
    const std::size_t n = utf8 ? std::mbrtowc(&c, s.data() + i, s.size() - i, &state) : 0;
    if (n == 0 || n > s.size() - i) {  // not UTF-8: one byte; no locale: one code point
      state = {};
      std::size_t j = i + 1;
      if (!utf8)
        while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
      f(i, j - i, std::size_t{1});
      i = j;
      continue;
    }
    const int cw = ::wcwidth(c);
    f(i, n, cw < 0 ? std::size_t{1} : static_cast<std::size_t>(cw));
    i += n;
  }
  if (utf8) ::uselocale(before);
}

std::size_t width(const std::string& s) {
  std::size_t w = 0;
  each_char(s, [&](std::size_t, std::size_t, std::size_t cols) { w += cols; });
  return w;
}
}  // namespace

std::string shorten_middle(std::string_view raw, std::size_t max_columns) {
  std::string whole = printable(raw);
  if (max_columns < 3 || width(whole) <= max_columns) return whole;
  // The name's characters as written (a byte that is no UTF-8 is one of its own), each
  // with the columns its escaped form takes: "\xNN" per byte of a control character.
  struct Char {
    std::size_t at, bytes, cols;
  };
  std::vector<Char> chars;
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t n = std::max<std::size_t>(utf8_length(raw, i), 1);
    chars.push_back({i, n, width(printable(raw.substr(i, n)))});
    i += n;
  }
  const std::size_t room = max_columns - 1;  // (the ellipsis takes one column)
  std::size_t head_end = 0, cols = 0;       // head: the first ceil(room / 2) columns
  while (head_end < chars.size() && cols + chars[head_end].cols <= (room + 1) / 2) cols += chars[head_end++].cols;
  std::size_t tail_begin = chars.size();
  for (std::size_t tail_cols = 0; tail_begin > head_end && cols + tail_cols + chars[tail_begin - 1].cols <= room;)
    tail_cols += chars[--tail_begin].cols;
  // (A combining mark first in the tail would sit on the ellipsis: it goes with its base.)
  while (tail_begin < chars.size() && chars[tail_begin].cols == 0) ++tail_begin;
  const std::size_t head_bytes = head_end < chars.size() ? chars[head_end].at : raw.size();
  const std::size_t tail_at = tail_begin < chars.size() ? chars[tail_begin].at : raw.size();
  return printable(raw.substr(0, head_bytes)) + "\u2026" + printable(raw.substr(tail_at));
}

std::string indented(std::string_view unit, int depth, const std::string& name) {
  std::string out;
  for (int d = 0; d < std::min(depth, kMaxIndentLevels); ++d) out += unit;
  if (depth > kMaxIndentLevels) out += fmt::format("(level {}) ", depth);
  return out + name;
}

std::string TextTable::str(const std::string& indent) const {
  std::vector<std::size_t> w;
  for (const auto& r : rows_) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  }
  std::string out;
  for (std::size_t ri = 0; ri < rows_.size(); ++ri) {
    std::string line = indent;
    for (std::size_t i = 0; i < rows_[ri].size(); ++i) {
      const auto& cell = rows_[ri][i];
      const std::string pad(w[i] - width(cell), ' ');
      if (i) line += "  ";
      const bool left = i == 0 || (text_last_ && i + 1 == rows_[ri].size());
      line += left ? cell + pad : pad + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (ri == 0) {
      std::size_t total = 0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        // A prose column is underlined as wide as its header, not its longest cell.
        const bool prose = text_last_ && i + 1 == w.size() && i < rows_[0].size();
        total += (prose ? width(rows_[0][i]) : w[i]) + (i ? 2 : 0);
      }
      out += indent + std::string(total, '-') + "\n";
    }
  }
  return out;
}

std::string rank_label(std::int64_t rank) { return rank < 0 ? std::string("unknown") : std::to_string(rank); }

}  // namespace stepprof::detail
