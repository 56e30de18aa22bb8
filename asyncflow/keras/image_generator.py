"""`tf.keras.preprocessing.image.ImageDataGenerator` and its iterators over numpy arrays
and class subdirectories: batches of images augmented by random affine, channel, flip
and brightness transforms, then standardized (rescale, sample- or feature-wise
centering and scaling, ZCA whitening fitted by `fit`).

Random parameters come from NumPy's global generator in Keras' order, reseeded per batch
with `seed + batches seen` as Keras does, so a seed gives Keras' batches.  DataFrame
iterators are not provided.
"""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np

from asyncflow.keras.backend_config import floatx, image_data_format
from asyncflow.keras.image_utils import (
    apply_affine_transform,
    apply_brightness_shift,
    apply_channel_shift,
    array_to_img,
    img_to_array,
    load_img,
)
from asyncflow.keras.utils import Sequence

__all__ = [
    "Iterator",
    "NumpyArrayIterator",
    "DirectoryIterator",
    "ImageDataGenerator",
    "flip_axis",
]


def flip_axis(x, axis):
    return np.flip(np.asarray(x), axis)


class Iterator(Sequence):
    """Batches of indices into `n` samples (reshuffled each epoch with `shuffle`), as a
    Sequence (`it[i]`) or an endless iterator (`next(it)`)."""

    white_list_formats = ("png", "jpg", "jpeg", "bmp", "ppm", "tif", "tiff")

    def __init__(self, n, batch_size, shuffle, seed):
        self.n, self.batch_size, self.seed, self.shuffle = n, batch_size, seed, shuffle
        self.batch_index = 0
        self.total_batches_seen = 0
        self.lock = threading.Lock()
        self.index_array = None
        self.index_generator = self._flow_index()

    def _set_index_array(self):
        self.index_array = np.random.permutation(self.n) if self.shuffle else np.arange(self.n)

    def __getitem__(self, idx):
        if idx >= len(self):
            raise ValueError(
                f"Asked to retrieve element {idx}, but the Sequence has length {len(self)}"
            )
        if self.seed is not None:
            np.random.seed(self.seed + self.total_batches_seen)
        self.total_batches_seen += 1
        if self.index_array is None:
            self._set_index_array()
        batch = self.index_array[self.batch_size * idx : self.batch_size * (idx + 1)]
        return self._get_batches_of_transformed_samples(batch)

    def __len__(self):
        return (self.n + self.batch_size - 1) // self.batch_size

    def on_epoch_end(self):
        self._set_index_array()

    def reset(self):
        self.batch_index = 0

    def _flow_index(self):
        self.reset()
        while True:
            if self.seed is not None:
                np.random.seed(self.seed + self.total_batches_seen)
            if self.batch_index == 0:
                self._set_index_array()
            current = 0 if self.n == 0 else (self.batch_index * self.batch_size) % self.n
            self.batch_index = self.batch_index + 1 if self.n > current + self.batch_size else 0
            self.total_batches_seen += 1
            yield self.index_array[current : current + self.batch_size]

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def next(self):
        with self.lock:
            index_array = next(self.index_generator)
        return self._get_batches_of_transformed_samples(index_array)

    def _get_batches_of_transformed_samples(self, index_array):
        raise NotImplementedError


