"""Property tests of the TCM mathematics, derived from the paper's definitions (not from the code's output).

* the consistency-training pair (y_t, y_r) is one Euler step of the probability-flow ODE with the
  single-sample score, and the target pass is a stop-gradient pass (Song et al. 2023, Thm. 2);
* with the 1/Delta_t weighting and c = 0 the per-sample loss is the norm of a difference quotient of
  f along the noising line, so it equals ||d/ds f(x0 + s n, s)|| at the midpoint for any f that is
  quadratic along that line (computed independently by autodiff);
* the pseudo-Huber distance makes the loss invariant to rotations and shifts of the network output
  and jointly homogeneous in (output scale, c);
* the ECT Delta_t schedule for any (q, k, ratio_limit): bounds, closed form, monotone in the stage;
* TCM's trivial solution: a constant student is exactly self-consistent; only the boundary (teacher)
  targets penalise it, by ||a - b|| / Delta_t;
* the stage-2 loss depends on the student only on [t', T] and on the teacher only below t' (it is a
  functional of f_trunc).

All arithmetic is float64; tolerances are float64 round-off bounds (unit round-off 2^-53 times the
magnitudes involved, divided by Delta_t where the loss divides a difference by it).
"""

from __future__ import annotations

import math

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch import nn

from iclr25.generative.tcm import ConsistencyTrainingLoss, ECTSchedule, TruncatedCM, TruncatedConsistencyLoss

F64 = torch.float64
EPS = 2.0**-52  # float64 machine epsilon
T_MIN, T_MAX, T_PRIME = 0.002, 80.0, 1.0
SETTINGS = settings(derandomize=True, max_examples=30, deadline=None)

log_t = st.floats(math.log(T_MIN), math.log(T_MAX))
log_t_trunc = st.floats(math.log(T_PRIME), math.log(T_MAX))


