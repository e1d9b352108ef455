// Escaping for the HTML report: text from the logs (region and counter names, config
// values, file names) must reach the page as text, never as markup or script. Internal.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace stepprof::detail {

/// `&`, `<`, `>`, `"` and `'` as character references: safe in element content and in
/// quoted attribute values. Control characters (tab and newline included), C1 controls,
/// U+2028, U+2029, the bidirectional overrides and isolates, which would reorder a name
/// on screen ("Trojan Source"), and bytes that are not well-formed UTF-8 are written as
/// the text `\xNN` per byte, as the text report writes them (printable() and
/// control_bytes() in diagnostics.hpp): names that differ only there stay apart.
std::string html_escape(std::string_view text);

/// `data` as JSON for the content of a <script type="application/json"> element: `<`,
/// `>` and `&` written as \u003c, \u003e and \u0026 (so no "</script>" or "<!--" can
/// occur). These characters can only occur inside JSON strings, where the escapes mean
/// the same, so JSON.parse gives back `data`, except for control characters (C0, DEL
/// and C1), U+2028, U+2029 and bidirectional overrides and isolates in its strings, which
/// become the text `\xNN` per byte (as html_escape writes them): a chart's legend shows a
/// name as the page's tables do. Invalid UTF-8 is replaced by U+FFFD.
std::string json_for_script(const nlohmann::ordered_json& data);

}  // namespace stepprof::detail
