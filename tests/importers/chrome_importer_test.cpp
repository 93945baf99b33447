// Golden tests of the Chrome/Kineto importer on small fixtures (tests/data/importer/), one per
// format: Chrome JSON object and bare array, Kineto with GPU work, torch 1.13's legacy
// export (anchored and stitched). Every expected value was worked out by hand from the
// fixture's text (times in µs there, ns here), not taken from the importer's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "importers/chrome_json/chrome_importer.h"
#include "importers/importer.h"
#include "model/run.h"
#include "model/run_builder.h"
#include "skip_or_fail.h"

namespace grademl::importers {
namespace {

constexpr TimeNs kUs = 1000;

std::string Fixture(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/importer/" + name; }

// A run built from everything the builder handed out.
struct Imported {
  model::Run run;
  ImportResult result;
  model::PhaseId root = 0;

  const model::Phase& Named(const std::string& name) const {
    const model::Phase* found = nullptr;
    for (const auto& p : run.phases) {
      if (p.name == name) {
        EXPECT_EQ(found, nullptr) << "several phases named " << name;
        found = &p;
      }
    }
    if (found == nullptr) {
      ADD_FAILURE() << "no phase named " << name;
      static const model::Phase none;
      return none;
    }
    return *found;
  }
  std::string Tag(const model::Phase& p, const std::string& key) const {
    for (const auto& [k, v] : p.tags)
      if (k == key) return v;
    return "<none>";
  }
  std::string SourceTag(const std::string& key) const {
    for (const auto& [k, v] : run.sources.at(0).tags)
      if (k == key) return v;
    return "<none>";
  }
  int64_t Stat(const std::string& reason) const {
    int64_t n = 0;
    for (const auto& s : run.ingest_stats)
      if (s.reason == reason) n += s.count;
    return n;
  }
  const model::Series* SeriesNamed(const std::string& name) const {
    for (const auto& s : run.series)
      if (s.info.name == name) return &s;
    return nullptr;
  }
  bool HasEdge(const std::string& from, const std::string& to, const std::string& kind) const {
    model::PhaseId f = Named(from).id, t = Named(to).id;
    return std::any_of(run.edges.begin(), run.edges.end(),
                       [&](const model::Edge& e) { return e.from == f && e.to == t && e.kind == kind; });
  }
};

void Collect(model::RunDelta delta, model::Run& run) {
  std::map<model::PhaseId, size_t> at;
  for (size_t i = 0; i < run.phases.size(); ++i) at[run.phases[i].id] = i;
  for (auto& p : delta.phases) {
    auto it = at.find(p.id);
    if (it != at.end()) {
      run.phases[it->second] = p;
    } else {
      at[p.id] = run.phases.size();
      run.phases.push_back(p);
    }
  }
  for (auto& e : delta.edges) run.edges.push_back(e);
  for (auto& r : delta.resources) run.resources.push_back(r);
  for (auto& s : delta.series) run.series.push_back({s, {}});
  for (auto& rec : delta.samples) {
    for (auto& s : run.series)
      if (s.info.id == rec.series) s.samples.push_back(rec.sample);
  }
  for (auto& s : delta.sources) run.sources.push_back(s);
  for (auto& t : delta.tracks) run.tracks.push_back(t);
  for (auto& st : delta.ingest_stats) run.ingest_stats.push_back(st);
}

// Imports `file` under the root phase of a fresh run; `tweak` adjusts the target first.
Imported Import(const std::string& file, const std::function<void(ImportTarget&, model::RunBuilder&, model::PhaseId)>& tweak = {}) {
  Imported out;
  model::RunInfo info;
  info.start_ns = 1;
  model::RunBuilder builder(info);
  out.root = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  ImportTarget target;
  target.builder = &builder;
  target.under = out.root;
  if (tweak) tweak(target, builder, out.root);
  auto result = ImportTraceFile(file, target);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (result.ok()) out.result = *result;
  Collect(builder.TakeDelta(true), out.run);
  out.run.Index();
  return out;
}

TEST(ChromeImporterTest, ChromeObjectEveryEventKind) {
  const TimeNs t0 = 1'700'000'000'000'000'000;  // where the trace's first event (ts 1000 µs) is aligned
  Imported im = Import(Fixture("chrome_object.json"), [&](ImportTarget& t, auto&, auto) { t.align_start_ns = t0; });
  auto at = [&](double us) { return t0 + static_cast<TimeNs>((us - 1000) * 1000); };
  EXPECT_EQ(im.result.events, 22);
  EXPECT_EQ(im.result.format, "chrome_json");
  EXPECT_EQ(im.result.clock, "aligned");
  EXPECT_EQ(im.SourceTag("clock"), "aligned");
  EXPECT_EQ(im.SourceTag("ts_float"), "1");  // "1600.5"

  // One process (pid 10, named by metadata), spanning its slices, instants and counters (1000..1700 µs).
  const model::Phase& proc = im.Named("trainer");
  EXPECT_EQ(proc.type, "run/process");
  EXPECT_EQ(proc.parent, im.root);
  EXPECT_EQ(proc.pid, 10);
  EXPECT_EQ(proc.start_ns, at(1000));
  EXPECT_EQ(proc.end_ns, at(1700));

  // Thread 11 nests: outer > inner, outer > begun (B/E) > mark (instant).
  const model::Phase& outer = im.Named("outer");
  const model::Phase& inner = im.Named("inner");
  const model::Phase& begun = im.Named("begun");
  const model::Phase& mark = im.Named("mark");
  EXPECT_EQ(outer.parent, proc.id);
  EXPECT_EQ(outer.type, "run/process/event");
  EXPECT_EQ(outer.start_ns, at(1000));
  EXPECT_EQ(outer.end_ns, at(1500));
  EXPECT_EQ(inner.parent, outer.id);
  EXPECT_EQ(inner.start_ns, at(1100));
  EXPECT_EQ(inner.end_ns, at(1200));
  EXPECT_EQ(im.Tag(inner, "cat"), "app");
  EXPECT_EQ(im.Tag(inner, "stream"), "3");
  EXPECT_EQ(begun.parent, outer.id);
  EXPECT_EQ(begun.start_ns, at(1250));
  EXPECT_EQ(begun.end_ns, at(1300));
  EXPECT_EQ(mark.parent, begun.id);
  EXPECT_EQ(mark.type, "run/process/event/event/instant");
  EXPECT_EQ(mark.start_ns, at(1260));
  EXPECT_EQ(mark.end_ns, at(1260));

  // Thread 12: string times, exactly 1600.5 µs + 20.25 µs.
  const model::Phase& later = im.Named("later");
  EXPECT_EQ(later.parent, proc.id);
  EXPECT_EQ(later.start_ns, t0 + 600'500);
  EXPECT_EQ(later.end_ns, t0 + 620'750);

  // Process instant under the process, global instant under the import's phase; no track.
  EXPECT_EQ(im.Named("procmark").parent, proc.id);
  EXPECT_EQ(im.Named("procmark").track, 0);
  EXPECT_EQ(im.Named("globalmark").parent, im.root);
  EXPECT_EQ(im.Named("globalmark").type, "run/instant");

  // Async b/e on their own async tracks (net 0x1, net 0x2), overlapping, under the process.
  const model::Phase& req = im.Named("req");
  const model::Phase& req2 = im.Named("req2");
  EXPECT_EQ(req.parent, proc.id);
  EXPECT_EQ(req2.parent, proc.id);
  EXPECT_EQ(req.start_ns, at(1050));
  EXPECT_EQ(req.end_ns, at(1450));
  EXPECT_EQ(req2.end_ns, at(1400));
  const model::Track* rt = im.run.FindTrack(req.track);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->kind, model::TrackKind::kAsync);
  EXPECT_EQ(rt->stream, 1);
  EXPECT_EQ(rt->name, "net");
  ASSERT_NE(im.run.FindTrack(req2.track), nullptr);
  EXPECT_EQ(im.run.FindTrack(req2.track)->stream, 2);

  // Threads: 11 named "main", 12 unnamed.
  const model::Track* t11 = im.run.FindTrack(outer.track);
  ASSERT_NE(t11, nullptr);
  EXPECT_EQ(t11->kind, model::TrackKind::kThread);
  EXPECT_EQ(t11->tid, 11);
  EXPECT_EQ(t11->pid, 10);
  EXPECT_EQ(t11->name, "main");
  EXPECT_EQ(t11->source, im.result.source);
  ASSERT_NE(im.run.FindTrack(later.track), nullptr);
  EXPECT_EQ(im.run.FindTrack(later.track)->name, "thread 12");
  EXPECT_EQ(im.run.tracks.size(), 4u);

  // Phases: process + outer, inner, begun, mark, later, procmark, globalmark, req, req2.
  EXPECT_EQ(im.result.phases, 10);
  EXPECT_EQ(im.run.phases.size(), 11u);  // and the root

  // The flow s (in inner at 1120) -> f (bp e, in later at 1610).
  EXPECT_TRUE(im.HasEdge("inner", "later", "flow"));
  EXPECT_EQ(im.result.edges, 1);

  // Counters: one gauge series per arg, on the process's resource.
  const model::Series* cats = im.SeriesNamed("ctr.cats");
  ASSERT_NE(cats, nullptr);
  ASSERT_EQ(cats->samples.size(), 2u);
  EXPECT_EQ(cats->samples[0].t, at(1000));
  EXPECT_EQ(cats->samples[0].v, 1);
  EXPECT_EQ(cats->samples[1].t, at(1200));
  EXPECT_EQ(cats->samples[1].v, 5);
  ASSERT_NE(im.SeriesNamed("ctr.dogs"), nullptr);
  EXPECT_EQ(im.SeriesNamed("ctr.dogs")->samples.at(0).v, 2);
  const model::Resource* res = im.run.FindResource(cats->info.resource);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->kind, model::ResourceKind::kProcess);
  EXPECT_EQ(res->phase, proc.id);

  // Dropped, per reason.
  EXPECT_EQ(im.Stat("unsupported_ph_P"), 1);
  EXPECT_EQ(im.Stat("missing_ts"), 1);
  EXPECT_EQ(im.Stat("negative_dur"), 1);
  EXPECT_EQ(im.Stat("flow_start_without_end"), 1);  // "lonely"
  EXPECT_EQ(im.result.dropped, 4);
  EXPECT_FALSE(im.result.partial);
}

TEST(ChromeImporterTest, BareArrayWithEpochTimes) {
  Imported im = Import(Fixture("chrome_array.json"));
  const TimeNs t = 1'700'000'000'000'000'000;  // 1700000000000000 µs
  EXPECT_EQ(im.result.clock, "absolute");
  EXPECT_EQ(im.result.format, "chrome_json");
  EXPECT_EQ(im.SourceTag("ts_float"), "<none>");  // integer ts (dur 3.5 does not count)
  const model::Phase& a = im.Named("a");
  const model::Phase& b = im.Named("b");
  EXPECT_EQ(a.start_ns, t);
  EXPECT_EQ(a.end_ns, t + 10 * kUs);
  EXPECT_EQ(b.parent, a.id);
  EXPECT_EQ(b.start_ns, t + 2 * kUs);
  EXPECT_EQ(b.end_ns, t + 5'500);
  EXPECT_EQ(im.Named("pid 1").type, "run/process");
  // c: a B never ended, kept up to the trace's last time (a's end); d: an E without a B.
  EXPECT_EQ(im.Named("c").start_ns, t + 1 * kUs);
  EXPECT_EQ(im.Named("c").end_ns, t + 10 * kUs);
  EXPECT_EQ(im.Stat("begin_without_end_closed_at_trace_end"), 1);
  EXPECT_EQ(im.Stat("end_without_begin"), 1);
  EXPECT_EQ(im.result.dropped, 1);  // c was kept
}

TEST(ChromeImporterTest, KinetoGpuTrace) {
  Imported im = Import(Fixture("kineto_gpu.json"));
  const TimeNs base = 1'700'000'000'000'000'000;  // baseTimeNanoseconds, after traceEvents
  auto at = [&](int64_t us) { return base + us * kUs; };
  EXPECT_EQ(im.result.format, "kineto");
  EXPECT_EQ(im.result.clock, "absolute");
  EXPECT_EQ(im.result.events, 22);
  EXPECT_EQ(im.SourceTag("rank"), "2");
  EXPECT_EQ(im.SourceTag("world_size"), "4");
  EXPECT_EQ(im.SourceTag("backend"), "nccl");
  EXPECT_EQ(im.SourceTag("device0"), "Test GPU");
  EXPECT_EQ(im.run.sources.at(0).format, "kineto");

  // The CPU process (pid 100); the GPU's pseudo-process (pid 0) has only metadata: no phase.
  const model::Phase& proc = im.Named("python3");
  EXPECT_EQ(proc.pid, 100);
  EXPECT_EQ(proc.start_ns, at(1000));
  EXPECT_EQ(proc.end_ns, at(2000));  // ProfilerStep#7 ends last (1000 + 1000 µs)

  const model::Phase& step = im.Named("ProfilerStep#7");
  EXPECT_EQ(step.type, "run/process/iteration");
  EXPECT_EQ(step.parent, proc.id);
  const model::Phase& mm = im.Named("aten::mm");
  EXPECT_EQ(mm.type, "run/process/iteration/op");
  EXPECT_EQ(mm.parent, step.id);
  EXPECT_EQ(im.Tag(mm, "external_id"), "5");
  const model::Phase& launch = im.Named("cudaLaunchKernel");
  EXPECT_EQ(launch.type, "run/process/iteration/op/runtime");
  EXPECT_EQ(launch.parent, mm.id);
  EXPECT_EQ(im.Tag(launch, "correlation"), "42");
  EXPECT_EQ(im.Tag(launch, "cat"), "cuda_runtime");
  const model::Phase& copy_call = im.Named("cudaMemcpyAsync");
  EXPECT_EQ(copy_call.parent, step.id);  // after aten::mm ended
  const model::Phase& bwd = im.Named("autograd::engine::evaluate_function: MmBackward0");
  EXPECT_EQ(bwd.parent, proc.id);
  EXPECT_EQ(bwd.type, "run/process/op");

  // GPU work on device tracks (device 0; streams 7 and 8), under the process, overlapping.
  const model::Phase& gemm = im.Named("gemm");
  EXPECT_EQ(gemm.type, "run/process/kernel");
  EXPECT_EQ(gemm.parent, proc.id);
  EXPECT_EQ(gemm.start_ns, at(1300));
  EXPECT_EQ(gemm.end_ns, at(1700));
  EXPECT_EQ(im.Tag(gemm, "stream"), "7");
  EXPECT_EQ(im.Tag(gemm, "correlation"), "42");
  EXPECT_EQ(im.Tag(gemm, "device"), "0");
  EXPECT_EQ(im.Tag(gemm, "cat"), "kernel");
  EXPECT_EQ(im.Named("Memset (Device)").type, "run/process/memset");
  EXPECT_EQ(im.Named("Stream Sync").type, "run/process/sync");
  EXPECT_EQ(im.Named("fwd").type, "run/process/annotation");
  EXPECT_EQ(im.Named("fwd").parent, proc.id);
  EXPECT_EQ(im.Named("Memcpy DtoH").type, "run/process/memcpy");
  const model::Track* s7 = im.run.FindTrack(gemm.track);
  ASSERT_NE(s7, nullptr);
  EXPECT_EQ(s7->kind, model::TrackKind::kDevice);
  EXPECT_EQ(s7->device, 0);
  EXPECT_EQ(s7->stream, 7);
  EXPECT_EQ(s7->pid, 100);
  EXPECT_EQ(s7->name, "stream 7");
  EXPECT_EQ(im.Named("fwd").track, gemm.track);
  const model::Track* s8 = im.run.FindTrack(im.Named("Memcpy DtoH").track);
  ASSERT_NE(s8, nullptr);
  EXPECT_EQ(s8->stream, 8);
  EXPECT_EQ(s8->name, "stream 8");
  EXPECT_EQ(im.run.tracks.size(), 4u);  // threads 101, 102; streams 7, 8

  // ac2g: launch edges runtime call -> GPU work; fwdbwd: forward op -> backward op.
  EXPECT_TRUE(im.HasEdge("cudaLaunchKernel", "gemm", "launch"));
  EXPECT_TRUE(im.HasEdge("cudaMemcpyAsync", "Memcpy DtoH", "launch"));
  EXPECT_TRUE(im.HasEdge("aten::mm", "autograd::engine::evaluate_function: MmBackward0", "fwdbwd"));
  EXPECT_EQ(im.result.edges, 3);

  // [memory] instants: series, not phases.
  const model::Series* alloc = im.SeriesNamed("torch.memory.allocated[cuda:0]");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->info.unit, "bytes");
  ASSERT_EQ(alloc->samples.size(), 2u);
  EXPECT_EQ(alloc->samples[0].t, at(1150));
  EXPECT_EQ(alloc->samples[0].v, 1024);
  EXPECT_EQ(alloc->samples[1].v, 512);
  ASSERT_NE(im.SeriesNamed("torch.memory.reserved[cuda:0]"), nullptr);
  EXPECT_EQ(im.SeriesNamed("torch.memory.reserved[cuda:0]")->samples.at(0).v, 4096);

  // process + 5 CPU slices + 5 GPU slices; nothing dropped.
  EXPECT_EQ(im.result.phases, 11);
  EXPECT_EQ(im.result.dropped, 0);
  EXPECT_TRUE(im.run.ingest_stats.empty());
}

TEST(ChromeImporterTest, Torch113LegacyAnchored) {
  const TimeNs anchor = 1'750'000'000'000'000'000;
  Imported im = Import(Fixture("torch113_legacy.json"), [&](ImportTarget& t, auto&, auto) { t.anchor_ns = anchor; });
  EXPECT_EQ(im.result.format, "torch_legacy");
  EXPECT_EQ(im.result.clock, "anchored");
  const model::Phase& proc = im.Named("CPU functions");
  EXPECT_EQ(proc.type, "run/process");
  EXPECT_EQ(proc.pid, 0);  // the pid is not a number
  const model::Phase& linear = im.Named("aten::linear");
  EXPECT_EQ(linear.type, "run/process/op");
  EXPECT_EQ(linear.start_ns, anchor + 100 * kUs);
  EXPECT_EQ(linear.end_ns, anchor + 150 * kUs);
  EXPECT_EQ(im.Named("aten::t").parent, linear.id);
  // addmm (110..151) ends 1 µs after linear (100..150): torch rounds each to µs. Kept as a child.
  EXPECT_EQ(im.Named("aten::addmm").parent, linear.id);
  EXPECT_EQ(im.Named("aten::addmm").end_ns, anchor + 151 * kUs);
  EXPECT_EQ(im.Stat("slice_ends_after_parent_kept_as_child"), 1);
  EXPECT_EQ(im.result.dropped, 0);
  EXPECT_EQ(im.Named("aten::relu").parent, proc.id);
}

TEST(ChromeImporterTest, Torch113StitchedUnderRecordedProcessAndIteration) {
  const TimeNs anchor = 1'750'000'000'000'000'000;
  model::PhaseId process = 0, iteration = 0;
  Imported im = Import(Fixture("torch113_legacy.json"), [&](ImportTarget& t, model::RunBuilder& b, model::PhaseId root) {
    process = b.BeginPhase({.parent = root, .name = "python3 train.py", .type = "process", .start_ns = anchor, .host = "h", .pid = 4242});
    iteration = b.BeginPhase({.parent = process, .name = "iteration 0", .type = "iteration", .start_ns = anchor + 90 * kUs, .host = "h", .pid = 4242});
    b.EndPhase(iteration, anchor + 155 * kUs);
    t.process_phase = process;
    t.host = "h";
    t.pid = 4242;
    t.anchor_ns = anchor;
    t.iterations.push_back(*b.GetPhase(iteration));
  });
  // No process phase of its own: linear (100..150 µs) under the recorded iteration (90..155),
  // relu (160..170) outside it: under the process.
  EXPECT_EQ(std::count_if(im.run.phases.begin(), im.run.phases.end(),
                          [](const model::Phase& p) { return p.leaf_type() == "process"; }),
            1);
  const model::Phase& linear = im.Named("aten::linear");
  EXPECT_EQ(linear.parent, iteration);
  EXPECT_EQ(linear.pid, 4242);
  EXPECT_EQ(linear.host, "h");
  EXPECT_EQ(linear.type, "run/process/iteration/op");
  EXPECT_EQ(im.Named("aten::relu").parent, process);
  const model::Track* track = im.run.FindTrack(linear.track);
  ASSERT_NE(track, nullptr);
  EXPECT_EQ(track->pid, 4242);
  EXPECT_EQ(track->host, "h");
  EXPECT_EQ(track->tid, 1);
  EXPECT_EQ(im.result.phases, 4);
}

TEST(ChromeImporterTest, KinetoStitchedUnderRecordedProcess) {
  const TimeNs base = 1'700'000'000'000'000'000;
  model::PhaseId process = 0, iteration = 0;
  Imported im = Import(Fixture("kineto_gpu.json"), [&](ImportTarget& t, model::RunBuilder& b, model::PhaseId root) {
    process = b.BeginPhase({.parent = root, .name = "python3 train.py", .type = "process", .start_ns = base, .host = "h", .pid = 777});
    // A recorded iteration around ProfilerStep#7 (1000..2000 µs): 900..2100 µs.
    iteration = b.BeginPhase({.parent = process, .name = "iteration 3", .type = "iteration", .start_ns = base + 900 * kUs, .host = "h", .pid = 777});
    b.EndPhase(iteration, base + 2100 * kUs);
    t.process_phase = process;
    t.host = "h";
    t.pid = 777;
    t.iterations.push_back(*b.GetPhase(iteration));
  });
  EXPECT_EQ(im.result.clock, "absolute");  // same host, same clock: the trace's own times
  // No process phase of its own; the step under the recorded iteration, the backward op
  // (another thread, 1500..1600 µs) under it too, GPU work under the process.
  EXPECT_EQ(std::count_if(im.run.phases.begin(), im.run.phases.end(),
                          [](const model::Phase& p) { return p.leaf_type() == "process"; }),
            1);
  EXPECT_EQ(im.Named("ProfilerStep#7").parent, iteration);
  EXPECT_EQ(im.Named("ProfilerStep#7").type, "run/process/iteration/iteration");
  EXPECT_EQ(im.Named("autograd::engine::evaluate_function: MmBackward0").parent, iteration);
  const model::Phase& gemm = im.Named("gemm");
  EXPECT_EQ(gemm.parent, process);
  EXPECT_EQ(gemm.pid, 777);
  EXPECT_EQ(gemm.host, "h");
  const model::Track* track = im.run.FindTrack(gemm.track);
  ASSERT_NE(track, nullptr);
  EXPECT_EQ(track->pid, 777);
  EXPECT_EQ(track->host, "h");
  EXPECT_EQ(track->kind, model::TrackKind::kDevice);
  EXPECT_EQ(im.result.phases, 10);  // the 10 slices, no process
  EXPECT_TRUE(im.HasEdge("cudaLaunchKernel", "gemm", "launch"));
  // [memory] series on a process resource pointing at the recorded process.
  const model::Series* alloc = im.SeriesNamed("torch.memory.allocated[cuda:0]");
  ASSERT_NE(alloc, nullptr);
  ASSERT_NE(im.run.FindResource(alloc->info.resource), nullptr);
  EXPECT_EQ(im.run.FindResource(alloc->info.resource)->phase, process);
}

// chrome_hostile_text.json: one process (pid 10) whose names, categories, flow ids and args
// hold bytes that are not UTF-8 (FF, an overlong C0 AF, a cut E2 82) and lone surrogate
// escapes (\ud800, \udc00, \udfff), and a surrogate pair. Every event is imported, each bad
// byte or lone surrogate shown as U+FFFD and the rest of its name kept. Before, the first
// such byte (byte 18, in the process name) ended the import with nothing imported.
TEST(ChromeImporterTest, HostileTextKeepsEveryEventWithTheBadCharactersReplaced) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const TimeNs t0 = 1'700'000'000'000'000'000;
  Imported im = Import(Fixture("chrome_hostile_text.json"), [&](ImportTarget& t, auto&, auto) { t.align_start_ns = t0; });
  auto at = [&](int64_t us) { return t0 + (us - 1000) * kUs; };
  EXPECT_EQ(im.result.events, 11);
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.result.dropped, 0);

