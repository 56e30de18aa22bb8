"""`tf.keras.applications.imagenet_utils`: ImageNet input preprocessing, prediction
decoding, and the argument checks the application models share.

`preprocess_input` works on NumPy arrays (in place when the dtype allows, as Keras does)
and on graph tensors (graph ops); `decode_predictions` reads Keras' ImageNet class index
through `keras.utils.get_file`, so it is read from `~/.keras/models` when placed there.
"""

from __future__ import annotations

import json
import warnings

import numpy as np

from asyncflow.keras import activations, backend, backend_config, data_utils

CLASS_INDEX = None
CLASS_INDEX_PATH = (
    "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json"
)
_CLASS_INDEX_HASH = "c2c37ea517e94d9795004a39431a14cb"

# Per-channel statistics of the ImageNet training set: BGR means for "caffe", RGB mean
# and standard deviation (of pixels scaled to [0, 1]) for "torch".
_CAFFE_MEAN = (103.939, 116.779, 123.68)
_TORCH_MEAN = (0.485, 0.456, 0.406)
_TORCH_STD = (0.229, 0.224, 0.225)

__all__ = ["decode_predictions", "preprocess_input"]


def preprocess_input(x, data_format=None, mode="caffe"):
    """Scales a batch of images (values in [0, 255]) the way an ImageNet model expects.

    `mode` "caffe": RGB to BGR, then each channel minus its ImageNet mean; "tf": scaled
    to [-1, 1]; "torch": scaled to [0, 1], then normalized per channel.  A NumPy array
    is changed in place when its dtype is floating.

    Raises:
      ValueError: unknown `mode` or `data_format`.
    """
    if mode not in {"caffe", "tf", "torch"}:
        raise ValueError(
            f"Expected mode to be one of `caffe`, `tf` or `torch`. Received: mode={mode}"
        )
    if data_format is None:
        data_format = backend_config.image_data_format()
    elif data_format not in {"channels_first", "channels_last"}:
        raise ValueError(
            "Expected data_format to be one of `channels_first` or `channels_last`. "
            f"Received: data_format={data_format}"
        )
    if isinstance(x, np.ndarray):
        return _preprocess_numpy(x, data_format, mode)
    return _preprocess_symbolic(x, data_format, mode)


def _preprocess_numpy(x, data_format, mode):
    if not issubclass(x.dtype.type, np.floating):
        x = x.astype(backend_config.floatx(), copy=False)
    if mode == "tf":
        x /= 127.5
        x -= 1.0
        return x
    if mode == "torch":
        x /= 255.0
        mean, std = _TORCH_MEAN, _TORCH_STD
    else:
        x = _flip_channels(x, data_format, x.ndim)
        mean, std = _CAFFE_MEAN, None
    for c in range(3):
        # Channel by channel, in the array's own dtype, as Keras subtracts them.
        index = _channel_index(data_format, x.ndim, c)
        x[index] -= mean[c]
        if std is not None:
            x[index] /= std[c]
    return x


def _channel_index(data_format, ndim, c):
    if data_format == "channels_first":
        return (c,) if ndim == 3 else (slice(None), c)
    return (Ellipsis, c)


def _flip_channels(x, data_format, ndim):
    if data_format == "channels_first":
        return x[::-1, ...] if ndim == 3 else x[:, ::-1, ...]
    return x[..., ::-1]


def _preprocess_symbolic(x, data_format, mode):
    if mode == "tf":
        x /= 127.5
        x -= 1.0
        return x
    if mode == "torch":
        x /= 255.0
        mean, std = _TORCH_MEAN, _TORCH_STD
    else:
        x = _flip_channels(x, data_format, backend.ndim(x))
        mean, std = _CAFFE_MEAN, None
    # The mean is a floatx constant: images of another float type get it cast.
    mean_tensor = backend.constant(-np.array(mean))
    if backend.dtype(x) != backend.dtype(mean_tensor):
        mean_tensor = backend.cast(mean_tensor, backend.dtype(x))
    x = backend.bias_add(x, mean_tensor, data_format=data_format)
    if std is not None:
        std_tensor = backend.constant(np.array(std), dtype=backend.dtype(x))
        if data_format == "channels_first":
            std_tensor = backend.reshape(std_tensor, (-1, 1, 1))
        x /= std_tensor
    return x


