"""What the PyTorch auto-instrumentation costs, kept within a budget; and --deep.

Fine phases (forward, backward, optimizer step, loss: those inside iterations) are recorded
in every iteration while that fits the overhead budget (GRADEML_OVERHEAD_BUDGET, a fraction
of the workload; `grademl run --overhead-budget`, default 1%), else in 1 of k iterations.
The others are still timed (two clock reads), so the count and total time of every fine
phase type stay exact: the epoch phase carries them as tags, with what was sampled and the
measured cost (docs/python.md, "Overhead budget"). Never sampled: iterations, the data wait
before each (the DataLoader analyses and what-ifs need every one), phases the program
declares through grademl's API, and every fine phase once torch.distributed is initialized
(the communication analysis sets collectives against the backward passes).

  fine.every=k  fine.iterations=N  fine.recorded_iterations=R
  unrecorded.<type>.count / unrecorded.<type>.ns     for each fine type that went unrecorded
  overhead.ns   the instrumentation's own cost in the epoch, measured   overhead.budget

Iterations themselves are never sampled (one phase per training step), nor are phases that
the program declares through grademl's API.

The cost is measured in this process, on the code that runs: a recorded phase's begin and
end calls are timed on 1 in 16 recorded phases; a timed-only call's cost, and the clock's,
are measured once when torch is patched (about 1 ms). GRADEML_TEST_PHASE_COST_NS forces
the cost of a recorded phase (tests of the decisions).

--deep (GRADEML_DEEP=1): ATen operators are recorded as phases of type "op" in a few
iterations only, chosen as the run goes: never in the first WARMUP_DEEP iterations of a
DataLoader, then one, then the next ones spaced from the measured cost of a profiled
iteration so that, over the run so far, profiling costs at most DEEP_BUDGET of the loop
(but the first MIN_DEEP spread over the first epoch at most, for an interval to be worked
out: what they cost beyond the budget is paid back by wider spacing afterwards). A profiled
iteration and the data wait before it are tagged deep=ops; grademl compares them with the
unprofiled ones to measure and remove the profiling cost (analysis/deep_profile.cpp).
"""
import math
import os
import threading
import time

_pc = time.perf_counter_ns

FINE_TYPES = ("forward", "backward", "optimizer_step", "loss")
WARMUP = 20          # iterations of a DataLoader whose fine phases are always recorded
RETUNE_EVERY = 16    # iterations between two decisions
MAX_EVERY = 1000     # the sparsest sampling: 1 iteration in MAX_EVERY
WARMUP_DEEP = 10     # iterations of a DataLoader never profiled at operator level
DEEP_BUDGET = 0.02   # what operator profiling may add to the loop over the run, as a fraction
MIN_DEEP = 5         # profiled iterations wanted within the first epoch, whatever the budget
MEASURE_EVERY = 16   # 1 recorded phase in this many has its begin/end timed


def _budget():
    try:
        b = float(os.environ.get("GRADEML_OVERHEAD_BUDGET", "0.01"))
    except ValueError:
        b = 0.01
    if not b > 0 or math.isnan(b):
        b = 0.01
    return min(max(b, 0.001), 1.0)


BUDGET = _budget()
DEEP = os.environ.get("GRADEML_DEEP") == "1"


class _Fine(threading.local):
    """Per thread: whether fine phases are recorded now, what ran unrecorded (type ->
    [count, ns]) for the open epoch, and counts of recorded and timed-only calls."""

    def __init__(self):
        self.record = True
        self.acc = None
        self.recorded = 0   # fine phases recorded
        self.timed = 0      # fine calls timed only
        self.waits = 0      # data wait phases (never sampled)
        self.ops = 0        # operator phases (--deep, --auto-detail ops)
        self.measure = MEASURE_EVERY


def _thread_state():
    """The per-thread fine state: the C extension's when it is grademl's backend (its hooks,
    grademl._native.Hook, count and time the fine calls in C), else a threading.local."""
    import grademl as g

    b = g._b
    if g._native and hasattr(b, "fine") and hasattr(b, "Hook"):
        return b.fine
    return _Fine()


fine = _thread_state()


def _native_tuning_base():
    """grademl._native.Tuning when the hooks run in C (fine is the C extension's), else None."""
    import grademl as g

    b = g._b
    return getattr(b, "Tuning", None) if fine is getattr(b, "fine", None) else None


_native_tuning = _native_tuning_base()

# Why fine phases are recorded in every iteration whatever the budget ("" while they may be
# sampled): set once for the process (keep_every_fine_phase).
keep_all_reason = ""


def keep_every_fine_phase(reason):
    global keep_all_reason
    keep_all_reason = keep_all_reason or reason