  // The process, named by metadata "tr\xffainer"; thread 11 named "ma\ud800in".
  const model::Phase& proc = im.Named("tr" + r + "ainer");
  EXPECT_EQ(proc.parent, im.root);
  EXPECT_EQ(proc.pid, 10);
  EXPECT_EQ(proc.start_ns, at(1000));
  EXPECT_EQ(proc.end_ns, at(1700));
  // Thread 11: "ab\xffcd" (1000+500) holds "lone\ud800high" (1100+100) and
  // "lone\udc00low\xe2\x82" (1250+50): the cut sequence's two bytes are two U+FFFD.
  const model::Phase& outer = im.Named("ab" + r + "cd");
  const model::Phase& high = im.Named("lone" + r + "high");
  const model::Phase& low = im.Named("lone" + r + "low" + r + r);
  EXPECT_EQ(outer.parent, proc.id);
  EXPECT_EQ(outer.start_ns, at(1000));
  EXPECT_EQ(outer.end_ns, at(1500));
  EXPECT_EQ(high.parent, outer.id);
  EXPECT_EQ(high.start_ns, at(1100));
  EXPECT_EQ(high.end_ns, at(1200));
  EXPECT_EQ(im.Tag(high, "cat"), "c" + r + "at");
  EXPECT_EQ(im.Tag(high, "stream"), "3");  // the args after the key "k\ud800" are read too
  EXPECT_EQ(low.parent, outer.id);
  EXPECT_EQ(low.start_ns, at(1250));
  const model::Track* t11 = im.run.FindTrack(outer.track);
  ASSERT_NE(t11, nullptr);
  EXPECT_EQ(t11->name, "ma" + r + "in");
  // Thread 12: the pair is U+1F600, not repaired.
  const model::Phase& pair = im.Named("pair\xF0\x9F\x98\x80ok");
  EXPECT_EQ(pair.parent, proc.id);
  EXPECT_EQ(pair.start_ns, at(1600));
  EXPECT_EQ(im.Named("last").start_ns, at(1650));
  // The async pair "req\xc0\xaf" (an overlong '/': two bytes) on the net 0x1 track.
  const model::Phase& req = im.Named("req" + r + r);
  EXPECT_EQ(req.start_ns, at(1050));
  EXPECT_EQ(req.end_ns, at(1450));
  // The flow s (cat "flow\xff", id "7\ud800", in lone..high at 1120) -> f (bp e, in the pair
  // slice at 1610): the same repaired key on both ends, so bound.
  EXPECT_TRUE(im.HasEdge("lone" + r + "high", "pair\xF0\x9F\x98\x80ok", "flow"));
  EXPECT_EQ(im.result.edges, 1);
  // Process, 5 slices, 1 async.
  EXPECT_EQ(im.result.phases, 7);
}

TEST(ChromeImporterTest, TruncatedFileIsPartialWithEverythingBefore) {
  std::string text;
  {
    FILE* f = std::fopen(Fixture("kineto_gpu.json").c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  // Cut in the middle of the kernel event (the 5th): the first four events stay.
  size_t cut = text.find("\"name\": \"gemm\"");
  ASSERT_NE(cut, std::string::npos);
  model::RunBuilder builder(model::RunInfo{});
  model::PhaseId root = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  ImportTarget target;
  target.builder = &builder;
  target.under = root;
  target.align_start_ns = 1'000'000'000'000'000'000;
  auto result = ImportTraceBytes(std::string_view(text).substr(0, cut), "cut.json", target);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->partial);
  EXPECT_EQ(result->events, 4);
  EXPECT_NE(result->error.message().find("cut.json"), std::string::npos) << result->error.message();
  EXPECT_NE(result->error.message().find("byte"), std::string::npos) << result->error.message();
  EXPECT_EQ(result->error.message().find('\n'), std::string::npos);
  // step, mm, launch + the process; the ac2g start without its end is counted.
  EXPECT_EQ(result->phases, 4);
  model::Run run;
  Collect(builder.TakeDelta(true), run);
  ASSERT_EQ(run.sources.size(), 1u);
  auto tags = run.sources[0].tags;
  EXPECT_NE(std::find(tags.begin(), tags.end(), std::pair<std::string, std::string>("partial", "1")), tags.end());
}

TEST(ChromeImporterTest, RandomBytesAreAOneLineError) {
  std::string junk;
  uint32_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1103515245u + 12345u;
    junk.push_back(static_cast<char>(x >> 24));
  }
  model::RunBuilder builder(model::RunInfo{});
  ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  auto result = ImportTraceBytes(junk, "junk.bin", target);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("junk.bin"), std::string::npos);
  EXPECT_EQ(result.status().message().find('\n'), std::string::npos);
  EXPECT_TRUE(builder.TakeDelta(true).sources.empty());  // nothing added
}

