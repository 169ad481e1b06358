"""Import TensorFlow once, without the CUDA probe lines its wheel prints on a machine without a GPU.

TensorFlow Probability (the posterior sampler) needs ``tf-keras``, which depends on the full
``tensorflow`` wheel, so that wheel (CPU and CUDA in one build) is the project's TensorFlow.
On a machine without a CUDA driver it writes three lines to the process's standard error from
C++ (absl logging, before any log level applies: ``TF_CPP_MIN_LOG_LEVEL`` does not reach them):
``Could not find cuda drivers on your machine, GPU will not be used``, the absl preamble before
it, and ``failed call to cuInit`` when the devices are first listed. :func:`import_tensorflow`
imports TensorFlow and lists the devices with file descriptor 2 captured, then writes back every
captured line except those, so any other message (a real error, a warning) still reaches the user.
On a machine with a GPU none of these lines is printed and nothing is dropped.
"""
from __future__ import annotations

import os
import sys
import tempfile
from types import ModuleType

#: Substrings of the lines the CUDA-enabled wheel prints when it finds no CUDA driver.
CUDA_ABSENT_MARKERS = (
    "All log messages before absl::InitializeLog() is called are written to STDERR",
    "cudart_stub.cc",
    "failed call to cuInit",
)


def import_tensorflow() -> ModuleType:
    """Import TensorFlow (once per process) and list its devices, without the CUDA-absent probe lines.

    Returns
    -------
    module
        The ``tensorflow`` module.
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # the CUDA driver probe runs here, inside the capture
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        for line in capture.read().decode(errors="replace").splitlines(keepends=True):
            if not any(marker in line for marker in CUDA_ABSENT_MARKERS):
                sys.stderr.write(line)
    return tf
