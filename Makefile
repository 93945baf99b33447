# GradeML: `make demo` and `make test` set everything up themselves on a Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc)
GRADEML := $(BUILD)/grademl
PYTHON := /usr/bin/python3

.PHONY: all build test demo bench bench-html validate bootstrap clean

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/CMakeCache.txt:
	@scripts/bootstrap
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: bootstrap $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS)

# Runs the example ML workflow (examples/digits) under GradeML, prints its report and writes
# the HTML report (.grademl/report.html).
# DIGITS_SCALE=0.1 make demo runs a smaller version.
demo: build
	$(GRADEML) run examples/digits/pipeline.yaml
	$(GRADEML) report --html .grademl/report.html
	@echo
	@echo "Recorded in .grademl/grademl.db; the HTML report is .grademl/report.html (open it in a browser)."
	@echo "Try: $(GRADEML) ls; $(GRADEML) report; $(GRADEML) report --json; $(GRADEML) export --perfetto run.trace.json"

bench: build
	bench/run_all.sh $(BUILD)

# The HTML report's size and opening time in headless Chromium (example workflow, 1M phases).
bench-html: build
	bench/html_report_bench.sh $(BUILD)

# The analyses' validation suite (docs/validation.md): workloads whose bottleneck is known by
# construction, and what-if predictions checked by really re-running the changed workflow.
validate: build
	$(PYTHON) bench/validation/run_validation.py --grademl $(GRADEML) $(VALIDATE_ARGS)

clean:
	rm -rf $(BUILD)
