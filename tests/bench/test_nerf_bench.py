"""The port-style reference renders exactly what ours renders (the bench's speed ratio compares identical math)."""

import torch

from paperzoo.bench.nerf import _rays, reference_render
from paperzoo.papers.nerf import NeRF, NeRFConfig, RenderConfig


def test_reference_equals_ours_in_eval_mode(one_thread):
    torch.manual_seed(0)
    for act in ("relu", "softplus"):
        model = NeRF(NeRFConfig.preset("tiny", density_activation=act), RenderConfig(num_coarse=8, num_fine=16)).eval()
        o, d, _ = _rays(64)
        ours, ref = model(o, d), reference_render(model, o, d)
        assert torch.allclose(ours.rgb, ref.rgb, atol=1e-6) and torch.allclose(ours.rgb_coarse, ref.rgb_coarse,
                                                                               atol=1e-6)
        assert torch.allclose(ours.depth, ref.depth, atol=1e-5)
