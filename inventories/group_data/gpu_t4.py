"""T4 inference nodes: the Debian archive's driver, no container toolkit."""

gpuhost_profile = "debian12-nonfree-535"
gpuhost_gpus = ["Tesla T4"]
gpuhost_install_cuda = False  # the driver only; CUDA comes with the containers
