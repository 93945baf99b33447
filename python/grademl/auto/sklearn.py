"""scikit-learn auto-instrumentation.

Every estimator class (sklearn.base.BaseEstimator subclasses, wrapped when their first
object is created) gets its own
fit, partial_fit, predict, predict_proba, transform, fit_transform and score wrapped
in a phase "<Class>.<method>", type "sklearn.<method>", tag estimator=<Class>, where
<Class> is the estimator object's class. The same methods provided by sklearn's mixins
(TransformerMixin.fit_transform, ClassifierMixin.score, ...) are wrapped too, so that
StandardScaler().fit_transform(X) is one phase. Only the outermost call per estimator
object is a phase: fit_transform calling self.fit and self.transform is counted once.
"""
import functools
import threading

import grademl as _g

from . import _disabled, guard

METHODS = ("fit", "partial_fit", "predict", "predict_proba", "transform", "fit_transform", "score")
_tls = threading.local()
_names = {}  # (class, method) -> (phase name, type, tags)


def register_hooks(register):
    register("sklearn.base", _patch_base)


def _spec(cls, method):
    s = _names.get((cls, method))
    if s is None:
        n = cls.__name__
        s = _names[(cls, method)] = (f"{n}.{method}", f"sklearn.{method}", (("estimator", n),))
    return s


def _wrap(func, method):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        if not _g._on or "sklearn" in _disabled:
            return func(self, *args, **kwargs)
        active = _tls.__dict__.get("active")
        if active is None:
            active = _tls.active = set()
        key = id(self)
        if key in active:
            return func(self, *args, **kwargs)
        try:
            name, ptype, tags = _spec(type(self), method)
            _g._begin_typed(name, ptype, tags)
        except Exception as e:
            guard("sklearn", e)
            return func(self, *args, **kwargs)
        active.add(key)
        try:
            return func(self, *args, **kwargs)
        finally:
            active.discard(key)
            _g._end()

    wrapper._grademl_wrapped = True
    return wrapper


def _wrap_dict(cls):
    d = cls.__dict__
    for m in METHODS:
        f = d.get(m)
        if f is None or isinstance(f, (staticmethod, classmethod, property)):
            continue
        try:
            if callable(f):
                if not getattr(f, "_grademl_wrapped", False):
                    setattr(cls, m, _wrap(f, m))
            elif hasattr(f, "__get__") and callable(getattr(f, "fn", None)):
                # sklearn.utils.metaestimators.available_if descriptors (Pipeline.predict, ...)
                if not getattr(f.fn, "_grademl_wrapped", False):
                    f.fn = _wrap(f.fn, m)
        except Exception as e:
            guard("sklearn", e)


def _wrap_class(cls, base):
    _wrap_dict(cls)
    # Methods from sklearn's mixins (not estimators themselves): wrap them where defined.
    for klass in cls.__mro__[1:]:
        if klass is object or issubclass(klass, base) or not klass.__module__.startswith("sklearn"):
            continue
        _wrap_dict(klass)


def _patch_base(mod):
    # Classes are wrapped lazily, when their first object is created (BaseEstimator.__new__
    # runs for construction, clone() and unpickling alike): importing sklearn defines
    # hundreds of estimator classes, and a program uses a handful.
    base = mod.BaseEstimator
    if getattr(base, "_grademl_patched", False):
        return
    base._grademl_patched = True
    prev_new = base.__dict__.get("__new__")
    done = set()

    def __new__(cls, *args, **kwargs):
        if cls not in done:
            # The class and the estimator classes it inherits methods from (SVC's fit is
            # BaseLibSVM's).
            for klass in cls.__mro__:
                if klass not in done and isinstance(klass, type) and issubclass(klass, base):
                    done.add(klass)
                    try:
                        _wrap_class(klass, base)
                    except Exception as e:
                        guard("sklearn", e)
        if prev_new is not None:
            return prev_new.__get__(None, cls)(cls, *args, **kwargs)
        return super(base, cls).__new__(cls)

    base.__new__ = staticmethod(__new__)
