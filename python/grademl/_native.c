/* grademl._native: a thin CPython extension over libgrademl.so's C ABI.
 *
 * The library is dlopen'ed from $GRADEML_LIBRARY (no link-time dependency), so this
 * module builds without the C library and fails to import (ImportError) when the
 * library cannot be loaded; grademl then falls back to ctypes or to no-ops.
 *
 * Phase is the fast path for `with grademl.phase("x", k=v):` -- construction interns
 * the name through a dict shared with the Python side, __enter__ / __exit__ are one
 * C call each. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

static int (*p_enabled)(void);
static uint32_t (*p_intern)(const char *);
static void (*p_begin)(uint32_t);
static void (*p_begin_typed)(uint32_t, uint32_t);
static void (*p_end)(void);
static void (*p_tag)(uint32_t, uint32_t);
static void (*p_tag_str)(const char *, const char *);
static void (*p_instant)(uint32_t);
static void (*p_counter)(uint32_t, double);
static void (*p_flow_out)(uint64_t);
static void (*p_flow_in)(uint64_t);
static uint64_t (*p_now)(void);
static void (*p_begin_at)(uint32_t, uint32_t, uint64_t);
static void (*p_end_at)(uint64_t);
static void (*p_tag_process)(uint32_t, uint32_t);
static void (*p_tag_int)(uint32_t, int64_t);

static PyObject *g_ids;      /* dict: str -> int, shared with grademl.__init__ */
static PyObject *g_decorate; /* callable(phase, func) -> wrapper, set from Python */
static PyObject *g_str_phase_type;

#define NUL_MESSAGE "grademl: a name or tag cannot contain a NUL character"

/* str -> id through the cache; -1 on error */
static int intern_obj(PyObject *name, uint32_t *out) {
  PyObject *v = PyDict_GetItemWithError(g_ids, name);
  if (v) {
    *out = (uint32_t)PyLong_AsUnsignedLong(v);
    return 0;
  }
  if (PyErr_Occurred()) return -1;
  /* Never raises for lone surrogates (shown as \udcff, as the Python side does); refuses NUL,
   * which would cut the name short, with the same message as grademl's Python side. */
  PyObject *bytes = PyUnicode_AsEncodedString(name, "utf-8", "backslashreplace");
  if (!bytes) return -1;
  if (memchr(PyBytes_AS_STRING(bytes), 0, (size_t)PyBytes_GET_SIZE(bytes)) != NULL) {
    Py_DECREF(bytes);
    PyErr_SetString(PyExc_ValueError, NUL_MESSAGE);
    return -1;
  }
  uint32_t id = p_intern(PyBytes_AS_STRING(bytes));
  Py_DECREF(bytes);
  PyObject *o = PyLong_FromUnsignedLong(id);
  if (!o) return -1;
  int rc = PyDict_SetItem(g_ids, name, o);
  Py_DECREF(o);
  if (rc < 0) return -1;
  *out = id;
  return 0;
}

/* any object -> id of str(obj) */
static int intern_any(PyObject *obj, uint32_t *out) {
  if (PyUnicode_CheckExact(obj)) return intern_obj(obj, out);
  PyObject *s = PyObject_Str(obj);
  if (!s) return -1;
  int rc = intern_obj(s, out);
  Py_DECREF(s);
  return rc;
}

typedef struct {
  PyObject_HEAD
  uint32_t name;
  uint32_t type; /* 0: untyped */
  Py_ssize_t ntags;
  uint32_t *tags; /* ntags (key, value) pairs */
} PhaseObject;

static PyTypeObject PhaseType;

static void phase_dealloc(PhaseObject *self) {
  if (self->tags) PyMem_Free(self->tags);
  PyObject_Free(self);
}

static PyObject *phase_enter(PhaseObject *self, PyObject *Py_UNUSED(ignored)) {
  if (self->type)
    p_begin_typed(self->name, self->type);
  else
    p_begin(self->name);
  for (Py_ssize_t i = 0; i < self->ntags; i++) p_tag(self->tags[2 * i], self->tags[2 * i + 1]);
  Py_INCREF(self);
  return (PyObject *)self;
}

static PyObject *phase_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self; (void)args; (void)nargs;
  p_end();
  Py_RETURN_NONE;
}

