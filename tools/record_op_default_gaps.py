"""Write asyncflow/op_default_gaps.py: the attrs of registered ops whose default here is
not TF 2.21's (TF's OpDef has none, or another value).  Stripping default-valued attrs
(tf.saved_model.save, strip_default_attrs=True) must keep those, or TF cannot load the
graph ("NodeDef missing attr"), and the stripped_op_list leaves their defaults out.

    cd /tmp && TF_CPP_MIN_LOG_LEVEL=3 /work/tfvenv/bin/python \
        <repo>/tools/record_op_default_gaps.py

It asks the repository's .venv for asyncflow's registered defaults, TF's op registry
for its own, and compares them as AttrValue text.  It also writes TF's defaults for the
ops both registries have (tests/fixtures/tf_op_attr_defaults.json), so that
tests/test_op_default_gaps.py finds a changed default here that the file misses,
without TF.
"""

import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = """
import json
from google.protobuf import text_format
import asyncflow  # noqa: F401 - registers the ops
from asyncflow.meta_graph import _default_attr_value
from asyncflow.registry import all_op_defs
out = {}
for name, op_def in sorted(all_op_defs().items()):
    out[name] = {}
    for key, spec in op_def.attrs.items():
        value = _default_attr_value(spec)
        if value is not None:
            out[name][key] = text_format.MessageToString(value, as_one_line=True)
print(json.dumps(out))
"""
HEADER = '''"""Attrs whose registered default here is not TF 2.21's (its OpDef has no default, or
another one), as "Op.attr": stripping default-valued attrs keeps them, and the
stripped_op_list gives them no default.  Written by tools/record_op_default_gaps.py
(under TF 2.21); regenerate it after changing a registered default."""

NOT_TF_DEFAULTS = frozenset(
    {
'''


def main():
    from google.protobuf import text_format
    from tensorflow.python.framework import op_def_registry

    py = os.path.join(REPO, ".venv", "bin", "python")
    res = subprocess.run([py, "-c", OURS], check=True, capture_output=True, text=True, cwd=REPO)
    ours = json.loads(res.stdout.strip().splitlines()[-1])
    gaps, recorded = [], {}
    for name, defaults in ours.items():
        op_def = op_def_registry.get(name)
        if op_def is None:
            continue
        tf = {
            a.name: text_format.MessageToString(a.default_value, as_one_line=True)
            for a in op_def.attr
            if a.HasField("default_value")
        }
        recorded[name] = tf
        gaps.extend(f"{name}.{k}" for k, v in defaults.items() if tf.get(k) != v)
    fixture = os.path.join(REPO, "tests", "fixtures", "tf_op_attr_defaults.json")
    with open(fixture, "w") as f:
        json.dump(recorded, f, indent=0, sort_keys=True)
        f.write("\n")
    with open(os.path.join(REPO, "asyncflow", "op_default_gaps.py"), "w") as f:
        f.write(HEADER)
        for g in sorted(gaps):
            f.write(f'        "{g}",\n')
        f.write("    }\n)\n")


if __name__ == "__main__":
    main()
