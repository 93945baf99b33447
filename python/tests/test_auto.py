"""Auto-instrumentation against the fake native layer: exact phase sequences."""
import json
import os
import time
import tempfile
import unittest

from _ci import requires, skip_or_fail
from _fake import disable, use_recorder

import grademl
import grademl.auto

# Install the hooks before torch / sklearn / pandas / numpy are imported (they may be
# already, by another test module: register() then patches at once).
grademl._set_backend(use_recorder())
grademl.auto.install()
disable()

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except Exception:  # pragma: no cover
    torch = None
try:
    import sklearn  # noqa: F401
except Exception:  # pragma: no cover
    sklearn = None
try:
    import numpy as np
    import pandas as pd
except Exception:  # pragma: no cover
    np = pd = None


# In CI a missing torch / sklearn / pandas fails these tests instead of skipping them (_ci.py).


def _dataset():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 4, generator=g)
    y = torch.randint(0, 2, (12,), generator=g)
    return TensorDataset(x, y)


class _Model(torch.nn.Module if torch else object):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.act = torch.nn.ReLU()
        self.l2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.l2(self.act(self.l1(x)))


def _without_tuning(tags):
    return {k: v for k, v in tags.items() if not k.startswith(("fine.", "unrecorded.", "overhead."))}


def _without_threads(tags):
    """A forward phase has torch_threads when it is the process's first or the value changed."""
    return {k: v for k, v in tags.items() if k != "torch_threads"}


def _train(loader, epochs=2):
    model = _Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lossf = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = lossf(model(x), y)  # lossf is a loss Module: a top-level "loss" phase
            loss.backward()
            opt.step()
    return model


