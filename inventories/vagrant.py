"""The Vagrantfile's machines through pyinfra's @vagrant connector (no GPU in them: the
driver installs, nvidia-smi reports that no driver is loaded).

    vagrant up && gpuhost provision inventories/vagrant.py --dry
"""

debian12 = [("@vagrant/debian12", {"gpuhost_profile": "debian12-nonfree-535-security"})]
ubuntu2204 = [("@vagrant/ubuntu2204", {"gpuhost_profile": "nvidia-repo-580-cuda12.9"})]
