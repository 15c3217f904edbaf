/* crawl.net._fasturl: the per-link hot path of crawl.net.urls and crawl.net.filters, compiled.
 *
 * Every link of every page is resolved, normalised, deduplicated and filtered; in Python that
 * costs ~3.5 us per link, several times the cost of parsing the page. This module does the same
 * work for the common link shapes in C. It is an exact copy, not an approximation:
 *
 *   plain(raw, based, rules)        == crawl.net.urls._plain_py(raw, based, rules)
 *   page_links(hrefs, based, rules, seen, room, rejected, fallback, nofollow)
 *                                   == the link loop of crawl.parse.links._extract_links
 *   Filter(...).reject_reason(url, source_host)
 *                                   == crawl.net.filters.LinkFilter.reject_reason
 *
 * Anything unusual (non-ASCII text, a character that needs percent-encoding, a lower-case
 * escape, an odd host or port) is not decided here: plain() returns None (the caller takes the
 * general path, as for the Python fast path), page_links() calls ``fallback``, and the filter
 * calls its Python ``fallback`` for non-ASCII input. tests/test_fasturl.py checks each function
 * against the Python one on generated inputs, byte for byte.
 *
 * The module holds the GIL throughout and calls no Python code while it uses its static work
 * buffers, so they are safe to share.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_URL_LENGTH 8192                      /* crawl.net.urls.MAX_URL_LENGTH */
#define PLAIN_MAX_CHARS (MAX_URL_LENGTH - 64)    /* crawl.net.urls._PLAIN_MAX_CHARS */
/* A path is at most a base path plus a reference (each < MAX_URL_LENGTH): room for both. */
#define WORK (2 * MAX_URL_LENGTH + 256)

enum { FU_ERROR = -2, FU_NONE = -1, FU_SCHEME = 0, FU_OK = 1 };

/* character classes */
#define C_PATH 1    /* RFC 3986 unreserved, sub-delims, ":", "@", "/": left alone in a path */
#define C_QUERY 2   /* the same and "?": left alone in a query */
#define C_HOST 4    /* [A-Za-z0-9.\-_] */
#define C_SCHEME 8  /* [A-Za-z0-9+.\-] */
#define C_UNRES 16  /* unreserved: [A-Za-z0-9\-._~] */
#define C_HEX 32    /* upper-case hex digit [0-9A-F] */
static unsigned char CLS[256];

static void init_classes(void) {
    const char *path = "-._~!$&'()*+,;=:@/";
    int c;
    for (c = 0; c < 256; c++) {
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum) CLS[c] |= C_PATH | C_QUERY | C_HOST | C_SCHEME | C_UNRES;
        if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')) CLS[c] |= C_HEX;
    }
    for (; *path; path++) CLS[(unsigned char)*path] |= C_PATH | C_QUERY;
    CLS['?'] |= C_QUERY;
    CLS['.'] |= C_HOST | C_SCHEME | C_UNRES;
    CLS['-'] |= C_HOST | C_SCHEME | C_UNRES;
    CLS['_'] |= C_HOST | C_UNRES;
    CLS['~'] |= C_UNRES;
    CLS['+'] |= C_SCHEME;
}

static int hexval(unsigned char c) { return c <= '9' ? c - '0' : c - 'A' + 10; }

/* A run of plain path (mask C_PATH) or query (C_QUERY) characters and kept escapes (upper-case
 * hex of a byte that is no unreserved character), from s[i]; returns the index where it stops. */
static Py_ssize_t plain_run(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, int mask) {
    while (i < n) {
        unsigned char c = s[i];
        if (CLS[c] & mask) { i++; continue; }
        if (c == '%' && i + 2 < n && (CLS[s[i + 1]] & C_HEX) && (CLS[s[i + 2]] & C_HEX)) {
            int byte = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
            if (byte < 128 && (CLS[byte] & C_UNRES)) break;  /* an escape _requote would decode */
            i += 3;
            continue;
        }
        break;
    }
    return i;
}

/* The tail after a path: an optional "?" query (plain), an optional "#" fragment (anything but
 * C0 controls and DEL). Returns 1 when it reaches the end. query_start = -1 when no "?". */
static int plain_tail(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_ssize_t *qs, Py_ssize_t *qe) {
    *qs = *qe = -1;
    if (i < n && s[i] == '?') {
        *qs = i + 1;
        i = plain_run(s, i + 1, n, C_QUERY);
        *qe = i;
    }
    if (i < n && s[i] == '#') {
        for (i++; i < n; i++)
            if (s[i] < 0x20 || s[i] == 0x7f) return 0;
    }
    return i == n;
}

typedef struct {
    const char *s; Py_ssize_t n;
} span;

/* The parts of a URL or reference, as spans into the input (path, query) or the work buffer. */
static char ORIGIN[WORK];
typedef struct {
    const char *origin; Py_ssize_t origin_len;
    span path;
    int has_query; span query;
} parts;

/* crawl.net.urls._plain_origin: "scheme://host[:port]" canonical, or 0 when it would be rejected
 * (or needs the general path). host is [A-Za-z0-9.\-_]+, port "" or 1-5 digits. */
