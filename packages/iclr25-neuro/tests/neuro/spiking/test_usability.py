"""Everyday-use contracts found by a user-side audit: clear errors for a bare-tensor state (the
snnTorch habit ``lif(x, mem)``), non-finite reset/threshold constants and a diverged learned τ, and
statistics on an empty (T = 0) recording."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.spiking import (
    ALIF,
    LIF,
    ALIFState,
    GIFState,
    LIFState,
    alif_step,
    cv_binary,
    gif_step,
    isi_cv,
    lif_multistep,
    lif_step,
)


def test_a_bare_tensor_state_is_rejected_naming_the_state_type():
    x = torch.randn(6, 2, 5, generator=torch.Generator().manual_seed(0))
    mem = torch.zeros(2, 5)
    lif_calls = [
        lambda: lif_step(x[0], mem),
        lambda: lif_multistep(x, mem),
        lambda: LIF()(x, state=mem),
        lambda: lif_multistep(x, (mem,)),  # a plain tuple has no .v either
    ]
    for call in lif_calls:
        with pytest.raises(TypeError, match=r"state must be None or a NamedTuple LIFState\(v\)"):
            call()
    # before: a (2, 5) tensor was iterated row by row as (v, s, b) and failed on zip or on .v
    for call in (lambda: alif_step(x[0], mem), lambda: ALIF(5)(x, state=mem)):
        with pytest.raises(TypeError, match=r"state must be None or a NamedTuple ALIFState\(v, s, b\)"):
            call()
    with pytest.raises(TypeError, match=r"state must be None or a NamedTuple GIFState\(u\), got Tensor"):
        gif_step(x[0], mem, levels=4)
    # the wrapped states still run
    lif_step(x[0], LIFState(mem))
    alif_step(x[0], ALIFState(mem, mem, mem))
    gif_step(x[0], GIFState(mem), levels=4)


def test_non_finite_v_reset_b0_beta_are_rejected_up_front():
    x = torch.randn(6, 2, 5, generator=torch.Generator().manual_seed(1)) * 5
    # before: v_reset=nan ran and turned every membrane that spiked into NaN (silently no more spikes)
    for bad in (float("nan"), math.inf):
        with pytest.raises(ValueError, match="v_reset must be finite"):
            LIF(reset="hard", v_reset=bad)
        with pytest.raises(ValueError, match="v_reset must be finite"):
            lif_multistep(x, reset="hard", v_reset=bad)
    with pytest.raises(TypeError, match="v_reset must be a number"):
        lif_step(x[0], reset="hard", v_reset="0")  # was "only integer tensors ... converted to an index"
    for bad in (float("nan"), math.inf):
        with pytest.raises(ValueError, match="b0 must be finite"):
            ALIF(5, b0=bad)
        with pytest.raises(ValueError, match="beta must be a finite float >= 0"):
            ALIF(5, beta=bad)
        with pytest.raises(ValueError, match="beta"):
            alif_step(x[0], beta=bad)
    # valid constants of every accepted kind still give the same result
    want = LIF(reset="hard", v_reset=-0.5)(x)
    assert torch.equal(LIF(reset="hard", v_reset=np.float32(-0.5))(x), want)
    assert torch.equal(lif_multistep(x, reset="hard", v_reset=torch.tensor(-0.5))[0], want)


def test_alif_learned_tau_that_diverged_to_nan_raises_like_lif():
    x = torch.randn(8, 2, 5, generator=torch.Generator().manual_seed(2)) * 3
    for name in ("tau_m", "tau_adp"):
        layer = ALIF(5)
        with torch.no_grad():
            getattr(layer, name)[1] = float("nan")
        # before: the NaN α/ρ made v NaN and the layer silently never fired
        with pytest.raises(ValueError, match=f"{name} must be > 0, got NaN"):
            layer(x)
        layer.validate = False  # the documented opt-out skips the check
        layer(x)


def test_statistics_of_a_recording_with_zero_time_steps():
    spikes = torch.zeros(0, 3, 4)
    # before: both crashed in an internal reshape ("cannot reshape tensor of 0 elements")
    res = isi_cv(spikes)
    assert res.mean is None and res.values.numel() == 0 and res.n_excluded == 12
    assert res.included.shape == (3, 4) and not res.included.any()
    with pytest.raises(ValueError, match=r"spikes must have at least 1 time step along time_dim=0"):
        cv_binary(spikes)
    # a time axis elsewhere and non-empty recordings are unchanged
    assert isi_cv(torch.zeros(3, 0), time_dim=1).n_excluded == 3
    train = (torch.rand(50, 6, generator=torch.Generator().manual_seed(3)) > 0.6).float()
    assert cv_binary(train).item() == pytest.approx(float(np.mean(train.numpy().std(0) / train.numpy().mean(0))))
