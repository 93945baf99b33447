"""--deep's spacing (grademl/auto/tuning.py) on a simulated clock: over a run, operator
profiling costs at most DEEP_BUDGET of the loop, the first MIN_DEEP profiled iterations
(spread over the first epoch whatever they cost) included."""
import unittest

from _fake import disable, use_recorder  # noqa: F401  (puts python/ on sys.path)

from grademl.auto import tuning


class DeepBudgetTest(unittest.TestCase):
    def simulate(self, cls, iterations, epoch_len, base_ns, profiled_ns):
        """Runs `iterations` of a loop whose iterations take base_ns, profiled ones
        profiled_ns; returns (profiled indices, loop ns)."""
        clock = [0]
        saved = tuning._pc
        tuning._pc = lambda: clock[0]
        try:
            t = cls()
            t.epoch_len = epoch_len
            deep_at = []
            for i in range(iterations):
                _, deep = t.next_iteration(True)
                if deep:
                    deep_at.append(i)
                clock[0] += profiled_ns if deep else base_ns
            return deep_at, clock[0]
        finally:
            tuning._pc = saved

    def check(self, cls):
        base, profiled = 1_000_000, 3_000_000  # a profiled iteration costs 2 more
        for iterations in (565, 5000, 50000):
            deep_at, loop_ns = self.simulate(cls, iterations, 113, base, profiled)
            spent = len(deep_at) * (profiled - base)
            plain_ns = loop_ns - spent
            with self.subTest(cls=cls.__name__, iterations=iterations):
                self.assertGreaterEqual(deep_at[0], tuning.WARMUP_DEEP)
                # The first MIN_DEEP within the first epoch, whatever the budget.
                self.assertGreaterEqual(len([i for i in deep_at if i < 113]), tuning.MIN_DEEP)
                # Over the run: at most the budget, once the first MIN_DEEP are paid back
                # (one profiled iteration of slack: the last may just have been allowed).
                allowed = max(tuning.DEEP_BUDGET * plain_ns, tuning.MIN_DEEP * (profiled - base))
                self.assertLessEqual(spent, allowed + (profiled - base), deep_at[:20])
                # And not far below it on a long run: profiling keeps going.
                if iterations >= 50000:
                    self.assertGreaterEqual(spent, 0.7 * tuning.DEEP_BUDGET * plain_ns)

    def test_python_tuning(self):
        self.check(tuning._PyLoaderTuning)
    # The C class (grademl._native.Tuning) reads its own clock, not tuning._pc; its spacing is
    # the same _deep_update, called from C.


if __name__ == "__main__":
    unittest.main()
