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


# Traced steps with fixed times (the same RunMetadata was given to TF 2.21 for the
# expected values below, so times agree exactly)
STEP_0 = {
    "x/RandomStandardNormal": 400, "x/mul": 30, "x": 20, "MatMul": 5000, "Relu": 60,
    "Sum": 40, "gradients/MatMul_grad/MatMul_1": 3000, "gradients/Relu_grad/ReluGrad": 70,
    "GradientDescent/update_w/ApplyGradientDescent": 900, "GradientDescent": 2, "w/read": 3,
}  # fmt: skip
STEP_1 = {
    "x/RandomStandardNormal": 200, "x/mul": 10, "x": 20, "MatMul": 7001, "Relu": 40,
    "Sum": 20, "gradients/MatMul_grad/MatMul_1": 1000, "gradients/Relu_grad/ReluGrad": 30,
    "GradientDescent/update_w/ApplyGradientDescent": 100, "GradientDescent": 2, "w/read": 1,
}  # fmt: skip


def _traced(times):
    meta = af.RunMetadata()
    dev = meta.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    start = 1000
    for name, us in times.items():
        dev.node_stats.add(
            node_name=name, all_start_micros=start, op_end_rel_micros=us, all_end_rel_micros=us
        )
        start += us + 1
    return meta


def _trained():
    x = af.random_normal([64, 300], name="x")
    w = af.get_variable("w", [300, 400])
    y = af.reduce_sum(af.nn.relu(af.matmul(x, w)))
    af.train.GradientDescentOptimizer(0.1).minimize(y)


def test_op_view_times(tmp_path):
    out = tmp_path / "op.txt"
    with af.Graph().as_default() as g:
        _trained()
        options = PB().select(["micros", "occurrence"]).order_by("micros")
        options = options.with_min_execution_time(1).with_file_output(out).build()
        root = af.profiler.profile(g, run_meta=_traced(STEP_0), cmd="op", options=options)
    assert root.total_exec_micros == 9525
    rows = [(n.name, n.exec_micros, n.run_count) for n in root.children[0].graph_nodes]
    assert rows == [
        ("MatMul", 5000, 1), ("gradients/MatMul_grad/MatMul", 0, 0),
        ("gradients/MatMul_grad/MatMul_1", 3000, 1),
    ]  # fmt: skip
    # (TF's Identity and NoOp rows count 3 and 2 defined: its gradient adds tuple ops
    # asyncflow's leaves out)
    assert out.read_text().splitlines()[:10] == [
        "Profile:",
        "node name | total execution time | accelerator execution time | cpu execution time"
        " | op occurrence (run|defined)",
        "MatMul                         8.00ms (100.00%, 83.99%),             0us (0.00%, 0.00%),"
        "       8.00ms (100.00%, 83.99%),        2|3",
        "ApplyGradientDescent              900us (16.01%, 9.45%),             0us (0.00%, 0.00%),"
        "          900us (16.01%, 9.45%),        1|1",
        "RandomStandardNormal               400us (6.56%, 4.20%),             0us (0.00%, 0.00%),"
        "           400us (6.56%, 4.20%),        1|1",
        "ReluGrad                            70us (2.36%, 0.73%),             0us (0.00%, 0.00%),"
        "            70us (2.36%, 0.73%),        1|1",
        "Relu                                60us (1.63%, 0.63%),             0us (0.00%, 0.00%),"
        "            60us (1.63%, 0.63%),        1|1",
        "Sum                                 40us (1.00%, 0.42%),             0us (0.00%, 0.00%),"
        "            40us (1.00%, 0.42%),        1|1",
        "Mul                                 30us (0.58%, 0.31%),             0us (0.00%, 0.00%),"
        "            30us (0.58%, 0.31%),        1|2",
        "AddV2                               20us (0.26%, 0.21%),             0us (0.00%, 0.00%),"
        "            20us (0.26%, 0.21%),        1|2",
    ]


