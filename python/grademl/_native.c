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
#include <structmember.h>
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

/* One tag of a phase: an int value (exactly an int, within int64) is written as it is, with
   no name interned for it (a counter in a loop would otherwise make a name per phase, and
   the collector's bound on names turns the later ones into placeholders); the store reads
   the same decimal text str() would give. Any other value is interned as str(value). */
typedef struct {
  uint32_t key;
  uint32_t is_int;
  int64_t value; /* the int, or the interned name's id */
} PhaseTag;

typedef struct {
  PyObject_HEAD
  uint32_t name;
  uint32_t type; /* 0: untyped */
  Py_ssize_t ntags;
  PhaseTag *tags;
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
  for (Py_ssize_t i = 0; i < self->ntags; i++) {
    const PhaseTag *t = &self->tags[i];
    if (t->is_int)
      p_tag_int(t->key, t->value);
    else
      p_tag(t->key, (uint32_t)t->value);
  }
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
    self->tags = PyMem_Malloc(sizeof(PhaseTag) * (size_t)n);
    if (!self->tags) { PyErr_NoMemory(); goto fail; }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      if (PyUnicode_Check(k) && PyUnicode_Compare(k, g_str_phase_type) == 0) {
        if (v != Py_None && intern_any(v, &self->type) < 0) goto fail;
        continue;
      }
      PhaseTag *t = &self->tags[self->ntags];
      if (intern_any(k, &t->key) < 0) goto fail;
      t->is_int = 0;
      if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) goto fail;
        if (!overflow) {
          t->is_int = 1;
          t->value = (int64_t)x;
        }
      }
      if (!t->is_int) {
        uint32_t vid;
        if (intern_any(v, &vid) < 0) goto fail;
        t->value = vid;
      }
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

/* ---- the auto-instrumentation's hot path (grademl/auto/torch.py, tuning.py) ----
 *
 * Hook: a wrapper around a function (nn.Module.__call__, Tensor.backward, an optimizer's
 * step, ...) that records a phase for the outermost call on each thread, as
 * grademl.auto.torch._outermost does in Python for other backends. Its name and type are
 * interned once, when the hook is made. Per call, in C: the active / disabled checks, the
 * per-thread nesting depth, the tags (forward: grad mode, torch_threads; backward / step:
 * the train signal), the overhead budget's sampling (a call in an iteration whose fine
 * phases are not recorded is timed only and accumulated per type for the epoch), the
 * 1-in-MEASURE_EVERY timing of a recorded phase's begin and end, and begin / end.
 * ModuleCall dispatches nn.Module.__call__ to the hook of the module's class (forward, or
 * the loss hook of a loss class). The per-thread state (HookThread) is read and written from
 * Python through the `fine` and `signals` objects (tuning.py's and torch.py's counters). */

#include <time.h>

#define HOOK_SLOTS 8

enum { TAGS_NONE = 0, TAGS_TRAIN = 1, TAGS_FORWARD = 2 };

typedef struct {
  uint32_t depth[HOOK_SLOTS]; /* nesting depth of each hook slot (fwd, bwd, opt, ...) */
  int skip;                   /* fine phases are not recorded now (fine.record is False) */
  long long recorded, timed, waits, ops;
  int measure_used;           /* fine.measure == g_measure_every - measure_used */
  long long sig_train, sig_eval;
  PyObject *acc;              /* dict: type -> [count, ns] for the open epoch, or NULL */
} HookThread;

/* Always with the GIL held; one per OS thread (a Python thread is one). */
static _Thread_local HookThread t_hook;

static int g_active;                /* the native backend is grademl's backend */
static int g_measure_every = 16;
static PyObject *g_disabled;        /* set of hook names switched off (grademl.auto._disabled) */
static PyObject *g_guard;           /* guard(name, exc) */
static PyObject *g_observe;         /* costs.observe(ns) */
static PyObject *g_is_grad_enabled; /* torch.is_grad_enabled */
static PyObject *g_get_num_threads; /* torch.get_num_threads */
static PyObject *g_str_training;
static PyObject *g_one;
static long g_threads_tagged = -1;  /* torch_threads last tagged on a forward phase */
static uint32_t g_id_mode, g_id_eval, g_id_torch_threads, g_id_data_wait_name, g_id_data_wait_type,
    g_id_deep, g_id_ops;

static inline uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* time.perf_counter_ns's clock */
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *func;
  PyObject *hook;   /* str: the name guard() and _disabled know it by */
  PyObject *ptype;  /* str: the phase type (key of the epoch's accumulator) */
  PyObject *dict;   /* __dict__ (functools.update_wrapper's attributes) */
  uint32_t name_id, type_id;
  int slot;
  int tags;         /* TAGS_* */
} HookObject;

static PyTypeObject HookType;

/* Calls guard(hook, exc) for the exception being raised, and clears it. */
static void hook_guard(PyObject *hook) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (g_guard) {
    PyObject *r = PyObject_CallFunctionObjArgs(g_guard, hook, v ? v : Py_None, NULL);
    Py_XDECREF(r);
    PyErr_Clear();
  }
  Py_XDECREF(t);
  Py_XDECREF(v);
  Py_XDECREF(tb);
}

/* Accumulates a timed-only call of type `ptype` into the epoch's dict (tuning.accumulate). */
static void hook_accumulate(PyObject *ptype, uint64_t ns) {
  PyObject *acc = t_hook.acc;
  if (!acc || !PyDict_Check(acc)) return;
  PyObject *c = PyDict_GetItemWithError(acc, ptype);
  if (c && PyList_Check(c) && PyList_GET_SIZE(c) == 2) {
    PyObject *n = PyNumber_Add(PyList_GET_ITEM(c, 0), g_one);
    PyObject *d = PyLong_FromUnsignedLongLong(ns);
    PyObject *s = d ? PyNumber_Add(PyList_GET_ITEM(c, 1), d) : NULL;
    Py_XDECREF(d);
    if (n && s) {
      PyList_SetItem(c, 0, n); /* steals */
      PyList_SetItem(c, 1, s);
    } else {
      Py_XDECREF(n);
      Py_XDECREF(s);
    }
  } else if (!c && !PyErr_Occurred()) {
    PyObject *l = Py_BuildValue("[iK]", 1, (unsigned long long)ns);
    if (l) {
      PyDict_SetItem(acc, ptype, l);
      Py_DECREF(l);
    }
  }
  PyErr_Clear();
}

