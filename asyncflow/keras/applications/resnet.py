"""`tf.keras.applications.resnet` (and `resnet50`): ResNet50/101/152 (He et al. 2015),
built from bottleneck blocks; also the pre-activation blocks ResNetV2 uses.

Layer names, order and weights are Keras' (`conv{stage}_block{i}_{j}_{conv,bn,relu}`),
so Keras' ImageNet HDF5 files load by layer order.
"""

from __future__ import annotations

from asyncflow.keras import backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/resnet/"
# (with top, without top) file hashes of Keras' ImageNet weights.
WEIGHTS_HASHES = {
    "resnet50": ("2cb95161c43110f7111970584f804107", "4d473c1dd8becc155b73f8504c6f6626"),
    "resnet101": ("f1aeb4b969a6efcfb50fad2f0c20cfc5", "88cf7a10940856eca736dc7b7e228a21"),
    "resnet152": ("100835be76be38e30d865e96f2aaae62", "ee4c566cf9a93f14d82f913c2dc6dd0c"),
    "resnet50v2": ("3ef43a0b657b3be2300d5770ece849e0", "fac2f116257151a9d068a22e544a4917"),
    "resnet101v2": ("6343647c601c52e1368623803854d971", "c0ed64b8031c3730f411d2eb4eea35b5"),
    "resnet152v2": ("a49b44d1979771252814e80f8ec446f9", "ed17cf2e0169df9d443503ef94b23b33"),
}

_EPS = 1.001e-5

__all__ = ["ResNet50", "ResNet101", "ResNet152", "decode_predictions", "preprocess_input"]


