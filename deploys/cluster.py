"""pyinfra deploy: the node health check (Slurm HealthCheckProgram) and the metrics timer.

    pyinfra -y INVENTORY deploys/cluster.py

gpuhost must be installed on the nodes (the ``gpuhost`` command); docs/monitoring.md has the
slurm.conf lines, the metric names and example alert rules.
"""

from gpuhost.deploys.cluster import install_health_check, install_metrics_timer

install_health_check()
install_metrics_timer()