def decode_predictions(preds, top=5):
    """The `top` classes of each row of `preds` (shape (samples, 1000)), best first, as
    `(class_name, class_description, score)` tuples.

    Raises:
      ValueError: `preds` is not of shape (samples, 1000).
    """
    global CLASS_INDEX
    if len(preds.shape) != 2 or preds.shape[1] != 1000:
        raise ValueError(
            "`decode_predictions` expects a batch of predictions (i.e. a 2D array of shape "
            "(samples, 1000)). Found array with shape: " + str(preds.shape)
        )
    if CLASS_INDEX is None:
        fpath = data_utils.get_file(
            "imagenet_class_index.json",
            CLASS_INDEX_PATH,
            cache_subdir="models",
            file_hash=_CLASS_INDEX_HASH,
        )
        with open(fpath) as f:
            CLASS_INDEX = json.load(f)
    results = []
    for pred in preds:
        top_indices = pred.argsort()[-top:][::-1]
        result = [tuple(CLASS_INDEX[str(i)]) + (pred[i],) for i in top_indices]
        result.sort(key=lambda r: r[2], reverse=True)
        results.append(result)
    return results


def obtain_input_shape(
    input_shape, default_size, min_size, data_format, require_flatten, weights=None
):
    """The model's input shape (no batch dimension): `input_shape` checked, or the
    default one.

    Raises:
      ValueError: `input_shape` is not 3 integers, too small, not 3 channels with
        ImageNet weights, not the default shape with ImageNet weights and a top, or not
        static when the model has a top.
    """
    channels_first = data_format == "channels_first"
    if weights != "imagenet" and input_shape and len(input_shape) == 3:
        channels = input_shape[0] if channels_first else input_shape[-1]
        if channels not in {1, 3}:
            warnings.warn(
                "This model usually expects 1 or 3 input channels. However, it was passed "
                f"an input_shape with {channels} input channels.",
                stacklevel=2,
            )
        default_shape = _image_shape(channels, default_size, default_size, channels_first)
    else:
        default_shape = _image_shape(3, default_size, default_size, channels_first)
    if weights == "imagenet" and require_flatten:
        if input_shape is not None and input_shape != default_shape:
            raise ValueError(
                "When setting `include_top=True` and loading `imagenet` weights, "
                f"`input_shape` should be {default_shape}.  Received: input_shape={input_shape}"
            )
        return default_shape
    if input_shape:
        if len(input_shape) != 3:
            raise ValueError("`input_shape` must be a tuple of three integers.")
        channels = input_shape[0] if channels_first else input_shape[-1]
        if channels != 3 and weights == "imagenet":
            raise ValueError(
                f"The input must have 3 channels; Received `input_shape={input_shape}`"
            )
        rows, cols = input_shape[1:] if channels_first else input_shape[:2]
        if (rows is not None and rows < min_size) or (cols is not None and cols < min_size):
            raise ValueError(
                f"Input size must be at least {min_size}x{min_size}; Received: "
                f"input_shape={input_shape}"
            )
    elif require_flatten:
        input_shape = default_shape
    else:
        input_shape = _image_shape(3, None, None, channels_first)
    if require_flatten and None in input_shape:
        raise ValueError(
            "If `include_top` is True, you should specify a static `input_shape`. "
            f"Received: input_shape={input_shape}"
        )
    return input_shape


def _image_shape(channels, rows, cols, channels_first):
    return (channels, rows, cols) if channels_first else (rows, cols, channels)


def correct_pad(inputs, kernel_size):
    """The ZeroPadding2D padding that makes a strided 'valid' convolution of `inputs`
    cover it as TF's 'same' would on the bottom/right (one row less on top/left when the
    size is even)."""
    img_dim = 2 if backend_config.image_data_format() == "channels_first" else 1
    input_size = backend.int_shape(inputs)[img_dim : img_dim + 2]
    if isinstance(kernel_size, int):
        kernel_size = (kernel_size, kernel_size)
    if input_size[0] is None:
        adjust = (1, 1)
    else:
        adjust = (1 - input_size[0] % 2, 1 - input_size[1] % 2)
    correct = (kernel_size[0] // 2, kernel_size[1] // 2)
    return ((correct[0] - adjust[0], correct[0]), (correct[1] - adjust[1], correct[1]))


def validate_activation(classifier_activation, weights):
    """Checks that pretrained weights come with a softmax or linear classifier.

    Raises:
      ValueError: another activation with `weights` given.
    """
    if weights is None:
        return
    classifier_activation = activations.get(classifier_activation)
    if classifier_activation not in {activations.get("softmax"), activations.get(None)}:
        raise ValueError(
            "Only `None` and `softmax` activations are allowed for the "
            "`classifier_activation` argument when using pretrained weights, with "
            f"`include_top=True`; Received: classifier_activation={classifier_activation}"
        )
