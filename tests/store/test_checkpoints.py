"""Finished units kept by :class:`~sensitivity.store.checkpoints.Checkpoints`: reused only when their fingerprint and
every byte match the record; unfinished, other, damaged or unreadable units are computed again, never reused."""
from __future__ import annotations

import numpy as np

from sensitivity.store.checkpoints import Checkpoints


def keep(store: Checkpoints, name: str = "member-0", fingerprint: str = "fp") -> np.ndarray:
    values = np.arange(6.0).reshape(2, 3)
    store.save(name, fingerprint, lambda tmp: np.save(tmp / "values.npy", values))
    return values


def test_a_kept_unit_is_found_with_its_own_fingerprint_only(tmp_path):
    store = Checkpoints(tmp_path / "work.parts")
    values = keep(store)
    entry = store.load("member-0", "fp")
    assert entry == tmp_path / "work.parts" / "member-0"
    np.testing.assert_array_equal(np.load(entry / "values.npy"), values)
    assert store.load("member-0", "other settings") is None and store.load("member-1", "fp") is None


def test_a_damaged_or_unrecorded_unit_is_never_reused_and_is_replaced_when_saved_again(tmp_path, caplog):
    store = Checkpoints(tmp_path / "work.parts")
    keep(store)
    file = tmp_path / "work.parts" / "member-0" / "values.npy"
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit of the last value
    file.write_bytes(bytes(data))
    assert store.load("member-0", "fp") is None and "damaged" in caplog.text
    values = keep(store)  # computed again: replaces the damaged unit
    np.testing.assert_array_equal(np.load(store.load("member-0", "fp") / "values.npy"), values)
    file.unlink()  # a missing file
    assert store.load("member-0", "fp") is None
    keep(store)
    (tmp_path / "work.parts" / "member-0.json").write_text("{not json")  # a torn record
    assert store.load("member-0", "fp") is None
    (tmp_path / "work.parts" / "member-0.json").unlink()  # killed before the record: unfinished
    assert store.load("member-0", "fp") is None


def test_a_unit_whose_writer_fails_leaves_nothing_that_looks_finished(tmp_path):
    store = Checkpoints(tmp_path / "work.parts")

    def dies(tmp):
        (tmp / "half.npy").write_bytes(b"partial")
        raise KeyboardInterrupt("killed")

    try:
        store.save("member-0", "fp", dies)
    except KeyboardInterrupt:
        pass
    assert store.load("member-0", "fp") is None
    assert not (tmp_path / "work.parts" / "member-0").exists()
