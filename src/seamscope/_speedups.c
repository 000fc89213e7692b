/* seamscope's hot path in C: steady calls opened, timed and summed without Python objects.
 *
 * Optional. Without this module (no compiler at install time, another clock) capture and the
 * builder use their pure-Python path (the wrappers of capture/calls.py and capture/regions.py,
 * model.builder_account.sum_fast), and tests/test_native.py checks both give the same figures.
 *
 * Why it exists: the Python path costs about 1 microsecond per region crossing plus 5-10 per call
 * on a slow 2-core machine, mostly cache misses in Python code that runs once between two long
 * stretches of torch's own work; that is 5-8% of a 0.25 ms call with 8 regions. Here a steady call
 * allocates nothing per crossing: C records (start, end, bookkeeping end, compile id) into a
 * buffer and, when the call ends, adds them to the sums of the call's structure (its plan).
 *
 * Who does what:
 * - CallTracker: one per compiled callable, behind a two-line Python shim (Dynamo must see a
 *   Python function). Opens the call in the lane, calls the compiled callable, closes the call and
 *   runs the session's callbacks; hands every call it cannot open to the Python wrapper.
 * - Lane: one per session. enter() opens a call if none is open; exit() closes it. While the
 *   builder's ``budget`` lasts, a call whose structure is known and whose records are in order is
 *   summed into its PlanSums. Any other (the call due in detail, with seam traffic sampled; an
 *   error; a new structure; one the builder adopted because it compiled or fell back) goes to
 *   ``slow_end`` as a list of span tuples, the builder's own format.
 * - RegionTimer: one per compiled graph. Records into the lane's buffer during a call C opened,
 *   appends a span tuple to ``lane.spans`` during a call the builder opened and does not keep in
 *   detail, else calls the Python wrapper (``slow``). Once told a graph's compiled backward is
 *   timed, it labels each output's autograd node with the call C opened, itself.
 * - BackwardTimer: one per compiled backward (an AOT CompiledFunction's). Times each run; hands
 *   the first ones to the builder's Python sink, then counts and sums the rest for it to take.
 * - ContextEnter: the session's entry hook on a compile context; a call nested in the one the
 *   lane opened (a compiled module's forward) returns its no-op exit without a Python frame.
 * - PlanSums: per span position, the sums, minimum and maximum of the durations, the islands
 *   before each position, and the call totals, until the builder takes them.
 *
 * Every time is on CLOCK_MONOTONIC's timeline, the clock time.perf_counter_ns() reads on Linux; the
 * Python side uses this module only after checking that (seamscope/_native.py). Inside a call C
 * opened, C may read the time stamp counter instead (set_ticks, where the kernel's clocksource is
 * the TSC) and maps those ticks onto CLOCK_MONOTONIC between two reads of it: the call's start and
 * its end (or the moment the builder adopts it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stddef.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#define HAVE_TICKS 1
#else
#define HAVE_TICKS 0
#endif

/* The layout of a span tuple, the builder's format: defined in seamscope/model/spans.py and
 * mirrored here (SPAN_LAYOUT exposes these; tests/test_native.py checks both agree). Items 0-3 are
 * the same for every kind; item 3 is the span's part of the call's structure key (a region's
 * compile id, "o" for overhead). */
#define SPAN_KIND 0
#define SPAN_START 1
#define SPAN_END 2
#define SPAN_KEY 3
#define SPAN_GRAPH_INDEX 4
#define SPAN_OUT_TENSORS 5
#define SPAN_OUT_BYTES 6
#define SPAN_BOOK_END 7
#define SPAN_COMPILE_ID 4
#define SPAN_REGION_LEN 8
#define SPAN_COMPILATION_LEN 5
#define SPAN_OVERHEAD_LEN 4

static PyObject *str_r; /* "r", the kind of a region span */
static PyObject *str_o; /* "o", seamscope's own overhead */
static PyObject *str_grad_fn;
static PyObject *str_nbytes;
static PyObject *str_seamscope_call; /* the attribute a forward's autograd node carries its call in */

static inline long long
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec;
}

/* The time stamp counter: a third of clock_gettime's cost, read up to 27 times a steady call.
 * Used only where the kernel itself keeps CLOCK_MONOTONIC on it (_native checks), and only
 * between two clock_gettime anchors per call, onto whose timeline every tick is mapped. */
static int use_ticks = 0;

static inline long long
now_ticks(void)
{
#if HAVE_TICKS
    return (long long)__rdtsc();
#else
    return now_ns();
#endif
}

/* t (ticks) on the line through (t0, n0) and (t1, n1), ticks to nanoseconds. */
static inline long long
tick_to_ns(long long t, long long t0, long long n0, long long t1, long long n1)
{
    if (t <= t0 || t1 <= t0) {
        return n0;
    }
    return n0 + (long long)((double)(t - t0) * ((double)(n1 - n0) / (double)(t1 - t0)) + 0.5);
}

static PyObject *
set_ticks(PyObject *module, PyObject *flag)
{
    (void)module;
    int on = PyObject_IsTrue(flag);
    if (on < 0) {
        return NULL;
    }
    use_ticks = on && HAVE_TICKS;
    return PyBool_FromLong(use_ticks);
}

static PyObject *
clock_ns(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLongLong(now_ns());
}

/* A time as a C integer; 0 on anything else (the call then takes the exact Python path). */
static inline int
as_ns(PyObject *v, long long *out)
{
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* One span of a call C opened. cid NULL: seamscope's own overhead (s..e); else a region that ran
 * s..e, followed by seamscope's bookkeeping until c. */
typedef struct {
    long long s, e, c;
    long long n, nb; /* seam traffic: tensors and bytes the region handed back (-1: not sampled) */
    PyObject *cid; /* owned */
    PyObject *gi;  /* owned */
} Rec;

/* --- PlanSums ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    char *region;      /* per position: 1 a region, 0 seamscope's overhead */
    long long calls, wall, island, overhead;
    long long *gap;    /* n + 1: the island before each position, then the one after the last */
    long long *dsum, *dmin, *dmax;
    long long *stage;  /* 3n + 1 scratch: a call is checked in full before anything is added */
} PlanSums;

static PyTypeObject PlanSumsType;

static void
sums_reset(PlanSums *self)
{
    self->calls = self->wall = self->island = self->overhead = 0;
    for (Py_ssize_t i = 0; i <= self->n; i++) {
        self->gap[i] = 0;
    }
    for (Py_ssize_t i = 0; i < self->n; i++) {
        self->dsum[i] = 0;
        self->dmin[i] = LLONG_MAX;
        self->dmax[i] = 0;
    }
}

/* Add one call (1), or nothing when any span would need clamping (0): a span starting before
 * the previous one's bookkeeping ended, ending before it starts, bookkeeping ending before its
 * region, or anything ending after the call. Then the sums are exactly model.builder_account.sum_fast's. */
static int
plan_add(PlanSums *self, const Rec *rec, Py_ssize_t n, long long start, long long end)
{
    if (n != self->n) {
        return 0;
    }
    long long *dur = self->stage, *book = self->stage + n, *gap = self->stage + 2 * n;
    long long cursor = start;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &rec[i];
        if ((r->cid != NULL) != self->region[i]) {
            return 0;
        }
        long long c = self->region[i] ? r->c : r->e;
        if (r->s < cursor || r->e < r->s || c < r->e) {
            return 0;
        }
        gap[i] = r->s - cursor;
        dur[i] = r->e - r->s;
        book[i] = c - r->e;
        cursor = c;
    }
    if (end < cursor) {
        return 0;
    }
    gap[n] = end - cursor;
    long long island = 0, overhead = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        island += gap[i];
        self->gap[i] += gap[i];
        if (self->region[i]) {
            long long d = dur[i];
            self->dsum[i] += d;
            if (d < self->dmin[i]) {
                self->dmin[i] = d;
            }
            if (d > self->dmax[i]) {
                self->dmax[i] = d;
            }
            overhead += book[i];
        }
        else {
            overhead += dur[i];
        }
    }
    island += gap[n];
    self->gap[n] += gap[n];
    self->calls += 1;
    self->wall += end - start;
    self->island += island;
    self->overhead += overhead;
    return 1;
}

