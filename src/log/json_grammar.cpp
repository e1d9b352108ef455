// The JSON grammar checked by itself: see json_grammar.hpp.
#include "json_grammar.hpp"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "../util/text.hpp"

namespace stepprof::detail {
namespace {

// One pass over one value; depth bounded by kMaxJsonDepth. A NaN or Infinity token is
// noted and read on (the value is JSON but for it only if nothing else is wrong).
class JsonGrammar {
 public:
  explicit JsonGrammar(std::string_view json) : j_(json) {}
  std::optional<JsonValueProblem> check() {
    space();
    if (!value(0)) return problem_;
    space();
    if (i_ != j_.size()) return JsonValueProblem{i_, false, false, {}};
    if (non_finite_at_) return JsonValueProblem{*non_finite_at_, true, false, {}};
    if (repeated_) return JsonValueProblem{repeated_->second, false, false, std::move(repeated_->first)};
    return std::nullopt;
  }

 private:
  bool fail(std::size_t at, bool non_finite = false) {
    problem_ = JsonValueProblem{at, non_finite, false, {}};
    return false;
  }
  char at(std::size_t k) const { return k < j_.size() ? j_[k] : '\0'; }
  void space() {
    while (i_ < j_.size() && (j_[i_] == ' ' || j_[i_] == '\t' || j_[i_] == '\n' || j_[i_] == '\r')) ++i_;
  }
  bool literal(std::string_view word) {
    if (j_.substr(i_, word.size()) != word) return fail(i_);
    i_ += word.size();
    return true;
  }
  bool value(int depth) {
    if (depth > kMaxJsonDepth) {
      problem_ = JsonValueProblem{i_, false, true, {}};
      return false;
    }
    switch (at(i_)) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n':
        if (j_.substr(i_, 4) == "null") return literal("null");
        break;
      default: break;
    }
    if (at(i_) == '-' || (at(i_) >= '0' && at(i_) <= '9')) {
      if (number()) return true;
    }
    // Not a value. A NaN or Infinity token (to the next delimiter) is noted and read on
    // (the value is one only if nothing else is wrong in it); anything else fails.
    std::size_t e = i_;
    while (e < j_.size() && std::string_view(",]} \t\r\n").find(j_[e]) == std::string_view::npos) ++e;
    if (e == i_ || !is_non_finite_token(j_.substr(i_, e - i_))) return fail(i_);
    if (!non_finite_at_) non_finite_at_ = i_;
    i_ = e;
    return true;
  }
  bool object(int depth) {
    ++i_;  // '{'
    space();
    if (at(i_) == '}') return ++i_, true;
    // The keys, as written between their quotes with where each starts, for the check for
    // a key given twice (a reader keeps one of the two values without a word).
    std::vector<std::pair<std::string_view, std::size_t>> keys;
    for (;;) {
      space();
      if (at(i_) != '"') return fail(i_);
      const std::size_t key_at = i_;
      if (!string()) return false;
      keys.emplace_back(j_.substr(key_at + 1, i_ - key_at - 2), key_at);
      space();
      if (at(i_) != ':') return fail(i_);
      ++i_;
      space();
      if (!value(depth + 1)) return false;
      space();
      if (at(i_) == ',') { ++i_; continue; }
      if (at(i_) == '}') {
        ++i_;
        if (!repeated_ && keys.size() > 1) find_repeated(keys);
        return true;
      }
      return fail(i_);
    }
  }
  // Notes the first key of `keys` given twice, compared as decoded ("a" and "\u0061" are
  // one key), at its second place. Sorting the keys as written finds plain repeats; keys
  // with escapes (rare) are decoded and compared with every other.
  void find_repeated(std::vector<std::pair<std::string_view, std::size_t>>& keys) {
    std::vector<std::pair<std::string, std::size_t>> decoded;
    for (const auto& [k, where] : keys)
      if (k.find('\\') != std::string_view::npos) decoded.emplace_back(decode(k), where);
    std::optional<std::pair<std::string, std::size_t>> found;
    // (`key` as written, with its escapes, or already decoded: the message names it decoded.)
    auto note = [&](std::string_view key, std::size_t a, std::size_t b, bool as_written) {
      if (!found || std::max(a, b) < found->second)
        found = {as_written ? decode(key) : std::string(key), std::max(a, b)};
    };
    std::sort(keys.begin(), keys.end());
    for (std::size_t k = 1; k < keys.size(); ++k)
      if (keys[k].first == keys[k - 1].first) note(keys[k].first, keys[k].second, keys[k - 1].second, true);
    for (std::size_t a = 0; a < decoded.size(); ++a) {
      for (const auto& [k, where] : keys)
        if (where != decoded[a].second && k.find('\\') == std::string_view::npos && k == decoded[a].first)
          note(k, where, decoded[a].second, false);  // (k has no escape)
      for (std::size_t b = a + 1; b < decoded.size(); ++b)
        if (decoded[a].first == decoded[b].first) note(decoded[a].first, decoded[a].second, decoded[b].second, false);
    }
    if (found) repeated_ = std::move(found);
  }
  // A key's text (checked by string()) decoded to UTF-8; a lone surrogate escape is
  // encoded as its own 3 bytes, so that only the same escape equals it.
  static std::string decode(std::string_view k) {
    std::string out;
    auto hex4 = [&](std::size_t at) {
      unsigned v = 0;
      for (std::size_t h = 0; h < 4; ++h) {
        const char ch = k[at + h];
        v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                                                                                        : (std::tolower(ch) - 'a' + 10));
      }
      return v;
    };
    auto put = [&](unsigned cp) {
      if (cp < 0x80) out += static_cast<char>(cp);
      else if (cp < 0x800) out += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      else if (cp < 0x10000)
        out += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                static_cast<char>(0x80 | (cp & 0x3F))};
      else
        out += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    };
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (k[i] != '\\') {
        out += k[i];
        continue;
      }
      const char e = k[++i];
      if (e != 'u') {
        out += e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
        continue;
      }
      unsigned cp = hex4(i + 1);
      i += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < k.size() && k[i + 1] == '\\' && k[i + 2] == 'u') {
        const unsigned lo = hex4(i + 3);
        if (lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
      }
      put(cp);
    }
    return out;
  }
  bool array(int depth) {
    ++i_;  // '['
    space();
    if (at(i_) == ']') return ++i_, true;
    for (;;) {
      space();
      if (!value(depth + 1)) return false;
      space();
      if (at(i_) == ',') { ++i_; continue; }
      if (at(i_) == ']') return ++i_, true;
      return fail(i_);
    }
  }
  bool string() {
    const std::size_t open = i_++;
    for (; i_ < j_.size(); ++i_) {
      const char ch = j_[i_];
      if (ch == '"') return ++i_, true;
      if (static_cast<unsigned char>(ch) < 0x20) return fail(i_);
      if (ch != '\\') continue;
      const char e = at(++i_);
      if (e == 'u') {
        for (std::size_t h = 1; h <= 4; ++h)
          if (!std::isxdigit(static_cast<unsigned char>(at(i_ + h)))) return fail(i_ - 1);
        i_ += 4;
      } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos || e == '\0') {
        return fail(i_ - 1);
      }
    }
    return fail(open);  // (not closed)
  }
  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, leaving i_ after it; false (nothing
  // recorded) when it is not one.
  bool number() {
    std::size_t k = i_;
    const auto digits = [&] {
      const std::size_t from = k;
      while (at(k) >= '0' && at(k) <= '9') ++k;
      return k > from;
    };
    if (at(k) == '-') ++k;
    if (at(k) == '0') ++k;
    else if (!digits()) return false;
    if (at(k) == '.' && (++k, !digits())) return false;
    if (at(k) == 'e' || at(k) == 'E') {
      ++k;
      if (at(k) == '+' || at(k) == '-') ++k;
      if (!digits()) return false;
    }
    // A number runs to a delimiter ("01" is not one: 0, then 1).
    if (k < j_.size() && std::string_view(",]} \t\r\n").find(j_[k]) == std::string_view::npos) return false;
    i_ = k;
    return true;
  }

  std::string_view j_;
  std::size_t i_ = 0;
  JsonValueProblem problem_;
  std::optional<std::size_t> non_finite_at_;  // the first NaN or Infinity token
  std::optional<std::pair<std::string, std::size_t>> repeated_;  // the first key given twice (decoded), where
};

}  // namespace

std::optional<JsonValueProblem> json_value_problem(std::string_view json) { return JsonGrammar(json).check(); }

// NaN or Infinity as a whole token, in any case and with a sign: NaN, -Infinity, nan,
// inf, +Inf (Python's json writes the first three kinds). Not a word that only starts so
// ("info", "nancy").
bool is_non_finite_token(std::string_view tok) {
  if (!tok.empty() && (tok[0] == '-' || tok[0] == '+')) tok.remove_prefix(1);
  return equal_ignoring_case(tok, "nan") || equal_ignoring_case(tok, "inf") || equal_ignoring_case(tok, "infinity");
}

}  // namespace stepprof::detail
