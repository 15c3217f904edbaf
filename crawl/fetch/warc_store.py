"""Where WARC files go: a local directory or an S3 prefix (a "store"), and the clean-up of what dead
task attempts leave there.

A file appears under its final name only when it is complete: in a local directory it is written
as ``{name}.open`` and renamed; on S3 it is a multipart upload, sent a part at a time as it fills
and completed at the end. What dead task attempts leave (``.open`` files, in-progress uploads) is
removed by ``sweep_unfinished``; complete files that no committed result names
(``unindexed_files``: a task attempt or a fetch run that died after closing them) are removed by
the step that finds them (fetch, maintain). The writer is crawl.fetch.warc's, the reader
crawl.fetch.warc_read's.

Pure library code: no pyspark here.
"""
from __future__ import annotations

import glob
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Iterator, Mapping

from crawl.config import Config
from crawl.s3 import S3_MIN_PART_BYTES, S3Settings, is_s3_uri, make_client, s3_errors, s3_settings, s3_uri, split_s3_uri

OPEN_SUFFIX = ".open"
FILE_SUFFIX = ".warc.gz"


# A store is where a writer's files go: it opens a sink per file, names files by URI, and finds
# what dead task attempts left behind. A sink takes one file's bytes: write / tell / flush (at
# the end of every record) / cut (drop the bytes after an offset again, after a failed write) /
# finish (the file appears under its final name) / abort (it never does).
@dataclass(frozen=True)
class Leftover:
    """An unfinished file of a task attempt that may have died."""
    name: str           # the file's final name
    started_at: float   # epoch seconds: last write of the .open file, start of the upload
    handle: Any         # what the store needs to remove it


def _local_path(location: str) -> str:
    return location[len("file://"):] if location.startswith("file://") else location


class _LocalSink:
    """A file written as ``{path}.open``, fsynced and renamed to ``path`` when finished."""

    def __init__(self, path: str):
        self.path = path
        self._fh = open(path + OPEN_SUFFIX, "wb")
        self.write, self.tell, self.flush = self._fh.write, self._fh.tell, self._fh.flush

    def cut(self, offset: int) -> None:
        self._fh.seek(offset)
        self._fh.truncate(offset)

    def finish(self) -> None:
        try:
            self._fh.flush()
            try:
                os.fsync(self._fh.fileno())
            except OSError:
                pass
        finally:
            self._fh.close()
        os.replace(self.path + OPEN_SUFFIX, self.path)

    def abort(self) -> None:
        self._fh.close()  # the .open file stays, as a hard crash would leave it: sweep removes it


class LocalWarcStore:
    """WARC files in a local directory (a path or a file:// URI)."""

    def __init__(self, directory: str):
        self.directory = _local_path(directory)

    def uri(self, name: str) -> str:
        return os.path.abspath(os.path.join(self.directory, name))

    def open(self, name: str) -> _LocalSink:
        os.makedirs(self.directory, exist_ok=True)
        return _LocalSink(os.path.join(self.directory, name))

    def unfinished(self) -> Iterator[Leftover]:
        pattern = os.path.join(glob.escape(self.directory), "*" + FILE_SUFFIX + OPEN_SUFFIX)
        for path in glob.glob(pattern):
            try:
                mtime = os.stat(path).st_mtime
            except OSError:  # removed meanwhile
                continue
            yield Leftover(os.path.basename(path)[: -len(OPEN_SUFFIX)], mtime, path)

    def discard(self, leftover: Leftover) -> bool:
        try:
            os.remove(leftover.handle)
            return True
        except OSError:  # removed meanwhile, or not ours to remove: nothing indexes it either way
            return False

    def finished(self, name_prefix: str = "") -> dict[str, float]:
        """The complete files whose name starts with ``name_prefix``: name -> when last written
        (epoch seconds)."""
        found = {}
        for path in glob.glob(os.path.join(glob.escape(self.directory), glob.escape(name_prefix) + "*" + FILE_SUFFIX)):
            try:
                found[os.path.basename(path)] = os.stat(path).st_mtime
            except OSError:  # removed meanwhile
                continue
        return found

    def remove(self, name: str) -> bool:
        try:
            os.remove(os.path.join(self.directory, name))
            return True
        except FileNotFoundError:  # removed meanwhile
            return False


