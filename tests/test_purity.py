"""crawl/ is the pure library: it must never import pyspark (house style, DESIGN.md)."""
import ast
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
