/* crawl.dedup._fasthash: the hot paths of crawl.dedup.fingerprint, compiled, each an exact copy of its
 * numpy original (which stays as reference and fallback; tests/test_fingerprint.py compares):
 *
 *   minhash(words, a, b) -> bytes                 _signature_of_numpy
 *   normalise(cps, classes) -> bytes | None       the array part of _normalised_codepoints_numpy
 *   word_hashes(cps, p) -> bytes                  _word_hashes_numpy
 *
 * minhash:
 * ``words``: uint64 word hashes (any buffer, native order; duplicates allowed); ``a``, ``b``:
 * the k permutation parameters (uint64 buffers of equal length). For every permutation j the
 * result holds min over words w of ((w & 0xFFFFFFFF) * a[j] + b[j] mod 2^64) mod (2^61 - 1)
 * & 0xFFFFFFFF, starting from 0xFFFFFFFF: exactly what the numpy code computes (its uint64
 * arithmetic wraps the same way), as k native-order uint64 values. Like the numpy code (its
 * np.unique), each distinct masked value is hashed once, here found with a hash set. The
 * modulo by the Mersenne prime is a shift and an add instead of a 64-bit division. tests/test_fingerprint.py compares
 * it with the numpy code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MERSENNE61 ((UINT64_C(1) << 61) - 1)
#define MAX32 UINT64_C(0xFFFFFFFF)
#define MAX_PERMUTATIONS 1024

static inline uint64_t mod_mersenne61(uint64_t x) {
    /* x = hi * 2^61 + lo with hi <= 7, and 2^61 = 1 (mod M): x = lo + hi (mod M), < 2M */
    uint64_t r = (x & MERSENNE61) + (x >> 61);
    return r >= MERSENNE61 ? r - MERSENNE61 : r;
}

static PyObject *minhash(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer words, a, b;
    PyObject *result = NULL;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "minhash(words, a, b)");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &words, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &a, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&words); return NULL; }
    if (PyObject_GetBuffer(args[2], &b, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&words); PyBuffer_Release(&a); return NULL;
    }
    if (words.len % 8 || a.len % 8 || a.len != b.len || a.len == 0 || a.len > 8 * MAX_PERMUTATIONS) {
        PyErr_SetString(PyExc_ValueError, "minhash: buffers of uint64, a and b of equal length (1-1024 values)");
        goto done;
    }
    Py_ssize_t n = words.len / 8, k = a.len / 8, i, j;
    result = PyBytes_FromStringAndSize(NULL, a.len);
    if (result == NULL) goto done;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(result);
    uint64_t pa[MAX_PERMUTATIONS], pb[MAX_PERMUTATIONS], mins[MAX_PERMUTATIONS], wi, h;
    memcpy(pa, a.buf, a.len);  /* the buffers need not be 8-byte aligned */
    memcpy(pb, b.buf, b.len);
    for (j = 0; j < k; j++) mins[j] = MAX32;
    /* Each distinct masked value once (a page repeats most of its words): an open-addressing
     * set of the values seen, sized to a power of two >= 2n; slot value 0 marks a free slot,
     * so the value 0 itself is tracked apart. */
    size_t slots = 16;
    while (slots < (size_t)n * 2) slots <<= 1;
    uint32_t *seen = PyMem_Calloc(slots, sizeof(uint32_t));
    if (seen == NULL) { Py_CLEAR(result); PyErr_NoMemory(); goto done; }
    int zero_seen = 0;
    for (i = 0; i < n; i++) {
        memcpy(&wi, (const char *)words.buf + 8 * i, 8);
        wi &= MAX32;
        if (wi == 0) {
            if (zero_seen) continue;
            zero_seen = 1;
        } else {
            size_t slot = (size_t)((wi * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (slots - 1);
            while (seen[slot] != 0 && seen[slot] != (uint32_t)wi) slot = (slot + 1) & (slots - 1);
            if (seen[slot] == (uint32_t)wi) continue;
            seen[slot] = (uint32_t)wi;
        }
        for (j = 0; j < k; j++) {
            h = mod_mersenne61(wi * pa[j] + pb[j]) & MAX32;
            if (h < mins[j]) mins[j] = h;
        }
    }
    PyMem_Free(seen);
    memcpy(out, mins, a.len);
done:
    PyBuffer_Release(&words); PyBuffer_Release(&a); PyBuffer_Release(&b);
    return result;
}


/* ---------------------------------------------------------------------- normalisation */

#define CLASS_SEP 0
#define CLASS_DIGIT 2
#define SPACE 32
#define ZERO 48

/* normalise(cps, classes) -> bytes | None
 *
 * ``cps``: the NFKC-casefold-NFKC text as native uint32 code points; ``classes``: the 65,536
 * BMP classes (uint8: 0 separator, 1 word, 2 digit). Returns the normalised code points as
 * native uint32 bytes: separators become one space and digits one "0" per run, no space at
 * either end, and a run of "0" words ("2024 03 05") is merged into one. None when a code point
 * lies outside the BMP: the numpy code classifies those. */
static PyObject *normalise(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer in, table;
    PyObject *result = NULL;
    uint32_t *out = NULL;
    unsigned char *zero_word = NULL;
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "normalise(cps, classes)"); return NULL; }
    if (PyObject_GetBuffer(args[0], &in, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &table, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&in); return NULL; }
    if (in.len % 4 || table.len != 0x10000) {
        PyErr_SetString(PyExc_ValueError, "normalise: uint32 code points and 65536 classes");
        goto done;
    }
    Py_ssize_t n = in.len / 4, i, k = 0;
    const unsigned char *classes = table.buf;
    out = PyMem_Malloc(n ? n * 4 : 1);
    if (out == NULL) { PyErr_NoMemory(); goto done; }
    int prev_sep = 0, prev_digit = 0;
    for (i = 0; i < n; i++) {  /* classify; keep a character unless it continues a run */
        uint32_t c;
        memcpy(&c, (const char *)in.buf + 4 * i, 4);
        if (c >= 0x10000) { result = Py_None; Py_INCREF(result); goto done; }
        unsigned char cls = classes[c];
        int sep = cls == CLASS_SEP, digit = cls == CLASS_DIGIT;
        int drop = i > 0 && ((sep && prev_sep) || (digit && prev_digit));
        prev_sep = sep; prev_digit = digit;
        if (!drop) out[k++] = sep ? SPACE : digit ? ZERO : c;
    }
    Py_ssize_t start = 0, end = k;
    if (end > start && out[start] == SPACE) start++;
    if (end > start && out[end - 1] == SPACE) end--;
    uint32_t *o = out + start;
    Py_ssize_t m = end - start, kept = m;
    if (m > 2) {
        /* a "0" word is a "0" between spaces (or an end); of two "0" words two apart ("0 0"),
         * the second and the space before it go */
        zero_word = PyMem_Malloc(m);
        if (zero_word == NULL) { PyErr_NoMemory(); goto done; }
        for (i = 0; i < m; i++)
            zero_word[i] = o[i] == ZERO && (i == 0 || o[i - 1] == SPACE) && (i == m - 1 || o[i + 1] == SPACE);
        kept = 0;
        for (i = 0; i < m; i++) {
            int repeat = i >= 2 && zero_word[i] && zero_word[i - 2];
            int next_repeat = i + 1 < m && i + 1 >= 2 && zero_word[i + 1] && zero_word[i - 1];
            if (!(repeat || next_repeat)) o[kept++] = o[i];
        }
    }
    result = PyBytes_FromStringAndSize((const char *)o, kept * 4);
