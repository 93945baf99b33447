"""GradeML instrumentation for Python programs.

    import grademl
    with grademl.phase("train", epoch=3): ...
    @grademl.phase("load")      # or bare @grademl.phase (name = the function's qualname)
    def load(): ...
    grademl.begin("step", i=1); grademl.end()
    grademl.instant("checkpoint"); grademl.counter("loss", 0.25)
    grademl.flow_out(42); grademl.flow_in(42)
    grademl.tag_process("rank", 3)   # this process's own phase, from any thread
    grademl.enabled()

Events are recorded only under `grademl run` (GRADEML_EVENTS_DIR and GRADEML_LIBRARY set
and the library's event file open); otherwise every call is a near-free no-op and
importing grademl never fails.
"""
import os as _os

__all__ = ["phase", "begin", "end", "instant", "counter", "flow_out", "flow_in", "tag", "tag_process", "enabled"]

_b = None        # the backend (see _backend.py) or None
_on = False      # events are being recorded
_ids = {}        # name -> interned id (shared with the C extension when it is the backend)
_native = False  # _b is the C extension (phase() is its Phase type)


_NUL_MESSAGE = "grademl: a name or tag cannot contain a NUL character"


def _check(name):
    """Names, types and tags with NUL are refused, with or without grademl (a C string would
    cut them short). Returns the name as str."""
    s = name if type(name) is str else str(name)
    if "\0" in s:
        raise ValueError(_NUL_MESSAGE)
    return s


def _check_tags(tags):
    for k, v in tags.items():
        _check(k)
        _check(v)


def _id(name):
    i = _ids.get(name)
    if i is None:
        i = _ids[name] = _b.intern(_check(name))
    return i


def _safe(s):
    """For auto-instrumentation, which must never raise: NUL shown as \\x00."""
    return s.replace("\0", "\\x00") if "\0" in s else s


def enabled():
    """True when events are being recorded."""
    return _on


# ---------------------------------------------------------------- disabled mode

class _NullPhase:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def __call__(self, func):
        return func


_NULL = _NullPhase()


def _null_phase(name=None, *, phase_type=None, **tags):
    if name is not None and not isinstance(name, str) and callable(name):
        return name  # bare decorator
    if name is not None:
        _check(name)
    if phase_type is not None:
        _check(phase_type)
    if tags:
        _check_tags(tags)
    return _NULL


# ---------------------------------------------------------------- generic (any backend)

def _qualname(func):
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)


def _decorate(ph, func):
    """Wrap func in the phase ph (a native Phase or a _PyPhase; both are reusable)."""
    enter, exit_ = ph.__enter__, ph.__exit__

    import functools as _functools  # here: not a cost of every Python start under grademl run

    @_functools.wraps(func)
    def wrapper(*args, **kwargs):
        enter()
        try:
            return func(*args, **kwargs)
        finally:
            exit_(None, None, None)

    return wrapper


class _PyPhase:
    """Phase for non-native backends (ctypes, test recorders)."""

    __slots__ = ("name", "ptype", "tags")

    def __new__(cls, name, *, phase_type=None, **tags):
        if not isinstance(name, str) and callable(name):
            self = object.__new__(cls)
            self.name, self.ptype, self.tags = _qualname(name), phase_type, tags
            return _decorate(self, name)
        self = object.__new__(cls)
        self.name, self.ptype, self.tags = _check(name), phase_type, tags
        if phase_type is not None:
            _check(phase_type)
        _check_tags(tags)
        return self

    def __enter__(self):
        _begin(self.name, self.ptype, self.tags)
        return self

    def __exit__(self, *exc):
        _b.end()
        return None

    def __call__(self, func):
        return _decorate(self, func)


def _begin(name, ptype, tags):
    b = _b
    # Every name interned (and checked) before the phase begins: a refused one leaves no
    # phase open.
    nid = _id(name)
    tid = None if ptype is None else _id(str(ptype))
    tag_ids = [(_id(k), v, True) if _is_int64(v) else (_id(k), _id(v if type(v) is str else str(v)), False)
               for k, v in tags.items()] if tags else ()
    if tid is None:
        b.begin(nid)
    else:
        b.begin_typed(nid, tid)
    for k, v, is_int in tag_ids:
        if is_int:
            b.tag_int(k, v)
        else:
            b.tag(k, v)


def _is_int64(v):
    """An int value (not a bool) that is written as it is, with no name interned for it: a
    counter in a loop would otherwise make a name per phase (the collector bounds names and
    turns the later ones into placeholders). The store holds the same text str(v) gives."""
    return type(v) is int and -(1 << 63) <= v < (1 << 63)


# ---------------------------------------------------------------- public API

phase = _null_phase
phase.__doc__ = """phase(name, *, phase_type=None, **tags): a context manager and decorator.

    with grademl.phase("train", epoch=3): ...   # tag values are str()-ed
    @grademl.phase("load") / @grademl.phase      # decorator forms
"""


