/* kdsl's compiled launch helper (kdsl_cuda/runtime/native.py builds and loads it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);

#define MAX_SLOTS 256

static int slot(char code, PyObject *o, uint64_t *s)
{
    *s = 0;
    switch (code) {
    case 'Q': {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *s = v; return 0; }
    case 'q': {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        memcpy(s, &v, 8); return 0; }
    case 'i': case 'h': case 'b': {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        long long lim = code == 'i' ? 2147483647LL : code == 'h' ? 32767LL : 127LL;
        if (v > lim || v < -lim - 1) {
            PyErr_SetString(PyExc_OverflowError, "value out of range of its slot"); return -1; }
        if (code == 'i') { int32_t x = (int32_t)v; memcpy(s, &x, 4); }
        else if (code == 'h') { int16_t x = (int16_t)v; memcpy(s, &x, 2); }
        else { int8_t x = (int8_t)v; memcpy(s, &x, 1); }
        return 0; }
    case 'I': case 'H': case 'B': {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        long long lim = code == 'I' ? 4294967295LL : code == 'H' ? 65535LL : 255LL;
        if (v < 0 || v > lim) {
            PyErr_SetString(PyExc_OverflowError, "value out of range of its slot"); return -1; }
        if (code == 'I') { uint32_t x = (uint32_t)v; memcpy(s, &x, 4); }
        else if (code == 'H') { uint16_t x = (uint16_t)v; memcpy(s, &x, 2); }
        else { uint8_t x = (uint8_t)v; memcpy(s, &x, 1); }
        return 0; }
    case 'd': {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        memcpy(s, &v, 8); return 0; }
    case 'f': {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        return PyFloat_Pack4(v, (char *)s, 1); }   /* OverflowError beyond float32, as struct */
    case 'e': {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        return PyFloat_Pack2(v, (char *)s, 1); }
    case '?': {
        int v = PyObject_IsTrue(o);
        if (v < 0) return -1;
        *s = (uint64_t)v; return 0; }
    }
    PyErr_Format(PyExc_TypeError, "unknown slot code %c", code);
    return -1;
}