TEST(ChromeImporterTest, PhaseTypes) {
  using I = chrome_json::ChromeTraceImporter;
  EXPECT_EQ(I::PhaseTypeFor("user_annotation", "ProfilerStep#12", 'X'), "iteration");
  EXPECT_EQ(I::PhaseTypeFor("cpu_op", "aten::mm", 'X'), "op");
  EXPECT_EQ(I::PhaseTypeFor("operator", "x", 'X'), "op");
  EXPECT_EQ(I::PhaseTypeFor("cuda_driver", "cuLaunchKernel", 'X'), "runtime");
  EXPECT_EQ(I::PhaseTypeFor("python_function", "f", 'X'), "python");
  EXPECT_EQ(I::PhaseTypeFor("gpu_user_annotation", "f", 'X'), "annotation");
  EXPECT_EQ(I::PhaseTypeFor("whatever", "f", 'X'), "event");
  EXPECT_EQ(I::PhaseTypeFor("cpu_op", "f", 'I'), "instant");
}

}  // namespace
}  // namespace grademl::importers

// ---- Every trace in ../shared/traces/kineto, against counts made with Python's json module ----
namespace grademl::importers {
namespace {

// Expected figures, counted with Python's json module (not with this importer): events in
// traceEvents; X events with ts and dur >= 0; non-[memory] instants; processes with thread
// events or non-global instants; X events per cat (kernel, gpu_memcpy, gpu_memset,
// cuda_sync, cuda_runtime + cuda_driver); ProfilerStep#N; flows (cat, id) with both an s and
// an f; X events on a (pid, tid) that has GPU events with args.stream/device.
struct SharedExpect {
  const char* name;
  int64_t events, complete, instants, processes, kernels, memcpys, memsets, syncs, runtimes, iterations, edges,
      device_phases;
};
constexpr SharedExpect kShared[] = {
    {"alexnet_gpu", 1408, 868, 2, 2, 79, 16, 3, 41, 361, 0, 139, 139},
    {"amd_mi250_train", 220, 113, 2, 2, 14, 2, 0, 0, 21, 3, 20, 18},
    {"cpu_only_rank34", 30, 16, 2, 2, 0, 0, 0, 0, 0, 1, 0, 0},
    {"cpu_torch113_mlp_digits", 137859, 137859, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"cuda_event_sync_multi_stream", 149, 57, 2, 2, 3, 0, 3, 5, 39, 0, 8, 11},
    {"gpu_ns_resolution_rank0", 68692, 45420, 2, 2, 4350, 1600, 145, 0, 15329, 5, 7000, 6110},
    {"gpu_train_control", 109123, 74937, 2, 2, 8568, 228, 654, 0, 24692, 6, 9450, 9450},
    {"gpu_train_test", 105167, 68324, 2, 2, 9876, 4856, 900, 0, 21167, 6, 9984, 15632},
    {"nccl_distributed_rank", 40573, 26933, 2, 2, 2700, 960, 114, 0, 8740, 3, 4317, 3804},
};

class SharedKinetoTraceTest : public ::testing::TestWithParam<SharedExpect> {};

TEST_P(SharedKinetoTraceTest, CountsMatchPython) {
  const SharedExpect& x = GetParam();
  REQUIRE_SHARED_TRACES(file, "kineto/" + std::string(x.name) + ".json.gz");
  Imported im = Import(file.string(), [](ImportTarget& t, auto&, auto) { t.align_start_ns = 1'000'000'000'000'000'000; });
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.result.events, x.events);
  std::map<std::string, int64_t> leaf;
  int64_t on_device = 0;
  for (const auto& p : im.run.phases) {
    ++leaf[std::string(p.leaf_type())];
    const model::Track* t = im.run.FindTrack(p.track);
    if (t != nullptr && t->kind == model::TrackKind::kDevice) ++on_device;
  }
  EXPECT_EQ(leaf["process"], x.processes);
  EXPECT_EQ(leaf["kernel"], x.kernels);
  EXPECT_EQ(leaf["memcpy"], x.memcpys);
  EXPECT_EQ(leaf["memset"], x.memsets);
  EXPECT_EQ(leaf["sync"], x.syncs);
  EXPECT_EQ(leaf["runtime"], x.runtimes);
  EXPECT_EQ(leaf["iteration"], x.iterations);
  EXPECT_EQ(on_device, x.device_phases);
  EXPECT_EQ(im.result.phases, x.complete + x.instants + x.processes);
  EXPECT_EQ(im.result.edges, x.edges);
  EXPECT_EQ(static_cast<int64_t>(im.run.edges.size()), x.edges);

