"""pandas / numpy I/O auto-instrumentation: phase "<func>" type "io", tag path=<path>
(first path argument, when it is a str or os.PathLike).

pandas.read_csv, pandas.read_parquet, DataFrame.to_csv, DataFrame.to_parquet,
numpy.load, numpy.save, numpy.savez, numpy.savez_compressed.
"""
import functools
import os

import grademl as _g

from . import _disabled, guard


def register_hooks(register):
    register("pandas", _patch_pandas)
    register("numpy", _patch_numpy)


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
