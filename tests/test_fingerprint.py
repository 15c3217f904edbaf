"""crawl.dedup.fingerprint: visible text, normalisation, exact hash, SimHash, bands, MinHash.

No Spark. Fixed values pin the hashing down: if one of them changes, every fingerprint stored
in a crawldb changes too, so that must be a deliberate decision (and a re-fingerprinting).
"""
from __future__ import annotations

import random
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.dedup import fingerprint as fp
from crawl.dedup.fingerprint import (EMPTY_SIMHASH, EMPTY_TEXT_HASH, bands, fingerprint, hamming, minhash,
                               normalise_text, page_text, simhash, text_hash)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
FOX = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away!"


def page(body: str, *, head: str = "", stamp: str = "2024-03-05T10:32:11Z", classes: str = "a") -> str:
    return (f"<!DOCTYPE html><html><head><title>T</title>{head}<style>p {{ color: red }}</style></head>"
            f'<body class="{classes}"><nav><a href="/">Home</a><a href="/about">About us</a></nav>'
            f'<p>Updated <time datetime="{stamp}">{stamp}</time></p>{body}'
            f"<script>var session = '{stamp}';</script></body></html>")


# ------------------------------------------------------------------------------ fixed values

def test_known_values_do_not_change():
    assert normalise_text(FOX) == "the quick brown fox jumps over the lazy dog the dog sleeps the fox runs away"
    assert text_hash(FOX) == 442923341304601235
    assert EMPTY_TEXT_HASH == -1970711489451281740 == text_hash("")
    assert simhash(FOX) == 3542809268100305817
    assert simhash(FOX, weighting="tf") == 2389747025735618968
    assert simhash(FOX, shingles=(3,), weighting="tf") == -1854579313676322843
    assert minhash(FOX, 8).hashvalues.tolist() == [356506169, 303009943, 532334889, 269026834,
                                                   132166273, 496323131, 244402453, 382561529]
    assert fingerprint(FOX)[:3] == (442923341304601235, 3542809268100305817, 16)
    # the word-set signature that dedup stores (first 4 of its 64 values)
    assert np.frombuffer(fingerprint(FOX).signature, dtype=np.uint64)[:4].tolist() == \
        [65327236, 472589701, 332188678, 622474991]


def test_text_hash_is_blake2b_of_the_normalised_utf8_signed_big_endian():
    import hashlib
    digest = hashlib.blake2b(normalise_text(FOX).encode("utf-8"), digest_size=8).digest()
    assert text_hash(FOX) == int.from_bytes(digest, "big", signed=True)


# ------------------------------------------------------------------------------ page_text

def test_page_text_drops_invisible_elements_and_collapses_whitespace():
    html = ("<html><head><title>Title stays out</title><style>.x{}</style>"
            "<script>var inHead = 1;</script></head><body>"
            "<h1>Hello</h1>\n\n   <p>brave&nbsp;&amp;\tnew</p><script>alert('no')</script>"
            "<noscript>Enable JavaScript</noscript><template><p>inert</p></template>"
            "<svg><text>label</text><g><text>more</text></g></svg>"
            "<style>p { color: red }</style><div>world<!-- comment --></div></body></html>")
    assert page_text(html) == "Hello brave & new world"


def test_page_text_keeps_block_elements_apart():
    assert page_text("<ul><li>Home</li><li>About</li></ul><p>one</p><p>two</p>") == "Home About one two"


def test_page_text_accepts_bytes():
    assert page_text("<p>caf\u00e9</p>".encode("utf-8")) == "caf\u00e9"


@pytest.mark.parametrize("garbage", [
    None, 42, b"", "", b"\x00\xff\xfe\x80" * 1000, "\x00" * 100, "<" * 10_000, "<div>" * 5000,
    "<html><body><p>unclosed <b><i><u>", "\ud800 lone surrogate <p>x</p>", "<?xml?><!---->",
    bytes(range(256)) * 40, "<script>never closed" + "x" * 1000, "<svg><svg><svg>",
])
def test_page_text_never_raises(garbage):
    out = page_text(garbage)
    assert isinstance(out, str)
    fingerprint(out)  # and whatever it gives can be fingerprinted


