"""A Bloom filter of URL strings: the seen-URL filter ([discovery] bloom_fpr, bloom_max_mb).

Built on the Spark side from the crawldb's URLs (one filter per partition, OR-merged with
``union_update``), serialised with ``to_bytes`` and broadcast to the fetch tasks, which drop
outlinks that are ``in`` it before they cross a shuffle. A Bloom filter has no false negatives,
so a known URL is always dropped; a false positive drops a new URL, which only delays it until
another page links to it (the crawldb MERGE stays exact).

Hashing is stable across processes, machines and Python versions (never the salted hash()):
BLAKE2b of the URL's UTF-8 bytes with a 16-byte digest gives two 64-bit integers h1, h2
(little-endian; h2 forced odd), and the i-th of k bit positions is (h1 + i*h2) mod m. Deriving
k positions from two hashes keeps the asymptotic false-positive rate of k independent hashes
(Kirsch and Mitzenmacher, "Less Hashing, Same Performance: Building a Better Bloom Filter",
ESA 2006) at the cost of one digest per URL. Bit b lives in byte b // 8 at bit b % 8 (LSB first).

Serialised form (``to_bytes``): a 24-byte little-endian header, then the bit array:
  magic b"DCBF" | version u8 (1) | reserved u8 (0) | k u16 | m u64 | count u64
"""
from __future__ import annotations

import hashlib
import math
import struct
from typing import Iterable

_HEADER = struct.Struct("<4sBBHQQ")
_MAGIC = b"DCBF"
_VERSION = 1
_MASK64 = (1 << 64) - 1
_LN2 = math.log(2)
# More hash functions never pay: k is ~ -log2(fpr), so 64 already means a rate of 2^-64.
MAX_HASHES = 64
# union_update ORs the arrays through Python ints this many bytes at a time: big enough that
# the per-chunk overhead vanishes, small enough that a 256 MiB filter needs no 256 MiB temporaries.
_UNION_CHUNK = 1 << 20

_blake2b = hashlib.blake2b


def _hash_pair(url: str) -> tuple[int, int]:
    """(h1, h2) of a URL; the reference for the inlined copies in add/__contains__."""
    x = int.from_bytes(_blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).digest(), "little")
    return x & _MASK64, (x >> 64) | 1


