"""House rules the import graph must keep: crawl/ is the pure library and never imports pyspark;
jobs/engine/ never imports a step and a step never imports another; nothing in jobs/ shadows a
top-level module (docs/architecture.md, "Code layout")."""
import ast
import json
import os
import pathlib
import subprocess
import sys

CRAWL = pathlib.Path(__file__).resolve().parent.parent / "crawl"


def test_no_pyspark_import_in_source():
    offenders = []
    for path in CRAWL.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(CRAWL)}: {n}" for n in names if n.split(".")[0] in ("pyspark", "delta", "jobs")]
    assert offenders == []


def test_importing_every_crawl_module_loads_no_pyspark():
    modules = [".".join(p.relative_to(CRAWL).with_suffix("").parts) for p in CRAWL.rglob("*.py")
               if p.stem != "__init__"]
    assert "net.urls" in modules and "fetch.fetcher" in modules  # the subpackages are seen
    code = ("import sys\n" + "".join(f"import crawl.{m}\n" for m in modules)
            + "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'delta')]\n"
            + "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _is_broad(node) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Name):
        return node.id in ("Exception", "BaseException")
    return isinstance(node, ast.Tuple) and any(_is_broad(e) for e in node.elts)


def test_every_broad_except_reraises_or_says_what_it_does():
    """No silent policy: an ``except Exception`` (or BaseException, or bare) in crawl/ or jobs/
    either raises again, or says on its line (or the lines before its body) what becomes of the
    error — recorded where a user can see it, a cleanup, or why dropping it is right."""
    silent = []
    for folder in (CRAWL, CRAWL.parent / "jobs"):
        for path in folder.rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.ExceptHandler) or not _is_broad(node.type):
                    continue
                if any(isinstance(n, ast.Raise) for stmt in node.body for n in ast.walk(stmt)):
                    continue
                if "#" not in "\n".join(lines[node.lineno - 1:node.body[0].lineno - 1]):
                    silent.append(f"{path.relative_to(folder.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert silent == []


JOBS = CRAWL.parent / "jobs"
ENGINE = JOBS / "engine"
# The two commands made of steps, not steps themselves: cli dispatches to every step, and
# crawl_cycles (`deltacrawl crawl`) runs inject, generate, fetch, dedup, update and stats in one
# SparkSession. No module of jobs/ imports them but cli.
COMPOSITES = {"cli", "crawl_cycles"}


def _jobs_imports(path: pathlib.Path) -> set[str]:
    """Every module of jobs/ that ``path`` imports (top-level and lazy imports alike), as
    ``jobs.<name>`` or ``jobs.engine.<name>``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "jobs"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "jobs":
            # ``from jobs import fetch`` imports jobs.fetch; ``from jobs.engine.tables import X`` imports jobs.engine.tables
            found |= {f"{node.module}.{a.name}" for a in node.names} if node.module in ("jobs", "jobs.engine") \
                else {node.module}
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.add(f"<relative import in {path.name}>")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            found.add(f"<__import__ in {path.name}>")
    return {".".join(name.split(".")[:3]) if name.startswith("jobs.engine.") else ".".join(name.split(".")[:2])
            for name in found}


def _steps() -> list[pathlib.Path]:
    return [p for p in JOBS.glob("*.py") if p.stem != "__init__" and p.stem not in COMPOSITES]


def test_engine_never_imports_a_step():
    modules = list(ENGINE.rglob("*.py"))
    assert {"tables.py", "session.py", "runtime.py"} <= {p.name for p in modules}  # the subpackage is seen
    offenders = [f"engine/{p.name}: {name}" for p in modules for name in sorted(_jobs_imports(p))
                 if not name.startswith("jobs.engine.") and name != "jobs.engine"]
    assert offenders == []


def test_a_step_never_imports_another_step():
    steps = _steps()
    assert {"inject", "generate", "fetch", "dedup", "update", "stats", "maintain", "sql", "warc_get", "hint"} \
        == {p.stem for p in steps}
    offenders = [f"{p.name}: {name}" for p in steps for name in sorted(_jobs_imports(p))
                 if not name.startswith("jobs.engine.") and name != "jobs.engine"]
    # the composites are imported by cli alone (tests and bench may use them as they like)
    offenders += [f"{p.name}: {name}" for p in [*JOBS.glob("*.py"), *ENGINE.rglob("*.py")] if p.stem != "cli"
                  for name in sorted(_jobs_imports(p)) if name.split(".")[-1] in COMPOSITES]
    assert offenders == []


def test_the_checks_see_a_step_importing_a_step(tmp_path):
    """The resolver above finds every form an import of a step can take (else the two tests
    above could not fail)."""
    source = tmp_path / "probe.py"
    source.write_text("from jobs import fetch\nimport jobs.generate\nfrom jobs.update import run\n"
                      "def f():\n    from jobs.engine import tables\n    from jobs.engine.discover import candidates\n")
    assert _jobs_imports(source) == {"jobs.fetch", "jobs.generate", "jobs.update", "jobs.engine.tables",
                                     "jobs.engine.discover"}


def test_nothing_in_jobs_can_shadow_a_top_level_module(tmp_path):
    """spark-submit runs a step's file with jobs/ first on sys.path, so each module and package
    directly in jobs/ is then also a top-level module: none may share its name with one the
    code or its dependencies could import (stdlib, site-packages, the source tree)."""
    names = sorted({p.stem for p in JOBS.glob("*.py") if p.stem != "__init__"}
                   | {p.parent.name for p in JOBS.glob("*/__init__.py")})
    assert "engine" in names and "stats" in names
    code = ("import importlib.util, json, sys\n"
            f"jobs = {str(JOBS)!r}\n"
            "sys.path[:] = [p for p in sys.path if p not in ('', '.', jobs)]\n"
            f"print(json.dumps({{n: getattr(importlib.util.find_spec(n), 'origin', None) for n in {names!r}}}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(CRAWL.parent)})
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert {name: origin for name, origin in found.items() if origin is not None} == {}


def test_spark_submit_of_a_step_file_loads_nothing_from_jobs_as_top_level(tmp_path):
    """The same, for real: with jobs/ first on sys.path (as ``spark-submit jobs/<step>.py`` has
    it), import every module of ours and the dependencies the driver loads lazily; no module
    may come from a file directly in jobs/ under a top-level name."""
    ours = [".".join(p.relative_to(CRAWL.parent).with_suffix("").parts) for p in [*JOBS.rglob("*.py")]
            if p.stem != "__init__"]
    code = ("import importlib, sys\n"
            f"jobs = {str(JOBS)!r}\n"
            "sys.path.insert(0, jobs)\n"
            f"for name in {ours!r} + ['mlflow', 'sqlalchemy', 'alembic', 'matplotlib', 'boto3', 'delta', 'pyspark.sql']:\n"
            "    importlib.import_module(name)\n"
            "import os\n"
            "bad = sorted(n for n, m in list(sys.modules.items()) if not n.startswith('jobs') and\n"
            "             os.path.dirname(os.path.abspath(getattr(m, '__file__', None) or '/')).startswith(jobs))\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(CRAWL.parent)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
