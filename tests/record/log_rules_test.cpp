#include "record/log_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <pthread.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace grademl::record {
namespace {

std::string DataPath(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/log_rules/" + name; }

std::string ReadData(const std::string& name) {
  std::ifstream in(DataPath(name), std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// "name [type] start..end {k=v,...}" for readable comparisons.
std::string Describe(const model::Phase& p) {
  std::string tags;
  for (const auto& [k, v] : p.tags) tags += fmt::format("{}{}={}", tags.empty() ? "" : ",", k, v);
  return fmt::format("{} [{}] {}..{} {{{}}}", p.name, p.type, p.start_ns, p.end_ns, tags);
}

// A run with one step phase; a tracker follows the step's output.
class LogPhaseTrackerTest : public ::testing::Test {
 protected:
  explicit LogPhaseTrackerTest(LogRuleSet rules = LogRuleSet::BuiltIn()) : rules_(std::move(rules)) {
    run_ = builder_.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 100});
    step_ = builder_.BeginPhase({.parent = run_, .name = "train", .type = "step", .start_ns = 500});
    (void)builder_.TakeDelta();
  }

  LogPhaseTracker& tracker() {
    if (!tracker_) tracker_ = std::make_unique<LogPhaseTracker>(&rules_, &builder_, step_, "node1", 4242);
    return *tracker_;
  }
  void UseRules(LogRuleSet rules) {
    rules_ = std::move(rules);
    tracker_.reset();
  }

  // Every phase the tracker opened or changed, in order of creation.
  std::vector<std::string> Phases() {
    std::vector<std::string> out;
    for (const model::Phase& p : builder_.TakeDelta(true).phases) {
      EXPECT_EQ(p.parent, step_) << p.name;
      EXPECT_EQ(p.host, "node1") << p.name;
      EXPECT_EQ(p.pid, 4242) << p.name;
      out.push_back(Describe(p));
    }
    return out;
  }

  // Feeds a text as a reader that hands over each \n- or \r-terminated chunk as it comes:
  // the i-th non-empty chunk is seen at 1000 * (i + 1).
  void FeedChunks(std::string_view text) {
    TimeNs t = 0;
    while (!text.empty()) {
      size_t cut = text.find_first_of("\r\n");
      std::string_view chunk = text.substr(0, cut);
      if (!chunk.empty()) tracker().OnLine(t += 1000, chunk);
      if (cut == std::string_view::npos) break;
      text.remove_prefix(cut + 1);
    }
  }

  LogRuleSet rules_;
  model::RunBuilder builder_{model::RunInfo{}};
  model::PhaseId run_ = 0;
  model::PhaseId step_ = 0;
  std::unique_ptr<LogPhaseTracker> tracker_;
};

TEST_F(LogPhaseTrackerTest, KerasEpochsEachEndWhereTheNextBegins) {
  tracker().OnLine(1000, "Epoch 1/3");
  tracker().OnLine(1500, "10/10 [==============================] - 1s 12ms/step - loss: 0.6931");
  tracker().OnLine(2000, "Epoch 2/3");
  tracker().OnLine(3000, "Epoch 3/3");
  tracker().Finish(4000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 1 [run/step/epoch] 1000..2000 {epoch=1,epochs=3}",
                          "epoch 2 [run/step/epoch] 2000..3000 {epoch=2,epochs=3}",
                          "epoch 3 [run/step/epoch] 3000..4000 {epoch=3,epochs=3}",
                      }));
  EXPECT_EQ(tracker().phases_opened(), 3u);
}

TEST_F(LogPhaseTrackerTest, KerasFitOutput) {
  FeedChunks(ReadData("keras_fit.txt"));  // 8 lines, at 1000 .. 8000
  tracker().Finish(9000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 1 [run/step/epoch] 2000..4000 {epoch=1,epochs=3}",
                          "epoch 2 [run/step/epoch] 4000..6000 {epoch=2,epochs=3}",
                          "epoch 3 [run/step/epoch] 6000..9000 {epoch=3,epochs=3}",
                      }));
}