static void
sums_dealloc(PlanSums *self)
{
    PyMem_Free(self->region);
    PyMem_Free(self->gap);
    PyMem_Free(self->dsum);
    PyMem_Free(self->dmin);
    PyMem_Free(self->dmax);
    PyMem_Free(self->stage);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
sums_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"kinds", NULL};
    const char *kinds;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s#:PlanSums", kwlist, &kinds, &n)) {
        return NULL;
    }
    PlanSums *self = (PlanSums *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->n = n;
    self->region = PyMem_Malloc(n + 1);
    self->gap = PyMem_Malloc(sizeof(long long) * (n + 1));
    self->dsum = PyMem_Malloc(sizeof(long long) * (n + 1));
    self->dmin = PyMem_Malloc(sizeof(long long) * (n + 1));
    self->dmax = PyMem_Malloc(sizeof(long long) * (n + 1));
    self->stage = PyMem_Malloc(sizeof(long long) * (3 * n + 2));
    if (!self->region || !self->gap || !self->dsum || !self->dmin || !self->dmax || !self->stage) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kinds[i] != 'r' && kinds[i] != 'o') {
            Py_DECREF(self);
            PyErr_SetString(PyExc_ValueError, "PlanSums: kinds are 'r' (region) or 'o' (overhead)");
            return NULL;
        }
        self->region[i] = kinds[i] == 'r';
    }
    sums_reset(self);
    return (PyObject *)self;
}

/* Span tuples (the builder's format) to records; 0 when any is not of the expected shape. The
 * records borrow their cid and gi (the list outlives them). */
static int
recs_from_list(PyObject *spans, Rec *rec, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sp = PyList_GET_ITEM(spans, i);
        if (!PyTuple_CheckExact(sp) || PyTuple_GET_SIZE(sp) < SPAN_OVERHEAD_LEN) {
            return 0;
        }
        PyObject *kind = PyTuple_GET_ITEM(sp, SPAN_KIND);
        if (!PyUnicode_Check(kind)) {
            return 0;
        }
        int region = kind != str_o && PyUnicode_CompareWithASCIIString(kind, "o") != 0;
        if (region && PyTuple_GET_SIZE(sp) < SPAN_REGION_LEN) {
            return 0;
        }
        if (!as_ns(PyTuple_GET_ITEM(sp, SPAN_START), &rec[i].s) || !as_ns(PyTuple_GET_ITEM(sp, SPAN_END), &rec[i].e)) {
            return 0;
        }
        if (region) {
            if (!as_ns(PyTuple_GET_ITEM(sp, SPAN_BOOK_END), &rec[i].c)) {
                return 0;
            }
            rec[i].cid = PyTuple_GET_ITEM(sp, SPAN_KEY);
        }
        else {
            rec[i].c = rec[i].e;
            rec[i].cid = NULL;
        }
        rec[i].gi = NULL;
        rec[i].n = rec[i].nb = -1;
    }
    return 1;
}

static PyObject *
sums_add(PlanSums *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long start, end;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add(spans, start, end)");
        return NULL;
    }
    PyObject *spans = args[0];
    if (!PyList_CheckExact(spans) || !as_ns(args[1], &start) || !as_ns(args[2], &end)) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t n = PyList_GET_SIZE(spans);
    Rec *rec = PyMem_Malloc(sizeof(Rec) * (n + 1));
    if (rec == NULL) {
        return PyErr_NoMemory();
    }
    int ok = recs_from_list(spans, rec, n) && plan_add(self, rec, n, start, end);
    PyMem_Free(rec);
    return PyBool_FromLong(ok);
}

static PyObject *
list_of(const long long *v, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, x);
    }
    return list;
}

static PyObject *
sums_take(PlanSums *self, PyObject *unused)
{
    (void)unused;
    Py_ssize_t n = self->n;
    PyObject *gaps = list_of(self->gap, n + 1);
    PyObject *dsum = list_of(self->dsum, n);
    PyObject *dmin = list_of(self->dmin, n);
    PyObject *dmax = list_of(self->dmax, n);
    PyObject *res = NULL;
    if (gaps && dsum && dmin && dmax) {
        res = Py_BuildValue("(LLLLOOOO)", self->calls, self->wall, self->island, self->overhead, gaps,
                            dsum, dmin, dmax);
    }
    Py_XDECREF(gaps);
    Py_XDECREF(dsum);
    Py_XDECREF(dmin);
    Py_XDECREF(dmax);
    if (res != NULL) {
        sums_reset(self);
    }
    return res;
}

static PyObject *
sums_get_calls(PlanSums *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(self->calls);
}

static PyMethodDef sums_methods[] = {
    {"add", (PyCFunction)(void (*)(void))sums_add, METH_FASTCALL,
     "add(spans, start, end) -> bool: add one call given as span tuples; False (nothing added) "
     "when a span would need clamping, a time is not an int64, or the shape differs."},
    {"take", (PyCFunction)sums_take, METH_NOARGS,
     "take() -> (calls, wall, island, overhead, gaps[n+1], dur_sum[n], dur_min[n], dur_max[n]), "
     "and start again from zero."},
    {NULL},
};

static PyGetSetDef sums_getset[] = {
    {"calls", (getter)sums_get_calls, NULL, "calls added since the last take()", NULL},
    {NULL},
};

static PyTypeObject PlanSumsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.PlanSums",
    .tp_basicsize = sizeof(PlanSums),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PlanSums(kinds): the durations of steady calls of one structure, per span position.",
    .tp_new = sums_new,
    .tp_dealloc = (destructor)sums_dealloc,
    .tp_methods = sums_methods,
    .tp_getset = sums_getset,
};

/* --- Lane ---------------------------------------------------------------------------------- */

#define LANE_WALL_BUCKETS 32

