"""Mathematical property tests of AIHF's tabular machinery, derived from the theory rather than the code.

Soft value iteration is checked against invariances of the regularized Bellman operator (potential-based shaping,
scale, the KL-to-reference tilt), its Lipschitz/monotonicity theorem and the variational characterisation of the
soft-optimal policy; the finite-horizon occupancy against brute-force trajectory enumeration; the estimator against
the shift invariance of both likelihoods; the Bradley-Terry MLE against its KKT equation and a↔b relabelling.
"""

import itertools

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.rl.aihf import (
    AIHF,
    LinearReward,
    PreferenceDataset,
    TrajectoryDataset,
    batched_soft_vi,
    fit_bradley_terry,
    tabular,
)

EPS = np.finfo(np.float64).eps
GAMMA, H = 0.9, 30
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def _mdp(seed, S, A):
    """Random (P (S, A, S), r (S, A), μ0 (S,), full-support reference policy (S, A)) in float64."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    r = rng.normal(size=(S, A))
    mu0 = rng.dirichlet(np.ones(S))
    ref = rng.dirichlet(np.ones(A), size=S) * 0.9 + 0.1 / A
    return P, r, mu0, ref


def _roundoff(S, A, gamma, scale):
    """Float64 round-off bound of n soft Bellman backups on values of size ``scale``.

    Each backup rounds an S-term sum and an A-term log-sum-exp (relative error ≲ (S + A + 4)·eps of the value
    scale); the errors are contracted by γ per backup, so they accumulate to at most that over 1 − γ.
    """
    return 4 * (S + A + 4) * EPS * scale / (1 - gamma)


def _value_scale(r, temp, gamma, A, extra=0.0):
    """Bound on |Q|, |V| over the backups: (‖r‖∞ + extra + T·max(log A, max|log ref|)) / (1 − γ), ref ≥ 0.1/A."""
    return (np.abs(r).max() + extra + temp * np.log(10 * A)) / (1 - gamma)


mdps = st.tuples(
    st.integers(0, 2**32 - 1),  # seed
    st.integers(1, 5),  # S
    st.integers(1, 4),  # A
    st.floats(0.0, 0.95),  # gamma
    st.floats(0.2, 3.0),  # temperature
    st.integers(1, 60),  # backups
)


@SETTINGS
@given(mdps, st.booleans())
def test_soft_vi_is_invariant_to_potential_based_shaping(m, with_ref):
    # Ng et al. (1999), soft version: r'(s,a) = r(s,a) + γ Σ_s' P(s'|s,a) Φ(s') − Φ(s) started from V0' = V0 − Φ
    # gives, after every backup n, Q'_n = Q_n − Φ(s) and V'_n = V_n − Φ, hence the same soft-optimal policy.
    # Wrong transition contraction (P's s and s' swapped), a dropped γ, or the temperature misplaced in the
    # log-sum-exp all break it.
    seed, S, A, gamma, temp, n = m
    P, r, _, ref = _mdp(seed, S, A)
    phi = 3 * np.random.default_rng(seed + 1).normal(size=S)
    ref = ref if with_ref else None
    shaped = r + gamma * P @ phi - phi[:, None]
    Q, V, pi = tabular.soft_value_iteration(P, r, gamma, temp, n, ref=ref)
    Q2, V2, pi2 = tabular.soft_value_iteration(P, shaped, gamma, temp, n, V0=-phi, ref=ref)
    scale = _value_scale(r, temp, gamma, A, extra=3 * np.abs(phi).max())
    tol = _roundoff(S, A, gamma, scale)
    np.testing.assert_allclose(V2.numpy(), V.numpy() - phi, rtol=0, atol=tol)
    np.testing.assert_allclose(Q2.numpy(), Q.numpy() - phi[:, None], rtol=0, atol=tol)
    # softmax is 1/2-Lipschitz from logits (sup norm) to probabilities in every coordinate
    np.testing.assert_allclose(pi2.numpy(), pi.numpy(), rtol=0, atol=tol / temp)


@SETTINGS
@given(mdps, st.floats(0.1, 10.0))
def test_kl_regularized_soft_vi_is_the_reference_tilt_and_scale_equivariant(m, c):
    # π(a|s) ∝ ref(a|s)·exp(Q(s,a)/T) with V = T log Σ_a ref exp(Q/T): with γ = 0 this is the note's closed form
    # π_θ(y|x) ∝ π_ref(y|x) exp(r(x,y)/β). A uniform reference is the entropy-regularized problem with every
    # reward shifted by −T log A, so V_n drops by exactly T log A (1 − γ^n)/(1 − γ) and π is unchanged.
    # Finally (r, T) → (c·r, c·T) multiplies Q and V by c and leaves π unchanged (the operator is homogeneous).
    seed, S, A, gamma, temp, n = m
    P, r, _, ref = _mdp(seed, S, A)
    scale = _value_scale(r, temp, gamma, A)
    tol = _roundoff(S, A, gamma, scale)

    _, V0, pi0 = tabular.soft_value_iteration(P, r, 0.0, temp, 1, ref=ref)
    tilt = ref * np.exp(r / temp)
    # exp of arguments |r/T| ≤ 25 carries relative round-off ≲ 25·eps on each side
    np.testing.assert_allclose(pi0.numpy(), tilt / tilt.sum(1, keepdims=True), rtol=64 * 25 * EPS, atol=0)
    np.testing.assert_allclose(V0.numpy(), temp * np.log(tilt.sum(1)), rtol=0, atol=tol)

    Q, V, pi = tabular.soft_value_iteration(P, r, gamma, temp, n)
    Qu, Vu, piu = tabular.soft_value_iteration(P, r, gamma, temp, n, ref=np.full((S, A), 1.0 / A))
    shift = temp * np.log(A) * sum(gamma**k for k in range(n))
    np.testing.assert_allclose(Vu.numpy(), V.numpy() - shift, rtol=0, atol=tol)
    # Q_n = r + γ P V_{n−1} is shifted by γ times the previous backup's shift
    q_shift = temp * np.log(A) * sum(gamma ** (k + 1) for k in range(n - 1))
    np.testing.assert_allclose(Qu.numpy(), Q.numpy() - q_shift, rtol=0, atol=tol)
    np.testing.assert_allclose(piu.numpy(), pi.numpy(), rtol=0, atol=tol / temp)

    Qc, Vc, pic = tabular.soft_value_iteration(P, c * r, gamma, c * temp, n, ref=ref)
    Qr, Vr, pir = tabular.soft_value_iteration(P, r, gamma, temp, n, ref=ref)
    np.testing.assert_allclose(Vc.numpy(), c * Vr.numpy(), rtol=0, atol=c * tol)
    np.testing.assert_allclose(Qc.numpy(), c * Qr.numpy(), rtol=0, atol=c * tol)
    np.testing.assert_allclose(pic.numpy(), pir.numpy(), rtol=0, atol=tol / temp)


@SETTINGS
@given(mdps, st.floats(0.0, 2.0))
def test_soft_vi_is_monotone_and_lipschitz_in_the_reward(m, eps):
    # The soft Bellman operator is monotone and a γ-contraction in sup norm, and log-sum-exp is 1-Lipschitz, so
    # n backups from V = 0 satisfy ‖V(r1) − V(r2)‖∞ ≤ ‖r1 − r2‖∞ Σ_{k<n} γ^k, and r1 ≤ r2 ⇒ V(r1) ≤ V(r2).
    # Checked on both the single-MDP solver and the batched reference (the Triton kernel's specification).
    seed, S, A, gamma, temp, n = m
    P, r, _, ref = _mdp(seed, S, A)
    rng = np.random.default_rng(seed + 2)
    delta = rng.uniform(-eps, eps, size=(S, A))
    bound = eps * sum(gamma**k for k in range(n))
    tol = _roundoff(S, A, gamma, _value_scale(r, temp, gamma, A, extra=eps))
    for kl in (None, ref):
        V1 = tabular.soft_value_iteration(P, r, gamma, temp, n, ref=kl)[1].numpy()
        V2 = tabular.soft_value_iteration(P, r + delta, gamma, temp, n, ref=kl)[1].numpy()
        Vup = tabular.soft_value_iteration(P, r + np.abs(delta), gamma, temp, n, ref=kl)[1].numpy()
        assert np.abs(V1 - V2).max() <= bound + tol
        assert (Vup >= V1 - tol).all()
        assert (Vup - V1).max() <= np.abs(delta).max() * sum(gamma**k for k in range(n)) + tol
    Pt = torch.as_tensor(P)
    rs = torch.as_tensor(np.stack([r, r + delta, r + np.abs(delta)]))
    Vb = batched_soft_vi(Pt, rs, gamma, temp, n, backend="reference").numpy()
    assert np.abs(Vb[0] - Vb[1]).max() <= bound + tol
    assert (Vb[2] >= Vb[0] - tol).all()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 4), st.floats(0.0, 0.9), st.floats(0.3, 3.0))
def test_soft_value_is_the_optimal_regularized_return(seed, S, A, gamma, temp):
    # Soft-optimality (variational form): for the soft-optimal π and V of reward r,
    #   μ0ᵀV = Σ_{s,a} ρ_π(s,a) (r(s,a) − T log(π(a|s)/ref(a|s)))      (ρ_π: infinite-horizon occupancy)
    # and every other policy π' earns exactly T·Σ_s d_π'(s) KL(π'(·|s) ‖ π(·|s)) less (regularized performance
    # difference, from T log(π/ref) = Q − V and the flow equation d_π' = μ0 + γ P_π'ᵀ d_π'), hence at most μ0ᵀV.
    # This ties soft VI to the occupancy solve: P_π's transpose, the temperature or the policy taken from r
    # instead of Q each break it.
    P, r, mu0, ref = _mdp(seed, S, A)
    rng = np.random.default_rng(seed + 3)
    n = 400  # γ^400 ≤ 0.9^400 ≈ 5e-19: V is the fixed point to round-off
    for kl in (None, ref):
        log_ref = np.zeros((S, A)) if kl is None else np.log(kl)
        _, V, pi = tabular.soft_value_iteration(P, r, gamma, temp, n, ref=kl)

        def regularized_return(policy, log_ref=log_ref):
            rho = tabular.occupancy(P, policy, mu0, gamma).numpy()
            return float((rho * (r - temp * (np.log(policy) - log_ref))).sum()), rho.sum(1)

        v0 = float(mu0 @ V.numpy())
        scale = _value_scale(r, temp, gamma, A)
        # round-off of n backups plus the (I − γP_π) solve, whose condition number is at most (1 + γ)/(1 − γ)
        tol = _roundoff(S, A, gamma, scale) + 16 * S * EPS * scale * (1 + gamma) / (1 - gamma)
        pi = pi.numpy()
        assert abs(regularized_return(pi)[0] - v0) <= tol
        for _ in range(5):
            other = rng.dirichlet(np.ones(A), size=S) * 0.99 + 0.01 / A
            j_other, d_other = regularized_return(other)
            kl_gap = temp * d_other @ (other * (np.log(other) - np.log(pi))).sum(1)
            assert j_other <= v0 + tol
            assert abs((v0 - j_other) - kl_gap) <= tol


def _enumeration_roundoff(S, A, H, n_feat=1):
    """Round-off of the enumeration: (S·A)^H terms, each a product of 2H factors in [0, 1], summed into a total
    mass ≤ H (naive summation: ≤ (terms + 2H)·eps of the mass), plus the DP's and a feature dot product's."""
    return ((S * A) ** H + 2 * H + S * A) * H * n_feat * EPS


def _brute_force_occupancy(P, pi, mu0, gamma, H):
    """Σ over every (s_0, a_0, …, s_{H−1}, a_{H−1}) of Pr(τ) Σ_t γ^t 1[s_t = s, a_t = a]."""
    S, A = pi.shape
    rho = np.zeros((S, A))
    for traj in itertools.product(range(S * A), repeat=H):
        sa = [divmod(k, A) for k in traj]
        p = mu0[sa[0][0]]
        for t, (s, a) in enumerate(sa):
            p *= pi[s, a]
            if t + 1 < H:
                p *= P[s, a, sa[t + 1][0]]
        for t, (s, a) in enumerate(sa):
            rho[s, a] += p * gamma**t
    return rho


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 2), st.floats(0.0, 0.99), st.integers(1, 4))
def test_finite_horizon_occupancy_equals_trajectory_enumeration(seed, S, A, gamma, H):
    # The exact policy features of the demonstration gradient, E_π[Σ_{t<H} γ^t φ(s_t, a_t)], must use the
    # demonstrations' horizon H: checked against the definition, summing over every trajectory of a tiny MDP.
    P, _, mu0, _ = _mdp(seed, S, A)
    pi = np.random.default_rng(seed + 4).dirichlet(np.ones(A), size=S)
    rho = tabular.occupancy(P, pi, mu0, gamma, horizon=H).numpy()
    brute = _brute_force_occupancy(P, pi, mu0, gamma, H)
    np.testing.assert_allclose(rho, brute, rtol=0, atol=_enumeration_roundoff(S, A, H))


def test_soft_vi_optimizer_policy_features_equal_trajectory_enumeration():
    # The same for the optimizer AIHF actually calls (SoftVI.policy_features on a 2×2 gridworld, 5 actions).
    gw = tabular.GridWorld(n=2, slip=0.3, n_features=3, seed=4)
    H, gamma = 3, 0.8
    opt = tabular.SoftVI(gamma=gamma, env=gw).reset(H)
    reward = LinearReward(gw.features, 3)
    with torch.no_grad():
        reward.theta.copy_(torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64))
    opt.improve(reward, 7)
    feats = gw.features(*gw.all_pairs())
    brute = _brute_force_occupancy(gw.P, opt.policy, gw.mu0, gamma, H).reshape(-1) @ feats
    np.testing.assert_allclose(opt.policy_features(feats), brute, rtol=0, atol=_enumeration_roundoff(4, 5, H, 3))


def test_estimator_is_invariant_to_a_constant_reward_shift():
    # Both likelihoods are invariant to r → r + c: the soft-optimal policy does not change, and equal-length
    # segments gain the same c Σ_t γ^t. So a constant feature appended to φ has zero gradient at every step
    # (demo and policy features of it are both Σ_{t<H} γ^t, *if* the policy features use the demonstrations'
    # horizon and discount), its weight stays at 0, and the other weights follow the fit without it.
    # An infinite-horizon or off-by-one policy occupancy, or undiscounted demonstration features, break this.
    gw = tabular.GridWorld(seed=0)
    theta_star = np.random.default_rng(0).normal(size=6)
    expert = tabular.plan(gw, np.repeat((gw.phi @ theta_star)[:, None], 5, 1), GAMMA, 1.0)
    D = TrajectoryDataset.from_rollouts(gw.rollouts(expert, 20, H, 1))
    pool = gw.rollouts(np.full((25, 5), 0.2), 40, H, 2)
    rng = np.random.default_rng(3)
    P = PreferenceDataset(pool[:20], pool[20:], rng.uniform(size=20))

    def with_const(obs, acts):
        f = gw.features(obs, acts)
        return np.concatenate([f, np.ones((len(f), 1))], 1)

    iters, lr = 40, 0.2
    base = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), reward_lr=lr).fit(D, P, iters=iters)
    ext = AIHF(LinearReward(with_const, 7), tabular.SoftVI(env=gw), reward_lr=lr).fit(D, P, iters=iters)
    th = ext.reward_.theta.detach().numpy()
    # per step the constant coordinate's gradient is a difference of two H-term sums of size ≤ 1/(1 − γ), each
    # with round-off ≲ H·eps/(1 − γ) (the occupancy's S-term sums included); summed over the iterations
    shift_tol = iters * lr * 4 * (H + 25) * EPS / (1 - GAMMA)
    assert abs(th[6]) <= shift_tol
    # The remaining weights then see the same updates up to that shift (which leaves the policy unchanged) and
    # per-step round-off: 40 steps of a stable fit keep them within ~1e-15 (observed); 1e-10 is a loose bound on
    # that and far below a real difference (a wrong policy horizon moves them by O(1e-2)).
    np.testing.assert_allclose(th[:6], base.reward_.theta.detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(ext.policy_, base.policy_, rtol=0, atol=1e-10)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(2, 40), st.floats(1e-3, 1.0))
def test_bradley_terry_mle_satisfies_kkt_and_relabelling(seed, k, M, l2):
    # The reward-model MLE maximizes the strictly concave J(θ) = mean[y log σ(ΔΦθ) + (1 − y) log σ(−ΔΦθ)] −
    # (l2/2)‖θ‖², so it is the unique root of ∇J = ΔΦᵀ(y − σ(ΔΦθ))/M − l2·θ (computed here independently).
    # Relabelling each pair (a, b, y) → (b, a, 1 − y) describes the same data and must give the same θ.
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(50, k))

    def feat(obs, acts):
        return table[np.asarray(obs, int)]

    lengths = rng.integers(1, 8, size=(M, 2))  # segments of different lengths are allowed
    seg_a = [(rng.integers(0, 50, n), np.zeros(n)) for n in lengths[:, 0]]
    seg_b = [(rng.integers(0, 50, n), np.zeros(n)) for n in lengths[:, 1]]
    y = rng.uniform(size=M)
    y[: M // 2] = np.round(y[: M // 2])  # hard and soft labels
    gamma, fit = 0.9, {"l2": l2, "max_iter": 100}  # Newton converges in < 30 steps here; a stall costs 100
    theta = fit_bradley_terry(LinearReward(feat, k), PreferenceDataset(seg_a, seg_b, y), gamma, **fit).theta
    theta = theta.detach().numpy()
    swapped = fit_bradley_terry(LinearReward(feat, k), PreferenceDataset(seg_b, seg_a, 1 - y), gamma, **fit).theta

    def disc(segs):
        return np.stack([gamma ** np.arange(len(o)) @ table[o] for o, _ in segs])

    dphi = disc(seg_a) - disc(seg_b)
    d = dphi @ theta
    grad = dphi.T @ (y - 1 / (1 + np.exp(-d))) / M - l2 * theta
    # The solver's Armijo line search compares objective values, so it cannot accept a Newton step whose true
    # gain ½ gᵀH⁻¹g ≥ ‖g‖²/(2 λ_max(H)) is below the round-off δ_f of the objective (M log-sigmoid terms of size
    # ≤ log 2 + |d|): it may stop with ‖g‖ ≤ sqrt(2 λ_max δ_f) (about 1e-7 here), not at its 1e-12 threshold.
    lam_max = (dphi**2).sum(1).max() / 4 + l2
    delta_f = 8 * (M + k) * EPS * (np.log(2) + np.abs(d).max() + l2 * theta @ theta)
    g_tol = np.sqrt(2 * lam_max * delta_f) + 4 * (M + k) * EPS * (np.abs(dphi).max() + l2 * np.abs(theta).max())
    assert np.linalg.norm(grad) <= g_tol
    # two approximate roots of ∇J differ by at most (‖g1‖ + ‖g2‖)/l2, J being l2-strongly concave
    np.testing.assert_allclose(swapped.detach().numpy(), theta, rtol=0, atol=2 * g_tol / l2)
