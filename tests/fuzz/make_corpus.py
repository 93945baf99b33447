#!/usr/bin/env python3
"""Regenerates the fuzz targets' seed corpora (tests/fuzz/corpus/<name>/) from the project's
own fixtures: the workflow files of tests/data/workflows and examples/, the YAML written by
the spec tests (tests/workflow/*_spec_test.cpp), and the log-rule files and logs of
tests/data/log_rules. Run it after changing those fixtures; the seeds are committed."""
import pathlib
import re
import shutil

root = pathlib.Path(__file__).resolve().parents[2]
corpus = root / "tests/fuzz/corpus"


def inline_yaml(test_file):
    """(file name, text) of each dir.Write("NAME", R"(TEXT)") in a test file."""
    text = (root / test_file).read_text()
    return re.findall(r'Write\("([^"]+)",\s*R"\((.*?)\)"', text, re.S)


def reset(name):
    d = corpus / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


# GradeML's pipeline format.
d = reset("grademl_yaml")
(d / "digits.yaml").write_bytes((root / "tests/data/workflows/digits.yaml").read_bytes())
(d / "examples_digits_pipeline.yaml").write_bytes((root / "examples/digits/pipeline.yaml").read_bytes())
for i, (_, text) in enumerate(inline_yaml("tests/workflow/grademl_spec_test.cpp")):
    (d / f"grademl_spec_test_{i}.yaml").write_text(text)

# dvc.yaml, with params.yaml after a "#--- params.yaml" line when there is one.
d = reset("dvc_yaml")
get_started = root / "tests/data/workflows/dvc_get_started"
(d / "dvc_get_started.yaml").write_text(
    (get_started / "dvc.yaml").read_text() + "#--- params.yaml\n" + (get_started / "params.yaml").read_text())
(d / "examples_digits_dvc.yaml").write_bytes((root / "examples/digits/dvc.yaml").read_bytes())
writes = inline_yaml("tests/workflow/dvc_spec_test.cpp")
for i, (name, text) in enumerate(writes):
    if not name.endswith("dvc.yaml"):
        continue
    follow = writes[i + 1] if i + 1 < len(writes) else None
    if follow and follow[0] == "params.yaml":
        text += "#--- params.yaml\n" + follow[1]
    (d / f"dvc_spec_test_{i}.yaml").write_text(text)

# Log rules: each rules file alone, and the good rules followed by "#--- log" and each log.
d = reset("log_rules")
rules_dir = root / "tests/data/log_rules"
for f in sorted(rules_dir.glob("*.yaml")):
    (d / f.name).write_bytes(f.read_bytes())
for log in sorted(rules_dir.glob("*.txt")):
    (d / f"good_with_{log.stem}.txt").write_bytes(
        (rules_dir / "good.yaml").read_bytes() + b"#--- log\n" + log.read_bytes())
