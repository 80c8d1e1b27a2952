"""The lesion set: deterministic from the seed, lesions where and as strong as the parameters say, masks exact."""

import pytest
import torch

from paperzoo.data.lesions import LesionParams, insert_lesions, load_lesions


def _garments(n=400, seed=0):
    """Stand-in images: a bright rectangle (the 'garment') on black, of random size and place."""
    g = torch.Generator().manual_seed(seed)
    img = torch.zeros(n, 28, 28, dtype=torch.uint8)
    for i in range(n):
        r, c = torch.randint(2, 10, (2,), generator=g).tolist()
        img[i, r:r + 16, c:c + 14] = int(torch.randint(150, 255, (1,), generator=g))
    return img


def test_deterministic_and_seeded():
    imgs = _garments()
    a, b, c = insert_lesions(imgs, 3), insert_lesions(imgs, 3), insert_lesions(imgs, 4)
    assert torch.equal(a.images, b.images) and torch.equal(a.masks, b.masks) and torch.equal(a.kinds, b.kinds)
    assert not torch.equal(a.images, c.images)
    assert not torch.equal(a.kinds, insert_lesions(imgs, 3, stream=1).kinds)  # train and test streams differ


def test_lesions_follow_the_parameters():
    imgs = _garments()
    p = LesionParams()
    s = insert_lesions(imgs, 0, p)
    pos = s.kinds >= 0
    assert 0.4 < pos.float().mean() < 0.6  # half of the images
    assert torch.equal(s.labels, torch.stack([s.kinds == 0, s.kinds == 1], 1).float())
    assert not s.masks[~pos].any() and s.masks[pos].flatten(1).any(1).all()
    assert torch.equal(s.clean[:, 0], imgs.float() / 255)
    assert s.images.min() >= 0 and s.images.max() <= 1
    delta = s.images - s.clean
    assert (delta[s.kinds == 0] >= 0).all() and (delta[s.kinds == 1] <= 0).all()  # bright adds, dark removes
    assert delta[~pos].eq(0).all()
    c = s.contrasts[pos]
    assert (c >= p.contrast[0]).all() and (c <= p.contrast[1]).all()
    r = s.radii[pos]
    assert (r >= p.radius[0]).all() and (r <= p.radius[1]).all()
    cen = s.centres[pos]
    assert (cen >= p.margin).all() and (cen <= 27 - p.margin).all()
    # the mask is the ellipse rho <= 1: its area is close to pi a b
    area = s.masks[pos].flatten(1).sum(1).float()
    assert ((area - torch.pi * r.prod(1)).abs() / area).median() < 0.15
    # dark lesions sit on the garment: their centre pixel was brighter than dark_on
    d = s.kinds == 1
    rows, cols = s.centres[d, 0].long(), s.centres[d, 1].long()
    assert (s.clean[d, 0, rows, cols] > p.dark_on).all()


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="uint8 images \\(N, 28, 28\\)"):
        insert_lesions(torch.zeros(3, 28, 28), 0)
    with pytest.raises(ValueError, match="contrast"):
        LesionParams(contrast=(0.9, 0.5))
    with pytest.raises(ValueError, match="unknown split"):
        load_lesions("val")


@pytest.mark.data("fashion-mnist")
def test_on_fashion_mnist():
    s = load_lesions("test", 0, 500)
    assert s.images.shape == (500, 1, 28, 28) and s.classes.shape == (500,) and (s.classes >= 0).all()
    assert torch.equal(s.images, load_lesions("test", 0, 500).images)
