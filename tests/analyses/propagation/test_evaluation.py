"""The model evaluated ahead of its consumer: blocks in order, errors at their block, nothing evaluated twice."""
import threading
import time

import numpy as np
import pytest

from sensitivity.analyses.propagation.evaluation import evaluate_ahead
from sensitivity.errors import ModelError


def test_blocks_come_back_in_order_with_their_own_values_from_one_worker_thread():
    threads, calls = set(), []

    def values_fn(x):
        threads.add(threading.get_ident())
        calls.append(float(x[0, 0]))
        time.sleep(0.002 * (int(x[0, 0]) % 3))  # uneven model times
        return np.column_stack([x[:, 0] ** 2, -x[:, 0]])

    blocks = [np.full((4, 1), float(k)) for k in range(10)]
    seen = list(evaluate_ahead(values_fn, iter(blocks), depth=3))
    assert [float(x[0, 0]) for x, _ in seen] == list(range(10))
    for k, (x, y) in enumerate(seen):
        assert x is blocks[k]
        np.testing.assert_array_equal(y, np.column_stack([np.full(4, k * k), np.full(4, -k)]))
    assert calls == list(range(10)) and len(threads) == 1 and threading.get_ident() not in threads


def test_a_wrong_shape_is_a_model_error_at_its_block_and_the_blocks_after_it_are_dropped():
    calls = []

    def values_fn(x):
        calls.append(int(x[0, 0]))
        return x[:1] if int(x[0, 0]) == 4 else np.hstack([x, x])  # block 4: one row for two points

    consumed = []
    with pytest.raises(ModelError, match=r"`values_fn` returned shape \[1, 1\], expected \[2, m\]"):
        for x, _ in evaluate_ahead(values_fn, (np.full((2, 1), float(k)) for k in range(100)), depth=2):
            consumed.append(int(x[0, 0]))
    assert consumed == [0, 1, 2, 3]
    assert max(calls) <= 4 + 2  # no block beyond the `depth` already submitted behind the failing one


def test_an_exception_inside_the_model_reaches_the_consumer():
    def values_fn(x):
        if x[0, 0] == 2:
            raise RuntimeError("simulator crashed at block 2")
        return x

    got = []
    with pytest.raises(RuntimeError, match="block 2"):
        for x, _ in evaluate_ahead(values_fn, (np.full((1, 1), float(k)) for k in range(6))):
            got.append(int(x[0, 0]))
    assert got == [0, 1]
