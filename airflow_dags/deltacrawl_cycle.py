"""# deltacrawl_cycle — crawl cycles of one crawl root, one task per step

```
inject ─▶ cycle_1: generate ─▶ fetch ─▶ dedup ─▶ update ─▶ cycle_2: generate ─▶ … ─▶ update ─▶ … ─▶ stats
```

or, built with `overlap=True` (`DELTACRAWL_DAG_OVERLAP=1` for the default DAG), the cycles overlap
as `deltacrawl crawl --overlap` does ("Overlapped cycles" below).

Every task runs one `deltacrawl` command, exactly what a person types (docs/cli.md):
`deltacrawl inject SEEDS`, then per cycle `generate`, `fetch SEGMENT`, `dedup SEGMENT`,
`update SEGMENT`, and `stats` at the end, each with the run's `--crawl-id` and `--cycle`. Each command is its own Spark application (one JVM
per task), run by a BashOperator; the task's "Rendered template" shows the exact command line.

Why the CLI and not SparkSubmitOperator (whose provider is installed too): deltacrawl starts its
own driver with the Delta jars and ships its code to a cluster master by itself
(docs/cluster.md), so spark-submit adds nothing; and SparkSubmitOperator fails on every
non-zero exit, so "nothing due" could not skip.

## Params (trigger with config to change them for one run)

| param | meaning |
|---|---|
| `crawl_root` | where the tables live: an absolute path or a URI (`s3a://bucket/prefix`); a task runs in a temporary working directory, so a relative path is refused when the run is triggered. Required unless the DAG was given a default (`DELTACRAWL_CRAWL_ROOT` when this file is parsed). |
| `spark_master` | Spark master URL (`local[2]`, `spark://host:7077`, ...); empty: `spark.master` of the crawl's config (`local[*]` by default). |
| `conf` | list of `key=value` config overrides, each passed as `--conf key=value` (keys: `conf/defaults.toml`). |
| `conf_file` | a TOML file with the layout of `conf/defaults.toml` (`--conf-file`); empty: none. |
| `seeds` | a seeds file to inject before the first cycle; empty: the `inject` task is skipped. Injecting is idempotent, so a scheduled DAG may keep the same file. |
| `cycles` | how many generate → fetch → dedup → update cycles this run makes (1 … the number of `cycle_N` groups). |
| `mlflow_uri` | the MLflow tracking URI of the run's MLflow run, or `off`; empty: `mlflow.tracking_uri` of the config, else `$MLFLOW_TRACKING_URI` of the worker, else `<crawl_root>/mlflow.db`. |
| `deltacrawl_bin` | the `deltacrawl` executable; empty: `$DELTACRAWL_BIN` of the worker, else `deltacrawl` on its PATH. Airflow runs in its own virtual environment, so this is usually the crawler's, e.g. `/opt/deltacrawl/.venv/bin/deltacrawl`. |

## Cycles

The graph is static: it holds a fixed number of `cycle_N` groups (3 unless the DAG was built
with another `max_cycles`), chained one after the other, and `cycles` says how many of them
run. The generate task of a group beyond `cycles` exits 99 without starting Spark, which skips
it and everything after it. A scheduled DAG makes `cycles` cycles per run (1 by default); a
manual run may ask for more.

## Overlapped cycles (`overlap=True`)

The same tasks, wired as `deltacrawl crawl --overlap` runs its steps (jobs/crawl_cycles.py): while
segment k is fetched, segment k - 1 is deduplicated and updated and segment k + 1 generated, so the
fetcher (which mostly waits on hosts' politeness delays) is not idle between cycles:

```
writers:  inject ─▶ gen 1 ─▶ gen 2 ─▶ dedup 1 ─▶ update 1 ─▶ gen 3 ─▶ dedup 2 ─▶ update 2 ─▶ dedup 3 ─▶ update 3 ─▶ stats
fetches:            gen 1 ─▶ fetch 1 ─▶ fetch 2 ─▶ fetch 3     (and gen k ─▶ fetch k, fetch k ─▶ dedup k)
time:     fetch 1 ‖ gen 2;   fetch 2 ‖ dedup 1, update 1, gen 3;   fetch 3 ‖ dedup 2, update 2
```

| task | waits for |
|---|---|
| generate 1 | inject |
| generate 2 | generate 1 |
| generate k (k ≥ 3) | update k - 2 |
| fetch k | generate k and fetch k - 1 |
| dedup k | fetch k and generate k + 1 (the last cycle's: update k - 1) |
| update k | dedup k |
| stats | every update |

- **What overlaps**: generate k + 1 runs while fetch k runs; dedup k and update k (then generate
  k + 2) run while fetch k + 1 runs: the fetches follow one another with only a task start
  between them. The pool needs two free slots for it (two Spark drivers at once, "Limits"
  below), else the tasks simply run one after the other in the same safe order.
- **Why it is safe**: every step that commits to the crawl's tables (inject, generate's lease,
  dedup's MERGEs, update's MERGE) is one link of a single chain, in the order of `crawl --overlap`,
  so no two of them ever run at once: Delta commits never conflict by design, not by retry luck.
  fetch only reads the crawldb (its leases) and writes its own segment (its row in the `cycles`
  table is a blind append, which Delta never lets conflict with another). generate k + 1 selects
  only URLs without a lease in force, and segment k's URLs are leased until update k releases
  them, so the segments are disjoint (`generate.lease_s`, 1 h, must outlast a fetch and the
  wait for its update, as for `crawl --overlap`). Politeness holds across segments: fetch k + 1
  starts only after fetch k has ended, and its first request to a host keeps the host's gap after
  the last request of the two segments fetched before (jobs/fetch.py `recent_contacts`, read from
  their `_SUCCESS`-marked results), also for hosts whose robots.txt and delays segment k met but
  update k has not written to the hostdb yet. What generate k + 1 cannot see yet is what update k
  will learn (new links, a host's new backoff): they count from generate k + 2 on.
- **Skips**: every task but inject and stats runs when no upstream failed (`none_failed`), so a
  skip upstream never skips a step that still has work. A task whose cycle has no segment (its
  generate skipped) exits 99 itself without starting Spark. "Nothing due" at generate k + 1
  while segment k is still being fetched does not skip dedup k and update k; generate k + 2 then
  runs after update k, as `crawl --overlap` generates again once the pending segment is updated
  (at the start of a crawl every known URL may be in segment k, and its update adds the links).
  The cycle that found nothing due stays empty: a run makes at most `cycles` segments. A generate
  skips without starting Spark when neither of the two generates before it handed out a segment
  (nothing is pending and nothing was due: `crawl --overlap` stops there too).
- **Failures**: a failed task marks everything after it `upstream_failed`, as in the in-turn shape;
  at most two segments are then left not updated (one fetched or being fetched, one generated):
  `deltacrawl fetch`/`dedup`/`update` by hand finish them (docs/cli.md), else their leases expire
  and their URLs are due again, as after `crawl --overlap` dies.

## "Nothing due" skips, it does not fail

`deltacrawl generate` exits **99** when no URL is due (everything fetched recently, or leased
by another generate). 99 is the BashOperator's `skip_on_exit_code`: the generate task ends
*skipped*, and so does everything downstream of it (fetch, dedup, update of that cycle, the
later cycles) through the default `all_success` trigger rule (the overlapped shape instead skips
only what has no segment: "Overlapped cycles" above). The run itself succeeds.
`stats` runs whenever no task failed (`none_failed`), also when nothing was due: it prints the
crawldb's figures and ends the run's MLflow run (below). `inject` without a
seeds file is skipped the same way, and the first generate runs after it either way
(`none_failed`). Every other non-zero exit fails the task (2 bad input, 3 unexpected failure,
127 `deltacrawl` not found, ...).

## Segment id (XCom)

generate prints the new segment id as the last line of its stdout; the task prints it last
(after the JVM is gone, so no log line can follow it) and the BashOperator pushes that last
line as the task's XCom `return_value`. fetch, dedup and update of the same cycle read it with
`ti.xcom_pull(task_ids="cycle_N.generate")`.

## One crawl id, one MLflow run per DAG run

Every task passes `--crawl-id <dag_id>/<run_id>` and `--cycle N` (inject is cycle 0), so the
steps of one DAG run are one crawl run, as `deltacrawl crawl` is: each step's row in the
`cycles` table and each of its Delta commits (`DESCRIBE HISTORY`'s `userMetadata`) carry that
crawl id and cycle, and each step logs its metrics (step = cycle number) to the MLflow run tagged
`deltacrawl.crawl_id = <dag_id>/<run_id>`, which the run's first task creates with the effective
config as params. `stats` ends it: the stats report, every step's figures and the charts as
artifacts, status FINISHED. A failed task marks the MLflow run FAILED; its retry marks it RUNNING
again. Tracking store: the `mlflow_uri` param, else the crawl's default (docs/mlflow.md).

## Retries, and what is not retried

Each task is retried (2 times unless the DAG was built otherwise) with exponential backoff:
1 min, then 2, 4, ... at most 30 min. Retrying is safe for every step: a generate that died
leaves leases that simply expire, a fetch that died before its commit fetches what the dead run
did not request, one that died after it requests nothing again (exit 0), dedup and update change
nothing when run again (docs/cli.md; docs/architecture.md, "Crash safety"). A task that exits **2** (bad
input: an unknown config key, a missing seeds file, a segment already updated) or **127**
(`deltacrawl` not found) fails at once, without retries: the same input would fail the same way
after every backoff (`StepOperator`).

## Limits: XCom, pool, timeouts

Only generate pushes an XCom (the segment id); the other tasks push nothing (a step's last line
of output is a log line, not a value). Every task runs in the Airflow pool `pool` (argument of
`crawl_cycle_dag`, or `DELTACRAWL_DAG_POOL`; default `default_pool`): each task is one Spark
driver, so a pool of N slots shared by all crawl DAGs (`airflow pools set deltacrawl 2 "Spark
drivers of deltacrawl"`) keeps at most N drivers on the workers at once (the overlapped shape
runs two at once when it can: give its pool at least two slots, and the executor a parallelism
of two or more). A task is stopped after `step_timeout` (default 3 h: longer than
`fetch.time_limit_s`, 1 h, plus the step's own work; `DELTACRAWL_DAG_STEP_TIMEOUT_S`), and a
whole run after `run_timeout` (default 24 h, `DELTACRAWL_DAG_RUN_TIMEOUT_S`), so a hung driver
cannot hold the crawl root's only active run.

## One DAG per crawl root

`max_active_runs=1`: two runs of this DAG never overlap, so the cycles of two runs never work on
one crawl root at once (within a run of the overlapped shape the crawldb writers are chained,
above). That guarantee holds per DAG, so give every crawl root its own DAG: the default DAG here
is `deltacrawl_cycle`; for another crawl, call
`crawl_cycle_dag("news_crawl", crawl_root="s3a://bucket/news", schedule="@hourly")` at the top
level of a file of your own in the dags folder (`from deltacrawl_cycle import crawl_cycle_dag`;
Airflow parses only files that contain the word "airflow": a comment will do), and do not point
a run of one DAG at another DAG's crawl root.

## Configuring the default DAG (environment of the DAG processor)

`DELTACRAWL_CRAWL_ROOT` (default of `crawl_root`), `DELTACRAWL_DAG_SCHEDULE` (a cron
expression or preset such as `@hourly`; unset: manual runs only), `DELTACRAWL_DAG_RETRIES`
(retries per task, default 2), `DELTACRAWL_DAG_POOL`, `DELTACRAWL_DAG_STEP_TIMEOUT_S`,
`DELTACRAWL_DAG_RUN_TIMEOUT_S` (above), `DELTACRAWL_DAG_OVERLAP` (`1`/`true`: the overlapped shape;
the default DAG stays one DAG either way, so one crawl root never gets two DAGs; switch it between
runs: the workers parse the file too and must see the same value). `DELTACRAWL_BIN` is read by
the workers when a task runs.
"""
from __future__ import annotations

