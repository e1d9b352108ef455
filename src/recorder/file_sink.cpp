// The default LineSink: a file written with one write(2) per record.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "stepprof/line_sink.hpp"

namespace stepprof {
namespace {

class FileSink final : public LineSink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  ~FileSink() override { close(); }

  int write(std::string_view bytes, std::size_t& written) noexcept override {
    written = 0;
    if (fd_ < 0) return EBADF;
    while (written < bytes.size()) {
      // One call for the whole record; only a short write (a signal, a full disk) loops.
      const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (n == 0) return EIO;
      written += static_cast<std::size_t>(n);
    }
    return 0;
  }

  int sync() noexcept override {
    if (fd_ < 0) return EBADF;
    return ::fdatasync(fd_) == 0 ? 0 : errno;
  }

  // The child's descriptor shares the parent's open file and its flock lock: the lock
  // stays until every copy is closed, so a child (a persistent DataLoader worker) would
  // keep the parent from opening the file again. Closing the copy leaves the parent's.
  void release_in_child() noexcept override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int close() noexcept override {
    if (fd_ < 0) return 0;
    const int r = ::close(fd_);
    fd_ = -1;
    return r == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// True for the file this process's stdout or stderr writes to (a path of /dev/stdout, a
// job's output file given as the log): several ranks share it, and it holds more than
// the log; it is neither locked nor truncated.
bool same_file_as_stdout_or_stderr(const struct stat& st) {
  for (const int std_fd : {1, 2}) {
    struct stat o {};
    if (::fstat(std_fd, &o) == 0 && o.st_dev == st.st_dev && o.st_ino == st.st_ino) return true;
  }
  return false;
}

// True when the file's last byte (at size - 1) is a newline, or cannot be read.
bool ends_with_newline(const std::string& path, off_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char last = '\n';
  const bool read = ::pread(fd, &last, 1, size - 1) == 1;
  ::close(fd);
  return !read || last == '\n';
}

}  // namespace

std::unique_ptr<LineSink> open_file_sink(const std::string& path, bool append, int& error) {
  error = 0;
  // Not O_TRUNC: the file is truncated only once this process holds its lock.
  // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking open() forever;
  // it is cleared once open, so writes behave as before.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK;
  auto open_it = [&] {
    int fd = -1;
    do {
      fd = ::open(path.c_str(), flags, 0644);
    } while (fd < 0 && errno == EINTR);
    return fd;
  };
  int fd = open_it();
  if (fd < 0 && errno == ENOENT) {
    // The directory does not exist yet (e.g. "logs/rank{rank}.jsonl" in a fresh job):
    // create it, as `mkdir -p` would, and try again.
    bool made = false;
    try {  // (path operations allocate; nothing may throw into the training job)
      std::error_code ec;
      const auto parent = std::filesystem::path(path).parent_path();
      made = !parent.empty() && (std::filesystem::create_directories(parent, ec), !ec);
    } catch (...) {
    }
    if (made) fd = open_it();
    else errno = ENOENT;
  }
  if (fd < 0) {
    error = errno == ENXIO ? kErrFifoNoReader : errno;
    return nullptr;
  }
  if (const int fl = ::fcntl(fd, F_GETFL); fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  // Regular files only (not /dev/null, /dev/full, a pipe): another live process
  // recording to this file (a module-level recorder run again in a spawned DataLoader
  // worker, two ranks given one path) holds its lock: neither truncate nor write it. A
  // file system without flock() (ENOLCK, EINVAL) goes unlocked.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && !same_file_as_stdout_or_stderr(st)) {
    int locked = 0;
    do {
      locked = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (locked != 0 && errno == EINTR);
    if (locked != 0 && (errno == EWOULDBLOCK || errno == EAGAIN)) {
      ::close(fd);
      error = kErrFileLocked;
      return nullptr;
    }
    if (!append && st.st_size > 0 && ::ftruncate(fd, 0) != 0) {
      error = errno;
      ::close(fd);
      return nullptr;
    }
    if (append && st.st_size > 0 && !ends_with_newline(path, st.st_size)) {
      // A job killed mid-record left a cut last line: end it, so that the first record
      // appended is a line of its own (the cut one stays one malformed line).
      ssize_t n = 0;
      do {
        n = ::write(fd, "\n", 1);
      } while (n < 0 && errno == EINTR);
    }
  }
  try {
    return std::make_unique<FileSink>(fd);
  } catch (...) {
    ::close(fd);
    error = ENOMEM;
    return nullptr;
  }
}

}  // namespace stepprof
