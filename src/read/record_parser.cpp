// The record parser (simdjson's on-demand API). Its stage 1 (finding the structure)
// runs the best kernel for the CPU: libsimdjson dispatches it at run time.
//
// The hot path (a valid record) allocates nothing: field paths for messages are built
// only when a field is wrong, and keys are matched against the previous record's keys
// without unescaping them.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cctype>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../log/json_grammar.hpp"
#include "../util/text.hpp"
#include "json_error.hpp"
#include "ondemand_alloc.hpp"
#include "record_parser.hpp"
#include "stepprof/schema.hpp"

namespace stepprof::detail {
namespace {

static_assert(kParsePadding >= simdjson::SIMDJSON_PADDING);

using simdjson::error_code;
namespace od = simdjson::ondemand;
namespace s = schema;

// The name of a field for messages, e.g. "cuda_stream_ms.vision_forward"; formatted
// only when a message needs it.
struct Path {
  std::string_view head;
  std::string_view tail;  // empty: the path is `head` alone
  // When set, the tail is names->name(id), looked up only when a message needs it.
  const NameTable* names = nullptr;
  NameTable::Id id = 0;
  std::optional<std::size_t> element = std::nullopt;  // an array's element: "head[element]"
};
std::string str(const Path& p) {
  if (p.element) return fmt::format("{}[{}]", p.head, *p.element);
  const std::string_view tail = p.names ? p.names->name(p.id) : p.tail;
  return tail.empty() ? std::string(p.head) : fmt::format("{}.{}", p.head, tail);
}

// Context for one record: the text (for columns) and where the first error goes.
class Ctx {
 public:
  Ctx(std::string_view text, RecordError& err) : text_(text), err_(err) {}

  std::uint64_t column(const char* p) const {
    if (p >= text_.data() && p <= text_.data() + text_.size())
      return static_cast<std::uint64_t>(p - text_.data()) + 1;
    return 0;
  }
  // Records the first error and returns false, so callers can `return c.fail(...)`.
  bool fail(Problem p, const char* where, std::string msg) {
    err_.problem = p;
    err_.column = where ? column(where) : 0;
    err_.message = std::move(msg);
    err_.cause = {};
    err_.no_type = false;
    return false;
  }
  void set_cause(std::string_view cause) { err_.cause = cause; }
  // The document being iterated: where an error inside a value was found, when the
  // caller cannot say (set once the document is open).
  void set_document(od::document* doc) { doc_ = doc; }
  bool fail_json(error_code e, const char* where, std::string_view context) {
    if (!where && doc_) where = document_location();
    std::optional<std::size_t> at;
    const std::string what = describe_json_error(e, text_, at);
    if (at) where = text_.data() + *at;
    return fail(Problem::kMalformedJson, where,
                context.empty() ? fmt::format("malformed JSON: {}", what)
                                : fmt::format("malformed JSON {}: {}", context, what));
  }

 private:
  const char* document_location() const;

