"""Judging a smoke-test result against what the host should be.

``judge(result, expectations)`` turns the script's document (a dict, or an already parsed
:class:`SmokeResult`) into one :class:`Verdict` per check. It never invents a number: performance
is compared only with the references passed in :class:`Expectations` (from the matrix data); a
GPU model without a reference gets PASS with its measured numbers and "no reference for <model>".

Rules on top of the script's own outcomes (a script FAIL always stays FAIL):
- correctness checks (matmul, conv, autocast) FAIL when their error exceeds their tolerance;
- ``arch_supported`` is re-derived from the wheel's arch list and the GPU's compute capability;
- ``cuda_driver_compat`` FAILs when the framework's CUDA is newer than the driver's CUDA
  (``Expectations.driver_max_cuda`` when given, else what nvidia-smi reported);
- ``device_count`` / the host's GPU count FAIL when they differ from ``Expectations.gpu_count``;
- perf checks (matmul TFLOP/s, H2D/D2H bandwidth, NCCL bus bandwidth) FAIL below the required
  fraction of the model's published peak;
- a framework that is not installed is one COULD-NOT-RUN verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuhost.errors import ConfigError
from gpuhost.gpus.names import sku_key
from gpuhost.smoke.result import Check, FrameworkResult, SmokeResult, parse_result
from gpuhost.smoke.script import COULD_NOT_RUN, FAIL, PASS, arch_supports, version_tuple

HOST = "host"

# check name -> (reference metric key, number key in the check, unit)
PERF_METRICS: Mapping[str, tuple[str, str, str]] = {
    "matmul_tflops": ("matmul_tflops_fp16", "tflops", "TFLOP/s"),
    "h2d_bandwidth": ("h2d_gbps", "gbps", "GB/s"),
    "d2h_bandwidth": ("d2h_gbps", "gbps", "GB/s"),
    "nccl_allreduce": ("nccl_busbw_gbps", "busbw_gbps", "GB/s"),
}
CORRECTNESS_CHECKS = frozenset(
    {"matmul_correct", "cudnn_conv", "autocast_fp16", "autocast_bf16", "matmul_on_gpu"}
)


@dataclass(frozen=True)
class PerfReference:
    """A published peak for one metric of one GPU model, with where the number comes from.

    ``min_ratio`` (0 < r <= 1) is the fraction of ``peak`` a healthy GPU must reach; when None,
    ``Expectations.min_ratio`` applies.
    """

    peak: float
    source: str
    min_ratio: float | None = None


@dataclass(frozen=True)
class Expectations:
    """What the host should show, from inventory and matrix data (nothing here is a default fact).

    - ``gpu_count``: GPUs the host must have (None: not checked).
    - ``references``: GPU model name (as nvidia-smi/torch print it, e.g. "NVIDIA H100 80GB HBM3";
      matched as SKUs by gpuhost.gpus.names.sku_key) -> metric -> :class:`PerfReference`. Metrics:
      ``matmul_tflops_fp16``, ``h2d_gbps``, ``d2h_gbps``, ``nccl_busbw_gbps``.
    - ``min_ratio``: required fraction of a peak where the reference carries none.
    - ``driver_max_cuda``: the newest CUDA the installed driver supports (e.g. "12.4").
    """

    gpu_count: int | None = None
    references: Mapping[str, Mapping[str, PerfReference]] = field(default_factory=dict)
    min_ratio: float | None = None
    driver_max_cuda: str | None = None

    def __post_init__(self) -> None:
        if self.gpu_count is not None and (isinstance(self.gpu_count, bool) or self.gpu_count < 0):
            raise ConfigError(f"expected GPU count: found {self.gpu_count!r}, expected >= 0")
        ratios = [("min_ratio", self.min_ratio)] + [
            (f"references[{model!r}][{metric!r}].min_ratio", ref.min_ratio)
            for model, metrics in self.references.items()
            for metric, ref in metrics.items()
        ]
        for where, ratio in ratios:
            if ratio is not None and not 0 < ratio <= 1:
                raise ConfigError(f"{where}: found {ratio!r}, expected a fraction in (0, 1]")
        for model, metrics in self.references.items():
            for metric, ref in metrics.items():
                if metric not in {m for m, _, _ in PERF_METRICS.values()}:
                    raise ConfigError(
                        f"references[{model!r}]: unknown metric {metric!r}, expected one of "
                        + ", ".join(sorted(m for m, _, _ in PERF_METRICS.values()))
                    )
                if not ref.peak > 0:
                    raise ConfigError(
                        f"references[{model!r}][{metric!r}].peak: found {ref.peak!r}, "
                        "expected a positive number"
                    )
        if self.driver_max_cuda is not None and version_tuple(self.driver_max_cuda) is None:
            raise ConfigError(
                f"driver_max_cuda: found {self.driver_max_cuda!r}, expected a version like 12.4"
            )

    def reference(self, model: str | None, metric: str) -> PerfReference | None:
        if model is None:
            return None
        wanted = sku_key(model)
        for name, metrics in self.references.items():
            if sku_key(name) == wanted:
                return metrics.get(metric)
        return None


@dataclass(frozen=True)
class Verdict:
    """The judged outcome of one check: PASS, FAIL or COULD-NOT-RUN, with a message for people."""

    framework: str  # "torch", "tensorflow", or "host"
    check: str
    outcome: str
    message: str
    device: int | None = None
    measured: float | None = None
    expected: float | None = None
    ratio: float | None = None

    @property
    def id(self) -> str:
        where = "" if self.device is None else f"[gpu{self.device}]"
        return f"{self.framework}.{self.check}{where}"


def judge(result: Mapping[str, object] | SmokeResult, expectations: Expectations) -> list[Verdict]:
    """One verdict per host-level fact and per check of every framework in ``result``."""
    parsed = result if isinstance(result, SmokeResult) else parse_result(result)
    verdicts = _host_verdicts(parsed, expectations)
    for framework in parsed.frameworks.values():
        verdicts.extend(_framework_verdicts(parsed, framework, expectations))
    return verdicts


def gpu_names(result: SmokeResult) -> list[str]:
    """Every GPU name the result shows (nvidia-smi's and each framework's), first seen first."""
    names = [g.name for g in result.gpus]
    names += [d.name for fw in result.frameworks.values() for d in fw.devices]
    return list(dict.fromkeys(names))


def has_failures(verdicts: Iterable[Verdict]) -> bool:
    return any(v.outcome == FAIL for v in verdicts)


def _host_verdicts(result: SmokeResult, exp: Expectations) -> list[Verdict]:
    count = len(result.gpus)
    if not result.smi_available:
        outcome = FAIL if exp.gpu_count else COULD_NOT_RUN
        wanted = f"; {exp.gpu_count} GPU(s) expected" if exp.gpu_count else ""
        return [Verdict(HOST, "nvidia_smi", outcome, f"{result.smi_reason}{wanted}")]
    driver = result.driver_version or "unknown"
    cuda = result.driver_cuda or "unknown"
    verdicts = [
        Verdict(
            HOST,
            "nvidia_smi",
            PASS,
            f"nvidia-smi lists {count} GPU(s); driver {driver}, driver CUDA {cuda}",
        )
    ]
    if exp.gpu_count is not None:
        names = ", ".join(g.name for g in result.gpus) or "none"
        if count == exp.gpu_count:
            verdicts.append(
                Verdict(HOST, "gpu_count", PASS, f"{count} GPU(s) as expected ({names})")
            )
        else:
            verdicts.append(
                Verdict(
                    HOST,
                    "gpu_count",
                    FAIL,
                    f"nvidia-smi lists {count} GPU(s) ({names}), expected {exp.gpu_count}",
                    measured=float(count),
                    expected=float(exp.gpu_count),
                )
            )
    return verdicts


def _framework_verdicts(
    result: SmokeResult, fw: FrameworkResult, exp: Expectations
) -> list[Verdict]:
    if not fw.installed:
        import_check = next((c for c in fw.checks if c.name == "import"), None)
        reason = import_check.reason if import_check else fw.reason
        return [Verdict(fw.name, "import", COULD_NOT_RUN, reason or f"{fw.name} is not installed")]
    verdicts: list[Verdict] = []
    compat_done = False
    for check in fw.checks:
        if check.name == "cuda_driver_compat":
            verdicts.append(_cuda_compat(result, fw, exp, check))
            compat_done = True
        elif check.name == "arch_supported" and check.device is not None:
            verdicts.append(_arch(fw, check))
        elif check.name in CORRECTNESS_CHECKS:
            verdicts.append(_correctness(fw, check))
        elif check.name in PERF_METRICS and check.outcome == PASS:
            verdicts.append(_perf(result, fw, check, exp))
        elif check.name in ("cuda_available", "gpus_listed") and check.outcome == COULD_NOT_RUN:
            verdicts.append(_gpus_expected(fw, check, exp))
        elif check.name in ("device_count", "gpus_listed") and check.outcome != COULD_NOT_RUN:
            verdicts.append(_device_count(fw, check, exp))
        else:
            verdicts.append(_as_reported(fw, check))
    if not compat_done and fw.cuda is not None:
        verdicts.append(_cuda_compat(result, fw, exp, None))
    return verdicts


def _as_reported(fw: FrameworkResult, check: Check) -> Verdict:
    return Verdict(fw.name, check.name, check.outcome, check.reason, check.device)


def _cuda_compat(
    result: SmokeResult, fw: FrameworkResult, exp: Expectations, check: Check | None
) -> Verdict:
    name = "cuda_driver_compat"
    driver_cuda = exp.driver_max_cuda or result.driver_cuda
    origin = "the driver's (expected)" if exp.driver_max_cuda else "the driver's (nvidia-smi)"
    if fw.cuda is None:
        reason = check.reason if check else f"{fw.name} {fw.version} is a CPU-only build"
        return Verdict(fw.name, name, check.outcome if check else COULD_NOT_RUN, reason)
    if driver_cuda is None:
        why = result.smi_reason if not result.smi_available else "nvidia-smi showed no CUDA Version"
        return Verdict(
            fw.name,
            name,
            COULD_NOT_RUN,
            f"{fw.name} is built for CUDA {fw.cuda}; the driver's CUDA is unknown: {why}",
        )
    wheel_t, driver_t = version_tuple(fw.cuda), version_tuple(driver_cuda)
    if wheel_t is None or driver_t is None:
        return Verdict(
            fw.name, name, FAIL, f"cannot compare CUDA versions {fw.cuda!r} and {driver_cuda!r}"
        )
    if wheel_t[:2] > driver_t[:2]:
        return Verdict(
            fw.name,
            name,
            FAIL,
            f"{fw.name} {fw.version} is built for CUDA {fw.cuda}, newer than {origin} CUDA "
            f"{driver_cuda}: upgrade the driver or install a build for CUDA <= {driver_cuda}",
        )
    return Verdict(
        fw.name,
        name,
        PASS,
        f"{fw.name} {fw.version} is built for CUDA {fw.cuda} <= {origin} CUDA {driver_cuda}",
    )


def _arch(fw: FrameworkResult, check: Check) -> Verdict:
    device = fw.device(check.device)
    capability = device.capability if device else None
    if capability is None and isinstance(check.value, Mapping):
        raw = check.value.get("capability")
        capability = raw if isinstance(raw, str) else None
    if capability is None:
        return _as_reported(fw, check)
    ok, how = arch_supports(list(fw.arch_list), capability)
    model = device.name if device else f"GPU {check.device}"
    if ok and check.outcome != FAIL:
        return Verdict(fw.name, check.name, PASS, f"{model} (cc {capability}): {how}", check.device)
    if ok:  # the script saw a failure the arch list does not explain: keep it
        return _as_reported(fw, check)
    return Verdict(
        fw.name,
        check.name,
        FAIL,
        f"{model} has compute capability {capability}; {fw.name} {fw.version} has no kernels for "
        f"it: {how}. Install a build whose arch list includes sm_{capability.replace('.', '')}",
        check.device,
    )


def _correctness(fw: FrameworkResult, check: Check) -> Verdict:
    error = check.number("max_rel_error")
    tolerance = check.number("tolerance")
    if check.outcome == PASS and error is not None and tolerance is not None and error > tolerance:
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"wrong result: relative error {error:.3g} exceeds the tolerance {tolerance:.3g} "
            f"({check.reason})",
            check.device,
            measured=error,
            expected=tolerance,
        )
    if check.outcome == PASS and (error is None or tolerance is None):
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"reported PASS without its error and tolerance numbers ({check.reason})",
            check.device,
        )
    return Verdict(
        fw.name,
        check.name,
        check.outcome,
        check.reason,
        check.device,
        measured=error,
        expected=tolerance,
    )


def _model_of(result: SmokeResult, fw: FrameworkResult, device: int | None) -> str | None:
    if device is None:  # the all-reduce: one model if every GPU is the same
        names = {d.name for d in fw.devices} or {g.name for g in result.gpus}
        return names.pop() if len(names) == 1 else None
    found = fw.device(device)
    if found is not None:
        return found.name
    smi = next((g for g in result.gpus if g.index == device), None)
    return smi.name if smi else None


def _perf(result: SmokeResult, fw: FrameworkResult, check: Check, exp: Expectations) -> Verdict:
    metric, key, unit = PERF_METRICS[check.name]
    measured = check.number(key)
    if measured is None:
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"reported PASS without the measured {key} ({check.reason})",
            check.device,
        )
    model = _model_of(result, fw, check.device)
    ref = exp.reference(model, metric)
    shown = f"measured {measured:.1f} {unit}"
    if ref is None:
        label = model if model is not None else "these GPUs (mixed models)"
        return Verdict(
            fw.name,
            check.name,
            PASS,
            f"{shown}; no reference for {label} ({metric})",
            check.device,
            measured=measured,
        )
    ratio = measured / ref.peak
    head = (
        f"{shown} = {ratio:.2f} of the {ref.peak:g} {unit} published peak for {model} "
        f"(source: {ref.source})"
    )
    required = ref.min_ratio if ref.min_ratio is not None else exp.min_ratio
    if required is None:
        return Verdict(
            fw.name,
            check.name,
            PASS,
            f"{head}; no required fraction given",
            check.device,
            measured=measured,
            expected=ref.peak,
            ratio=ratio,
        )
    if ratio < required:
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"too slow: {head}; at least {required:.2f} ({required * ref.peak:.1f} {unit}) "
            "required",
            check.device,
            measured=measured,
            expected=required * ref.peak,
            ratio=ratio,
        )
    return Verdict(
        fw.name,
        check.name,
        PASS,
        f"{head}; at least {required:.2f} required",
        check.device,
        measured=measured,
        expected=required * ref.peak,
        ratio=ratio,
    )


def _device_count(fw: FrameworkResult, check: Check, exp: Expectations) -> Verdict:
    seen = check.value
    if exp.gpu_count is None or isinstance(seen, bool) or not isinstance(seen, int):
        return _as_reported(fw, check)
    if seen != exp.gpu_count:
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"{fw.name} sees {seen} GPU(s), expected {exp.gpu_count} ({check.reason})",
            measured=float(seen),
            expected=float(exp.gpu_count),
        )
    return _as_reported(fw, check)


def _gpus_expected(fw: FrameworkResult, check: Check, exp: Expectations) -> Verdict:
    """No usable GPU is only 'could not run' where no GPU is expected; otherwise it is a FAIL."""
    if exp.gpu_count:
        return Verdict(
            fw.name,
            check.name,
            FAIL,
            f"{exp.gpu_count} GPU(s) expected but {fw.name} cannot use any: {check.reason}",
            check.device,
        )
    return _as_reported(fw, check)
