"""`af.estimator`: TF1's Estimator API (model_fn, RunConfig, train/evaluate/predict).

Built on the monitored sessions and hooks of `af.train`, `af.data` input pipelines and
the Saver's checkpoints; see estimator.py for the run model.
"""

from asyncflow.estimator import export, inputs
from asyncflow.estimator.canned.baseline import BaselineClassifier, BaselineRegressor
from asyncflow.estimator.canned.boosted_trees import (
    BoostedTreesClassifier,
    BoostedTreesEstimator,
    BoostedTreesRegressor,
)
from asyncflow.estimator.canned.dnn import DNNClassifier, DNNRegressor
from asyncflow.estimator.canned.dnn_linear_combined import (
    DNNLinearCombinedClassifier,
    DNNLinearCombinedRegressor,
)
from asyncflow.estimator.canned.linear import LinearClassifier, LinearRegressor
from asyncflow.estimator.estimator import Estimator
from asyncflow.estimator.exporter import FinalExporter, LatestExporter
from asyncflow.estimator.model_fn import EstimatorSpec, ModeKeys
from asyncflow.estimator.parsing_utils import (
    classifier_parse_example_spec,
    regressor_parse_example_spec,
)
from asyncflow.estimator.run_config import RunConfig
from asyncflow.estimator.training import EvalSpec, Exporter, TrainSpec, train_and_evaluate
from asyncflow.estimator.warm_starting import WarmStartSettings
from asyncflow.train.basic_session_run_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    ProfilerHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from asyncflow.train.training_extras import VocabInfo

__all__ = [
    "BaselineClassifier",
    "BaselineRegressor",
    "BoostedTreesClassifier",
    "BoostedTreesEstimator",
    "BoostedTreesRegressor",
    "DNNClassifier",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "Estimator",
    "EvalSpec",
    "Exporter",
    "FinalExporter",
    "LatestExporter",
    "TrainSpec",
    "train_and_evaluate",
    "classifier_parse_example_spec",
    "regressor_parse_example_spec",
    "VocabInfo",
    "WarmStartSettings",
    "export",
    "inputs",
    "EstimatorSpec",
    "FeedFnHook",
    "FinalOpsHook",
    "LoggingTensorHook",
    "ModeKeys",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProfilerHook",
    "RunConfig",
    "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
]