class NumpyArrayIterator(Iterator):
    """Augmented batches (x, y[, sample_weight]) from rank-4 image arrays.

    Raises:
      ValueError: arrays of different lengths, an unknown subset, a class missing from
        one side of the validation split, or images not of rank 4.
    """

    def __init__(
        self,
        x,
        y,
        image_data_generator,
        batch_size=32,
        shuffle=False,
        sample_weight=None,
        seed=None,
        data_format=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        subset=None,
        ignore_class_split=False,
        dtype=None,
    ):
        data_format = data_format or image_data_format()
        self.dtype = dtype or floatx()
        if isinstance(x, (tuple, list)):
            extra = x[1] if isinstance(x[1], list) else [x[1]]
            x_misc = [np.asarray(xx) for xx in extra]
            x = x[0]
            for xx in x_misc:
                if len(x) != len(xx):
                    raise ValueError(
                        "All of the arrays in `x` should have the same length. Found a pair "
                        f"with: len(x[0]) = {len(x)}, len(x[?]) = {len(xx)}"
                    )
        else:
            x_misc = []
        if y is not None and len(x) != len(y):
            raise ValueError(
                "`x` (images tensor) and `y` (labels) should have the same length. Found: "
                f"x.shape = {np.asarray(x).shape}, y.shape = {np.asarray(y).shape}"
            )
        if sample_weight is not None and len(x) != len(sample_weight):
            raise ValueError(
                "`x` (images tensor) and `sample_weight` should have the same length. "
                f"Found: x.shape = {np.asarray(x).shape}, sample_weight.shape = "
                f"{np.asarray(sample_weight).shape}"
            )
        if subset is not None:
            if subset not in {"training", "validation"}:
                raise ValueError(
                    "Invalid subset name:", subset, '; expected "training" or "validation".'
                )
            split = int(len(x) * image_data_generator._validation_split)
            if (
                y is not None
                and not ignore_class_split
                and not np.array_equal(np.unique(y[:split]), np.unique(y[split:]))
            ):
                raise ValueError(
                    "Training and validation subsets have different number of classes after "
                    "the split. If your numpy arrays are sorted by the label, you might want "
                    "to shuffle them."
                )
            part = slice(None, split) if subset == "validation" else slice(split, None)
            x = x[part]
            x_misc = [np.asarray(xx[part]) for xx in x_misc]
            if y is not None:
                y = y[part]
        self.x = np.asarray(x, dtype=self.dtype)
        self.x_misc = x_misc
        if self.x.ndim != 4:
            raise ValueError(
                "Input data in `NumpyArrayIterator` should have rank 4. You passed an array "
                "with shape",
                self.x.shape,
            )
        channels_axis = 3 if data_format == "channels_last" else 1
        if self.x.shape[channels_axis] not in {1, 3, 4}:
            warnings.warn(
                f'NumpyArrayIterator is set to use the data format convention "{data_format}" '
                f"(channels on axis {channels_axis}), i.e. expected either 1, 3, or 4 channels "
                f"on axis {channels_axis}. However, it was passed an array with shape "
                f"{self.x.shape} ({self.x.shape[channels_axis]} channels).",
                stacklevel=2,
            )
        self.y = None if y is None else np.asarray(y)
        self.sample_weight = None if sample_weight is None else np.asarray(sample_weight)
        self.image_data_generator, self.data_format = image_data_generator, data_format
        self.save_to_dir, self.save_prefix, self.save_format = (
            save_to_dir,
            save_prefix,
            save_format,
        )
        super().__init__(self.x.shape[0], batch_size, shuffle, seed)

    def _get_batches_of_transformed_samples(self, index_array):
        gen = self.image_data_generator
        batch_x = np.zeros((len(index_array),) + self.x.shape[1:], dtype=self.dtype)
        for i, j in enumerate(index_array):
            x = self.x[j]
            params = gen.get_random_transform(x.shape)
            batch_x[i] = gen.standardize(gen.apply_transform(x.astype(self.dtype), params))
        if self.save_to_dir:
            for i, j in enumerate(index_array):
                img = array_to_img(batch_x[i], self.data_format, scale=True)
                name = f"{self.save_prefix}_{j}_{np.random.randint(1e4)}.{self.save_format}"
                img.save(os.path.join(self.save_to_dir, name))
        miscs = [xx[index_array] for xx in self.x_misc]
        first = batch_x if not miscs else [batch_x] + miscs
        if self.y is None:
            return first
        out = (first, self.y[index_array])
        if self.sample_weight is not None:
            out += (self.sample_weight[index_array],)
        return out


