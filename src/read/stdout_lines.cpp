#include "stdout_lines.hpp"

#include <simdjson.h>

#include <algorithm>

#include "file_kind.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::detail {
namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }
std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Each returns the length of its prefix at the start of `s`, or 0.

// `[rank3]:` or `[default3]:` (letters or `_`, then digits, in brackets, then a colon).
std::size_t torchrun(std::string_view s) {
  std::size_t i = 1;
  if (s.empty() || s[0] != '[') return 0;
  while (i < s.size() && (letter(s[i]) || s[i] == '_')) ++i;
  const std::size_t digits = i;
  while (i < s.size() && digit(s[i])) ++i;
  if (i == digits || i + 1 >= s.size() || s[i] != ']' || s[i + 1] != ':') return 0;
  return i + 2;
}

// `3: ` (srun --label: the task number, a colon, a blank).
std::size_t srun_label(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && digit(s[i])) ++i;
  if (i == 0 || i + 1 >= s.size() || s[i] != ':' || (s[i + 1] != ' ' && s[i + 1] != '\t')) return 0;
  return i + 1;
}

// `2026-12-03T10:00:00.123456789Z` or `...+01:00`: its length, or 0.
std::size_t rfc3339(std::string_view s) {
  auto digits = [&](std::size_t at, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k)
      if (at + k >= s.size() || !digit(s[at + k])) return false;
    return true;
  };
  auto is = [&](std::size_t at, char c) { return at < s.size() && s[at] == c; };
  if (!(digits(0, 4) && is(4, '-') && digits(5, 2) && is(7, '-') && digits(8, 2) && is(10, 'T') && digits(11, 2) &&
        is(13, ':') && digits(14, 2) && is(16, ':') && digits(17, 2)))
    return 0;
  std::size_t i = 19;
  if (is(i, '.') || is(i, ',')) {
    ++i;
    while (i < s.size() && digit(s[i])) ++i;
  }
  if (is(i, 'Z')) {
    ++i;
  } else if (is(i, '+') || is(i, '-')) {
    if (!digits(i + 1, 2)) return 0;
    i += 3;
    if (is(i, ':')) ++i;
    if (!digits(i, 2)) return 0;
    i += 2;
  } else {
    return 0;  // (RFC 3339 gives the zone)
  }
  return i;
}

// An RFC 3339 timestamp, then a blank; and a container runtime's `stdout F ` /
// `stderr P ` after it (CRI).
std::size_t timestamp(std::string_view s) {
  const std::size_t i = rfc3339(s);
  if (i == 0 || i >= s.size() || (s[i] != ' ' && s[i] != '\t')) return 0;
  std::size_t j = i;
  while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
  for (const std::string_view stream : {std::string_view("stdout "), std::string_view("stderr ")})
    if (s.substr(j, stream.size()) == stream && j + 8 < s.size() && (s[j + 7] == 'F' || s[j + 7] == 'P') &&
        s[j + 8] == ' ')
      return j + 9;
  return i;
}

// `[pod/NAME/CONTAINER] ` (kubectl logs --prefix).
std::size_t kubectl_prefix(std::string_view s) {
  if (!s.starts_with("[pod/")) return 0;
  const std::size_t close = s.find(']');
  if (close == std::string_view::npos || s.substr(0, close).find_first_of(" \t{\"") != std::string_view::npos) return 0;
  return close + 1;
}

// A separator line: three or more of `-=_*#~+|^` and blanks, or of the box-drawing
// characters U+2500..U+257F (UTF-8 E2 94 xx, E2 95 xx), as tables and banners print them;
// or a Python traceback's marker line, `^` and `~` and blanks with at least one `^` (a
// SyntaxError's single `^`). No piece of a record is made of these alone.
bool separator(std::string_view line) {
  if (line.find('^') != std::string_view::npos && line.find_first_not_of("^~ \t") == std::string_view::npos)
    return true;
  std::size_t marks = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') continue;
    if (std::string_view("-=_*#~+|^").find(c) != std::string_view::npos) {
      ++marks;
    } else if (c == '\xE2' && i + 2 < line.size() && (line[i + 1] == '\x94' || line[i + 1] == '\x95') &&
               (static_cast<unsigned char>(line[i + 2]) & 0xC0) == 0x80) {
      ++marks;
      i += 2;
    } else {
      return false;
    }
  }
  return marks >= 3;
}

