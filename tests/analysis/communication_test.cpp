#include "analysis/communication.h"

#include <gtest/gtest.h>

#include "analysis/issues.h"
#include "run_fixture.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

using testing::kEps;

// Builds ranks and their phases; times in seconds.
class Job {
 public:
  explicit Job(double end_s = 10) {
    f.run.info.end_ns = Sec(end_s);
    root = f.AddPhase(0, "run", "run", 0, Sec(end_s));
    launcher = f.AddProcess(root, "python3 /usr/bin/torchrun train.py", 0, Sec(end_s), 10);
  }
  model::PhaseId Rank(int rank, int world, int32_t pid, std::string job = "", std::string host = "node1") {
    model::PhaseId p = f.AddProcess(launcher, "python3 -u train.py", 0, f.run.phases[launcher - 1].end_ns, pid);
    auto& ph = f.run.phases.back();
    ph.host = host;
    ph.tags = {{"rank", std::to_string(rank)}, {"world_size", std::to_string(world)}};
    if (!job.empty()) ph.tags.push_back({"job", job});
    return p;
  }
  model::PhaseId Phase(model::PhaseId parent, const std::string& name, const std::string& leaf, double s, double e) {
    const model::Phase& par = f.run.phases[parent - 1];
    return f.AddPhase(parent, name, par.type + "/" + leaf, Sec(s), Sec(e), par.pid, par.host);
  }
  // A collective: async "0" or "1", seq 0 for none.
  model::PhaseId Collective(model::PhaseId parent, const std::string& name, double s, double e, int seq,
                            bool async, int64_t bytes = 0, std::string group = "world", std::string channel = "",
                            int bucket = -1) {
    model::PhaseId id = Phase(parent, name, "collective", s, e);
    auto& t = f.run.phases.back().tags;
    t.push_back({"bytes", std::to_string(bytes)});
    t.push_back({"process_group", group});
    if (seq > 0) t.push_back({"seq", std::to_string(seq)});
    t.push_back({"async", async ? "1" : "0"});
    if (!channel.empty()) t.push_back({"channel", channel});
    if (bucket >= 0) t.push_back({"ddp_bucket", std::to_string(bucket)});
    return id;
  }
  const model::Run& Build() { return f.Build(); }

  RunFixture f;
  model::PhaseId root = 0, launcher = 0;
};

// Two ranks, one iteration each; expected values worked out by hand:
//  rank 0: forward [1,2] holding a synchronous broadcast (seq 1) [1.2,1.5]; backward [2,4];
//          an async all-reduce (seq 2) [3,5]; optimizer step [5,5.5].
//  rank 1: forward [1,2] holding its broadcast [1.1,1.5]; a pause; backward [3,4.5]; its
//          all-reduce [4,5]; optimizer step [5,5.5].
// seq 1: rank 0 arrives last (1.2): rank 1 waits [1.1,1.2] = 0.1 s. seq 2: rank 1 arrives last
// (4.0): rank 0 waits [3,4] = 1 s.
// rank 0: comm [1.2,1.5]+[3,5] = 2.3 s; compute [1,1.2]+[1.5,4]+[5,5.5] = 3.2 s (the broadcast
//         is a hole in forward); overlapped [3,4] = 1 s.
// rank 1: comm [1.1,1.5]+[4,5] = 1.4 s; compute [1,1.1]+[1.5,2]+[3,4.5]+[5,5.5] = 2.6 s;
//         overlapped [4,4.5] = 0.5 s.
struct TwoRanks {
  Job job;
  model::PhaseId r0 = 0, r1 = 0;
  TwoRanks() {
    r0 = job.Rank(0, 2, 11, "run-a");
    r1 = job.Rank(1, 2, 12, "run-a");
    auto f0 = job.Phase(r0, "forward", "forward", 1, 2);
    job.Collective(f0, "broadcast", 1.2, 1.5, 1, false, 400);
    job.Phase(r0, "backward", "backward", 2, 4);
    job.Collective(r0, "all_reduce", 3, 5, 2, true, 1000);
    job.Phase(r0, "optimizer.step", "optimizer_step", 5, 5.5);
    auto f1 = job.Phase(r1, "forward", "forward", 1, 2);
    job.Collective(f1, "broadcast", 1.1, 1.5, 1, false, 400);
    job.Phase(r1, "backward", "backward", 3, 4.5);
    job.Collective(r1, "all_reduce", 4, 5, 2, true, 1000);
    job.Phase(r1, "optimizer.step", "optimizer_step", 5, 5.5);
  }
};

