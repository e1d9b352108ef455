#include "line_source.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace stepprof::detail {
namespace {

// zlib prefixes its messages with the file's name, "<fd:3>" for a descriptor: drop it
// (the diagnostic names the file; the number means nothing to anyone).
std::string without_fd(const char* msg) {
  std::string_view m(msg);
  if (m.starts_with("<fd:"))
    if (const auto end = m.find(">: "); end != std::string_view::npos) m.remove_prefix(end + 3);
  return std::string(m);
}

}  // namespace

std::unique_ptr<LineSource> LineSource::open(const std::string& path, std::string& error,
                                             std::size_t chunk_bytes) {
  int fd = path == "-" ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = std::strerror(errno);
    return nullptr;
  }
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    error = "cannot start decompression (out of memory)";
    return nullptr;
  }
  gzbuffer(f, 1 << 18);
  return std::unique_ptr<LineSource>(new LineSource(f, chunk_bytes));
}

LineSource::LineSource(gzFile f, std::size_t chunk_bytes) : file_(f), buf_(chunk_bytes + padding) {}

LineSource::~LineSource() { gzclose(file_); }

std::uint64_t LineSource::raw_bytes_read() const {
  const auto offset = gzoffset(file_);
  return offset < 0 ? bytes_ : static_cast<std::uint64_t>(offset);
}

bool LineSource::fill() {
  if (eof_) return false;
  // Keep the unread tail, move it to the front, grow if a single line fills the buffer.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  const std::size_t capacity = buf_.size() - padding;
  if (end_ == capacity) buf_.resize(buf_.size() * 2);
  const std::size_t want = std::min<std::size_t>(buf_.size() - padding - end_, INT_MAX);
  const int got = gzread(file_, buf_.data() + end_, static_cast<unsigned>(want));
  if (got < 0) {
    int errnum = 0;
    const char* msg = gzerror(file_, &errnum);
    error_ = errnum == Z_ERRNO ? std::strerror(errno) : without_fd(msg ? msg : "read error");
    cut_ = errnum == Z_BUF_ERROR;  // zlib: "unexpected end of file"
    eof_ = true;
    return false;
  }
  if (got == 0) {
    eof_ = true;
    int errnum = 0;
    const char* msg = gzerror(file_, &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
      error_ = without_fd(msg ? msg : "read error");
      cut_ = errnum == Z_BUF_ERROR;
    }
    return false;
  }
  end_ += static_cast<std::size_t>(got);
  bytes_ += static_cast<std::uint64_t>(got);
  return true;
}

bool LineSource::next(std::string_view& line, bool& terminated) {
  std::size_t scan = begin_;
  for (;;) {
    if (const void* nl = std::memchr(buf_.data() + scan, '\n', end_ - scan)) {
      const std::size_t pos = static_cast<std::size_t>(static_cast<const char*>(nl) - buf_.data());
      std::size_t len = pos - begin_;
      if (len > 0 && buf_[begin_ + len - 1] == '\r') --len;
      line = std::string_view(buf_.data() + begin_, len);
      begin_ = pos + 1;
      terminated = true;
      ++line_no_;
      return true;
    }
    const std::size_t scanned = end_ - begin_;
    if (!fill()) break;
    scan = begin_ + scanned;
  }
  if (begin_ < end_) {
    line = std::string_view(buf_.data() + begin_, end_ - begin_);
    begin_ = end_;
    terminated = false;
    ++line_no_;
    return true;
  }
  return false;
}

}  // namespace stepprof::detail
