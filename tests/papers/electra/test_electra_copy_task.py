"""The copy task: the discriminator architecture must learn context (flag tokens that copy their left neighbour).

Measured (``docs/reports/electra/copy_task_sweep.py``, the README's table): with learned absolute positions (the
paper's, today's recipes) the discriminator sits at the constant predictor (AUC ~0.5) for hundreds of steps at any
learning rate tried; with RoPE at a learning rate of 1e-3 to 2e-3 it leaves that plateau within a few hundred.
"""

import pytest
import torch

from paperzoo.data.copy_task import copy_task
from paperzoo.papers.electra.copy_task import CopyTaskConfig, train_copy_task
from paperzoo.papers.electra.model import ElectraConfig

# the fast variant: tiny discriminator (emb 32, hidden 64, 2 layers), 100 ids, windows of 16, batch 64
FAST = CopyTaskConfig(steps=300, batch=64, seq_len=16, vocab_size=100, lr=2e-3, warmup=30, eval_every=300)
TODAY_LR = 2e-4  # the recipes' PRETRAIN_LR


def tiny(position: str) -> ElectraConfig:
    return ElectraConfig.preset("tiny", vocab_size=100, max_len=32, position=position)


def test_copy_task_has_no_context_free_signal():
    ids, mask, labels = copy_task(400, 32, 50, seed=3)
    prev = torch.cat([torch.full((400, 1), -1), ids[:, :-1]], 1)
    assert torch.equal(labels, ids == prev) and 0.12 < float(labels.float().mean()) < 0.16
    assert bool(mask.all()) and torch.equal(copy_task(400, 32, 50, seed=3)[0], ids)  # deterministic
    inner = ids[:, 1:-1]
    freq = torch.bincount(inner[labels[:, 1:-1]], minlength=50)[5:] / torch.bincount(inner.flatten(), minlength=50)[5:]
    assert float(freq.std() / freq.mean()) < 0.2  # every id is copied at the same rate: no id tells
    with pytest.raises(ValueError, match="rate"):
        copy_task(4, 16, 50, rate=1.5)


def test_rotary_discriminator_learns_the_copy_task_fast():
    r = train_copy_task(tiny("rotary").discriminator_config(), FAST, seed=0, threads=1)
    assert r["final_auc"] > 0.9, r


def test_todays_discriminator_does_not_learn_the_copy_task_fast():
    """Learned absolute positions at the recipes' rate: the constant predictor after the same steps."""
    from dataclasses import replace

    r = train_copy_task(tiny("learned").discriminator_config(), replace(FAST, lr=TODAY_LR), seed=0, threads=1)
    assert r["final_auc"] < 0.6, r


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copy_task_over_seeds_positions_decide(seed):
    """Every seed: RoPE learns the copy task within 300 steps at lr 2e-3 (AUC 0.99-1.00 at 300 for seeds 0-2; in a
    250-step run seed 1 was still at 0.55: where the plateau ends varies); learned absolute positions do not, at the
    same rate (0.49-0.56) or at the recipes' 2e-4."""
    from dataclasses import replace

    assert train_copy_task(tiny("rotary").discriminator_config(), FAST, seed=seed, threads=1)["final_auc"] > 0.9
    for lr in (FAST.lr, TODAY_LR):
        got = train_copy_task(tiny("learned").discriminator_config(), replace(FAST, lr=lr), seed=seed, threads=1)
        assert got["final_auc"] < 0.65, (lr, got)
