# GradeML: `make demo` and `make test` set everything up themselves on a Debian machine.
BUILD ?= build
space := $(subst ,, )
JOBS ?= $(shell nproc)
GRADEML := $(BUILD)/grademl
PYTHON := /usr/bin/python3
# ccache when it is installed (CI's clean clone may have none, or an empty cache).
CCACHE := $(shell command -v ccache 2>/dev/null)
LAUNCHER := $(if $(CCACHE),-DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE))
# CI_PORTABLE_PATHS=1 (set by .ci/run, which keeps ccache's cache between CI runs outside the
# clone, with CCACHE_BASEDIR at the clone): the clone's path is mapped to "." in __FILE__ and
# debug information, so that a compile in another clone of the same sources is the same
# compile and ccache's results can be shared. Set when a tree is configured.
ifeq ($(CI_PORTABLE_PATHS),1)
LAUNCHER += -DCMAKE_C_FLAGS=-ffile-prefix-map=$(CURDIR)=. -DCMAKE_CXX_FLAGS=-ffile-prefix-map=$(CURDIR)=.
endif
# Ninja (scripts/bootstrap installs ninja-build): unlike CMake's Makefiles, it compiles a
# target's sources while the libraries it links are still building, which keeps both of CI's
# cores busy. A build tree configured earlier keeps its own generator.
GENERATOR = $$(command -v ninja >/dev/null && echo "-G Ninja")

.PHONY: all build test test-postgres demo demo-engines bench bench-check bench-html validate bootstrap clean \
        test-sanitize test-asan test-tsan fuzz

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/CMakeCache.txt:
	@scripts/bootstrap
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LAUNCHER) $(GENERATOR)

build: bootstrap $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# TEST_ARGS: more ctest arguments (.ci/run passes -LE validation and runs that label in a job
# of its own, scripts/ci_validation).
TEST_ARGS ?=
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS) $(TEST_ARGS)

# The store and end-to-end tests again with PostgreSQL as the store: every `--db PATH` of an
# end-to-end test becomes a database on the tests' own PostgreSQL server. Left out: tests of
# the SQLite file itself (damaged, locked or foreign files, the check after an unclean
# shutdown, reading it with sqlite3 directly, the events folder beside it, error messages that
# name it, a relative path resolved from another directory, a --db inside a terminal script).
PG_SQLITE_ONLY = StoreReliabilityE2E|CorruptDatabaseIsAClearError|HugeResultStreamsInBoundedMemory|QueryE2E.ErrorsAreOneLine|RelativeDatabaseAndStepsInOtherDirectories|EventMemoryTruncatedAndDeletedMidRun|CtrlCOnATerminalStopsTheCommand
test-postgres: build
	cd $(BUILD) && GRADEML_TEST_BACKEND=postgresql ctest --output-on-failure --timeout 600 -j $(JOBS) -L 'store|e2e' \
	  -E '$(PG_SQLITE_ONLY)'

# Runs the example ML workflow (examples/digits) under GradeML, prints its report and writes
# the HTML report (.grademl/report.html).
# DIGITS_SCALE=0.1 make demo runs a smaller version.
demo: build
	$(GRADEML) run examples/digits/pipeline.yaml
	$(GRADEML) report --html .grademl/report.html
	@echo
	@echo "Recorded in .grademl/grademl.db; the HTML report is .grademl/report.html (open it in a browser)."
	@echo "Try: $(GRADEML) ls; $(GRADEML) report; $(GRADEML) report --json; $(GRADEML) export --perfetto run.trace.json"

# The engines example (examples/engines): a Dask feature-engineering step (LocalCluster, 2
# worker processes) and a 2-rank DDP training step (torchrun, gloo) under GradeML; prints the
# report (Dask tasks, ranks and their communication) and writes .grademl/engines.html.
# ENGINES_SCALE=0.1 make demo-engines runs a smaller version.
demo-engines: build
	$(GRADEML) run examples/engines/pipeline.yaml
	$(GRADEML) report --html .grademl/engines.html
	@echo
	@echo "Recorded in .grademl/grademl.db; the HTML report is .grademl/engines.html."