@requires(torch is not None, "torch not importable with this interpreter (Debian: python3-torch)")
class TorchTest(unittest.TestCase):
    def setUp(self):
        self.r = use_recorder()

    def tearDown(self):
        disable()

    def _check_training(self, r):
        ph = r.phases()
        types = [p[1] for p in ph]
        self.assertEqual(types.count("epoch"), 2)
        self.assertEqual(types.count("iteration"), 6)
        self.assertEqual(types.count("data_wait"), 8)  # 3 batches + the final StopIteration, per epoch
        self.assertEqual(types.count("forward"), 6)    # the model, per batch
        self.assertEqual(types.count("loss"), 6)       # the loss module, per batch
        self.assertEqual(types.count("backward"), 6)   # Tensor.backward -> autograd.backward: once
        self.assertEqual(types.count("optimizer_step"), 6)
        epochs = [p for p in ph if p[1] == "epoch"]
        workers = str(self.workers)
        threads = str(torch.get_num_threads())
        # What the tuning says of each epoch (tuning.py): all 3 iterations' fine phases recorded.
        for e in epochs:
            self.assertEqual(e[2]["fine.every"], "1")
            self.assertEqual(e[2]["fine.iterations"], "3")
            self.assertEqual(e[2]["fine.recorded_iterations"], "3")
            self.assertEqual(float(e[2]["overhead.budget"]), grademl.auto.tuning.BUDGET)
            self.assertGreater(int(e[2]["overhead.ns"]), 0)
            self.assertFalse([k for k in e[2] if k.startswith("unrecorded.")])
        self.assertEqual([_without_tuning(e[2]) for e in epochs], [
            {"epoch": "1", "torch_threads": threads, "num_workers": workers, "mode": "train"},
            {"epoch": "2", "torch_threads": threads, "num_workers": workers, "mode": "train"},
        ])
        for p in ph:
            if p[1] in ("data_wait", "iteration"):
                self.assertEqual(p[4], "epoch")
            if p[1] == "iteration":
                self.assertEqual(p[2], {"num_workers": workers, "mode": "train"})
            if p[1] in ("forward", "loss", "backward", "optimizer_step"):
                self.assertEqual(p[4], "iteration")
                self.assertEqual(_without_threads(p[2]), {})
        # the sequence of one epoch
        first = [p[0] for p in ph[: ph.index(epochs[1])]]
        one = ["dataloader.next", "iteration", "forward", "CrossEntropyLoss", "backward", "optimizer.step"]
        self.assertEqual(first, ["epoch"] + one * 3 + ["dataloader.next"])

    def test_training_loop(self):
        self.workers = 0
        _train(DataLoader(_dataset(), batch_size=4))
        self._check_training(self.r)

    def test_eval_forward_tagged(self):
        model = _Model()
        with torch.no_grad():
            model(torch.randn(2, 4))
        with torch.inference_mode():
            model(torch.randn(2, 4))
        model(torch.randn(2, 4))
        self.assertEqual([(n, t, _without_threads(tags), d, parent) for n, t, tags, d, parent in self.r.phases()], [
            ("forward", "forward", {"mode": "eval"}, 0, None),
            ("forward", "forward", {"mode": "eval"}, 0, None),
            ("forward", "forward", {}, 0, None),
        ])

    def test_threads_tag_on_forward_when_it_changes(self):
        model = _Model()
        n = torch.get_num_threads()
        try:
            torch.set_num_threads(n + 1)
            model(torch.randn(2, 4))
            model(torch.randn(2, 4))
            torch.set_num_threads(n)
            model(torch.randn(2, 4))
            model(torch.randn(2, 4))
        finally:
            torch.set_num_threads(n)
        self.assertEqual([tags for _, _, tags, _, _ in self.r.phases()],
                         [{"torch_threads": str(n + 1)}, {}, {"torch_threads": str(n)}, {}])

    def test_workers(self):
        self.workers = 2
        _train(DataLoader(_dataset(), batch_size=4, num_workers=2))
        self._check_training(self.r)

    def test_break_and_new_iterator(self):
        loader = DataLoader(_dataset(), batch_size=4)
        for i, _ in enumerate(loader):
            if i == 1:
                break
        with grademl.phase("after"):
            pass
        it = iter(loader)
        next(it)
        iter(loader)  # a new iterator ends the previous epoch
        del it
        ph = self.r.phases()  # balanced
        self.assertEqual([p[0] for p in ph if p[1] == "epoch"], ["epoch"] * 3)
        self.assertEqual([p for p in ph if p[0] == "after"], [("after", None, {}, 0, None)])

    def _modes(self):
        """[(epoch mode, [iteration modes])] in order."""
        out = []
        for n, t, tags, _, parent in self.r.phases():
            if t == "epoch":
                out.append((tags.get("mode"), []))
            elif t == "iteration":
                out[-1][1].append(tags.get("mode"))
        return out

    def test_train_and_eval_passes(self):
        # The MNIST example's shape: per epoch a training pass, then a test pass under
        # model.eval() + torch.no_grad(), over another DataLoader.
        train_loader = DataLoader(_dataset(), batch_size=4)  # 3 batches
        test_loader = DataLoader(_dataset(), batch_size=6)   # 2 batches
        model = _Model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            model.train()
            for x, y in train_loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for x, y in test_loader:
                    model(x)
        train, test = ("train", ["train"] * 3), ("eval", ["eval"] * 2)
        self.assertEqual(self._modes(), [train, test, train, test])

    def test_eval_signals(self):
        loader = DataLoader(_dataset(), batch_size=6)  # 2 batches
        model = _Model()
        # model.eval() alone (grad on): eval
        model.eval()
        for x, _ in loader:
            model(x)
        # no_grad inside the iteration, model in training mode: eval
        model.train()
        for x, _ in loader:
            with torch.no_grad():
                model(x)
        # inference_mode around the loop, no model call at all: eval (grad off at the start)
        with torch.inference_mode():
            for _ in loader:
                pass
        # a backward pass wins over model.eval() (frozen batch-norm fine-tuning): train
        model.eval()
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        # no model, grad on, nothing else: train (the default)
        for _ in loader:
            pass
        # an empty pass under no_grad: eval; with grad: train
        empty = DataLoader(TensorDataset(torch.zeros(0, 4)), batch_size=2)
        with torch.no_grad():
            for _ in empty:
                pass
        for _ in empty:
            pass
        self.assertEqual(self._modes(), [
            ("eval", ["eval", "eval"]),
            ("eval", ["eval", "eval"]),
            ("eval", ["eval", "eval"]),
            ("train", ["train", "train"]),
            ("train", ["train", "train"]),
            ("eval", []),
            ("train", []),
        ])

    def test_validation_inside_a_training_iteration(self):
        # A validation pass nested in a training iteration: each loop gets its own mode.
        train_loader = DataLoader(_dataset(), batch_size=6)  # 2 batches
        val_loader = DataLoader(_dataset(), batch_size=12)   # 1 batch
        model = _Model()
        for i, (x, y) in enumerate(train_loader):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            if i == 0:
                with torch.no_grad():
                    for vx, _ in val_loader:
                        model(vx)
        ph = self.r.phases()
        epochs = [(tags["mode"], parent) for _, t, tags, _, parent in ph if t == "epoch"]
        self.assertEqual(epochs, [("train", None), ("eval", "iteration")])
        iters = [tags["mode"] for _, t, tags, _, _ in ph if t == "iteration"]
        self.assertEqual(iters, ["train", "eval", "train"])  # in begin order

    def _loop(self, n_batches, epochs=1):
        g = torch.Generator().manual_seed(1)
        data = TensorDataset(torch.randn(4 * n_batches, 4, generator=g), torch.randint(0, 2, (4 * n_batches,), generator=g))
        _train(DataLoader(data, batch_size=4), epochs=epochs)

    def _tuned(self, budget=None, forced=None, deep=False):
        """Runs with the tuning's budget, a forced phase cost and --deep as given, restoring them."""
        tuning = grademl.auto.tuning
        auto_torch = __import__("grademl.auto.torch", fromlist=["_deep"])
        saved = (tuning.BUDGET, tuning.costs.forced, auto_torch._deep)
        tuning.BUDGET = saved[0] if budget is None else budget
        tuning.costs.forced = forced
        auto_torch._deep = auto_torch._DeepOps(torch) if deep else None
        self.addCleanup(lambda: (setattr(tuning, "BUDGET", saved[0]), setattr(tuning.costs, "forced", saved[1]),
                                 setattr(auto_torch, "_deep", saved[2])))

    def _epoch_tags(self):
        return [p[2] for p in self.r.phases() if p[1] == "epoch"]

    def test_fine_phases_sampled_when_they_do_not_fit_the_budget(self):
        # A recorded phase forced to cost 1 ms: no loop fits 1% with one per iteration, so
        # after the warm-up only 1 iteration in MAX_EVERY records its fine phases; the
        # others are timed, and counts stay exact.
        tuning = grademl.auto.tuning
        self._tuned(forced=1e6)
        self._loop(100)
        ph = self.r.phases()
        types = [p[1] for p in ph]
        (tags,) = self._epoch_tags()
        self.assertEqual(types.count("iteration"), 100)  # never sampled
        self.assertEqual(tags["fine.every"], str(tuning.MAX_EVERY))
        self.assertEqual(tags["fine.iterations"], "100")
        self.assertEqual(tags["fine.recorded_iterations"], str(tuning.WARMUP))
        for t, per_iteration in (("forward", 1), ("loss", 1), ("backward", 1), ("optimizer_step", 1)):
            self.assertEqual(types.count(t), tuning.WARMUP * per_iteration, t)
            self.assertEqual(int(tags[f"unrecorded.{t}.count"]), (100 - tuning.WARMUP) * per_iteration, t)
            self.assertGreater(int(tags[f"unrecorded.{t}.ns"]), 0, t)
        # Data waits are never sampled: 100 batches and the final StopIteration.
        self.assertEqual(types.count("data_wait"), 101)
        self.assertNotIn("unrecorded.data_wait.count", tags)
        # Recorded fine phases are all in the first WARMUP iterations.
        iters = [i for i, p in enumerate(ph) if p[1] == "iteration"]
        later = ph[iters[tuning.WARMUP]:]
        self.assertFalse([p for p in later if p[1] in ("forward", "backward", "optimizer_step", "loss")])
        # The estimate: WARMUP x 4 fine phases + 101 data waits + 100 iterations at 1 ms each,
        # the rest timed only.
        recorded = tuning.WARMUP * 4 + types.count("data_wait") + 100
        self.assertGreaterEqual(int(tags["overhead.ns"]), recorded * 1e6)
        self.assertLess(int(tags["overhead.ns"]), recorded * 1e6 + 400 * 1e5)

    def test_no_sampling_once_torch_distributed_is_initialized(self):
        # The communication analysis sets collectives against every backward pass.
        tuning = grademl.auto.tuning
        self._tuned(forced=1e6)
        saved = tuning.keep_all_reason
        self.addCleanup(lambda: setattr(tuning, "keep_all_reason", saved))
        tuning.keep_every_fine_phase("torch.distributed")
        self._loop(60)
        (tags,) = self._epoch_tags()
        self.assertEqual(tags["fine.every"], "1")
        self.assertEqual([p[1] for p in self.r.phases()].count("backward"), 60)

    def test_a_preempted_measurement_does_not_move_the_cost(self):
        costs = grademl.auto.tuning.Costs()
        for ns in (2000, 2100, 1900, 2000, 5_000_000, 2050, 1950):  # one 5 ms outlier
            costs.observe(ns + costs.clock)
        self.assertEqual(costs.begin_end, 2000)
        for _ in range(20):  # and a lasting change is followed
            costs.observe(3000 + costs.clock)
        self.assertEqual(costs.begin_end, 3000)

    def test_deep_profiles_enough_iterations_for_an_interval(self):
        # Profiling that costs many times an iteration would be spaced past the end of a
        # short run: the first MIN_DEEP are spread over the first epoch at most.
        # A budget no profiling fits stands for that (the spacing would be 100000).
        tuning = grademl.auto.tuning
        self._tuned(deep=True)
        saved = tuning.DEEP_BUDGET
        tuning.DEEP_BUDGET = 1e-9
        self.addCleanup(lambda: setattr(tuning, "DEEP_BUDGET", saved))
        self._loop(120)
        deep = [p for p in self._ancestry() if p[1] == "iteration" and p[2].get("deep") == "ops"]
        self.assertEqual(tuning.MIN_DEEP, 5)
        self.assertIn(len(deep), (5, 6))  # then the budget's spacing

    def test_a_profiled_iteration_measured_as_free_still_costs_its_operators(self):
        # A profiled iteration no slower than the pace (noise on a busy machine) used to make
        # profiling look free: every other iteration was then profiled. Its cost is at least
        # that of recording its operator phases (a fake clock: every iteration 1000 ns).
        tuning = grademl.auto.tuning
        self._tuned(forced=1000.0)
        clock = [0]
        saved_pc = tuning._pc
        tuning._pc = lambda: clock[0]
        self.addCleanup(lambda: setattr(tuning, "_pc", saved_pc))
        t = tuning.LoaderTuning()
        deep = []
        for i in range(60):
            clock[0] += 1000
            _, d = t.next_iteration(True)
            if d:
                deep.append(i)
                tuning.fine.ops += 100  # its operators, recorded at 1000 ns each
        self.assertEqual(deep, [tuning.WARMUP_DEEP])

    def test_free_phases_are_all_recorded(self):
        self._tuned(forced=0.0)
        self._loop(60)
        types = [p[1] for p in self.r.phases()]
        (tags,) = self._epoch_tags()
        self.assertEqual(tags["fine.every"], "1")
        self.assertEqual(tags["fine.recorded_iterations"], "60")
        self.assertEqual(types.count("forward"), 60)
        self.assertFalse([k for k in tags if k.startswith("unrecorded.")])

    def test_sampling_step_follows_the_budget(self):
        # The step is the recording cost over what the budget leaves, rounded up: with a
        # measured pace, a 100x larger budget never samples more sparsely.
        steps = []
        for budget in (0.001, 0.1):
            self.r.events.clear()
            self.r.threads.clear()
            self._tuned(budget=budget, forced=20000.0)
            self._loop(80)
            steps.append(int(self._epoch_tags()[0]["fine.every"]))
        self.assertGreater(steps[0], 1)
        self.assertLessEqual(steps[1], steps[0])

    def _ancestry(self):
        """Per phase (in begin order): its type, tags and its ancestors' (type, tags), outermost first."""
        out, stacks = [], {}
        for e, thread in zip(self.r.events, self.r.threads):
            stack = stacks.setdefault(thread, [])
            if e[0] == "begin":
                rec = (e[1], e[2], {}, [(a[1], a[2]) for a in stack])
                out.append(rec)
                stack.append(rec)
            elif e[0] == "end":
                stack.pop()
            elif e[0] == "tag":
                stack[-1][2][e[1]] = e[2]
        return out

    def test_deep_profiles_operators_in_sampled_iterations_only(self):
        tuning = grademl.auto.tuning
        self._tuned(deep=True)
        self._loop(80)
        torch.nn.Linear(4, 2)(torch.randn(3, 4))  # after the loop: the operator mode is gone
        ph = self._ancestry()
        iterations = [p for p in ph if p[1] == "iteration"]
        self.assertEqual(len(iterations), 80)
        deep = [i for i, p in enumerate(iterations) if p[2].get("deep") == "ops"]
        self.assertTrue(deep)
        self.assertGreaterEqual(deep[0], tuning.WARMUP_DEEP)  # never in the warm-up
        self.assertEqual(deep[0], tuning.WARMUP_DEEP)
        ops = [p for p in ph if p[1] == "op"]
        self.assertTrue(ops)
        for p in ops:
            owners = [a for a in p[3] if a[0] in ("iteration", "data_wait")]
            self.assertTrue(owners and owners[-1][1].get("deep") == "ops", p)
        # addmm runs once per Linear forward (two in the model): in each profiled iteration.
        under = sum(1 for p in ops if p[0] == "addmm")
        self.assertEqual(under, 2 * len(deep))
        # A profiled iteration records its fine phases whatever the budget says.
        for i, p in enumerate(ph):
            if p[1] == "iteration" and p[2].get("deep") == "ops":
                self.assertEqual(next(q for q in ph[i + 1:] if q[1] != "op")[1], "forward")

    def test_optimizer_subclass_later(self):
        class MySGD(torch.optim.SGD):
            def step(self, closure=None):
                return super().step(closure)

        w = torch.nn.Parameter(torch.ones(2))
        opt = MySGD([w], lr=0.1)
        w.sum().backward()
        opt.step()
        self.assertEqual([p[0] for p in self.r.phases()], ["backward", "optimizer.step"])

    def test_disabled_no_events(self):
        disable()
        _train(DataLoader(_dataset(), batch_size=4), epochs=1)
        self.assertEqual(self.r.events, [])