def begin(name, *, phase_type=None, **tags):
    """Open a phase on this thread (close it with end())."""
    if _on:
        _begin(name if type(name) is str else str(name), phase_type, tags)
    else:
        _null_phase(name, phase_type=phase_type, **tags)


def end():
    """Close the innermost open phase of this thread."""
    if _on:
        _b.end()


def instant(name):
    if _on:
        _b.instant(_id(name if type(name) is str else str(name)))
    else:
        _check(name)


def counter(name, value):
    if _on:
        _b.counter(_id(name if type(name) is str else str(name)), float(value))
    else:
        _check(name)


def flow_out(flow_id):
    if _on:
        _b.flow_out(int(flow_id) & 0xFFFFFFFFFFFFFFFF)


def flow_in(flow_id):
    if _on:
        _b.flow_in(int(flow_id) & 0xFFFFFFFFFFFFFFFF)


def tag(key, value):
    """Tag the innermost open phase."""
    if _on:
        if _is_int64(value):
            _b.tag_int(_id(str(key)), value)
        else:
            _b.tag(_id(str(key)), _id(value if type(value) is str else str(value)))
    else:
        _check(key)
        _check(value)


def tag_process(key, value):
    """Tag this process's own phase (not the innermost open phase) with key=value, from any
    thread, inside or outside phases: e.g. tag_process("rank", 3)."""
    if _on:
        _b.tag_process(_id(str(key)), _id(value if type(value) is str else str(value)))
    else:
        _check(key)
        _check(value)


# Internal helpers for grademl.auto: typed begin with a tuple of (key, value) pairs, values
# str, or int (written without interning: sequence numbers, sizes).
def _begin_typed(name, ptype, tags=()):
    b = _b
    b.begin_typed(_id(_safe(name)), _id(_safe(ptype)))
    # _tag_typed's loop, inlined: one call less on every phase the auto-instrumentation records.
    for k, v in tags:
        if type(v) is int:
            b.tag_int(_id(_safe(k)), v)
        else:
            b.tag(_id(_safe(k)), _id(_safe(v)))


def _tag_typed(tags):
    """Tags the innermost open phase of this thread with (key, value) pairs, values str or int,
    as _begin_typed does."""
    b = _b
    for k, v in tags:
        if type(v) is int:
            b.tag_int(_id(_safe(k)), v)
        else:
            b.tag(_id(_safe(k)), _id(_safe(v)))


def _end():
    _b.end()


def _now():
    """The event clock's reading (opaque ticks) for _complete; 0 when disabled."""
    return _b.now()


def _prepare(name, ptype, tags=()):
    """The names of a phase to come, interned now (on the thread that has them): for
    _complete, which may run on another thread."""
    return (_b, _id(_safe(name)), _id(_safe(ptype)),
            tuple((_id(_safe(k)), v if type(v) is int else _id(_safe(v)), type(v) is int) for k, v in tags))


def _complete(prepared, start, end):
    """A phase that ran from `start` to `end` (_now() readings, possibly taken on other
    threads), written at once by the calling thread: an operation seen complete only later
    (an asynchronous collective, from the thread that completed it). `prepared` is
    _prepare(name, type, tags). It nests under this thread's innermost open phase that
    began at or before `start`. Nothing is written when the backend changed since."""
    b, nid, tid, tag_ids = prepared
    if b is not _b:
        return
    b.begin_at(nid, tid, start)
    for k, v, is_int in tag_ids:
        if is_int:
            b.tag_int(k, v)
        else:
            b.tag(k, v)
    b.end_at(end)


def _tag_process(key, value):
    """For grademl.auto: tag_process without the public checks (NUL shown as \\x00)."""
    _b.tag_process(_id(_safe(key)), _id(_safe(value)))


# ---------------------------------------------------------------- backend selection

def _set_backend(backend):
    """Install a backend (None disables). Used at import and by tests (fake recorders)."""
    global _b, _on, _ids, _native, phase
    prev = _b
    if prev is not backend and prev is not None and hasattr(prev, "set_active"):
        prev.set_active(False)  # its auto-instrumentation hooks stop recording
    _b = backend
    _on = backend is not None
    _native = _on and hasattr(backend, "Phase") and hasattr(backend, "ids")
    if _native:
        _ids = backend.ids
        _ids.clear()
        backend.set_decorator(_decorate)
        if hasattr(backend, "set_active"):
            backend.set_active(True)  # its hooks record (once grademl.auto configured them)
        phase = backend.Phase
    else:
        _ids = {}
        phase = _PyPhase if _on else _null_phase
    return backend


try:
    from . import _backend as _backend_mod

    _set_backend(_backend_mod.load())
except Exception:  # importing grademl must never fail
    _set_backend(None)