  std::string_view text_;
  RecordError& err_;
  od::document* doc_ = nullptr;
};

// Where the parser is in the record, or nullptr when it cannot tell.
const char* location(od::document& doc) {
  const char* at = nullptr;
  if (doc.current_location().get(at)) return nullptr;
  return at;
}

const char* Ctx::document_location() const { return location(*doc_); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// A key (or name) for messages, shortened (cut before a UTF-8 continuation byte, so that
// no character is split); its spaces kept: " 3" is not the key "3".
std::string shown_key(std::string_view key) {
  if (key.size() > 40) return fmt::format("{}...", prefix_at_character(key, 37));
  return std::string(key);
}

// A value's raw token for messages: trimmed of the spaces around it, shortened likewise.
std::string shown(std::string_view tok) { return shown_key(trim(tok)); }

// False, with a malformed-json error at the ':', when one follows field `key`'s value `v`
// (not read yet). A string value that simdjson steps over without reading it (a field of
// the job's own, `type`, a config value) and that a ':' follows is taken for a key: the
// ':' and the next value are stepped over too (simdjson issue 1742), so `"x": "a": "b"`
// passed as JSON. The value's raw token runs to the next structural character, which
// must be ',' or '}'.
bool no_colon_after(od::value& v, Ctx& c, std::string_view key) {
  const std::string_view full = v.raw_json_token();
  const char* after = full.data() + full.size();  // (the text is padded: readable at its end)
  if (*after != ':') return true;
  return c.fail(Problem::kMalformedJson, after,
                fmt::format("a ':' after the value of \"{}\": the JSON structure is broken (a ',' or '{{' missing?)",
                            printable(key)));
}

bool is_non_finite_literal(std::string_view tok) {
  if (!tok.empty() && (tok[0] == '-' || tok[0] == '+')) tok.remove_prefix(1);
  if (tok.size() < 3) return false;
  auto lower = [](char ch) { return static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch); };
  const char head[3] = {lower(tok[0]), lower(tok[1]), lower(tok[2])};
  const std::string_view h(head, 3);
  return h == "nan" || h == "inf";  // NaN, nan, NAN, Infinity, inf, INF, ... in any case
}

// True when `json` (a value's text) is a number from 0 to `max` (json_number_value: a
// number too small for a double, 1e-999, is 0, as simdjson reads the schema's others).
bool is_number_upto(std::string_view json, double max) {
  const auto v = json_number_value(json);
  return v && std::isfinite(*v) && *v >= 0 && *v <= max;
}

// The schema's fields that the parser keeps verbatim in `UpdateRecord::extra` and checks
// only for range: start_unix_ms (the cross-rank comparison and `trace`) and gpu_busy_ms
// (the GPU's busy time in profiler-trace logs). docs/log-schema.md gives both ranges.
struct VerbatimField {
  std::string_view key;
  double max;             // a number from 0 to this
  std::string_view what;  // for the message: "is not {what}"
};
constexpr VerbatimField kVerbatimFields[] = {
    {schema::kStartUnixMs, schema::kMaxStartUnixMs, "a Unix time in milliseconds (a number from 0 to 1e14)"},
    {schema::kGpuBusyMs, schema::kMaxTimeMs, "a time in milliseconds (a number from 0 to 1e12)"},
};
const VerbatimField* verbatim_field(std::string_view key) {
  for (const auto& f : kVerbatimFields)
    if (key == f.key) return &f;
  return nullptr;
}

// A config record whose values include NaN or Infinity (as Python's json writes them),
// which simdjson cannot step over: its fields, read from a copy in which each such
// literal outside strings is a marked string, then put back as the literal, so that
// make_config reports and leaves out just those fields. False when the copy is not one
// JSON object either.
bool config_fields_with_non_finite(std::string_view text, std::vector<RawField>& out) {
  std::string copy;
  copy.reserve(text.size() + 64);
  bool in_string = false;
  char last = 0;  // the last character outside strings that is not a space
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      copy += ch;
      if (ch == '\\' && i + 1 < text.size()) copy += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if ((last == ':' || last == ',' || last == '[') && is_non_finite_literal(text.substr(i))) {
      std::size_t n = 0;
      while (i + n < text.size() && (std::isalnum(static_cast<unsigned char>(text[i + n])) || text[i + n] == '-' ||
                                     text[i + n] == '+'))
        ++n;
      copy += fmt::format("\"\\u0001{}\"", text.substr(i, n));
      i += n - 1;
      last = 'x';
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch != ' ' && ch != '\t') last = ch;
    copy += ch;
  }
  std::string err;
  if (!parse_object_fields(copy, out, err)) return false;
  std::erase_if(out, [](const RawField& f) { return f.key == s::kType; });
  for (auto& f : out)  // "\u0001NaN" (as nlohmann writes it back) -> NaN
    for (std::size_t at; (at = f.json.find("\"\\u0001")) != std::string::npos;) {
      const auto end = f.json.find('"', at + 7);
      f.json.replace(at, end + 1 - at, f.json.substr(at + 7, end - at - 7));
    }
  return true;
}

// Why `v` is not a finite number (called only when reading it as one failed).
// `tok` is the value's raw text, taken before reading it; `expected` what the field holds
// ("a number", "an integer"), for a value of another JSON type.
bool number_problem(std::string_view tok, Ctx& c, const Path& path, error_code e, std::string_view expected) {
  tok = trim(tok);
  if (tok.empty() || tok[0] == '}' || tok[0] == ']' || tok[0] == ',' || tok[0] == ':')
    return c.fail(Problem::kMalformedJson, tok.empty() ? nullptr : tok.data(),
                  fmt::format("malformed JSON at {}: expected a value, found '{}'", str(path),
                              tok.empty() ? std::string("end of line") : std::string(1, tok[0])));
  if (is_non_finite_literal(tok))
    return c.fail(Problem::kNonFinite, tok.data(),
                  fmt::format("{}: non-finite number {} (expected a finite number)", str(path), shown(tok)));
  // ('+5' and '.5' start no JSON value: malformed JSON whatever simdjson calls them.)
  if (((e == simdjson::NUMBER_ERROR && (tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9'))) || tok[0] == '+' ||
       tok[0] == '.') &&
      !json_number_syntax(tok))
    return c.fail(Problem::kMalformedJson, tok.data(),
                  fmt::format("{}: {} is not a number as JSON writes them", str(path), shown(tok)));
  if (e == simdjson::NUMBER_ERROR && (tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9')))
    return c.fail(Problem::kNonFinite, tok.data(),
                  fmt::format("{}: number {} is out of range (expected a finite number)", str(path), shown(tok)));
  return c.fail(Problem::kBadField, tok.data(), fmt::format("{}: expected {}, found {}", str(path), expected, shown(tok)));
}

// The raw text of a value, for messages about it; take it before reading the value.
std::string_view token_of(od::value& v) { return v.raw_json_token(); }

// Reads a finite number. `path` names the field for messages; `tok` is token_of(v);
// `expected` names what the field holds in the message for a value of another type.
bool read_number(od::value& v, std::string_view tok, Ctx& c, const Path& path, double& out,
                 std::string_view expected = "a number") {
  double d = 0;
  if (auto e = v.get_double().get(d)) return number_problem(tok, c, path, e, expected);
  if (!std::isfinite(d)) {
    tok = trim(tok);
    return c.fail(Problem::kNonFinite, tok.data(), fmt::format("{}: non-finite number {}", str(path), shown(tok)));
  }
  out = d;
  return true;
}

// Reads a finite number, taking simdjson's faster integer parser for integers that a
// double holds exactly (the same value as read_number gives).
// Counters count work items: a negative count, or one beyond what a double holds
// exactly (2^53), is an error.
bool read_count_value(od::value& v, std::string_view tok, Ctx& c, const Path& path, double& out) {
  constexpr std::int64_t kExact = std::int64_t{1} << 53;
  auto out_of_range = [&] {
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("{}: count {} is out of range (at most 2^53)", str(path), shown(tok)));
  };
  bool as_float = false;
  if (std::int64_t i = 0; !v.get_int64().get(i) && !(i == 0 && tok[0] == '-')) {
    // (Checked as the integer it is: 2^53 + 1 read as a double is 2^53, and was taken.)
    if (i > kExact) return out_of_range();
    out = static_cast<double>(i);  // ("-0" is left to read_number, which gives -0.0)
  } else if (!read_number(v, tok, c, path, out)) {
    return false;
  } else {
    as_float = true;
  }
  if (out < 0)
    return c.fail(Problem::kNegativeTime, tok.data(),
                  fmt::format("{}: negative count {} (counts are >= 0)", str(path), shown(tok)));
  if (out > static_cast<double>(kExact)) return out_of_range();
  // 9007199254740993.0 reads as 2^53 too; only an integer as JSON writes them is exact there.
  if (as_float && out == static_cast<double>(kExact))
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("{}: count {} written as a floating-point number is 2^53, where it cannot be read "
                              "exactly (write it without a fraction or exponent)",
                              str(path), shown(tok)));
  return true;
}

using schema::kMaxNameBytes;  // (names are 1 to 1024 bytes: schema.hpp)

// Why `name` (a region's or counter's, in `what`) cannot be one; empty when it can.
std::string bad_name(std::string_view name, std::string_view what) {
  if (name.empty()) return fmt::format("{}: a name is empty", what);
  if (name.size() > kMaxNameBytes)
    return fmt::format("{}: a name of {} bytes (\"{}\"): names are at most {} bytes", what, name.size(),
                       shown_key(name), kMaxNameBytes);  // (cut at a character, not inside one)
  return {};
}

// True when `text` (from a value's first byte to the line's end, followed by padding)
// starts with a JSON array of integers that read_int takes and that are >= 0: '[', then
// 1 to 18 digits without a leading zero (or a lone 0) per element, ',' between
// elements, JSON whitespace anywhere between tokens, and ']'. Anything else (a sign, a
// fraction, an exponent, a 19th digit, a missing element) is false: the caller then
// parses the array value by value and reports what is wrong with it.
bool plain_index_array(std::string_view text) {
  auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  std::size_t i = 0;
  const std::size_t n = text.size();
  auto skip_space = [&] {
    while (i < n && is_space(text[i])) ++i;
  };
  if (n == 0 || text[0] != '[') return false;
  ++i;
  skip_space();
  if (i < n && text[i] == ']') return true;
  for (;;) {
    const std::size_t start = i;
    while (i < n && is_digit(text[i])) ++i;
    const std::size_t digits = i - start;
    if (digits == 0 || digits > 18 || (digits > 1 && text[start] == '0')) return false;
    skip_space();
    if (i >= n) return false;
    if (text[i] == ']') return true;
    if (text[i] != ',') return false;
    ++i;
    skip_space();
  }
}

// Reads an integer; an integral floating-point value such as 2.0 or 1.6e1 is accepted up to
// 2^53 in magnitude.
bool read_int(od::value& v, std::string_view tok, Ctx& c, const Path& path, std::int64_t& out) {
  // An integer as JSON writes it is taken whole, up to the int64 range (a recorder may
  // write any int64 step); otherwise it is read as a double, so 2.0 is 2.
  if (std::int64_t i = 0; !v.get_int64().get(i)) {
    out = i;
    return true;
  }
  double d = 0;
  if (!read_number(v, tok, c, path, d, "an integer")) return false;
  if (d != std::nearbyint(d))
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: expected an integer, found {}", str(path), shown(tok)));
  // Written as an integer, it is beyond int64 (get_int64 took every other one); written
  // otherwise, 2^63 or more is beyond int64 however it is written.
  if (trim(tok).find_first_of(".eE") == std::string_view::npos || d >= 0x1p63 || d < -0x1p63)
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: integer {} is out of range (-2^63 to 2^63 - 1)", str(path), shown(tok)));
  // From 2^53 on a double no longer holds every integer: 9007199254740993.0 reads as
  // ...992. Such an integer is taken only as JSON writes integers (no fraction, no exponent).
  if (std::fabs(d) >= 0x1p53)
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: integer {} written as a floating-point number is 2^53 or more, where it "
                              "cannot be read exactly (write it without a fraction or exponent)",
                              str(path), shown(tok)));
  out = static_cast<std::int64_t>(d);
  return true;
}

bool read_time(od::value& v, std::string_view tok, Ctx& c, const Path& path, double& out) {
  if (!read_number(v, tok, c, path, out)) return false;
  if (out < 0)
    return c.fail(Problem::kNegativeTime, trim(tok).data(),
                  fmt::format("{}: negative time {} ms (times are durations, >= 0)", str(path), shown(tok)));
  if (out > schema::kMaxTimeMs)
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: time {} ms is out of range (at most 1e12 ms, about 31.7 years)", str(path),
                              shown(tok)));
  return true;
}