class Costs:
    """ns per recorded phase (begin + end, with its wrapper) and per timed-only call."""

    def __init__(self):
        self.clock = 0.0       # two clock reads
        self.timed = 0.0       # a timed-only call's extra cost (wrapper included)
        self.begin_end = None  # measured begin + end calls: the median of the latest samples
        self.samples = []      # the latest measurements (a preemption or a collection in one
        self.next_sample = 0   # of them must not move the estimate: hence a median)
        self.forced = None
        v = os.environ.get("GRADEML_TEST_PHASE_COST_NS")
        if v:
            try:
                self.forced = max(float(v), 0.0)
            except ValueError:
                pass

    def observe(self, ns):
        ns = max(ns - self.clock, 0.0)
        if len(self.samples) < 9:
            self.samples.append(ns)
        else:
            self.samples[self.next_sample] = ns
            self.next_sample = (self.next_sample + 1) % 9
        self.begin_end = sorted(self.samples)[len(self.samples) // 2]

    @property
    def recorded(self):
        """A recorded phase: its begin and end calls plus the wrapper (as a timed call has)."""
        if self.forced is not None:
            return self.forced
        be = self.begin_end if self.begin_end is not None else 1500.0  # until measured
        return be + max(self.timed - self.clock, 0.0)

    def calibrate(self, outermost_factory):
        """Measures the clock and a timed-only call through the real wrapper, on a no-op."""
        n = 400
        t0 = _pc()
        for _ in range(n):
            _pc()
            _pc()
        self.clock = (_pc() - t0) / n
        clock_cost = getattr(fine, "clock_cost", None)
        if clock_cost is not None:  # the C hooks read the clock in C
            self.clock = clock_cost()

        def noop():
            return None

        wrapped = outermost_factory(noop, "grademl.calibration", "calibration", "_calibration")
        saved_record, saved_acc = fine.record, fine.acc
        fine.record, fine.acc = False, {}
        try:
            best_wrapped = best_plain = float("inf")
            for _ in range(3):
                t0 = _pc()
                for _ in range(n):
                    wrapped()
                t1 = _pc()
                for _ in range(n):
                    noop()
                t2 = _pc()
                best_wrapped = min(best_wrapped, (t1 - t0) / n)
                best_plain = min(best_plain, (t2 - t1) / n)
            self.timed = max(best_wrapped - best_plain, 0.0)
        finally:
            fine.record, fine.acc = saved_record, saved_acc
            fine.timed -= 3 * n


costs = Costs()


def accumulate(ptype, ns):
    acc = fine.acc
    if acc is not None:
        c = acc.get(ptype)
        if c is None:
            acc[ptype] = [1, ns]
        else:
            c[0] += 1
            c[1] += ns


class _TuningMethods:
    """What LoaderTuning does per epoch and on its rare decisions (re-tuning the sampling step,
    spacing --deep's profiled iterations): shared by the Python class below and the C one
    (grademl._native.Tuning, whose next_iteration calls _retune and _deep_update)."""

    __slots__ = ()

    # --- epochs
    def begin_epoch(self):
        self.prev_acc = fine.acc
        self.epoch_acc = {}
        fine.acc = self.epoch_acc
        self.epoch_iters = self.epoch_recorded = 0
        self.epoch_rec0, self.epoch_timed0, self.epoch_waits0 = fine.recorded, fine.timed, fine.waits

    def end_epoch_tags(self):
        """The epoch's tags (key, int or str), and restores the enclosing accumulator."""
        acc = self.epoch_acc or {}
        fine.acc = self.prev_acc
        self.epoch_acc = None
        recorded = fine.recorded - self.epoch_rec0
        timed = fine.timed - self.epoch_timed0
        # Iteration phases and data waits are recorded phases too.
        overhead = (recorded + fine.waits - self.epoch_waits0 + self.epoch_iters) * costs.recorded + timed * costs.timed
        tags = [("fine.every", self.every), ("fine.iterations", self.epoch_iters),
                ("fine.recorded_iterations", self.epoch_recorded)]
        for t in FINE_TYPES:
            c = acc.get(t)
            if c:
                tags.append((f"unrecorded.{t}.count", c[0]))
                tags.append((f"unrecorded.{t}.ns", int(c[1])))
        tags.append(("overhead.ns", int(overhead)))
        tags.append(("overhead.budget", repr(BUDGET)))
        return tags

    def _deep_update(self, period):
        """After a profiled iteration that took `period` ns: the spacing of the next ones."""
        base = self.period if self.period is not None else period
        # At least what recording its operator phases cost, as measured: a profiled
        # iteration that happened to run faster than the pace (noise) must not make
        # profiling look free and every other iteration profiled.
        extra = max(period - base, (fine.ops - self.last_ops) * costs.recorded)
        self.deep_cost = extra if self.deep_cost is None else 0.7 * self.deep_cost + 0.3 * extra
        self.deep_spent += extra
        # The next profiled iteration comes once the run's unprofiled time so far pays, at
        # DEEP_BUDGET, for what profiling cost and what the next one will cost: over the
        # run operators add at most the budget, the first MIN_DEEP's extra cost included (a
        # short run profiles less afterwards to pay it back). The time is measured (from
        # about the loop's first iteration), so one slow iteration cannot make the pace
        # look faster and the past cheaper; only what is still to come is counted at it.
        now = _pc()
        if self.deep_t0 is None:
            self.deep_t0 = now - period - self.index * base
        plain = max(0, now - self.deep_t0 - self.deep_spent)
        more = math.ceil(((self.deep_spent + self.deep_cost) / DEEP_BUDGET - plain) / max(base, 1))
        self.deep_stride = max(2, min(100000, more + 1))
        if self.deep_count < MIN_DEEP and self.epoch_len:
            # Enough samples for an interval: the first MIN_DEEP spread over the
            # first epoch at most, whatever the budget.
            self.deep_stride = min(self.deep_stride, max(2, (self.epoch_len - WARMUP_DEEP) // MIN_DEEP))
        self.deep_next = self.index + self.deep_stride - 1

    def _retune(self):
        if self.period is None or self.fine_per_it is None:
            return
        if keep_all_reason:
            self.every = 1
            return
        c_rec, c_timed = costs.recorded, costs.timed
        always = 2 * c_rec + self.fine_per_it * c_timed          # the iteration and data wait phases, fine calls timed
        extra = self.fine_per_it * max(c_rec - c_timed, 0.0)     # recording them too
        allowed = BUDGET * self.period - always
        if extra <= allowed:
            self.every = 1
        elif allowed <= 0:
            self.every = MAX_EVERY
        else:
            self.every = min(MAX_EVERY, math.ceil(extra / allowed))

    def after_iterations(self):
        """Outside iterations (the loop ended or broke): fine phases are recorded again."""
        fine.record = True


class _PyLoaderTuning(_TuningMethods):
    """Per DataLoader: iterations so far, the sampling step k, the loop's pace, and --deep's
    schedule. Decides, before each iteration's data wait, whether its fine phases are
    recorded and whether its operators are profiled."""

    __slots__ = ("index", "every", "period", "fine_per_it", "last_next", "last_fine", "last_ops", "last_deep",
                 "deep_next", "deep_stride", "deep_cost", "epoch_acc", "prev_acc", "epoch_iters",
                 "epoch_recorded", "epoch_rec0", "epoch_timed0", "epoch_waits0", "epoch_len", "deep_count",
                 "deep_spent", "deep_t0")

    def __init__(self):
        self.index = 0
        self.every = 1
        self.period = None       # ns per iteration (data wait included), EWMA, unprofiled ones
        self.fine_per_it = None  # fine calls per iteration, EWMA
        self.last_next = None    # when the previous iteration's data wait began
        self.last_fine = 0
        self.last_ops = 0        # fine.ops when the previous iteration's data wait began
        self.last_deep = False
        self.deep_next = WARMUP_DEEP
        self.deep_stride = None
        self.deep_cost = None    # extra ns of a profiled iteration, EWMA
        self.epoch_acc = None
        self.prev_acc = None
        self.epoch_iters = 0
        self.epoch_recorded = 0
        self.epoch_rec0 = 0
        self.epoch_timed0 = 0
        self.epoch_waits0 = 0
        self.epoch_len = None    # len(DataLoader), when it has one
        self.deep_count = 0      # iterations profiled so far
        self.deep_spent = 0      # extra ns the profiled iterations cost, in all
        self.deep_t0 = None      # about when the loop's first iteration began (_pc ns)

    # --- iterations
    def next_iteration(self, deep_possible):
        """Before an iteration's data wait: (record fine phases, profile operators)."""
        now = _pc()
        if self.last_next is not None:
            period = now - self.last_next
            calls = fine.recorded + fine.timed - self.last_fine
            if self.last_deep:
                self._deep_update(period)
            else:
                self.period = period if self.period is None else 0.9 * self.period + 0.1 * period
                self.fine_per_it = calls if self.fine_per_it is None else 0.9 * self.fine_per_it + 0.1 * calls
        self.last_next = now
        self.last_fine = fine.recorded + fine.timed
        self.last_ops = fine.ops
        i = self.index
        self.index += 1
        if i >= WARMUP and (i - WARMUP) % RETUNE_EVERY == 0:
            self._retune()
        deep = deep_possible and i >= self.deep_next
        if deep:
            self.deep_count += 1
            self.deep_next = i + (self.deep_stride or 10 ** 9)  # until the cost is known
        self.last_deep = deep
        record = deep or i < WARMUP or i % self.every == 0
        fine.record = record
        return record, deep


class _NativeLoaderTuning(_TuningMethods, *([_native_tuning] if _native_tuning else [])):
    """LoaderTuning with its per-iteration fields and next_iteration in C
    (grademl._native.Tuning): one C call per iteration, from grademl._native.LoaderNext."""

    __slots__ = ("deep_cost", "deep_spent", "deep_t0", "epoch_acc", "prev_acc", "epoch_rec0", "epoch_timed0",
                 "epoch_waits0", "epoch_len")

    def __init__(self):
        self.deep_next = WARMUP_DEEP
        self.deep_cost = None
        self.deep_spent = 0
        self.deep_t0 = None
        self.epoch_acc = None
        self.prev_acc = None
        self.epoch_rec0 = 0
        self.epoch_timed0 = 0
        self.epoch_waits0 = 0
        self.epoch_len = None


# Per DataLoader: the C class when the hooks run in C (its fields are read and written from
# the C __next__), else the Python one.
LoaderTuning = _NativeLoaderTuning if _native_tuning else _PyLoaderTuning
