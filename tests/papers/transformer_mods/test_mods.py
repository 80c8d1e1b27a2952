"""The modifications study: every variant of the declared grid builds from the shared core and learns, matched
variants match the baseline's parameters, the grid file is validated before anything runs, one seed gives one
loss curve, and the statistics / paper comparison / verdict of the table behave."""

import dataclasses
import json
import math

import pytest
import torch

from paperzoo.papers.transformer_mods import recipe
from paperzoo.papers.transformer_mods.analysis import Table
from paperzoo.papers.transformer_mods.grid import (
    DEFAULT_GRID,
    build_configs,
    count_parameters,
    load_grid,
    parse_grid,
)
from paperzoo.papers.transformer_mods.model import ModsClassifier, ModsConfig, ModsLM
from paperzoo.train import TrainConfig, Trainer, seed_everything

pytestmark = pytest.mark.usefixtures("one_thread")
GRID = load_grid()


def _configs(objective: str, size: str = "tiny") -> dict[str, ModsConfig]:
    names = [n for n in GRID.select(None) if objective == "mlm" or n != "funnel"]
    return build_configs(GRID, ModsConfig.preset(size, objective=objective), names)


def _loss(model: ModsLM, ids: torch.Tensor, gen_seed: int = 0) -> torch.Tensor:
    if model.config.causal:
        return model(ids, labels=ids).loss
    inputs, labels = model.mask(ids, generator=torch.Generator().manual_seed(gen_seed))
    return model(inputs, labels=labels).loss


@pytest.mark.parametrize("objective", ["causal", "mlm"])
def test_every_variant_builds_and_lowers_the_loss(objective):
    # a fixed batch of structured "text" (a repeated random sequence): 12 Adam steps must lower every variant's loss
    # (causal: every variant of the grid but Funnel, which is bidirectional; mlm: Funnel and a few others)
    g = torch.Generator().manual_seed(0)
    base = torch.randint(5, 256, (1, 8), generator=g)
    ids = torch.cat([base, base], dim=1).repeat(2, 1)  # (2, 16): the second half repeats the first
    cfgs = _configs(objective)
    if objective == "mlm":
        cfgs = {n: cfgs[n] for n in ("vanilla", "funnel", "switch", "pos_alibi", "fixup")}
    for name, cfg in cfgs.items():
        torch.manual_seed(0)
        model = ModsLM(cfg)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        with torch.no_grad():
            first = float(_loss(model, ids))
        for _ in range(12):
            opt.zero_grad()
            _loss(model, ids).backward()
            opt.step()
        with torch.no_grad():
            last = float(_loss(model, ids))
        assert math.isfinite(first) and last < first - 0.2, f"{name} ({objective}): {first:.3f} -> {last:.3f}"


@pytest.mark.parametrize("size", ["tiny", "small", "full"])
def test_matched_variants_have_the_baselines_parameters_within_2_percent(size):
    cfgs = _configs("causal", size)
    target = count_parameters(cfgs[GRID.baseline])
    matched = [n for n, v in GRID.variants.items() if v.match == "params"]
    assert {"swiglu", "geglu", "reglu", "glu", "liglu", "deep_narrow", "shallow_wide"} <= set(matched)
    for n in matched:
        assert abs(count_parameters(cfgs[n]) / target - 1) < 0.02, n
        assert cfgs[n].ffn_dim != cfgs[GRID.baseline].ffn_dim  # matched by changing d_ff
    # GLU variants: d_ff about 2/3 of the plain FFN's (three matrices instead of two, Shazeer 2020)
    assert cfgs["swiglu"].ffn_dim == pytest.approx(2 / 3 * cfgs["vanilla"].ffn_dim, rel=0.02)


def test_variants_are_configuration_of_the_shared_core():
    from paperzoo.nn.ffn import FeedForward
    from paperzoo.nn.norm import RMSNorm
    from paperzoo.nn.posenc import RotaryEmbedding, T5RelativePositionBias
    from paperzoo.papers.funnel.model import FunnelModel
    from paperzoo.papers.switch.moe import SwitchMoE

    cfgs = _configs("mlm")
    m = {n: ModsLM(c) for n, c in cfgs.items()}
    assert isinstance(m["vanilla"].encoder.rel_bias, T5RelativePositionBias)  # one bias shared by all layers
    assert m["vanilla"].head is None  # tied embeddings
    assert isinstance(m["swiglu"].encoder.layers[0].ffn, FeedForward) and m["swiglu"].encoder.layers[0].ffn.glu
    assert isinstance(m["rmsnorm"].encoder.layers[0].attn_norm, RMSNorm)
    assert isinstance(m["pos_rotary"].encoder.rotary, RotaryEmbedding)
    assert isinstance(m["switch"].encoder.layers[1].ffn, SwitchMoE)  # every other layer
    assert isinstance(m["funnel"].funnel, FunnelModel)
    assert len(m["block_sharing"].encoder.layers) == 1 and len(m["block_sharing"].encoder.order) == 4
    assert m["pos_learned_concat"].embed.concat_position_dim == 32
    assert m["factorized"].embed.project is not None and m["factorized"].out_proj is not None
    assert m["untied"].head is not None