/* The forward tags (torch.py's module tags): grad mode and torch_threads; counts the eval
 * signal. Writes up to two (key, value) id pairs; -1 with an exception set on error. */
static int forward_tags(PyObject *const *args, Py_ssize_t nargs, uint32_t *tags, int *ntags, int *threads) {
  *ntags = 0;
  *threads = 0;
  PyObject *g = PyObject_CallNoArgs(g_is_grad_enabled);
  if (!g) return -1;
  int grad = PyObject_IsTrue(g);
  Py_DECREF(g);
  if (grad < 0) return -1;
  if (grad) {
    if (nargs > 0) {
      PyObject *tr = PyObject_GetAttr(args[0], g_str_training);
      if (!tr) {
        PyErr_Clear(); /* getattr(m, "training", True) */
      } else {
        if (tr == Py_False) t_hook.sig_eval++;
        Py_DECREF(tr);
      }
    }
  } else {
    t_hook.sig_eval++;
    tags[0] = g_id_mode;
    tags[1] = g_id_eval;
    *ntags = 1;
  }
  PyObject *nt = PyObject_CallNoArgs(g_get_num_threads);
  if (!nt) return -1;
  long n = PyLong_AsLong(nt);
  if (n == -1 && PyErr_Occurred()) {
    Py_DECREF(nt);
    return -1;
  }
  if (n != g_threads_tagged) {
    uint32_t vid;
    int rc = intern_any(nt, &vid);
    Py_DECREF(nt);
    if (rc < 0) return -1;
    g_threads_tagged = n;
    tags[2 * *ntags] = g_id_torch_threads;
    tags[2 * *ntags + 1] = vid;
    (*ntags)++;
    *threads = 1;
  } else {
    Py_DECREF(nt);
  }
  return 0;
}

static PyObject *hook_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  HookObject *h = (HookObject *)op;
  if (!g_active) return PyObject_Vectorcall(h->func, args, nargsf, kwnames);
  if (PySet_GET_SIZE(g_disabled) > 0) {
    int off = PySet_Contains(g_disabled, h->hook);
    if (off != 0) {
      PyErr_Clear();
      return PyObject_Vectorcall(h->func, args, nargsf, kwnames);
    }
  }
  HookThread *ts = &t_hook;
  uint32_t depth = ts->depth[h->slot];
  if (depth) {
    ts->depth[h->slot] = depth + 1;
    PyObject *r = PyObject_Vectorcall(h->func, args, nargsf, kwnames);
    t_hook.depth[h->slot] = depth;
    return r;
  }
  uint32_t tags[4];
  int ntags = 0, threads = 0;
  if (h->tags == TAGS_TRAIN) {
    ts->sig_train++;
  } else if (h->tags == TAGS_FORWARD) {
    if (forward_tags(args, PyVectorcall_NARGS(nargsf), tags, &ntags, &threads) < 0) {
      hook_guard(h->hook);
      return PyObject_Vectorcall(h->func, args, nargsf, kwnames);
    }
  }
  if (ts->skip && !threads) { /* sampled out: timed only */
    ts->timed++;
    ts->depth[h->slot] = 1;
    uint64_t t0 = mono_ns();
    PyObject *r = PyObject_Vectorcall(h->func, args, nargsf, kwnames);
    uint64_t dt = mono_ns() - t0;
    t_hook.depth[h->slot] = 0;
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    hook_accumulate(h->ptype, dt);
    PyErr_Restore(et, ev, etb);
    return r;
  }
  int timed = ++ts->measure_used >= g_measure_every;
  if (timed) ts->measure_used = 0;
  uint64_t t0 = timed ? mono_ns() : 0;
  p_begin_typed(h->name_id, h->type_id);
  for (int i = 0; i < ntags; i++) p_tag(tags[2 * i], tags[2 * i + 1]);
  uint64_t begin_ns = timed ? mono_ns() - t0 : 0;
  ts->recorded++;
  ts->depth[h->slot] = 1;
  PyObject *r = PyObject_Vectorcall(h->func, args, nargsf, kwnames);
  t_hook.depth[h->slot] = 0;
  if (timed) {
    uint64_t t1 = mono_ns();
    p_end();
    uint64_t ns = begin_ns + (mono_ns() - t1);
    if (g_observe) {
      PyObject *et, *ev, *etb;
      PyErr_Fetch(&et, &ev, &etb);
      PyObject *o = PyObject_CallFunction(g_observe, "K", (unsigned long long)(ns ? ns : 1));
      Py_XDECREF(o);
      PyErr_Clear();
      PyErr_Restore(et, ev, etb);
    }
  } else {
    p_end();
  }
  return r;
}

