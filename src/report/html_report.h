// The self-contained HTML report of one run (`grademl report --html FILE`), documented in
// docs/html-report.md. Rendering only: the analyses are computed by the caller.
//
// The page is one file that works offline: the script and style of web/ (bundled by esbuild
// at build time and embedded in grademl, see report_assets.h) and the run's data as one JSON
// document in a <script type="application/json"> element. Every name from the run reaches
// the page only as JSON data and is put into the page as text, never as markup.
//
// The data is bounded, so that a run of millions of phases still gives a page a browser can
// open: the timeline keeps the phases of the shallowest levels of the tree up to
// `max_timeline_phases` (deeper ones are counted on their parent, see `collapsed`), and
// every metric is resampled onto one grid of at most `max_points` points.
//
// Phases of imported traces keep their tracks: the phases of one thread, GPU stream or async
// track under one parent form a band of rows of their own (`timeline.bands`), labelled by
// the page; the imported sources and the GPU analyses are in `run.sources` and `gpu`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/attribution.h"
#include "analysis/run_analysis.h"
#include "model/run.h"

namespace grademl::report {

inline constexpr const char* kHtmlDataSchema = "grademl.html/1";

struct HtmlReportOptions {
  size_t max_timeline_phases = 100000;  // level of detail: phases drawn on the timeline
  size_t max_points = 1200;             // points per resource plot
  size_t max_table_phases = 40;         // phases in the attribution table
  size_t max_step_charts = 12;          // steps with their own resource plot
};

// The attribution the page wants: its per-slice series on the plots' grid (max_points).
analysis::AttributionOptions HtmlAttributionOptions(const HtmlReportOptions& options = {});

// The page's data (schema grademl.html/1): run, steps, timeline, charts, attribution,
// issues and what-if rows. Every string is valid UTF-8. Deterministic for a given run.
nlohmann::json RenderHtmlReportData(const model::Run& run, const analysis::RunAnalysis& analysis,
                                    const analysis::Attribution& attribution,
                                    const HtmlReportOptions& options = {});

// The whole page: the embedded page template with its script, style and the data.
std::string RenderHtmlReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                             const analysis::Attribution& attribution, const HtmlReportOptions& options = {});

// JSON text made safe inside a <script> element: '<', '>' and '&' become \u003c, \u003e and
// \u0026 (only ever inside JSON strings, where they mean the same), so no "</script>" or
// "<!--" in a name can end the element.
std::string EscapeJsonForScript(std::string_view json_text);

// Text made safe as HTML element content or a quoted attribute value.
std::string EscapeHtml(std::string_view text);

}  // namespace grademl::report
