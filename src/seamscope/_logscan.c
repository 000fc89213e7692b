/* The byte scans of the TORCH_TRACE reader in C (seamscope/ingest/scan.py has the same in Python).
 *
 * Optional: without this module the reader uses the Python versions, which give the same results
 * (tests/test_import_scan.py checks both against each other on real and generated logs).
 *
 * Why it exists: a TORCH_TRACE log is mostly payload lines (a tab, then a line of a JSON or text
 * payload: 150,000 of a 160,000-line eager log), and the reader needs only the other lines, the
 * records. Splitting the whole file into Python objects and looking at the first byte of each
 * cost more than everything else the reader does; here one memchr per line finds the records.
 * The limits prefilter reads a record line once for the two things that can make a decoded record
 * unusable (a run of 20 digits: an integer beyond 64 bits; many brackets: deep nesting), where
 * Python needs a regular expression and two counts (several passes over lines of 40 KB).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define IS_DIGIT(ch) ((ch) >= '0' && (ch) <= '9')

/* The event key of a record line, as the reader takes it: the glog prefix ends with "] {" within
 * the first 400 bytes, then a quoted key. NULL (no key) otherwise. */
static const char *
line_key(const char *line, Py_ssize_t len, Py_ssize_t *key_len)
{
    Py_ssize_t lim = len < 400 ? len : 400;
    for (Py_ssize_t j = 0; j + 3 <= lim; j++) {
        const char *q = memchr(line + j, ']', (size_t)(lim - j));
        if (q == NULL) {
            return NULL;
        }
        j = q - line;
        if (j + 3 > lim) {
            return NULL;
        }
        if (q[1] == ' ' && q[2] == '{') {
            Py_ssize_t k0 = j + 4;
            if (k0 > len || line[k0 - 1] != '"') {
                return NULL;
            }
            const char *k1 = memchr(line + k0, '"', (size_t)(len - k0));
            if (k1 == NULL || k1 == line + k0) {
                return NULL;
            }
            *key_len = k1 - (line + k0);
            return line + k0;
        }
    }
    return NULL;
}

static int
append3(PyObject *list, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c)
{
    Py_ssize_t v[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
        PyObject *o = PyLong_FromSsize_t(v[k]);
        if (o == NULL || PyList_Append(list, o) < 0) {
            Py_XDECREF(o);
            return -1;
        }
        Py_DECREF(o);
    }
    return 0;
}

/* record_lines(buf, end, skip) -> (spans, lines, skipped, last_skipped)
 * Every line of buf[:end] (end just past a newline) that does not start with a tab, as a flat list
 * [start, stop, index, ...] (stop excludes the newline; index counts lines from 0), and the number
 * of lines in buf[:end]. A record whose event key is in the frozenset ``skip`` is left out (counted
 * in ``skipped``; ``last_skipped`` is the index of the last, or -1) unless the line before it that
 * does not start with a tab was given out and is no such record, or is in an earlier buffer: that
 * line's payload ends at it. */
static PyObject *
record_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_lines(buf, end, skip) takes 3 arguments");
        return NULL;
    }
    PyObject *skip = args[2];
    if (!PyFrozenSet_Check(skip)) {
        PyErr_SetString(PyExc_TypeError, "record_lines: skip must be a frozenset of bytes");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[1]);
    if (end == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (end < 0 || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "record_lines: end out of range");
        return NULL;
    }
    PyObject *spans = PyList_New(0);
    if (spans == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *p = (const char *)view.buf;
    Py_ssize_t i = 0, index = 0, skipped = 0, last_skipped = -1;
    /* the last line given out is no skipped kind, so the next one ends its payload; at the start
     * of a buffer the last line given out is unknown (its payload may go on here) */
    int open_payload = 1;
    int empty_skip = PySet_GET_SIZE(skip) == 0;
    while (i < end) {
        const char *nl = memchr(p + i, '\n', (size_t)(end - i));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - p) : end;
        if (p[i] != '\t') {
            int skipped_kind = 0;
            Py_ssize_t klen = 0;
            const char *key = empty_skip ? NULL : line_key(p + i, stop - i, &klen);
            if (key != NULL) {
                PyObject *k = PyBytes_FromStringAndSize(key, klen);
                if (k == NULL) {
                    goto fail;
                }
                skipped_kind = PySet_Contains(skip, k);
                Py_DECREF(k);
                if (skipped_kind < 0) {
                    goto fail;
                }
            }
            if (skipped_kind && !open_payload) {
                skipped++;
                last_skipped = index;
            } else {
                if (append3(spans, i, stop, index) < 0) {
                    goto fail;
                }
                open_payload = !skipped_kind;
            }
        }
        index++;
        i = stop + 1;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nnnn)", spans, index, skipped, last_skipped);