static PyObject *hook_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *hook_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (obj == NULL || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

static int hook_traverse(HookObject *self, visitproc visit, void *arg) {
  Py_VISIT(self->func);
  Py_VISIT(self->dict);
  return 0;
}

static int hook_clear(HookObject *self) {
  Py_CLEAR(self->func);
  Py_CLEAR(self->dict);
  Py_CLEAR(self->hook);
  Py_CLEAR(self->ptype);
  return 0;
}

static void hook_dealloc(HookObject *self) {
  PyObject_GC_UnTrack(self);
  hook_clear(self);
  PyObject_GC_Del(self);
}

/* Hook(func, name, ptype, slot, hook, tags): tags 0 none, 1 train signal, 2 forward. */
static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  PyObject *func, *name, *ptype, *hook;
  int slot, tags;
  static char *kw[] = {"func", "name", "ptype", "slot", "hook", "tags", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OUUiUi", kw, &func, &name, &ptype, &slot, &hook, &tags))
    return NULL;
  if (slot < 0 || slot >= HOOK_SLOTS || tags < TAGS_NONE || tags > TAGS_FORWARD) {
    PyErr_SetString(PyExc_ValueError, "Hook: slot or tags out of range");
    return NULL;
  }
  if (tags == TAGS_FORWARD && (!g_is_grad_enabled || !g_get_num_threads)) {
    PyErr_SetString(PyExc_RuntimeError, "Hook: configure_hooks() has not set torch's functions");
    return NULL;
  }
  HookObject *self = (HookObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = hook_vectorcall;
  Py_INCREF(func);
  self->func = func;
  Py_INCREF(hook);
  self->hook = hook;
  Py_INCREF(ptype);
  self->ptype = ptype;
  self->slot = slot;
  self->tags = tags;
  if (intern_obj(name, &self->name_id) < 0 || intern_obj(ptype, &self->type_id) < 0) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static PyMemberDef hook_members[] = {
    {"__wrapped_func__", T_OBJECT, offsetof(HookObject, func), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(HookObject, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(HookObject, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef hook_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Hook",
    .tp_basicsize = sizeof(HookObject),
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_vectorcall_offset = offsetof(HookObject, vectorcall),
    .tp_call = hook_call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Hook(func, name, ptype, slot, hook, tags): the outermost-call phase wrapper",
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_members = hook_members,
    .tp_getset = hook_getset,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(HookObject, dict),
    .tp_new = hook_new,
};

/* ModuleCall(forward, factory): nn.Module.__call__, sent to the hook of the module's class:
 * factory(cls) makes it the first time a class is seen (a loss class gets its own). */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *by_class; /* dict: class -> hook */
  PyObject *factory;
  PyObject *dict;
} ModuleCallObject;

static PyTypeObject ModuleCallType;

static PyObject *modcall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  ModuleCallObject *m = (ModuleCallObject *)op;
  if (PyVectorcall_NARGS(nargsf) < 1) {
    PyErr_SetString(PyExc_TypeError, "Module.__call__ needs the module");
    return NULL;
  }
  PyObject *cls = (PyObject *)Py_TYPE(args[0]);
  PyObject *w = PyDict_GetItemWithError(m->by_class, cls);
  if (w) Py_INCREF(w);
  else {
    if (PyErr_Occurred()) return NULL;
    w = PyObject_CallOneArg(m->factory, cls);
    if (!w) return NULL;
    if (PyDict_SetItem(m->by_class, cls, w) < 0) {
      Py_DECREF(w);
      return NULL;
    }
  }
  PyObject *r = Py_TYPE(w) == &HookType ? hook_vectorcall(w, args, nargsf, kwnames)
                                        : PyObject_Vectorcall(w, args, nargsf, kwnames);
  Py_DECREF(w);
  return r;
}

static PyObject *modcall_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  PyObject *factory;
  static char *kw[] = {"factory", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", kw, &factory)) return NULL;
  ModuleCallObject *self = (ModuleCallObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = modcall_vectorcall;
  self->by_class = PyDict_New();
  if (!self->by_class) {
    Py_DECREF(self);
    return NULL;
  }
  Py_INCREF(factory);
  self->factory = factory;
  return (PyObject *)self;
}

static int modcall_traverse(ModuleCallObject *self, visitproc visit, void *arg) {
  Py_VISIT(self->by_class);
  Py_VISIT(self->factory);
  Py_VISIT(self->dict);
  return 0;
}

static int modcall_clear(ModuleCallObject *self) {
  Py_CLEAR(self->by_class);
  Py_CLEAR(self->factory);
  Py_CLEAR(self->dict);
  return 0;
}

static void modcall_dealloc(ModuleCallObject *self) {
  PyObject_GC_UnTrack(self);
  modcall_clear(self);
  PyObject_GC_Del(self);
}

static PyTypeObject ModuleCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.ModuleCall",
    .tp_basicsize = sizeof(ModuleCallObject),
    .tp_dealloc = (destructor)modcall_dealloc,
    .tp_vectorcall_offset = offsetof(ModuleCallObject, vectorcall),
    .tp_call = hook_call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "ModuleCall(factory): nn.Module.__call__ through the hook of the module's class",
    .tp_traverse = (traverseproc)modcall_traverse,
    .tp_clear = (inquiry)modcall_clear,
    .tp_getset = hook_getset,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(ModuleCallObject, dict),
    .tp_new = modcall_new,
};

/* data_wait(next, iterator, deep): the DataLoader's data wait: a phase "dataloader.next" of
 * type data_wait (tagged deep=ops when the iteration is profiled) around next(iterator),
 * ended whatever next() does (StopIteration included); counts fine.waits. */
static PyObject *m_data_wait(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  if (n != 3) {
    PyErr_SetString(PyExc_TypeError, "data_wait(next, iterator, deep)");
    return NULL;
  }
  int deep = PyObject_IsTrue(a[2]);
  if (deep < 0) return NULL;
  p_begin_typed(g_id_data_wait_name, g_id_data_wait_type);
  if (deep) p_tag(g_id_deep, g_id_ops);
  t_hook.waits++;
  PyObject *r = PyObject_CallOneArg(a[0], a[1]);
  p_end();
  return r;
}

/* ---- the DataLoader's per-iteration path (torch.py's _LoaderState, tuning.py's LoaderTuning) ----
 *
 * Tuning: the C half of a DataLoader's LoaderTuning (tuning.py): the per-iteration counters
 * and paces, and next_iteration() (whether the iteration's fine phases are recorded, whether
 * its operators are profiled under --deep). The rare decisions stay in Python, called from
 * here: _retune() every RETUNE_EVERY iterations and _deep_update(period) after a profiled
 * iteration. Loader: the C half of a DataLoader's _LoaderState (torch.py): what is open, on
 * which thread, and what the open iteration saw so far. LoaderNext: the iterator's __next__,
 * in one C call per batch: the previous iteration's mode tag and end, the tuning's decision,
 * the data wait around next(), and the new iteration's begin with its tags; names interned
 * when the hooks are configured. */

typedef struct {
  PyObject_HEAD
  long long index, every, last_fine, last_ops, deep_next, deep_count, epoch_iters, epoch_recorded;
  long long last_next, deep_stride;
  double period, fine_per_it;
  char has_last_next, has_deep_stride, has_period, has_fine_per_it, last_deep;
} TuningObject;

static PyTypeObject TuningType;
static long long g_warmup = 20, g_retune_every = 16;
static uint32_t g_id_iteration, g_id_train;
static PyObject *g_str_retune, *g_str_deep_update, *g_str_close, *g_str_start, *g_str_stop, *g_str_dataloader,
    *g_str_state;

/* next_iteration, in C (tuning.py's LoaderTuning.next_iteration, the same arithmetic). */
static int tuning_next(TuningObject *t, int deep_possible, int *record, int *deep) {
  uint64_t now = mono_ns();
  HookThread *ts = &t_hook;
  if (t->has_last_next) {
    long long period = (long long)(now - (uint64_t)t->last_next);
    long long calls = ts->recorded + ts->timed - t->last_fine;
    if (t->last_deep) {
      PyObject *p = PyLong_FromLongLong(period);
      PyObject *r = p ? PyObject_CallMethodOneArg((PyObject *)t, g_str_deep_update, p) : NULL;
      Py_XDECREF(p);
      if (!r) return -1;
      Py_DECREF(r);
    } else {
      t->period = t->has_period ? 0.9 * t->period + 0.1 * (double)period : (double)period;
      t->fine_per_it = t->has_fine_per_it ? 0.9 * t->fine_per_it + 0.1 * (double)calls : (double)calls;
      t->has_period = t->has_fine_per_it = 1;
    }
  }
  t->last_next = (long long)now;
  t->has_last_next = 1;
  t->last_fine = ts->recorded + ts->timed;
  t->last_ops = ts->ops;
  long long i = t->index++;
  if (i >= g_warmup && (i - g_warmup) % g_retune_every == 0) {
    PyObject *r = PyObject_CallMethodNoArgs((PyObject *)t, g_str_retune);
    if (!r) return -1;
    Py_DECREF(r);
  }
  int d = deep_possible && i >= t->deep_next;
  if (d) {
    t->deep_count++;
    t->deep_next = i + (t->has_deep_stride && t->deep_stride ? t->deep_stride : 1000000000LL);
  }
  t->last_deep = (char)d;
  long long every = t->every > 0 ? t->every : 1;
  int rec = d || i < g_warmup || i % every == 0;
  ts->skip = !rec;
  *record = rec;
  *deep = d;
  return 0;
}

static PyObject *tuning_next_iteration(PyObject *self, PyObject *arg) {
  int possible = PyObject_IsTrue(arg);
  if (possible < 0) return NULL;
  int record, deep;
  if (tuning_next((TuningObject *)self, possible, &record, &deep) < 0) return NULL;
  return Py_BuildValue("(OO)", record ? Py_True : Py_False, deep ? Py_True : Py_False);
}

/* An optional value (None until set): period, fine_per_it, last_next, deep_stride. */
#define OPT_GETSET(field, ctype, to_py, from_py)                                           \
  static PyObject *tuning_get_##field(PyObject *s, void *c) {                             \
    (void)c;                                                                               \
    TuningObject *t = (TuningObject *)s;                                                   \
    if (!t->has_##field) Py_RETURN_NONE;                                                   \
    return to_py(t->field);                                                                \
  }                                                                                        \
  static int tuning_set_##field(PyObject *s, PyObject *v, void *c) {                      \
    (void)c;                                                                               \
    TuningObject *t = (TuningObject *)s;                                                   \
    if (!v || v == Py_None) {                                                              \
      t->has_##field = 0;                                                                  \
      return 0;                                                                            \
    }                                                                                      \
    ctype x = from_py(v);                                                                  \
    if (x == (ctype)-1 && PyErr_Occurred()) return -1;                                     \
    t->field = x;                                                                          \
    t->has_##field = 1;                                                                    \
    return 0;                                                                              \
  }
OPT_GETSET(period, double, PyFloat_FromDouble, PyFloat_AsDouble)
OPT_GETSET(fine_per_it, double, PyFloat_FromDouble, PyFloat_AsDouble)
OPT_GETSET(last_next, long long, PyLong_FromLongLong, PyLong_AsLongLong)
OPT_GETSET(deep_stride, long long, PyLong_FromLongLong, PyLong_AsLongLong)

static PyGetSetDef tuning_getset[] = {
    {"period", tuning_get_period, tuning_set_period, "ns per iteration (EWMA, unprofiled ones), or None", NULL},
    {"fine_per_it", tuning_get_fine_per_it, tuning_set_fine_per_it, "fine calls per iteration (EWMA), or None", NULL},
    {"last_next", tuning_get_last_next, tuning_set_last_next, "when the previous data wait began, or None", NULL},
    {"deep_stride", tuning_get_deep_stride, tuning_set_deep_stride, "iterations between profiled ones, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef tuning_members[] = {
    {"index", T_LONGLONG, offsetof(TuningObject, index), 0, NULL},
    {"every", T_LONGLONG, offsetof(TuningObject, every), 0, NULL},
    {"last_fine", T_LONGLONG, offsetof(TuningObject, last_fine), 0, NULL},
    {"last_ops", T_LONGLONG, offsetof(TuningObject, last_ops), 0, NULL},
    {"last_deep", T_BOOL, offsetof(TuningObject, last_deep), 0, NULL},
    {"deep_next", T_LONGLONG, offsetof(TuningObject, deep_next), 0, NULL},
    {"deep_count", T_LONGLONG, offsetof(TuningObject, deep_count), 0, NULL},
    {"epoch_iters", T_LONGLONG, offsetof(TuningObject, epoch_iters), 0, NULL},
    {"epoch_recorded", T_LONGLONG, offsetof(TuningObject, epoch_recorded), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef tuning_methods[] = {
    {"next_iteration", tuning_next_iteration, METH_O,
     "next_iteration(deep_possible) -> (record, deep): before an iteration's data wait"},
    {NULL, NULL, 0, NULL},
};

static PyObject *tuning_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  (void)args; (void)kwds;
  TuningObject *t = (TuningObject *)type->tp_alloc(type, 0);
  if (t) t->every = 1;
  return (PyObject *)t;
}

/* A Python subclass's dealloc (subtype_dealloc) untracks, clears its slots and drops the
 * reference to its type around this. */
static void tuning_dealloc(PyObject *self) { Py_TYPE(self)->tp_free(self); }

static PyTypeObject TuningType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Tuning",
    .tp_basicsize = sizeof(TuningObject),
    .tp_dealloc = tuning_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The per-iteration half of a DataLoader's LoaderTuning (tuning.py), in C",
    .tp_members = tuning_members,
    .tp_getset = tuning_getset,
    .tp_methods = tuning_methods,
    .tp_new = tuning_new,
};

typedef struct {
  PyObject_HEAD
  PyObject *tuning;      /* a Tuning */
  PyObject *workers_tag; /* ("num_workers", "N") or NULL */
  uint32_t workers_key, workers_value;
  unsigned long thread;  /* the thread that opened the epoch (threading.get_ident()) */
  long long epoch, train_iters, eval_iters, iter_train0, iter_eval0;
  char epoch_open, iter_open, epoch_grad, iter_grad, deep;
} LoaderObject;

static PyTypeObject LoaderType;

static PyObject *loader_get_workers_tag(PyObject *s, void *c) {
  (void)c;
  LoaderObject *l = (LoaderObject *)s;
  PyObject *v = l->workers_tag ? l->workers_tag : Py_None;
  Py_INCREF(v);
  return v;
}

/* ("num_workers", "N") or None: interned here, once per epoch. */
static int loader_set_workers_tag(PyObject *s, PyObject *v, void *c) {
  (void)c;
  LoaderObject *l = (LoaderObject *)s;
  if (!v || v == Py_None) {
    Py_CLEAR(l->workers_tag);
    return 0;
  }
  uint32_t k, val;
  if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
    PyErr_SetString(PyExc_TypeError, "workers_tag: a (key, value) pair or None");
    return -1;
  }
  if (intern_any(PyTuple_GET_ITEM(v, 0), &k) < 0 || intern_any(PyTuple_GET_ITEM(v, 1), &val) < 0) return -1;
  Py_INCREF(v);
  Py_XSETREF(l->workers_tag, v);
  l->workers_key = k;
  l->workers_value = val;
  return 0;
}

static PyGetSetDef loader_getset[] = {
    {"workers_tag", loader_get_workers_tag, loader_set_workers_tag, "(\"num_workers\", \"N\") or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef loader_members[] = {
    {"tuning", T_OBJECT, offsetof(LoaderObject, tuning), 0, NULL},
    {"thread", T_ULONG, offsetof(LoaderObject, thread), 0, NULL},
    {"epoch", T_LONGLONG, offsetof(LoaderObject, epoch), 0, NULL},
    {"train_iters", T_LONGLONG, offsetof(LoaderObject, train_iters), 0, NULL},
    {"eval_iters", T_LONGLONG, offsetof(LoaderObject, eval_iters), 0, NULL},
    {"iter_train0", T_LONGLONG, offsetof(LoaderObject, iter_train0), 0, NULL},
    {"iter_eval0", T_LONGLONG, offsetof(LoaderObject, iter_eval0), 0, NULL},
    {"epoch_open", T_BOOL, offsetof(LoaderObject, epoch_open), 0, NULL},
    {"iter_open", T_BOOL, offsetof(LoaderObject, iter_open), 0, NULL},
    {"epoch_grad", T_BOOL, offsetof(LoaderObject, epoch_grad), 0, NULL},
    {"iter_grad", T_BOOL, offsetof(LoaderObject, iter_grad), 0, NULL},
    {"deep", T_BOOL, offsetof(LoaderObject, deep), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  (void)args; (void)kwds;
  LoaderObject *l = (LoaderObject *)type->tp_alloc(type, 0);
  if (l) l->epoch_grad = l->iter_grad = 1;
  return (PyObject *)l;
}

static int loader_traverse(PyObject *self, visitproc visit, void *arg) {
  LoaderObject *l = (LoaderObject *)self;
  Py_VISIT(l->tuning);
  Py_VISIT(l->workers_tag);
  return 0;
}

static int loader_clear(PyObject *self) {
  LoaderObject *l = (LoaderObject *)self;
  Py_CLEAR(l->tuning);
  Py_CLEAR(l->workers_tag);
  return 0;
}

static void loader_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  loader_clear(self);
  Py_TYPE(self)->tp_free(self);
}

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The per-iteration half of a DataLoader's _LoaderState (torch.py), in C",
    .tp_traverse = loader_traverse,
    .tp_clear = loader_clear,
    .tp_members = loader_members,
    .tp_getset = loader_getset,
    .tp_new = loader_new,
};

/* LoaderNext(next, fallback, deep): the DataLoader iterator's __next__ (next is the original,
 * fallback the Python wrapper, used while the native backend is not grademl's, deep the
 * --deep operator mode or None). */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *next, *fallback, *deep;
  PyObject *dict;
} LoaderNextObject;

static PyTypeObject LoaderNextType;

/* Calls obj.name(); 0, or -1 with an exception set. */
static int call_method0(PyObject *obj, PyObject *name) {
  PyObject *r = PyObject_CallMethodNoArgs(obj, name);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

/* The open iteration's mode tag and end (torch.py's _LoaderState.end_iteration). */
static int loader_end_iteration(LoaderObject *st, PyObject *deep_mode) {
  HookThread *ts = &t_hook;
  st->iter_open = 0;
  int train = ts->sig_train != st->iter_train0 ? 1 : (!st->iter_grad || ts->sig_eval != st->iter_eval0) ? 0 : 1;
  if (train)
    st->train_iters++;
  else
    st->eval_iters++;
  p_tag(g_id_mode, train ? g_id_train : g_id_eval);
  int rc = 0;
  if (st->deep) {
    st->deep = 0;
    if (deep_mode != Py_None) rc = call_method0(deep_mode, g_str_stop);
  }
  p_end();
  return rc;
}

static PyObject *lnext_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  LoaderNextObject *w = (LoaderNextObject *)op;
  if (!g_active) return PyObject_Vectorcall(w->fallback, args, nargsf, kwnames);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames)))
    return PyObject_Vectorcall(w->next, args, nargsf, kwnames);
  PyObject *it = args[0];
  /* self.__dict__.get("_grademl_state") */
  PyObject *d = PyObject_GenericGetDict(it, NULL);
  if (!d) {
    PyErr_Clear();
    return PyObject_CallOneArg(w->next, it);
  }
  PyObject *sto = PyDict_GetItemWithError(d, g_str_state);
  Py_XINCREF(sto);
  Py_DECREF(d);
  if (!sto) {
    PyErr_Clear();
    return PyObject_CallOneArg(w->next, it);
  }
  LoaderObject *st = (LoaderObject *)sto;
  if (!PyObject_TypeCheck(sto, &LoaderType) || !st->epoch_open || st->thread != PyThread_get_thread_ident() ||
      !st->tuning || !PyObject_TypeCheck(st->tuning, &TuningType) ||
      (PySet_GET_SIZE(g_disabled) > 0 && PySet_Contains(g_disabled, g_str_dataloader) != 0)) {
    PyErr_Clear();
    Py_DECREF(sto);
    return PyObject_CallOneArg(w->next, it);
  }
  TuningObject *tun = (TuningObject *)st->tuning;
  Py_INCREF(tun);
  PyObject *batch = NULL;
  int record = 0, deep = 0;
  /* Before the data wait: the previous iteration's end, the decision, --deep's mode. */
  if ((st->iter_open && loader_end_iteration(st, w->deep) < 0) ||
      tuning_next(tun, w->deep != Py_None, &record, &deep) < 0 ||
      (deep && call_method0(w->deep, g_str_start) < 0)) {
    hook_guard(g_str_dataloader);
    batch = PyObject_CallOneArg(w->next, it);
    goto done;
  }
  if (deep) st->deep = 1;
  /* The data wait: never sampled (the DataLoader analyses need every one). */
  p_begin_typed(g_id_data_wait_name, g_id_data_wait_type);
  if (deep) p_tag(g_id_deep, g_id_ops);
  t_hook.waits++;
  batch = PyObject_CallOneArg(w->next, it);
  p_end();
  if (!batch) {
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
      PyObject *et, *ev, *etb;
      PyErr_Fetch(&et, &ev, &etb);
      if (call_method0(sto, g_str_close) < 0) hook_guard(g_str_dataloader);
      PyErr_Restore(et, ev, etb);
    }
    goto done;
  }
  /* The new iteration. */
  tun->epoch_iters++;
  if (record) tun->epoch_recorded++;
  PyObject *g = PyObject_CallNoArgs(g_is_grad_enabled);
  int grad = g ? PyObject_IsTrue(g) : -1;
  Py_XDECREF(g);
  if (grad < 0) {
    hook_guard(g_str_dataloader);
    goto done;
  }
  p_begin_typed(g_id_iteration, g_id_iteration);
  if (st->workers_tag) p_tag(st->workers_key, st->workers_value);
  if (st->deep) p_tag(g_id_deep, g_id_ops);
  st->iter_open = 1;
  st->iter_grad = (char)grad;
  st->iter_train0 = t_hook.sig_train;
  st->iter_eval0 = t_hook.sig_eval;