static int make_origin(parts *p, const char *scheme, Py_ssize_t scheme_len,
                       const unsigned char *host, Py_ssize_t host_len, const unsigned char *port, Py_ssize_t port_len) {
    char *o = ORIGIN;
    Py_ssize_t k = 0, i, label = 0;
    long number = 0;
    /* _ascii_host: rstrip("."), the idna codec's ASCII checks (every label but the last 1-63
     * characters, the last < 64), lower(), [a-z0-9.\-_]+, no "..", no leading "-". */
    while (host_len > 0 && host[host_len - 1] == '.') host_len--;
    if (host_len == 0 || host[0] == '-' || host[0] == '.') return 0;
    memcpy(o, scheme, scheme_len); k = scheme_len;
    memcpy(o + k, "://", 3); k += 3;
    for (i = 0; i < host_len; i++) {
        unsigned char c = host[i];
        if (c == '.') {
            if (label == 0 || label > 63) return 0;
            label = 0;
        } else {
            label++;
        }
        o[k++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
    if (label >= 64) return 0;
    if (port_len > 0) {
        for (i = 0; i < port_len; i++) number = number * 10 + (port[i] - '0');
        if (number != (scheme_len == 5 ? 443 : 80)) {
            if (number == 0 || number > 65535) return 0;
            k += sprintf(o + k, ":%ld", number);
        }
    }
    p->origin = o; p->origin_len = k;
    return 1;
}

/* _PLAIN_ABSOLUTE_RE.fullmatch on "scheme://" + s[at:]: host, port, path, tail. */
static int parse_absolute(parts *p, const char *scheme, Py_ssize_t scheme_len,
                          const unsigned char *s, Py_ssize_t at, Py_ssize_t n) {
    Py_ssize_t i = at, host_start = at, port_start = 0, port_len = 0, qs, qe;
    while (i < n && (CLS[s[i]] & C_HOST)) i++;
    if (i == host_start) return 0;
    Py_ssize_t host_end = i;
    if (i < n && s[i] == ':') {
        port_start = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        port_len = i - port_start;
        if (port_len < 1 || port_len > 5) return 0;
    }
    Py_ssize_t path_start = i;
    if (i < n && s[i] == '/') i = plain_run(s, i + 1, n, C_PATH);
    p->path.s = (const char *)s + path_start; p->path.n = i - path_start;
    if (!plain_tail(s, i, n, &qs, &qe)) return 0;
    p->has_query = qs >= 0;
    p->query.s = (const char *)s + (qs >= 0 ? qs : 0); p->query.n = qs >= 0 ? qe - qs : 0;
    return make_origin(p, scheme, scheme_len, s + host_start, host_end - host_start, s + port_start, port_len);
}

/* _PLAIN_RELATIVE_RE.fullmatch: path run, tail. */
static int parse_relative(parts *p, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t qs, qe, i = plain_run(s, 0, n, C_PATH);
    p->path.s = (const char *)s; p->path.n = i;
    if (!plain_tail(s, i, n, &qs, &qe)) return 0;
    p->has_query = qs >= 0;
    p->query.s = (const char *)s + (qs >= 0 ? qs : 0); p->query.n = qs >= 0 ? qe - qs : 0;
    return 1;
}

/* ----------------------------------------------------------------------------------- rules */

/* UrlRules._fast: (path parameter names, query parameter names), each (exact, prefixes), as
 * tuples of lower-cased ASCII bytes (names holding "=" left out: they match nothing). */
typedef struct {
    PyObject *owner;  /* the rules._fast tuple (a new reference: release with drop_rules) */
    PyObject *path_exact, *path_prefix, *query_exact, *query_prefix;  /* items of owner */
    int path_any, query_any;
} rules_t;

static void drop_rules(rules_t *r) { Py_CLEAR(r->owner); }

static int read_rules(PyObject *rules, rules_t *r) {
    memset(r, 0, sizeof(*r));
    if (rules == Py_None) return 1;
    PyObject *fast = PyObject_GetAttrString(rules, "_fast");
    if (fast == NULL) return 0;
    if (!PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 4) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_TypeError, "rules._fast must be a 4-tuple");
        return 0;
    }
    r->owner = fast;
    r->path_exact = PyTuple_GET_ITEM(fast, 0);
    r->path_prefix = PyTuple_GET_ITEM(fast, 1);
    r->query_exact = PyTuple_GET_ITEM(fast, 2);
    r->query_prefix = PyTuple_GET_ITEM(fast, 3);
    PyObject *all[4] = {r->path_exact, r->path_prefix, r->query_exact, r->query_prefix};
    int t;
    for (t = 0; t < 4; t++) {
        Py_ssize_t i;
        if (!PyTuple_Check(all[t])) goto bad;
        for (i = 0; i < PyTuple_GET_SIZE(all[t]); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(all[t], i))) goto bad;
    }
    r->path_any = PyTuple_GET_SIZE(r->path_exact) + PyTuple_GET_SIZE(r->path_prefix) > 0;
    r->query_any = PyTuple_GET_SIZE(r->query_exact) + PyTuple_GET_SIZE(r->query_prefix) > 0;
    return 1;
bad:
    drop_rules(r);
    PyErr_SetString(PyExc_TypeError, "rules._fast must hold tuples of bytes");
    return 0;
}

