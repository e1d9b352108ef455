// Renderers: format a Report (and the input diagnostics) for people or machines.
// They compute nothing; every figure comes from the analyses.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "stepprof/analysis/report.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof {

/// Plain-text report for a terminal (the README's `stepprof report` section shows an example).
std::string render_text(const Report& report, const Diagnostics& diag);

/// The same content as GitHub-flavoured markdown tables.
std::string render_markdown(const Report& report, const Diagnostics& diag);

/// Every figure of the report as one JSON document, schema "stepprof.report/1"
/// (docs/report-json.md). Keys carry their unit as a suffix (_ms, _per_s, _fraction).
std::string render_json(const Report& report, const Diagnostics& diag);
/// The same document handed to `write` in pieces of about 1 MiB as it is made, a rank's
/// part at a time (65,536 ranks make 183 MB); false as soon as `write` returns false.
bool render_json(const Report& report, const Diagnostics& diag, const std::function<bool(std::string_view)>& write);

/// The "stepprof.report/1" document when nothing could be analyzed (no update record
/// could be read: exit status 3): `schema`, `analyzed: false` and `diagnostics` only, so
/// that a pipeline reading the JSON learns why (docs/report-json.md).
std::string render_json_unanalyzed(const Diagnostics& diag);

/// `stepprof whatif` as plain text / markdown: the cost models, each prediction with its
/// interval, savings, the regions whose work changes, assumptions and notes.
std::string render_whatif_text(const WhatIfResult& result, const Diagnostics& diag);
std::string render_whatif_markdown(const WhatIfResult& result, const Diagnostics& diag);

/// `stepprof whatif --format json`: schema "stepprof.whatif/1" (docs/whatif.md "JSON").
/// Keys carry their unit as a suffix (_ms, _fraction, _per_s), as in render_json.
std::string render_whatif_json(const WhatIfResult& result, const Diagnostics& diag);

/// The "stepprof.whatif/1" document when no update record could be read (exit status 3):
/// `schema`, `analyzed: false` and `diagnostics` only (docs/whatif.md "JSON").
std::string render_whatif_json_unanalyzed(const Diagnostics& diag);

}  // namespace stepprof
