#include "trace_scanner.hpp"

#include "file_kind.hpp"

#include <array>
#include <cstring>

#include <fmt/format.h>

namespace stepprof::detail {
namespace {

constexpr bool is_space(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Bytes the composite-value scan stops at: outside strings, quotes and brackets;
// inside strings, the closing quote and escapes.
constexpr std::array<bool, 256> make_table(std::string_view stops) {
  std::array<bool, 256> t{};
  for (char c : stops) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kStructural = make_table("\"{}[]");
constexpr std::array<bool, 256> kStringStop = make_table("\"\\");

// Resumable scan for the end of an object or array that starts at buf[0].
struct CompositeScan {
  std::size_t pos = 0;
  int depth = 0;
  bool in_string = false;

  // Advances over buf[pos, size). Returns true with `pos` one past the closing bracket;
  // false when more bytes are needed (pos is where to resume).
  bool run(const char* buf, std::size_t size) {
    const char* p = buf + pos;
    const char* const end = buf + size;
    for (;;) {
      if (in_string) {
        while (p < end && !kStringStop[static_cast<unsigned char>(*p)]) ++p;
        if (p == end) break;
        if (*p == '\\') {
          if (p + 1 == end) break;  // resume at the backslash once the escaped byte is here
          p += 2;
          continue;
        }
        ++p;
        in_string = false;
      }
      while (p < end && !kStructural[static_cast<unsigned char>(*p)]) ++p;
      if (p == end) break;
      const char c = *p++;
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (--depth == 0) {
        pos = static_cast<std::size_t>(p - buf);
        return true;
      }
    }
    pos = static_cast<std::size_t>(p - buf);
    return false;
  }
};

}  // namespace

TextPosition TraceScanner::position(const char* p) const {
  const char* b = src_.data();
  TextPosition t{line_, col_, src_.offset()};
  if (p < b || p > b + src_.size()) return t;
  t.offset += static_cast<std::uint64_t>(p - b);
  for (const char* q = b; q < p; ++q) {
    if (*q == '\n') {
      ++t.line;
      t.column = 1;
    } else {
      ++t.column;
    }
  }
  return t;
}

void TraceScanner::consume(std::size_t n) {
  const char* p = src_.data();
  const char* const end = p + n;
  const char* last_nl = nullptr;
  while (const auto* q = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)))) {
    ++line_;
    last_nl = q;
    p = q + 1;
  }
  col_ = last_nl ? static_cast<std::uint64_t>(end - last_nl) : col_ + n;
  src_.consume(n);
}

bool TraceScanner::ensure(std::size_t n) {
  while (src_.size() < n)
    if (!src_.fill()) return false;
  return true;
}

int TraceScanner::peek_non_space() {
  for (;;) {
    const char* b = src_.data();
    std::size_t i = 0;
    const std::size_t n = src_.size();
    while (i < n && is_space(b[i])) ++i;
    if (i > 0) consume(i);
    if (i < n) return static_cast<unsigned char>(b[i]);
    if (!src_.fill()) return -1;
  }
}

TraceScanner::Item TraceScanner::fail(Piece& out, std::string message, std::size_t at) {
  out = Piece{};
  out.where = position(src_.data() + at);
  out.error = std::move(message);
  state_ = State::kFailed;
  last_piece_ = out;
  return last_ = Item::kError;
}

TraceScanner::Item TraceScanner::fail_eof(Piece& out, std::string_view context, std::optional<std::size_t> at,
                                          std::string_view or_else) {
  if (!src_.error().empty() && !src_.cut_off())  // e.g. zlib's "incorrect data check"
    return fail(out, fmt::format("the compressed data is corrupt ({})", src_.error()), src_.size());
  const std::string why = src_.error().empty()
                              ? std::string("the input ends")
                              : fmt::format("the input is cut off ({})", src_.error());
  return fail(out, fmt::format("{} {}: the trace is truncated{}", why, context, or_else), at.value_or(src_.size()));
}

