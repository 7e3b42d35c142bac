/* kdsl's compiled launch helper (kdsl_cuda/runtime/native.py builds and loads it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);

#define MAX_SLOTS 256
/* a vectorcall type of this module: no keywords to the constructor (positional-only names) */
#define VC_TYPE(T, DOC, ...) {PyVarObject_HEAD_INIT(NULL, 0) .tp_name = "_kdsl_launch." #T, \
    .tp_basicsize = sizeof(T), .tp_vectorcall_offset = offsetof(T, vectorcall), \
    .tp_call = PyVectorcall_Call, .tp_doc = DOC, .tp_new = T##_new, __VA_ARGS__}
#define NO_KW(kwnames) ((kwnames) != NULL && PyTuple_GET_SIZE(kwnames))

/* one slot value converted by its struct code, like struct.pack (little-endian hosts: a
   narrower integer is the slot's low bytes); OverflowError beyond the slot's range */
static int slot(char code, PyObject *o, uint64_t *s)
{
    *s = 0;
    if (code == 'd' || code == 'f' || code == 'e') {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (code == 'd') { memcpy(s, &v, 8); return 0; }
        return code == 'f' ? PyFloat_Pack4(v, (char *)s, 1) : PyFloat_Pack2(v, (char *)s, 1);
    }
    if (code == '?') {
        int v = PyObject_IsTrue(o);
        if (v < 0) return -1;
        *s = (uint64_t)v; return 0;
    }
    if (code == 'Q') {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *s = v; return 0;
    }
    if (code == 0 || strchr("qihbIHB", code) == NULL) {
        PyErr_Format(PyExc_TypeError, "unknown slot code %c", code); return -1; }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    int bits = code == 'q' ? 64 : code == 'i' || code == 'I' ? 32 : code == 'h' || code == 'H' ? 16 : 8;
    if (bits < 64 && (code >= 'a' ? v < -(1LL << (bits - 1)) || v >= (1LL << (bits - 1))
                                  : v < 0 || v >= (1LL << bits))) {
        PyErr_SetString(PyExc_OverflowError, "value out of range of its slot"); return -1; }
    memcpy(s, &v, bits / 8);
    return 0;
}

/* Launcher(cu, codes, fn, bx, by, bz, grid): one kernel's launch through cuLaunchKernel (its
   address: cu), its slot values converted by their codes (slot()) onto the C stack, the GIL
   released around the driver call.  grid: (gx, gy, gz, shared), constants: calls are
   L(stream, *slots); None: calls are L(stream, gx, gy, gz, shared, *slots). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_t cu;
    void *fn;
    PyObject *codes;
    Py_ssize_t nslots, head;
    unsigned dims[7];       /* gx, gy, gz, bx, by, bz, shared */
} Launcher;

static int dim(PyObject *o, unsigned *d)
{
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > 0xffffffffUL) {
        PyErr_SetString(PyExc_OverflowError, "Launcher(): grid, block or shared size"); return -1; }
    *d = (unsigned)v;
    return 0;
}

static int grid(PyObject *const *g, unsigned *dims)
{
    return dim(g[0], &dims[0]) || dim(g[1], &dims[1]) || dim(g[2], &dims[2]) || dim(g[3], &dims[6]);
}

