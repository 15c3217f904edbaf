"""The compiled modules (crawl/native.py): built wherever a C compiler is, and a missing one is
said out loud, at a step's start and in stats, never silently slower."""
from __future__ import annotations

import os
import shlex
import shutil
import sysconfig

import pytest

from crawl import native
from crawl.report import format_stats


def _compiler() -> str | None:
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    return shutil.which(cc[0]) if cc else None


@pytest.mark.skipif(bool(os.environ.get("DELTACRAWL_PURE_PYTHON")), reason="DELTACRAWL_PURE_PYTHON asks for Python")
@pytest.mark.skipif(_compiler() is None, reason="no C compiler on this machine: the extensions cannot be built")
def test_every_compiled_module_is_built():
    """A build that silently lost the extension (setup.py marks it optional) fails here."""
    assert native.status() == {"_fasthash": True}
    assert native.missing_warning() is None


def test_a_missing_module_is_named(monkeypatch):
    real = native.load
    monkeypatch.delenv("DELTACRAWL_PURE_PYTHON", raising=False)
    monkeypatch.setattr(native, "load", lambda name: None if name == "_fasthash" else real(name))
    assert native.status()["_fasthash"] is False
    warning = native.missing_warning()
    assert "crawl.dedup._fasthash" in warning and "MinHash" in warning and "C compiler" in warning
    stats = {"crawl_root": "r", "version": 1, "total_urls": 0, "hosts": 0, "due_now": 0, "leased": 0,
             "max_depth": 0, "by_status": [], "by_http_status": [], "top_hosts": [],
             "native_code": native.status()}
    assert "compiled code missing (slower Python instead): crawl.dedup._fasthash" in format_stats(stats)
    monkeypatch.setenv("DELTACRAWL_PURE_PYTHON", "1")  # asked for: no warning
    assert native.missing_warning() is None


def test_a_step_warns_at_start(monkeypatch, capsys, tmp_path):
    """After the input checks and before the JVM starts (build_spark is replaced to stop there)."""
    import jobs.engine.session
    from jobs import stats
    monkeypatch.setattr(native, "missing_warning", lambda: "compiled code missing (test)")

    def no_jvm(*_args, **_kwargs):
        raise RuntimeError("stopped before the JVM")

    monkeypatch.setattr(jobs.engine.session, "build_spark", no_jvm)
    (tmp_path / "crawl").mkdir()  # stats refuses a missing crawl root before it gets this far
    assert stats.main(["--crawl-root", str(tmp_path / "crawl")]) == 3
    err = capsys.readouterr().err
    assert "stats: compiled code missing (test)" in err
    assert err.index("compiled code missing") < err.index("stopped before the JVM")
