"""The flood model of the acceptance study (Iooss & Lemaitre 2015, doi:10.1007/978-1-4899-7547-8_5): its
study files as a user writes them, and its exact Sobol' indices as an independent oracle."""
from __future__ import annotations

FLOOD_SPACE = """\
parameters:
  - {name: Q, units: m3 s-1, distribution: {kind: gumbel_r, loc: 1013, scale: 558, truncate: [500, 3000]}}
  - {name: Ks, units: "1", distribution: {kind: norm, loc: 30, scale: 8, truncate: [15, null]}}
  - {name: Zv, units: m, low: 49, high: 51}
  - {name: Zm, units: m, low: 54, high: 56}
"""
FLOOD_MODEL = """\
import tensorflow as tf


def height(x, width=300.0, length=5000.0):
    q, ks, zv, zm = tf.unstack(x, axis=1)
    return (q / (ks * width * tf.sqrt((zm - zv) / length))) ** 0.6
"""


def flood_sobol_indices() -> dict[str, tuple[float, float]]:
    """``{name: (S1, ST)}`` of H = c Q^0.6 Ks^-0.6 (Zm - Zv)^-0.3 by 1-D quadrature (scipy only).

    Q and Ks enter as independent factors, so with ``m_i = E[g_i]``, ``s_i = E[g_i^2]``:
    ``V = c^2 (s_Q s_K s_Z - (m_Q m_K m_Z)^2)``, ``V_Q = c^2 (s_Q - m_Q^2) m_K^2 m_Z^2``,
    ``V_TQ = c^2 (s_Q - m_Q^2) s_K s_Z``; for Zv (Zm alike) ``V_Zv = c^2 m_Q^2 m_K^2 Var(h(Zv))`` and
    ``V_TZv = c^2 s_Q s_K (s_Z - E[k(Zm)^2])`` with the conditional means ``h``, ``k`` in closed form.
    """
    import math

    from scipy import integrate, stats

    def moments(pdf, lo, hi, g):
        mass = integrate.quad(pdf, lo, hi, limit=200)[0]
        return (integrate.quad(lambda x: g(x) * pdf(x), lo, hi, limit=200)[0] / mass,
                integrate.quad(lambda x: g(x) ** 2 * pdf(x), lo, hi, limit=200)[0] / mass)

    c2 = (math.sqrt(5000.0) / 300.0) ** 1.2
    mq, sq = moments(lambda x: stats.gumbel_r.pdf(x, 1013.0, 558.0), 500.0, 3000.0, lambda x: x**0.6)
    mk, sk = moments(lambda x: stats.norm.pdf(x, 30.0, 8.0), 15.0, math.inf, lambda x: x**-0.6)
    h = lambda zv: ((56.0 - zv) ** 0.7 - (54.0 - zv) ** 0.7) / 1.4  # noqa: E731  E[(Zm - zv)^-0.3]
    k = lambda zm: ((zm - 49.0) ** 0.7 - (zm - 51.0) ** 0.7) / 1.4  # noqa: E731  E[(zm - Zv)^-0.3]
    mz = integrate.quad(h, 49.0, 51.0)[0] / 2.0
    sz = integrate.dblquad(lambda zm, zv: (zm - zv) ** -0.6, 49.0, 51.0, 54.0, 56.0)[0] / 4.0
    eh2 = integrate.quad(lambda zv: h(zv) ** 2, 49.0, 51.0)[0] / 2.0
    ek2 = integrate.quad(lambda zm: k(zm) ** 2, 54.0, 56.0)[0] / 2.0
    v = c2 * (sq * sk * sz - (mq * mk * mz) ** 2)
    return {"Q": (c2 * (sq - mq**2) * mk**2 * mz**2 / v, c2 * (sq - mq**2) * sk * sz / v),
            "Ks": (c2 * (sk - mk**2) * mq**2 * mz**2 / v, c2 * (sk - mk**2) * sq * sz / v),
            "Zv": (c2 * mq**2 * mk**2 * (eh2 - mz**2) / v, c2 * sq * sk * (sz - ek2) / v),
            "Zm": (c2 * mq**2 * mk**2 * (ek2 - mz**2) / v, c2 * sq * sk * (sz - eh2) / v)}
