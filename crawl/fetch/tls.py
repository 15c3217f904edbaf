"""TLS for the fetcher: the client context, and why a handshake failed.

Verification is on by default, against the system's trust store; ``fetch.tls_ca_file`` adds a PEM
file of CAs to trust (an intranet's CA, or the bundled test web's local CA). ``fetch.tls_verify =
false`` accepts any certificate: the choice of an archiving crawl that wants what a browser user
clicking through the warning would see (Heritrix's default). The failure is then not recorded
as such, and what was fetched is archived as usual; docs/real-web.md says when to choose it.

A failed handshake is recorded on the URL and the host with one of these reasons (the failure's
``kind``), from what OpenSSL and aiohttp say:

  expired            the certificate is outside its validity (X509_V_ERR_CERT_HAS_EXPIRED, or not yet valid)
  name_mismatch      it does not name the host (X509_V_ERR_HOSTNAME_MISMATCH)
  untrusted_issuer   its chain does not end in a trusted CA (self-signed, unknown issuer)
  certificate        any other verification failure (revoked, bad signature, purpose, ...)
  handshake_timeout  the TCP connection was made and the handshake did not end within
                     fetch.connect_timeout_s
  protocol_error     the peer does not speak TLS we accept (plain HTTP on the port, an old
                     protocol version, no shared cipher, a reset during the handshake)
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from typing import Any, Mapping

from crawl.config import Config
from crawl.fetch.http import causes

EXPIRED, NAME_MISMATCH, UNTRUSTED, CERTIFICATE = "expired", "name_mismatch", "untrusted_issuer", "certificate"
HANDSHAKE_TIMEOUT, PROTOCOL_ERROR = "handshake_timeout", "protocol_error"

# OpenSSL's X509_V_ERR_* codes (x509_vfy.h)
_VERIFY_KINDS = {9: EXPIRED, 10: EXPIRED, 13: EXPIRED, 14: EXPIRED, 62: NAME_MISMATCH, 64: NAME_MISMATCH,
                 18: UNTRUSTED, 19: UNTRUSTED, 2: UNTRUSTED, 20: UNTRUSTED, 21: UNTRUSTED}


class TlsConfigError(ValueError):
    """fetch.tls_ca_file names no readable PEM file of certificates."""


def client_context(cfg: Mapping[str, Any]) -> ssl.SSLContext:
    """The context every HTTPS connection of a fetch task uses."""
    cfg = Config.of(cfg)
    ctx = ssl.create_default_context()
    if not cfg.fetch.tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ca_file = str(cfg.fetch.tls_ca_file or "")
    if ca_file:
        if not os.path.isfile(ca_file):
            raise TlsConfigError(f"fetch.tls_ca_file: no such file: {ca_file}")
        try:
            ctx.load_verify_locations(cafile=ca_file)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise TlsConfigError(f"fetch.tls_ca_file: {ca_file} holds no PEM certificate ({exc})") from None
    return ctx


def tls_failure(exc: BaseException | None, https: bool, tcp_connected: bool) -> tuple[str, str] | None:
    """(kind, detail) when ``exc`` (raised by a request) is a failed TLS handshake, else None.
    ``tcp_connected``: a TCP connection to the host was made during the request (a timeout then is
    the handshake's, not the connection's)."""
    if not https:
        return None
    timed_out = False
    for cause in causes(exc):
        # aiohttp's ClientConnectorCertificateError is itself an ssl.CertificateError, without the
        # verify code: the one OpenSSL raised is its certificate_error
        cert_error = getattr(cause, "certificate_error", None)
        err = cert_error if isinstance(cert_error, ssl.SSLCertVerificationError) else cause
        if isinstance(err, ssl.SSLCertVerificationError):
            detail = str(getattr(err, "verify_message", "") or err)
            return _VERIFY_KINDS.get(getattr(err, "verify_code", None), CERTIFICATE), detail[:200]
        if isinstance(cause, ssl.SSLError) and not isinstance(getattr(cause, "os_error", None), ssl.SSLError):
            return PROTOCOL_ERROR, str(getattr(cause, "reason", None) or cause)[:200]
        if isinstance(cause, (asyncio.TimeoutError, TimeoutError)):
            timed_out = True
        if isinstance(cause, ConnectionResetError) and tcp_connected:
            return PROTOCOL_ERROR, "connection reset during the TLS handshake"
    if timed_out and tcp_connected:
        return HANDSHAKE_TIMEOUT, "connected, and the TLS handshake did not end in time"
    return None


class ConnectTracker:
    """When each address's last TCP connection was made (``time.monotonic()``), so that a timeout
    after that point is known to be the TLS handshake's. The connector's socket factory passes every
    socket through ``wrap``: the wrapped socket notes its peer once asyncio's non-blocking connect
    reports success (``connect`` returning, or ``getsockopt(SO_ERROR)`` reading 0)."""

    def __init__(self) -> None:
        self.connected_at: dict[tuple[str, int], float] = {}

    def wrap(self, sock: socket.socket) -> socket.socket:
        tracker = self

        class _Tracked(socket.socket):
            _target: Any = None

            def connect(self, address: Any) -> None:
                self._target = address
                super().connect(address)
                tracker._note(address)

            def getsockopt(self, *args: Any) -> Any:
                value = super().getsockopt(*args)
                if args[:2] == (socket.SOL_SOCKET, socket.SO_ERROR) and value == 0 and self._target is not None:
                    tracker._note(self._target)
                return value

        return _Tracked(sock.family, sock.type, sock.proto, fileno=sock.detach())

    def _note(self, address: Any) -> None:
        self.connected_at[(str(address[0]), int(address[1]))] = time.monotonic()

    def reached_since(self, addresses: tuple[str, ...] | list[str], port: int, since: float) -> bool:
        """A TCP connection to one of ``addresses`` on ``port`` was made at or after ``since``."""
        return any(self.connected_at.get((a, port), float("-inf")) >= since for a in addresses)
