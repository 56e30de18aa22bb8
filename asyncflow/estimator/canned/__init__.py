"""The canned estimators: linear and DNN classifiers and regressors over feature columns."""