bool read_count(od::value& v, std::string_view tok, Ctx& c, const Path& path, std::int64_t& out) {
  if (!read_int(v, tok, c, path, out)) return false;
  if (out < 0)
    return c.fail(Problem::kNegativeTime, trim(tok).data(),
                  fmt::format("{}: negative count {} (expected >= 0)", str(path), shown(tok)));
  return true;
}

// A count of samples or micro-batches in one update of one rank (frame_histogram,
// input_shapes): read_count, and at most 2^32. A larger one is no real batch (2^62 with
// 16 samples counted), and the what-if expands these counts one entry per sample.
constexpr std::int64_t kMaxBatchCount = schema::kMaxBatchCount;
bool read_batch_count(od::value& v, std::string_view tok, Ctx& c, const Path& path, std::string_view what,
                      std::int64_t& out) {
  if (!read_count(v, tok, c, path, out)) return false;
  if (out > kMaxBatchCount)
    return c.fail(Problem::kBadField, trim(tok).data(),
                  fmt::format("{}: {} {} in one update of one rank cannot be right (at most {} are read)", str(path),
                              shown(tok), what, kMaxBatchCount));
  return true;
}

bool get_object(od::value& v, Ctx& c, std::string_view path, od::object& obj) {
  const std::string_view tok = token_of(v);
  if (v.get_object().get(obj)) {
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("{}: expected an object {{...}}, found {}", path, shown(tok)));
  }
  return true;
}

// Calls `take(key, value)` for each field of `m`, key unescaped, in order, until it
// returns false; `field` names the object for messages. Each field is used where the
// iterator holds it: copying a simdjson field out costs more than reading its key.
template <typename Take>
bool each_field(od::object& m, Ctx& c, std::string_view field, Take&& take) {
  for (auto f : m) {
    if (auto e = f.error()) return c.fail_json(e, nullptr, fmt::format("in {}", field));
    od::field&& fld = std::move(f).value_unsafe();
    // (The key's opening quote, for messages, taken before unescaping consumes the key.)
    const char* key_at = fld.key().raw() - 1;
    std::string_view key;
    if (auto e = fld.unescaped_key().get(key)) return c.fail_json(e, key_at, fmt::format("in {}", field));
    if (!take(key, fld.value(), key_at)) return false;
  }
  return true;
}

// Calls `take(value)` for each element of `a`, in order, until it returns false.
template <typename Take>
bool each_element(od::array& a, Ctx& c, std::string_view field, Take&& take) {
  for (auto elem : a) {
    if (auto e = elem.error()) return c.fail_json(e, nullptr, fmt::format("in {}", field));
    od::value&& v = std::move(elem).value_unsafe();
    if (!take(v)) return false;
  }
  return true;
}

// An element of `items` whose key (`key_of(item)`) another element also has, or nullptr.
// A few items are compared pair by pair; more are sorted (a copy of their addresses).
template <typename T, typename KeyOf>
const T* repeated_key(const std::vector<T>& items, KeyOf key_of) {
  const std::size_t n = items.size();
  if (n <= 8) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j)
        if (key_of(items[i]) == key_of(items[j])) return &items[i];
    return nullptr;
  }
  std::vector<const T*> order;
  order.reserve(n);
  for (const T& item : items) order.push_back(&item);
  std::sort(order.begin(), order.end(), [&](const T* a, const T* b) { return key_of(*a) < key_of(*b); });
  for (std::size_t i = 1; i < n; ++i)
    if (key_of(*order[i - 1]) == key_of(*order[i])) return order[i];
  return nullptr;
}

// Parses "(8, 3154)" (Python tuple text) into dims.
bool parse_tuple(std::string_view key, std::vector<std::int64_t>& dims) {
  key = trim(key);
  if (key.size() < 2 || key.front() != '(' || key.back() != ')') return false;
  key = key.substr(1, key.size() - 2);
  dims.clear();
  while (!key.empty()) {
    key = trim(key);
    if (key.empty()) break;
    std::int64_t v = 0;
    std::size_t i = 0;
    bool neg = false;
    if (key[0] == '-') { neg = true; i = 1; }
    std::size_t digits = 0;
    for (; i < key.size() && key[i] >= '0' && key[i] <= '9'; ++i, ++digits) {
      if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return false;  // would overflow
      v = v * 10 + (key[i] - '0');
    }
    if (digits == 0 || neg) return false;
    dims.push_back(v);
    key = trim(key.substr(i));
    if (!key.empty()) {
      if (key[0] != ',') return false;
      key.remove_prefix(1);
    }
  }
  return !dims.empty();
}

bool parse_int_key(std::string_view key, std::int64_t& out) {
  if (key.empty() || key.size() > 18) return false;
  out = 0;
  for (char ch : key) {
    if (ch < '0' || ch > '9') return false;
    out = out * 10 + (ch - '0');
  }
  return true;
}

// The bytes of an escape-free JSON string starting at `raw` (just after its opening
// quote), or an empty optional when the string holds a backslash escape. Stage 1 of
// the parse has checked that the string is closed.
std::optional<std::string_view> plain_string(const char* raw) {
  const char* p = raw;
  while (*p != '"') {
    if (*p == '\\') return std::nullopt;
    ++p;
  }
  return std::string_view(raw, static_cast<std::size_t>(p - raw));
}

// Reads `microbatches`: [{"path": str, "frames": [int], "tokens": [int], "padded_length": int}]
// (docs/log-schema.md "Per-micro-batch detail"). Every key is optional; an unknown key, a
// negative count, per-sample arrays of different lengths or a padded length below a
// sample's tokens reject the record.
bool read_microbatches(od::value v, Ctx& c, NameTable& regions, std::vector<MicroBatch>& out) {
  namespace m = s::microbatch;
  od::array list;
  std::string_view tok;
  tok = v.raw_json_token();
  if (v.get_array().get(list))
    return c.fail(Problem::kBadField, tok.data(),
                  fmt::format("microbatches: expected an array of objects, found {}", shown(tok)));
  auto read_counts = [&](od::value fv, std::string_view path, std::vector<std::int64_t>& dst) {
    od::array a;
    std::string_view t;
    t = fv.raw_json_token();
    if (fv.get_array().get(a))
      return c.fail(Problem::kBadField, t.data(), fmt::format("{}: expected an array of counts, found {}", path, shown(t)));
    return each_element(a, c, path, [&](od::value& ev) {
      std::int64_t n = 0;
      if (!read_count(ev, token_of(ev), c, {path, {}, nullptr, 0, dst.size()}, n)) return false;
      dst.push_back(n);
      return true;
    });
  };
  std::size_t index = 0;
  return each_element(list, c, "microbatches", [&](od::value& ev) {
    const std::string where = fmt::format("microbatches[{}]", index++);
    od::object obj;
    if (!get_object(ev, c, where, obj)) return false;
    MicroBatch mb;
    unsigned seen = 0;  // bit i: the i-th of path, frames, tokens, padded_length was read
    const bool fields_ok = each_field(obj, c, where, [&](std::string_view key, od::value& fv, const char* key_at) {
      const std::string path = fmt::format("{}.{}", where, key);
      const unsigned bit = key == m::kPath ? 1u : key == m::kFrames ? 2u : key == m::kTokens ? 4u
                           : key == m::kPaddedLength ? 8u : 0u;
      if (seen & bit) return c.fail(Problem::kBadField, key_at, fmt::format("{}: key listed twice", path));
      seen |= bit;
      if (key == m::kPath) {
        std::string_view name, t;
        t = fv.raw_json_token();
        if (fv.get_string().get(name))
          return c.fail(Problem::kBadField, t.data(), fmt::format("{}: expected a region name, found {}", path, shown(t)));
        if (name.empty() || name.size() > kMaxNameBytes) return c.fail(Problem::kBadField, t.data(), bad_name(name, path));
        mb.path = regions.intern(name);
      } else if (key == m::kFrames || key == m::kTokens) {
        if (!read_counts(fv, path, key == m::kFrames ? mb.frames : mb.tokens)) return false;
      } else if (key == m::kPaddedLength) {
        std::int64_t n = 0;
        if (!read_count(fv, token_of(fv), c, {path, {}}, n)) return false;
        mb.padded_length = n;
      } else {
        return c.fail(Problem::kBadField, key_at,
                      fmt::format("{}: unknown key \"{}\" (expected path, frames, tokens, padded_length)", where,
                                  shown_key(key)));
      }
      return true;
    });
    if (!fields_ok) return false;
    if (!mb.frames.empty() && !mb.tokens.empty() && mb.frames.size() != mb.tokens.size())
      return c.fail(Problem::kBadField, nullptr,
                    fmt::format("{}: {} frame counts but {} token counts (one of each per sample)", where,
                                mb.frames.size(), mb.tokens.size()));
    if (mb.padded_length)
      for (const std::int64_t t : mb.tokens)
        if (t > *mb.padded_length)
          return c.fail(Problem::kBadField, nullptr,
                        fmt::format("{}: a sample has {} tokens, more than padded_length {}", where, t,
                                    *mb.padded_length));
    out.push_back(std::move(mb));
    return true;
  });
}

