"""The address policy (crawl/net/addresses.py), as a table: every denied range, every IPv6 form
that carries an IPv4 address, names, ports and the allow-lists. Pure: no socket is opened."""
from __future__ import annotations

import pytest

from crawl.config import ConfigError, build_config
from crawl.net.addresses import (BAD_PORTS, REASONS, AddressPolicy, Refusal, networks_of, parse_address,
                                 reason_of_message, split_host_key)

DEFAULT = AddressPolicy()

# (address, reason or None when allowed)
ADDRESSES = [
    # IPv4 ranges that are not the public Internet
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"),
    ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("100.64.0.1", "shared"), ("100.100.100.200", "shared"), ("100.127.255.255", "shared"),
    ("169.254.169.254", "link_local"), ("169.254.0.1", "link_local"),
    ("192.0.0.8", "ietf_protocol"),
    ("192.0.2.1", "documentation"), ("198.51.100.7", "documentation"), ("203.0.113.9", "documentation"),
    ("198.18.0.1", "benchmarking"), ("198.19.255.255", "benchmarking"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "broadcast"), ("192.88.99.1", "reserved"),
    # IPv4 neighbours of those ranges, and public addresses
    ("8.8.8.8", None), ("1.1.1.1", None), ("172.15.255.255", None), ("172.32.0.0", None),
    ("100.63.255.255", None), ("100.128.0.0", None), ("169.253.255.255", None), ("198.17.255.255", None),
    ("198.20.0.0", None), ("223.255.255.255", None), ("11.0.0.0", None), ("126.255.255.255", None),
    # IPv6's own
    ("::1", "loopback"), ("::", "unspecified"), ("fe80::1", "link_local"), ("fe80::1%eth0", "link_local"),
    ("fc00::1", "unique_local"), ("fd12:3456::1", "unique_local"), ("fec0::1", "private"),
    ("ff02::1", "multicast"), ("2001:db8::1", "documentation"), ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"), ("100::1", "reserved"), ("64:ff9b:1::1", "private"),
    ("4000::1", "reserved"), ("5f00::1", "reserved"), ("e000::1", "reserved"),
    ("2606:4700:4700::1111", None), ("2a00:1450:4001::200e", None),
    # IPv6 forms that carry an IPv4 address are judged by it
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:7f00:1", "loopback"), ("::ffff:169.254.169.254", "link_local"),
    ("::ffff:10.0.0.1", "private"), ("::ffff:8.8.8.8", None),
    ("::127.0.0.1", "loopback"), ("::10.0.0.1", "private"), ("::8.8.8.8", None),            # IPv4-compatible
    ("64:ff9b::a9fe:a9fe", "link_local"), ("64:ff9b::10.0.0.1", "private"), ("64:ff9b::8.8.8.8", None),  # NAT64
    ("2002:a9fe:a9fe::", "link_local"), ("2002:7f00:1::1", "loopback"), ("2002:808:808::1", None),       # 6to4
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1 (obfuscated)
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", None),        # Teredo, client 8.8.8.8
]


@pytest.mark.parametrize("address,reason", ADDRESSES)
def test_address_table(address, reason):
    refusal = DEFAULT.address_refusal(address)
    assert (refusal.reason if refusal else None) == reason, refusal


def test_every_reason_is_listed_and_refusals_round_trip_through_their_message():
    for _, reason in ADDRESSES:
        assert reason is None or reason in REASONS
    refusal = DEFAULT.address_refusal("64:ff9b::a9fe:a9fe")
    assert refusal.detail == "64:ff9b::a9fe:a9fe carries 169.254.169.254 (in 169.254.0.0/16)"
    assert reason_of_message(refusal.message()) == "link_local"
    assert reason_of_message("ConnectionRefusedError: ...") is None and reason_of_message(None) is None


