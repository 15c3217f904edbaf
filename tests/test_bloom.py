import hashlib
import math
import pathlib
import pickle
import random
import subprocess
import sys

import pytest

from crawl.net.bloom import MAX_HASHES, BloomFilter

REPO = pathlib.Path(__file__).resolve().parent.parent


def random_urls(rng: random.Random, n: int, prefix: str) -> list[str]:
    """n distinct URLs; different prefixes give disjoint sets."""
    words = ["news", "blog", "item", "page", "docs", "tag", "user", "a", "b", "2024"]
    return [f"https://host{rng.randrange(5000)}.example/{prefix}/{rng.choice(words)}/{i}"
            f"?id={rng.randrange(1 << 30)}" for i in range(n)]


def reference_positions(url: str, m: int, k: int) -> list[int]:
    """The documented scheme, written out independently of the module."""
    digest = hashlib.blake2b(url.encode("utf-8"), digest_size=16).digest()
    h1 = int.from_bytes(digest[:8], "little")
    h2 = int.from_bytes(digest[8:], "little") | 1
    return [(h1 + i * h2) % m for i in range(k)]


def test_bits_are_the_documented_double_hashing_positions():
    for m, k in [(1000, 7), (64, 3), (12345, 1), (8, 5), (1 << 20, 13)]:
        for url in ["https://example.com/", "http://a.b/c?d=e", "https://ü.example/ä"]:
            bloom = BloomFilter(m, k)
            bloom.add(url)
            bits = bloom.to_bytes()[24:]
            set_bits = {i for i in range(m) if bits[i >> 3] >> (i & 7) & 1}
            assert set_bits == set(reference_positions(url, m, k))


def test_hashing_is_stable_across_processes():
    # Python's hash() is salted per process; the filter must be the same everywhere it is built.
    code = ("from crawl.net.bloom import BloomFilter\n"
            "b = BloomFilter(4096, 5)\n"
            "b.add_many(['https://example.com/', 'https://example.org/x?y=1'])\n"
            "import sys; sys.stdout.write(b.to_bytes().hex())\n")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": seed}, cwd=REPO).stdout for seed in ("1", "2")}
    assert len(outputs) == 1
    local = BloomFilter(4096, 5)
    local.add_many(["https://example.com/", "https://example.org/x?y=1"])
    assert outputs == {local.to_bytes().hex()}


def test_hashing_is_pinned():
    # A change of the hashing scheme would make filters built by one version useless to
    # another; these positions were computed once from the documented scheme.
    bloom = BloomFilter(1000, 4)
    bloom.add("https://example.com/")
    bits = bloom.to_bytes()[24:]
    assert [i for i in range(1000) if bits[i >> 3] >> (i & 7) & 1] == [133, 138, 468, 803]


def test_no_false_negatives():
    urls = random_urls(random.Random(1), 30_000, "in")
    bloom = BloomFilter.for_capacity(10_000, 0.05)  # overfilled on purpose: still no false negatives
    bloom.add_many(urls[:15_000])
    for url in urls[15_000:]:
        bloom.add(url)
    assert all(url in bloom for url in urls)
    assert bloom.count == 30_000


def test_false_positive_rate_matches_the_configuration():
    n, fpr, probes = 20_000, 0.01, 100_000
    rng = random.Random(20240611)
    bloom = BloomFilter.for_capacity(n, fpr)
    bloom.add_many(random_urls(rng, n, "in"))
    false_positives = sum(url in bloom for url in random_urls(rng, probes, "out"))
    observed = false_positives / probes
    # binomial upper bound: fpr plus 4 standard deviations (~0.0113)
    assert observed <= fpr + 4 * math.sqrt(fpr * (1 - fpr) / probes), observed
    # and not suspiciously low either: a filter that answers "no" too often loses no test above
    # but would hide a broken add
    assert observed > 0.002, observed
    assert bloom.expected_fpr() == pytest.approx(fpr, rel=0.05)


def test_the_statistical_test_can_fail():
    # One hash and a tiny array: nearly every bit is set, so nearly every probe is a false hit.
    rng = random.Random(3)
    bloom = BloomFilter(64, 1)
    bloom.add_many(random_urls(rng, 1000, "in"))
    observed = sum(url in bloom for url in random_urls(rng, 10_000, "out")) / 10_000
    assert observed > 0.9
    assert bloom.expected_fpr() > 0.9


def test_for_capacity_is_optimal():
    bloom = BloomFilter.for_capacity(1_000_000, 0.01)
    assert bloom.num_bits % 8 == 0
    assert bloom.num_bits == pytest.approx(9_585_059, abs=8)   # -n ln p / (ln 2)^2
    assert bloom.num_hashes == 7
    assert bloom.nbytes == bloom.num_bits // 8
    assert bloom.expected_fpr(1_000_000) == pytest.approx(0.01, rel=0.02)


def test_for_capacity_of_zero_is_a_small_valid_filter():
    bloom = BloomFilter.for_capacity(0, 0.01)
    assert 1 <= bloom.nbytes <= 8
    assert "https://example.com/" not in bloom
    bloom.add("https://example.com/")
    assert "https://example.com/" in bloom
    assert BloomFilter.from_bytes(bloom.to_bytes()).to_bytes() == bloom.to_bytes()


