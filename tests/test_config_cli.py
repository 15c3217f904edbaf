"""The config's checks through the installed command, as a user meets them: a bad value or a bad
config file is exit 2 and one line on stderr (no traceback), before anything is created — a crawl
with the test web leaves no crawl root behind (crawl.config.build_config, jobs/engine/runtime.py)."""
import os
import subprocess
import sys

import pytest

EXE = os.path.join(os.path.dirname(sys.executable), "deltacrawl")

# (what the site file holds or None, --conf pairs, the words the one line must hold)
CASES = {
    "nan delay": (None, ["fetch.delay_s=nan"], "config key 'fetch.delay_s' expects a finite number, got nan"),
    "inf delay": (None, ["fetch.delay_s=inf"], "config key 'fetch.delay_s' expects a finite number, got inf"),
    "negative infinity": (None, ["schedule.fetch_value_s=-inf"], "'schedule.fetch_value_s' expects a finite number"),
    "nan in a file": (b"[fetch]\ndelay_s = nan\n", [], "config key 'fetch.delay_s' expects a finite number, got nan"),
    "inf in a file": (b"[dedup]\nmin_jaccard = inf\n", [], "config key 'dedup.min_jaccard' expects a finite number"),
    "file not UTF-8": (b'[fetch]\nuser_agent = "caf\xe9"\n', [], "is not UTF-8 text (byte 25)"),
    "file not TOML": (b"[fetch\ndelay_s = 1\n", [], "is not valid TOML"),
    "devweb port": (None, ["devweb.port=70000"], "config key 'devweb.port' must be a port number (0 to 65535), got 70000"),
    "https port": (None, ["devweb.https_port=-1"], "'devweb.https_port' must be a port number"),
    "a number in a list of names": (None, ["discovery.tracking_params=[1]"],
                                    "config key 'discovery.tracking_params' must be a list of strings, got 1 in it"),
    "hostile name": (None, ['devweb.hostile=["nope"]'], "devweb.hostile: unknown behaviour 'nope'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_config_is_one_line_and_exit_2_before_anything_is_made(tmp_path, case):
    content, pairs, words = CASES[case]
    root = tmp_path / "crawl"
    argv = [EXE, "crawl", "--with-devweb", "--cycles", "1", "--crawl-root", str(root)]
    if content is not None:
        site = tmp_path / "site.toml"
        site.write_bytes(content)
        argv += ["--conf-file", str(site)]
    for pair in pairs:
        argv += ["--conf", pair]
    # a check that came too late would start the test web and a JVM: the timeout bounds that too
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DELTACRAWL_DEBUG": ""})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("deltacrawl crawl: error: ") and words in lines[0], lines
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not root.exists()  # every check runs before anything is written


def test_a_test_web_whose_port_is_taken_is_one_line_and_leaves_no_crawl_root(tmp_path):
    # a runtime failure rather than a bad value: the crawl root is made before the test web starts
    # (its seeds file goes there), and one this run made is taken back when the web cannot start
    import socket
    root = tmp_path / "crawl"
    with socket.socket() as busy:
        busy.bind(("127.0.0.2", 0))  # the test web's first host address
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([EXE, "crawl", "--with-devweb", "--cycles", "1", "--crawl-root", str(root),
                               "--conf", f"devweb.port={port}"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "DELTACRAWL_DEBUG": ""})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines == [f"deltacrawl crawl: error: cannot start the test web on port {port}: Address already in use "
                     f"(try --conf devweb.port=0)"], lines
    assert not root.exists()
    # a crawl root that was there before is left as it was, empty or not
    root.mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.2", port))
        busy.listen()
        proc = subprocess.run([EXE, "crawl", "--with-devweb", "--cycles", "1", "--crawl-root", str(root),
                               "--conf", f"devweb.port={port}"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "DELTACRAWL_DEBUG": ""})
    assert proc.returncode == 2 and root.is_dir() and not any(root.iterdir()), proc.stderr
