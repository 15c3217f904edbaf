"""The address guard: which hosts, IP addresses and ports the crawler may connect to.

A crawler follows links that strangers wrote. Without a guard, one link (or redirect, sitemap
entry, or DNS name) pointing at ``169.254.169.254`` hands a cloud instance's credentials to the
WARC files, and one pointing at ``10.x`` reaches admin APIs that trust their network (OWASP's
SSRF prevention cheat sheet; Stripe's Smokescreen). So, by default, every address that is not
on the public Internet is refused, and so are the ports browsers never send HTTP to.

``AddressPolicy`` is pure (no I/O, no DNS): the fetcher asks it

  * about a URL's host before anything is sent (``host_refusal``): an IP literal is judged as it
    is, a name only if it is a well-known metadata name (other names are judged by address);
  * about every address a name resolves to, and every address a socket is about to connect to
    (``address_refusal``; crawl/fetch/guard.py wires this into aiohttp's resolver and socket
    factory), so a name that resolves public when checked and private when connected cannot pass.

Denied by default (``DENIED_NETWORKS``, from the IANA IPv4 and IPv6 Special-Purpose Address
Registries): loopback, "this network"/unspecified, RFC 1918 private, CGNAT shared space,
link-local, IETF protocol assignments, documentation, benchmarking, multicast, broadcast and the
reserved 240/4; in IPv6 also unique-local, site-local, discard-only, and everything outside the
global unicast 2000::/3. IPv6 forms that carry an IPv4 address are judged by that IPv4 address:
IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, NAT64 ``64:ff9b::/96`` (RFC 6052),
6to4 ``2002::/16`` (RFC 3056) and Teredo ``2001::/32`` (RFC 4380, its client address).

Where ``ipaddress`` is right and where it is not: it parses addresses, strips IPv6 zone ids and
answers network membership exactly, so the guard uses it for that. Its ``is_private`` /
``is_global`` flags are not used: their tables changed between Python patch releases (before
3.11.10 / 3.12.4, CVE-2024-4032, an IPv4-mapped private address was not private, and 6to4 or NAT64
forms are still judged as IPv6), and a security boundary must be the same on every executor of a
cluster whatever its Python. Nor does ``ipaddress`` accept the legacy IPv4 spellings
(``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``): URLs reach the guard canonicalised by
WHATWG host parsing (crawl/net/whatwg.py), which turns every such spelling into dotted decimal,
and the socket-level check sees the kernel's own address.

Ports: the WHATWG Fetch standard's "bad ports" (services that speak something other than HTTP:
SMTP, IRC, SIP, ...) are refused, and ``fetch.allow_ports`` can narrow the crawl to a list
(e.g. 80 and 443). ``fetch.allow_networks`` lists CIDR networks an intranet crawl may enter; an
address inside one is allowed whatever its kind. Metadata names are refused by name always.

Every refusal is a ``Refusal(reason, detail)``; ``reason`` is one of REASONS, a stable code that
stats and MLflow count, and ``message()`` the text stored with the URL (``error`` column).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable

# The crawldb status and fetch outcome of a URL whose host, address or port is refused.
BLOCKED_STATUS = "blocked_address"
# How the stored error text of a refused URL starts: "<prefix> <reason>: <detail>".
MESSAGE_PREFIX = "refused address:"

LOOPBACK = "loopback"
UNSPECIFIED = "unspecified"
PRIVATE = "private"
SHARED = "shared"              # carrier-grade NAT, 100.64.0.0/10 (RFC 6598)
LINK_LOCAL = "link_local"      # 169.254/16 (the cloud metadata address), fe80::/10
PROTOCOL = "ietf_protocol"     # 192.0.0.0/24, IETF protocol assignments (RFC 6890)
DOCUMENTATION = "documentation"
BENCHMARKING = "benchmarking"
MULTICAST = "multicast"
BROADCAST = "broadcast"
RESERVED = "reserved"
UNIQUE_LOCAL = "unique_local"  # fc00::/7 (RFC 4193)
METADATA_NAME = "metadata_name"
BAD_PORT = "bad_port"
PORT_NOT_ALLOWED = "port_not_allowed"
REASONS = (LOOPBACK, UNSPECIFIED, PRIVATE, SHARED, LINK_LOCAL, PROTOCOL, DOCUMENTATION, BENCHMARKING,
           MULTICAST, BROADCAST, RESERVED, UNIQUE_LOCAL, METADATA_NAME, BAD_PORT, PORT_NOT_ALLOWED)

# (network, reason), most specific first where they nest. IPv4: IANA IPv4 Special-Purpose Address
# Registry, every block not globally reachable (192.0.0.0/24's few anycast addresses included: a
# crawler never needs them).
_DENIED_V4 = (
    ("255.255.255.255/32", BROADCAST),
    ("0.0.0.0/8", UNSPECIFIED),          # "this network" (RFC 791); 0.0.0.0 reaches the local host
    ("10.0.0.0/8", PRIVATE),             # RFC 1918
    ("100.64.0.0/10", SHARED),           # RFC 6598; Alibaba's metadata is 100.100.100.200
    ("127.0.0.0/8", LOOPBACK),           # RFC 1122
    ("169.254.0.0/16", LINK_LOCAL),      # RFC 3927; 169.254.169.254 is AWS/GCP/Azure/... metadata
    ("172.16.0.0/12", PRIVATE),          # RFC 1918
    ("192.0.0.0/24", PROTOCOL),          # RFC 6890
    ("192.0.2.0/24", DOCUMENTATION),     # TEST-NET-1, RFC 5737
    ("192.88.99.0/24", RESERVED),        # 6to4 relay anycast, deprecated (RFC 7526)
    ("192.168.0.0/16", PRIVATE),         # RFC 1918
    ("198.18.0.0/15", BENCHMARKING),     # RFC 2544
    ("198.51.100.0/24", DOCUMENTATION),  # TEST-NET-2
    ("203.0.113.0/24", DOCUMENTATION),   # TEST-NET-3
    ("224.0.0.0/4", MULTICAST),          # RFC 5771
    ("240.0.0.0/4", RESERVED),           # RFC 1112
)
# IPv6: IANA IPv6 Special-Purpose Address Registry, then everything outside 2000::/3 (the only
# range IANA allocates global unicast from). The IPv4-carrying forms are handled before these.
_DENIED_V6 = (
    ("::/128", UNSPECIFIED),
    ("::1/128", LOOPBACK),
    ("64:ff9b:1::/48", PRIVATE),         # local-use NAT64 (RFC 8215)
    ("100::/64", RESERVED),              # discard-only (RFC 6666)
    ("2001:2::/48", BENCHMARKING),       # RFC 5180
    ("2001:10::/28", RESERVED),          # ORCHID, deprecated (RFC 4843)
    ("2001:db8::/32", DOCUMENTATION),    # RFC 3849
    ("3fff::/20", DOCUMENTATION),        # RFC 9637
    ("fc00::/7", UNIQUE_LOCAL),          # RFC 4193
    ("fe80::/10", LINK_LOCAL),           # RFC 4291
    ("fec0::/10", PRIVATE),              # site-local, deprecated (RFC 3879)
    ("ff00::/8", MULTICAST),             # RFC 4291
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")      # RFC 4291 2.5.5.2
_COMPATIBLE = ipaddress.IPv6Network("::/96")          # RFC 4291 2.5.5.1 (deprecated)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")        # RFC 6052
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")     # RFC 3056
_TEREDO = ipaddress.IPv6Network("2001::/32")          # RFC 4380

DENIED_NETWORKS: tuple[tuple[ipaddress._BaseNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), reason) for net, reason in _DENIED_V4 + _DENIED_V6)

# Instance-metadata services that are reached by name. Refused by name whatever they resolve to
# and whatever fetch.allow_networks says: nothing a crawler wants lives there.
METADATA_NAMES = frozenset({
    "metadata.google.internal",    # Google Cloud
    "metadata.goog",               # Google Cloud
    "metadata",                    # Google Cloud, through the resolver's search domain
    "instance-data",               # AWS EC2, through the search domain
    "instance-data.ec2.internal",  # AWS EC2
    "metadata.azure.internal",     # Azure
    "metadata.tencentyun.com",     # Tencent Cloud
    "metadata.packet.net",         # Equinix Metal
    "metadata.platformequinix.com",
})

# WHATWG Fetch standard, "bad port" (https://fetch.spec.whatwg.org/#port-blocking): ports of
# services a cross-protocol request could talk to.
BAD_PORTS = frozenset({
    0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
    103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512,
    513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719,
    1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679,
    6697, 10080,
})
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Refusal:
    """Why a host, address or port is refused: a stable ``reason`` (one of REASONS) and a detail."""
    reason: str
    detail: str

    def message(self) -> str:
        """The text stored with a refused URL (the crawldb's ``error`` column)."""
        return f"{MESSAGE_PREFIX} {self.reason}: {self.detail}"


# A SQL regular expression (Spark's regexp_extract, group 1) for the reason of a stored message.
REASON_PATTERN = r"^refused address: ([a-z_]+):"


def reason_of_message(error: str | None) -> str | None:
    """The reason code of a stored refusal message, or None for any other text."""
    if not error or not error.startswith(MESSAGE_PREFIX):
        return None
    return error[len(MESSAGE_PREFIX):].split(":", 1)[0].strip() or None


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo client),
    or None. ``::`` and ``::1`` carry none (they are IPv6's own unspecified and loopback)."""
    if address in _MAPPED:
        return address.ipv4_mapped
    value = int(address)
    if address in _NAT64 or (address in _COMPATIBLE and value > 1):
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    if address in _TEREDO:
        return address.teredo[1]  # (server, client): traffic goes to the client's address
    return None


def parse_address(text: str) -> IPAddress | None:
    """An IP address from a host as URLs and sockets write it ("[::1]", "fe80::1%eth0",
    "10.0.0.1"), or None for a name."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]  # an IPv6 zone id does not change what the address is
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class AddressPolicy:
    """Which addresses, names and ports may be contacted (see the module docstring)."""

    def __init__(self, allow_networks: Iterable[str] = (), allow_ports: Iterable[int] = ()):
        self.allow_networks = tuple(parse_networks(allow_networks))
        self.allow_ports = frozenset(parse_ports(allow_ports))

    @classmethod
    def from_config(cls, cfg: Any) -> "AddressPolicy":
        """The policy of a crawl.config.Config's [fetch] section (crawl.config is not imported
        here: it imports this module to check a config at load)."""
        return cls(cfg.fetch.allow_networks, cfg.fetch.allow_ports)

    def _allowed(self, address: IPAddress) -> bool:
        return any(address.version == net.version and address in net for net in self.allow_networks)

    def address_refusal(self, address: IPAddress | str) -> Refusal | None:
        """None if the crawler may connect to ``address``, else why not."""
        addr = parse_address(address) if isinstance(address, str) else address
        if addr is None:
            return Refusal(RESERVED, f"{address!r} is not an IP address")
        if self._allowed(addr):
            return None
        if addr.version == 6:
            inner = embedded_ipv4(addr)
            if inner is not None:
                refusal = self.address_refusal(inner)
                return None if refusal is None else Refusal(refusal.reason, f"{addr} carries {refusal.detail}")
        for net, reason in DENIED_NETWORKS:
            if addr.version == net.version and addr in net:
                return Refusal(reason, f"{addr} (in {net})")
        if addr.version == 6 and addr not in _GLOBAL_UNICAST_V6:
            return Refusal(RESERVED, f"{addr} is outside the global unicast range 2000::/3")
        return None

    def port_refusal(self, port: int) -> Refusal | None:
        """None if the crawler may connect to ``port``, else why not."""
        if self.allow_ports:
            if port in self.allow_ports:
                return None
            return Refusal(PORT_NOT_ALLOWED, f"port {port} is not in fetch.allow_ports")
        if port in BAD_PORTS:
            return Refusal(BAD_PORT, f"port {port} is a bad port of the Fetch standard")
        return None

    def host_refusal(self, host_key: str, scheme: str = "http") -> Refusal | None:
        """Judge a URL's host as the crawler writes it (``name``, ``1.2.3.4:8080``, ``[::1]:80``;
        lower case, canonical) before anything is sent: its port, an IP literal's address, a
        metadata name by name. A name's addresses are judged when it is resolved."""
        name, port = split_host_key(host_key, DEFAULT_PORTS.get(scheme, 80))
        refusal = self.port_refusal(port)
        if refusal is not None:
            return refusal
        address = parse_address(name)
        if address is not None:
            return self.address_refusal(address)
        if name.rstrip(".") in METADATA_NAMES:
            return Refusal(METADATA_NAME, f"{name} is a cloud instance-metadata name")
        return None