// A name to compare with a JSON string's raw bytes: the name and its closing quote as
// 8-byte words, the last one masked, so one comparison per word decides.
class RawName {
 public:
  RawName() { words_[0] = 1; }  // matches nothing (masked with 0, a word is never 1)
  explicit RawName(std::string_view name) : name_(name) {
    const std::size_t n = name.size() + 1;  // with the closing quote
    if (n > sizeof(words_)) {               // long names: compared byte by byte
      count_ = 0;
      return;
    }
    std::array<char, sizeof(words_)> bytes{};
    std::memcpy(bytes.data(), name.data(), name.size());
    bytes[name.size()] = '"';
    std::memcpy(words_.data(), bytes.data(), sizeof(words_));
    count_ = static_cast<std::uint8_t>((n + 7) / 8);
    const std::size_t tail = n % 8;
    last_mask_ = tail == 0 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * tail)) - 1;  // little-endian
  }
  [[nodiscard]] std::string_view name() const { return name_; }

  // True when the JSON string whose bytes start at `raw` (after its opening quote) is
  // exactly this name. Reads whole words only within the parser's padding after the
  // record; `name` holds no quote or backslash.
  [[nodiscard]] bool matches(const char* raw) const {
    if (count_ == 0) {
      std::size_t i = 0;
      while (i < name_.size() && raw[i] == name_[i]) ++i;  // stops at the string's end
      return i == name_.size() && raw[i] == '"';
    }
    std::uint64_t w;
    for (std::size_t i = 0; i + 1 < count_; ++i) {
      std::memcpy(&w, raw + 8 * i, 8);
      if (w != words_[i]) return false;
    }
    std::memcpy(&w, raw + 8 * (count_ - 1), 8);
    return (w & last_mask_) == words_[count_ - 1];
  }

 private:
  static_assert(std::endian::native == std::endian::little, "RawName masks assume little-endian words");
  std::string_view name_;
  std::array<std::uint64_t, 7> words_{};  // names up to 55 bytes; read at most 56 bytes < kParsePadding
  std::uint64_t last_mask_ = 0;
  std::uint8_t count_ = 1;  // 0: a long name, compared byte by byte
};

// Hash for looking up std::string keys by string_view.
struct ViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Finds the id of a name in a record from its raw JSON bytes. Logs repeat the same
// names in nearly the same order in every record, so it keeps the names in the order
// seen and expects each name to follow the one found before it (one comparison);
// otherwise it scans the few names it knows, and beyond kMaxSlots names it hashes.
// Only names with backslash escapes are unescaped and interned each time.
class NameCache {
 public:
  /// Call at the start of each map.
  void restart() { cursor_ = 0; }

  // `raw` points just after the opening quote of a JSON string; `unescape` returns the
  // unescaped string (or a simdjson error) and is called only when needed. The name is
  // table.name(id): callers look it up only for messages.
  template <typename Unescape>
  error_code lookup(const char* raw, NameTable& table, Unescape&& unescape, NameTable::Id& id) {
    if (cursor_ < slots_.size() && slots_[cursor_].raw.matches(raw)) return hit(cursor_, id);
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (i != cursor_ && slots_[i].raw.matches(raw)) return hit(i, id);
    const auto plain = plain_string(raw);
    if (!plain) {
      std::string_view name;
      if (auto e = unescape().get(name)) return e;
      id = table.intern(name);
      return simdjson::SUCCESS;
    }
    if (slots_.size() < kMaxSlots) {
      const NameTable::Id new_id = table.intern(*plain);
      slots_.push_back({RawName(table.name(new_id)), new_id});  // the table's copy never moves
      return hit(slots_.size() - 1, id);
    }
    auto it = overflow_.find(*plain);
    if (it == overflow_.end()) it = overflow_.emplace(std::string(*plain), table.intern(*plain)).first;
    id = it->second;
    return simdjson::SUCCESS;
  }

 private:
  static constexpr std::size_t kMaxSlots = 64;
  struct Slot {
    RawName raw;  // over NameTable::name(id): stable for the table's lifetime
    NameTable::Id id = 0;
  };
  error_code hit(std::size_t i, NameTable::Id& id) {
    id = slots_[i].id;
    cursor_ = i + 1;
    return simdjson::SUCCESS;
  }
  std::vector<Slot> slots_;
  std::size_t cursor_ = 0;
  std::unordered_map<std::string, NameTable::Id, ViewHash, std::equal_to<>> overflow_;
};

// The id of the key of `field` (its name: table.name(id)).
error_code key_id(NameCache& cache, od::field& field, NameTable& table, NameTable::Id& id) {
  return cache.lookup(field.key().raw(), table, [&] { return field.unescaped_key(); }, id);
}

// The update record's field names, matched by their raw bytes, in the order the
// real log and stepprof's serializer write them (each is expected after the last).
class TopKeys {
 public:
  static constexpr std::array kNames = {s::kType,           s::kRank,           s::kStep,         s::kWallMs,
                                        s::kCudaStreamMs,    s::kCpuCallMs,      s::kCalls,        s::kParents,
                                        s::kCounts,          s::kFrameHistogram, s::kInputShapes,  s::kSampleIndices,
                                        s::kPaddingFraction, s::kRecorderErrors, s::kMicrobatches};
  static constexpr std::size_t kCount = kNames.size();
  static_assert(kCount <= 32, "a record's keys seen are one bit each in a std::uint32_t");
  TopKeys() {
    for (std::string_view k : kNames) keys_.emplace_back(k);
  }
  void restart() { cursor_ = 0; }
  // True (and `key` set to the schema's name, `index` to its place in the list) when
  // the string at `raw` is one of them.
  bool match(const char* raw, std::string_view& key, std::size_t& index) {
    for (std::size_t n = 0, i = cursor_; n < keys_.size(); ++n, i = i + 1 == keys_.size() ? 0 : i + 1) {
      if (keys_[i].matches(raw)) {
        key = keys_[i].name();
        index = i;
        cursor_ = i + 1 == keys_.size() ? 0 : i + 1;
        return true;
      }
    }
    return false;
  }
  // The place of an (unescaped) key in the list, or kCount for a key not in it.
  [[nodiscard]] std::size_t index_of(std::string_view key) const {
    std::size_t i = 0;
    while (i < keys_.size() && keys_[i].name() != key) ++i;
    return i;
  }

 private:
  std::vector<RawName> keys_;
  std::size_t cursor_ = 0;
};

