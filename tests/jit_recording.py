"""Which fused element-wise programs ran as compiled loops (ops/fused_elementwise_jit.py).

`record_compiled(monkeypatch)` wraps `compile_schedule` for the test and returns the list
it appends to: per call of a program that has a compiled form, whether its loop ran
(False while the loop compiles, when the NumPy program runs instead)."""

from asyncflow.ops import fused_elementwise_jit


def record_compiled(monkeypatch) -> list:
    ran: list = []
    real = fused_elementwise_jit.compile_schedule

    def recording(program, sched):
        fn = real(program, sched)
        if fn is None:
            return None

        def run(xs, whole=None):
            out = fn(xs, whole)
            ran.append(out is not None)
            return out

        return run

    monkeypatch.setattr(fused_elementwise_jit, "compile_schedule", recording)
    return ran