TEST_F(LogPhaseTrackerTest, GenericEpochLinesOpenAPhasePerNewNumber) {
  tracker().OnLine(1000, "epoch 1 batch 0 loss=2.30");
  tracker().OnLine(1500, "epoch 1 batch 100 loss=0.91");      // the same epoch: ignored
  tracker().OnLine(1700, "saving checkpoint for epoch 5");    // not at the start: ignored
  tracker().OnLine(2000, "Epoch: 2 batch 0 loss=0.80");
  tracker().OnLine(2500, "[epoch 2] lr=0.001");
  tracker().OnLine(3000, "EPOCH=3");
  tracker().Finish(4000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 1 [run/step/epoch] 1000..2000 {epoch=1}",
                          "epoch 2 [run/step/epoch] 2000..3000 {epoch=2}",
                          "epoch 3 [run/step/epoch] 3000..4000 {epoch=3}",
                      }));
}

TEST_F(LogPhaseTrackerTest, GenericStepLines) {
  tracker().OnLine(1000, "step 100: loss=0.5");
  tracker().OnLine(1100, "step 100: eval acc=0.9");  // the same step: ignored
  tracker().OnLine(2000, "global_step=200 loss=0.4");
  tracker().OnLine(3000, "Step 300 loss 0.3");
  tracker().Finish(3500);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "step 100 [run/step/iteration] 1000..2000 {step=100}",
                          "step 200 [run/step/iteration] 2000..3000 {step=200}",
                          "step 300 [run/step/iteration] 3000..3500 {step=300}",
                      }));
}

TEST_F(LogPhaseTrackerTest, TracebackIsAnInstantThatClosesNothing) {
  tracker().OnLine(1000, "Epoch 1/2");
  tracker().OnLine(2000, "Traceback (most recent call last):");
  tracker().OnLine(2001, "  File \"train.py\", line 3, in <module>");
  tracker().OnLine(2002, "ValueError: bad shape");
  tracker().Finish(2500);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 1 [run/step/epoch] 1000..2500 {epoch=1,epochs=2}",
                          "traceback [run/step/error] 2000..2000 {}",
                      }));
}

TEST_F(LogPhaseTrackerTest, TqdmBarsAsTheyArrive) {
  // Real tqdm 4.64 output (two bars, the second without a description); each update is a
  // \r-terminated chunk, and tqdm repaints 100% once more when a bar closes.
  FeedChunks(ReadData("tqdm_two_bars.txt"));
  tracker().Finish(99000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "train [run/step/progress] 2000..7000 {description=train,total=5}",
                          "progress [run/step/progress] 9000..13000 {total=4}",
                      }));
}

TEST_F(LogPhaseTrackerTest, TqdmNestedBarsWithEscapes) {
  // Real output of an outer bar and a nested one (position=1, leave=False): cursor-up
  // escapes, unicode blocks, and the inner bar run twice.
  FeedChunks(ReadData("tqdm_nested_unicode.txt"));
  tracker().Finish(99000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epochs [run/step/progress] 1000..13000 {description=epochs,total=2}",
                          "batches [run/step/progress] 2000..5000 {description=batches,total=3}",
                          "batches [run/step/progress] 8000..11000 {description=batches,total=3}",
                      }));
}

TEST_F(LogPhaseTrackerTest, TqdmSegmentsOfOneLineMakeOnePhasePerBar) {
  // A reader that hands over only whole lines: every segment has the line's time.
  std::string text = ReadData("tqdm_two_bars.txt");
  TimeNs t = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) tracker().OnLine(t += 1000, line);
  tracker().Finish(99000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "train [run/step/progress] 2000..2000 {description=train,total=5}",
                          "progress [run/step/progress] 3000..3000 {total=4}",
                      }));
}

TEST_F(LogPhaseTrackerTest, TqdmBarRestartedBeforeItsEndIsANewPhase) {
  tracker().OnLine(1000, "\rdata:   0%|          | 0/10 [00:00<?, ?it/s]");
  tracker().OnLine(2000, "\rdata:  50%|#####     | 5/10 [00:01<00:01, 5.00it/s]");
  tracker().OnLine(3000, "\rdata:   0%|          | 0/10 [00:00<?, ?it/s]");  // broken off, started again
  tracker().OnLine(4000, "\rdata:  30%|###       | 3/10 [00:00<00:02, 3.00it/s]");
  tracker().OnLine(5000, "\rdata: 100%|##########| 10/10 [00:02<00:00, 5.00it/s]");
  tracker().OnLine(6000, "\rdata: 100%|##########| 10/10 [00:02<00:00, 5.00it/s]");  // close repaint
  tracker().Finish(7000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "data [run/step/progress] 1000..3000 {description=data,total=10}",
                          "data [run/step/progress] 3000..5000 {description=data,total=10}",
                      }));
}

