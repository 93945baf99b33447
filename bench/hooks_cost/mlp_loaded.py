import os, sys
if os.environ.get("GRADEML_EVENTS_DIR"):
    import grademl
    assert grademl.enabled(), "not enabled"
sys.argv = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mlp_digits.py")] + sys.argv[1:]
exec(compile(open(sys.argv[0]).read(), sys.argv[0], "exec"))
