#include "interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <ctime>

namespace stepprof::cli {
namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_exit_at_once{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is written from a signal handler");

constexpr char kMessage[] = "stepprof: interrupted\n";

[[noreturn]] void exit_interrupted() {
  // (write and _exit are async-signal-safe.)
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(kInterrupted);
}

// When the first interrupt came [ns, CLOCK_MONOTONIC]; 0 before it.
std::atomic<std::int64_t> g_first_ns{0};
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "the time is written from a signal handler");

// A second signal within this time of the first is the same interrupt delivered twice:
// timeout(1) signals the command and then its whole process group, and a job launcher
// may forward a terminal's Ctrl-C that the process also received itself. Pressing Ctrl-C
// twice takes longer.
constexpr std::int64_t kSameInterruptNs = 100'000'000;

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // (async-signal-safe)
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

extern "C" void on_signal(int) {
  if (g_exit_at_once.load(std::memory_order_relaxed)) exit_interrupted();
  const std::int64_t now = monotonic_ns();
  std::int64_t first = 0;
  if (g_first_ns.compare_exchange_strong(first, now, std::memory_order_relaxed)) {
    g_interrupted.store(true, std::memory_order_relaxed);
    return;
  }
  if (now - first >= kSameInterruptNs) exit_interrupted();  // a second Ctrl-C stops at once
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // SIGHUP: a closed terminal or dropped ssh session stops the command the same clean way
  // (its default action ended it without a word and left a half-written output's
  // temporary file). A signal ignored when the command started stays ignored: `nohup`
  // ignores SIGHUP, and a shell ignores SIGINT for a command it runs in the background.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, nullptr);
  }
}

void arm_exit_on_interrupt() {
  g_exit_at_once.store(true, std::memory_order_relaxed);
  if (g_interrupted.load(std::memory_order_relaxed)) exit_interrupted();
}

void disarm_exit_on_interrupt() { g_exit_at_once.store(false, std::memory_order_relaxed); }

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

const std::atomic<bool>* interrupt_flag() { return &g_interrupted; }

}  // namespace stepprof::cli
