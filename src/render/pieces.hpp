// Text made as it is written: the renderers of outputs that can be hundreds of MB (a trace
// of thousands of ranks, the CSV tables, the JSON report, the HTML page) append to a
// Pieces, which hands its text on in pieces of about 1 MiB, so the output is never held
// whole. Internal to the renderers.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace stepprof::detail {

/// A buffer that hands its text to `write` each time it reaches kPiece bytes, and the rest
/// at finish(). Once `write` returns false (a failed or interrupted write), nothing more is
/// handed on and ok() is false, so that a long output can stop early.
class Pieces {
 public:
  static constexpr std::size_t kPiece = std::size_t{1} << 20;

  explicit Pieces(std::function<bool(std::string_view)> write) : write_(std::move(write)) { text_.reserve(kPiece + 4096); }

  Pieces& operator+=(std::string_view s) {
    text_ += s;
    hand_on();
    return *this;
  }
  Pieces& operator+=(char c) {
    text_ += c;
    hand_on();
    return *this;
  }
  /// The text not yet handed on, to append to directly (e.g. with fmt::format_to); call
  /// hand_on() after.
  std::string& text() { return text_; }
  /// Hands the text on when it has reached kPiece bytes.
  void hand_on() {
    if (text_.size() < kPiece) return;
    if (ok_) ok_ = write_(text_);
    text_.clear();
  }
  /// Hands on what is left; false when any write failed.
  bool finish() {
    if (ok_ && !text_.empty()) ok_ = write_(text_);
    text_.clear();
    return ok_;
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  std::function<bool(std::string_view)> write_;
  std::string text_;
  bool ok_ = true;
};

}  // namespace stepprof::detail
