"""torch's own distributed test suite (DistributedTest._DistTestBase of
torch/testing/_internal/distributed/distributed_test.py) on the backend named by BACKEND.

The minimum of torch's test/distributed/test_distributed_spawn.py, which Debian does not ship:
one TestCase class, whose ranks (WORLD_SIZE of them) are processes started afresh for every
test. They are forked from this process, which has imported torch and the suite once, rather
than spawned (each spawned rank would import them again: seconds of CPU per rank and test).

    BACKEND=hoop WORLD_SIZE=3 python3 dist_suite.py RESULTS test_name...

runs the named tests (all of them when none is named) and appends one JSON line per test to
RESULTS: {"test", "outcome" (passed, failed, error, skipped), "seconds", "detail"};
`dist_suite.py --skipped-at-import` prints the tests the suite's decorators skip.
With BACKEND=hoop, hoop_torch registers the backend and "hoop" is declared in the sets the
suite's skip decorators key on, before the suite is imported (the decorators read them then).
Tests the suite keeps to gloo by its name (require_backend({"gloo"}), skip_if(BACKEND !=
"gloo"), ...) run on hoop too: hoop is held to every test the suite runs on gloo.
"""
import json
import multiprocessing
import os
import subprocess
import sys
import time
import unittest

import torch.nn.parallel._replicated_tensor_ddp_utils as replicated_tensor_ddp
from torch.testing._internal.common_distributed import DistTestCases

if os.environ["BACKEND"] == "hoop":
    import hoop_torch

    # A CPU backend with DDP and sub-groups, not built into torch.
    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add(hoop_torch.BACKEND_NAME)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


# TestDistBackend._run turns on DDP's ReplicatedTensor mode, whose module cannot be imported
# under Python 3.11 (a dataclass with a mutable default, torch/distributed/_shard/
# sharded_tensor/metadata.py): every DDP test would fail on it, whatever the backend. The
# ranks keep DDP's ordinary mode.
replicated_tensor_ddp._set_ddp_with_replicated_tensor = lambda value: None


class TestDistBackendWithFork(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._start_processes(multiprocessing.get_context("fork").Process)


class JsonLinesResult(unittest.TestResult):
    """Appends each test's outcome to a file as soon as it is known."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.started = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()
        print(f"{os.environ['BACKEND']}: {test_name(test)} ...", file=sys.stderr, flush=True)

    def record(self, test, outcome, detail=""):
        line = {"test": test_name(test), "outcome": outcome,
                "seconds": round(time.monotonic() - self.started, 2), "detail": detail[-4000:]}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self.record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.record(test, "failed", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        self.record(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.record(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.record(test, "failed", "unexpected success")


def test_name(test):
    return test.id().split(".")[-1]


def skipped_at_import():
    """The tests the suite's decorators skip on this process's backend."""
    cls = TestDistBackendWithFork
    return {n for n in unittest.TestLoader().getTestCaseNames(cls)
            if getattr(getattr(cls, n), "__unittest_skip__", False)}


def run_what_gloo_runs():
    """Un-skips the tests skipped here but not with BACKEND=gloo (asked of a process of its
    own, since the decorators decide at import)."""
    gloo = subprocess.run([sys.executable, __file__, "--skipped-at-import"], check=True,
                          env=dict(os.environ, BACKEND="gloo"), stdout=subprocess.PIPE, text=True)
    kept_to_gloo = skipped_at_import() - set(gloo.stdout.split())
    for name in kept_to_gloo:
        getattr(TestDistBackendWithFork, name).__unittest_skip__ = False
    print(f"{os.environ['BACKEND']}: runs {len(kept_to_gloo)} tests the suite keeps to gloo: "
          + " ".join(sorted(kept_to_gloo)), file=sys.stderr, flush=True)


def main():
    if sys.argv[1] == "--skipped-at-import":
        print("\n".join(sorted(skipped_at_import())))
        return
    results, names = sys.argv[1], sys.argv[2:]
    if os.environ["BACKEND"] != "gloo":
        run_what_gloo_runs()
    loader = unittest.TestLoader()
    if not names:
        names = loader.getTestCaseNames(TestDistBackendWithFork)
    suite = unittest.TestSuite(TestDistBackendWithFork(n) for n in names)
    suite.run(JsonLinesResult(results))


if __name__ == "__main__":
    main()