typedef struct {
    PyObject_HEAD
    PyObject *spans;    /* a call the builder opened and does not keep in detail: its span list */
    PyObject *plans;    /* dict: a call's structure key -> PlanSums (the builder fills it) */
    PyObject *slow_end; /* slow_end(spans, start, end, error): the builder ends the call */
    PyObject *tensor_type; /* the type whose instances count as seam traffic (torch.Tensor), or None */
    long long start;    /* the start of the call C opened */
    Py_ssize_t budget;  /* calls C may still sum before one is due in detail */
    Py_ssize_t fast_calls; /* calls C summed that the builder has not counted yet */
    char keep_detail;   /* with no budget left, C opens the call due in detail and hands it over whole */
    char ready;         /* CallTracker may open calls here (the session is active, no family label) */
    char ticks;         /* the open call's records are in ticks (start_tick .. ), not nanoseconds */
    char claimed;       /* the builder's (Python) path holds the lane for a call on tstate */
    long long start_tick; /* the tick read right after start */
    long long adopt_tick, adopt_ns; /* the anchor at adoption: a region running then converts with it */
    PyObject *last_key;  /* the structure key of the last call summed here, and its PlanSums: */
    PyObject *last_plan; /* the next call with the same spans skips building and looking up a key */
    PyObject *last_plans; /* ... valid while plans is this dict (the builder replaces, never clears it) */
    PyThreadState *tstate; /* the thread whose call is open (C's, or the builder's with spans set) */
    Py_ssize_t foreign_calls; /* calls made on another thread while one was open: not observed */
    Py_ssize_t call_base; /* the builder's count of calls: the open call C opened is call_base + fast_calls */
    char label_nodes;     /* region timers label autograd nodes with their call (off once no backward is listed) */
    PyObject *outside_run; /* outside_run(compile_id, ns): a graph run on another thread, or NULL */
    PyObject *foreign_exit; /* foreign_exit(): after a call made on another thread returned, or NULL */
    PyObject *owner;    /* the session: what on_call_end callbacks are called with */
    PyObject *callbacks; /* list: called after each call a CallTracker closed, or NULL */
    PyObject *error_text; /* error_text(exception) -> str: the error of a call that raised */
    char open;          /* a call C opened is open (recording, or adopted) */
    char recording;     /* ... and its regions go to rec (else to spans: adopted) */
    char detail;        /* ... and it is due in detail: seam traffic sampled, never summed here */
    Rec *rec;
    Py_ssize_t n_rec, cap_rec;
    /* watch mode: a histogram of the wall time of the calls C summed (off while n_wall is 0) */
    long long wall_bounds[LANE_WALL_BUCKETS]; /* upper bounds (ns, inclusive), ascending */
    unsigned long long wall_counts[LANE_WALL_BUCKETS + 1]; /* the last: above every bound */
    long long wall_sum;
    Py_ssize_t n_wall;
} Lane;

static void
lane_drop_recs(Lane *self)
{
    for (Py_ssize_t i = 0; i < self->n_rec; i++) {
        Py_XDECREF(self->rec[i].cid);
        Py_XDECREF(self->rec[i].gi);
    }
    self->n_rec = 0;
}

static Rec *
lane_next_rec(Lane *self)
{
    if (self->n_rec == self->cap_rec) {
        Py_ssize_t cap = self->cap_rec ? 2 * self->cap_rec : 32;
        Rec *grown = PyMem_Realloc(self->rec, sizeof(Rec) * cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->rec = grown;
        self->cap_rec = cap;
    }
    return &self->rec[self->n_rec++];
}

/* The open call's records from ticks to nanoseconds, on the line through the call's start and
 * (tick, ns) read now. */
static void
lane_recs_to_ns(Lane *self, long long tick, long long ns)
{
    if (!self->ticks) {
        return;
    }
    long long t0 = self->start_tick, n0 = self->start;
    for (Py_ssize_t i = 0; i < self->n_rec; i++) {
        Rec *r = &self->rec[i];
        r->s = tick_to_ns(r->s, t0, n0, tick, ns);
        r->e = tick_to_ns(r->e, t0, n0, tick, ns);
        r->c = tick_to_ns(r->c, t0, n0, tick, ns);
    }
    self->ticks = 0;
}

/* The records as the builder's span tuples (Py_BuildValue writes the items in SPAN_* order). */
#if SPAN_KIND != 0 || SPAN_START != 1 || SPAN_END != 2 || SPAN_KEY != 3 || SPAN_GRAPH_INDEX != 4 \
    || SPAN_OUT_TENSORS != 5 || SPAN_OUT_BYTES != 6 || SPAN_BOOK_END != 7 || SPAN_REGION_LEN != 8 \
    || SPAN_OVERHEAD_LEN != 4
#error "lane_spans_of_recs builds span tuples in this order: update it with the layout"
#endif
static PyObject *
lane_spans_of_recs(Lane *self)
{
    PyObject *list = PyList_New(self->n_rec);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->n_rec; i++) {
        Rec *r = &self->rec[i];
        PyObject *sp;
        if (r->cid == NULL) {
            sp = Py_BuildValue("(OLLO)", str_o, r->s, r->e, str_o);
        }
        else if (r->n < 0) {
            sp = Py_BuildValue("(OLLOOOOL)", str_r, r->s, r->e, r->cid, r->gi, Py_None, Py_None, r->c);
        }
        else {
            sp = Py_BuildValue("(OLLOOLLL)", str_r, r->s, r->e, r->cid, r->gi, r->n, r->nb, r->c);
        }
        if (sp == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, sp);
    }
    return list;
}

static int
lane_traverse(Lane *self, visitproc visit, void *arg)
{
    Py_VISIT(self->spans);
    Py_VISIT(self->plans);
    Py_VISIT(self->slow_end);
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->owner);
    Py_VISIT(self->callbacks);
    Py_VISIT(self->error_text);
    Py_VISIT(self->last_key);
    Py_VISIT(self->last_plan);
    Py_VISIT(self->last_plans);
    Py_VISIT(self->outside_run);
    Py_VISIT(self->foreign_exit);
    for (Py_ssize_t i = 0; i < self->n_rec; i++) {
        Py_VISIT(self->rec[i].cid);
        Py_VISIT(self->rec[i].gi);
    }
    return 0;
}

static int
lane_clear(Lane *self)
{
    Py_CLEAR(self->spans);
    Py_CLEAR(self->plans);
    Py_CLEAR(self->slow_end);
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->callbacks);
    Py_CLEAR(self->error_text);
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_plan);
    Py_CLEAR(self->last_plans);
    Py_CLEAR(self->outside_run);
    Py_CLEAR(self->foreign_exit);
    lane_drop_recs(self);
    self->open = self->recording = self->detail = self->ready = 0;
    return 0;
}

