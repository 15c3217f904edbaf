/* crawl._fasthash: the MinHash signature of crawl.fingerprint._signature_of, compiled.
 *
 *   minhash(words, a, b) -> bytes
 *
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

static PyMethodDef methods[] = {
    {"minhash", (PyCFunction)(void (*)(void))minhash, METH_FASTCALL,
     "minhash(words, a, b) -> bytes: crawl.fingerprint's MinHash signature (see crawl/_fasthash.c)"},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawl._fasthash", "crawl.fingerprint's MinHash signature in C.", -1, methods
};

PyMODINIT_FUNC PyInit__fasthash(void) { return PyModule_Create(&module); }
