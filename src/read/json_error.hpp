// simdjson's errors in words for people reading messages about a log line or a trace
// event, and where in the text a string's fault lies. simdjson's own texts name its
// internals ("TAPE_ERROR", "Problem while parsing a string") and say nothing of where.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace stepprof::detail {

/// What simdjson's error `e` means, in a few words (no trailing period): for example
/// "a string is not closed (a quote is missing)". Errors that a well-formed input cannot
/// cause (misuse of simdjson) fall back to simdjson's own text.
std::string_view json_error_text(simdjson::error_code e);

/// A fault in one of a JSON text's strings, or a control byte between values.
struct StringFault {
  std::size_t offset = 0;  ///< of the offending byte in the text (0-based) [bytes]
  std::string what;        ///< e.g. "invalid escape \x (JSON allows \" \\ \/ \b \f \n \r \t \uXXXX)"
};

/// The first unescaped control byte (below 0x20) in a string or between values (other
/// than whitespace: tab, line feed, carriage return), invalid escape sequence or unpaired
/// UTF-16 surrogate escape (\uD800-\uDFFF) in a string, scanning `text` from its start;
/// nullopt when there is none. For simdjson's
/// UNESCAPED_CHARS and STRING_ERROR, which say neither what nor where.
std::optional<StringFault> find_string_fault(std::string_view text);

/// The offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629,
/// section 4: no overlong forms, no surrogates, nothing beyond U+10FFFF; a sequence cut
/// short by the end of the text included); nullopt when all of it is. (simdjson's
/// validator says only whether.)
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

/// The offset of the '}' or ']' that closes the object or array opening at text[0]
/// (strings and their escapes skipped, brackets counted), or nullopt when the text ends
/// first or does not start with '{' or '['. For text after a whole record.
std::optional<std::size_t> closing_bracket(std::string_view text);

/// json_error_text(e); for a string error whose fault find_string_fault finds, that
/// fault's `what` instead, and `at` set to its offset in `text`; for UTF8_ERROR, the
/// first byte that is not UTF-8, named, and `at` set to it; for UNCLOSED_STRING, `at`
/// set to the opening quote of the string the text ends in (else `at` is left as is).
std::string describe_json_error(simdjson::error_code e, std::string_view text, std::optional<std::size_t>& at);

/// True when `tok` is a number as JSON writes them (RFC 8259, section 6):
/// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, whatever its magnitude. Tells a
/// number out of range (simdjson's NUMBER_ERROR for 1e999 or 400 digits) from one JSON
/// does not allow (`02`, `1.`, `2x0`).
bool json_number_syntax(std::string_view tok);

}  // namespace stepprof::detail