def split_host_key(host_key: str, default_port: int) -> tuple[str, int]:
    """("name" or "[v6]" or "v4", port) of a host key such as ``example.com:8080`` or ``[::1]``."""
    if host_key.startswith("["):
        end = host_key.find("]")
        name, rest = host_key[:end + 1], host_key[end + 1:]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = host_key.partition(":")
    return name, int(port) if port.isdigit() else default_port


def parse_networks(values: Iterable[str]) -> list[ipaddress._BaseNetwork]:
    """CIDR strings ("10.1.0.0/16", "fd00::/8", "127.0.0.2" = one address) as networks; a bad
    entry raises ValueError naming it."""
    if isinstance(values, str):
        raise ValueError(f"'fetch.allow_networks' must be a list of CIDR strings, not the string {values!r}")
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise ValueError(f"'fetch.allow_networks': {value!r} is not a network in CIDR notation "
                             f"(e.g. \"10.20.0.0/16\" or \"fd00::/8\")") from None
    return out


def parse_ports(values: Iterable[int]) -> list[int]:
    """Port numbers 1..65535; a bad entry raises ValueError naming it."""
    if isinstance(values, (str, int)):
        raise ValueError(f"'fetch.allow_ports' must be a list of port numbers, not {values!r}")
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
            raise ValueError(f"'fetch.allow_ports': {value!r} is not a port number (1-65535)")
        out.append(value)
    return out


def networks_of(addresses: Iterable[str]) -> list[str]:
    """The smallest list of CIDR strings that covers exactly ``addresses`` (for an allow-list
    naming a set of known servers, e.g. the bundled test web's hosts)."""
    nets = [ipaddress.ip_network(parse_address(a) or a) for a in addresses]
    v4 = ipaddress.collapse_addresses(n for n in nets if n.version == 4)
    v6 = ipaddress.collapse_addresses(n for n in nets if n.version == 6)
    return [str(n) for n in list(v4) + list(v6)]
