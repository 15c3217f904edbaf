"""The documentation holds together: every relative link of README.md and docs/*.md names a file
that exists, and every #anchor a heading of the page it points to; docs/index.md lists every page
of docs/; the README stays a map (short, and pointing at the index).

Anchors are GitHub's: the heading's text lower-cased, markup and punctuation dropped, spaces as
hyphens, and a repeated heading numbered (-1, -2, ...).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The text without fenced code blocks (links and headings there are examples, not ours)."""
    return FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # GitHub keeps letters, digits, _, - and spaces
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_anchor(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", prose(path.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)]  # http:, https:, mailto: …


def test_anchors_follow_github():
    assert github_anchor("Read-only unless `--write`") == "read-only-unless---write"
    assert github_anchor("Small inputs skip Spark's planning") == "small-inputs-skip-sparks-planning"
    assert github_anchor("`warc_index/` — where every archived record is") == "warc_index--where-every-archived-record-is"
    assert github_anchor("Status model (`crawl/crawldb/status.py`)") == "status-model-crawlcrawldbstatuspy"


def test_the_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nowhere) `[code](x.md)`\n"
                    "```\n[example](also-missing.md)\n```\n[web](https://example.com/x)\n", encoding="utf-8")
    assert relative_links(page) == ["#title", "missing.md", "#nowhere"]
    assert broken_links(page) == ["missing.md: no such file", "#nowhere: no heading page.md#nowhere"]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading {linked.name}#{anchor}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_index_lists_every_page_of_docs():
    listed = set(re.findall(r"\]\(([^)#]+\.md)\)", (DOCS / "index.md").read_text(encoding="utf-8")))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages - listed == set(), "docs/index.md should say what each page answers"


def cli_commands() -> set[str]:
    """The commands ``deltacrawl --help`` lists."""
    from jobs.cli import USAGE
    return set(re.findall(r"deltacrawl ([a-z][a-z-]*)", USAGE))


def test_the_readme_is_a_map():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert "(docs/index.md)" in text
    assert "```\nmake demo\n```" in text and "```\nmake test\n```" in text  # the quick start
    commands = cli_commands()
    assert {"inject", "generate", "fetch", "dedup", "update", "stats", "crawl", "sql"} <= commands
    for page in (REPO / "README.md", DOCS / "cli.md"):  # one line each in the map, in full in cli.md
        lines = page.read_text(encoding="utf-8")
        missing = [c for c in sorted(commands) if f"| `deltacrawl {c}" not in lines]
        assert missing == [], f"{page.name}'s command table lacks {missing}"


# --- module paths in words ------------------------------------------------------------------------
# A comment, docstring or page that names a module (``crawl/fetch/dns.py``, ``jobs.engine.tables``,
# ``crawl.crawldb.schedule.priority``) must name one that exists: modules move, and a reader
# following a stale path finds nothing. Checked in the comments and docstrings of every Python file
# (code itself is checked by running it), in conf/*.toml's comments, the Makefile, README.md,
# BENCHMARKS.md and docs/*.md. A page may name a retired file in a line that says how to restore it
# (``git show <commit>:bench/x.py``).
TOPS = ("crawl", "jobs", "tests", "bench", "conf", "docs", "airflow_dags", "notebooks")
PATH_REF = re.compile(r"(?<![\w./<>:-])((?:%s)/[\w./-]*[\w/])" % "|".join(TOPS))
DOTTED_REF = re.compile(r"(?<![\w./-])((?:crawl|jobs|tests|bench|airflow_dags)(?:\.[A-Za-z_]\w*)+)")


def _config_keys() -> set[str]:
    import tomllib
    keys: set[str] = set()

    def walk(table: dict, prefix: str) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                keys.add(prefix + key)
    walk(tomllib.loads((REPO / "conf" / "defaults.toml").read_text(encoding="utf-8")), "")
    return keys


