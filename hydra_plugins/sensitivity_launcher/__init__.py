"""Hydra launcher ``hydra/launcher=local`` of the ``sensitivity`` application (see :mod:`.launcher`)."""