TEST(CommunicationTest, OverlapWaitAndStragglerOfTwoRanks) {
  TwoRanks t;
  auto c = AnalyzeCommunication(t.job.Build());
  ASSERT_EQ(c.ranks.size(), 2u);
  ASSERT_EQ(c.jobs.size(), 1u);
  const RankCommunication& a = c.ranks[0];
  const RankCommunication& b = c.ranks[1];
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.process, t.r0);
  EXPECT_EQ(a.pid, 11);
  EXPECT_EQ(a.host, "node1");
  EXPECT_EQ(a.source, "events");
  EXPECT_EQ(a.collectives, 2);
  EXPECT_EQ(a.ddp_buckets, 0);
  EXPECT_EQ(a.bytes, 1400);
  EXPECT_NEAR(a.comm_s, 2.3, kEps);
  EXPECT_NEAR(a.compute_s, 3.2, kEps);
  EXPECT_NEAR(a.overlapped_s, 1.0, kEps);
  EXPECT_NEAR(a.overlap_pct, 100.0 / 2.3, 1e-6);
  EXPECT_NEAR(a.wait_s, 1.0, kEps);
  EXPECT_TRUE(a.wait_known);
  EXPECT_FALSE(a.straggler);
  EXPECT_NEAR(a.caused_wait_s, 0.1, kEps);

  EXPECT_EQ(b.rank, 1);
  EXPECT_NEAR(b.comm_s, 1.4, kEps);
  EXPECT_NEAR(b.compute_s, 2.6, kEps);
  EXPECT_NEAR(b.overlapped_s, 0.5, kEps);
  EXPECT_NEAR(b.wait_s, 0.1, kEps);
  EXPECT_TRUE(b.straggler);
  EXPECT_NEAR(b.caused_wait_s, 1.0, kEps);

  const CommunicationJob& job = c.jobs[0];
  EXPECT_EQ(job.id, "run-a");
  EXPECT_EQ(job.world_size, 2);
  EXPECT_EQ(job.ranks, 2);
  EXPECT_EQ(job.matched, 2);
  EXPECT_EQ(job.straggler_rank, 1);
  EXPECT_EQ(job.straggler_process, t.r1);
  EXPECT_NEAR(job.straggler_cost_s, 1.0, kEps);
  EXPECT_EQ(c.straggler_rank, 1);
  EXPECT_NEAR(c.straggler_cost_s, 1.0, kEps);
  EXPECT_EQ(c.world_size, 2);

  ASSERT_EQ(c.kinds.size(), 2u);
  EXPECT_EQ(c.kinds[0].name, "all_reduce");  // 3 s against 0.7 s
  EXPECT_EQ(c.kinds[0].count, 2);
  EXPECT_EQ(c.kinds[0].ddp_buckets, 0);
  EXPECT_EQ(c.kinds[0].bytes, 2000);
  EXPECT_NEAR(c.kinds[0].total_s, 3.0, kEps);
  EXPECT_NEAR(c.kinds[0].wait_s, 1.0, kEps);
  EXPECT_EQ(c.kinds[1].name, "broadcast");
  EXPECT_NEAR(c.kinds[1].total_s, 0.7, kEps);
  EXPECT_NEAR(c.kinds[1].wait_s, 0.1, kEps);
}