done:
  Py_DECREF(tun);
  Py_DECREF(sto);
  return batch;
}

static PyObject *lnext_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  PyObject *next, *fallback, *deep;
  static char *kw[] = {"next", "fallback", "deep", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO", kw, &next, &fallback, &deep)) return NULL;
  if (!g_is_grad_enabled || !g_disabled) {
    PyErr_SetString(PyExc_RuntimeError, "LoaderNext: configure_hooks() has not been called");
    return NULL;
  }
  LoaderNextObject *self = (LoaderNextObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = lnext_vectorcall;
  Py_INCREF(next);
  self->next = next;
  Py_INCREF(fallback);
  self->fallback = fallback;
  Py_INCREF(deep);
  self->deep = deep;
  return (PyObject *)self;
}

static int lnext_traverse(LoaderNextObject *self, visitproc visit, void *arg) {
  Py_VISIT(self->next);
  Py_VISIT(self->fallback);
  Py_VISIT(self->deep);
  Py_VISIT(self->dict);
  return 0;
}

static int lnext_clear(LoaderNextObject *self) {
  Py_CLEAR(self->next);
  Py_CLEAR(self->fallback);
  Py_CLEAR(self->deep);
  Py_CLEAR(self->dict);
  return 0;
}

static void lnext_dealloc(LoaderNextObject *self) {
  PyObject_GC_UnTrack(self);
  lnext_clear(self);
  PyObject_GC_Del(self);
}

static PyTypeObject LoaderNextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.LoaderNext",
    .tp_basicsize = sizeof(LoaderNextObject),
    .tp_dealloc = (destructor)lnext_dealloc,
    .tp_vectorcall_offset = offsetof(LoaderNextObject, vectorcall),
    .tp_call = hook_call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "LoaderNext(next, fallback, deep): a DataLoader iterator's __next__, one C call per batch",
    .tp_traverse = (traverseproc)lnext_traverse,
    .tp_clear = (inquiry)lnext_clear,
    .tp_getset = hook_getset,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(LoaderNextObject, dict),
    .tp_new = lnext_new,
};

