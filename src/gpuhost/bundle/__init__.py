"""Offline bundles: a profile's complete package set as a signed flat apt repository.

Pure parts only (layer 3): ``debfile`` reads a ``.deb``'s control fields, ``aptrepo`` writes the
repository's indexes (``Packages``, ``Packages.gz``, ``Release``) and signs them with gpg,
``manifest`` is the bundle's ``manifest.json`` (package, exact version, sha256, size) with its
checks, ``printuris`` parses ``apt-get install --print-uris``, ``setting`` reads the inventory's
``gpuhost_bundle``. Making a bundle from a reference host is ``gpuhost.bundle_make`` (it needs
the inventory, SSH and the deploys' package plan); using one is ``gpuhost.deploys.offline``.
"""
