"""gpuhost: known-good, pinned, validated NVIDIA GPU servers."""

__version__ = "0.1.0"
