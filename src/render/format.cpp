#include "format.hpp"

#include <locale.h>
#include <wchar.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cwchar>
#include <locale>
#include <optional>

#include <fmt/format.h>

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

std::string shorten_middle(const std::string& s, std::size_t max_columns) {
  struct Char {
    std::size_t at, bytes, cols;
  };
  std::vector<Char> chars;
  std::size_t total = 0;
  each_char(s, [&](std::size_t at, std::size_t bytes, std::size_t cols) {
    chars.push_back({at, bytes, cols});
    total += cols;
  });
  if (total <= max_columns || max_columns < 3) return s;
  const std::size_t room = max_columns - 1;  // (the ellipsis takes one column)
  std::size_t head_end = 0, cols = 0;       // head: the first ceil(room / 2) columns
  while (head_end < chars.size() && cols + chars[head_end].cols <= (room + 1) / 2) cols += chars[head_end++].cols;
  std::size_t tail_begin = chars.size();
  for (std::size_t tail_cols = 0; tail_begin > head_end && cols + tail_cols + chars[tail_begin - 1].cols <= room;)
    tail_cols += chars[--tail_begin].cols;
  // (A combining mark first in the tail would sit on the ellipsis: it goes with its base.)
  while (tail_begin < chars.size() && chars[tail_begin].cols == 0) ++tail_begin;
  std::size_t head_bytes = head_end < chars.size() ? chars[head_end].at : s.size();
  std::size_t tail_at = tail_begin < chars.size() ? chars[tail_begin].at : s.size();
  // A cut inside an escape "\xNN" (printable()'s, four ASCII bytes) moves out of it: the
  // head ends before it, the tail starts after it.
  auto escape_around = [&](std::size_t cut) -> std::optional<std::size_t> {
    for (std::size_t k = 1; k <= 3 && k <= cut; ++k)
      if (cut - k + 4 <= s.size() && s[cut - k] == '\\' && s[cut - k + 1] == 'x' &&
          std::isxdigit(static_cast<unsigned char>(s[cut - k + 2])) &&
          std::isxdigit(static_cast<unsigned char>(s[cut - k + 3])))
        return cut - k;
    return std::nullopt;
  };
  if (const auto e = escape_around(head_bytes)) head_bytes = *e;
  if (const auto e = escape_around(tail_at); e && tail_at < s.size()) tail_at = std::max(tail_at, *e + 4);
  // The bytes of one character escaped one by one ("\xe2\x80\xae", U+202E) stay whole:
  // a head ending inside them ends before them, a tail starting inside starts after them.
  auto escaped_byte = [&](std::size_t at) -> int {  // the byte "\xNN" at `at` stands for, or -1
    if (at + 4 > s.size() || s[at] != '\\' || s[at + 1] != 'x' || !std::isxdigit(static_cast<unsigned char>(s[at + 2])) ||
        !std::isxdigit(static_cast<unsigned char>(s[at + 3])))
      return -1;
    return std::stoi(s.substr(at + 2, 2), nullptr, 16);
  };
  const auto continuation = [](int b) { return b >= 0x80 && b < 0xC0; };
  std::size_t lead = head_bytes, after_lead = 0;  // back over continuation bytes to their lead
  while (lead >= 4 && continuation(escaped_byte(lead - 4))) lead -= 4, ++after_lead;
  if (lead >= 4 && escaped_byte(lead - 4) >= 0xC0) {
    const int b = escaped_byte(lead - 4);
    const std::size_t length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;  // the lead's sequence, in bytes
    if (after_lead + 1 < length) head_bytes = lead - 4;
  } else if (after_lead > 0) {
    head_bytes = lead;  // continuation bytes without their lead
  }
  while (tail_at < s.size() && continuation(escaped_byte(tail_at))) tail_at += 4;
  return s.substr(0, head_bytes) + "\u2026" + s.substr(tail_at);
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
