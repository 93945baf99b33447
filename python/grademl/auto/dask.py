"""Dask distributed: makes sure every scheduler started under `grademl run` loads grademl's
scheduler plugin (grademl/dask_plugin.py), merged with the user's own preloads.

`grademl run` names the plugin in the environment (DASK_DISTRIBUTED__SCHEDULER__PRELOAD,
merged with the user's variable of that name). That covers a scheduler that takes its
preloads from Dask's configuration. This hook, run once `distributed.preloading` is
imported, wraps `process_preloads`, where a scheduler turns its preload list into modules:
  - a list given explicitly (Scheduler(preload=...), `dask scheduler --preload x`) gets the
    plugin appended;
  - when the environment variable was grademl's alone (GRADEML_DASK_PRELOAD_REPLACED=1), it
    replaced whatever the user's YAML configuration (~/.config/dask, DASK_CONFIG, ...) listed:
    those preloads are put back in front of the plugin, with the YAML's preload-argv when
    grademl had set that variable too (GRADEML_DASK_ARGV_REPLACED=1), else the user's;
  - a preload-argv given per preload (a list of lists) gets an empty entry for the plugin,
    so that the lengths still match.
Any error leaves the arguments as they were (GRADEML_DEBUG=1 says why).
"""
import os
import sys

from . import debug

_MODULE = "grademl.dask_plugin"


def register_hooks(register):
    register("distributed.preloading", _patch_preloading)


def _is_scheduler(server):
    # A Scheduler's module is loaded wherever one exists: never import it here (a worker
    # process calls process_preloads too).
    module = sys.modules.get("distributed.scheduler")
    try:
        return module is not None and isinstance(server, module.Scheduler)
    except Exception:
        return False


def _yaml_preloads(with_argv):
    """The scheduler preloads (and, when `with_argv`, their argv) that Dask's YAML files
    alone configure; the argv is None when not asked for."""
    import dask.config

    merged = dask.config.merge(*dask.config.collect_yaml(dask.config.paths))
    preload = dask.config.get("distributed.scheduler.preload", default=[], config=merged) or []
    argv = None
    if with_argv:
        argv = list(dask.config.get("distributed.scheduler.preload-argv", default=[], config=merged) or [])
    return ([preload] if isinstance(preload, str) else list(preload)), argv


def merge_preloads(preload, preload_argv, replaced_yaml=None):
    """The preload list and argv with grademl's plugin added (pure but for replaced_yaml, a
    function giving the YAML's preloads and, when grademl replaced the argv too, their argv;
    called when the list is grademl's alone)."""
    preload = [preload] if isinstance(preload, str) else list(preload or ())
    argv = list(preload_argv or ())
    if replaced_yaml is not None and preload == [_MODULE]:
        yaml_preload, yaml_argv = replaced_yaml()
        preload = [p for p in yaml_preload if p != _MODULE] + [_MODULE]
        if yaml_argv is not None:
            argv = yaml_argv
    per_preload = bool(argv) and not isinstance(argv[0], str)
    if _MODULE not in preload:
        preload.append(_MODULE)
    if per_preload and len(argv) == len(preload) - 1:
        argv.insert(preload.index(_MODULE), [])
    return preload, argv


def without_plugin(preload, preload_argv):
    """The preload list and argv with grademl's plugin taken out."""
    preload = [preload] if isinstance(preload, str) else list(preload or ())
    argv = list(preload_argv or ())
    if _MODULE not in preload:
        return preload, argv
    at = preload.index(_MODULE)
    if argv and not isinstance(argv[0], str) and len(argv) == len(preload):
        del argv[at]
    del preload[at]
    return preload, argv


def _patch_preloading(preloading):
    original = preloading.process_preloads
    if getattr(original, "_grademl_wrapped", False):
        return

    def process_preloads(dask_server, preload, preload_argv, *args, **kwargs):
        merged = None
        if os.environ.get("GRADEML_EVENTS_DIR") and _is_scheduler(dask_server):
            try:
                replaced = None
                if os.environ.get("GRADEML_DASK_PRELOAD_REPLACED") == "1":
                    argv_too = os.environ.get("GRADEML_DASK_ARGV_REPLACED") == "1"
                    replaced = lambda: _yaml_preloads(argv_too)  # noqa: E731
                merged = merge_preloads(preload, preload_argv, replaced)
            except Exception as e:
                debug(f"dask preloads left as they were: {e!r}")
        if merged is not None:
            try:
                return original(dask_server, merged[0], merged[1], *args, **kwargs)
            except Exception as e:
                # Whatever failed, the scheduler gets what it would have had without grademl.
                debug(f"dask preloads with grademl's plugin failed ({e!r}); without it")
                preload, preload_argv = without_plugin(preload, preload_argv)
        return original(dask_server, preload, preload_argv, *args, **kwargs)

    process_preloads._grademl_wrapped = True
    process_preloads.__wrapped__ = original
    preloading.process_preloads = process_preloads
