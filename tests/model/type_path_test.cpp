// model::TypePath and model::TypePool: phase type paths interned (stored once, shared by every
// phase with the same path), read as text, outliving their pool; and the builder and the delta
// codec handing out shared paths, so that N nested phases cost N handles, not N paths.
#include "model/type_path.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/delta_codec.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::model {
namespace type_path_test {

TEST(TypePathTest, ReadsAsItsText) {
  TypePath t("run/process/op");
  EXPECT_EQ(t, "run/process/op");
  EXPECT_EQ(t.str(), std::string("run/process/op"));
  EXPECT_EQ(t.view(), std::string_view("run/process/op"));
  EXPECT_EQ(t.leaf(), "op");
  EXPECT_EQ(t.size(), 14u);
  EXPECT_TRUE(t.starts_with("run/"));
  EXPECT_EQ(t.find("process"), 4u);
  EXPECT_EQ(t.substr(0, 3), "run");
  EXPECT_EQ(t + "/kernel", "run/process/op/kernel");
  EXPECT_EQ(fmt::format("[{}]", t), "[run/process/op]");
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), "run/process/op");
  const std::string& as_string = t;
  EXPECT_EQ(as_string, "run/process/op");

  EXPECT_EQ(TypePath("run").leaf(), "run");
  EXPECT_EQ(TypePath("a//b").leaf(), "b");
  EXPECT_EQ(TypePath("run/").leaf(), "");
  TypePath empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, "");
  EXPECT_EQ(empty.leaf(), "");
  EXPECT_EQ(TypePath(""), empty);
}

TEST(TypePathTest, OrdersAndComparesByText) {
  TypePool pool;
  TypePath a = pool.Intern("run/a");
  TypePath own("run/a");  // not pooled: its own node, equal by text
  EXPECT_FALSE(a.same_node(own));
  EXPECT_EQ(a, own);
  EXPECT_LT(TypePath("run/a"), TypePath("run/b"));
  std::set<TypePath> set{TypePath("b"), TypePath("a"), pool.Intern("a")};
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(*set.begin(), "a");
}

TEST(TypePathTest, ThePoolKeepsOneNodePerPath) {
  TypePool pool;
  TypePath a = pool.Intern("run/process/op");
  TypePath b = pool.Intern(std::string("run/process/") + "op");  // another buffer, the same text
  TypePath c = pool.Intern("run/process/kernel");
  EXPECT_TRUE(a.same_node(b));
  EXPECT_FALSE(a.same_node(c));
  EXPECT_EQ(pool.size(), 2u);
  // Share: the pool's node when it has the text, else the given handle's node.
  TypePath own("run/x");
  TypePath shared = pool.Share(own);
  EXPECT_TRUE(shared.same_node(own));
  EXPECT_TRUE(pool.Share(TypePath("run/x")).same_node(own));
  EXPECT_TRUE(pool.Share(TypePath("run/process/op")).same_node(a));
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_TRUE(pool.Intern("").empty());
  EXPECT_EQ(pool.size(), 3u);
}

TEST(TypePathTest, HandlesOutliveTheirPoolAndSurviveCopiesAndMoves) {
  std::vector<TypePath> kept;
  {
    TypePool pool;
    for (int i = 0; i < 100; ++i) kept.push_back(pool.Intern("run/step/" + std::to_string(i % 3)));
  }  // the pool is gone; the nodes stay while a handle holds them
  EXPECT_EQ(kept[0], "run/step/0");
  EXPECT_EQ(kept[99], "run/step/0");
  EXPECT_TRUE(kept[0].same_node(kept[99]));
  TypePath moved = std::move(kept[1]);
  EXPECT_EQ(moved, "run/step/1");
  EXPECT_TRUE(kept[1].empty());  // NOLINT: a moved-from handle is ""
  TypePath copy = moved;
  TypePath& alias = copy;  // through a reference, as clang's -Wself-assign-overloaded allows
  copy = alias;           // self-assignment keeps it
  EXPECT_EQ(copy, "run/step/1");
  copy = TypePath("other");
  EXPECT_EQ(moved, "run/step/1");
  kept.clear();
  EXPECT_EQ(moved.leaf(), "1");
}