TEST(CommunicationTest, TheStragglerIsARankedIssue) {
  TwoRanks t;
  const model::Run& run = t.job.Build();
  auto c = AnalyzeCommunication(run);
  auto issues = CommunicationIssues(run, c, 10);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, "rank_straggler");
  EXPECT_EQ(issues[0].phase, t.r1);
  EXPECT_NEAR(issues[0].impact_s, 1.0, kEps);
  EXPECT_NEAR(issues[0].impact_fraction, 0.1, kEps);
  EXPECT_NE(issues[0].text.find("Rank 1 "), std::string::npos) << issues[0].text;
  EXPECT_NE(issues[0].text.find("waited 1.00 s"), std::string::npos) << issues[0].text;
}

TEST(CommunicationTest, WaitsOverlappingInTimeCountOnce) {
  // Two buckets in flight at once on rank 0, waiting for rank 1: [1,3] and [1.5,3.1] ->
  // 2.1 s of waiting, not 3.6 s; a wait never exceeds the time in collectives.
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "all_reduce", 1, 3.5, 1, true, 8, "world", "", 0);
  job.Collective(r0, "all_reduce", 1.5, 3.6, 2, true, 8, "world", "", 1);
  job.Collective(r1, "all_reduce", 3, 3.5, 1, true, 8, "world", "", 0);
  job.Collective(r1, "all_reduce", 3.1, 3.6, 2, true, 8, "world", "", 1);
  auto c = AnalyzeCommunication(job.Build());
  ASSERT_EQ(c.ranks.size(), 2u);
  EXPECT_NEAR(c.ranks[0].comm_s, 2.6, kEps);
  EXPECT_NEAR(c.ranks[0].wait_s, 2.1, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 0.0, kEps);
  EXPECT_NEAR(c.ranks[1].caused_wait_s, 2.1, kEps);
  EXPECT_EQ(c.jobs[0].straggler_rank, 1);
  EXPECT_NEAR(c.kinds[0].wait_s, 2.0 + 1.6, kEps);  // per collective: [1,3] and [1.5,3.1]
}

TEST(CommunicationTest, AWaitIsCappedAtTheCollectivesEnd) {
  // Rank 0's barrier [1,2] ended before rank 1 arrived at 5 (say a timeout): it waited 1 s.
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "barrier", 1, 2, 1, false);
  job.Collective(r1, "barrier", 5, 5.5, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 1.0, kEps);
  EXPECT_NEAR(c.ranks[0].comm_s, 1.0, kEps);
}

TEST(CommunicationTest, NoStragglerWhenWaitsAreEven) {
  // Each rank arrives last once, making the other wait 0.5 s: nobody stands out.
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "all_reduce", 1, 2, 1, false);
  job.Collective(r1, "all_reduce", 1.5, 2, 1, false);
  job.Collective(r0, "all_reduce", 3.5, 4, 2, false);
  job.Collective(r1, "all_reduce", 3, 4, 2, false);
  const model::Run& run = job.Build();
  auto c = AnalyzeCommunication(run);
  EXPECT_EQ(c.jobs[0].straggler_rank, -1);
  EXPECT_EQ(c.straggler_rank, -1);
  EXPECT_NEAR(c.ranks[0].wait_s, 0.5, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 0.5, kEps);
  EXPECT_TRUE(CommunicationIssues(run, c, 10).empty());
}

TEST(CommunicationTest, PointToPointMatchesByChannel) {
  // Rank 1 posts its receive from rank 0 at 0.5; rank 0 sends at 1.0: rank 1 waits 0.5 s.
  // A collective with the same seq on the group is another operation.
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "send", 1.0, 1.1, 1, false, 16, "world", "0>1");
  job.Collective(r1, "recv", 0.5, 1.2, 1, false, 16, "world", "0>1");
  job.Collective(r0, "barrier", 2, 2.5, 1, false);
  job.Collective(r1, "barrier", 2, 2.5, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[1].wait_s, 0.5, kEps);
  EXPECT_NEAR(c.ranks[0].wait_s, 0.0, kEps);
  EXPECT_EQ(c.jobs[0].matched, 2);
}

