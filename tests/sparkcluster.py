"""A real Spark standalone cluster on loopback, started with pyspark's own ``spark-class``.

One master and N workers, each worker with its own work and local dirs (as separate machines
would have) and its own cores. ``StandaloneCluster`` is a context manager: everything it started
(master, workers and, through their process groups, the executors the workers launched) is
stopped when the block ends, also when it ends with an exception.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

from jobs.engine.session import QUICK_JIT


def die_with_parent() -> None:
    """preexec_fn: this child gets SIGTERM when the process that started it dies, so a test ended
    by force (pytest-timeout ends the whole worker, and no fixture's clean-up runs then) leaves no
    master, worker or driver behind. Spark's master and workers stop their executors on SIGTERM."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    return os.path.dirname(pyspark.__file__)


class StandaloneCluster:
    def __init__(self, base: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 start_timeout_s: float = 180.0):
        self.base = Path(base)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.webui_port = free_port()
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        # the master's and workers' JVMs with the quick JIT compiler alone and the serial
        # collector, as the tests' other short-lived JVMs (tests/conftest.py FAST): they live for
        # one crawl, mostly idle, on small heaps
        env = dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
                   SPARK_DAEMON_JAVA_OPTS=" ".join([*QUICK_JIT, "-XX:+UseSerialGC"]))
        env.update(extra)
        return env

    def _spawn(self, name: str, args: list[str], **env: str) -> None:
        log = self.base / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            # a session of its own: stopping its process group also stops the executors it started
            self.procs.append(subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                env=self.env(**env), start_new_session=True, preexec_fn=die_with_parent))

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as resp:
            return json.load(resp)

    def start(self) -> "StandaloneCluster":
        self.base.mkdir(parents=True, exist_ok=True)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.webui_port)])
        for i in range(self.workers):
            work, local = self.base / f"worker{i}" / "work", self.base / f"worker{i}" / "local"
            work.mkdir(parents=True, exist_ok=True)
            local.mkdir(parents=True, exist_ok=True)
            self._spawn(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", str(self.cores), "--memory", self.memory,
                                       "--work-dir", str(work), "--webui-port", str(free_port()),
                                       self.master_url],
                        SPARK_WORKER_DIR=str(work), SPARK_LOCAL_DIRS=str(local))
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            for proc, log in zip(self.procs, self.logs):
                if proc.poll() is not None:
                    raise RuntimeError(f"{log.stem} exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                if self.status().get("aliveworkers", 0) >= self.workers:
                    return self
            except (OSError, ValueError):
                # not listening yet, or (seen on a loaded machine) the master UI serving its HTML
                # page for /json in the moment before the JSON handler is attached: not up yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up in {self.start_timeout_s:.0f}s")
            time.sleep(1)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in reversed(self.procs):  # workers (and their executors) before the master
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 20
            for proc in self.procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if all(p.poll() is not None for p in self.procs):
                break

    def __enter__(self) -> "StandaloneCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