static PyObject *call_decorate(PyObject *phase, PyObject *func) {
  if (!g_decorate) {
    PyErr_SetString(PyExc_RuntimeError, "grademl._native: decorator factory not set");
    return NULL;
  }
  return PyObject_CallFunctionObjArgs(g_decorate, phase, func, NULL);
}

/* Build a Phase from a name object and an optional dict of tags. */
static PyObject *phase_build(PyObject *arg0, PyObject *kwargs) {
  PyObject *name = NULL;
  int bare = 0;
  if (PyUnicode_Check(arg0)) {
    name = arg0;
    Py_INCREF(name);
  } else if (PyCallable_Check(arg0)) { /* bare @grademl.phase */
    bare = 1;
    name = PyObject_GetAttrString(arg0, "__qualname__");
    if (!name) {
      PyErr_Clear();
      name = PyObject_GetAttrString(arg0, "__name__");
    }
    if (!name || !PyUnicode_Check(name)) {
      PyErr_Clear();
      Py_XDECREF(name);
      name = PyObject_Str(arg0);
      if (!name) return NULL;
    }
  } else {
    name = PyObject_Str(arg0);
    if (!name) return NULL;
  }
  PhaseObject *self = PyObject_New(PhaseObject, &PhaseType);
  if (!self) { Py_DECREF(name); return NULL; }
  self->type = 0;
  self->ntags = 0;
  self->tags = NULL;
  int rc = intern_obj(name, &self->name);
  Py_DECREF(name);
  if (rc < 0) goto fail;
  if (kwargs && PyDict_GET_SIZE(kwargs) > 0) {
    Py_ssize_t n = PyDict_GET_SIZE(kwargs);
    self->tags = PyMem_Malloc(sizeof(uint32_t) * 2 * (size_t)n);
    if (!self->tags) { PyErr_NoMemory(); goto fail; }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      if (PyUnicode_Check(k) && PyUnicode_Compare(k, g_str_phase_type) == 0) {
        if (v != Py_None && intern_any(v, &self->type) < 0) goto fail;
        continue;
      }
      uint32_t kid, vid;
      if (intern_any(k, &kid) < 0 || intern_any(v, &vid) < 0) goto fail;
      self->tags[2 * self->ntags] = kid;
      self->tags[2 * self->ntags + 1] = vid;
      self->ntags++;
    }
  }
  if (bare) {
    PyObject *w = call_decorate((PyObject *)self, arg0);
    Py_DECREF(self);
    return w;
  }
  return (PyObject *)self;
fail:
  Py_DECREF(self);
  return NULL;
}

static PyObject *phase_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
  (void)type;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "phase() takes one positional argument (the name)");
    return NULL;
  }
  if (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) return phase_build(args[0], NULL);
  PyObject *kw = PyDict_New();
  if (!kw) return NULL;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
    if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
      Py_DECREF(kw);
      return NULL;
    }
  }
  PyObject *r = phase_build(args[0], kw);
  Py_DECREF(kw);
  return r;
}

static PyObject *phase_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  (void)type;
  if (PyTuple_GET_SIZE(args) != 1) {
    PyErr_SetString(PyExc_TypeError, "phase() takes one positional argument (the name)");
    return NULL;
  }
  return phase_build(PyTuple_GET_ITEM(args, 0), kwds);
}

static PyObject *phase_call(PyObject *self, PyObject *args, PyObject *kwds) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwds && PyDict_GET_SIZE(kwds))) {
    PyErr_SetString(PyExc_TypeError, "a phase used as a decorator takes one function");
    return NULL;
  }
  return call_decorate(self, PyTuple_GET_ITEM(args, 0));
}

static PyMethodDef phase_methods[] = {
    {"__enter__", (PyCFunction)phase_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))phase_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PhaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Phase",
    .tp_basicsize = sizeof(PhaseObject),
    .tp_dealloc = (destructor)phase_dealloc,
    .tp_call = phase_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Phase(name, *, phase_type=None, **tags): context manager / decorator",
    .tp_methods = phase_methods,
    .tp_new = phase_new,
    .tp_vectorcall = phase_vectorcall,
};

/* ---- module functions (the backend interface) ---- */

