"""PyTorch (1.13+) auto-instrumentation.

Phases (name / type):
  epoch / epoch              each DataLoader.__iter__ (tag epoch=k, per DataLoader object),
                             until the iterator is exhausted, dropped, or a new one made;
                             tags mode=train|eval, num_workers=N, torch_threads=N
  dataloader.next / data_wait  each __next__ on that iterator (also the final one that
                             raises StopIteration)
  iteration / iteration      from a batch's arrival to the next __next__; tags
                             mode=train|eval, num_workers=N
  forward / forward          outermost nn.Module.__call__ per thread (tag mode=eval when
                             grad is disabled: torch.no_grad() / inference_mode)
  backward / backward        outermost Tensor.backward / torch.autograd.backward
  optimizer.step / optimizer_step  outermost step() of any torch.optim.Optimizer subclass
  <LossClass> / loss         an outermost call of a loss module (nn.CrossEntropyLoss()(...))
  torch.profiler export / trace_export  each export_chrome_trace of torch's profiler, tagged
                             trace.path / trace.anchor_ns: grademl imports it (torch_trace.py)
  <collective> / collective  torch.distributed's collectives and DDP's gradient buckets, the
                             process tagged with its rank (torch_distributed.py)
  torch_threads=N            torch.get_num_threads(): on every epoch (at its start), and on
                             the process's first forward phase and any forward phase after
                             which it changed (programs without a DataLoader have it too)

Train or eval (tag mode on iteration and epoch phases), decided when the phase ends from
what ran in it on its thread: an iteration in which a backward pass or an optimizer step
ran is "train"; otherwise it is "eval" when grad was disabled (torch.no_grad() /
inference_mode()) at its start or at a forward / loss call in it, or a model called in it
was in eval mode (model.training False); otherwise "train". An epoch is "train" when any of
its iterations was, else "eval" when any was; an epoch without iterations is "eval" when
grad was disabled at its start.

Opt-in finer detail (GRADEML_AUTO_DETAIL, comma-separated; `grademl run --auto-detail`):
  modules: <ModuleClass> / module   every nn.Module call, nested as the modules are
  ops:     <aten op> / op           every ATen operator run on the main thread (forward and
                                    backward), through a TorchDispatchMode
"""
import functools
import os
import threading
import weakref

import grademl as _g

from . import _disabled, guard
from . import tuning as _tuning

_tls = threading.local()  # forward / backward / step nesting depth per thread


class _Signals(threading.local):
    """Per thread, what ran so far that tells training from evaluation: backward passes and
    optimizer steps (train), forward / loss calls with grad disabled or a model in eval mode
    (eval). An iteration compares the counts at its start and end (nested loops each see
    their own share)."""

    def __init__(self):
        self.train = 0
        self.eval = 0


# The C extension's hooks (grademl._native.Hook) when it is grademl's backend: the per-call
# work of the wrappers below runs in C, with these per-thread counters; else Python wrappers.
_native = _g._b if _tuning.fine is not None and _tuning.fine is getattr(_g._b, "fine", None) else None
_signals = _native.signals if _native is not None else _Signals()
_FORWARD = object()  # tags_fn of the forward / loss hooks, in C: grad mode and torch_threads
_SLOTS = {}          # depth attribute -> the native hooks' depth slot


def _slot(attr):
    s = _SLOTS.get(attr)
    if s is None:
        s = _SLOTS[attr] = len(_SLOTS)
    return s


def _count_train(args=None):
    _signals.train += 1
    return ()


def register_hooks(register):
    register("torch", _patch_torch)


def _detail():
    return {d.strip() for d in os.environ.get("GRADEML_AUTO_DETAIL", "").split(",") if d.strip()}


def _patch_torch(torch):
    steps = [_setup_tuning, _patch_module_call, _patch_backward, _patch_optimizers, _patch_dataloader,
             _patch_serialization, _patch_profiler_export, _patch_distributed]
    if "ops" in _detail():
        steps.append(_enable_op_detail)
    for fn in steps:
        try:
            fn(torch)
        except Exception as e:
            guard(f"torch:{fn.__name__}", e)


def _patch_profiler_export(torch):
    """Traces written by torch's profiler: a phase "torch.profiler export" tagged with the
    file's path and the profiler's start, so grademl imports the trace (torch_trace.py)."""
    from . import torch_trace

    torch_trace.patch(torch)


def _patch_distributed(torch):
    """torch.distributed: ranks, collectives, DDP's gradient buckets (torch_distributed.py)."""
    from . import torch_distributed

    torch_distributed.patch(torch)