import os
import shlex
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk.exceptions import AirflowFailException
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Param, TaskGroup

# BashOperator's skip code, and deltacrawl generate's exit code for "nothing due" (jobs/engine/errors.py);
# the inject and generate scripts below also exit with it to skip (no seeds, cycle not requested)
SKIP = 99
# deltacrawl's exit code for bad input (jobs/engine/errors.py), and the shell's for a command not found:
# running again cannot help, so these fail the task without its retries
NOT_RETRIED = (2, 127)
STEPS_AFTER_GENERATE = ("fetch", "dedup", "update")
DEFAULT_STEP_TIMEOUT_S = 3 * 3600
DEFAULT_RUN_TIMEOUT_S = 24 * 3600


class StepOperator(BashOperator):
    """A BashOperator that fails for good (no retries) when the step says its input is bad."""

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException as exc:
            process = getattr(self.subprocess_hook, "sub_process", None)
            code = getattr(process, "returncode", None)
            if code in NOT_RETRIED:
                raise AirflowFailException(f"deltacrawl exited {code} ({'bad input' if code == 2 else 'not found'}): "
                                           "not retried, the same input fails the same way") from exc
            raise


def crawl_id(dag_id: str, run_id: str) -> str:
    """The crawl id of a DAG run: every step of the run passes it (--crawl-id), so its cycles rows,
    its Delta commits and its one MLflow run say which DAG run made them."""
    return f"{dag_id}/{run_id}"


