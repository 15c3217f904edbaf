#!/usr/bin/env python
"""Dedup scale benchmark: jobs/dedup.py's candidate search and duplicate decision for batches of
new fingerprints against a dedup/pages + dedup/bands table of existing pages, and the hot-band
worst case with and without dedup.max_band_candidates.

Run:      .venv/bin/python bench/dedup_scale.py [--existing 5000000] [--new 500000,1000000,2000000]
          [--near-share 0.05] [--exact-share 0.02] [--hot-existing 200000] [--hot-new 40000]
          [--hot-share 0.05] [--no-hot] [--no-scale] [--breakdown] [--quick] [--seed 11] [--driver-memory 8g]
          [--shuffle-partitions 16] [--workdir DIR] [--keep] [--out-json FILE]
          [--extrapolate 500000,1000000,2000000]
          --quick = --existing 100000 --new 10000,20000,40000 --hot-existing 20000 --hot-new 10000
          (a few minutes on 2 cores).
Data:     synthetic fingerprints, no HTML: every value is a counter-based hash (splitmix64) of
          (--seed, stream, index), so any page can be regenerated from its index, in numpy, inside
          Spark Python workers (mapInArrow), with no driver-side staging. An existing page j has a
          random 64-bit text_hash and simhash and a signature of 64 random uint64 (512 bytes). A
          new page i is, by a draw of its own: an exact copy of a random existing page j
          (--exact-share: same text_hash, simhash and signature), a near copy of one (--near-share:
          new text_hash, 1-3 simhash bits flipped, 1-4 of the 64 signature values replaced, so
          Hamming <= 3 and estimated Jaccard >= 60/64), or a unique page. URLs are about 50
          characters ("https://www.site123.example.org/articles/4567.html"). Existing pages were
          first fetched before every new page, so the canonical page of a planted copy is its
          source j. The dedup/pages and dedup/bands Delta tables (created by
          jobs.engine.tables.ensure_dedup_tables, bands partitioned by band) are written by Spark; band
          rows are computed vectorised (numpy + hashlib.blake2b), checked equal to
          crawl.dedup.rules.band_rows on a sample of existing and new pages first.
Measures: for each --new size, on one SparkSession: the new pages (the 8 columns segment_pages
          returns) read from Parquet and cached, as jobs.dedup.run does ("load"); then
          jobs.dedup.duplicates(spark, pages, known, old_bands, cfg) with the duplicates written to
          Parquet ("dups", the step's whole work; it counts band collisions and hot values on
          the way, from its band value counts). Rows/s = new pages / dups seconds; growth =
          t(next size) / t(size) next to the size ratio (linear = the size ratio). Candidate
          pairs, next to the pairs random 16-bit SimHash band collisions alone would give
          (4 x new x (existing + new) / 65536). Hot-band case: a separate, smaller table in which
          --hot-share of existing and of new pages share one SimHash band-0 value, run once with
          dedup.max_band_candidates at its configured value and once with it at 10^9 (cap off).
          A warm-up (2,000 new against 20,000 existing, a table of its own) runs first, untimed,
          so the first timed size does not pay for JIT and Python worker start. With two or more
          sizes, dups seconds = fixed + per-pair cost x pairs is fitted and extrapolated to the
          --extrapolate sizes (a rough estimate, printed as such).
Checks:   vectorised band rows == crawl.dedup.rules.band_rows on the sample; every planted exact copy
          found as "exact" and every planted near copy as "near", each with dup_of = its source
          page; no unique page reported as a duplicate. A missed planted copy or a false positive
          fails the run (figures are still printed and written).
Exit:     0 done · 1 a check failed · 2 bad arguments.

All data lives in a temporary directory under /tmp (--workdir), deleted at the end unless --keep.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import finish, fmt, machine_facts, rate, release  # noqa: E402

SIMHASH_BAND_BITS = 16
HOT_VALUE = 0xBEEF                    # band-0 (lowest 16 bits) value shared by hot pages
EXISTING_FIRST_US = 1_767_225_600_000_000   # 2026-01-01 UTC: every existing page was fetched before ...
NEW_FIRST_S = 1_796_083_200.0               # ... 2026-12-01 UTC, when the new segment's pages are
KIND_UNIQUE, KIND_NEAR, KIND_EXACT, KIND_HOT_TEXT = 0, 1, 2, 3
KIND_NAMES = {KIND_UNIQUE: "unique", KIND_NEAR: "near", KIND_EXACT: "exact", KIND_HOT_TEXT: "hot_text"}

# streams of the counter-based generator (any distinct constants)
S_URLH, S_TEXT, S_SIM, S_SIG, S_SCORE, S_HOT, S_HOST, S_HOT_TEXT = 1, 2, 3, 4, 5, 6, 7, 8
N_OFFSET = 100  # new pages use streams N_OFFSET + s, and their own index space
S_KIND, S_SRC, S_FLIP, S_REPL = 20, 21, 22, 23

EXISTING_PAGES_DDL = ("url string, url_hash long, host_bucket int, text_hash long, simhash long, signature binary, "
                      "score double, first_fetched_at timestamp, segment_id string")
BANDS_DDL = "band int, value long, url_hash long, url string, simhash long"
NEW_PAGES_DDL = ("url string, url_hash long, host_bucket int, text_hash long, simhash long, signature binary, "
                 "score double, first double, _kind int, _src_url string")
PAGE_COLUMNS = ("url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score", "first")


# =========================================================================== synthetic fingerprints (pure)

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (a bijection with full avalanche)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def rand64(seed: int, stream: int, idx: np.ndarray) -> np.ndarray:
    """Random uint64 per index, a pure function of (seed, stream, index)."""
    key = _mix64(np.array([(seed * 1_000_003 + stream) & ((1 << 64) - 1)], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        return _mix64(np.asarray(idx, dtype=np.uint64) * _GAMMA + key)


def _unit(u: np.ndarray) -> np.ndarray:
    return (u >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _signed(u: np.ndarray) -> np.ndarray:
    return u.view(np.int64)


def _signatures(seed: int, stream: int, idx: np.ndarray) -> np.ndarray:
    """(n, 64) uint64 MinHash-like values."""
    flat = np.asarray(idx, dtype=np.uint64)[:, None] * np.uint64(64) + np.arange(64, dtype=np.uint64)[None, :]
    return rand64(seed, stream, flat)


def _hot(simhash_u: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    out = simhash_u.copy()
    out[chosen] = (out[chosen] & ~np.uint64(0xFFFF)) | np.uint64(HOT_VALUE)
    return out


def _hot_text(seed: int, text: np.ndarray, sim: np.ndarray, sig: np.ndarray, chosen: np.ndarray) -> None:
    """Give the ``chosen`` pages one shared text (a soft-404, a login wall): the same text_hash,
    simhash and signature, in place."""
    fixed = rand64(seed, S_HOT_TEXT, np.arange(66, dtype=np.uint64))
    text[chosen] = _signed(fixed[:1])[0]
    sim[chosen] = fixed[1]
    sig[chosen] = fixed[2:]


def existing_columns(idx: np.ndarray, seed: int, hot_share: float, hot_text: bool = False) -> dict[str, np.ndarray]:
    """Fingerprints of existing pages ``idx`` (uint64 simhash, (n, 64) uint64 signatures):
    ``hot_share`` of them with the hot band-0 value; with ``hot_text``, page 0 has the shared
    text (dedup/pages holds one canonical page per text)."""
    idx = np.asarray(idx, dtype=np.uint64)
    sim = rand64(seed, S_SIM, idx)
    if hot_share > 0:
        sim = _hot(sim, _unit(rand64(seed, S_HOT, idx)) < hot_share)
    text, sig = _signed(rand64(seed, S_TEXT, idx)).copy(), _signatures(seed, S_SIG, idx)
    if hot_text:
        _hot_text(seed, text, sim, sig, idx == 0)
    return {"idx": idx, "url_hash": _signed(rand64(seed, S_URLH, idx)), "text_hash": text,
            "simhash": sim, "signature": sig,
            "host_bucket": (rand64(seed, S_HOST, idx) % np.uint64(16)).astype(np.int32),
            "score": _unit(rand64(seed, S_SCORE, idx))}


def new_columns(idx: np.ndarray, seed: int, n_existing: int, existing_hot_share: float, near_share: float,
                exact_share: float, hot_share: float, hot_text_share: float = 0.0) -> dict[str, np.ndarray]:
    """Fingerprints of new pages ``idx``: exact copies, near copies (source = a random existing
    page) and unique pages (``hot_share`` of them with the hot band-0 value, ``hot_text_share``
    of them with the text of existing page 0)."""
    idx = np.asarray(idx, dtype=np.uint64)
    s = lambda stream: N_OFFSET + stream  # noqa: E731
    u_kind = _unit(rand64(seed, s(S_KIND), idx))
    kind = np.where(u_kind < exact_share, KIND_EXACT,
                    np.where(u_kind < exact_share + near_share, KIND_NEAR, KIND_UNIQUE)).astype(np.int32)
    src = (rand64(seed, s(S_SRC), idx) % np.uint64(n_existing)).astype(np.uint64)
    copied = kind != KIND_UNIQUE
    base = existing_columns(src[copied], seed, existing_hot_share, hot_text_share > 0)

    sim = rand64(seed, s(S_SIM), idx)
    if hot_share > 0:
        # hot pages are drawn among the unique ones: the cap is what is measured, not recall
        sim = _hot(sim, (kind == KIND_UNIQUE) & (_unit(rand64(seed, s(S_HOT), idx)) < hot_share))
    sig = _signatures(seed, s(S_SIG), idx)
    text = _signed(rand64(seed, s(S_TEXT), idx)).copy()

    sim_c, sig_c = base["simhash"].copy(), base["signature"].copy()
    near_c = kind[copied] == KIND_NEAR
    if near_c.any():
        cidx = idx[copied][near_c]
        # 1-3 flipped bits: OR of up to three random bit masks (a repeated position flips once)
        r = rand64(seed, s(S_FLIP), cidx)
        n_flips = (r % np.uint64(3)).astype(np.int64) + 1
        mask = np.zeros(len(cidx), dtype=np.uint64)
        for k in range(3):
            pos = (r >> np.uint64(8 + 6 * k)) & np.uint64(63)
            mask |= np.where(k < n_flips, np.uint64(1) << pos, np.uint64(0))
        sim_c[near_c] ^= mask
        # 1-4 of the 64 signature values replaced by fresh random values
        q = rand64(seed, s(S_REPL), cidx)
        n_repl = (q % np.uint64(4)).astype(np.int64) + 1
        fresh = _signatures(seed, s(S_REPL) + 50, cidx)
        rows = sig_c[near_c]
        for k in range(4):
            pos = ((q >> np.uint64(8 + 6 * k)) & np.uint64(63)).astype(np.int64)
            use = k < n_repl
            rows[use, pos[use]] = fresh[use, k]
        sig_c[near_c] = rows
    sim[copied], sig[copied] = sim_c, sig_c
    exact_c = kind == KIND_EXACT
    text[exact_c] = base["text_hash"][kind[copied] == KIND_EXACT]
    if hot_text_share > 0:
        chosen = (kind == KIND_UNIQUE) & (_unit(rand64(seed, s(S_HOT_TEXT), idx)) < hot_text_share)
        _hot_text(seed, text, sim, sig, chosen)
        kind[chosen] = KIND_HOT_TEXT
        copied = copied | chosen
        src[chosen] = 0
    return {"idx": idx, "url_hash": _signed(rand64(seed, s(S_URLH), idx)), "text_hash": text, "simhash": sim,
            "signature": sig, "host_bucket": (rand64(seed, s(S_HOST), idx) % np.uint64(16)).astype(np.int32),
            "score": _unit(rand64(seed, s(S_SCORE), idx)), "kind": kind,
            "src": np.where(copied, src, np.uint64(0)).astype(np.int64), "copied": copied}


def band_values(simhash_u: np.ndarray, signatures: np.ndarray) -> np.ndarray:
    """(n, 12) band values, column b = band b, as crawl.dedup.rules.band_rows computes them: 4 x 16-bit
    SimHash slices, then the signed big-endian 8-byte blake2b of each 64-byte signature slice."""
    n = len(simhash_u)
    out = np.empty((n, 12), dtype=np.int64)
    for b in range(4):
        out[:, b] = ((simhash_u >> np.uint64(SIMHASH_BAND_BITS * b)) & np.uint64(0xFFFF)).astype(np.int64)
    raw = np.ascontiguousarray(signatures, dtype="<u8").tobytes()
    view = memoryview(raw)
    blake = hashlib.blake2b
    digests = b"".join([blake(view[o:o + 64], digest_size=8).digest() for o in range(0, len(raw), 64)])
    out[:, 4:] = np.frombuffer(digests, dtype=">i8").astype(np.int64).reshape(n, 8)
    return out


def expected_random_pairs(n_new: int, n_old: int) -> float:
    """Candidate pairs that random 16-bit SimHash band collisions alone give: each of 4 bands of a
    new page meets (n_old + n_new - 1) / 65536 other pages."""
    return 4.0 * n_new * (n_old + n_new - 1) / 65536.0


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys against xs."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def extrapolate(runs: list[dict[str, Any]], n_existing: int, targets: list[int]) -> dict[str, Any]:
    """dups seconds = fixed + per_pair x candidate pairs, fitted on the measured runs; candidate
    pairs of a target size = expected_random_pairs scaled by the measured / expected ratio of the
    largest run. A rough estimate: it assumes the per-pair cost stays what it was."""
    fixed, per_pair = fit_line([r["pairs"] for r in runs], [r["dups_s"] for r in runs])
    ratio = runs[-1]["pairs"] / runs[-1]["random_band_pairs_expected"]
    out = {"fixed_s": fixed, "per_million_pairs_s": per_pair * 1e6, "pairs_ratio": ratio, "targets": []}
    if per_pair <= 0:  # times did not grow with the pairs: load noise swamped the signal
        return out
    for n in targets:
        pairs = ratio * expected_random_pairs(n, n_existing)
        out["targets"].append({"new": n, "pairs": pairs, "dups_s": fixed + per_pair * pairs})
    return out


def growth(sizes: list[int], seconds: list[float]) -> list[dict[str, float]]:
    """t(next) / t(previous) next to the size ratio (linear growth: the two are equal)."""
    return [{"from": sizes[k], "to": sizes[k + 1], "size_ratio": sizes[k + 1] / sizes[k],
             "time_ratio": seconds[k + 1] / seconds[k] if seconds[k] > 0 else float("nan")}
            for k in range(len(sizes) - 1)]


# =========================================================================== Arrow batches (run in Spark workers)

def _binary_array(signatures: np.ndarray):
    import pyarrow as pa
    n = len(signatures)
    data = pa.py_buffer(np.ascontiguousarray(signatures, dtype="<u8").tobytes())
    offsets = pa.py_buffer(np.arange(0, 512 * (n + 1), 512, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, data])


def _urls(idx: np.ndarray, prefix: str, path: str):
    import pyarrow as pa
    import pyarrow.compute as pc
    ids = pa.array(idx.astype(np.int64))
    sites = pa.array((idx % np.uint64(50_000)).astype(np.int64))
    return pc.binary_join_element_wise(prefix, pc.cast(sites, pa.string()), path, pc.cast(ids, pa.string()),
                                       ".html", "")


def _existing_url(idx: np.ndarray):
    return _urls(idx, "https://www.site", ".example.org/articles/")


def _new_url(idx: np.ndarray):
    return _urls(idx, "https://www.site", ".example.net/new/")


def existing_pages_batches(batches: Iterator[Any], seed: int, hot_share: float, hot_text: bool) -> Iterator[Any]:
    import pyarrow as pa
    for batch in batches:
        idx = batch.column(0).to_numpy().astype(np.uint64)
        c = existing_columns(idx, seed, hot_share, hot_text)
        first = pa.array(EXISTING_FIRST_US + idx.astype(np.int64) * 1000, pa.timestamp("us", tz="UTC"))
        yield pa.RecordBatch.from_arrays(
            [_existing_url(idx), pa.array(c["url_hash"]), pa.array(c["host_bucket"]), pa.array(c["text_hash"]),
             pa.array(_signed(c["simhash"])), _binary_array(c["signature"]), pa.array(c["score"]), first,
             pa.array(["bench-existing"] * len(idx), pa.string())],
            names=["url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score",
                   "first_fetched_at", "segment_id"])


def existing_bands_batches(batches: Iterator[Any], seed: int, hot_share: float, hot_text: bool) -> Iterator[Any]:
    import pyarrow as pa
    for batch in batches:
        idx = batch.column(0).to_numpy().astype(np.uint64)
        c = existing_columns(idx, seed, hot_share, hot_text)
        values = band_values(c["simhash"], c["signature"])
        n = len(idx)
        take = pa.array(np.tile(np.arange(n, dtype=np.int64), 12))
        yield pa.RecordBatch.from_arrays(
            [pa.array(np.repeat(np.arange(12, dtype=np.int32), n)), pa.array(values.T.reshape(-1)),
             pa.array(np.tile(c["url_hash"], 12)), _existing_url(idx).take(take),
             pa.array(np.tile(_signed(c["simhash"]), 12))],
            names=["band", "value", "url_hash", "url", "simhash"])


def new_pages_batches(batches: Iterator[Any], seed: int, n_existing: int, existing_hot_share: float,
                      near_share: float, exact_share: float, hot_share: float, hot_text_share: float
                      ) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    for batch in batches:
        idx = batch.column(0).to_numpy().astype(np.uint64)
        c = new_columns(idx, seed, n_existing, existing_hot_share, near_share, exact_share, hot_share, hot_text_share)
        src_url = pc.if_else(pa.array(c["copied"]), _existing_url(c["src"].astype(np.uint64)),
                             pa.scalar(None, pa.string()))
        yield pa.RecordBatch.from_arrays(
            [_new_url(idx), pa.array(c["url_hash"]), pa.array(c["host_bucket"]), pa.array(c["text_hash"]),
             pa.array(_signed(c["simhash"])), _binary_array(c["signature"]), pa.array(c["score"]),
             pa.array(NEW_FIRST_S + idx.astype(np.float64) * 1e-3), pa.array(c["kind"]), src_url],
            names=["url", "url_hash", "host_bucket", "text_hash", "simhash", "signature", "score", "first",
                   "_kind", "_src_url"])


# =========================================================================== the benchmark

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time jobs/dedup.py's candidate search and duplicate decision for "
                                            "batches of new fingerprints against a table of existing pages.")
    p.add_argument("--existing", type=int, default=5_000_000, help="existing pages in dedup/pages (default 5,000,000)")
    p.add_argument("--new", default="500000,1000000,2000000",
                   help="comma-separated new-batch sizes (default 500000,1000000,2000000)")
    p.add_argument("--near-share", type=float, default=0.05, help="share of new pages that are near copies (0.05)")
    p.add_argument("--exact-share", type=float, default=0.02, help="share of new pages that are exact copies (0.02)")
    p.add_argument("--hot-existing", type=int, default=200_000, help="existing pages of the hot-band table (200,000)")
    p.add_argument("--hot-new", type=int, default=40_000, help="new pages of the hot-band batch (40,000)")
    p.add_argument("--hot-share", type=float, default=0.05,
                   help="share of existing and of new pages with the hot band-0 value (0.05)")
    p.add_argument("--hot-cap-off", type=int, default=10 ** 9, help="max_band_candidates of the cap-off run (10^9)")
    p.add_argument("--no-hot", action="store_true", help="skip the hot-band case")
    p.add_argument("--extrapolate", default="500000,1000000,2000000",
                   help="new-batch sizes to extrapolate the dups time to, from the measured runs "
                        "(default 500000,1000000,2000000)")
    p.add_argument("--no-scale", action="store_true", help="skip the scale runs (hot-band case only)")
    p.add_argument("--quick", action="store_true",
                   help="development sizes: --existing 100000 --new 10000,20000,40000 --hot-existing 20000 "
                        "--hot-new 10000")
    p.add_argument("--breakdown", action="store_true",
                   help="after each scale run, time the near-duplicate path's stages apart (each via Parquet)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--driver-memory", default="8g", help="spark.driver_memory (default 8g)")
    p.add_argument("--shuffle-partitions", type=int, default=16, help="spark.shuffle_partitions (default 16)")
    p.add_argument("--sample", type=int, default=2000, help="pages per kind compared with crawl.dedup.rules.band_rows")
    p.add_argument("--workdir", help="directory for the tables (default: a new one under /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    args = p.parse_args(argv)
    if args.quick:
        args.existing, args.new, args.hot_existing, args.hot_new = 100_000, "10000,20000,40000", 20_000, 10_000
    try:
        args.sizes = [int(x) for x in args.new.split(",") if x.strip()]
        args.extrapolate = [int(x) for x in args.extrapolate.split(",") if x.strip()]
    except ValueError:
        p.error("--new and --extrapolate must be comma-separated integers")
    if not args.sizes or min(args.sizes) < 1 or args.existing < 1 or min(args.hot_existing, args.hot_new) < 1:
        p.error("sizes must be >= 1")
    if not (0 <= args.near_share and 0 <= args.exact_share and args.near_share + args.exact_share <= 1
            and 0 <= args.hot_share <= 1):
        p.error("shares must be in [0, 1] and near + exact <= 1")
    return args


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from crawl.config import build_config, with_values
    from crawl.dedup.rules import band_rows

    facts = machine_facts(("pyarrow", "numpy"))
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"check: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failures.append(what)

    # ---- the vectorised band rows against the library, before anything is built on them
    sample = np.arange(args.sample, dtype=np.uint64) * np.uint64(7919) % np.uint64(max(args.existing, 1))
    old = existing_columns(sample, args.seed, args.hot_share)
    new = new_columns(np.arange(args.sample * 10, dtype=np.uint64), args.seed, args.existing, args.hot_share,
                      max(args.near_share, 0.2), max(args.exact_share, 0.1), args.hot_share, 0.05)
    mismatched = 0
    for cols in (old, new):
        values = band_values(cols["simhash"], cols["signature"])
        sims = _signed(cols["simhash"])
        for k in range(len(sims)):
            lib = band_rows(int(sims[k]), np.ascontiguousarray(cols["signature"][k], dtype="<u8").tobytes())
            mismatched += lib != list(enumerate(int(v) for v in values[k]))
    check(mismatched == 0, f"vectorised band rows equal crawl.dedup.rules.band_rows on {len(sample) + len(new['idx']):,} "
                           f"sample pages ({mismatched} differ)")
    near = new["kind"] == KIND_NEAR
    if near.any():
        src = existing_columns(new["src"][near].astype(np.uint64), args.seed, args.hot_share, True)
        dist = [int(x).bit_count() for x in (new["simhash"][near] ^ src["simhash"])]
        equal = (new["signature"][near] == src["signature"]).sum(axis=1)
        check(1 <= min(dist) and max(dist) <= 3 and equal.min() >= 60,
              f"planted near copies: Hamming {min(dist)}-{max(dist)} bits, {equal.min()}-{equal.max()} of 64 "
              f"signature values equal")

    workdir = args.workdir or tempfile.mkdtemp(prefix="deltacrawl-dedup-scale-", dir="/tmp")
    os.makedirs(workdir, exist_ok=True)
    cfg = build_config(overrides={"spark.driver_memory": args.driver_memory,
                                  "spark.shuffle_partitions": args.shuffle_partitions})
    result: dict[str, Any] = {
        "benchmark": "dedup_scale", "machine": facts,
        "command": "python bench/dedup_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "params": {"existing": args.existing, "new": args.sizes, "near_share": args.near_share,
                   "exact_share": args.exact_share, "hot_existing": args.hot_existing, "hot_new": args.hot_new,
                   "hot_share": args.hot_share, "hot_cap_off": args.hot_cap_off, "seed": args.seed},
        "config": {k: cfg[k] for k in ("spark.master", "spark.driver_memory", "spark.shuffle_partitions",
                                       "dedup.max_band_candidates", "dedup.max_hamming", "dedup.min_jaccard")},
        "workdir": workdir, "scale": [], "hot": [],
    }
    print(f"bench: work directory {workdir}; load {_load()}", flush=True)
    spark = None
    try:
        from pyspark.sql import functions as F

        from jobs.dedup import duplicates
        from jobs.engine.session import build_spark
        from jobs.engine.crawl_root import CrawlRoot
        from jobs.engine.tables import ensure_dedup_tables

        t0 = time.perf_counter()
        spark = build_spark(cfg)
        result["spark_start_s"] = time.perf_counter() - t0

        def build_tables(name: str, n_existing: int, hot_share: float,
                         hot_text: bool = False) -> tuple[CrawlRoot, dict[str, Any]]:
            root = CrawlRoot(os.path.join(workdir, name))
            ensure_dedup_tables(spark, root)
            parts = max(2, -(-n_existing // 250_000))
            ids = spark.range(0, n_existing, numPartitions=parts)
            seed = args.seed
            t = time.perf_counter()
            (ids.mapInArrow(lambda it: existing_pages_batches(it, seed, hot_share, hot_text), EXISTING_PAGES_DDL)
             .write.format("delta").mode("append").save(root.dedup_pages))
            pages_s = time.perf_counter() - t
            t = time.perf_counter()
            (ids.mapInArrow(lambda it: existing_bands_batches(it, seed, hot_share, hot_text), BANDS_DDL)
             .write.format("delta").mode("append").save(root.dedup_bands))
            bands_s = time.perf_counter() - t
            info = {"table": name, "existing": n_existing, "hot_share": hot_share, "hot_text_page": hot_text,
                    "pages_write_s": pages_s, "bands_write_s": bands_s, "band_rows": 12 * n_existing,
                    "pages_bytes": _du(root.dedup_pages), "bands_bytes": _du(root.dedup_bands)}
            print(f"bench: built {name}: {n_existing:,} pages in {pages_s:.1f} s, {12 * n_existing:,} band rows in "
                  f"{bands_s:.1f} s ({info['pages_bytes'] / 2**20:,.0f} MiB + {info['bands_bytes'] / 2**20:,.0f} MiB); "
                  f"load {_load()}", flush=True)
            return root, info

        def new_batch(name: str, n_new: int, n_existing: int, existing_hot: float, near_share: float,
                      exact_share: float, hot_share: float, hot_text_share: float = 0.0) -> str:
            path = os.path.join(workdir, "new", name)
            seed = args.seed
            (spark.range(0, n_new, numPartitions=max(2, -(-n_new // 250_000)))
             .mapInArrow(lambda it: new_pages_batches(it, seed, n_existing, existing_hot, near_share, exact_share,
                                                      hot_share, hot_text_share), NEW_PAGES_DDL)
             .write.mode("overwrite").parquet(path))
            return path

        def run_dedup(label: str, root: CrawlRoot, new_path: str, n_existing: int, max_candidates: int | None = None,
                      evaluate: bool = True, breakdown: bool = False) -> dict[str, Any]:
            run_cfg = cfg if max_candidates is None else with_values(cfg, {"dedup.max_band_candidates": max_candidates})
            known = spark.read.format("delta").load(root.dedup_pages)
            old_bands = spark.read.format("delta").load(root.dedup_bands)
            out: dict[str, Any] = {"label": label, "existing": n_existing,
                                   "max_band_candidates": int(run_cfg["dedup.max_band_candidates"]),
                                   "load_at_start": _load()}
            t_all = time.perf_counter()
            t = time.perf_counter()
            pages = spark.read.parquet(new_path).select(*PAGE_COLUMNS).cache()
            out["new"] = pages.count()
            out["load_s"] = time.perf_counter() - t
            dups_path = os.path.join(workdir, "dups", label)
            try:
                t = time.perf_counter()
                dups, cand, cached = duplicates(spark, pages, known, old_bands, run_cfg)
                dups.write.mode("overwrite").parquet(dups_path)
                for df in cached:
                    df.unpersist()
                out["dups_s"] = time.perf_counter() - t
                out["pairs"], out["hot_values"] = cand.collisions, cand.hot_values
                out["total_s"] = time.perf_counter() - t_all
                out["load_at_end"] = _load()
                if breakdown:
                    out["breakdown"] = stage_times(spark, pages, known, old_bands, run_cfg,
                                                   os.path.join(workdir, "breakdown"))
                    print(f"bench: {label}: stage seconds {_rounded(out['breakdown'])}", flush=True)
            finally:
                pages.unpersist()
            out["rows_per_s"] = rate(out["new"], out["dups_s"])
            out["pairs_per_new_page"] = out["pairs"] / out["new"] if out["new"] else None
            out["random_band_pairs_expected"] = expected_random_pairs(out["new"], n_existing)
            if evaluate:
                out.update(_evaluate(spark, new_path, dups_path))
            print(f"bench: {label}: {out['new']:,} new vs {n_existing:,}: load {out['load_s']:.1f} s, dups "
                  f"{out['dups_s']:.1f} s ({fmt(out['rows_per_s'])} rows/s), {out['pairs']:,} band collisions "
                  f"({out['pairs_per_new_page']:.1f}/page; random collisions alone "
                  f"{out['random_band_pairs_expected']:,.0f}), {out['hot_values']} hot values; "
                  f"load {out['load_at_start']} -> {out['load_at_end']}", flush=True)
            shutil.rmtree(dups_path, ignore_errors=True)
            return out

        def check_quality(r: dict[str, Any]) -> None:
            q = r["quality"]
            for kind in ("exact", "near", "hot_text"):
                if kind not in q:
                    continue
                k = q[kind]
                check(k.get("correct", 0) == k.get("planted", 0),
                      f"{r['label']}: {k.get('correct', 0):,} of {k.get('planted', 0):,} planted {kind} copies found "
                      f"as {'near' if kind == 'near' else 'exact'} with dup_of = source")
            check(q.get("unique", {}).get("found", 0) == 0,
                  f"{r['label']}: {q.get('unique', {}).get('found', 0)} unique pages reported as duplicates")

        # warm-up on a small table of its own: JIT, Python workers, Delta classes; not timed
        root, _info = build_tables("warmup", 20_000, 0.0)
        warm_path = new_batch("warmup", 2_000, 20_000, 0.0, args.near_share, args.exact_share, 0.0)
        result["warmup"] = run_dedup("warm-up", root, warm_path, 20_000, evaluate=False)
        shutil.rmtree(root.root, ignore_errors=True)

        if not args.no_scale:
            root, info = build_tables("scale", args.existing, 0.0)
            result["tables"] = [info]
            for n_new in args.sizes:
                t = time.perf_counter()
                path = new_batch(f"n{n_new}", n_new, args.existing, 0.0, args.near_share, args.exact_share, 0.0)
                gen_s = time.perf_counter() - t
                r = run_dedup(f"new={n_new}", root, path, args.existing, breakdown=args.breakdown)
                r["generate_s"] = gen_s
                check_quality(r)
                result["scale"].append(r)
                shutil.rmtree(path, ignore_errors=True)
            sizes = [r["new"] for r in result["scale"]]
            result["growth_dups"] = growth(sizes, [r["dups_s"] for r in result["scale"]])
            result["growth_total"] = growth(sizes, [r["total_s"] for r in result["scale"]])
            if len(sizes) >= 2:
                result["extrapolated"] = extrapolate(result["scale"], args.existing, args.extrapolate)
            shutil.rmtree(os.path.join(workdir, "scale"), ignore_errors=True)

        if not args.no_hot:
            # one table: --hot-share of its pages share the band-0 value HOT_VALUE, and page 0 has the
            # text that --hot-share of the "hot text" batch repeats (a soft-404, a login wall)
            root, info = build_tables("hot", args.hot_existing, args.hot_share, hot_text=True)
            result.setdefault("tables", []).append(info)
            band_path = new_batch("hot-band", args.hot_new, args.hot_existing, args.hot_share, args.near_share,
                                  args.exact_share, args.hot_share)
            text_path = new_batch("hot-text", args.hot_new, args.hot_existing, args.hot_share, args.near_share,
                                  args.exact_share, 0.0, args.hot_share)
            batch = spark.read.parquet(band_path)
            hot_new = batch.filter(F.col("simhash").bitwiseAND(0xFFFF) == HOT_VALUE).count()
            hot_old = (spark.read.format("delta").load(root.dedup_pages)
                       .filter(F.col("simhash").bitwiseAND(0xFFFF) == HOT_VALUE).count())
            text_new = spark.read.parquet(text_path).filter(F.col("_kind") == KIND_HOT_TEXT).count()
            cap = int(cfg["dedup.max_band_candidates"])
            for label, path, max_cand in (("hot band, cap default", band_path, None),
                                          ("hot band, cap off", band_path, args.hot_cap_off),
                                          ("hot text, cap default", text_path, None)):
                r = run_dedup(label, root, path, args.hot_existing, max_cand)
                if "band" in label:
                    r.update(hot_new_pages=hot_new, hot_existing_pages=hot_old,
                             hot_pairs_expected=hot_new * (hot_old + hot_new - 1))
                else:
                    # the exact join pairs every hot page with every other page of that text
                    r.update(hot_new_pages=text_new, hot_existing_pages=1, exact_join_rows=text_new * text_new)
                check_quality(r)
                result["hot"].append(r)
            if hot_new + hot_old > 2 * cap:  # clearly above the cap, whatever the draw
                check(result["hot"][0]["hot_values"] >= 1, "the cap skips the hot band value")
            else:
                print(f"bench: {hot_new + hot_old:,} pages with the hot band value, not clearly above "
                      f"dedup.max_band_candidates = {cap}: the cap may not be reached", flush=True)
            check(result["hot"][1]["hot_values"] == 0, "with the cap off no value is skipped")
    finally:
        release(spark, workdir, args.keep)
    return finish(result, failures, args.out_json, print_report)


def stage_times(spark, pages, known, old_bands, cfg, scratch: str) -> dict[str, float]:
    """Seconds of the parts of jobs/dedup.py's near-duplicate path, apart: the new pages' band
    rows (Python, written to Parquet under ``scratch``); candidate_pairs' band value counts
    (with hot values, collisions and the shared MinHash values); the SimHash-band join with its
    Hamming test; the MinHash-band candidate pairs. The exact-match group-by, the signature test
    of MinHash candidates and the canonical ranking are not timed apart (they are the rest of
    "dups")."""
    from jobs.dedup import candidate_pairs, page_bands

    out: dict[str, float] = {}
    t = time.perf_counter()
    page_bands(spark, pages).write.mode("overwrite").parquet(f"{scratch}/bands")
    out["band_rows"] = time.perf_counter() - t
    new_bands = spark.read.parquet(f"{scratch}/bands")
    cached: list = []
    t = time.perf_counter()
    cand = candidate_pairs(new_bands, old_bands, int(cfg["dedup.max_band_candidates"]), int(cfg["dedup.max_hamming"]),
                           cached)
    out["band_value_counts"] = time.perf_counter() - t
    t = time.perf_counter()
    cand.simhash_near.write.mode("overwrite").parquet(f"{scratch}/simhash_near")
    out["simhash_join_and_test"] = time.perf_counter() - t
    t = time.perf_counter()
    cand.signature.write.mode("overwrite").parquet(f"{scratch}/pairs")
    out["signature_candidates"] = time.perf_counter() - t
    for df in cached:
        df.unpersist()
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in d.items()}


def _du(path: str) -> int:
    total = 0
    for base, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
    return total


def _evaluate(spark, new_path: str, dups_path: str) -> dict[str, Any]:
    """Per kind of new page: planted, found as a duplicate, found with the right match and dup_of."""
    from pyspark.sql import functions as F
    truth = spark.read.parquet(new_path).select("url_hash", "url", "_kind", "_src_url")
    dups = spark.read.parquet(dups_path).select("url_hash", "url", "dup_of", "match")
    rows = (truth.join(dups, ["url_hash", "url"], "left")
            .groupBy("_kind")
            .agg(F.count("*").alias("planted"),
                 F.count("dup_of").alias("found"),
                 F.sum(F.when((F.col("dup_of") == F.col("_src_url")) & (
                     ((F.col("_kind") == KIND_NEAR) & (F.col("match") == "near"))
                     | (F.col("_kind").isin(KIND_EXACT, KIND_HOT_TEXT) & (F.col("match") == "exact"))), 1)
                     .otherwise(0)).alias("correct"),
                 F.sum(F.when(F.col("match") == "exact", 1).otherwise(0)).alias("as_exact"),
                 F.sum(F.when(F.col("match") == "near", 1).otherwise(0)).alias("as_near"))
            .collect())
    quality = {KIND_NAMES[r["_kind"]]: {k: int(r[k] or 0) for k in ("planted", "found", "correct", "as_exact", "as_near")}
               for r in rows}
    found = sum(q["found"] for q in quality.values())
    return {"quality": quality, "dups_found": found,
            "near_recall": (quality.get("near", {}).get("correct", 0) / quality["near"]["planted"]
                            if quality.get("near", {}).get("planted") else None),
            "false_positives": quality.get("unique", {}).get("found", 0)}


def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print()
    print(f"== deltacrawl dedup scale benchmark: {r['params']['existing']:,} existing pages ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB RAM · python {m['python']} · "
          f"pyspark {m['pyspark']} · delta-spark {m['delta_spark']} · {m['java']} · commit {m['git_commit']}")
    print(f"load average (1/5/15 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')}")
    print(f"config {r['config']}; command: {r['command']}")
    for t in r.get("tables", []):
        print(f"table {t['table']}: {t['existing']:,} pages written in {fmt(t['pages_write_s'])} s "
              f"({t['pages_bytes'] / 2**20:,.0f} MiB), {t['band_rows']:,} band rows in {fmt(t['bands_write_s'])} s "
              f"({t['bands_bytes'] / 2**20:,.0f} MiB)")
    rows = [("run", "new", "load s", "dups s", "rows/s", "total s", "band collisions",
             "pairs/page", "random-collision pairs", "hot values", "exact found/planted", "near found/planted",
             "false pos.", "load avg")]
    for x in ([r["warmup"]] if "warmup" in r else []) + r.get("scale", []) + r.get("hot", []):
        q = x.get("quality", {})
        rows.append((x["label"], fmt(x["new"]), fmt(x["load_s"]), fmt(x["dups_s"]), fmt(x["rows_per_s"], 0),
                     fmt(x["total_s"]), fmt(x["pairs"]),
                     fmt(x["pairs_per_new_page"]), fmt(x["random_band_pairs_expected"], 0), fmt(x["hot_values"]),
                     f"{fmt(q.get('exact', {}).get('correct'))}/{fmt(q.get('exact', {}).get('planted'))}" if q else "-",
                     f"{fmt(q.get('near', {}).get('correct'))}/{fmt(q.get('near', {}).get('planted'))}" if q else "-",
                     fmt(x.get("false_positives")), f"{x['load_at_start'][0]}->{x['load_at_end'][0]}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for x in r.get("hot", []):
        extra = (f"expected hot-band pairs {fmt(x['hot_pairs_expected'])} without the cap" if "hot_pairs_expected" in x
                 else f"exact-join rows of the shared text {fmt(x.get('exact_join_rows'))} (uncapped)")
        q = x.get("quality", {}).get("hot_text")
        print(f"{x['label']}: {fmt(x.get('hot_new_pages'))} new + {fmt(x.get('hot_existing_pages'))} existing hot pages; "
              f"{extra}" + (f"; shared-text pages found as exact {fmt(q['correct'])}/{fmt(q['planted'])}" if q else ""))
    for x in r.get("scale", []):
        if "breakdown" in x:
            print(f"stages apart, {x['label']} (s): " + ", ".join(f"{k} {v:.1f}" for k, v in x["breakdown"].items()))
    if "extrapolated" in r:
        e = r["extrapolated"]
        print(f"fit: dups s = {e['fixed_s']:.1f} + {e['per_million_pairs_s']:.1f} per million candidate pairs; "
              + (f"extrapolated to {r['params']['existing']:,} existing (rough): " + ", ".join(
                  f"{t['new']:,} new -> {t['pairs'] / 1e6:,.0f} M pairs, {t['dups_s'] / 60:,.0f} min"
                  for t in e["targets"]) if e["targets"] else "not extrapolated (time did not grow with pairs: noise)"))
    for key, what in (("growth_dups", "dups"), ("growth_total", "total")):
        for g in r.get(key, []):
            print(f"growth ({what}) {g['from']:,} -> {g['to']:,}: time x{g['time_ratio']:.2f} for size "
                  f"x{g['size_ratio']:.2f} (linear = x{g['size_ratio']:.2f})")
    print(f"checks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


if __name__ == "__main__":
    sys.exit(main())
