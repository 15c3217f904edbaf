"""The error policy's vocabulary, shared by every job (and by jobs/engine/runtime.py, which applies it):
the exit codes, the two errors a step raises on purpose, and how a failure is classified (a lost
Delta commit race) and told in one line. It imports nothing of ours, so any module
(jobs/engine/tables.py, jobs/engine/session.py) can use it without an import cycle.

Exit codes of every step:  0 done · 1 nothing to do (warc-get: not archived) · 2 bad input
(config, seeds, paths; nothing was changed) · 3 unexpected failure (the crawl root stays
consistent: every table change is one Delta commit) · 99 nothing due (generate).

Why 99 for "nothing due" and not Nutch's 1: 99 is what Airflow's BashOperator takes as "skip
this task" (skip_on_exit_code), so a scheduled cycle with nothing due is skipped, not failed;
and 1 is also what Python exits with by itself on an error raised before our handler runs (a
broken install, an import error), which must fail a cycle, never pass for "nothing due".
"""
from __future__ import annotations

import re

EXIT_OK, EXIT_NOTHING_TO_DO, EXIT_BAD_INPUT, EXIT_FAILURE = 0, 1, 2, 3
EXIT_NOTHING_DUE = 99  # generate: no URL is due (see above)


class ConcurrentStepError(RuntimeError):
    """Another step committed first and Delta refused this step's commit; nothing half-done is
    left, and running the step again is the remedy (exit 3: Airflow's retry does it)."""


class UserError(Exception):
    """A problem with the user's input; the message is shown as one line."""


_PYTHON_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


# Delta's optimistic concurrency: the commit of a step that read a table another commit changed
# meanwhile is refused with one of these (Python classes converted from the JVM's, by name: the
# classes delta.exceptions exports are not the ones raised, and do not share a base).
_CONFLICTS = {"DeltaConcurrentModificationException", "ConcurrentWriteException", "ConcurrentAppendException",
              "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
              "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException"}


def is_commit_conflict(exc: BaseException) -> bool:
    """``exc`` is Delta refusing a commit because another one came first (also when it reaches
    Python as a Py4JJavaError: then the JVM exception's class says it)."""
    if any(cls.__name__ in _CONFLICTS for cls in type(exc).__mro__):
        return True
    cause = getattr(exc, "java_exception", None)
    try:
        return cause is not None and str(cause.getClass().getSimpleName()) in _CONFLICTS
    except Exception:  # the JVM may be gone
        return False


_STORE_URI = re.compile(r"\b(?:s3a?|s3n|gs|hdfs|abfss?|wasbs?|file)://[^\s'\"]+")


def describe_failure(exc: BaseException) -> str:
    """"Type: message" of what really failed. An error raised in a Spark task reaches the driver
    wrapped: its first line says only that "an exception was thrown from the Python worker", and
    the error itself is the last "SomethingError: message" line of the Python traceback inside; a
    JVM failure (Py4JJavaError) says "An error occurred while calling o123.parquet", and the
    reason is its innermost cause."""
    text = str(exc).strip()
    if "Traceback (most recent call last)" in text:
        python_part = text.split("JVM stacktrace")[0]
        found = [m for m in (_PYTHON_ERROR_LINE.match(line.strip()) for line in python_part.splitlines()) if m]
        if found:
            return f"{found[-1].group(1).rsplit('.', 1)[-1]}: {found[-1].group(2)}"
    cause = getattr(exc, "java_exception", None)
    if cause is not None:
        try:  # the JVM may be gone: then the Python side's text is all there is
            chain = [str(cause.toString())]
            while cause.getCause() is not None and not cause.getCause().equals(cause):
                cause = cause.getCause()
                chain.append(str(cause.toString()))
            line = " ".join(chain[-1].split())
            # "Connection refused" alone does not say where: name the store an outer cause names
            if not _STORE_URI.search(line):
                where = next((m.group(0) for m in map(_STORE_URI.search, reversed(chain)) if m), None)
                if where:
                    line += f" ({where.rstrip('.,;:')})"
            return line
        except Exception:  # the plain first line below is the message then
            pass
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"
