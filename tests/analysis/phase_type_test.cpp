#include "analysis/phase_type.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace grademl::analysis {
namespace {

// LeafIs and LeafType give what Phase::leaf_type() gives, on types that end like the leaf
// without being it ("run/subprocess"), empty elements and no slash at all.
TEST(PhaseTypeTest, LeafIsAndLeafTypeAgreeWithLeafType) {
  const std::vector<std::string> types{"process",     "run/process",   "run/step/process", "run/subprocess",
                                       "subprocess",  "",              "/",                "run/",
                                       "/process",    "process/",      "run/step",         "run/process/epoch",
                                       "a//process",  "processes",     "run/step/data_wait"};
  for (const std::string& type : types) {
    model::Phase p;
    p.type = type;
    EXPECT_EQ(LeafType(p), p.leaf_type()) << type;
    for (std::string_view leaf : {"process", "step", "data_wait", "epoch", "run"}) {
      EXPECT_EQ(LeafIs(p, leaf), p.leaf_type() == leaf) << type << " " << leaf;
    }
  }
  model::Phase p;
  p.type = "run/subprocess";
  EXPECT_FALSE(LeafIs(p, "process"));
  EXPECT_EQ(LeafType(p), "subprocess");
}

}  // namespace
}  // namespace grademl::analysis
