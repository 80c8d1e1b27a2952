"""The Trainer's checks and checkpoint helpers for expert-sharded parameters (one process; the 2-process training
itself is tested in tests/papers/switch/test_ep_trainer.py)."""

import pytest
import torch
import train_fixtures as tf

from paperzoo.train import TrainConfig, Trainer
from paperzoo.train.checkpoint import (
    consolidate_experts,
    expert_shard_path,
    prune_expert_shards,
    save_checkpoint,
)
from paperzoo.train.distributed import expert_parameters, mark_expert_parallel


def test_marked_parameters_are_found_and_must_match_the_world():
    model = tf.MLP(0.0)
    mark_expert_parallel([model.inp.weight], (0, 1))
    mark_expert_parallel([model.out.weight], (0,))  # one rank holds every expert: an ordinary parameter
    assert list(expert_parameters(model)) == ["inp.weight"]
    with pytest.raises(ValueError, match=r"inp.weight is sharded over ranks \[0, 1\] but training runs on 1"):
        Trainer(model, TrainConfig(steps=1, batch_size=4, device="cpu"), tf.make_data(8), tf.loss_fn,
                progress=False)


def test_one_expert_parallel_group_for_every_layer():
    model = tf.MLP(0.0)
    mark_expert_parallel([model.inp.weight], (0, 1))
    mark_expert_parallel([model.out.weight], (0, 2))
    with pytest.raises(ValueError, match="different expert-parallel groups"):
        Trainer(model, TrainConfig(steps=1, batch_size=4, device="cpu"), tf.make_data(8), tf.loss_fn,
                progress=False)


def test_shards_without_their_main_checkpoint_are_pruned(tmp_path):
    for step in (1, 2, 3):
        torch.save({"step": step, "model": {}}, expert_shard_path(tmp_path, step, 0, 2))
        torch.save({"step": step, "model": {}}, expert_shard_path(tmp_path, step, 1, 2))
    for step in (2, 3):
        save_checkpoint({"step": step, "model": {}}, tmp_path, step, keep_last=5)
    prune_expert_shards(tmp_path, rank=1)  # only this rank's: rank 0 prunes its own
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-1.experts-0-of-2.pt", "ckpt-2.experts-0-of-2.pt", "ckpt-2.experts-1-of-2.pt", "ckpt-2.pt",
        "ckpt-3.experts-0-of-2.pt", "ckpt-3.experts-1-of-2.pt", "ckpt-3.pt"]


def test_consolidate_joins_shards_in_rank_order(tmp_path):
    w = torch.randn(4, 3, 5)
    save = {"step": 7, "model": {"router": torch.ones(2)}, "experts": {"world_size": 2, "names": ["w"]}}
    for r in range(2):
        torch.save({"step": 7, "model": {"w": w[2 * r:2 * r + 2]}}, expert_shard_path(tmp_path, 7, r, 2))
    path = save_checkpoint(save, tmp_path, 7, keep_last=1)
    whole = consolidate_experts(path)
    assert torch.equal(whole["w"], w) and torch.equal(whole["router"], torch.ones(2))
    plain = save_checkpoint({"step": 8, "model": {"a": w}}, tmp_path / "plain", 8, keep_last=1)
    assert torch.equal(consolidate_experts(plain)["a"], w)  # a checkpoint without experts: its model as is
