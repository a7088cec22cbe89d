"""Packaging beyond what pyproject.toml can say: the folders `workers/` and `shm/` (the design
card's layout) install as `dali_lite_workers` and `dali_lite_shm`, so that a user's own
`workers.py` or `shm/` beside their script can never shadow them. Everything else about the
distribution is in pyproject.toml."""

from setuptools import find_packages, setup

INSTALLED_AS = {"dali_lite_workers": "workers", "dali_lite_shm": "shm"}

setup(
    packages=[*find_packages(include=["dali_lite", "dali_lite.*"]), *INSTALLED_AS],
    package_dir=INSTALLED_AS,
)
