"""The faithfulness measures against brute-force computations on small maps, and the Captum baselines' wiring."""

import itertools

import pytest
import torch
from torch import nn

from paperzoo.papers.latent_shift.baselines import baseline_maps
from paperzoo.papers.latent_shift.evaluate import deletion_insertion, matched_iou, pointing_game, rank_correlation


def _brute_iou(m, mask):
    """Threshold by hand: the |mask| highest pixels (ties: lower row-major index first), IoU by counting."""
    h, w = m.shape
    pix = sorted(itertools.product(range(h), range(w)), key=lambda rc: (-float(m[rc]), rc[0] * w + rc[1]))
    k = int(mask.sum())
    top = set(pix[:k])
    truth = {rc for rc in pix if mask[rc]}
    union = top | truth
    return len(top & truth) / len(union) if union else 0.0


def test_matched_iou_equals_brute_force():
    g = torch.Generator().manual_seed(0)
    maps = torch.rand(40, 5, 6, generator=g)
    maps[:10] = torch.randint(0, 3, (10, 5, 6), generator=g).float()  # many ties
    masks = torch.rand(40, 5, 6, generator=g) < torch.rand(40, 1, 1, generator=g) * 0.5
    got = matched_iou(maps, masks)
    want = torch.tensor([_brute_iou(maps[i], masks[i]) for i in range(40)])
    assert torch.allclose(got, want)
    some = masks.flatten(1).any(1)
    assert some.sum() > 30 and matched_iou(masks.float(), masks)[some].eq(1).all()  # the mask itself scores 1


def test_pointing_game_with_tolerance():
    maps = torch.zeros(3, 7, 7)
    maps[:, 1, 1] = 1.0
    masks = torch.zeros(3, 7, 7, dtype=torch.bool)
    masks[0, 1, 1] = True  # hit
    masks[1, 2, 2] = True  # one pixel away (diagonal): a hit with tolerance 1 only
    masks[2, 4, 4] = True  # far
    assert pointing_game(maps, masks, tolerance=0).tolist() == [True, False, False]
    assert pointing_game(maps, masks, tolerance=1).tolist() == [True, True, False]


def test_deletion_and_insertion_by_hand():
    """A 'classifier' that reports the mean of the image: deleting the brightest pixels first gives the smallest
    area, inserting them first the largest; the areas follow the trapezoid rule over the steps."""
    img = torch.tensor([[4.0, 3.0], [2.0, 1.0]])[None, None]  # (1, 1, 2, 2)
    good, bad = img[:, 0].clone(), -img[:, 0].clone()

    def mean(x, rows):
        return x.flatten(1).mean(1)

    d_good, i_good = deletion_insertion(mean, img, good, steps=4)
    d_bad, i_bad = deletion_insertion(mean, img, bad, steps=4)
    # deletion curve (good order): 10/4, 6/4, 3/4, 1/4, 0 -> trapezoid with dx = 1/4
    curve = torch.tensor([10, 6, 3, 1, 0]) / 4
    assert torch.allclose(d_good, torch.trapezoid(curve, dx=0.25)[None])
    assert d_good < d_bad and i_good > i_bad
    assert torch.allclose(d_good + i_good, d_bad + i_bad)  # the two curves of one order are complementary here


def test_rank_correlation():
    a = torch.rand(4, 6, 6, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(rank_correlation(a, a * 3 + 1), torch.ones(4))
    assert torch.allclose(rank_correlation(a, -a), -torch.ones(4))
    assert rank_correlation(a, torch.ones_like(a)).eq(0).all()


def test_bad_maps_are_named():
    with pytest.raises(ValueError, match="masks bool of the same shape"):
        matched_iou(torch.rand(2, 4, 4), torch.rand(2, 4, 4))


def test_captum_baselines_on_a_small_cnn(one_thread):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 2)).eval()
    x = torch.rand(3, 1, 6, 6)
    maps = baseline_maps(model, x, torch.tensor([0, 1, 0]), ig_steps=8)
    assert set(maps) == {"saliency", "guided_backprop", "integrated_gradients", "random", "centre"}
    assert all(m.shape == (3, 6, 6) and (m >= 0).all() for m in maps.values())
    xg = x.clone().requires_grad_(True)
    grad = torch.autograd.grad(model(xg)[torch.arange(3), torch.tensor([0, 1, 0])].sum(), xg)[0]
    assert torch.allclose(maps["saliency"], grad.abs()[:, 0], atol=1e-6)  # Saliency = |d logit / d x|
    assert maps["centre"][0, 2:4, 2:4].min() > maps["centre"][0, 0, 0]
    inplace = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Flatten(),
                            nn.Linear(4 * 36, 2)).eval()
    with pytest.raises(ValueError, match="non-in-place nn.ReLU"):
        baseline_maps(inplace, x, 0)
