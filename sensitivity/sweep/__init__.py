"""Designs and sweeps: grids, points from files, the streaming sweep, stored sweeps and their merge."""
