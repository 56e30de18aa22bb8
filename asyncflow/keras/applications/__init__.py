"""`tf.keras.applications`: Keras' image classification models, each a function that
builds the model as a functional Model in graph mode (optionally loading Keras' ImageNet
HDF5 weights, under Keras' layer names), with its family's `preprocess_input` and
`decode_predictions` in a module of its own.
"""

from asyncflow.keras.applications import (
    convnext,
    densenet,
    efficientnet,
    efficientnet_v2,
    imagenet_utils,
    inception_resnet_v2,
    inception_v3,
    mobilenet,
    mobilenet_v2,
    mobilenet_v3,
    nasnet,
    regnet,
    resnet,
    resnet_rs,
    resnet_v2,
    vgg16,
    vgg19,
    xception,
)
from asyncflow.keras.applications.convnext import (
    ConvNeXtBase,
    ConvNeXtLarge,
    ConvNeXtSmall,
    ConvNeXtTiny,
    ConvNeXtXLarge,
)
from asyncflow.keras.applications.densenet import (
    DenseNet121,
    DenseNet169,
    DenseNet201,
)
from asyncflow.keras.applications.efficientnet import (
    EfficientNetB0,
    EfficientNetB1,
    EfficientNetB2,
    EfficientNetB3,
    EfficientNetB4,
    EfficientNetB5,
    EfficientNetB6,
    EfficientNetB7,
)
from asyncflow.keras.applications.efficientnet_v2 import (
    EfficientNetV2B0,
    EfficientNetV2B1,
    EfficientNetV2B2,
    EfficientNetV2B3,
    EfficientNetV2L,
    EfficientNetV2M,
    EfficientNetV2S,
)
from asyncflow.keras.applications.inception_resnet_v2 import (
    InceptionResNetV2,
)
from asyncflow.keras.applications.inception_v3 import (
    InceptionV3,
)
from asyncflow.keras.applications.mobilenet import (
    MobileNet,
)
from asyncflow.keras.applications.mobilenet_v2 import (
    MobileNetV2,
)
from asyncflow.keras.applications.mobilenet_v3 import (
    MobileNetV3Large,
    MobileNetV3Small,
)
from asyncflow.keras.applications.nasnet import (
    NASNetLarge,
    NASNetMobile,
)
from asyncflow.keras.applications.regnet import (
    RegNetX002,
    RegNetX004,
    RegNetX006,
    RegNetX008,
    RegNetX016,
    RegNetX032,
    RegNetX040,
    RegNetX064,
    RegNetX080,
    RegNetX120,
    RegNetX160,
    RegNetX320,
    RegNetY002,
    RegNetY004,
    RegNetY006,
    RegNetY008,
    RegNetY016,
    RegNetY032,
    RegNetY040,
    RegNetY064,
    RegNetY080,
    RegNetY120,
    RegNetY160,
    RegNetY320,
)
from asyncflow.keras.applications.resnet import (
    ResNet50,
    ResNet101,
    ResNet152,
)
from asyncflow.keras.applications.resnet_rs import (
    ResNetRS50,
    ResNetRS101,
    ResNetRS152,
    ResNetRS200,
    ResNetRS270,
    ResNetRS350,
    ResNetRS420,
)
from asyncflow.keras.applications.resnet_v2 import (
    ResNet50V2,
    ResNet101V2,
    ResNet152V2,
)
from asyncflow.keras.applications.vgg16 import (
    VGG16,
)
from asyncflow.keras.applications.vgg19 import (
    VGG19,
)
from asyncflow.keras.applications.xception import (
    Xception,
)

# Keras exposes ResNet50's module under both names.
resnet50 = resnet

__all__ = [
    "ConvNeXtBase",
    "ConvNeXtLarge",
    "ConvNeXtSmall",
    "ConvNeXtTiny",
    "ConvNeXtXLarge",
    "DenseNet121",
    "DenseNet169",
    "DenseNet201",
    "EfficientNetB0",
    "EfficientNetB1",
    "EfficientNetB2",
    "EfficientNetB3",
    "EfficientNetB4",
    "EfficientNetB5",
    "EfficientNetB6",
    "EfficientNetB7",
    "EfficientNetV2B0",
    "EfficientNetV2B1",
    "EfficientNetV2B2",
    "EfficientNetV2B3",
    "EfficientNetV2L",
    "EfficientNetV2M",
    "EfficientNetV2S",
    "InceptionResNetV2",
    "InceptionV3",
    "MobileNet",
    "MobileNetV2",
    "MobileNetV3Large",
    "MobileNetV3Small",
    "NASNetLarge",
    "NASNetMobile",
    "RegNetX002",
    "RegNetX004",
    "RegNetX006",
    "RegNetX008",
    "RegNetX016",
    "RegNetX032",
    "RegNetX040",
    "RegNetX064",
    "RegNetX080",
    "RegNetX120",
    "RegNetX160",
    "RegNetX320",
    "RegNetY002",
    "RegNetY004",
    "RegNetY006",
    "RegNetY008",
    "RegNetY016",
    "RegNetY032",
    "RegNetY040",
    "RegNetY064",
    "RegNetY080",
    "RegNetY120",
    "RegNetY160",
    "RegNetY320",
    "ResNet101",
    "ResNet101V2",
    "ResNet152",
    "ResNet152V2",
    "ResNet50",
    "ResNet50V2",
    "ResNetRS101",
    "ResNetRS152",
    "ResNetRS200",
    "ResNetRS270",
    "ResNetRS350",
    "ResNetRS420",
    "ResNetRS50",
    "VGG16",
    "VGG19",
    "Xception",
    "convnext",
    "densenet",
    "efficientnet",
    "efficientnet_v2",
    "imagenet_utils",
    "inception_resnet_v2",
    "inception_v3",
    "mobilenet",
    "mobilenet_v2",
    "mobilenet_v3",
    "nasnet",
    "regnet",
    "resnet",
    "resnet50",
    "resnet_rs",
    "resnet_v2",
    "vgg16",
    "vgg19",
    "xception",
]
