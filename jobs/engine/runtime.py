"""The command-line runtime every job runs in: the global options, config loading, crawl-root
checks, and the error policy applied (a user's mistake is one clear line on stderr and exit code 2,
never a traceback; the exit codes, the errors and how a failure is classified and described are
jobs/engine/errors.py's).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from crawl.config import Config, ConfigError, build_config, parse_pairs
from crawl.crawldb.seeds import SeedFileEncodingError
from jobs.engine.errors import (ConcurrentStepError, EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UserError,
                               describe_failure, is_commit_conflict)


def add_global_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("global options")
    group.add_argument("--crawl-root", default="./crawl-data", metavar="PATH",
                       help="where the crawldb, hostdb and segments live (default: ./crawl-data)")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="override one config option (repeatable); see conf/defaults.toml")
    group.add_argument("--conf-file", metavar="FILE", help="a TOML file overriding conf/defaults.toml")
    group.add_argument("-v", "--verbose", action="store_true",
                       help="debug lines too, and Spark's own log on stderr instead of its log file")


def config_from_args(args: argparse.Namespace) -> Config:
    return build_config(args.conf_file, parse_pairs(args.conf))


def no_crawl_root(root: str) -> UserError:
    return UserError(f"no crawl root at {root} (wrong --crawl-root? 'deltacrawl inject' or 'deltacrawl crawl' "
                     f"makes one)")


def check_object_store_root(root: str, cfg: Mapping[str, Any], create: bool = False) -> None:
    """Before a JVM starts: the bucket of an s3a:// crawl root exists and our credentials may
    use it (one HeadBucket request), so a typo or a bad key is one clear line, not a Java trace;
    unless ``create``, an object under the prefix too (one ListObjectsV2 of one key)."""
    from crawl.s3 import make_client, s3_errors, s3_settings, split_s3_uri
    bucket, key = split_s3_uri(root)
    settings = s3_settings(cfg)
    try:
        with s3_errors(f"crawl root {root}", settings.endpoint_url):
            client = make_client(settings, max_attempts=2)
            client.head_bucket(Bucket=bucket)
            prefix = key.rstrip("/") + "/" if key.strip("/") else ""
            if not create and not client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount"):
                raise no_crawl_root(root)
    except FileNotFoundError:
        raise UserError(f"crawl root {root}: no such bucket '{bucket}' at "
                        f"{settings.endpoint_url or 'AWS S3'} (create it first)") from None
    except OSError as exc:
        raise UserError(str(exc)) from None


def check_crawl_root(root: str, cfg: Mapping[str, Any] | None = None, create: bool = False) -> str:
    """Make sure a local crawl root exists and is writable, or an object store's bucket is
    there for us; return the root as given. Only a command that fills a new crawl root (inject,
    crawl: ``create``) makes a missing one: for every other command it is bad input, and nothing
    is left behind (a typo in --crawl-root must not leave a folder)."""
    from crawl.s3 import is_s3_uri
    if is_s3_uri(root):
        if cfg is not None:
            check_object_store_root(root, cfg, create)
        return root
    if "://" in root and not root.startswith("file://"):
        return root  # HDFS and other Hadoop file systems are checked by Spark itself on first write
    path = root[len("file://"):] if root.startswith("file://") else root
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"crawl root {root} exists and is not a directory")
    if not create and not os.path.isdir(path):
        raise no_crawl_root(root)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise UserError(f"crawl root {root} is not writable ({exc.strerror})") from None
    return root


@contextmanager
def reading_input_file(kind: str, path: str) -> Iterator[None]:
    """A file of URLs the user named (``kind``: "seeds", "hints") read inside: missing, a folder,
    unreadable or not text becomes one UserError line saying which, not a traceback."""
    try:
        yield
    except FileNotFoundError:
        raise UserError(f"{kind} file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"{kind} file is a directory: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {kind} file {path}: {exc.strerror}") from None
    except SeedFileEncodingError as exc:
        raise UserError(f"{kind} file {path} {exc}") from None

def add_run_options(parser: argparse.ArgumentParser, cycle: bool = True) -> None:
    """--crawl-id, --cycle and --mlflow-uri: a step as part of one crawl run (Airflow's DAG run)."""
    group = parser.add_argument_group("one crawl run made of single steps (what Airflow's DAG passes)")
    group.add_argument("--crawl-id", metavar="ID",
                       help="the crawl run this step belongs to: its cycles row and Delta commits say so, and "
                            "its metrics go to the MLflow run of that id (created by its first step)")
    if cycle:
        group.add_argument("--cycle", type=int, metavar="N", help="the cycle number within that run (needed "
                                                                  "with --crawl-id; inject is cycle 0)")
    group.add_argument("--mlflow-uri", metavar="URI",
                       help="MLflow tracking URI of that run, or 'off' (default: as for deltacrawl crawl)")


def run_main(prog: str, argv: list[str] | None, configure: Callable[[argparse.ArgumentParser], None],
             body: Callable[[argparse.Namespace, Config], int], needs_root: bool = True,
             creates_root: bool = False,
             precheck: Callable[[argparse.Namespace, Config], Any] | None = None) -> int:
    """Parse arguments, load the config (once: every check and ``body`` get the same Config), run
    ``precheck(args, cfg)`` (the command's own input checks: bad input is refused before anything is
    created), check the crawl root (``creates_root``: make it if missing) and run ``body``; map
    errors to exit codes."""
    parser = argparse.ArgumentParser(prog=prog)
    configure(parser)
    add_global_options(parser)
    args = parser.parse_args(argv)
    from jobs.engine import logs
    logs.setup(prog, args.verbose)
    try:
        cfg = config_from_args(args)
        if precheck is not None:
            precheck(args, cfg)
        if needs_root:
            args.crawl_root = check_crawl_root(args.crawl_root, cfg, create=creates_root)
        return body(args, cfg)
    except (UserError, ConfigError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; the crawl root is consistent (leases expire on their own)", file=sys.stderr)
        return 130
    except Exception as exc:  # the last line of defence: one line, full trace only on request
        if not isinstance(exc, ConcurrentStepError) and is_commit_conflict(exc):
            exc = ConcurrentStepError(
                f"another step committed to the same table first and Delta refused this commit "
                f"({type(exc).__name__}); what was committed before stays valid: run {prog.split()[-1]} again")
        print(f"{prog}: failed: {describe_failure(exc)[:500]}", file=sys.stderr, flush=True)
        if os.environ.get("DELTACRAWL_DEBUG"):
            traceback.print_exc()
        hints = [] if os.environ.get("DELTACRAWL_DEBUG") else ["set DELTACRAWL_DEBUG=1 for the full traceback"]
        if logs.jvm_log_path():
            hints.append(f"Spark's own log: {logs.jvm_log_path()}")
        if hints:
            print(f"{prog}: {'; '.join(hints)}", file=sys.stderr, flush=True)
        return EXIT_FAILURE


def run_spark_step(prog: str, argv: list[str] | None, configure: Callable[[argparse.ArgumentParser], None],
                   step: Callable[..., int],
                   precheck: Callable[[argparse.Namespace, Mapping[str, Any]], Any] | None = None,
                   creates_root: bool = False) -> int:
    """run_main for a Spark step: ``precheck(args, cfg)`` validates input before a JVM is started, then
    ``step(spark, cfg, root, args)`` runs with the one SparkSession and the crawl root."""
    def checks(args: argparse.Namespace, cfg: Mapping[str, Any]) -> None:
        from jobs.engine.commit_info import run_context
        run_context(args, prog.split()[-1])  # --crawl-id / --cycle checked before a JVM starts
        if precheck is not None:
            precheck(args, cfg)

    def body(args: argparse.Namespace, cfg: Mapping[str, Any]) -> int:
        from crawl import native
        from jobs.engine.logs import step_logger
        warning = native.missing_warning()
        if warning:
            step_logger(prog.split()[-1]).warning(warning)
        from jobs.engine.session import build_spark
        from jobs.engine.crawl_root import CrawlRoot
        return step(build_spark(cfg, args.crawl_root, one_step=True), cfg, CrawlRoot(args.crawl_root), args)
    return run_main(prog, argv, configure, body, creates_root=creates_root, precheck=checks)


def run_segment_step(prog: str, argv: list[str] | None, description: str,
                     run: Callable[..., Any], check: Callable[[Mapping[str, Any]], Any] | None = None) -> int:
    """main() of a step that works on one segment (fetch, dedup, update): ``run(spark, cfg, root,
    segment_id)``; the run is appended to the cycles table (jobs/engine/tracking.py). ``check(cfg)``
    refuses bad input before a JVM starts."""
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.description = description
        parser.add_argument("segment", metavar="SEGMENT", help="segment id printed by generate")
        add_run_options(parser)

    def step(spark, cfg, root, args) -> int:
        from jobs.engine.tracking import record_step  # (jobs.engine.tracking imports this module)
        record_step(spark, cfg, root, prog.split()[-1], lambda: run(spark, cfg, root, args.segment), args,
                    f"segment {args.segment}")
        return EXIT_OK

    def precheck(args: argparse.Namespace, cfg: Mapping[str, Any]) -> None:
        from jobs.engine.crawl_root import check_segment_id
        check_segment_id(args.segment)
        if check is not None:
            check(cfg)
    return run_spark_step(prog, argv, configure, step, precheck)
