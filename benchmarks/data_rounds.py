"""Alternated rounds of data_bench.py: asyncflow and TensorFlow one after the other in
each round, per `--parse` mode; per-round ratios, medians and the load beside them.

    /work/bin/cpu-quiet .venv/bin/python benchmarks/data_rounds.py --rounds 3

Each run is a fresh process (data_bench.py, its defaults: 40,000 records, 2 warm-up
epochs, the median of 3 timed ones).  The TF interpreter is `--tf-python`
(/work/tfvenv/bin/python by default); one JSON object on the last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(python: str, backend: str, parse: str, extra: list[str]) -> dict:
    cmd = [python, os.path.join(HERE, "data_bench.py"), "--backend", backend, "--parse", parse]
    out = subprocess.run(cmd + extra, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parse", nargs="+", default=["batch", "single"])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--af-python", default=sys.executable)
    args, extra = ap.parse_known_args()
    rows: dict = {p: [] for p in args.parse}
    for r in range(args.rounds):
        for parse in args.parse:
            # Alternate which library goes first, round by round.
            order = ["asyncflow", "tf"] if r % 2 == 0 else ["tf", "asyncflow"]
            got = {}
            for b in order:
                la = load()
                python = args.af_python if b == "asyncflow" else args.tf_python
                got[b] = run(python, b, parse, extra)
                got[b]["load"] = la
            a, t = got["asyncflow"], got["tf"]
            row = {
                "round": r,
                "train": a["train_records_per_s"] / t["train_records_per_s"],
                "pipeline": a["pipeline_records_per_s"] / t["pipeline_records_per_s"],
                "af": a,
                "tf": t,
            }
            rows[parse].append(row)
            print(
                f"round {r} {parse:6s} train {a['train_records_per_s']:>8,} vs "
                f"{t['train_records_per_s']:>8,} ({row['train']:.2f}x, CPU "
                f"{a['train_cpu_us_per_record']} / {t['train_cpu_us_per_record']} us/rec)  "
                f"pipeline {a['pipeline_records_per_s']:>8,} vs {t['pipeline_records_per_s']:>8,} "
                f"({row['pipeline']:.2f}x)  load {a['load']:.2f}/{t['load']:.2f}"
                # asyncflow's train epochs by part: the step thread's CPU (us a record)
                # and run-queue wait (ms an epoch), the input worker's CPU
                f"  [af step {a.get('train_step_cpu_us_per_record')} us "
                f"q{a.get('train_step_runq_ms')} ms, worker "
                f"{a.get('train_children_cpu_us_per_record')} us; tf step thread "
                f"{t.get('train_step_cpu_us_per_record')} us]",
                flush=True,
            )
    summary = {}
    for parse, rs in rows.items():
        med = {}
        for k in ("train", "pipeline"):
            af_m = statistics.median(x["af"][f"{k}_records_per_s"] for x in rs)
            tf_m = statistics.median(x["tf"][f"{k}_records_per_s"] for x in rs)
            med[k] = {
                "asyncflow": round(af_m),
                "tf": round(tf_m),
                "ratio_of_medians": round(af_m / tf_m, 2),
                "per_round": [round(x[k], 2) for x in rs],
            }
        med["load"] = [round(min(x["af"]["load"], x["tf"]["load"]), 2) for x in rs] + [
            round(max(x["af"]["load"], x["tf"]["load"]), 2) for x in rs
        ]
        med["load"] = [min(med["load"]), max(med["load"])]
        summary[parse] = med
        print(f"{parse}: {json.dumps(med)}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
