"""Element-wise math: broadcasting, TF's dtype rules, unary functions, comparisons."""

from tf1_programs._common import run


def math_broadcast_arith(tf):
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([10.0, 20.0, 30.0])
    c = tf.constant([[2.0], [-3.0]])
    s = tf.constant(0.5)
    fetches = {
        "a_plus_b": a + b,
        "a_minus_c": a - c,
        "b_times_c": b * c,
        "a_div_c": a / c,
        "a_floordiv_c": a // c,
        "a_mod_c": a % c,
        "a_pow_2": a**2,
        "two_pow_a": 2.0**a,
        "neg_a": -a,
        "abs_c": abs(c),
        "rsub": 1.0 - a,
        "rdiv": 1.0 / a,
        "scalar_bcast": a * s + 1,
        "add_n": tf.add_n([a, a, a * 2.0]),
        "sqdiff": tf.squared_difference(a, b),
        "maximum": tf.maximum(a, c),
        "minimum": tf.minimum(b, c),
        "matmul_op": a @ tf.transpose(a),
    }
    return run(tf, fetches)


def math_int_division(tf):
    x = tf.constant([7, -7, 7, -7, 0])
    y = tf.constant([2, 2, -2, -2, 3])
    xf = tf.cast(x, tf.float32)
    yf = tf.cast(y, tf.float32)
    fetches = {
        "floordiv": x // y,
        "mod": x % y,
        "truediv": x / y,
        "tf_truediv": tf.truediv(x, y),
        "tf_div": tf.div(x, y),
        "tf_floordiv": tf.floordiv(x, y),
        "floormod": tf.floormod(x, y),
        "tf_mod": tf.mod(x, y),
        "f_floordiv": xf // yf,
        "f_mod": xf % yf,
        "f_div": tf.div(xf, yf),
        "int_pow": x**2,
    }
    return run(tf, fetches)


def math_dtype_rules(tf):
    out = {}
    out["py_float"] = tf.constant(1.5).dtype.name
    out["py_int"] = tf.constant(3).dtype.name
    out["py_bool"] = tf.constant(True).dtype.name
    out["py_str"] = tf.constant("hi").dtype.name
    out["py_list_mixed"] = tf.constant([1, 2.5]).dtype.name
    out["explicit_f64"] = tf.constant(1, dtype=tf.float64).dtype.name
    for name in ("int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"):
        dt = getattr(tf, name)
        x = tf.constant([6, 3], dtype=dt)
        y = tf.constant([4, 2], dtype=dt)
        out[f"truediv_{name}"] = (x / y).dtype.name
        out[f"floordiv_{name}"] = (x // y).dtype.name
        out[f"times_pyint_{name}"] = (x * 2).dtype.name
    f = tf.constant([1.0, 2.0])
    out["f32_plus_pyint"] = (f + 1).dtype.name
    out["cast_names"] = [
        tf.cast(f, tf.int64).dtype.name,
        tf.to_int32(f).dtype.name,
        tf.to_double(f).dtype.name,
        tf.to_float(tf.constant(1)).dtype.name,
    ]
    out["dtype_props"] = [
        tf.float32.is_floating,
        tf.int32.is_integer,
        tf.uint8.is_unsigned,
        tf.float32 == tf.as_dtype("float32"),
        tf.as_dtype("int64").name,
        tf.float64.size,
    ]
    out["values"] = run(
        tf,
        {
            "i32_div": tf.constant([6, 3]) / tf.constant([4, 2]),
            "i8_div": tf.constant([7], tf.int8) / tf.constant([2], tf.int8),
            "u8_wrap": tf.constant([250], tf.uint8) + tf.constant([10], tf.uint8),
            "cast_trunc": tf.cast(tf.constant([-1.7, 1.7, 2.5]), tf.int32),
            "cast_bool": tf.cast(tf.constant([0.0, 0.5, -2.0]), tf.bool),
            "bool_to_f": tf.cast(tf.constant([True, False]), tf.float32),
            "f64": tf.constant([1.0, 3.0], tf.float64) / 3.0,
            "f16": tf.constant([1.0, 3.0], tf.float16) / 3.0,
            "i64_big": tf.constant([2**40]) * 2,
        },
    )
    return out


def math_unary(tf):
    x = tf.constant([0.25, 0.5, 1.0, 2.0, 4.0])
    z = tf.constant([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 3.7, -3.7])
    fetches = {
        "sqrt": tf.sqrt(x),
        "rsqrt": tf.rsqrt(x),
        "exp": tf.exp(x),
        "expm1": tf.expm1(x),
        "log": tf.log(x),
        "log1p": tf.log1p(x),
        "sin": tf.sin(x),
        "cos": tf.cos(x),
        "tan": tf.tan(x),
        "tanh": tf.tanh(z),
        "sigmoid": tf.sigmoid(z),
        "round": tf.round(z),
        "floor": tf.floor(z),
        "ceil": tf.ceil(z),
        "reciprocal": tf.reciprocal(x),
        "sign": tf.sign(z),
        "square": tf.square(z),
        "negative": tf.negative(z),
        "abs_int": tf.abs(tf.constant([-3, 0, 4])),
        "sign_int": tf.sign(tf.constant([-3, 0, 4])),
        "pow": tf.pow(x, 0.5),
    }
    return run(tf, fetches)


def math_compare_logical(tf):
    a = tf.constant([1, 2, 3, 4])
    b = tf.constant([4, 2, 1, 4])
    p = tf.constant([True, True, False, False])
    q = tf.constant([True, False, True, False])
    fetches = {
        "equal": tf.equal(a, b),
        "not_equal": tf.not_equal(a, b),
        "less": tf.less(a, b),
        "less_equal": tf.less_equal(a, b),
        "greater": tf.greater(a, b),
        "greater_equal": tf.greater_equal(a, 2),
        "lt_op": a < b,
        "ge_op": a >= 3,
        "and": tf.logical_and(p, q),
        "or": tf.logical_or(p, q),
        "xor": tf.logical_xor(p, q),
        "not": tf.logical_not(p),
        "invert": ~p,
        "and_op": p & q,
        "or_op": p | q,
        "xor_op": p ^ q,
        "bcast_eq": tf.equal(tf.reshape(a, [4, 1]), b),
        "str_eq": tf.equal(tf.constant(["a", "b"]), tf.constant("a")),
    }
    return run(tf, fetches)


def math_nn(tf):
    x = tf.constant([[-2.0, -0.5, 0.0, 0.5, 3.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    bias = tf.constant([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    fetches = {
        "relu": tf.nn.relu(x),
        "relu6": tf.nn.relu6(x),
        "elu": tf.nn.elu(x),
        "softplus": tf.nn.softplus(x),
        "softsign": tf.nn.softsign(x),
        "softmax": tf.nn.softmax(x),
        "softmax_axis0": tf.nn.softmax(x, axis=0),
        "log_softmax": tf.nn.log_softmax(x),
        "bias_add": tf.nn.bias_add(x, bias),
        "sigmoid": tf.nn.sigmoid(x),
        "tanh": tf.nn.tanh(x),
    }
    return run(tf, fetches)


PROGRAMS = [
    math_broadcast_arith,
    math_int_division,
    math_dtype_rules,
    math_unary,
    math_compare_logical,
    math_nn,
]
