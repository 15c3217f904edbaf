"""crawl/fetch/identity.py: seeds and hints of hosts that are not loopback IP literals need a
fetch.user_agent naming the operator and a contact. Pure, and the CLI refuses before a JVM starts."""
from __future__ import annotations

import pytest

from crawl.config import ConfigError, build_config, load_defaults
from crawl.devweb import DEVWEB_USER_AGENT, devweb_user_agent
from crawl.fetch.identity import contacts_of, identity_refusal, is_loopback_literal, shipped_user_agent
from jobs import cli
from tests.conftest import write_seeds

SHIPPED = load_defaults()["fetch.user_agent"]
MINE = "mycrawler/1.0 (+https://example.org/crawler; ops@example.org)"


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2:8080", True), ("127.255.255.254", True),
    ("[::1]", True), ("[::1]:8080", True), ("[::ffff:7f00:1]:81", True),  # IPv4-mapped 127.0.0.1
    ("localhost", False), ("localhost:8080", False), ("a.test", False), ("example.com", False),
    ("8.8.8.8", False), ("10.0.0.1:80", False), ("[2001:db8::1]", False), ("[::]", False), ("0.0.0.0", False),
])
def test_only_loopback_ip_literals_are_loopback(host, loopback):
    assert is_loopback_literal(host) is loopback


@pytest.mark.parametrize("agent, contacts", [
    (MINE, ["https://example.org/crawler", "ops@example.org"]),
    ("bot/1 (http://me.example/bot.html)", ["http://me.example/bot.html"]),
    ("bot/1 (contact: ops@localhost.)", ["ops@localhost"]),
    ("bot/1 (+https://user@me.example/x)", ["https://user@me.example/x"]),  # one contact, not two
    ("bot/1", []), ("bot/1 (http://)", []), ("bot/1 (@me, x@)", []), ("", []),
])
def test_contacts_are_urls_and_email_addresses(agent, contacts):
    assert contacts_of(agent) == contacts


def test_the_shipped_default_is_refused_for_names_and_public_addresses_with_one_line():
    assert shipped_user_agent() == SHIPPED
    refusal = identity_refusal(["b.example", "127.0.0.2:80", "a.example", "8.8.8.8"], SHIPPED)
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith("fetch.user_agent is the shipped default: set it to name you and a contact")
    assert "(8.8.8.8 and 2 more)" in refusal and f"--conf 'fetch.user_agent={MINE}'" in refusal
    assert identity_refusal(["[2001:db8::1]:443"], SHIPPED) is not None


def test_loopback_literals_need_no_identity():
    assert identity_refusal(["127.0.0.2:8000", "[::1]:80", "127.0.0.11"], SHIPPED) is None
    assert identity_refusal([], SHIPPED) is None


@pytest.mark.parametrize("agent, allowed", [
    (MINE, True),
    ("bot/1 (ops@example.org)", True),
    ("bot/1 (+https://example.org/bot)", True),
    (DEVWEB_USER_AGENT, True),
    ("bot/1.0", False),                                               # changed, but names no contact
    ("deltacrawl/0.2 (+https://github.com/deltacrawl/deltacrawl/)", False),  # the project's page is not yours
    ("  " + SHIPPED + " ", False),
])
def test_a_changed_agent_needs_a_contact_of_the_operators_own(agent, allowed):
    refusal = identity_refusal(["localhost:8080"], agent)
    assert (refusal is None) is allowed
    if not allowed and agent.strip() != SHIPPED:
        assert "names no contact of yours" in refusal


def test_an_empty_or_multi_line_agent_is_refused_at_config_load():
    for bad in ("", "   ", "bot/1 (ops@example.org)\r\nX-Evil: 1"):
        with pytest.raises(ConfigError, match="fetch.user_agent"):
            build_config(overrides={"fetch.user_agent": bad})


def test_the_test_web_names_itself_only_in_place_of_the_shipped_default():
    assert devweb_user_agent(SHIPPED) == DEVWEB_USER_AGENT
    assert devweb_user_agent(MINE) == MINE
    assert "deltacrawl" in DEVWEB_USER_AGENT  # tests/politeness.py looks for it in the test web's log


@pytest.mark.parametrize("argv", [["inject", "{file}"], ["crawl", "--seeds", "{file}"], ["hint", "{file}"]])
def test_the_cli_refuses_a_named_seed_with_the_shipped_agent_before_spark_starts(tmp_path, capsys, argv):
    urls = write_seeds(tmp_path / "urls.txt", ["http://127.0.0.2:8000/", "http://localhost:8000/"])
    root = tmp_path / "crawl"
    rc = cli.main([a.format(file=urls) for a in argv] + ["--crawl-root", str(root)])
    err = capsys.readouterr().err
    assert rc == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"deltacrawl {argv[0]}: error: fetch.user_agent is the shipped default") and "localhost" in line
    assert not root.exists()  # refused before anything was made (or a JVM started)
