"""The loop itself: accumulation, schedules, no-decay groups, divergence, metrics, evaluation, bad input."""

import json
import math

import pytest
import torch
import train_fixtures as tf
from torch import nn
from torch.utils.data import Dataset

from paperzoo.train import (
    TrainConfig,
    Trainer,
    TrainingDivergedError,
    build_optimizer,
    build_scheduler,
    find_checkpoints,
    load_checkpoint,
    lr_factor,
    no_decay_names,
    param_groups,
    seed_everything,
)
from paperzoo.train.batches import BatchOrder, to_device

BASE = dict(steps=6, batch_size=32, lr=1e-2, warmup_steps=1, log_every=1, seed=1)


def test_grad_accum_equals_big_batch():
    big, _ = tf.train(TrainConfig(**BASE), dropout=0.0)
    acc, _ = tf.train(TrainConfig(**dict(BASE, grad_accum=4)), dropout=0.0)
    for k, v in tf.params(big).items():
        torch.testing.assert_close(tf.params(acc)[k], v, rtol=1e-5, atol=1e-6)
    seed_everything(BASE["seed"])
    init = tf.params(tf.MLP(0.0))
    assert (tf.params(big)["inp.weight"] - init["inp.weight"]).abs().max() > 1e-3


def test_seed_fixes_everything_and_changes_with_seed():
    a, _ = tf.train(TrainConfig(**BASE))
    b, _ = tf.train(TrainConfig(**BASE))
    c, _ = tf.train(TrainConfig(**dict(BASE, seed=2)))
    assert torch.equal(a.inp.weight, b.inp.weight)
    assert not torch.equal(a.inp.weight, c.inp.weight)