def deltacrawl_argv(params: Mapping[str, Any], step: str, *args: str) -> list[str]:
    """The command line of one deltacrawl step for a run's params (not yet quoted)."""
    binary = params.get("deltacrawl_bin") or os.environ.get("DELTACRAWL_BIN") or "deltacrawl"
    argv = [binary, step, *args, "--crawl-root", params["crawl_root"]]
    if params.get("crawl_id"):
        argv += ["--crawl-id", params["crawl_id"]]
    if params.get("mlflow_uri"):
        argv += ["--mlflow-uri", params["mlflow_uri"]]
    if params.get("conf_file"):
        argv += ["--conf-file", params["conf_file"]]
    if params.get("spark_master"):
        argv += ["--conf", f"spark.master={params['spark_master']}"]
    for pair in params.get("conf") or []:
        argv += ["--conf", pair]
    return argv


def shell(argv: list[str]) -> str:
    return " ".join(shlex.quote(arg) for arg in argv)


def run_params(params: Mapping[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """A run's params with its crawl id (what every task's command line is made from)."""
    return {**params, "crawl_id": crawl_id(dag_id, run_id)}


# in the task templates: the params of the run being rendered
RUN = "run_params(params, dag.dag_id, run_id)"


def inject_script(params: Mapping[str, Any]) -> str:
    if not params.get("seeds"):
        return f"echo 'no seeds file given: nothing to inject'; exit {SKIP}"
    return "exec " + shell(deltacrawl_argv(params, "inject", params["seeds"], "--cycle", "0"))


def generate_script(params: Mapping[str, Any], cycle: int, earlier: list[str | None] | None = None) -> str:
    """generate's stdout is captured and printed once the process has exited, so its last line
    (the segment id) is the task's last line of output and becomes the XCom; exit 99 skips.
    ``earlier`` (overlapped shape only): the segment ids the two generates before handed out; when
    neither did, nothing is pending and nothing was due, so this one skips without starting Spark."""
    if cycle > int(params["cycles"]):
        return f"echo 'cycle {cycle} not requested (cycles={int(params['cycles'])})'; exit {SKIP}"
    if earlier is not None and cycle > 1 and not any(earlier):
        return (f"echo 'cycle {cycle}: the generates before found nothing due and no segment is pending: "
                f"the crawl is done for this run'; exit {SKIP}")
    return "\n".join([
        f"out=$({shell(deltacrawl_argv(params, 'generate', '--cycle', str(cycle)))})",
        "rc=$?",
        'printf "%s\\n" "$out"',
        'exit "$rc"',
    ])


def segment_step_script(params: Mapping[str, Any], step: str, segment: str | None, cycle: int,
                        skip_without_segment: bool = False) -> str:
    """``skip_without_segment`` (overlapped shape): these tasks run whatever their upstreams did
    (none_failed), so a cycle whose generate handed out no segment skips here (exit 99)."""
    if not segment:
        if skip_without_segment:
            return f"echo 'cycle {cycle}: no segment (its generate was skipped): nothing to {step}'; exit {SKIP}"
        raise ValueError(f"{step}: no segment id from this cycle's generate task (XCom return_value)")
    return "exec " + shell(deltacrawl_argv(params, step, segment, "--cycle", str(cycle)))


def stats_script(params: Mapping[str, Any]) -> str:
    return "exec " + shell(deltacrawl_argv(params, "stats"))


def crawl_cycle_dag(dag_id: str, *, crawl_root: str | None = None, schedule: str | None = None,
                    max_cycles: int = 3, retries: int = 2, spark_master: str = "",
                    conf: list[str] | None = None, pool: str = "default_pool",
                    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
                    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S, overlap: bool = False) -> DAG:
    """The DAG of one crawl: inject, ``max_cycles`` cycle groups (the ``cycles`` param says how many
    run), stats. ``crawl_root`` is the default of the param of that name (None: given per run);
    ``pool``, ``step_timeout_s`` and ``run_timeout_s``: see "Limits" in the module docstring;
    ``overlap``: the overlapped shape ("Overlapped cycles"), else the cycles run in turn."""
    root_schema: dict[str, Any] = {"type": "string", "pattern": r"^(/|[A-Za-z][A-Za-z0-9+.-]*://)",
                                   "description": "absolute path or URI of the crawl root"}
    params = {
        "crawl_root": Param(crawl_root, **root_schema) if crawl_root else Param(**root_schema),
        "spark_master": Param(spark_master, type="string", description="Spark master; empty: the crawl's config"),
        "conf": Param(list(conf or []), type="array", items={"type": "string", "pattern": r"^[A-Za-z0-9_.]+=.*$"},
                      description="config overrides, key=value, each passed as --conf"),
        "conf_file": Param(None, type=["null", "string"], description="a TOML config file (--conf-file)"),
        "seeds": Param(None, type=["null", "string"], description="seeds file to inject first; empty: no inject"),
        "cycles": Param(1, type="integer", minimum=1, maximum=max_cycles,
                        description=f"cycles in this run (at most {max_cycles})"),
        "mlflow_uri": Param(None, type=["null", "string"],
                            description="MLflow tracking URI of the run's MLflow run, or 'off'; empty: the crawl's "
                                        "default (mlflow.tracking_uri, else <crawl_root>/mlflow.db)"),
        "deltacrawl_bin": Param(None, type=["null", "string"],
                                description="deltacrawl executable; empty: $DELTACRAWL_BIN, else deltacrawl on PATH"),
    }
    default_args = {
        "retries": retries,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=30),
        "pool": pool,
        "execution_timeout": timedelta(seconds=step_timeout_s),
        "do_xcom_push": False,  # generate alone hands on a value (the segment id)
    }
    macros = {"inject_script": inject_script, "generate_script": generate_script, "run_params": run_params,
              "segment_step_script": segment_step_script, "stats_script": stats_script}
    # auto_register=False: a file that imports this module to build its own crawl's DAG must not
    # pick up the default DAG as well (it is found through this file's module globals instead)
    with DAG(dag_id, schedule=schedule, start_date=datetime(2025, 1, 1, tzinfo=timezone.utc), catchup=False,
             max_active_runs=1, dagrun_timeout=timedelta(seconds=run_timeout_s), params=params, default_args=default_args, user_defined_macros=macros,
             doc_md=__doc__, tags=["deltacrawl"], auto_register=False) as dag:
        inject = StepOperator(task_id="inject", bash_command=f"{{{{ inject_script({RUN}) }}}}",
                              skip_on_exit_code=SKIP)
        build = _overlapped_cycles if overlap else _cycles_in_turn
        updates = build(inject, max_cycles)
        stats = StepOperator(task_id="stats", bash_command=f"{{{{ stats_script({RUN}) }}}}", skip_on_exit_code=None,
                             trigger_rule="none_failed")
        updates >> stats
    return dag


def _segment(cycle: int) -> str:
    """In a task template: the segment id cycle ``cycle``'s generate pushed (None if it was skipped)."""
    return f"ti.xcom_pull(task_ids='cycle_{cycle}.generate')"


def _cycles_in_turn(inject: StepOperator, max_cycles: int) -> list[StepOperator]:
    """inject ─▶ generate ─▶ fetch ─▶ dedup ─▶ update ─▶ the next cycle's generate ─▶ ...; returns the updates."""
    previous = inject
    updates = []
    for cycle in range(1, max_cycles + 1):
        with TaskGroup(f"cycle_{cycle}", tooltip=f"crawl cycle {cycle}: generate, fetch, dedup, update"):
            generate = StepOperator(
                task_id="generate", bash_command=f"{{{{ generate_script({RUN}, {cycle}) }}}}",
                skip_on_exit_code=SKIP, do_xcom_push=True,
                # the first generate runs whether inject ran or was skipped (no seeds given)
                trigger_rule="none_failed" if cycle == 1 else "all_success")
            steps = [StepOperator(task_id=step, skip_on_exit_code=None,
                                  bash_command=f"{{{{ segment_step_script({RUN}, '{step}', {_segment(cycle)}, {cycle}) }}}}")
                     for step in STEPS_AFTER_GENERATE]
            previous >> generate >> steps[0] >> steps[1] >> steps[2]
        previous = steps[-1]
        updates.append(steps[-1])
    return updates


def _overlapped_cycles(inject: StepOperator, max_cycles: int) -> list[StepOperator]:
    """The order of `deltacrawl crawl --overlap` (jobs/crawl_cycles.py _overlapping_cycles): the
    crawldb writers in one chain, inject, generate 1, generate 2, dedup 1, update 1, generate 3,
    dedup 2, update 2, ..., dedup N, update N; each fetch after its generate and the fetch before.
    Every task but inject and stats runs when no upstream failed (none_failed): a skipped generate
    must not skip the cycle before's dedup and update, nor the next generate; a task whose cycle has
    no segment skips itself (exit 99). Returns the updates."""
    writer = inject              # the last crawldb writer of the chain so far
    fetch_before = None          # the fetch of the cycle before
    pending = None               # dedup and update of the cycle before: they follow this generate
    updates = []
    for cycle in range(1, max_cycles + 1):
        with TaskGroup(f"cycle_{cycle}", tooltip=f"crawl cycle {cycle}: generate, fetch, dedup, update "
                                                  "(overlapped with the cycles before and after)"):
            earlier = ", ".join(_segment(c) for c in (cycle - 1, cycle - 2) if c >= 1)
            generate = StepOperator(
                task_id="generate", bash_command=f"{{{{ generate_script({RUN}, {cycle}, [{earlier}]) }}}}",
                skip_on_exit_code=SKIP, do_xcom_push=True, trigger_rule="none_failed")
            fetch, dedup, update = [
                StepOperator(task_id=step, skip_on_exit_code=SKIP, trigger_rule="none_failed",
                             bash_command=f"{{{{ segment_step_script({RUN}, '{step}', {_segment(cycle)}, {cycle}, "
                                          "True) }}")
                for step in STEPS_AFTER_GENERATE]
        writer >> generate >> fetch >> dedup >> update
        if fetch_before is not None:
            fetch_before >> fetch  # politeness: fetch reads the contacts of the segments fetched before
        if pending is not None:
            generate >> pending[0]  # dedup k after generate k + 1
            writer = pending[1]
        else:
            writer = generate
        fetch_before, pending = fetch, (dedup, update)
        updates.append(update)
    if pending is not None:
        writer >> pending[0]
    return updates

dag = crawl_cycle_dag(
    "deltacrawl_cycle",
    crawl_root=os.environ.get("DELTACRAWL_CRAWL_ROOT") or None,
    schedule=os.environ.get("DELTACRAWL_DAG_SCHEDULE") or None,
    retries=int(os.environ.get("DELTACRAWL_DAG_RETRIES", "2")),
    pool=os.environ.get("DELTACRAWL_DAG_POOL") or "default_pool",
    step_timeout_s=float(os.environ.get("DELTACRAWL_DAG_STEP_TIMEOUT_S") or DEFAULT_STEP_TIMEOUT_S),
    run_timeout_s=float(os.environ.get("DELTACRAWL_DAG_RUN_TIMEOUT_S") or DEFAULT_RUN_TIMEOUT_S),
    overlap=os.environ.get("DELTACRAWL_DAG_OVERLAP", "").strip().lower() in ("1", "true", "yes", "on"),
)
