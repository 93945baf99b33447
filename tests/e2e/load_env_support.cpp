// GRADEML_TEST_LOAD=1: the load of e2e/load.h around the tests of this binary (e2e/under_load.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "e2e/under_load.h"

namespace grademl::testing {
namespace {

OutsideLoad* g_test_load = nullptr;

class UnderLoadEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!TestLoadRequested()) return;
    load_.Start(OutsideLoad::Default());
    ASSERT_TRUE(load_.running()) << "GRADEML_TEST_LOAD: the load did not start: " << load_.error();
    g_test_load = &load_;
    std::printf("[ under load ] %d busy loop(s), %.0f short processes/s asked, process group %d\n",
                load_.options().burners, load_.options().forks_per_second, static_cast<int>(load_.group()));
  }
  void TearDown() override {
    if (!load_.running()) return;
    load_.Stop();
    std::printf("[ under load ] achieved: %s\n", load_.Describe().c_str());
    EXPECT_TRUE(LoadWasReal(load_)) << "GRADEML_TEST_LOAD: the test ran, but not under the load it claims";
  }

 private:
  OutsideLoad load_;
};

// gtest owns and deletes the environment.
[[maybe_unused]] ::testing::Environment* const g_under_load_environment =
    ::testing::AddGlobalTestEnvironment(new UnderLoadEnvironment);

}  // namespace

bool TestLoadRequested() {
  const char* v = std::getenv("GRADEML_TEST_LOAD");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

const OutsideLoad* TestLoad() { return g_test_load != nullptr && g_test_load->running() ? g_test_load : nullptr; }

::testing::AssertionResult LoadWasReal(const OutsideLoad& load, double min_forks_per_second) {
  std::string why = load.WhyNotReal(min_forks_per_second);
  if (why.empty()) return ::testing::AssertionSuccess() << "the load was real: " << load.Describe();
  return ::testing::AssertionFailure() << "the load was not real: " << why << " (" << load.Describe() << ")";
}

}  // namespace grademl::testing