static int ieq(const char *a, const char *lower, Py_ssize_t n) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i];
        if (c >= 'A' && c <= 'Z') c += 32;
        if (c != (unsigned char)lower[i]) return 0;
    }
    return 1;
}

/* Does the ASCII name (case-insensitively) equal an exact pattern or start with a prefix? */
static int name_matches(const char *name, Py_ssize_t n, PyObject *exact, PyObject *prefix) {
    Py_ssize_t i, k;
    for (i = 0, k = PyTuple_GET_SIZE(exact); i < k; i++) {
        PyObject *b = PyTuple_GET_ITEM(exact, i);
        if (PyBytes_GET_SIZE(b) == n && ieq(name, PyBytes_AS_STRING(b), n)) return 1;
    }
    for (i = 0, k = PyTuple_GET_SIZE(prefix); i < k; i++) {
        PyObject *b = PyTuple_GET_ITEM(prefix, i);
        if (PyBytes_GET_SIZE(b) <= n && ieq(name, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))) return 1;
    }
    return 0;
}

static Py_ssize_t name_length(const char *s, Py_ssize_t n) {
    const char *eq = memchr(s, '=', n);
    return eq ? eq - s : n;
}

/* ------------------------------------------------------------------------ path and query */

static char PATH1[WORK], PATH2[WORK], QUERY[WORK], OUT[WORK];
typedef struct { Py_ssize_t start, len; } piece;
#define MAX_PIECES 8192  /* more than a query of MAX_URL_LENGTH can hold */
static piece PIECES[MAX_PIECES];

/* crawl.net.urls._strip_path_params into out (capacity WORK); returns the new length. */
static Py_ssize_t strip_path_params(const char *s, Py_ssize_t n, const rules_t *r, char *out) {
    Py_ssize_t i = 0, k = 0;
    while (i <= n) {
        const char *slash = memchr(s + i, '/', n - i);
        Py_ssize_t end = slash ? slash - s : n;
        const char *semi = memchr(s + i, ';', end - i);
        if (semi == NULL) {
            memcpy(out + k, s + i, end - i); k += end - i;
        } else {
            Py_ssize_t h = semi - s;
            memcpy(out + k, s + i, h - i); k += h - i;        /* head */
            Py_ssize_t j = h + 1;
            for (;;) {                                         /* each ";param" */
                const char *next = memchr(s + j, ';', end - j);
                Py_ssize_t pe = next ? next - s : end;
                if (!name_matches(s + j, name_length(s + j, pe - j), r->path_exact, r->path_prefix)) {
                    out[k++] = ';';
                    memcpy(out + k, s + j, pe - j); k += pe - j;
                }
                if (!next) break;
                j = pe + 1;
            }
        }
        if (!slash) break;
        out[k++] = '/';
        i = end + 1;
    }
    return k;
}

static int contains_slash_dot(const char *s, Py_ssize_t n) {
    Py_ssize_t i;
    for (i = 0; i + 1 < n; i++)
        if (s[i] == '/' && s[i + 1] == '.') return 1;
    return 0;
}

/* crawl.net.urls._remove_dot_segments on an absolute path holding "/.", into out. */
static Py_ssize_t remove_dot_segments(const char *s, Py_ssize_t n, char *out) {
    /* output segments as (start, len) into s; at most n of them */
    piece small[256];
    piece *seg = n < 256 ? small : PyMem_Malloc(sizeof(piece) * (n + 1));
    Py_ssize_t count = 0, i = 1, k = 0, last_start = 1, last_len;
    if (seg == NULL) return -1;
    /* segments[1:] of s.split("/"); s[0] == "/" */
    for (;;) {
        const char *slash = memchr(s + i, '/', n - i);
        Py_ssize_t end = slash ? slash - s : n, len = end - i;
        last_start = i;
        if (len == 2 && s[i] == '.' && s[i + 1] == '.') {
            if (count) count--;
        } else if (!(len == 1 && s[i] == '.')) {
            seg[count].start = i; seg[count].len = len; count++;
        }
        if (!slash) break;
        i = end + 1;
    }
    last_len = n - last_start;
    out[k++] = '/';
    for (i = 0; i < count; i++) {
        if (i) out[k++] = '/';
        memcpy(out + k, s + seg[i].start, seg[i].len); k += seg[i].len;
    }
    if ((last_len == 1 && s[last_start] == '.') || (last_len == 2 && s[last_start] == '.' && s[last_start + 1] == '.')) {
        if (count) out[k++] = '/';  /* "/".join(output + [""]) */
    }
    if (seg != small) PyMem_Free(seg);
    return k;
}

