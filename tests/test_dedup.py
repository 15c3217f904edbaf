"""The pure rules of near-duplicate detection (crawl/dedup/rules.py): band rows, the pair tests, the
canonical rule. The Spark job is tested in test_dedup_job.py."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.dedup import rules as dedup

SIG = bytes(range(256)) * 2  # 64 values of 8 bytes


def _sig_with(replaced: int) -> bytes:
    """SIG with its first ``replaced`` 8-byte values changed."""
    out = bytearray(SIG)
    for i in range(replaced):
        out[i * 8:(i + 1) * 8] = b"\xff" * 8
    return bytes(out)


def test_band_rows_of_a_page():
    rows = dedup.band_rows(0x0004_0003_0002_0001, SIG)
    assert rows[:4] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert [b for b, _ in rows[4:]] == list(range(4, 12))
    assert all(-(1 << 63) <= v < (1 << 63) for _, v in rows)  # fits a Delta bigint
    assert dedup.band_rows(None, SIG) == []  # no text: never a candidate
    assert dedup.band_rows(5, None) == dedup.simhash_bands(5)
    with pytest.raises(ValueError):
        dedup.signature_bands(b"short")


def test_signature_bands_change_only_where_values_change():
    a, b = dedup.signature_bands(SIG), dedup.signature_bands(_sig_with(1))
    assert a[0] != b[0] and a[1:] == b[1:]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.sets(st.integers(0, 63), max_size=3))
def test_pigeonhole_within_three_bits_share_a_simhash_band(h, flips):
    other = h
    for bit in flips:
        other ^= 1 << bit
    assert dedup.hamming(h, other) == len(flips)
    assert set(dedup.simhash_bands(h)) & set(dedup.simhash_bands(other))


def test_jaccard_estimate():
    assert dedup.jaccard_estimate(SIG, SIG) == 1.0
    assert dedup.jaccard_estimate(SIG, _sig_with(16)) == 0.75
    assert dedup.jaccard_estimate(SIG, None) == 0.0 and dedup.jaccard_estimate(SIG, SIG[:8]) == 0.0


def test_near_duplicate_by_either_test():
    assert dedup.is_near_duplicate(0b111, None, 0, None, 3, 0.7)          # 3 bits
    assert not dedup.is_near_duplicate(0b1111, SIG, 0, _sig_with(20), 3, 0.7)  # 4 bits, J 0.69
    assert dedup.is_near_duplicate(0b1111, SIG, 0, _sig_with(19), 3, 0.7)      # J 0.70
    assert not dedup.is_near_duplicate(None, SIG, 0, SIG, 3, 0.7)              # no text


def test_confirm_by_band_kind():
    far = (1 << 40) - 1  # 40 bits from 0
    # a SimHash-band candidate: Hamming only, however similar the word sets
    assert dedup.confirm(0, 0b11, SIG, 0, SIG, 3, 0.7)
    assert not dedup.confirm(2, far, SIG, 0, SIG, 3, 0.7)
    # a MinHash-band candidate: Hamming or Jaccard
    assert dedup.confirm(4, far, SIG, 0, SIG, 3, 0.7)
    assert dedup.confirm(11, 0b11, SIG, 0, _sig_with(64), 3, 0.7)
    assert not dedup.confirm(7, far, SIG, 0, _sig_with(30), 3, 0.7)
    assert not dedup.confirm(0, None, SIG, 0, SIG, 3, 0.7)


def test_canonical_rule_first_fetched_then_score_then_shorter_url():
    assert dedup.best_of([(2.0, 9.0, "http://a/x"), (1.0, 0.1, "http://a/longer-url")]) == "http://a/longer-url"
    assert dedup.best_of([(1.0, 0.5, "http://a/x"), (1.0, 0.9, "http://a/longer")]) == "http://a/longer"
    assert dedup.best_of([(1.0, 0.5, "http://a/xy"), (1.0, 0.5, "http://a/z")]) == "http://a/z"
    assert dedup.best_of([(1.0, 0.5, "http://b/z"), (1.0, 0.5, "http://a/z")]) == "http://a/z"
    urls = [(random.Random(i).random(), 1.0, f"http://h/{i}") for i in range(20)]
    assert dedup.best_of(urls) == dedup.best_of(list(reversed(urls)))  # order does not matter