/* configure_loader(warmup, retune_every): tuning.py's constants. */
static PyObject *m_configure_loader(PyObject *m, PyObject *const *a, Py_ssize_t n) {
  (void)m;
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "configure_loader(warmup, retune_every)");
    return NULL;
  }
  long long w = PyLong_AsLongLong(a[0]), r = PyLong_AsLongLong(a[1]);
  if ((w == -1 || r == -1) && PyErr_Occurred()) return NULL;
  g_warmup = w < 0 ? 0 : w;
  g_retune_every = r < 1 ? 1 : r;
  Py_RETURN_NONE;
}

/* ---- fine / signals: the calling thread's HookThread, from Python ---- */

typedef struct {
  PyObject_HEAD
} ThreadViewObject;

#define LL_GETSET(field)                                                                   \
  static PyObject *get_##field(PyObject *s, void *c) {                                    \
    (void)s; (void)c;                                                                      \
    return PyLong_FromLongLong(t_hook.field);                                              \
  }                                                                                        \
  static int set_##field(PyObject *s, PyObject *v, void *c) {                             \
    (void)s; (void)c;                                                                      \
    if (!v) { PyErr_SetString(PyExc_AttributeError, "cannot delete"); return -1; }       \
    long long x = PyLong_AsLongLong(v);                                                    \
    if (x == -1 && PyErr_Occurred()) return -1;                                            \
    t_hook.field = x;                                                                      \
    return 0;                                                                              \
  }
