#include "html_escape.hpp"

#include <fmt/format.h>

#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629, section 4: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 when the bytes there are
// not one.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return b(k) >= lo && b(k) <= hi; };
  const unsigned lead = b(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return cont(1) ? 2 : 0;
  if (lead == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (lead == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (lead == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (lead >= 0xF1 && lead <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (lead == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Bytes that are not UTF-8 (a file name of another encoding) would make the page,
      // declared UTF-8, invalid: each is U+FFFD, as in the JSON outputs.
      const std::size_t n = utf8_sequence(text, i);
      if (n == 0) {
        out += "&#xFFFD;";
      } else if (control_bytes(text, i) == n) {
        // A C1 control, a line or paragraph separator, or a bidirectional override or
        // isolate, which would reorder the name on screen: its bytes as text, \xNN each,
        // as the text report writes them (diagnostics.hpp, control_bytes).
        for (std::size_t k = 0; k < n; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
        i += n - 1;
      } else {
        out.append(text.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      // Control characters (NUL, escape, ...) have no business in a page: U+FFFD.
      default:
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == '\x7f') out += "&#xFFFD;";
        else out += c;
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
