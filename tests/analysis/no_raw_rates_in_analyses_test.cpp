// Analyses take rates and increases from the derived-metrics layer (issue 27 item 4): no
// source under src/analysis/ outside derived/ reads a counter by interpolation, differences
// its samples or divides an increase by a sampled span itself. The raw arithmetic lives in
// series_math.{h,cpp} and derived/counter_rate.cpp; everything else calls counter_rate.h
// (CounterOf, Increase, IncreaseOver, IncreasesOver, AddCumulativeIncreases, RatesOver,
// MeanRate, SumAsCounter) or host_devices.h / host_rates.h. The same idea as
// tests/report/no_rate_in_reports_test.cpp, one layer down.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace grademl::analysis {
namespace {

TEST(NoRawRatesInAnalyses, AnalysesReadCountersThroughTheDerivedLayer) {
  // The raw counter helpers of series_math.h (interpolated values, whole-series increases,
  // the sampled span an increase would be divided by) and the private helpers analyses used
  // to build before the layer existed.
  const std::vector<std::string> forbidden = {
      "CounterValuesAt", "CounterValueAt", "CounterIncrease", "SampledSpan", "CounterAt(", "PrependProcessStart",
  };
  const std::filesystem::path root = std::filesystem::path(GRADEML_SOURCE_DIR) / "src" / "analysis";
  ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::filesystem::path& path = entry.path();
    std::string ext = path.extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    std::string rel = std::filesystem::relative(path, root).generic_string();
    // The layer itself and the arithmetic it is built on.
    if (rel.rfind("derived/", 0) == 0 || rel.rfind("series_math.", 0) == 0) continue;
    ++files;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::istringstream lines(text.str());
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      for (const std::string& name : forbidden) {
        EXPECT_EQ(line.find(name), std::string::npos)
            << "src/analysis/" << rel << ":" << n << " calls " << name
            << ": take the increase or rate from analysis/derived/counter_rate.h instead";
      }
    }
  }
  EXPECT_GT(files, 20u);  // the directory really holds the analyses
}

}  // namespace
}  // namespace grademl::analysis
