"""The names TF 1 gives the Consts a builder makes for Python values (tests/fixtures/
const_names_cases.py, built on asyncflow and compared with TensorFlow's ops below).

TF's `_apply_op_helper` opens the op's name scope, converts each Python input there
named by its argument ("Add/y", "concat/values_1"), then makes the op with that
scope's name; Python wrappers open their own scopes ("mul/y", "MatMul/a").  The ops are
compared in sorted order: a cond's Switch or a loop's Enter for an outer tensor is made
just before its op here, just after it in TF.
"""

import pathlib
import sys

import pytest

import asyncflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "fixtures"))
import const_names_cases as cases  # noqa: E402

# Recorded from TensorFlow 2.21.0 by fixtures/record_const_names_tf.py.
TF_OPS = {
    "mul": ["Const mul/y", "Mul mul <- x:0 mul/y:0"],
    "rmul": ["Const mul/x", "Mul mul <- mul/x:0 x:0"],
    "sub_int": ["Cast Cast <- x:0", "Const sub/y", "Sub sub <- Cast:0 sub/y:0"],
    "rsub": ["Const sub/x", "Sub sub <- sub/x:0 x:0"],
    "radd": ["Const add/x", "AddV2 add <- add/x:0 x:0"],
    "truediv": ["Const truediv/y", "RealDiv truediv <- x:0 truediv/y:0"],
    "rtruediv": ["Const truediv/x", "RealDiv truediv <- truediv/x:0 x:0"],
    "floordiv": ["Const floordiv/y", "FloorDiv floordiv <- x:0 floordiv/y:0"],
    "mod": ["Const mod/y", "FloorMod mod <- x:0 mod/y:0"],
    "pow": ["Const pow/y", "Pow pow <- x:0 pow/y:0"],
    "rpow": ["Const pow/x", "Pow pow <- pow/x:0 x:0"],
    "and": [
        "Const Greater/y",
        "Greater Greater <- x:0 Greater/y:0",
        "Const and/y",
        "LogicalAnd and <- Greater:0 and/y:0",
    ],
    "le": ["Const LessEqual/y", "LessEqual LessEqual <- x:0 LessEqual/y:0"],
    "add": ["Const Add/y", "AddV2 Add <- x:0 Add/y:0"],
    "add_left": ["Const Add/x", "AddV2 Add <- Add/x:0 x:0"],
    "maximum": ["Const Maximum/y", "Maximum Maximum <- x:0 Maximum/y:0"],
    "minimum_left": ["Const Minimum/x", "Minimum Minimum <- Minimum/x:0 x:0"],
    "squared_difference": [
        "Const SquaredDifference/y",
        "SquaredDifference SquaredDifference <- x:0 SquaredDifference/y:0",
    ],
    "equal": ["Const Equal/y", "Equal Equal <- x:0 Equal/y:0"],
    "reshape": ["Const Reshape/shape", "Reshape Reshape <- x:0 Reshape/shape:0"],
    "pad": ["Const Pad/paddings", "Pad Pad <- x:0 Pad/paddings:0"],
    "tile": ["Const Tile/multiples", "Tile Tile <- x:0 Tile/multiples:0"],
    "slice": [
        "Const Slice/begin",
        "Const Slice/size",
        "Slice Slice <- x:0 Slice/begin:0 Slice/size:0",
    ],
    "strided_slice": [
        "Const strided_slice/stack",
        "Const strided_slice/stack_1",
        "Const strided_slice/stack_2",
        "StridedSlice strided_slice <- x:0 strided_slice/stack:0 "
        "strided_slice/stack_1:0 strided_slice/stack_2:0",
    ],
    "expand_dims": ["Const ExpandDims/dim", "ExpandDims ExpandDims <- x:0 ExpandDims/dim:0"],
    "gather": [
        "Const GatherV2/indices",
        "Const GatherV2/axis",
        "GatherV2 GatherV2 <- x:0 GatherV2/indices:0 GatherV2/axis:0",
    ],
    "gather_nd": ["Const GatherNd/indices", "GatherNd GatherNd <- x:0 GatherNd/indices:0"],
    "one_hot": [
        "Const one_hot/on_value",
        "Const one_hot/off_value",
        "Const one_hot/indices",
        "Const one_hot/depth",
        "OneHot one_hot <- one_hot/indices:0 one_hot/depth:0 one_hot/on_value:0 "
        "one_hot/off_value:0",
    ],
    "one_hot_values": [
        "Const one_hot/Const",
        "Const one_hot/Const_1",
        "Const one_hot/indices",
        "Const one_hot/depth",
        "OneHot one_hot <- one_hot/indices:0 one_hot/depth:0 one_hot/Const:0 one_hot/Const_1:0",
    ],
    "fill": ["Const Fill/dims", "Const Fill/value", "Fill Fill <- Fill/dims:0 Fill/value:0"],
    "transpose": ["Const transpose/perm", "Transpose transpose <- x:0 transpose/perm:0"],
    "transpose_list": [
        "Const transpose/a",
        "Const transpose/perm",
        "Transpose transpose <- transpose/a:0 transpose/perm:0",
    ],
    "concat": [
        "Const concat/values_1",
        "Const concat/axis",
        "ConcatV2 concat <- x:0 concat/values_1:0 concat/axis:0",
    ],
    "stack": ["Const stack"],
    "split": ["Const split/split_dim", "Split split <- split/split_dim:0 x:0"],
    "reduce_sum_axis": ["Const Sum/reduction_indices", "Sum Sum <- x:0 Sum/reduction_indices:0"],
    "reduce_mean_all": ["Const Const", "Mean Mean <- x:0 Const:0"],
    "reduce_max_all": ["Const Const", "Max Max <- x:0 Const:0"],
    "argmax": ["Const ArgMax/dimension", "ArgMax ArgMax <- x:0 ArgMax/dimension:0"],
    "range": [
        "Const range/start",
        "Const range/limit",
        "Const range/delta",
        "Range range <- range/start:0 range/limit:0 range/delta:0",
    ],
    "identity_n": ["Const IdentityN/input_1", "IdentityN IdentityN <- x:0 IdentityN/input_1:0"],
    "print": [
        "Const Print/data_1",
        "Const Print/data_2",
        "Print Print <- x:0 x:0 Print/data_1:0 Print/data_2:0",
    ],
    "bias_add": ["Const BiasAdd/bias", "BiasAdd BiasAdd <- x:0 BiasAdd/bias:0"],
    "placeholder_with_default": [
        "Const PlaceholderWithDefault/input",
        "PlaceholderWithDefault PlaceholderWithDefault <- PlaceholderWithDefault/input:0",
    ],
    "abs": ["Const Abs/x", "Abs Abs <- Abs/x:0"],
    "cast": ["Const Cast/x", "Cast Cast <- Cast/x:0"],
    "casts": ["Const Cast/x", "Const Cast_1/x", "Cast Cast_1 <- Cast_1/x:0"],
    "matmul": [
        "Const transpose/perm",
        "Transpose transpose <- x:0 transpose/perm:0",
        "Const MatMul/a",
        "MatMul MatMul <- MatMul/a:0 transpose:0",
    ],
    "matmul_right": ["Const MatMul/b", "MatMul MatMul <- x:0 MatMul/b:0"],
    "clip_by_value": [
        "Const clip_by_value/Minimum/y",
        "Minimum clip_by_value/Minimum <- x:0 clip_by_value/Minimum/y:0",
        "Const clip_by_value/y",
        "Maximum clip_by_value <- clip_by_value/Minimum:0 clip_by_value/y:0",
    ],
    "zeros_ones": [
        "Const zeros",
        "Const ones_like/Shape/shape_as_tensor",
        "Const ones_like/Const",
        "Fill ones_like <- ones_like/Shape/shape_as_tensor:0 ones_like/Const:0",
        "Const zeros_like/tensor",
        "Const zeros_like",
    ],
    "count_nonzero": [
        "Const count_nonzero/zeros",
        "NotEqual count_nonzero/NotEqual <- x:0 count_nonzero/zeros:0",
        "Cast count_nonzero/Cast <- count_nonzero/NotEqual:0",
        "Const count_nonzero/Const",
        "Sum count_nonzero/Sum <- count_nonzero/Cast:0 count_nonzero/Const:0",
    ],
    "random_uniform": [
        "Const random_uniform/shape",
        "Const random_uniform/min",
        "Const random_uniform/max",
        "RandomUniform random_uniform/RandomUniform <- random_uniform/shape:0",
        "Sub random_uniform/sub <- random_uniform/max:0 random_uniform/min:0",
        "Mul random_uniform/mul <- random_uniform/RandomUniform:0 random_uniform/sub:0",
        "AddV2 random_uniform <- random_uniform/mul:0 random_uniform/min:0",
    ],
    "random_normal": [
        "Const random_normal/shape",
        "Const random_normal/mean",
        "Const random_normal/stddev",
        "RandomStandardNormal random_normal/RandomStandardNormal <- random_normal/shape:0",
        "Mul random_normal/mul <- random_normal/RandomStandardNormal:0 random_normal/stddev:0",
        "AddV2 random_normal <- random_normal/mul:0 random_normal/mean:0",
    ],
    "sequence_of_defaults": [
        "Const Add/y",
        "AddV2 Add <- x:0 Add/y:0",
        "Const Add_1/y",
        "AddV2 Add_1 <- x:0 Add_1/y:0",
        "Const Add_2/y",
        "AddV2 Add_2 <- x:0 Add_2/y:0",
    ],
    "clip_by_norm": [
        "Mul clip_by_norm/mul <- x:0 x:0",
        "Const clip_by_norm/Const",
        "Sum clip_by_norm/Sum <- clip_by_norm/mul:0 clip_by_norm/Const:0",
        "Const clip_by_norm/Greater/y",
        "Greater clip_by_norm/Greater <- clip_by_norm/Sum:0 clip_by_norm/Greater/y:0",
        "Const clip_by_norm/ones_like/Shape/shape_as_tensor",
        "Const clip_by_norm/ones_like/Const",
        "Fill clip_by_norm/ones_like <- clip_by_norm/ones_like/Shape/shape_as_tensor:0 "
        "clip_by_norm/ones_like/Const:0",
        "Select clip_by_norm/Select <- clip_by_norm/Greater:0 clip_by_norm/Sum:0 "
        "clip_by_norm/ones_like:0",
        "Sqrt clip_by_norm/Sqrt <- clip_by_norm/Select:0",
        "Select clip_by_norm/Select_1 <- clip_by_norm/Greater:0 clip_by_norm/Sqrt:0 "
        "clip_by_norm/Sum:0",
        "Const clip_by_norm/mul_1/y",
        "Mul clip_by_norm/mul_1 <- x:0 clip_by_norm/mul_1/y:0",
        "Const clip_by_norm/Maximum/y",
        "Maximum clip_by_norm/Maximum <- clip_by_norm/Select_1:0 clip_by_norm/Maximum/y:0",
        "RealDiv clip_by_norm/truediv <- clip_by_norm/mul_1:0 clip_by_norm/Maximum:0",
        "Identity clip_by_norm <- clip_by_norm/truediv:0",
    ],
    "l2_normalize": [
        "Square l2_normalize/Square <- x:0",
        "Const l2_normalize/Sum/reduction_indices",
        "Sum l2_normalize/Sum <- l2_normalize/Square:0 l2_normalize/Sum/reduction_indices:0",
        "Const l2_normalize/Maximum/y",
        "Maximum l2_normalize/Maximum <- l2_normalize/Sum:0 l2_normalize/Maximum/y:0",
        "Rsqrt l2_normalize/Rsqrt <- l2_normalize/Maximum:0",
        "Mul l2_normalize <- x:0 l2_normalize/Rsqrt:0",
    ],
    "moments": [
        "Const moments/mean/reduction_indices",
        "Mean moments/mean <- x:0 moments/mean/reduction_indices:0",
        "StopGradient moments/StopGradient <- moments/mean:0",
        "SquaredDifference moments/SquaredDifference <- x:0 moments/StopGradient:0",
        "Const moments/variance/reduction_indices",
        "Mean moments/variance <- moments/SquaredDifference:0 "
        "moments/variance/reduction_indices:0",
        "Squeeze moments/Squeeze <- moments/mean:0",
        "Squeeze moments/Squeeze_1 <- moments/variance:0",
    ],
    "sigmoid_cross_entropy": [
        "Const logistic_loss/labels",
        "Const logistic_loss/zeros_like",
        "GreaterEqual logistic_loss/GreaterEqual <- x:0 logistic_loss/zeros_like:0",
        "Select logistic_loss/Select <- logistic_loss/GreaterEqual:0 x:0 "
        "logistic_loss/zeros_like:0",
        "Neg logistic_loss/Neg <- x:0",
        "Select logistic_loss/Select_1 <- logistic_loss/GreaterEqual:0 logistic_loss/Neg:0 x:0",
        "Mul logistic_loss/mul <- x:0 logistic_loss/labels:0",
        "Sub logistic_loss/sub <- logistic_loss/Select:0 logistic_loss/mul:0",
        "Exp logistic_loss/Exp <- logistic_loss/Select_1:0",
        "Log1p logistic_loss/Log1p <- logistic_loss/Exp:0",
        "AddV2 logistic_loss <- logistic_loss/sub:0 logistic_loss/Log1p:0",
    ],
    "cumsum": ["Const Cumsum/axis", "Cumsum Cumsum <- x:0 Cumsum/axis:0"],
    "reverse": ["Const ReverseV2/axis", "ReverseV2 ReverseV2 <- x:0 ReverseV2/axis:0"],
    "exponential_decay": [
        "Const global_step/Initializer/zeros",
        "VariableV2 global_step",
        "Assign global_step/Assign <- global_step:0 global_step/Initializer/zeros:0",
        "Identity global_step/read <- global_step:0",
        "Const ExponentialDecay/initial_learning_rate",
        "Const ExponentialDecay/Cast/x",
        "Cast ExponentialDecay/Cast <- ExponentialDecay/Cast/x:0",
        "Const ExponentialDecay/Cast_1/x",
        "Cast ExponentialDecay/Cast_2 <- global_step/read:0",
        "RealDiv ExponentialDecay/truediv <- ExponentialDecay/Cast_2:0 ExponentialDecay/Cast:0",
        "Pow ExponentialDecay/Pow <- ExponentialDecay/Cast_1/x:0 ExponentialDecay/truediv:0",
        "Mul ExponentialDecay <- ExponentialDecay/initial_learning_rate:0 ExponentialDecay/Pow:0",
    ],
    "strings_split": [
        "Const StringSplit/input",
        "Const StringSplit/Const",
        "StringSplitV2 StringSplit/StringSplitV2 <- StringSplit/input:0 StringSplit/Const:0",
    ],
    "string_join": [
        "Const StringJoin/inputs_0",
        "Const StringJoin/inputs_1",
        "StringJoin StringJoin <- StringJoin/inputs_0:0 StringJoin/inputs_1:0",
    ],
    "resize_images": [
        "Const Reshape/shape",
        "Reshape Reshape <- x:0 Reshape/shape:0",
        "Const resize/size",
        "ResizeBilinear resize/ResizeBilinear <- Reshape:0 resize/size:0",
    ],
    "gradients": [
        "Const Reshape/shape",
        "Reshape Reshape <- x:0 Reshape/shape:0",
        "Const Const",
        "Sum Sum <- Reshape:0 Const:0",
        "Const gradients/Shape",
        "Const gradients/grad_ys_0/Const",
        "Fill gradients/grad_ys_0 <- gradients/Shape:0 gradients/grad_ys_0/Const:0",
        "Const gradients/Sum_grad/Reshape/shape",
        "Reshape gradients/Sum_grad/Reshape <- gradients/grad_ys_0:0 "
        "gradients/Sum_grad/Reshape/shape:0",
        "Const gradients/Sum_grad/Const",
        "Tile gradients/Sum_grad/Tile <- gradients/Sum_grad/Reshape:0 gradients/Sum_grad/Const:0",
        "Const gradients/Reshape_grad/Shape",
        "Reshape gradients/Reshape_grad/Reshape <- gradients/Sum_grad/Tile:0 "
        "gradients/Reshape_grad/Shape:0",
    ],
    "gradients_broadcast": [
        "Const mul/y",
        "Mul mul <- x:0 mul/y:0",
        "Const sub/y",
        "Sub sub <- mul:0 sub/y:0",
        "Relu Relu <- sub:0",
        "Const Const",
        "Mean Mean <- Relu:0 Const:0",
        "Const gradients/Shape",
        "Const gradients/grad_ys_0/Const",
        "Fill gradients/grad_ys_0 <- gradients/Shape:0 gradients/grad_ys_0/Const:0",
        "Const gradients/Mean_grad/Reshape/shape",
        "Reshape gradients/Mean_grad/Reshape <- gradients/grad_ys_0:0 "
        "gradients/Mean_grad/Reshape/shape:0",
        "Const gradients/Mean_grad/Const",
        "Tile gradients/Mean_grad/Tile <- gradients/Mean_grad/Reshape:0 "
        "gradients/Mean_grad/Const:0",
        "Const gradients/Mean_grad/Const_1",
        "RealDiv gradients/Mean_grad/truediv <- gradients/Mean_grad/Tile:0 "
        "gradients/Mean_grad/Const_1:0",
        "ReluGrad gradients/Relu_grad/ReluGrad <- gradients/Mean_grad/truediv:0 Relu:0",
        "Neg gradients/sub_grad/Neg <- gradients/Relu_grad/ReluGrad:0",
        "Const gradients/sub_grad/Shape",
        "Const gradients/sub_grad/Shape_1",
        "Const gradients/sub_grad/Sum/reduction_indices",
        "Sum gradients/sub_grad/Sum <- gradients/sub_grad/Neg:0 "
        "gradients/sub_grad/Sum/reduction_indices:0",
        "Reshape gradients/sub_grad/Reshape <- gradients/sub_grad/Sum:0 "
        "gradients/sub_grad/Shape_1:0",
        "Mul gradients/mul_grad/Mul <- gradients/Relu_grad/ReluGrad:0 mul/y:0",
        "Mul gradients/mul_grad/Mul_1 <- x:0 gradients/Relu_grad/ReluGrad:0",
        "Const gradients/mul_grad/Shape",
        "Const gradients/mul_grad/Shape_1",
        "Const gradients/mul_grad/Sum/reduction_indices",
        "Sum gradients/mul_grad/Sum <- gradients/mul_grad/Mul_1:0 "
        "gradients/mul_grad/Sum/reduction_indices:0",
        "Reshape gradients/mul_grad/Reshape <- gradients/mul_grad/Sum:0 "
        "gradients/mul_grad/Shape_1:0",
    ],
    "gradients_batch": [
        "Placeholder b",
        "Const strided_slice/stack",
        "Const strided_slice/stack_1",
        "Const strided_slice/stack_2",
        "StridedSlice strided_slice <- x:0 strided_slice/stack:0 "
        "strided_slice/stack_1:0 strided_slice/stack_2:0",
        "Mul mul <- b:0 strided_slice:0",
        "Const sub/y",
        "Sub sub <- mul:0 sub/y:0",
        "Const Const",
        "Sum Sum <- sub:0 Const:0",
        "Const gradients/Shape",
        "Const gradients/grad_ys_0/Const",
        "Fill gradients/grad_ys_0 <- gradients/Shape:0 gradients/grad_ys_0/Const:0",
        "Const gradients/Sum_grad/Reshape/shape",
        "Reshape gradients/Sum_grad/Reshape <- gradients/grad_ys_0:0 "
        "gradients/Sum_grad/Reshape/shape:0",
        "Shape gradients/Sum_grad/Shape <- sub:0",
        "Tile gradients/Sum_grad/Tile <- gradients/Sum_grad/Reshape:0 gradients/Sum_grad/Shape:0",
        "Neg gradients/sub_grad/Neg <- gradients/Sum_grad/Tile:0",
        "Shape gradients/sub_grad/Shape <- mul:0",
        "Const gradients/sub_grad/Shape_1",
        "Const gradients/sub_grad/Sum/reduction_indices",
        "Sum gradients/sub_grad/Sum <- gradients/sub_grad/Neg:0 "
        "gradients/sub_grad/Sum/reduction_indices:0",
        "Reshape gradients/sub_grad/Reshape <- gradients/sub_grad/Sum:0 "
        "gradients/sub_grad/Shape_1:0",
        "Mul gradients/mul_grad/Mul <- gradients/Sum_grad/Tile:0 strided_slice:0",
        "Mul gradients/mul_grad/Mul_1 <- b:0 gradients/Sum_grad/Tile:0",
        "Shape gradients/mul_grad/Shape <- b:0",
        "Const gradients/mul_grad/Shape_1",
        "Const gradients/mul_grad/Sum/reduction_indices",
        "Sum gradients/mul_grad/Sum <- gradients/mul_grad/Mul_1:0 "
        "gradients/mul_grad/Sum/reduction_indices:0",
        "Reshape gradients/mul_grad/Reshape <- gradients/mul_grad/Sum:0 "
        "gradients/mul_grad/Shape_1:0",
        "Const gradients/strided_slice_grad/Shape",
        "Const gradients/strided_slice_grad/StridedSliceGrad/shape",
        "Const gradients/strided_slice_grad/StridedSliceGrad/begin",
        "Const gradients/strided_slice_grad/StridedSliceGrad/end",
        "Const gradients/strided_slice_grad/StridedSliceGrad/strides",
        "StridedSliceGrad gradients/strided_slice_grad/StridedSliceGrad <- "
        "gradients/strided_slice_grad/StridedSliceGrad/shape:0 "
        "gradients/strided_slice_grad/StridedSliceGrad/begin:0 "
        "gradients/strided_slice_grad/StridedSliceGrad/end:0 "
        "gradients/strided_slice_grad/StridedSliceGrad/strides:0 "
        "gradients/mul_grad/Reshape:0",
    ],
    "failed_reshape": [
        "Const Reshape/shape",
        "Const Reshape_1/shape",
        "Reshape Reshape_1 <- x:0 Reshape_1/shape:0",
    ],
    "function_capture": [
        "Placeholder a",
        "Const Add/y",
        "AddV2 Add <- a:0 Add/y:0",
        "Const mul/y",
        "Mul mul <- Add:0 mul/y:0",
        "Const Sum/reduction_indices",
        "Placeholder Sum/outer/yy",
        "Sum Sum <- Sum/outer/yy:0 Sum/reduction_indices:0",
        "AddV2 add_1 <- mul:0 Sum:0",
        "Identity Identity <- add_1:0",
    ],
    "cond": [
        "Const strided_slice/stack",
        "Const strided_slice/stack_1",
        "Const strided_slice/stack_2",
        "StridedSlice strided_slice <- x:0 strided_slice/stack:0 strided_slice/stack_1:0 "
        "strided_slice/stack_2:0",
        "Const Greater/y",
        "Greater Greater <- strided_slice:0 Greater/y:0",
        "Switch cond/Switch <- Greater:0 Greater:0",
        "Identity cond/switch_t <- cond/Switch:1",
        "Identity cond/switch_f <- cond/Switch:0",
        "Identity cond/pred_id <- Greater:0",
        "Const cond/Reshape/shape <- ^cond/switch_t",
        "Reshape cond/Reshape <- cond/Reshape/Switch:1 cond/Reshape/shape:0",
        "Switch cond/Reshape/Switch <- x:0 cond/pred_id:0",
        "Const cond/mul/y <- ^cond/switch_f",
        "Mul cond/mul <- cond/mul/Switch:0 cond/mul/y:0",
        "Switch cond/mul/Switch <- x:0 cond/pred_id:0",
        "Const cond/Reshape_1/shape <- ^cond/switch_f",
        "Reshape cond/Reshape_1 <- cond/mul:0 cond/Reshape_1/shape:0",
        "Merge cond/Merge <- cond/Reshape_1:0 cond/Reshape:0",
    ],
    "while": [
        "Const while/Const",
        "Enter while/Enter <- while/Const:0",
        "Merge while/Merge <- while/Enter:0 while/NextIteration:0",
        "Const while/Less/y <- ^while/Merge",
        "Less while/Less <- while/Merge:0 while/Less/y:0",
        "LoopCond while/LoopCond <- while/Less:0",
        "Switch while/Switch <- while/Merge:0 while/LoopCond:0",
        "Identity while/Identity <- while/Switch:1",
        "Const while/Const_1 <- ^while/Identity",
        "Sum while/Sum <- while/Sum/Enter:0 while/Const_1:0",
        "Enter while/Sum/Enter <- x:0",
        "Const while/mul/y <- ^while/Identity",
        "Mul while/mul <- while/Sum:0 while/mul/y:0",
        "AddV2 while/Add <- while/Identity:0 while/mul:0",
        "NextIteration while/NextIteration <- while/Add:0",
        "Exit while/Exit <- while/Switch:0",
    ],
    "scopes": [
        "Const r/shape",
        "Reshape r <- x:0 r/shape:0",
        "Const s/q/shape",
        "Reshape s/q <- x:0 s/q/shape:0",
        "Const s/cat/values_1",
        "Const s/cat/axis",
        "ConcatV2 s/cat <- x:0 s/cat/values_1:0 s/cat/axis:0",
        "Const s/Add/y",
        "AddV2 s/Add <- x:0 s/Add/y:0",
    ],
    "autopack": [
        "Const Shape",
        "Const strided_slice/stack",
        "Const strided_slice/stack_1",
        "Const strided_slice/stack_2",
        "StridedSlice strided_slice <- Shape:0 strided_slice/stack:0 "
        "strided_slice/stack_1:0 strided_slice/stack_2:0",
        "Const Reshape/shape/1",
        "Pack Reshape/shape <- strided_slice:0 Reshape/shape/1:0",
        "Reshape Reshape <- x:0 Reshape/shape:0",
        "Const zeros/packed/1",
        "Pack zeros/packed <- strided_slice:0 zeros/packed/1:0",
        "Const zeros/Const",
        "Fill zeros <- zeros/packed:0 zeros/Const:0",
    ],
}


def test_every_case_is_recorded():
    assert sorted(TF_OPS) == sorted(cases.CASES)


@pytest.mark.parametrize("name", list(TF_OPS))
def test_ops_and_names_are_tfs(name):
    assert sorted(cases.build(tf, name)) == sorted(TF_OPS[name])


def test_an_exact_name_another_op_then_asks_for_is_a_duplicate():
    """`name="foo/"` does not mark "foo" used, so a later `name="foo"` meets it: TF's
    "Duplicate node name" error, and no second op (TF makes the later op's Const
    "foo/y_1" before it fails; we check the name first)."""
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2], name="x")
        tf.add(x, 1.0, name="foo/")
        with pytest.raises(ValueError, match="Duplicate node name in graph: 'foo'"):
            tf.add(x, 1.0, name="foo")
        assert [op.name for op in g.get_operations()] == ["x", "foo/y", "foo"]


def test_a_failed_conversion_keeps_the_ops_name_taken():
    """As TF's: the name scope is opened (and its name taken) before any input converts."""
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2], name="x")
        with pytest.raises(TypeError):
            tf.add(x, "abc")
        assert tf.add(x, 1.0).op.name == "Add_1"
        assert "Add" not in [op.name for op in g.get_operations()]