def _image_files(directory, formats, follow_links):
    """(root, file name) of the image files under `directory`, walked in sorted order."""
    for root, _, files in sorted(
        os.walk(directory, followlinks=follow_links), key=lambda entry: entry[0]
    ):
        for name in sorted(files):
            if name.lower().endswith(formats):
                yield root, name


class DirectoryIterator(Iterator):
    """Augmented batches of the images in `directory`'s class subdirectories (sorted
    names, or `classes`), labelled per `class_mode`.

    Raises:
      ValueError: an unknown color_mode, class_mode or subset.
    """

    allowed_class_modes = {"categorical", "binary", "sparse", "input", None}

    def __init__(
        self,
        directory,
        image_data_generator,
        target_size=(256, 256),
        color_mode="rgb",
        classes=None,
        class_mode="categorical",
        batch_size=32,
        shuffle=True,
        seed=None,
        data_format=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        follow_links=False,
        subset=None,
        interpolation="nearest",
        keep_aspect_ratio=False,
        dtype=None,
    ):
        self.data_format = data_format or image_data_format()
        self.dtype = dtype or floatx()
        self.image_data_generator = image_data_generator
        self.target_size, self.keep_aspect_ratio = tuple(target_size), keep_aspect_ratio
        channels = {"rgba": 4, "rgb": 3, "grayscale": 1}
        if color_mode not in channels:
            raise ValueError(
                "Invalid color mode:", color_mode, '; expected "rgb", "rgba", or "grayscale".'
            )
        self.color_mode = color_mode
        n = channels[color_mode]
        self.image_shape = (
            self.target_size + (n,)
            if self.data_format == "channels_last"
            else (n,) + self.target_size
        )
        self.save_to_dir, self.save_prefix, self.save_format = (
            save_to_dir,
            save_prefix,
            save_format,
        )
        self.interpolation = interpolation
        split = None
        if subset is not None:
            fraction = image_data_generator._validation_split
            if subset == "validation":
                split = (0, fraction)
            elif subset == "training":
                split = (fraction, 1)
            else:
                raise ValueError(
                    f'Invalid subset name: {subset};expected "training" or "validation"'
                )
        self.split, self.subset = split, subset
        self.directory = directory
        if class_mode not in self.allowed_class_modes:
            raise ValueError(
                f"Invalid class_mode: {class_mode}; expected one of: {self.allowed_class_modes}"
            )
        self.class_mode = class_mode
        if not classes:
            classes = [
                d
                for d in sorted(os.listdir(directory))
                if os.path.isdir(os.path.join(directory, d))
            ]
        self.num_classes = len(classes)
        self.class_indices = dict(zip(classes, range(len(classes)), strict=True))
        self.filenames, labels = [], []
        for name in classes:
            class_dir = os.path.join(directory, name)
            files = list(_image_files(class_dir, self.white_list_formats, follow_links))
            if split:
                files = files[int(split[0] * len(files)) : int(split[1] * len(files))]
            for root, fname in files:
                labels.append(self.class_indices[name])
                rel = os.path.relpath(os.path.join(root, fname), class_dir)
                self.filenames.append(os.path.join(name, rel))
        self.samples = len(self.filenames)
        self.classes = np.array(labels, dtype="int32")
        print(f"Found {self.samples} images belonging to {self.num_classes} classes.")
        self._filepaths = [os.path.join(directory, f) for f in self.filenames]
        super().__init__(self.samples, batch_size, shuffle, seed)

    @property
    def filepaths(self):
        return self._filepaths

    @property
    def labels(self):
        return self.classes

    @property
    def sample_weight(self):
        return None

    def _get_batches_of_transformed_samples(self, index_array):
        gen = self.image_data_generator
        batch_x = np.zeros((len(index_array),) + self.image_shape, dtype=self.dtype)
        for i, j in enumerate(index_array):
            img = load_img(
                self._filepaths[j],
                color_mode=self.color_mode,
                target_size=self.target_size,
                interpolation=self.interpolation,
                keep_aspect_ratio=self.keep_aspect_ratio,
            )
            x = img_to_array(img, data_format=self.data_format)
            img.close()
            if gen:
                x = gen.standardize(gen.apply_transform(x, gen.get_random_transform(x.shape)))
            batch_x[i] = x
        if self.save_to_dir:
            for i, j in enumerate(index_array):
                img = array_to_img(batch_x[i], self.data_format, scale=True)
                name = f"{self.save_prefix}_{j}_{np.random.randint(1e7)}.{self.save_format}"
                img.save(os.path.join(self.save_to_dir, name))
        if self.class_mode == "input":
            batch_y = batch_x.copy()
        elif self.class_mode in {"binary", "sparse"}:
            batch_y = self.classes[index_array].astype(self.dtype)
        elif self.class_mode == "categorical":
            batch_y = np.zeros((len(batch_x), len(self.class_indices)), dtype=self.dtype)
            batch_y[np.arange(len(batch_x)), self.classes[index_array]] = 1.0
        else:
            return batch_x
        return batch_x, batch_y


