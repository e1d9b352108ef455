// The HTML report's script, bundled at build time (web/build.mjs writes the definitions
// into a generated source in the build tree). Internal.
#pragma once

#include <string_view>

namespace stepprof::detail {

/// web/src/report.js with the parts of Apache ECharts it uses, minified, ASCII only,
/// free of "</script" and "<!--" (checked when it is built).
std::string_view report_script();
/// Base64 SHA-256 of report_script(), for the page's Content-Security-Policy.
std::string_view report_script_sha256();
/// Name and version of the charting library, e.g. "Apache ECharts 6.1.0".
std::string_view chart_library();

}  // namespace stepprof::detail
