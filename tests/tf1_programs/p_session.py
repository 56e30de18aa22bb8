"""Session semantics: nested fetches, feeds of intermediates, make_callable, control deps."""

import collections

from tf1_programs._common import error_class

Pair = collections.namedtuple("Pair", ["first", "second"])


def session_nested_fetches(tf):
    a = tf.constant(1.5, name="a")
    b = tf.constant([1, 2], name="b")
    c = tf.constant("txt", name="c")
    noop = tf.no_op(name="nothing")
    out = {}
    with tf.Session() as sess:
        r = sess.run({"l": [a, (b, {"deep": c})], "p": Pair(first=[a], second={"z": b})})
        out["nested"] = r
        out["types"] = [
            type(r).__name__,
            type(r["l"]).__name__,
            type(r["l"][1]).__name__,
            type(r["p"]).__name__,
        ]
        out["with_ops"] = sess.run([a, noop, b.op, "nothing"])
        out["by_name"] = sess.run(["a:0", "b:0", "c:0"])
        out["same_twice"] = sess.run([a, a, (a,)])
        out["empty"] = [sess.run([]), sess.run({}), sess.run(())]
        out["scalar_type"] = type(sess.run(a)).__name__ in ("float32", "ndarray")
    return out


def session_feeds(tf):
    x = tf.placeholder(tf.float32, shape=[None], name="x")
    y = x * 2.0
    z = y + 1.0
    k = tf.constant(10.0)
    k2 = k * 3.0
    d = tf.placeholder_with_default(tf.constant([1, 2]), shape=[None])
    d2 = d * 10
    s = tf.placeholder(tf.string, [])
    out = {}
    with tf.Session() as sess:
        out["normal"] = sess.run(z, {x: [1.0, 2.0]})
        out["feed_intermediate"] = sess.run(z, {y: [100.0]})
        out["feed_constant"] = sess.run(k2, {k: 2.0})
        out["feed_by_name"] = sess.run(z.name, {"x:0": [3.0]})
        out["default_used"] = sess.run(d2)
        out["default_fed"] = sess.run(d2, {d: [5, 6, 7]})
        out["feed_and_fetch_same"] = sess.run([x, y], {x: [4.0]})
        out["fetch_fed_intermediate"] = sess.run(y, {y: [9.0, 8.0]})
        out["string"] = sess.run(tf.identity(s), {s: "hello"})
        out["int_list_to_float"] = sess.run(y, {x: [1, 2]})
        out["missing_feed"] = error_class(lambda: sess.run(z))
        out["after_error_still_usable"] = sess.run(z, {x: [0.5]})
    return out


def session_make_callable(tf):
    a = tf.placeholder(tf.int32, [])
    b = tf.placeholder(tf.int32, [])
    s = a + b
    m = a * b
    v = tf.Variable(0)
    inc = tf.assign_add(v, 1)
    out = {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        f = sess.make_callable([s, m], feed_list=[a, b])
        out["call_1"] = f(2, 3)
        out["call_2"] = f(10, -1)
        g = sess.make_callable(s, feed_list=[a, b])
        out["single"] = g(4, 4)
        h = sess.make_callable(inc.op)
        out["op_result"] = [h(), h(), h()]
        out["after_ops"] = sess.run(v)
        t = sess.make_callable({"sum": s}, feed_list=[a, b])
        out["dict"] = t(1, 1)
    return out


def session_control_deps_group(tf):
    v = tf.Variable(0)
    w = tf.Variable(100)
    inc = tf.assign_add(v, 1)
    with tf.control_dependencies([inc]):
        read_after = v.read_value()
        plus = w + 1
    dec = tf.assign_sub(w, 5)
    both = tf.group(inc, dec)
    tup = tf.tuple([tf.constant(6), tf.constant(7)], control_inputs=[dec])
    out = {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out["read_after"] = sess.run(read_after)
        out["plus"] = sess.run(plus)
        out["v_now"] = sess.run(v)
        out["group"] = sess.run(both)
        out["after_group"] = sess.run([v, w])
        out["tuple"] = sess.run(tup)
        out["w_after_tuple"] = sess.run(w)
        out["control_inputs"] = [op.name for op in read_after.op.control_inputs]
        both.run()
        out["op_run"] = sess.run([v, w])
        out["eval"] = plus.eval()
    return out


def session_read_through_identity(tf):
    """The TF1 idiom that reads a RefVariable after an update: identity under the update.

    `tf.identity(v)` inside `control_dependencies([inc])` sees the update (TF's v/read
    forwards the variable's buffer; asyncflow reads the variable afresh there).
    """
    v = tf.Variable(0)
    inc = tf.assign_add(v, 1)
    with tf.control_dependencies([inc]):
        read_after = tf.identity(v)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return {"identity_after_inc": [sess.run(read_after) for _ in range(3)]}


def session_read_through_tuple(tf):
    """`tf.tuple([tf.identity(w)], control_inputs=[update])`: the read is built before
    the update and only its output is gated, so TF sees the update only through buffer
    aliasing (the read forwards the variable's buffer, updated in place afterwards)."""
    w = tf.Variable(100)
    dec = tf.assign_sub(w, 5)
    tup = tf.tuple([tf.identity(w), tf.constant(7)], control_inputs=[dec])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return {"tuple_after_dec": [sess.run(tup)[0] for _ in range(3)]}


def session_lifecycle(tf):
    c = tf.constant([1, 2])
    out = {}
    sess = tf.Session()
    out["run"] = sess.run(c)
    sess.close()
    out["closed_run"] = error_class(lambda: sess.run(c))
    sess2 = tf.InteractiveSession()
    out["interactive_eval"] = (c * 3).eval()
    sess2.close()
    out["eval_no_session"] = error_class(lambda: c.eval())
    out["default_after"] = tf.get_default_session() is None
    g = tf.get_default_graph()
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1)
    with tf.Session(graph=g) as s3:
        out["foreign_fetch"] = error_class(lambda: s3.run(foreign))
        out["unknown_name"] = error_class(lambda: s3.run("nope:0"))
        out["fetch_none"] = error_class(lambda: s3.run(None))
        out["fetch_int"] = error_class(lambda: s3.run(5))
    return out


PROGRAMS = [
    session_nested_fetches,
    session_feeds,
    session_make_callable,
    session_control_deps_group,
    session_read_through_identity,
    session_read_through_tuple,
    session_lifecycle,
]
