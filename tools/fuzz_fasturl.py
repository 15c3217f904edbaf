#!/usr/bin/env python
"""Fuzz crawl/net/_fasturl.c under AddressSanitizer against the Python reference: a memory-safety
check of the C link path (its filter runs in the fetch process, where a crash would fail a Spark
task), too long-running for the test suite.

Run:  gcc -shared -fPIC -O1 -g -fsanitize=address -fno-omit-frame-pointer \
          -I"$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
          crawl/net/_fasturl.c -o /tmp/fasturl_asan.so
      PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
          .venv/bin/python tools/fuzz_fasturl.py SEED SECONDS [/tmp/fasturl_asan.so]
Any ASAN report aborts the run; a result that differs from the Python code prints MISMATCH.
Exit 0 when nothing differed. (The ordinary build can be given instead of the ASAN one.)
"""
import importlib.util, os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SO = sys.argv[3] if len(sys.argv) > 3 else "/tmp/fasturl_asan.so"
spec = importlib.util.spec_from_file_location("crawl.net._fasturl", _SO)
fast = importlib.util.module_from_spec(spec); spec.loader.exec_module(fast)
import crawl.net.urls as urls
fast.set_fallback(urls._plain_py)
from crawl.net.urls import UrlRules
from crawl.config import build_config
from crawl.net import filters
from crawl.parse import links
R = UrlRules.from_config(build_config())
R2 = UrlRules(("A*", "b", "*"), ("S", "x*", ""))
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
ALPH = list("aZ09-._~!$&'()*+,;=:@/?#%[]\\ \t\x7f\"<>^`{|}") + ["%2E", "%41", "%C3", "../", "./", "//", "http://", "https://", "HTTP:", "utm_x=1", "jsessionid=1", ";sid=2", "&&", "ü", "é"]
BASES = [None, "https://www.example.com/dir/page.html?q=1", "http://a.com", "https://a.com/x/./y/?q=1", "http://a.com:81/b;sid=1/",
         "http://" + "a" * 300 + ".com/" + "b/" * 2000, "https://h.com/" + "a&" * 3000]
def rand_str():
    k = rng.choice([0, 1, 5, 20, 60, 200, 2000, 9000])
    return "".join(rng.choice(ALPH) for _ in range(rng.randint(0, k)))
t0 = time.time(); n = 0; mism = 0
F = [filters.LinkFilter(["http", "https"], 2048, d, rep, ["png", "gz"], inc, exc, sc)
     for d, rep, inc, exc, sc in ((24, 2, [], [], "any"), (2, 1, [], ["/x"], "host"), (30, 3, ["a"], [], "domain"))]
for f in F:
    f._c = fast.Filter(tuple(sorted(f._schemes)), f._max_url_length, f._max_path_depth, f._max_segment_repeats,
                       f._deny_extensions, filters.SCOPES.index(f._scope), f._domain_of,
                       f._pattern_reason if (f._exclude or f._exclude_rest or f._has_include) else None,
                       f._reject_reason_py, (filters.SCHEME, filters.TOO_LONG, filters.SCOPE, filters.PATH_DEPTH,
                                             filters.EXTENSION, filters.REPEATING_PATH))
while time.time() - t0 < float(sys.argv[2] if len(sys.argv) > 2 else 60):
    raw = rand_str()
    base = rng.choice(BASES)
    rules = rng.choice([None, R, R2])
    based = urls._plain_base(base) if base else None
    s = raw.strip()
    if s and len(s) <= 8192:
        a = fast.plain(s, based, rules); b = urls._plain_py(s, based, rules)
        if a != b: mism += 1; print("MISMATCH plain", repr(s[:200]), base, a, b)
    url = rng.choice([raw, "http://a.com/" + raw, "https://x.a.co.uk:8080/" + raw])
    for f in F:
        h = rng.choice(["a.com", "x.a.co.uk:8080", "b.org"])
        a = f._c.reject_reason(url, h); b = f._reject_reason_py(url, h)
        if a != b: mism += 1; print("MISMATCH filter", repr(url[:200]), a, b)
    hrefs = [rand_str() for _ in range(rng.randint(0, 30))] + [links._NOFOLLOW]
    rng.shuffle(hrefs)
    if base:
        res = links._Resolver(base, True, rules, {})
        seen = {"x": None}
        fast.page_links(hrefs, res.based, rules, seen, rng.randint(0, 20), res.rejected, res.cached, links._NOFOLLOW)
    n += 1
print(f"{n} iterations, {mism} mismatches")
sys.exit(1 if mism else 0)
