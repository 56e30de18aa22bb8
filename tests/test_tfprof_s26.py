"""tfprof's op view, Profiler, advise and op log against TF 2.21: every expected number,
name and printed line here was recorded from TF 2.21 (`tensorflow.compat.v1`) on the
same graphs (times differ between runs, so only their layout is compared)."""

import pytest

import asyncflow as af

PB = af.profiler.ProfileOptionBuilder


def _mlp():
    x = af.placeholder(af.float32, [32, 784])
    y = af.placeholder(af.int64, [32])
    h = af.nn.relu(af.matmul(x, af.get_variable("w1", [784, 256])) + af.get_variable("b1", [256]))
    lo = af.nn.bias_add(
        af.matmul(h, af.get_variable("w2", [256, 10])), af.get_variable("b2", [10])
    )
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=lo))
    af.train.GradientDescentOptimizer(0.1).minimize(loss)


def _cnn():
    x = af.placeholder(af.float32, [8, 28, 28, 1])
    c = af.nn.conv2d(x, af.get_variable("k", [5, 5, 1, 16]), [1, 1, 1, 1], "SAME")
    c = af.nn.max_pool(af.nn.relu(c), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    d = af.nn.depthwise_conv2d(c, af.get_variable("dk", [3, 3, 16, 2]), [1, 1, 1, 1], "VALID")
    a = af.nn.avg_pool(d, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    s = af.reduce_sum(af.square(a - 1.0)) + af.nn.l2_loss(a) * 2.0
    af.train.AdamOptimizer().minimize(s)


def _op_view(build, options, tmp_path):
    out = tmp_path / "op.txt"
    with af.Graph().as_default() as g:
        build()
        root = af.profiler.profile(g, cmd="op", options=PB(options).with_file_output(out).build())
    return root, out.read_text().splitlines()


def _chain(root):
    rows, node = [], root
    while node.children:
        (node,) = node.children
        rows.append(node)
    return rows


def test_op_view_rows_chain_by_type(tmp_path):
    root, _ = _op_view(_mlp, PB.float_operation(), tmp_path)
    assert (root.name, root.total_float_ops, root.float_ops) == ("_TFProfRoot", 39450894, 0)
    assert [(r.name, r.float_ops, r.total_float_ops) for r in _chain(root)] == [
        ("MatMul", 39026688, 39450894), ("AddV2", 211722, 424206), ("Mul", 203850, 212484),
        ("Sum", 7936, 8634), ("BiasAdd", 320, 698), ("BiasAddGrad", 310, 378),
        ("Mean", 32, 68), ("RealDiv", 32, 36), ("Sub", 4, 4),
    ]  # fmt: skip
    add = _chain(root)[1]
    rows = [(n.name, n.float_ops, n.total_float_ops, len(n.input_shapes)) for n in add.graph_nodes]
    assert rows == [
        ("add", 8192, 8192, 2), ("b1/Initializer/random_uniform", 256, 256, 2),
        ("b2/Initializer/random_uniform", 10, 10, 2),
        ("w1/Initializer/random_uniform", 200704, 200704, 2),
        ("w2/Initializer/random_uniform", 2560, 2560, 2),
    ]  # fmt: skip
    assert add.graph_nodes[0].input_shapes == {0: [32, 256], 1: [256]}
    assert all(not n.children and n.total_definition_count == 1 for n in add.graph_nodes)
    root, printed = _op_view(_mlp, PB.trainable_variables_parameter(), tmp_path)
    (variables,) = _chain(root)
    assert (variables.name, variables.parameters, root.total_parameters) == (
        "VariableV2", 203530, 203530)  # fmt: skip
    assert [(n.name, n.parameters, n.input_shapes) for n in variables.graph_nodes] == [
        ("b1", 256, {}), ("b2", 10, {}), ("w1", 200704, {}), ("w2", 2560, {}),
    ]  # fmt: skip
    assert printed == [
        "Profile:",
        "node name | # parameters",
        "VariableV2               203.53k params (100.00%, 100.00%)",
    ]


def test_op_view_printed_like_tf(tmp_path):
    options = PB(PB.float_operation()).select(["float_ops", "occurrence"]).build()
    assert _op_view(_mlp, options, tmp_path)[1] == [
        "Profile:",
        "node name | # float_ops | op occurrence (run|defined)",
        "MatMul                   39.03m float_ops (100.00%, 98.92%),        0|6",
        "AddV2                    211.72k float_ops (1.08%, 0.54%),        0|5",
        "Mul                      203.85k float_ops (0.54%, 0.52%),        0|5",
        "Sum                      7.94k float_ops (0.02%, 0.02%),        0|1",
        "BiasAdd                    320 float_ops (0.00%, 0.00%),        0|1",
        "BiasAddGrad                310 float_ops (0.00%, 0.00%),        0|1",
        "Mean                        32 float_ops (0.00%, 0.00%),        0|1",
        "RealDiv                     32 float_ops (0.00%, 0.00%),        0|1",
        "Sub                          4 float_ops (0.00%, 0.00%),        0|4",
    ]
    # max_depth counts the rows after the first; shown rows alone are accounted
    root, printed = _op_view(_mlp, PB(PB.float_operation()).with_max_depth(2).build(), tmp_path)
    assert root.total_float_ops == 39442260
    assert printed[2:] == [
        "MatMul                   39.03m float_ops (100.00%, 98.95%)",
        "AddV2                    211.72k float_ops (1.05%, 0.54%)",
        "Mul                      203.85k float_ops (0.52%, 0.52%)",
    ]
    hide = PB(PB.float_operation()).with_node_names(hide_name_regexes=["Mat.*"]).build()
    root, printed = _op_view(_mlp, hide, tmp_path)
    assert root.total_float_ops == 424206
    assert printed[2:4] == [
        "AddV2                    211.72k float_ops (100.00%, 49.91%)",
        "Mul                      203.85k float_ops (50.09%, 48.05%)",
    ]


def test_op_view_cnn(tmp_path):
    root, printed = _op_view(_cnn, PB.float_operation(), tmp_path)
    assert root.total_float_ops == 16164709
    assert printed == [
        "Profile:",
        "node name | # float_ops",
        "Conv2D                   5.02m float_ops (100.00%, 31.04%)",
        "Conv2DBackpropFilter     5.02m float_ops (68.96%, 31.04%)",
        "Conv2DBackpropInput      5.02m float_ops (37.92%, 31.04%)",
        "DepthwiseConv2dNative    663.55k float_ops (6.88%, 4.10%)",
        "MaxPoolGrad              125.44k float_ops (2.77%, 0.78%)",
        "MaxPool                  100.35k float_ops (2.00%, 0.62%)",
        "AvgPoolGrad              73.73k float_ops (1.38%, 0.46%)",
        "AvgPool                  36.86k float_ops (0.92%, 0.23%)",
        "Mul                      28.34k float_ops (0.69%, 0.18%)",
        "L2Loss                   27.65k float_ops (0.52%, 0.17%)",
        "Sum                      18.43k float_ops (0.35%, 0.11%)",
        "Sub                      9.22k float_ops (0.23%, 0.06%)",
        "AddN                     9.22k float_ops (0.18%, 0.06%)",
        "Neg                      9.22k float_ops (0.12%, 0.06%)",
        "Square                   9.22k float_ops (0.06%, 0.06%)",
        "AddV2                      689 float_ops (0.00%, 0.00%)",
    ]
    mul = _chain(root)[8]
    assert [(n.name, n.float_ops) for n in mul.graph_nodes][:3] == [
        ("Adam/mul", 1), ("Adam/mul_1", 1), ("dk/Initializer/random_uniform/mul", 288),
    ]  # fmt: skip
    assert len(mul.graph_nodes[0].input_shapes) == 4  # (two data, two control inputs)
    both = PB(PB.float_operation()).select(["params", "float_ops"]).with_min_float_operations(0)
    root, printed = _op_view(_cnn, both.build(), tmp_path)
    assert (root.total_float_ops, root.total_parameters) == (16164709, 8338)
    assert printed[1:3] == [
        "node name | # parameters | # float_ops",
        "Conv2D                        0 params (100.00%, 0.00%), "
        "5.02m float_ops (100.00%, 31.04%)",
    ]
    # (TF's gradient of Conv2D has a ShapeN row, asyncflow's two Shape ops: left out)
    assert [line for line in printed if line.startswith(("Placeholder", "VariableV2"))] == [
        "Placeholder              6.27k params (100.00%, 75.22%),     0 float_ops (0.00%, 0.00%)",
        "VariableV2                2.07k params (24.78%, 24.78%),     0 float_ops (0.00%, 0.00%)",
    ]


def test_scope_view_name_scopes_and_parameters(tmp_path):
    out = tmp_path / "scope.txt"
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [4, 3], name="x")
        af.placeholder(af.float32, [None, 3], name="u")
        w = af.get_variable("w", [3, 2])
        af.get_variable("nt", [5], trainable=False)
        af.constant([1.0, 2.0], name="c")
        af.matmul(x, w)
        root = af.profiler.profile(
            g, options=PB().select(["params"]).with_file_output(out).build()
        )
    # TF counts the placeholders' and all variables' elements, and shows every name scope
    assert root.total_parameters == 23
    assert out.read_text().splitlines() == [
        "Profile:",
        "node name | # parameters",
        "_TFProfRoot (--/23 params)",
        "  MatMul (0/0 params)",
        "  c (0/0 params)",
        "  nt (5, 5/5 params)",
        "    nt/Assign (0/0 params)",
        "    nt/Initializer (0/0 params)",
        "      nt/Initializer/random_uniform (0/0 params)",
        "        nt/Initializer/random_uniform/RandomUniform (0/0 params)",
        "        nt/Initializer/random_uniform/max (0/0 params)",
        "        nt/Initializer/random_uniform/min (0/0 params)",
        "        nt/Initializer/random_uniform/mul (0/0 params)",
        "        nt/Initializer/random_uniform/shape (0/0 params)",
        "        nt/Initializer/random_uniform/sub (0/0 params)",
        "    nt/read (0/0 params)",
        "  u (-1x3, 0/0 params)",
        "  w (3x2, 6/6 params)",
        "    w/Assign (0/0 params)",
        "    w/Initializer (0/0 params)",
        "      w/Initializer/random_uniform (0/0 params)",
        "        w/Initializer/random_uniform/RandomUniform (0/0 params)",
        "        w/Initializer/random_uniform/max (0/0 params)",
        "        w/Initializer/random_uniform/min (0/0 params)",
        "        w/Initializer/random_uniform/mul (0/0 params)",
        "        w/Initializer/random_uniform/shape (0/0 params)",
        "        w/Initializer/random_uniform/sub (0/0 params)",
        "    w/read (0/0 params)",
        "  x (4x3, 12/12 params)",
    ]


def _small():
    x = af.placeholder(af.float32, [4, 3])
    w = af.get_variable("w", [3, 2])
    return af.reduce_sum(af.nn.relu(af.matmul(x, w)) * 2.0)


def _extra_log():
    op_log = af.profiler.OpLogProto()
    op_log.log_entries.add(name="Relu", types=["_mine"], float_ops=7)
    op_log.log_entries.add(name="MatMul", types=["_big"])
    return op_log


# TF 2.21's tfprof_log bytes for _small() (add_trace=False), without and with _extra_log()
TF_LOG = bytes.fromhex(
    "0a240a20772f496e697469616c697a65722f72616e646f6d5f756e69666f726d2f73756210010a24"
    "0a20772f496e697469616c697a65722f72616e646f6d5f756e69666f726d2f6d756c10060a200a1c"
    "772f496e697469616c697a65722f72616e646f6d5f756e69666f726d10060a0a0a064d61744d756c"
    "10300a070a036d756c10080a070a0353756d10070a190a01771a145f747261696e61626c655f7661"
    "726961626c65731208080012046e6f6e65"
)
TF_LOG_MERGED = bytes.fromhex(
    "0a0f0a0452656c7510071a055f6d696e650a100a064d61744d756c10301a045f6269670a240a2077"
    "2f496e697469616c697a65722f72616e646f6d5f756e69666f726d2f73756210010a240a20772f49"
    "6e697469616c697a65722f72616e646f6d5f756e69666f726d2f6d756c10060a200a1c772f496e69"
    "7469616c697a65722f72616e646f6d5f756e69666f726d10060a070a036d756c10080a070a035375"
    "6d10070a190a01771a145f747261696e61626c655f7661726961626c65731208080012046e6f6e65"
)


def test_write_op_log_bytes_as_tf(tmp_path):
    with af.Graph().as_default() as g:
        _small()
        af.profiler.write_op_log(g, str(tmp_path), add_trace=False)
        assert (tmp_path / "tfprof_log").read_bytes() == TF_LOG
        af.profiler.write_op_log(g, str(tmp_path), op_log=_extra_log(), add_trace=False)
        assert (tmp_path / "tfprof_log").read_bytes() == TF_LOG_MERGED
        parsed = af.profiler.OpLogProto.FromString(TF_LOG_MERGED)
        assert [(e.name, e.float_ops, list(e.types)) for e in parsed.log_entries][:3] == [
            ("Relu", 7, ["_mine"]), ("MatMul", 48, ["_big"]),
            ("w/Initializer/random_uniform/sub", 1, []),
        ]  # fmt: skip
        with pytest.raises(af.errors.NotFoundError, match="tfprof_log; No such file"):
            af.profiler.write_op_log(g, str(tmp_path / "missing" / "sub"))


def test_write_op_log_traces(tmp_path):
    with af.Graph().as_default() as g:
        _small()
        top = af.constant(1.0, name="top")
        af.profiler.write_op_log(g, str(tmp_path))
    log = af.profiler.OpLogProto.FromString((tmp_path / "tfprof_log").read_bytes())
    # TF's: every op has an entry with its trace, the float counts and types as without
    assert len(log.log_entries) == len(g.get_operations()) and log.id_to_string[0] == "none"
    entries = {e.name: e for e in log.log_entries}
    assert (entries["MatMul"].float_ops, list(entries["w"].types)) == (
        48,
        ["_trainable_variables"],
    )
    (frame,) = entries["top"].code_def.traces
    assert log.id_to_string[frame.file_id] == __file__
    assert (frame.lineno, frame.func_start_line) == (int(top.op.traceback.rsplit(":")[1]), -1)
    assert log.id_to_string[frame.function_id] == "test_write_op_log_traces"
    (frame,) = entries["MatMul"].code_def.traces
    assert log.id_to_string[frame.function_id] == "_small"


def test_op_log_in_the_analysis():
    with af.Graph().as_default() as g:
        _small()
        op_log = af.profiler.OpLogProto()
        op_log.log_entries.add(name="Relu", types=["_mine"], float_ops=7)
        quiet = PB(PB.float_operation()).with_empty_output()
        mine = quiet.with_accounted_types(["_mine", "MatMul"]).build()
        root = af.profiler.profile(g, op_log=op_log, cmd="op", options=mine)
        assert (root.total_float_ops, [c.name for c in root.children]) == (55, ["MatMul"])
        quiet = PB(PB.float_operation()).with_empty_output().build()
        root = af.profiler.profile(g, op_log=op_log, options=quiet)
    assert (root.total_float_ops, [(c.name, c.float_ops) for c in root.children]) == (83, [
        ("MatMul", 48), ("w/Initializer/random_uniform", 6), ("mul", 8), ("Relu", 7), ("Sum", 7),
    ])  # fmt: skip
