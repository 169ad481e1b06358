"""CF-style labeled datasets: building, provenance, atomic writes with checksum records, reading by name.

Every workflow writes its results through this package, so every file shares one contract (see the
dataset contract in the documentation): integer index dims with names as non-dimension coordinates,
``long_name`` and ``units`` on every variable, and global attributes recording where the numbers came
from. Writes are atomic (a temporary file renamed into place; a full disk is a one-line error). Long
computations write verified, resumable parts through :mod:`sensitivity.store.parts`, so a kill loses no
finished work and a partial result is never mistaken for a complete one.

* :mod:`.build`: datasets from arrays (the sweep's layout, Jacobian units, a stored output's description);
* :mod:`.provenance`: the global attributes every result records;
* :mod:`.settings`: the library settings a result records, and :func:`settings_of`, the one reader of them;
* :mod:`.write`: atomic writers and SHA-256 checksum records;
* :mod:`.read`: opening results with name indexes, selecting by name, reading estimates, priors and draws.
"""
from __future__ import annotations

from sensitivity.datasets.build import (flat_sweep_block, index_string_dims, jacobian_units, output_spec_from,
                                        sample_dtype, samples_dataset, sweep_dataset)
from sensitivity.datasets.provenance import CONVENTIONS, content_hash, provenance
from sensitivity.datasets.read import (Draws, Estimate, by_name, open_result, read_draws, read_estimate, read_prior,
                                       select)
from sensitivity.datasets.settings import settings_of
from sensitivity.datasets.write import (ENCODING_ENGINE, check_disk_space, checksum_path, copy_atomic, record_checksum,
                                        verify_checksum, write_atomic, write_bytes_atomic, write_directory_atomic,
                                        write_text_atomic)

__all__ = [
    "CONVENTIONS", "ENCODING_ENGINE", "Draws", "check_disk_space", "Estimate", "by_name", "checksum_path", "content_hash", "copy_atomic",
    "flat_sweep_block", "index_string_dims", "jacobian_units", "open_result", "output_spec_from", "provenance",
    "read_draws", "read_estimate", "read_prior", "record_checksum", "sample_dtype", "samples_dataset", "select",
    "settings_of", "sweep_dataset",
    "verify_checksum", "write_atomic", "write_bytes_atomic", "write_directory_atomic", "write_text_atomic",
]
