"""torch.distributed auto-instrumentation (torch 1.13+): the rank of each process, its
collectives, and DistributedDataParallel's bucketed gradient all-reduce.

Ranks: the process's own phase is tagged (grademl.tag_process) with rank, world_size and
local_rank from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) when torch is imported,
launcher=torchrun under torchrun, and again with rank, world_size and backend once
init_process_group succeeded; and with job, what the ranks of one job share: torchrun's run
id (TORCHELASTIC_RUN_ID), else the init_method, else MASTER_ADDR:MASTER_PORT.

Collectives: a phase of type "collective" per call, named after the collective:

  all_reduce (also all_reduce_coalesced)    broadcast (also DDP's _broadcast_coalesced)
  reduce          all_gather (also all_gather_coalesced)      all_gather_into_tensor
  (also _all_gather_base)    reduce_scatter    reduce_scatter_tensor (also
  _reduce_scatter_base)      all_to_all (also all_to_all_single)    gather    scatter
  barrier (also monitored_barrier)    send (send, isend)    recv (recv, irecv)

  tags  bytes           the tensor data this rank contributes (scatter: receives; barrier 0)
        dtype           of the first tensor
        process_group   "world" (the default group) or the group's global ranks ("0,2,3")
        seq             the k-th collective of that group on this rank (from 1); sends and
                        receives count per channel instead, so the k-th collective of a
                        group (or message of a channel) is the same operation on every rank
        channel         point-to-point only: "SRC>DST" (global ranks; "?" for a receive
                        from any source)
        async           1 when the call returned a Work (async_op=True, isend/irecv, DDP's
                        buckets): the phase spans from the call to the work's completion
        call            the torch function when it is not the phase's name (isend, ...)
        ddp_bucket      DDP's gradient all-reduce: the bucket's index

A synchronous collective is a phase on the calling thread. An asynchronous one is recorded
when it completes, by the thread that completed it (a gloo worker thread, through the Work's
future; or the thread that called Work.wait() for works without a future: gloo's sends and
receives), as a phase with its own start and end (grademl._complete). A work that is never
waited for and has no future is not recorded.

DDP: the reducer all-reduces gradient buckets in C++, unseen by the wrappers above. At a
model's first forward, when its user registered no communication hook, grademl registers
one that does exactly what DDP does without a hook (grads scaled by 1/world size -- or by
the number of ranks not yet joined, under Join -- then summed by an all-reduce of the
bucket's buffer on the model's process group), and times it: a phase all_reduce per bucket
with ddp_bucket. A hook the user registers (before or after that) replaces it as torch
would have it; user hooks are timed too (the collectives they call carry ddp_bucket; a hook
that calls none is a phase "ddp_comm_hook"). Not timed, since grademl could not reproduce
DDP's arithmetic to the bit: models with sparse gradients, and gradient_as_bucket_view=True
on a world size that is not a power of two (the debug log says why). A built-in C++ hook
registered before the first forward runs untimed. GRADEML_DDP_HOOK=0 leaves DDP's reducer
alone (buckets untimed; a Python hook costs more per bucket than DDP's C++ path).

Every wrapper is guarded: an error in grademl's code switches the instrumentation off and
the call goes on unchanged; torch's own errors are raised as torch raises them.

Exit: the Python callables grademl attaches to torch futures (the completion of an
asynchronous collective, the DDP hook's then()) are run, and then released, by the thread
that completes the future -- for gloo one of its worker threads, which takes the GIL for
each. A thread that asks for the GIL once the interpreter is finalizing is ended by Python
with pthread_exit, whose unwinding through torch's noexcept destructors aborts the whole
process ("terminate called without an active exception"): a job that exits right after its
last collective completed, while that worker thread had not yet been scheduled to release
grademl's callable, died at exit. So every such callable is a _FutureCallback, counted
until its release, and an atexit handler (atexit runs before finalization) waits, the GIL
released, until none is left (at most EXIT_WAIT_S: a future that never completes is not
waited for longer); the futures the DDP hook returned (whose PyObject value also needs the
GIL to be freed) are kept alive past exit, so the worker thread never frees the last
reference to one.
"""
import atexit
import functools
import itertools
import os
import threading
import time
import weakref

