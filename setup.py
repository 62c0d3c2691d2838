"""Build shim: only cffi_modules lives here; all metadata is in pyproject.toml.

setuptools has no pyproject.toml key for cffi's ``cffi_modules``, so the
extension that compiles fastpath/csrc into ``fastpath._native`` is declared here.
"""

from setuptools import setup

setup(cffi_modules=["fastpath/_build.py:ffibuilder"])