@requires(sklearn is not None, "sklearn not importable with this interpreter (Debian: python3-sklearn)")
class SklearnTest(unittest.TestCase):
    def setUp(self):
        import numpy

        rng = numpy.random.RandomState(0)
        self.X = rng.randn(40, 3)
        self.y = (self.X[:, 0] > 0).astype(int)
        self.r = use_recorder()

    def tearDown(self):
        disable()

    def test_logreg(self):
        from sklearn.linear_model import LogisticRegression

        m = LogisticRegression().fit(self.X, self.y)
        m.predict(self.X)
        self.assertEqual(self.r.phases(), [
            ("LogisticRegression.fit", "sklearn.fit", {"estimator": "LogisticRegression"}, 0, None),
            ("LogisticRegression.predict", "sklearn.predict", {"estimator": "LogisticRegression"}, 0, None),
        ])

    def test_scaler_fit_transform_once(self):
        from sklearn.preprocessing import StandardScaler

        StandardScaler().fit_transform(self.X)
        self.assertEqual(self.r.phases(), [
            ("StandardScaler.fit_transform", "sklearn.fit_transform", {"estimator": "StandardScaler"}, 0, None),
        ])

    def test_pipeline(self):
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        p = make_pipeline(StandardScaler(), LogisticRegression()).fit(self.X, self.y)
        p.predict(self.X)
        names = [(n, d, parent) for n, _, _, d, parent in self.r.phases()]
        self.assertEqual(names, [
            ("Pipeline.fit", 0, None),
            ("StandardScaler.fit_transform", 1, "Pipeline.fit"),
            ("LogisticRegression.fit", 1, "Pipeline.fit"),
            ("Pipeline.predict", 0, None),
            ("StandardScaler.transform", 1, "Pipeline.predict"),
            ("LogisticRegression.predict", 1, "Pipeline.predict"),
        ])

    def test_user_estimator(self):
        from sklearn.base import BaseEstimator

        class Mine(BaseEstimator):
            def fit(self, X, y=None):
                return self

        Mine().fit(self.X)
        self.assertEqual([p[0] for p in self.r.phases()], ["Mine.fit"])

    def test_inherited_methods(self):
        # SVC's fit and predict live in its base classes (BaseLibSVM, BaseSVC); classes are
        # wrapped when their first object is created, bases included.
        from sklearn.svm import SVC

        m = SVC().fit(self.X, self.y)
        m.predict(self.X)
        self.assertEqual([p[0] for p in self.r.phases()], ["SVC.fit", "SVC.predict"])

    def test_unpickled_and_cloned_estimators(self):
        import pickle

        from sklearn.base import clone
        from sklearn.tree import DecisionTreeClassifier

        m = pickle.loads(pickle.dumps(DecisionTreeClassifier(random_state=0)))
        clone(m).fit(self.X, self.y)
        self.assertEqual([p[0] for p in self.r.phases()], ["DecisionTreeClassifier.fit"])


