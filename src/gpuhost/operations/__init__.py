"""pyinfra operations of gpuhost (one module per tool)."""