def python_words(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    import ast
    import io
    import tokenize
    source = path.read_text(encoding="utf-8")
    words = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                words.extend((first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines()))
    return words


def worded_files() -> list[Path]:
    found = [p for top in ("crawl", "jobs", "tests", "bench", "airflow_dags") for p in sorted((REPO / top).rglob("*.py"))]
    return found + sorted((REPO / "conf").glob("*.toml")) + [REPO / "Makefile", REPO / "README.md", REPO / "BENCHMARKS.md"] + PAGES[1:]


def _module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base.with_suffix(".c"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return base if base.is_dir() else None


def stale_references(path: Path, lines: list[tuple[int, str]], keys: set[str]) -> list[str]:
    stale = []
    for number, line in lines:
        if "git show" in line:  # how to restore a retired file
            continue
        for match in PATH_REF.finditer(line):
            target = match.group(1).rstrip(".")
            if "NAME" in target or (REPO / target).exists():
                continue
            module, _, attr = target.rpartition(".")  # jobs/generate.DUE_COLUMNS
            if module and (REPO / f"{module}.py").exists() and re.search(rf"\b{re.escape(attr)}\b",
                                                                         (REPO / f"{module}.py").read_text(encoding="utf-8")):
                continue
            stale.append(f"{path.relative_to(REPO)}:{number}: {target}")
        for match in DOTTED_REF.finditer(line):
            ref = match.group(1)
            if ref.rsplit(".", 1)[-1] in ("py", "md", "toml", "json", "txt"):
                continue  # a file name (crawl.py), not a module
            if any(ref == key or key.startswith(ref + ".") or ref.startswith(key) for key in keys):
                continue  # a config key (crawl.owner_stale_s), not a module
            parts = ref.split(".")
            depth = len(parts)
            while depth > 1 and _module_file(parts[:depth]) is None:
                depth -= 1
            found = _module_file(parts[:depth])
            if depth == 1 or found is None:
                stale.append(f"{path.relative_to(REPO)}:{number}: {ref} (no such module)")
                continue
            rest = [p for p in parts[depth:] if not p.startswith("__")]
            if rest and found.is_file() and found.suffix == ".py" and not re.search(
                    rf"\b{re.escape(rest[0])}\b", found.read_text(encoding="utf-8")):
                stale.append(f"{path.relative_to(REPO)}:{number}: {ref} ({rest[0]} is not in {found.relative_to(REPO)})")
    return stale


def test_the_reference_checker_sees_a_stale_path(tmp_path):
    lines = [(1, "see crawl/fetch/dns.py and crawl/fetch/nowhere.py"), (2, "jobs.engine.tables.snapshots_built_meanwhile"),
             (3, "jobs.tables.from_epoch_col, jobs.engine.tables.no_such_name"), (4, "fetch.delay_s, crawl.owner_stale_s"),
             (5, "git show abc:bench/retired.py"), (6, "jobs/generate.DUE_COLUMNS")]
    assert stale_references(REPO / "README.md", lines, _config_keys()) == [
        "README.md:1: crawl/fetch/nowhere.py", "README.md:3: jobs.tables.from_epoch_col (no such module)",
        "README.md:3: jobs.engine.tables.no_such_name (no_such_name is not in jobs/engine/tables.py)"]


def test_every_module_named_in_words_exists():
    keys = _config_keys()
    stale = []
    for path in worded_files():
        if path.suffix == ".py":
            lines = python_words(path)
        else:
            text = path.read_text(encoding="utf-8")
            lines = list(enumerate(text.splitlines(), 1))
            if path.suffix == ".toml":
                lines = [(n, line.partition("#")[2]) for n, line in lines]
        stale.extend(stale_references(path, lines, keys))
    assert stale == []


ENV_NAME = re.compile(r"\bDELTACRAWL_[A-Z0-9_]*[A-Z0-9]\b")


def environment_names(path: Path) -> set[str]:
    """The DELTACRAWL_* environment variables a file names: in a Python file, those in its string
    literals (os.environ's keys, an env={...} a process is started with, a shell line), not
    identifiers that happen to start so (bench/dedup_quality.py's DELTACRAWL_LABEL is a constant);
    in a notebook, Makefile or shell script, any."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return set(ENV_NAME.findall(text))
    import ast
    return {name for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            for name in ENV_NAME.findall(node.value)}


def environment_files() -> list[Path]:
    """Every file of the repository that may read the environment: the code, the DAG, the notebook,
    the tests (what they set for the processes they start, and their own switches), the benchmarks,
    the Makefile and shell scripts."""
    files = [REPO / "Makefile", *REPO.glob("*.sh")]
    for top in ("crawl", "jobs", "airflow_dags", "notebooks", "tests", "bench", "conf"):
        files += [p for p in (REPO / top).rglob("*") if p.suffix in (".py", ".ipynb", ".sh")]
    return [p for p in files if p.is_file() and p != Path(__file__).resolve()]  # not this checker's examples


def test_the_environment_checker_sees_names_in_strings_only(tmp_path):
    code = tmp_path / "x.py"
    code.write_text('DELTACRAWL_LABEL = "x"\nimport os\nos.environ.get("DELTACRAWL_NEW_SWITCH")\n'
                    'env = {"DELTACRAWL_DEBUG": "1"}\nrun("DELTACRAWL_PURE_PYTHON=1 make check")\n')
    assert environment_names(code) == {"DELTACRAWL_NEW_SWITCH", "DELTACRAWL_DEBUG", "DELTACRAWL_PURE_PYTHON"}
    script = tmp_path / "x.sh"
    script.write_text('echo "${DELTACRAWL_BIN:-deltacrawl}"\n')
    assert environment_names(script) == {"DELTACRAWL_BIN"}


def test_every_environment_variable_read_is_documented():
    """A DELTACRAWL_* variable read anywhere (the code, the DAG, the notebook, the tests, the
    benchmarks, the Makefile) is named in docs/: the CLI's in docs/cli.md, the DAG's in
    docs/airflow.md, the suite's in docs/development.md."""
    read: dict[str, Path] = {}
    for path in environment_files():
        for name in environment_names(path):
            read.setdefault(name, path.relative_to(REPO))
    documented = "\n".join(page.read_text(encoding="utf-8") for page in DOCS.glob("*.md"))
    # the scan still sees the CLI's, the DAG's and the suite's own
    assert {"DELTACRAWL_DEBUG", "DELTACRAWL_CRAWL_ROOT", "DELTACRAWL_TEST_CPU"} <= set(read)
    assert sorted(f"{name} ({path})" for name, path in read.items() if name not in documented) == []