static int piece_cmp(const void *pa, const void *pb) {
    const piece *a = pa, *b = pb;
    Py_ssize_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(QUERY + a->start, QUERY + b->start, m);
    if (c) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The query step of crawl.net.urls._plain, into QUERY; returns the length (0: no query), -1 when
 * there are too many pieces to sort here (the caller takes the general path). */
static Py_ssize_t normalize_query(const char *q, Py_ssize_t n, const rules_t *r) {
    Py_ssize_t i = 0, count = 0, k = 0;
    if (n == 0) return 0;
    if (memchr(q, '&', n) == NULL) {
        if (r->query_any && name_matches(q, name_length(q, n), r->query_exact, r->query_prefix)) return 0;
        memcpy(QUERY, q, n);
        return n;
    }
    memcpy(QUERY, q, n);
    for (;;) {
        const char *amp = memchr(q + i, '&', n - i);
        Py_ssize_t end = amp ? amp - q : n;
        if (end > i && !(r->query_any && name_matches(q + i, name_length(q + i, end - i), r->query_exact, r->query_prefix))) {
            if (count == MAX_PIECES) return -1;
            PIECES[count].start = i; PIECES[count].len = end - i; count++;
        }
        if (!amp) break;
        i = end + 1;
    }
    qsort(PIECES, count, sizeof(piece), piece_cmp);
    char *tmp = OUT;  /* OUT is free until the final URL is assembled */
    for (i = 0; i < count; i++) {
        if (i) tmp[k++] = '&';
        memcpy(tmp + k, QUERY + PIECES[i].start, PIECES[i].len); k += PIECES[i].len;
    }
    memcpy(QUERY, tmp, k);
    return k;
}

/* ------------------------------------------------------------------------------- plain */

typedef struct {
    int ok;
    const char *origin; Py_ssize_t origin_len;
    const char *scheme; Py_ssize_t scheme_len;
    const char *path; Py_ssize_t path_len;
    const char *query; Py_ssize_t query_len;
    Py_ssize_t length;
} based_t;

static int read_based(PyObject *based, based_t *b) {
    memset(b, 0, sizeof(*b));
    if (based == Py_None) return 1;
    if (!PyTuple_Check(based) || PyTuple_GET_SIZE(based) != 5) {
        PyErr_SetString(PyExc_TypeError, "based must be None or a 5-tuple");
        return 0;
    }
    PyObject *items[4];
    int i;
    for (i = 0; i < 4; i++) {
        items[i] = PyTuple_GET_ITEM(based, i);
        if (!PyUnicode_Check(items[i]) || !PyUnicode_IS_ASCII(items[i])) {
            PyErr_SetString(PyExc_TypeError, "based must hold ASCII strings");
            return 0;
        }
    }
    b->origin = (const char *)PyUnicode_1BYTE_DATA(items[0]); b->origin_len = PyUnicode_GET_LENGTH(items[0]);
    b->scheme = (const char *)PyUnicode_1BYTE_DATA(items[1]); b->scheme_len = PyUnicode_GET_LENGTH(items[1]);
    b->path = (const char *)PyUnicode_1BYTE_DATA(items[2]); b->path_len = PyUnicode_GET_LENGTH(items[2]);
    b->query = (const char *)PyUnicode_1BYTE_DATA(items[3]); b->query_len = PyUnicode_GET_LENGTH(items[3]);
    b->length = PyLong_AsSsize_t(PyTuple_GET_ITEM(based, 4));
    if (b->length == -1 && PyErr_Occurred()) return 0;
    /* _plain_base's tuple: its parts come from the base, ``length`` is len(base) */
    if ((b->scheme_len != 4 && b->scheme_len != 5) || b->origin_len > b->length || b->path_len > b->length ||
        b->query_len > b->length || b->length > MAX_URL_LENGTH * 4) {
        PyErr_SetString(PyExc_ValueError, "based is not a plain base");
        return 0;
    }
    b->ok = 1;
    return 1;
}

static int scheme_is(const unsigned char *s, Py_ssize_t n, const char *lower) {
    return (Py_ssize_t)strlen(lower) == n && ieq((const char *)s, lower, n);
}

/* The canonical form of an ASCII reference into OUT (FU_OK, *out_len set), FU_SCHEME, FU_NONE
 * or FU_ERROR (exception set). Mirrors crawl.net.urls._plain line by line. */
static int plain_ascii(const unsigned char *s, Py_ssize_t n, const based_t *b, const rules_t *r, Py_ssize_t *out_len) {
    parts p;
    const char *path; Py_ssize_t path_len;
    const char *query = NULL; Py_ssize_t query_len = 0;
    const char *origin; Py_ssize_t origin_len;
    Py_ssize_t k;

    if (n >= 7 && memcmp(s, "http://", 7) == 0) {
        if (!parse_absolute(&p, "http", 4, s, 7, n)) return FU_NONE;
    } else if (n >= 8 && memcmp(s, "https://", 8) == 0) {
        if (!parse_absolute(&p, "https", 5, s, 8, n)) return FU_NONE;
    } else if (!b->ok || n + b->length > PLAIN_MAX_CHARS) {
        return FU_NONE;
    } else if (s[0] == '/' && !(n > 1 && s[1] == '/')) {    /* absolute path */
        if (!parse_relative(&p, s, n)) return FU_NONE;
        p.origin = b->origin; p.origin_len = b->origin_len;
    } else if (s[0] == '/') {                                /* network-path reference */
        if (!parse_absolute(&p, b->scheme, b->scheme_len, s, 2, n)) return FU_NONE;
    } else {
        Py_ssize_t colon;
        for (colon = 0; colon < n; colon++) {
            unsigned char c = s[colon];
            if (c == ':' || c == '/' || c == '?' || c == '#') break;
        }
        if (colon < n && s[colon] == ':') {                  /* _plain_scheme */
            Py_ssize_t i;
            if (colon == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return FU_NONE;
            for (i = 1; i < colon; i++)
                if (!(CLS[s[i]] & C_SCHEME)) return FU_NONE;
            int slashes = colon + 2 < n && s[colon + 1] == '/' && s[colon + 2] == '/';
            if (scheme_is(s, colon, "http") || scheme_is(s, colon, "https")) {
                if (!slashes) return FU_NONE;
                if (!parse_absolute(&p, colon == 4 ? "http" : "https", colon, s, colon + 3, n)) return FU_NONE;
                goto resolved;
            }
            if (slashes) return FU_NONE;
            for (i = 0; i < n; i++)
                if (s[i] < 0x20 || s[i] == 0x7f) return FU_NONE;
            return FU_SCHEME;
        }
        if (!parse_relative(&p, s, n)) return FU_NONE;
        p.origin = b->origin; p.origin_len = b->origin_len;
        /* RFC 3986 section 5.2.2: no path takes the base's (and its query when the reference
         * has no "?"); a relative path is merged with the base's directory. */
        if (p.path.n == 0) {
            p.path.s = b->path; p.path.n = b->path_len;
            if (!p.has_query) { p.has_query = 1; p.query.s = b->query; p.query.n = b->query_len; }
        } else {
            Py_ssize_t dir = b->path_len;
            while (dir > 0 && b->path[dir - 1] != '/') dir--;
            if (dir == 0) { PATH2[0] = '/'; dir = 1; } else memcpy(PATH2, b->path, dir);
            if (dir + p.path.n >= WORK) return FU_NONE;
            memcpy(PATH2 + dir, p.path.s, p.path.n);
            p.path.s = PATH2; p.path.n = dir + p.path.n;
        }
    }
resolved:
    path = p.path.s; path_len = p.path.n;
    if (r->path_any && memchr(path, ';', path_len)) {
        Py_ssize_t m = strip_path_params(path, path_len, r, PATH1);
        path = PATH1; path_len = m;
    }
    if (contains_slash_dot(path, path_len)) {
        char *dest = path == PATH1 ? PATH2 : PATH1;
        Py_ssize_t m = remove_dot_segments(path, path_len, dest);
        if (m < 0) { PyErr_NoMemory(); return FU_ERROR; }
        path = dest; path_len = m;
    } else if (path_len == 0) {
        path = "/"; path_len = 1;
    }
    if (p.has_query && p.query.n) {
        query_len = normalize_query(p.query.s, p.query.n, r);
        if (query_len < 0) return FU_NONE;
        query = QUERY;
    }
    origin = p.origin; origin_len = p.origin_len;
    k = origin_len + path_len + (query_len ? 1 + query_len : 0);
    if (k > MAX_URL_LENGTH) return FU_NONE;
    memcpy(OUT, origin, origin_len);
    memcpy(OUT + origin_len, path, path_len);
    if (query_len) {
        OUT[origin_len + path_len] = '?';
        memcpy(OUT + origin_len + path_len + 1, query, query_len);
    }
    *out_len = k;
    return FU_OK;
}

static PyObject *PY_FALLBACK_PLAIN = NULL;  /* crawl.net.urls._plain_py, set by set_fallback */
static PyObject *EMPTY = NULL;               /* "" */
static PyObject *S_SCHEME = NULL, *S_NOFOLLOW = NULL, *S_OVER_CAP = NULL;

static PyObject *ascii_string(const char *s, Py_ssize_t n) {
    PyObject *u = PyUnicode_New(n, 127);
    if (u) memcpy(PyUnicode_1BYTE_DATA(u), s, n);
    return u;
}

/* plain(raw, based, rules) -> str | "" | None: crawl.net.urls._plain_py, exactly. */
static PyObject *fast_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    based_t b; rules_t r; Py_ssize_t len;
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "plain(raw, based, rules)"); return NULL; }
    PyObject *raw = args[0];
    if (!PyUnicode_CheckExact(raw) || !PyUnicode_IS_ASCII(raw) || PyUnicode_GET_LENGTH(raw) == 0 ||
            PyUnicode_GET_LENGTH(raw) > MAX_URL_LENGTH) {
        if (PY_FALLBACK_PLAIN == NULL) Py_RETURN_NONE;
        return PyObject_Vectorcall(PY_FALLBACK_PLAIN, args, nargs, NULL);
    }
    if (!read_based(args[1], &b) || !read_rules(args[2], &r)) return NULL;
    int rc = plain_ascii(PyUnicode_1BYTE_DATA(raw), PyUnicode_GET_LENGTH(raw), &b, &r, &len);
    drop_rules(&r);
    switch (rc) {
    case FU_OK: return ascii_string(OUT, len);
    case FU_SCHEME: Py_INCREF(EMPTY); return EMPTY;
    case FU_NONE: Py_RETURN_NONE;
    default: return NULL;
    }
}