def test_profiler_steps_and_views(tmp_path):
    with af.Graph().as_default() as g:
        _trained()
        profiler = af.profiler.Profiler(g)
        ops = profiler.profile_operations(PB(PB.float_operation()).with_empty_output().build())
        assert (ops.total_float_ops, [c.name for c in ops.children]) == (46384000, ["MatMul"])
        quiet = PB(PB.trainable_variables_parameter()).with_empty_output().build()
        scope = profiler.profile_name_scope(quiet)
        assert (scope.total_parameters, [c.name for c in scope.children]) == (120000, ["w"])
        profiler.add_step(0, _traced(STEP_0))
        profiler.add_step(1, _traced(STEP_1))
        seen = {}
        for step in (-1, 0, 1):
            options = PB().select(["micros"]).with_step(step).with_empty_output().build()
            root = profiler.profile_name_scope(options)
            seen[step] = (root.total_exec_micros, [
                (c.name, c.exec_micros, c.total_exec_micros, c.run_count)
                for c in root.children if c.total_exec_micros
            ])  # fmt: skip
        # step -1: each node's average over the steps
        assert seen == {
            -1: (8974, [("GradientDescent", 2, 502, 1), ("MatMul", 6000, 6000, 1),
                        ("Relu", 50, 50, 1), ("Sum", 30, 30, 1), ("gradients", 0, 2050, 0),
                        ("w", 0, 2, 0), ("x", 20, 340, 1)]),
            0: (9525, [("GradientDescent", 2, 902, 1), ("MatMul", 5000, 5000, 1),
                       ("Relu", 60, 60, 1), ("Sum", 40, 40, 1), ("gradients", 0, 3070, 0),
                       ("w", 0, 3, 0), ("x", 20, 450, 1)]),
            1: (8424, [("GradientDescent", 2, 102, 1), ("MatMul", 7001, 7001, 1),
                       ("Relu", 40, 40, 1), ("Sum", 20, 20, 1), ("gradients", 0, 1030, 0),
                       ("w", 0, 1, 0), ("x", 20, 230, 1)]),
        }  # fmt: skip
        root = profiler.profile_operations(
            PB().select(["micros"]).order_by("micros").with_empty_output().build()
        )
        first = root.children[0]
        assert (root.total_exec_micros, first.name, first.exec_micros) == (8974, "MatMul", 8000)
        out = tmp_path / "scope.txt"
        selected = PB().select(["occurrence", "float_ops", "micros", "params", "bytes"])
        profiler.profile_name_scope(selected.with_max_depth(2).with_file_output(out).build())
        # (TF's gradients scope defines 18 ops, its graph 43: the tuple ops above)
        assert out.read_text().splitlines()[1:6] == [
            "node name | # parameters | # float_ops | requested bytes | total execution time"
            " | accelerator execution time | cpu execution time | op count (run|defined)",
            "_TFProfRoot (--/120.00k params, --/46.38m flops, --/0B, --/8.97ms, --/0us,"
            " --/8.97ms, --/11|--/39)",
            "  Const (0/0 params, 0/0 flops, 0B/0B, 0us/0us, 0us/0us, 0us/0us, 0/0|1/1)",
            "  GradientDescent (0/0 params, 0/0 flops, 0B/0B, 2us/502us, 0us/0us, 2us/502us,"
            " 1/2|1/4)",
            "  MatMul (0/0 params, 15.36m/15.36m flops, 0B/0B, 6.00ms/6.00ms, 0us/0us,"
            " 6.00ms/6.00ms, 1/1|1/1)",
        ]
        with pytest.raises(af.errors.InvalidArgumentError, match="no step_stats"):
            profiler.add_step(5, af.RunMetadata())


EXPENSIVE_ONE_STEP = [
    "top 1 operation type: MatMul, cpu: 8.00ms, accelerator: 0us, total: 8.00ms (83.99%)\n"
    "top 2 operation type: ApplyGradientDescent, cpu: 900us, accelerator: 0us, total: 900us"
    " (9.45%)\n"
    "top 3 operation type: RandomStandardNormal, cpu: 400us, accelerator: 0us, total: 400us"
    " (4.20%)",
    "top 1 graph node: MatMul, cpu: 5.00ms, accelerator: 0us, total: 5.00ms\n"
    "top 2 graph node: gradients, cpu: 0us, accelerator: 0us, total: 0us\n"
    "top 3 graph node: GradientDescent, cpu: 2us, accelerator: 0us, total: 2us",
]


