"""Defaults for every host."""

ssh_user = "root"

# Provision also hardens SSH (keys only, modern algorithms) on every host unless this is False;
# it refuses to, changing nothing, where the login user has no authorized key (docs/harden.md).
gpuhost_harden = True

# /etc/profile.d/gpuhost.sh on every host
gpuhost_env = {
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_IB_DISABLE": 1,
    "OMP_NUM_THREADS": 8,
}

# NVIDIA's CUDA repository, for profiles with source nvidia-cuda-repo. The key's SHA-256 is
# checked on the controller before the key reaches a host; fill in the value you verified.
gpuhost_cuda_repo_url = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
gpuhost_cuda_repo_key = gpuhost_cuda_repo_url + "3bf863cc.pub"
gpuhost_cuda_repo_key_sha256 = None  # must be provided: sha256sum of the key you trust