static int count_reason(PyObject *rejected, PyObject *reason, Py_ssize_t by) {
    PyObject *old = PyDict_GetItemWithError(rejected, reason);
    long value = 0;
    if (old == NULL && PyErr_Occurred()) return -1;
    if (old != NULL) {
        value = PyLong_AsLong(old);
        if (value == -1 && PyErr_Occurred()) return -1;
    }
    PyObject *v = PyLong_FromSsize_t(value + by);
    if (v == NULL) return -1;
    int rc = PyDict_SetItem(rejected, reason, v);
    Py_DECREF(v);
    return rc;
}

/* page_links(hrefs, based, rules, seen, room, rejected, fallback, nofollow) -> room left
 *
 * The link loop of crawl.parse.links._extract_links: for each href in order, stop at the cap
 * (counting the rest as over_cap), count a ``nofollow`` sentinel, otherwise resolve it, count
 * a rejection by its reason, add a new canonical URL to ``seen`` (a dict used as an ordered
 * set). Hrefs that are plain ASCII without white space or controls at all are resolved here;
 * any other href, and any that plain() leaves to the general path, is given to
 * ``fallback(href) -> (url | None, reason | None)`` (the Python resolver with its caches). */
/* One href of page_links: 0 done, -1 error (exception set). */
static int page_link(PyObject *href, const based_t *b, const rules_t *r, PyObject *seen, Py_ssize_t *room,
                     PyObject *rejected, PyObject *fallback, PyObject *nofollow) {
    PyObject *url = NULL, *reason = NULL, *result = NULL;
    Py_ssize_t len;
    if (href == nofollow) return count_reason(rejected, S_NOFOLLOW, 1);
    int rc = FU_NONE;
    if (PyUnicode_CheckExact(href) && PyUnicode_IS_ASCII(href)) {
        const unsigned char *s = PyUnicode_1BYTE_DATA(href);
        Py_ssize_t m = PyUnicode_GET_LENGTH(href), j;
        if (m > 0 && m <= MAX_URL_LENGTH && s[0] > 0x20 && s[m - 1] > 0x20) {
            for (j = 0; j < m; j++)
                if (s[j] < 0x20 || s[j] == 0x7f) break;
            if (j == m) rc = plain_ascii(s, m, b, r, &len);  /* printable: new() checks it as it is */
        }
    }
    if (rc == FU_ERROR) return -1;
    if (rc == FU_OK) {
        url = ascii_string(OUT, len);
        if (url == NULL) return -1;
    } else if (rc == FU_SCHEME) {
        return count_reason(rejected, S_SCHEME, 1);
    } else {
        result = PyObject_CallOneArg(fallback, href);
        if (result == NULL) return -1;
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_TypeError, "fallback must return (url, reason)");
            return -1;
        }
        url = PyTuple_GET_ITEM(result, 0);
        reason = PyTuple_GET_ITEM(result, 1);
        if (url == Py_None) {
            int bad = count_reason(rejected, reason, 1);
            Py_DECREF(result);
            return bad;
        }
        Py_INCREF(url);
        Py_DECREF(result);
    }
    /* one lookup: setdefault, and the size says whether it was new */
    Py_ssize_t size = PyDict_GET_SIZE(seen);
    PyObject *stored = PyDict_SetDefault(seen, url, Py_None);
    Py_DECREF(url);
    if (stored == NULL) return -1;
    if (PyDict_GET_SIZE(seen) != size) (*room)--;
    return 0;
}

