"""Zero-code auto-instrumentation: patches torch, scikit-learn, pandas and numpy right
after the user's program imports them (a sys.meta_path post-import hook; nothing is
imported here that the program does not import itself).

Installed by grademl/_autoload/sitecustomize.py when GRADEML_AUTO=1 and events are
being recorded. Every hook is guarded: an exception disables that hook, never the
program (set GRADEML_DEBUG=1 to see why).
"""
import _thread
import os
import sys

_installed = False
_lock = _thread.RLock()  # _thread, not threading: importing threading costs every Python start
_hooks = {}        # module name -> [patch functions]
_done = set()      # (module name, patch function) applied
_disabled = set()  # hook names switched off after an error


def debug(msg):
    if os.environ.get("GRADEML_DEBUG"):
        try:
            print(f"grademl.auto: {msg}", file=sys.stderr)
        except Exception:
            pass


def guard(name, exc):
    """Called by wrappers when their instrumentation code failed: switch it off."""
    _disabled.add(name)
    debug(f"hook {name} disabled after error: {exc!r}")


def _run_hooks(modname, module):
    for fn in _hooks.get(modname, ()):
        key = (modname, fn)
        if key in _done:
            continue
        _done.add(key)
        try:
            fn(module)
        except Exception as e:  # never break the import
            debug(f"patching {modname} with {fn.__qualname__} failed: {e!r}")


class _PostImportFinder:
    """Finds the real spec with the other finders, then runs our hooks after the
    module has executed."""

    def __init__(self):
        self._busy = _thread._local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _hooks:
            return None
        busy = self._busy.__dict__.setdefault("names", set())
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None or isinstance(spec.loader, type):
            return spec
        loader = spec.loader
        orig = getattr(loader, "exec_module", None)
        if orig is None or getattr(orig, "_grademl_post", False):
            return spec

        def exec_module(module, _orig=orig, _name=fullname, _loader=loader):
            try:
                _orig(module)
            finally:
                # one-shot: restore the loader's own method
                try:
                    del _loader.exec_module
                except Exception:
                    pass
            _run_hooks(_name, module)

        exec_module._grademl_post = True
        try:
            loader.exec_module = exec_module  # per-module loader instance (SourceFileLoader)
        except Exception:
            return spec
        return spec


def register(modname, fn):
    """Run fn(module) once modname has been imported (now if it already is)."""
    with _lock:
        _hooks.setdefault(modname, []).append(fn)
        mod = sys.modules.get(modname)
    if mod is not None and getattr(getattr(mod, "__spec__", None), "_initializing", False) is False:
        _run_hooks(modname, mod)


def install():
    """Install the post-import hooks (idempotent). Returns True when installed."""
    global _installed
    with _lock:
        if _installed:
            return True
        import grademl

        if not grademl.enabled() and os.environ.get("GRADEML_AUTO_FORCE") != "1":
            return False
        _installed = True
        sys.meta_path.insert(0, _PostImportFinder())
    # Each hook module is imported only when the module it patches is (a program that never
    # imports torch never loads grademl.auto.torch): the start-up cost stays small.
    for modname, (hook_module, function) in _LAZY_HOOKS.items():
        register(modname, _lazy(hook_module, function))
    return True


# module imported by the program -> (grademl.auto module, function that patches it); the
# same as each module's register_hooks() says.
_LAZY_HOOKS = {
    "torch": ("torch", "_patch_torch"),
    "sklearn.base": ("sklearn", "_patch_base"),
    "pandas": ("io", "_patch_pandas"),
    "numpy": ("io", "_patch_numpy"),
    "pickle": ("io", "_patch_pickle"),
    "joblib": ("io", "_patch_joblib"),
    "distributed.preloading": ("dask", "_patch_preloading"),
}


def _lazy(hook_module, function):
    def hook(module):
        import importlib

        getattr(importlib.import_module(f"{__name__}.{hook_module}"), function)(module)

    hook.__name__ = f"{hook_module}.{function}"
    return hook
