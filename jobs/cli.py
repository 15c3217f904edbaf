"""The ``deltacrawl`` command: one subcommand per step, each also runnable as
``spark-submit jobs/<step>.py ...``.

    deltacrawl inject SEEDS_FILE      deltacrawl fetch SEGMENT      deltacrawl dedup SEGMENT
    deltacrawl generate               deltacrawl update SEGMENT     deltacrawl stats
    deltacrawl hint URLS_FILE         (URLs that changed, IndexNow-style: due in the next generate)
    deltacrawl crawl --seeds FILE --cycles N     deltacrawl maintain [--dry-run]
    deltacrawl warc-get URL           deltacrawl devweb             deltacrawl jars [--s3]
    deltacrawl package [--code]       (what a cluster's executors need: docs/cluster.md)
    deltacrawl sql "SELECT ..."       deltacrawl shell              deltacrawl history URL
    deltacrawl parsers                (the parsers installed, by media type: docs/parsers.md)

Global options (before or after the subcommand): --crawl-root PATH, --conf key=value (repeatable),
--conf-file FILE, -v/--verbose (debug lines, and Spark's own log on stderr instead of a file).
Results go to stdout, progress and errors to stderr (jobs/engine/logs.py). Every config key is documented in conf/defaults.toml.
"""
from __future__ import annotations

import json
import sys

from jobs.engine.runtime import run_main
from jobs.engine.errors import EXIT_OK, UserError

STEPS = ("inject", "generate", "fetch", "dedup", "update", "stats", "crawl", "maintain", "hint")
# A step's module is jobs/<step>.py, but for crawl: a crawl.py in jobs/ would shadow the crawl package
# when spark-submit runs a job file (the file's folder comes first on sys.path).
STEP_MODULES = {"crawl": "crawl_cycles"}
SQL_COMMANDS = ("sql", "shell", "history")  # jobs/sql.py
USAGE = __doc__


def config_toml(options: dict) -> str:
    """``{"section.key": value}`` (strings and lists of strings) as a TOML config file in the layout
    of conf/defaults.toml (JSON strings are TOML basic strings)."""
    sections: dict[str, list[str]] = {}
    for key, value in options.items():
        section, _, name = key.partition(".")
        sections.setdefault(section, []).append(f"{name} = {json.dumps(value)}")
    return "".join(f"[{section}]\n" + "\n".join(lines) + "\n\n" for section, lines in sections.items())


def devweb_main(argv: list[str] | None) -> int:
    def configure(parser) -> None:
        parser.description = ("Serve the bundled local test web in the foreground (loopback only; "
                              "options devweb.*); prints its seed URLs.")
        parser.add_argument("--log", metavar="FILE", help="append every request as a JSON line to FILE")
        parser.add_argument("--conf-out", metavar="FILE",
                            help="write the options a crawl of this web needs as a TOML config file (for "
                                 "--conf-file, or the conf_file of the Airflow DAG)")

    def body(args, cfg) -> int:
        from crawl.devweb.web import DevWeb
        try:
            web = DevWeb.from_config(cfg, log_path=args.log)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        try:
            web.start()
        except OSError as exc:
            raise UserError(f"cannot serve on port {cfg.devweb.port}: {exc.strerror or exc} "
                            f"(try --conf devweb.port=0)") from None
        # the address guard refuses loopback: a crawl of this web must allow its addresses (and,
        # named, ask its DNS server and trust its CA)
        options = web.crawl_config(cfg)
        if args.conf_out:  # before the seeds: a script that has read the seeds finds the file there
            with open(args.conf_out, "w", encoding="utf-8") as out:
                out.write(config_toml(options))
        for url in web.demo_seed_urls():  # stdout: the seeds only, so `deltacrawl devweb > seeds.txt` works
            print(url, flush=True)
        print("crawl it with: " + " ".join(f"--conf '{k}={json.dumps(v)}'" for k, v in options.items()),
              file=sys.stderr, flush=True)
        web.serve_forever()
        return EXIT_OK
    return run_main("deltacrawl devweb", argv, configure, body, needs_root=False)