/* page_links(hrefs, based, rules, seen, room, rejected, fallback, nofollow) -> room left
 *
 * The link loop of crawl.parse.links._extract_links (_link_loop there): for each href in order, stop
 * at the cap (counting the rest as over_cap), count a ``nofollow`` sentinel, otherwise resolve
 * it, count a rejection by its reason, add a new canonical URL to ``seen`` (a dict used as an
 * ordered set). Hrefs that are plain ASCII without white space or controls at all are resolved
 * here; any other href, and any that plain() leaves to the general path, is given to
 * ``fallback(href) -> (url | None, reason | None)`` (the Python resolver with its caches). */
static PyObject *fast_page_links(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    based_t b; rules_t r; Py_ssize_t i, room;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "page_links(hrefs, based, rules, seen, room, rejected, fallback, nofollow)");
        return NULL;
    }
    PyObject *hrefs = args[0], *seen = args[3], *rejected = args[5], *fallback = args[6], *nofollow = args[7];
    if (!PyList_Check(hrefs) || !PyDict_Check(seen) || !PyDict_Check(rejected)) {
        PyErr_SetString(PyExc_TypeError, "page_links: hrefs must be a list, seen and rejected dicts");
        return NULL;
    }
    room = PyLong_AsSsize_t(args[4]);
    if (room == -1 && PyErr_Occurred()) return NULL;
    if (!read_based(args[1], &b) || !read_rules(args[2], &r)) return NULL;
    /* the list's size is read on every turn: the fallback is Python code */
    for (i = 0; i < PyList_GET_SIZE(hrefs); i++) {
        if (room <= 0) {
            if (count_reason(rejected, S_OVER_CAP, PyList_GET_SIZE(hrefs) - i) < 0) goto fail;
            break;
        }
        PyObject *href = PyList_GET_ITEM(hrefs, i);
        Py_INCREF(href);
        int rc = page_link(href, &b, &r, seen, &room, rejected, fallback, nofollow);
        Py_DECREF(href);
        if (rc < 0) goto fail;
    }
    drop_rules(&r);
    return PyLong_FromSsize_t(room);
fail:
    drop_rules(&r);
    return NULL;
}

