"""Latent Shift's defining properties on small constructed autoencoders and classifiers, where each quantity can be
computed by hand: the gradient is taken with respect to z on D(z), lambda 0 is the reconstruction, the search stops
where each rule says, the double sigmoid cannot happen, and batching changes nothing."""

import pytest
import torch
from torch import nn

from paperzoo.papers.latent_shift import GIFSPLANATION, LATENTSHIFT, PAPER, LatentShift, lambda_grid, shift_map


class ToyAE(nn.Module):
    """encode: a linear map of the flattened 4x4 image; decode: linear (``tanh=False``) or tanh of linear."""

    input_range = (0.0, 1.0)

    def __init__(self, k: int = 5, tanh: bool = True, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.E = nn.Parameter(torch.randn(16, k, generator=g) / 4)
        self.D = nn.Parameter(torch.randn(k, 16, generator=g) / k ** 0.5)
        self.tanh = tanh

    def encode(self, x):
        return x.flatten(1) @ self.E  # (B, k)

    def decode(self, z):
        h = z @ self.D
        return (torch.tanh(h) if self.tanh else h).view(-1, 1, 4, 4)


class Linear(nn.Module):
    def __init__(self, outputs: int = 3, seed: int = 1):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(16, outputs)

    def forward(self, x):
        return self.lin(x.flatten(1))


class Bowl(nn.Module):
    """logit = (w . x - m)^2: lowering it moves w . x towards m, past which the logit rises again."""

    def __init__(self, w, m):
        super().__init__()
        self.w, self.m = w, m

    def forward(self, x):
        return ((x.flatten(1) @ self.w - self.m) ** 2)[:, None]


class Probs(nn.Module):
    """A classifier that already applies the sigmoid (as torchxrayvision's DenseNets do)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return torch.sigmoid(self.inner(x))


def _images(n=3, seed=0):
    return torch.rand(n, 1, 4, 4, generator=torch.Generator().manual_seed(seed))


def _grad_on_reconstruction(ae, clf, x, target):
    z = ae.encode(x).detach().requires_grad_(True)
    p = torch.sigmoid(clf(ae.decode(z))[:, target]).sum()
    return z.detach(), torch.autograd.grad(p, z)[0]


def test_gradient_is_wrt_z_on_the_reconstruction_and_lambda_0_is_the_reconstruction():
    ae, clf = ToyAE().eval(), nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 2)).eval()
    x = _images()
    r = LatentShift(clf, ae).attribute(x, 1, frames=5, output="logits")
    z, g = _grad_on_reconstruction(ae, clf, x, 1)
    with torch.no_grad():
        for j in range(5):
            want = ae.decode(z + r.lambdas[:, j, None] * g)
            assert torch.allclose(r.frames[:, j], want, atol=1e-6)
        assert torch.equal(r.frames[:, 0], ae.decode(ae.encode(x)))  # lambda 0 = D(E(x)) exactly
        assert torch.equal(r.reconstruction, r.frames[:, 0]) and (r.lambdas[:, 0] == 0).all()
        assert torch.allclose(r.preds, torch.sigmoid(clf(r.frames.flatten(0, 1))[:, 1]).view(3, 5), atol=1e-6)
    # the gradient taken on x itself (not on D(z)) is another direction: the test can tell them apart
    xg = x.clone().requires_grad_(True)
    gx = torch.autograd.grad(torch.sigmoid(clf(xg)[:, 1]).sum(), xg)[0]
    with torch.no_grad():
        assert not torch.allclose(ae.encode(gx), g, atol=1e-3)
    assert torch.allclose(r.recon_error, (x - r.reconstruction).abs().flatten(1).mean(1))


def test_prediction_is_monotone_and_the_relative_drop_stops_the_search():
    ae, clf = ToyAE(tanh=False).eval(), Linear().eval()
    x = _images(4)
    r = LatentShift(clf, ae).attribute(x, 0, search="latentshift", max_lambda=1e6, drop=0.3)
    k = (r.search_lambdas[None] == r.stop_lambda[:, None]).int().argmax(1)
    for b in range(4):
        path = r.search_preds[b, :k[b] + 1]
        assert (path.diff() < 0).all()  # a linear classifier on a linear decoder: strictly falling
        p0 = r.search_preds[b, 0]
        assert r.search_preds[b, k[b]] <= 0.7 * p0 < r.search_preds[b, k[b] - 1]  # the first grid lambda at -30%
    assert r.rule == ["drop"] * 4 and r.reached.all()
    assert (r.stop_lambda < 0).all() and (r.lambdas.diff(dim=1) < 0).all()  # frames go from 0 down to the stop
    assert torch.allclose(r.preds[:, -1], r.search_preds[torch.arange(4), k], atol=1e-6)


@pytest.mark.parametrize("rule", ["drop_abs", "min_pred", "max_lambda", "pixel_change"])
def test_each_goal_or_limit_rule_fires_where_built(rule):
    ae, clf = ToyAE(tanh=False).eval(), Linear().eval()
    x = _images(2)
    kw = {"drop": None, "stop_on_rise": False, "search": torch.linspace(0, 40, 801), "max_lambda": 40.0}
    kw.update({"drop_abs": {"drop_abs": 0.1}, "min_pred": {"min_pred": 0.2}, "max_lambda": {"max_lambda": 3.0},
               "pixel_change": {"max_pixel_change": 0.02}}[rule])
    r = LatentShift(clf, ae).attribute(x, 2, **kw)
    assert r.rule == [rule] * 2
    p, lam = r.search_preds, r.search_lambdas
    k = (lam[None] == r.stop_lambda[:, None]).int().argmax(1)
    for b in range(2):
        if rule == "drop_abs":
            assert p[b, 0] - p[b, k[b]] >= 0.1 > p[b, 0] - p[b, k[b] - 1]
        elif rule == "min_pred":
            assert p[b, k[b]] < 0.2 <= p[b, k[b] - 1]
        elif rule == "max_lambda":
            assert r.stop_lambda[b] == -3.0 and lam[-1] == -3.0
        else:  # the last grid lambda within the cap: sum |x0 - x| <= 0.02 sum |x0| there, above it one step on
            x0 = r.reconstruction[b]
            z, g = _grad_on_reconstruction(ae, clf, x[b:b + 1], 2)
            with torch.no_grad():
                change = [(ae.decode(z + lam[i] * g) - x0).abs().sum() for i in (k[b], k[b] + 1)]
            assert change[0] <= 0.02 * x0.abs().sum() < change[1]


def test_the_rise_rule_stops_at_the_lowest_prediction():
    ae = ToyAE(tanh=False).eval()
    x = _images(1)
    w = torch.randn(16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        u0 = float(ae.decode(ae.encode(x)).flatten(1) @ w)
    clf = Bowl(w, u0 - 1.0).eval()  # logit 1 at lambda 0, 0 where w . x = m, rising after
    z, g = _grad_on_reconstruction(ae, clf, x, 0)
    with torch.no_grad():
        slope = float((ae.decode(g) - ae.decode(torch.zeros_like(g))).flatten(1) @ w)  # d(w . x)/d lambda
    cross = 1.0 / slope  # |lambda| where w . x reaches m
    r = LatentShift(clf, ae).attribute(x, 0, drop=None, search=torch.linspace(0, 2 * cross, 101),
                                       max_lambda=2 * cross, output="logits")  # logit 1 would pass for a probability
    assert r.rule == ["rise"]
    k = int((r.search_lambdas == r.stop_lambda[0]).int().argmax())
    p = r.search_preds[0]
    assert (p[:k + 1].diff() < 0).all() and p[k + 1] > p[k]  # monotone down to the stop, rising right after it
    assert abs(abs(float(r.stop_lambda[0])) - cross) <= 2 * cross / 100 + 1e-9


def test_double_sigmoid_guard():
    ae, clf = ToyAE().eval(), Linear().eval()
    x = _images()
    kw = {"search": "latentshift", "max_lambda": 1e5}
    logits = LatentShift(clf, ae).attribute(x, 0, **kw)
    with pytest.warns(UserWarning, match="read as probabilities"):
        probs = LatentShift(Probs(clf).eval(), ae).attribute(x, 0, **kw)
    assert logits.output == "logits" and probs.output == "probs"  # detected: no second sigmoid
    assert torch.allclose(logits.search_preds, probs.search_preds, atol=1e-6, equal_nan=True)
    assert torch.equal(logits.stop_lambda, probs.stop_lambda)
    explicit = LatentShift(Probs(clf).eval(), ae).attribute(x, 0, output="probs", **kw)
    assert torch.allclose(explicit.search_preds, logits.search_preds, atol=1e-6, equal_nan=True)
    with pytest.raises(ValueError, match="outside \\[0, 1\\].*logits"):
        LatentShift(clf, ae).attribute(x * 0 + 0.5, 0, output="probs", **kw)  # logits called probabilities
    squashed = LatentShift(Probs(clf).eval(), ae).attribute(x, 0, output="logits", **kw)
    assert squashed.search_preds.nan_to_num(1.0).min() >= 0.5  # what the guard prevents: sigmoid(p) in [0.5, 0.731]


def test_batched_equals_one_at_a_time_and_chunks_change_nothing(one_thread):
    torch.manual_seed(0)
    ae = ToyAE(k=6).eval()
    clf = nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 2)).eval()
    x = _images(6, seed=1)
    ls = LatentShift(clf, ae)
    target = torch.tensor([0, 1, 0, 1, 0, 1])
    kw = {"search": "latentshift", "max_lambda": 3e4, "frames": 6, "output": "logits", "drop": 0.5}
    whole = ls.attribute(x, target, **kw)
    chunked = ls.attribute(x, target, internal_batch_size=7, **kw)
    singles = [ls.attribute(x[i:i + 1], int(target[i]), **kw) for i in range(6)]
    assert torch.allclose(whole.frames, chunked.frames, atol=1e-5)
    assert torch.equal(whole.stop_lambda, chunked.stop_lambda) and whole.rule == chunked.rule
    assert torch.equal(whole.stop_lambda, torch.cat([s.stop_lambda for s in singles]))
    assert whole.rule == [s.rule[0] for s in singles]
    for f in ("frames", "preds", "map", "reconstruction", "search_preds"):
        one = torch.cat([getattr(s, f) for s in singles])
        assert torch.allclose(getattr(whole, f), one, atol=1e-5, equal_nan=True), f
    assert (whole.stop_lambda != 0).any()  # the search did move
    full = ls.attribute(x, target, early_exit=False, **kw)  # the whole grid in one decode call
    assert not full.search_preds.isnan().any() and whole.search_preds.isnan().any()  # the early exit skipped some
    assert torch.equal(full.stop_lambda, whole.stop_lambda) and full.rule == whole.rule
    assert torch.allclose(full.frames, whole.frames, atol=1e-5)
    seen = ~whole.search_preds.isnan()
    assert torch.allclose(full.search_preds[seen], whole.search_preds[seen], atol=1e-5)


def test_maps_and_presets():
    frames = torch.zeros(1, 3, 1, 2, 2)
    frames[0, 1, 0, 0, 0] = 0.5
    frames[0, 2, 0, 0, 0] = 0.2
    frames[0, 2, 0, 1, 1] = -0.3
    assert torch.allclose(shift_map(frames, "max")[0], torch.tensor([[0.5, 0], [0, 0.3]]))
    assert torch.allclose(shift_map(frames, "last")[0], torch.tensor([[0.2, 0], [0, 0.3]]))
    assert torch.allclose(shift_map(frames, "int")[0], torch.tensor([[0.4, 0], [0, 0.15]]))  # (0.5 + 0.3) / 2
    assert lambda_grid("latentshift", 50)[:6].tolist() == [0, 10, 21, 34, 48, 50]  # lambda - 10 + lambda // 10
    g = lambda_grid("gifsplanation", 1000)
    assert g[:12].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20] and g[-1] == 1000 and len(g) == 110
    ae, clf = ToyAE().eval(), Linear().eval()
    for preset in (PAPER, GIFSPLANATION, LATENTSHIFT):
        r = LatentShift(clf, ae).attribute(_images(2), 0, **preset)
        assert r.frames.shape == (2, 10, 1, 4, 4) and r.map.shape == (2, 4, 4)


def test_callable_target_and_raising():
    ae, clf = ToyAE(tanh=False).eval(), Linear().eval()
    x = _images(2)
    a = LatentShift(clf, ae).attribute(x, 1, search="latentshift", max_lambda=1e5)
    b = LatentShift(clf, ae).attribute(x, lambda out: out[:, 1], search="latentshift", max_lambda=1e5)
    assert torch.allclose(a.search_preds, b.search_preds, equal_nan=True) and torch.equal(a.stop_lambda, b.stop_lambda)
    up = LatentShift(clf, ae).attribute(x, 1, direction="raise", search="latentshift", max_lambda=1e5, drop=0.1)
    assert (up.stop_lambda > 0).all() and (up.preds[:, -1] > up.preds[:, 0]).all()


def test_bad_input_is_named():
    ae, clf = ToyAE().eval(), Linear(outputs=3).eval()
    x = _images(2)
    ls = LatentShift(clf, ae)
    with pytest.raises(ValueError, match="target 3 is not an output of the classifier: it has 3 outputs"):
        ls.attribute(x, 3)
    with pytest.raises(ValueError, match="outside the autoencoder's input range \\[0.0, 1.0\\]"):
        ls.attribute(x * 3, 0)
    bad = ToyAE().eval()
    bad.decode = lambda z: torch.zeros(z.shape[0], 1, 5, 5)
    with pytest.raises(ValueError, match="decode\\(encode\\(x\\)\\) has shape \\(2, 1, 5, 5\\), expected the input"):
        LatentShift(clf, bad).attribute(x, 0)
    with pytest.raises(ValueError, match="training mode"):
        LatentShift(Linear().train(), ae).attribute(x, 0)
    with pytest.raises(ValueError, match="map must be one of"):
        ls.attribute(x, 0, map="mean")
    with pytest.raises(ValueError, match="frames must be an int >= 2"):
        ls.attribute(x, 0, frames=1)
    with pytest.raises(ValueError, match="encode\\(x\\) -> z and decode"):
        LatentShift(clf, object())
    with pytest.raises(ValueError, match="one int per image"):
        ls.attribute(x, torch.tensor([0, 1, 2]))