def test_page_text_never_raises_on_random_bytes():
    rng = random.Random(5)
    for _ in range(200):
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 600)))
        assert isinstance(page_text(blob), str)
        assert isinstance(page_text(blob.decode("latin-1")), str)


# ------------------------------------------------------------------------------ normalisation

def test_normalisation_rules():
    assert normalise_text("Posted 2024-03-05 10:32 \u2014 1,024 views!") == "posted 0 views"
    assert normalise_text("Stra\u00dfe \ufb01ne \uff21\uff22\uff23 \uff11\uff12") == "strasse fine abc 0"
    assert normalise_text("snake_case mp3 4 5 a1b2") == "snake case mp0 0 a0b0"
    assert normalise_text("  \t\n ") == ""
    assert normalise_text("...!!! \U0001F600 \u00a9 $$$") == ""
    assert normalise_text("\u0928\u092e\u0938\u094d\u0924\u0947 world") == "\u0928\u092e\u0938\u094d\u0924\u0947 world"
    assert normalise_text(None) == ""  # type: ignore[arg-type]


def _reference_normalise(text: str) -> str:
    """The documented rules, written plainly (slow): what the numpy version must equal."""
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    out: list[str] = []
    prev_digit = False
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Nd":
            if not (out and out[-1] == "0" and prev_digit):
                out.append("0")
            prev_digit = True
            continue
        prev_digit = False
        out.append(ch if cat[0] in "LMN" else " ")
    words = "".join(out).split(" ")
    merged: list[str] = []
    for w in words:
        if not w:
            continue
        if w == "0" and merged and merged[-1] == "0":
            continue
        merged.append(w)
    return " ".join(merged)


def test_vectorised_normaliser_matches_the_plain_rules():
    rng = random.Random(11)
    alphabet = ("abcXYZ \t\n.,;:-_!?'\"()0123456789\u00a0\u2003\u00e9\u00df\ufb01\uff21\uff11\u0660\u0661"
                "\u0928\u094d\u0947\u4e2d\u6587\u00a9\u20ac\U0001F600\U00020000\u0301\u00bd\u2460\u216b")
    for _ in range(500):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        assert normalise_text(s) == _reference_normalise(s), repr(s)


# ------------------------------------------------------------------------------ exact duplicates

def test_exact_duplicate_ignores_markup_whitespace_and_timestamps():
    body = "<p>The council met on Tuesday.</p><p>It approved the budget, 1,024 to 3.</p>"
    a = page(body)
    b = page(body.replace("<p>", '<p class="para">\n   ').replace("Tuesday", "<em>Tuesday</em>"),
             stamp="2025-11-30T23:59:01Z", classes="b c", head="<meta name='x'>")
    c = page(body.replace("1,024", "987"))  # a counter crossing a thousand
    assert page_text(a) != page_text(b)
    assert text_hash(page_text(a)) == text_hash(page_text(b)) == text_hash(page_text(c))
    assert simhash(page_text(a)) == simhash(page_text(b))
    d = page(body.replace("budget", "plan"))
    assert text_hash(page_text(a)) != text_hash(page_text(d))


# ------------------------------------------------------------------------------ SimHash

def _language(rng: random.Random):
    letters = "bcdfghklmnprstvz"
    vocab = sorted({"".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(rng.randint(1, 4)))
                    for _ in range(6000)})
    rng.shuffle(vocab)
    common, weights = vocab[:2000], [1 / (r + 1.5) ** 1.1 for r in range(2000)]

    def doc(n: int = 800) -> list[str]:  # 80 % shared Zipf words, 20 % the page's own topic
        topic = rng.sample(vocab[2000:], 300)
        return [rng.choices(common, weights)[0] if rng.random() < 0.8 else rng.choice(topic) for _ in range(n)]
    return vocab, doc