# (host key as the crawler writes it, scheme, reason or None)
HOSTS = [
    ("example.com", "http", None), ("example.com:8080", "http", None), ("example.com", "https", None),
    ("example.com:6666", "http", "bad_port"), ("example.com:25", "https", "bad_port"),
    ("example.com:0", "http", "bad_port"), ("example.com:10080", "http", "bad_port"),
    ("127.0.0.1:8080", "http", "loopback"), ("[::1]:8080", "http", "loopback"), ("[::ffff:7f00:1]", "http", "loopback"),
    ("169.254.169.254", "http", "link_local"), ("10.1.2.3:80", "http", "private"),
    ("metadata.google.internal", "http", "metadata_name"), ("metadata.google.internal.", "http", "metadata_name"),
    ("metadata", "http", "metadata_name"), ("instance-data.ec2.internal", "http", "metadata_name"),
    ("metadata.goog:80", "http", "metadata_name"),
    ("localhost:8080", "http", None),  # a name: judged by the addresses it resolves to (the resolver's test)
    ("[2606:4700::1]:443", "https", None),
]


@pytest.mark.parametrize("host,scheme,reason", HOSTS)
def test_host_table(host, scheme, reason):
    refusal = DEFAULT.host_refusal(host, scheme)
    assert (refusal.reason if refusal else None) == reason, refusal


def test_allow_networks_open_exactly_their_addresses_and_metadata_names_stay_refused():
    policy = AddressPolicy(["10.20.0.0/16", "127.0.0.2/32", "fd00::/8"])
    assert policy.address_refusal("10.20.1.1") is None and policy.address_refusal("10.21.0.1").reason == "private"
    assert policy.address_refusal("127.0.0.2") is None and policy.address_refusal("127.0.0.1").reason == "loopback"
    assert policy.address_refusal("::ffff:127.0.0.2") is None  # judged by the IPv4 address it carries
    assert policy.address_refusal("fd00::5") is None and policy.address_refusal("fc00::5").reason == "unique_local"
    assert AddressPolicy(["169.254.0.0/16"]).host_refusal("metadata.google.internal").reason == "metadata_name"


def test_allow_ports_make_a_strict_crawl():
    strict = AddressPolicy(allow_ports=[80, 443, 6666])
    assert strict.host_refusal("example.com") is None and strict.host_refusal("example.com", "https") is None
    assert strict.host_refusal("example.com:8080").reason == "port_not_allowed"
    assert strict.host_refusal("example.com:6666") is None  # listed on purpose
    assert all(DEFAULT.port_refusal(p).reason == "bad_port" for p in BAD_PORTS)
    assert DEFAULT.port_refusal(8080) is None and DEFAULT.port_refusal(443) is None


def test_bad_config_is_one_clear_line():
    for key, value, words in [("fetch.allow_networks", '["10.0.0.0/33"]', "not a network in CIDR notation"),
                              ("fetch.allow_networks", '["intranet"]', "not a network in CIDR notation"),
                              ("fetch.allow_ports", '[0]', "not a port number"),
                              ("fetch.allow_ports", '["80"]', "not a port number")]:
        with pytest.raises(ConfigError, match=words) as info:
            build_config(overrides={key: value})
        assert key in str(info.value) and "\n" not in str(info.value)
    assert build_config(overrides={"fetch.allow_networks": '["10.0.0.0/8"]'})["fetch.allow_networks"] == ["10.0.0.0/8"]


def test_helpers():
    assert split_host_key("[::1]:81", 80) == ("[::1]", 81) and split_host_key("[::1]", 443) == ("[::1]", 443)
    assert split_host_key("a.b:8080", 80) == ("a.b", 8080) and split_host_key("a.b", 80) == ("a.b", 80)
    assert str(parse_address("[fe80::1%eth0]")) == "fe80::1" and parse_address("example.com") is None
    assert networks_of(["127.0.0.2", "127.0.0.3", "127.0.0.5", "::1"]) == ["127.0.0.2/31", "127.0.0.5/32", "::1/128"]
    assert Refusal("loopback", "x").message() == "refused address: loopback: x"
