"""The Nerfies recipe: its variants at an equal budget, the warp-error measure on cases with a known answer, and a
tiny run that learns the validation views and writes its report."""

import json

import pytest
import torch

from paperzoo.papers.nerfies.recipe import (
    PRESETS,
    VARIANTS,
    eval_indices,
    run,
    variant_config,
    warp_error,
)


def test_variants_change_one_thing_at_an_equal_budget():
    p = PRESETS["small"]
    cfgs = {v: variant_config(p, v, 40, 1.7, 5.3) for v in VARIANTS}
    assert cfgs["static"][0].deformation == "none" and cfgs["translation"][0].deformation == "translation"
    assert all(cfgs[v][0].deformation == "se3" for v in VARIANTS if v not in ("static", "translation"))
    # plain fields: the window open at once, no regulariser; the full model: all three
    for v in ("static", "translation", "se3"):
        assert cfgs[v][0].warp.alpha_steps == 0 and cfgs[v][1] == {"elastic": False, "background": False}
    assert cfgs["nerfies"][0].warp.alpha_steps == round(0.32 * p.train.steps)
    assert cfgs["nerfies"][1] == {"elastic": True, "background": True}
    assert cfgs["no-c2f"][0].warp.alpha_steps == 0 and cfgs["no-c2f"][1] == cfgs["nerfies"][1]
    assert cfgs["no-elastic"][1] == {"elastic": False, "background": True}
    assert cfgs["no-background"][1] == {"elastic": True, "background": False}
    renders = {(c.render.num_coarse, c.render.num_fine, c.render.near, c.render.far) for c, _ in cfgs.values()}
    assert renders == {(24, 48, 1.7, 5.3)} and {c.num_images for c, _ in cfgs.values()} == {40}
    with pytest.raises(ValueError, match="unknown Nerfies variant"):
        variant_config(p, "nope", 40, 1.7, 5.3)


def test_eval_indices_spread_over_the_frames():
    assert eval_indices(40, 8) == [0, 6, 11, 17, 22, 28, 33, 39]
    assert eval_indices(4, 8) == [0, 1, 2, 3] and eval_indices(5, 1) == [0]


def _true(x, f):  # a known warp: frame f translates by f * (0.1, 0, 0); frame 0 the identity
    return x + f[:, None].float() * torch.tensor([0.1, 0.0, 0.0])


def test_warp_error_is_zero_for_the_true_warp_and_any_template_map():
    g = torch.Generator().manual_seed(0)
    x, f = torch.randn(50, 3, generator=g), torch.randint(1, 4, (50,), generator=g)
    r = warp_error(_true, _true, x, f)
    assert r["warp_error"] == pytest.approx(0.0, abs=1e-6)
    assert r["true_motion"] == pytest.approx(float((0.1 * f.float()).mean()), rel=1e-5)
    rot = torch.linalg.matrix_exp(torch.tensor([[0.0, -0.3, 0.2], [0.3, 0.0, -0.1], [-0.2, 0.1, 0.0]]))
    for c in (lambda y: y + torch.tensor([0.5, -0.2, 0.3]), lambda y: 2.0 * y @ rot.T):  # T_f = C o W_f
        assert warp_error(lambda y, k, c=c: c(_true(y, k)), _true, x, f)["warp_error"] == pytest.approx(0.0, abs=1e-5)


def test_warp_error_of_a_shift_is_the_shift_and_of_the_identity_the_motion():
    g = torch.Generator().manual_seed(1)
    x, f = torch.randn(50, 3, generator=g), torch.randint(1, 4, (50,), generator=g)
    shift = torch.tensor([0.0, 0.03, 0.04])  # |shift| = 0.05, in every frame but the rest frame

    def shifted(y, k):
        return _true(y, k) + (k != 0)[:, None].float() * shift

    assert warp_error(shifted, _true, x, f)["warp_error"] == pytest.approx(0.05, rel=1e-5)
    ident = warp_error(lambda y, k: y, _true, x, f)
    assert ident["warp_error"] == pytest.approx(ident["true_motion"], rel=1e-6)
    with pytest.raises(ValueError, match="points"):
        warp_error(_true, _true, x, f[:3])


