"""A100 nodes (NVSwitch HGX boards run fabric manager at the driver's exact version)."""

gpuhost_profile = "nvidia-repo-550-cuda12.4"
gpuhost_gpus = ["NVIDIA A100-SXM4-80GB"]
gpuhost_fabric_manager = True  # profiles with fabric_manager: auto follow this