LL_GETSET(recorded)
LL_GETSET(timed)
LL_GETSET(waits)
LL_GETSET(ops)
LL_GETSET(sig_train)
LL_GETSET(sig_eval)

static PyObject *get_record(PyObject *s, void *c) { (void)s; (void)c; return PyBool_FromLong(!t_hook.skip); }
static int set_record(PyObject *s, PyObject *v, void *c) {
  (void)s; (void)c;
  if (!v) { PyErr_SetString(PyExc_AttributeError, "cannot delete"); return -1; }
  int b = PyObject_IsTrue(v);
  if (b < 0) return -1;
  t_hook.skip = !b;
  return 0;
}
static PyObject *get_measure(PyObject *s, void *c) {
  (void)s; (void)c;
  return PyLong_FromLong(g_measure_every - t_hook.measure_used);
}
static int set_measure(PyObject *s, PyObject *v, void *c) {
  (void)s; (void)c;
  if (!v) { PyErr_SetString(PyExc_AttributeError, "cannot delete"); return -1; }
  long x = PyLong_AsLong(v);
  if (x == -1 && PyErr_Occurred()) return -1;
  if (x < 1) x = 1;
  if (x > g_measure_every) x = g_measure_every;
  t_hook.measure_used = g_measure_every - (int)x;
  return 0;
}
static PyObject *get_acc(PyObject *s, void *c) {
  (void)s; (void)c;
  PyObject *a = t_hook.acc ? t_hook.acc : Py_None;
  Py_INCREF(a);
  return a;
}
static int set_acc(PyObject *s, PyObject *v, void *c) {
  (void)s; (void)c;
  PyObject *old = t_hook.acc;
  t_hook.acc = (v && v != Py_None) ? v : NULL;
  Py_XINCREF(t_hook.acc);
  Py_XDECREF(old);
  return 0;
}