static void
lane_dealloc(Lane *self)
{
    PyObject_GC_UnTrack(self);
    lane_clear(self);
    PyMem_Free(self->rec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Open a call here: 1, or 0 when the builder must open this one, or -1 on error. */
static int
lane_open_call(Lane *self)
{
    if (self->open || self->claimed || (self->spans != NULL && self->spans != Py_None)
        || (self->budget <= 0 && !self->keep_detail)
        || self->plans == NULL || !PyDict_CheckExact(self->plans) || self->slow_end == NULL) {
        return 0;
    }
    long long t0 = now_ns();
    lane_drop_recs(self);
    Rec *r = lane_next_rec(self);
    if (r == NULL) {
        return -1;
    }
    self->start = t0;
    self->tstate = PyThreadState_Get();
    self->ticks = (char)use_ticks;
    self->detail = self->budget <= 0;
    if (!self->detail) {
        self->budget -= 1;
    }
    self->open = self->recording = 1;
    r->n = r->nb = -1;
    r->cid = r->gi = NULL;
    if (self->ticks) {
        self->start_tick = r->s = now_ticks();
        r->e = r->c = now_ticks(); /* opening the call is seamscope's time, not an island */
    }
    else {
        r->s = t0;
        r->e = r->c = now_ns();
    }
    return 1;
}

static PyObject *
lane_enter(Lane *self, PyObject *unused)
{
    (void)unused;
    int opened = lane_open_call(self);
    if (opened < 0) {
        return NULL;
    }
    return PyBool_FromLong(opened);
}

/* The builder takes over the call C opened: the records become its span list, and the regions
 * still to run append to it. Returns that list, or None when C has no call open to give. */
static PyObject *
lane_adopt(Lane *self, PyObject *unused)
{
    (void)unused;
    if (!self->open || !self->recording) {
        Py_RETURN_NONE;
    }
    if (self->ticks) {
        self->adopt_tick = now_ticks();
        self->adopt_ns = now_ns();
        lane_recs_to_ns(self, self->adopt_tick, self->adopt_ns);
        self->ticks = 1; /* kept for the region running now: it converts with the adopt anchor */
    }
    PyObject *list = lane_spans_of_recs(self);
    if (list == NULL) {
        return NULL;
    }
    lane_drop_recs(self);
    self->recording = 0;
    Py_INCREF(list);
    Py_XSETREF(self->spans, list);
    return list;
}

/* The PlanSums of the open call's structure (borrowed), or NULL (none, or an error set). The last
 * one found is kept with its key: a steady loop repeats one structure, whose key then needs no
 * tuple, hash or lookup, only a comparison of the region ids by identity. */
static PyObject *
lane_plan(Lane *self)
{
    Py_ssize_t n = self->n_rec;
    PyObject *key = self->last_key;
    if (key != NULL && self->last_plans == self->plans && PyTuple_GET_SIZE(key) == n) {
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            PyObject *k = self->rec[i].cid ? self->rec[i].cid : str_o;
            if (PyTuple_GET_ITEM(key, i) != k) {
                break;
            }
        }
        if (i == n) {
            return self->last_plan;
        }
    }
    key = PyTuple_New(n);
    if (key == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = self->rec[i].cid ? self->rec[i].cid : str_o;
        Py_INCREF(k);
        PyTuple_SET_ITEM(key, i, k);
    }
    PyObject *plan = PyDict_GetItemWithError(self->plans, key);
    if (plan == NULL || !Py_IS_TYPE(plan, &PlanSumsType)) {
        Py_DECREF(key);
        return NULL;
    }
    Py_XSETREF(self->last_key, key);
    Py_INCREF(plan);
    Py_XSETREF(self->last_plan, plan);
    Py_INCREF(self->plans);
    Py_XSETREF(self->last_plans, self->plans);
    return plan;
}

static PyObject *
lane_exit(Lane *self, PyObject *error)
{
    long long end_tick = self->open && self->recording && self->ticks ? now_ticks() : 0;
    long long end = now_ns();
    if (!self->open) {
        Py_RETURN_NONE; /* nothing C opened is open: the builder ended it already (interrupted) */
    }
    self->open = 0;
    PyObject *spans;
    if (self->recording) {
        self->recording = 0;
        lane_recs_to_ns(self, end_tick, end);
        if (error == Py_None && !self->detail) {
            PyObject *plan = lane_plan(self);
            if (plan == NULL && PyErr_Occurred()) {
                lane_drop_recs(self);
                return NULL;
            }
            if (plan != NULL && plan_add((PlanSums *)plan, self->rec, self->n_rec, self->start, end)) {
                self->fast_calls += 1;
                if (self->n_wall) {
                    long long wall = end - self->start;
                    Py_ssize_t i = 0;
                    while (i < self->n_wall && wall > self->wall_bounds[i]) {
                        i++;
                    }
                    self->wall_counts[i] += 1;
                    self->wall_sum += wall;
                }
                lane_drop_recs(self);
                Py_RETURN_NONE;
            }
        }
        spans = lane_spans_of_recs(self); /* a new structure, out of order, or an error */
        lane_drop_recs(self);
        if (spans == NULL) {
            return NULL;
        }
    }
    else { /* adopted: the builder's list */
        spans = self->spans;
        Py_INCREF(Py_None);
        self->spans = Py_None;
        if (spans == NULL || !PyList_CheckExact(spans)) {
            Py_XDECREF(spans);
            Py_RETURN_NONE;
        }
    }
    PyObject *r = PyObject_CallFunction(self->slow_end, "OLLO", spans, self->start, end, error);
    Py_DECREF(spans);
    return r;
}

static PyObject *
lane_get_open(Lane *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->open);
}

/* Whether the call open here (C's or the builder's) was opened on the calling thread. */
static PyObject *
lane_get_here(Lane *self, void *closure)
{
    (void)closure;
    int busy = self->open || self->claimed || (self->spans != NULL && self->spans != Py_None);
    return PyBool_FromLong(busy && self->tstate == PyThreadState_Get());
}

/* The Python path's open-call slot: taken in one C call, so that two threads cannot both find the
 * lane free and open a call. */
static PyObject *
lane_claim(Lane *self, PyObject *unused)
{
    (void)unused;
    if (self->open || self->claimed || (self->spans != NULL && self->spans != Py_None)) {
        Py_RETURN_FALSE;
    }
    self->claimed = 1;
    self->tstate = PyThreadState_Get();
    Py_RETURN_TRUE;
}

static PyObject *
lane_release(Lane *self, PyObject *unused)
{
    (void)unused;
    self->claimed = 0;
    Py_RETURN_NONE;
}

/* Watch mode: count the wall time of each call C sums into buckets (no Python per call). */
static PyObject *
lane_set_wall_buckets(Lane *self, PyObject *bounds)
{
    PyObject *seq = PySequence_Fast(bounds, "set_wall_buckets: a sequence of ints (ns)");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > LANE_WALL_BUCKETS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "set_wall_buckets: at most %d bounds", LANE_WALL_BUCKETS);
        return NULL;
    }
    long long b[LANE_WALL_BUCKETS];
    for (Py_ssize_t i = 0; i < n; i++) {
        b[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (b[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (i > 0 && b[i] <= b[i - 1]) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "set_wall_buckets: bounds must ascend");
            return NULL;
        }
    }
    Py_DECREF(seq);
    memcpy(self->wall_bounds, b, sizeof(long long) * (size_t)n);
    memset(self->wall_counts, 0, sizeof(self->wall_counts));
    self->wall_sum = 0;
    self->n_wall = n;
    Py_RETURN_NONE;
}

static PyObject *
lane_wall_histogram(Lane *self, PyObject *unused)
{
    (void)unused;
    PyObject *counts = PyTuple_New(self->n_wall + 1);
    if (counts == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i <= self->n_wall; i++) {
        PyObject *c = PyLong_FromUnsignedLongLong(self->wall_counts[i]);
        if (c == NULL) {
            Py_DECREF(counts);
            return NULL;
        }
        PyTuple_SET_ITEM(counts, i, c);
    }
    return Py_BuildValue("(NL)", counts, self->wall_sum);
}

static PyMethodDef lane_methods[] = {
    {"set_wall_buckets", (PyCFunction)lane_set_wall_buckets, METH_O,
     "set_wall_buckets(bounds_ns): count each summed call's wall time per bucket (empty: off); resets the counts."},
    {"wall_histogram", (PyCFunction)lane_wall_histogram, METH_NOARGS,
     "wall_histogram() -> (counts, sum_ns): per bucket (the last above every bound), since set_wall_buckets."},
    {"claim", (PyCFunction)lane_claim, METH_NOARGS,
     "claim() -> bool: hold the lane for a call the builder opens on this thread (False: busy)."},
    {"release", (PyCFunction)lane_release, METH_NOARGS, "release(): the builder's call ended."},
    {"enter", (PyCFunction)lane_enter, METH_NOARGS,
     "enter() -> bool: open a call here, summed or due in detail (False: the builder must open this one)."},
    {"exit", (PyCFunction)lane_exit, METH_O,
     "exit(error: str | None): close the call enter() opened; sum it, or hand it to slow_end."},
    {"adopt", (PyCFunction)lane_adopt, METH_NOARGS,
     "adopt() -> list | None: the open call's spans, from now on the builder's."},
    {NULL},
};