static PyObject *launcher_call(Launcher *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (NO_KW(kwnames) || n != self->head + self->nslots) {
        PyErr_SetString(PyExc_TypeError, "Launcher(): the stream, the grid when not bound, "
                        "one value per slot code");
        return NULL; }
    void *stream = PyLong_AsVoidPtr(args[0]);
    if (stream == NULL && PyErr_Occurred()) return NULL;
    unsigned dims[7];
    memcpy(dims, self->dims, sizeof dims);
    if (self->head > 1 && grid(args + 1, dims)) return NULL;
    const char *codes = PyBytes_AS_STRING(self->codes);
    uint64_t slots[MAX_SLOTS];
    void *params[MAX_SLOTS];
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        if (slot(codes[i], args[self->head + i], &slots[i]) < 0) return NULL;
        params[i] = &slots[i];
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = self->cu(self->fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], stream,
                  params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *Launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"", "", "", "", "", "", "", NULL};
    PyObject *cu, *codes, *fn, *bx, *by, *bz, *g;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!OOOOO:Launcher", kwl, &cu, &PyBytes_Type,
                                     &codes, &fn, &bx, &by, &bz, &g))
        return NULL;
    if (PyBytes_GET_SIZE(codes) > MAX_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "Launcher(): too many slot codes"); return NULL; }
    Launcher *self = (Launcher *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = (vectorcallfunc)launcher_call;
    self->codes = Py_NewRef(codes);
    self->nslots = PyBytes_GET_SIZE(codes);
    self->cu = (launch_t)PyLong_AsVoidPtr(cu);
    if (self->cu == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Launcher(): NULL cuLaunchKernel");
        goto fail; }
    self->fn = PyLong_AsVoidPtr(fn);
    if (self->fn == NULL && PyErr_Occurred()) goto fail;
    if (dim(bx, &self->dims[3]) || dim(by, &self->dims[4]) || dim(bz, &self->dims[5])) goto fail;
    self->head = g == Py_None ? 5 : 1;
    if (g != Py_None && (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 4)) {
        PyErr_SetString(PyExc_TypeError, "Launcher(): grid is (gx, gy, gz, shared) or None");
        goto fail; }
    if (g != Py_None && grid(&PyTuple_GET_ITEM(g, 0), self->dims)) goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void launcher_dealloc(Launcher *self)
{
    Py_XDECREF(self->codes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject LauncherType = VC_TYPE(Launcher,
    "Launcher(cu, codes, fn, bx, by, bz, grid): one kernel's launch, its constants bound",
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL);

/* Entry(call, kdict, regdict, current, env, envkey): a kernel's call entry (its functools.partial
   function) doing in C what Kernel._call does first: find the fast launcher of the specialisation
   run last (kdict["_fast"] / ["_fast_out"]: (backend, generation, packed, device)), check the
   registry generation and the backend choice (backend=, use_backend's context variable, else
   KDSL_BACKEND unset: the launcher's backend for device launchers, the automatic default for host
   ones) and call packed(args, out).  Anything else -- other keywords, stream=, NotImplemented --
   is the same call of `call` (Kernel._call). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *call, *kdict, *regdict, *current, *env, *envkey;
} Entry;

static PyObject *s_out, *s_backend, *s_fast, *s_fast_out, *s_gen, *s_auto;

static PyObject *entry_call(Entry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *out = Py_None, *backend = Py_None;
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (k == s_out || PyUnicode_Compare(k, s_out) == 0) out = args[n + i];
        else if (k == s_backend || PyUnicode_Compare(k, s_backend) == 0) backend = args[n + i];
        else goto slow;
    }
    PyObject *fast = PyDict_GetItemWithError(self->kdict, out == Py_None ? s_fast : s_fast_out);
    if (fast == NULL || !PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 4) goto slow;
    PyObject *name = PyTuple_GET_ITEM(fast, 0), *packed = PyTuple_GET_ITEM(fast, 2);
    PyObject *gen = PyDict_GetItemWithError(self->regdict, s_gen);
    if (gen == NULL || PyObject_RichCompareBool(gen, PyTuple_GET_ITEM(fast, 1), Py_EQ) != 1)
        goto slow;
    PyObject *b = backend, *cur = NULL;
    if (b == Py_None) {
        if (PyContextVar_Get(self->current, NULL, &cur) < 0) goto slow;
        b = cur;
        if (b == NULL || b == Py_None) {
            if (PyDict_Contains(self->env, self->envkey) != 0) { Py_XDECREF(cur); goto slow; }
            b = PyObject_IsTrue(PyTuple_GET_ITEM(fast, 3)) == 1 ? name
                : PyDict_GetItemWithError(self->regdict, s_auto);
        }
    }
    int same = b != NULL && (b == name || (PyUnicode_CheckExact(b) && PyUnicode_Check(name) &&
                                           PyUnicode_Compare(b, name) == 0));
    Py_XDECREF(cur);
    if (!same) goto slow;
    PyObject *tup = PyTuple_New(n);
    if (tup == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
    PyObject *pa[2] = {tup, out};
    Py_INCREF(packed);
    PyObject *r = PyObject_Vectorcall(packed, pa, 2, NULL);
    Py_DECREF(packed);
    Py_DECREF(tup);
    if (r != Py_NotImplemented) return r;
    Py_DECREF(r);
slow:
    if (PyErr_Occurred()) PyErr_Clear();
    return PyObject_Vectorcall(self->call, args, nargsf, kwnames);
}

static PyObject *Entry_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"", "", "", "", "", "", NULL};
    PyObject *call, *kdict, *regdict, *current, *env, *envkey;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O!O!O!O:Entry", kwl, &call, &PyDict_Type,
                                     &kdict, &PyDict_Type, &regdict, &PyContextVar_Type,
                                     &current, &PyDict_Type, &env, &envkey))
        return NULL;
    Entry *self = PyObject_GC_New(Entry, type);
    if (self == NULL) return NULL;
    self->vectorcall = (vectorcallfunc)entry_call;
    self->call = Py_NewRef(call); self->kdict = Py_NewRef(kdict);
    self->regdict = Py_NewRef(regdict); self->current = Py_NewRef(current);
    self->env = Py_NewRef(env); self->envkey = Py_NewRef(envkey);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int entry_traverse(Entry *self, visitproc visit, void *arg)
{
    Py_VISIT(self->call); Py_VISIT(self->kdict); Py_VISIT(self->regdict);
    Py_VISIT(self->current); Py_VISIT(self->env); Py_VISIT(self->envkey);
    return 0;
}

static int entry_clear(Entry *self)
{
    Py_CLEAR(self->call); Py_CLEAR(self->kdict); Py_CLEAR(self->regdict);
    Py_CLEAR(self->current); Py_CLEAR(self->env); Py_CLEAR(self->envkey);
    return 0;
}

static void entry_dealloc(Entry *self)
{
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject EntryType = VC_TYPE(Entry,
    "Entry(call, kdict, regdict, current, env, envkey): a kernel's call entry",
    .tp_dealloc = (destructor)entry_dealloc, .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC);

/* Reader(api, type, device_type, device_id, specs, stream): the arrays of one fast launcher
   read through a library's DLPack exchange API (the `__dlpack_c_exchange_api__` capsule of
   torch.Tensor: DLPack's "N0" consumer path, a DLTensor filled in place, no Python objects).
   specs: one (code, bits, lanes, ndim, contiguous) per array.  R(*arrays) checks each array's
   exact type, device, dtype, rank and (where asked) C contiguity and returns the flat tuple
   ([stream,] pointer, sizes..., pointer, sizes...), or None when any check fails (the caller's
   slow path then says why).  stream: the library's current stream of that device first. */
typedef struct { int32_t device_type; int32_t device_id; } KdDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } KdDType;
typedef struct {
    void *data; KdDevice device; int32_t ndim; KdDType dtype;
    int64_t *shape; int64_t *strides; uint64_t byte_offset;
} KdDLTensor;
typedef struct { uint32_t major, minor; } KdVersion;
typedef struct KdApiHeader { KdVersion version; struct KdApiHeader *prev; } KdApiHeader;
typedef struct {
    KdApiHeader header;
    void *allocator, *from_py, *to_py;
    int (*dltensor_from_py)(void *, KdDLTensor *);
    int (*current_stream)(int32_t, int32_t, void **);
} KdExchangeApi;

#define MAX_ARRAYS 64
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    const KdExchangeApi *api;
    PyObject *type, *capsule;
    int device_type, device_id, stream;
    Py_ssize_t n, nout;
    KdDType dtype[MAX_ARRAYS];
    int ndim[MAX_ARRAYS], contiguous[MAX_ARRAYS];
} Reader;

static int c_contiguous(const KdDLTensor *t)
{
    int ok = 1;     /* no elements (a size 0): any strides */
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0) return 1;
        if (t->strides != NULL && t->shape[d] != 1 && t->strides[d] != want) ok = 0;
        want *= t->shape[d];
    }
    return ok;
}

