"""crawl/fetch/warc.py's stores: WARC files in a local directory or uploaded to S3 (a moto server on
loopback), read back one record at a time, and the sweep of what dead task attempts leave."""
import os
import pickle
import subprocess
import sys

import pytest

from crawl.s3 import S3Settings, make_client
from crawl.fetch.warc import WarcWriter
from crawl.fetch.warc_store import LocalWarcStore, S3WarcStore, remove_files, segment_of_file, sweep_unfinished, unindexed_files, warc_location_uri, warc_store
from crawl.fetch.warc_read import read_record_at
from tests.conftest import make_config
from tests.s3server import (ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, TEST_PART_BYTES, aws_environ, moto_server,
                            new_bucket)

SEG = "20261201000000-abcdef"
OTHER_SEG = "20261201000000-012345"
REQ = [("User-Agent", "deltacrawl-test/0.1")]
T0 = 1_700_000_000.0


def _settings(endpoint):
    return S3Settings(endpoint, REGION, True, ACCESS_KEY_ID, SECRET_ACCESS_KEY)


def _store(endpoint, bucket, max_attempts=3):
    """Parts of TEST_PART_BYTES (the moto server's minimum, see tests/s3server.py) instead of 5 MiB."""
    settings = _settings(endpoint)
    return S3WarcStore(f"s3a://{bucket}/crawl/warc", settings, TEST_PART_BYTES,
                       client=make_client(settings, max_attempts=max_attempts), _min_part_bytes=TEST_PART_BYTES)


def _objects(store):
    listing = store.client.list_objects_v2(Bucket=store.bucket, Prefix=store.prefix + "/")
    return sorted(o["Key"].rsplit("/", 1)[1] for o in listing.get("Contents", []))


def _uploads(store):
    listing = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=store.prefix + "/")
    return sorted(u["Key"].rsplit("/", 1)[1] for u in listing.get("Uploads", []))


def _body(i, size=12_000):
    """Incompressible, so that the file grows by about ``size`` per exchange."""
    return i.to_bytes(4, "big") + os.urandom(size)


def _exchange(writer, i, body):
    return writer.write_exchange(f"http://example.com/{i}", REQ, 200, "OK", [("Content-Type", "text/html")],
                                 body, T0 + i)


def test_s3_writer_uploads_parts_and_shows_only_complete_files(moto_s3, tmp_path):
    store = _store(moto_s3, new_bucket(moto_s3))
    prefix = f"DELTACRAWL-{SEG}-00000-0"
    bodies, locations = {}, []
    with WarcWriter(store, prefix, 4 * TEST_PART_BYTES, {"operator": "tests"}) as w:
        for i in range(60):
            bodies[i] = _body(i)
            locations.append(_exchange(w, i, bodies[i]))
            # a part goes as soon as it fills: never more than one part (+ a record) held
            assert w._sink.tell() - w._sink._sent < TEST_PART_BYTES
            # only finished files are visible, the one being written is an upload in progress
            assert _objects(store) == sorted(w.files)
        assert _uploads(store) == [locations[-1].warc_file]
    files = w.files
    assert len(files) >= 2 and _objects(store) == sorted(files) and _uploads(store) == []
    for name in files[:-1]:  # full files: 256 KiB in parts of 64 KiB + at most one record
        etag = store.client.head_object(Bucket=store.bucket, Key=store.key(name))["ETag"]
        assert int(etag.strip('"').split("-")[1]) >= 4  # "<md5 of the parts' md5s>-<parts>"

    # every record by a ranged GET (with the index's length, and without) is what was written
    reader = make_client(store.settings)
    for i, loc in enumerate(locations):
        uri = store.uri(loc.warc_file)
        assert uri == f"s3://{store.bucket}/crawl/warc/{loc.warc_file}"
        rec = read_record_at(uri.replace("s3://", "s3a://"), loc.offset, loc.length, client=reader)
        assert (rec["warc_type"], rec["target_uri"], rec["payload"]) == ("response", f"http://example.com/{i}", bodies[i])
        if i % 20 == 0:
            assert read_record_at(uri, loc.offset, settings=store.settings)["payload"] == bodies[i]
    with pytest.raises(ValueError, match="no WARC record"):
        read_record_at(store.uri(files[0]), locations[0].offset + 1, 100, client=reader)
    with pytest.raises(ValueError, match="no WARC record"):
        read_record_at(store.uri(files[0]), 10**9, client=reader)

    # a downloaded file passes warcio check
    path = tmp_path / files[0]
    reader.download_file(store.bucket, store.key(files[0]), str(path))
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)], capture_output=True, text=True)
    assert check.returncode == 0 and "digest failed" not in check.stdout, check.stdout + check.stderr