TEST(TypePathTest, AHandleIsSmallerThanTheStringItReplaces) {
  EXPECT_EQ(sizeof(TypePath), sizeof(void*));
  EXPECT_LT(sizeof(Phase), 200u);
}

TEST(TypePathTest, PhasesOfTheBuilderShareTheirPathsNode) {
  RunBuilder b(RunInfo{});
  PhaseId root = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1});
  PhaseId proc = b.BeginPhase({.parent = root, .name = "p", .type = "process", .start_ns = 1});
  std::vector<PhaseId> ops;
  for (int i = 0; i < 1000; ++i) {
    PhaseId op = b.AddPhase({.parent = proc, .name = "op", .type = "op", .start_ns = 2 + i}, 3 + i);
    ops.push_back(op);
    b.AddPhase({.parent = op, .name = "k", .type = "kernel", .start_ns = 2 + i}, 3 + i);
  }
  PhaseId begun = b.BeginPhase({.parent = proc, .name = "op", .type = "op", .start_ns = 5000});
  RunDelta d = b.TakeDelta(true);
  std::map<std::string, std::set<uintptr_t>> nodes;
  for (const Phase& p : d.phases) nodes[p.type.str()].insert(p.type.node_id());
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes["run/process/op"].size(), 1u);  // AddPhase's and BeginPhase's alike
  EXPECT_EQ(nodes["run/process/op/kernel"].size(), 1u);
  auto got = b.GetPhase(begun);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->type, "run/process/op");
  EXPECT_TRUE(got->leaf_is("op"));
  EXPECT_FALSE(got->leaf_is("p"));
  EXPECT_EQ(got->leaf_type(), "op");
}

TEST(TypePathTest, DeepNestingCostsEachPhaseAHandleNotItsPath) {
  // The case: N identical nested phases. Each path is longer than the last until the
  // builder's bound (kMaxTypePathBytes); past it, they are all the same shortened path, one
  // node. What the phases hold is N handles plus the distinct paths once.
  RunBuilder b(RunInfo{});
  PhaseId at = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1});
  const int depth = 16000;
  for (int i = 0; i < depth; ++i) at = b.AddPhase({.parent = at, .name = "x", .type = "x", .start_ns = 2}, 3);
  RunDelta d = b.TakeDelta(true);
  ASSERT_EQ(d.phases.size(), static_cast<size_t>(depth) + 1);
  std::set<uintptr_t> nodes;
  size_t distinct_bytes = 0, as_strings = 0;
  for (const Phase& p : d.phases) {
    if (nodes.insert(p.type.node_id()).second) distinct_bytes += p.type.size();
    as_strings += p.type.size();
  }
  // "run" + "/x" * k fits 2048 bytes up to k = 1022; the next is shortened to "run/.../x",
  // which grows again to 2048 bytes, and so on: at most about 2 * 1024 distinct paths of
  // 1 KB on average (about 4 MB), where each phase holding its own copy held about 16 MB.
  EXPECT_LE(nodes.size(), size_t{2} * 1024 + 2);
  EXPECT_LT(distinct_bytes, size_t{9} << 19);  // 4.5 MB
  EXPECT_GT(as_strings, size_t{15} << 20);
  // The delta's estimate (what the store writer and the event collector bound): handles.
  EXPECT_LT(EstimatedBytes(d), d.phases.size() * (sizeof(Phase) + 16));
}

TEST(TypePathTest, DecodedDeltasShareTheirPaths) {
  RunDelta d;
  d.phases.push_back({.id = 1, .name = "run", .type = "run", .start_ns = 1});
  for (int i = 2; i < 50; ++i) d.phases.push_back({.id = i, .parent = 1, .name = "s", .type = "run/step", .start_ns = i});
  std::string bytes = EncodeRunDelta(d);
  auto back = DecodeRunDelta(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->phases.size(), 49u);
  EXPECT_EQ(back->phases[0].type, "run");
  EXPECT_EQ(back->phases[1].type, "run/step");
  for (size_t i = 2; i < back->phases.size(); ++i) EXPECT_TRUE(back->phases[i].type.same_node(back->phases[1].type));
}

}  // namespace type_path_test
}  // namespace grademl::model
