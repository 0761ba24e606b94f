"""Consistency-training losses: stage 1 (ECT/iCT) and stage 2 (truncated, with boundary samples)."""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from scipy import special
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.generative.diffusion._checks import bcast, check_finite, check_float
from iclr25.generative.diffusion.precond import edm_coefficients

from .model import TruncatedCM
from .schedule import R_MIN, ECTSchedule

__all__ = [
    "ConsistencyTrainingLoss",
    "TruncatedConsistencyLoss",
    "pseudo_huber",
    "sample_truncated_log_student_t",
    "sample_truncated_lognormal",
]

WEIGHTINGS = ("inv_dt", "cout_sq", "one")


def pseudo_huber(a: torch.Tensor, b: torch.Tensor, c: float = 1e-8) -> torch.Tensor:
    """Per-sample sqrt(||a - b||^2 + c^2) - c over all non-batch dims; a, b: (B, ...) -> (B,).

    c -> 0 gives the L2 *norm* (not squared), the official CIFAR-10 setting.
    """
    check_float("a", a)
    check_float("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape (B, ...), got {tuple(a.shape)} and {tuple(b.shape)}")
    if not 0 <= c < math.inf:  # c = inf gave inf - inf = NaN for every row
        raise ValueError(f"c must be >= 0 and finite, got {c}")
    # explicit width: reshape(0, -1) is ambiguous and raised on an empty batch. At least float32:
    # in float16 c^2 = 1e-16 underflows to 0 (equal rows then get a NaN gradient) and the squared
    # sum overflows past 65504.
    work = compute_dtype(a, b)
    d2 = (a.to(work) - b.to(work)).reshape(a.shape[0], math.prod(a.shape[1:])).pow(2).sum(1)
    return ((d2 + c * c).sqrt() - c).to(torch.promote_types(a.dtype, b.dtype))


def _uniform(n: int, generator: torch.Generator | None, device: torch.device) -> np.ndarray:
    gen_dev = generator.device if generator is not None else torch.device("cpu")
    return torch.rand(n, generator=generator, device=gen_dev, dtype=torch.float64).cpu().numpy()


def _check_truncation(n: Any, t_min: float, t_max: float, location: tuple[str, float], **positive: float) -> None:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if not 0 < t_min < t_max < math.inf:
        raise ValueError(f"need 0 < t_min < t_max < inf, got t_min={t_min}, t_max={t_max}")
    # a NaN or infinite location made both interval ends NaN, and every draw NaN without an error
    if not math.isfinite(location[1]):
        raise ValueError(f"{location[0]} must be a finite float, got {location[1]}")
    for name, v in positive.items():
        if not 0 < v < math.inf:
            raise ValueError(f"{name} must be a finite float > 0, got {v}")


def _mirrored_inverse_cdf(
    cdf: Callable[[Any], Any], icdf: Callable[[Any], Any], lo: float, hi: float, u: np.ndarray
) -> np.ndarray:
    """z = icdf(cdf(lo) + u (cdf(hi) - cdf(lo))) for a law symmetric about 0, clipped to [lo, hi].

    An interval in the upper tail (lo > 0) is drawn as the negative of its mirror image: there
    cdf(lo) and cdf(hi) both round to 1 in float64 and every draw would land on a few values (or
    on hi), while the lower-tail probabilities keep full relative precision.
    """
    flip = lo > 0
    if flip:
        lo, hi = -hi, -lo
    flo, fhi = cdf(lo), cdf(hi)
    z = np.clip(icdf(flo + u * (fhi - flo)), lo, hi)
    return -z if flip else z


