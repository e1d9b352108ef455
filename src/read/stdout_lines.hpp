// The lines of a job's stdout saved as its log (a Slurm output file, a Kubernetes
// container log, a log collector's stream): the prefixes launchers and collectors put
// before each line, and the other output printed among the records. Internal to the
// reader (docs/log-schema.md, "A job's stdout").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace stepprof::detail {

/// A line of a CRI container log file (Kubernetes' /var/log/pods/...): `TIME STREAM TAG
/// CONTENT`, TIME in RFC 3339, STREAM `stdout` or `stderr`, TAG `F` for a whole line or
/// its last part and `P` for a part of a line the runtime split (containerd and CRI-O
/// split lines longer than 16 KiB; the kubelet's CRI logging spec). `content_at` is 0 when
/// `line` is not of that form.
struct CriLine {
  std::size_t content_at = 0;  ///< where CONTENT starts (after the one blank that follows TAG)
  bool partial = false;        ///< TAG is `P`: the line goes on in the stream's next line
  bool to_stderr = false;      ///< STREAM is `stderr`
};
CriLine cri_line(std::string_view line);

/// A line of Docker's json-file log driver (`/var/lib/docker/containers/ID/ID-json.log`):
/// `{"log":"TEXT\n","stream":"stdout","time":"..."}`, TEXT being the job's line, JSON-escaped.
/// Docker splits a line over 16 KiB into entries whose TEXT has no final `\n`. `is_docker`
/// is false when `line` is not such an object (it must start with `{"log":` and have the
/// string members `log`, `stream` (`stdout` or `stderr`) and `time`, and no `type`).
struct DockerLine {
  bool is_docker = false;
  bool partial = false;    ///< TEXT does not end with `\n`: the line goes on in the stream's next entry
  bool to_stderr = false;  ///< `stream` is `stderr`
  std::string text;        ///< TEXT unescaped, without its final `\n`
};
DockerLine docker_line(std::string_view line);

/// Length of the known prefixes at the start of `line` (0 when none), with the blanks
/// after them: torchrun's `[rank3]:` / `[default3]:` (`--tee`,
/// `--log-line-prefix-template`'s default), `srun --label`'s `3: `, an RFC 3339 timestamp
/// (`kubectl logs --timestamps`) optionally followed by a container runtime's
/// `stdout F ` / `stderr P ` (CRI log files), and `kubectl logs --prefix`'s
/// `[pod/NAME/CONTAINER] `; up to three of them in a row. Then, when the text between
/// them and a record's start holds a carriage return and is other output (a tqdm bar
/// redrawn on the line before a record), that text too.
std::size_t known_prefix_length(std::string_view line);

/// Length of what follows a record's closing `}` at the end of `line` when that is terminal
/// control sequences only, with blanks: ECMA-48 control sequences (ESC `[`, parameter bytes
/// 0x30-0x3F, intermediate bytes 0x20-0x2F, a final byte 0x40-0x7E), e.g. the colour reset
/// `\x1b[0m` a logger that colours its lines writes after the message, and escape
/// sequences with intermediate bytes (ESC, 0x20-0x2F bytes, a final byte 0x30-0x7E), e.g.
/// `tput sgr0`'s `\x1b(B\x1b[m`. 0 when `line` does not end so (no `}`, no sequence, or
/// other text after the `}`).
std::size_t trailing_terminal_codes(std::string_view line);

/// True when `line` (trimmed, after any known prefix) is other output of the job, not a
/// record or a damaged piece of one: a separator line (three or more of `-=_*#~+|^` or
/// box-drawing characters, and blanks; also a traceback's marker line of `^` and `~`, even
/// a single `^`), or valid
/// UTF-8 text without control bytes other than tab, carriage return and escape (terminal
/// colours), holding a letter, with an even number of `"`, no `"` followed by `:` (a JSON
/// key) nor JSON's punctuation around a string (`", "`, `["`, `{"`, ...), once subscripts
/// by a string key (`batch["labels"]`: code, as in a traceback) are left out; then either
/// holding a Python dict's print (`{'loss': ...}`), or not ending
/// with `}` (as every record does) and not a JSON value as a whole.
bool other_output(std::string_view line);

/// True when `line`, a JSON object, is the job's own JSON output printed among the
/// records on its stdout (`{"step": 5, "loss": 0.52, "lr": 3e-4}`), not a record or one
/// that lost its type: an object whose keys parse, with no "type", none of the fields an
/// update record must have or only records have (wall_ms, cuda_stream_ms, cpu_call_ms,
/// calls, parents, counts, schema) and not both rank and world_size (a config record's).
/// A nested field does not count, and values are not checked (Python writes NaN). Text
/// after the object is the caller's to rule out.
bool json_output_of_the_job(std::string_view line);

}  // namespace stepprof::detail
