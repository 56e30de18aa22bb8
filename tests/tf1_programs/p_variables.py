"""Variables: assign/assign_add/scatter_*, get_variable with variable_scope, initialisation."""

from tf1_programs._common import error_class


def variables_assign_sequence(tf):
    v = tf.Variable(tf.zeros([3]), name="v")
    w = tf.Variable([1, 2, 3], name="w")
    k = tf.Variable(5.0, trainable=False)
    set_v = v.assign([1.0, 2.0, 3.0])
    add_v = v.assign_add([10.0, 10.0, 10.0])
    sub_v = tf.assign_sub(v, [1.0, 1.0, 1.0])
    twice = w.assign(w * 2)
    out = {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out["init"] = sess.run([v, w, k])
        out["set"] = sess.run(set_v)
        out["add"] = sess.run(add_v)
        out["sub"] = sess.run(sub_v)
        out["after"] = sess.run(v)
        out["read_value"] = sess.run(v.read_value())
        out["twice"] = [sess.run(twice), sess.run(twice)]
        out["eval"] = v.eval()
        v.load([7.0, 8.0, 9.0], sess)
        out["load"] = sess.run(v)
        out["assign_op_add"] = sess.run(tf.assign_add(k, 0.25))
        out["initialized_value"] = sess.run(
            tf.Variable(tf.ones([2]) * 3.0).initialized_value() + 1.0
        )
    out["value_dtypes"] = [v.value().dtype.name, w.read_value().dtype.name, (k + 1).dtype.name]
    out["shapes"] = [str(v.shape), str(w.get_shape()), str(k.shape)]
    return out


def variables_ref_dtype(tf):
    """A TF1 (Ref) Variable's dtype is the ref type; its reads are the base type."""
    v = tf.Variable(tf.zeros([3]), name="v")
    w = tf.Variable([1, 2, 3], name="w")
    return {
        "dtypes": [v.dtype.name, w.dtype.name],
        "base": [v.dtype.base_dtype.name, w.dtype.base_dtype.name],
        "read": [v.value().dtype.name, tf.identity(w).dtype.name],
    }


def variables_scatter(tf):
    v = tf.Variable([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    u = tf.Variable([0, 0, 0, 0, 0])
    out = {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out["update"] = sess.run(tf.scatter_update(v, [0, 2], [[9.0, 9.0], [8.0, 8.0]]))
        out["add"] = sess.run(tf.scatter_add(v, [1, 1, 3], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
        out["sub"] = sess.run(tf.scatter_sub(v, [3], [[0.5, 0.5]]))
        out["update_row_scalar_idx"] = sess.run(tf.scatter_update(v, 0, [0.0, -1.0]))
        out["int_add_repeat"] = sess.run(tf.scatter_add(u, [4, 4, 4, 0], [1, 2, 3, 4]))
        out["final"] = sess.run(v)
    return out


def variables_get_variable_scopes(tf):
    out = {}
    with tf.variable_scope("model"):
        a = tf.get_variable("a", [2], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [2, 2], initializer=tf.ones_initializer())
        c = tf.get_variable("c", initializer=tf.constant([1.0, 2.0, 3.0]))
        with tf.variable_scope("inner"):
            d = tf.get_variable("d", [3], initializer=tf.constant_initializer(0.5))
            e = tf.get_variable(
                "e", [2], dtype=tf.int32, initializer=tf.constant_initializer([4, 5])
            )
    with tf.variable_scope("model", reuse=True):
        a2 = tf.get_variable("a")
        with tf.variable_scope("inner"):
            d2 = tf.get_variable("d")
    with tf.variable_scope("model") as scope:
        scope.reuse_variables()
        b2 = tf.get_variable("b")
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        f1 = tf.get_variable("f", [1], initializer=tf.constant_initializer(2.0))
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        f2 = tf.get_variable("f", [1])
    with tf.variable_scope("defaults", initializer=tf.constant_initializer(3.0)):
        g = tf.get_variable("g", [2])
    out["names"] = [x.name for x in (a, b, c, d, e, f1, g)]
    out["same"] = [a is a2, d is d2, b is b2, f1 is f2]
    out["scope_name"] = scope.name
    out["dup_no_reuse"] = error_class(lambda: _dup(tf))
    out["missing_with_reuse"] = error_class(lambda: _missing(tf))
    out["shape_mismatch_reuse"] = error_class(lambda: _reshape_reuse(tf))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out["values"] = sess.run([a, b, c, d, e, f1, g])
    out["global_names"] = [x.name for x in tf.global_variables()]
    return out


def _dup(tf):
    with tf.variable_scope("model"):
        tf.get_variable("a", [2])


def _missing(tf):
    with tf.variable_scope("model", reuse=True):
        tf.get_variable("zzz", [2])


def _reshape_reuse(tf):
    with tf.variable_scope("model", reuse=True):
        tf.get_variable("a", [5])


def variables_initialisation(tf):
    v = tf.Variable(1.0, name="v")
    w = tf.Variable([2, 3], name="w", trainable=False)
    loc = tf.Variable(0, name="loc", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    dep = tf.Variable(v.initialized_value() * 2.0, name="dep")
    out = {
        "global": [x.op.name for x in tf.global_variables()],
        "trainable": [x.op.name for x in tf.trainable_variables()],
        "local": [x.op.name for x in tf.local_variables()],
        "coll_global": [x.op.name for x in tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)],
    }
    with tf.Session() as sess:
        out["uninit_all"] = sess.run(tf.report_uninitialized_variables())
        out["read_uninit"] = error_class(lambda: sess.run(v))
        out["add_uninit"] = error_class(lambda: sess.run(v + 1.0))
        out["is_init_before"] = sess.run(tf.is_variable_initialized(v))
        sess.run(tf.variables_initializer([v, w]))
        out["is_init_after"] = sess.run(tf.is_variable_initialized(v))
        out["uninit_some"] = sess.run(tf.report_uninitialized_variables())
        sess.run(tf.local_variables_initializer())
        out["loc"] = sess.run(loc)
        sess.run(tf.global_variables_initializer())
        out["uninit_none"] = sess.run(tf.report_uninitialized_variables())
        out["dep"] = sess.run(dep)
    with tf.Session() as sess2:
        out["fresh_session_uninit"] = error_class(lambda: sess2.run(w))
    return out


PROGRAMS = [
    variables_assign_sequence,
    variables_ref_dtype,
    variables_scatter,
    variables_get_variable_scopes,
    variables_initialisation,
]
