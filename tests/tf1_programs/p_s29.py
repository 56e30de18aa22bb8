"""The session-29 batch of TF1 programs (model-garden and tutorial shaped), kept out of
tf1_programs.PROGRAMS: they have their own fixture (tests/fixtures/tf1_programs_s29.json,
written by record_s29.py) and their own tests (tests/test_tf1_programs_s29_*.py)."""

from tf1_programs import p_s29_extra, p_s29_input, p_s29_models, p_s29_more, p_s29_train

MODULES = {
    "models": p_s29_models,
    "train": p_s29_train,
    "input": p_s29_input,
    "more": p_s29_more,
    "extra": p_s29_extra,
}
PROGRAMS = {fn.__name__: fn for m in MODULES.values() for fn in m.PROGRAMS}