static int get_u32(PyObject *o, uint32_t *out) {
  unsigned long v = PyLong_AsUnsignedLong(o);
  if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
  *out = (uint32_t)v;
  return 0;
}

static PyObject *m_enabled(PyObject *m, PyObject *a) { (void)m; (void)a; return PyBool_FromLong(p_enabled()); }

static PyObject *m_intern(PyObject *m, PyObject *name) {
  (void)m;
  uint32_t id;
  if (intern_any(name, &id) < 0) return NULL;
  return PyLong_FromUnsignedLong(id);
}

static PyObject *m_begin(PyObject *m, PyObject *o) {
  (void)m;
  uint32_t id;
  if (get_u32(o, &id) < 0) return NULL;
  p_begin(id);
  Py_RETURN_NONE;
}

static PyObject *m_begin_typed(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t x, y;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "begin_typed(name_id, type_id)"); return NULL; }
  if (get_u32(a[0], &x) < 0 || get_u32(a[1], &y) < 0) return NULL;
  p_begin_typed(x, y);
  Py_RETURN_NONE;
}

static PyObject *m_end(PyObject *m, PyObject *a) { (void)m; (void)a; p_end(); Py_RETURN_NONE; }

static PyObject *m_tag(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t x, y;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "tag(key_id, value_id)"); return NULL; }
  if (get_u32(a[0], &x) < 0 || get_u32(a[1], &y) < 0) return NULL;
  p_tag(x, y);
  Py_RETURN_NONE;
}

static PyObject *m_tag_str(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "tag_str(key, value)"); return NULL; }
  uint32_t k, v;
  if (intern_any(a[0], &k) < 0 || intern_any(a[1], &v) < 0) return NULL;
  p_tag(k, v);
  Py_RETURN_NONE;
}

static PyObject *m_instant(PyObject *m, PyObject *o) {
  (void)m;
  uint32_t id;
  if (get_u32(o, &id) < 0) return NULL;
  p_instant(id);
  Py_RETURN_NONE;
}

static PyObject *m_counter(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t id;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "counter(name_id, value)"); return NULL; }
  if (get_u32(a[0], &id) < 0) return NULL;
  double v = PyFloat_AsDouble(a[1]);
  if (v == -1.0 && PyErr_Occurred()) return NULL;
  p_counter(id, v);
  Py_RETURN_NONE;
}

static PyObject *m_flow(PyObject *o, void (*fn)(uint64_t)) {
  unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  fn((uint64_t)v);
  Py_RETURN_NONE;
}
static PyObject *m_flow_out(PyObject *m, PyObject *o) { (void)m; return m_flow(o, p_flow_out); }
static PyObject *m_flow_in(PyObject *m, PyObject *o) { (void)m; return m_flow(o, p_flow_in); }

static PyObject *m_now(PyObject *m, PyObject *a) {
  (void)m; (void)a;
  return PyLong_FromUnsignedLongLong((unsigned long long)p_now());
}

static int get_u64(PyObject *o, uint64_t *out) {
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = (uint64_t)v;
  return 0;
}

/* begin_at(name_id, type_id, ticks): a phase that began at `ticks` (a now() reading). */
static PyObject *m_begin_at(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t x, y;
  uint64_t t;
  if (n != 3) { PyErr_SetString(PyExc_TypeError, "begin_at(name_id, type_id, ticks)"); return NULL; }
  if (get_u32(a[0], &x) < 0 || get_u32(a[1], &y) < 0 || get_u64(a[2], &t) < 0) return NULL;
  p_begin_at(x, y, t);
  Py_RETURN_NONE;
}

static PyObject *m_end_at(PyObject *m, PyObject *o) {
  (void)m;
  uint64_t t;
  if (get_u64(o, &t) < 0) return NULL;
  p_end_at(t);
  Py_RETURN_NONE;
}

static PyObject *m_tag_process(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t x, y;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "tag_process(key_id, value_id)"); return NULL; }
  if (get_u32(a[0], &x) < 0 || get_u32(a[1], &y) < 0) return NULL;
  p_tag_process(x, y);
  Py_RETURN_NONE;
}

static PyObject *m_tag_int(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  uint32_t k;
  if (n != 2) { PyErr_SetString(PyExc_TypeError, "tag_int(key_id, value)"); return NULL; }
  if (get_u32(a[0], &k) < 0) return NULL;
  long long v = PyLong_AsLongLong(a[1]);
  if (v == -1 && PyErr_Occurred()) return NULL;
  p_tag_int(k, (int64_t)v);
  Py_RETURN_NONE;
}