def package_main(argv: list[str] | None) -> int:
    from pathlib import Path

    from jobs.engine.package import build_code_zip, build_env_archive, default_cache_dir

    def configure(parser) -> None:
        parser.description = ("Build (once) what a cluster's executors need: the packed Python environment "
                              "for --archives (default), or the pure-Python code zip for --py-files (--code).")
        parser.add_argument("--code", action="store_true", help="build the pure-Python code zip instead")
        parser.add_argument("--output-dir", metavar="DIR", help=f"cache folder (default: {default_cache_dir()})")

    def body(args, cfg) -> int:
        cache = Path(args.output_dir).expanduser() if args.output_dir else None
        if args.code:
            print(build_code_zip(cache), flush=True)
            return EXIT_OK
        try:
            print(build_env_archive(cache), flush=True)
        except RuntimeError as exc:
            raise UserError(str(exc)) from None
        return EXIT_OK
    return run_main("deltacrawl package", argv, configure, body, needs_root=False)


def jars_main(argv: list[str] | None) -> int:
    def configure(parser) -> None:
        parser.description = ("Fetch (once) and print the Delta jars (with --s3 also hadoop-aws and its "
                              "dependencies), comma-separated, for spark-submit --jars.")
        parser.add_argument("--s3", action="store_true", help="add the jars of Spark's s3a file system")

    def body(args, cfg) -> int:
        from jobs.engine.jars import JAR_SETS, default_jars_dir, ensure_jars
        jars_dir = default_jars_dir(cfg.spark.jars_dir)
        found = []
        for name in ["delta", "s3"] if args.s3 else ["delta"]:
            paths = ensure_jars(jars_dir, name)
            # without Maven, print the coordinates for spark-submit --packages instead
            found += [str(p) for p in paths] if paths else JAR_SETS[name]()
        print(",".join(found), flush=True)  # stdout: read by $(deltacrawl jars)
        return EXIT_OK
    return run_main("deltacrawl jars", argv, configure, body, needs_root=False)


_GLOBAL_WITH_VALUE = ("--crawl-root", "--conf", "--conf-file")
_GLOBAL_FLAGS = ("-v", "--verbose")


def _split_command(argv: list[str]) -> tuple[str | None, list[str]]:
    """Find the subcommand; global options given before it are moved after it."""
    leading: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _GLOBAL_FLAGS:
            leading.append(token)
            i += 1
        elif token in _GLOBAL_WITH_VALUE and i + 1 < len(argv):
            leading += argv[i:i + 2]
            i += 2
        elif token.split("=", 1)[0] in _GLOBAL_WITH_VALUE and "=" in token:
            leading.append(token)
            i += 1
        else:
            break
    if i >= len(argv):
        return None, leading
    return argv[i], argv[i + 1:] + leading


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE.strip())
        return EXIT_OK if argv else 2
    command, rest = _split_command(argv)
    if command is None:
        print("deltacrawl: error: no command given (see deltacrawl --help)", file=sys.stderr)
        return 2
    if command in STEPS:
        module = __import__(f"jobs.{STEP_MODULES.get(command, command)}", fromlist=["main"])
        return module.main(rest)
    if command == "warc-get":
        from jobs import warc_get
        return warc_get.main(rest)
    if command == "devweb":
        return devweb_main(rest)
    if command == "jars":
        return jars_main(rest)
    if command == "package":
        return package_main(rest)
    if command == "parsers":  # the installed parsers, on or off under the config (docs/parsers.md)
        from crawl.parse.registry import describe
        return run_main("deltacrawl parsers", rest, lambda parser: None,
                        lambda args, cfg: print("\n".join(describe(cfg))) or EXIT_OK, needs_root=False)
    if command in SQL_COMMANDS:
        from jobs import sql
        return getattr(sql, f"{command}_main")(rest)
    print(f"deltacrawl: error: unknown command '{command}' (one of: {', '.join(STEPS)}, warc-get, devweb, jars, "
          f"package, {', '.join(SQL_COMMANDS)})",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