TEST(CommunicationTest, SubgroupsAreMatchedWithinTheGroup) {
  // Group "0,1" and the world have their own sequences.
  Job job;
  auto r0 = job.Rank(0, 3, 11);
  auto r1 = job.Rank(1, 3, 12);
  auto r2 = job.Rank(2, 3, 13);
  job.Collective(r0, "all_reduce", 1, 3, 1, false, 0, "0,1");
  job.Collective(r1, "all_reduce", 2, 3, 1, false, 0, "0,1");
  job.Collective(r0, "barrier", 4, 6, 1, false);
  job.Collective(r1, "barrier", 4, 6, 1, false);
  job.Collective(r2, "barrier", 5.5, 6, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  ASSERT_EQ(c.ranks.size(), 3u);
  EXPECT_NEAR(c.ranks[0].wait_s, 1.0 + 1.5, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 1.5, kEps);
  EXPECT_NEAR(c.ranks[2].wait_s, 0.0, kEps);
  // Rank 2 made the others wait 3 s in all (1.5 + 1.5), rank 1 made rank 0 wait 1 s.
  EXPECT_EQ(c.jobs[0].straggler_rank, 2);
  EXPECT_NEAR(c.jobs[0].straggler_total_s, 3.0, kEps);
  EXPECT_NEAR(c.jobs[0].straggler_cost_s, 1.5, kEps);
  EXPECT_NEAR(c.ranks[1].caused_wait_s, 0.5, kEps);
}

TEST(CommunicationTest, JobsAreKeptApart) {
  // Two jobs with the same ranks and sequence numbers at the same time: nothing is matched
  // across them. A rank repeating without a job tag starts another job.
  Job job;
  auto a0 = job.Rank(0, 2, 11, "a");
  auto a1 = job.Rank(1, 2, 12, "a");
  auto b0 = job.Rank(0, 2, 21, "b");
  auto b1 = job.Rank(1, 2, 22, "b");
  auto c0 = job.Rank(0, 2, 31);
  auto c1 = job.Rank(0, 2, 32);  // rank 0 again: a second untagged job
  job.Collective(a0, "all_reduce", 1, 2, 1, false);
  job.Collective(a1, "all_reduce", 1, 2, 1, false);
  job.Collective(b0, "all_reduce", 0.5, 2, 1, false);
  job.Collective(b1, "all_reduce", 1.5, 2, 1, false);
  job.Collective(c0, "all_reduce", 0.1, 2, 1, false);
  job.Collective(c1, "all_reduce", 1.9, 2, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  ASSERT_EQ(c.jobs.size(), 4u);
  ASSERT_EQ(c.ranks.size(), 6u);
  EXPECT_NEAR(c.ranks[0].wait_s, 0, kEps);  // job a: both arrive at 1
  EXPECT_NEAR(c.ranks[1].wait_s, 0, kEps);
  EXPECT_NEAR(c.ranks[2].wait_s, 1.0, kEps);  // job b: rank 0 waits for rank 1
  EXPECT_NEAR(c.ranks[3].wait_s, 0, kEps);
  EXPECT_NEAR(c.ranks[4].wait_s, 0, kEps);  // the untagged ranks 0 are alone in their jobs
  EXPECT_NEAR(c.ranks[5].wait_s, 0, kEps);
  EXPECT_EQ(c.jobs[0].matched, 1);
  EXPECT_EQ(c.jobs[2].matched, 0);
  EXPECT_EQ(c.jobs[3].matched, 0);
  EXPECT_EQ(c.straggler_rank, 1);  // job b's rank 1 is the costliest straggler
}

TEST(CommunicationTest, ChildProcessesAndOtherProcessesAreNotTheRanks) {
  // A DataLoader worker under rank 0 computing all along does not overlap rank 0's
  // communication; a process without a rank tag is no rank.
  Job job;
  auto r0 = job.Rank(0, 1, 11);
  job.Collective(r0, "all_reduce", 1, 2, 1, false);
  auto worker = job.f.AddProcess(r0, "python3 -u train.py", 0, Sec(10), 15);
  job.Phase(worker, "forward", "forward", 0, 10);
  auto other = job.f.AddProcess(job.launcher, "python3 other.py", 0, Sec(10), 16);
  job.Collective(other, "all_reduce", 1, 2, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  ASSERT_EQ(c.ranks.size(), 1u);
  EXPECT_EQ(c.ranks[0].collectives, 1);
  EXPECT_NEAR(c.ranks[0].overlapped_s, 0, kEps);
  EXPECT_NEAR(c.ranks[0].compute_s, 0, kEps);
}

TEST(CommunicationTest, AsynchronousCollectivesAreNoHoles) {
  // An async all-reduce recorded inside backward (its callback ran on that thread) overlaps it.
  Job job;
  auto r0 = job.Rank(0, 1, 11);
  auto bwd = job.Phase(r0, "backward", "backward", 1, 3);
  job.Collective(bwd, "all_reduce", 1.5, 2.5, 1, true);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].compute_s, 2, kEps);
  EXPECT_NEAR(c.ranks[0].overlapped_s, 1, kEps);
  EXPECT_NEAR(c.ranks[0].overlap_pct, 100, kEps);
}

TEST(CommunicationTest, DdpsBackwardWaitsForItsLastBucket) {
  // backward [1,5]; buckets [2,4.5] and [3,4.8] launched from it: after the last one's launch
  // at 3 the backward call waits for the buckets until 4.8. compute [1,3]+[4.8,5] = 2.2 s;
  // comm [2,4.8] = 2.8 s; overlapped [2,3] = 1 s. Not so for async collectives that are not
  // DDP's buckets.
  Job job;
  auto r0 = job.Rank(0, 1, 11);
  job.Phase(r0, "backward", "backward", 1, 5);
  job.Collective(r0, "all_reduce", 2, 4.5, 1, true, 8, "world", "", 0);
  job.Collective(r0, "all_reduce", 3, 4.8, 2, true, 8, "world", "", 1);
  job.Phase(r0, "backward", "backward", 6, 8);
  job.Collective(r0, "all_reduce", 7, 7.5, 3, true);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].compute_s, 2.2 + 2, kEps);
  EXPECT_NEAR(c.ranks[0].comm_s, 2.8 + 0.5, kEps);
  EXPECT_NEAR(c.ranks[0].overlapped_s, 1 + 0.5, kEps);
}

