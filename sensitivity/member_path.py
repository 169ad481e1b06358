"""The dense path with the members of an ensemble as a batch axis: stacked kernels ``[K, ...]``, batched matmuls.

An ensemble of ``K`` MLPs of one architecture (the members :func:`sensitivity.training.train_surrogate` fits
from different seeds and bootstrap resamples) is ``K`` matrix chains of equal shapes (see
:mod:`sensitivity.dense_path`). Stacking member ``k``'s kernel ``W_k`` of every affine step into one
``[K, k, h]`` tensor turns the ``K`` chains into one: the values of a batch ``[K, B, k] @ [K, k, h]`` and the
tangent blocks ``[K, B t, k] @ [K, k, h]`` are one batched matmul per layer, so the ``K`` members' values and
Jacobians come out of ONE compiled call, ``[K, B, n_out]`` and ``[K, B, n_out, n_in]``, with the same
per-layer work as ``K`` separate engines and none of their per-call overhead. Elementwise steps that are the
same map in every member (an activation) apply to the whole stack at once; those that differ (each member's
input and output scaling, fitted to its own bootstrap resample) apply member by member.

:func:`member_chain` builds the stacked chain from each member's verified
:class:`~sensitivity.dense_path.DenseChain` and checks that it reproduces every member's own values on probe
points; :class:`MeanChain` is the ensemble mean on top of it, the chain
:func:`sensitivity.jacobian.compile_jacobian` compiles for an ensemble surrogate.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from sensitivity.dense_path import Block, DenseChain, _call_activation, chain_of, layer_steps, reproduces, with_slope


@dataclass(frozen=True)
class MemberChain:
    """``K`` members' dense chains as one, the members on a leading batch axis.

    Attributes
    ----------
    steps
        ``("affine", (W [K, k, h], b [K, 1, h] | None, W^T [K, h, k]))`` or ``("elementwise", f)`` with ``f``
        mapping ``[K, B, width]`` elementwise, in application order.
    widths
        Numbers per point and member after each affine step, input first.
    members
        ``K``.
    """

    steps: tuple[tuple[str, Any], ...]
    widths: tuple[int, ...]
    members: int

    reversible = True

    def stacked(self, x: tf.Tensor) -> tf.Tensor:
        """Points ``[B, n]`` (every member's) as ``[K, B, n]``; points ``[K, B, n]`` (one set per member) as given."""
        return x if x.shape.rank == 3 else tf.broadcast_to(x[None], [self.members, tf.shape(x)[0], x.shape[-1]])

    def values(self, x: tf.Tensor) -> tf.Tensor:
        """Every member's outputs ``[K, B, n_out]`` at ``x [B, n]`` (or member ``k`` at ``x[k]`` for ``[K, B, n]``)."""
        h = self.stacked(x)
        for kind, step in self.steps:
            h = _affine(h, step) if kind == "affine" else step(h)
        return h

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[K, B, n_out]`` and Jacobians ``[K, B, n_out, n_in]``, the ``n_in`` tangents carried together."""
        h, tangents = self.stacked(x), Block(None, tangent_axis=2)
        for kind, step in self.steps:
            if kind == "affine":
                tangents.kernel(step[0])
                h = _affine(h, step)
            else:
                h, slope = with_slope(step, h)
                tangents.slope(slope)
        block = tf.broadcast_to(tangents.block, [self.members, tf.shape(h)[1], x.shape[-1], h.shape[-1]])
        return h, tf.transpose(block, [0, 1, 3, 2])

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[K, B, n_out]`` and Jacobians ``[K, B, n_out, n_in]``, the ``n_out`` cotangents carried together."""
        h, slopes = self.stacked(x), []
        for kind, step in self.steps:  # primal pass, keeping every elementwise slope
            if kind == "affine":
                h = _affine(h, step)
                slopes.append(None)
            else:
                h, slope = with_slope(step, h)
                slopes.append(slope)
        cotangents = Block(None, tangent_axis=2)  # [K, B, n_out, width]
        for (kind, step), slope in zip(reversed(self.steps), reversed(slopes)):
            if kind == "affine":
                cotangents.kernel(step[2])
            else:
                cotangents.slope(slope)
        return h, tf.broadcast_to(cotangents.block, [self.members, tf.shape(h)[1], h.shape[-1], x.shape[-1]])


@dataclass(frozen=True)
class MeanChain:
    """The ensemble mean of a :class:`MemberChain`: values ``[B, n_out]`` and Jacobians ``[B, n_out, n_in]``.

    What :func:`sensitivity.jacobian.compile_jacobian` compiles for an ensemble surrogate (its ``fn`` is the
    members' mean); ``widths`` count every member's numbers, so the engine sizes its chunks for the stack.
    """

    chain: MemberChain

    reversible = True

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(self.chain.members * w for w in self.chain.widths)

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

    Each member must take the dense path on its own (:func:`~sensitivity.dense_path.chain_of`) with only affine
    and elementwise steps, all with the same step kinds and kernel shapes; the stacked chain must reproduce
    every member's values on probe points.
    """
    chains = []
    for k, member in enumerate(members):
        steps = layer_steps(member.fn, dtype)
        chain = steps if isinstance(steps, str) else chain_of(steps, member.fn, n_in, dtype)
        if isinstance(chain, str):
            return f"member {k}: {chain}"
        chain = _flat_outputs(chain)
        if not chain.reversible:
            return f"member {k} has convolution or reshaping layers (the member axis is for MLPs)"
        chains.append(chain)
    layout = _layout(chains[0])
    for k, chain in enumerate(chains[1:], start=1):
        if _layout(chain) != layout:
            return f"member {k} has another architecture than member 0 ({_layout(chain)} vs {layout})"
    steps = tuple(_stack_step([c.steps[i] for c in chains], dtype) for i in range(len(layout)))
    stacked = MemberChain(steps, chains[0].widths, len(chains))
    for k, member in enumerate(members):
        if not reproduces(functools.partial(_member_values, stacked, k), member.fn, n_in, dtype):
            return f"the stacked chain does not reproduce member {k}'s values on probe points"
    return stacked


def _flat_outputs(chain: DenseChain) -> DenseChain:
    """``chain`` without a last ``Reshape`` or ``Flatten`` (the engine's outputs are flat: C-order reshapes of
    the flat outputs are the identity), e.g. the ``output_shape`` layer of a trained field surrogate."""
    steps = list(chain.steps)
    while steps and steps[-1][0] == "linear" and type(steps[-1][1][2]).__name__ in ("Reshape", "Flatten"):
        steps.pop()
    return DenseChain(tuple(steps), chain.widths[: len(chain.widths) - (len(chain.steps) - len(steps))])


def _layout(chain: DenseChain) -> tuple[tuple[str, tuple[int, ...] | None], ...]:
    """Step kinds and kernel shapes of a chain: what must agree for members to stack."""
    return tuple((kind, tuple(step[0].shape) if kind == "affine" else None) for kind, step in chain.steps)


def _stack_step(steps: list[tuple[str, Any]], dtype: str) -> tuple[str, Any]:
    """One step of every member as a step on the stack."""
    kind = steps[0][0]
    if kind == "elementwise":
        maps = [step for _, step in steps]
        return kind, maps[0] if all(_same_activation(f, maps[0]) for f in maps) else \
            functools.partial(_member_by_member, tuple(maps))
    kernels = np.stack([np.asarray(step[0]) for _, step in steps])
    biases = None if steps[0][1][1] is None else np.stack([np.asarray(step[1])[None] for _, step in steps])
    return kind, (tf.constant(kernels, dtype), None if biases is None else tf.constant(biases, dtype),
                  tf.constant(np.ascontiguousarray(kernels.transpose(0, 2, 1)), dtype))


def _same_activation(f: Any, g: Any) -> bool:
    """Are ``f`` and ``g`` the same Keras activation (one map for the whole stack)?"""
    return all(isinstance(p, functools.partial) and p.func is _call_activation for p in (f, g)) and f.args == g.args


def _member_by_member(maps: tuple[Callable[[tf.Tensor], tf.Tensor], ...], h: tf.Tensor) -> tf.Tensor:
    """Member ``k``'s own elementwise map on ``h[k]`` (its scaling layer), for every ``k``."""
    return tf.stack([f(h[k]) for k, f in enumerate(maps)])


def _affine(h: tf.Tensor, step: tuple[tf.Tensor, tf.Tensor | None, tf.Tensor]) -> tf.Tensor:
    """``h [K, B, k] @ W [K, k, h] + b [K, 1, h]``: one batched matmul."""
    kernel, bias, _ = step
    z = tf.matmul(h, kernel)
    return z if bias is None else z + bias


def _member_values(chain: MemberChain, k: int, x: tf.Tensor) -> tf.Tensor:
    """Member ``k``'s values ``[B, n_out]`` from the stacked chain (for the probe check)."""
    return chain.values(x)[k]