static PyMemberDef lane_members[] = {
    {"foreign_calls", T_PYSSIZET, offsetof(Lane, foreign_calls), 0,
     "Calls made on another thread while a call was open here: run, not observed."},
    {"outside_run", T_OBJECT, offsetof(Lane, outside_run), 0,
     "outside_run(compile_id, ns): a graph that ran on another thread than the open call's."},
    {"foreign_exit", T_OBJECT, offsetof(Lane, foreign_exit), 0,
     "foreign_exit(): called after a call made on another thread while one was open here returned "
     "(None: nothing; watch mode raises there what that call compiled)."},
    {"plans", T_OBJECT, offsetof(Lane, plans), 0, "Structure key -> PlanSums, filled by the builder."},
    {"slow_end", T_OBJECT, offsetof(Lane, slow_end), 0, "slow_end(spans, start, end, error)."},
    {"start", T_LONGLONG, offsetof(Lane, start), READONLY, "Start of the call C opened."},
    {"budget", T_PYSSIZET, offsetof(Lane, budget), 0, "Calls C may still sum before one is due in detail."},
    {"keep_detail", T_BOOL, offsetof(Lane, keep_detail), 0,
     "With no budget left, open the call due in detail too, and hand it to slow_end whole."},
    {"tensor_type", T_OBJECT, offsetof(Lane, tensor_type), 0,
     "Outputs of this type are seam traffic, counted in calls due in detail (None: not sampled)."},
    {"detail", T_BOOL, offsetof(Lane, detail), READONLY, "The open call is due in detail."},
    {"fast_calls", T_PYSSIZET, offsetof(Lane, fast_calls), 0, "Calls C summed, not yet counted."},
    {"call_base", T_PYSSIZET, offsetof(Lane, call_base), 0,
     "The builder's count of calls: a call C opened has index call_base + fast_calls."},
    {"label_nodes", T_BOOL, offsetof(Lane, label_nodes), 0,
     "Region timers label a forward's autograd node with its call (off: no backward is listed any more)."},
    {"ready", T_BOOL, offsetof(Lane, ready), 0,
     "CallTrackers may open calls here (else they hand every call to their slow wrapper)."},
    {"owner", T_OBJECT, offsetof(Lane, owner), 0, "What callbacks are called with (the session)."},
    {"callbacks", T_OBJECT, offsetof(Lane, callbacks), 0,
     "A list of callables, each called with owner after every call a CallTracker closed."},
    {"error_text", T_OBJECT, offsetof(Lane, error_text), 0,
     "error_text(exception) -> str: how a call that raised is described (None: its type's name)."},
    {NULL},
};

static PyObject *
lane_get_spans(Lane *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->spans != NULL ? self->spans : Py_None);
}

/* The builder opened a call and hands its span list over: the calling thread owns it. */
static int
lane_set_spans(Lane *self, PyObject *value, void *closure)
{
    (void)closure;
    if (value != NULL && value != Py_None) {
        self->tstate = PyThreadState_Get();
    }
    Py_XINCREF(value);
    Py_XSETREF(self->spans, value);
    return 0;
}

static PyGetSetDef lane_getset[] = {
    {"open", (getter)lane_get_open, NULL, "Whether a call C opened is open.", NULL},
    {"here", (getter)lane_get_here, NULL,
     "Whether a call is open here (C's or the builder's) and was opened on the calling thread.", NULL},
    {"spans", (getter)lane_get_spans, (setter)lane_set_spans,
     "The span list of a call the builder opened and does not keep in detail, or None.", NULL},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Steady calls opened, timed and summed in C (one per session).",
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_members = lane_members,
    .tp_methods = lane_methods,
    .tp_getset = lane_getset,
};

/* --- RegionTimer --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;    /* the compiled graph */
    Lane *lane;
    PyObject *cid;   /* compile id (str) */
    PyObject *gi;    /* graph index (int) */
    PyObject *slow;  /* the Python wrapper: detailed calls, runs outside a call, no session */
    PyObject *after; /* None, or called with the first grad_fn among the outputs: set only for
                        graphs compiled with autograd on (Dynamo guards the grad mode) */
    PyObject *node_type; /* the node type `after` decided on (it returned True or False), or NULL */
    char label;          /* ... True: its compiled backward is timed, C labels the node itself */
    PyObject *dict;
} RegionTimer;

/* A graph run's outputs as an array: a tuple's or a list's items, else the one object. */
static Py_ssize_t
output_items(PyObject *out, PyObject **single, PyObject ***items)
{
    if (PyTuple_Check(out)) {
        *items = &PyTuple_GET_ITEM(out, 0);
        return PyTuple_GET_SIZE(out);
    }
    if (PyList_Check(out)) {
        *items = &PyList_GET_ITEM(out, 0);
        return PyList_GET_SIZE(out);
    }
    single[0] = out;
    *items = single;
    return 1;
}

/* The first output's autograd node (a new reference), or NULL when none carries one: then `after`
 * is called with that node (to find its compiled backward). Cheap enough to ask on every run;
 * calling into Python for each is not. */
static PyObject *
first_grad_fn(PyObject *out)
{
    PyObject *single[1];
    PyObject **items;
    Py_ssize_t n = output_items(out, single, &items);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_None || PyLong_CheckExact(items[i]) || PyFloat_CheckExact(items[i])) {
            continue;
        }
        PyObject *g = PyObject_GetAttr(items[i], str_grad_fn);
        if (g == NULL) {
            PyErr_Clear();
            continue;
        }
        if (g != Py_None) {
            return g;
        }
        Py_DECREF(g);
    }
    return NULL;
}

/* Seam traffic: how many of the outputs are tensors, and their bytes. -1 when it cannot be told
 * (no tensor type given, or nbytes failed). */
static void
seam_traffic(PyObject *out, PyObject *tensor_type, long long *n_out, long long *nb_out)
{
    *n_out = *nb_out = -1;
    if (tensor_type == NULL || !PyType_Check(tensor_type)) {
        return;
    }
    PyObject *single[1];
    PyObject **items;
    Py_ssize_t k = output_items(out, single, &items);
    long long n = 0, nb = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (!PyObject_TypeCheck(items[i], (PyTypeObject *)tensor_type)) {
            continue;
        }
        PyObject *b = PyObject_GetAttr(items[i], str_nbytes);
        long long v = b != NULL ? PyLong_AsLongLong(b) : -1;
        Py_XDECREF(b);
        if (v < 0) {
            PyErr_Clear();
            return;
        }
        n += 1;
        nb += v;
    }
    *n_out = n;
    *nb_out = nb;
}

/* A graph run on another thread than the open call's: timed, reported as a run outside any call
 * (never mixed into that call). */
static PyObject *
timer_foreign(RegionTimer *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    long long t0 = now_ns();
    PyObject *out = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    long long t1 = now_ns();
    PyObject *report = self->lane->outside_run;
    if (out != NULL && report != NULL && report != Py_None) {
        PyObject *r = PyObject_CallFunction(report, "OL", self->cid, t1 - t0);
        if (r == NULL) {
            PyErr_WriteUnraisable(report); /* seamscope's failure must not fail the user's call */
        }
        Py_XDECREF(r);
    }
    return out;
}

/* The first output's autograd node, seen after a run. Once `after` has decided on the node's
 * type (returned True or False; one graph's outputs always carry the same), C does the rest in a
 * call C opened and records: nothing (False), or the node is labelled with that call's index
 * (`seamscope_call`, what the timed backward is attributed by) while backward runs are still
 * listed (`label_nodes`), no Python call. Anything else goes to `after`. */
