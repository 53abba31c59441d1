"""Cluster, termination and interruption tests on the API emulator (a package: its conftest is its own)."""
