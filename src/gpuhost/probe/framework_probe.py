"""The inline Python the probe runs in each named interpreter to read framework builds.

It prints ONE JSON line (read by :func:`gpuhost.parsers.frameworks.parse_torch_probe` and
:func:`gpuhost.facts.build.framework_from_probe`). It never initialises CUDA: the probe runs it with
``CUDA_VISIBLE_DEVICES=`` (no device can be opened even by accident), reads torch's compiled-in
architecture list through ``torch._C._cuda_getArchFlags`` instead of ``torch.cuda.get_arch_list()``
(which calls ``is_available()`` first) and records ``torch.cuda.is_initialized()`` after the reads
so a test can check that nothing initialised CUDA. Nothing here runs a GPU kernel.

Shape of the line (flat torch keys, as :func:`~gpuhost.parsers.frameworks.parse_torch_probe` reads
them; every key always present, null when unknown or not installed)::

    {"gpuhost_probe": 1, "python": "/usr/bin/python3", "python_version": "3.11.2",
     "torch": "2.3.1+cu121", "cuda": "12.1", "cudnn": 8902, "arch_list": ["sm_80", "sm_90"],
     "cuda_initialized": false, "error": null,
     "tensorflow": {"version": "2.16.1", "build_info": {"cuda_version": "12.3", ...}} | null,
     "tensorflow_error": null}

``error`` is torch's import error; ``torch`` is null when torch is not installed.
"""

from __future__ import annotations

# Kept to plain Python 3.6+ syntax: it runs in whatever interpreter the inventory names.
PYTHON_PROBE = r"""
import json, sys
try:
    import importlib.util as _u
    _find = _u.find_spec
except Exception:
    _find = None
out = {"gpuhost_probe": 1, "python": sys.executable,
       "python_version": "%d.%d.%d" % sys.version_info[:3],
       "torch": None, "cuda": None, "cudnn": None, "arch_list": [], "cuda_initialized": None,
       "error": None, "tensorflow": None, "tensorflow_error": None}
def _err(e):
    return ("%s: %s" % (type(e).__name__, e))[:300]
def _has(name):
    try:
        return _find is not None and _find(name) is not None
    except Exception:
        return False
if _has("torch"):
    try:
        import torch
        out["torch"] = str(torch.__version__)
        out["cuda"] = getattr(torch.version, "cuda", None)
        try:
            out["cudnn"] = torch.backends.cudnn.version()
        except Exception as e:
            out["cudnn_error"] = _err(e)
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        if flags is not None:
            value = flags()
            out["arch_list"] = value.split() if value else []
        out["cuda_initialized"] = bool(torch.cuda.is_initialized())
    except Exception as e:
        out["error"] = _err(e)
if _has("tensorflow"):
    try:
        import tensorflow as tf
        info = dict(tf.sysconfig.get_build_info())
        out["tensorflow"] = {"version": str(tf.__version__),
                             "build_info": dict((str(k), str(v)) for k, v in info.items())}
    except Exception as e:
        out["tensorflow_error"] = _err(e)
sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
"""
