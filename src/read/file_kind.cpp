#include "file_kind.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <simdjson.h>

#include "byte_source.hpp"
#include "stdout_lines.hpp"
#include "stepprof/kineto.hpp"

namespace stepprof::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view first_line(std::string_view s) {
  const auto nl = s.find('\n');
  std::string_view line = s.substr(0, nl);
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  return line;
}

// "stepprof.report/1" and the like, when `text` has a "schema" key with such a value.
std::string stepprof_schema(std::string_view text) {
  for (auto at = text.find("\"schema\""); at != std::string_view::npos; at = text.find("\"schema\"", at + 1)) {
    auto i = at + 8;
    while (i < text.size() && (is_space(text[i]) || text[i] == ':')) ++i;
    if (text.substr(i, 10) == "\"stepprof.") {
      const auto end = text.find('"', i + 1);
      if (end != std::string_view::npos) return std::string(text.substr(i + 1, end - i - 1));
    }
  }
  return {};
}

std::string own_output(const std::string& schema) {
  const std::string_view command = schema.starts_with("stepprof.whatif/")           ? "stepprof whatif --format json"
                                   : schema.starts_with("stepprof.report/")         ? "stepprof report --format json"
                                   : schema.starts_with("stepprof.synth-manifest/") ? "stepprof synth --manifest"
                                                                                     : "stepprof";
  return fmt::format("stepprof's own output (schema \"{}\", from `{}`), not a step log", schema, command);
}

}  // namespace

std::string stepprof_output(std::string_view head) {
  auto schema = stepprof_schema(head);
  return schema.empty() ? std::string() : own_output(schema);
}

std::string stepprof_trace_export(std::string_view head) {
  // "generator": "stepprof trace", with any whitespace (a copy re-serialized by jq or
  // Python's json.dump has a space after the colon).
  bool found = false;
  for (auto at = head.find("\"generator\""); at != std::string_view::npos && !found;
       at = head.find("\"generator\"", at + 1)) {
    std::size_t i = at + 11;
    auto skip = [&] {
      while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) ++i;
    };
    skip();
    if (i >= head.size() || head[i] != ':') continue;
    ++i;
    skip();
    found = head.substr(i).starts_with("\"stepprof trace\"");
  }
  if (!found) return {};
  return "stepprof's own trace export (from `stepprof trace`; open it in Perfetto), not a profiler trace: give "
         "the step logs it was made from";
}

std::string read_head(const std::string& path, std::size_t bytes) {
  struct stat st {};
  if (path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::string err;
  auto src = ByteSource::open(path, err, bytes);
  if (!src) return {};
  while (src->size() < bytes && src->fill()) {
  }
  return std::string(src->data(), std::min(src->size(), bytes));
}

std::string gz_name_note(const std::string& path) {
  struct stat st {};
  if (!path.ends_with(".gz") || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  in.read(magic, 2);
  if (!in) return {};  // (fewer than two bytes: an empty file is said to be empty)
  if (magic[0] == '\x1f' && magic[1] == '\x8b') return {};
  return " (its name ends in .gz, but it is not gzip data: it was read as plain text)";
}

namespace {

// record_starts_at, with line breaks allowed between the tokens when `across_lines`.
bool record_starts_at(std::string_view text, std::size_t at, bool across_lines) {
  auto skip_space = [&](std::size_t i) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\t' || (across_lines && (text[i] == '\n' || text[i] == '\r'))))
      ++i;
    return i;
  };
  auto word = [&](std::size_t i, std::string_view w) { return text.substr(i, w.size()) == w ? i + w.size() : 0; };
  if (at >= text.size() || text[at] != '{') return false;
  std::size_t i = word(skip_space(at + 1), "\"type\"");
  if (!i) return false;
  i = skip_space(i);
  if (i >= text.size() || text[i] != ':') return false;
  i = skip_space(i + 1);
  return word(i, "\"config\"") || word(i, "\"update\"");
}

bool has_record_start(std::string_view head, bool across_lines) {
  for (auto at = head.find('{'); at != std::string_view::npos; at = head.find('{', at + 1))
    if (record_starts_at(head, at, across_lines)) return true;
  return false;
}

}  // namespace

bool record_starts_at(std::string_view text, std::size_t at) { return record_starts_at(text, at, false); }

bool has_record_start(std::string_view head) { return has_record_start(head, false); }

bool has_pretty_record_start(std::string_view head) { return has_record_start(head, true); }

bool has_table_row(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const auto nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.starts_with('|') && has_record_start(line)) return true;
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return false;
}