static PyObject *reader_call(Reader *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), k = 0;
    if (NO_KW(kwnames) || n != self->n) {
        PyErr_SetString(PyExc_TypeError, "Reader(): one array per spec"); return NULL; }
    PyObject *out = PyTuple_New(self->nout), *v;
    if (out == NULL) return NULL;
    if (self->stream) {
        void *s = NULL;
        if (self->api->current_stream(self->device_type, self->device_id, &s) != 0) goto decline;
        if ((v = PyLong_FromVoidPtr(s)) == NULL) goto fail;
        PyTuple_SET_ITEM(out, k++, v);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        KdDLTensor t;
        if ((PyObject *)Py_TYPE(args[i]) != self->type ||
                self->api->dltensor_from_py(args[i], &t) != 0 ||
                t.device.device_type != self->device_type || t.device.device_id != self->device_id ||
                t.ndim != self->ndim[i] || t.dtype.code != self->dtype[i].code ||
                t.dtype.bits != self->dtype[i].bits || t.dtype.lanes != self->dtype[i].lanes ||
                (self->contiguous[i] && !c_contiguous(&t)))
            goto decline;
        if ((v = PyLong_FromUnsignedLongLong((uintptr_t)t.data + t.byte_offset)) == NULL) goto fail;
        PyTuple_SET_ITEM(out, k++, v);
        for (int d = 0; d < t.ndim; d++) {
            if ((v = PyLong_FromLongLong(t.shape[d])) == NULL) goto fail;
            PyTuple_SET_ITEM(out, k++, v);
        }
    }
    return out;