/* ------------------------------------------------------------------------------ Filter */

typedef struct {
    PyObject_HEAD
    PyObject *schemes;          /* tuple of str (ASCII) */
    Py_ssize_t max_url_length, max_path_depth, max_segment_repeats;
    PyObject *deny_extensions;  /* frozenset of str */
    int scope;                  /* 0 any, 1 host, 2 domain */
    PyObject *domain_of;        /* callable: host key -> registrable domain */
    PyObject *patterns;         /* callable(url) -> reason | None for include/exclude, or None */
    PyObject *fallback;         /* the Python reject_reason, for non-ASCII input */
    PyObject *reasons;          /* tuple: scheme, too_long, scope, path_depth, extension, repeating_path */
} FilterObject;

static void filter_dealloc(FilterObject *f) {
    Py_XDECREF(f->schemes); Py_XDECREF(f->deny_extensions); Py_XDECREF(f->domain_of);
    Py_XDECREF(f->patterns); Py_XDECREF(f->fallback); Py_XDECREF(f->reasons);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static int filter_init(FilterObject *f, PyObject *args, PyObject *kwds) {
    PyObject *schemes, *deny, *domain_of, *patterns, *fallback, *reasons;
    if (!PyArg_ParseTuple(args, "O!nnnO!iOOOO!", &PyTuple_Type, &schemes, &f->max_url_length, &f->max_path_depth,
                          &f->max_segment_repeats, &PyFrozenSet_Type, &deny, &f->scope, &domain_of, &patterns,
                          &fallback, &PyTuple_Type, &reasons))
        return -1;
    if (PyTuple_GET_SIZE(reasons) != 6) { PyErr_SetString(PyExc_ValueError, "six reasons"); return -1; }
    Py_ssize_t i;
    for (i = 0; i < PyTuple_GET_SIZE(schemes); i++) {
        PyObject *s = PyTuple_GET_ITEM(schemes, i);
        if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s)) { PyErr_SetString(PyExc_TypeError, "ASCII schemes"); return -1; }
    }
    Py_INCREF(schemes); Py_XSETREF(f->schemes, schemes);
    Py_INCREF(deny); Py_XSETREF(f->deny_extensions, deny);
    Py_INCREF(domain_of); Py_XSETREF(f->domain_of, domain_of);
    Py_INCREF(patterns); Py_XSETREF(f->patterns, patterns);
    Py_INCREF(fallback); Py_XSETREF(f->fallback, fallback);
    Py_INCREF(reasons); Py_XSETREF(f->reasons, reasons);
    return 0;
}

static PyObject *reason_at(FilterObject *f, int i) {
    PyObject *r = PyTuple_GET_ITEM(f->reasons, i);
    Py_INCREF(r);
    return r;
}

static int segments_equal(const char *s, piece a, piece b) {
    return a.len == b.len && memcmp(s + a.start, s + b.start, a.len) == 0;
}

