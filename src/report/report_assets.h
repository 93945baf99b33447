// The HTML report's page (web/): the page template with its script and style inlined,
// generated at build time by web/build.mjs (esbuild) into the build tree's
// web/report_assets.cpp and linked into grademl, so the report needs no file at run time.
#pragma once

#include <string_view>

namespace grademl::report {

// The whole page, with one kReportTitleMarker and one kReportDataMarker to replace.
extern const std::string_view kReportPageTemplate;

inline constexpr std::string_view kReportTitleMarker = "<!--GRADEML_TITLE-->";
// Inside <script type="application/json" id="grademl-data">: the data, escaped for a script
// element (EscapeJsonForScript).
inline constexpr std::string_view kReportDataMarker = "<!--GRADEML_DATA-->";

}  // namespace grademl::report