import grademl as _g

from . import _disabled, debug, guard

HOOK = "torch.distributed"
_TYPE = "collective"

# torch function -> (phase name, tensor arguments counted in bytes, p2p role)
_SPECS = {
    "all_reduce": ("all_reduce", ("tensor",), None),
    "all_reduce_coalesced": ("all_reduce", ("tensors",), None),
    "broadcast": ("broadcast", ("tensor",), None),
    "reduce": ("reduce", ("tensor",), None),
    "all_gather": ("all_gather", ("tensor",), None),
    "all_gather_coalesced": ("all_gather", ("input_tensor_list",), None),
    "all_gather_into_tensor": ("all_gather_into_tensor", ("input_tensor",), None),
    "_all_gather_base": ("all_gather_into_tensor", ("input_tensor",), None),
    "reduce_scatter": ("reduce_scatter", ("input_list",), None),
    "reduce_scatter_tensor": ("reduce_scatter_tensor", ("input",), None),
    "_reduce_scatter_base": ("reduce_scatter_tensor", ("input",), None),
    "all_to_all": ("all_to_all", ("input_tensor_list",), None),
    "all_to_all_single": ("all_to_all", ("input",), None),
    "gather": ("gather", ("tensor",), None),
    "scatter": ("scatter", ("tensor",), None),
    "barrier": ("barrier", (), None),
    "monitored_barrier": ("barrier", (), None),
    "send": ("send", ("tensor",), ("send", "dst")),
    "isend": ("send", ("tensor",), ("send", "dst")),
    "recv": ("recv", ("tensor",), ("recv", "src")),
    "irecv": ("recv", ("tensor",), ("recv", "src")),
}
_ALWAYS_ASYNC = {"isend", "irecv"}

_tls = threading.local()   # depth: inside a wrapped collective; ddp_bucket: inside a DDP hook
_seq = {}                  # (process group key, channel) -> itertools.count
_group_keys = {}           # process group object -> its key ("world", "0,2")
_dist = None               # torch.distributed
_c10d = None               # torch.distributed.distributed_c10d
_pending_waits = weakref.WeakKeyDictionary()  # Work without a future -> what to record at wait()
_wait_patched = False
# At exit, the longest wait for grademl's callables on futures still held by torch.
EXIT_WAIT_S = 5.0


def patch(torch):
    """Patches torch.distributed (called from the torch hook; each part guarded)."""
    global _dist, _c10d
    import torch.distributed as dist

    if not dist.is_available():
        return
    _dist = dist
    _c10d = dist.distributed_c10d
    for step in (_watch_exit, _tag_from_environment, _patch_init, _patch_collectives, _patch_ddp, _patch_join):
        try:
            step(torch)
        except Exception as e:
            guard(f"{HOOK}:{step.__name__}", e)


def _active():
    return _g._on and HOOK not in _disabled


# ------------------------------------------------------------------ callbacks on futures

_live_callbacks = {}              # key of each _FutureCallback torch still holds -> None
_callback_keys = itertools.count()
_watching_exit = False


class _FutureCallback:
    """A callable grademl attaches to a torch future, counted in _live_callbacks from its
    creation until torch releases it (see the module's comment on exit)."""

    __slots__ = ("fn", "key")

    def __init__(self, fn):
        self.fn = fn
        self.key = next(_callback_keys)
        _live_callbacks[self.key] = None

    def __call__(self, fut):
        return self.fn(fut)

    def __del__(self):
        # Run by the releasing thread, which holds the GIL from here until it gives it back
        # for good: the removal is the last statement and makes no call (a call could let
        # the GIL go after it), so once the exit handler holds the GIL and sees no key left,
        # every releasing thread is done with Python.
        try:
            del _live_callbacks[self.key]
        except Exception:
            pass