def test_grid_file_is_validated_naming_the_valid_choices(tmp_path):
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['activaton'\] in variant 'x'.*valid: .*activation"):
        parse_grid({"variants": {"vanilla": {}, "x": {"activaton": "gelu"}}})
    with pytest.raises(ValueError, match="vocab_size is set by the preset"):
        parse_grid({"variants": {"vanilla": {}, "x": {"vocab_size": 3}}})
    with pytest.raises(ValueError, match=r"unknown top-level key\(s\) \['variant'\]"):
        parse_grid({"variant": {}, "variants": {"vanilla": {}}})
    with pytest.raises(ValueError, match="baseline 'base' is not a variant"):
        parse_grid({"baseline": "base", "variants": {"vanilla": {}}})
    with pytest.raises(ValueError, match="paper row 'SwiGlu' unknown; valid: .*SwiGLU"):
        parse_grid({"variants": {"vanilla": {}, "x": {"paper": "SwiGlu"}}})
    with pytest.raises(ValueError, match=r"unknown variant\(s\) \['swigloo'\].*valid: vanilla, gelu"):
        GRID.select(("vanilla", "swigloo"))
    bad_value = parse_grid({"variants": {"vanilla": {}, "x": {"activation": "gelu2"}}})
    with pytest.raises(ValueError, match=r"variant 'x'.*activation must be one of"):
        build_configs(bad_value, ModsConfig.preset("tiny"), ["vanilla", "x"])
    with pytest.raises(ValueError, match="funnel_blocks needs objective='mlm'"):
        build_configs(GRID, ModsConfig.preset("tiny"), ["vanilla", "funnel"])
    path = tmp_path / "grid.toml"
    path.write_text('baseline = "vanilla"\n[variants.vanilla]\n[variants.oops]\nglu = "swiglu"\nmatch = "flops"\n')
    with pytest.raises(ValueError, match="match must be 'params'"):
        load_grid(path)


def test_a_bad_grid_fails_before_any_run_folder_is_made(tmp_path, monkeypatch):
    path = tmp_path / "grid.toml"
    path.write_text('[variants.vanilla]\n[variants.typo]\nnorm = "rmsnrom"\n')
    presets = {"tiny": dataclasses.replace(recipe.PRESETS["tiny"], grid=str(path), variants=None)}
    monkeypatch.setattr(recipe, "PRESETS", presets)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="norm must be one of"):
        recipe.run("tiny", out=out, progress=False)
    assert not out.exists()
    presets["tiny"] = dataclasses.replace(presets["tiny"], grid=str(DEFAULT_GRID), variants=("vanilla", "swigl"))
    with pytest.raises(ValueError, match=r"unknown variant\(s\) \['swigl'\]"):
        recipe.run("tiny", out=out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("variant", ["vanilla", "switch"])
def test_same_seed_gives_identical_losses_on_cpu(tmp_path, variant):
    cfg = _configs("causal")[variant]
    data = torch.utils.data.TensorDataset(torch.randint(5, 256, (64, 32), generator=torch.Generator().manual_seed(1)))
    tc = TrainConfig(steps=6, batch_size=8, lr=3e-3, eval_every=0, ckpt_every=0, log_every=1, device="cpu")
    curves = []
    for k in range(2):
        seed_everything(3)
        Trainer(ModsLM(cfg), tc, data, recipe.loss_fn, out_dir=tmp_path / str(k), progress=False).fit()
        lines = (tmp_path / str(k) / "metrics.jsonl").read_text().splitlines()
        curves.append([r["loss"] for r in map(json.loads, lines) if r.get("event") == "train"])
    assert len(curves[0]) == 6 and curves[0] == curves[1]


def test_classifier_pools_the_right_token_and_ignores_padding():
    for objective in ("causal", "mlm"):
        torch.manual_seed(0)
        clf = ModsClassifier(ModsConfig.preset("tiny", objective=objective)).eval()
        ids = torch.randint(5, 256, (2, 10))
        mask = torch.ones_like(ids)
        mask[1, 6:] = 0
        padded = ids.clone()
        padded[1, 6:] = 0
        a = clf(input_ids=padded, attention_mask=mask).logits[1]
        b = clf(input_ids=ids[1:, :6]).logits[0]
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)  # padding changes nothing


