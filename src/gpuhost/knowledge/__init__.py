"""Keeping gpuhost's data current (see docs/architecture.md, "Knowledge").

Reading the primary sources the shipped data is derived from: PyPI's JSON API and the wheels' core
metadata (:mod:`.pypi`, :mod:`.sync`), NVIDIA's CSAF security bulletins (:mod:`.csaf`), and the
maintainers' comparisons of the shipped files with them (:mod:`.maintain`).
"""
