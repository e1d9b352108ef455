// Splits a Chrome-trace JSON object ({"traceEvents": [...], "other": ...}) into its
// top-level values and the elements of its `traceEvents` array, streaming over a
// ByteSource with memory bounded by the largest single value. It tracks strings,
// escapes and bracket depth only: it is a splitter, not a JSON parser; each piece is
// parsed afterwards (simdjson). Internal to the reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "byte_source.hpp"

namespace stepprof::detail {

/// Where a byte is in the decompressed input: 1-based line and column, 0-based offset.
struct TextPosition {
  std::uint64_t line = 0;
  std::uint64_t column = 0;
  std::uint64_t offset = 0;
};

class TraceScanner {
 public:
  enum class Item {
    kTopValue,  ///< a top-level key other than traceEvents with its raw value text
    kEvent,     ///< one element of traceEvents (raw text, normally an object)
    kEnd,       ///< the closing brace of the top-level object (and only whitespace after it)
    kError,     ///< the input is not a trace object, or ends early; nothing follows
  };

  /// One piece of the input. `text` stays valid until the next call to next() and is
  /// followed by ByteSource::padding readable bytes (what simdjson needs).
  struct Piece {
    std::string_view key;   ///< kTopValue: the key (raw, without quotes)
    std::string_view text;  ///< kTopValue / kEvent: the raw JSON value
    TextPosition where;     ///< position of `text` (kError: of the problem)
    std::string error;      ///< kError: what was wrong
  };

  /// Values larger than this (bytes) are rejected: a single event that big means
  /// unbalanced brackets, not a real event.
  static constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;

  explicit TraceScanner(ByteSource& src) : src_(src) {}

  /// The next piece. After kEnd or kError every further call returns the same item.
  Item next(Piece& out);

  /// True once the `traceEvents` key was met.
  [[nodiscard]] bool saw_trace_events() const { return saw_events_; }
  /// NUL bytes skipped after the end of the trace object (a crash's zero-fill).
  [[nodiscard]] std::uint64_t trailing_zero_bytes() const { return trailing_zeros_; }
  /// Position of a pointer into the current piece's buffer.
  [[nodiscard]] TextPosition position(const char* p) const;

 private:
  enum class State { kStart, kKeyOrEnd, kNextKey, kFirstEvent, kNextEvent, kAfterEnd, kDone, kFailed };

  // Drops `n` bytes from the front of the buffer, keeping line/column counts.
  void consume(std::size_t n);
  // Makes sure at least `n` bytes are buffered; false at the end of input.
  bool ensure(std::size_t n);
  // Skips whitespace; returns the next byte or -1 at the end of input.
  int peek_non_space();
  // Finds the end of the JSON value starting at the buffer front; sets `len`.
  // Returns false (with out.error set) when the input ends or the value is too large.
  bool value_length(std::size_t& len, Piece& out);
  Item fail(Piece& out, std::string message, std::size_t at);
  // `at`: where to point (an offset into the buffered input); the end of it by default.
  Item fail_eof(Piece& out, std::string_view context, std::optional<std::size_t> at = std::nullopt,
                std::string_view or_else = {});

  ByteSource& src_;
  std::uint64_t trailing_zeros_ = 0;
  State state_ = State::kStart;
  std::size_t pending_ = 0;  // bytes of the last piece, consumed on the next call
  std::uint64_t line_ = 1;   // line of the first buffered byte
  std::uint64_t col_ = 1;    // column of the first buffered byte
  bool saw_events_ = false;
  Item last_ = Item::kError;
  Piece last_piece_;
  std::string key_;  // the key of the last kTopValue (out.key points here)
};

}  // namespace stepprof::detail
