"""I/O auto-instrumentation: phases of type "io".

pandas.read_csv, pandas.read_parquet, DataFrame.to_csv, DataFrame.to_parquet,
numpy.load, numpy.save, numpy.savez, numpy.savez_compressed: phase "<func>", tag
path=<path> (first path argument, when it is a str or os.PathLike).

pickle.dump / pickle.load, joblib.dump / joblib.load, torch.save / torch.load (the last
two patched from torch.py): phase "pickle.dump", "joblib.load", "torch.save", ... (only the
outermost of these per thread: a pickle.dump inside torch.save is not a phase of its own),
tags path=<path> (a path argument, or the .name of a file object opened on a path) and
bytes=N (pickle on a file object: how far the call moved the file's position; otherwise the
size of the named file after the call; none for an unnamed file object such as BytesIO, or
when the call raised). pickle.dumps / pickle.loads (in memory, used by multiprocessing
for every message) are not instrumented.
"""
import functools
import io as _stdio
import os
import sys
import threading

import grademl as _g

from . import _disabled, guard


def register_hooks(register):
    register("pandas", _patch_pandas)
    register("numpy", _patch_numpy)
    register("pickle", _patch_pickle)
    register("joblib", _patch_joblib)


_PATH_KW = ("filepath_or_buffer", "path_or_buf", "path", "file")


def _wrap(func, name, path_index):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not _g._on or "io" in _disabled:
            return func(*args, **kwargs)
        try:
            tags = ()
            if len(args) > path_index:
                p = args[path_index]
            else:
                p = next((kwargs[k] for k in _PATH_KW if k in kwargs), None)
            if isinstance(p, (str, os.PathLike)):
                p = os.fspath(p)
                tags = (("path", p if isinstance(p, str) else os.fsdecode(p)),)
            _g._begin_typed(name, "io", tags)
        except Exception as e:
            guard("io", e)
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        finally:
            _g._end()

    wrapper._grademl_wrapped = True
    return wrapper


def _patch(owner, attr, name, path_index):
    try:
        f = getattr(owner, attr, None)
        if f is None or getattr(f, "_grademl_wrapped", False):
            return
        setattr(owner, attr, _wrap(f, name, path_index))
    except Exception as e:
        guard("io", e)


def _patch_pandas(pd):
    _patch(pd, "read_csv", "read_csv", 0)
    _patch(pd, "read_parquet", "read_parquet", 0)
    _patch(pd.DataFrame, "to_csv", "to_csv", 1)
    _patch(pd.DataFrame, "to_parquet", "to_parquet", 1)


def _patch_numpy(np):
    for f in ("load", "save", "savez", "savez_compressed"):
        _patch(np, f, f, 0)


# ------------------------------------------------------------------ serialisation (outermost only)

_depth = threading.local()  # an outermost serialisation phase is open on this thread
_TARGET_KW = ("file", "f", "filename")


_is_file_type = {}  # type -> isinstance of io.IOBase (an ABC: a cached check is 10x cheaper)


def _is_file(obj):
    t = type(obj)
    r = _is_file_type.get(t)
    if r is None:
        r = _is_file_type[t] = isinstance(obj, _stdio.IOBase)
    return r


def _tell(target):
    """The position of a file object, or None (not seekable)."""
    try:
        return target.tell()
    except Exception:
        return None


def _serialisation_wrapper(func, name, target_index, sequential):
    depth = _depth

    def wrapper(*args, **kwargs):
        if not _g._on or "io" in _disabled or depth.__dict__.get("open"):
            return func(*args, **kwargs)
        try:
            target = args[target_index] if len(args) > target_index else \
                next((kwargs[k] for k in _TARGET_KW if k in kwargs), None)
            path = start = None
            if type(target) is str:
                path = target
            elif hasattr(type(target), "__fspath__"):  # os.PathLike, without the ABC's cost
                path = os.fspath(target)
            elif _is_file(target):
                path = getattr(target, "name", None)  # an int for a file opened on a descriptor
                if not isinstance(path, (str, bytes)):
                    path = None
                if sequential:
                    start = _tell(target)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            _g._begin_typed(name, "io", (("path", path),) if path is not None else ())
        except Exception as e:
            guard("io", e)
            return func(*args, **kwargs)
        depth.open = True
        done = False
        try:
            result = func(*args, **kwargs)
            done = True
            return result
        finally:
            depth.open = False
            if done:
                try:
                    if start is not None:
                        end = _tell(target)
                        size = end - start if end is not None and end >= start else None
                    elif path is not None:
                        size = os.stat(path).st_size
                    else:
                        size = None
                    if size is not None:
                        _g._b.tag(_g._id("bytes"), _g._id(str(size)))
                except Exception:
                    pass  # a file removed or replaced meanwhile: no size
            _g._end()

    try:
        functools.update_wrapper(wrapper, func)
    except Exception:
        pass
    wrapper._grademl_wrapped = True
    return wrapper


def patch_function(owner, attr, name, target_index, also=None, sequential=False):
    """Replaces owner.attr with a serialisation-phase wrapper; also.attr too when it is the
    same function (torch.serialization.save is torch.save). Pickling the function by
    reference (module + name) still finds the wrapper. sequential: the function reads or
    writes a file object front to back (pickle), so how far its position moved is the byte
    count; otherwise (torch's zip files seek around) a file object's size is that of the
    file it names, if any."""
    try:
        f = getattr(owner, attr, None)
        if f is None or getattr(f, "_grademl_wrapped", False):
            return
        w = _serialisation_wrapper(f, name, target_index, sequential)
        setattr(owner, attr, w)
        if also is not None and also is not owner and getattr(also, attr, None) is f:
            setattr(also, attr, w)
        home = sys.modules.get(getattr(f, "__module__", None) or "")
        if home is None or getattr(home, getattr(f, "__qualname__", attr), None) is not w:
            w.__module__ = owner.__name__
            w.__qualname__ = attr
    except Exception as e:
        guard("io", e)


def _patch_pickle(pickle):
    patch_function(pickle, "dump", "pickle.dump", 1, sequential=True)
    patch_function(pickle, "load", "pickle.load", 0, sequential=True)


def _patch_joblib(joblib):
    impl = sys.modules.get("joblib.numpy_pickle")
    patch_function(joblib, "dump", "joblib.dump", 1, also=impl)
    patch_function(joblib, "load", "joblib.load", 0, also=impl)
