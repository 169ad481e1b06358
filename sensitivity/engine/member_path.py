"""The member path of an ensemble: every member's own layer chain, one after another, in one compiled call.

An ensemble of ``K`` networks of one architecture (the members :func:`sensitivity.training.train_surrogate` fits
from different seeds and bootstrap resamples: MLPs, or conv nets over a field of inputs) is ``K`` layer chains of
equal shapes. :class:`MemberChain` runs each member's verified chain on the chunk in turn and stacks the results,
so the ``K`` members' values and Jacobians, ``[K, B, n_out]`` and ``[K, B, n_out, n_in]``, come out of ONE compiled
call: the per-layer work of ``K`` separate engines without their ``K`` calls. A member's chain is the one its own
engine would take (:func:`sensitivity.engine.jacobian.layer_chain`): the dense chain of an MLP
(:class:`~sensitivity.engine.dense_path.DenseChain`, its folded first or last kernels included), or for a conv net
in reverse mode the reverse chain through its convolutions and pooling
(:class:`~sensitivity.engine.reverse_path.ConvChain`; in forward mode its dense chain, convolutions applied to the
folded tangent block).

Measured against the previous form, the members as a batch axis (kernels stacked into ``[K, k, h]``, one batched
matmul per layer; ``benchmarks/bench_ensemble.py``'s shapes, 5 members, float32, 2-core CPU, one interleaved
scratch run): at 8,192 points 5.17x / 4.95x / 4.96x one member's time (seir / A / C) against 7.97x / 5.98x /
6.55x, at 64 points 2.30x / 3.60x / 2.83x against 3.22x / 5.36x / 4.76x. XLA's batched matmuls ran slower than
the members' own 2-D ones, and a chunk sized for the whole stack (1 / K of a member's) was shorter than the
fastest: a chunk of half a member's (:data:`CHUNK_SHARE`) was the fastest of a quarter to one member's chunk on
all three shapes. Conv members likewise: their channels stacked through grouped convolutions and batched Dense
kernels ran 0.65-0.67x the members in turn (docs/performance.md, "Conv ensembles"); half a member's chunk was the
fastest of 256-2,048 points (:meth:`MemberChain.chunk_size`).

:func:`member_chain` builds it from the members' chains; :class:`MeanChain` is the ensemble mean on top of it,
the chain :func:`sensitivity.engine.jacobian.compile_jacobian` compiles for an ensemble surrogate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import tensorflow as tf

from sensitivity.engine.dense_path import DenseChain, chain_of, flat_outputs
from sensitivity.engine.layers import layer_steps
from sensitivity.engine.reverse_path import MIN_CHUNK, ConvChain, conv_chain

#: A member chain's chunk is that of one member over this share (see :meth:`MemberChain.chunk_size`).
CHUNK_SHARE = 2


@dataclass(frozen=True)
class MemberChain:
    """``K`` members' layer chains, evaluated one after another, their results on a leading member axis.

    Attributes
    ----------
    chains
        Each member's verified chain: all :class:`~sensitivity.engine.dense_path.DenseChain` (affine, linear and
        elementwise steps), or all :class:`~sensitivity.engine.reverse_path.ConvChain` (reverse mode only).
    """

    chains: tuple[DenseChain, ...] | tuple[ConvChain, ...]


    @property
    def members(self) -> int:
        """``K``."""
        return len(self.chains)

    @property
    def widths(self) -> tuple[int, ...]:
        """Numbers per point after each step of member 0's chain, input first (:attr:`DenseChain.widths`)."""
        return self.chains[0].widths

    @property
    def kind(self) -> str:
        """What the members' chains are, for the engine's report: ``"dense chain"`` or ``"reverse conv chain"``."""
        return "reverse conv chain" if isinstance(self.chains[0], ConvChain) else "dense chain"

    def chunk_size(self, mode: str, n_in: int, n_out: int, itemsize: int, memory_budget_mb: float) -> int:
        """Points per chunk: one member's chunk over :data:`CHUNK_SHARE` [points].

        One member's chunk is its own engine's: a conv chain's (:meth:`ConvChain.chunk_size
        <sensitivity.engine.reverse_path.ConvChain.chunk_size>`, its cotangent blocks cache-sized), or a dense
        chain's (:meth:`DenseChain.chunk_size <sensitivity.engine.dense_path.DenseChain.chunk_size>`, its tangent
        blocks :data:`CHUNK_SHARE` times wider); ``memory_budget_mb`` [MiB].
        """
        first = self.chains[0]
        if isinstance(first, ConvChain):
            return max(MIN_CHUNK, first.chunk_size(itemsize, memory_budget_mb) // CHUNK_SHARE)
        return first.chunk_size(mode, n_in, n_out, itemsize, memory_budget_mb, share=CHUNK_SHARE)

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


    @property
    def widths(self) -> tuple[int, ...]:
        return self.chain.widths

    def chunk_size(self, mode: str, n_in: int, n_out: int, itemsize: int, memory_budget_mb: float) -> int:
        return self.chain.chunk_size(mode, n_in, n_out, itemsize, memory_budget_mb)

    def values(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(self.chain.values(x), axis=0)

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        values, jacobian = self.chain.forward(x)
        return tf.reduce_mean(values, axis=0), tf.reduce_mean(jacobian, axis=0)

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        values, jacobian = self.chain.reverse(x)
        return tf.reduce_mean(values, axis=0), tf.reduce_mean(jacobian, axis=0)


def member_chain(members: Sequence[Any], n_in: int, dtype: str, mode: str) -> MemberChain | str:
    """The verified :class:`MemberChain` of the surrogates ``members`` in ``mode``, or a sentence saying why not.

    Each member must take a layer path on its own, verified against the member on probe points: its dense chain
    (:func:`~sensitivity.engine.dense_path.chain_of`; in reverse mode with affine and elementwise steps only), else in
    reverse mode its reverse chain through convolutions, pooling and reshaping layers
    (:func:`~sensitivity.engine.reverse_path.conv_chain`); all members of one architecture: the same chain kind, step
    kinds and widths (the chunk is sized by member 0's).
    """
    chains = []
    for k, member in enumerate(members):
        steps = layer_steps(member.fn, dtype)
        if isinstance(steps, str):
            return f"member {k}: {steps}"
        chain = chain_of(steps, member.fn, n_in, dtype)
        chain = flat_outputs(chain, dtype) if isinstance(chain, DenseChain) else chain
        if mode == "reverse" and not (isinstance(chain, DenseChain) and chain.reversible):
            chain = conv_chain(steps, member.fn, n_in, dtype)
        if isinstance(chain, str):
            return f"member {k}: {chain}"
        chains.append(chain)
    layout = _layout(chains[0])
    for k, chain in enumerate(chains[1:], start=1):
        if _layout(chain) != layout:
            return f"member {k} has another architecture than member 0 ({_layout(chain)} vs {layout})"
    return MemberChain(tuple(chains))


def _layout(chain: DenseChain | ConvChain) -> tuple[Any, ...]:
    """Chain kind, step kinds and widths of a chain: what must agree for members to share one chunk size."""
    return type(chain).__name__, tuple(type(step).__name__ for step in chain.steps), chain.widths