TEST(CommunicationTest, HostClockOffsetsAlignTheRanks) {
  // Rank 1's host runs 2 s behind the run's clock: its 0.5 is the run's 2.5.
  Job job;
  auto r0 = job.Rank(0, 2, 11, "", "node1");
  auto r1 = job.Rank(1, 2, 12, "", "node2");
  job.f.run.hosts = {{.name = "node1"}, {.name = "node2", .clock_offset_ns = Sec(2)}};
  job.Collective(r0, "all_reduce", 1, 3, 1, false);
  job.Collective(r1, "all_reduce", 0.5, 1, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 1.5, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 0, kEps);
}

TEST(CommunicationTest, OpenPhasesEndWithTheRun) {
  Job job(4);
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "barrier", 1, 0, 1, false);  // never ended (the rank hung there)
  job.Collective(r1, "barrier", 3, 3.5, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].comm_s, 3, kEps);
  EXPECT_NEAR(c.ranks[0].wait_s, 2, kEps);
}

TEST(CommunicationTest, ImportedTraceRanksComeFromTheGpuAnalysis) {
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  job.Collective(r0, "all_reduce", 1, 2, 1, false);
  auto traced = job.f.AddProcess(job.launcher, "python3 profiled.py", 0, Sec(10), 40);
  auto op = job.Phase(traced, "gloo:all_reduce", "user_annotation", 1, 2);
  GpuAnalysis gpu;
  gpu.cpu_overlap.push_back({.rank = 3, .phase = traced, .collectives = 10, .comm_us = 2e6, .comp_us = 4e6,
                             .overlap_us = 5e5, .comm_comp_overlap_pct = 25});
  gpu.cpu_overlap.push_back({.rank = 0, .phase = op, .collectives = 1, .comm_us = 1e6});  // rank 0: seen already
  GpuRankSummary nccl{.rank = 5, .phase = 0, .comm_us = 3e6, .comm_kernels = 7};
  gpu.ranks.push_back(nccl);
  gpu.overlap.push_back({.rank = 5, .comm_comp_overlap_pct = 50});
  auto c = AnalyzeCommunication(job.Build(), &gpu);
  ASSERT_EQ(c.ranks.size(), 3u);
  const RankCommunication& t = c.ranks[1];
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.source, "trace");
  EXPECT_EQ(t.process, traced);
  EXPECT_EQ(t.pid, 40);
  EXPECT_EQ(t.collectives, 10);
  EXPECT_NEAR(t.comm_s, 2, kEps);
  EXPECT_NEAR(t.overlapped_s, 0.5, kEps);
  EXPECT_NEAR(t.overlap_pct, 25, kEps);
  EXPECT_FALSE(t.wait_known);
  const RankCommunication& n = c.ranks[2];
  EXPECT_EQ(n.rank, 5);
  EXPECT_EQ(n.collectives, 7);
  EXPECT_NEAR(n.overlapped_s, 1.5, kEps);
  EXPECT_EQ(c.jobs.size(), 2u);
  EXPECT_EQ(c.jobs[1].id, "imported traces");
}