@pytest.mark.usefixtures("one_thread")
def test_tiny_run_learns_the_validation_views(tmp_path, monkeypatch):
    from paperzoo.data import load_nerfies

    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    run_dir = run("tiny", out=tmp_path / "nerfies", progress=False)
    doc = json.loads((run_dir / "result.json").read_text())
    cap = load_nerfies(tmp_path / "runs" / "_data" / "nonrigid-tiny-0", 1)
    val = cap.images[cap.val_idx]
    best_constant = float(-10 * torch.log10(((val - val.mean((0, 1, 2))) ** 2).mean()))  # best colour per channel
    for v in ("static", "nerfies"):
        for psnr in doc["measurements"][f"{v} PSNR"]["values"]:
            assert psnr > best_constant + 1.0, (v, psnr, best_constant)
        for e in doc["measurements"][f"{v} warp error"]["values"]:
            assert 0.0 <= e < 1.0 and e == e
    job = json.loads((run_dir / "static" / "seed-0" / "job.json").read_text())
    assert job["warp_error"] == pytest.approx(job["true_motion"], rel=1e-5)  # the identity warp: the true motion
    assert job["true_motion"] > 0
    assert "smoke test" in doc["verdict_reason"]
    assert any("warp error" in k for k in doc["details"]) and "nerfies beats static (validation PSNR)" in doc["details"]
    for picture in ("validation_views.png", "canonical_observed.png", "deformation.png", "novel_path.gif",
                    "novel_path.mp4", "psnr.png", "warp_error.png", "report.md"):
        assert (run_dir / picture).stat().st_size > 0, picture
    assert "novel_path.gif" in doc["plots"] and "warp error" in doc["notes"]
    # `paperzoo render nerfies` from a job folder of the run: the novel path at another size
    from typer.testing import CliRunner

    from paperzoo.cli import app

    res = CliRunner().invoke(app, ["render", "nerfies", "--checkpoint", str(run_dir / "nerfies" / "seed-0"),
                                   "--out", str(tmp_path / "path.gif"), "--frames", "2", "--side", "16"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "path.gif").stat().st_size > 0


def test_param_groups_give_the_field_and_the_warp_codes_their_own_rates():
    import dataclasses

    from paperzoo.papers.nerfies import Nerfies
    from paperzoo.papers.nerfies.recipe import NerfiesPreset, param_groups
    from paperzoo.train import TrainConfig, Trainer

    p = PRESETS["tiny"]
    model = Nerfies(variant_config(p, "nerfies", 4, 2.0, 6.0)[0])
    assert param_groups(model, 1e-2) is None  # one rate for all (the official code): the Trainer's default groups
    static = Nerfies(variant_config(p, "static", 4, 2.0, 6.0)[0])
    assert param_groups(static, 1e-2, 1e-3, 1e-1) is None  # no field, nothing to separate
    groups = param_groups(model, 1e-2, warp_lr=1e-3, code_lr=1e-1)
    ids = [[id(q) for q in g["params"]] for g in groups]
    assert sorted(sum(ids, [])) == sorted(id(q) for q in model.parameters())  # every parameter exactly once
    assert set(ids[1]) == {id(q) for q in model.warp.parameters()} and ids[2] == [id(model.warp_codes.weight)]
    assert [g["lr"] for g in groups] == [1e-2, 1e-3, 1e-1]
    assert [g["lr"] for g in param_groups(model, 1e-2, code_lr=1e-1)] == [1e-2, 1e-2, 1e-1]
    # the schedule scales every group by one factor, and a group at a higher rate moves its parameters further
    cfg = TrainConfig(steps=4, batch_size=2, lr=1e-2, warmup_steps=2, schedule="cosine", min_lr_ratio=0.5,
                      weight_decay=0.0, eval_every=0, ckpt_every=0, grad_clip=None, device="cpu", log_every=100)
    data = torch.utils.data.TensorDataset(torch.randn(8, 3))
    before = {n: q.detach().clone() for n, q in model.named_parameters()}

    def loss_fn(m, batch):
        return m.warp_codes.weight.sum() + m.warp.heads["v"].weight.sum() + m.coarse.sigma.weight.sum()  # lr a step
    tr = Trainer(model, cfg, data, loss_fn, progress=False, param_groups=groups)
    tr.fit()
    lrs = [g["lr"] for g in tr.optimizer.param_groups]
    assert lrs[1] / lrs[0] == pytest.approx(0.1) and lrs[2] / lrs[0] == pytest.approx(10.0)
    moved = {n: float((q.detach() - before[n]).abs().max()) for n, q in model.named_parameters()}
    assert moved["warp_codes.weight"] > 5 * moved["coarse.sigma.weight"] > 25 * moved["warp.heads.v.weight"] > 0
    with pytest.raises(ValueError, match="NerfiesPreset.warp_lr: expected None or a learning rate > 0"):
        dataclasses.replace(p, warp_lr=0.0)
    with pytest.raises(ValueError, match="NerfiesPreset.background_weight: expected a number >= 0"):
        dataclasses.replace(p, background_weight=-1.0)
    assert isinstance(dataclasses.replace(p, code_lr=0.1, background_weight=0.0), NerfiesPreset)
