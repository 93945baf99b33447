#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::model {
namespace {

// The last element of a type path, worked out here the plain way: split on every '/'.
std::string LastElement(const std::string& type) {
  std::string last;
  for (char c : type) last = c == '/' ? std::string() : last + c;
  return last;
}

// leaf_type() and leaf_is() against that, on types that end like the leaf without being it
// ("run/subprocess"), empty elements and no slash at all.
TEST(PhaseLeafTest, LeafTypeAndLeafIsAreTheLastElementOfTheType) {
  const std::vector<std::string> types{"process",     "run/process",   "run/step/process", "run/subprocess",
                                       "subprocess",  "",              "/",                "run/",
                                       "/process",    "process/",      "run/step",         "run/process/epoch",
                                       "a//process",  "processes",     "run/step/data_wait"};
  for (const std::string& type : types) {
    Phase p;
    p.type = type;
    EXPECT_EQ(p.leaf_type(), LastElement(type)) << type;
    for (std::string_view leaf : {"process", "step", "data_wait", "epoch", "run", ""}) {
      EXPECT_EQ(p.leaf_is(leaf), LastElement(type) == leaf) << type << " " << leaf;
    }
  }
}

}  // namespace
}  // namespace grademl::model