// The value of a `type` key written with escapes (e.g. "typ\u0065"), which
// find_field_unordered does not see (it compares keys as written): NO_SUCH_FIELD when
// there is none either.
error_code find_escaped_type(od::document& doc, std::string_view& type) {
  doc.rewind();
  od::object obj;
  if (auto e = doc.get_object().get(obj)) return e;
  for (auto f : obj) {
    if (auto e = f.error()) return e;
    od::field&& fld = std::move(f).value_unsafe();
    std::string_view key;
    if (auto e = fld.unescaped_key().get(key)) return e;
    if (key == s::kType) return fld.value().get_string().get(type);
  }
  return simdjson::NO_SUCH_FIELD;
}

}  // namespace

class RecordParser::Impl {
 public:
  Impl(NameTable& regions, NameTable& counters) : regions_(regions), counters_(counters) {}

  RecordKind parse(std::string_view text, std::vector<RawField>& config_fields, UpdateRecord& u,
                   std::string& unknown_type, RecordError& error);
  void set_keep_sample_indices(bool keep) { keep_sample_indices_ = keep; }
  const std::vector<RecordError>& fields_left_out() const { return left_out_; }

 private:
  bool parse_update(od::document& doc, od::object& obj, std::string_view text, UpdateRecord& u, RecordError& error);
  // Where every micro-batch of `u`'s detail lists its samples' tokens and `u` counts
  // neither token_slots nor valid_tokens, adds them from the detail (docs/log-schema.md,
  // "Per-micro-batch detail"): token slots are each micro-batch's padded length (else its
  // longest sample's tokens) times its samples, valid tokens their tokens.
  void derive_token_counters(UpdateRecord& u);

  od::parser parser_;
  NameTable& regions_;
  NameTable& counters_;
  std::optional<NameTable::Id> token_slots_id_, valid_tokens_id_;  // (interned on first use)
  NameCache device_keys_, host_keys_, calls_keys_, parent_keys_, counter_keys_, parent_values_;
  std::vector<std::int32_t> slot_of_region_;  // region id -> index in update.regions, -1 if none
  std::vector<std::uint8_t> counter_seen_;    // counter id -> 1 while reading a record's counts if read
  std::vector<std::pair<NameTable::Id, RawName>> last_parent_;  // region id -> its parent in the last record
  std::size_t shapes_used_ = 0;               // input shapes filled in the current record
  TopKeys top_keys_;
  bool keep_sample_indices_ = true;
  std::vector<RecordError> left_out_;  // the last record's fields left out (the record kept)
  std::vector<std::string> left_out_keys_;  // their keys, for the repeated-key check
};

RecordKind RecordParser::Impl::parse(std::string_view text, std::vector<RawField>& config_fields, UpdateRecord& u,
                         std::string& unknown_type, RecordError& error) {
  Ctx c(text, error);
  left_out_.clear();
  left_out_keys_.clear();
  od::document doc;
  simdjson::padded_string_view padded(text.data(), text.size(), text.size() + kParsePadding);
  reserve_or_throw(parser_, text.size());
  if (auto e = parser_.iterate(padded).get(doc)) {
    c.fail_json(e, nullptr, "");
    return RecordKind::kError;
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    const char* at = nullptr;
    at = location(doc);
    const std::string_view t = trim(text);
    if (e == simdjson::INCORRECT_TYPE)
      c.fail(Problem::kMalformedJson, at,
             t.starts_with('[') ? "expected a JSON object {...} for the record, found an array: a step log holds one "
                                  "record object per line (`jq -c '.[]' FILE` writes an array of records so)"
                                : "expected a JSON object {...} for the record");
    else if (const auto close = closing_bracket(t); e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT && close &&
                                                      *close + 1 < t.size() && t.starts_with('{') && !t.ends_with('}')) {
      // The record closes before the end of the line: text follows it.
      const std::string_view after = trim(t.substr(*close + 1));
      c.fail(Problem::kMalformedJson, after.data(),
             fmt::format("malformed JSON: the record closes at column {}, and text follows it ({})",
                         c.column(&t[*close]), shown(after.substr(0, 40))));
    } else if (e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT && t.starts_with('{') && !t.ends_with('}')) {
      // (simdjson checks the last character before it reads the object.)
      c.fail(Problem::kMalformedJson, &t.back(),
             fmt::format("malformed JSON: the record ends with {} instead of its closing '}}'",
                         t.back() > ' ' && t.back() < 0x7f ? fmt::format("'{}'", t.back())
                                                           : std::string("a byte that is not printable ASCII")));
      c.set_cause(closing_bracket(t) ? "a bracket is misplaced" : "the line was cut short");
    } else
      c.fail_json(e, at, "");
    return RecordKind::kError;
  }

  // The record type decides how the other fields are read; it is usually first.
  std::string_view type;
  error_code type_error = obj.find_field_unordered(s::kType).get_string().get(type);
  if (type_error == simdjson::NO_SUCH_FIELD) type_error = find_escaped_type(doc, type);
  if (auto e = type_error) {
    const char* at = nullptr;
    at = location(doc);
    if (e == simdjson::NO_SUCH_FIELD) {
      c.fail(Problem::kMissingField, nullptr, "record has no \"type\" field (expected \"config\" or \"update\")");
      error.no_type = true;
    }
    else if (e == simdjson::INCORRECT_TYPE)
      c.fail(Problem::kBadField, at, "\"type\" should be a string (\"config\" or \"update\")");
    else
      c.fail_json(e, at, "");
    return RecordKind::kError;
  }
  RecordKind kind = RecordKind::kUnknownType;
  if (type == s::kTypeConfig) kind = RecordKind::kConfig;
  else if (type == s::kTypeUpdate) kind = RecordKind::kUpdate;
  else if (equal_ignoring_case(type, s::kTypeConfig) || equal_ignoring_case(type, s::kTypeUpdate)) {
    // "Config", "UPDATE": a known type misspelled, not a record of a newer kind to skip.
    c.fail(Problem::kBadField, nullptr,
           fmt::format("\"type\" is \"{}\": record types are lowercase (\"config\" or \"update\")", type));
    return RecordKind::kError;
  } else
    unknown_type.assign(type);
  if (kind == RecordKind::kUnknownType) return kind;

  doc.rewind();
  if (auto e = doc.get_object().get(obj)) {
    c.fail_json(e, nullptr, "");
    return RecordKind::kError;
  }

  bool ok = true;
  bool whole_line_read = false;  // the config's fields were read from the whole line another way
  if (kind == RecordKind::kConfig) {
    config_fields.clear();
    bool type_seen = false;
    for (auto field : obj) {
      std::string_view key;
      od::value v;
      const char* at = nullptr;
      at = location(doc);
      if (auto e = field.unescaped_key().get(key)) { ok = c.fail_json(e, at, "in a key"); break; }
      if (auto e = field.value().get(v)) { ok = c.fail_json(e, at, fmt::format("at \"{}\"", key)); break; }
      if (!(ok = no_colon_after(v, c, key))) break;
      if (key == s::kType) {
        if (type_seen) {
          ok = c.fail(Problem::kBadField, at, "field \"type\" appears twice in the record");
          break;
        }
        type_seen = true;
        continue;
      }
      std::string k(key);
      std::string_view raw;
      const std::string_view tok = trim(v.raw_json_token());
      if (auto e = simdjson::to_json_string(v).get(raw)) {
        // NaN and Infinity stop simdjson here (-Infinity and nan do not): read the fields
        // another way, and make_config says which are left out, as for the others.
        if (is_non_finite_literal(tok) && config_fields_with_non_finite(text, config_fields)) {
          whole_line_read = true;
          break;
        }
        at = location(doc);
        ok = c.fail_json(e, at, fmt::format("in config field \"{}\"", k));
        break;
      }
      config_fields.push_back({std::move(k), std::string(trim(raw))});
    }
    if (ok)
      if (const auto* f = repeated_key(config_fields, [](const RawField& x) -> const auto& { return x.key; }))
        ok = c.fail(Problem::kBadField, nullptr, fmt::format("field \"{}\" appears twice in the record", f->key));
    // A config with an update's times is an update record whose "type" was changed (by hand,
    // or a writer's bug): read as a config, it would start "another run" and end this one.
    if (ok)
      for (const auto& f : config_fields)
        if (f.key == s::kWallMs || f.key == s::kCpuCallMs || f.key == s::kCudaStreamMs) {
          ok = c.fail(Problem::kBadField, nullptr,
                      fmt::format("a config record with the update field \"{}\": an update record whose \"type\" "
                                  "says \"config\"? (a config holds the run's settings only)",
                                  f.key));
          break;
        }
  } else {
    ok = parse_update(doc, obj, text, u, error);
  }
  // After the whole object, the document must be at its end (one record per line).
  if (const char* at = nullptr; ok && !whole_line_read && !doc.current_location().get(at))
    ok = c.fail(Problem::kMalformedJson, at, "unexpected text after the end of the record");
  return ok ? kind : RecordKind::kError;
}

