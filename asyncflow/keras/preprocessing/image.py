"""`tf.keras.preprocessing.image`: the image array functions of keras/image_utils.py and
the ImageDataGenerator of keras/image_generator.py."""

from asyncflow.keras.image_generator import (
    DirectoryIterator,
    ImageDataGenerator,
    Iterator,
    NumpyArrayIterator,
)
from asyncflow.keras.image_utils import (
    apply_affine_transform,
    apply_brightness_shift,
    apply_channel_shift,
    array_to_img,
    img_to_array,
    load_img,
    random_brightness,
    random_channel_shift,
    random_rotation,
    random_shear,
    random_shift,
    random_zoom,
    save_img,
    transform_matrix_offset_center,
)

__all__ = [
    "DirectoryIterator",
    "ImageDataGenerator",
    "Iterator",
    "NumpyArrayIterator",
    "array_to_img",
    "img_to_array",
    "load_img",
    "save_img",
    "apply_affine_transform",
    "transform_matrix_offset_center",
    "random_rotation",
    "random_shift",
    "random_shear",
    "random_zoom",
    "apply_channel_shift",
    "random_channel_shift",
    "apply_brightness_shift",
    "random_brightness",
]
