#include "byte_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

namespace stepprof::detail {

void RawBuffer::grow(std::size_t n, std::size_t keep) {
  auto bigger = std::make_unique_for_overwrite<char[]>(n);
  std::memcpy(bigger.get(), bytes_.get(), keep);
  bytes_ = std::move(bigger);
  size_ = n;
}

namespace {

bool cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(std::memory_order_relaxed); }

// Waits until fd is readable (or its writer is gone), in steps of 100 ms, while
// *cancel is unset. False (errno EINTR) once cancelled.
bool wait_readable(int fd, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancelled(cancel)) {
      errno = EINTR;
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 100);
    if (n > 0) return true;  // POLLIN, POLLHUP or POLLERR: read() says which
    if (n < 0 && errno != EINTR) return true;  // let read() report it
  }
}

// Opens path; a FIFO is opened without blocking (open() would wait for a writer, beyond
// the reach of `cancel`), then set back to blocking reads after poll().
int open_input(const std::string& path, bool& wait) {
  if (path == "-") {
    const int fd = ::dup(STDIN_FILENO);
    struct stat st {};
    wait = fd >= 0 && ::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode);
    return fd;
  }
  struct stat st {};
  const bool fifo = ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0) return fd;
  if (fifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  wait = ::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode);
  return fd;
}

}  // namespace

std::unique_ptr<ByteSource> ByteSource::open(const std::string& path, std::string& error, std::size_t chunk_bytes,
                                             const std::atomic<bool>* cancel) {
  bool wait = false;
  const int fd = open_input(path, wait);
  if (fd < 0) {
    error = std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<ByteSource> src(new ByteSource(fd, std::max<std::size_t>(chunk_bytes, 64), cancel, wait));
  // Sniff: the gzip magic needs two bytes (a one-byte file is plain).
  while (src->zs_.avail_in < 2 && src->read_raw()) {
  }
  if (!src->error_.empty()) {
    error = src->error_;
    return nullptr;
  }
  if (src->zs_.avail_in >= 2 && src->zs_.next_in[0] == 0x1f && src->zs_.next_in[1] == 0x8b) {
    src->gzip_ = true;
    if (inflateInit2(&src->zs_, 16 + MAX_WBITS) != Z_OK) {  // 16: gzip wrapper only
      error = "cannot start decompression (out of memory)";
      return nullptr;
    }
    src->zs_open_ = true;
  }
  return src;
}

ByteSource::ByteSource(int fd, std::size_t chunk_bytes, const std::atomic<bool>* cancel, bool wait)
    : fd_(fd), cancel_(cancel), wait_(wait), in_(std::size_t{1} << 18), chunk_(chunk_bytes), buf_(chunk_bytes + padding) {
  zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
  zs_.avail_in = 0;
  std::memset(buf_.data(), 0, padding);  // (the padding after the empty buffer)
}

ByteSource::~ByteSource() {
  if (zs_open_) inflateEnd(&zs_);
  ::close(fd_);
}

std::size_t ByteSource::squeeze_zeros(std::size_t from, std::size_t keep) {
  char* d = buf_.data() + begin_;
  const std::size_t n = end_ - begin_;
  const void* z = from < n ? std::memchr(d + from, '\0', n - from) : nullptr;
  if (!z) return 0;
  std::size_t run = 0;  // zeros just before the first one found, counted into its run
  std::size_t r = static_cast<std::size_t>(static_cast<const char*>(z) - d);
  while (run < r && run <= keep && d[r - 1 - run] == '\0') ++run;
  std::size_t w = r;
  for (; r < n; ++r) {
    if (d[r] == '\0') {
      if (++run > keep) continue;
    } else {
      run = 0;
    }
    d[w++] = d[r];
  }
  const std::size_t dropped = n - w;
  end_ -= dropped;
  squeezed_ += dropped;
  std::memset(buf_.data() + end_, 0, padding);
  return dropped;
}

std::uint64_t ByteSource::raw_bytes_read() const { return raw_read_ - zs_.avail_in; }

ssize_t ByteSource::read_some(void* to, std::size_t n) {
  for (;;) {
    if (wait_ && !wait_readable(fd_, cancel_)) return -1;
    const ssize_t got = ::read(fd_, to, n);
    if (got >= 0 || errno != EINTR) return got;
    if (cancelled(cancel_)) return -1;  // (errno EINTR)
  }
}

bool ByteSource::read_raw() {
  if (raw_eof_) return false;
  // Keep the unread bytes at the front.
  if (zs_.avail_in > 0 && zs_.next_in != reinterpret_cast<Bytef*>(in_.data()))
    std::memmove(in_.data(), zs_.next_in, zs_.avail_in);
  zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
  const std::size_t room = in_.size() - zs_.avail_in;
  if (room == 0) return true;
  const ssize_t got = read_some(in_.data() + zs_.avail_in, room);
  if (got < 0) {
    error_ = errno == EINTR ? "interrupted" : std::strerror(errno);
    raw_eof_ = true;
    return false;
  }
  if (got == 0) {
    raw_eof_ = true;
    return false;
  }
  zs_.avail_in += static_cast<uInt>(got);
  raw_read_ += static_cast<std::uint64_t>(got);
  return true;
}

bool ByteSource::next_member() {
  gz_done_ = true;  // unless another member follows
  while (zs_.avail_in < 2 && read_raw()) {
  }
  if (!error_.empty() || zs_.avail_in == 0) return false;  // the clean end (or an I/O error, said)
  if (zs_.avail_in >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b) {
    inflateReset(&zs_);
    gz_done_ = false;
    return true;
  }
  // Not another member: count what is left and say so.
  std::uint64_t rest = zs_.avail_in;
  zs_.avail_in = 0;
  while (read_raw()) {
    rest += zs_.avail_in;
    zs_.avail_in = 0;
  }
  if (error_.empty())
    error_ = fmt::format("{} byte{} after the end of the gzip data {} not gzip data", rest, rest == 1 ? "" : "s",
                         rest == 1 ? "is" : "are");
  return false;
}

std::size_t ByteSource::inflate_into(std::size_t room) {
  if (gz_done_) return 0;
  zs_.next_out = reinterpret_cast<Bytef*>(buf_.data() + end_);
  zs_.avail_out = static_cast<uInt>(room);
  for (;;) {
    if (zs_.avail_in == 0 && !read_raw()) {
      if (error_.empty()) {  // the file ends inside a member
        error_ = "unexpected end of file";
        cut_ = true;
      }
      break;
    }
    const int rc = ::inflate(&zs_, Z_NO_FLUSH);
    const std::size_t produced = room - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      if (!next_member() || produced > 0) return produced;  // (a following member is read on the next call)
      continue;
    }
    if (rc == Z_OK || rc == Z_BUF_ERROR) {  // Z_BUF_ERROR: needs more input
      if (produced > 0) return produced;
      if (rc == Z_BUF_ERROR && zs_.avail_in > 0) {  // no progress with input and room: cannot happen
        error_ = "decompression stalled";
        break;
      }
      continue;
    }
    error_ = zs_.msg ? zs_.msg : (rc == Z_MEM_ERROR ? "out of memory" : "corrupt gzip data");
    // (zlib's words for the gzip trailer's checks, inflate.c: its only way of telling them.)
    checksum_failed_ = zs_.msg && (std::strcmp(zs_.msg, "incorrect data check") == 0 ||
                                   std::strcmp(zs_.msg, "incorrect length check") == 0);
    break;
  }
  return room - zs_.avail_out;
}

