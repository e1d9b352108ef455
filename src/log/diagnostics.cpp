#include "stepprof/diagnostics.hpp"

#include <fmt/format.h>

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
    case Problem::kStepsBackwards: return "steps-backwards";
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

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
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