def test_a_small_file_is_put_whole_and_only_at_close(moto_s3):
    store = _store(moto_s3, new_bucket(moto_s3))
    w = WarcWriter(store, f"DELTACRAWL-{SEG}-00001-0", 4 * TEST_PART_BYTES, {})
    loc = _exchange(w, 1, b"<html>small</html>")
    assert _objects(store) == [] and _uploads(store) == []
    assert w.close() == [loc.warc_file]
    assert _objects(store) == [loc.warc_file]
    etag = store.client.head_object(Bucket=store.bucket, Key=store.key(loc.warc_file))["ETag"]
    assert "-" not in etag  # one PutObject, not a multipart upload
    assert read_record_at(store.uri(loc.warc_file), loc.offset, loc.length, client=store.client)["payload"] == \
        b"<html>small</html>"


def test_a_failed_task_leaves_no_object_and_no_upload(moto_s3):
    store = _store(moto_s3, new_bucket(moto_s3))
    for count in (1, 30):  # a file that never filled a part, and one in the middle of its upload
        with pytest.raises(RuntimeError):
            with WarcWriter(store, f"DELTACRAWL-{SEG}-{count:05d}-0", 100 * TEST_PART_BYTES, {}) as w:
                for i in range(count):
                    _exchange(w, i, _body(i))
                assert _uploads(store) == ([] if count == 1 else [w._name])
                raise RuntimeError("task died")
        assert _objects(store) == [] and _uploads(store) == []


def test_endpoint_down_mid_file_is_a_clear_error_and_nothing_is_visible(moto_s3):
    with moto_server() as endpoint:
        bucket = new_bucket(endpoint)
        store = _store(endpoint, bucket, max_attempts=1)
        w = WarcWriter(store, f"DELTACRAWL-{SEG}-00000-0", 100 * TEST_PART_BYTES, {})
        i = 0
        while w._sink is None or w._sink._sent == 0:  # until the first part is uploaded
            _exchange(w, i, _body(i))
            i += 1
    # the server is gone: the next part that fills cannot be sent
    with pytest.raises(ConnectionError) as failure:
        for j in range(i, i + 20):
            size = w._sink.tell()
            _exchange(w, j, _body(j))
    message = str(failure.value)
    assert message.startswith(f"WARC upload s3://{bucket}/crawl/warc/") and "cannot reach the S3 endpoint" in message
    assert "\n" not in message
    assert w._sink.tell() == size  # the record that failed is cut off again; the rest stays buffered
    with pytest.raises(ConnectionError):
        w.close()  # completing fails as well; aborting the upload too (best effort)

    # moto's servers share their state: look through the one that is still up
    alive = _store(moto_s3, bucket)
    assert _objects(alive) == [] and len(_uploads(alive)) == 1
    assert sweep_unfinished(alive, segment_id=OTHER_SEG) == 0
    assert sweep_unfinished(alive, segment_id=SEG) == 1
    assert _uploads(alive) == []


