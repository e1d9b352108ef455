#include "html_escape.hpp"

#include <fmt/format.h>

#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

std::string html_escape(std::string_view text) {
  // Control characters (tab and newline too), C1 controls, U+2028, U+2029, bidirectional
  // overrides and isolates, and bytes that are no valid UTF-8 first become the text \xNN
  // per byte, as the text report writes them (printable): names that differ only there
  // stay apart on the page (they had all become U+FFFD, and a tab looked like a space).
  const std::string shown = printable(text);
  std::string out;
  out.reserve(shown.size() + shown.size() / 8);
  for (const char c : shown) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string json_for_script(const nlohmann::ordered_json& data) {
  const std::string json = data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (const std::size_t n = static_cast<unsigned char>(c) >= 0x80 ? control_bytes(json, i) : 0; n > 0) {
      // A C1 control, U+2028 or U+2029 (line terminators to old JavaScript), or a
      // bidirectional override or isolate (inside a string: JSON has no other non-ASCII
      // bytes): its bytes as the text \xNN each, as html_escape writes them, so that a
      // chart's legend or axis shows the name as the page's tables do, never reordered.
      for (std::size_t k = 0; k < n; ++k) out += fmt::format("\\\\x{:02x}", static_cast<unsigned char>(json[i + k]));
      i += n - 1;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace stepprof::detail
