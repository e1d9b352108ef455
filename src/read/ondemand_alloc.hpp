// simdjson's On-Demand parser when memory runs out.
//
// simdjson 3.1 (Debian 12) ondemand::parser::allocate() takes its string buffer with
// `new (std::nothrow)` and does not check it: when that allocation fails it still
// returns SUCCESS, and the first escaped string of the document is then unescaped
// through a null pointer (SIGSEGV; seen under `ulimit -v` in tests/e2e/test_cli.py's
// out-of-memory test, about 1 run in 100). The DOM parser checks its buffers.
#pragma once

#include <cstddef>

#include <simdjson.h>

namespace stepprof::detail {

/// Makes `parser` ready for a document of `bytes` bytes, as its iterate() would, but
/// throws std::bad_alloc where simdjson would go on without its string buffer. Call it
/// before parser.iterate(); a parser that already has the capacity is left alone.
/// Other allocation errors (e.g. CAPACITY, past simdjson's 4 GB limit) are left for
/// iterate() to report.
void reserve_or_throw(simdjson::ondemand::parser& parser, std::size_t bytes);

}  // namespace stepprof::detail
