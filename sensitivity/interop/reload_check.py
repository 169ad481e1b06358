"""Reload an exported Jacobian SavedModel in a process that has TensorFlow but not this project.

A script, never imported: :func:`sensitivity.interop.export.run_in_plain_tensorflow` runs it as
``python -I -S reload_check.py SAVED_MODEL PATHS_JSON`` (site-packages on ``sys.path`` without their
``.pth`` hooks, so an editable install of this project is invisible; the repository is not on the path
either), with the check points as an ``.npz`` on standard input. It prints ``@@RESULT@@`` and an
``.npz`` of what the reloaded artifact computed, its signatures and metadata, and its throughput.
"""
import io, json, sys, time
sys.path[:0] = json.loads(sys.argv[2])
import numpy as np
import tensorflow as tf
try:
    import sensitivity  # noqa: F401
    importable = True
except ImportError:
    importable = False
inp = np.load(io.BytesIO(sys.stdin.buffer.read()))
t0 = time.perf_counter()
m = tf.saved_model.load(sys.argv[1])
reload_s = time.perf_counter() - t0
meta = json.loads(m.metadata_json.numpy().decode())
x = tf.constant(inp["points"])
out = m.value_and_jacobian(x)
res = {"value": out["value"].numpy(), "jacobian": out["jacobian"].numpy(),
       "value_only": m.value(x)["value"].numpy(), "jacobian_only": m.jacobian(x)["jacobian"].numpy()}
if inp["hessian_points"].size and hasattr(m, "hessian"):
    res["hessian"] = m.hessian(tf.constant(inp["hessian_points"]))["hessian"].numpy()
sig = m.signatures["value_and_jacobian"](x=x)
res["signature_jacobian"] = sig["jacobian"].numpy()
bench, seconds = inp["bench_points"], float(inp["seconds"])
rate = float("nan")
if bench.size:
    chunk = tf.constant(bench)
    m.value_and_jacobian(chunk)["jacobian"].numpy()
    best = float("inf")
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        o = m.value_and_jacobian(chunk)
        o["value"].numpy(), o["jacobian"].numpy()
        best = min(best, time.perf_counter() - t)
    rate = len(bench) / best
info = {"reload_seconds": reload_s, "jacobians_per_second": rate, "importable": importable,
        "parameter_names": [s.decode() for s in m.parameter_names.numpy()],
        "parameter_units": [s.decode() for s in m.parameter_units.numpy()],
        "output_names": [s.decode() for s in m.output_names.numpy()],
        "output_units": [s.decode() for s in m.output_units.numpy()],
        "metadata": meta, "signatures": sorted(m.signatures.keys())}
buf = io.BytesIO()
np.savez(buf, info=np.array(json.dumps(info)), **res)
sys.stdout.flush()
sys.stdout.buffer.write(b"@@RESULT@@" + buf.getvalue())
sys.stdout.flush()