/* reject_reason(url, source_host) -> None | reason: crawl.net.filters.LinkFilter.reject_reason. */
static PyObject *filter_reject_reason(FilterObject *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "reject_reason(url, source_host)"); return NULL; }
    PyObject *u = args[0], *source = args[1];
    if (!PyUnicode_CheckExact(u) || !PyUnicode_IS_ASCII(u) || !PyUnicode_CheckExact(source))
        return PyObject_Vectorcall(f->fallback, args, nargs, NULL);
    const char *url = (const char *)PyUnicode_1BYTE_DATA(u);
    Py_ssize_t n = PyUnicode_GET_LENGTH(u), i, sep = -1;
    for (i = 0; i + 2 < n; i++)
        if (url[i] == ':' && url[i + 1] == '/' && url[i + 2] == '/') { sep = i; break; }
    if (sep <= 0) return reason_at(f, 0);
    int known = 0;
    for (i = 0; i < PyTuple_GET_SIZE(f->schemes); i++) {
        PyObject *s = PyTuple_GET_ITEM(f->schemes, i);
        if (PyUnicode_GET_LENGTH(s) == sep && memcmp(PyUnicode_1BYTE_DATA(s), url, sep) == 0) { known = 1; break; }
    }
    if (!known) return reason_at(f, 0);
    if (n > f->max_url_length) return reason_at(f, 1);

    Py_ssize_t host_start = sep + 3, end = n, path_start;
    const char *q = memchr(url + host_start, '?', n - host_start);
    if (q) end = q - url;
    const char *slash = memchr(url + host_start, '/', end - host_start);
    path_start = slash ? slash - url : end;

    if (f->scope != 0) {
        PyObject *netloc = ascii_string(url + host_start, path_start - host_start);
        if (netloc == NULL) return NULL;
        int same = PyUnicode_Compare(netloc, source) == 0;
        if (same == 0 && PyErr_Occurred()) { Py_DECREF(netloc); return NULL; }
        if (!same && f->scope == 1) { Py_DECREF(netloc); return reason_at(f, 2); }
        if (!same) {
            PyObject *a = PyObject_CallOneArg(f->domain_of, netloc);
            PyObject *bb = a ? PyObject_CallOneArg(f->domain_of, source) : NULL;
            Py_DECREF(netloc);
            if (bb == NULL) { Py_XDECREF(a); return NULL; }
            int eq = PyObject_RichCompareBool(a, bb, Py_EQ);
            Py_DECREF(a); Py_DECREF(bb);
            if (eq < 0) return NULL;
            if (!eq) return reason_at(f, 2);
        } else {
            Py_DECREF(netloc);
        }
    }

    /* the non-empty path segments */
    piece small[64];
    Py_ssize_t cap = 64, count = 0;
    piece *seg = small;
    Py_ssize_t last_slash = -1;
    i = path_start;
    while (i < end) {
        if (url[i] == '/') { last_slash = i; i++; continue; }
        Py_ssize_t start = i;
        while (i < end && url[i] != '/') i++;
        if (count == cap) {
            piece *bigger = PyMem_Malloc(sizeof(piece) * cap * 4);
            if (bigger == NULL) { if (seg != small) PyMem_Free(seg); return PyErr_NoMemory(); }
            memcpy(bigger, seg, sizeof(piece) * count);
            if (seg != small) PyMem_Free(seg);
            seg = bigger; cap *= 4;
        }
        seg[count].start = start; seg[count].len = i - start; count++;
    }
    PyObject *verdict = NULL;
    if (count > f->max_path_depth) { verdict = reason_at(f, 3); goto done; }

    if (PySet_GET_SIZE(f->deny_extensions) > 0) {
        Py_ssize_t dot = -1;
        for (i = end - 1; i >= path_start; i--)
            if (url[i] == '.') { dot = i; break; }
        if (dot > last_slash) {
            Py_ssize_t m = end - dot - 1;
            PyObject *ext = PyUnicode_New(m, 127);
            if (ext == NULL) goto fail;
            Py_UCS1 *e = PyUnicode_1BYTE_DATA(ext);
            for (i = 0; i < m; i++) {
                unsigned char c = url[dot + 1 + i];
                e[i] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
            }
            int denied = PySet_Contains(f->deny_extensions, ext);
            Py_DECREF(ext);
            if (denied < 0) goto fail;
            if (denied) { verdict = reason_at(f, 4); goto done; }
        }
    }

    /* crawl.net.filters._repeats_too_often */
    {
        Py_ssize_t period, j;
        for (period = 1; period <= 3; period++) {
            Py_ssize_t need = f->max_segment_repeats * period, run = 0;
            if (period + need > count) break;
            for (j = period; j < count; j++) {
                if (segments_equal(url, seg[j], seg[j - period])) {
                    if (++run >= need) { verdict = reason_at(f, 5); goto done; }
                } else {
                    run = 0;
                }
            }
        }
    }
    if (seg != small) PyMem_Free(seg);
    if (f->patterns != Py_None) return PyObject_CallOneArg(f->patterns, u);
    Py_RETURN_NONE;
done:
    if (seg != small) PyMem_Free(seg);
    return verdict;
fail:
    if (seg != small) PyMem_Free(seg);
    return NULL;
}

static PyMethodDef filter_methods[] = {
    {"reject_reason", (PyCFunction)(void (*)(void))filter_reject_reason, METH_FASTCALL,
     "reject_reason(url, source_host) -> None or the reason code (crawl.net.filters.LinkFilter)"},
    {NULL}
};

static PyTypeObject FilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "crawl.net._fasturl.Filter",
    .tp_basicsize = sizeof(FilterObject),
    .tp_dealloc = (destructor)filter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Filter(schemes, max_url_length, max_path_depth, max_segment_repeats, deny_extensions, "
              "scope, domain_of, patterns, fallback, reasons): the checks of LinkFilter.reject_reason",
    .tp_methods = filter_methods,
    .tp_init = (initproc)filter_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------ module */

static PyObject *fast_set_fallback(PyObject *self, PyObject *fn) {
    Py_INCREF(fn);
    Py_XSETREF(PY_FALLBACK_PLAIN, fn);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"plain", (PyCFunction)(void (*)(void))fast_plain, METH_FASTCALL,
     "plain(raw, based, rules) -> str, '' (scheme rejected) or None (general path): crawl.net.urls._plain_py"},
    {"page_links", (PyCFunction)(void (*)(void))fast_page_links, METH_FASTCALL,
     "page_links(hrefs, based, rules, seen, room, rejected, fallback, nofollow) -> room left"},
    {"set_fallback", fast_set_fallback, METH_O,
     "set_fallback(fn): plain() hands non-ASCII input to fn(raw, based, rules)"},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawl.net._fasturl",
    "The per-link hot path of crawl.net.urls and crawl.net.filters in C (see crawl/net/_fasturl.c).", -1, methods
};

PyMODINIT_FUNC PyInit__fasturl(void) {
    init_classes();
    if (PyType_Ready(&FilterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    EMPTY = PyUnicode_New(0, 127);
    S_SCHEME = PyUnicode_InternFromString("scheme");
    S_NOFOLLOW = PyUnicode_InternFromString("nofollow");
    S_OVER_CAP = PyUnicode_InternFromString("over_cap");
    if (!EMPTY || !S_SCHEME || !S_NOFOLLOW || !S_OVER_CAP) return NULL;
    Py_INCREF(&FilterType);
    if (PyModule_AddObject(m, "Filter", (PyObject *)&FilterType) < 0) return NULL;
    return m;
}
