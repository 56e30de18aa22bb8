"""A list attr given as nested Python lists (tf.raw_ops' `output_shapes=[[]]`, as TF
accepts it) serialises as list(shape), as TF writes it, and imports back."""

from __future__ import annotations

import pytest

import asyncflow as tf
from asyncflow import graph_io

pytestmark = pytest.mark.timeout(60)


def test_nested_lists_are_shapes():
    av = graph_io.attr_value([[], [2, None], (3,)])
    dims = [[d.size for d in s.dim] for s in av.list.shape]
    assert dims == [[], [2, -1], [3]]
    assert not av.list.shape[0].unknown_rank


def test_raw_dataset_op_with_plain_list_shapes_exports_and_reimports():
    with tf.Graph().as_default() as g:
        tf.raw_ops.RangeDataset(
            start=0, stop=3, step=1, output_types=[tf.int64], output_shapes=[[]]
        )
        gd = g.as_graph_def()
    (node,) = [n for n in gd.node if n.op == "RangeDataset"]
    assert len(node.attr["output_shapes"].list.shape) == 1
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        ds = g2.get_operation_by_name("RangeDataset").outputs[0]
        assert ds.op.get_attr("output_shapes") == [tf.TensorShape([])]


def test_a_mixed_list_is_still_refused():
    with pytest.raises(TypeError, match="mixing"):
        graph_io.attr_value([[1, 2], 3])