std::string unreadable_format(std::string_view head, std::string_view expected, bool reads_gzip) {
  struct Magic {
    std::string_view bytes, what, undo;
  };
  static constexpr std::array<Magic, 6> kMagic = {{
      {std::string_view("\xFD" "7zXZ\0", 6), "xz-compressed data", "`xz -d FILE`"},
      {"BZh", "bzip2-compressed data", "`bunzip2 FILE`"},
      {"\x28\xB5\x2F\xFD", "zstd-compressed data", "`zstd -d FILE`"},
      {"\x04\x22\x4D\x18", "lz4-compressed data", "`lz4 -d FILE`"},
      {"PK\x03\x04", "a zip archive", "`unzip FILE`"},
      {"7z\xBC\xAF\x27\x1C", "a 7z archive", "`7z x FILE`"},
  }};
  const std::string reads =
      reads_gzip ? std::string("stepprof reads plain text and gzip") : fmt::format("{} is read as plain text", expected);
  for (const auto& m : kMagic)
    if (head.starts_with(m.bytes) && !(m.bytes == "BZh" && (head.size() < 4 || head[3] < '1' || head[3] > '9')))
      return fmt::format("{}: {}; decompress it first ({})", m.what, reads, m.undo);
  if (!reads_gzip && head.starts_with("\x1f\x8b"))
    return fmt::format("gzip-compressed data: {}; decompress it first (`gunzip FILE`)", reads);
  // (`head` is what a gzip file holds: gzip again is a file compressed twice.)
  if (reads_gzip && head.starts_with("\x1f\x8b"))
    return "gzip-compressed data inside the gzip (compressed twice): stepprof undoes one layer; decompress it once "
           "first (`gunzip -c FILE > OUT`, then read OUT)";
  auto utf = [](std::string_view enc) {
    return fmt::format("{} text: stepprof reads UTF-8 (or ASCII); convert it first (`iconv -f {} -t UTF-8 FILE`)", enc,
                       enc);
  };
  if (head.starts_with(std::string_view("\xFF\xFE\0\0", 4)) || head.starts_with(std::string_view("\0\0\xFE\xFF", 4)))
    return utf("UTF-32");
  if (head.starts_with("\xFF\xFE") || head.starts_with("\xFE\xFF")) return utf("UTF-16");
  // UTF-16 without a byte-order mark: ASCII characters with a zero byte after (LE) or
  // before (BE) each.
  if (head.size() >= 4 && head[0] != '\0' && head[1] == '\0' && head[2] != '\0' && head[3] == '\0')
    return utf("UTF-16LE");
  if (head.size() >= 4 && head[0] == '\0' && head[1] != '\0' && head[2] == '\0' && head[3] != '\0')
    return utf("UTF-16BE");
  // A log with damage in it (a burst of random bytes) still holds records: it is read,
  // and its bad lines are said one by one. (Looked for first: in a log the first record
  // is near the top, and the count below need not be made.)
  if (has_record_start(head)) return {};
  std::size_t control = 0, text = 0;
  for (const char ch : head) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) continue;
    ++text;
    // (DEL, 0x7f, is legal unescaped in JSON strings: not counted.)
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b) ++control;
  }
  if (control >= 16 && control * 100 > text)
    return fmt::format("binary data, not text ({} of its first {} bytes are control characters): not {}", control,
                       head.size(), expected);
  return {};
}

bool looks_like_trace_event_array(std::string_view first) {
  if (!first.starts_with('[')) return false;
  const auto head = first.substr(0, 200);
  const auto brace = head.find('{');
  return brace != std::string_view::npos && head.find_first_not_of(" \t", 1) == brace &&
         head.find("\"ph\"") != std::string_view::npos;
}

namespace {

// How much of a text file found in a directory is looked through for a record: a job's
// start-up output (NCCL's lines, a model summary) is KBs to a few MB; a GiB took 1.4 s
// uncached and 2 s gzipped, per file (a review).
constexpr std::size_t kTextScanBytes = std::size_t{64} << 20;

// Looks through `path` (gzip: decompressed) for a step-log record's start, reading it in
// pieces: nullopt when one starts somewhere, else the bytes looked through (more than
// kTextScanBytes when it stopped there). A file that cannot be opened counts as a record
// (the reader then says what is wrong with it); one whose rest cannot be read (a cut
// gzip) is judged by what was read (a cut `train.log.gz` without records was read as a
// log, and its warning failed --strict: a review).
std::optional<std::size_t> record_start_after_head(const std::string& path) {
  std::string err;
  auto src = ByteSource::open(path, err, std::size_t{1} << 20);
  if (!src) return std::nullopt;
  constexpr std::size_t kOverlap = 256;  // (a record's start is its first few dozen bytes)
  std::size_t scanned = 0;
  while (src->fill()) {
    const std::string_view buffered(src->data(), src->size());
    if (has_record_start(buffered, false)) return std::nullopt;
    if (buffered.size() > kOverlap) {
      scanned += buffered.size() - kOverlap;
      src->consume(buffered.size() - kOverlap);
    }
    if (scanned > kTextScanBytes) return scanned;
  }
  return scanned + src->size();
}

}  // namespace

