"""docs/inventory.md, rendered from the contract (``gpuhost inventory render``)."""

from __future__ import annotations

from gpuhost.inventory.contract import KEYS

HEADER = """# Inventory data

<!-- generated from src/gpuhost/inventory/contract.py by `gpuhost inventory render`; do not edit -->

gpuhost reads plain pyinfra inventories (`inventories/` has commented examples): module-level
lists of host names, optionally `(name, {data})` tuples, `group_data/GROUP.py` files beside the
inventory (and in the current directory), like `pyinfra` itself. Every command loads them the
same way (`gpuhost.inventory.loader`) and checks every selected host's merged data against the
table below **before it contacts any host**; `gpuhost inventory check INVENTORY` does only that.

A problem is one line naming the file, the host, the key, what was found and what is expected,
and exit code 2:

    inventories/fleet.py: host n1: gpuhost_install_cuda: found 'no' (str), expected true or false

A value that came from a `group_data/` file beside the inventory names that file too
(`... expected true or false (set in inventories/group_data/gpu.py)`), and a `group_data/` file
that fails to load is named with its line.

What is refused:

- a value of the wrong type or outside the allowed values; booleans accept only `True`/`False`
  (not `"no"`, `"false"`, `0`); tuples count as lists; `None` means "not set" (the default);
- an unknown `gpuhost_` key (the message names the nearest known key), and an `ssh_` key that
  pyinfra's SSH connector does not read (a typo such as `ssh_hostnme`, which pyinfra would
  ignore); other keys are pyinfra's or yours and are left alone;
- contradictory values: `gpuhost_cuda_repo_key_sha256` without `gpuhost_cuda_repo_key`; and
  hardening that would lock gpuhost out: `gpuhost_ssh_permit_root_login: 'no'` with
  `ssh_user: 'root'`, `gpuhost_ssh_allow_users` not admitting `ssh_user`,
  `gpuhost_ssh_remove_unlisted_keys: True` without a key for `ssh_user` (harden checks the
  same against the user it really logs in as);
- a host listed twice in one group, or given different values for one key by two groups
  (pyinfra would silently keep one);
- a `gpuhost_profiles_file` that does not load;
- a `gpuhost_profile` that is not a known profile (provision, audit, check, upgrade, inventory
  check), and, where the profile installs from NVIDIA's CUDA repository, a host without
  `gpuhost_cuda_repo_url`, `gpuhost_cuda_repo_key` and `gpuhost_cuda_repo_key_sha256`
  (provision, upgrade `--to` such a profile, inventory check);
- an inventory file that is missing, raises, calls `sys.exit`, or has no hosts.

`--limit` means the same in every command: comma-separated items (the option may be repeated),
each a group name or a glob over host names (case-sensitive); an item matching nothing is an
error; the hosts keep inventory order. `--profiles FILE` on the command line takes the place of
every host's `gpuhost_profiles_file`.

| key | expected | default | used by | meaning |
|---|---|---|---|---|
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown() -> str:
    rows = []
    for key in KEYS.values():
        default = "not set" if key.default is None else f"`{key.default!r}`"
        rows.append(
            f"| `{key.name}` | {_cell(key.expected)} | {_cell(default)} | {key.used_by} | "
            f"{_cell(key.meaning)} |"
        )
    return HEADER + "\n".join(rows) + "\n"