bool RecordParser::Impl::parse_update(od::document& doc, od::object& obj, std::string_view text, UpdateRecord& u,
                          RecordError& error) {
  Ctx c(text, error);
  c.set_document(&doc);
  u.rank.reset();
  u.step = 0;
  u.wall_ms = 0;
  u.regions.clear();
  u.counters.clear();
  u.frame_histogram.clear();
  shapes_used_ = 0;  // u.input_shapes is cut to the shapes read at the end (keeping their capacity)
  u.sample_indices.clear();
  u.padding_fraction.reset();
  u.microbatches.clear();
  u.recorder_errors.clear();
  u.extra.clear();

  bool have_step = false, have_wall = false;
  auto slot = [&](NameTable::Id id) -> RegionSample& {
    if (id >= slot_of_region_.size()) slot_of_region_.resize(id + 1, -1);
    std::int32_t& sl = slot_of_region_[id];
    if (sl < 0) {
      sl = static_cast<std::int32_t>(u.regions.size());
      u.regions.push_back(RegionSample{id, {}, {}, {}, {}});
    }
    return u.regions[static_cast<std::size_t>(sl)];
  };
  auto clear_slots = [&] {
    for (const auto& r : u.regions) slot_of_region_[r.region] = -1;
  };

  // Reads one per-region map (`cuda_stream_ms`, `cpu_call_ms`, `calls`, `parents`).
  auto region_map = [&](od::value& v, std::string_view field, NameCache& cache, auto&& take) -> bool {
    od::object m;
    if (!get_object(v, c, field, m)) return false;
    cache.restart();
    for (auto f : m) {
      // (Where the parser is, for messages, is taken only when something is wrong.)
      if (auto e = f.error()) return c.fail_json(e, location(doc), fmt::format("in {}", field));
      od::field&& fld = std::move(f).value_unsafe();
      // (The key's opening quote, taken before key_id: unescaping consumes the key.)
      const char* key_at = fld.key().raw() - 1;
      NameTable::Id id = 0;
      if (auto e = key_id(cache, fld, regions_, id)) return c.fail_json(e, key_at, fmt::format("in {}", field));
      if (const auto name = regions_.name(id); name.empty() || name.size() > kMaxNameBytes)
        return c.fail(Problem::kBadField, key_at, bad_name(name, field));
      if (!take(fld.value(), slot(id), key_at)) return false;
    }
    return true;
  };

  bool ok = true;
  std::uint32_t seen = 0;  // bit i: the i-th of top_keys_ was read
  top_keys_.restart();
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.error()) { ok = c.fail_json(e, location(doc), "in a key"); break; }
    od::field&& fld = std::move(field).value_unsafe();  // (a copy of the field costs more than its key)
    const char* at = fld.key().raw() - 1;  // the key's opening quote, for messages
    // The schema's field names, matched by their raw bytes (escaped names and others
    // are unescaped and compared below as they are).
    std::size_t index = TopKeys::kCount;
    if (!top_keys_.match(fld.key().raw(), key, index)) {
      if (auto e = fld.unescaped_key().get(key)) { ok = c.fail_json(e, at, "in a key"); break; }
      index = top_keys_.index_of(key);
    }
    if (index < TopKeys::kCount) {  // (unknown fields are checked for repeats at the end)
      if (seen & (std::uint32_t{1} << index)) {
        ok = c.fail(Problem::kBadField, at, fmt::format("field \"{}\" appears twice in the record", key));
        break;
      }
      seen |= std::uint32_t{1} << index;
    }
    od::value& v = fld.value();

    if (key == s::kType) {
      if (!(ok = no_colon_after(v, c, key))) break;
      continue;
    } else if (key == s::kRank) {
      std::int64_t r = 0;
      const std::string_view tok = token_of(v);
      ok = read_int(v, tok, c, {key, {}}, r);
      if (ok && r < 0)
        ok = c.fail(Problem::kBadField, trim(tok).data(),
                    fmt::format("rank: negative rank {} (ranks are 0 to world size - 1)", r));
      u.rank = r;
    } else if (key == s::kStep) {
      const std::string_view tok = token_of(v);
      ok = read_int(v, tok, c, {key, {}}, u.step);
      // (Steps number optimizer updates from 0 or 1 up; a negative one is a corrupt value,
      // and INT64_MIN is what the dataset checks take for "no step seen".)
      if (ok && u.step < 0)
        ok = c.fail(Problem::kBadField, trim(tok).data(),
                    fmt::format("step: negative step {} (steps number optimizer updates, from 0 up)", u.step));
      have_step = true;
    } else if (key == s::kWallMs) {
      ok = read_time(v, token_of(v), c, {key, {}}, u.wall_ms);
      have_wall = true;
    } else if (key == s::kCudaStreamMs || key == s::kCpuCallMs) {
      const bool device = key == s::kCudaStreamMs;
      const std::string_view head = device ? s::kCudaStreamMs : s::kCpuCallMs;
      ok = region_map(v, key, device ? device_keys_ : host_keys_,
                      [&](od::value& fv, RegionSample& r, const char* key_at) {
                        const Path path{head, {}, &regions_, r.region};
                        auto& dst = device ? r.device_ms : r.host_ms;
                        if (dst)
                          return c.fail(Problem::kBadField, key_at,
                                        fmt::format("{}: region listed twice", str(path)));
                        double t = 0;
                        if (!read_time(fv, token_of(fv), c, path, t)) return false;
                        dst = t;
                        return true;
                      });
    } else if (key == s::kCalls) {
      ok = region_map(v, key, calls_keys_, [&](od::value& fv, RegionSample& r, const char* key_at) {
        const Path path{s::kCalls, {}, &regions_, r.region};
        if (r.calls) return c.fail(Problem::kBadField, key_at, fmt::format("{}: region listed twice", str(path)));
        std::int64_t n = 0;
        if (!read_count(fv, token_of(fv), c, path, n)) return false;
        r.calls = n;
        return true;
      });
    } else if (key == s::kParents) {
      parent_values_.restart();
      ok = region_map(v, key, parent_keys_, [&](od::value& fv, RegionSample& r, const char* key_at) {
        if (r.parent)
          return c.fail(Problem::kBadField, key_at,
                        fmt::format("parents.{}: region listed twice", regions_.name(r.region)));
        const std::string_view tok = token_of(fv);
        if (!tok.empty() && tok[0] == '"') {
          // A region name: most logs repeat the same parents, so look it up by its bytes.
          // A region's parent is nearly always the one it had in the previous record.
          if (r.region < last_parent_.size() && last_parent_[r.region].second.matches(tok.data() + 1)) {
            r.parent = last_parent_[r.region].first;
            return true;
          }
          NameTable::Id id = 0;
          if (parent_values_.lookup(tok.data() + 1, regions_, [&] { return fv.get_string(); }, id) !=
              simdjson::SUCCESS)
            return c.fail(Problem::kBadField, tok.data(),
                          fmt::format("parents.{}: expected a region name or null, found {}",
                                      regions_.name(r.region), shown(tok)));
          // (A parent is a region name: "" was taken as one, without a word.)
          if (const auto name = regions_.name(id); name.empty() || name.size() > kMaxNameBytes)
            return c.fail(Problem::kBadField, tok.data(),
                          bad_name(name, fmt::format("parents.{}", regions_.name(r.region))));
          r.parent = id;
          if (r.region >= last_parent_.size()) last_parent_.resize(r.region + 1);
          if (plain_string(tok.data() + 1)) last_parent_[r.region] = {id, RawName(regions_.name(id))};
          return true;
        }
        // (is_null() fails on a token that only starts like null: not null either.)
        if (bool null = false; fv.is_null().get(null) == simdjson::SUCCESS && null) {
          r.parent = kTopLevel;
          return true;
        }
        return c.fail(Problem::kBadField, tok.data(),
                      fmt::format("parents.{}: expected a region name or null, found {}", regions_.name(r.region),
                                  shown(tok)));
      });
    } else if (key == s::kCounts) {
      od::object m;
      if (!(ok = get_object(v, c, key, m))) break;  // (never iterate an object that is not one)
      counter_keys_.restart();
      for (auto f : m) {
        if (!ok) break;
        NameTable::Id id = 0;
        if (auto e = f.error()) { ok = c.fail_json(e, nullptr, "in counts"); break; }
        od::field&& counter = std::move(f).value_unsafe();
        // (The key's position is taken before key_id: unescaping a key consumes it, and
        // simdjson leaves key() undefined after that. A name with an escape over
        // kMaxNameBytes read it there; found by fuzz_log.)
        const char* key_at = counter.key().raw() - 1;
        if (auto e = key_id(counter_keys_, counter, counters_, id)) { ok = c.fail_json(e, key_at, "in counts"); break; }
        if (const auto name = counters_.name(id); name.empty() || name.size() > kMaxNameBytes) {
          ok = c.fail(Problem::kBadField, key_at, bad_name(name, "counts"));
          break;
        }
        if (id >= counter_seen_.size()) counter_seen_.resize(id + 1, 0);
        if (counter_seen_[id]) {
          ok = c.fail(Problem::kBadField, key_at, fmt::format("counts.{}: counter listed twice", counters_.name(id)));
          break;
        }
        counter_seen_[id] = 1;
        od::value& fv = counter.value();
        double x = 0;
        ok = read_count_value(fv, token_of(fv), c, {s::kCounts, {}, &counters_, id}, x);
        u.counters.push_back({id, x});
      }
      for (const Counter& cn : u.counters) counter_seen_[cn.name] = 0;
    } else if (key == s::kFrameHistogram) {
      od::object m;
      if (!(ok = get_object(v, c, key, m))) break;  // (never iterate an object that is not one)
      ok = each_field(m, c, key, [&](std::string_view name, od::value& fv, const char* key_at) {
        std::int64_t frames = 0, samples = 0;
        if (!parse_int_key(name, frames))
          return c.fail(Problem::kBadField, key_at,
                        fmt::format("frame_histogram: key \"{}\" should be a frame count (a non-negative integer)",
                                    shown_key(name)));
        if (!read_batch_count(fv, token_of(fv), c, {"frame_histogram", name}, "samples", samples)) return false;
        u.frame_histogram.emplace_back(frames, samples);
        return true;
      });
    } else if (key == s::kInputShapes) {
      od::object m;
      if (!(ok = get_object(v, c, key, m))) break;  // (never iterate an object that is not one)
      ok = each_field(m, c, key, [&](std::string_view name, od::value& fv, const char* key_at) {
        // Reuse the scratch record's shape vectors (their capacity) across records.
        if (shapes_used_ == u.input_shapes.size()) u.input_shapes.emplace_back();
        InputShape& shape = u.input_shapes[shapes_used_];
        if (!parse_tuple(name, shape.dims))
          return c.fail(Problem::kBadField, key_at,
                        fmt::format("input_shapes: key \"{}\" should be a shape such as \"(8, 3154)\"", shown_key(name)));
        if (!read_batch_count(fv, token_of(fv), c, {"input_shapes", name}, "micro-batches", shape.microbatches)) return false;
        ++shapes_used_;
        return true;
      });
    } else if (key == s::kSampleIndices) {
      od::array a;
      const std::string_view tok = token_of(v);
      // Indices not kept: an array the full parse would accept without a word is left
      // unread (the object's iteration skips it by its structure); any other is parsed.
      const std::string_view rest(tok.data(), static_cast<std::size_t>(text.data() + text.size() - tok.data()));
      if (!keep_sample_indices_ && plain_index_array(rest)) continue;
      if (v.get_array().get(a)) {
        ok = c.fail(Problem::kBadField, tok.data(),
                    fmt::format("sample_indices: expected an array of integers, found {}", shown(tok)));
        break;
      }
      ok = each_element(a, c, key, [&](od::value& ev) {
        std::int64_t idx = 0;
        const std::string_view etok = token_of(ev);
        const Path where{s::kSampleIndices, {}, nullptr, 0, u.sample_indices.size()};
        if (!read_int(ev, etok, c, where, idx)) return false;
        if (idx < 0)  // a dataset index: a negative one is a bug in the writer, not a sample
          return c.fail(Problem::kNegativeTime, trim(etok).data(),
                        fmt::format("{}: a sample index is a position in the dataset, found {}", str(where), idx));
        u.sample_indices.push_back(idx);
        return true;
      });
    } else if (key == s::kPaddingFraction) {
      const std::string_view tok = token_of(v);
      double p = 0;
      ok = read_number(v, tok, c, {key, {}}, p);
      if (ok && (p < 0 || p > 1))
        ok = c.fail(Problem::kBadField, trim(tok).data(),
                    fmt::format("padding_fraction: {} is outside [0, 1]", shown(tok)));
      u.padding_fraction = p;
    } else if (key == s::kMicrobatches) {
      ok = read_microbatches(v, c, regions_, u.microbatches);
    } else if (key == s::kRecorderErrors) {
      od::object m;
      if (!(ok = get_object(v, c, key, m))) break;  // (never iterate an object that is not one)
      ok = each_field(m, c, key, [&](std::string_view name, od::value& fv, const char* key_at) {
        std::int64_t n = 0;
        // (An error kind is a name, as a region's: "" printed a blank kind in the warning.)
        if (name.empty() || name.size() > kMaxNameBytes)
          return c.fail(Problem::kBadField, key_at, bad_name(name, "recorder_errors"));
        if (!read_count(fv, token_of(fv), c, {"recorder_errors", name}, n)) return false;
        u.recorder_errors.emplace_back(std::string(name), n);
        return true;
      });
    } else {
      // A field of the job's own: kept verbatim (and written back by `import`), so it must
      // be JSON. simdjson steps over a value it is not asked to read without checking it,
      // so that is done here (JsonGrammar).
      if (!(ok = no_colon_after(v, c, key))) break;
      const std::string_view tok = trim(v.raw_json_token());
      auto leave_out = [&](const char* where, std::string what) {
        // NaN or Infinity, as Python's json writes a non-finite float (a loss after a
        // divergence): the field is left out and the record kept, as in a config record.
        left_out_.push_back({Problem::kNonFinite, c.column(where),
                             fmt::format("field \"{}\" holds {}, which JSON does not allow (Python's json writes it "
                                         "for a non-finite float); the field is left out, the record kept",
                                         printable(key), what),
                             {}});
        left_out_keys_.emplace_back(key);
      };
      std::string_view raw = tok;  // a scalar is its token (simdjson stops at NaN and Infinity there)
      if (!tok.empty() && (tok[0] == '[' || tok[0] == '{')) {
        if (auto e = simdjson::to_json_string(v).get(raw)) {
          ok = c.fail_json(e, at, fmt::format("in field \"{}\"", key));
          break;
        }
        raw = trim(raw);
      }
      const auto bad = json_value_problem(raw);
      if (bad && bad->non_finite) {
        leave_out(raw.data(), raw.data() == tok.data() && bad->offset == 0 && is_non_finite_token(raw)
                                  ? shown(raw)
                                  : fmt::format("NaN or Infinity inside it ({})", shown(raw)));
        continue;
      }
      // Fields the schema names but the parser keeps verbatim (read where they are used):
      // one whose value is out of its range was silently unused (only `trace` said so, for
      // start_unix_ms), and one that is no JSON number (`tru`, `+5`) lost the record; either
      // is left out with an error, the record kept, as for the schema's other numbers.
      // (A bare token only: a string, array or object that is not JSON stays malformed.)
      const bool bare = !raw.empty() && raw[0] != '"' && raw[0] != '[' && raw[0] != '{';
      if (const auto* vf = verbatim_field(key);
          vf && ((bad && bare) || (!bad && !is_number_upto(raw, vf->max)))) {
        left_out_.push_back({Problem::kBadField, c.column(raw.data()),
                             fmt::format("{}: {} is not {}; the field is left out, the record kept", vf->key,
                                         shown(raw), vf->what),
                             {}});
        left_out_keys_.emplace_back(key);
        continue;
      }
      // A key given twice in one of its objects: a reader of the report or the imported log
      // would keep one of the two values without a word.
      if (bad && bad->repeated_key) {
        left_out_.push_back({Problem::kBadField, c.column(raw.data() + bad->offset),
                             fmt::format("field \"{}\" gives the key \"{}\" twice in one object (which value is "
                                         "meant?); the field is left out, the record kept",
                                         printable(key), printable(*bad->repeated_key)),
                             {}});
        left_out_keys_.emplace_back(key);
        continue;
      }
      if (bad) {
        ok = c.fail(Problem::kMalformedJson, raw.data() + bad->offset,
                    bad->too_deep ? fmt::format("in field \"{}\": nested more than {} levels deep", printable(key),
                                                kMaxJsonDepth)
                                  : fmt::format("in field \"{}\": {} is not a JSON value", printable(key), shown(raw)));
        break;
      }
      std::string k(key);
      u.extra.push_back({std::move(k), std::string(raw)});
    }
    if (!ok) break;
  }
  clear_slots();
  u.input_shapes.resize(shapes_used_);
  shapes_used_ = 0;
  if (!ok) return false;
  // A key given twice would leave one of its values unread: the record is rejected.
  if (const auto* f = repeated_key(u.frame_histogram, [](const auto& fh) { return fh.first; }))
    return c.fail(Problem::kBadField, nullptr, fmt::format("frame_histogram: frame count {} listed twice", f->first));
  if (const auto* sh = repeated_key(u.input_shapes, [](const InputShape& x) -> const auto& { return x.dims; }))
    return c.fail(Problem::kBadField, nullptr,
                  fmt::format("input_shapes: shape ({}) listed twice", fmt::join(sh->dims, ", ")));
  if (const auto* e = repeated_key(u.recorder_errors, [](const auto& re) -> const auto& { return re.first; }))
    return c.fail(Problem::kBadField, nullptr, fmt::format("recorder_errors: \"{}\" listed twice", e->first));
  if (const auto* f = repeated_key(u.extra, [](const RawField& x) -> const auto& { return x.key; }))
    return c.fail(Problem::kBadField, nullptr, fmt::format("field \"{}\" appears twice in the record", f->key));
  // (A field left out for its NaN counts too: "loss": 1, "loss": NaN is a key given twice.)
  for (const auto& key : left_out_keys_)
    if (std::count(left_out_keys_.begin(), left_out_keys_.end(), key) > 1 ||
        std::any_of(u.extra.begin(), u.extra.end(), [&](const RawField& x) { return x.key == key; }))
      return c.fail(Problem::kBadField, nullptr, fmt::format("field \"{}\" appears twice in the record", key));
  if (!have_step) return c.fail(Problem::kMissingField, nullptr, "update record has no \"step\" field");
  if (!have_wall) return c.fail(Problem::kMissingField, nullptr, "update record has no \"wall_ms\" field");
  derive_token_counters(u);
  return true;
}