def test_for_capacity_max_bytes_caps_the_size_and_raises_the_expected_rate():
    uncapped = BloomFilter.for_capacity(100_000, 0.01)
    capped = BloomFilter.for_capacity(100_000, 0.01, max_bytes=20_000)
    assert uncapped.nbytes > 20_000
    assert capped.nbytes == 20_000
    assert capped.num_hashes == round(capped.num_bits / 100_000 * math.log(2))  # re-optimised
    assert capped.expected_fpr(100_000) > 0.05 > uncapped.expected_fpr(100_000)
    # a cap above the optimal size changes nothing
    assert BloomFilter.for_capacity(100_000, 0.01, max_bytes=10**9).to_bytes() == uncapped.to_bytes()


@pytest.mark.parametrize("args", [(-1, 0.01), (10, 0.0), (10, 1.0), (10, 1.5), (10, 0.01, 0), (1.5, 0.01)])
def test_for_capacity_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        BloomFilter.for_capacity(*args)


@pytest.mark.parametrize("m, k", [(0, 3), (-8, 3), (64, 0), (64, MAX_HASHES + 1), (64.0, 3), (True, 3)])
def test_constructor_rejects_bad_shapes(m, k):
    with pytest.raises(ValueError):
        BloomFilter(m, k)


def test_expected_fpr():
    bloom = BloomFilter(1000, 3)
    assert bloom.expected_fpr() == 0.0
    assert bloom.expected_fpr(100) == pytest.approx((1 - math.exp(-3 * 100 / 1000)) ** 3)
    bloom.add_many(["a", "b"])
    assert bloom.expected_fpr() == bloom.expected_fpr(2)


def test_round_trip_through_bytes_and_pickle():
    urls = random_urls(random.Random(5), 2000, "in")
    bloom = BloomFilter.for_capacity(2000, 0.01)
    bloom.add_many(urls)
    data = bloom.to_bytes()
    assert len(data) == 24 + bloom.nbytes
    for copy in (BloomFilter.from_bytes(data), BloomFilter.from_bytes(bytearray(data)),
                 BloomFilter.from_bytes(memoryview(data)), pickle.loads(pickle.dumps(bloom))):
        assert (copy.num_bits, copy.num_hashes, copy.count) == (bloom.num_bits, bloom.num_hashes, 2000)
        assert copy.to_bytes() == data
        assert all(url in copy for url in urls)


def test_union_of_halves_equals_the_filter_of_all():
    urls = random_urls(random.Random(7), 10_000, "in")
    whole = BloomFilter.for_capacity(10_000, 0.01)
    whole.add_many(urls)
    first, second = BloomFilter.for_capacity(10_000, 0.01), BloomFilter.for_capacity(10_000, 0.01)
    first.add_many(urls[:4000])
    second.add_many(urls[4000:])
    assert first.union_update(second) is first
    assert first.to_bytes() == whole.to_bytes()
    assert first.count == 10_000


def test_union_of_many_chunks(monkeypatch):
    # the OR runs chunk by chunk; a filter spanning several chunks (and a ragged last one) merges
    import crawl.net.bloom
    monkeypatch.setattr(crawl.net.bloom, "_UNION_CHUNK", 7)
    a, b, both = BloomFilter(8 * 50, 4), BloomFilter(8 * 50, 4), BloomFilter(8 * 50, 4)
    a.add_many(["x", "y"])
    b.add_many(["z", "w"])
    both.add_many(["x", "y", "z", "w"])
    assert a.union_update(b).to_bytes() == both.to_bytes()


def test_union_requires_the_same_shape():
    with pytest.raises(ValueError, match="different shapes"):
        BloomFilter(64, 3).union_update(BloomFilter(128, 3))
    with pytest.raises(ValueError, match="different shapes"):
        BloomFilter(64, 3).union_update(BloomFilter(64, 4))
    with pytest.raises(TypeError):
        BloomFilter(64, 3).union_update(b"\x00" * 8)


def _corrupt(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def test_corrupt_bytes_raise_value_error():
    bloom = BloomFilter(100, 3)  # 13 bytes, the last one holds 4 bits
    bloom.add("https://example.com/")
    good = bloom.to_bytes()
    assert BloomFilter.from_bytes(good).to_bytes() == good
    bad = [
        b"",
        good[:10],                                      # truncated header
        good[:-1],                                      # truncated bits
        good + b"\x00",                                 # trailing garbage
        _corrupt(good, 0, b"XXXX"),                     # magic
        _corrupt(good, 4, b"\x02"),                     # version
        _corrupt(good, 5, b"\x01"),                     # reserved
        _corrupt(good, 6, b"\x00\x00"),                 # k = 0
        _corrupt(good, 6, (MAX_HASHES + 1).to_bytes(2, "little")),
        _corrupt(good, 8, (0).to_bytes(8, "little")),   # m = 0
        _corrupt(good, 8, (200).to_bytes(8, "little")),  # m disagrees with the length
        good[:-1] + b"\xf0",                            # bits beyond m = 100 set
        b"not a bloom filter at all, just some text",
    ]
    for data in bad:
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(data)
