"""A progress bar that does not garble the log: tqdm on stderr inside ``logging_redirect_tqdm``."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def progress_bar(total: int, *, desc: str, unit: str, enabled: bool = True, initial: int = 0) -> Iterator:
    """A ``tqdm`` bar of ``total`` ``unit`` (scaled: 1.02k) while log lines print above it; disabled, it draws
    nothing and its ``update`` does nothing."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(), tqdm(total=total, initial=initial, unit=unit, unit_scale=True, disable=not enabled,
                                       desc=desc, file=sys.stderr) as bar:
        yield bar
