"""Finds the backend that records events: the C extension (fast), else ctypes, else none.

A backend is any object with the functions of libgrademl's C ABI, taking Python
values: enabled(), intern(str) -> int, begin(id), begin_typed(id, type_id), end(),
tag(key_id, value_id), tag_str(key, value), instant(id), counter(id, float),
flow_out(int), flow_in(int), now() -> int, begin_at(id, type_id, ticks), end_at(ticks),
tag_process(key_id, value_id), tag_int(key_id, int). The native module additionally has Phase and ids.
"""
import _imp
import os
import sys

# The import system's own modules, always loaded: `importlib` itself (and the `warnings` it
# imports) would add milliseconds to every Python start under grademl run.
import _frozen_importlib as _bootstrap
import _frozen_importlib_external as _bootstrap_external

_EXT_SUFFIXES = tuple(_imp.extension_suffixes())


def _load_ext(path, modname):
    loader = _bootstrap_external.ExtensionFileLoader(modname, path)
    spec = _bootstrap.spec_from_loader(modname, loader, origin=path)
    mod = _bootstrap.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _native():
    """The C extension: in-place (python/grademl/_native*.so) or built by CMake next to
    libgrademl.so (_grademl_native*.so)."""
    lib = os.environ.get("GRADEML_LIBRARY")
    if not lib:
        return None
    candidates = []
    here = os.path.dirname(os.path.abspath(__file__))
    for suf in _EXT_SUFFIXES:
        candidates.append((os.path.join(here, "_native" + suf), "grademl._native"))
    libdir = os.path.dirname(os.path.abspath(lib))
    for suf in _EXT_SUFFIXES:
        candidates.append((os.path.join(libdir, "_grademl_native" + suf), "_grademl_native"))
    for path, modname in candidates:
        if os.path.isfile(path):
            try:
                return _load_ext(path, modname)
            except Exception:
                continue
    return None


NUL_MESSAGE = "grademl: a name or tag cannot contain a NUL character"


def _encode(s):
    """A name as C bytes: lone surrogates shown as \\udcff (never an error), NUL refused."""
    b = str(s).encode("utf-8", "backslashreplace")
    if b"\0" in b:
        raise ValueError(NUL_MESSAGE)
    return b


class _CtypesBackend:
    """Fallback when the extension is not built: the C ABI through ctypes."""

    def __init__(self, path):
        import ctypes as C

        lib = C.CDLL(path)
        u32, u64 = C.c_uint32, C.c_uint64

        def fn(name, res, *args):
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = list(args)
            return f

        self.enabled = fn("grademl_enabled", C.c_int)
        _intern = fn("grademl_intern", u32, C.c_char_p)
        self.intern = lambda s: _intern(_encode(s))
        self.begin = fn("grademl_begin", None, u32)
        self.begin_typed = fn("grademl_begin_typed", None, u32, u32)
        self.end = fn("grademl_end", None)
        self.tag = fn("grademl_tag", None, u32, u32)
        _tag_str = fn("grademl_tag_str", None, C.c_char_p, C.c_char_p)
        self.tag_str = lambda k, v: _tag_str(_encode(k), _encode(v))
        self.instant = fn("grademl_instant", None, u32)
        self.counter = fn("grademl_counter", None, u32, C.c_double)
        self.flow_out = fn("grademl_flow_out", None, u64)
        self.flow_in = fn("grademl_flow_in", None, u64)
        self.now = fn("grademl_now", u64)
        self.begin_at = fn("grademl_begin_at", None, u32, u32, u64)
        self.end_at = fn("grademl_end_at", None, u64)
        self.tag_process = fn("grademl_tag_process", None, u32, u32)
        self.tag_int = fn("grademl_tag_int", None, u32, C.c_int64)
        self.library = path


def load():
    """The backend to use, or None (disabled). Never raises."""
    if os.environ.get("GRADEML_DISABLE") == "1":
        return None
    lib = os.environ.get("GRADEML_LIBRARY")
    if not lib or not os.environ.get("GRADEML_EVENTS_DIR"):
        return None
    b = None
    if os.environ.get("GRADEML_CTYPES") != "1":
        try:
            b = _native()
        except Exception:
            b = None
    if b is None:
        try:
            b = _CtypesBackend(lib)
        except Exception as e:  # library missing or incomplete: stay silent, stay disabled
            if os.environ.get("GRADEML_DEBUG"):
                print(f"grademl: cannot load {lib}: {e}", file=sys.stderr)
            return None
    try:
        if not b.enabled():
            return None
    except Exception:
        return None
    return b