TEST(CommunicationTest, ARunWithoutRanksIsEmpty) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(1));
  auto p = f.AddProcess(root, "python3 x.py", 0, Sec(1), 5);
  f.AddPhase(p, "all_reduce", "run/process/collective", 0, Sec(1), 5);
  auto c = AnalyzeCommunication(f.Build());
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.straggler_rank, -1);
}

}  // namespace
}  // namespace grademl::analysis

namespace grademl::analysis {
namespace {
// A job stopped from outside while rank 0 sat in an all-reduce (seq 2) that rank 1 never
// entered: both passed a barrier (seq 1) at 1 (rank 1 last, 0.5 s after rank 0); rank 0
// called the all-reduce at 2 and was stopped at 7 (its process's end, which closed the
// phase). By hand: rank 0 waited [0.5,1] + [2,7] = 5.5 s, all of it for rank 1; rank 1 is
// the straggler, never entering 1 collective.
struct StoppedJob {
  Job job{8};
  model::PhaseId r0 = 0, r1 = 0;
  StoppedJob() {
    r0 = job.Rank(0, 2, 11, "j");
    r1 = job.Rank(1, 2, 12, "j");
    job.f.run.phases[r0 - 1].end_ns = Sec(7);
    job.f.run.phases[r1 - 1].end_ns = Sec(7.01);
    job.Collective(r0, "barrier", 0.5, 1.1, 1, false);
    job.Collective(r1, "barrier", 1, 1.1, 1, false);
    job.Collective(r0, "all_reduce", 2, 7, 2, false, 4096);
  }
};

TEST(CommunicationTest, ARankThatNeverEnteredIsTheStragglerOfAStoppedJob) {
  StoppedJob t;
  const model::Run& run = t.job.Build();
  auto c = AnalyzeCommunication(run);
  ASSERT_EQ(c.ranks.size(), 2u);
  EXPECT_NEAR(c.ranks[0].wait_s, 5.5, kEps);
  EXPECT_NEAR(c.ranks[0].comm_s, 5.6, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 0, kEps);
  EXPECT_NEAR(c.ranks[1].caused_wait_s, 5.5, kEps);
  EXPECT_TRUE(c.ranks[1].straggler);
  const CommunicationJob& job = c.jobs[0];
  EXPECT_EQ(job.straggler_rank, 1);
  EXPECT_EQ(job.straggler_process, t.r1);
  EXPECT_NEAR(job.straggler_cost_s, 5.5, kEps);
  EXPECT_EQ(job.matched, 1);
  EXPECT_EQ(job.never_joined, 1);
  EXPECT_EQ(job.straggler_never_joined, 1);
  ASSERT_EQ(c.kinds[0].name, "all_reduce");
  EXPECT_NEAR(c.kinds[0].wait_s, 5, kEps);
  auto issues = CommunicationIssues(run, c, 8);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].phase, t.r1);
  EXPECT_NE(issues[0].text.find("never entered 1 collective the others were still waiting in"), std::string::npos)
      << issues[0].text;
  EXPECT_EQ(issues[0].text.find("sooner"), std::string::npos) << issues[0].text;
}

