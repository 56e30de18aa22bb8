"""Op and tensor names from name scopes and builders; op types; graph look-ups."""

from tf1_programs._common import error_class


def names_scopes_and_builders(tf):
    c0 = tf.constant(1.0)
    c1 = tf.constant(2.0)
    named = tf.constant(3.0, name="k")
    named2 = tf.constant(4.0, name="k")
    with tf.name_scope("a"):
        with tf.name_scope("b"):
            s = tf.add(c0, c1)
            s_op = tf.add(c0, c1)
            m = tf.multiply(c0, c1)
    with tf.name_scope("a"):
        again = tf.identity(c0)
    with tf.name_scope("a/"):
        exact = tf.identity(c0)
    with tf.name_scope(None):
        top = tf.identity(c0)
    with tf.name_scope("scope") as sc:
        in_scope = tf.identity(c0, name="ident")
    x = tf.reshape(tf.range(12), [3, 4])
    built = [
        x[0],
        x[1:],
        tf.reshape(x, [-1]),
        tf.transpose(x),
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])),
        tf.reduce_sum(x),
        tf.reduce_mean(x, 0),
        tf.concat([x, x], 0),
        tf.stack([c0, c1]),
        tf.gather(x, [0]),
        tf.one_hot([0], 2),
        tf.cast(x, tf.float32),
        tf.zeros([2]),
        tf.ones([2]),
        tf.fill([2], 3),
        tf.subtract(c0, c1),
        c0 / c1,
        -c0,
        tf.placeholder(tf.float32),
        tf.argmax(x, 0),
        tf.where(tf.constant([True])),
        tf.shape(x),
        tf.expand_dims(c0, 0),
    ]
    split = tf.split(x, 2, axis=1)
    unstacked = tf.unstack(x)
    v = tf.Variable(1.0)
    v2 = tf.Variable(2.0, name="weights")
    with tf.name_scope("layer"):
        v3 = tf.Variable(3.0, name="w")
    return {
        "consts": [c0.name, c1.name, named.name, named2.name],
        "scoped": [s.name, s_op.name, m.name, again.name, exact.name, top.name],
        "scope_str": sc,
        "in_scope": in_scope.name,
        "built_names": [t.name for t in built],
        "built_types": [t.op.type for t in built],
        "split": [t.name for t in split],
        "unstack": [t.name for t in unstacked],
        "var_names": [v.name, v2.name, v3.name, v.op.name, v3.op.name],
        "var_op_types_known": v.op.type in ("VariableV2", "Variable"),
        "value_index": [split[1].value_index, s.value_index],
    }


def names_graph_lookup(tf):
    g = tf.get_default_graph()
    a = tf.constant([1, 2], name="a")
    b = tf.identity(a, name="b")
    c = tf.add(a, b, name="c")
    out = {
        "by_name": g.get_tensor_by_name("c:0") is c,
        "op_by_name": g.get_operation_by_name("b") is b.op,
        "inputs": [t.name for t in c.op.inputs],
        "outputs": [t.name for t in c.op.outputs],
        "consumers": [op.name for op in a.consumers()],
        "graph_is": [a.graph is g, c.op.graph is g],
        "get_attr_T": c.op.get_attr("T").name if hasattr(c.op.get_attr("T"), "name") else None,
        "missing_tensor": error_class(lambda: g.get_tensor_by_name("zz:0")),
        "missing_op": error_class(lambda: g.get_operation_by_name("zz")),
        "op_as_tensor": error_class(lambda: g.get_tensor_by_name("c")),
        "bad_index": error_class(lambda: g.get_tensor_by_name("c:3")),
        "num_ops": len(g.get_operations()),
        "op_names": [op.name for op in g.get_operations()],
    }
    g.finalize()
    out["finalized_add"] = error_class(lambda: tf.constant(1))
    return out


def names_pow_builder(tf):
    a = tf.constant(2.0)
    return {"names": [tf.pow(a, a).op.name, tf.pow(a, a, name="p").op.name]}


def names_operator_overloads(tf):
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="a")
    b = tf.constant([[5.0, 6.0], [7.0, 8.0]], name="b")
    p = tf.constant([True, False], name="p")
    q = tf.constant([False, False], name="q")
    with tf.name_scope("ops"):
        made = [
            a + b, a - b, a * b, a / b, a // b, a % b, a**b, a @ b, -a, abs(a),
            a < b, a <= b, a > b, a >= b, p & q, p | q, p ^ q, ~p,
            1.0 + a, 2.0 - a, 2.0 * a, 1.0 / a,
            tf.add(a, b), tf.subtract(a, b), tf.multiply(a, b), tf.divide(a, b),
        ]  # fmt: skip
    first = tf.identity(a, name="Foo")
    second = tf.identity(a, name="foo")
    third = tf.identity(a, name="FOO_1")
    return {
        "names": [t.op.name for t in made],
        "types": [t.op.type for t in made],
        "case_insensitive_unique": [first.op.name, second.op.name, third.op.name],
        "graph_def_op": tf.add(a, b, name="c").op.type,
    }


PROGRAMS = [
    names_scopes_and_builders,
    names_graph_lookup,
    names_pow_builder,
    names_operator_overloads,
]