def _watch_exit(torch):
    global _watching_exit
    if _watching_exit:
        return
    atexit.register(_wait_for_callbacks)
    # A forked child (a DataLoader worker) holds none of its parent's futures.
    os.register_at_fork(after_in_child=_live_callbacks.clear)
    _watching_exit = True


def _wait_for_callbacks():
    """At exit, before the interpreter finalizes: until torch released every callable
    grademl gave it (time.sleep lets the GIL go), EXIT_WAIT_S at most; then the futures
    the DDP hooks returned are kept alive for good."""
    try:
        if _live_callbacks:
            deadline = time.monotonic() + EXIT_WAIT_S
            while _live_callbacks and time.monotonic() < deadline:
                time.sleep(0.002)
            if _live_callbacks:
                debug(f"{HOOK}: {len(_live_callbacks)} callbacks still held by torch at exit")
        _keep_returned_futures()
    except Exception as e:
        debug(f"{HOOK}: waiting for callbacks at exit failed: {e!r}")


def _keep_returned_futures():
    """A future a DDP hook returned holds a Python object (the bucket): whoever drops the
    last reference takes the GIL. DDP's reducer drops its own while the interpreter
    finalizes; a gloo worker thread may still hold one for an instant after it released
    grademl's callable. Leaked on purpose at exit (the last bucket futures of each model),
    so that the worker's reference is never the last."""
    kept = []
    for st in list(_ddp_states.values()):
        kept.extend(st.returned.values())
        st.returned.clear()
    if kept:
        import ctypes

        for fut in kept:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(fut))


# ------------------------------------------------------------------ ranks

def _tag_from_environment(torch):
    env = os.environ
    tags = []
    for var, key in (("RANK", "rank"), ("WORLD_SIZE", "world_size"), ("LOCAL_RANK", "local_rank")):
        v = env.get(var)
        if v is not None and v.strip().lstrip("-").isdigit():
            tags.append((key, str(int(v))))
    if not any(k == "rank" for k, _ in tags):
        return
    if env.get("TORCHELASTIC_RUN_ID"):
        tags.append(("launcher", "torchrun"))
    job = _job_id()
    if job:
        tags.append(("job", job))
    if _g._on:
        for k, v in tags:
            _g._tag_process(k, v)


def _job_id(init_method=None):
    """What the ranks of one job share: torchrun's run id, else the rendezvous."""
    env = os.environ
    run_id = env.get("TORCHELASTIC_RUN_ID")
    if run_id:
        return run_id
    if isinstance(init_method, str) and init_method and init_method != "env://":
        return init_method
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    return f"{addr}:{port}" if addr and port else None


def _patch_init(torch):
    dist = _dist
    orig = _c10d.init_process_group
    if getattr(orig, "_grademl_wrapped", False):
        return

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        result = orig(*args, **kwargs)
        # Collectives are set against the backward passes (how much communication overlapped
        # computation): fine phases are then recorded in every iteration (tuning.py).
        from . import tuning

        tuning.keep_every_fine_phase("torch.distributed")
        if _active():
            try:
                _g._tag_process("rank", str(dist.get_rank()))
                _g._tag_process("world_size", str(dist.get_world_size()))
                _g._tag_process("backend", str(dist.get_backend()))
                local = os.environ.get("LOCAL_RANK")
                if local is not None and local.strip().isdigit():
                    _g._tag_process("local_rank", str(int(local)))
                job = _job_id(kwargs.get("init_method", args[1] if len(args) > 1 else None))
                if job:
                    _g._tag_process("job", job)
            except Exception as e:
                guard(HOOK, e)
        return result

    init_process_group._grademl_wrapped = True
    for mod in (_c10d, dist):
        if getattr(mod, "init_process_group", None) is orig:
            mod.init_process_group = init_process_group


