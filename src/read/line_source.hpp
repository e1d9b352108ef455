// Reads a file (plain or gzip, or stdin) in large chunks and hands out its lines,
// each followed by enough readable bytes for the JSON parser. Memory stays bounded
// by the chunk size plus the longest line. Internal to the reader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "byte_source.hpp"

namespace stepprof::detail {

class LineSource {
 public:
  /// Opens `path` ("-" is stdin) as ByteSource::open does (gzip detected from the
  /// content; a pipe or FIFO waited on while `*cancel` is unset). On failure returns
  /// nullptr and sets `error` to the reason (e.g. "No such file or directory").
  static std::unique_ptr<LineSource> open(const std::string& path, std::string& error,
                                          std::size_t chunk_bytes = 1 << 20,
                                          const std::atomic<bool>* cancel = nullptr);

  /// The next line without its '\n' (and without a trailing '\r'). Returns false at
  /// the end of input, or once `*cancel` is set while a long line is being read.
  /// `terminated` is false only for a last line with no '\n'.
  /// The returned view stays valid until the next call and is followed by
  /// `padding` readable bytes.
  ///
  /// Runs of zero bytes (what a crash or power loss leaves where a file was being
  /// written) are cut to `kZerosKept` bytes while a line longer than one chunk is read,
  /// and counted in zeros_dropped(), so that a zero-filled tail of any length costs one
  /// chunk of memory, not its length.
  bool next(std::string_view& line, bool& terminated);
  /// The first `n` bytes of the input (fewer at its end), without consuming them: for a
  /// look at what a pipe holds before its lines are read. Call before next().
  std::string_view peek(std::size_t n);
  /// Zero bytes left out of the line last returned (see next()).
  [[nodiscard]] std::uint64_t zeros_dropped() const { return zeros_dropped_; }
  static constexpr std::size_t kZerosKept = 16;
  /// Zero bytes in one line of a stream (ByteSource::stream()) past which reading stops
  /// with an error(): what a crash leaves is a file's unwritten tail, finite (a regular
  /// file is read to its end); /dev/zero never ends, and was read for as long as the
  /// command ran.
  static constexpr std::uint64_t kMostZerosInALine = std::uint64_t{1} << 30;
  /// 1-based number of the line last returned.
  [[nodiscard]] std::uint64_t line_number() const { return line_no_; }
  /// Non-empty when reading stopped on an error (e.g. a truncated gzip stream, a line of
  /// more than kMostZerosInALine zero bytes).
  [[nodiscard]] const std::string& error() const { return stopped_.empty() ? src_->error() : stopped_; }
  /// With an error: true when the input just ends early (a gzip stream cut off), false
  /// when it is corrupt or could not be read (a bad checksum, an I/O error).
  [[nodiscard]] bool cut_off() const { return stopped_.empty() && src_->cut_off(); }
  /// With an error: the lines already returned may be altered (ByteSource::checksum_failed).
  [[nodiscard]] bool checksum_failed() const { return src_->checksum_failed(); }
  /// Bytes read from the (decompressed) input so far.
  [[nodiscard]] std::uint64_t bytes_read() const { return src_->bytes_read(); }
  /// Bytes consumed from the file itself (compressed bytes for gzip input), for progress.
  [[nodiscard]] std::uint64_t raw_bytes_read() const { return src_->raw_bytes_read(); }

  static constexpr std::size_t padding = ByteSource::padding;

 private:
  LineSource(std::unique_ptr<ByteSource> src, const std::atomic<bool>* cancel)
      : src_(std::move(src)), cancel_(cancel) {}

  std::unique_ptr<ByteSource> src_;
  const std::atomic<bool>* cancel_;
  std::uint64_t zeros_dropped_ = 0;
  std::string stopped_;  // why reading stopped here, if it did (else the byte source's error)
  std::size_t returned_ = 0;  // bytes of the line last returned (with its newline), consumed on the next call
  std::uint64_t line_no_ = 0;
};

}  // namespace stepprof::detail
