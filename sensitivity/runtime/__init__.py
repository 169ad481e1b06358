"""Runtime services every wing may use: deferred imports, TensorFlow's quiet import, progress bars."""