# ------------------------------------------------------------------ helpers

def _group_key(group):
    """"world" for the default group (None or it), else the group's global ranks."""
    if group is None:
        return "world"
    key = _group_keys.get(group)
    if key is not None:
        return key
    c10d = _c10d
    world = getattr(c10d.GroupMember, "WORLD", None)
    if group is world or group is c10d._get_default_group():
        key = "world"
    else:
        ranks = c10d._pg_group_ranks.get(group)
        key = ",".join(str(r) for r in sorted(ranks)) if ranks else f"pg{len(_group_keys)}"
    _group_keys[group] = key
    return key


def _next_seq(key):
    c = _seq.get(key)
    if c is None:
        c = _seq.setdefault(key, itertools.count(1))
    return next(c)  # atomic under the GIL


def _tensor_bytes(x):
    """(bytes, dtype) of a tensor or a list of them; (0, None) for anything else."""
    if x is None:
        return 0, None
    try:
        return x.numel() * x.element_size(), x.dtype
    except AttributeError:
        pass
    total, dtype = 0, None
    if isinstance(x, (list, tuple)):
        for t in x:
            n, d = _tensor_bytes(t)
            total += n
            if dtype is None:
                dtype = d
    return total, dtype


def _dtype_name(dtype):
    s = str(dtype)
    return s[6:] if s.startswith("torch.") else s


def _my_rank():
    try:
        return _dist.get_rank()
    except Exception:
        return -1


class _Call:
    """What to record about one asynchronous collective, its names interned on the calling
    thread: its completion is recorded by whichever thread completes it."""

    __slots__ = ("prepared", "start")

    def __init__(self, name, tags, start):
        self.prepared = _g._prepare(name, _TYPE, tags)
        self.start = start

    def record(self, end):
        if _active():
            try:
                _g._complete(self.prepared, self.start, end)
            except Exception as e:
                guard(HOOK, e)


def _on_done(call):
    def done(_fut):
        try:
            call.record(_g._now())
        except Exception as e:
            guard(HOOK, e)

    return _FutureCallback(done)


def _record_when_done(call, work):
    """Records `call` once `work` completes: through its future, else at its wait()."""
    try:
        fut = work.get_future()
    except Exception:
        fut = None
    if fut is not None:
        fut.add_done_callback(_on_done(call))
        return
    if _patch_work_wait(work):
        _pending_waits[work] = call


def _patch_work_wait(work):
    """Work.wait records the phase of a work without a future (gloo's send/recv)."""
    global _wait_patched
    if _wait_patched:
        return True
    cls = type(work)
    orig = cls.__dict__.get("wait")
    if orig is None:
        return False

    def wait(self, *args, **kwargs):
        result = orig(self, *args, **kwargs)
        if _pending_waits:
            try:
                call = _pending_waits.pop(self, None)
                if call is not None:
                    call.record(_g._now())
            except Exception as e:
                guard(HOOK, e)
        return result

    wait.__doc__ = getattr(orig, "__doc__", None)
    cls.wait = wait
    _wait_patched = True
    return True


# ------------------------------------------------------------------ collectives

def _argument_getter(func, names):
    """Per name, a function (args, kwargs, default) -> the argument, from func's signature;
    None when the signature lacks one of them."""
    import inspect

    params = list(inspect.signature(func).parameters)
    getters = {}
    for name in names:
        if name not in params:
            return None
        pos = params.index(name)

        def get(args, kwargs, default=None, _pos=pos, _name=name):
            if len(args) > _pos:
                return args[_pos]
            return kwargs.get(_name, default)

        getters[name] = get
    return getters