# Every benchmark (human-readable), then the cost figures against their peers, machine-readable
# in bench/results.json (the baselines bench-check compares with: changing them needs a commit
# that says why) and as the table in docs/PERFORMANCE.md.
bench: build
	bench/run_all.sh $(BUILD)
	$(PYTHON) bench/cost.py --build $(BUILD) --full --out bench/results.json
	$(PYTHON) bench/cost.py --render bench/results.json docs/PERFORMANCE.md

# The regression guard (under 3 minutes): 100k-phase report/export vs sqlite3, Python start and
# fixed cost, the small-op PyTorch loop, import vs json.load, the what-if of 1M phases and the
# summary of a deep process chain (the speed bounds no unit test asserts); fails when a ratio is more than
# 1.5x the one in bench/results.json. Its figures: $(BUILD)/bench-check.json.
bench-check: build
	$(PYTHON) bench/cost.py --build $(BUILD) --quick --check bench/results.json --out $(BUILD)/bench-check.json

# The HTML report's size and opening time in headless Chromium (example workflow, 1M phases).
bench-html: build
	bench/html_report_bench.sh $(BUILD)

# The analyses' validation suite (docs/validation.md): workloads whose bottleneck is known by
# construction, and what-if predictions checked by really re-running the changed workflow;
# then the real-world-shaped workloads against kernel ground truth. (`make test` runs a quick
# pass of the first with thresholds that fail, and the second: ctest -L validation.)
validate: build
	$(PYTHON) bench/validation/run_validation.py --grademl $(GRADEML) $(VALIDATE_ARGS)
	$(PYTHON) bench/validation/levers.py --grademl $(GRADEML) --check
	$(PYTHON) bench/validation/realworld/check_realworld.py --grademl $(GRADEML)

# --- Sanitizers and fuzzers (docs/reliability.md; .ci/run runs them after `make test`) ------
# Two build trees; benches are not built there. build-asan/ is Debian's clang-14 with
# ASan+UBSan and libFuzzer's coverage instrumentation (GRADEML_FUZZ=ON): it serves both
# `make test-sanitize` (unit tests and SANITIZE_E2E) and `make fuzz` (the libFuzzer targets
# need clang), so CI builds three trees (build/, build-asan/, build-tsan/), not four.
# build-tsan/ is g++ with ThreadSanitizer. Sanitizer reports go to files
# under <tree>/sanitizer-reports (ASan/UBSan/TSan log_path), so that a report from a grademl
# that a test runs as a child process fails the job too, even when the test expected that
# grademl to fail: scripts/check_sanitizer_reports prints them and exits non-zero.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60
SANITIZER_FLAGS_TYPE := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DGRADEML_BUILD_BENCH=OFF $(LAUNCHER) $(GENERATOR)
# A build-asan/ configured before the two trees were one (g++, no fuzz targets) is refused
# with what to do, rather than silently building without the fuzz targets.
ASAN_TREE_CHECK = @grep -q '^GRADEML_FUZZ:BOOL=ON' $(ASAN_BUILD)/CMakeCache.txt || { \
  echo "make: $(ASAN_BUILD) was configured without GRADEML_FUZZ (an older g++ ASan tree); remove it (rm -rf $(ASAN_BUILD)) and run again" >&2; exit 1; }

