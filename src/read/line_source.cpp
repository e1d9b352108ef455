#include "line_source.hpp"

#include <algorithm>
#include <cstring>

namespace stepprof::detail {

std::unique_ptr<LineSource> LineSource::open(const std::string& path, std::string& error, std::size_t chunk_bytes,
                                             const std::atomic<bool>* cancel) {
  auto src = ByteSource::open(path, error, chunk_bytes, cancel);
  if (!src) return nullptr;
  return std::unique_ptr<LineSource>(new LineSource(std::move(src), cancel));
}

std::string_view LineSource::peek(std::size_t n) {
  while (src_->size() < n && src_->fill()) {
  }
  return {src_->data(), std::min(src_->size(), n)};
}

bool LineSource::next(std::string_view& line, bool& terminated) {
  src_->consume(returned_);
  returned_ = 0;
  zeros_dropped_ = 0;
  std::size_t scanned = 0;  // bytes known to hold no newline
  for (;;) {
    const char* data = src_->data();
    const std::size_t size = src_->size();
    if (const void* nl = std::memchr(data + scanned, '\n', size - scanned)) {
      std::size_t len = static_cast<std::size_t>(static_cast<const char*>(nl) - data);
      returned_ = len + 1;
      if (len > 0 && data[len - 1] == '\r') --len;
      line = std::string_view(data, len);
      terminated = true;
      ++line_no_;
      return true;
    }
    // No newline yet: a line longer than what was buffered. Its zero runs are cut short
    // (see next() in the header), and a cancel is seen even if the line never ends.
    zeros_dropped_ += src_->squeeze_zeros(scanned, kZerosKept);
    scanned = src_->size();
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) return false;
    if (zeros_dropped_ > kMostZerosInALine && src_->stream()) {
      stopped_ = "over 1 GiB of zero bytes without a line break: a device such as /dev/zero, not a log; reading "
                 "stopped";
      return false;
    }
    if (!src_->fill()) break;
  }
  if (src_->size() == 0) return false;
  line = std::string_view(src_->data(), src_->size());
  returned_ = src_->size();
  terminated = false;
  ++line_no_;
  return true;
}

}  // namespace stepprof::detail
