"""TrainConfig.compile: loss_fn gets the compiled model; checkpoints, resume and results stay those of the plain one."""

import pytest
import torch
import train_fixtures as tf

from paperzoo.train import TrainConfig


@pytest.fixture
def eager_compile(monkeypatch):
    """torch.compile with dynamo's "eager" backend (traces the graph, no code generation: seconds, same numbers),
    recording what was compiled."""
    seen = []
    real = torch.compile

    def compile_(model, **kw):
        seen.append(model)
        return real(model, backend="eager", **kw)

    monkeypatch.setattr(torch, "compile", compile_)
    return seen


def _cfg(**kw):
    return TrainConfig(**{"steps": 8, "batch_size": 16, "lr": 1e-2, "eval_every": 0, "ckpt_every": 4, "log_every": 2,
                          "device": "cpu", **kw})


def test_compiled_training_matches_eager_and_resumes_from_plain_state(eager_compile, tmp_path):
    torch._dynamo.reset()
    plain, a = tf.train(_cfg(), tmp_path / "plain")
    compiled, b = tf.train(_cfg(compile=True), tmp_path / "compiled")
    assert len(eager_compile) == 1 and isinstance(eager_compile[0], tf.MLP)
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    for (k, x), y in zip(plain.state_dict().items(), compiled.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=0, msg=k)
    ckpt = torch.load(sorted((tmp_path / "compiled").glob("ckpt-*.pt"))[-1], weights_only=False)
    assert not any("_orig_mod" in k for k in ckpt["model"]), "a checkpoint must hold the plain module's keys"
    # a compiled run resumes an eager run's mid-way checkpoint and ends where the eager run ended
    half = tmp_path / "half"
    half.mkdir()
    (half / "ckpt-4.pt").write_bytes((tmp_path / "plain" / "ckpt-4.pt").read_bytes())
    resumed, c = tf.train(_cfg(compile=True), half, resume=True)
    assert c["step"] == 8 and c["loss"] == pytest.approx(a["loss"], abs=1e-6)
    for (k, x), y in zip(plain.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=0, msg=k)


def test_compile_must_be_a_bool():
    with pytest.raises(ValueError, match="TrainConfig.compile: expected a bool"):
        TrainConfig(compile="yes")


def test_recipe_compile_reaches_every_training_config_that_has_the_field():
    from paperzoo.papers.funnel.recipe import PRESETS
    from paperzoo.recipes import compiling, pick

    _, p = pick(PRESETS, "tiny", "funnel")
    assert p.train.compile is False
    _, p = pick(PRESETS, "tiny", "funnel", compile=True)
    assert p.train.compile is True
    assert not hasattr(p.finetune, "compile")  # a config without the field is left as it is
    with compiling():  # what `paperzoo reproduce --compile` does: every recipe, whatever its run() forwards
        _, q = pick(PRESETS, "tiny", "funnel")
        _, r = pick(PRESETS, "tiny", "funnel", compile=False)  # an explicit choice wins
    assert q.train.compile is True and r.train.compile is False
    assert pick(PRESETS, "tiny", "funnel")[1].train.compile is False  # and the block ends
    with pytest.raises(ValueError, match="compile: expected a bool"):
        pick(PRESETS, "tiny", "funnel", compile="yes")