TEST(CommunicationTest, ACollectiveLeftOpenIsPendingAtTheStopToo) {
  // Never ended at all (no process end closed it): it lasts until the run's end, 8.
  StoppedJob t;
  t.job.f.run.phases.back().end_ns = 0;
  auto c = AnalyzeCommunication(t.job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 0.5 + 6, kEps);
  EXPECT_EQ(c.jobs[0].straggler_rank, 1);
  EXPECT_EQ(c.jobs[0].never_joined, 1);
}

TEST(CommunicationTest, ACompletedCollectiveWithoutAPeersRecordIsNoWait) {
  // Rank 0's all-reduce completed at 3, long before its process ended: rank 1 took part
  // (else it could not have completed) and only its record is missing. Nothing to match.
  StoppedJob t;
  t.job.f.run.phases.back().end_ns = Sec(3);
  auto c = AnalyzeCommunication(t.job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 0.5, kEps);
  EXPECT_EQ(c.jobs[0].never_joined, 0);
  EXPECT_EQ(c.jobs[0].straggler_never_joined, 0);
}

TEST(CommunicationTest, EveryRankInsideWhenStoppedIsAnOrdinaryMatch) {
  // Both ranks were inside all-reduce 2 when stopped (rank 1 came at 5): rank 0 waited [2,5]
  // for it, not until the stop.
  StoppedJob t;
  t.job.Collective(t.r1, "all_reduce", 5, 7.01, 2, false, 4096);
  auto c = AnalyzeCommunication(t.job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 0.5 + 3, kEps);
  EXPECT_EQ(c.jobs[0].never_joined, 0);
  EXPECT_EQ(c.jobs[0].matched, 2);
}

TEST(CommunicationTest, OnlyTheRanksOfAGroupOrChannelAreAwaited) {
  // Three ranks stopped at 9. Rank 0 waits in group "0,1"'s all-reduce from 2 (rank 1 never
  // came; rank 2 is no member), rank 2 in a receive from rank 1 from 4 (never sent): rank 1
  // made them wait 7 + 5 s. A receive from any source names nobody.
  Job job(10);
  auto r0 = job.Rank(0, 3, 11);
  auto r1 = job.Rank(1, 3, 12);
  auto r2 = job.Rank(2, 3, 13);
  for (auto r : {r0, r1, r2}) job.f.run.phases[r - 1].end_ns = Sec(9);
  job.Collective(r0, "all_reduce", 2, 9, 1, false, 0, "0,1");
  job.Collective(r2, "recv", 4, 9, 1, false, 0, "world", "1>2");
  job.Collective(r1, "recv", 6, 9, 0, false, 0, "world", "?>1");
  auto c = AnalyzeCommunication(job.Build());
  ASSERT_EQ(c.ranks.size(), 3u);
  EXPECT_NEAR(c.ranks[0].wait_s, 7, kEps);
  EXPECT_NEAR(c.ranks[2].wait_s, 5, kEps);
  EXPECT_NEAR(c.ranks[1].wait_s, 0, kEps);
  EXPECT_EQ(c.jobs[0].straggler_rank, 1);
  EXPECT_NEAR(c.jobs[0].straggler_total_s, 12, kEps);
  EXPECT_NEAR(c.jobs[0].straggler_cost_s, 6, kEps);
  EXPECT_EQ(c.jobs[0].never_joined, 2);
  EXPECT_EQ(c.jobs[0].straggler_never_joined, 2);
  EXPECT_NEAR(c.ranks[2].caused_wait_s, 0, kEps);
}