def _wrap_collective(func, fname, spec):
    phase, tensor_args, p2p = spec
    names = list(tensor_args) + ["group"] + ([p2p[1]] if p2p else [])
    get = _argument_getter(func, names)
    if get is None:
        debug(f"{HOOK}: {fname} has an unexpected signature; not instrumented")
        return None
    always_async = fname in _ALWAYS_ASYNC
    get_async = None if always_async else (_argument_getter(func, ["async_op"]) or {}).get("async_op")
    call_tag = () if fname == phase else (("call", fname),)
    get_group = get["group"]
    get_tensors = [get[n] for n in tensor_args]
    get_peer = get[p2p[1]] if p2p else None
    non_member = getattr(_c10d.GroupMember, "NON_GROUP_MEMBER", object())

    def describe(args, kwargs):
        group = get_group(args, kwargs)
        if group is non_member:
            return None
        is_async = always_async or (get_async is not None and bool(get_async(args, kwargs, False)))
        nbytes, dtype = 0, None
        for g in get_tensors:
            n, d = _tensor_bytes(g(args, kwargs))
            nbytes += n
            if dtype is None:
                dtype = d
        gkey = _group_key(group)
        tags = [("bytes", nbytes)]
        if dtype is not None:
            tags.append(("dtype", _dtype_name(dtype)))
        tags.append(("process_group", gkey))
        if p2p:
            peer = get_peer(args, kwargs)
            me = _my_rank()
            if p2p[0] == "send":
                channel = f"{me}>{peer}"
            else:
                channel = f"{peer}>{me}" if peer is not None else f"?>{me}"
            tags.append(("channel", channel))
            seq = _next_seq((gkey, channel)) if peer is not None else 0
        else:
            seq = _next_seq((gkey, ""))
        tags.append(("seq", seq))
        tags.append(("async", "1" if is_async else "0"))
        bucket = getattr(_tls, "ddp_bucket", None)
        if bucket is not None:
            tags.append(("ddp_bucket", bucket))
            _tls.ddp_collectives = getattr(_tls, "ddp_collectives", 0) + 1
        tags.extend(call_tag)
        return is_async, tags

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not _g._on or HOOK in _disabled or getattr(_tls, "depth", 0):
            return func(*args, **kwargs)
        try:
            d = describe(args, kwargs)
            if d is None:
                return func(*args, **kwargs)
            is_async, tags = d
            if is_async:
                start = _g._now()
            else:
                _g._begin_typed(phase, _TYPE, tags)
        except Exception as e:
            guard(HOOK, e)
            return func(*args, **kwargs)
        _tls.depth = 1
        try:
            result = func(*args, **kwargs)
        finally:
            _tls.depth = 0
            if not is_async:
                _g._end()
        if is_async and result is not None:
            try:
                _record_when_done(_Call(phase, tags, start), result)
            except Exception as e:
                guard(HOOK, e)
        return result

    wrapper._grademl_wrapped = True
    return wrapper


