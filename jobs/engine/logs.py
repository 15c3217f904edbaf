"""Where deltacrawl's output goes: results on stdout, everything else on stderr, Spark's own
output in a log file.

- **stdout** carries only what a script reads: the segment id of ``generate``, the report of
  ``stats`` (``--format json`` for programs), the results of ``sql``, the jar list of ``jars``,
  the archive path of ``package``, the record of ``warc-get``.
- **stderr** carries progress and diagnostics, through the standard ``logging`` module under the
  ``deltacrawl`` logger: one line when a step starts and one when it ends (its counts and
  seconds), a progress line every ``log.progress_s`` seconds while a fetch runs, warnings (a
  skipped seed line, a tracking store that failed), and the one-line error of a failed command.
- **Spark's JVM** (the driver deltacrawl starts, and in local mode its executors and their
  Python workers) writes its log4j lines, JVM warnings and stack traces to a file,
  ``$XDG_STATE_HOME/deltacrawl/logs/<time>-<command>-<pid>.log`` (``~/.local/state/...``); a
  failed command names that file in its last line. The newest ``KEEP_JVM_LOGS`` files are kept.

``--verbose`` (``-v``, any command) shows debug lines too and leaves the JVM's output on stderr,
as plain ``pyspark`` would.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any, Callable

ROOT = "deltacrawl"
KEEP_JVM_LOGS = 50


class _CurrentStderr(logging.StreamHandler):
    """A handler that writes to whatever sys.stderr is at the time (a test's or a notebook's
    capture included), not to the stream that was current when logging was set up."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _StepFormatter(logging.Formatter):
    """``19:02:11 fetch: segment 2026...: 212 URLs attempted`` — the logger's name below
    ``deltacrawl`` says which step speaks."""

    def format(self, record: logging.LogRecord) -> str:
        record.step = record.name.removeprefix(ROOT + ".") if record.name != ROOT else ROOT
        return super().format(record)


_state: dict[str, Any] = {"verbose": False, "command": "deltacrawl", "jvm_log": None}


def setup(command: str, verbose: bool = False) -> None:
    """Called once per command (``run_main``): our lines on stderr, INFO (DEBUG when verbose)."""
    verbose = verbose or os.environ.get("DELTACRAWL_VERBOSE", "") not in ("", "0")
    _state.update(verbose=verbose, command=command.split()[-1])
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, _CurrentStderr) for h in logger.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(_StepFormatter("%(asctime)s %(step)s: %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)


def step_logger(step: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT}.{step}")


def verbose() -> bool:
    return bool(_state["verbose"])


def jvm_log_path() -> str | None:
    """The JVM log file of this process, if deltacrawl started the JVM with one."""
    return _state["jvm_log"]


def jvm_logs_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "deltacrawl", "logs")


def open_jvm_log() -> Any | None:
    """A file for the JVM's stdout and stderr (None when verbose: the JVM keeps our stderr, or
    when no log folder can be made: then too). Old files beyond KEEP_JVM_LOGS are removed."""
    if verbose():
        return None
    folder = jvm_logs_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        _prune(folder, KEEP_JVM_LOGS - 1)
        path = os.path.join(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-{_state['command']}-{os.getpid()}.log")
        handle = open(path, "ab")
    except OSError as exc:
        logging.getLogger(ROOT).warning("cannot write Spark's log under %s (%s); it goes to stderr", folder,
                                        exc.strerror or exc)
        return None
    _state["jvm_log"] = path
    return handle


def _prune(folder: str, keep: int) -> None:
    names = sorted((n for n in os.listdir(folder) if n.endswith(".log")), reverse=True)
    for name in names[keep:]:
        try:
            os.remove(os.path.join(folder, name))
        except OSError:
            pass  # another deltacrawl may have removed it already


def log_step(step: str, what: str, run: Callable[[], Any], summary: Callable[[Any], str]) -> tuple[Any, float]:
    """Run one step between a start line and an end line ``<summary> (<seconds> s)``; returns
    what the step returned and its seconds."""
    log = step_logger(step)
    log.info("%s: started" if what else "started%s", what)
    started = time.monotonic()
    result = run()
    seconds = time.monotonic() - started
    log.info("%s (%.1f s)", summary(result), seconds)
    return result, seconds


class Progress:
    """While a Spark job group runs, a line every ``every_s`` seconds: how many of its tasks are
    done (for fetch: each task owns whole hosts, so this is how many host groups are finished)."""

    def __init__(self, spark, step: str, what: str, every_s: float):
        self.sc = spark.sparkContext
        self.log = step_logger(step)
        self.what = what
        self.every_s = every_s
        self.group = f"deltacrawl-{step}-{os.getpid()}-{id(self)}"
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> "Progress":
        self.sc.setJobGroup(self.group, self.what)
        if self.every_s > 0:
            self.thread = threading.Thread(target=self._run, name="deltacrawl-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.sc.setLocalProperty("spark.jobGroup.id", None)
        self.sc.setLocalProperty("spark.job.description", None)

    def tasks(self) -> tuple[int, int, int] | None:
        """(done, running, total) of the newest stage of the group's jobs, or None."""
        tracker = self.sc.statusTracker()
        stages = []
        for job_id in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job_id)
            if info is not None:
                stages += [s for s in (tracker.getStageInfo(i) for i in info.stageIds) if s is not None]
        if not stages:
            return None
        stage = max(stages, key=lambda s: s.stageId)
        return stage.numCompletedTasks, stage.numActiveTasks, stage.numTasks

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                tasks = self.tasks()
            except Exception as exc:  # the JVM went away: the step itself reports that
                self.log.debug("progress: %s", exc)
                return
            if tasks is not None:
                done, running, total = tasks
                self.log.info("%s: %d of %d tasks done, %d running (%.0f s)", self.what, done, total, running,
                              time.monotonic() - self.started)