fail:
    Py_DECREF(spans);
    PyBuffer_Release(&view);
    return NULL;
}

/* limits_prefilter(buf, start) -> (long_digits, brackets)
 * Whether buf[start:] holds a run of at least 20 ASCII digits, and how many '[' and '{' it holds. */
static PyObject *
limits_prefilter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "limits_prefilter(buf, start) takes 2 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (start < 0) {
        start = 0;
    }
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len, brackets = 0;
    int long_digits = 0;
    /* A run of 20 digits holds every 20th byte's position at least once: look at those, and
     * measure the run only around a digit found there. */
    Py_ssize_t i = start + 19;
    while (i < len) {
        if (!IS_DIGIT(p[i])) {
            i += 20;
            continue;
        }
        Py_ssize_t lo = i, hi = i;
        while (lo > start && IS_DIGIT(p[lo - 1]) && hi - lo < 19) {
            lo--;
        }
        while (hi + 1 < len && IS_DIGIT(p[hi + 1]) && hi - lo < 19) {
            hi++;
        }
        if (hi - lo >= 19) {
            long_digits = 1;
            break;
        }
        i = hi + 21;
    }
    for (const char *c = "[{"; *c; c++) {
        const unsigned char *q = p + start, *stop = p + len;
        while (q < stop && (q = memchr(q, *c, (size_t)(stop - q))) != NULL) {
            brackets++;
            q++;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(On)", long_digits ? Py_True : Py_False, brackets);
}

/* payload_text(blocks) -> (text, lines)
 * The payload held in ``blocks`` (a list of bytes: payload lines as read, each with its tab,
 * joined by newlines within a block): b"\n".join(blocks)[1:] with each "\n\t" made "\n" (the
 * first line's tab dropped, and every other line's), and the number of lines (newlines in the
 * joined bytes, plus one). In one pass, where Python joins, replaces and counts (three). */
static PyObject *
payload_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "payload_text(blocks) takes a list of bytes");
        return NULL;
    }
    PyObject *blocks = args[0];
    Py_ssize_t nb = PyList_GET_SIZE(blocks), n = nb > 0 ? nb - 1 : 0;
    for (Py_ssize_t k = 0; k < nb; k++) {
        PyObject *b = PyList_GET_ITEM(blocks, k);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "payload_text: blocks must be bytes");
            return NULL;
        }
        n += PyBytes_GET_SIZE(b);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) {
        return NULL;
    }
    char *buf = PyBytes_AS_STRING(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < nb; k++) {  /* the join, in place */
        PyObject *b = PyList_GET_ITEM(blocks, k);
        if (k > 0) {
            buf[at++] = '\n';
        }
        memcpy(buf + at, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        at += PyBytes_GET_SIZE(b);
    }
    /* buf[1:] compacted to the front, each tab after a newline left out (as bytes.replace: left to
     * right, a match resumes the scan after it); every newline is met once, and counted */
    Py_ssize_t lines = (n > 0 && buf[0] == '\n') ? 2 : 1, r = 1, w = 0;
    while (r < n) {
        const char *nl = memchr(buf + r, '\n', (size_t)(n - r));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - buf) + 1 : n;  /* past the newline */
        memmove(buf + w, buf + r, (size_t)(stop - r));
        w += stop - r;
        r = stop;
        if (nl) {
            lines++;
            if (r < n && buf[r] == '\t') {
                r++;
            }
        }
    }
    if (_PyBytes_Resize(&out, w) < 0) {
        return NULL;
    }
    return Py_BuildValue("(Nn)", out, lines);
}

static PyMethodDef module_methods[] = {
    {"record_lines", (PyCFunction)(void (*)(void))record_lines, METH_FASTCALL,
     "record_lines(buf, end, skip) -> (spans, lines, skipped, last_skipped): [start, stop, index, ...] of "
     "each line of buf[:end] that does not start with a tab, less records of the kinds in skip (see the "
     "source), and the number of lines there."},
    {"limits_prefilter", (PyCFunction)(void (*)(void))limits_prefilter, METH_FASTCALL,
     "limits_prefilter(buf, start) -> (long_digits, brackets): whether buf[start:] holds a run of 20 "
     "digits, and its count of '[' and '{'."},
    {"payload_text", (PyCFunction)(void (*)(void))payload_text, METH_FASTCALL,
     "payload_text(blocks) -> (text, lines): b'\\n'.join(blocks)[1:].replace(b'\\n\\t', b'\\n') and the "
     "joined bytes' newlines plus one."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "seamscope._logscan",
    .m_doc = "The TORCH_TRACE reader's byte scans in C (optional: seamscope.ingest.scan has them in Python).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__logscan(void)
{
    return PyModule_Create(&module);
}
