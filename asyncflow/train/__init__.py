"""`af.train`: optimizers, schedules, queue runners, coordinator, savers (TF1's `tf.train`).

The lead wires submodules here; each submodule lists its public names in `__all__`.
"""
