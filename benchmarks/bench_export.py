"""Reload time and Jacobians/s of the exported SavedModel against the in-process engine, side by side.

The model is the 8 -> [256]*3 tanh -> 64 MLP of bench_jacobian.py (forward mode, XLA, float32). It is
exported with :func:`sensitivity.interop.export.export_jacobian`, whose check reloads it in a fresh
``python -I -S`` process that cannot import this package and times ``tf.saved_model.load`` and the
reloaded ``value_and_jacobian`` on one chunk of the engine's size; the in-process engine is timed
on the same chunk in this process. Best of repeats over ``--seconds`` each. Printed, never asserted.

Usage: python benchmarks/bench_export.py [--seconds 3] [--chunk 4096] [--hessian]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402

import sensitivity  # noqa: E402
from bench_jacobian import mlp  # noqa: E402
from sensitivity.interop.export import export_jacobian  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per throughput measurement [s]")
    parser.add_argument("--chunk", type=int, default=None, help="points per call (default: the engine's chunk)")
    parser.add_argument("--hessian", action="store_true", help="also export the Hessian function")
    args = parser.parse_args()
    n_in, hidden, n_out = 8, [256, 256, 256], 64
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.keras"
        mlp(n_in, hidden, n_out).save(path)
        surrogate = sensitivity.load_surrogate(path, input_names=[f"p{i}" for i in range(n_in)],
                                               input_units=["1"] * n_in,
                                               output={"name": "y", "names": [f"y{i}" for i in range(n_out)]})
        jac = sensitivity.compile_jacobian(surrogate, "auto", chunk_size=args.chunk)
        points = np.random.default_rng(0).uniform(-1, 1, (256, n_in))
        t0 = time.perf_counter()
        check = export_jacobian(jac, Path(tmp) / "model", hessian=args.hessian, check_points=points,
                                bench_seconds=args.seconds)
        total = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (Path(tmp) / "model").rglob("*") if f.is_file())
    print(f"model {n_in} -> {hidden} tanh -> {n_out}, {jac.mode} mode, {jac.dtype}, XLA={jac.jit_compile}, "
          f"chunk {jac.chunk_size} points, hessian={args.hessian}")
    print(f"export + fresh-process check: {total:.1f} s; artifact {size / 2**20:.1f} MiB")
    print(f"{'':28s}{'in-process engine':>20s}{'reloaded SavedModel':>22s}")
    print(f"{'Jacobians/s':28s}{check.engine_jacobians_per_second:>20,.0f}{check.reloaded_jacobians_per_second:>22,.0f}")
    print(f"{'reload time [s]':28s}{'-':>20s}{check.reload_seconds:>22.2f}")
    print(f"ratio reloaded / in-process: {check.throughput_ratio:.2f} (target >= 0.90)")
    print(f"max relative error vs engine: value {check.value_error:.1e}, jacobian {check.jacobian_error:.1e}"
          f", hessian {check.hessian_error:.1e}; project importable in the reload process: {check.importable}")


if __name__ == "__main__":
    main()