decline:
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *Reader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"", "", "", "", "", "", NULL};
    PyObject *capsule, *ttype, *specs;
    int device_type, device_id, stream;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!iiO!p:Reader", kwl, &capsule, &PyType_Type,
                                     &ttype, &device_type, &device_id, &PyTuple_Type, &specs,
                                     &stream))
        return NULL;
    /* the exchange API must have what the readers call (DLPack >= 1.2) */
    const KdExchangeApi *api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    if (api == NULL) return NULL;
    if (api->header.version.major != 1 || api->header.version.minor < 2 ||
            api->dltensor_from_py == NULL || api->current_stream == NULL) {
        PyErr_SetString(PyExc_ValueError, "a DLPack exchange API without the DLTensor export "
                        "or the current stream (needs DLPack >= 1.2)");
        return NULL; }
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    if (n > MAX_ARRAYS) {
        PyErr_SetString(PyExc_ValueError, "Reader(): too many arrays"); return NULL; }
    Reader *self = (Reader *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = (vectorcallfunc)reader_call;
    self->api = api;
    self->capsule = Py_NewRef(capsule);
    self->type = Py_NewRef(ttype);
    self->device_type = device_type;
    self->device_id = device_id;
    self->stream = stream;
    self->n = n;
    self->nout = stream ? 1 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int code, bits, lanes;
        PyObject *sp = PyTuple_GET_ITEM(specs, i);
        if (!PyTuple_Check(sp) || !PyArg_ParseTuple(sp, "iiiip", &code, &bits, &lanes,
                                                     &self->ndim[i], &self->contiguous[i])) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "Reader(): specs are (code, bits, lanes, ndim, "
                                "contiguous)");
            Py_DECREF(self);
            return NULL; }
        self->dtype[i] = (KdDType){(uint8_t)code, (uint8_t)bits, (uint16_t)lanes};
        self->nout += 1 + self->ndim[i];
    }
    return (PyObject *)self;
}

static void reader_dealloc(Reader *self)
{
    Py_XDECREF(self->capsule);
    Py_XDECREF(self->type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ReaderType = VC_TYPE(Reader,
    "Reader(api, type, device_type, device_id, specs, stream): arrays read in C",
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL);

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_kdsl_launch", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__kdsl_launch(void)
{
    s_out = PyUnicode_InternFromString("out");
    s_backend = PyUnicode_InternFromString("backend");
    s_fast = PyUnicode_InternFromString("_fast");
    s_fast_out = PyUnicode_InternFromString("_fast_out");
    s_gen = PyUnicode_InternFromString("generation");
    s_auto = PyUnicode_InternFromString("auto_default");
    if (!s_out || !s_backend || !s_fast || !s_fast_out || !s_gen || !s_auto) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL) return NULL;
    if (PyModule_AddType(m, &LauncherType) < 0 || PyModule_AddType(m, &EntryType) < 0 ||
            PyModule_AddType(m, &ReaderType) < 0) {
        Py_DECREF(m); return NULL; }
    return m;
}
