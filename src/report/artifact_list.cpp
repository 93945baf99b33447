#include "report/artifact_list.h"

#include <fmt/format.h>

#include "report/text_format.h"

namespace grademl::report {

std::string RenderArtifactList(const analysis::MaterializationPlan& plan, const std::string& dir) {
  std::string out = fmt::format("Artifact store {}\n", Sanitize(dir));
  if (plan.artifacts.empty()) return out + "No artifacts materialised (grademl run --reuse WORKFLOW keeps them).\n";
  int64_t total = 0;
  for (const auto& a : plan.artifacts) total += a.size;
  out += fmt::format("{:<12}  {:>10}  {:>10}  {:>10}  {:>4}  {:>9}  {:<4}  {}\n", "HASH", "SIZE", "UTILITY",
                     "PER MIB", "USES", "RECREATE", "KEPT", "FROM");
  for (const auto& a : plan.artifacts) {
    std::string from = a.run > 0 ? fmt::format("run {} {}: {}", a.run, Sanitize(a.step), Sanitize(a.path))
                                 : std::string("(not in the store's runs)");
    out += fmt::format("{:<12}  {:>10}  {:>10.3f}  {:>10.4f}  {:>4}  {:>8.2f}s  {:<4}  {}\n", a.hash.substr(0, 12),
                       FormatBytes(static_cast<double>(a.size)), a.utility,
                       a.utility_per_byte * 1024 * 1024, a.uses, a.recreation_s, a.kept ? "yes" : "no", from);
  }
  out += fmt::format("{} artifact(s), {}", plan.artifacts.size(), FormatBytes(static_cast<double>(total)));
  if (plan.budget_bytes >= 0) {
    out += fmt::format("; kept within the budget of {}: {}", FormatBytes(static_cast<double>(plan.budget_bytes)),
                       FormatBytes(static_cast<double>(plan.kept_bytes)));
  }
  out += '\n';
  return out;
}

nlohmann::json RenderArtifactListJson(const analysis::MaterializationPlan& plan, const std::string& dir) {
  nlohmann::json j = {{"schema", kArtifactListSchema},
                      {"dir", ValidUtf8(dir)},
                      {"budget_bytes", plan.budget_bytes},
                      {"kept_bytes", plan.kept_bytes},
                      {"artifacts", nlohmann::json::array()}};
  for (const auto& a : plan.artifacts) {
    j["artifacts"].push_back({{"hash", a.hash},
                              {"size", a.size},
                              {"recreation_s", a.recreation_s},
                              {"uses", a.uses},
                              {"distance_to_final", a.distance_to_final},
                              {"utility", a.utility},
                              {"utility_per_byte", a.utility_per_byte},
                              {"kept", a.kept},
                              {"run", a.run},
                              {"step", ValidUtf8(a.step)},
                              {"path", ValidUtf8(a.path)}});
  }
  return j;
}

}  // namespace grademl::report
