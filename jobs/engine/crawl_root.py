"""Where things are in a crawl root (local path or any Hadoop-compatible URI): the tables'
folders, a segment's parts and its markers (small files a step writes to say what it finished),
segment ids, and the few file operations on them, through Hadoop so that local paths, s3a:// and
hdfs:// all work. CrawlRoot names every path a step reads or writes.
"""
from __future__ import annotations

import os
import re
import tempfile

from pyspark.sql import SparkSession

from jobs.engine.errors import UserError


# fullmatch, never match with "$": "$" also matches before a trailing newline, and an id with one
# would name a different folder
_SEGMENT_ID = re.compile(r"\d{14}-[0-9a-f]{6}")


def check_segment_id(segment_id: str) -> str:
    """Segment ids come from generate (time + random hex); anything else is a user error."""
    if not _SEGMENT_ID.fullmatch(segment_id or ""):
        raise UserError(f"invalid segment id {segment_id!r} (expected the id printed by generate, "
                        f"like 20261129120000-a1b2c3)")
    return segment_id


class CrawlRoot:
    """Paths inside a crawl root (local path or any Hadoop-compatible URI)."""

    def __init__(self, root: str):
        if "://" not in root:
            # Delta's table builder misreads relative paths ("./crawl-data") as attribute names
            root = os.path.abspath(root)
        self.root = root.rstrip("/")

    @property
    def crawldb(self) -> str:
        return f"{self.root}/crawldb"

    @property
    def hostdb(self) -> str:
        return f"{self.root}/hostdb"

    @property
    def warc_index(self) -> str:
        return f"{self.root}/warc_index"

    @property
    def warc_dir(self) -> str:
        return f"{self.root}/warc"

    def segment(self, segment_id: str) -> str:
        return f"{self.root}/segments/{check_segment_id(segment_id)}"

    def fetchlist(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/fetchlist"

    def fetched(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/fetched"

    def updated_marker(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/_updated"

    def leased_marker(self, segment_id: str) -> str:
        """Written by generate once its lease committed: the segment's URLs are its own."""
        return f"{self.segment(segment_id)}/_leased"

    def fetched_run_marker(self, segment_id: str) -> str:
        """Written by fetch once a run succeeded: that run's id (crawl/fetch/requestlog.py)."""
        return f"{self.segment(segment_id)}/_fetched_run"

    def request_log_dir(self, segment_id: str) -> str:
        """Where fetch tasks log their requests (crawl/fetch/requestlog.py): in the segment on a local
        crawl root; on an object store, which has no append, on each executor's local disk (so
        a retry on another machine does not see what the dead attempt sent)."""
        if self.is_local:
            return self.local_path(f"{self.segment(segment_id)}/requests")
        return os.path.join(tempfile.gettempdir(), "deltacrawl-requests", check_segment_id(segment_id))

    def owner_marker(self, segment_id: str) -> str:
        """Written by the crawl driver that generated or took over the segment, and rewritten while
        it has it in hand: who it is (crawl/crawldb/segment_owner.py, jobs/engine/segment_owners.py)."""
        return f"{self.segment(segment_id)}/_owner"

    def update_started_marker(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/_update_started"

    def dedup_result(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/dedup"

    def dedup_started_marker(self, segment_id: str) -> str:
        """Written by dedup before it writes anything (jobs/dedup.py)."""
        return f"{self.segment(segment_id)}/_dedup_started"

    def deduped_marker(self, segment_id: str) -> str:
        """Written by dedup once both its commits are in (removed when it starts): update refuses a
        segment whose dedup started and has no such marker (it died before or between its writes)."""
        return f"{self.segment(segment_id)}/_deduped"

    @property
    def cycles(self) -> str:
        return f"{self.root}/cycles"

    @property
    def dedup_pages(self) -> str:
        return f"{self.root}/dedup/pages"

    @property
    def dedup_bands(self) -> str:
        return f"{self.root}/dedup/bands"

    @property
    def is_local(self) -> bool:
        return "://" not in self.root or self.root.startswith("file://")

    def local_path(self, path: str) -> str:
        return path[len("file://"):] if path.startswith("file://") else path


def hadoop_path(spark: SparkSession, path: str):
    """(FileSystem, Path) through Hadoop, so local paths, s3a:// and hdfs:// all work."""
    hpath = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def path_exists(spark: SparkSession, path: str) -> bool:
    fs, hpath = hadoop_path(spark, path)
    return fs.exists(hpath)


def delete_path(spark: SparkSession, path: str) -> None:
    fs, hpath = hadoop_path(spark, path)
    fs.delete(hpath, True)


def write_marker(spark: SparkSession, path: str, text: str) -> None:
    fs, hpath = hadoop_path(spark, path)
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def read_marker(spark: SparkSession, path: str) -> str | None:
    """The text of a small marker file (write_marker), or None when there is none."""
    fs, hpath = hadoop_path(spark, path)
    if not fs.exists(hpath):
        return None
    stream = fs.open(hpath)
    try:
        reader = spark.sparkContext._jvm.java.io.BufferedReader(
            spark.sparkContext._jvm.java.io.InputStreamReader(stream, "UTF-8"))
        line = reader.readLine()
    finally:
        stream.close()
    return None if line is None else str(line).strip()


def modified_at(spark: SparkSession, path: str) -> float | None:
    """When the file at ``path`` was last written (epoch seconds), or None when there is none."""
    fs, hpath = hadoop_path(spark, path)
    if not fs.exists(hpath):
        return None
    return fs.getFileStatus(hpath).getModificationTime() / 1000.0


def segments_with(spark: SparkSession, root: CrawlRoot, name: str) -> set[str]:
    """The segments holding the file ``name`` (a marker): one listing, not one look-up per segment."""
    fs, hpath = hadoop_path(spark, f"{root.root}/segments/*/{name}")
    return {st.getPath().getParent().getName() for st in (fs.globStatus(hpath) or [])}


def list_segments(spark: SparkSession, root: CrawlRoot) -> list[str]:
    fs, hpath = hadoop_path(spark, f"{root.root}/segments")
    if not fs.exists(hpath):
        return []
    return sorted(st.getPath().getName() for st in fs.listStatus(hpath) if st.isDirectory())