class BloomFilter:
    """A set of URL strings with no false negatives and a tunable false-positive rate."""

    __slots__ = ("_m", "_k", "_bits", "_count")

    def __init__(self, num_bits: int, num_hashes: int):
        if isinstance(num_bits, bool) or not isinstance(num_bits, int) or num_bits < 1:
            raise ValueError(f"num_bits must be an integer >= 1, got {num_bits!r}")
        if isinstance(num_hashes, bool) or not isinstance(num_hashes, int) \
                or not 1 <= num_hashes <= MAX_HASHES:
            raise ValueError(f"num_hashes must be an integer in 1..{MAX_HASHES}, got {num_hashes!r}")
        self._m = num_bits
        self._k = num_hashes
        self._bits = bytearray((num_bits + 7) // 8)
        self._count = 0

    @classmethod
    def for_capacity(cls, n: int, fpr: float, max_bytes: int | None = None) -> "BloomFilter":
        """An empty filter sized for ``n`` URLs at false-positive rate ``fpr``.

        m = -n ln(fpr) / (ln 2)^2 bits, rounded up to whole bytes, and k = round(m/n ln 2), the
        optimum for that m. With ``max_bytes``, m is capped at max_bytes * 8 and k re-optimised
        for the capped m: the rate then rises above ``fpr`` (see expected_fpr). n = 0 gives a
        filter sized for one URL.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if not 0.0 < fpr < 1.0:
            raise ValueError(f"fpr must be in (0, 1), got {fpr!r}")
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                                      or max_bytes < 1):
            raise ValueError(f"max_bytes must be an integer >= 1, got {max_bytes!r}")
        n = max(n, 1)
        m = math.ceil(-n * math.log(fpr) / (_LN2 * _LN2))
        m = max(8, (m + 7) // 8 * 8)
        if max_bytes is not None:
            m = min(m, max_bytes * 8)
        k = min(MAX_HASHES, max(1, round(m / n * _LN2)))
        return cls(m, k)

    # -- sizes -------------------------------------------------------------------------------

    @property
    def num_bits(self) -> int:
        """m, the number of bits."""
        return self._m

    @property
    def num_hashes(self) -> int:
        """k, the number of bit positions per URL."""
        return self._k

    @property
    def nbytes(self) -> int:
        """Size of the bit array in bytes (to_bytes adds a 24-byte header)."""
        return len(self._bits)

    @property
    def count(self) -> int:
        """URLs added (every add counts, duplicates included; after union_update the sum of
        both counts, so an over-estimate when the filters shared URLs)."""
        return self._count

    def expected_fpr(self, n: int | None = None) -> float:
        """The false-positive rate expected with ``n`` URLs in the filter (default: count):
        (1 - e^(-k n / m))^k."""
        n = self._count if n is None else n
        if n <= 0:
            return 0.0
        return (-math.expm1(-self._k * n / self._m)) ** self._k

    # -- membership --------------------------------------------------------------------------
    # add_many and __contains__ inline _hash_pair and the probe loop with locals bound: they run
    # once per crawldb URL (build) and once per outlink (lookup).

    def add(self, url: str) -> None:
        self.add_many((url,))

    def add_many(self, urls: Iterable[str]) -> None:
        m = self._m
        k_range = range(self._k)
        bits = self._bits
        blake2b = _blake2b
        from_bytes = int.from_bytes
        added = 0
        for url in urls:
            x = from_bytes(blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).digest(), "little")
            h = (x & _MASK64) % m
            step = ((x >> 64) | 1) % m
            for _ in k_range:
                bits[h >> 3] |= 1 << (h & 7)
                h += step
                if h >= m:
                    h -= m
            added += 1
        self._count += added

    def __contains__(self, url: str) -> bool:
        x = int.from_bytes(_blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).digest(), "little")
        m = self._m
        bits = self._bits
        h = (x & _MASK64) % m
        step = ((x >> 64) | 1) % m
        for _ in range(self._k):
            if not bits[h >> 3] & (1 << (h & 7)):
                return False
            h += step
            if h >= m:
                h -= m
        return True

    # -- merging and serialisation -----------------------------------------------------------

    def union_update(self, other: "BloomFilter") -> "BloomFilter":
        """OR ``other`` into this filter (both must have the same m and k); returns self so a
        reduce can chain it: ``reduce(lambda a, b: a.union_update(b), filters)``."""
        if not isinstance(other, BloomFilter):
            raise TypeError(f"can only merge a BloomFilter, not {type(other).__name__}")
        if other._m != self._m or other._k != self._k:
            raise ValueError(f"cannot merge Bloom filters of different shapes: m={self._m}, k={self._k} "
                             f"vs m={other._m}, k={other._k}")
        mine = memoryview(self._bits)
        theirs = memoryview(other._bits)
        size = len(mine)
        for start in range(0, size, _UNION_CHUNK):
            end = min(start + _UNION_CHUNK, size)
            merged = int.from_bytes(mine[start:end], "little") | int.from_bytes(theirs[start:end], "little")
            mine[start:end] = merged.to_bytes(end - start, "little")
        self._count += other._count
        return self

    def to_bytes(self) -> bytes:
        """Header (m, k, count) and bit array; from_bytes reads it back."""
        return _HEADER.pack(_MAGIC, _VERSION, 0, self._k, self._m, self._count) + self._bits

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> "BloomFilter":
        """The filter ``to_bytes`` wrote; ValueError for anything else (wrong magic or version,
        bad m or k, truncated or trailing bytes, bits set beyond m)."""
        data = memoryview(data).cast("B")
        if len(data) < _HEADER.size:
            raise ValueError(f"not a Bloom filter: {len(data)} bytes is shorter than the header")
        magic, version, reserved, k, m, count = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError(f"not a Bloom filter: bad magic {bytes(magic)!r}")
        if version != _VERSION or reserved != 0:
            raise ValueError(f"unsupported Bloom filter version {version} (reserved byte {reserved})")
        if not 1 <= k <= MAX_HASHES or m < 1:
            raise ValueError(f"corrupt Bloom filter header: m={m}, k={k}")
        expected = _HEADER.size + (m + 7) // 8
        if len(data) != expected:
            raise ValueError(f"corrupt Bloom filter: {len(data)} bytes, expected {expected} for m={m}")
        if m % 8 and data[-1] >> (m % 8):
            raise ValueError("corrupt Bloom filter: bits set beyond m")
        bloom = cls.__new__(cls)  # skip __init__: it would allocate a second, zeroed array
        bloom._m = m
        bloom._k = k
        bloom._bits = bytearray(data[_HEADER.size:])
        bloom._count = count
        return bloom

    def __repr__(self) -> str:
        return (f"BloomFilter(num_bits={self._m}, num_hashes={self._k}, count={self._count}, "
                f"expected_fpr={self.expected_fpr():.3g})")
