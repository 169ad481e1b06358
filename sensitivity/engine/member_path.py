"""The dense path of an ensemble: every member's own dense chain, one after another, in one compiled call.

An ensemble of ``K`` MLPs of one architecture (the members :func:`sensitivity.training.train_surrogate` fits
from different seeds and bootstrap resamples) is ``K`` matrix chains of equal shapes (see
:mod:`sensitivity.engine.dense_path`). :class:`MemberChain` runs each member's verified
:class:`~sensitivity.engine.dense_path.DenseChain` (its folded first or last kernels included) on the chunk in turn and
stacks the results, so the ``K`` members' values and Jacobians, ``[K, B, n_out]`` and ``[K, B, n_out, n_in]``,
come out of ONE compiled call: the per-layer work of ``K`` separate engines without their ``K`` calls.

Measured against the previous form, the members as a batch axis (kernels stacked into ``[K, k, h]``, one batched
matmul per layer; ``benchmarks/bench_ensemble.py``'s shapes, 5 members, float32, 2-core CPU, one interleaved
scratch run): at 8,192 points 5.17x / 4.95x / 4.96x one member's time (seir / A / C) against 7.97x / 5.98x /
6.55x, at 64 points 2.30x / 3.60x / 2.83x against 3.22x / 5.36x / 4.76x. XLA's batched matmuls ran slower than
the members' own 2-D ones, and a chunk sized for the whole stack (1 / K of a member's) was shorter than the
fastest: a chunk of half a member's (:data:`CHUNK_SHARE`) was the fastest of a quarter to one member's chunk on
all three shapes.

:func:`member_chain` builds it from the members' chains; :class:`MeanChain` is the ensemble mean on top of it,
the chain :func:`sensitivity.engine.jacobian.compile_jacobian` compiles for an ensemble surrogate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import tensorflow as tf

from sensitivity.engine.dense_path import DenseChain, chain_of, flat_outputs
from sensitivity.engine.layers import AffineStep, layer_steps

#: A member chain's chunk is that of one member over this share (see :attr:`MemberChain.widths`).
CHUNK_SHARE = 2


@dataclass(frozen=True)
class MemberChain:
    """``K`` members' dense chains, evaluated one after another, their results on a leading member axis.

    Attributes
    ----------
    chains
        Each member's verified :class:`~sensitivity.engine.dense_path.DenseChain` (affine and elementwise steps).
    """

    chains: tuple[DenseChain, ...]

    reversible = True

    @property
    def members(self) -> int:
        """``K``."""
        return len(self.chains)

    @property
    def widths(self) -> tuple[int, ...]:
        """Numbers per point after each affine step, input first, times :data:`CHUNK_SHARE`: what the engine
        sizes its chunks by, so that a chunk is :data:`CHUNK_SHARE` times shorter than one member's."""
        return tuple(CHUNK_SHARE * w for w in self.chains[0].widths)

    def values(self, x: tf.Tensor) -> tf.Tensor:
        """Every member's outputs ``[K, B, n_out]`` at ``x [B, n]``."""
        return tf.stack([chain.values(x) for chain in self.chains])

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[K, B, n_out]`` and Jacobians ``[K, B, n_out, n_in]``, each member's ``n_in`` tangents together."""
        return _stacked([chain.forward(x) for chain in self.chains])

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[K, B, n_out]`` and Jacobians ``[K, B, n_out, n_in]``, each member's ``n_out`` cotangents
        together."""
        return _stacked([chain.reverse(x) for chain in self.chains])


def _stacked(results: list[tuple[tf.Tensor, tf.Tensor]]) -> tuple[tf.Tensor, tf.Tensor]:
    """The members' ``(values, jacobian)`` pairs as ``(values [K, ...], jacobian [K, ...])``."""
    return tf.stack([v for v, _ in results]), tf.stack([j for _, j in results])


@dataclass(frozen=True)
class MeanChain:
    """The ensemble mean of a :class:`MemberChain`: values ``[B, n_out]`` and Jacobians ``[B, n_out, n_in]``.

    What :func:`sensitivity.engine.jacobian.compile_jacobian` compiles for an ensemble surrogate (its ``fn`` is the
    members' mean); its chunks are sized as the member chain's.
    """

    chain: MemberChain

    reversible = True

    @property
    def widths(self) -> tuple[int, ...]:
        return self.chain.widths

    def values(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(self.chain.values(x), axis=0)

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        values, jacobian = self.chain.forward(x)
        return tf.reduce_mean(values, axis=0), tf.reduce_mean(jacobian, axis=0)

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        values, jacobian = self.chain.reverse(x)
        return tf.reduce_mean(values, axis=0), tf.reduce_mean(jacobian, axis=0)


def member_chain(members: Sequence[Any], n_in: int, dtype: str) -> MemberChain | str:
    """The verified :class:`MemberChain` of the surrogates ``members`` (Keras MLPs of one architecture), or why not.

    Each member must take the dense path on its own (:func:`~sensitivity.engine.dense_path.chain_of`, which verifies
    its chain against the member on probe points) with only affine and elementwise steps, all with the same step
    kinds and kernel shapes (the chunk is sized by member 0's widths).
    """
    chains = []
    for k, member in enumerate(members):
        steps = layer_steps(member.fn, dtype)
        chain = steps if isinstance(steps, str) else chain_of(steps, member.fn, n_in, dtype)
        if isinstance(chain, str):
            return f"member {k}: {chain}"
        chain = flat_outputs(chain, dtype)
        if not chain.reversible:
            return f"member {k} has convolution or reshaping layers (the member axis is for MLPs)"
        chains.append(chain)
    layout = _layout(chains[0])
    for k, chain in enumerate(chains[1:], start=1):
        if _layout(chain) != layout:
            return f"member {k} has another architecture than member 0 ({_layout(chain)} vs {layout})"
    return MemberChain(tuple(chains))


def _layout(chain: DenseChain) -> tuple[tuple[str, tuple[int, ...] | None], ...]:
    """Step kinds and kernel shapes of a chain: what must agree for members to share one chunk size."""
    return tuple((step.kind, tuple(step.kernel.shape) if isinstance(step, AffineStep) else None)
                 for step in chain.steps)