TEST_F(LogPhaseTrackerTest, LightningStyleEpochBarsAreEpochs) {
  // "Epoch N: xx%|" is an epoch line first (the epoch rule comes before tqdm's).
  tracker().OnLine(1000, "Epoch 0:   0%|          | 0/4 [00:00<?, ?it/s]");
  tracker().OnLine(1500, "Epoch 0: 100%|##########| 4/4 [00:00<00:00, 9.00it/s, loss=0.5]");
  tracker().OnLine(2000, "Epoch 1:   0%|          | 0/4 [00:00<?, ?it/s, loss=0.5]");
  tracker().Finish(3000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 0 [run/step/epoch] 1000..2000 {epoch=0}",
                          "epoch 1 [run/step/epoch] 2000..3000 {epoch=1}",
                      }));
}

TEST_F(LogPhaseTrackerTest, EscapesAroundALineAreIgnored) {
  tracker().OnLine(1000, "\x1b[1m\x1b[32mEpoch 1/2\x1b[0m");
  tracker().Finish(2000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{"epoch 1 [run/step/epoch] 1000..2000 {epoch=1,epochs=2}"}));
}

TEST_F(LogPhaseTrackerTest, LinesAfterFinishAreIgnored) {
  tracker().OnLine(1000, "Epoch 1/2");
  tracker().Finish(2000);
  tracker().Finish(2500);
  tracker().OnLine(3000, "Epoch 2/2");
  EXPECT_EQ(Phases(), (std::vector<std::string>{"epoch 1 [run/step/epoch] 1000..2000 {epoch=1,epochs=2}"}));
}

TEST_F(LogPhaseTrackerTest, HugeLinesDoNotOverflowTheRegexEngine) {
  std::string line(2 << 20, 'x');
  line.replace(0, 20, "data:  10%|#   | 1/10");  // passes the tqdm pre-filter
  line += "%|";
  tracker().OnLine(1000, line);
  tracker().OnLine(2000, std::string(2 << 20, ' ') + "%|");
  tracker().Finish(3000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{"data [run/step/progress] 1000..3000 {description=data,total=10}"}));
}

TEST_F(LogPhaseTrackerTest, LongLinesFitA1MiBThreadStack) {
  // The longest match std::regex may attempt, on a thread with a small stack.
  struct Job {
    LogPhaseTracker* tracker;
    std::string line;
  } job{&tracker(), "a:  1%|" + std::string(8000, '#') + "| 1/100"};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    auto* j = static_cast<Job*>(arg);
    j->tracker->OnLine(1000, j->line);
    j->tracker->OnLine(2000, std::string(2000, ' ') + "%| 1/2");
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, &job), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(tracker().regex_runs(), 2u);
}

TEST_F(LogPhaseTrackerTest, NonMatchingLinesNeverReachTheRegexEngine) {
  const char* noise[] = {
      "2024-05-01 10:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:182] optimized",
      "Downloading data from https://storage.example.com/mnist.npz",
      "11490434/11490434 [==============================] - 1s 0us/step",  // has "step", not at start
      "Using device: cuda:0",
      "loss=0.2315 acc=0.9123 lr=1.0e-03",
      "",
  };
  for (int i = 0; i < 100; ++i)
    for (const char* line : noise) tracker().OnLine(1000 + i, line);
  // Only the line that contains a rule's literal ("step") was run through std::regex.
  EXPECT_EQ(tracker().regex_runs(), 100u);
  EXPECT_EQ(tracker().lines_matched(), 0u);
  tracker().Finish(5000);
  EXPECT_TRUE(Phases().empty());
}