static int
timer_after(RegionTimer *self, Lane *lane, PyObject *out)
{
    if (self->node_type != NULL && lane->recording && (!self->label || !lane->label_nodes)) {
        return 0;
    }
    PyObject *node = first_grad_fn(out);
    if (node == NULL) {
        return 0;
    }
    int rc = 0;
    if (self->node_type == (PyObject *)Py_TYPE(node) && (!self->label || lane->recording)) {
        if (self->label) {
            PyObject *index = PyLong_FromSsize_t(lane->call_base + lane->fast_calls);
            rc = index != NULL ? PyObject_SetAttr(node, str_seamscope_call, index) : -1;
            Py_XDECREF(index);
        }
        Py_DECREF(node);
        return rc;
    }
    PyObject *r = PyObject_CallOneArg(self->after, node);
    if (r == NULL) {
        rc = -1;
    }
    else if (r == Py_True || r == Py_False) {
        Py_XSETREF(self->node_type, Py_NewRef((PyObject *)Py_TYPE(node)));
        self->label = r == Py_True;
    }
    Py_XDECREF(r);
    Py_DECREF(node);
    return rc;
}

static PyObject *
timer_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RegionTimer *self = (RegionTimer *)op;
    Lane *lane = self->lane;
    if ((lane->open || lane->claimed || (lane->spans != NULL && lane->spans != Py_None))
        && PyThreadState_Get() != lane->tstate) {
        return timer_foreign(self, args, nargsf, kwnames);
    }
    PyObject *spans = NULL;
    if (!lane->recording) {
        spans = lane->spans;
        if (spans == NULL || !PyList_CheckExact(spans)) {
            return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
        }
        Py_INCREF(spans);
    }
    int in_ticks = spans == NULL && lane->ticks;
    long long t0 = in_ticks ? now_ticks() : now_ns();
    PyObject *out = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    long long t1 = in_ticks ? now_ticks() : now_ns();
    if (out == NULL) {
        Py_XDECREF(spans);
        return NULL;
    }
    if (in_ticks && !lane->recording) { /* adopted while it ran: onto the builder's timeline */
        t0 = tick_to_ns(t0, lane->start_tick, lane->start, lane->adopt_tick, lane->adopt_ns);
        t1 = now_ns();
        in_ticks = 0;
    }
    if (self->after != Py_None && timer_after(self, lane, out) < 0) {
        goto fail;
    }
    if (spans == NULL) {
        if (!lane->recording) { /* adopted meanwhile (a compilation inside this region) */
            spans = lane->spans;
            if (spans == NULL || !PyList_CheckExact(spans)) {
                return out;
            }
            Py_INCREF(spans);
        }
        else {
            Rec *r = lane_next_rec(lane);
            if (r == NULL) {
                goto fail;
            }
            Py_INCREF(self->cid);
            Py_INCREF(self->gi);
            r->s = t0;
            r->e = t1;
            r->cid = self->cid;
            r->gi = self->gi;
            if (lane->detail) {
                seam_traffic(out, lane->tensor_type, &r->n, &r->nb);
            }
            else {
                r->n = r->nb = -1;
            }
            r->c = in_ticks ? now_ticks() : now_ns(); /* the bookkeeping ends here */
            return out;
        }
    }
    PyObject *span = PyTuple_New(SPAN_REGION_LEN);
    PyObject *a = PyLong_FromLongLong(t0);
    PyObject *b = PyLong_FromLongLong(t1);
    if (span == NULL || a == NULL || b == NULL) {
        Py_XDECREF(span);
        Py_XDECREF(a);
        Py_XDECREF(b);
        goto fail;
    }
    Py_INCREF(str_r);
    PyTuple_SET_ITEM(span, SPAN_KIND, str_r);
    PyTuple_SET_ITEM(span, SPAN_START, a);
    PyTuple_SET_ITEM(span, SPAN_END, b);
    Py_INCREF(self->cid);
    PyTuple_SET_ITEM(span, SPAN_KEY, self->cid);
    Py_INCREF(self->gi);
    PyTuple_SET_ITEM(span, SPAN_GRAPH_INDEX, self->gi);
    long long n = -1, nb = -1;
    if (lane->detail && lane->open) { /* adopted, due in detail: seam traffic still sampled */
        seam_traffic(out, lane->tensor_type, &n, &nb);
    }
    PyObject *pn = n < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(n);
    PyObject *pnb = n < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(nb);
    if (pn == NULL || pnb == NULL) {
        Py_XDECREF(pn);
        Py_XDECREF(pnb);
        Py_DECREF(span);
        goto fail;
    }
    PyTuple_SET_ITEM(span, SPAN_OUT_TENSORS, pn);
    PyTuple_SET_ITEM(span, SPAN_OUT_BYTES, pnb);
    PyObject *c = PyLong_FromLongLong(now_ns()); /* the bookkeeping ends here */
    if (c == NULL) {
        Py_DECREF(span);
        goto fail;
    }
    PyTuple_SET_ITEM(span, SPAN_BOOK_END, c);
    int rc = PyList_Append(spans, span);
    Py_DECREF(span);
    Py_DECREF(spans);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
fail:
    Py_DECREF(out);
    Py_XDECREF(spans);
    return NULL;
}

static PyObject *
timer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fn", "lane", "compile_id", "graph_index", "slow", "after", NULL};
    PyObject *fn, *lane, *cid, *gi, *slow, *after;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!UO!OO:RegionTimer", kwlist, &fn, &LaneType,
                                     &lane, &cid, &PyLong_Type, &gi, &slow, &after)) {
        return NULL;
    }
    if (!PyCallable_Check(fn) || !PyCallable_Check(slow) || (after != Py_None && !PyCallable_Check(after))) {
        PyErr_SetString(PyExc_TypeError, "RegionTimer: fn, slow and after (unless None) must be callable");
        return NULL;
    }
    RegionTimer *self = (RegionTimer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = timer_vectorcall;
    Py_INCREF(fn);
    self->fn = fn;
    Py_INCREF(lane);
    self->lane = (Lane *)lane;
    Py_INCREF(cid);
    self->cid = cid;
    Py_INCREF(gi);
    self->gi = gi;
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(after);
    self->after = after;
    return (PyObject *)self;
}

static int
timer_traverse(RegionTimer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->lane);
    Py_VISIT(self->cid);
    Py_VISIT(self->gi);
    Py_VISIT(self->slow);
    Py_VISIT(self->after);
    Py_VISIT(self->node_type);
    Py_VISIT(self->dict);
    return 0;
}

static int
timer_clear(RegionTimer *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->lane);
    Py_CLEAR(self->cid);
    Py_CLEAR(self->gi);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->after);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->dict);
    return 0;
}

static void
timer_dealloc(RegionTimer *self)
{
    PyObject_GC_UnTrack(self);
    timer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef timer_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(RegionTimer, fn), READONLY, "The compiled graph."},
    {"compile_id", T_OBJECT, offsetof(RegionTimer, cid), READONLY, NULL},
    {NULL},
};

static PyTypeObject RegionTimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.RegionTimer",
    .tp_basicsize = sizeof(RegionTimer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled graph, timed at every run inside a call the lane knows of.",
    .tp_new = timer_new,
    .tp_traverse = (traverseproc)timer_traverse,
    .tp_clear = (inquiry)timer_clear,
    .tp_dealloc = (destructor)timer_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RegionTimer, vectorcall),
    .tp_dictoffset = offsetof(RegionTimer, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_members = timer_members,
};

/* --- CallTracker --------------------------------------------------------------------------- */

/* A compiled callable whose top-level calls the lane opens and closes. Everything else (no
 * session, a family label, a call nested in one the builder opened, one the builder must open)
 * goes to `slow`, the Python wrapper, which does the same in Python. The Python shim in front of
 * this asks Dynamo first whether it is tracing (then only `inner` is traced). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *inner; /* the compiled callable */
    Lane *lane;
    PyObject *slow;  /* the Python wrapper */
} CallTracker;

