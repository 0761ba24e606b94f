"""Acceptance 9: importing the core does not import scipy, torch_geometric or triton."""

import subprocess
import sys


def test_import_is_light():
    code = (
        "import sys, iclr25.neuro.spiking as sp; "
        "sp.LIF()(__import__('torch').zeros(2, 3)); "  # a forward on CPU does not probe triton either
        "sp.GIFNeuron(4, 2)(__import__('torch').zeros(3)); "
        "print(sorted({'scipy', 'torch_geometric', 'triton'} & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"importing iclr25.neuro.spiking pulled in {out.strip()}"


def test_public_api_is_complete():
    import iclr25.neuro.spiking as sp

    wanted = [
        "spike",
        "lif_step",
        "alif_step",
        "gif_step",
        "LIF",
        "IF",
        "ALIF",
        "GIFNeuron",
        "gif_encode",
        "gif_encode_int",
        "gif_decode",
        "spike_bits",
        "bernoulli_encode",
        "firing_rate",
        "cv_binary",
        "isi_cv",
        "anova_selectivity",
        "Surrogate",
        "LIFState",
        "ALIFState",
        "GIFState",
    ]
    assert set(wanted) <= set(sp.__all__)
    assert all(hasattr(sp, name) for name in sp.__all__)