def test_sweep_of_s3_uploads_by_segment_and_by_age(moto_s3):
    store = _store(moto_s3, new_bucket(moto_s3))
    for n, seg in enumerate((SEG, OTHER_SEG, SEG)):  # three task attempts killed mid-upload
        w = WarcWriter(store, f"DELTACRAWL-{seg}-{n:05d}-0", 100 * TEST_PART_BYTES, {})
        while w._sink is None or w._sink._sent == 0:
            _exchange(w, n, _body(n))
    unrelated = store.client.create_multipart_upload(Bucket=store.bucket, Key="crawl/warc/notes.txt")
    assert len(_uploads(store)) == 4
    assert sweep_unfinished(store, segment_id=SEG) == 2
    assert len(_uploads(store)) == 2
    # moto reports the same Initiated time for every upload: the age test is done against that
    started = min(u.started_at for u in store.unfinished())
    assert sweep_unfinished(store, older_than_s=3600, now=started + 1800) == 0
    assert sweep_unfinished(store, older_than_s=3600, now=started + 7200) == 1
    assert _uploads(store) == ["notes.txt"]  # not a WARC file: not ours to remove
    store.client.abort_multipart_upload(Bucket=store.bucket, Key="crawl/warc/notes.txt",
                                        UploadId=unrelated["UploadId"])
    with pytest.raises(ValueError):
        sweep_unfinished(store)


def test_sweep_of_local_open_files(tmp_path):
    names = [f"DELTACRAWL-{SEG}-00000-0-20261201000001-00000.warc.gz.open",
             f"DELTACRAWL-{SEG}-00000-1-20261201000002-00000.warc.gz",
             f"DELTACRAWL-{OTHER_SEG}-00000-0-20261201000001-00000.warc.gz.open",
             f"DELTACRAWL-{OTHER_SEG}-00001-0-20261201000001-00000.warc.gz.open",
             "notes.open"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    store = LocalWarcStore(str(tmp_path))
    assert sweep_unfinished(store, segment_id=SEG) == 1
    old = tmp_path / names[2]
    os.utime(old, (T0, T0))
    assert sweep_unfinished(store, older_than_s=3600, now=T0 + 1800) == 0
    assert sweep_unfinished(store, older_than_s=3600, now=T0 + 7200) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[1], names[3], names[4]])


def test_complete_files_no_result_names_are_found_and_removed_in_both_stores(moto_s3, tmp_path):
    """Issue 35: a complete file of an attempt or run that died is never indexed; it is found among
    its segment's files (only those: another segment's, an unfinished one and foreign files stay)."""
    for store in (LocalWarcStore(str(tmp_path)), _store(moto_s3, new_bucket(moto_s3))):
        names = {}
        for key, seg, attempt in (("dead", SEG, 0), ("kept", SEG, 1), ("other", OTHER_SEG, 0)):
            with WarcWriter(store, f"MY-CRAWL-{seg}-00003-{attempt}", 10**6, {}) as w:
                names[key] = _exchange(w, attempt, b"body").warc_file
        unfinished = WarcWriter(store, f"MY-CRAWL-{SEG}-00004-0", 10**6, {})
        _exchange(unfinished, 9, b"x" * TEST_PART_BYTES)  # an upload under way / an .open file
        store.open("notes.warc.gz").finish()
        assert segment_of_file(names["dead"]) == SEG and segment_of_file("notes.warc.gz") is None
        found = store.finished()
        assert sorted(found) == sorted([*names.values(), "notes.warc.gz"]) and all(t > 0 for t in found.values())
        assert sorted(store.finished(f"MY-CRAWL-{SEG}-")) == sorted([names["dead"], names["kept"]])
        unwanted = unindexed_files(store.finished(), {SEG: {names["kept"]}})
        assert unwanted == [names["dead"]]
        assert remove_files(store, unwanted) == 1
        assert sorted(store.finished()) == sorted([names["kept"], names["other"], "notes.warc.gz"])
        unfinished.abort()


