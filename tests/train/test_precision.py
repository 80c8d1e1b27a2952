"""Training precision: what ``auto`` resolves to (detection forced both ways), and what bf16 changes in a run."""

import json

import pytest
import torch
import train_fixtures as tf

from paperzoo.train import TrainConfig, Trainer
from paperzoo.train import precision as P


@pytest.fixture
def bf16_units(monkeypatch):
    def force(units):
        monkeypatch.setattr(P, "cpu_bf16_units", lambda: list(units))
    return force


def test_auto_is_bf16_on_a_cpu_with_bf16_units(bf16_units):
    bf16_units(["avx512_bf16"])
    p = P.resolve_precision("auto", "cpu")
    assert (p.used, p.requested) == ("bf16", "auto") and "avx512_bf16" in p.reason


def test_auto_is_fp32_on_a_cpu_without_them(bf16_units):
    bf16_units([])
    p = P.resolve_precision("auto", "cpu")
    assert p.used == "fp32" and "emulated" in p.reason


def test_explicit_choices_are_honoured(bf16_units):
    bf16_units([])
    assert P.resolve_precision("fp32", "cpu").used == "fp32"
    slow = P.resolve_precision("bf16", "cpu")
    assert slow.used == "bf16" and "slower" in slow.reason


def test_this_machines_detection_agrees_with_its_flags():
    from paperzoo.report.machine import cpu_flags

    flags = set(cpu_flags())
    assert bool(P.cpu_bf16_units()) == bool(flags & {"avx512_bf16", "amx_bf16"})


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match=r"fp32.*bf16.*auto"):
        TrainConfig(precision="fp16")
    with pytest.raises(ValueError, match="expected one of"):
        P.resolve_precision("half", "cpu")


def test_bf16_runs_forward_and_eval_under_autocast_with_fp32_state():
    """Matmuls in bf16 in the loss and eval functions; parameters, gradients and Adam moments stay fp32."""
    seen = {}

    def loss_fn(model, batch):
        x, y = batch
        logits = model(x)
        seen["train"] = (torch.is_autocast_enabled("cpu"), logits.dtype)
        return torch.nn.functional.cross_entropy(logits.float(), y)

    def eval_fn(model):
        seen["eval"] = (torch.is_autocast_enabled("cpu"), model(torch.randn(2, 8)).dtype)
        return {}

    torch.manual_seed(0)
    model = tf.MLP()
    trainer = Trainer(model, TrainConfig(steps=3, batch_size=16, device="cpu", precision="bf16", eval_every=0),
                      tf.make_data(), loss_fn, eval_fn=eval_fn, progress=False)
    out = trainer.fit()
    assert seen == {"train": (True, torch.bfloat16), "eval": (True, torch.bfloat16)}
    assert out["precision"]["used"] == "bf16"
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    moments = [v for s in trainer.optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.ndim]
    assert moments and all(v.dtype == torch.float32 for v in moments)


def test_fp32_runs_without_autocast():
    seen = []

    def loss_fn(model, batch):
        seen.append(torch.is_autocast_enabled("cpu"))
        return tf.loss_fn(model, batch)

    Trainer(tf.MLP(), TrainConfig(steps=2, batch_size=16, device="cpu"), tf.make_data(), loss_fn,
            progress=False).fit()
    assert seen == [False, False]


def test_bf16_training_lowers_the_loss_like_fp32():
    """Same seed, same data: the bf16 run's loss curve stays within 0.05 of fp32's and falls as much."""
    curves = {}
    for prec in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = tf.MLP(dropout=0.0)
        losses = []

        def loss_fn(m, batch, losses=losses):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(m(x).float(), y)
            losses.append(float(loss.detach()))
            return loss

        Trainer(model, TrainConfig(steps=30, batch_size=32, lr=1e-2, device="cpu", precision=prec),
                tf.make_data(), loss_fn, progress=False).fit()
        curves[prec] = torch.tensor(losses)
    assert curves["fp32"][-5:].mean() < 0.7 * curves["fp32"][:5].mean()  # it learns at all
    assert (curves["bf16"] - curves["fp32"]).abs().max() < 0.05, (curves["bf16"] - curves["fp32"]).abs().max()


def test_recipe_precision_reaches_every_training_config_and_the_run_record(tmp_path, bf16_units):
    from paperzoo.papers.funnel.recipe import PRESETS
    from paperzoo.recipes import pick, start

    _, p = pick(PRESETS, "tiny", "funnel", precision="auto")
    assert p.train.precision == "auto" and p.finetune.precision == "auto"
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        pick(PRESETS, "tiny", "funnel", precision="fp16")
    bf16_units(["amx_bf16"])
    _, _, run_dir = start("funnel", PRESETS, "tiny", None, tmp_path / "run", precision="auto")
    rec = json.loads((run_dir / "config.json").read_text())["config"]["precision"]
    assert rec["used"] == "bf16" and rec["requested"] == "auto" and "amx_bf16" in rec["reason"]
    bf16_units([])  # the same folder resolving to another precision is another config: refused
    with pytest.raises(ValueError, match="different config"):
        start("funnel", PRESETS, "tiny", None, tmp_path / "run", precision="auto")
