"""T4 inference nodes: the R580 driver (Turing is supported by CUDA 13.0) and the container
toolkit; no CUDA toolkit on the host."""

gpuhost_profile = "nvidia-repo-580-cuda13.0"
gpuhost_gpus = ["Tesla T4"]
gpuhost_install_cuda = False  # the driver only; CUDA comes with the containers
