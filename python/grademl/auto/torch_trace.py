"""Traces written by PyTorch's own profiler, told to grademl so that `grademl run` imports
them at the end of the run under the process that wrote them (docs/import.md, "Stitched
under the process that wrote it").

Wrapped: torch.profiler.profile.export_chrome_trace (which tensorboard_trace_handler and any
on_trace_ready handler call) and torch.autograd.profiler.profile.export_chrome_trace (torch
1.13's own profiler). Each export is a phase "torch.profiler export" of type "trace_export"
on the writing thread, tagged when the export succeeded with:

  trace.path       the file's absolute path (the .gz one when torch gzipped it)
  trace.anchor_ns  wall-clock ns (CLOCK_REALTIME) of the profiler's start: what the
                   timestamps of torch's own export without Kineto are relative to (its
                   ts = event start in us - kineto_results.trace_start_us()); absent when
                   this torch does not say
  trace.writer     torch.profiler / torch.autograd.profiler

The inner export that torch.profiler's export calls is not a second phase (one file, one
phase). A failing export (torch raised) is a phase without tags: nothing is imported.
"""
import os
import threading

import grademl as _g

from . import _disabled, guard

_tls = threading.local()
_HOOK = "trace_export"


def patch(torch):
    try:
        from torch.autograd import profiler as autograd_profiler

        _wrap(autograd_profiler.profile, "torch.autograd.profiler", lambda p: p)
    except Exception as e:
        guard(_HOOK, e)
    try:
        from torch.profiler import profiler as tp

        cls = getattr(tp, "_KinetoProfile", None) or tp.profile
        _wrap(cls, "torch.profiler", lambda p: getattr(p, "profiler", None))
    except Exception as e:
        guard(_HOOK, e)


def anchor_ns(autograd_prof):
    """Wall-clock ns of the profiler's start, as torch measured it, or None."""
    results = getattr(autograd_prof, "kineto_results", None)
    if results is None:
        return None
    ns = getattr(results, "trace_start_ns", None)
    if callable(ns):
        return int(ns())
    us = getattr(results, "trace_start_us", None)
    if callable(us):
        return int(us()) * 1000
    return None


def _wrap(cls, writer, autograd_of):
    orig = cls.__dict__.get("export_chrome_trace")
    if orig is None or getattr(orig, "_grademl_wrapped", False):
        return

    def export_chrome_trace(self, path, *args, **kwargs):
        if not _g._on or _HOOK in _disabled or getattr(_tls, "depth", 0):
            return orig(self, path, *args, **kwargs)
        try:
            _g._begin_typed("torch.profiler export", "trace_export")
        except Exception as e:
            guard(_HOOK, e)
            return orig(self, path, *args, **kwargs)
        _tls.depth = 1
        try:
            result = orig(self, path, *args, **kwargs)
            _tag_export(self, path, writer, autograd_of)
            return result
        finally:
            _tls.depth = 0
            _g._end()

    export_chrome_trace._grademl_wrapped = True
    export_chrome_trace.__doc__ = orig.__doc__
    export_chrome_trace.__name__ = orig.__name__
    export_chrome_trace.__qualname__ = getattr(orig, "__qualname__", orig.__name__)
    cls.export_chrome_trace = export_chrome_trace


def _tag_export(prof, path, writer, autograd_of):
    try:
        full = os.path.abspath(os.fspath(path))
        tags = [("trace.path", full), ("trace.writer", writer)]
        inner = autograd_of(prof)
        anchor = anchor_ns(inner) if inner is not None else None
        if anchor is not None:
            tags.append(("trace.anchor_ns", str(anchor)))
        b = _g._b
        for k, v in tags:
            b.tag(_g._id(k), _g._id(_g._safe(v)))
    except Exception as e:
        guard(_HOOK, e)