namespace {
std::atomic<std::size_t> g_largest_buffer{0};
}  // namespace

std::size_t largest_buffer_bytes() noexcept { return g_largest_buffer.load(std::memory_order_relaxed); }

bool ByteSource::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  // Read a whole chunk when there is room for one; grow when the kept bytes fill the buffer.
  if (buf_.size() - padding - end_ < chunk_ / 2) {
    buf_.grow(std::max(buf_.size() * 2, end_ + chunk_ + padding), end_);
    std::memset(buf_.data() + end_, 0, padding);  // (readable even if nothing more comes)
    for (std::size_t seen = g_largest_buffer.load(std::memory_order_relaxed);
         seen < buf_.size() && !g_largest_buffer.compare_exchange_weak(seen, buf_.size(), std::memory_order_relaxed);) {
    }
  }
  const std::size_t want = std::min<std::size_t>(buf_.size() - padding - end_, INT_MAX);
  std::size_t got = 0;
  if (gzip_) {
    got = inflate_into(want);
  } else {
    if (zs_.avail_in > 0) {  // the sniffed bytes first
      got = std::min<std::size_t>(want, zs_.avail_in);
      std::memcpy(buf_.data() + end_, zs_.next_in, got);
      zs_.next_in += got;
      zs_.avail_in -= static_cast<uInt>(got);
    } else if (!raw_eof_) {
      const ssize_t n = read_some(buf_.data() + end_, want);
      if (n < 0) {
        error_ = errno == EINTR ? "interrupted" : std::strerror(errno);
      } else {
        got = static_cast<std::size_t>(n);
        raw_read_ += got;
        raw_eof_ = n == 0;
      }
    }
  }
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  read_ += got;
  std::memset(buf_.data() + end_, 0, padding);
  return true;
}

}  // namespace stepprof::detail
