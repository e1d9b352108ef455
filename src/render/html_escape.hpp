// Escaping for the HTML report: text from the logs (region and counter names, config
// values, file names) must reach the page as text, never as markup or script. Internal.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace stepprof::detail {

/// `&`, `<`, `>`, `"` and `'` as character references: safe in element content and in
/// quoted attribute values. Control characters (but tab and newline) and bytes that are
/// not well-formed UTF-8 become U+FFFD (&#xFFFD;), one per byte.
std::string html_escape(std::string_view text);

/// `data` as JSON for the content of a <script type="application/json"> element: `<`,
/// `>` and `&` written as \u003c, \u003e and \u0026 (so no "</script>" or "<!--" can
/// occur), U+2028 and U+2029 as \u2028 and \u2029. These characters can only occur inside
/// JSON strings, where the escapes mean the same, so JSON.parse gives back `data`.
/// Invalid UTF-8 is replaced by U+FFFD.
std::string json_for_script(const nlohmann::ordered_json& data);

}  // namespace stepprof::detail