def test_advise(capsys):
    with af.Graph().as_default() as g:
        _trained()
        advice = af.profiler.advise(g, run_meta=_traced(STEP_0))
        assert isinstance(advice, af.profiler.AdviceProto)
        # TF's checkers but JobChecker (not in TF's open-source build); CPU steps give
        # the accelerator and operation checkers nothing to say
        assert sorted(advice.checkers) == [
            "AcceleratorUtilizationChecker", "ExpensiveOperationChecker", "OperationChecker",
        ]  # fmt: skip
        # (TF's third report walks the Python call stacks of the code view)
        reports = list(advice.checkers["ExpensiveOperationChecker"].reports)
        assert reports == EXPENSIVE_ONE_STEP
        assert not advice.checkers["OperationChecker"].reports
        printed = capsys.readouterr().out
        assert "\nExpensiveOperationChecker:\n" + EXPENSIVE_ONE_STEP[0] + "\n" in printed
        assert "\nOperationChecker:\n" in printed
        bare = af.profiler.advise(g)
        assert [len(c.reports) for c in bare.checkers.values()] == [0, 0, 0]
        only = af.profiler.advise(g, options={"OperationChecker": {}})
        assert list(only.checkers) == ["OperationChecker"]
        profiler = af.profiler.Profiler(g)
        profiler.add_step(0, _traced(STEP_0))
        profiler.add_step(1, _traced(STEP_1))
        advice = profiler.advise({"ExpensiveOperationChecker": {}})
    assert list(advice.checkers["ExpensiveOperationChecker"].reports) == [
        "top 1 operation type: MatMul, cpu: 8.00ms, accelerator: 0us, total: 8.00ms (89.15%)\n"
        "top 2 operation type: ApplyGradientDescent, cpu: 500us, accelerator: 0us, total: 500us"
        " (5.57%)\n"
        "top 3 operation type: RandomStandardNormal, cpu: 300us, accelerator: 0us, total: 300us"
        " (3.34%)",
        "top 1 graph node: MatMul, cpu: 6.00ms, accelerator: 0us, total: 6.00ms\n"
        "top 2 graph node: gradients, cpu: 0us, accelerator: 0us, total: 0us\n"
        "top 3 graph node: GradientDescent, cpu: 2us, accelerator: 0us, total: 2us",
    ]


def _code_view_mlp():
    # (TF's recorded script ran these statements at its top level, one a line)
    x = af.placeholder(af.float32, [32, 784])
    y = af.placeholder(af.int64, [32])
    h = af.nn.relu(af.matmul(x, af.get_variable("w1", [784, 256])) + af.get_variable("b1", [256]))
    lo = af.matmul(h, af.get_variable("w2", [256, 10]))
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=lo))
    af.train.GradientDescentOptimizer(0.1).minimize(loss)
    return int(x.op.traceback.rsplit(":")[1]) + 2  # the line of `h`


def test_code_view(tmp_path):
    out = tmp_path / "code.txt"
    with af.Graph().as_default() as g:
        line = _code_view_mlp()
        options = PB(PB.float_operation()).with_max_depth(2).with_file_output(out).build()
        flops = af.profiler.profile(g, cmd="code", options=options)
        params = af.profiler.Profiler(g).profile_python(
            PB(PB.trainable_variables_parameter()).with_max_depth(2).with_empty_output().build()
        )

    def at(n, gradient=False):
        return f"test_tfprof_s26.py:{line + n}:_code_view_mlp" + (
            " (gradient)" if gradient else ""
        )

    # TF's names (with its `<module>` for our function) and totals for the same lines; a
    # gradient op counts on its forward op's line
    assert (flops.name, flops.total_float_ops) == ("_TFProfRoot", 39450243)
    assert [(c.name, c.total_float_ops) for c in flops.children] == [
        (at(0, True), 25698048), (at(0), 13255170), (at(1, True), 327680), (at(1), 168961),
        (at(2, True), 352), (at(2), 32),
    ]  # fmt: skip
    assert ("Mean", 32) in [(n.name, n.float_ops) for n in flops.children[-1].graph_nodes]
    assert (params.total_parameters, [(c.name, c.total_parameters) for c in params.children]) == (
        203520, [(at(0), 200960), (at(1), 2560)],
    )  # fmt: skip
    # (TF's line nodes hold their ops in the frames below them, so their own count is 0)
    assert out.read_text().splitlines()[2:4] == [
        "_TFProfRoot (--/39.45m flops)",
        f"  {at(0, True)} (25.70m/25.70m flops)",
    ]


def _input_shape_graph():
    x = af.placeholder(af.float32, [32, 784])
    u = af.placeholder(af.float32, [None, 784])
    w = af.get_variable("w1", [784, 256])
    h = af.nn.relu(af.matmul(x, w) + af.get_variable("b1", [256]))
    h2 = af.matmul(u, w)
    af.reduce_sum(h) + af.reduce_sum(h2) + af.reduce_sum(af.matmul(h, w, transpose_b=True))