def test_local_store_keeps_todays_behaviour(tmp_path):
    store = warc_store(f"file://{tmp_path}/warc", make_config())
    assert isinstance(store, LocalWarcStore) and store.directory == f"{tmp_path}/warc"
    with pytest.raises(RuntimeError):
        with WarcWriter(store, f"DELTACRAWL-{SEG}-00000-0", 10**6, {}) as w:
            loc = _exchange(w, 1, b"body")
            raise RuntimeError("task died")
    assert os.listdir(tmp_path / "warc") == [loc.warc_file + ".open"]
    with WarcWriter(store, f"DELTACRAWL-{SEG}-00000-1", 10**6, {}) as w:
        loc = _exchange(w, 2, b"body two")
    assert store.uri(loc.warc_file) == str(tmp_path / "warc" / loc.warc_file)
    assert read_record_at(store.uri(loc.warc_file), loc.offset, loc.length)["payload"] == b"body two"
    assert read_record_at(f"file://{store.uri(loc.warc_file)}", loc.offset)["payload"] == b"body two"
    with pytest.raises(FileNotFoundError):
        read_record_at(str(tmp_path / "warc" / "missing.warc.gz"), 0)


def test_store_from_config_pickles_without_its_client(moto_s3):
    bucket = new_bucket(moto_s3)
    store = warc_store(f"s3n://{bucket}/c/warc", make_config(**{"warc.s3_part_mb": 6}), aws_environ(moto_s3))
    assert isinstance(store, S3WarcStore) and store.part_bytes == 6 * 2**20
    assert (store.bucket, store.prefix, store.settings.endpoint_url) == (bucket, "c/warc", moto_s3)
    assert store.client is store.client  # made once per process
    copy = pickle.loads(pickle.dumps(store))  # as it travels to an executor in the task closure
    assert copy._client is None and copy.settings == store.settings
    with WarcWriter(copy, f"DELTACRAWL-{SEG}-00000-0", 10**6, {}) as w:
        loc = _exchange(w, 1, b"pickled")
    assert _objects(store) == [loc.warc_file]
    assert warc_location_uri(f"s3a://{bucket}/c/warc") == f"s3://{bucket}/c/warc"
    with pytest.raises(ValueError):
        S3WarcStore(f"s3a://{bucket}/x", store.settings, 4 * 2**20)  # below S3's 5 MiB minimum


def test_read_errors_are_one_line_os_errors(moto_s3):
    bucket = new_bucket(moto_s3)
    settings = _settings(moto_s3)
    with pytest.raises(FileNotFoundError, match="no such object"):
        read_record_at(f"s3a://{bucket}/warc/missing.warc.gz", 0, 10, settings=settings)
    with pytest.raises(FileNotFoundError, match="no such bucket"):
        read_record_at(f"s3a://{bucket}-missing/warc/x.warc.gz", 0, 10, settings=settings)
    with moto_server() as endpoint:
        pass  # a port nothing listens on any more
    down = make_client(_settings(endpoint), max_attempts=1)
    with pytest.raises(ConnectionError, match=f"cannot reach the S3 endpoint {endpoint}"):
        read_record_at(f"s3a://{bucket}/warc/x.warc.gz", 0, 10, client=down)


def test_warc_get_finds_the_file_of_a_moved_crawl_root(tmp_path):
    """warc_uri holds absolute local paths: after the crawl root moved, the index row's path is
    gone, and the file in this root's warc/ folder is read instead."""
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.warc_get import record_location
    old, new = tmp_path / "old-root", tmp_path / "new-root"
    (new / "warc").mkdir(parents=True)
    (new / "warc" / "seg-0.warc.gz").write_bytes(b"")
    capture = {"warc_uri": f"{old}/warc/seg-0.warc.gz", "warc_file": "seg-0.warc.gz"}
    assert record_location(CrawlRoot(str(new)), capture) == f"{new}/warc/seg-0.warc.gz"
    # where the file is at the indexed path, or nowhere here, the index is taken as it is
    assert record_location(CrawlRoot(str(old)), capture) == capture["warc_uri"]
    s3 = {"warc_uri": "s3://bucket/crawl/warc/seg-0.warc.gz", "warc_file": "seg-0.warc.gz"}
    assert record_location(CrawlRoot(str(new)), s3) == s3["warc_uri"]
    assert record_location(CrawlRoot(str(new)), {"warc_uri": None, "warc_file": "x.warc.gz"}) == f"{new}/warc/x.warc.gz"
