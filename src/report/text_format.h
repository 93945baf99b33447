// Text building blocks shared by the reports: human units, run status words, command lines,
// terminal-safe strings and column alignment by display width (UTF-8 aware).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"
#include "core/time.h"
#include "core/units.h"
#include "model/run.h"

namespace grademl::report {

// "0 B", "512 B", "1.00 KiB", "12.3 MiB", "512 GiB" (core/units.h).
using grademl::FormatBytes;
// A fraction as a percentage: "45%", "2.1%", "0%".
std::string FormatPercent(double fraction);
// "SIGKILL", or "signal 77" for an unknown number.
std::string SignalName(int signal);

// One word (or two) for how a run ended: "ok", "exit N", "signal NAME", "incomplete",
// "failed to start". The same words in `grademl ls` and its JSON.
std::string RunStatusWord(const model::RunInfo& info);
// A run made by `grademl import` (its command is `grademl import FILE...`), not recorded.
bool IsImportedRun(const model::RunInfo& info);
// The error `grademl import` stores when a file was damaged (everything before it was kept).
inline constexpr std::string_view kImportIncomplete = "import incomplete";
bool IsPartialImport(const model::RunInfo& info);

// argv joined by spaces, quoting (POSIX shell style) the arguments that need it.
std::string JoinCommand(const std::vector<std::string>& argv);

// The string as valid UTF-8 on one line: tabs and line breaks become spaces, other control
// characters (escape sequences, C1 controls) '?', so that it cannot break the layout or
// drive the terminal.
std::string Sanitize(std::string_view text);

// The string as valid UTF-8 (core/text.h): JSON output needs this (a command line may hold any bytes).
using grademl::ValidUtf8;

// Terminal columns of a UTF-8 string (one per code point; no wide-character tables).
size_t DisplayWidth(std::string_view utf8);
// The string cut to at most `width` columns, ending in "…" when cut.
std::string TruncateToWidth(std::string_view utf8, size_t width);
// Padded with spaces to `width` columns, on the right (left-aligned) or on the left.
std::string PadRight(std::string_view utf8, size_t width);
std::string PadLeft(std::string_view utf8, size_t width);

// Text wrapped at `width` display columns; continuation lines are indented by `indent`
// spaces. A number and its duration unit ("1.63 s") stay on one line.
std::string WrapText(std::string_view text, size_t width, size_t indent);

// How the run's processes were found (its root phase's tag grademl.process_events):
// "proc_connector" (the kernel's process events: every process), "sampling" (/proc scans
// only), or "" for a run recorded before this was kept.
std::string ProcessEventsMode(const model::Run& run);
// The reports' one line when processes shorter than a pass may be missing ("" when not).
std::string ProcessEventsNotice(const model::Run& run);
// How the CPU and I/O of ended processes are known (the root phase's tag
// grademl.process_accounting): "exit_records" (the kernel's per-task exit records: exact),
// "share_out" (shared out of their parents' counters by rule), or "" for a run recorded
// before this was kept.
std::string ProcessAccountingMode(const model::Run& run);
// The reports' one line when ended processes' CPU and I/O are estimated, with the bound
// ("" when they are exact, or for an older run).
std::string ProcessAccountingNotice(const model::Run& run);
// The reports' one line on in-process events that were not recorded ("" when none were
// lost): libgrademl.so not found, events dropped (the run root's grademl.events_* tags), and
// the processes whose events stopped because the program closed grademl's descriptor.
std::string InProcessEventsNotice(const model::Run& run);
// The longest sampling interval the monitor backed off to on a many-process tree (the run
// root's grademl.interval_backed_off_to; 0 when it never did).
DurationNs IntervalBackedOffTo(const model::Run& run);

// --- imported traces (Run::sources, Run::tracks) ---

// What a track is, in words, raw (the caller escapes it for its output): "thread 4242
// (dataloader)" (a name that starts with "thread " as Kineto's do, as it is), "GPU 0
// stream 7", "async NAME".
std::string TrackLabel(const model::Track& track);

// A tag of a source ("" when absent).
std::string SourceTag(const model::Source& source, std::string_view key);

// The note the reports print for a source's clock: for clock=aligned "aligned to the process
// lifetime, not absolute"; "" for the others (absolute, anchored: exact on the run's clock).
std::string SourceClockNote(const model::Source& source);

// How many secrets the run's texts had replaced by [redacted] before they were stored (its
// ingest stat secrets_redacted, model/redactor.h).
int64_t SecretsRedacted(const model::Run& run);

// The ingest stats of one source (what was dropped and why), largest count first, then by reason.
std::vector<model::IngestStat> IngestStatsOf(const model::Run& run, model::SourceId source);

// What a source's ingest stats say, in the words `grademl import` and `report` both print:
// "dropped N: REASON COUNT, ...; kept adjusted K: REASON COUNT, ..." (dropped: severities
// data_loss and error; kept adjusted: info; model/ingest_stats.h), each group largest count
// first, at most `max_reasons` reasons named per group (then "M more reasons"), each
// sanitized and cut to 40 columns. "" when there are none.
std::string IngestStatsLine(std::vector<model::IngestStat> stats, size_t max_reasons = SIZE_MAX);

}  // namespace grademl::report