static int
lane_call_callbacks(Lane *lane)
{
    PyObject *snapshot = PySequence_Tuple(lane->callbacks); /* a callback may edit the list */
    if (snapshot == NULL) {
        return -1;
    }
    PyObject *owner = lane->owner != NULL ? lane->owner : Py_None;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(snapshot); i++) {
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(snapshot, i), owner);
        if (r == NULL) {
            Py_DECREF(snapshot);
            return -1;
        }
        Py_DECREF(r);
    }
    Py_DECREF(snapshot);
    return 0;
}

/* Close the call with the error of the exception being raised, which stays raised. */
static void
lane_exit_raising(Lane *lane, PyObject *tracker)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = NULL;
    if (lane->error_text != NULL && lane->error_text != Py_None && value != NULL) {
        text = PyObject_CallOneArg(lane->error_text, value);
        if (text != NULL && !PyUnicode_Check(text)) {
            Py_CLEAR(text);
        }
        PyErr_Clear();
    }
    if (text == NULL) {
        text = PyUnicode_FromString(type != NULL ? ((PyTypeObject *)type)->tp_name : "error");
    }
    PyObject *r = text != NULL ? lane_exit(lane, text) : NULL;
    if (r == NULL && PyErr_Occurred()) {
        PyErr_WriteUnraisable(tracker); /* seamscope's failure must not replace the user's error */
    }
    Py_XDECREF(r);
    Py_XDECREF(text);
    PyErr_Restore(type, value, tb);
}

static PyObject *
tracker_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    CallTracker *self = (CallTracker *)op;
    Lane *lane = self->lane;
    if (!lane->ready) {
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    if (lane->open) { /* nested in a call the lane opened: part of that call */
        if (PyThreadState_Get() == lane->tstate) {
            return PyObject_Vectorcall(self->inner, args, nargsf, kwnames);
        }
        lane->foreign_calls += 1; /* ... or another thread's: not observed */
        PyObject *out = PyObject_Vectorcall(self->inner, args, nargsf, kwnames);
        PyObject *fe = lane->foreign_exit;
        if (out != NULL && fe != NULL && fe != Py_None) {
            Py_INCREF(fe);
            PyObject *r = PyObject_CallNoArgs(fe);
            Py_DECREF(fe);
            if (r == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(r);
        }
        return out;
    }
    int opened = lane_open_call(lane);
    if (opened <= 0) {
        return opened < 0 ? NULL : PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    PyObject *out = PyObject_Vectorcall(self->inner, args, nargsf, kwnames);
    if (out == NULL) {
        lane_exit_raising(lane, op);
        return NULL;
    }
    PyObject *r = lane_exit(lane, Py_None);
    if (r == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(r);
    PyObject *cbs = lane->callbacks;
    if (cbs != NULL && PyList_Check(cbs) && PyList_GET_SIZE(cbs) > 0 && lane_call_callbacks(lane) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *
tracker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"inner", "lane", "slow", NULL};
    PyObject *inner, *lane, *slow;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O:CallTracker", kwlist, &inner, &LaneType, &lane, &slow)) {
        return NULL;
    }
    if (!PyCallable_Check(inner) || !PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "CallTracker: inner and slow must be callable");
        return NULL;
    }
    CallTracker *self = (CallTracker *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = tracker_vectorcall;
    self->inner = Py_NewRef(inner);
    self->lane = (Lane *)Py_NewRef(lane);
    self->slow = Py_NewRef(slow);
    return (PyObject *)self;
}

static int
tracker_traverse(CallTracker *self, visitproc visit, void *arg)
{
    Py_VISIT(self->inner);
    Py_VISIT(self->lane);
    Py_VISIT(self->slow);
    return 0;
}

static int
tracker_clear(CallTracker *self)
{
    Py_CLEAR(self->inner);
    Py_CLEAR(self->lane);
    Py_CLEAR(self->slow);
    return 0;
}

static void
tracker_dealloc(CallTracker *self)
{
    PyObject_GC_UnTrack(self);
    tracker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef tracker_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(CallTracker, inner), READONLY, "The compiled callable."},
    {NULL},
};

static PyTypeObject CallTrackerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.CallTracker",
    .tp_basicsize = sizeof(CallTracker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "CallTracker(inner, lane, slow): each top-level call of inner, opened and closed by the lane.",
    .tp_new = tracker_new,
    .tp_traverse = (traverseproc)tracker_traverse,
    .tp_clear = (inquiry)tracker_clear,
    .tp_dealloc = (destructor)tracker_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CallTracker, vectorcall),
    .tp_members = tracker_members,
};

/* --- BackwardTimer ------------------------------------------------------------------------ */

/* The backward of one compiled graph's autograd Function (AOT's CompiledFunction), timed each
 * time autograd runs it: swapped in for the class's static `backward` (capture/regions.py).
 * While `sink` keeps each run (sink(compile_id, ns, call) returns True: the builder's list of
 * runs outside calls has room), each goes to it with the call its forward was labelled with;
 * from the first it declines on, runs are only counted and summed here, for the builder to take
 * (take()), with no Python call and no object per run. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *backward; /* the Function's own backward */
    PyObject *cid;      /* compile id (str) */
    PyObject *sink;     /* sink(compile_id, ns, call | None) -> bool, or NULL once it declined */
    Py_ssize_t runs;    /* runs counted here since the last take() */
    long long total;    /* ... and their time */
} BackwardTimer;

static PyObject *
backward_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BackwardTimer *self = (BackwardTimer *)op;
    long long t0 = now_ns();
    PyObject *out = PyObject_Vectorcall(self->backward, args, nargsf, kwnames);
    long long dur = now_ns() - t0;
    if (out == NULL) {
        return NULL;
    }
    if (self->sink == NULL) {
        self->runs += 1;
        self->total += dur;
        return out;
    }
    PyObject *call = NULL;
    if (PyVectorcall_NARGS(nargsf) > 0) { /* the node: backward(ctx, *grads) */
        call = PyObject_GetAttr(args[0], str_seamscope_call);
        if (call == NULL) {
            PyErr_Clear();
        }
    }
    PyObject *sink = Py_NewRef(self->sink);
    PyObject *r = PyObject_CallFunction(sink, "OLO", self->cid, dur, call != NULL ? call : Py_None);
    Py_XDECREF(call);
    if (r == NULL) {
        PyErr_WriteUnraisable(sink); /* seamscope's failure must not fail the user's backward */
    }
    else if (r == Py_False) {
        Py_CLEAR(self->sink);
    }
    Py_XDECREF(r);
    Py_DECREF(sink);
    return out;
}

static PyObject *
backward_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"backward", "compile_id", "sink", NULL};
    PyObject *backward, *cid, *sink;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OUO:BackwardTimer", kwlist, &backward, &cid, &sink)) {
        return NULL;
    }
    if (!PyCallable_Check(backward) || !PyCallable_Check(sink)) {
        PyErr_SetString(PyExc_TypeError, "BackwardTimer: backward and sink must be callable");
        return NULL;
    }
    BackwardTimer *self = (BackwardTimer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = backward_vectorcall;
    self->backward = Py_NewRef(backward);
    self->cid = Py_NewRef(cid);
    self->sink = Py_NewRef(sink);
    return (PyObject *)self;
}

static PyObject *
backward_take(BackwardTimer *self, PyObject *unused)
{
    (void)unused;
    PyObject *res = Py_BuildValue("(nL)", self->runs, self->total);
    if (res != NULL) {
        self->runs = 0;
        self->total = 0;
    }
    return res;
}

