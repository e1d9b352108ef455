// The default LineSink: a file written with one write(2) per record.
#include <fcntl.h>
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

  int close() noexcept override {
    if (fd_ < 0) return 0;
    const int r = ::close(fd_);
    fd_ = -1;
    return r == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<LineSink> open_file_sink(const std::string& path, bool append, int& error) {
  error = 0;
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC);
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
    error = errno;
    return nullptr;
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