def test_data_order_is_a_permutation_per_epoch_and_resumable():
    order = BatchOrder(10, 4, seed=0, drop_last=True)
    first = [order.next_batch() for _ in range(2)]
    assert len(torch.cat(first).unique()) == 8  # epoch 0 uses 8 distinct samples, drops 2
    state = order.state_dict()
    rest = [order.next_batch() for _ in range(5)]
    again = BatchOrder(10, 4, seed=0, drop_last=True)
    again.load_state_dict(state)
    assert all(torch.equal(x, again.next_batch()) for x in rest)
    keep = BatchOrder(10, 4, seed=0, drop_last=False)
    assert [len(keep.next_batch()) for _ in range(4)] == [4, 4, 2, 4]


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_schedules(schedule):
    cfg = TrainConfig(steps=10, warmup_steps=4, schedule=schedule, min_lr_ratio=0.1, lr=2.0)
    f = [lr_factor(s, cfg) for s in range(11)]
    assert f[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert f[4] == pytest.approx(1.0)
    if schedule == "constant":
        assert f[4:] == pytest.approx([1.0] * 7)
    else:
        assert f[10] == pytest.approx(0.1)  # the end value after the last step
        assert all(x > y for x, y in zip(f[4:], f[5:], strict=False))
    if schedule == "cosine":
        assert f[7] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 3 / 6)))
    if schedule == "linear":
        assert f[7] == pytest.approx(0.1 + 0.9 * 0.5)
    # the LambdaLR gives each group its own base lr times the factor
    w = nn.Parameter(torch.zeros(2, 2))
    opt = build_optimizer([{"params": [w]}, {"params": [nn.Parameter(torch.zeros(2, 2))], "lr": 1.0}], cfg)
    sched = build_scheduler(opt, cfg)
    seen = []
    for _ in range(10):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    assert seen[0] == pytest.approx([0.5, 0.25]) and seen[9][0] == pytest.approx(2.0 * f[9])


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.pos = nn.Parameter(torch.zeros(3, 4))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 4))
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)

    def no_weight_decay(self):
        return {"pos"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def no_weight_decay(self):
        return {"block.cls_token"}


def test_no_decay_groups():
    net = Net()
    assert no_decay_names(net) == {
        "block.embed.weight", "block.proj.bias", "block.norm.weight", "block.norm.bias", "block.pos",
        "block.cls_token", "head.bias",
    }
    groups = param_groups(net, 0.1)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert {id(p) for p in groups[0]["params"]} == {id(net.block.proj.weight), id(net.head.weight)}
    assert all(p.requires_grad for g in groups for p in g["params"])  # frozen layer left out
    opt = build_optimizer(net, TrainConfig(weight_decay=0.1))
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


def test_custom_param_groups_layerwise_lr():
    seed_everything(0)
    model = tf.MLP()
    groups = [{"params": list(model.inp.parameters()) + list(model.norm.parameters()), "lr": 1e-3},
              {"params": list(model.out.parameters())}]
    trainer = Trainer(model, TrainConfig(**dict(BASE, warmup_steps=0, schedule="constant")), tf.make_data(),
                      tf.loss_fn, param_groups=groups, progress=False)
    assert [g["lr"] for g in trainer.optimizer.param_groups] == [1e-3, 1e-2]
    with pytest.raises(ValueError, match="not both"):
        Trainer(model, TrainConfig(), tf.make_data(), tf.loss_fn, param_groups=groups,
                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path):
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        out = tf.loss_fn(model, batch)[0]
        return out * float("nan") if calls["n"] == 7 else out

    cfg = TrainConfig(**dict(BASE, steps=20, ckpt_every=5))
    with pytest.raises(TrainingDivergedError, match="step 7") as err:
        tf.train(cfg, tmp_path, loss=loss)
    assert err.value.step == 7 and "ckpt-5.pt" in str(err.value)
    assert [s for s, _ in find_checkpoints(tmp_path)] == [5]
    state = load_checkpoint(tmp_path / "ckpt-5.pt")
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    last = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert last == {"event": "diverged", "step": 7, "time": last["time"]}


def test_nonfinite_gradient_stops():
    def loss(model, batch):  # finite value, but d sqrt(x)/dx at x=0 is inf, times 0 -> nan gradients
        return tf.loss_fn(model, batch)[0] + torch.sqrt(model.inp.weight.abs().sum() * 0.0)

    with pytest.raises(TrainingDivergedError, match="step 1: gradient norm is nan"):
        tf.train(TrainConfig(**BASE), loss=loss)


def test_metrics_jsonl_and_eval(tmp_path):
    evals = []

    def eval_fn(model):
        assert not model.training and not torch.is_grad_enabled()
        evals.append(1)
        torch.rand(3)  # consuming RNG in eval must not change training
        return {"score": torch.tensor(0.5), "n": len(evals)}

    cfg = TrainConfig(**dict(BASE, steps=7, eval_every=3, log_every=2))
    model, result = tf.train(cfg, tmp_path, eval_fn=eval_fn)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in lines if r["event"] == "train"]
    ev = [r for r in lines if r["event"] == "eval"]
    assert [r["step"] for r in train] == [2, 4, 6, 7]
    assert [r["step"] for r in ev] == [3, 6, 7] and ev[-1]["n"] == 3
    for r in train:
        assert {"loss", "lr", "samples_per_s", "time", "acc", "epoch", "grad_norm"} <= r.keys()
        assert r["samples_per_s"] > 0 and math.isfinite(r["loss"])
    assert result["eval"] == {"score": 0.5, "n": 3.0} and result["step"] == 7
    assert result["steps_per_s"] > 0
    plain, _ = tf.train(cfg)
    assert torch.equal(plain.inp.weight, model.inp.weight)


def test_to_device_nested():
    batch = {"x": torch.ones(2), "pair": (torch.zeros(1), [torch.ones(1), "text"]), "k": 3}
    moved = to_device(batch, torch.device("cpu"))
    assert moved["pair"][1][1] == "text" and moved["k"] == 3 and torch.equal(moved["x"], batch["x"])


class Dicts(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(8, generator=g), "y": i % 3}