# The end-to-end tests that the ASan+UBSan job runs (the named subset of the CI budget):
# recording single commands and workflows, signals and SIGKILL, a corrupt store, bad flags,
# query, report, export, diff, whatif's errors, and the C++ instrumented program. Left out:
# the tests that run Debian's Python with libgrademl.so or grademl's Python package
# (InstrumentE2E.Python*/Auto*/Module*/Op*/SigkilledProcess*, RealPythonTrainingStep, DigitsExampleWorkflow,
# WhatifE2E's re-runs): a sanitized libgrademl.so cannot be loaded into Debian's Python
# without preloading the sanitizer runtime, so the Python path is tested in the normal
# build only (`make test`), as is the python_tests suite and the browser test.
# Also left out: the end-to-end tests that compare CPU or memory with the kernel's own figures
# (ProcessTreeE2E, MemoryE2E, KernelTimeE2E, the validation): a sanitized helper spends CPU
# and memory after writing its truth (LeakSanitizer at exit, shadow memory).
SANITIZE_E2E := ^(RunCommandE2E\.(TwoProcesses|WritesRightBeforeExit|ArgumentsAreRecorded|ShortLivedChildren|ExitCodeAndStdin|MissingCommand|Sigterm|Sigkill|CorruptDatabase|BadFlag|LsListsRuns)|WorkflowE2E\.(AFailingStep|SpecErrors|JobsLimit|ProgressBars)|QueryE2E\.|AnalysisE2E\.|DiffE2E\.|ExportE2E\.|HtmlReportE2E\.|WhatifE2E\.BadChanges|InstrumentE2E\.CppThreads|EventTransportE2E\.|StoreReliabilityE2E\.(TwoSimultaneousRuns|DamagedStoreIsRefused|FullDiskUnderTheStore|OneOfTwoRecordersKilled)|SignalE2E\.|RunCliE2E\.|LogRulesCommandE2E\.|LeversE2E\.APinned|OutsideLoadE2E\.ABurner|InstrumentE2E\.CppPhasesLeftOpen|TraceStitchE2E\.(ImportGlob|StepOuts)|ImportCommandE2E\.|SparkImportE2E\.|GpuReportE2E\.GlooCollectivesOfACpuOnlyRank|QueryImportedE2E\.|DaskE2E\.(ImportALogOnItsOwn|ADamagedLogIsImportedInPart)|ReuseE2E\.|ReuseCliE2E\.|StopE2E\.(ARuleOverItsCostBudget|ALockedStoreAtTheEndIsSaid|AStoreDeletedMidRun|SigtermReachesACommand))
# Undefined behaviour and leaks fail; reports go to files (see above).
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:log_path=$(CURDIR)/$(ASAN_BUILD)/sanitizer-reports/asan \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/$(ASAN_BUILD)/sanitizer-reports/ubsan

$(ASAN_BUILD)/CMakeCache.txt:
	@scripts/bootstrap --fuzz
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DGRADEML_SANITIZE=address,undefined \
	  -DGRADEML_FUZZ=ON -DGRADEML_BUILD_BENCH=OFF $(LAUNCHER) $(GENERATOR)

# ASan + UBSan: every unit test binary and the SANITIZE_E2E subset of the end-to-end tests
# (the fuzz targets are built too: `make fuzz` then only runs them).
test-sanitize test-asan: $(ASAN_BUILD)/CMakeCache.txt
	@scripts/bootstrap --fuzz
	$(ASAN_TREE_CHECK)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	rm -rf $(ASAN_BUILD)/sanitizer-reports && mkdir -p $(ASAN_BUILD)/sanitizer-reports
	rc=0; cd $(ASAN_BUILD) && \
	  { $(ASAN_ENV) ctest --output-on-failure --no-tests=error --timeout 600 -j $(JOBS) -LE '^(e2e|python|browser|validation)$$' \
	      -E '$(SANITIZE_EXCLUDE)' || rc=1; } && \
	  { $(ASAN_ENV) ctest --output-on-failure --no-tests=error --timeout 600 -j $(JOBS) -L '^e2e$$' -R '$(SANITIZE_E2E)' || rc=1; } && \
	  cd $(CURDIR) && { scripts/check_sanitizer_reports $(ASAN_BUILD)/sanitizer-reports || rc=1; } && exit $$rc

# Left out of both sanitizer jobs: a test that checks the stack budget of an uninstrumented
# build (sanitizers make every frame bigger, so the 1 MiB thread stack overflows there), and
# the 3 x 1M-phase store writers (minutes under a sanitizer; the 3 x 300k-phase test stays).
SANITIZE_EXCLUDE := ^(LogPhaseTrackerTest\.LongLinesFitA1MiBThreadStack|ConcurrencyTest\.ThreeWritersWithLargeTransactionsAllComplete)$$

