"""Jacobians/s of a user's own CNN on the documented route: a plain Keras ``.keras`` file (no layer of this package),
loaded with ``model.output`` and ``model.scaling`` in a study's config, as docs/tutorials/surrogates.md says (issue 48
item 4).

The study folder (a temporary directory) holds the two networks and a config of its own, as a user's would:
  conv1d  a field of 64 cells -> Reshape(64, 1) -> Conv1D(8, 5, same, tanh) -> MaxPool(2) -> Conv1D(16, 3, same,
          tanh) -> GlobalAveragePooling1D -> Dense(32, tanh) -> Dense(4)                 (reverse mode)
  conv2d  a 16 x 16 field -> Reshape(16, 16, 1) -> Conv2D(8, 3, same, tanh) -> MaxPool(2) -> Conv2D(16, 3, tanh)
          -> Flatten -> Dense(32, tanh) -> Dense(4)                                       (reverse mode)
trained on normalised inputs and outputs, whose normalisation the config's ``model.scaling`` gives (log of the
field's values, then offset and scale; outputs scaled and offset). The config is composed as the command line
composes it (``conf/`` of the study ahead of the packaged one), the surrogate and the engine built by the
workflows' own ``surrogate_from`` / ``engine_from``; the engine's log line names its path. Contenders, interleaved
(best of --rounds passes over --points points):
  engine            the CLI route's engine (the dense / reverse path)
  engine autodiff   the same surrogate with ``path="autodiff"`` (what this route gave before issue 48 item 4)
  naive loop        a fresh eager ``GradientTape().jacobian`` per point (on --naive points)
  JAX               ``jit(vmap(jacfwd))`` where ``jax`` is importable (it is not a dependency; the line says so
                    when it is missing)
Every contender's Jacobian is checked against the engine's on the first points before any timing.

Usage: python benchmarks/bench_user_cnn.py [--points 4096] [--rounds 3] [--naive 32]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()

import numpy as np  # noqa: E402

#: The two users' networks: name -> (field shape, builder of the layers after the Reshape).
FIELDS = {"conv1d": (64,), "conv2d": (16, 16)}


def network(name: str):
    """The user's network ``name`` in normalised units, random weights (seeded)."""
    import keras
    from keras import layers as L

    keras.utils.set_random_seed(0)
    field = FIELDS[name]
    inputs = keras.Input((int(np.prod(field)),))
    h = L.Reshape((*field, 1))(inputs)
    if name == "conv1d":
        h = L.Conv1D(8, 5, padding="same", activation="tanh")(h)
        h = L.MaxPooling1D(2)(h)
        h = L.GlobalAveragePooling1D()(L.Conv1D(16, 3, padding="same", activation="tanh")(h))
    else:
        h = L.Conv2D(8, 3, padding="same", activation="tanh")(h)
        h = L.MaxPooling2D(2)(h)
        h = L.Flatten()(L.Conv2D(16, 3, activation="tanh")(h))
    return keras.Model(inputs, L.Dense(4)(L.Dense(32, activation="tanh")(h)))