def ResNet(  # noqa: N802 - Keras' name
    stack_fn,
    preact,
    use_bias,
    model_name="resnet",
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    **kwargs,
):
    """A ResNet whose stages `stack_fn(x)` builds; `preact` for V2's pre-activation.

    Raises:
      ValueError: unknown keyword arguments, bad `weights`/`classes`/`input_shape`.
    """
    kwargs.pop("layers", None)
    if kwargs:
        raise ValueError(f"Unknown argument(s): {kwargs}")
    _common.check_weights(weights, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = _common.image_input(input_tensor, input_shape)
    bn_axis = _common.channel_axis()
    x = layers.ZeroPadding2D(padding=((3, 3), (3, 3)), name="conv1_pad")(img_input)
    x = layers.Conv2D(64, 7, strides=2, use_bias=use_bias, name="conv1_conv")(x)
    if not preact:
        x = layers.BatchNormalization(axis=bn_axis, epsilon=_EPS, name="conv1_bn")(x)
        x = layers.Activation("relu", name="conv1_relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)), name="pool1_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    x = stack_fn(x)
    if preact:
        x = layers.BatchNormalization(axis=bn_axis, epsilon=_EPS, name="post_bn")(x)
        x = layers.Activation("relu", name="post_relu")(x)
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights, "avg_pool")
    else:
        x = _common.pool(x, pooling, "avg_pool", "max_pool")
    model = _common.make_model(img_input, input_tensor, x, model_name)
    if weights == "imagenet" and model_name in WEIGHTS_HASHES:
        suffix = "" if include_top else "_notop"
        fname = f"{model_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5"
        file_hash = WEIGHTS_HASHES[model_name][0 if include_top else 1]
        return _common.load(
            model, weights, fname, file_hash=file_hash, url=BASE_WEIGHTS_PATH + fname
        )
    if weights is not None:
        model.load_weights(weights)
    return model


def _bn(x, name):
    return layers.BatchNormalization(axis=_common.channel_axis(), epsilon=_EPS, name=name)(x)


def block1(x, filters, kernel_size=3, stride=1, conv_shortcut=True, name=None):
    """A bottleneck residual block (1x1, kxk, 1x1 convolutions; 4 * filters out)."""
    if conv_shortcut:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(x)
        shortcut = _bn(shortcut, name + "_0_bn")
    else:
        shortcut = x
    x = layers.Conv2D(filters, 1, strides=stride, name=name + "_1_conv")(x)
    x = _bn(x, name + "_1_bn")
    x = layers.Activation("relu", name=name + "_1_relu")(x)
    x = layers.Conv2D(filters, kernel_size, padding="SAME", name=name + "_2_conv")(x)
    x = _bn(x, name + "_2_bn")
    x = layers.Activation("relu", name=name + "_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=name + "_3_conv")(x)
    x = _bn(x, name + "_3_bn")
    x = layers.Add(name=name + "_add")([shortcut, x])
    return layers.Activation("relu", name=name + "_out")(x)


def stack1(x, filters, blocks, stride1=2, name=None):
    """`blocks` bottleneck blocks, the first strided and with a projection shortcut."""
    x = block1(x, filters, stride=stride1, name=name + "_block1")
    for i in range(2, blocks + 1):
        x = block1(x, filters, conv_shortcut=False, name=name + "_block" + str(i))
    return x


def block2(x, filters, kernel_size=3, stride=1, conv_shortcut=False, name=None):
    """A pre-activation bottleneck block (ResNetV2): BN and ReLU before the convolutions,
    the stride on the 3x3 convolution."""
    preact = _bn(x, name + "_preact_bn")
    preact = layers.Activation("relu", name=name + "_preact_relu")(preact)
    if conv_shortcut:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(preact)
    else:
        shortcut = layers.MaxPooling2D(1, strides=stride)(x) if stride > 1 else x
    x = layers.Conv2D(filters, 1, strides=1, use_bias=False, name=name + "_1_conv")(preact)
    x = _bn(x, name + "_1_bn")
    x = layers.Activation("relu", name=name + "_1_relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)), name=name + "_2_pad")(x)
    x = layers.Conv2D(filters, kernel_size, strides=stride, use_bias=False, name=name + "_2_conv")(
        x
    )
    x = _bn(x, name + "_2_bn")
    x = layers.Activation("relu", name=name + "_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=name + "_3_conv")(x)
    return layers.Add(name=name + "_out")([shortcut, x])


def stack2(x, filters, blocks, stride1=2, name=None):
    """`blocks` pre-activation blocks; the last one is strided (ResNetV2 downsamples at
    the end of a stage)."""
    x = block2(x, filters, conv_shortcut=True, name=name + "_block1")
    for i in range(2, blocks):
        x = block2(x, filters, name=name + "_block" + str(i))
    return block2(x, filters, stride=stride1, name=name + "_block" + str(blocks))


def _v1_stacks(blocks):
    def stack_fn(x):
        x = stack1(x, 64, blocks[0], stride1=1, name="conv2")
        x = stack1(x, 128, blocks[1], name="conv3")
        x = stack1(x, 256, blocks[2], name="conv4")
        return stack1(x, 512, blocks[3], name="conv5")

    return stack_fn


def ResNet50(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    **kwargs,
):
    """ResNet50 (3, 4, 6, 3 bottleneck blocks); input 224x224 by default, at least 32.

    Raises:
      ValueError: see `ResNet`.
    """
    return ResNet(
        _v1_stacks((3, 4, 6, 3)), False, True, "resnet50", include_top, weights,
        input_tensor, input_shape, pooling, classes, **kwargs,
    )  # fmt: skip


def ResNet101(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    **kwargs,
):
    """ResNet101 (3, 4, 23, 3 bottleneck blocks).

    Raises:
      ValueError: see `ResNet`.
    """
    return ResNet(
        _v1_stacks((3, 4, 23, 3)), False, True, "resnet101", include_top, weights,
        input_tensor, input_shape, pooling, classes, **kwargs,
    )  # fmt: skip


def ResNet152(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    **kwargs,
):
    """ResNet152 (3, 8, 36, 3 bottleneck blocks).

    Raises:
      ValueError: see `ResNet`.
    """
    return ResNet(
        _v1_stacks((3, 8, 36, 3)), False, True, "resnet152", include_top, weights,
        input_tensor, input_shape, pooling, classes, **kwargs,
    )  # fmt: skip


def preprocess_input(x, data_format=None):
    """ImageNet "caffe" preprocessing: RGB to BGR, then minus each channel's mean.

    Raises:
      ValueError: unknown `data_format`.
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`.

    Raises:
      ValueError: `preds` is not of shape (samples, 1000).
    """
    return imagenet_utils.decode_predictions(preds, top=top)
