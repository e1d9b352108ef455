// An optional value in the width of the value itself: one value the log never holds
// marks "absent". Keeps RegionSample at 32 bytes instead of the 64 its four
// std::optional members took (millions of samples are kept; see docs/scale.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace stepprof {

/// The "absent" marker of a CompactOptional: `value()` is stored for absent, `is(v)`
/// tells whether a stored v means absent.
struct AbsentNaN {  ///< for times: the reader admits only finite numbers
  static constexpr double value() { return std::numeric_limits<double>::quiet_NaN(); }
  static bool is(double v) { return std::isnan(v); }
};
template <typename Int, Int kMarker>
struct AbsentMarker {  ///< for counts and ids: a value outside their range
  static constexpr Int value() { return kMarker; }
  static constexpr bool is(Int v) { return v == kMarker; }
};

/// A std::optional<T> work-alike stored as a single T: construction and assignment
/// from T, std::optional<T> and std::nullopt; has_value / operator bool / * / ->,
/// value() (throws std::bad_optional_access when absent), value_or, reset; converts to
/// std::optional<T>. Storing the marker value itself (NaN for AbsentNaN) stores
/// "absent".
template <typename T, typename Absent>
class CompactOptional {
 public:
  using value_type = T;
  constexpr CompactOptional() noexcept : v_(Absent::value()) {}
  constexpr CompactOptional(std::nullopt_t) noexcept : v_(Absent::value()) {}    // NOLINT: like std::optional
  /// From a value of the same kind (floating-point for a floating-point T, integral for
  /// an integral T), so that a time cannot land in a count's place by mistake.
  template <typename U>
    requires std::is_arithmetic_v<U> && (std::is_floating_point_v<U> == std::is_floating_point_v<T>)
  constexpr CompactOptional(U v) noexcept : v_(static_cast<T>(v)) {}  // NOLINT: like std::optional
  constexpr CompactOptional(const std::optional<T>& o) noexcept                 // NOLINT: like std::optional
      : v_(o ? *o : Absent::value()) {}

  constexpr CompactOptional& operator=(std::nullopt_t) noexcept {
    v_ = Absent::value();
    return *this;
  }
  template <typename U>
    requires std::is_arithmetic_v<U> && (std::is_floating_point_v<U> == std::is_floating_point_v<T>)
  constexpr CompactOptional& operator=(U v) noexcept {
    v_ = static_cast<T>(v);
    return *this;
  }
  constexpr CompactOptional& operator=(const std::optional<T>& o) noexcept {
    v_ = o ? *o : Absent::value();
    return *this;
  }

  [[nodiscard]] constexpr bool has_value() const noexcept { return !Absent::is(v_); }
  constexpr explicit operator bool() const noexcept { return has_value(); }
  /// The value; as with std::optional, only when has_value().
  constexpr const T& operator*() const noexcept { return v_; }
  constexpr T& operator*() noexcept { return v_; }
  constexpr const T* operator->() const noexcept { return &v_; }
  [[nodiscard]] constexpr const T& value() const {
    if (!has_value()) throw std::bad_optional_access();
    return v_;
  }
  template <typename U>
  [[nodiscard]] constexpr T value_or(U&& fallback) const {
    return has_value() ? v_ : static_cast<T>(std::forward<U>(fallback));
  }
  constexpr void reset() noexcept { v_ = Absent::value(); }
  constexpr operator std::optional<T>() const {  // NOLINT: a drop-in for std::optional
    if (!has_value()) return std::nullopt;
    return v_;
  }

  friend constexpr bool operator==(const CompactOptional& a, const CompactOptional& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || a.v_ == b.v_);
  }
  friend constexpr bool operator==(const CompactOptional& a, std::nullopt_t) { return !a.has_value(); }
  friend constexpr bool operator==(const CompactOptional& a, const T& v) { return a.has_value() && a.v_ == v; }

 private:
  T v_;
};

}  // namespace stepprof