# ThreadSanitizer over the parts that start threads: the event collector (collect_tests),
# the instrumentation writer (instrument_tests), the store's background writer
# (store_tests), log rules on a thread (record_tests; workflow_tests and reuse_tests, which
# held them before the move, too), and, through TSAN_E2E, a sanitized
# grademl whose sampling loop, background writer, output readers and step runner run
# concurrently (single commands, SIGTERM, parallel workflow steps, an instrumented
# multi-threaded program, steps hashed and restored on threads of their own with --reuse, log
# rules matched on a thread of their own beside a single command's relay), and under the load
# of tests/e2e/load.h (issue 25: a busy loop per core and a storm of 200 short processes a
# second beside the run) a sanitized grademl following short children whose exit events race
# its passes: ProcessPhasesSayHowTheyEnded.under_load and LostProcessE2E (20 runs of the
# issue's command; about 30 s in all, measured without TSan at 5-20 s on the shared VM).
# Not the CPU-accounting tests (TwoProcesses, ShortLivedChildren):
# TSan's own CPU cost in the instrumented helpers breaks their ground-truth comparison.
TSAN_TESTS := collect_tests instrument_tests store_tests workflow_tests record_tests reuse_tests
TSAN_E2E := ^(RunCommandE2E\.(Sigterm|ExitCodeAndStdin|Sigkill)|WorkflowE2E\.(JobsLimit|ProgressBars|AFailingStep)|InstrumentE2E\.CppThreads|EventTransportE2E\.EventMemoryTruncated|StoreReliabilityE2E\.TwoSimultaneousRuns|SignalE2E\.Sigterm|ReuseE2E\.FreshCheckoutsShareOneStore|StopE2E\.(ARuleOverItsCostBudget|SigtermReachesACommand))
# Left out of the TSan job besides SANITIZE_EXCLUDE: the workflow spec's size limits
# (SpecLimitsTest), single-threaded parsing of large generated specs that takes 2 minutes
# under TSan and has no thread to check; and the wrapper chains of the process tree monitor
# (ProcessTreeMonitorTest.CpuAndIoReapedThrough*), single-threaded passes over forked
# wrappers that must sit idle: TSan's runtime spends CPU in each forked wrapper, and the
# monitor rightly gives busy processes their share of unread I/O, so the burner's ground
# truth misses by over 5% (3 runs in 8 alone, on this VM). The plain and the ASan jobs run them.
TSAN_EXCLUDE := ^(LogPhaseTrackerTest\.LongLinesFitA1MiBThreadStack|ConcurrencyTest\.ThreeWritersWithLargeTransactionsAllComplete|SpecLimitsTest\..*|ProcessTreeMonitorTest\.CpuAndIoReapedThrough.*)$$
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=$(CURDIR)/$(TSAN_BUILD)/sanitizer-reports/tsan

$(TSAN_BUILD)/CMakeCache.txt:
	@scripts/bootstrap
	cmake -S . -B $(TSAN_BUILD) $(SANITIZER_FLAGS_TYPE) -DGRADEML_SANITIZE=thread

test-tsan: bootstrap $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS) e2e_tests grademl_shared fake_nvml
	rm -rf $(TSAN_BUILD)/sanitizer-reports && mkdir -p $(TSAN_BUILD)/sanitizer-reports
	rc=0; cd $(TSAN_BUILD) && \
	  { $(TSAN_ENV) ctest --output-on-failure --no-tests=error --timeout 600 -j $(JOBS) \
	      -L '^($(subst _tests,,$(subst $(space),|,$(strip $(TSAN_TESTS)))))$$' -E '$(TSAN_EXCLUDE)' || rc=1; } && \
	  { $(TSAN_ENV) ctest --output-on-failure --no-tests=error --timeout 600 -j $(JOBS) -L '^e2e$$' -R '$(TSAN_E2E)' || rc=1; } && \
	  cd $(CURDIR) && { scripts/check_sanitizer_reports $(TSAN_BUILD)/sanitizer-reports || rc=1; } && exit $$rc

# libFuzzer targets (tests/fuzz/<name>_fuzz.cpp), built in $(ASAN_BUILD) (Debian's clang-14,
# ASan+UBSan), each run FUZZ_SECONDS over its seed corpus tests/fuzz/corpus/<name>/ and the
# inputs it found before (FUZZ_CORPUS_DIR, default $(ASAN_BUILD)/fuzz-corpus; .ci/run keeps it
# in its cache folder between runs). A crash, leak, timeout or out-of-memory fails; its input
# is kept in $(ASAN_BUILD)/fuzz-crashes/.
fuzz: $(ASAN_BUILD)/CMakeCache.txt
	@scripts/bootstrap --fuzz
	$(ASAN_TREE_CHECK)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzz_targets
	scripts/run_fuzzers $(ASAN_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz
