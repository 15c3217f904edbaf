"""The error policy's vocabulary, shared by every job (and by jobs/engine/common.py, which applies it):
the exit codes and the two errors a step raises on purpose. It imports nothing of ours, so any
module (jobs/engine/tables.py, jobs/engine/session.py) can raise them without an import cycle.

Exit codes of every step:  0 done · 1 nothing to do (warc-get: not archived) · 2 bad input
(config, seeds, paths; nothing was changed) · 3 unexpected failure (the crawl root stays
consistent: every table change is one Delta commit) · 99 nothing due (generate).

Why 99 for "nothing due" and not Nutch's 1: 99 is what Airflow's BashOperator takes as "skip
this task" (skip_on_exit_code), so a scheduled cycle with nothing due is skipped, not failed;
and 1 is also what Python exits with by itself on an error raised before our handler runs (a
broken install, an import error), which must fail a cycle, never pass for "nothing due".
"""
from __future__ import annotations

EXIT_OK, EXIT_NOTHING_TO_DO, EXIT_BAD_INPUT, EXIT_FAILURE = 0, 1, 2, 3
EXIT_NOTHING_DUE = 99  # generate: no URL is due (see above)


class ConcurrentStepError(RuntimeError):
    """Another step committed first and Delta refused this step's commit; nothing half-done is
    left, and running the step again is the remedy (exit 3: Airflow's retry does it)."""


class UserError(Exception):
    """A problem with the user's input; the message is shown as one line."""