class _S3Sink:
    """An object uploaded as it is written. Bytes are buffered until at least one part's worth
    has been written, then sent as one part of a multipart upload: a part always ends at the end
    of a record (flush), so the unsent buffer is all a failed write can have touched. A file that
    never filled a part is sent with one PutObject when finished. Either way the object appears
    under its key only when the file is complete."""

    def __init__(self, store: "S3WarcStore", key: str):
        self._store, self._key = store, key
        self._client = store.client
        self._buf = bytearray()
        self._sent = 0                       # bytes already uploaded as parts
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    def _errors(self, action: str):
        return s3_errors(f"WARC upload {s3_uri(self._store.bucket, self._key)} ({action})",
                         self._store.settings.endpoint_url)

    def write(self, data: bytes) -> None:
        self._buf += data

    def tell(self) -> int:
        return self._sent + len(self._buf)

    def flush(self) -> None:
        if len(self._buf) >= self._store.part_bytes:
            self._send_part()

    def cut(self, offset: int) -> None:
        if offset < self._sent:  # cannot happen: parts end where records end
            raise ValueError(f"cannot cut at {offset}: {self._sent} bytes are already uploaded")
        del self._buf[offset - self._sent:]

    def _send_part(self) -> None:
        bucket, number = self._store.bucket, len(self._parts) + 1
        with self._errors(f"part {number}"):
            if self._upload_id is None:
                self._upload_id = self._client.create_multipart_upload(Bucket=bucket, Key=self._key)["UploadId"]
            # a failed part is sent again with the same number (S3 keeps the last one sent)
            etag = self._client.upload_part(Bucket=bucket, Key=self._key, UploadId=self._upload_id,
                                            PartNumber=number, Body=self._buf)["ETag"]
        self._parts.append({"ETag": etag, "PartNumber": number})
        self._sent += len(self._buf)
        self._buf = bytearray()

    def finish(self) -> None:
        bucket = self._store.bucket
        if self._upload_id is None:
            with self._errors("whole file"):
                self._client.put_object(Bucket=bucket, Key=self._key, Body=self._buf)
        else:
            if self._buf:
                self._send_part()
            with self._errors("completing"):
                self._client.complete_multipart_upload(Bucket=bucket, Key=self._key, UploadId=self._upload_id,
                                                       MultipartUpload={"Parts": self._parts})
            self._upload_id = None
        self._buf = bytearray()

    def abort(self) -> None:
        self._buf = bytearray()
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is not None:
            try:
                self._client.abort_multipart_upload(Bucket=self._store.bucket, Key=self._key, UploadId=upload_id)
            except Exception:  # best effort (endpoint down?): the sweep aborts it later
                pass


