// Number formatting shared by the human-readable renderers. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stepprof::detail {

/// "15,528.0" (1 decimal at or above 10, 2 below, 3 below 0.1), thousands grouped.
std::string num(double v);
/// num(v) + " ms"; "-" for nullopt.
std::string ms(std::optional<double> v);
/// "8.7 %" from a fraction; "-" for NaN or infinity (a ratio the input cannot give).
std::string pct(double fraction);
/// Three significant digits with thousands grouping: "1.03", "45,800".
std::string sig3(double v);
/// Integer with thousands grouping.
std::string integer(double v);
/// A rank number, or "unknown" for -1: what the analyses hold for updates whose log
/// names no rank (no "rank" field, no config).
std::string rank_label(std::int64_t rank);

}  // namespace stepprof::detail

#include <vector>

namespace stepprof::detail {

/// The name `raw` as printable() writes it (control characters and bytes that are no
/// UTF-8 as \xNN per byte), if that takes at most `max_columns` terminal columns
/// (display width, as TextTable measures it); else the escaped beginning and end of
/// `raw` around "\u2026" (one column), at most `max_columns` in all. The cut is made in
/// `raw`, between its characters, so a character escaped as several \xNN (U+202E is
/// \xe2\x80\xae) is shown whole or not at all, and a combining mark stays with its
/// base. (A `max_columns` below 3 returns the whole name, escaped.)
std::string shorten_middle(std::string_view raw, std::size_t max_columns);

/// Nesting levels a table indents its first column by; a deeper row is indented that
/// far and its name starts "(level N) " (a trace nested thousands deep made the text
/// report quadratic in the depth: 20,000 levels, 800 MB of spaces).
inline constexpr int kMaxIndentLevels = 16;

/// `name` indented by `depth` levels of `unit` (e.g. two spaces), at most
/// kMaxIndentLevels of them, with "(level N) " before the name of a deeper row.
std::string indented(std::string_view unit, int depth, const std::string& name);

/// Column-aligned plain-text table: first column left-aligned, the rest right-aligned
/// (the last one left-aligned too with `text_last`, for a column of prose).
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, bool text_last = false)
      : rows_{std::move(header)}, text_last_(text_last) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// The table, each line prefixed with `indent`, header underlined with dashes.
  [[nodiscard]] std::string str(const std::string& indent = "  ") const;

 private:
  std::vector<std::vector<std::string>> rows_;
  bool text_last_ = false;
};

}  // namespace stepprof::detail