class ImageDataGenerator:
    """Random image augmentation and standardization for `flow` batches.

    Raises:
      ValueError: an unknown data_format, validation_split outside (0, 1), or a malformed
        zoom_range or brightness_range.
    """

    def __init__(
        self,
        featurewise_center=False,
        samplewise_center=False,
        featurewise_std_normalization=False,
        samplewise_std_normalization=False,
        zca_whitening=False,
        zca_epsilon=1e-6,
        rotation_range=0,
        width_shift_range=0.0,
        height_shift_range=0.0,
        brightness_range=None,
        shear_range=0.0,
        zoom_range=0.0,
        channel_shift_range=0.0,
        fill_mode="nearest",
        cval=0.0,
        horizontal_flip=False,
        vertical_flip=False,
        rescale=None,
        preprocessing_function=None,
        data_format=None,
        validation_split=0.0,
        interpolation_order=1,
        dtype=None,
    ):
        data_format = data_format or image_data_format()
        self.dtype = dtype or floatx()
        self.featurewise_center, self.samplewise_center = featurewise_center, samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.zca_whitening, self.zca_epsilon = zca_whitening, zca_epsilon
        self.rotation_range = rotation_range
        self.width_shift_range, self.height_shift_range = width_shift_range, height_shift_range
        self.shear_range, self.channel_shift_range = shear_range, channel_shift_range
        self.fill_mode, self.cval = fill_mode, cval
        self.horizontal_flip, self.vertical_flip = horizontal_flip, vertical_flip
        self.rescale, self.preprocessing_function = rescale, preprocessing_function
        self.interpolation_order = interpolation_order
        if data_format not in {"channels_last", "channels_first"}:
            raise ValueError(
                '`data_format` should be `"channels_last"` (channel after row and column) or '
                '`"channels_first"` (channel before row and column). '
                f"Received: {data_format}"
            )
        self.data_format = data_format
        if data_format == "channels_first":
            self.channel_axis, self.row_axis, self.col_axis = 1, 2, 3
        else:
            self.channel_axis, self.row_axis, self.col_axis = 3, 1, 2
        if validation_split and not 0 < validation_split < 1:
            raise ValueError(
                "`validation_split` must be strictly between 0 and 1.  "
                f"Received: {validation_split}"
            )
        self._validation_split = validation_split
        self.mean = self.std = self.zca_whitening_matrix = None
        if isinstance(zoom_range, (float, int)):
            self.zoom_range = [1 - zoom_range, 1 + zoom_range]
        elif len(zoom_range) == 2 and all(isinstance(v, (float, int)) for v in zoom_range):
            self.zoom_range = [zoom_range[0], zoom_range[1]]
        else:
            raise ValueError(
                "`zoom_range` should be a float or a tuple or list of two floats. "
                f"Received: {zoom_range}"
            )
        # ZCA implies feature-wise centering (and replaces std normalization); std
        # normalization implies centering, as in Keras.
        if zca_whitening:
            self.featurewise_center = True
            self.featurewise_std_normalization = False
        if featurewise_std_normalization:
            self.featurewise_center = True
        if samplewise_std_normalization:
            self.samplewise_center = True
        if brightness_range is not None and (
            not isinstance(brightness_range, (tuple, list)) or len(brightness_range) != 2
        ):
            raise ValueError(
                "`brightness_range should be tuple or list of two floats. "
                f"Received: {brightness_range}"
            )
        self.brightness_range = brightness_range

    def flow(
        self,
        x,
        y=None,
        batch_size=32,
        shuffle=True,
        sample_weight=None,
        seed=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        ignore_class_split=False,
        subset=None,
    ):
        return NumpyArrayIterator(
            x,
            y,
            self,
            batch_size=batch_size,
            shuffle=shuffle,
            sample_weight=sample_weight,
            seed=seed,
            data_format=self.data_format,
            save_to_dir=save_to_dir,
            save_prefix=save_prefix,
            save_format=save_format,
            ignore_class_split=ignore_class_split,
            subset=subset,
            dtype=self.dtype,
        )

    def flow_from_directory(
        self,
        directory,
        target_size=(256, 256),
        color_mode="rgb",
        classes=None,
        class_mode="categorical",
        batch_size=32,
        shuffle=True,
        seed=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        follow_links=False,
        subset=None,
        interpolation="nearest",
        keep_aspect_ratio=False,
    ):
        return DirectoryIterator(
            directory,
            self,
            target_size=target_size,
            color_mode=color_mode,
            keep_aspect_ratio=keep_aspect_ratio,
            classes=classes,
            class_mode=class_mode,
            data_format=self.data_format,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            save_to_dir=save_to_dir,
            save_prefix=save_prefix,
            save_format=save_format,
            follow_links=follow_links,
            subset=subset,
            interpolation=interpolation,
            dtype=self.dtype,
        )

    def standardize(self, x):
        """`x` (one image or a batch) preprocessed, rescaled, centered and scaled in place
        as configured (feature-wise steps need `fit` first)."""
        if self.preprocessing_function:
            x = self.preprocessing_function(x)
        if self.rescale:
            x *= self.rescale
        if self.samplewise_center:
            x -= np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x /= np.std(x, keepdims=True) + 1e-6
        if self.featurewise_center:
            if self.mean is not None:
                x -= self.mean
            else:
                warnings.warn(_UNFIT.format("featurewise_center"), stacklevel=2)
        if self.featurewise_std_normalization:
            if self.std is not None:
                x /= self.std + 1e-6
            else:
                warnings.warn(_UNFIT.format("featurewise_std_normalization"), stacklevel=2)
        if self.zca_whitening:
            if self.zca_whitening_matrix is not None:
                flat = x.reshape(-1, np.prod(x.shape[-3:]))
                x = np.reshape(flat @ self.zca_whitening_matrix, x.shape)
            else:
                warnings.warn(_UNFIT.format("zca_whitening"), stacklevel=2)
        return x

    def _shift(self, shift_range, size):
        try:  # a list of choices, or an int range of pixels
            t = np.random.choice(shift_range)
            t *= np.random.choice([-1, 1])
        except ValueError:  # a float fraction
            t = np.random.uniform(-shift_range, shift_range)
        if np.max(shift_range) < 1:
            t *= size
        return t

    def get_random_transform(self, img_shape, seed=None):
        """Random parameters for one image (drawn in Keras' order)."""
        row_axis, col_axis = self.row_axis - 1, self.col_axis - 1
        if seed is not None:
            np.random.seed(seed)
        theta = (
            np.random.uniform(-self.rotation_range, self.rotation_range)
            if (self.rotation_range)
            else 0
        )
        tx = (
            self._shift(self.height_shift_range, img_shape[row_axis])
            if (self.height_shift_range)
            else 0
        )
        ty = (
            self._shift(self.width_shift_range, img_shape[col_axis])
            if (self.width_shift_range)
            else 0
        )
        shear = np.random.uniform(-self.shear_range, self.shear_range) if self.shear_range else 0
        if self.zoom_range[0] == 1 and self.zoom_range[1] == 1:
            zx, zy = 1, 1
        else:
            zx, zy = np.random.uniform(self.zoom_range[0], self.zoom_range[1], 2)
        flip_horizontal = (np.random.random() < 0.5) * self.horizontal_flip
        flip_vertical = (np.random.random() < 0.5) * self.vertical_flip
        channel_shift = None
        if self.channel_shift_range != 0:
            channel_shift = np.random.uniform(-self.channel_shift_range, self.channel_shift_range)
        brightness = None
        if self.brightness_range is not None:
            brightness = np.random.uniform(self.brightness_range[0], self.brightness_range[1])
        return {
            "theta": theta,
            "tx": tx,
            "ty": ty,
            "shear": shear,
            "zx": zx,
            "zy": zy,
            "flip_horizontal": flip_horizontal,
            "flip_vertical": flip_vertical,
            "channel_shift_intensity": channel_shift,
            "brightness": brightness,
        }

    def apply_transform(self, x, transform_parameters):
        p = transform_parameters
        row_axis, col_axis = self.row_axis - 1, self.col_axis - 1
        channel_axis = self.channel_axis - 1
        x = apply_affine_transform(
            x,
            p.get("theta", 0),
            p.get("tx", 0),
            p.get("ty", 0),
            p.get("shear", 0),
            p.get("zx", 1),
            p.get("zy", 1),
            row_axis=row_axis,
            col_axis=col_axis,
            channel_axis=channel_axis,
            fill_mode=self.fill_mode,
            cval=self.cval,
            order=self.interpolation_order,
        )
        if p.get("channel_shift_intensity") is not None:
            x = apply_channel_shift(x, p["channel_shift_intensity"], channel_axis)
        if p.get("flip_horizontal", False):
            x = flip_axis(x, col_axis)
        if p.get("flip_vertical", False):
            x = flip_axis(x, row_axis)
        if p.get("brightness") is not None:
            x = apply_brightness_shift(x, p["brightness"], False)
        return x

    def random_transform(self, x, seed=None):
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def fit(self, x, augment=False, rounds=1, seed=None):
        """Feature-wise mean, std and ZCA matrix from sample images (augmented `rounds`
        times first with `augment`).

        Raises:
          ValueError: `x` not of rank 4.
        """
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 4:
            raise ValueError(
                f"Input to `.fit()` should have rank 4. Got array with shape: {x.shape}"
            )
        if seed is not None:
            np.random.seed(seed)
        x = np.copy(x)
        if self.rescale:
            x *= self.rescale
        if augment:
            ax = np.zeros((rounds * x.shape[0],) + x.shape[1:], dtype=self.dtype)
            for r in range(rounds):
                for i in range(x.shape[0]):
                    ax[i + r * x.shape[0]] = self.random_transform(x[i])
            x = ax
        shape = [1, 1, 1]
        shape[self.channel_axis - 1] = x.shape[self.channel_axis]
        axes = (0, self.row_axis, self.col_axis)
        if self.featurewise_center:
            self.mean = np.reshape(np.mean(x, axis=axes), shape)
            x -= self.mean
        if self.featurewise_std_normalization:
            self.std = np.reshape(np.std(x, axis=axes), shape)
            x /= self.std + 1e-6
        if self.zca_whitening:
            n = len(x)
            u, s, _ = np.linalg.svd(np.reshape(x, (n, -1)).T, full_matrices=False)
            s_inv = np.sqrt(n) / (s + self.zca_epsilon)
            self.zca_whitening_matrix = (u * s_inv).dot(u.T)


_UNFIT = (
    "This ImageDataGenerator specifies `{}`, but it hasn't been fit on any training data. "
    "Fit it first by calling `.fit(numpy_data)`."
)