done:
    PyMem_Free(out);
    PyMem_Free(zero_word);
    PyBuffer_Release(&in); PyBuffer_Release(&table);
    return result;
}

static inline uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= UINT64_C(0xFF51AFD7ED558CCD);
    h ^= h >> 33;
    h *= UINT64_C(0xC4CEB9FE1A85EC53);
    return h ^ (h >> 33);
}

/* word_hashes(cps, p) -> bytes
 *
 * One uint64 per word of normalised code points (single spaces, none at either end): MurmurHash3's
 * finaliser of sum over the word's characters c_j of c_j * p^(j - start + 1) mod 2^64, as the
 * numpy code gets it from prefix sums and inverse powers. */
static PyObject *word_hashes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer in;
    PyObject *result = NULL;
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "word_hashes(cps, p)"); return NULL; }
    uint64_t p = PyLong_AsUnsignedLongLong(args[1]);
    if (p == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    if (PyObject_GetBuffer(args[0], &in, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (in.len % 4) { PyErr_SetString(PyExc_ValueError, "word_hashes: uint32 code points"); goto done; }
    Py_ssize_t n = in.len / 4, i, words = 0;
    const char *buf = in.buf;
    uint32_t c, prev = SPACE;
    for (i = 0; i < n; i++) {
        memcpy(&c, buf + 4 * i, 4);
        if (c != SPACE && prev == SPACE) words++;
        prev = c;
    }
    result = PyBytes_FromStringAndSize(NULL, words * 8);
    if (result == NULL) goto done;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(result), h = 0, power = p;
    Py_ssize_t w = -1;
    prev = SPACE;
    for (i = 0; i < n; i++) {
        memcpy(&c, buf + 4 * i, 4);
        if (c != SPACE && prev == SPACE) {  /* a word starts: finish the last one */
            if (w >= 0) out[w] = fmix64(h);
            w++;
            h = 0;
            power = p;
        }
        if (w >= 0) {  /* a space inside the segment weighs 0 but still advances the power */
            if (c != SPACE) h += (uint64_t)c * power;
            power *= p;
        }
        prev = c;
    }
    if (w >= 0) out[w] = fmix64(h);
done:
    PyBuffer_Release(&in);
    return result;
}

static PyMethodDef methods[] = {
    {"minhash", (PyCFunction)(void (*)(void))minhash, METH_FASTCALL,
     "minhash(words, a, b) -> bytes: crawl.dedup.fingerprint's MinHash signature (see crawl/dedup/_fasthash.c)"},
    {"normalise", (PyCFunction)(void (*)(void))normalise, METH_FASTCALL,
     "normalise(cps, classes) -> bytes | None: crawl.dedup.fingerprint's code-point normalisation"},
    {"word_hashes", (PyCFunction)(void (*)(void))word_hashes, METH_FASTCALL,
     "word_hashes(cps, p) -> bytes: crawl.dedup.fingerprint's word hashes"},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawl.dedup._fasthash", "crawl.dedup.fingerprint's hot paths in C.", -1, methods
};

PyMODINIT_FUNC PyInit__fasthash(void) { return PyModule_Create(&module); }
