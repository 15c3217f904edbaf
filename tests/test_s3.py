"""crawl/s3.py: S3 URIs, settings from conf and the standard AWS configuration, error messages."""
import pickle
import socket

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from crawl.config import ConfigError
from crawl.s3 import (S3Settings, is_s3_uri, make_client, object_store_error, s3_settings, s3_uri,
                      split_s3_uri)
from tests.conftest import make_config

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "secret-env"}


def test_uris():
    for scheme in ("s3", "s3a", "s3n", "S3A"):
        assert is_s3_uri(f"{scheme}://bucket/a/b")
    for other in ("/data/crawl", "file:///data", "hdfs://nn/x", "s3:/nothing", "bucket/key"):
        assert not is_s3_uri(other)
    assert split_s3_uri("s3a://bucket/crawl/warc/") == ("bucket", "crawl/warc")
    assert split_s3_uri("s3n://bucket") == ("bucket", "")
    assert s3_uri("bucket", "crawl/warc/x.warc.gz") == "s3://bucket/crawl/warc/x.warc.gz"
    with pytest.raises(ValueError):
        split_s3_uri("/local/path")
    with pytest.raises(ValueError):
        split_s3_uri("s3a:///key")


def test_settings_from_the_standard_variables_alone():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-west-3", **KEYS,
           "AWS_SESSION_TOKEN": "tok",
           # a profile that does not exist: resolving it would fail, so it must not be looked at
           "AWS_PROFILE": "no-such-profile-here"}
    s = s3_settings(make_config(), env)
    assert s == S3Settings("http://127.0.0.1:9000", "eu-west-3", True, "AKIDENV", "secret-env", "tok")
    assert "secret-env" not in repr(s) and "tok" not in repr(s)
    assert pickle.loads(pickle.dumps(s)) == s


def test_settings_precedence():
    env = {"AWS_ENDPOINT_URL": "http://generic:1", "AWS_ENDPOINT_URL_S3": "http://s3-only:2",
           "AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "eu-west-3", **KEYS}
    s = s3_settings(make_config(), env)
    assert (s.endpoint_url, s.region, s.path_style) == ("http://s3-only:2", "ap-south-1", True)
    # conf wins over the environment, each option on its own
    cfg = make_config(**{"s3.endpoint": "http://conf:3", "s3.region": "us-west-2", "s3.path_style": "false",
                         "s3.access_key_id": "AKIDCONF", "s3.secret_access_key": "secret-conf"})
    s = s3_settings(cfg, env)
    assert s == S3Settings("http://conf:3", "us-west-2", False, "AKIDCONF", "secret-conf", None)
    # AWS itself: no endpoint, virtual-hosted style, the fallback region
    s = s3_settings(make_config(), KEYS)
    assert (s.endpoint_url, s.region, s.path_style) == (None, "us-east-1", False)
    assert s3_settings(make_config(**{"s3.path_style": "TRUE"}), KEYS).path_style is True


def test_bad_s3_options_are_config_errors():
    for bad in ({"warc.s3_part_mb": 4}, {"s3.path_style": "sometimes"}, {"s3.access_key_id": "only-the-id"},
                {"s3.session_token": "token-alone"},
                {"warc.max_file_bytes": 10_000 * 5 * 2**20, "warc.s3_part_mb": 5}):
        with pytest.raises(ConfigError):
            make_config(**bad)


@pytest.fixture
def aws_files(tmp_path, monkeypatch):
    """Empty ~/.aws files of our own, no AWS variables, and every role provider pointed at a
    listening socket that records whether anyone connected."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED"):
        monkeypatch.delenv(var, raising=False)
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    credentials.write_text("")
    config.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{port}/")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{port}/creds")
    yield credentials, config, listener
    listener.close()


def _nobody_connected(listener) -> bool:
    try:
        listener.accept()[0].close()
        return False
    except BlockingIOError:
        return True


def test_profile_credentials_are_resolved_with_botocore(aws_files):
    credentials, _config, listener = aws_files
    credentials.write_text("[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = s-def\n"
                           "[crawler]\naws_access_key_id = AKIDPROF\naws_secret_access_key = s-prof\n"
                           "aws_session_token = t-prof\n")
    s = s3_settings(make_config(), {"AWS_PROFILE": "crawler"})
    assert (s.access_key_id, s.secret_access_key, s.session_token) == ("AKIDPROF", "s-prof", "t-prof")
    assert s3_settings(make_config(), {}).access_key_id == "AKIDDEF"
    with pytest.raises(ConfigError):
        s3_settings(make_config(), {"AWS_PROFILE": "missing"})
    assert _nobody_connected(listener)


def test_role_credentials_are_never_frozen_nor_asked_for(aws_files):
    """No variables, no profile: the settings carry no credentials (each process's boto3 asks
    its own instance or container role), and resolving them made no network call."""
    _credentials, _config, listener = aws_files
    s = s3_settings(make_config(), {})
    assert (s.access_key_id, s.secret_access_key, s.session_token) == (None, None, None)
    assert _nobody_connected(listener)


def test_client_addressing_style():
    path = make_client(S3Settings("http://127.0.0.1:9", "us-east-1", True, "a", "b"))
    assert path.meta.config.s3["addressing_style"] == "path"
    assert path.meta.endpoint_url == "http://127.0.0.1:9"
    virtual = make_client(S3Settings(None, "eu-west-3", False, "a", "b"))
    assert virtual.meta.config.s3["addressing_style"] == "auto"
    assert virtual.meta.region_name == "eu-west-3"


def test_errors_become_one_line_os_errors():
    def client_error(code, message="m"):
        return ClientError({"Error": {"Code": code, "Message": message}}, "GetObject")

    what = "reading s3://b/k"
    cases = [(client_error("NoSuchKey"), FileNotFoundError, "no such object"),
             (client_error("NoSuchBucket"), FileNotFoundError, "no such bucket"),
             (client_error("AccessDenied", "Access Denied"), PermissionError, "access denied"),
             (client_error("InvalidAccessKeyId"), PermissionError, "access denied"),
             (client_error("SlowDown"), OSError, "SlowDown"),
             (EndpointConnectionError(endpoint_url="http://127.0.0.1:9/b/k"), ConnectionError,
              "cannot reach the S3 endpoint http://127.0.0.1:9")]
    for exc, kind, text in cases:
        err = object_store_error(exc, what, "http://127.0.0.1:9")
        assert type(err) is kind and str(err).startswith(what) and text in str(err)
        assert "\n" not in str(err)
