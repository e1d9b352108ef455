// What a file holds, judged from its first bytes before it is read (gzip decompressed):
// a step log, a profiler trace, stepprof's own output, another JSON or text file, or
// data stepprof cannot read at all (another compression, UTF-16, binary). Internal to
// the reader: file_reader.cpp refuses unreadable data with one error, log_reader.cpp
// leaves out what a directory holds besides logs, with a note.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace stepprof::detail {

/// The first `bytes` bytes of the regular file at `path`, gzip decompressed ("" when it
/// cannot be opened, is not a regular file, or is "-": a pipe's bytes would be consumed).
std::string read_head(const std::string& path, std::size_t bytes = std::size_t{1} << 16);

/// For a regular file whose name ends in ".gz" but whose first bytes are not gzip's magic
/// (1f 8b): " (its name ends in .gz, but it is not gzip data: it was read as plain
/// text)", to add to what the reader says of it; "" otherwise (stdin, a pipe, a real
/// gzip file, another name). A file renamed by hand or a `> out.gz` without gzip.
std::string gz_name_note(const std::string& path);

/// True when a step-log record starts at text[at]: a '{' followed by "type": "config" or
/// "type": "update" (spaces allowed), as every writer puts `type` first.
bool record_starts_at(std::string_view text, std::size_t at);

/// True when a step-log record starts anywhere in `text` (record_starts_at at some '{').
bool has_record_start(std::string_view text);

/// True when a record starts in `text` with line breaks between '{', "type" and its
/// value: records over several lines each (pretty-printed JSON, as `jq .` writes it).
bool has_pretty_record_start(std::string_view text);

/// True when a line of `text` is a markdown table row holding a step-log record: it
/// starts with '|' (after spaces) and a record starts in it.
bool has_table_row(std::string_view text);

/// When `head` (a file's first bytes, decompressed) is not text stepprof can read, what
/// it is and what to do, e.g. "xz-compressed data: stepprof reads plain text and gzip;
/// decompress it first (`xz -d FILE`)"; empty for text. Recognized: xz, bzip2, zstd,
/// lz4, zip and 7z data by their magic bytes, UTF-16 and UTF-32 text (by a byte-order
/// mark, or UTF-16's zero byte after each ASCII character), and other binary data: more
/// than 1 % (and at least 16) of the first bytes are control characters other than
/// tab, newline, form feed, escape, carriage return and NUL, and no step-log record
/// starts among them (a log with a burst of damage is read, its bad lines said). NUL
/// bytes alone are not binary: a crash zero-fills what was being written. `expected`
/// ends the message for binary data: "binary data, not text (...): not <expected>".
/// With `reads_gzip` false (a file read as plain text only), gzip data is named too, and
/// compressed data is "<expected> is read as plain text; decompress it first (...)".
std::string unreadable_format(std::string_view head, std::string_view expected = "a step log or a profiler trace",
                              bool reads_gzip = true);

/// True when `first` (a file's first line) starts a trace in the Chrome trace format's
/// array form: '[' and an event object with a "ph" (phase) key in its first 200 bytes.
/// stepprof reads traces as an object with "traceEvents" (Kineto's form), not this one.
bool looks_like_trace_event_array(std::string_view first);
/// What such a file is, for messages: "a JSON array of trace events (the Chrome trace
/// format's array form), not a step log or a PyTorch profiler trace".
inline constexpr std::string_view kTraceEventArray =
    "a JSON array of trace events (the Chrome trace format's array form), not a step log or a PyTorch profiler trace";
/// Why such an array is not read, and where it comes from (for `report` and `import
/// kineto` alike).
inline constexpr std::string_view kTraceEventArrayWhy =
    "stepprof reads a trace as one JSON object with a \"traceEvents\" array, as torch.profiler writes it with Kineto. "
    "A torch built without Kineto (torch.autograd.kineto_available() is False) and the legacy "
    "torch.autograd.profiler's export_chrome_trace() write this array form, without the event categories and GPU "
    "records stepprof needs (docs/kineto.md)";

/// For a file found in a directory (not named): why it is not a step log or a profiler
/// trace, e.g. "a text file, not JSON lines (a training log?)"; empty when it is one or
/// may be one. A file in whose first 64 KiB a step-log record starts anywhere (so a
/// damaged start: a cut first record, a stray print before the records), that is empty,
/// starts with NUL bytes or malformed JSON, or cannot be read gets "", so that it is
/// read and its problems said.
/// What is left out: a first line that is not JSON (text), a JSON array, a JSON
/// document over several lines (a config or state file), a first record without a
/// "type" field, and stepprof's own outputs (`report --format json`, `whatif --format
/// json`, `trace`: their "schema" or "generator" says so).
std::string not_a_log(const std::string& path);

/// When `head` (a file's first bytes) is stepprof's own JSON output (a report, a what-if,
/// a synth manifest: its "schema" says so), what it is; empty otherwise.
std::string stepprof_output(std::string_view head);

/// When `head` (a file's first bytes) is a trace written by `stepprof trace` (its
/// otherData's "generator" says so), what it is, for a message; empty otherwise.
std::string stepprof_trace_export(std::string_view head);

/// True when the regular file at `path` (gzip: decompressed) starts with a step-log record (`stepprof import
/// kineto` given a log instead of a trace).
bool starts_like_a_step_log(const std::string& path);

}  // namespace stepprof::detail