static PyObject *m_set_decorator(PyObject *m, PyObject *fn) {
  (void)m;
  Py_XINCREF(fn);
  Py_XSETREF(g_decorate, fn);
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"enabled", m_enabled, METH_NOARGS, NULL},
    {"intern", m_intern, METH_O, NULL},
    {"begin", m_begin, METH_O, NULL},
    {"begin_typed", (PyCFunction)(void (*)(void))m_begin_typed, METH_FASTCALL, NULL},
    {"end", m_end, METH_NOARGS, NULL},
    {"tag", (PyCFunction)(void (*)(void))m_tag, METH_FASTCALL, NULL},
    {"tag_str", (PyCFunction)(void (*)(void))m_tag_str, METH_FASTCALL, NULL},
    {"instant", m_instant, METH_O, NULL},
    {"counter", (PyCFunction)(void (*)(void))m_counter, METH_FASTCALL, NULL},
    {"flow_out", m_flow_out, METH_O, NULL},
    {"flow_in", m_flow_in, METH_O, NULL},
    {"now", m_now, METH_NOARGS, NULL},
    {"begin_at", (PyCFunction)(void (*)(void))m_begin_at, METH_FASTCALL, NULL},
    {"end_at", m_end_at, METH_O, NULL},
    {"tag_process", (PyCFunction)(void (*)(void))m_tag_process, METH_FASTCALL, NULL},
    {"tag_int", (PyCFunction)(void (*)(void))m_tag_int, METH_FASTCALL, NULL},
    {"set_decorator", m_set_decorator, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "grademl native backend (libgrademl.so via dlopen)", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

#define LOAD(var, sym)                                                              \
  do {                                                                              \
    *(void **)(&var) = dlsym(h, sym);                                               \
    if (!var) {                                                                     \
      PyErr_Format(PyExc_ImportError, "grademl._native: %s lacks symbol %s", path, sym); \
      return NULL;                                                                  \
    }                                                                               \
  } while (0)

static PyObject *init_module(void) {
  const char *path = getenv("GRADEML_LIBRARY");
  if (!path || !*path) {
    PyErr_SetString(PyExc_ImportError, "grademl._native: GRADEML_LIBRARY is not set");
    return NULL;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    PyErr_Format(PyExc_ImportError, "grademl._native: cannot load %s: %s", path, dlerror());
    return NULL;
  }
  LOAD(p_enabled, "grademl_enabled");
  LOAD(p_intern, "grademl_intern");
  LOAD(p_begin, "grademl_begin");
  LOAD(p_begin_typed, "grademl_begin_typed");
  LOAD(p_end, "grademl_end");
  LOAD(p_tag, "grademl_tag");
  LOAD(p_tag_str, "grademl_tag_str");
  LOAD(p_instant, "grademl_instant");
  LOAD(p_counter, "grademl_counter");
  LOAD(p_flow_out, "grademl_flow_out");
  LOAD(p_flow_in, "grademl_flow_in");
  LOAD(p_now, "grademl_now");
  LOAD(p_begin_at, "grademl_begin_at");
  LOAD(p_end_at, "grademl_end_at");
  LOAD(p_tag_process, "grademl_tag_process");
  LOAD(p_tag_int, "grademl_tag_int");
  if (PyType_Ready(&PhaseType) < 0) return NULL;
  g_str_phase_type = PyUnicode_InternFromString("phase_type");
  g_ids = PyDict_New();
  if (!g_str_phase_type || !g_ids) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  Py_INCREF(&PhaseType);
  if (PyModule_AddObject(m, "Phase", (PyObject *)&PhaseType) < 0 ||
      PyModule_AddObjectRef(m, "ids", g_ids) < 0 ||
      PyModule_AddStringConstant(m, "library", path) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}

/* The same source builds as grademl._native (in-place) and as _grademl_native (next to
 * libgrademl.so in the CMake build directory). */
PyMODINIT_FUNC PyInit__native(void) { return init_module(); }
PyMODINIT_FUNC PyInit__grademl_native(void) { return init_module(); }
