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
        # The import system's own modules: `importlib` (and its `warnings`) would add
        # milliseconds to every Python start.
        import _frozen_importlib as _bootstrap
        import _frozen_importlib_external as _bootstrap_external

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
        spec = _bootstrap_external.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(__file__):
            mod = _bootstrap.module_from_spec(spec)
            sys.modules["sitecustomize"] = mod
            spec.loader.exec_module(mod)
    except Exception as e:
        if os.environ.get("GRADEML_DEBUG"):
            print(f"grademl: chained sitecustomize failed: {e!r}", file=sys.stderr)


_grademl_autoload()
del _grademl_autoload
