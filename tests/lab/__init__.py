"""The gpuhost test lab: disposable Debian 12 servers booted with systemd-nspawn (some shaped
like another OS: shapes).

Modules:
  config     names, paths and environment variables of one lab
  system     small helpers around processes, locks, mounts, cgroups and network links
  image      the debootstrap base image, cached as a zstd tarball keyed by its recipe
  registry   machine-wide state shared by all labs (subnets, blackhole route, inotify limit)
  aptrepo    the local APT repository laid out like NVIDIA's CUDA repository (empty stand-ins)
  shapes     OS shapes of hosts (lab up --os): the registry; shape_ubuntu (Ubuntu 22.04/24.04 on
             the Debian base, a stand-in Ubuntu archive), nvidia_ubuntu (NVIDIA's ubuntu2204/2404)
  core       bring a lab up, tear it down, report its health, reset one host
  toolfiles  inventory.py, ssh_config and known_hosts for pyinfra, testinfra and ssh
  cli        the ``tests/lab/lab`` command
  aptstress  many hosts running ``apt-get update`` at once through the lab's proxy, repeatedly
  plugin     pytest fixtures (see docs/testing.md)

Only the standard library is used outside ``plugin`` so that ``tests/lab/lab`` runs with the system
python3 as root.
"""
