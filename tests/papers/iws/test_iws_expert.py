"""The model of the expert: the batched ensemble equals 50 sequential official-style trainings, the bootstrap, the
hand-written backward pass, and the official early stopping applied per member."""

import numpy as np
import pytest
import torch

from paperzoo.bench.iws import sequential_fit, sequential_predict
from paperzoo.papers.iws import BatchedMLP, EnsembleConfig, ExpertModel, MLPConfig


def _answers(n=30, dim=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    y = (x[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


@pytest.mark.parametrize("rule", ["first", "previous"])
def test_batched_ensemble_equals_sequential_official_training(one_thread, rule):
    x, y = _answers()
    cfg = EnsembleConfig(members=4, mlp=MLPConfig(epochs=60, early_stop_against=rule, tol=1e-3))
    w = np.where(np.arange(len(y)) % 3 == 0, 0.5, 1.0).astype(np.float32)  # five-level weights 0.5 / 1
    model = ExpertModel(x.shape[1], 1, cfg, seed=3)
    counts = model.bootstrap_counts(torch.zeros(len(y), dtype=torch.int64))
    init = model.net.flat.clone()
    model.net.fit(torch.as_tensor(x), torch.as_tensor(y), counts * torch.as_tensor(w)[None, :], norm=counts.sum(1))
    seq = sequential_fit(init, model.net.shapes, torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(w), counts,
                         cfg.mlp)
    probe = torch.randn(40, x.shape[1])
    np.testing.assert_allclose(model.net.predict(probe).T.numpy(), sequential_predict(seq, probe).numpy(), atol=2e-5)


def test_bootstrap_draws_n_rows_from_the_members_family():
    fam = torch.tensor([0, 1, 0, 0, 1, 0, 0])
    m = ExpertModel(4, 2, EnsembleConfig(members=5), seed=0)
    c = m.bootstrap_counts(fam)
    assert c.shape == (10, 7)
    assert torch.equal(c[:5].sum(1), torch.full((5,), 5.0)) and torch.equal(c[5:].sum(1), torch.full((5,), 2.0))
    assert (c[:5][:, fam == 1] == 0).all() and (c[5:][:, fam == 0] == 0).all()
    assert len({tuple(r.tolist()) for r in c[:5]}) > 1  # members resample differently
    empty = m.bootstrap_counts(torch.zeros(3, dtype=torch.int64))  # family 1 has no answers yet
    assert (empty[5:] == 0).all()


@pytest.mark.parametrize("out", [1, 3])
def test_hand_written_backward_matches_autograd(out):
    g = torch.Generator().manual_seed(0)
    net = BatchedMLP(4, 6, out, MLPConfig(hidden=(5, 3)), g)
    x = torch.randn(9, 6)
    t = torch.rand(9) if out == 1 else torch.softmax(torch.randn(4, 9, out), -1)
    w, norm = torch.rand(4, 9), torch.rand(4) + 1
    flat = net.flat.clone().requires_grad_(True)
    (ga,) = torch.autograd.grad(net.member_losses(x, t, w, norm, flat=flat).sum(), flat)
    acts, z = net._forward(x, net.flat)
    _, dz = net._loss_and_dz(z, t, w, norm)
    torch.testing.assert_close(net._backward(x, net.flat, acts, dz), ga, atol=1e-6, rtol=1e-5)


def test_early_stopping_is_per_member_and_official():
    x, y = _answers(20, 5)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    # tol 10: no epoch ever improves enough; the official rule steps at epochs 1..10 and stops at epoch 11
    net = BatchedMLP(3, 5, 1, MLPConfig(epochs=200, tol=10.0), torch.Generator().manual_seed(0))
    steps = net.fit(xt, yt, torch.ones(3, 20))
    assert steps.tolist() == [10, 10, 10]
    # a member with no rows is never trained and keeps its weights while the others train on
    net = BatchedMLP(3, 5, 1, MLPConfig(epochs=50), torch.Generator().manual_seed(0))
    before = net.flat.clone()
    w = torch.ones(3, 20)
    w[1] = 0
    steps = net.fit(xt, yt, w)
    assert steps.tolist() == [50, 0, 50]
    assert torch.equal(net.flat[1], before[1]) and not torch.equal(net.flat[0], before[0])


def test_expert_learns_the_answers_and_spreads_where_it_has_none(one_thread):
    x, y = _answers(60, 8)
    m = ExpertModel(8, 1, EnsembleConfig(members=10), seed=0)
    m.fit(x, y, np.ones(60, np.float32), np.zeros(60, np.int64), seed=1)
    p = m.predict(x, np.zeros(60, np.int64))
    assert p.shape == (60, 10)
    assert ((p.mean(1) > 0.5) == (y > 0.5)).mean() > 0.8
    far = m.predict(x * 8, np.zeros(60, np.int64))  # far from the data the members disagree more
    assert far.std(1).mean() > p.std(1).mean()
    with pytest.raises(ValueError, match="labels of answers must lie in"):
        m.fit(x, y * 2, np.ones(60, np.float32), np.zeros(60, np.int64))
    with pytest.raises(ValueError, match="family indices"):
        m.fit(x, y, np.ones(60, np.float32), np.ones(60, np.int64))