static int
backward_traverse(BackwardTimer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->backward);
    Py_VISIT(self->cid);
    Py_VISIT(self->sink);
    return 0;
}

static int
backward_clear(BackwardTimer *self)
{
    Py_CLEAR(self->backward);
    Py_CLEAR(self->cid);
    Py_CLEAR(self->sink);
    return 0;
}

static void
backward_dealloc(BackwardTimer *self)
{
    PyObject_GC_UnTrack(self);
    backward_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
backward_get_keeping(BackwardTimer *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->sink != NULL);
}

static PyMethodDef backward_methods[] = {
    {"take", (PyCFunction)backward_take, METH_NOARGS,
     "take() -> (runs, ns): the runs counted here (the sink declined them) since the last take(), and their time."},
    {NULL},
};

static PyMemberDef backward_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(BackwardTimer, backward), READONLY, "The Function's own backward."},
    {"compile_id", T_OBJECT, offsetof(BackwardTimer, cid), READONLY, NULL},
    {NULL},
};

static PyGetSetDef backward_getset[] = {
    {"keeping", (getter)backward_get_keeping, NULL, "Whether each run still goes to the sink.", NULL},
    {NULL},
};

static PyTypeObject BackwardTimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.BackwardTimer",
    .tp_basicsize = sizeof(BackwardTimer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BackwardTimer(backward, compile_id, sink): a compiled backward, timed at every run.",
    .tp_new = backward_new,
    .tp_traverse = (traverseproc)backward_traverse,
    .tp_clear = (inquiry)backward_clear,
    .tp_dealloc = (destructor)backward_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BackwardTimer, vectorcall),
    .tp_methods = backward_methods,
    .tp_members = backward_members,
    .tp_getset = backward_getset,
};

/* --- ContextEnter ------------------------------------------------------------------------- */

/* The session's entry hook on a compile context (Dynamo calls it on entry to every call made
 * through the context, and what it returns on exit). A call made while one the lane opened is
 * open on the same thread is part of that one: nothing to open, and no Python frame (a compiled
 * module's own forward runs through its context this way at every call). Anything else goes to
 * the Python hook, `slow`. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Lane *lane;
    PyObject *slow;    /* the Python entry hook */
    PyObject *nothing; /* what a nested call's exit runs: a no-op */
    PyObject *dict;
} ContextEnter;

static PyObject *
enter_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ContextEnter *self = (ContextEnter *)op;
    Lane *lane = self->lane;
    if (lane->open && PyThreadState_Get() == lane->tstate) {
        return Py_NewRef(self->nothing);
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *
enter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"lane", "slow", "nothing", NULL};
    PyObject *lane, *slow, *nothing;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO:ContextEnter", kwlist, &LaneType, &lane, &slow, &nothing)) {
        return NULL;
    }
    if (!PyCallable_Check(slow) || !PyCallable_Check(nothing)) {
        PyErr_SetString(PyExc_TypeError, "ContextEnter: slow and nothing must be callable");
        return NULL;
    }
    ContextEnter *self = (ContextEnter *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = enter_vectorcall;
    self->lane = (Lane *)Py_NewRef(lane);
    self->slow = Py_NewRef(slow);
    self->nothing = Py_NewRef(nothing);
    return (PyObject *)self;
}

static int
enter_traverse(ContextEnter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lane);
    Py_VISIT(self->slow);
    Py_VISIT(self->nothing);
    Py_VISIT(self->dict);
    return 0;
}

static int
enter_clear(ContextEnter *self)
{
    Py_CLEAR(self->lane);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->nothing);
    Py_CLEAR(self->dict);
    return 0;
}

static void
enter_dealloc(ContextEnter *self)
{
    PyObject_GC_UnTrack(self);
    enter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef enter_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(ContextEnter, slow), READONLY, "The Python entry hook."},
    {NULL},
};

static PyTypeObject ContextEnterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seamscope._speedups.ContextEnter",
    .tp_basicsize = sizeof(ContextEnter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ContextEnter(lane, slow, nothing): a compile context's entry hook; nested calls return nothing, in C.",
    .tp_new = enter_new,
    .tp_traverse = (traverseproc)enter_traverse,
    .tp_clear = (inquiry)enter_clear,
    .tp_dealloc = (destructor)enter_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ContextEnter, vectorcall),
    .tp_dictoffset = offsetof(ContextEnter, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_members = enter_members,
};

/* --- module -------------------------------------------------------------------------------- */

static PyObject *
nothing(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"nothing", nothing, METH_NOARGS, "nothing(): does nothing (a nested call's exit, with no Python frame)."},
    {"clock_ns", clock_ns, METH_NOARGS, "CLOCK_MONOTONIC in nanoseconds (the clock the timers read)."},
    {"set_ticks", set_ticks, METH_O,
     "set_ticks(on) -> bool: time the spans of calls C opens with the time stamp counter, mapped onto "
     "CLOCK_MONOTONIC between two reads of it per call. Returns whether it is in use (x86-64 only)."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "seamscope._speedups",
    .m_doc = "seamscope's hot path in C (optional: the pure-Python path gives the same figures).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_r = PyUnicode_InternFromString("r");
    str_o = PyUnicode_InternFromString("o");
    str_grad_fn = PyUnicode_InternFromString("grad_fn");
    str_nbytes = PyUnicode_InternFromString("nbytes");
    str_seamscope_call = PyUnicode_InternFromString("seamscope_call");
    if (str_r == NULL || str_o == NULL || str_grad_fn == NULL || str_nbytes == NULL || str_seamscope_call == NULL) {
        return NULL;
    }
    if (PyType_Ready(&LaneType) < 0 || PyType_Ready(&RegionTimerType) < 0 || PyType_Ready(&PlanSumsType) < 0
        || PyType_Ready(&CallTrackerType) < 0 || PyType_Ready(&BackwardTimerType) < 0
        || PyType_Ready(&ContextEnterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&LaneType);
    Py_INCREF(&RegionTimerType);
    Py_INCREF(&PlanSumsType);
    Py_INCREF(&CallTrackerType);
    Py_INCREF(&BackwardTimerType);
    Py_INCREF(&ContextEnterType);
    PyObject *layout = Py_BuildValue(
        "{sisisisisisisisisisisisi}", "KIND", SPAN_KIND, "START", SPAN_START, "END", SPAN_END, "KEY", SPAN_KEY,
        "GRAPH_INDEX", SPAN_GRAPH_INDEX, "OUT_TENSORS", SPAN_OUT_TENSORS, "OUT_BYTES", SPAN_OUT_BYTES,
        "BOOK_END", SPAN_BOOK_END, "COMPILE_ID", SPAN_COMPILE_ID, "REGION_LEN", SPAN_REGION_LEN,
        "COMPILATION_LEN", SPAN_COMPILATION_LEN, "OVERHEAD_LEN", SPAN_OVERHEAD_LEN);
    if (layout == NULL || PyModule_AddObject(m, "SPAN_LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0
        || PyModule_AddObject(m, "RegionTimer", (PyObject *)&RegionTimerType) < 0
        || PyModule_AddObject(m, "PlanSums", (PyObject *)&PlanSumsType) < 0
        || PyModule_AddObject(m, "CallTracker", (PyObject *)&CallTrackerType) < 0
        || PyModule_AddObject(m, "BackwardTimer", (PyObject *)&BackwardTimerType) < 0
        || PyModule_AddObject(m, "ContextEnter", (PyObject *)&ContextEnterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
