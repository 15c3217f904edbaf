"""An S3 endpoint for the tests: moto's server on loopback, in this process.

``with moto_server() as endpoint:`` starts one on 127.0.0.1 (on a port the kernel picks, so
two runs never race for one) and stops it when the block ends, however it ends: connections
to it are refused from then on. Every moto server of a process serves the same in-memory
state, so a bucket made through one is seen through another: tests use their own buckets.
"""
from __future__ import annotations

import logging
import os
import uuid
from contextlib import contextmanager
from typing import Iterator

# moto holds multipart uploads to S3's 5 MiB minimum part size. The tests lower it, so that
# a file of a few parts is kilobytes, not megabytes: writers in tests use parts of this size.
# moto reads the variable once, when it is first imported (only moto_server imports it).
TEST_PART_BYTES = 64 * 1024
os.environ.setdefault("S3_UPLOAD_PART_MIN_SIZE", str(TEST_PART_BYTES))

# moto accepts any credentials; these are what the tests sign with.
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing-secret"
REGION = "us-east-1"


@contextmanager
def moto_server() -> Iterator[str]:
    """Start a moto server on 127.0.0.1; yield its endpoint URL ("http://127.0.0.1:PORT")."""
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        # stop() ends the accept loop but leaves the socket listening, where connections would
        # hang instead of being refused
        listener = getattr(server, "_server", None)
        if listener is not None:
            listener.server_close()


def aws_environ(endpoint: str) -> dict[str, str]:
    """The standard AWS variables that point a process (boto3 and Spark's s3a) at ``endpoint``."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY, "AWS_REGION": REGION}


def new_bucket(endpoint: str, prefix: str = "test") -> str:
    """Create a bucket with a fresh name on the moto server at ``endpoint``; return its name."""
    import boto3
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=REGION,
                                            aws_access_key_id=ACCESS_KEY_ID,
                                            aws_secret_access_key=SECRET_ACCESS_KEY)
    client.create_bucket(Bucket=name)
    return name
