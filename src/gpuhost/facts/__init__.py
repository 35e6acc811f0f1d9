"""pyinfra facts of gpuhost (one module per tool)."""