@requires(pd is not None, "pandas/numpy not importable with this interpreter (Debian: python3-pandas)")
class IoTest(unittest.TestCase):
    def setUp(self):
        self.r = use_recorder()
        self.d = tempfile.TemporaryDirectory()

    def tearDown(self):
        disable()
        self.d.cleanup()

    def test_pandas_numpy(self):
        import pathlib

        csv = os.path.join(self.d.name, "a.csv")
        npy = pathlib.Path(self.d.name) / "a.npy"
        npz = os.path.join(self.d.name, "a.npz")
        pd.DataFrame({"a": [1, 2]}).to_csv(csv, index=False)
        df = pd.read_csv(csv)
        np.save(npy, df.values)
        np.load(npy)
        np.savez(npz, a=df.values)
        np.savez_compressed(npz, a=df.values)
        pd.read_csv(filepath_or_buffer=csv)
        self.assertEqual([(n, t, tags) for n, t, tags, _, _ in self.r.phases()], [
            ("to_csv", "io", {"path": csv}),
            ("read_csv", "io", {"path": csv}),
            ("save", "io", {"path": str(npy)}),
            ("load", "io", {"path": str(npy)}),
            ("savez", "io", {"path": npz}),
            ("savez_compressed", "io", {"path": npz}),
            ("read_csv", "io", {"path": csv}),
        ])