def test_near_copies_are_close_and_unrelated_pages_far():
    rng = random.Random(20261130)
    vocab, doc = _language(rng)
    docs = [doc() for _ in range(20)]

    def edited(words: list[str]) -> list[str]:  # 1 % of the words substituted
        words = list(words)
        for _ in range(len(words) // 100):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        return words

    near = [hamming(simhash(" ".join(d)), simhash(" ".join(edited(d)))) for d in docs]
    unrelated = [hamming(simhash(" ".join(a)), simhash(" ".join(b))) for i, a in enumerate(docs) for b in docs[i + 1:]]
    assert sorted(near)[len(near) // 2] <= 3 and max(near) <= 6
    assert min(unrelated) >= 10 and sum(unrelated) / len(unrelated) >= 16


M64 = (1 << 64) - 1


def _reference_simhash(text: str) -> int:
    """The documented SimHash of word 1-grams with 1 + ln tf weights, in plain Python ints."""
    import collections
    import math

    def fmix64(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & M64
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & M64
        return h ^ (h >> 33)

    def word_hash(word: str) -> int:
        return fmix64(sum(ord(c) * pow(0x100000001B3, i + 1, 1 << 64) for i, c in enumerate(word)) & M64)

    counts = collections.Counter(word_hash(w) for w in normalise_text(text).split())
    if not counts:
        return 0
    weights = {f: round((1 + math.log(c)) * 2**20) for f, c in counts.items()}
    total = sum(weights.values())
    value = 0
    for j in range(64):
        if 2 * sum(w for f, w in weights.items() if f >> j & 1) > total:
            value |= 1 << j
    return value - (1 << 64) if value >> 63 else value


def test_simhash_is_charikars_rounding_of_the_documented_features():
    rng = random.Random(8)
    assert fp.SIMHASH_SHINGLES == (1,) and fp.SIMHASH_WEIGHTING == "log"  # what the reference computes
    for n_words in (1, 2, 7, 300):
        text = " ".join(rng.choice(["Zebra", "apple", "\u00e9t\u00e9", "x" * 300, "b", "Apple,"]) for _ in range(n_words))
        assert simhash(text) == _reference_simhash(text)
    # > 8,192 distinct words: several chunks of the bit matrix
    big = " ".join(_letters(rng.randrange(20000)) for _ in range(30000))
    assert simhash(big) == _reference_simhash(big)


def test_simhash_ignores_word_order_only_for_unigrams():
    assert simhash("a b c d e f") == simhash("f e d c b a")
    assert simhash("a b c d e f", shingles=(2,)) != simhash("f e d c b a", shingles=(2,))


def test_empty_and_symbol_only_text_has_the_documented_fingerprint():
    for text in ("", "   ", "!!! ... \u00a9 \U0001F600", None):
        f = fingerprint(text)  # type: ignore[arg-type]
        assert f == (EMPTY_TEXT_HASH, EMPTY_SIMHASH, 0, None) and EMPTY_SIMHASH == 0
        assert simhash(text) == 0  # type: ignore[arg-type]
    assert bands(0) == [(0, 0), (1, 0), (2, 0), (3, 0)]  # the hot band the dedup job must skip
    # a text shorter than the shingle still gets a (non-empty) fingerprint
    assert simhash("hello", shingles=(3,)) != 0 and fingerprint("hello").words == 1


def test_fingerprint_agrees_with_the_single_functions():
    rng = random.Random(3)
    for _ in range(50):
        text = " ".join(rng.choice(["alpha", "beta", "42", "gamma,", "Delta!", "\u00e9t\u00e9"])
                        for _ in range(rng.randrange(0, 40)))
        f = fingerprint(text)
        assert f.text_hash == text_hash(text)
        assert f.simhash == simhash(text)
        assert f.words == len(normalise_text(text).split())


def test_huge_text_is_fingerprinted_on_its_head_only():
    head = "word " * (fp.SIMHASH_MAX_CHARS // 5)
    text = head + "tail " * 50_000
    assert simhash(text) == simhash(text[:fp.SIMHASH_MAX_CHARS])
    assert fingerprint(text).simhash == simhash(text)
    assert fingerprint(text).text_hash == text_hash(text) != text_hash(head)
    assert fingerprint(text).words == 50_000 + fp.SIMHASH_MAX_CHARS // 5


def test_hashes_are_signed_64_bit():
    rng = random.Random(9)
    seen_negative = seen_positive = False
    for _ in range(300):
        text = " ".join(str(rng.random()) + rng.choice("abcdefgh") for _ in range(rng.randrange(1, 30)))
        for value in (text_hash(text), simhash(text), *fingerprint(text)[:2]):
            assert isinstance(value, int) and INT64_MIN <= value <= INT64_MAX
            seen_negative |= value < 0
            seen_positive |= value > 0
    assert seen_negative and seen_positive


def test_unknown_weighting_is_an_error():
    with pytest.raises(ValueError):
        simhash("a b", weighting="idf")


# ------------------------------------------------------------------------------ bands and hamming

def test_hamming_works_on_signed_values():
    assert hamming(-1, 0) == 64
    assert hamming(INT64_MIN, 0) == 1
    assert hamming(-1, (1 << 64) - 1) == 0
    assert hamming(12345, 12345) == 0


def test_bands_cut_16_bit_values_low_band_first():
    h = 0x0123_4567_89AB_CDEF
    assert bands(h) == [(0, 0xCDEF), (1, 0x89AB), (2, 0x4567), (3, 0x0123)]
    assert bands(h - (1 << 64)) == bands(h)                 # signed form, same bands
    assert bands(-1, 8) == [(i, 0xFF) for i in range(8)]
    with pytest.raises(ValueError):
        bands(h, 5)


def _flip(h: int, bits: list[int]) -> int:
    for b in bits:
        h ^= 1 << b
    return fp._signed64(h)


def test_pigeonhole_within_3_bits_always_shares_a_band():
    rng = random.Random(17)
    for _ in range(3000):
        a = fp._signed64(rng.getrandbits(64))
        b = _flip(a, rng.sample(range(64), rng.randint(0, 3)))
        assert hamming(a, b) <= 3
        assert set(bands(a)) & set(bands(b))


def test_four_bits_one_per_band_share_no_band():
    a = fp._signed64(random.Random(2).getrandbits(64))
    b = _flip(a, [3, 16 + 7, 32 + 1, 48 + 15])
    assert hamming(a, b) == 4 and not set(bands(a)) & set(bands(b))


# ------------------------------------------------------------------------------ MinHash

def _letters(i: int) -> str:
    """A distinct digit-free word per i (digits would all normalise to "0")."""
    word = ""
    while True:
        i, r = divmod(i, 26)
        word += "abcdefghijklmnopqrstuvwxyz"[r]
        if not i:
            return "w" + word


def test_minhash_equals_datasketch_own_computation():
    from datasketch import MinHash
    rng = random.Random(4)
    text = " ".join(_letters(rng.randrange(3000)) for _ in range(2000))
    words = fp._word_hashes(fp._normalised_codepoints(text))
    elements = np.unique((words & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    assert len(elements) > 1000
    for num_perm, seed in ((64, 1), (128, 7)):
        ref = MinHash(num_perm=num_perm, seed=seed, hashfunc=int)
        ref.update_batch(elements)
        ours = minhash(text, num_perm, seed=seed)
        assert ours.hashvalues.tolist() == ref.hashvalues.tolist()
        assert ours.jaccard(ref) == 1.0


def test_minhash_estimates_word_set_jaccard():
    a = " ".join(_letters(i) for i in range(400))
    b = " ".join(_letters(i) for i in range(100, 500))  # 300 shared of 500: Jaccard 0.6
    assert abs(minhash(a, 256).jaccard(minhash(b, 256)) - 0.6) < 0.1
    assert minhash(a).jaccard(minhash(a + " " + a)) == 1.0  # a set: repeats do not count


def test_word_set_signature_agrees_in_about_a_jaccard_share_of_positions():
    import numpy as np
    from crawl.dedup.fingerprint import word_set_signature
    rng = random.Random(11)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(7)) for _ in range(5000)]
    words = [rng.choice(vocab) for _ in range(800)]
    edited = list(words)
    for i in rng.sample(range(len(words)), 40):  # 5 % of the words replaced
        edited[i] = rng.choice(vocab)
    a, b = (np.frombuffer(word_set_signature(" ".join(w)), dtype=np.uint64) for w in (words, edited))
    c = np.frombuffer(word_set_signature(" ".join(rng.choice(vocab) for _ in range(800))), dtype=np.uint64)
    truth = len(set(words) & set(edited)) / len(set(words) | set(edited))
    assert abs((a == b).mean() - truth) < 0.15 and (a == c).mean() < 0.3
    assert word_set_signature("") is None and fingerprint(" ".join(words)).signature == word_set_signature(" ".join(words))


def test_page_text_of_a_tree_parsed_once():
    from selectolax.lexbor import LexborHTMLParser
    html = "<html><head><title>T</title><script>x=1</script></head><body><p>Hello <b>big</b> world</p></body></html>"
    assert page_text(html, LexborHTMLParser(html)) == page_text(html) == "Hello big world"


# The MinHash signature in C (crawl/dedup/_fasthash.c) against the numpy reference, byte for byte.

def test_signature_in_c_is_built():
    """Without it a 50 KB page costs ~1 ms more (DELTACRAWL_PURE_PYTHON=1 turns it off)."""
    import os
    if os.environ.get("DELTACRAWL_PURE_PYTHON"):
        pytest.skip("pure Python requested")
    assert fp._FASTHASH is not None


@pytest.mark.skipif(fp._FASTHASH is None, reason="crawl.dedup._fasthash not built")
def test_signature_in_c_equals_numpy_on_random_word_hashes():
    rng = np.random.default_rng(20261130)
    for n in [1, 2, 3, 63, 64, 65, 80, 1000, 4095, 4096, 4097, 9000]:
        for _ in range(5):
            words = rng.integers(0, 2**64, size=n, dtype=np.uint64)
            if n > 3:  # duplicates, and values at the ends of the ranges
                words[: n // 4] = words[n // 4: 2 * (n // 4)]
                words[0], words[1], words[2] = 0, 2**64 - 1, 2**61 - 1
            assert fp._signature_of(words) == fp._signature_of_numpy(words), n


@pytest.mark.skipif(fp._FASTHASH is None, reason="crawl.dedup._fasthash not built")
@given(st.text(max_size=400))
@settings(max_examples=200, derandomize=True, database=None, deadline=None)
def test_signature_in_c_equals_numpy_on_texts(text):
    words = fp._word_hashes(fp._normalised_codepoints(text))
    assert fp._signature_of(words) == fp._signature_of_numpy(words)


@pytest.mark.skipif(fp._FASTHASH is None, reason="crawl.dedup._fasthash not built")
def test_signature_in_c_refuses_bad_buffers():
    a = np.ones(64, dtype=np.uint64)
    with pytest.raises(ValueError):
        fp._FASTHASH.minhash(np.ones(3, dtype=np.uint8), a, a)
    with pytest.raises(ValueError):
        fp._FASTHASH.minhash(np.ones(3, dtype=np.uint64), a, a[:10])
    with pytest.raises(TypeError):
        fp._FASTHASH.minhash("text", a, a)
    # unaligned views are read correctly
    fp._signature_of(np.ones(1, dtype=np.uint64))  # sets fp._SIGNATURE_AB
    raw = np.arange(8 * 65 + 1, dtype=np.uint8)
    words = np.frombuffer(raw[1:].tobytes(), dtype=np.uint64)
    assert fp._FASTHASH.minhash(memoryview(raw)[1:], *fp._SIGNATURE_AB) == fp._signature_of_numpy(words)


# The normaliser's array part and the word hashes in C (crawl/dedup/_fasthash.c) against numpy.

_NUMBERY = st.lists(st.sampled_from(["0", "7", "2024", "-", "03", ":", "10", ",", ".", " ", "  ", "%", "a", "Ab",
                                     "é", "ß", "١٢", "x1", "\t", "\n", "!", "views", "ﬁ", "😀", "𝟘"]),
                    max_size=40).map("".join)


def _c_and_numpy_normalise(text):
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    out = fp._FASTHASH.normalise(cps, fp._bmp_classes())
    return out, fp._normalise_array(cps)


@pytest.mark.skipif(fp._FASTHASH is None, reason="crawl.dedup._fasthash not built")
@given(st.one_of(st.text(max_size=300), _NUMBERY))
@settings(max_examples=600, derandomize=True, database=None, deadline=None)
def test_normaliser_and_word_hashes_in_c_equal_numpy(text):
    out, reference = _c_and_numpy_normalise(text)
    if out is None:  # code points beyond the BMP: the numpy code classifies them
        assert any(ord(c) >= 0x10000 for c in unicodedata.normalize("NFKC", text.casefold()))
        cps = reference
    else:
        cps = np.frombuffer(out, dtype=np.uint32)
        assert cps.tolist() == reference.tolist()
    assert fp._word_hashes(cps).tolist() == fp._word_hashes_numpy(cps).tolist()


@pytest.mark.skipif(fp._FASTHASH is None, reason="crawl.dedup._fasthash not built")
def test_normaliser_in_c_on_long_pages_and_edges():
    rng = random.Random(5)
    vocab = ["alpha", "beta", "2024-03-05", "10:32:07", "1,024", "3.5 %", "views", "Ünïcode", "x", "—", "...", "0 0 0"]
    for size in (0, 1, 2, 3, 50, 5000):
        text = " ".join(rng.choice(vocab) for _ in range(size))
        out, reference = _c_and_numpy_normalise(text)
        assert np.frombuffer(out, dtype=np.uint32).tolist() == reference.tolist()
    for text in ["", " ", "0", "0 0", " 0 0 ", "a 0 0 0 b", "0 a 0", "--", "a--b"]:
        out, reference = _c_and_numpy_normalise(text)
        assert np.frombuffer(out, dtype=np.uint32).tolist() == reference.tolist(), text
    words = fp._word_hashes(np.array([32, 97, 32, 32, 98], dtype=np.uint32))  # spaces at an end, doubled
    assert words.tolist() == fp._word_hashes_numpy(np.array([32, 97, 32, 32, 98], dtype=np.uint32)).tolist()
    with pytest.raises(ValueError):
        fp._FASTHASH.normalise(np.zeros(3, dtype=np.uint32), np.zeros(10, dtype=np.uint8))


# fingerprint() does not depend on runs of white space, so the parser child passes it the page's
# text uncollapsed (crawl.parse.page.parse_page; collapsing cost more than parsing the page).

_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())  # what str.split() splits on
# neighbours that compose, decompose into or around white space, or merge in normalisation
_NEIGHBOURS = ["a", "A", "0", "12", "\u0301", "\u0308", "\u00a8", "\u00b4", "\u1100", "\u1161", "\u11a8", "ß", "ﬁ",
               "\u2474", "\u3000", "é", "e\u0301", "١", "😀", "-", "_", ".", "x1"]


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def test_every_white_space_character_next_to_composing_neighbours_fingerprints_as_one_space():
    for ws in _WHITESPACE:
        for left in _NEIGHBOURS:
            for right in _NEIGHBOURS:
                text = f"{left}{ws}{right} {ws}{ws}{left}"
                assert fingerprint(text) == fingerprint(_collapsed(text)), (ws, left, right)


@given(st.lists(st.one_of(st.sampled_from(list(_WHITESPACE) + _NEIGHBOURS), st.text(max_size=8)), max_size=60)
       .map("".join))
@settings(max_examples=500, derandomize=True, database=None, deadline=None)
def test_fingerprint_ignores_runs_of_white_space(text):
    assert fingerprint(text) == fingerprint(_collapsed(text))


def test_fingerprint_of_long_uncollapsed_text_cuts_the_collapsed_text():
    words = "word " * (fp.SIMHASH_MAX_CHARS // 5 - 10) + "tail " * 2_000
    padded = words.replace(" ", " \t\n  ")  # over the cut uncollapsed, well over it collapsed too
    assert len(padded) > 1.5 * fp.SIMHASH_MAX_CHARS and len(_collapsed(padded)) > fp.SIMHASH_MAX_CHARS
    assert fingerprint(padded) == fingerprint(_collapsed(padded))
    short = ("word " * 1000).replace(" ", " " * 2000)  # over the cut only before collapsing
    assert len(short) > fp.SIMHASH_MAX_CHARS
    assert fingerprint(short) == fingerprint(_collapsed(short)) == fingerprint("word " * 1000)


def test_uncollapsed_visible_text_fingerprints_as_the_page_text():
    from selectolax.lexbor import LexborHTMLParser
    html = page("<p>Some\n\n   text\u00a0with \t spaces</p><pre>  keep\n  me </pre>" + "<div> x </div>" * 50)
    raw = fp.visible_text(html, LexborHTMLParser(html), collapse_whitespace=False)
    assert raw != page_text(html) == _collapsed(raw)
    assert fingerprint(raw) == fingerprint(page_text(html))