bool TraceScanner::value_length(std::size_t& len, Piece& out) {
  if (!ensure(1)) return false;
  const char first = src_.data()[0];
  if (first == '{' || first == '[') {
    CompositeScan scan;
    while (!scan.run(src_.data(), src_.size())) {
      if (src_.size() > kMaxValueBytes) {
        fail(out, fmt::format("a value larger than {} MiB starts here (unbalanced brackets?)", kMaxValueBytes >> 20), 0);
        return false;
      }
      if (!src_.fill()) return false;
    }
    len = scan.pos;
    // Brackets are counted, not matched: an object that lacks its '}' (a hand edit) runs
    // on over the values after it until the ']' of the array around it closes it. Said
    // here, at the object's start, rather than as a truncated trace at the end of the file.
    if (const char last = src_.data()[len - 1]; (first == '{') != (last == '}')) {
      const TextPosition close = position(src_.data() + len - 1);
      fail(out,
           fmt::format("the {} that starts here is closed by a '{}' at line {}, column {}: a bracket is missing or "
                       "misplaced inside it",
                       first == '{' ? "object" : "array", last, close.line, close.column),
           0);
      return false;
    }
    return true;
  }
  if (first == '"') {
    std::size_t i = 1;
    for (;;) {
      const char* b = src_.data();
      const std::size_t n = src_.size();
      while (i < n) {
        if (b[i] == '"') {
          len = i + 1;
          return true;
        }
        if (b[i] == '\\') {
          if (i + 1 >= n) break;  // the escaped byte is not buffered yet
          i += 2;
        } else {
          ++i;
        }
      }
      if (n > kMaxValueBytes) {
        fail(out, fmt::format("a string larger than {} MiB starts here", kMaxValueBytes >> 20), 0);
        return false;
      }
      if (!src_.fill()) return false;
    }
  }
  // A number or literal: up to the next delimiter.
  std::size_t i = 0;
  for (;;) {
    const char* b = src_.data();
    const std::size_t n = src_.size();
    while (i < n && !is_space(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']') ++i;
    if (i < n) {
      len = i;
      return true;
    }
    if (n > 4096) {
      fail(out, "a value longer than 4096 bytes that is neither a string, an object nor an array", 0);
      return false;
    }
    if (!src_.fill()) {
      len = i;  // a scalar at the very end of input
      return true;
    }
  }
}

TraceScanner::Item TraceScanner::next(Piece& out) {
  if (state_ == State::kDone || state_ == State::kFailed) {
    out = last_piece_;
    return last_;
  }
  if (pending_) {
    consume(pending_);
    pending_ = 0;
  }
  for (;;) {
    switch (state_) {
      case State::kStart: {
        if (ensure(3) && std::memcmp(src_.data(), "\xEF\xBB\xBF", 3) == 0) consume(3);  // UTF-8 byte-order mark
        const int c = peek_non_space();
        if (c < 0) {
          if (!src_.error().empty()) return fail_eof(out, "before any JSON");
          return fail(out, "the input is empty", 0);
        }
        // (An array: the legacy profiler's form, said as `report` says it; `import kineto`
        // had only "found '['", a helper.)
        if (c == '[')
          return fail(out, fmt::format("expected a JSON object ('{{'), found '[': {}", kTraceEventArrayWhy), 0);
        if (c != '{')
          return fail(out,
                      fmt::format("expected a JSON object ('{{'), found '{}': a PyTorch profiler trace is one JSON "
                                  "object with a traceEvents array",
                                  static_cast<char>(c)),
                      0);
        consume(1);
        state_ = State::kKeyOrEnd;
        break;
      }
      case State::kKeyOrEnd:
      case State::kNextKey: {
        int c = peek_non_space();
        if (c < 0) return fail_eof(out, "inside the top-level object");
        if (state_ == State::kNextKey) {
          if (c == '}') {
            consume(1);
            state_ = State::kAfterEnd;
            break;
          }
          if (c != ',') return fail(out, fmt::format("expected ',' or '}}' after a top-level value, found '{}'", static_cast<char>(c)), 0);
          consume(1);
          c = peek_non_space();
          if (c < 0) return fail_eof(out, "inside the top-level object");
        } else if (c == '}') {
          consume(1);
          state_ = State::kAfterEnd;
          break;
        }
        if (c != '"') return fail(out, fmt::format("expected a key string, found '{}'", static_cast<char>(c)), 0);
        std::size_t klen = 0;
        if (!value_length(klen, out)) return state_ == State::kFailed ? Item::kError : fail_eof(out, "inside a key");
        // The key, then ':' and the value; all kept in the buffer until the next call.
        std::size_t i = klen;
        for (;;) {
          if (!ensure(i + 1)) return fail_eof(out, "after a key");
          const char* b = src_.data();
          while (i < src_.size() && is_space(b[i])) ++i;
          if (i < src_.size()) break;
        }
        if (src_.data()[i] != ':')
          return fail(out, fmt::format("expected ':' after a key, found '{}'", src_.data()[i]), i);
        ++i;
        for (;;) {
          if (!ensure(i + 1)) return fail_eof(out, "after a key");
          const char* b = src_.data();
          while (i < src_.size() && is_space(b[i])) ++i;
          if (i < src_.size()) break;
        }
        const std::string key(src_.data() + 1, klen - 2);
        if (key == "traceEvents") {
          // (Parsers differ on repeated keys: the first array, the last, or both.)
          if (saw_events_) return fail(out, "a second \"traceEvents\" key: a trace has one array of events", 0);
          if (src_.data()[i] != '[')
            return fail(out, fmt::format("traceEvents is not an array (found '{}')", src_.data()[i]), i);
          consume(i + 1);
          saw_events_ = true;
          state_ = State::kFirstEvent;
          break;
        }
        consume(i);
        std::size_t vlen = 0;
        if (!value_length(vlen, out)) return state_ == State::kFailed ? Item::kError : fail_eof(out, fmt::format("inside the value of \"{}\"", key));
        out = Piece{};
        key_ = key;
        out.key = key_;
        out.text = std::string_view(src_.data(), vlen);
        out.where = position(src_.data());
        pending_ = vlen;
        state_ = State::kNextKey;
        return last_ = Item::kTopValue;
      }
      case State::kFirstEvent:
      case State::kNextEvent: {
        int c = peek_non_space();
        if (c < 0) return fail_eof(out, "inside traceEvents");
        if (c == ']') {
          consume(1);
          state_ = State::kNextKey;
          break;
        }
        if (state_ == State::kNextEvent) {
          if (c != ',')
            return fail(out, fmt::format("expected ',' or ']' between events, found '{}'", static_cast<char>(c)), 0);
          consume(1);
          c = peek_non_space();
          if (c < 0) return fail_eof(out, "inside traceEvents");
        }
        std::size_t vlen = 0;
        // (Pointing at the event: at its start, the buffered input's.)
        if (!value_length(vlen, out))
          return state_ == State::kFailed ? Item::kError
                                          : fail_eof(out, "inside the event that starts here", 0,
                                                     ", or that event's brackets do not balance (the rest of the "
                                                     "trace was read as part of it)");
        out = Piece{};
        out.text = std::string_view(src_.data(), vlen);
        out.where = TextPosition{line_, col_, src_.offset()};
        pending_ = vlen;
        state_ = State::kNextEvent;
        return last_ = Item::kEvent;
      }
      case State::kAfterEnd: {
        int c = peek_non_space();
        while (c == 0) {  // zeros a crash left after the file's end: counted, not an error
          std::size_t i = 0;
          while (i < src_.size() && src_.data()[i] == '\0') ++i;
          trailing_zeros_ += i;
          consume(i);
          c = peek_non_space();
        }
        if (c >= 0) return fail(out, fmt::format("unexpected '{}' after the end of the trace object", static_cast<char>(c)), 0);
        if (!src_.error().empty()) return fail_eof(out, "after the trace object");
        out = Piece{};
        out.where = position(src_.data());
        state_ = State::kDone;
        last_piece_ = out;
        return last_ = Item::kEnd;
      }
      case State::kDone:
      case State::kFailed:
        out = last_piece_;
        return last_;
    }
  }
}

}  // namespace stepprof::detail
