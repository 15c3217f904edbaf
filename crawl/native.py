"""The optional compiled parts of crawl/: crawl/_fasturl.c (link normalisation and filtering)
and crawl/_fasthash.c (the MinHash signature). setup.py builds them when a C compiler is at
hand; each has a pure-Python original that gives the same results and stays the reference."""
from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(name: str) -> ModuleType | None:
    """``crawl.<name>``, or None when it is not built or the environment variable
    DELTACRAWL_PURE_PYTHON is set (to compare both, or to rule the C code out)."""
    if os.environ.get("DELTACRAWL_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"crawl.{name}")
    except ImportError:
        return None