// The rule that takes a line first, as docs/log-rules.md says ("" for none).
TEST(LogRuleSetTest, DocumentedExamplesGoToTheirRule) {
  const LogRuleSet built_in = LogRuleSet::BuiltIn();
  auto taker = [&](const std::string& line) -> std::string {
    for (const LogRule& rule : built_in.rules())
      if (re2::RE2::PartialMatch(line, *rule.begin)) return rule.name;
    return "";
  };
  const std::pair<const char*, const char*> examples[] = {
      {"Epoch 1/8", "keras-epoch"},
      {"Epoch 12/100", "keras-epoch"},
      {"Epoch 3/8 loss=0.21", "keras-epoch"},
      {"epoch 1/8", "epoch"},
      {"  Epoch 1/8", "epoch"},
      {"10/10 [======] - 1s - loss: 0.6931", ""},
      {"epoch 1", "epoch"},
      {"Epoch: 2 loss=0.8", "epoch"},
      {"EPOCH=3", "epoch"},
      {"[epoch 4] lr=0.001", "epoch"},
      {"Epoch 0:  45%|####5     | 45/100", "epoch"},
      {"epochs 10", ""},
      {"x epoch 3", ""},
      {"saving checkpoint for epoch 3", ""},
      {"INFO:root:epoch 3", ""},
      {"step 100: loss=0.5", "step"},
      {"global_step=200", "step"},
      {"Global step 300", "step"},
      {"Step: 9", "step"},
      {"11490434/11490434 [====] - 1s 0us/step", ""},
      {"loss step 3", ""},
      {"train:  10%|#         | 1/10 [00:00<00:01, 9.1it/s]", "tqdm"},
      {" 50%|\xe2\x96\x88\xe2\x96\x88     | 5/10 [00:01<00:01, 4.9it/s]", "tqdm"},
      {"Validation DataLoader 0: 100%|##########| 2/2 [00:00<00:00]", "tqdm"},
      {"45it [00:01, 30.2it/s]", ""},
      {"Traceback (most recent call last):", "traceback"},
  };
  for (const auto& [line, rule] : examples) EXPECT_EQ(taker(line), rule) << line;
}

// ---------------------------------------------------------------------------------------
// User rules

LogRuleSet UserRules() {
  auto user = LogRuleSet::LoadFile(DataPath("good.yaml"));
  EXPECT_TRUE(user.ok()) << user.status().message();
  LogRuleSet rules = user.ok() ? *user : LogRuleSet();
  rules.Append(LogRuleSet::BuiltIn());
  return rules;
}

TEST(LogRuleSetTest, LoadFileReadsEveryKey) {
  auto rules = LogRuleSet::LoadFile(DataPath("good.yaml"));
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  ASSERT_EQ(rules->rules().size(), 4u);
  const LogRule& v = rules->rules()[0];
  EXPECT_EQ(v.name, "validation");
  EXPECT_EQ(v.type, "eval");
  EXPECT_EQ(v.name_template, "fold {fold}");
  EXPECT_EQ(v.begin_source, R"(^Validating fold (\d+))");
  EXPECT_EQ(v.end_source, R"(^Fold \d+ done)");
  EXPECT_TRUE(v.end != nullptr);
  EXPECT_EQ(v.tags, (std::vector<std::string>{"fold"}));
  EXPECT_EQ(v.origin, DataPath("good.yaml") + ":3");
  EXPECT_EQ(v.begin_literal.text, "Validating fold ");
  EXPECT_TRUE(v.begin_literal.at_start);
  const LogRule& s = rules->rules()[1];
  EXPECT_TRUE(s.marks_end);
  EXPECT_EQ(s.key_group, 1);
  const LogRule& c = rules->rules()[2];
  EXPECT_TRUE(c.instant);
  EXPECT_TRUE(c.ignore_case);
  EXPECT_EQ(c.begin_literal.text, "saved checkpoint to ");
  EXPECT_TRUE(rules->rules()[3].disabled);
}

TEST(LogRuleSetTest, AppendPutsUserRulesFirstAndLetsThemReplaceBuiltIns) {
  LogRuleSet rules = UserRules();
  std::vector<std::string> names;
  for (const LogRule& r : rules.rules()) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"validation", "summary-epoch", "checkpoint", "step", "keras-epoch", "epoch",
                                             "tqdm", "traceback"}));
  EXPECT_TRUE(rules.Find("step")->disabled);
}