def _wrap_broadcast_coalesced(func):
    """dist._broadcast_coalesced(process_group, tensors, buffer_size, src): DDP's parameter and
    buffer broadcast (a C++ function, synchronous)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not _g._on or HOOK in _disabled or getattr(_tls, "depth", 0):
            return func(*args, **kwargs)
        try:
            group = args[0] if args else kwargs.get("process_group")
            tensors = args[1] if len(args) > 1 else kwargs.get("tensors")
            nbytes, dtype = _tensor_bytes(list(tensors) if tensors is not None else None)
            gkey = _group_key(group)
            tags = [("bytes", nbytes)]
            if dtype is not None:
                tags.append(("dtype", _dtype_name(dtype)))
            tags += [("process_group", gkey), ("seq", _next_seq((gkey, ""))), ("async", "0"),
                     ("call", "_broadcast_coalesced")]
            _g._begin_typed("broadcast", _TYPE, tags)
        except Exception as e:
            guard(HOOK, e)
            return func(*args, **kwargs)
        _tls.depth = 1
        try:
            return func(*args, **kwargs)
        finally:
            _tls.depth = 0
            _g._end()

    wrapper._grademl_wrapped = True
    return wrapper


def _patch_collectives(torch):
    dist, c10d = _dist, _c10d
    for fname, spec in _SPECS.items():
        orig = getattr(c10d, fname, None)
        if orig is None or getattr(orig, "_grademl_wrapped", False):
            continue
        try:
            w = _wrap_collective(orig, fname, spec)
        except Exception as e:
            debug(f"{HOOK}: {fname} not instrumented: {e!r}")
            continue
        if w is None:
            continue
        # The package re-exports c10d's functions: replace each binding of the original.
        for mod in (c10d, dist):
            if getattr(mod, fname, None) is orig:
                setattr(mod, fname, w)
    bc = getattr(dist, "_broadcast_coalesced", None)
    if bc is not None and not getattr(bc, "_grademl_wrapped", False):
        dist._broadcast_coalesced = _wrap_broadcast_coalesced(bc)


# ------------------------------------------------------------------ DDP

class _DdpState:
    """Per DDP model: whether grademl's hook is in its reducer, and the hook that runs there."""

    __slots__ = ("ddp", "installed", "user", "registrations", "returned", "__weakref__")

    def __init__(self, ddp):
        self.ddp = weakref.ref(ddp)
        self.installed = False   # grademl's hook is registered with the reducer
        self.user = None         # the hook to run instead of DDP's own all-reduce: (state, hook)
        self.registrations = 0   # hooks the user registered (torch allows one)
        self.returned = {}       # bucket index -> the future the hook last returned for it (exit)


_ddp_states = weakref.WeakKeyDictionary()  # DDP model -> _DdpState
_join_work = weakref.WeakKeyDictionary()   # DDP model -> its forward's Join work handle


def _state_of(ddp):
    st = _ddp_states.get(ddp)
    if st is None:
        st = _ddp_states[ddp] = _DdpState(ddp)
    return st


def _is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0


def _why_not_timed(ddp, torch):
    """Why grademl's hook would not reproduce DDP's own arithmetic exactly, or None."""
    for m in ddp.module.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and getattr(m, "sparse", False):
            return "sparse gradients"
    if getattr(ddp, "gradient_as_bucket_view", False) and not _is_power_of_two(ddp.process_group.size()):
        return "gradient_as_bucket_view on a world size that is not a power of two"
    if getattr(ddp, "mixed_precision", None) is not None:
        return "mixed precision"
    return None


def _divide_factor(ddp):
    """DDP's divide factor without a hook (Reducer::set_divide_factor): the group's size, or
    under Join (divide_by_initial_world_size=False) the ranks that have not joined."""
    n = ddp.process_group.size()
    jc = getattr(ddp, "_join_config", None)
    if jc is not None and jc.enable and not getattr(ddp, "_divide_by_initial_world_size", True):
        work = _join_work.get(ddp)
        if work is not None:
            work.wait()
            n = int(work.result()[0].item())
    return n


def _bucket_tags(ddp, bucket, buf):
    nbytes, dtype = _tensor_bytes(buf)
    gkey = _group_key(ddp.process_group)
    tags = [("bytes", nbytes)]
    if dtype is not None:
        tags.append(("dtype", _dtype_name(dtype)))
    tags += [("process_group", gkey), ("seq", _next_seq((gkey, ""))), ("async", "1"),
             ("ddp_bucket", bucket.index())]
    return tags


def _default_hook(st, bucket):
    """What DDP's reducer does without a hook, timed: the bucket scaled by 1 / divide factor
    (the reducer multiplies each grad by that while copying it into the bucket), then an
    all-reduce (sum) of the bucket's buffer on the model's process group."""
    ddp = st.ddp()
    buf = bucket.buffer()
    buf.mul_(1.0 / _divide_factor(ddp))
    call = None
    if _active():
        try:
            call = _Call("all_reduce", _bucket_tags(ddp, bucket, buf), _g._now())
        except Exception as e:
            guard(HOOK, e)
    fut = ddp.process_group.allreduce([buf]).get_future()
    # A Python hook's future must hold a Python object (torch 1.13's PythonCommHook): the
    # all-reduced buffer, as default_hooks.allreduce_hook returns it; the bucket's phase is
    # recorded by the same callable (one Python callback per bucket).
    return _returned(st, bucket, fut.then(_FutureCallback(_BucketDone(call) if call is not None else _first_tensor)))


