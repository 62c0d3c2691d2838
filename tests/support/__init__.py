"""Harnesses shared by the tests and the benchmarks: real processes on loopback, the os-ken oracle.

They live here, not in the shipped packages, so that no installed module can start test clusters."""
