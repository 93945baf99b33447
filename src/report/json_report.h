// The machine-readable report of one run (`grademl report --json`), schema
// "grademl.report/1", documented field by field in docs/json-report.md. Rendering only.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/level_breakdown.h"
#include "analysis/run_analysis.h"
#include "model/run.h"
#include "report/json_stream.h"

namespace grademl::report {

inline constexpr const char* kReportSchema = "grademl.report/1";

// Writes the report to `out` as it is computed (the per-phase and per-edge parts never exist
// as a DOM): byte for byte what nlohmann's dump(2) makes of RenderJsonReport's value, with
// "level_breakdown" (LevelBreakdownJson) added when `level_breakdown` is given. Every string
// in it is valid UTF-8.
void WriteJsonReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                     const analysis::LevelBreakdown* level_breakdown, JsonStream& out);

// The report as a JSON value (WriteJsonReport's output, parsed): for tests and small runs.
nlohmann::json RenderJsonReport(const model::Run& run, const analysis::RunAnalysis& analysis);

// The "run" object of the report; also used for the entries of `grademl ls --json`.
nlohmann::json RunInfoJson(const model::RunInfo& info);

// The "gpu" object of the report (docs/gpu.md), null without imported GPU work; also in the
// HTML report's data.
nlohmann::json GpuReportJson(const analysis::GpuAnalysis& gpu);

// The "spark" object of the report (docs/json-report.md), null without imported Spark event
// logs; also in the HTML report's data.
nlohmann::json SparkReportJson(const analysis::SparkAnalysis& spark);
// The "dask" object of the report (docs/json-report.md, docs/engines.md): Dask's tasks per
// prefix and per worker; null without Dask tasks. Also in the HTML report's data.
nlohmann::json DaskReportJson(const model::Run& run, const analysis::DaskAnalysis& dask);
// The "communication" array of the report (docs/json-report.md): per rank of a distributed
// job {rank, host, pid, collectives, comm_s, overlapped_s, overlap_pct, wait_s, ...}; and the
// "communication_summary" object (jobs, stragglers, collective kinds), null without ranks.
// Both are also in the HTML report's data.
nlohmann::json CommunicationJson(const analysis::CommunicationAnalysis& communication);
nlohmann::json CommunicationSummaryJson(const analysis::CommunicationAnalysis& communication);

// The "multi_host" object of the report (docs/json-report.md, docs/multi-host.md): each host's
// part of a run across hosts, the straggler host and the causality check of the edges between
// hosts; null for a run on one host. Also in the HTML report's data.
nlohmann::json MultiHostJson(const model::Run& run, const analysis::HostsAnalysis& hosts);

// The "sources" array of the report (also in the HTML report's data): per imported trace its
// id, path, format, rank, world_size, clock, clock_note (null unless clock=aligned), tags,
// and its ingest stats: dropped (per reason, largest first, with severity), dropped_total (not
// imported: severity data_loss or error) and kept_total (imported adjusted: info).
nlohmann::json SourcesJson(const model::Run& run);

// The "tracks" array of the report: per track of the model (imported threads, GPU streams,
// async tracks) its id, kind, label, source, host, pid and tid / device and stream.
nlohmann::json TracksJson(const model::Run& run);

// The "fine_sampling" object of the report (docs/json-report.md, docs/analysis.md): fine
// phases recorded on a sample of the iterations, with exact counts and totals per type; null
// when no epoch carries the sampling tags.
nlohmann::json FineSamplingJson(const analysis::FineSampling& fine);

// The "deep_profile" object of the report (docs/json-report.md, docs/analysis.md): operators
// profiled on a sample of the iterations (`grademl run --deep`), per mode and process, with the
// profiling cost removed; null without iterations tagged deep=ops. Also in the HTML report's data.
nlohmann::json DeepProfileJson(const analysis::DeepProfile& deep);

// The "reuse" object of the report (docs/json-report.md, docs/reuse.md): the workflow steps
// restored from earlier runs and those that recomputed what one had; null without step
// executions. Also in the HTML report's data.
nlohmann::json ReuseJson(const analysis::ReuseAnalysis& reuse);

// The "level_breakdown" object of `grademl report --json --level LEVEL` (docs/json-report.md):
// level, selector (null: the whole run), phases (the selected ids), duration_s, covered_s,
// count and rows [{name, count, total_s (self time at the level), share}].
nlohmann::json LevelBreakdownJson(const analysis::LevelBreakdown& breakdown);

}  // namespace grademl::report
