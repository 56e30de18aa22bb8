"""`tf.make_template`: a function whose variables are created on its first call and
shared by every later call, as TF1's Template does.

The template's variable scope is opened on the first call (unique within the scope it
is called from; `unique_name_` names it exactly) or at construction with
`create_scope_now_`; later calls re-enter it with reuse, under a fresh name scope for
their ops.  A later call that creates a trainable variable is a ValueError (it would be
trained apart from the first call's); errors raised inside the function say where the
template was defined.
"""

from __future__ import annotations

import functools
import traceback

from asyncflow import graph as ops
from asyncflow import tf_logging
from asyncflow import var_scope as vs

__all__ = ["make_template", "Template"]


def make_template(
    name_, func_, create_scope_now_=False, unique_name_=None, custom_getter_=None, **kwargs
):
    """TF1's `tf.make_template(name_, func_, ...)`: `func_` wrapped so that every call
    shares the variables its first call created (`tf.get_variable` inside `func_`);
    keyword arguments are bound to `func_` (functools.partial).

    Raises:
      ValueError: name_ is None.
    """
    if kwargs:
        func_ = functools.partial(func_, **kwargs)
    return Template(
        name_,
        func_,
        create_scope_now=create_scope_now_,
        unique_name=unique_name_,
        custom_getter=custom_getter_,
    )


class Template:
    """A function sharing its variables between calls (see `make_template`)."""

    def __init__(self, name, func, create_scope_now=False, unique_name=None, custom_getter=None):
        if name is None:
            raise ValueError("name cannot be None.")
        self._func = func
        self._stacktrace = traceback.format_stack()[:-2]
        self._name = name
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._variable_scope = None
        if create_scope_now:
            scope_name = unique_name or vs._get_unique_variable_scope(name)
            with vs._pure_variable_scope(scope_name, custom_getter=custom_getter) as scope:
                self._variable_scope = scope
        self._variables_created = False

    def _call_func(self, args, kwargs):
        try:
            trainable = ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES)
            globals_ = ops.get_collection(ops.GraphKeys.GLOBAL_VARIABLES)
            result = self._func(*args, **kwargs)
            if self._variables_created:
                now = ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES)
                if len(now) != len(trainable):
                    raise ValueError(
                        "Trainable variable created when calling a template after the first "
                        "time, perhaps you used tf.Variable when you meant tf.get_variable: "
                        f"{now[len(trainable) :]}"
                    )
                now = ops.get_collection(ops.GraphKeys.GLOBAL_VARIABLES)
                if len(now) != len(globals_):
                    tf_logging.info(
                        "New variables created when calling a template after the first "
                        "time, perhaps you used tf.Variable when you meant tf.get_variable: "
                        "%s",
                        now[len(globals_) :],
                    )
            self._variables_created = True
            return result
        except Exception as exc:
            # The error again, with where the template was made (TF's addition).
            first = exc.args[0] if exc.args else ""
            trace = "".join(self._stacktrace)
            exc.args = (f"{first}\n\noriginally defined at:\n{trace}", *exc.args[1:])
            raise

    def __call__(self, *args, **kwargs):
        if self._variable_scope is not None:
            # Reuse only once the first call created the variables.
            with vs.variable_scope(self._variable_scope, reuse=self._variables_created):
                return self._call_func(args, kwargs)
        with vs.variable_scope(
            self._unique_name, self._name, custom_getter=self._custom_getter
        ) as scope:
            self._variable_scope = scope
            return self._call_func(args, kwargs)

    @property
    def name(self):
        return self._name

    @property
    def func(self):
        return self._func

    @property
    def variable_scope(self):
        return self._variable_scope

    @property
    def variable_scope_name(self):
        """The variable scope's name with a trailing "/" (None before the first call)."""
        if self._variable_scope is None:
            return None
        name = self._variable_scope.name
        return name + "/" if name else name

    @property
    def var_scope(self):
        """The variable scope (TF's deprecated name for `variable_scope`)."""
        return self._variable_scope

    def _scoped(self, key):
        if self._variable_scope is None:
            return []
        return ops.get_collection(key, self.variable_scope_name)

    @property
    def variables(self):
        return self._scoped(ops.GraphKeys.GLOBAL_VARIABLES)

    @property
    def global_variables(self):
        return self._scoped(ops.GraphKeys.GLOBAL_VARIABLES)

    @property
    def trainable_variables(self):
        return self._scoped(ops.GraphKeys.TRAINABLE_VARIABLES)

    @property
    def non_trainable_variables(self):
        trainable = set(map(id, self.trainable_variables))
        return [v for v in self.global_variables if id(v) not in trainable]

    @property
    def local_variables(self):
        return self._scoped(ops.GraphKeys.LOCAL_VARIABLES)
