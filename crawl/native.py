"""The optional compiled part of crawl/: crawl/dedup/_fasthash.c (the MinHash signature, small and
numeric). setup.py builds it when a C compiler is at hand; its pure-Python original (numpy) gives
the same results and stays the reference. (URLs are parsed by ada, a maintained and fuzzed
parser from PyPI: crawl/net/whatwg.py.)"""
from __future__ import annotations

import importlib
import os
from types import ModuleType

# What each compiled module speeds up, for the warning when it is missing.
MODULES = {"_fasthash": "the MinHash signature of each page (crawl/dedup/fingerprint.py)"}
# The package each one is built into (setup.py), next to the Python it copies.
PACKAGES = {"_fasthash": "crawl.dedup"}


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (a key of MODULES), or None when it is not built or the
    environment variable DELTACRAWL_PURE_PYTHON is set (to compare both, or to rule the C code out)."""
    if os.environ.get("DELTACRAWL_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(dotted(name))
    except ImportError:
        return None


def dotted(name: str) -> str:
    """The compiled module's full name, e.g. crawl.dedup._fasthash."""
    return f"{PACKAGES[name]}.{name}"


def status() -> dict[str, bool]:
    """{module: built and loaded} for each compiled module (all False under DELTACRAWL_PURE_PYTHON)."""
    return {name: load(name) is not None for name in MODULES}


def missing_warning() -> str | None:
    """One line naming the compiled modules that failed to build (their Python originals give the
    same results, slower), or None when all are there or DELTACRAWL_PURE_PYTHON asks for Python."""
    if os.environ.get("DELTACRAWL_PURE_PYTHON"):
        return None
    missing = [name for name, built in status().items() if not built]
    if not missing:
        return None
    what = "; ".join(f"{dotted(name)}: {MODULES[name]}" for name in missing)
    return (f"compiled code missing, so slower Python runs instead ({what}): the install had no C compiler, "
            f"or its build failed; reinstall with one (pip install -e . shows the compiler's error)")
