#include "stepprof/diagnostics.hpp"

#include <fmt/format.h>

#include "../util/text.hpp"

namespace stepprof {

std::string_view code_name(Problem p) {
  switch (p) {
    case Problem::kMalformedJson: return "malformed-json";
    case Problem::kTruncatedLine: return "truncated-line";
    case Problem::kBadField: return "bad-field";
    case Problem::kMissingField: return "missing-field";
    case Problem::kNonFinite: return "non-finite";
    case Problem::kNegativeTime: return "negative-value";
    case Problem::kDuplicateStep: return "duplicate-step";
    case Problem::kMissingConfig: return "missing-config";
    case Problem::kMixedRuns: return "mixed-runs";
    case Problem::kUnknownRecord: return "unknown-record";
    case Problem::kEmptyInput: return "empty-input";
    case Problem::kUnreadable: return "unreadable";
    case Problem::kHierarchy: return "hierarchy";
    case Problem::kRecorderErrors: return "recorder-errors";
    case Problem::kBadTrace: return "bad-trace";
    case Problem::kUnattributed: return "unattributed";
    case Problem::kZeroBytes: return "zero-bytes";
    case Problem::kJoinedRecords: return "joined-records";
    case Problem::kOneOffNames: return "one-off-names";
    case Problem::kZeroWallTime: return "zero-wall-time";
    case Problem::kSeveralRanks: return "several-ranks";
    case Problem::kLinePrefix: return "line-prefix";
    case Problem::kOtherOutput: return "other-output";
    case Problem::kRegionBeyondUpdate: return "region-beyond-update";
    case Problem::kWallTimeOutlier: return "wall-time-outlier";
    case Problem::kZeroRegionTimes: return "zero-region-times";
    case Problem::kOptimizerNotEveryUpdate: return "optimizer-not-every-update";
    case Problem::kStepsBackwards: return "steps-backwards";
    case Problem::kNewerSchema: return "newer-schema";
    case Problem::kCount_: break;
  }
  return "unknown";
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::kNote: return "note";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "error";
}

std::size_t control_bytes(std::string_view text, std::size_t i) {
  using detail::utf8_length;
  const auto at = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned b0 = at(0);
  if (b0 < 0x20 || b0 == 0x7f) return i < text.size() ? 1 : 0;
  if (b0 >= 0x80 && utf8_length(text, i) == 0) {
    // A continuation byte inside a valid sequence is part of a character; any other byte
    // that starts none (a file name in Latin-1, a cut character) is a byte of its own.
    if (b0 <= 0xBF)
      for (std::size_t k = 1; k <= 3 && k <= i; ++k) {
        const auto b = static_cast<unsigned char>(text[i - k]);
        if (b >= 0x80 && b <= 0xBF) continue;
        return utf8_length(text, i - k) > k ? 0 : 1;
      }
    return 1;
  }
  if (b0 == 0xC2 && at(1) >= 0x80 && at(1) <= 0x9F) return 2;  // U+0080..U+009F
  if (b0 == 0xE2 && at(1) == 0x80 && at(2) >= 0xA8 && at(2) <= 0xAE) return 3;  // U+2028..U+202E
  if (b0 == 0xE2 && at(1) == 0x81 && at(2) >= 0xA6 && at(2) <= 0xA9) return 3;  // U+2066..U+2069
  return 0;
}

std::string printable(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = control_bytes(text, i);
    if (n == 0) {
      out += text[i++];
      continue;
    }
    for (std::size_t k = 0; k < n; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
    i += n;
  }
  return out;
}

std::string format_diagnostic(const Diagnostic& d) {
  std::string where = printable(d.file);
  if (d.line > 0) {
    where += fmt::format(":{}", d.line);
    if (d.column > 0) where += fmt::format(":{}", d.column);
  }
  return fmt::format("{}: {}: {} [{}]", where, severity_name(d.severity), printable(d.message),
                     code_name(d.problem));
}

void Diagnostics::report(Diagnostic d) {
  ++by_severity_[static_cast<int>(d.severity)];
  ++by_problem_[static_cast<int>(d.problem)];
  ++by_both_[static_cast<int>(d.problem)][static_cast<int>(d.severity)];
  if (strict_ && d.severity != Severity::kNote) stopped_ = true;
  if (by_problem_[static_cast<int>(d.problem)] <= max_kept_) kept_.push_back(std::move(d));
}

void Diagnostics::count_unkept(Severity s, Problem p, std::uint64_t n) {
  if (n == 0) return;
  by_severity_[static_cast<int>(s)] += n;
  by_problem_[static_cast<int>(p)] += n;
  by_both_[static_cast<int>(p)][static_cast<int>(s)] += n;
  if (strict_ && s != Severity::kNote) stopped_ = true;
}

std::uint64_t Diagnostics::total() const {
  return by_severity_[0] + by_severity_[1] + by_severity_[2];
}

}  // namespace stepprof