static PyGetSetDef fine_getset[] = {
    {"record", get_record, set_record, "fine phases are recorded now (this thread)", NULL},
    {"acc", get_acc, set_acc, "type -> [count, ns] of unrecorded fine calls, or None", NULL},
    {"recorded", get_recorded, set_recorded, "fine phases recorded", NULL},
    {"timed", get_timed, set_timed, "fine calls timed only", NULL},
    {"waits", get_waits, set_waits, "data wait phases", NULL},
    {"ops", get_ops, set_ops, "operator phases", NULL},
    {"measure", get_measure, set_measure, "recorded phases until one is timed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef signals_getset[] = {
    {"train", get_sig_train, set_sig_train, "backward passes and optimizer steps (this thread)", NULL},
    {"eval", get_sig_eval, set_sig_eval, "forward / loss calls with grad off or a model in eval mode", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *m_clock_cost(PyObject *m, PyObject *a);
static PyObject *fine_clock_cost(PyObject *self, PyObject *a) { (void)self; return m_clock_cost(NULL, a); }

static PyMethodDef fine_methods[] = {
    {"clock_cost", fine_clock_cost, METH_NOARGS, "ns of two clock reads in C (as the hooks read it)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Fine",
    .tp_basicsize = sizeof(ThreadViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The calling thread's fine-phase state (tuning.py's `fine`)",
    .tp_getset = fine_getset,
    .tp_methods = fine_methods,
};

static PyTypeObject SignalsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "grademl._native.Signals",
    .tp_basicsize = sizeof(ThreadViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The calling thread's train / eval signals (torch.py's `_signals`)",
    .tp_getset = signals_getset,
};

static int intern_cstr(const char *s, uint32_t *out) {
  PyObject *o = PyUnicode_FromString(s);
  if (!o) return -1;
  int rc = intern_obj(o, out);
  Py_DECREF(o);
  return rc;
}

/* configure_hooks(disabled, guard, observe, measure_every, is_grad_enabled, get_num_threads) */
static PyObject *m_configure_hooks(PyObject *m, PyObject *args, PyObject *kwds) {
  (void)m;
  PyObject *disabled, *guard, *observe, *ige = Py_None, *gnt = Py_None;
  int every;
  static char *kw[] = {"disabled", "guard", "observe", "measure_every", "is_grad_enabled", "get_num_threads", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOi|OO", kw, &PySet_Type, &disabled, &guard, &observe, &every,
                                   &ige, &gnt))
    return NULL;
  if (every < 1) every = 1;
  if (intern_cstr("mode", &g_id_mode) < 0 || intern_cstr("eval", &g_id_eval) < 0 ||
      intern_cstr("torch_threads", &g_id_torch_threads) < 0 ||
      intern_cstr("dataloader.next", &g_id_data_wait_name) < 0 ||
      intern_cstr("data_wait", &g_id_data_wait_type) < 0 || intern_cstr("deep", &g_id_deep) < 0 ||
      intern_cstr("ops", &g_id_ops) < 0 || intern_cstr("iteration", &g_id_iteration) < 0 ||
      intern_cstr("train", &g_id_train) < 0)
    return NULL;
  Py_INCREF(disabled);
  Py_XSETREF(g_disabled, disabled);
  Py_INCREF(guard);
  Py_XSETREF(g_guard, guard);
  Py_INCREF(observe);
  Py_XSETREF(g_observe, observe);
  if (ige != Py_None) {
    Py_INCREF(ige);
    Py_XSETREF(g_is_grad_enabled, ige);
  }
  if (gnt != Py_None) {
    Py_INCREF(gnt);
    Py_XSETREF(g_get_num_threads, gnt);
  }
  g_measure_every = every;
  if (t_hook.measure_used >= every) t_hook.measure_used = 0;
  Py_RETURN_NONE;
}

/* clock_cost(): ns of two clock reads, as the hooks take them (the median of 9 rounds). */
static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static PyObject *m_clock_cost(PyObject *m, PyObject *a) {
  (void)m; (void)a;
  uint64_t rounds[9];
  volatile uint64_t sink = 0;
  for (int r = 0; r < 9; r++) {
    uint64_t t0 = mono_ns();
    for (int i = 0; i < 200; i++) sink += mono_ns() - mono_ns();
    rounds[r] = mono_ns() - t0;
  }
  (void)sink;
  qsort(rounds, 9, sizeof(rounds[0]), cmp_u64);
  return PyFloat_FromDouble((double)rounds[4] / 200.0);
}

static PyObject *m_set_active(PyObject *m, PyObject *o) {
  (void)m;
  int b = PyObject_IsTrue(o);
  if (b < 0) return NULL;
  g_active = b && g_disabled != NULL;
  Py_RETURN_NONE;
}

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
    {"configure_hooks", (PyCFunction)(void (*)(void))m_configure_hooks, METH_VARARGS | METH_KEYWORDS, NULL},
    {"set_active", m_set_active, METH_O, NULL},
    {"clock_cost", m_clock_cost, METH_NOARGS, NULL},
    {"data_wait", (PyCFunction)(void (*)(void))m_data_wait, METH_FASTCALL, NULL},
    {"configure_loader", (PyCFunction)(void (*)(void))m_configure_loader, METH_FASTCALL, NULL},
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
  if (PyType_Ready(&PhaseType) < 0 || PyType_Ready(&HookType) < 0 || PyType_Ready(&ModuleCallType) < 0 ||
      PyType_Ready(&FineType) < 0 || PyType_Ready(&SignalsType) < 0 || PyType_Ready(&TuningType) < 0 ||
      PyType_Ready(&LoaderType) < 0 || PyType_Ready(&LoaderNextType) < 0)
    return NULL;
  g_str_retune = PyUnicode_InternFromString("_retune");
  g_str_deep_update = PyUnicode_InternFromString("_deep_update");
  g_str_close = PyUnicode_InternFromString("close");
  g_str_start = PyUnicode_InternFromString("start");
  g_str_stop = PyUnicode_InternFromString("stop");
  g_str_dataloader = PyUnicode_InternFromString("dataloader");
  g_str_state = PyUnicode_InternFromString("_grademl_state");
  if (!g_str_retune || !g_str_deep_update || !g_str_close || !g_str_start || !g_str_stop || !g_str_dataloader ||
      !g_str_state)
    return NULL;
  g_str_training = PyUnicode_InternFromString("training");
  g_one = PyLong_FromLong(1);
  if (!g_str_training || !g_one) return NULL;
  g_str_phase_type = PyUnicode_InternFromString("phase_type");
  g_ids = PyDict_New();
  if (!g_str_phase_type || !g_ids) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  Py_INCREF(&PhaseType);
  PyObject *fine = PyType_GenericNew(&FineType, NULL, NULL);
  PyObject *signals = PyType_GenericNew(&SignalsType, NULL, NULL);
  if (!fine || !signals || PyModule_AddObject(m, "fine", fine) < 0 || PyModule_AddObject(m, "signals", signals) < 0 ||
      PyModule_AddObjectRef(m, "Hook", (PyObject *)&HookType) < 0 ||
      PyModule_AddObjectRef(m, "ModuleCall", (PyObject *)&ModuleCallType) < 0 ||
      PyModule_AddObjectRef(m, "Tuning", (PyObject *)&TuningType) < 0 ||
      PyModule_AddObjectRef(m, "Loader", (PyObject *)&LoaderType) < 0 ||
      PyModule_AddObjectRef(m, "LoaderNext", (PyObject *)&LoaderNextType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
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