TEST(LogRuleSetTest, BuiltInsAreDocumented) {
  std::string doc = [] {
    std::ifstream in(std::string(GRADEML_SOURCE_DIR) + "/docs/log-rules.md");
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }();
  const LogRuleSet built_in = LogRuleSet::BuiltIn();
  for (const LogRule& rule : built_in.rules()) {
    EXPECT_NE(doc.find("`" + rule.name + "`"), std::string::npos) << rule.name;
    EXPECT_NE(doc.find(rule.begin_source), std::string::npos) << rule.name;
  }
}

class LogPhaseTrackerUserTest : public LogPhaseTrackerTest {
 protected:
  LogPhaseTrackerUserTest() : LogPhaseTrackerTest(UserRules()) {}
};

TEST_F(LogPhaseTrackerUserTest, BeginEndRuleWithTagsAndTemplate) {
  tracker().OnLine(1000, "Fold 0 done");  // nothing open: the end expression takes nothing
  tracker().OnLine(2000, "Validating fold 1 on 200 samples");
  tracker().OnLine(2500, "batch 3 ok");
  tracker().OnLine(3000, "Fold 1 done, acc=0.93");
  tracker().OnLine(4000, "Validating fold 2 on 200 samples");
  tracker().Finish(5000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "fold 1 [run/step/eval] 2000..3000 {fold=1}",
                          "fold 2 [run/step/eval] 4000..5000 {fold=2}",
                      }));
}

TEST_F(LogPhaseTrackerUserTest, UserRuleOverridesBuiltInsOnTheSameLine) {
  // The example script prints "Epoch N/M loss=..." when an epoch ENDS: the user's
  // `marks: end` rule comes first and wins over keras-epoch.
  tracker().OnLine(1000, "Epoch 1/3 loss=0.91 test_accuracy=0.700 time=0.50s");
  tracker().OnLine(1000, "Epoch 1/3 loss=0.91 test_accuracy=0.700 time=0.50s");  // repeated: ignored
  tracker().OnLine(2000, "Epoch 2/3 loss=0.52 test_accuracy=0.850 time=0.50s");
  tracker().OnLine(3000, "Epoch 3/3 loss=0.33 test_accuracy=0.910 time=0.50s");
  tracker().OnLine(3200, "Saved checkpoint to /tmp/model.pt");
  tracker().OnLine(3300, "step 5 of the pipeline");  // the built-in step rule is disabled
  tracker().Finish(4000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{
                          "epoch 1 of 3 [run/step/epoch] 500..1000 {epoch=1,epochs=3}",
                          "epoch 2 of 3 [run/step/epoch] 1000..2000 {epoch=2,epochs=3}",
                          "epoch 3 of 3 [run/step/epoch] 2000..3000 {epoch=3,epochs=3}",
                          "checkpoint [run/step/checkpoint] 3200..3200 {path=/tmp/model.pt}",
                      }));
}

TEST_F(LogPhaseTrackerUserTest, BuiltInsStillApplyToOtherLines) {
  tracker().OnLine(1000, "Epoch 1/2");  // no " loss=": the built-in keras-epoch rule
  tracker().Finish(2000);
  EXPECT_EQ(Phases(), (std::vector<std::string>{"epoch 1 [run/step/epoch] 1000..2000 {epoch=1,epochs=2}"}));
}

TEST(LogRuleSetTest, NameTemplates) {
  auto rules = LogRuleSet::Parse(R"(
rules:
  - name: t
    type: stage
    begin: '^stage (\w+) ?(\d*)'
    tags: [stage]
    phase_name: '{{{stage}}} #{2} ({0})'
)",
                                 "inline");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.parent = 0, .name = "s", .type = "step", .start_ns = 1});
  LogPhaseTracker tracker(&*rules, &builder, step, "h", 1);
  tracker.OnLine(10, "stage prep 7");
  tracker.OnLine(20, "stage fit");
  tracker.Finish(30);
  auto phases = builder.TakeDelta(true).phases;
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(Describe(phases[1]), "{prep} #7 (stage prep 7) [step/stage] 10..20 {stage=prep}");
  EXPECT_EQ(Describe(phases[2]), "{fit} # (stage fit) [step/stage] 20..30 {stage=fit}");
}