def paper_r(t: torch.Tensor, step: int, q: float, every: int, limit: float, k: float = 8.0) -> torch.Tensor:
    """r = max(t - Delta_t, 1e-6), Delta_t = t (1 - ratio)(1 + k sigmoid(-t)), ratio = min(1 - q^-(stage+1), limit)."""
    ratio = min(1.0 - q ** -(step // every + 1), limit)
    return (t - t * (1 - ratio) * (1 + k * torch.sigmoid(-t))).clamp_min(1e-6)


class TanhNet(nn.Module):
    """A generic smooth nonlinear f(x, t): R^D x R+ -> R^D with fixed random float64 weights."""

    def __init__(self, dim: int, seed: int, hidden: int = 8) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(dim, hidden, generator=g, dtype=F64))
        self.v = nn.Parameter(torch.randn(hidden, generator=g, dtype=F64))
        self.b1 = nn.Parameter(torch.randn(hidden, generator=g, dtype=F64))
        self.w2 = nn.Parameter(torch.randn(hidden, dim, generator=g, dtype=F64) / math.sqrt(hidden))
        self.u = nn.Parameter(torch.randn(dim, generator=g, dtype=F64))

    def forward(self, x, t, **_):
        h = torch.tanh(x @ self.w1 + t[:, None] * self.v + self.b1)
        return h @ self.w2 + t.log()[:, None] * self.u


def _output_bound(net: TanhNet, t: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """(B,) bound on ||net(x, s)||_1 at s in {t, r}: |tanh| <= 1 gives sum_i (||w2[:, i]||_1 + |ln s| |u_i|)."""
    with torch.no_grad():
        ln = torch.maximum(t.log().abs(), r.log().abs())
        return net.w2.abs().sum() + ln * net.u.abs().sum()


def _frozen(m: nn.Module) -> nn.Module:
    return m.requires_grad_(False)


# --- 1. the (y_t, y_r) pair: Euler step of the PF-ODE, shared noise, stop-gradient target ------------


class Recorder(nn.Module):
    """f(x, t) = w x that records its inputs and whether autograd was on."""

    def __init__(self) -> None:
        super().__init__()
        self.w, self.calls = nn.Parameter(torch.tensor(0.5, dtype=F64)), []

    def forward(self, x, t, **_):
        self.calls.append((x.detach().clone(), t.detach().clone(), torch.is_grad_enabled()))
        return self.w * x


@SETTINGS
@given(
    lt=st.lists(log_t, min_size=1, max_size=6),
    dim=st.integers(1, 4),
    step=st.integers(0, 40),
    q=st.sampled_from([2.0, 4.0]),
    seed=st.integers(0, 2**16),
)
def test_target_input_is_an_euler_step_of_the_pf_ode_and_a_stopgrad_pass(lt, dim, step, q, seed):
    """y_r = y_t + (r - t) (y_t - x0) / t, r = t - Delta_t(t, step), target pass without autograd.

    The VE probability-flow ODE is dx/dt = -t grad log p_t(x); with the single-sample score
    grad log p_t(x | x0) = -(x - x0) / t^2 it is dx/dt = (x - x0) / t, whose Euler step from (y_t, t)
    to level r is the formula above. Consistency training (CT) is consistency distillation with exactly
    this one-step solver (Song et al. 2023, Thm. 2); with independent noise for y_r it is not.
    """
    t = torch.tensor(lt, dtype=F64).exp()
    x0 = 2 * torch.randn(len(lt), dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    f = Recorder()
    sched = ECTSchedule(q=q, double_every=1)
    out = ConsistencyTrainingLoss(sched)(f, x0, step, generator=torch.Generator().manual_seed(seed + 1), t=t)
    assert out.shape == (len(lt),)
    assert len(f.calls) == 2
    (y_t, s_t, grad_t), (y_r, s_r, grad_r) = f.calls
    assert grad_t and not grad_r  # D_r = stopgrad f(y_r, r)
    r = paper_r(t, step, q, 1, 0.999)
    torch.testing.assert_close(s_t, t, rtol=0, atol=0)
    assert bool(((s_r - r).abs() <= 8 * EPS * t).all())  # r = t - Delta_t: a few ulps of t
    # float64 round-off of forming y_t, y_r and the Euler step: a few ulps of the largest magnitude
    mag = torch.maximum(y_t.abs(), x0.abs()).max(1, keepdim=True).values + y_r.abs()
    euler = y_t + (r - t)[:, None] * (y_t - x0) / t[:, None]
    assert bool(((y_r - euler).abs() <= 16 * EPS * mag).all()), (y_r - euler).abs().max()
    # the online loss carries a gradient to the parameters (only through the online pass)
    out.sum().backward()
    assert f.w.grad is not None and torch.isfinite(f.w.grad)


# --- 2. the inv_dt loss is the norm of a difference quotient: exact midpoint identity ----------------


class QuadraticAlongLine(nn.Module):
    """f(x, t) = A x + |x|^2 v + t^2 u + t B x: along x(s) = x0 + s n, s -> f(x(s), s) is a quadratic."""

    def __init__(self, dim: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a, self.b = (nn.Parameter(torch.randn(dim, dim, generator=g, dtype=F64)) for _ in range(2))
        self.v, self.u = (nn.Parameter(torch.randn(dim, generator=g, dtype=F64)) for _ in range(2))

    def forward(self, x, t, **_):
        sq = (x * x).sum(1, keepdim=True)
        return x @ self.a + sq * self.v + (t**2)[:, None] * self.u + t[:, None] * (x @ self.b)


@SETTINGS
@given(
    lt=st.lists(log_t_trunc, min_size=1, max_size=6),
    bnd=st.lists(st.booleans(), min_size=6, max_size=6),
    dim=st.integers(1, 4),
    step=st.integers(0, 30),
    stage=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_inv_dt_loss_equals_the_path_derivative_at_the_midpoint(lt, bnd, dim, step, stage, seed):
    """w d = ||f(y_t, t) - f(y_r, r)|| / (t - r) = ||p'((t + r) / 2)||, p(s) = f(x0 + s n, s).

    The midpoint rule is exact for quadratics, so for ``QuadraticAlongLine`` the identity holds for
    every Delta_t (every stage), not only in the limit Delta_t -> 0. p' is computed independently by
    autodiff. Stage 2 uses the same f as student and teacher (so f_trunc = f), and its
    total loss must be mean_C + w_b mean_B of these values.
    """
    b = len(lt)
    t = torch.tensor(lt, dtype=F64).exp()
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(b, dim, generator=g, dtype=F64)
    f = QuadraticAlongLine(dim, seed + 1)
    sched = ECTSchedule(q=2, double_every=1)
    if stage == 1:
        per = ConsistencyTrainingLoss(sched, c=0.0)(f, x0, step, generator=torch.Generator().manual_seed(seed), t=t)
    else:
        boundary = torch.tensor(bnd[:b])
        t = torch.where(boundary, torch.full_like(t, T_PRIME), t)
        tcm = TruncatedCM(f, _frozen(QuadraticAlongLine(dim, seed + 1)), t_prime=T_PRIME)
        loss = TruncatedConsistencyLoss(sched, t_prime=T_PRIME, c=0.0, w_boundary=0.1)
        res = loss(tcm, x0, step, generator=torch.Generator().manual_seed(seed), t=t, boundary=boundary)
        per = res["per_sample"]
    # the loss's noise: the first draw of its generator, as in the hand computations of test_losses.py
    n = torch.randn(b, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    r = paper_r(t, step, 2.0, 1, 0.999)
    mid = (t + r) / 2
    s = mid.clone().requires_grad_(True)
    p = f(x0 + s[:, None] * n, s)  # rows are independent: d p[:, j].sum() / ds_i = dp_ij / ds_i
    dp = torch.stack([torch.autograd.grad(p[:, j].sum(), s, retain_graph=True)[0] for j in range(dim)], 1)
    want = dp.norm(dim=1)
    with torch.no_grad():
        # round-off: the difference of two outputs of size <= mag, divided by Delta_t
        mag = torch.maximum(f(x0 + t[:, None] * n, t).abs(), f(x0 + r[:, None] * n, r).abs()).sum(1)
    tol = 64 * EPS * (mag / (t - r) + want)
    assert bool(((per.detach() - want).abs() <= tol).all()), ((per.detach() - want).abs() / tol).max()
    if stage == 2:
        boundary = res["boundary"]
        l_c = want[~boundary].mean() if bool((~boundary).any()) else torch.zeros((), dtype=F64)
        l_b = want[boundary].mean() if bool(boundary.any()) else torch.zeros((), dtype=F64)
        torch.testing.assert_close(res["loss"].detach(), l_c + 0.1 * l_b, rtol=1e-9, atol=float(tol.max()))


# --- 3. invariances of the pseudo-Huber distance ------------------------------------------------------


class Transformed(nn.Module):
    """x, t -> lam * f(x, t) Q^T + b."""

    def __init__(self, base: nn.Module, lam: float, q: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.base, self.lam, self.q, self.b = base, lam, q, b

    def forward(self, x, t, **_):
        return self.lam * self.base(x, t) @ self.q.T + self.b


@SETTINGS
@given(
    lt=st.lists(log_t, min_size=1, max_size=6),
    dim=st.integers(2, 4),
    lam=st.floats(0.01, 100.0),
    c=st.sampled_from([0.0, 1e-8, 0.06, 1.0]),
    shift=st.floats(-10.0, 10.0),
    step=st.integers(0, 30),
    stage=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_loss_invariant_to_output_rotation_and_shift_and_homogeneous_in_scale_and_c(
    lt, dim, lam, c, shift, step, stage, seed
):
    """d(a, b) = sqrt(||a - b||^2 + c^2) - c with the Euclidean norm over all pixels, so for any
    orthogonal Q, shift b and lam > 0:  loss(Q f + b; c) = loss(f; c)  and  loss(lam f; lam c) = lam loss(f; c).

    A per-pixel pseudo-Huber (or an L1 distance) breaks the rotation invariance; a squared norm breaks
    the homogeneity (lam^2).
    """
    t = torch.tensor(lt, dtype=F64).exp()
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(len(lt), dim, generator=g, dtype=F64)
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=F64))
    bvec = shift * torch.randn(dim, generator=g, dtype=F64)
    eye, zero = torch.eye(dim, dtype=F64), torch.zeros(dim, dtype=F64)
    sched = ECTSchedule(q=2, double_every=1)
    if stage == 2:
        t = t.clamp_min(T_PRIME)  # stage-2 levels live on [t', T]; the target side still reaches r < t'

    def loss(transform: tuple[float, torch.Tensor, torch.Tensor], c_: float) -> torch.Tensor:
        lam_, q_, b_ = transform
        gen = torch.Generator().manual_seed(seed + 7)
        if stage == 1:
            f = Transformed(TanhNet(dim, seed + 1), lam_, q_, b_)
            return ConsistencyTrainingLoss(sched, c=c_)(f, x0, step, generator=gen, t=t).detach()
        s, te = Transformed(TanhNet(dim, seed + 1), lam_, q_, b_), Transformed(TanhNet(dim, seed + 2), lam_, q_, b_)
        tcm = TruncatedCM(s, _frozen(te), t_prime=T_PRIME)
        return TruncatedConsistencyLoss(sched, t_prime=T_PRIME, c=c_)(tcm, x0, step, generator=gen, t=t)[
            "per_sample"
        ].detach()

    base = loss((1.0, eye, zero), c)
    rotated = loss((1.0, q, bvec), c)
    scaled = loss((lam, eye, zero), lam * c)
    # round-off bound: outputs of size <= M (plus |b|, lam M, lam c) differenced and divided by Delta_t
    r = paper_r(t, step, 2.0, 1, 0.999)
    m = torch.maximum(_output_bound(TanhNet(dim, seed + 1), t, r), _output_bound(TanhNet(dim, seed + 2), t, r))
    scale = (m + bvec.abs().sum() + c) / (t - r)
    tol = 64 * dim * EPS * scale
    assert bool(((rotated - base).abs() <= tol + 1e-12 * base).all()), ((rotated - base).abs() / tol).max()
    assert bool(((scaled - lam * base).abs() <= lam * (tol + 1e-12 * base)).all()), (
        (scaled - lam * base).abs() / (lam * tol)
    ).max()


# --- 4. the ECT Delta_t schedule for arbitrary parameters ---------------------------------------------


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    q=st.floats(1.01, 16.0),
    k=st.floats(0.0, 16.0),
    limit=st.floats(0.01, 0.9999),
    every=st.integers(1, 100),
    steps=st.tuples(st.integers(0, 3000), st.integers(0, 3000)),
    lt=st.lists(st.floats(math.log(2e-6), math.log(1e3)), min_size=1, max_size=8),
)
def test_ect_schedule_bounds_closed_form_and_monotone_in_stage(q, k, limit, every, steps, lt):
    """ECT: ratio = min(1 - 1/q^(stage+1), limit), Delta_t = t (1 - ratio)(1 + k sigmoid(-t)), r >= 1e-6.

    Hence 0 < Delta_t <= t - 1e-6, Delta_t is the closed form wherever r is not clipped, and since the
    ratio is non-decreasing in the stage, Delta_t is non-increasing in the training step (the schedule
    only ever shrinks Delta_t: stage 2 continuing the counter never re-enlarges it).
    """
    s1, s2 = sorted(steps)
    sched = ECTSchedule(q=q, double_every=every, ratio_limit=limit, k=k)
    t = torch.tensor(lt, dtype=F64).exp()
    for step in (s1, s2):
        ratio = min(1.0 - q ** -(step // every + 1), limit)
        assert abs(sched.ratio(step) - ratio) <= 2 * EPS  # 1/q^m vs q^-m: one rounding of a number < 1
        r, dt = sched.r(t, step), sched.delta(t, step)
        assert bool((r >= 1e-6).all()) and bool((dt > 0).all()) and bool((dt <= t - 1e-6 + 4 * EPS * t).all())
        raw = t * (1 - ratio) * (1 + k * torch.sigmoid(-t))
        free = t - raw > 1e-6
        assert bool(((dt - raw).abs() <= 8 * EPS * t)[free].all())
        # t - Delta_t cancels when ratio is small: both sides agree to a few ulps of t, not of r
        assert bool(((r - paper_r(t, step, q, every, limit, k)).abs() <= 8 * EPS * t).all())
    # monotone in the step: a later stage never has a larger Delta_t (allow one ulp of t)
    assert bool((sched.delta(t, s2) <= sched.delta(t, s1) + 2 * EPS * t).all())


# --- 5. the trivial (constant) solution and the boundary that rules it out ---------------------------


class Const(nn.Module):
    """f(x, t) = a for every x and t (with a parameter so that the loss has a graph)."""

    def __init__(self, a: torch.Tensor) -> None:
        super().__init__()
        self.a = nn.Parameter(a.clone())

    def forward(self, x, t, **_):
        return self.a.expand_as(x) + 0 * x


@SETTINGS
@given(
    lt=st.lists(log_t_trunc, min_size=1, max_size=8),
    bnd=st.lists(st.booleans(), min_size=8, max_size=8),
    dim=st.integers(1, 4),
    step=st.integers(0, 30),
    c=st.sampled_from([0.0, 1e-8, 0.06]),
    same=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_constant_student_is_self_consistent_and_only_teacher_targets_penalise_it(lt, bnd, dim, step, c, same, seed):
    """TCM's motivation: any constant satisfies truncated self-consistency on [t', T].

    With student f_theta = a and teacher f_phi = b (constants), every sample whose target level
    r = t - Delta_t stays >= t' has loss exactly 0 (student vs student), and every sample with r < t'
    (all boundary samples, t = t') has loss (sqrt(||a - b||^2 + c^2) - c) / Delta_t. So the constant is
    a zero-loss solution iff it agrees with the teacher, and stage 1 gives any constant zero loss.
    """
    b_ = len(lt)
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(dim, generator=g, dtype=F64)
    b = a.clone() if same else torch.randn(dim, generator=g, dtype=F64)
    x0 = torch.randn(b_, dim, generator=g, dtype=F64)
    boundary = torch.tensor(bnd[:b_])
    t = torch.where(boundary, torch.full((b_,), T_PRIME, dtype=F64), torch.tensor(lt, dtype=F64).exp())
    sched = ECTSchedule(q=2, double_every=1)
    r = paper_r(t, step, 2.0, 1, 0.999)
    assume(bool(((r - T_PRIME).abs() > 1e-9).all()))  # keep the routing of every target unambiguous
    # stage 1: a constant is exactly self-consistent everywhere
    s1 = ConsistencyTrainingLoss(sched, c=c)(Const(a), x0, step, generator=torch.Generator().manual_seed(1), t=t)
    assert bool((s1 == 0).all())
    tcm = TruncatedCM(Const(a), _frozen(Const(b)), t_prime=T_PRIME)
    res = TruncatedConsistencyLoss(sched, t_prime=T_PRIME, c=c, w_boundary=0.1)(
        tcm, x0, step, generator=torch.Generator().manual_seed(2), t=t, boundary=boundary
    )
    gap = math.sqrt(float(((a - b) ** 2).sum()) + c * c) - c
    want = torch.where(r < T_PRIME, gap / (t - r), torch.zeros_like(t))
    assert bool((r[boundary] < T_PRIME).all())  # every boundary target is a teacher target
    per = res["per_sample"].detach()
    # gap to ~4 ulps (a one-row norm), divided by Delta_t computed to ~4 ulps of t
    torch.testing.assert_close(per, want, rtol=64 * EPS * float((t / (t - r)).max()), atol=0)
    assert bool((per[r >= T_PRIME] == 0).all())
    if same:
        assert float(res["loss"].detach()) == 0.0


# --- 6. the stage-2 loss is a functional of f_trunc ----------------------------------------------------


class Patched(nn.Module):
    """base(x, t) on one side of t' and an unrelated (finite) garbage function on the other."""

    def __init__(self, base: nn.Module, keep_above: bool, t_prime: float) -> None:
        super().__init__()
        self.base, self.keep_above, self.t_prime = base, keep_above, t_prime

    def forward(self, x, t, **_):
        keep = t >= self.t_prime if self.keep_above else t < self.t_prime
        garbage = 50 * torch.cos(3 * x) + t[:, None] ** 2
        return torch.where(keep[:, None], self.base(x, t), garbage)


@SETTINGS
@given(
    lt=st.lists(log_t_trunc, min_size=1, max_size=8),
    bnd=st.lists(st.booleans(), min_size=8, max_size=8),
    dim=st.integers(1, 3),
    step=st.integers(0, 30),
    seed=st.integers(0, 2**16),
)
def test_stage2_loss_sees_student_only_on_t_ge_tprime_and_teacher_only_below(lt, bnd, dim, step, seed):
    """f_trunc(x, t) = f_theta(x, t) for t >= t' and f_phi(x, t) for t < t'.

    Hence the loss and the student's gradient are unchanged when the student is replaced by anything
    below t' and the teacher by anything at and above t' (boundary samples, t = t', belong to the
    student; their targets, r < t', to the teacher). Same floating-point operations: exact equality.
    """
    b_ = len(lt)
    boundary = torch.tensor(bnd[:b_])
    t = torch.where(boundary, torch.full((b_,), T_PRIME, dtype=F64), torch.tensor(lt, dtype=F64).exp())
    x0 = torch.randn(b_, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    student, teacher = TanhNet(dim, seed + 1), _frozen(TanhNet(dim, seed + 2))
    loss = TruncatedConsistencyLoss(ECTSchedule(q=2, double_every=1), t_prime=T_PRIME, w_boundary=0.1)
    results, grads = [], []
    for s, te in (
        (student, teacher),
        (Patched(student, True, T_PRIME), _frozen(Patched(teacher, False, T_PRIME))),
    ):
        student.zero_grad(set_to_none=True)
        res = loss(TruncatedCM(s, te, T_PRIME), x0, step, generator=torch.Generator().manual_seed(seed + 3), t=t,
                   boundary=boundary)  # fmt: skip
        res["loss"].backward()
        results.append({k: v.detach() for k, v in res.items()})
        grads.append([p.grad.clone() for p in student.parameters()])
    for k in ("loss", "L_C", "L_B", "per_sample"):
        torch.testing.assert_close(results[1][k], results[0][k], rtol=0, atol=0, msg=k)
    for g0, g1 in zip(*grads, strict=True):
        torch.testing.assert_close(g1, g0, rtol=0, atol=0)
