// End to end: a real 2-rank gloo DDP job started by Debian's torchrun under `grademl run`
// (Debian's /usr/bin/python3, torch 1.13). Checked against what the job did, not against
// grademl's own output: the ranks' pids and DDP's own bucket counts come from files the job
// writes; the bucket count is also fixed by the model's construction (ddp_job.py).
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

constexpr int kIterations = 6;
constexpr double kSleepS = 0.2;  // rank 1, before each backward
constexpr int kSlowRank = 1;
// With bucket_cap_mb=1 and three 1 MiB gradients: one bucket in the first iteration (before
// DDP rebuilds its buckets), three afterwards.
constexpr int kBuckets = 1 + 3 * (kIterations - 1);

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::string Tag(const json& phase, const std::string& key) {
  const json& tags = phase["tags"];
  return tags.contains(key) ? tags[key].get<std::string>() : std::string();
}

bool IsLeaf(const json& phase, const std::string& leaf) {
  std::string type = phase["type"].get<std::string>();
  return type == leaf || (type.size() > leaf.size() && type.compare(type.size() - leaf.size() - 1, std::string::npos,
                                                                    "/" + leaf) == 0);
}

TEST(DdpE2E, TorchrunJobRanksCollectivesBucketsAndTheStraggler) {
  REQUIRE_PYTHON_MODULES("torch, torch.distributed");
  if (access("/usr/bin/torchrun", X_OK) != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") FAIL() << "CI: /usr/bin/torchrun (python3-torch) is missing";
    GTEST_SKIP() << "/usr/bin/torchrun (Debian's python3-torch) is missing";
  }
  std::string dir = FreshDir("ddp_torchrun");
  std::string db = dir + "/g.db";
  // Debian's torchrun on Python 3.11 needs --redirects 2 --tee 2 (pytorch/pytorch#92319).
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/torchrun",
                                "--standalone", "--nproc_per_node", "2", "--redirects", "2", "--tee", "2",
                                std::string(GRADEML_TESTDATA_DIR) + "/ddp/ddp_job.py", dir, std::to_string(kIterations),
                                std::to_string(kSleepS), std::to_string(kSlowRank)});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;

  // What the job says of itself.
  std::map<int, int64_t> pid_of_rank;
  int64_t buckets = 0;
  for (int rank = 0; rank < 2; ++rank) {
    json j = ReadJson(dir + "/rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(j.is_object()) << "rank " << rank << " wrote no result";
    pid_of_rank[rank] = j["pid"].get<int64_t>();
    int64_t sum = 0;
    for (const json& b : j["buckets"]) sum += b.get<int64_t>();
    EXPECT_EQ(sum, kBuckets) << "DDP's reducer did not bucket as the model's construction says: " << j.dump();
    buckets = sum;
  }

  json report = ReportJson(db);
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  // Ranks tagged on the right processes.
  std::map<int, int64_t> process_of_rank;
  for (const json& p : report["phases"]) {
    if (!IsLeaf(p, "process") || Tag(p, "rank").empty()) continue;
    int rank = std::stoi(Tag(p, "rank"));
    EXPECT_FALSE(process_of_rank.count(rank)) << "two processes tagged rank " << rank;
    process_of_rank[rank] = p["id"].get<int64_t>();
    EXPECT_EQ(p["pid"].get<int64_t>(), pid_of_rank[rank]) << "rank " << rank << " tagged on another process";
    EXPECT_EQ(Tag(p, "world_size"), "2");
    EXPECT_EQ(Tag(p, "local_rank"), std::to_string(rank));
    EXPECT_EQ(Tag(p, "backend"), "gloo");
  }
  ASSERT_EQ(process_of_rank.size(), 2u);

  // Collectives per rank, from the phase tree: DDP's initial broadcast, one all-reduce per
  // bucket and iteration, the final barrier.
  auto rank_process_of = [&](const json& phase) -> int64_t {
    for (const json* p = &phase; !p->at("parent").is_null();) {
      p = by_id.at(p->at("parent").get<int64_t>());
      if (IsLeaf(*p, "process")) return p->at("id").get<int64_t>();
    }
    return 0;
  };
  for (const auto& [rank, process] : process_of_rank) {
    std::map<std::string, int> names;
    int bucket_phases = 0;
    std::set<std::string> seqs;
    for (const json& p : report["phases"]) {
      if (!IsLeaf(p, "collective") || rank_process_of(p) != process) continue;
      ++names[p["name"].get<std::string>()];
      if (!Tag(p, "ddp_bucket").empty()) {
        ++bucket_phases;
        EXPECT_EQ(p["name"], "all_reduce");
        EXPECT_EQ(Tag(p, "async"), "1");
        EXPECT_EQ(Tag(p, "process_group"), "world");
      }
      seqs.insert(Tag(p, "seq"));
      EXPECT_FALSE(p["end_ns"].is_null());
    }
    EXPECT_EQ(bucket_phases, buckets) << "rank " << rank;
    EXPECT_EQ(names["all_reduce"], buckets) << "rank " << rank;
    EXPECT_EQ(names["broadcast"], 1) << "rank " << rank;
    EXPECT_EQ(names["barrier"], 1) << "rank " << rank;
    EXPECT_EQ(seqs.size(), static_cast<size_t>(buckets + 2)) << "every collective its own sequence number";
  }

  // Per-rank communication, sane and accounting for the injected sleep.
  const json& comm = report["communication"];
  ASSERT_TRUE(comm.is_array());
  ASSERT_EQ(comm.size(), 2u) << comm.dump(1);
  std::map<int, const json*> row;
  for (const json& c : comm) row[c["rank"].get<int>()] = &c;
  ASSERT_TRUE(row.count(0) && row.count(1));
  for (int rank = 0; rank < 2; ++rank) {
    const json& c = *row[rank];
    EXPECT_EQ(c["pid"].get<int64_t>(), pid_of_rank[rank]);
    EXPECT_FALSE(c["host"].get<std::string>().empty());
    EXPECT_EQ(c["collectives"].get<int64_t>(), buckets + 2);
    EXPECT_EQ(c["ddp_buckets"].get<int64_t>(), buckets);
    double comm_s = c["comm_s"].get<double>(), overlapped = c["overlapped_s"].get<double>();
    double wait = c["wait_s"].get<double>();
    EXPECT_GT(comm_s, 0);
    EXPECT_GE(overlapped, 0);
    EXPECT_LE(overlapped, comm_s + 1e-9);
    EXPECT_GE(wait, 0);
    EXPECT_LE(wait, comm_s + 1e-9);
    EXPECT_NEAR(c["overlap_pct"].get<double>(), 100.0 * overlapped / comm_s, 0.01);
  }
  // Rank 0 waited for the sleeping rank in every iteration.
  const double injected = kSleepS * kIterations;
  EXPECT_GE(row[0]->at("wait_s").get<double>(), injected - 0.3) << comm.dump(1);
  EXPECT_LT(row[1]->at("wait_s").get<double>(), row[0]->at("wait_s").get<double>());
  EXPECT_TRUE(row[1]->at("straggler").get<bool>());
  const json& summary = report["communication_summary"];
  EXPECT_EQ(summary["straggler_rank"], kSlowRank) << summary.dump(1);
  EXPECT_GE(summary["straggler_cost_s"].get<double>(), injected - 0.3);
  EXPECT_EQ(summary["world_size"], 2);
  bool issue = false;
  for (const json& i : report["issues"]) {
    if (i["kind"] == "rank_straggler") {
      issue = true;
      EXPECT_EQ(i["phase"].get<int64_t>(), process_of_rank[kSlowRank]);
    }
  }
  EXPECT_TRUE(issue) << report["issues"].dump(1);
}

}  // namespace
}  // namespace grademl::testing