TEST(LogRuleSetTest, EmptyRulesList) {
  auto rules = LogRuleSet::Parse("rules: []\n", "inline");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  EXPECT_TRUE(rules->empty());
}

// ---------------------------------------------------------------------------------------
// Errors

std::string RulesLoadError(const std::string& name) {
  auto rules = LogRuleSet::LoadFile(DataPath(name));
  EXPECT_FALSE(rules.ok()) << name;
  return rules.ok() ? "" : rules.status().message();
}

std::string RulesParseError(const std::string& yaml) {
  auto rules = LogRuleSet::Parse(yaml, "r.yaml");
  EXPECT_FALSE(rules.ok()) << yaml;
  return rules.ok() ? "" : rules.status().message();
}

TEST(LogRuleSetTest, LoadFileErrorsNameFileAndLine) {
  std::string dir = DataPath("");
  std::string bad_regex = RulesLoadError("bad_regex.yaml");
  EXPECT_EQ(bad_regex.rfind(dir + "bad_regex.yaml:7: rule 'broken': begin: bad regular expression '^Validating fold (\\d+'", 0),
            0u)
      << bad_regex;
  EXPECT_EQ(RulesLoadError("missing_begin.yaml"), dir + "missing_begin.yaml:2: rule 'validation' has no `begin` expression");
  EXPECT_EQ(RulesLoadError("unknown_key.yaml"),
            dir + "unknown_key.yaml:5: unknown key 'phase-name' in a rule (known: name, type, begin, end, phase_name, tags, "
                  "key, progress, instant, marks, ignore_case, disabled)");
  EXPECT_EQ(RulesLoadError("syntax.yaml"), dir + "syntax.yaml:4: YAML syntax: illegal map value");

  auto missing = LogRuleSet::LoadFile(DataPath("no_such_rules.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), dir + "no_such_rules.yaml: no such rules file");
}

TEST(LogRuleSetTest, ParseErrors) {
  EXPECT_EQ(RulesParseError(""), "r.yaml:1: empty rules file; expected a `rules:` list");
  EXPECT_EQ(RulesParseError("rule:\n  - name: x\n"), "r.yaml:1: unknown key 'rule' (expected `rules:`)");
  EXPECT_EQ(RulesParseError("rules:\n  name: x\n"), "r.yaml:2: `rules:` must be a list of rules");
  EXPECT_EQ(RulesParseError("rules:\n  - type: x\n    begin: a\n"), "r.yaml:2: a rule needs a `name`");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    begin: a\n"), "r.yaml:2: rule 'x' needs a non-empty `type`");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: a/b\n    begin: a\n"), "r.yaml:3: rule 'x': `type` cannot contain '/'");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: a\n  - name: x\n    type: t\n    begin: b\n"),
            "r.yaml:5: a rule named 'x' is already defined at r.yaml:2");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: '(a)'\n    tags: [p, q]\n"),
            "r.yaml:5: rule 'x': 2 tag names given but begin has 1 capture group");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: '(a)'\n    phase_name: 'x {b}'\n"),
            "r.yaml:5: rule 'x': phase name 'x {b}' refers to {b}, which is neither a capture group number nor a tag");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: '(a)'\n    phase_name: 'x {1'\n"),
            "r.yaml:5: rule 'x': unclosed '{' in phase name 'x {1'");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: '(a)'\n    key: 2\n"),
            "r.yaml:5: `key: 2` is neither a capture group number of begin nor a tag name");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: a\n    end: b\n    instant: true\n"),
            "r.yaml:5: rule 'x': an `end` expression goes only with a rule that opens phases (not instant, marks: end or "
            "progress)");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: a\n    instant: maybe\n"),
            "r.yaml:5: `instant` must be true or false");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: a\n    marks: middle\n"),
            "r.yaml:5: rule 'x': `marks` must be start or end");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: '(\\d+)/(\\d+)'\n    progress: [1]\n"),
            "r.yaml:5: rule 'x': `progress` must be [current, total]: two capture groups");
  EXPECT_EQ(RulesParseError("rules:\n  - name: x\n    type: t\n    begin: [a]\n"), "r.yaml:4: `begin` must be a string");
  std::string bad_end = RulesParseError("rules:\n  - name: x\n    type: t\n    begin: a\n    end: '[b'\n");
  EXPECT_EQ(bad_end.rfind("r.yaml:5: rule 'x': end: bad regular expression '[b'", 0), 0u) << bad_end;
}

