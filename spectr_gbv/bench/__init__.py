"""Benchmarks: numbers, not timed tests."""
