"""How much of TF1's public API asyncflow has, namespace by namespace.

The names come from tests/fixtures/tf1_public_names.json, recorded from TF 2.21's
`tf.compat.v1` (every public, non-module attribute of each namespace; `layers` and
`nn.rnn_cell`, which TF 2.21 no longer populates without tf_keras, from the
`tensorflow/python/keras/legacy_tf_layers` and `legacy_rnn` classes and functions it
ships).  A name counts as present when `asyncflow.<namespace>` has an attribute of
that name.

    python benchmarks/api_coverage.py            # the table
    python benchmarks/api_coverage.py --missing  # and the missing names
    python benchmarks/api_coverage.py --all      # every namespace of tf.compat.v1

`--all` reads tests/fixtures/tf_compat_v1_all_names.json instead: every public name
of every tf.compat.v1 module (tf.raw_ops, tf.keras's, tf.lite's, ...), recorded by
tests/fixtures/record_tf_compat_v1_all_names.py.
"""

from __future__ import annotations

import argparse
import json
import pathlib

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/tf1_public_names.json"
ALL_FIXTURE = FIXTURE.with_name("tf_compat_v1_all_names.json")


def coverage(fixture=FIXTURE) -> dict[str, tuple[list[str], list[str]]]:
    """{namespace: (present names, missing names)}."""
    import asyncflow

    names = json.loads(fixture.read_text())
    out = {}
    for ns, wanted in names.items():
        mod = asyncflow
        for part in [] if ns == "top" else ns.split("."):
            mod = getattr(mod, part, None)
            if mod is None:
                break
        present = [n for n in wanted if mod is not None and hasattr(mod, n)]
        missing = [n for n in wanted if n not in present]
        out[ns] = (present, missing)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list the missing names")
    ap.add_argument("--all", action="store_true", help="every namespace of tf.compat.v1")
    args = ap.parse_args()
    total_have = total = 0
    print(f"{'namespace':<36}{'present':>8}{'of':>6}{'%':>7}")
    for ns, (have, missing) in coverage(ALL_FIXTURE if args.all else FIXTURE).items():
        n = len(have) + len(missing)
        total_have += len(have)
        total += n
        print(f"{ns:<36}{len(have):>8}{n:>6}{100 * len(have) / max(n, 1):>7.1f}")
        if args.missing and missing:
            print("    missing:", " ".join(missing))
    print(f"{'all':<36}{total_have:>8}{total:>6}{100 * total_have / total:>7.1f}")


if __name__ == "__main__":
    main()
