#include "report/run_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "report/json_report.h"
#include "report/text_format.h"

namespace grademl::report {

std::string RenderRunList(const std::vector<model::RunInfo>& runs, const RunListOptions& options) {
  if (runs.empty()) return "No runs recorded.\n";
  using Cells = std::array<std::string, 6>;
  std::vector<Cells> rows{{"ID", "STARTED", "DURATION", "STATUS", "OWNER", "COMMAND"}};
  for (const model::RunInfo& info : runs) {
    std::string command = Sanitize(JoinCommand(info.command));
    if (options.max_command_width > 0) command = TruncateToWidth(command, options.max_command_width);
    bool ended = info.end_ns != 0 && info.end_ns >= info.start_ns;
    std::string duration = ended ? FormatDuration(info.end_ns - info.start_ns) : "-";
    rows.push_back({std::to_string(info.id), info.start_ns != 0 ? FormatTimestamp(info.start_ns) : "-", duration,
                    RunStatusWord(info), info.owner.empty() ? "-" : Sanitize(info.owner), command});
  }
  std::array<size_t, 6> widths{};
  for (const Cells& row : rows) {
    for (size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Cells& row = rows[r];
    std::string status = PadRight(row[3], widths[3]);
    if (options.color && r > 0) {
      std::string_view color = row[3] == "ok" ? "\033[32m" : row[3] == "incomplete" ? "\033[33m" : "\033[31m";
      status = fmt::format("{}{}\033[0m", color, status);
    }
    std::string line = PadLeft(row[0], widths[0]) + "  " + PadRight(row[1], widths[1]) + "  " +
                       PadLeft(row[2], widths[2]) + "  " + status + "  " + PadRight(row[4], widths[4]) + "  " +
                       row[5];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

nlohmann::json RenderRunListJson(const std::vector<model::RunInfo>& runs) {
  nlohmann::json list = nlohmann::json::array();
  for (const model::RunInfo& info : runs) {
    nlohmann::json entry = RunInfoJson(info);
    entry["duration_s"] = info.end_ns != 0 && info.end_ns >= info.start_ns
                              ? nlohmann::json(NsToSeconds(info.end_ns - info.start_ns))
                              : nlohmann::json(nullptr);
    list.push_back(entry);
  }
  return {{"schema", kRunListSchema}, {"runs", list}};
}

}  // namespace grademl::report