def _control_inputs_graph():
    x = af.placeholder(af.float32, [32, 784])
    a = af.matmul(x, af.get_variable("w1", [784, 256]))
    with af.control_dependencies([a]):
        b = af.identity(x, name="b")
        af.no_op(name="n")
    af.group(a, b, name="c")


def test_op_view_input_shapes(tmp_path):
    shapes = PB(PB.float_operation()).select(["float_ops", "input_shapes"])
    options = shapes.with_min_float_operations(0).build()
    # (a control input has its source's first output shape, a scalar prints as 1)
    assert _op_view(_input_shape_graph, options, tmp_path)[1] == [
        "Profile:",
        "node name | # float_ops | input shapes",
        "MatMul                   25.69m float_ops (100.00%, 98.30%)",
        "",
        "input_type: 0:-1x784,\t1:784x256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x256,\t1:784x256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x784,\t1:784x256\t(run*0|defined*1)\texec_time: 0us",
        "",
        "AddV2                    209.15k float_ops (1.70%, 0.80%)",
        "",
        "input_type: 0:1,\t1:1\t(run*0|defined*2)\texec_time: 0us",
        "input_type: 0:256,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x256,\t1:256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:784x256,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Mul                      200.96k float_ops (0.90%, 0.77%)",
        "",
        "input_type: 0:256,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:784x256,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Sum                      33.28k float_ops (0.13%, 0.13%)",
        "",
        "input_type: 0:-1x256,\t1:2\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x256,\t1:2\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x784,\t1:2\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Sub                          2 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:1,\t1:1\t(run*0|defined*2)\texec_time: 0us",
        "",
        "Assign                       0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:256,\t1:256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:784x256,\t1:784x256\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Const                        0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: \t(run*0|defined*9)\texec_time: 0us",
        "",
        "Identity                     0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:784x256\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Placeholder                  0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: \t(run*0|defined*2)\texec_time: 0us",
        "",
        "RandomUniform                0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:1\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:2\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Relu                         0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:32x256\t(run*0|defined*1)\texec_time: 0us",
        "",
        "VariableV2                   0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: \t(run*0|defined*2)\texec_time: 0us",
        "",
    ]
    assert _op_view(_control_inputs_graph, options, tmp_path)[1][-20:] == [
        "input_type: 0:32x784,\t1:32x256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:784x256\t(run*0|defined*1)\texec_time: 0us",
        "",
        "NoOp                         0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:32x256\t(run*0|defined*1)\texec_time: 0us",
        "input_type: 0:32x256,\t1:32x784\t(run*0|defined*1)\texec_time: 0us",
        "",
        "Placeholder                  0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: \t(run*0|defined*1)\texec_time: 0us",
        "",
        "RandomUniform                0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: 0:2\t(run*0|defined*1)\texec_time: 0us",
        "",
        "VariableV2                   0 float_ops (0.00%, 0.00%)",
        "",
        "input_type: \t(run*0|defined*1)\texec_time: 0us",
        "",
    ]
    out = tmp_path / "times.txt"
    with af.Graph().as_default() as g:
        _trained()
        options = PB().select(["micros", "input_shapes"]).order_by("micros")
        options = options.with_min_execution_time(1).with_file_output(out).build()
        af.profiler.profile(g, run_meta=_traced(STEP_0), cmd="op", options=options)
    # groups that ran longest first, then by their shapes
    printed = out.read_text().splitlines()
    at = [line.split(" ")[0] for line in printed].index("Mul")
    assert printed[at : at + 10] == [
        "Mul                                 30us (0.58%, 0.31%),"
        "             0us (0.00%, 0.00%),            30us (0.58%, 0.31%)",
        "",
        "input_type: 0:64x300,\t1:1\t(run*1|defined*1)\texec_time: 30us",
        "input_type: 0:300x400,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "",
        "AddV2                               20us (0.26%, 0.21%),"
        "             0us (0.00%, 0.00%),            20us (0.26%, 0.21%)",
        "",
        "input_type: 0:64x300,\t1:1\t(run*1|defined*1)\texec_time: 20us",
        "input_type: 0:300x400,\t1:1\t(run*0|defined*1)\texec_time: 0us",
        "",
    ]
