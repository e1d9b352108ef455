#include "interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <csignal>

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

extern "C" void on_signal(int sig) {
  if (g_exit_at_once.load(std::memory_order_relaxed)) exit_interrupted();
  g_interrupted.store(true, std::memory_order_relaxed);
  std::signal(sig, SIG_DFL);  // a second Ctrl-C kills at once
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void arm_exit_on_interrupt() {
  g_exit_at_once.store(true, std::memory_order_relaxed);
  if (g_interrupted.load(std::memory_order_relaxed)) exit_interrupted();
}

void disarm_exit_on_interrupt() { g_exit_at_once.store(false, std::memory_order_relaxed); }

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

const std::atomic<bool>* interrupt_flag() { return &g_interrupted; }

}  // namespace stepprof::cli
