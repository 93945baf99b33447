"""Started by `grademl run` through PYTHONPATH: installs grademl's auto-instrumentation
(GRADEML_AUTO=1), then runs the next sitecustomize on sys.path, if any."""


def _grademl_autoload():
    import os
    import sys

    if os.environ.get("GRADEML_AUTO") == "1" and os.environ.get("GRADEML_EVENTS_DIR"):
        try:
            import grademl.auto

            grademl.auto.install()
        except Exception as e:  # never break the user's program
            if os.environ.get("GRADEML_DEBUG"):
                print(f"grademl: auto-instrumentation not installed: {e!r}", file=sys.stderr)

    # Chain to the sitecustomize we shadow (e.g. Debian's /etc/python3.X/sitecustomize.py).
    try:
        import importlib.machinery
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        rest = []
        seen = False
        for p in sys.path:
            try:
                ap = os.path.abspath(p or os.getcwd())
            except Exception:
                continue
            if ap == here:
                seen = True
                continue
            if seen:
                rest.append(p)
        if not seen:
            rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(__file__):
            mod = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = mod
            spec.loader.exec_module(mod)
    except Exception as e:
        if os.environ.get("GRADEML_DEBUG"):
            print(f"grademl: chained sitecustomize failed: {e!r}", file=sys.stderr)


_grademl_autoload()
del _grademl_autoload