def study(folder: Path, name: str) -> None:
    """A user's study folder: ``<name>.keras`` and ``conf/space/<name>.yaml``, ``conf/experiment/<name>.yaml`` with
    ``model.output`` and ``model.scaling`` (docs/tutorials/surrogates.md)."""
    n = int(np.prod(FIELDS[name]))
    network(name).save(folder / f"{name}.keras")
    (folder / "conf" / "space").mkdir(parents=True, exist_ok=True)
    (folder / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    lines = ["parameters:"] + [f"  - {{name: k{i}, units: m s-1, low: 1.0e-5, high: 1.0e-3, scale: log}}"
                               for i in range(n)]
    (folder / "conf" / "space" / f"{name}.yaml").write_text("\n".join(lines) + "\n")
    names = ", ".join(f"k{i}" for i in range(n))
    (folder / "conf" / "experiment" / f"{name}.yaml").write_text(f"""# @package _global_
defaults:
  - override /model: keras
  - override /space: {name}
model:
  source: {folder / f"{name}.keras"}
  output: {{name: head, units: m, names: [w1, w2, w3, w4]}}
  scaling:
    input: {{offset: -9.2, scale: 1.3, log: [{names}]}}
    output: {{offset: [12.0, 11.5, 13.0, 12.5], scale: [0.8, 0.6, 1.1, 0.9]}}
""")


def naive_loop(surrogate, x: np.ndarray) -> np.ndarray:
    """A fresh eager ``GradientTape().jacobian`` per point."""
    import tensorflow as tf

    out = []
    for point in x:
        p = tf.constant(point[None], surrogate.dtype)
        with tf.GradientTape() as tape:
            tape.watch(p)
            y = surrogate.fn(p)
        out.append(tape.jacobian(y, p)[0, :, 0].numpy())
    return np.stack(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--naive", type=int, default=32)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sensitivity.engine.jacobian import compile_jacobian
    from workflows.plumbing.build import engine_from, space_from, surrogate_from
    from workflows.cli import _compose
    from workflows.plumbing.schema import register

    register("sweep")  # the sweep's config schema, as the command line registers it

    logging.basicConfig(level=logging.INFO, format="  log: %(message)s")
    logging.getLogger("sensitivity.engine.jacobian").setLevel(logging.INFO)
    try:
        import jax  # noqa: F401
        has_jax = True
    except ImportError:
        has_jax = False
    print(f"{args.points} points, best of {args.rounds} rounds; naive loop on {args.naive} points")
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIELDS:
            study(Path(tmp), name)
            cfg = _compose("sweep", [f"experiment={name}"], str(Path(tmp) / "conf"))
            space = space_from(cfg)
            surrogate = surrogate_from(cfg, space)
            low, high = space.bounds.T  # log-uniform draws over the space's (log-scaled) ranges
            x = np.exp(np.random.default_rng(1).uniform(np.log(low), np.log(high), (args.points, len(low))))
            print(f"\n{name}: {surrogate.n_in} inputs -> {surrogate.output_size} outputs, {surrogate.dtype}")
            engine = engine_from(cfg, surrogate, space)
            autodiff = compile_jacobian(surrogate, cfg.jacobian.mode, path="autodiff")
            print(f"  engine: {engine.path} path, {engine.mode} mode, chunks of {engine.chunk_size}")
            reference = engine(x[: args.naive])[1]
            scale = np.abs(reference).max()
            for label, got in (("autodiff", autodiff(x[: args.naive])[1]),
                               ("naive loop", naive_loop(surrogate, x[: args.naive]))):
                error = np.abs(got - reference).max() / scale
                print(f"  {label} vs engine: max |difference| {error:.1e} of the largest entry")
                assert error < 1e-4, (label, error)
            best = {"engine": np.inf, "engine autodiff": np.inf}
            for _ in range(args.rounds):
                for label, run in (("engine", engine), ("engine autodiff", autodiff)):
                    start = time.perf_counter()
                    run(x)
                    best[label] = min(best[label], time.perf_counter() - start)
            start = time.perf_counter()
            naive_loop(surrogate, x[: args.naive])
            naive_rate = args.naive / (time.perf_counter() - start)
            rates = {label: args.points / t for label, t in best.items()}
            for label, rate in rates.items():
                print(f"  {label:16s} {rate:12,.0f} Jacobians/s")
            print(f"  {'naive loop':16s} {naive_rate:12,.1f} Jacobians/s")
            print(f"  engine / autodiff path {rates['engine'] / rates['engine autodiff']:.2f}x, "
                  f"engine / naive loop {rates['engine'] / naive_rate:,.0f}x")
            print("  JAX jit(vmap(jacfwd)): " + ("not measured here: the JAX twins of CNNs are bench_jacobian.py's "
                                               "cnn and deep shapes" if has_jax else
                                               "not measured: jax is not importable here"))


if __name__ == "__main__":
    main()