TEST(LogRuleSetTest, UserProgressRule) {
  auto rules = LogRuleSet::Parse(R"(
rules:
  - name: shards
    type: load
    begin: '^loading shard (\d+)/(\d+)'
    progress: [1, 2]
    phase_name: 'load'
)",
                                 "inline");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.parent = 0, .name = "s", .type = "step", .start_ns = 1});
  LogPhaseTracker tracker(&*rules, &builder, step, "h", 1);
  tracker.OnLine(10, "loading shard 0/3");
  tracker.OnLine(20, "loading shard 2/3");
  tracker.OnLine(30, "loading shard 3/3");
  tracker.Finish(40);
  auto phases = builder.TakeDelta(true).phases;
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(Describe(phases[1]), "load [step/load] 10..30 {}");
}

// ---------------------------------------------------------------------------------------
// The pre-filter

TEST(LogRuleLiteralTest, FindsARequiredLiteral) {
  auto lit = [](std::string_view re, bool icase = false) {
    RequiredLiteral l = FindRequiredLiteral(re, icase);
    return fmt::format("{}{}", l.at_start ? "^" : "", l.text);
  };
  EXPECT_EQ(lit(R"(^Epoch (\d+)/(\d+))"), "^Epoch ");
  EXPECT_EQ(lit(R"(^\W*epoch[ :=]+(\d+))", true), "epoch");
  EXPECT_EQ(lit(R"(^\W*(?:global[ _])?step[ :=]+(\d+))", true), "step");
  EXPECT_EQ(lit(R"(^\s*(?:([^:|\s][^:|]*): +)?(\d+)%\|.*\| *(\d+)/(\d+))"), "%|");
  EXPECT_EQ(lit(R"(^Traceback \(most recent call last\):)"), "^Traceback (most recent call last):");
  EXPECT_EQ(lit("SAVED Checkpoint", true), "saved checkpoint");
  EXPECT_EQ(lit("abc?def"), "def");       // c is optional
  EXPECT_EQ(lit("abcd+ef"), "abcd");      // d is required once, then the run breaks
  EXPECT_EQ(lit("ab{0,2}cd"), "cd");
  EXPECT_EQ(lit("xab{2}cd"), "xab");
  EXPECT_EQ(lit(R"(\x41bc\u0041def)"), "def");
  EXPECT_EQ(lit("a|bcd"), "");            // alternation: nothing is certain
  EXPECT_EQ(lit("(a|b)cd"), "cd");
  EXPECT_EQ(lit("^(x)abc"), "abc");       // not at the start any more
  EXPECT_EQ(lit(".*"), "");
  EXPECT_EQ(lit("[abc]+"), "");
}

TEST(LogRuleLiteralTest, BuiltInPreFiltersPassEveryMatchingLine) {
  const char* lines[] = {
      "Epoch 1/3", "epoch 2", "  [Epoch: 12] x", "EPOCH=3", "global step 5", "global_step=7", "Step: 9", "-- step 1",
      "train:  10%|#   | 1/10 [00:00<?]", " 50%|#####     | 5/10", "Traceback (most recent call last):",
      "Epoch 0:  45%|####5     | 45/100", "  3%|3 | 3/100", "loss step 3", "x epoch 3", "epochs 3",
  };
  size_t matched = 0;
  const LogRuleSet built_in = LogRuleSet::BuiltIn();
  for (const LogRule& rule : built_in.rules()) {
    for (const char* line : lines) {
      if (!re2::RE2::PartialMatch(line, *rule.begin)) continue;
      ++matched;
      std::string hay = line;
      if (rule.ignore_case)
        for (char& c : hay) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool passes = rule.begin_literal.at_start ? hay.starts_with(rule.begin_literal.text)
                                                : hay.find(rule.begin_literal.text) != std::string::npos;
      EXPECT_TRUE(passes) << rule.name << ": " << line;
    }
  }
  EXPECT_GE(matched, 13u);
}

}  // namespace
}  // namespace grademl::record
