#include "out_of_memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "../read/byte_source.hpp"
#include "common.hpp"

namespace stepprof::cli {
namespace {

// NOLINTBEGIN(cppcoreguidelines-avoid-non-const-global-variables): the handler's state
std::array<char, 4096> g_output{};  // the temporary file being written; "" for none
std::atomic<bool> g_output_set{false};
// NOLINTEND(cppcoreguidelines-avoid-non-const-global-variables)

std::atomic<int> g_throw{0};  // ThrowOnOutOfMemory objects alive

void on_allocation_failure() {
  if (g_throw.load() > 0) throw std::bad_alloc();
  if (g_output_set.load()) ::unlink(g_output.data());
  print_out_of_memory_message();
  std::_Exit(kOutOfMemory);
}

}  // namespace

void install_out_of_memory_handler() { std::set_new_handler(on_allocation_failure); }

ThrowOnOutOfMemory::ThrowOnOutOfMemory() { ++g_throw; }
ThrowOnOutOfMemory::~ThrowOnOutOfMemory() { --g_throw; }

void set_output_in_progress(const char* path) noexcept {
  g_output_set = false;
  if (!path || std::strlen(path) >= g_output.size()) return;
  std::memcpy(g_output.data(), path, std::strlen(path) + 1);
  g_output_set = true;
}

void print_out_of_memory_message() noexcept {
  // (Formatted into fixed buffers: the message is printed when memory has run out.)
  std::array<char, 128> limit{};
  struct rlimit as {};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    std::snprintf(limit.data(), limit.size(), " (the address-space limit, ulimit -v, is %llu MB)",
                  static_cast<unsigned long long>(as.rlim_cur >> 20));
  // A line of tens of MB (a record with a huge unknown field, a log that lost its
  // newlines) is held whole while it is read, at 2.5 to 5 times its size: reading fewer
  // updates does not help then. (The buffer doubles when a line fills more than half of
  // it, less half a 1 MiB chunk: the line was longer than half the buffer, less 1 MB.)
  std::array<char, 320> long_line{};
  if (const std::size_t held = stepprof::detail::largest_buffer_bytes(); held >= (std::size_t{64} << 20))
    std::snprintf(long_line.data(), long_line.size(),
                  "; a line (or trace event) longer than %zu MB was read: it is held whole while it is read and "
                  "takes 2.5 to 5 times its size (docs/scale.md, \"Memory\"): split or shorten such lines",
                  (held >> 21) - 1);
  std::array<char, 1024> text{};
  const int n = std::snprintf(
      text.data(), text.size(),
      "stepprof: out of memory%s: stepprof keeps every update's summary (about 2 KB per update record for a report; "
      "html and whatif 4 to 10 KB, docs/scale.md); allow more memory, or read fewer updates (--steps A:B) or fewer "
      "files%s\n",
      limit.data(), long_line.data());
  if (n > 0) (void)!::write(STDERR_FILENO, text.data(), std::min<std::size_t>(static_cast<std::size_t>(n), text.size() - 1));
}

}  // namespace stepprof::cli
