"""Which GPU is this: the one GPU catalog (``data/gpu_catalog.yaml``, generated from the PCI ID
database and NVIDIA's CUDA GPU tables) and the one name matcher (``names``)."""
