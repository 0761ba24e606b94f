"""Everyday PyTorch workflows found broken by a usability audit (each test failed before its fix)."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations

from iclr25.neuro.topoloss import (
    TopoLayer,
    TopoLoss,
    cortical_sheet_shape,
    downsample_weights,
    similarity_vs_distance,
)


def test_forward_sums_layers_on_different_devices():
    # A model split over devices (e.g. a Hugging Face device_map): per_layer gives values on each
    # layer's device, and forward must still reduce them (torch.stack raised a device mismatch).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16))
    model[0].to("meta")
    topo = TopoLoss([TopoLayer("0", 2, 2), TopoLayer("2", 2, 2)])
    values = topo.per_layer(model)
    assert {v.device.type for v in values.values()} == {"meta", "cpu"}
    total = topo(model)
    assert total.device.type == "meta" and total.shape == ()
    # one device: unchanged
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16))
    raw = topo.per_layer(model, scaled=True)
    assert torch.equal(topo(model), torch.stack(list(raw.values())).sum() / 2)


def test_non_module_model_is_named():
    # topo(logits) instead of topo(model) gave "'Tensor' object has no attribute 'named_modules'"
    topo = TopoLoss([TopoLayer("0", 2, 2)])
    with pytest.raises(TypeError, match=r"model must be the nn\.Module"):
        topo(torch.randn(3, 16))
    with pytest.raises(TypeError, match=r"model must be the nn\.Module"):
        topo.per_layer(None)


def test_single_layer_instead_of_list_is_named():
    with pytest.raises(TypeError, match=r"layers must be a sequence.*one TopoLayer"):
        TopoLoss(TopoLayer("0"))


def test_factor_pairs_are_checked_and_arrays_accepted():
    layer = nn.Linear(8, 16)
    # a triple gave "too many values to unpack (expected 2)"
    with pytest.raises(ValueError, match="factor must be a number or a pair"):
        downsample_weights(layer, factor=(2, 2, 2))
    # an array pair was rejected by downsample_weights although from_pattern accepts it
    got = downsample_weights(layer, factor=np.array([2.0, 2.0]))
    assert torch.equal(got.weight, downsample_weights(layer, factor=(2.0, 2.0)).weight)
    # a 0-d tensor gave "iteration over a 0-d tensor"
    with pytest.raises(TypeError, match="factor must be a real number, got Tensor"):
        TopoLoss.from_pattern(nn.Sequential(layer), "0", factor=torch.tensor(2.0))
    topo = TopoLoss.from_pattern(nn.Sequential(layer), "0", factor=np.array([2, 4]))
    assert (topo.layers[0].factor_h, topo.layers[0].factor_w) == (2.0, 4.0)


def test_numpy_integers_accepted():
    assert cortical_sheet_shape(np.int64(256)) == (16, 16)
    layer = nn.Linear(8, 16)
    a, b = similarity_vs_distance(layer, bins=np.int64(4)), similarity_vs_distance(layer, bins=4)
    assert torch.equal(a.count, b.count) and torch.equal(a.distance, b.distance)


def test_from_json_names_malformed_layers():
    head = '{"format": "iclr25.neuro.topoloss", "version": 1, "layers": '
    for bad in ("[3]", '"0"', '{"name": "0"}'):
        with pytest.raises(ValueError, match="'layers' must be a list of objects"):
            TopoLoss.from_json(head + bad + "}")


def test_downsample_inplace_refuses_a_computed_weight():
    # weight_norm computes .weight on access: inplace=True silently changed nothing
    torch.manual_seed(0)
    layer = parametrizations.weight_norm(nn.Linear(8, 16))
    before = layer.weight.detach().clone()
    with pytest.raises(ValueError, match=r"inplace=True.*registered parameter or buffer"):
        downsample_weights(layer, factor=2.0, inplace=True)
    assert torch.equal(layer.weight, before)
    out = downsample_weights(layer, factor=2.0)  # the out-of-place export still works
    assert out.weight.shape == (16, 8)
    # a plain layer is still rebuilt in place
    plain = nn.Linear(8, 16)
    out = downsample_weights(plain, factor=2.0, inplace=True)
    assert torch.equal(plain.weight, out.weight)