def _patch_serialization(torch):
    """torch.save / torch.load: phases "torch.save" / "torch.load" of type io (see io.py)."""
    from . import io as _io

    _io.patch_function(torch, "save", "torch.save", 1, also=getattr(torch, "serialization", None))
    _io.patch_function(torch, "load", "torch.load", 0, also=getattr(torch, "serialization", None))


# ------------------------------------------------------------------ outermost-only wrappers

def _has_threads_tag(tags):
    for k, _ in tags:
        if k == "torch_threads":
            return True
    return False


def _outermost(func, name, ptype, attr, tags_fn=None, hook=None):
    """Wrap func in phase name/ptype, only when no such wrapper is active on this thread.
    Inside an iteration whose fine phases are not recorded (tuning.py), the call is timed
    only, for the epoch's exact counts and totals."""
    hook = hook or name
    if _native is not None and (tags_fn is None or tags_fn is _count_train or tags_fn is _FORWARD) \
            and (attr in _SLOTS or len(_SLOTS) < 8):
        kind = 0 if tags_fn is None else 1 if tags_fn is _count_train else 2
        w = _native.Hook(func, _g._safe(name), _g._safe(ptype), _slot(attr), hook, kind)
        functools.update_wrapper(w, func)
        w._grademl_wrapped = True
        return w
    fine = _tuning.fine
    pc = _tuning._pc
    accumulate = _tuning.accumulate
    costs = _tuning.costs

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not _g._on or hook in _disabled:
            return func(*args, **kwargs)
        tls = _tls
        depth = getattr(tls, attr, 0)
        if depth:
            setattr(tls, attr, depth + 1)
            try:
                return func(*args, **kwargs)
            finally:
                setattr(tls, attr, depth)
        try:
            tags = tags_fn(args) if tags_fn else ()
        except Exception as e:
            guard(hook, e)
            return func(*args, **kwargs)
        if not fine.record and not (tags and _has_threads_tag(tags)):
            fine.timed += 1
            setattr(tls, attr, 1)
            t0 = pc()
            try:
                return func(*args, **kwargs)
            finally:
                accumulate(ptype, pc() - t0)
                setattr(tls, attr, 0)
        n = fine.measure - 1
        fine.measure = n if n > 0 else _tuning.MEASURE_EVERY
        begin_ns = 0  # > 0: this phase's begin and end calls are timed (1 in MEASURE_EVERY)
        try:
            if n > 0:
                _g._begin_typed(name, ptype, tags)
            else:
                t0 = pc()
                _g._begin_typed(name, ptype, tags)
                begin_ns = pc() - t0
        except Exception as e:
            guard(hook, e)
            return func(*args, **kwargs)
        fine.recorded += 1
        setattr(tls, attr, 1)
        try:
            return func(*args, **kwargs)
        finally:
            setattr(tls, attr, 0)
            if begin_ns:
                t0 = pc()
                _g._end()
                costs.observe(begin_ns + pc() - t0)
            else:
                _g._end()

    wrapper._grademl_wrapped = True
    return wrapper


def _patch_module_call(torch):
    Module = torch.nn.Module
    orig = Module.__dict__.get("__call__")
    if orig is None or getattr(orig, "_grademl_wrapped", False):
        return
    is_grad_enabled = torch.is_grad_enabled
    get_num_threads = torch.get_num_threads
    EVAL = (("mode", "eval"),)
    signals = _signals
    threads_tagged = [None]  # the torch_threads value last tagged on a forward phase

    def tags(args):
        # The forward phase's tag says whether grad was on; an eval-mode model (args[0] is
        # the module) is an evaluation signal for the enclosing iteration too.
        out = ()
        if is_grad_enabled():
            if args and getattr(args[0], "training", True) is False:
                signals.eval += 1
        else:
            signals.eval += 1
            out = EVAL
        n = get_num_threads()
        if n != threads_tagged[0]:
            threads_tagged[0] = n
            out = out + (("torch_threads", str(n)),)
        return out

    call = orig
    if "modules" in _detail():
        call = _every_module(orig)
    if _native is not None:
        tags = _FORWARD  # the same tags, computed in C
    forward = _outermost(call, "forward", "forward", "fwd", tags)
    try:
        Loss = torch.nn.modules.loss._Loss
    except AttributeError:
        Loss = None

    if _native is not None:
        def hook_of(cls):
            try:
                if Loss is not None and issubclass(cls, Loss):
                    return _outermost(call, cls.__name__, "loss", "fwd", tags, hook="loss")
            except Exception as e:
                guard("loss", e)
            return forward

        module_call = _native.ModuleCall(hook_of)  # the class's hook, found in C
        functools.update_wrapper(module_call, orig)
        module_call._grademl_wrapped = True
        Module.__call__ = module_call
        return

    wrapper_of = {}  # module class -> its wrapper

    # A loss module's outermost call is a phase "<LossClass>" of type "loss", not a
    # "forward": the model's forward pass and the loss are told apart. One dict lookup per call.
    @functools.wraps(orig)
    def module_call(self, *args, **kwargs):
        cls = type(self)
        w = wrapper_of.get(cls)
        if w is None:
            if Loss is not None and issubclass(cls, Loss):
                w = _outermost(call, cls.__name__, "loss", "fwd", tags, hook="loss")
            else:
                w = forward
            wrapper_of[cls] = w
        return w(self, *args, **kwargs)

    module_call._grademl_wrapped = True
    Module.__call__ = module_call