// `line` without its subscripts by a string key (`batch["labels"]`, `d["a"]["b"]`: a
// name, `)` or `]` right before `["`, then a key without `"` or `\`, then `"]`), which
// are code (a traceback's source line), not JSON: in JSON, `[` follows `:`, `,`, `[` or
// a blank.
std::string without_subscripts(std::string_view line) {
  std::string out;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t open = line.find("[\"", i);
    if (open == std::string_view::npos) break;
    const char before = open > 0 ? line[open - 1] : ' ';
    const bool subscripted = letter(before) || (before >= '0' && before <= '9') || before == '_' ||
                             before == ')' || before == ']';
    const std::size_t close = line.find('"', open + 2);
    if (subscripted && close != std::string_view::npos && close + 1 < line.size() && line[close + 1] == ']' &&
        line.substr(open + 2, close - open - 2).find('\\') == std::string_view::npos) {
      out += line.substr(i, open - i);
      i = close + 2;
    } else {
      out += line.substr(i, open + 1 - i);
      i = open + 1;
    }
  }
  out += line.substr(i);
  return out;
}

}  // namespace

CriLine cri_line(std::string_view line) {
  const std::size_t i = rfc3339(line);
  if (i == 0) return {};
  const std::string_view rest = line.substr(i);
  for (const std::string_view stream : {std::string_view(" stdout "), std::string_view(" stderr ")}) {
    if (!rest.starts_with(stream) || rest.size() < stream.size() + 1) continue;
    const char tag = rest[stream.size()];
    if (tag != 'P' && tag != 'F') return {};
    const std::size_t after = i + stream.size() + 1;
    if (after < line.size() && line[after] != ' ') return {};
    return {std::min(after + 1, line.size()), tag == 'P', stream[4] == 'e'};
  }
  return {};
}

DockerLine docker_line(std::string_view line) {
  if (!line.starts_with("{\"log\":")) return {};
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object entry;
  if (parser.parse(line.data(), line.size(), true).get_object().get(entry) != simdjson::SUCCESS) return {};
  std::string_view log, stream, time;
  if (entry["log"].get_string().get(log) != simdjson::SUCCESS ||
      entry["stream"].get_string().get(stream) != simdjson::SUCCESS ||
      entry["time"].get_string().get(time) != simdjson::SUCCESS || (stream != "stdout" && stream != "stderr") ||
      entry["type"].error() != simdjson::NO_SUCH_FIELD)
    return {};
  DockerLine d{true, !log.ends_with('\n'), stream == "stderr", std::string(log)};
  if (!d.partial) d.text.pop_back();
  return d;
}

std::size_t known_prefix_length(std::string_view line) {
  std::size_t at = 0;
  for (int n = 0; n < 3; ++n) {
    const std::string_view rest = line.substr(at);
    std::size_t len = torchrun(rest);
    if (!len) len = srun_label(rest);
    if (!len) len = timestamp(rest);
    if (!len) len = kubectl_prefix(rest);
    if (!len) break;
    at += len;
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
  }
  // A progress bar redrawn with carriage returns (tqdm), then a record on the same line:
  // the text between holds a carriage return and is other output, or has digits and no
  // quote or brace (a bar without a letter, `100%|####| 10/10 [00:01<00:00]`); a cut
  // record's tail, or a comment mark before the record, is not.
  for (std::size_t p = line.find('{', at); p != std::string_view::npos; p = line.find('{', p + 1)) {
    if (!record_starts_at(line, p)) continue;
    const std::string_view between = line.substr(at, p - at);
    const std::string_view shown = trim_blanks(between);
    if (between.find('\r') != std::string_view::npos &&
        (other_output(shown) || (shown.find_first_of("\"{}") == std::string_view::npos &&
                                 shown.find_first_of("0123456789") != std::string_view::npos)))
      at = p;
    break;
  }
  return at;
}

