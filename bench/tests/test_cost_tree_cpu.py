"""bench/cost.py's process-tree CPU: a process whose parent ignores SIGCHLD is counted once, whether
the kernel reaps it (its parent still alive) or the benchmark does (its parent died first, so it
was re-parented to the benchmark, a child subreaper). pyspark's daemon ignores SIGCHLD and, at its
shutdown, races its workers' exits: counting an orphaned worker both by rusage and by the sampler's
last reading added a whole Spark Python worker to the fetch step (issue 33, docs/decisions.md "After
the first cuts"). Real processes, no mocks; each case runs in its own interpreter, since becoming a subreaper
is for the rest of a process's life. bench/'s own test, not the crawler's: `make bench-test`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(BENCH)
BURN_S = 3.0

# A parent that ignores SIGCHLD forks a worker that burns BURN_S of CPU. "kernel": the parent
# outlives the worker (the kernel reaps it). "orphan": the parent exits while the worker burns.
TREE = """
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    t = time.process_time()
    while time.process_time() - t < {burn}:
        pass
    os._exit(0)
if sys.argv[1] == "orphan":
    # the sampler must see the worker under its SIGCHLD-ignoring parent first, with CPU on it: wait
    # (on CPU time, not on the clock, so a loaded machine cannot make the reading empty) until the
    # worker has burned a third of its time, then a few sampler periods, and leave it burning
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        with open(f"/proc/{{pid}}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= {burn} / 3:
            break
        time.sleep(0.02)
    time.sleep(0.5)
    os._exit(0)
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
"""

MEASURE = """
import json, sys
sys.path.insert(0, {bench!r})
import cost
assert cost.become_subreaper()
cost.SAMPLE_S = 0.05
run = cost.run_measured([sys.executable, "-c", {tree!r}, {mode!r}], set(), 60)
print(json.dumps({{k: run[k] for k in ("returncode", "cpu_s", "rusage_cpu_s", "autoreaped_cpu_s",
                                       "orphaned_autoreaped_cpu_s", "sampled_cpu_s", "sampled_by_kind_s")}}))
"""


@pytest.mark.parametrize("mode", ["kernel", "orphan"])
def test_a_worker_of_a_sigchld_ignoring_parent_is_counted_once(mode):
    code = MEASURE.format(bench=BENCH, tree=TREE.format(burn=BURN_S), mode=mode)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout.strip().splitlines()[-1])
    assert run["returncode"] == 0
    # the worker's BURN_S plus two small interpreters, not the worker twice
    assert BURN_S * 0.9 <= run["cpu_s"] < BURN_S + 0.8, run
    assert run["cpu_s"] + 0.1 >= run["sampled_cpu_s"] * 0.99, run
    if mode == "kernel":
        assert run["autoreaped_cpu_s"] >= BURN_S * 0.8, run   # rusage never saw it: the sampler did
        assert run["orphaned_autoreaped_cpu_s"] == 0, run
    else:
        assert run["rusage_cpu_s"] >= BURN_S * 0.9, run        # reaped by the benchmark: rusage has it
        assert run["orphaned_autoreaped_cpu_s"] >= BURN_S * 0.25, run  # seen under its first parent, not added


# A child seen between its fork and its exec (spark-submit's child becoming the JVM) still has its
# parent's command line: the by-kind split must name it by what it ran, not what it was first seen as.
EXECS = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(0.6)  # the sampler sees it under the parent's command line first
    os.execv(sys.executable, [sys.executable, "-c",
             "import time\\nt = time.process_time()\\nwhile time.process_time() - t < {burn}: pass",
             "org.apache.spark.FakeJvm"])
os.waitpid(pid, 0)
"""


def test_a_process_is_named_by_what_it_execs():
    code = MEASURE.format(bench=BENCH, tree=EXECS.format(burn=BURN_S / 2), mode="exec")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout.strip().splitlines()[-1])
    kinds = run["sampled_by_kind_s"]
    assert kinds.get("jvm", 0) >= BURN_S / 2 * 0.8, run
    assert sum(v for k, v in kinds.items() if k != "jvm") < BURN_S / 2 * 0.5, run
