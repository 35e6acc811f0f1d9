"""A100 nodes (NVSwitch HGX boards run fabric manager at the driver's exact version)."""

gpuhost_profile = "nvidia-repo-580-cuda12.9"  # R580 long-term support branch
gpuhost_gpus = ["NVIDIA A100-SXM4-80GB"]
gpuhost_fabric_manager = True  # profiles with fabric_manager: auto follow this
