"""The test web's certificates: a local CA made at start (trustme), and what goes wrong with TLS.

``LocalCA`` issues the certificate every named host of the test web serves (one certificate
naming them all) and writes the CA's PEM file, which a crawl trusts with ``fetch.tls_ca_file``.
``BAD_CERTIFICATES`` are the failures a crawler must record and never fetch through; each gets a
host of its own in the named test web (crawl/devweb/web.py):

  tls_expired        a certificate of the local CA whose validity ended yesterday
  tls_wrong_name     a valid certificate of the local CA for another name
  tls_untrusted      a certificate for the right name from a CA nobody trusts
  tls_handshake_hang accepts the TCP connection and never answers the handshake
  tls_plain_http     speaks plain HTTP on its https port (a protocol error for the client)
"""
from __future__ import annotations

import datetime
import ssl
from typing import Iterable

import trustme

BAD_CERTIFICATES = ("tls_expired", "tls_wrong_name", "tls_untrusted", "tls_handshake_hang", "tls_plain_http")


class LocalCA:
    def __init__(self) -> None:
        self.ca = trustme.CA(organization_name="deltacrawl test web")
        self._other_ca: trustme.CA | None = None

    def write_pem(self, path: str) -> str:
        """Write the CA certificate (what fetch.tls_ca_file names) to ``path``; return it."""
        self.ca.cert_pem.write_to_path(path)
        return path

    def server_context(self, names: Iterable[str]) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*names).configure_cert(ctx)
        return ctx

    def bad_context(self, kind: str, name: str) -> ssl.SSLContext | None:
        """The server context of the bad-certificate host ``kind`` named ``name``; None for the
        kinds that never complete a handshake (they are not served with TLS at all)."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        now = datetime.datetime.now(datetime.timezone.utc)
        if kind == "tls_expired":
            cert = self.ca.issue_cert(name, not_before=now - datetime.timedelta(days=30),
                                      not_after=now - datetime.timedelta(days=1))
        elif kind == "tls_wrong_name":
            cert = self.ca.issue_cert("somebody-else.invalid")
        elif kind == "tls_untrusted":
            if self._other_ca is None:
                self._other_ca = trustme.CA(organization_name="nobody trusts this CA")
            cert = self._other_ca.issue_cert(name)
        elif kind in ("tls_handshake_hang", "tls_plain_http"):
            return None
        else:
            raise ValueError(f"unknown bad certificate {kind!r}")
        cert.configure_cert(ctx)
        return ctx
