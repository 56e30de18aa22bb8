"""`tf.keras.applications`: the Keras image classification models (with their
per-model modules' `preprocess_input` and `decode_predictions`), built as functional
Models in graph mode, with Keras' layer names so Keras' ImageNet HDF5 weights load."""

from asyncflow.keras.applications import (
    densenet,
    imagenet_utils,
    inception_resnet_v2,
    inception_v3,
    mobilenet,
    mobilenet_v2,
    nasnet,
    resnet,
    resnet_v2,
    vgg16,
    vgg19,
    xception,
)
from asyncflow.keras.applications.densenet import DenseNet121, DenseNet169, DenseNet201
from asyncflow.keras.applications.inception_resnet_v2 import InceptionResNetV2
from asyncflow.keras.applications.inception_v3 import InceptionV3
from asyncflow.keras.applications.mobilenet import MobileNet
from asyncflow.keras.applications.mobilenet_v2 import MobileNetV2
from asyncflow.keras.applications.nasnet import NASNetLarge, NASNetMobile
from asyncflow.keras.applications.resnet import ResNet50, ResNet101, ResNet152
from asyncflow.keras.applications.resnet_v2 import ResNet50V2, ResNet101V2, ResNet152V2
from asyncflow.keras.applications.vgg16 import VGG16
from asyncflow.keras.applications.vgg19 import VGG19
from asyncflow.keras.applications.xception import Xception

# Keras exposes ResNet50's module under both names.
resnet50 = resnet

__all__ = [
    "DenseNet121",
    "DenseNet169",
    "DenseNet201",
    "InceptionResNetV2",
    "InceptionV3",
    "MobileNet",
    "MobileNetV2",
    "NASNetLarge",
    "NASNetMobile",
    "ResNet50",
    "ResNet101",
    "ResNet152",
    "ResNet50V2",
    "ResNet101V2",
    "ResNet152V2",
    "VGG16",
    "VGG19",
    "Xception",
    "densenet",
    "imagenet_utils",
    "inception_resnet_v2",
    "inception_v3",
    "mobilenet",
    "mobilenet_v2",
    "nasnet",
    "resnet",
    "resnet50",
    "resnet_v2",
    "vgg16",
    "vgg19",
    "xception",
]