std::string not_a_log(const std::string& path) {
  const std::string head_bytes = read_head(path);
  std::string_view head = head_bytes;
  if (!unreadable_format(head).empty()) return {};  // it has a log's name: the reader says what it is
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  // The first line that is not blank or a '#' comment (an environment dump, a heading):
  // the reader skips those too. Only such lines in the first 64 KiB: read it.
  std::size_t first = 0;
  for (;;) {
    while (first < head.size() && is_space(head[first])) ++first;
    if (first == head.size() || head[first] != '#') break;
    const auto nl = head.find('\n', first);
    if (nl == std::string_view::npos) return {};
    first = nl + 1;
  }
  if (first == head.size()) return {};  // empty, blank or comments: the reader says so
  const char c = head[first];
  if (c == '\0' || c == '|') return {};  // a crash's zeros; a markdown table
  // A record anywhere in the first 64 KiB: a log whose start is damaged (cut, a stray
  // print before the first record, a lone "{"). It is read, and the damage is said.
  if (has_record_start(head)) return {};
  const std::string_view line = first_line(head.substr(first));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  auto parses_as = [&](simdjson::dom::element_type type) {
    return parser.parse(simdjson::padded_string(line)).get(doc) == simdjson::SUCCESS && doc.type() == type;
  };
  if (c == '[' && looks_like_trace_event_array(line))
    return std::string(kTraceEventArray) +
           " (an object with \"traceEvents\", as torch.profiler writes it with Kineto: docs/kineto.md)";
  if (c == '[' && (line == "[" || parses_as(simdjson::dom::element_type::ARRAY)))
    return "a JSON array, not JSON lines (one record per line)";
  if (c != '{') {
    // A job's stdout saved as its log can hold much other output before its first record
    // (NCCL's INFO lines at start-up: 150 KB in a helper's log, which was left out of a
    // directory with only a note while the same file named was read): the rest of the file
    // is looked through too, up to kTextScanBytes.
    if (const auto scanned = record_start_after_head(path); !scanned) return {};
    else if (*scanned > kTextScanBytes)
      return fmt::format("a text file with no step-log record in its first {} MiB (a training log?)",
                         kTextScanBytes >> 20);
    return "a text file with no step-log record in it (a training log?)";
  }
  if (is_kineto_trace(path)) return stepprof_trace_export(head);
  if (line == "{") {
    if (auto schema = stepprof_schema(head); !schema.empty()) return own_output(schema);
    return "a JSON document over several lines (a config or state file?), not JSON lines";
  }
  // One line: a record without "type" is not a step log's; a line that does not parse
  // (cut, damaged) is read, so that its problem is said.
  if (!parses_as(simdjson::dom::element_type::OBJECT)) return {};
  simdjson::dom::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) return {};
  if (obj["type"].error() == simdjson::SUCCESS) return {};
  // Docker's json-file log (`{"log": ...}` entries) with records in the entries' text:
  // the reader unwraps them.
  if (docker_line(line).is_docker)
    for (std::size_t at = first; at < head.size();) {
      const auto nl = head.find('\n', at);
      const std::string_view entry = head.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
      if (const DockerLine d = docker_line(entry); d.is_docker && has_record_start(d.text)) return {};
      if (nl == std::string_view::npos) break;
      at = nl + 1;
    }
  if (std::string_view schema; obj["schema"].get_string().get(schema) == simdjson::SUCCESS &&
                               schema.starts_with("stepprof."))
    return own_output(std::string(schema));
  // A job's stdout that starts with its own JSON (an arguments dump) and holds records
  // further on: read.
  if (!record_start_after_head(path)) return {};
  return "its first line is a JSON object without a \"type\" field (a config file?), not a step log record";
}

bool starts_like_a_step_log(const std::string& path) {
  // (stdin, a pipe or a FIFO: "", read once, as it streams; gzip decompressed)
  const std::string head = read_head(path, 4096);
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && record_starts_at(head, first);
}

}  // namespace stepprof::detail