def _first_tensor(fut):
    return fut.value()[0]


class _BucketDone:
    """then() callable of grademl's DDP hook: records the bucket's all-reduce, then gives
    DDP the all-reduced buffer (torch's own errors raised as torch raises them)."""

    __slots__ = ("call",)

    def __init__(self, call):
        self.call = call

    def __call__(self, fut):
        try:
            self.call.record(_g._now())
        except Exception as e:
            guard(HOOK, e)
        return fut.value()[0]


def _returned(st, bucket, fut):
    """`fut`, the future a hook returns to DDP for `bucket`, kept until the bucket's next one
    (for _keep_returned_futures at exit)."""
    try:
        st.returned[bucket.index()] = fut
    except Exception as e:
        guard(HOOK, e)
    return fut


def _builtin_equivalent(comm_hook_type):
    """The Python equivalent of a built-in C++ hook (default_comm_hooks.cpp), for one
    registered after grademl's hook is in the reducer; None for an unknown type."""
    name = getattr(comm_hook_type, "name", str(comm_hook_type))

    def allreduce(process_group, bucket):
        t = bucket.buffer()
        t.div_(process_group.size())
        return process_group.allreduce([t]).get_future().then(_FutureCallback(_first_tensor))

    def fp16_compress(process_group, bucket):
        import torch

        compressed = bucket.buffer().to(torch.float16)
        compressed.div_(process_group.size())
        fut = process_group.allreduce([compressed]).get_future()
        out = bucket.buffer()

        def decompress(f):
            out.copy_(f.value()[0])
            return out

        return fut.then(_FutureCallback(decompress))

    hook = {"ALLREDUCE": allreduce, "FP16_COMPRESS": fp16_compress}.get(name)
    if hook is not None:
        hook.__qualname__ = str(comm_hook_type)
        hook._grademl_collective = "all_reduce"  # its phase: it calls the process group directly
    return hook


def _run_user_hook(st, state, hook, bucket):
    """The user's hook, timed: the collectives it calls carry ddp_bucket; one that calls
    none through torch.distributed's functions is a phase ddp_comm_hook."""
    if not _active():
        return hook(state, bucket)
    try:
        index = bucket.index()
        start = _g._now()
        before = getattr(_tls, "ddp_collectives", 0)
    except Exception as e:
        guard(HOOK, e)
        return hook(state, bucket)
    outer = getattr(_tls, "ddp_bucket", None)
    _tls.ddp_bucket = index
    try:
        fut = hook(state, bucket)
    finally:
        _tls.ddp_bucket = outer
    try:
        if getattr(_tls, "ddp_collectives", 0) == before and fut is not None:
            ddp = st.ddp()
            tags = _bucket_tags(ddp, bucket, bucket.buffer())
            tags.append(("hook", getattr(hook, "__qualname__", type(hook).__name__)))
            name = getattr(hook, "_grademl_collective", "ddp_comm_hook")
            fut.add_done_callback(_on_done(_Call(name, tags, start)))
    except Exception as e:
        guard(HOOK, e)
    return fut


def _dispatch(st, bucket):
    """The hook grademl registers: the user's hook when one was registered since, else DDP's
    own all-reduce, timed."""
    user = st.user
    if user is not None:
        return _returned(st, bucket, _run_user_hook(st, user[0], user[1], bucket))
    return _default_hook(st, bucket)


