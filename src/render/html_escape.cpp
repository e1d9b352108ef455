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
  const auto hex = [](char h) {
    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
  };
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '\\' && i + 1 < json.size()) {  // (backslashes occur only inside strings, as escapes)
      // A control character (JSON's \n, \t, ..., \u0001): the text \xNN, as the tables
      // write it (a legend drew a newline as two overlapping lines). Other escapes (\\,
      // \", \uXXXX of no control) stay, read as a pair so that "\\n" is not taken for \n.
      const char e = json[i + 1];
      int code = e == 'b' ? 0x08 : e == 't' ? 0x09 : e == 'n' ? 0x0a : e == 'f' ? 0x0c : e == 'r' ? 0x0d : -1;
      if (e == 'u' && i + 5 < json.size() && json[i + 2] == '0' && json[i + 3] == '0' && hex(json[i + 4]) >= 0 &&
          hex(json[i + 4]) <= 1 && hex(json[i + 5]) >= 0) {
        code = hex(json[i + 4]) * 16 + hex(json[i + 5]);
        i += 4;
      }
      if (code >= 0) out += fmt::format("\\\\x{:02x}", code);
      else out.append(json, i, 2);
      ++i;
    } else if (c == '\x7f') {
      out += "\\\\x7f";  // (DEL, which JSON leaves as it is)
    } else if (c == '<') out += "\\u003c";
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
