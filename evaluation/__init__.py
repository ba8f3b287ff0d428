"""Measured draft quality: corpus split, cursor positions, metrics, runs, sweep and report."""
