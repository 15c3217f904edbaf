"""S3-compatible object storage for the fetch tasks' WARC files: settings, URIs, a boto3 client.

Spark reaches the crawl root through hadoop-aws (``s3a://``); the fetch tasks write their WARC
files with boto3. Both must find the same endpoint and credentials, from the standard AWS
configuration or from the ``[s3]`` options. ``s3_settings`` resolves them ONCE, on the driver,
into a plain picklable value: executors on a cluster do not have the driver's environment.

Credentials from an instance or container role are never copied into the settings (they are
short-lived, and every machine has its own): they stay None, and each process's boto3 finds
its own through the usual chain.

boto3/botocore are imported only when a client is made or an error translated, so the fetch
tasks of a crawl on local disk never load them. Pure library code: no pyspark here.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from crawl import config
from crawl.config import Config, ConfigError

S3_SCHEMES = ("s3", "s3a", "s3n")
# Seconds to open a connection to the endpoint, and to wait for its answer to one request (an
# 8 MiB part on a slow link takes a while; S3 itself answers in well under a second).
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120
# Attempts per request, with botocore's "standard" retries (exponential backoff with jitter,
# for throttling, 5xx and connection errors).
MAX_ATTEMPTS = 5
# AWS's own fallback region; what every S3-compatible store accepts.
FALLBACK_REGION = "us-east-1"
# S3's limits on a multipart upload (every part but the last at least 5 MiB, at most 10,000 parts)
# live in crawl.config, which checks warc.s3_part_mb against them: crawl.s3 imports crawl.config,
# never the other way round.
S3_MIN_PART_BYTES, S3_MAX_PARTS = config.S3_MIN_PART_BYTES, config.S3_MAX_PARTS


@dataclass(frozen=True)
class S3Settings:
    """Where the object store is and who we are to it. None means "boto3's own default"."""
    endpoint_url: str | None
    region: str
    path_style: bool
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)


def is_s3_uri(uri: str) -> bool:
    """True for s3://, s3a:// and s3n:// URIs (the three spellings Hadoop and AWS use)."""
    scheme, sep, _ = str(uri).partition("://")
    return bool(sep) and scheme.lower() in S3_SCHEMES


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3a://bucket/some/key`` -> ("bucket", "some/key"); the key may be "" (the bucket itself)."""
    if not is_s3_uri(uri):
        raise ValueError(f"not an S3 URI: {uri!r}")
    bucket, _, key = uri.partition("://")[2].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in S3 URI: {uri!r}")
    return bucket, key.strip("/")


def s3_uri(bucket: str, key: str) -> str:
    """AWS's own notation for an object: ``s3://bucket/key``."""
    return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"


def s3_settings(cfg: Config, environ: Mapping[str, str] = os.environ) -> S3Settings:
    """Endpoint, region, addressing style and credentials from the ``s3.*`` options, each empty
    option falling back to the standard AWS configuration (see conf/defaults.toml)."""
    endpoint = (cfg.s3.endpoint or environ.get("AWS_ENDPOINT_URL_S3")
                or environ.get("AWS_ENDPOINT_URL") or None)
    region = cfg.s3.region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or FALLBACK_REGION
    style = cfg.s3.path_style  # auto, true or false (crawl.config checks)
    path_style = endpoint is not None if style == "auto" else style == "true"
    key_id, secret, token = _credentials(cfg, environ)
    return S3Settings(endpoint, region, path_style, key_id, secret, token)


def _credentials(cfg: Config, environ: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(key id, secret, token): from conf, else the AWS_* variables, else a profile; all None
    when only a role (or nothing) would provide them."""
    key_id, secret = cfg.s3.access_key_id, cfg.s3.secret_access_key
    if key_id and secret:  # both or neither (crawl.config checks)
        return key_id, secret, cfg.s3.session_token or None
    key_id, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        return key_id, secret, environ.get("AWS_SESSION_TOKEN") or None
    return _profile_credentials(environ)


def _profile_credentials(environ: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """Credentials of the AWS profile (AWS_PROFILE, else "default"; ~/.aws/credentials and
    ~/.aws/config, credential_process, SSO, role assumption) as botocore resolves them, frozen.
    The role providers (instance metadata, container, web identity) are taken out of the chain
    first: they are network calls, and what they give belongs to the machine that asks."""
    import botocore.session
    try:
        session = botocore.session.Session(profile=environ.get("AWS_PROFILE") or None)
        resolver = session.get_component("credential_provider")
        for name in ("env", "assume-role-with-web-identity", "container-role", "iam-role"):
            resolver.remove(name)  # a no-op for a provider this botocore does not have
        credentials = resolver.load_credentials()
    except Exception as exc:  # e.g. AWS_PROFILE names a profile that does not exist
        raise ConfigError(f"cannot read AWS profile credentials: {exc}") from None
    if credentials is None:
        return None, None, None
    frozen = credentials.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token or None


def make_client(settings: S3Settings, max_attempts: int = MAX_ATTEMPTS) -> Any:
    """A boto3 S3 client for ``settings``: bounded timeouts, standard retries, path-style
    addressing when asked. Clients are not picklable: make one per process (task)."""
    import boto3
    from botocore.config import Config
    config = Config(
        region_name=settings.region,
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"max_attempts": int(max_attempts), "mode": "standard"},
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        # checksums only where S3 requires them: several S3-compatible stores reject the
        # CRC trailers newer boto3 sends by default
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    # a session of our own: boto3's shared default session is not thread-safe
    return boto3.session.Session().client(
        "s3", endpoint_url=settings.endpoint_url, aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key, aws_session_token=settings.session_token,
        config=config)


_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "NoSuchUpload", "NotFound", "404"}
_DENIED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
           "InvalidToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem"}


def object_store_error(exc: BaseException, what: str, endpoint: str | None = None) -> OSError:
    """A botocore error as the OSError a file would have given, with a one-line message saying
    what was being done: FileNotFoundError (no such object or bucket), PermissionError (access
    denied, bad or missing credentials), ConnectionError (endpoint unreachable), else OSError."""
    from botocore import exceptions as bx
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or "")
        message = error.get("Message") or code
        if code in _NOT_FOUND:
            kind = "no such bucket" if code == "NoSuchBucket" else "no such object"
            return FileNotFoundError(f"{what}: {kind} ({message})")
        if code in _DENIED:
            return PermissionError(f"{what}: access denied ({code}: {message})")
        return OSError(f"{what}: {code}: {message}")
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return PermissionError(f"{what}: no AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                               f"a profile, or s3.access_key_id and s3.secret_access_key)")
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError,
                        bx.ConnectionClosedError)):
        return ConnectionError(f"{what}: cannot reach the S3 endpoint {endpoint or '(AWS default)'} "
                               f"({' '.join(str(exc).split())})")
    return OSError(f"{what}: {' '.join(str(exc).split())}")


@contextmanager
def s3_errors(what: str, endpoint: str | None = None) -> Iterator[None]:
    """Turn botocore's errors raised inside the block into ``object_store_error``'s OSErrors."""
    try:
        yield
    except Exception as exc:
        from botocore.exceptions import BotoCoreError, ClientError
        if isinstance(exc, (BotoCoreError, ClientError)):
            raise object_store_error(exc, what, endpoint) from exc
        raise
