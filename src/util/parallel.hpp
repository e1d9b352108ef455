// Runs independent pieces of work on several threads (the analyses, stepprof synth).
// Internal to the library.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace stepprof::detail {

/// The hardware's threads, at most `most`: for jobs whose scratch memory grows with the
/// input, so that a machine with many cores does not hold that much scratch per core.
inline unsigned threads_at_most(unsigned most) {
  return std::max(1u, std::min(most, std::thread::hardware_concurrency()));
}

/// Starts up to `count` threads running `worker` into `pool`, fewer when one cannot be
/// started (std::system_error for EAGAIN, std::bad_alloc under an address-space limit):
/// the ones that started do the work. Returns how many started.
template <typename Worker>
std::size_t start_threads(std::vector<std::thread>& pool, std::size_t count, const Worker& worker) {
  pool.reserve(pool.size() + count);
  for (std::size_t t = 0; t < count; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::exception&) {
      return t;
    }
  }
  return count;
}

/// Calls job(i) for every i in [0, n), on `threads` threads (0: one per hardware
/// thread, at most n; 1: on the calling thread). Each i runs once; results must go to
/// per-i slots. The first exception a job throws is rethrown here after all stop. When a
/// thread cannot be started (address-space limit, out of memory) the work is done by the
/// threads that could, at least the calling one.
template <typename Job>
void parallel_for(std::size_t n, unsigned threads, Job&& job) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) job(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  start_threads(pool, threads - 1, worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace stepprof::detail