TEST(CommunicationTest, TwoRanksThatNeverCameShareTheBlame) {
  // World of three, stopped at 6 with rank 0 alone in a barrier since 1: ranks 1 and 2 each
  // made it wait 5 s; neither stands out.
  Job job(10);
  auto r0 = job.Rank(0, 3, 11);
  auto r1 = job.Rank(1, 3, 12);
  auto r2 = job.Rank(2, 3, 13);
  for (auto r : {r0, r1, r2}) job.f.run.phases[r - 1].end_ns = Sec(6);
  job.Collective(r0, "barrier", 1, 6, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_NEAR(c.ranks[0].wait_s, 5, kEps);
  EXPECT_NEAR(c.ranks[1].caused_wait_s, 2.5, kEps);
  EXPECT_NEAR(c.ranks[2].caused_wait_s, 2.5, kEps);
  EXPECT_EQ(c.jobs[0].straggler_rank, -1);
  EXPECT_EQ(c.jobs[0].never_joined, 1);
}

// Ranks on two hosts, clocks measured to ±1 ms each: collective 1 is consistent; in
// collective 2 rank 1 (node2) ended 0.5 s before rank 0 (node1) entered it: impossible for an
// all-reduce, so the clocks are off by more than measured; in collective 3 the gap (1.5 ms)
// is within the 2 ms tolerance; the point-to-point send (channel) is never checked.
TEST(CommunicationTest, CollectivesThatCompleteBeforeAPeerEnteredAreClockViolations) {
  Job job;
  auto r0 = job.Rank(0, 2, 11, "", "node1");
  auto r1 = job.Rank(1, 2, 12, "", "node2");
  job.f.run.hosts = {{.name = "node1", .clock_uncertainty_ns = 1'000'000},
                     {.name = "node2", .clock_uncertainty_ns = 1'000'000}};
  job.Collective(r0, "all_reduce", 1, 2, 1, false);
  job.Collective(r1, "all_reduce", 1.5, 2, 1, false);
  job.Collective(r0, "all_reduce", 4, 4.2, 2, false);
  job.Collective(r1, "all_reduce", 3, 3.5, 2, false);    // ended 0.5 s before rank 0 entered
  job.Collective(r0, "all_reduce", 6.0015, 6.2, 3, false);
  job.Collective(r1, "all_reduce", 5.9, 6.0, 3, false);  // 1.5 ms early: within uncertainty
  job.Collective(r0, "send", 8, 8.1, 1, false, 0, "world", "0->1");
  job.Collective(r1, "recv", 9, 9.1, 1, false, 0, "world", "0->1");  // a buffered send: fine
  const model::Run& run = job.Build();
  auto c = AnalyzeCommunication(run);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].clock_violations, 1);
  EXPECT_NEAR(c.jobs[0].max_clock_violation_s, 0.5, kEps);
}

TEST(CommunicationTest, RanksOnOneHostAreNeverClockViolations) {
  Job job;
  auto r0 = job.Rank(0, 2, 11);
  auto r1 = job.Rank(1, 2, 12);
  job.Collective(r0, "all_reduce", 4, 4.2, 1, false);
  job.Collective(r1, "all_reduce", 3, 3.5, 1, false);
  auto c = AnalyzeCommunication(job.Build());
  EXPECT_EQ(c.jobs[0].clock_violations, 0);
}

}  // namespace
}  // namespace grademl::analysis
