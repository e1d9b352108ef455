// The recorder's host clock: the TSC where it is invariant (constant rate across P- and
// C-states, CPUID leaf 0x80000007 EDX bit 8), calibrated to ns against steady_clock;
// steady_clock otherwise. STEPPROF_CLOCK=steady_clock in the environment forces the latter.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ratio>
#include <type_traits>

#include "internal.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace stepprof::detail {
namespace {

static_assert(std::is_same_v<std::chrono::steady_clock::period, std::nano>,
              "the steady_clock fallback treats its ticks as ns");

bool choose_tsc() noexcept {
  if (const char* env = std::getenv("STEPPROF_CLOCK"); env && std::strcmp(env, "steady_clock") == 0) return false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &a, &b, &c, &d)) return false;
  return (d & (1u << 8)) != 0;  // Invariant TSC
#else
  return false;
#endif
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const bool g_use_tsc = choose_tsc();

ClockPair read_clock_pair() noexcept {
  if (!g_use_tsc) {
    const auto t = read_clock();
    return {t, static_cast<std::int64_t>(t)};
  }
  // The pair whose steady_clock reads bracket the TSC read most tightly (a preemption
  // between the reads would skew it).
  ClockPair best{0, 0};
  std::int64_t best_gap = -1;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t a = steady_ns();
    const std::uint64_t t = read_clock();
    const std::int64_t b = steady_ns();
    if (best_gap < 0 || b - a < best_gap) {
      best_gap = b - a;
      best = {t, a + (b - a) / 2};
    }
  }
  return best;
}

double initial_ns_per_tick() noexcept {
  static const double value = [] {
    if (!g_use_tsc) return 1.0;  // steady_clock ticks are ns (libstdc++, libc++)
    const ClockPair a = read_clock_pair();
    while (steady_ns() - a.ns < 10'000'000) {  // 10 ms
    }
    const ClockPair b = read_clock_pair();
    return static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
  }();
  return value;
}

}  // namespace stepprof::detail

namespace stepprof {
inline namespace recording {
std::string_view clock_name() noexcept { return detail::g_use_tsc ? "tsc" : "steady_clock"; }
}  // namespace recording
}  // namespace stepprof