def sample_truncated_lognormal(
    n: int, mean: float, std: float, t_min: float, t_max: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(n,) float64 t with ln t ~ N(mean, std^2) truncated to [ln t_min, ln t_max] (exact inverse CDF)."""
    _check_truncation(n, t_min, t_max, ("mean", mean), std=std)
    lo, hi = (math.log(t_min) - mean) / std, (math.log(t_max) - mean) / std
    u = _uniform(n, generator, torch.device("cpu"))
    z = _mirrored_inverse_cdf(special.ndtr, special.ndtri, lo, hi, u)
    return torch.from_numpy(np.exp(mean + std * z))


def sample_truncated_log_student_t(
    n: int, df: float, loc: float, scale: float, t_min: float, t_max: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(n,) float64 t with ln t ~ Student-t(df, loc, scale) truncated to [ln t_min, ln t_max].

    Drawn exactly by inverse-CDF on the truncated interval (the same law as rejection sampling, and
    never clamping: with df = 0.01 almost all untruncated mass lies far outside the interval).
    """
    _check_truncation(n, t_min, t_max, ("loc", loc), df=df, scale=scale)
    lo, hi = (math.log(t_min) - loc) / scale, (math.log(t_max) - loc) / scale
    u = _uniform(n, generator, torch.device("cpu"))
    z = _mirrored_inverse_cdf(lambda x: special.stdtr(df, x), lambda p: special.stdtrit(df, p), lo, hi, u)
    return torch.from_numpy(np.exp(loc + scale * z))


@contextlib.contextmanager
def _same_rng(device: torch.device) -> Iterator[Callable[[], None]]:
    """Yield a function that rewinds the global RNG (CPU and, if used, CUDA) to its state on entry.

    Stage-1 and stage-2 targets must see the same dropout mask as the online pass.
    """
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def rewind() -> None:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)

    yield rewind


def _weight(kind: str, t: torch.Tensor, dt: torch.Tensor, sigma_data: float) -> torch.Tensor:
    if kind == "inv_dt":
        return 1 / dt
    if kind == "cout_sq":
        return 1 / edm_coefficients(t, sigma_data)[1] ** 2
    return torch.ones_like(t)


def _check_common(schedule: Any, c: float, weighting: str) -> None:
    if not isinstance(schedule, ECTSchedule):
        raise TypeError(f"schedule must be an ECTSchedule, got {type(schedule).__name__}")
    if not 0 <= c < math.inf:
        raise ValueError(f"c must be >= 0 and finite, got {c}")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


def _check_x0(x0: Any) -> torch.Tensor:
    check_float("x0", x0, 2)
    return check_finite("x0", x0)


def _check_override(
    name: str, v: Any, batch: int, dtype: torch.dtype | None = None, above: float | None = None
) -> None:
    """The ``t``/``boundary`` overrides of the losses: (B,) tensors (``boundary``: bool).

    ``above``: the values must be finite and > ``above``.
    """
    if not isinstance(v, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(v).__name__}")
    if tuple(v.shape) != (batch,):
        raise ValueError(f"{name} must have shape ({batch},) (one per x0 row), got {tuple(v.shape)}")
    if dtype is not None and v.dtype != dtype:
        raise TypeError(f"{name} expects dtype {dtype}, got {v.dtype}")
    if above is not None and v.numel() and not bool((torch.isfinite(v) & (v > above)).all()):
        bound = f" and > {above}" if above > -math.inf else ""
        raise ValueError(f"{name} must be finite{bound}, got min {float(v.min())}, max {float(v.max())}")


