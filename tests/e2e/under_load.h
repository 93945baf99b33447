// Test support: end-to-end tests under load (e2e/load.h) with gtest. GRADEML_TEST_LOAD=1
// (any value but "" and "0") starts OutsideLoad::Default() before the binary's first test and
// stops it after its last: under ctest, which runs each test in a process of its own, that is
// the test's whole duration. The load is checked at the end (LoadWasReal): a test "under
// load" whose load was not real fails.
#pragma once

#include <gtest/gtest.h>

#include "e2e/load.h"

namespace grademl::testing {

// Whether GRADEML_TEST_LOAD asks for the load around this binary's tests.
bool TestLoadRequested();

// The load GRADEML_TEST_LOAD started (nullptr when none runs).
const OutsideLoad* TestLoad();

// The load was real (OutsideLoad::WhyNotReal is empty); the message says what it achieved.
::testing::AssertionResult LoadWasReal(const OutsideLoad& load, double min_forks_per_second = 100);

}  // namespace grademl::testing