  // HTA needs cat, stream and correlation on every kernel, memcpy and memset.
  for (const auto& p : im.run.phases) {
    std::string_view l = p.leaf_type();
    if (l != "kernel" && l != "memcpy" && l != "memset") continue;
    ASSERT_NE(im.Tag(p, "cat"), "<none>") << p.name;
    ASSERT_NE(im.Tag(p, "stream"), "<none>") << p.name;
    ASSERT_NE(im.Tag(p, "correlation"), "<none>") << p.name;
  }
  // Every phase lies inside its process phase.
  for (const auto& p : im.run.phases) {
    if (p.parent == 0 || p.leaf_type() == "process") continue;
    const model::Phase* q = im.run.FindPhase(p.parent);
    while (q != nullptr && q->leaf_type() != "process") q = im.run.FindPhase(q->parent);
    if (q == nullptr) continue;  // global instants
    ASSERT_GE(p.start_ns, q->start_ns) << p.name;
    ASSERT_LE(p.end_ns, q->end_ns) << p.name;
  }
  // Kineto's traces carry epoch or baseTimeNanoseconds times; torch 1.13's are relative.
  EXPECT_EQ(im.result.clock, std::string(x.name) == "cpu_torch113_mlp_digits" ? "aligned" : "absolute");
  EXPECT_EQ(im.result.format, std::string(x.name) == "cpu_torch113_mlp_digits" ? "torch_legacy" : "kineto");
}

INSTANTIATE_TEST_SUITE_P(All, SharedKinetoTraceTest, ::testing::ValuesIn(kShared),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace grademl::importers
