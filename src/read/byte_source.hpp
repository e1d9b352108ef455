// Reads a file (plain or gzip, or stdin) in large chunks into a caller-owned window,
// keeping the unread tail: what the Kineto trace splitter streams over. Memory stays
// bounded by the chunk size plus the longest span the caller keeps. Internal to the reader.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>
#include <zlib.h>

namespace stepprof::detail {

/// A byte buffer that is not zeroed when made or grown: its bytes are written by read()
/// or inflate() before they are read. (Zeroing a 1 MiB window per file was a tenth of
/// the time to read 4,096 small rank logs.)
class RawBuffer {
 public:
  explicit RawBuffer(std::size_t n) : bytes_(std::make_unique_for_overwrite<char[]>(n)), size_(n) {}
  [[nodiscard]] char* data() { return bytes_.get(); }
  [[nodiscard]] const char* data() const { return bytes_.get(); }
  [[nodiscard]] std::size_t size() const { return size_; }
  /// Grows to `n` bytes (n >= size()), keeping the first `keep` bytes.
  void grow(std::size_t n, std::size_t keep);

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t size_;
};

class ByteSource {
 public:
  /// Opens `path` ("-" is stdin). gzip input is detected from its content (the magic
  /// bytes 1f 8b), whatever the file's name; other input is read as it is. Concatenated
  /// gzip members are read one after another; bytes after the last member that are not
  /// another member stop reading with an error naming how many there are (zlib's gzread
  /// would skip them without a word). On failure returns nullptr and sets `error` to the
  /// reason (e.g. "No such file or directory").
  ///
  /// A pipe, FIFO or terminal is waited on with poll() in steps of 100 ms, so that
  /// setting `*cancel` stops a read (or a FIFO's open) that would block, with the error
  /// "interrupted"; a regular file is read with plain read() calls.
  static std::unique_ptr<ByteSource> open(const std::string& path, std::string& error,
                                          std::size_t chunk_bytes = std::size_t{1} << 20,
                                          const std::atomic<bool>* cancel = nullptr);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  /// True for a pipe, FIFO, terminal or character device (not a regular file or block
  /// device): input that may have no end.
  [[nodiscard]] bool stream() const { return wait_; }
  /// The buffered bytes [data(), data() + size()), followed by `padding` zero bytes.
  [[nodiscard]] const char* data() const { return buf_.data() + begin_; }
  [[nodiscard]] std::size_t size() const { return end_ - begin_; }
  /// Drops the first `n` buffered bytes (n <= size()).
  void consume(std::size_t n) { begin_ += n; }
  /// Cuts every run of zero bytes in the buffered bytes from `from` on (counting zeros
  /// just before `from` into the run) to its first `keep` bytes, moving the later bytes
  /// down. Returns how many zero bytes were dropped. For a crash's zero-filled tail,
  /// which holds no newline: without this, a line reader would hold it whole (a 1 GB
  /// tail, 1 GB of buffer). One pass; nothing is moved when there is no zero byte.
  std::size_t squeeze_zeros(std::size_t from, std::size_t keep);
  /// Appends at least one more byte to the buffered bytes, moving them to the front and
  /// growing the buffer when they fill it. Returns false at the end of input or on an
  /// error (see error()). Pointers into the buffer are invalidated.
  bool fill();

  /// Non-empty when reading stopped on an error (e.g. a truncated gzip stream).
  [[nodiscard]] const std::string& error() const { return error_; }
  /// With an error: true when the input just ends early (a gzip stream cut off), false
  /// when it is corrupt or could not be read (a bad checksum, an I/O error).
  [[nodiscard]] bool cut_off() const { return cut_; }
  /// With an error: true when a gzip member's CRC-32 or length check failed at its end,
  /// so the bytes already returned from that member may be altered (they decompressed,
  /// but not to what was written).
  [[nodiscard]] bool checksum_failed() const { return checksum_failed_; }
  /// Bytes consumed from the file itself (compressed bytes for gzip input), for progress.
  [[nodiscard]] std::uint64_t raw_bytes_read() const;
  /// Decompressed bytes before data() (the file offset of the first buffered byte).
  [[nodiscard]] std::uint64_t offset() const { return read_ - squeezed_ - (end_ - begin_); }
  /// Decompressed bytes read so far.
  [[nodiscard]] std::uint64_t bytes_read() const { return read_; }
  /// Bytes allocated for the buffer (for memory accounting in tests).
  [[nodiscard]] std::size_t capacity() const { return buf_.size(); }

  static constexpr std::size_t padding = 64;

 private:
  ByteSource(int fd, std::size_t chunk_bytes, const std::atomic<bool>* cancel, bool wait);
  // read(2) that, for a pipe or FIFO, first waits for data while *cancel_ is unset.
  // Returns -1 with errno set (EINTR once cancelled).
  ssize_t read_some(void* to, std::size_t n);
  // Reads raw bytes into in_ after the unread ones; false at the end of the file or on an
  // I/O error (error_ set).
  bool read_raw();
  // Decompresses into buf_[end_, end_ + room); returns the bytes produced (0: the end,
  // or an error in error_).
  std::size_t inflate_into(std::size_t room);
  // At the end of a gzip member: true when another member follows (zlib is reset for it).
  bool next_member();

  int fd_;
  const std::atomic<bool>* cancel_;
  bool wait_;  // not a regular file: poll before reading
  bool gzip_ = false;
  z_stream zs_{};
  bool zs_open_ = false;
  bool gz_done_ = false;  // the last member ended
  RawBuffer in_;  // raw (compressed) bytes; zs_.next_in / avail_in point into it
  bool raw_eof_ = false;
  std::uint64_t raw_read_ = 0;  // bytes read from the file
  std::size_t chunk_;
  RawBuffer buf_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::uint64_t read_ = 0;
  std::uint64_t squeezed_ = 0;  // zero bytes dropped by squeeze_zeros
  std::string error_;
  bool cut_ = false;
  bool checksum_failed_ = false;
};

/// The largest buffer a ByteSource of this process has grown to [bytes]: about the
/// longest log line (or trace event) read so far, which is held whole while it is read.
/// For the out-of-memory message.
std::size_t largest_buffer_bytes() noexcept;

}  // namespace stepprof::detail