class _Boom(Exception):
    pass


class _Exploding:
    def __reduce__(self):
        raise _Boom("no pickling")


@requires(torch is not None, "torch not importable with this interpreter (Debian: python3-torch)")
class SerialisationTest(unittest.TestCase):
    def setUp(self):
        self.r = use_recorder()
        self.d = tempfile.TemporaryDirectory()

    def tearDown(self):
        disable()
        self.d.cleanup()

    def _io(self):
        return [(n, tags) for n, t, tags, _, _ in self.r.phases() if t == "io"]

    def test_pickle_files(self):
        import pickle

        path = os.path.join(self.d.name, "obj.pkl")
        obj = {"a": list(range(100))}
        with open(path, "wb") as f:
            f.write(b"head")  # bytes = what this call wrote, not the file's size
            self.assertIsNone(pickle.dump(obj, f))
        size = os.path.getsize(path) - 4
        with open(path, "rb") as f:
            f.read(4)
            self.assertEqual(pickle.load(f), obj)
        self.assertEqual(pickle.loads(pickle.dumps(obj)), obj)  # in memory: no phase
        self.assertEqual(self._io(), [
            ("pickle.dump", {"path": path, "bytes": str(size)}),
            ("pickle.load", {"path": path, "bytes": str(size)}),
        ])
        # The wrappers are found by reference (pickling a function pickles its name).
        self.assertIs(pickle.loads(pickle.dumps(pickle.dump)), pickle.dump)

    def test_exceptions_and_results_unchanged(self):
        import pickle

        path = os.path.join(self.d.name, "bad.pkl")
        with open(path, "wb") as f:
            with self.assertRaises(_Boom):
                pickle.dump(_Exploding(), f)
        with self.assertRaises(FileNotFoundError):
            torch.load(os.path.join(self.d.name, "missing.pt"))
        with open(path, "wb") as f:
            f.write(b"not a pickle")
        with open(path, "rb") as f, self.assertRaises(pickle.UnpicklingError):
            pickle.load(f)
        # balanced phases, no size for failed calls
        self.assertEqual([n for n, tags in self._io()], ["pickle.dump", "torch.load", "pickle.load"])
        self.assertTrue(all("bytes" not in tags for _, tags in self._io()))

    def test_torch_save_load(self):
        import io
        import pathlib

        path = pathlib.Path(self.d.name) / "m.pt"
        state = {"w": torch.arange(10.0)}
        torch.save(state, path)
        loaded = torch.load(path)
        self.assertTrue(torch.equal(loaded["w"], state["w"]))
        buf = io.BytesIO()
        torch.serialization.save(state, buf)  # same wrapper under its home module
        n = buf.tell()
        buf.seek(0)
        torch.load(buf)
        size = str(path.stat().st_size)
        self.assertEqual(self._io(), [
            ("torch.save", {"path": str(path), "bytes": size}),  # one phase, no pickle.dump inside
            ("torch.load", {"path": str(path), "bytes": size}),
            ("torch.save", {}),  # in memory: no path, no size
            ("torch.load", {}),
        ])
        self.assertGreater(n, 0)

    def test_joblib(self):
        try:
            import joblib
        except ImportError:
            skip_or_fail(self, "joblib not importable (Debian: python3-joblib)")
        path = os.path.join(self.d.name, "j.joblib")
        data = {"x": list(range(50))}
        self.assertEqual(joblib.dump(data, path), [path])
        self.assertEqual(joblib.load(path), data)
        size = str(os.path.getsize(path))
        self.assertEqual(self._io(), [
            ("joblib.dump", {"path": path, "bytes": size}),
            ("joblib.load", {"path": path, "bytes": size}),
        ])

    def test_failing_hook_switches_itself_off(self):
        import pickle

        from grademl.auto import _disabled

        def broken(*_):
            raise RuntimeError("recorder broken")

        self.r.begin_typed = broken
        path = os.path.join(self.d.name, "y.pkl")
        try:
            with open(path, "wb") as f:
                pickle.dump([1, 2], f)  # the program's call still happens
            with open(path, "rb") as f:
                self.assertEqual(pickle.load(f), [1, 2])
            self.assertIn("io", _disabled)
        finally:
            _disabled.discard("io")
        self.assertEqual(self.r.events, [])

    def test_nothing_imported_that_the_program_does_not_import(self):
        import subprocess
        import sys

        # Nor grademl's own hook modules: each is imported with the module it patches.
        code = ("import grademl.auto, sys; grademl.auto.install(); "
                "print(grademl.auto._installed, 'joblib' in sys.modules, 'torch' in sys.modules, "
                "sorted(m for m in sys.modules if m.startswith('grademl.auto.')))")
        env = dict(os.environ, GRADEML_AUTO_FORCE="1",
                   PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        env.pop("GRADEML_EVENTS_DIR", None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.split(), ["True", "False", "False", "[]"], out.stderr)

    def test_lazy_hooks_are_the_ones_each_module_registers(self):
        from grademl.auto import _LAZY_HOOKS, dask, io, sklearn
        from grademl.auto import torch as auto_torch

        registered = {}
        for mod in (auto_torch, sklearn, io, dask):
            mod.register_hooks(lambda name, fn, m=mod: registered.__setitem__(name, (m.__name__.rsplit(".", 1)[1], fn.__name__)))
        self.assertEqual(registered, _LAZY_HOOKS)

    def test_disabled_no_events(self):
        import pickle

        disable()
        path = os.path.join(self.d.name, "x.pkl")
        with open(path, "wb") as f:
            pickle.dump(1, f)
        torch.save(1, path)
        self.assertEqual(self.r.events, [])


if __name__ == "__main__":
    unittest.main()


@requires(torch is not None, "torch not importable with this interpreter (Debian: python3-torch)")
class TorchTraceExportTest(unittest.TestCase):
    """export_chrome_trace of torch's profilers: one trace_export phase per file, tagged with
    its absolute path and the profiler's start (what torch 1.13's relative ts count from)."""

    def setUp(self):
        self.r = use_recorder()
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        disable()

    def _exports(self):
        return [p for p in self.r.phases() if p[1] == "trace_export"]

    def _work(self, marks):
        x = torch.randn(32, 32)
        for _ in range(3):
            a = time.time_ns()
            torch.mm(x, x)
            marks.append((a, time.time_ns()))

    def test_autograd_profiler_export(self):
        marks = []
        before = time.time_ns()
        with torch.autograd.profiler.profile() as prof:
            self._work(marks)
        path = os.path.join(self.dir, "legacy.json")
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            prof.export_chrome_trace("legacy.json")  # relative: tagged absolute
        finally:
            os.chdir(cwd)
        (name, ptype, tags, _, _), = self._exports()
        self.assertEqual(name, "torch.profiler export")
        self.assertEqual(tags["trace.path"], path)
        self.assertEqual(tags["trace.writer"], "torch.autograd.profiler")
        anchor = int(tags["trace.anchor_ns"])
        self.assertGreaterEqual(anchor, before - 1000)  # torch truncates to whole us
        # The anchor plus each aten::mm's ts lies between the wall-clock times taken around it.
        with open(path) as f:
            events = json.load(f)
        mms = [e for e in events if e["name"] == "aten::mm"]
        self.assertEqual(len(mms), 3)
        for e, (a, b) in zip(mms, marks):
            start = anchor + int(e["ts"]) * 1000
            self.assertGreaterEqual(start, a - 1000)
            self.assertLessEqual(start + int(e["dur"]) * 1000, b + 1000)

    def test_torch_profiler_gz_and_handler(self):
        import torch.profiler as tp

        with tp.profile() as prof:
            self._work([])
        prof.export_chrome_trace(os.path.join(self.dir, "t.json.gz"))
        (_, _, tags, _, _), = self._exports()  # the inner export is not a second phase
        self.assertEqual(tags["trace.path"], os.path.join(self.dir, "t.json.gz"))
        self.assertEqual(tags["trace.writer"], "torch.profiler")
        self.assertIn("trace.anchor_ns", tags)

        self.r = use_recorder()
        handler_dir = os.path.join(self.dir, "tb")
        with tp.profile(schedule=tp.schedule(wait=0, warmup=1, active=2, repeat=1),
                        on_trace_ready=tp.tensorboard_trace_handler(handler_dir)) as prof:
            for _ in range(4):
                self._work([])
                prof.step()
        exports = self._exports()
        self.assertEqual(len(exports), 1)
        written = os.listdir(handler_dir)
        self.assertEqual([os.path.join(handler_dir, w) for w in written], [exports[0][2]["trace.path"]])

    def test_failed_export_not_tagged(self):
        with torch.autograd.profiler.profile() as prof:
            self._work([])
        with self.assertRaises(OSError):
            prof.export_chrome_trace(os.path.join(self.dir, "missing", "x.json"))
        (_, _, tags, _, _), = self._exports()
        self.assertEqual(tags, {})

    def test_disabled_no_events(self):
        disable()
        with torch.autograd.profiler.profile() as prof:
            self._work([])
        prof.export_chrome_trace(os.path.join(self.dir, "x.json"))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "x.json")))
        self.assertEqual(self.r.events, [])
