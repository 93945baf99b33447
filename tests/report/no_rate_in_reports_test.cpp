// Reports only render (issue 27 item 4): no source under src/report/ reads counters itself.
// Rates, increases and which devices count come from src/analysis/derived/ (or from the
// analyses built on it); this test fails when a report source calls the raw counter
// arithmetic of analysis/series_math.h or the rule's building blocks of
// analysis/derived/counter_rate.h, or picks devices itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace grademl::report {
namespace {

TEST(NoRateInReports, ReportSourcesDrawWhatTheDerivedLayerHandsThem) {
  // What a report must not call: counter reads and differences, the rule's own functions
  // (a report asks host_rates.h for a named series instead), device classification.
  const std::vector<std::string> forbidden = {
      "CounterValuesAt", "CounterValueAt", "CounterIncrease", "SumOfCounters", "RatesOver",
      "IncreasesOver",   "IncreaseOver",   "RateStepsOf",     "CounterOf(",    "ClassifyDisk",
      "ListHostDevices", "DevicesOfHost",  "IsLoopback",      "DistinctTimes",
  };
  std::filesystem::path dir = std::filesystem::path(GRADEML_SOURCE_DIR) / "src" / "report";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string source = text.str();
    std::istringstream lines(source);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      for (const std::string& name : forbidden) {
        EXPECT_EQ(line.find(name), std::string::npos)
            << entry.path().filename().string() << ":" << n << " calls " << name
            << ": take the series from analysis/derived/host_rates.h instead";
      }
    }
  }
  EXPECT_GT(files, 5u);  // the directory really holds the reports
}

}  // namespace
}  // namespace grademl::report