def _install(ddp, torch):
    """At a model's first forward: grademl's hook, unless the user registered one (or its
    arithmetic could not be DDP's own)."""
    st = _state_of(ddp)
    if st.installed or st.registrations:
        return
    why = "GRADEML_DDP_HOOK=0" if os.environ.get("GRADEML_DDP_HOOK") == "0" else _why_not_timed(ddp, torch)
    if why is not None:
        st.registrations = -1  # never again for this model
        debug(f"{HOOK}: DDP buckets not timed ({why})")
        return
    _dist._register_comm_hook(ddp.reducer, st, _dispatch)
    st.installed = True


def _timed_user_hook(st, hook):
    @functools.wraps(hook)
    def timed(state, bucket):
        return _returned(st, bucket, _run_user_hook(st, state, hook, bucket))

    return timed


def _patch_ddp(torch):
    DDP = torch.nn.parallel.DistributedDataParallel
    fwd = DDP.__dict__.get("forward")
    if fwd is None or getattr(fwd, "_grademl_wrapped", False):
        return

    @functools.wraps(fwd)
    def forward(self, *inputs, **kwargs):
        if _active():
            try:
                st = _ddp_states.get(self)
                if st is None or (not st.installed and not st.registrations):
                    _install(self, torch)
            except Exception as e:
                guard(HOOK, e)
        return fwd(self, *inputs, **kwargs)

    orig_register = DDP.__dict__.get("register_comm_hook")

    @functools.wraps(orig_register)
    def register_comm_hook(self, state, hook):
        try:
            st = _state_of(self) if _g._on else None
        except Exception as e:
            guard(HOOK, e)
            st = None
        if st is None or not callable(hook) or not hasattr(hook, "__name__") or not hasattr(hook, "__qualname__"):
            if st is not None:
                st.registrations = max(st.registrations, 0) + 1
            return orig_register(self, state, hook)
        if st.installed:
            if st.registrations > 0:
                return orig_register(self, state, hook)  # torch: only once
            # As torch would: check the hook, name it in DDP's logging data, use it.
            self._check_comm_hook(hook)
            self.logger._set_comm_hook_name(hook.__qualname__)
            st.user = (state, hook)
            st.registrations = 1
            return None
        result = orig_register(self, state, _timed_user_hook(st, hook))
        st.registrations = max(st.registrations, 0) + 1
        return result

    orig_builtin = DDP.__dict__.get("_register_builtin_comm_hook")

    @functools.wraps(orig_builtin)
    def _register_builtin_comm_hook(self, comm_hook_type):
        try:
            st = _state_of(self) if _g._on else None
            equivalent = _builtin_equivalent(comm_hook_type) if st is not None and st.installed else None
        except Exception as e:
            guard(HOOK, e)
            st, equivalent = None, None
        if st is not None and st.installed and st.registrations <= 0 and equivalent is not None:
            self.logger._set_comm_hook_name(str(comm_hook_type))
            st.user = (self.process_group, equivalent)
            st.registrations = 1
            return None
        result = orig_builtin(self, comm_hook_type)
        if st is not None:
            st.registrations = max(st.registrations, 0) + 1
        return result

    forward._grademl_wrapped = True
    DDP.forward = forward
    if orig_register is not None:
        DDP.register_comm_hook = register_comm_hook
    if orig_builtin is not None:
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook


def _patch_join(torch):
    """Keeps each DDP forward's Join work handle: under Join, DDP divides by the number of
    ranks not yet joined, which that all-reduce counts."""
    from torch.distributed.algorithms.join import Join

    orig = Join.__dict__.get("notify_join_context")
    if orig is None:
        return
    func = orig.__func__ if isinstance(orig, staticmethod) else orig
    if getattr(func, "_grademl_wrapped", False):
        return
    DDP = torch.nn.parallel.DistributedDataParallel

    @functools.wraps(func)
    def notify_join_context(joinable):
        work = func(joinable)
        if work is not None and isinstance(joinable, DDP):
            try:
                _join_work[joinable] = work
            except Exception as e:
                guard(HOOK, e)
        return work

    notify_join_context._grademl_wrapped = True
    Join.notify_join_context = staticmethod(notify_join_context)
