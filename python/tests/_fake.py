"""A fake native layer for tests: records calls instead of writing events."""
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import grademl  # noqa: E402


class Recorder:
    def __init__(self):
        self.ids = {}
        self.names = {}
        self.events = []
        self.threads = []  # the thread of each event (phases nest per thread)
        self._lock = threading.Lock()

    def _add(self, event):
        with self._lock:
            self.events.append(event)
            self.threads.append(threading.get_ident())

    def enabled(self):
        return 1

    def intern(self, s):
        s = str(s)
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.ids) + 1
            self.names[i] = s
        return i

    def begin(self, i):
        self._add(("begin", self.names[i], None))

    def begin_typed(self, i, t):
        self._add(("begin", self.names[i], self.names[t]))

    def end(self):
        self._add(("end",))

    def tag(self, k, v):
        self._add(("tag", self.names[k], self.names[v]))

    def tag_str(self, k, v):
        self._add(("tag", k, v))

    def instant(self, i):
        self._add(("instant", self.names[i]))

    def counter(self, i, v):
        self._add(("counter", self.names[i], v))

    def flow_out(self, f):
        self._add(("flow_out", f))

    def flow_in(self, f):
        self._add(("flow_in", f))

    def now(self):
        import time

        return time.monotonic_ns()

    def begin_at(self, i, t, ticks):
        self._add(("begin", self.names[i], self.names[t] if t else None, ticks))

    def end_at(self, ticks):
        self._add(("end", ticks))

    def tag_int(self, k, v):
        self._add(("tag", self.names[k], str(v)))

    def tag_process(self, k, v):
        self._add(("tag_process", self.names[k], self.names[v]))

    # ---- views
    def phases(self):
        """[(name, type, {tags}, depth, parent name)] in begin order; checks balance (per thread)."""
        out, stacks = [], {}
        for e, thread in zip(list(self.events), list(self.threads)):
            stack = stacks.setdefault(thread, [])
            if e[0] == "begin":
                rec = [e[1], e[2], {}, len(stack), stack[-1][0] if stack else None]
                out.append(rec)
                stack.append(rec)
            elif e[0] == "end":
                assert stack, "end without begin"
                stack.pop()
            elif e[0] == "tag":
                assert stack, "tag outside a phase"
                stack[-1][2][e[1]] = e[2]
        for stack in stacks.values():
            assert not stack, f"unclosed phases: {[r[0] for r in stack]}"
        return [tuple(r) for r in out]

    def process_tags(self):
        """The tags put on the process's own phase (tag_process), the last value of each key."""
        return {e[1]: e[2] for e in self.events if e[0] == "tag_process"}

    def count(self, key, value):
        """Number of phases whose name (key='name') or type (key='type') is value."""
        idx = 0 if key == "name" else 1
        return sum(1 for p in self.phases() if p[idx] == value)


def use_recorder():
    r = Recorder()
    grademl._set_backend(r)
    return r


def disable():
    grademl._set_backend(None)
