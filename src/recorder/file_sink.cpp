// The default LineSink: a file written with one write(2) per record. A pipe, FIFO or
// terminal is written without blocking: what its reader has not taken yet waits in a
// bounded queue, sent by a flusher thread as the reader takes it (so that records wait
// in the job's memory no longer than the reader makes them, even while the job makes no
// update), and a reader that went away is an error (EPIPE), not a SIGPIPE.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "stepprof/line_sink.hpp"

namespace stepprof {
namespace {

// What a fork() child lets go of (release_in_child), kept reachable: LeakSanitizer does
// not report memory a global points to, and a job built with ASan whose DataLoader worker
// exited failed (exit status 1) for these few bytes. A later fork in the child replaces
// them.
void* g_left_in_child[2] = {nullptr, nullptr};

// Calls `write` with SIGPIPE and SIGXFSZ blocked on this thread, and takes back the one
// the call raised: SIGPIPE for a pipe whose reader exited (EPIPE), SIGXFSZ for a file at
// the process's file size limit (`ulimit -f`, RLIMIT_FSIZE; EFBIG). The default action of
// either ends the process, and the training job must not end because of its log. A
// signal that was already pending stays pending. (The technique of POSIX's rationale for
// pthread_sigmask; write(2) then fails with EPIPE or EFBIG.)
template <typename Write>
ssize_t without_write_signals(Write&& write) noexcept {
  sigset_t blocked, old, pending;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGPIPE);
  sigaddset(&blocked, SIGXFSZ);
  sigemptyset(&pending);
  const bool have_pending = sigpending(&pending) == 0;
  const bool pipe_pending = have_pending && sigismember(&pending, SIGPIPE) == 1;
  const bool fsize_pending = have_pending && sigismember(&pending, SIGXFSZ) == 1;
  const bool masked = pthread_sigmask(SIG_BLOCK, &blocked, &old) == 0;
  const ssize_t n = write();
  const int saved = errno;
  if (masked) {
    // (EFBIG also comes from a file system's own size limit, without a signal: SIGXFSZ is
    // taken back only under a process limit, so that one the job was sent stays.)
    rlimit fsize{};
    const bool fsize_limited = saved == EFBIG && ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY;
    const int raised = n >= 0                                      ? 0
                       : saved == EPIPE && !pipe_pending            ? SIGPIPE
                       : fsize_limited && !fsize_pending            ? SIGXFSZ
                                                                    : 0;
    if (raised != 0) {
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, raised);
      const timespec zero{};
      while (sigtimedwait(&one, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  errno = saved;
  return n;
}

class FileSink final : public LineSink {
 public:
  // `stream`: a pipe, FIFO, terminal or other non-regular file, opened O_NONBLOCK.
  // `locked`: this sink holds the file's flock lock (released at close()).
  // `opened`: the file's fstat when it was opened, or null when that failed (its device
  // and inode say whether the descriptor still leads to it).
  FileSink(int fd, bool stream, bool locked, const struct stat* opened)
      : fd_(fd), stream_(stream), locked_(locked), identified_(opened != nullptr),
        dev_(opened ? opened->st_dev : 0), ino_(opened ? opened->st_ino : 0) {}
  ~FileSink() override { close(); }

  int write(std::string_view bytes, std::size_t& written) noexcept override {
    written = 0;
    if (fd_ < 0) return EBADF;
    if (!stream_) return write_all(bytes, written);
    // A stream: what waits goes first, so that records stay in order and whole. (The
    // flusher holds the lock only for one write(2) that does not block.)
    std::lock_guard lock(sync_->mu);
    if (replaced_) return EBADF;  // (the flusher found the descriptor reused)
    if (const int err = drain(); err != 0 && err != EAGAIN) return err;
    if (queue_.empty()) {
      const int err = write_some(bytes, written);
      if (err != EAGAIN) return err;
      // The reader is behind: the rest of the record waits, if there is room.
      if (!enqueue(bytes.substr(written))) return EAGAIN;
      // (A lone newline in front ends a line an earlier write cut: not a record.)
      lead_newline_ = written == 0 && bytes.front() == '\n';
      written = bytes.size();
      return 0;
    }
    if (!enqueue(bytes)) return EAGAIN;  // (nothing of it written: no partial line)
    written = bytes.size();
    return 0;
  }

  // (One fstat per update record: about a microsecond.)
  State state() const noexcept override {
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) return State::kSame;  // (EBADF: the next write says so)
    if (identified_ && (st.st_dev != dev_ || st.st_ino != ino_)) return State::kReplaced;
    return !stream_ && S_ISREG(st.st_mode) && st.st_nlink == 0 ? State::kDeleted : State::kSame;
  }

  // Whether the flusher found the descriptor reused (replaced_, read under the lock).
  bool replaced_seen() const noexcept {
    if (!sync_) return false;
    std::lock_guard lock(sync_->mu);
    return replaced_;
  }

  void abandon() noexcept override {
    if (fd_ < 0 || !sync_) return;
    stop_flusher();
    std::lock_guard lock(sync_->mu);
    lost_ += queued_records();
    queue_.clear();
    lead_newline_ = false;
    fd_ = -1;  // (neither unlocked nor closed: the number is the program's file now)
  }

  int sync() noexcept override {
    if (fd_ < 0) return EBADF;
    if (stream_) {  // (a pipe has nothing to persist)
      std::lock_guard lock(sync_->mu);
      if (replaced_) return EBADF;
      return drain();
    }
    return ::fdatasync(fd_) == 0 ? 0 : errno;
  }

  std::size_t unwritten_records() const noexcept override {
    if (!sync_) return lost_ + queued_records();  // (a fork child's copy, released)
    std::lock_guard lock(sync_->mu);
    return lost_ + queued_records();
  }

  std::optional<std::size_t> unwritten_records_now() const noexcept override {
    if (!sync_) return lost_ + queued_records();
    std::unique_lock lock(sync_->mu, std::try_to_lock);
    if (!lock.owns_lock()) return std::nullopt;
    return lost_ + queued_records();
  }

  // The child's descriptor shares the parent's open file and its flock lock: the lock
  // stays until every copy is closed, so a child (a persistent DataLoader worker) would
  // keep the parent from opening the file again. Closing the copy leaves the parent's.
  // The flusher thread is the parent's: the child's copy of its handle is let go of
  // without a join (no such thread runs in the child), and so are the copies of the lock
  // it may have held at the fork and of the condition variable it may have been waiting
  // on (glibc's destructor of that copy waits for a waiter that does not exist in the
  // child: the child hung if it ever destroyed this sink). Once fd_ is -1 no method takes
  // the lock.
  void release_in_child() noexcept override {
    g_left_in_child[0] = flusher_.release();  // (their few bytes are leaked, once per fork)
    g_left_in_child[1] = sync_.release();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int close() noexcept override {
    // (A descriptor the program reused is its file now: neither written, unlocked nor closed.)
    if (fd_ >= 0 && (state() == State::kReplaced || replaced_seen())) abandon();
    if (fd_ < 0) return 0;
    stop_flusher();
    int err = 0;
    std::unique_lock lock(sync_->mu);
    if (stream_ && !queue_.empty()) {
      // The reader gets up to kCloseWait to take what waits; what it leaves is lost
      // (unwritten_records() says how many records).
      const auto until = std::chrono::steady_clock::now() + kCloseWait;
      while ((err = drain()) == EAGAIN) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd_, POLLOUT, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
      }
    }
    lost_ += queued_records();  // (what the reader left)
    queue_.clear();
    lead_newline_ = false;
    // A fork() child shares this open file and its flock lock until its fork handler
    // closes its copy (release_in_child), which may run after the parent's close(): the
    // lock then outlived close(), and a quick open() of the same log again was refused and
    // lost that session's records. Unlocking releases it for every copy.
    if (locked_) ::flock(fd_, LOCK_UN);
    const int r = ::close(fd_);
    fd_ = -1;
    if (err != 0) return err;
    return r == 0 ? 0 : errno;
  }

 private:
  // The most a stream's queue holds [bytes]: about 400 records of the real log's size.
  // A record that does not fit is not written (counted as a failed write).
  static constexpr std::size_t kMaxQueued = std::size_t{1} << 20;
  static constexpr std::chrono::milliseconds kCloseWait{1000};
  // The flusher's wait for the reader before it looks again whether close() stopped it
  // [ms]: close() waits at most this long for the flusher to end.
  static constexpr int kFlusherPollMs = 50;

  // A regular file: one write(2) for the whole record; only a short write (a signal, a
  // full disk) loops.
  int write_all(std::string_view bytes, std::size_t& written) noexcept {
    while (written < bytes.size()) {
      const ssize_t n = without_write_signals([&] { return ::write(fd_, bytes.data() + written, bytes.size() - written); });
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (n == 0) return EIO;
      written += static_cast<std::size_t>(n);
    }
    return 0;
  }

  // A stream: as much as the reader takes now; EAGAIN when it takes no more.
  int write_some(std::string_view bytes, std::size_t& written) noexcept {
    while (written < bytes.size()) {
      const ssize_t n = without_write_signals([&] { return ::write(fd_, bytes.data() + written, bytes.size() - written); });
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EWOULDBLOCK ? EAGAIN : errno;
      }
      if (n == 0) return EIO;
      written += static_cast<std::size_t>(n);
    }
    return 0;
  }

  // sync_->mu held. Writes what waits, as far as the reader takes it: 0 when nothing waits any
  // more, EAGAIN when some still does, or the error that makes the rest unwritable (EPIPE:
  // the reader is gone; what waited is then dropped and counted).
  // Records go one write(2) each: a pipe takes a write of up to PIPE_BUF (4 KiB) bytes
  // whole or not at all (POSIX, write(2) on pipes and FIFOs), so a record of that size
  // is never split, and the job's own prints (or another rank's records) into the same
  // pipe cannot land inside it. (Written as one block, the queue was split anywhere.)
  // A record beyond PIPE_BUF can still be split when the reader is behind.
  int drain() noexcept {
    std::size_t sent = 0;  // (erased once at the end: not the whole queue moved per record)
    int err = 0;
    while (sent < queue_.size() && err == 0) {
      const std::size_t newline = queue_.find('\n', sent);
      const std::size_t record = (newline == std::string::npos ? queue_.size() : newline + 1) - sent;
      std::size_t done = 0;
      err = write_some(std::string_view(queue_).substr(sent, record), done);
      sent += done;
    }
    queue_.erase(0, sent);
    if (sent > 0) lead_newline_ = false;
    if (err != 0 && err != EAGAIN) {
      lost_ += queued_records();
      queue_.clear();
      lead_newline_ = false;
    }
    return err;
  }

  // sync_->mu held. Queues `rest` and has the flusher send it.
  bool enqueue(std::string_view rest) noexcept {
    if (queue_.size() + rest.size() > kMaxQueued) return false;
    try {
      queue_.append(rest);
    } catch (...) {
      return false;
    }
    start_flusher();
    sync_->wake.notify_one();
    return true;
  }

  // sync_->mu held. Starts the flusher the first time something is queued (a reader that keeps
  // up never costs a thread), with every signal blocked in it, so that the job's signals
  // (SIGINT, SIGTERM, ...) keep going to the job's own threads. If the thread cannot be
  // made, the queue is sent by the next write() or by close(), as without a flusher.
  void start_flusher() noexcept {
    if (flusher_ || flusher_failed_) return;
    sigset_t all, old;
    sigfillset(&all);
    const bool masked = pthread_sigmask(SIG_BLOCK, &all, &old) == 0;
    try {
      flusher_ = std::make_unique<std::thread>([this] { flush_queued(); });
    } catch (...) {
      flusher_failed_ = true;
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  // The flusher: while something waits, sends it as the reader takes it.
  void flush_queued() noexcept {
    std::unique_lock lock(sync_->mu);
    for (;;) {
      sync_->wake.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      pollfd p{fd_, POLLOUT, 0};
      lock.unlock();
      ::poll(&p, 1, kFlusherPollMs);  // (POLLERR, POLLHUP: drain() sees the error)
      lock.lock();
      if (stop_) return;
      if (state() == State::kReplaced) {  // (one fstat per wake: the program reused the number)
        replaced_ = true;
        lost_ += queued_records();
        queue_.clear();
        lead_newline_ = false;
        return;
      }
      (void)drain();  // (EPIPE: what waited is dropped and counted in lost_)
    }
  }

  void stop_flusher() noexcept {
    if (!flusher_) return;
    {
      std::lock_guard lock(sync_->mu);
      stop_ = true;
    }
    sync_->wake.notify_one();
    try {
      flusher_->join();
    } catch (...) {  // (cannot happen: the thread is joinable and not this one)
    }
    flusher_.reset();
  }

  // sync_->mu held. Records in the queue: its newlines (each record ends with one; a
  // queued rest of a record counts as one), less the lone newline in front that ends a
  // line cut by an earlier write.
  std::size_t queued_records() const noexcept {
    std::size_t n = 0;
    for (const char c : queue_) n += c == '\n' ? 1 : 0;
    return n - (lead_newline_ ? 1 : 0);
  }

  int fd_;  // (changed only by close(), abandon() and release_in_child(), with no flusher running)
  bool stream_ = false;
  bool locked_ = false;
  bool identified_ = false;  // dev_ and ino_ are known
  dev_t dev_;                // the file opened
  ino_t ino_;
  // A stream's queue and what goes with it, shared with the flusher.
  struct Sync {
    std::mutex mu;
    std::condition_variable wake;  // something was queued, or stop_
  };
  std::unique_ptr<Sync> sync_ = std::make_unique<Sync>();  // (null in a fork child: release_in_child)
  // A stream's bytes its reader has not taken yet (the first line may be the rest of a
  // record begun in the pipe).
  std::string queue_;
  std::size_t lost_ = 0;  // queued records dropped: the stream broke, or close() gave up
  // The queue's first byte is the newline that ends a record an earlier write() cut (the
  // recorder puts it in front of the next record): a line, not a record.
  bool lead_newline_ = false;
  // The flusher found the descriptor leading to another file (State::kReplaced): nothing
  // more goes through it; abandon() or close() lets go of it.
  bool replaced_ = false;
  bool stop_ = false;
  std::unique_ptr<std::thread> flusher_;  // only touched by the recorder's calls, not by the flusher
  bool flusher_failed_ = false;
};

// The descriptor (1 or 2) of this process's stdout or stderr when it writes to the file
// `st` (a path of /dev/stdout, a job's output file given as the log), else -1: several
// ranks share that file, and it holds more than the log; it is neither locked nor
// truncated.
int stdout_or_stderr_of(const struct stat& st) {
  for (const int std_fd : {1, 2}) {
    struct stat o {};
    if (::fstat(std_fd, &o) == 0 && o.st_dev == st.st_dev && o.st_ino == st.st_ino) return std_fd;
  }
  return -1;
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

bool is_own_output_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && stdout_or_stderr_of(st) >= 0;
}

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
    int mkdir_error = ENOENT;
    try {  // (path operations allocate; nothing may throw into the training job)
      std::error_code ec;
      const auto parent = std::filesystem::path(path).parent_path();
      made = !parent.empty() && (std::filesystem::create_directories(parent, ec), !ec);
      // Why the directory could not be made (a read-only file system is EROFS, not the
      // "No such file or directory" of the first open).
      if (ec) mkdir_error = ec.value();
    } catch (...) {
    }
    if (made) fd = open_it();
    else errno = mkdir_error;
  }
  if (fd < 0) {
    error = errno == ENXIO ? kErrFifoNoReader : errno;
    return nullptr;
  }
  // A regular file is written blocking (O_NONBLOCK does nothing there); a pipe, FIFO or
  // terminal stays O_NONBLOCK, so that a reader that stops reading never blocks the job.
  struct stat kind {};
  const bool stream = ::fstat(fd, &kind) == 0 && !S_ISREG(kind.st_mode);
  if (!stream)
    if (const int fl = ::fcntl(fd, F_GETFL); fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  // Regular files only (not /dev/null, /dev/full, a pipe): another live process
  // recording to this file (a module-level recorder run again in a spawned DataLoader
  // worker, two ranks given one path) holds its lock: neither truncate nor write it. A
  // file system without flock() (ENOLCK, EINVAL) goes unlocked.
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  bool holds_lock = false;
  if (const int std_fd = regular ? stdout_or_stderr_of(st) : -1; std_fd >= 0) {
    // The job's own stdout or stderr file: write through a copy of that descriptor, so
    // that records and the job's prints share one file offset. With a descriptor of its
    // own (`python train.py > out.txt`, opened without O_APPEND), each print overwrote
    // the records written before it.
    const int acc = ::fcntl(std_fd, F_GETFL);
    if (acc >= 0 && (acc & O_ACCMODE) != O_RDONLY)
      if (const int shared = ::fcntl(std_fd, F_DUPFD_CLOEXEC, 3); shared >= 0) {
        ::close(fd);
        fd = shared;
      }
  } else if (regular) {
    int locked = 0;
    do {
      locked = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (locked != 0 && errno == EINTR);
    if (locked != 0 && (errno == EWOULDBLOCK || errno == EAGAIN)) {
      ::close(fd);
      error = kErrFileLocked;
      return nullptr;
    }
    holds_lock = locked == 0;
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
        n = without_write_signals([&] { return ::write(fd, "\n", 1); });
      } while (n < 0 && errno == EINTR);
    }
  }
  struct stat opened {};
  const bool identified = ::fstat(fd, &opened) == 0;  // (after a dup: the file written through)
  try {
    return std::make_unique<FileSink>(fd, stream, holds_lock, identified ? &opened : nullptr);
  } catch (...) {
    ::close(fd);
    error = ENOMEM;
    return nullptr;
  }
}

}  // namespace stepprof
