"""What a test does when something it needs is missing (torch, sklearn, pandas, dask,
libgrademl.so, a compiler for the extension): outside CI it skips, saying what is missing;
under CI=true it fails with the same message, because there a missing requirement is a broken
setup, not a reason to test less. The C++ tests have the same rule (tests/skip_or_fail.h);
docs/testing.md."""
import functools
import os
import unittest

IN_CI = os.environ.get("CI") == "true"
PREFIX = "CI=true, so this fails instead of skipping: "


def skip_or_fail(test, reason):
    """Ends `test` (a unittest.TestCase, inside a test method): skipped, or failed under CI=true."""
    if IN_CI:
        test.fail(PREFIX + reason)
    test.skipTest(reason)


def requires(available, reason):
    """A decorator for a test method or class that needs something: it runs when `available`,
    else it is skipped, or under CI=true each of its tests fails saying `reason`."""
    if available:
        return lambda obj: obj
    if not IN_CI:
        return unittest.skip(reason)

    def fail_instead(obj):
        if isinstance(obj, type):
            # Before the class's own set-up (which may use what is missing).
            def setUpClass(cls):  # noqa: N802
                pass

            def setUp(self):  # noqa: N802
                self.fail(PREFIX + reason)

            obj.setUpClass = classmethod(setUpClass)
            obj.setUp = setUp
            return obj

        @functools.wraps(obj)
        def test(self, *args, **kwargs):
            self.fail(PREFIX + reason)
        return test

    return fail_instead