void RecordParser::Impl::derive_token_counters(UpdateRecord& u) {
  if (u.microbatches.empty()) return;
  double slots = 0, valid = 0;
  for (const MicroBatch& mb : u.microbatches) {
    if (mb.tokens.empty()) return;  // (tokens not listed: unknown, not 0)
    std::int64_t longest = 0;
    for (const std::int64_t t : mb.tokens) {
      valid += static_cast<double>(t);
      longest = std::max(longest, t);
    }
    slots += static_cast<double>(mb.padded_length.value_or(longest)) * static_cast<double>(mb.tokens.size());
  }
  if (!(slots <= static_cast<double>(std::int64_t{1} << 53))) return;  // (not exact as a count)
  if (!token_slots_id_) {
    token_slots_id_ = counters_.intern(schema::counter::kTokenSlots);
    valid_tokens_id_ = counters_.intern(schema::counter::kValidTokens);
  }
  for (const Counter& cn : u.counters)
    if (cn.name == *token_slots_id_ || cn.name == *valid_tokens_id_) return;  // (the log's own count stands)
  u.counters.push_back({*token_slots_id_, slots});
  u.counters.push_back({*valid_tokens_id_, valid});
}

std::optional<std::string_view> schema_field_near(std::string_view key, std::string_view value_json) {
  // What each schema field holds, by the first character of its JSON value: an object
  // ('{'), an array ('['), a number ('0') or a string ('"'). A field of another kind is
  // the job's own (`wall_s`: 1.5 is near `wall_ms` and a number; `cuda_stream_id`: 3 is
  // not a map of regions).
  // (In the order of TopKeys::kNames: type, rank, step, wall_ms, cuda_stream_ms,
  // cpu_call_ms, calls, parents, counts, frame_histogram, input_shapes, sample_indices,
  // padding_fraction, recorder_errors, microbatches.)
  static constexpr std::array<char, TopKeys::kCount> kKinds = {'"', '0', '0', '0', '{', '{', '{', '{',
                                                               '{', '{', '{', '[', '0', '{', '['};
  const std::size_t first = value_json.find_first_not_of(" \t");
  if (first == std::string_view::npos) return std::nullopt;
  const char c = value_json[first];
  const char kind = c == '{' || c == '[' || c == '"' ? c : (c == '-' || (c >= '0' && c <= '9')) ? '0' : '?';
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  for (std::size_t k = 0; k < TopKeys::kCount; ++k) {
    const std::string_view name = TopKeys::kNames[k];
    if (kKinds[k] != kind || name.size() < 5) continue;  // (short names: `steps`, `ranks` are a job's own)
    if (key.size() + 2 < name.size() || name.size() + 2 < key.size()) continue;
    // Levenshtein distance, case folded (one row; the names are short).
    std::array<std::size_t, 40> row{};
    if (name.size() >= row.size()) continue;
    for (std::size_t j = 0; j <= name.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= key.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= name.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (lower(key[i - 1]) == lower(name[j - 1]) ? 0 : 1)});
        diagonal = up;
      }
    }
    if (row[name.size()] <= (name.size() >= 8 ? 2u : 1u)) return name;
  }
  return std::nullopt;
}

RecordParser::RecordParser(NameTable& regions, NameTable& counters)
    : impl_(std::make_unique<Impl>(regions, counters)) {}

RecordParser::~RecordParser() = default;

void RecordParser::set_keep_sample_indices(bool keep) { impl_->set_keep_sample_indices(keep); }

const std::vector<RecordError>& RecordParser::fields_left_out() const { return impl_->fields_left_out(); }

RecordKind RecordParser::parse(std::string_view text, std::vector<RawField>& config_fields, UpdateRecord& update,
                               std::string& unknown_type, RecordError& error) {
  return impl_->parse(text, config_fields, update, unknown_type, error);
}

}  // namespace stepprof::detail