def test_generic_dataset_and_collate():
    seed_everything(0)
    model = tf.MLP()

    def loss(m, batch):
        return nn.functional.cross_entropy(m(batch["x"]), batch["y"])

    seen = []

    def collate(items):
        seen.append(len(items))
        return torch.utils.data.default_collate(items)

    result = Trainer(model, TrainConfig(steps=3, batch_size=8, grad_accum=2), Dicts(), loss, collate_fn=collate,
                     progress=False).fit()
    assert result["step"] == 3 and seen == [4] * 6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(steps=0), "steps: expected an int >= 1"),
        (dict(steps=2.5), "steps"),
        (dict(batch_size=-1), "batch_size"),
        (dict(lr=0.0), "lr"),
        (dict(schedule="step"), "schedule: expected one of"),
        (dict(betas=(0.9, 1.0)), "betas"),
        (dict(warmup_steps=20, steps=10), "warmup_steps"),
        (dict(min_lr_ratio=2.0), "min_lr_ratio"),
        (dict(grad_clip=0.0), "grad_clip"),
        (dict(grad_accum=0), "grad_accum"),
        (dict(batch_size=10, grad_accum=4), "multiple of grad_accum"),
        (dict(keep_last=0), "keep_last"),
        (dict(device="tpu"), "device"),
        (dict(precision="fp8"), "precision"),
        (dict(drop_last="yes"), "drop_last"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


@pytest.mark.parametrize(
    "out, match",
    [
        (lambda loss: loss.detach().reshape(1).expand(4) * 1.0, "shape"),
        (lambda loss: (loss * 0).long(), "dtype"),
        (lambda loss: loss.detach(), "does not require grad"),
        (lambda loss: 1.0, "float"),
        (lambda loss: (loss, {"acc": "high"}), "metric 'acc'"),
    ],
)
def test_bad_loss_fn_output(out, match):
    seed_everything(0)
    model = tf.MLP()
    t = Trainer(model, TrainConfig(**BASE), tf.make_data(), lambda m, b: out(tf.loss_fn(m, b)[0]), progress=False)
    with pytest.raises(ValueError, match=match):
        t.fit()


def test_bad_trainer_input(tmp_path):
    model, data = tf.MLP(), tf.make_data(20)
    with pytest.raises(ValueError, match="at least batch_size=32"):
        Trainer(model, TrainConfig(**BASE), data, tf.loss_fn)
    Trainer(model, TrainConfig(**dict(BASE, drop_last=False)), data, tf.loss_fn)  # allowed without drop_last
    with pytest.raises(ValueError, match="at least world_size \\* grad_accum = 4"):
        Trainer(model, TrainConfig(**dict(BASE, drop_last=False, grad_accum=4)), tf.make_data(3), tf.loss_fn)
    with pytest.raises(ValueError, match="nn.Module"):
        Trainer(lambda x: x, TrainConfig(**BASE), tf.make_data(), tf.loss_fn)
    with pytest.raises(ValueError, match="TrainConfig"):
        Trainer(model, dict(BASE), tf.make_data(), tf.loss_fn)
    with pytest.raises(ValueError, match="map-style dataset"):
        Trainer(model, TrainConfig(**BASE), iter([1, 2]), tf.loss_fn)
    with pytest.raises(ValueError, match="out_dir"):
        Trainer(model, TrainConfig(**BASE), tf.make_data(), tf.loss_fn, progress=False).fit(resume=True)
    t = Trainer(model, TrainConfig(**BASE), tf.make_data(), tf.loss_fn, eval_fn=lambda m: [1.0], progress=False)
    with pytest.raises(ValueError, match="eval_fn"):
        t.fit()


def test_sigint_in_process_saves_and_restores_handlers(tmp_path):
    import os
    import signal

    before = signal.getsignal(signal.SIGINT)
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        if calls["n"] == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return tf.loss_fn(model, batch)

    with pytest.raises(SystemExit) as ex:
        tf.train(TrainConfig(**dict(BASE, steps=10, ckpt_every=None)), tmp_path, loss=loss)
    assert ex.value.code == 128 + signal.SIGINT
    assert [s for s, _ in find_checkpoints(tmp_path)] == [3]  # finished step 3, then saved
    assert signal.getsignal(signal.SIGINT) is before


def test_global_batch_must_divide_by_world_size(monkeypatch):
    from paperzoo.train import distributed, trainer

    monkeypatch.setattr(trainer.distributed, "setup", lambda spec: (distributed.DistInfo(0, 3), torch.device("cpu")))
    with pytest.raises(ValueError, match="multiple of world_size \\* grad_accum = 3 \\* 1, got 32"):
        Trainer(tf.MLP(), TrainConfig(**BASE), tf.make_data(), tf.loss_fn)


def test_bf16_autocast_runs():
    model, result = tf.train(TrainConfig(**dict(BASE, steps=2, precision="bf16")))
    assert result["step"] == 2 and math.isfinite(result["loss"]) and model.inp.weight.dtype == torch.float32


def test_loss_fn_with_a_step_parameter_gets_the_step_and_it_resumes(tmp_path):
    seen = []

    def loss_with_step(model, batch, step):
        seen.append(step)
        return tf.loss_fn(model, batch)

    def fit(resume):
        seed_everything(1)
        cfg = TrainConfig(**dict(BASE, ckpt_every=3))
        return Trainer(tf.MLP(0.0), cfg, tf.make_data(), loss_with_step, out_dir=tmp_path, progress=False).fit(
            resume=resume)

    fit(False)
    assert seen == [1, 2, 3, 4, 5, 6]
    for _, p in find_checkpoints(tmp_path)[1:]:  # keep the checkpoint at step 3 only
        p.unlink()
    seen.clear()
    fit(True)
    assert seen == [4, 5, 6]