std::size_t trailing_terminal_codes(std::string_view line) {
  const std::size_t brace = line.rfind('}');
  if (brace == std::string_view::npos) return 0;
  std::size_t i = brace + 1, sequences = 0;
  const auto in = [&](std::size_t at, unsigned lo, unsigned hi) {
    const auto b = static_cast<unsigned char>(line[at]);
    return b >= lo && b <= hi;
  };
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
      ++i;
      continue;
    }
    if (line[i] != '\x1b' || i + 1 >= line.size()) return 0;
    if (line[i + 1] == '[') {  // a control sequence (CSI)
      i += 2;
      while (i < line.size() && in(i, 0x30, 0x3F)) ++i;  // parameter bytes
      while (i < line.size() && in(i, 0x20, 0x2F)) ++i;  // intermediate bytes
      if (i >= line.size() || !in(i, 0x40, 0x7E)) return 0;  // the final byte
    } else if (in(i + 1, 0x20, 0x2F)) {  // an escape sequence with intermediates: `tput sgr0`'s `\x1b(B`
      i += 1;
      while (i < line.size() && in(i, 0x20, 0x2F)) ++i;
      if (i >= line.size() || !in(i, 0x30, 0x7E)) return 0;
    } else {
      return 0;
    }
    ++i;
    ++sequences;
  }
  return sequences > 0 ? line.size() - (brace + 1) : 0;
}

bool other_output(std::string_view line) {
  if (line.empty()) return false;
  if (separator(line)) return true;
  bool has_letter = false;
  for (const char c : line) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\t' && b != '\r' && b != 0x1b) || b == 0x7f) return false;
    has_letter = has_letter || letter(c);
  }
  if (!has_letter || !simdjson::validate_utf8(line.data(), line.size())) return false;
  const std::string code = without_subscripts(line);  // (a traceback's `batch["labels"]`)
  const std::string_view whole = line;
  line = code;
  for (std::size_t q = line.find('"'); q != std::string_view::npos; q = line.find('"', q + 1)) {
    std::size_t i = q + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == ':') return false;  // a JSON key: a piece of a record
  }
  // An odd number of quotes, or JSON's punctuation around strings: a piece of a record
  // cut inside a key or value.
  if (std::count(line.begin(), line.end(), '"') % 2 != 0) return false;
  for (const std::string_view json : {"\",\"", "\", \"", ", \"", "[\"", "\"]", "{\"", "\"}"})
    if (line.find(json) != std::string_view::npos) return false;
  if (line.find("{'") != std::string_view::npos) return true;  // a Python dict's print, after text too
  if (whole.back() == '}') return false;
  // A JSON value as a whole (an array, a string) is not a record: the reader says so.
  thread_local simdjson::dom::parser parser;
  return parser.parse(whole.data(), whole.size(), true).error() != simdjson::SUCCESS;
}

bool json_output_of_the_job(std::string_view line) {
  // (The keys only: a value is not checked, so that Python's `{"loss": NaN}` after a
  // divergence is the job's output too. Rare lines: the copy to a padded buffer is cheap.)
  namespace od = simdjson::ondemand;
  thread_local od::parser parser;
  const simdjson::padded_string padded(line);
  od::document doc;
  od::object object;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS || doc.get_object().get(object) != simdjson::SUCCESS)
    return false;
  namespace s = schema;
  bool rank = false, world_size = false;
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return false;
    // An update record's required time, or a field only records have.
    for (const std::string_view k : {s::kType, s::kSchema, s::kWallMs, s::kCudaStreamMs, s::kCpuCallMs, s::kCalls,
                                     s::kParents, s::kCounts})
      if (key == k) return false;
    rank = rank || key == s::kRank;
    world_size = world_size || key == s::kWorldSize;
  }
  if (rank && world_size) return false;  // (a config record's pair)
  // (Text after the object: the record parser says so before it looks for "type"; after
  // a prefix, the line is cut at its last '}'.)
  return true;
}

}  // namespace stepprof::detail