def test_model_rejects_bad_input():
    model = ModsLM(ModsConfig.preset("tiny"))
    with pytest.raises(ValueError, match=r"integer \(batch, seq\)"):
        model(torch.zeros(2, 8))
    with pytest.raises(ValueError, match=r"must be in \[0, 256\)"):
        model(torch.full((2, 8), 300))
    with pytest.raises(ValueError, match="labels must have shape"):
        model(torch.zeros(2, 8, dtype=torch.long), labels=torch.zeros(2, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="init='fixup' is for a stack without norms"):
        ModsConfig.preset("tiny", init="fixup")
    with pytest.raises(ValueError, match="preset must be one of"):
        ModsConfig.preset("huge")


def _fake(values: dict[str, list[float]], down: dict[str, list[float]]) -> dict[str, list[dict]]:
    return {v: [{"seed": s, "final_loss": f, "early_loss": f + 0.3, "wiki_valid_ppl": 10.0 + f,
                 "wiki_test_ppl": 11.0 + f, "downstream": d, "steps_per_s": 1.0 + 0.01 * s, "task SST-2": d,
                 "params": 1, "flops_per_token": 1, "tokens": 1, "steps": 1}
                for s, (f, d) in enumerate(zip(values[v], down[v], strict=True))] for v in values}


def test_table_holm_sign_agreement_spearman_and_verdict():
    base = [2.00, 2.01, 1.99]
    loss = {"vanilla": base, "swiglu": [1.90, 1.92, 1.89], "rmsnorm": [1.95, 1.97, 1.94],
            "rezero": [2.10, 2.12, 2.11], "gelu": [2.00, 2.03, 1.98], "fixup": [2.30, 2.28, 2.31]}
    down = {v: [70.0, 71.0, 72.0] for v in loss}
    t = Table(_fake(loss, down), GRID, ("SST-2",))
    s = t.stats["final loss"]
    assert s["swiglu"]["significant"] and s["swiglu"]["better"] and not s["gelu"]["significant"]
    assert s["rezero"]["significant"] and not s["rezero"]["better"]
    assert s["swiglu"]["p_holm"] >= s["swiglu"]["p"]  # Holm never lowers a p-value
    agree, n, _ = t.sign_agreement("final loss")  # paper: swiglu, rmsnorm lower; rezero, fixup higher; gelu 0
    assert (agree, n) == (5, 5)
    rho, k = t.spearman("final loss")
    assert k == 5 and rho > 0.8
    v = t.verdict()
    assert v.verdict == "reproduced", v.reason  # 2 of 5 help (< half), both helpers significantly better
    loss["rmsnorm"] = [2.1, 2.11, 2.09]  # a helper significantly worse: not reproduced
    assert Table(_fake(loss, down), GRID, ("SST-2",)).verdict().verdict == "not reproduced"
    md = t.markdown(recipe.PRESETS["tiny"])
    assert "Baseline seed-to-seed spread first" in md and "| swiglu |" in md and "Spearman" in md


def test_table_pairs_by_seed():
    """A seed's data order moves every variant's loss alike; the paired test sees through it, Welch cannot, and
    results listed in another seed order pair the same."""
    import scipy.stats

    shift = [0.0, 0.12, 0.25]  # what seeds 0, 1, 2 do to every variant
    noise = {"vanilla": (0.0, 0.0, 0.0), "swiglu": (-0.05, -0.046, -0.053), "rmsnorm": (0.01, -0.01, 0.0)}
    loss = {v: [2.0 + d + e for d, e in zip(shift, n, strict=True)] for v, n in noise.items()}
    down = {v: [70.0, 71.0, 72.0] for v in loss}
    res = _fake(loss, down)
    s = Table(res, GRID, ("SST-2",)).stats["final loss"]
    a, b = loss["swiglu"], loss["vanilla"]
    assert s["swiglu"]["p"] == pytest.approx(scipy.stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert scipy.stats.ttest_ind(a, b, equal_var=False).pvalue > 0.5 and s["swiglu"]["p"] < 0.01
    assert s["swiglu"]["significant"] and s["swiglu"]["better"] and not s["rmsnorm"]["significant"]
    assert s["swiglu"]["diff"].lo < -0.05 < s["swiglu"]["diff"].hi < -0.04
    res["swiglu"] = res["swiglu"][::-1]
    assert Table(res, GRID, ("SST-2",)).stats["final loss"]["swiglu"]["p"] == pytest.approx(s["swiglu"]["p"])
    res["swiglu"] = [r | {"seed": r["seed"] + 3} for r in res["swiglu"]]
    with pytest.raises(ValueError, match="shares no seed"):
        Table(res, GRID, ("SST-2",))


@pytest.mark.slow
@pytest.mark.data("imdb", "wikitext-2-partial", "sst2")
def test_tiny_recipe_learns_and_writes_its_report(tmp_path, monkeypatch):
    run_dir = recipe.run("tiny", out=tmp_path / "run", progress=False)
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert (run_dir / "delta_vs_baseline.png").is_file() and (run_dir / "ours_vs_paper.png").is_file()
    for v in ("vanilla", "swiglu", "rmsnorm"):
        for s in (0, 1):
            r = json.loads((run_dir / v / f"seed-{s}" / "job.json").read_text())
            assert r["final_loss"] < r["early_loss"] < math.log(300)  # it learns: below the uniform guess
            assert r["tokens"] == recipe.PRESETS["tiny"].tokens  # one fixed budget
    # resuming reads every finished cell back
    again = recipe.run("tiny", out=tmp_path / "run", resume=True, progress=False)
    assert json.loads((again / "result.json").read_text())["measurements"] == doc["measurements"]
    _check_refinetune(run_dir, monkeypatch)


def _check_refinetune(run_dir, monkeypatch):
    """refinetune: the same protocol again is a no-op; from the final checkpoint it reproduces the scores the run
    itself got (the checkpoint is the pretrained model); a new protocol replaces them and keeps the old ones; a
    pretraining change is refused before anything is written."""
    cell = run_dir / "swiglu" / "seed-1" / "job.json"
    first = json.loads(cell.read_text())
    recipe.refinetune(run_dir, progress=False)
    assert json.loads(cell.read_text()) == first  # already fine-tuned with this protocol: skipped
    cell.write_text(json.dumps({k: v for k, v in first.items() if k != "finetune"}))  # a cell from before the record
    recipe.refinetune(run_dir, progress=False)
    redone = json.loads(cell.read_text())
    assert redone["task SST-2"] == first["task SST-2"] == redone["finetune_before"]["task SST-2"]
    tiny = recipe.PRESETS["tiny"]
    monkeypatch.setitem(recipe.PRESETS, "tiny", dataclasses.replace(
        tiny, finetune=dataclasses.replace(tiny.finetune, max_steps=12, lr=3e-3)))
    recipe.refinetune(run_dir, progress=False)
    new = json.loads(cell.read_text())
    assert new["finetune"]["max_steps"] == 12 and new["finetune_before"]["finetune"]["max_steps"] == 6
    assert new["task SST-2"] != first["task SST-2"] and new["final_loss"] == first["final_loss"]
    assert json.loads((run_dir / "config.json").read_text())["config"]["finetune"]["max_steps"] == 12
    assert "fine-tuning" in json.loads((run_dir / "result.json").read_text())["details"]
    monkeypatch.setitem(recipe.PRESETS, "tiny", dataclasses.replace(
        recipe.PRESETS["tiny"], train=dataclasses.replace(tiny.train, lr=1e-2)))
    with pytest.raises(ValueError, match="differs in train"):
        recipe.refinetune(run_dir, progress=False)
    assert json.loads(cell.read_text()) == new


def test_the_default_grid_is_named_without_a_machine_path():
    """Presets record the shipped grid by name (``grid.toml``), so a committed config holds no absolute path."""
    from paperzoo.papers.transformer_mods.recipe import PRESETS

    assert all(p.grid == "grid.toml" for p in PRESETS.values())
    assert set(load_grid("grid.toml").variants) == set(load_grid(DEFAULT_GRID).variants)


def test_wikitext_windows_are_framed_like_the_training_windows():
    """Evaluation windows start with [CLS] and end with [SEP], as every pretraining window does (pack_documents):
    relative-position models anchor on [CLS], and unframed windows scored up to 1e9 perplexity."""
    from paperzoo.data.tokenizer import pack_documents, special_ids, train_wordpiece

    texts = ["the film was good and the cast was better than the plot " * 20, "a bad film " * 30]
    tok = train_wordpiece(texts, 200)
    ids = special_ids(tok)
    wiki = recipe.wiki_windows(tok, " ".join(texts), 16, 100)
    train, _ = pack_documents(tok, texts, 16, min_tokens=14)
    assert wiki.shape == (100 // 14, 16)
    for w in (wiki, train):
        assert (w[:, 0] == ids["cls"]).all() and (w[:, -1] == ids["sep"]).all() and (w != ids["pad"]).all()