/* Launcher(cu, codes, fn, bx, by, bz, grid): one kernel's launch through cuLaunchKernel (its
   address: cu), its slot values converted by their codes (slot()) onto the C stack, the GIL
   released around the driver call; what the kernel's launches share is bound once.  grid: (gx, gy, gz, shared), constants: calls are L(stream, *slots); None: calls
   are L(stream, gx, gy, gz, shared, *slots). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_t cu;
    void *fn;
    PyObject *codes;
    Py_ssize_t nslots, head;
    unsigned dims[7];
} Launcher;

static int dim(PyObject *o, unsigned *d)
{
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > 0xffffffffUL) {
        PyErr_SetString(PyExc_OverflowError, "Launcher(): grid, block or shared size");
        return -1; }
    *d = (unsigned)v;
    return 0;
}

static PyObject *launcher_call(Launcher *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || n != self->head + self->nslots) {
        PyErr_SetString(PyExc_TypeError, "Launcher(): the stream, the grid when not bound, "
                        "one value per slot code");
        return NULL; }
    void *stream = PyLong_AsVoidPtr(args[0]);
    if (stream == NULL && PyErr_Occurred()) return NULL;
    unsigned dims[7];
    memcpy(dims, self->dims, sizeof dims);
    if (self->head > 1) {
        if (dim(args[1], &dims[0]) || dim(args[2], &dims[1]) || dim(args[3], &dims[2]) ||
            dim(args[4], &dims[6])) return NULL;
    }
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

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *cu, *codes, *fn, *bx, *by, *bz, *grid;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Launcher() takes no keywords"); return NULL; }
    if (!PyArg_UnpackTuple(args, "Launcher", 7, 7, &cu, &codes, &fn, &bx, &by, &bz, &grid))
        return NULL;
    if (!PyBytes_Check(codes) || PyBytes_GET_SIZE(codes) > MAX_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "Launcher(): slot codes must be bytes"); return NULL; }
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
    memset(self->dims, 0, sizeof self->dims);
    if (dim(bx, &self->dims[3]) || dim(by, &self->dims[4]) || dim(bz, &self->dims[5])) goto fail;
    if (grid == Py_None) {
        self->head = 5;
    } else {
        if (!PyTuple_Check(grid) || PyTuple_GET_SIZE(grid) != 4) {
            PyErr_SetString(PyExc_TypeError, "Launcher(): grid is (gx, gy, gz, shared) or None");
            goto fail; }
        if (dim(PyTuple_GET_ITEM(grid, 0), &self->dims[0]) ||
            dim(PyTuple_GET_ITEM(grid, 1), &self->dims[1]) ||
            dim(PyTuple_GET_ITEM(grid, 2), &self->dims[2]) ||
            dim(PyTuple_GET_ITEM(grid, 3), &self->dims[6])) goto fail;
        self->head = 1;
    }
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

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_kdsl_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Launcher(cu, codes, fn, bx, by, bz, grid): one kernel's launch, its constants bound",
    .tp_new = launcher_new,
};

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

static PyObject *entry_slow(Entry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->call, args, nargsf, kwnames);
}

static PyObject *entry_call(Entry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *out = Py_None, *backend = Py_None;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (k == s_out || PyUnicode_Compare(k, s_out) == 0) out = args[n + i];
            else if (k == s_backend || PyUnicode_Compare(k, s_backend) == 0) backend = args[n + i];
            else return entry_slow(self, args, nargsf, kwnames);
        }
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
            int set = PyDict_Contains(self->env, self->envkey);
            if (set != 0) { Py_XDECREF(cur); goto slow; }
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
    return entry_slow(self, args, nargsf, kwnames);
}

static PyObject *entry_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *call, *kdict, *regdict, *current, *env, *envkey;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Entry() takes no keywords"); return NULL; }
    if (!PyArg_UnpackTuple(args, "Entry", 6, 6, &call, &kdict, &regdict, &current, &env, &envkey))
        return NULL;
    if (!PyDict_Check(kdict) || !PyDict_Check(regdict) || !PyDict_Check(env) ||
            !PyContextVar_CheckExact(current)) {
        PyErr_SetString(PyExc_TypeError, "Entry(): dicts and a context variable"); return NULL; }
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

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_kdsl_launch.Entry",
    .tp_basicsize = sizeof(Entry),
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_vectorcall_offset = offsetof(Entry, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_doc = "Entry(call, kdict, regdict, current, env, envkey): a kernel's call entry",
    .tp_new = entry_new,
};

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
    int32_t device_type, device_id;
    int stream;
    Py_ssize_t n, nout;
    KdDType dtype[MAX_ARRAYS];
    int32_t ndim[MAX_ARRAYS];
    char contiguous[MAX_ARRAYS];
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
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || n != self->n) {
        PyErr_SetString(PyExc_TypeError, "Reader(): one array per spec"); return NULL; }
    PyObject *out = PyTuple_New(self->nout);
    if (out == NULL) return NULL;
    Py_ssize_t k = 0;
    if (self->stream) {
        void *s = NULL;
        if (self->api->current_stream(self->device_type, self->device_id, &s) != 0) goto decline;
        PyObject *v = PyLong_FromVoidPtr(s);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(out, k++, v);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = args[i];
        if ((PyObject *)Py_TYPE(o) != self->type) goto decline;
        KdDLTensor t;
        if (self->api->dltensor_from_py(o, &t) != 0) goto decline;
        if (t.device.device_type != self->device_type || t.device.device_id != self->device_id ||
                t.ndim != self->ndim[i] || t.dtype.code != self->dtype[i].code ||
                t.dtype.bits != self->dtype[i].bits || t.dtype.lanes != self->dtype[i].lanes ||
                (self->contiguous[i] && !c_contiguous(&t)))
            goto decline;
        PyObject *v = PyLong_FromUnsignedLongLong(
            (unsigned long long)(uintptr_t)t.data + t.byte_offset);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(out, k++, v);
        for (int d = 0; d < t.ndim; d++) {
            v = PyLong_FromLongLong(t.shape[d]);
            if (v == NULL) goto fail;
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

static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *capsule, *ttype, *specs;
    int device_type, device_id, stream;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Reader() takes no keywords"); return NULL; }
    if (!PyArg_ParseTuple(args, "OOiiO!p", &capsule, &ttype, &device_type, &device_id,
                          &PyTuple_Type, &specs, &stream))
        return NULL;
    /* the exchange API must have what the readers call (DLPack >= 1.2) */
    const KdExchangeApi *api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    if (api == NULL) return NULL;
    if (api->header.version.major != 1 || api->header.version.minor < 2 ||
            api->dltensor_from_py == NULL || api->current_stream == NULL) {
        PyErr_SetString(PyExc_ValueError, "a DLPack exchange API without the DLTensor export "
                        "or the current stream (needs DLPack >= 1.2)");
        return NULL; }
    if (!PyType_Check(ttype)) {
        PyErr_SetString(PyExc_TypeError, "Reader(): the array type"); return NULL; }
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
        int code, bits, lanes, ndim, contig;
        PyObject *sp = PyTuple_GET_ITEM(specs, i);
        if (!PyTuple_Check(sp) ||
                !PyArg_ParseTuple(sp, "iiiip", &code, &bits, &lanes, &ndim, &contig)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "Reader(): specs are (code, bits, lanes, ndim, "
                                "contiguous)");
            Py_DECREF(self);
            return NULL; }
        self->dtype[i].code = (uint8_t)code;
        self->dtype[i].bits = (uint8_t)bits;
        self->dtype[i].lanes = (uint16_t)lanes;
        self->ndim[i] = ndim;
        self->contiguous[i] = (char)contig;
        self->nout += 1 + ndim;
    }
    return (PyObject *)self;
}

static void reader_dealloc(Reader *self)
{
    Py_XDECREF(self->capsule);
    Py_XDECREF(self->type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_kdsl_launch.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_vectorcall_offset = offsetof(Reader, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Reader(api, type, device_type, device_id, specs, stream): arrays read in C",
    .tp_new = reader_new,
};

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
