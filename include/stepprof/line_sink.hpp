// Where the recorder's records go: by default a file (open_file_sink); tests substitute
// a sink that fails to show how write errors are counted and reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <string_view>

namespace stepprof {

/// Receives whole records, one `write()` per record (the line and its newline).
class LineSink {
 public:
  virtual ~LineSink() = default;
  /// Writes `bytes`: one record, its line and newline. After a write that failed partway,
  /// a lone newline in front ends the cut line (a line, not a record); while the config
  /// record's write at open() has failed, that record goes in front too. Returns 0, or an errno value (e.g. ENOSPC) when not all of it was
  /// written. `written` gets the number of bytes written (less than bytes.size() after
  /// a failure: a partial line that the recorder terminates before the next record).
  virtual int write(std::string_view bytes, std::size_t& written) noexcept = 0;
  /// Asks the OS to persist what was written (may block on the disk); 0 or errno.
  virtual int sync() noexcept { return 0; }
  /// Closes the sink; 0 or errno.
  virtual int close() noexcept { return 0; }
  /// Records that write() took (returned 0) but that never reached the target, or have
  /// not yet: a sink that queues what a slow reader has not taken (the file sink, for a
  /// pipe or FIFO) counts those it dropped (the reader went away, or close() gave up
  /// waiting) and those still queued [records]. 0 for a sink that queues nothing.
  [[nodiscard]] virtual std::size_t unwritten_records() const noexcept { return 0; }
  /// unwritten_records(), or nullopt when that would wait for a lock another thread holds
  /// (at process exit).
  [[nodiscard]] virtual std::optional<std::size_t> unwritten_records_now() const noexcept {
    return unwritten_records();
  }
  /// What became of the file written to since it was opened (checked before each update
  /// record: one fstat, about a microsecond).
  enum class State : std::uint8_t {
    kSame,
    /// Deleted (unlinked): what was written to it is in no file any more, and what is
    /// written next would not be either.
    kDeleted,
    /// The descriptor leads to another file: the program closed it and the number was
    /// reused (a checkpoint, a socket); writing would put records into that file.
    kReplaced,
  };
  [[nodiscard]] virtual State state() const noexcept { return State::kSame; }
  /// After kReplaced: lets go of the descriptor without closing it (it is the program's
  /// now). Later writes fail (EBADF); what waited for a pipe's reader is dropped and
  /// counted in unwritten_records().
  virtual void abandon() noexcept {}
  /// In a child of fork(), whose copy of the sink is the parent's: lets go of what the
  /// child's copy holds without touching the parent's (a file sink closes its copy of the
  /// descriptor, so the file's lock goes with the parent's close). Async-signal-safe.
  virtual void release_in_child() noexcept {}
};

/// The `error` of open_file_sink when another process holds the file's lock (not an
/// errno value).
inline constexpr int kErrFileLocked = -1;
/// The `error` of open_file_sink for a FIFO (named pipe) that no process reads yet.
inline constexpr int kErrFifoNoReader = -2;

/// Opens `path` for writing records: created with mode 0644 (and its missing parent
/// directories, as `mkdir -p` would); a regular file other than the one stdout or stderr
/// writes to is locked with flock(LOCK_EX) for as long as it is open, then truncated
/// unless `append` (with `append`, a cut last line is ended with a newline first); written
/// with O_APPEND and one write(2) per record (no user-space buffer, so a record is in the
/// file as soon as end_update returns). A pipe, FIFO or terminal is written without ever
/// blocking: what its reader has not taken yet waits in a queue of at most 1 MiB (a record
/// that does not fit is a failed write, EAGAIN), which a flusher thread (started when a
/// record first waits, every signal blocked in it) sends as the reader takes it, and
/// which goes before the next write; close() joins the flusher (at most 50 ms) and
/// gives the reader up to 1 s to take what still waits. A reader that exits is an EPIPE
/// error, never a SIGPIPE (which would end the process). Returns null with
/// `error` set to the errno value when the file cannot be opened, to kErrFileLocked
/// when another process holds its lock (records to it; the file is then left as it is),
/// or to kErrFifoNoReader (never blocks).
std::unique_ptr<LineSink> open_file_sink(const std::string& path, bool append, int& error);

/// True when `path` is the file this process's stdout or stderr writes to (/dev/stdout,
/// a job's output file given as the log): open_file_sink neither locks nor truncates it.
bool is_own_output_file(const std::string& path);

}  // namespace stepprof
