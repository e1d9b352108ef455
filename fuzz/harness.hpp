// The fuzzers' harness, shared with the regression test that replays what the fuzzers
// found (tests/test_fuzz_regressions.cpp): each function feeds arbitrary bytes to one
// reader and then through everything downstream of it, and must return normally (no
// crash, no sanitizer report, no exception) whatever the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stepprof::fuzz {

/// What one run saw, for the regression test.
struct Outcome {
  std::size_t updates = 0;      ///< update records kept
  std::size_t diagnostics = 0;  ///< diagnostics reported (all severities)
  bool nonblank_input = false;  ///< the input held a non-blank line
};

/// One record's text through the record parser (with the padding it needs).
Outcome record(const std::uint8_t* data, std::size_t size);

/// A whole input through read_logs, the nesting from the log, every analysis and every
/// renderer. The first byte picks how the rest is presented: as a JSON-lines file, as
/// a markdown table (each line wrapped in `| ... |`), gzip-compressed, gzip-compressed
/// and cut short, or split at newlines into three files (merged across files); bit 3
/// asks for strict mode, bit 4 for a --steps window.
Outcome log(const std::uint8_t* data, std::size_t size);

/// A PyTorch profiler (Kineto) trace through read_logs (which reads it as a trace when
/// its first keys are a trace's, as `stepprof report` does), every analysis and every
/// renderer. The first byte picks how the rest is presented: plain (0), gzip-compressed
/// (1), gzip-compressed and cut short (2), or read with `traces_only` and a given rank
/// and world size (3, as `stepprof import kineto --rank 0 --world-size 2`).
Outcome kineto(const std::uint8_t* data, std::size_t size);

/// A --hierarchy file through parse_hierarchy and, when it parses, the report on the
/// bundled real log with that nesting.
Outcome hierarchy(const std::uint8_t* data, std::size_t size);

}  // namespace stepprof::fuzz
