#include "json_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "../util/json_brackets.hpp"
#include "../util/text.hpp"

namespace stepprof::detail {

std::string_view json_error_text(simdjson::error_code e) {
  switch (e) {
    case simdjson::CAPACITY: return "the text is too large for the JSON parser (4 GiB at most)";
    case simdjson::MEMALLOC: return "out of memory while parsing";
    case simdjson::TAPE_ERROR: return "the JSON structure is broken (a bracket, brace, comma or colon is misplaced or missing)";
    case simdjson::DEPTH_ERROR: return "arrays and objects are nested too deeply";
    case simdjson::STRING_ERROR: return "a string holds an invalid escape sequence";
    case simdjson::T_ATOM_ERROR: return "a value starting with 't' is not true";
    case simdjson::F_ATOM_ERROR: return "a value starting with 'f' is not false";
    case simdjson::N_ATOM_ERROR: return "a value starting with 'n' is not null";
    case simdjson::NUMBER_ERROR: return "a number is malformed or out of range";
    case simdjson::UTF8_ERROR: return "the text is not valid UTF-8";
    case simdjson::EMPTY: return "there is no JSON value (the text is empty or blank)";
    case simdjson::UNESCAPED_CHARS: return "a string holds an unescaped control character";
    case simdjson::UNCLOSED_STRING: return "a string is not closed (a quote is missing)";
    case simdjson::INCORRECT_TYPE: return "a value has an unexpected type";
    case simdjson::NUMBER_OUT_OF_RANGE: return "a number is out of range";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT: return "the text ends inside an array or object (a ']' or '}' is missing)";
    case simdjson::TRAILING_CONTENT: return "there is more text after the JSON value";
    default: return simdjson::error_message(e);
  }
}

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// How a byte is shown in a message: printable ASCII as itself, anything else as 0xNN.
std::string shown_byte(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, static_cast<char>(c));
  return fmt::format("0x{:02X}", c);
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::optional<StringFault> find_string_fault(std::string_view text) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!in_string) {
      if (c == '"') in_string = true;
      else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
        return StringFault{i, fmt::format("a control byte 0x{:02X} between values", c)};
      continue;
    }
    if (c == '"') {
      in_string = false;
    } else if (c < 0x20) {
      return StringFault{i, fmt::format("an unescaped control byte 0x{:02X} in a string (JSON writes it as \\u{:04X})", c, c)};
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return StringFault{i, "a backslash at the end of the text"};
      const char n = text[i + 1];
      if (n == 'u') {
        std::size_t h = 0;
        while (h < 4 && i + 2 + h < text.size() && is_hex(text[i + 2 + h])) ++h;
        if (h < 4)
          return StringFault{i, fmt::format("invalid escape \\u{} (\\u needs four hex digits)",
                                            text.substr(i + 2, std::min<std::size_t>(h + 1, text.size() - i - 2)))};
        // UTF-16 surrogates come in pairs: \uD800-\uDBFF, then \uDC00-\uDFFF.
        const auto unit = [&](std::size_t at) {  // (four hex digits, checked before)
          unsigned u = 0;
          std::from_chars(text.data() + at, text.data() + at + 4, u, 16);
          return u;
        };
        const unsigned u = unit(i + 2);
        if (u >= 0xDC00 && u <= 0xDFFF)
          return StringFault{i, fmt::format("unpaired surrogate escape \\u{} (a low surrogate without a high one "
                                            "before it)", text.substr(i + 2, 4))};
        if (u >= 0xD800 && u <= 0xDBFF) {
          const bool paired = i + 12 <= text.size() && text[i + 6] == '\\' && text[i + 7] == 'u' &&
                              std::all_of(text.begin() + static_cast<std::ptrdiff_t>(i + 8),
                                          text.begin() + static_cast<std::ptrdiff_t>(i + 12), is_hex) &&
                              unit(i + 8) >= 0xDC00 && unit(i + 8) <= 0xDFFF;
          if (!paired)
            return StringFault{i, fmt::format("unpaired surrogate escape \\u{} (a high surrogate needs a low one, "
                                              "\\uDC00-\\uDFFF, right after it)", text.substr(i + 2, 4))};
          i += 6;
        }
        i += 5;
      } else if (n == '"' || n == '\\' || n == '/' || n == 'b' || n == 'f' || n == 'n' || n == 'r' || n == 't') {
        ++i;
      } else {
        return StringFault{i, fmt::format("invalid escape \\{} (JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)",
                                          shown_byte(static_cast<unsigned char>(n)))};
      }
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> closing_bracket(std::string_view text) {
  if (text.empty() || (text[0] != '{' && text[0] != '[')) return std::nullopt;
  std::size_t depth = 0;
  const std::size_t at =
      find_bracket(text, [&](std::size_t, char c) { return (c == '{' || c == '[') ? (++depth, false) : --depth == 0; });
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

std::string describe_json_error(simdjson::error_code e, std::string_view text, std::optional<std::size_t>& at) {
  std::string out(json_error_text(e));
  if (e == simdjson::UTF8_ERROR) {
    const auto bad = first_invalid_utf8(text);
    if (!bad) return out;
    at = *bad;
    return fmt::format("byte 0x{:02X} is not UTF-8 text (logs and traces are UTF-8)",
                       static_cast<unsigned char>(text[*bad]));
  }
  if (e == simdjson::UNCLOSED_STRING) {
    // The last string opened and never closed: the line ends inside it.
    std::optional<std::size_t> open;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (open && text[i] == '\\') ++i;
      else if (text[i] == '"') open = open ? std::nullopt : std::optional<std::size_t>(i);
    }
    if (!open) return out;
    at = *open;
    return "a string is not closed: the text ends inside it (cut short?)";
  }
  if (e != simdjson::UNESCAPED_CHARS && e != simdjson::STRING_ERROR) return out;
  const auto fault = find_string_fault(text);
  if (!fault) return out;
  at = fault->offset;
  return fault->what;
}

bool json_number_syntax(std::string_view tok) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < tok.size() && tok[i] >= '0' && tok[i] <= '9') ++i;
    return i > from;
  };
  if (i < tok.size() && tok[i] == '-') ++i;
  if (i < tok.size() && tok[i] == '0') ++i;
  else if (!digits()) return false;
  if (i < tok.size() && tok[i] == '.' && (++i, !digits())) return false;
  if (i < tok.size() && (tok[i] == 'e' || tok[i] == 'E')) {
    ++i;
    if (i < tok.size() && (tok[i] == '+' || tok[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == tok.size();
}

}  // namespace stepprof::detail