def _op_mode_class(torch):
    """A TorchDispatchMode that records each ATen operator as a phase of type "op"."""
    from torch.utils._python_dispatch import TorchDispatchMode

    begin, end = _g._begin_typed, _g._end
    names = {}
    fine = _tuning.fine

    class _OpPhases(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not _g._on or "ops" in _disabled:
                return func(*args, **(kwargs or {}))
            name = names.get(func)
            if name is None:
                name = names[func] = getattr(func.overloadpacket, "__name__", str(func))
            fine.ops += 1
            begin(name, "op")
            try:
                return func(*args, **(kwargs or {}))
            finally:
                end()

    return _OpPhases


def _enable_op_detail(torch):
    """Opt-in (GRADEML_AUTO_DETAIL=ops): a phase per ATen operator, named after it (addmm,
    relu, mm, ...), of type "op", for the operators run on the thread that imported torch
    (on CPU that includes backward). Uses a TorchDispatchMode, entered for the rest of the
    program; costs about 10 us per operator (docs/python.md)."""
    mode = _op_mode_class(torch)()
    mode.__enter__()
    _tls.op_mode = mode  # kept alive for the program's life


class _DeepOps:
    """--deep: the operator mode entered for a profiled iteration (and the data wait before
    it) and left at its end, on the DataLoader's thread (tuning.py decides which)."""

    def __init__(self, torch):
        self.mode_class = _op_mode_class(torch)
        self.mode = None

    def start(self):
        if self.mode is None:
            self.mode = self.mode_class()
            self.mode.__enter__()

    def stop(self):
        mode, self.mode = self.mode, None
        if mode is not None:
            mode.__exit__(None, None, None)


_deep = None  # _DeepOps under --deep, once torch is patched


def _setup_tuning(torch):
    """Measures the cost of a timed-only call (tuning.py); sets up --deep."""
    global _deep
    if _native is not None:
        _native.configure_hooks(_disabled, guard, _tuning.costs.observe, _tuning.MEASURE_EVERY,
                                torch.is_grad_enabled, torch.get_num_threads)
        _native.configure_loader(_tuning.WARMUP, _tuning.RETUNE_EVERY)
        _native.set_active(_g._b is _native)
    _tuning.costs.calibrate(_outermost)
    if _tuning.DEEP and "ops" not in _detail():
        _deep = _DeepOps(torch)


def _every_module(orig):
    """Opt-in finer detail (GRADEML_AUTO_DETAIL=modules, `grademl run --auto-detail modules`):
    a phase "<ModuleClass>" of type "module" for every nn.Module call, nested as the modules
    are, inside the outermost "forward". Costs a phase per module call (docs/python.md)."""
    names = {}

    fine = _tuning.fine

    def wrapper(self, *args, **kwargs):
        if not _g._on or "torch" in _disabled or not fine.record:
            return orig(self, *args, **kwargs)
        cls = type(self)
        name = names.get(cls)
        if name is None:
            name = names[cls] = cls.__name__
        try:
            _g._begin_typed(name, "module")
        except Exception as e:
            guard("torch", e)
            return orig(self, *args, **kwargs)
        try:
            return orig(self, *args, **kwargs)
        finally:
            _g._end()

    wrapper._grademl_wrapped = True
    return wrapper


def _patch_backward(torch):
    ag = torch.autograd
    if not getattr(ag.backward, "_grademl_wrapped", False):
        w = _outermost(ag.backward, "backward", "backward", "bwd", _count_train)
        ag.backward = w
    T = torch.Tensor
    tb = T.__dict__.get("backward")
    if tb is not None and not getattr(tb, "_grademl_wrapped", False):
        T.backward = _outermost(tb, "backward", "backward", "bwd", _count_train)


def _patch_optimizers(torch):
    Optimizer = torch.optim.Optimizer

    def wrap_class(cls):
        try:
            step = cls.__dict__.get("step")
            if step is None or getattr(step, "_grademl_wrapped", False) or isinstance(step, (staticmethod, classmethod)):
                return
            cls.step = _outermost(step, "optimizer.step", "optimizer_step", "opt", _count_train)
        except Exception as e:
            guard("optimizer.step", e)

    def walk(cls):
        for sub in cls.__subclasses__():
            wrap_class(sub)
            walk(sub)

    walk(Optimizer)
    prev = Optimizer.__dict__.get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if prev is not None:
            prev.__get__(None, cls)(**kwargs)
        else:
            super(Optimizer, cls).__init_subclass__(**kwargs)
        wrap_class(cls)

    Optimizer.__init_subclass__ = classmethod(__init_subclass__)


# ------------------------------------------------------------------ DataLoader

def _tag_innermost(key, value):
    try:
        _g._b.tag(_g._id(key), _g._id(value))
    except Exception as e:
        guard("dataloader:tag", e)


class _LoaderMethods:
    """What a DataLoader's state does outside the per-batch path (ending an epoch, closing
    what is open when the loop ends), and the per-batch steps for the Python __next__; shared
    by the Python class and the C one (grademl._native.Loader, whose fields the C __next__,
    grademl._native.LoaderNext, reads and writes)."""

    __slots__ = ()

    def begin_iteration(self, grad_enabled):
        tags = (self.workers_tag,) if self.workers_tag else ()
        if self.deep:
            tags = tags + _DEEP_TAG
        _g._begin_typed("iteration", "iteration", tags)
        self.iter_open = True
        self.iter_grad = grad_enabled
        self.iter_train0 = _signals.train
        self.iter_eval0 = _signals.eval

    def end_iteration(self):
        """Tags the open iteration (innermost on this thread) with its mode and ends it."""
        self.iter_open = False
        if _signals.train != self.iter_train0:
            mode = "train"
        elif not self.iter_grad or _signals.eval != self.iter_eval0:
            mode = "eval"
        else:
            mode = "train"
        if mode == "train":
            self.train_iters += 1
        else:
            self.eval_iters += 1
        _tag_innermost("mode", mode)
        self.stop_deep()
        _g._end()

    def stop_deep(self):
        if self.deep:
            self.deep = False
            if _deep is not None:
                _deep.stop()

    def end_epoch(self):
        self.epoch_open = False
        if self.train_iters:
            mode = "train"
        elif self.eval_iters:
            mode = "eval"
        else:
            mode = "train" if self.epoch_grad else "eval"
        _tag_innermost("mode", mode)
        try:
            _g._tag_typed(self.tuning.end_epoch_tags())
        except Exception as e:
            guard("dataloader:tuning", e)
        _g._end()

    def close(self):
        # Only on the thread that opened the phases (end() pops this thread's stack).
        if self.thread != threading.get_ident():
            self.epoch_open = self.iter_open = False
            return
        if self.iter_open:
            self.end_iteration()
        self.stop_deep()
        self.tuning.after_iterations()
        if self.epoch_open:
            self.end_epoch()


class _PyLoaderState(_LoaderMethods):
    """Per DataLoader object: epoch count, what is open (on which thread), and what the open
    epoch and iteration saw so far (for their mode tag)."""

    __slots__ = ("epoch", "epoch_open", "iter_open", "thread", "it_ref", "epoch_grad", "train_iters",
                 "eval_iters", "iter_grad", "iter_train0", "iter_eval0", "workers_tag", "tuning", "deep",
                 "__weakref__")

    def __init__(self):
        self.epoch = 0
        self.epoch_open = False
        self.iter_open = False
        self.thread = None
        self.it_ref = None
        self.epoch_grad = True   # grad enabled when the epoch began
        self.train_iters = 0     # iterations of the open epoch found train / eval
        self.eval_iters = 0
        self.iter_grad = True    # grad enabled when the open iteration began
        self.iter_train0 = 0     # _signals at the open iteration's start
        self.iter_eval0 = 0
        self.workers_tag = None  # ("num_workers", "N")
        self.tuning = _tuning.LoaderTuning()
        self.deep = False        # the open iteration's operators are profiled (--deep)


class _NativeLoaderState(_LoaderMethods, *([_native.Loader] if _native is not None else [])):
    """The same, its fields in C (grademl._native.Loader): the C __next__ reads and writes them."""

    __slots__ = ("it_ref", "__weakref__")

    def __init__(self):
        self.it_ref = None
        self.tuning = _tuning.LoaderTuning()


_LoaderState = _NativeLoaderState if _native is not None else _PyLoaderState


_DEEP_TAG = (("deep", "ops"),)


def _patch_dataloader(torch):
    from torch.utils.data import dataloader as dl

    DataLoader = dl.DataLoader
    BaseIter = dl._BaseDataLoaderIter
    orig_iter = DataLoader.__dict__["__iter__"]
    orig_next = BaseIter.__dict__["__next__"]
    if getattr(orig_iter, "_grademl_wrapped", False):
        return
    states = weakref.WeakKeyDictionary()  # DataLoader -> _LoaderState (no attribute on the user's object)
    is_grad_enabled = torch.is_grad_enabled
    get_num_threads = torch.get_num_threads

    def _on_iter_dead(ref, st_ref):
        st = st_ref()
        if st is not None and st.it_ref is ref:
            try:
                st.close()
            except Exception as e:
                guard("dataloader", e)

    @functools.wraps(orig_iter)
    def __iter__(self):
        if not _g._on or "dataloader" in _disabled:
            return orig_iter(self)
        try:
            st = states.get(self)
            if st is None:
                st = states[self] = _LoaderState()
            st.close()  # a new iterator ends the previous epoch
            st.epoch += 1
            st.thread = threading.get_ident()
            st.epoch_grad = is_grad_enabled()
            st.train_iters = st.eval_iters = 0
            workers = getattr(self, "num_workers", None)
            st.workers_tag = ("num_workers", str(workers)) if isinstance(workers, int) else None
            tags = [("epoch", str(st.epoch)), ("torch_threads", str(get_num_threads()))]
            if st.workers_tag:
                tags.append(st.workers_tag)
            _g._begin_typed("epoch", "epoch", tags)
            st.epoch_open = True
            st.tuning.begin_epoch()
            try:
                st.tuning.epoch_len = len(self)  # an IterableDataset may have none
            except Exception:
                st.tuning.epoch_len = None
        except Exception as e:
            guard("dataloader", e)
            return orig_iter(self)
        try:
            it = orig_iter(self)
        except BaseException:
            st.close()
            raise
        try:
            it._grademl_state = st
            st_ref = weakref.ref(st)
            st.it_ref = weakref.ref(it, lambda r, s=st_ref: _on_iter_dead(r, s))
        except Exception as e:
            guard("dataloader", e)
        return it

    fine = _tuning.fine

    @functools.wraps(orig_next)
    def __next__(self):
        st = self.__dict__.get("_grademl_state")
        if st is None or not st.epoch_open or st.thread != threading.get_ident() or not _g._on or "dataloader" in _disabled:
            return orig_next(self)
        try:
            if st.iter_open:
                st.end_iteration()
            tun = st.tuning
            record, deep = tun.next_iteration(_deep is not None)
            if deep:
                _deep.start()
                st.deep = True
            # The data wait is never sampled (the DataLoader analyses need every one).
            _g._begin_typed("dataloader.next", "data_wait", _DEEP_TAG if deep else ())
            fine.waits += 1
        except Exception as e:
            guard("dataloader", e)
            return orig_next(self)
        try:
            batch = orig_next(self)
        except StopIteration:
            _g._end()
            st.close()
            raise
        except BaseException:
            _g._end()
            raise
        _g._end()
        try:
            tun.epoch_iters += 1
            if record:
                tun.epoch_recorded += 1
            st.begin_iteration(is_grad_enabled())
        except Exception as e:
            guard("dataloader", e)
        return batch

    __iter__._grademl_wrapped = True
    __next__._grademl_wrapped = True
    DataLoader.__iter__ = __iter__
    if _native is not None:
        # One C call per batch: the previous iteration's mode tag and end, the tuning's
        # decision, the data wait, the new iteration's begin (the Python __next__ above while
        # the C extension is not grademl's backend).
        native_next = _native.LoaderNext(orig_next, __next__, _deep)
        functools.update_wrapper(native_next, orig_next)
        native_next._grademl_wrapped = True
        BaseIter.__next__ = native_next
    else:
        BaseIter.__next__ = __next__