class S3WarcStore:
    """WARC files as objects under an S3 URI (s3://, s3a://, s3n://). Picklable: the boto3
    client is made on first use in each process, from ``settings``."""

    def __init__(self, location: str, settings: S3Settings, part_bytes: int, *, client: Any = None,
                 _min_part_bytes: int = S3_MIN_PART_BYTES):
        if int(part_bytes) < _min_part_bytes:
            raise ValueError(f"S3 part size must be at least {_min_part_bytes} bytes, got {part_bytes}")
        self.bucket, self.prefix = split_s3_uri(location)
        self.settings = settings
        self.part_bytes = int(part_bytes)
        self._client = client

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}  # boto3 clients do not pickle

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def uri(self, name: str) -> str:
        return s3_uri(self.bucket, self.key(name))

    def open(self, name: str) -> _S3Sink:
        return _S3Sink(self, self.key(name))

    def unfinished(self) -> Iterator[Leftover]:
        prefix = f"{self.prefix}/" if self.prefix else ""
        with s3_errors(f"listing uploads under {s3_uri(self.bucket, prefix)}", self.settings.endpoint_url):
            pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                for upload in page.get("Uploads", []):
                    name = upload["Key"][len(prefix):]
                    if "/" not in name and name.endswith(FILE_SUFFIX):
                        yield Leftover(name, upload["Initiated"].timestamp(), (upload["Key"], upload["UploadId"]))

    def discard(self, leftover: Leftover) -> bool:
        key, upload_id = leftover.handle
        try:
            with s3_errors(f"aborting the upload of {s3_uri(self.bucket, key)}", self.settings.endpoint_url):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            return True
        except FileNotFoundError:  # NoSuchUpload: completed or aborted meanwhile
            return False

    def finished(self, name_prefix: str = "") -> dict[str, float]:
        """The complete files (objects) whose name starts with ``name_prefix``: name -> when
        written (epoch seconds)."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        found = {}
        with s3_errors(f"listing {s3_uri(self.bucket, prefix + name_prefix)}", self.settings.endpoint_url):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix + name_prefix)
            for page in pages:
                for obj in page.get("Contents", []):
                    name = obj["Key"][len(prefix):]
                    if "/" not in name and name.endswith(FILE_SUFFIX):
                        found[name] = obj["LastModified"].timestamp()
        return found

    def remove(self, name: str) -> bool:
        with s3_errors(f"removing {self.uri(name)}", self.settings.endpoint_url):
            self.client.delete_object(Bucket=self.bucket, Key=self.key(name))  # no error if it is gone
        return True


WarcStore = LocalWarcStore | S3WarcStore


def warc_store(location: str, cfg: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> WarcStore:
    """The store for a WARC location: an S3 URI (endpoint and credentials from ``s3_settings``,
    parts of warc.s3_part_mb) or a local directory."""
    if is_s3_uri(location):
        return S3WarcStore(location, s3_settings(cfg, environ), Config.of(cfg).warc.s3_part_mb * 2**20)
    return LocalWarcStore(location)


def warc_location_uri(location: str) -> str:
    """How files under a WARC location are named in warc_index.warc_uri (``{this}/{name}``):
    ``s3://bucket/key`` (AWS's notation, whichever S3 scheme the crawl root uses) or an absolute
    path (any other URI as it is)."""
    if is_s3_uri(location):
        return s3_uri(*split_s3_uri(location))
    path = _local_path(location)
    return path.rstrip("/") if "://" in path else os.path.abspath(path)


def sweep_unfinished(store: WarcStore, segment_id: str | None = None, older_than_s: float | None = None,
                     now: float | None = None) -> int:
    """Remove what dead task attempts left in ``store`` (local ``.open`` files, in-progress
    multipart uploads): those of one segment (its fetch has succeeded, so whatever is still open
    belongs to an attempt that died), or those of any segment started more than ``older_than_s``
    ago (past generate.lease_s nothing can still be writing them). Returns how many it removed."""
    if (segment_id is None) == (older_than_s is None):
        raise ValueError("sweep_unfinished takes segment_id or older_than_s, not both")
    cutoff = (time.time() if now is None else now) - older_than_s if older_than_s is not None else None
    removed = 0
    for leftover in list(store.unfinished()):
        of_segment = f"-{segment_id}-" in leftover.name if segment_id is not None else leftover.started_at < cutoff
        if of_segment and store.discard(leftover):
            removed += 1
    return removed


# A complete file's name: {prefix}-{segment}-{task}-{attempt}-{YYYYMMDDHHMMSS}-{serial}.warc.gz (the
# writer's prefix is {warc.prefix}-{segment}-{task:05d}-{attempt}: jobs/fetch.py).
_FILE_NAME = re.compile(r"-(?P<segment>\d{14}-[0-9a-f]{6})-\d{5}-\d+-\d{14}-\d{5}" + re.escape(FILE_SUFFIX) + r"\Z")


def segment_of_file(name: str) -> str | None:
    """The segment a fetch task wrote the file ``name`` for, or None if fetch did not name it."""
    match = _FILE_NAME.search(name)
    return match.group("segment") if match else None


def unindexed_files(names: Iterable[str], wanted: Mapping[str, Collection[str]]) -> list[str]:
    """The complete files among ``names`` that belong to a segment of ``wanted`` and are not among
    its wanted files (those its committed results name). What a task attempt or a fetch run that
    died left complete, or a run whose results were replaced: nothing indexes such a file, and
    nothing ever will, so it goes (a reader of every file would see its URLs twice). Files of
    segments not in ``wanted`` (a fetch may still be writing them) and foreign files are left."""
    return sorted(name for name in names
                  if (segment := segment_of_file(name)) in wanted and name not in wanted[segment])


def remove_files(store: WarcStore, names: Iterable[str]) -> int:
    """Remove the complete files ``names`` from ``store``; returns how many it removed."""
    return sum(1 for name in names if store.remove(name))
