#include "interrupt.hpp"

#include <signal.h>

#include <csignal>

namespace stepprof::cli {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is written from a signal handler");

extern "C" void on_signal(int sig) {
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

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

const std::atomic<bool>* interrupt_flag() { return &g_interrupted; }

}  // namespace stepprof::cli
