"""The profiles that left the built-ins (tests/data/old_profiles.yaml: debian12-nonfree-535 with
Debian bookworm's 535.261.03, nvidia-repo-550-cuda12.4): pass OLD_PROFILES as
``gpuhost_profiles_file`` / ``--profiles`` / ``load_profiles(OLD_PROFILES)``."""

from pathlib import Path

OLD_PROFILES = str(Path(__file__).resolve().parent / "data" / "old_profiles.yaml")
