#include "byte_source.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace stepprof::detail {
namespace {

// zlib prefixes its messages with the file's name, "<fd:3>" for a descriptor: drop it
// (the diagnostic names the file; the number means nothing to anyone).
std::string without_fd(const char* msg) {
  std::string_view m(msg ? msg : "read error");
  if (m.starts_with("<fd:"))
    if (const auto end = m.find(">: "); end != std::string_view::npos) m.remove_prefix(end + 3);
  return std::string(m);
}

}  // namespace

std::unique_ptr<ByteSource> ByteSource::open(const std::string& path, std::string& error,
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
  return std::unique_ptr<ByteSource>(new ByteSource(f, std::max<std::size_t>(chunk_bytes, 64)));
}

ByteSource::ByteSource(gzFile f, std::size_t chunk_bytes)
    : file_(f), chunk_(chunk_bytes), buf_(chunk_bytes + padding) {}

ByteSource::~ByteSource() { gzclose(file_); }

std::uint64_t ByteSource::raw_bytes_read() const {
  const auto offset = gzoffset(file_);
  return offset < 0 ? read_ : static_cast<std::uint64_t>(offset);
}

bool ByteSource::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  // Read a whole chunk when there is room for one; grow when the kept bytes fill the buffer.
  if (buf_.size() - padding - end_ < chunk_ / 2) buf_.resize(std::max(buf_.size() * 2, end_ + chunk_ + padding));
  const std::size_t want = std::min<std::size_t>(buf_.size() - padding - end_, INT_MAX);
  const int got = gzread(file_, buf_.data() + end_, static_cast<unsigned>(want));
  int errnum = 0;
  if (got < 0) {
    const char* msg = gzerror(file_, &errnum);
    error_ = errnum == Z_ERRNO ? std::strerror(errno) : without_fd(msg);
    cut_ = errnum == Z_BUF_ERROR;  // zlib: "unexpected end of file"
    eof_ = true;
    return false;
  }
  if (got == 0) {
    eof_ = true;
    const char* msg = gzerror(file_, &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
      error_ = without_fd(msg);
      cut_ = errnum == Z_BUF_ERROR;
    }
    return false;
  }
  end_ += static_cast<std::size_t>(got);
  read_ += static_cast<std::uint64_t>(got);
  std::memset(buf_.data() + end_, 0, padding);
  return true;
}

}  // namespace stepprof::detail