def _pair_loss(
    f: Callable[..., torch.Tensor],
    x0: torch.Tensor,
    t: torch.Tensor,
    r: torch.Tensor,
    cond: dict[str, Any],
    c: float,
    generator: torch.Generator | None,
    weighting: str,
    sigma_data: float,
) -> torch.Tensor:
    """w(t) d(f(x + t n, t), stopgrad f(x + r n, r)) with shared noise n and a shared dropout mask.

    ``t``, ``r``: (B,) levels in at least float32; returns (B,) in the network's output dtype.
    """
    n = torch.randn(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
    w = _weight(weighting, t, t - r, sigma_data)
    t, r = t.to(x0.dtype), r.to(x0.dtype)
    y_t, y_r = x0 + bcast(t, x0) * n, x0 + bcast(r, x0) * n
    with _same_rng(x0.device) as rewind:
        d_t = f(y_t, t, **cond)
        rewind()
        with torch.no_grad():
            d_r = torch.nan_to_num(f(y_r, r, **cond))
    out = torch.promote_types(d_t.dtype, d_r.dtype)
    # weight and distance meet in at least float32: at small t, 1/Delta_t (or 1/c_out^2) is far beyond
    # float16's 65504 while the distance is of order Delta_t, so only their product fits the network's
    # dtype (casting the weight first gave inf, and inf * 0 = NaN for rows whose outputs coincide)
    work = compute_dtype(d_t, d_r, w)
    return (w.to(work) * pseudo_huber(d_t.to(work), d_r.detach().to(work), c)).to(out)


class ConsistencyTrainingLoss(nn.Module):
    """Stage-1 consistency training (ECT, Geng et al. 2024; iCT distance, Song & Dhariwal 2023).

    ln t ~ N(P_mean, P_std^2) truncated to [t_min, t_max]; r = t - Delta_t(step); shared noise
    y_t = x + t n, y_r = x + r n; loss_b = w(t_b) d(f(y_t, t), stopgrad f(y_r, r)) with the same
    dropout mask for both passes, d the pseudo-Huber distance and w = 1/Delta_t (``"inv_dt"``),
    1/c_out(t)^2 (``"cout_sq"``) or 1 (``"one"``).

    Parameters
    ----------
    schedule: the :class:`ECTSchedule`.
    P_mean, P_std: log-normal of t (CIFAR-10: -1.1, 2.0).
    t_min, t_max: eps = 0.002 and T = 80 (t_min must exceed 1e-6, the floor of r).
    c: pseudo-Huber constant (1e-8 = L2 norm, CIFAR-10; 0.06 ImageNet 64).
    weighting: ``"inv_dt"`` (default), ``"cout_sq"`` or ``"one"``.
    sigma_data: for ``"cout_sq"``.
    """

    def __init__(
        self,
        schedule: ECTSchedule,
        P_mean: float = -1.1,
        P_std: float = 2.0,
        t_min: float = 0.002,
        t_max: float = 80.0,
        c: float = 1e-8,
        weighting: str = "inv_dt",
        sigma_data: float = 0.5,
    ) -> None:
        super().__init__()
        _check_common(schedule, c, weighting)
        # r is clipped to >= R_MIN, so levels t <= R_MIN would get Delta_t <= 0; infinite values were
        # accepted here and only failed at the first forward (P_std reported there as "std")
        if not R_MIN < t_min < t_max < math.inf:
            raise ValueError(f"need {R_MIN} < t_min < t_max < inf, got t_min={t_min}, t_max={t_max}")
        if not 0 < P_std < math.inf:
            raise ValueError(f"P_std must be a finite float > 0, got {P_std}")
        if not math.isfinite(P_mean):  # a NaN mean made every t NaN: a "non-finite loss" at step 0
            raise ValueError(f"P_mean must be a finite float, got {P_mean}")
        self.schedule, self.P_mean, self.P_std = schedule, float(P_mean), float(P_std)
        self.t_min, self.t_max, self.c, self.weighting, self.sigma_data = t_min, t_max, c, weighting, sigma_data

    def extra_repr(self) -> str:
        # the losses hold no tensors: without this every configuration prints as "ConsistencyTrainingLoss()"
        return (
            f"schedule={self.schedule}, P_mean={self.P_mean}, P_std={self.P_std}, t_min={self.t_min}, "
            f"t_max={self.t_max}, c={self.c}, weighting={self.weighting!r}, sigma_data={self.sigma_data}"
        )

    def sample_t(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """(n,) float64 noise levels from the truncated log-normal."""
        return sample_truncated_lognormal(n, self.P_mean, self.P_std, self.t_min, self.t_max, generator)

    def forward(
        self,
        denoiser: Callable[..., torch.Tensor],
        x0: torch.Tensor,
        step: int,
        cond: dict[str, Any] | None = None,
        generator: torch.Generator | None = None,
        t: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-sample loss (B,); x0: (B, ...) data; step: global iteration (sets the Delta_t stage).

        ``t`` (B,) overrides the sampled noise levels (for tests).
        """
        x0 = _check_x0(x0)
        if t is None:
            t = self.sample_t(x0.shape[0], generator)
        # r is clipped to >= R_MIN, so a level t <= R_MIN has Delta_t <= 0: a negative or infinite
        # weight, i.e. a loss that rewards inconsistency instead of an error
        _check_override("t", t, x0.shape[0], above=R_MIN)
        # late stages shrink Delta_t to ~0.1% of t: in float16/bfloat16 r rounds onto t and 1/Delta_t is
        # inf, so t, r and the weight are formed in at least float32 (the network still sees x0's dtype)
        t = t.to(x0.device, compute_dtype(x0))
        r = self.schedule.r(t, step)
        return _pair_loss(denoiser, x0, t, r, cond or {}, self.c, generator, self.weighting, self.sigma_data)


class TruncatedConsistencyLoss(nn.Module):
    """Stage-2 truncated consistency training (Lee et al. 2025, TCM).

    A fraction ``boundary_prob`` of the batch (chosen at random) sits at t = t' (routed to the
    student); its targets at r = t' - Delta_t < t' come from the frozen teacher: L_B. The rest has
    ln t ~ Student-t(df, loc, scale) truncated to [ln t', ln T] (or a truncated log-normal with
    ``t_dist="lognormal"``, an ablation) and targets stopgrad f_trunc(y_r, r): L_C.
    Total loss = mean(w d | consistency) + w_boundary * mean(w d | boundary).

    Parameters
    ----------
    schedule: the stage-1 :class:`ECTSchedule` (pass the *global* step: the stage counter continues).
    t_prime: dividing time t' (1.0); must lie in (t_min, t_max).
    boundary_prob: lambda_b, fraction of boundary samples, in [0, 1) (0.25).
    w_boundary: w_b, weight of the boundary loss (0.1).
    t_dist: ``"student_t"`` (paper) or ``"lognormal"``.
    df, loc, scale: Student-t of ln t (0.01, 0, 0.2); for ``"lognormal"`` loc/scale are mean/std.
    c, weighting, sigma_data: as in :class:`ConsistencyTrainingLoss`.
    t_min, t_max: eps and T.
    """

    def __init__(
        self,
        schedule: ECTSchedule,
        t_prime: float = 1.0,
        boundary_prob: float = 0.25,
        w_boundary: float = 0.1,
        t_dist: str = "student_t",
        df: float = 0.01,
        loc: float = 0.0,
        scale: float = 0.2,
        c: float = 1e-8,
        weighting: str = "inv_dt",
        t_min: float = 0.002,
        t_max: float = 80.0,
        sigma_data: float = 0.5,
    ) -> None:
        super().__init__()
        _check_common(schedule, c, weighting)
        # checked here as in ConsistencyTrainingLoss: infinite values used to pass and fail only at the
        # first forward (t_max, df, scale), or give an infinite loss (w_boundary)
        if not 0 < t_min < t_max < math.inf:
            raise ValueError(f"need 0 < t_min < t_max < inf, got t_min={t_min}, t_max={t_max}")
        if not (isinstance(t_prime, (int, float)) and t_min < t_prime < t_max):
            raise ValueError(f"t_prime must be in (t_min, t_max) = ({t_min}, {t_max}), got {t_prime!r}")
        if not 0 <= boundary_prob < 1:
            raise ValueError(f"boundary_prob must be in [0, 1), got {boundary_prob}")
        if not 0 <= w_boundary < math.inf:
            raise ValueError(f"w_boundary must be >= 0 and finite, got {w_boundary}")
        if t_dist not in ("student_t", "lognormal"):
            raise ValueError(f"t_dist must be 'student_t' or 'lognormal', got {t_dist!r}")
        if not (0 < df < math.inf and 0 < scale < math.inf):
            raise ValueError(f"df and scale must be finite and > 0, got df={df}, scale={scale}")
        if not math.isfinite(loc):
            raise ValueError(f"loc must be a finite float, got {loc}")
        self.schedule, self.t_prime, self.boundary_prob, self.w_boundary = (
            schedule,
            float(t_prime),
            boundary_prob,
            w_boundary,
        )
        self.t_dist, self.df, self.loc, self.scale = t_dist, df, loc, scale
        self.c, self.weighting, self.t_min, self.t_max, self.sigma_data = c, weighting, t_min, t_max, sigma_data

    def extra_repr(self) -> str:
        return (
            f"schedule={self.schedule}, t_prime={self.t_prime}, boundary_prob={self.boundary_prob}, "
            f"w_boundary={self.w_boundary}, t_dist={self.t_dist!r}, df={self.df}, loc={self.loc}, "
            f"scale={self.scale}, c={self.c}, weighting={self.weighting!r}, t_min={self.t_min}, "
            f"t_max={self.t_max}, sigma_data={self.sigma_data}"
        )

    def sample_t(self, n: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) float64 noise levels and the (n,) bool mask of boundary samples (t = t')."""
        if self.t_dist == "student_t":
            t = sample_truncated_log_student_t(n, self.df, self.loc, self.scale, self.t_prime, self.t_max, generator)
        else:
            t = sample_truncated_lognormal(n, self.loc, self.scale, self.t_prime, self.t_max, generator)
        gen_dev = generator.device if generator is not None else torch.device("cpu")
        perm = torch.randperm(n, generator=generator, device=gen_dev).cpu()
        boundary = torch.zeros(n, dtype=torch.bool)
        boundary[perm[: int(n * self.boundary_prob)]] = True
        return torch.where(boundary, torch.full_like(t, self.t_prime), t), boundary

    def forward(
        self,
        model: TruncatedCM,
        x0: torch.Tensor,
        step: int,
        cond: dict[str, Any] | None = None,
        generator: torch.Generator | None = None,
        t: torch.Tensor | None = None,
        boundary: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Stage-2 loss on a batch x0 (B, ...) at global iteration ``step``.

        ``t`` (B,) and ``boundary`` (B,) bool override the sampled levels (for tests); ``boundary``
        needs ``t`` and defaults to ``t <= t_prime``.

        Returns
        -------
        dict: ``loss`` (scalar to minimise), ``L_C`` and ``L_B`` (scalar means of the weighted
        consistency / boundary terms, 0 when empty), ``per_sample`` (B,) weighted distances and
        ``boundary`` (B,) bool mask.
        """
        if not isinstance(model, TruncatedCM):
            raise TypeError(f"model must be a TruncatedCM, got {type(model).__name__}")
        if abs(model.t_prime - self.t_prime) > 1e-12:
            raise ValueError(f"model.t_prime={model.t_prime} differs from the loss's t_prime={self.t_prime}")
        x0 = _check_x0(x0)
        if t is None:
            if boundary is not None:
                raise ValueError("boundary is only used together with t (pass both, or neither)")
            t, boundary = self.sample_t(x0.shape[0], generator)
        # t is clamped to >= t' below, so only NaN/inf levels are unusable; they used to be reported by
        # the model as a non-finite "x"
        _check_override("t", t, x0.shape[0], above=-math.inf)
        if boundary is None:
            boundary = t <= self.t_prime
        _check_override("boundary", boundary, x0.shape[0], torch.bool)
        t, boundary = t.to(x0.device, compute_dtype(x0)), boundary.to(x0.device)
        # float32 round-off must not send a boundary sample (t = t') to the teacher
        t = torch.where(boundary, torch.full_like(t, self.t_prime), t.clamp_min(self.t_prime))
        r = self.schedule.r(t, step)
        per = _pair_loss(model, x0, t, r, cond or {}, self.c, generator, self.weighting, self.sigma_data)
        zero = per.sum() * 0
        l_c = per[~boundary].mean() if bool((~boundary).any()) else zero
        l_b = per[boundary].mean() if bool(boundary.any()) else zero
        return {"loss": l_c + self.w_boundary * l_b, "L_C": l_c, "L_B": l_b, "per_sample": per, "boundary": boundary}
