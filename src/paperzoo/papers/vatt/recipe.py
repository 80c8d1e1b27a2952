"""``paperzoo reproduce vatt``: VATT's contrastive pretraining on AV-MNIST-style triplets, probed and retrieved.

Data: :func:`paperzoo.data.generate_avmnist` (moving MNIST digits, FSDD spoken digits of disjoint speakers, template
captions; both modalities degraded), one fixed data seed for every run. Per training seed:

* ``keep-1.0``, ``keep-0.75``, ``keep-0.5``, ``keep-0.25``: VATT (modality-specific backbones) pretrained with NCE +
  MIL-NCE at each DropToken keep rate, the same steps and batch;
* ``shared``: the modality-agnostic backbone at keep 1.0, the same steps and batch (equal compute: its FLOPs per step
  are counted beside the others');
* ``random-init``: the keep-1.0 encoders at initialisation, never trained;
* ``supervised``: the same video and audio encoders trained with digit labels (cross-entropy of linear heads on the
  video, audio and joint pooled features), the same steps.

Measured on the frozen pooled features ([AGG] outputs) of the test split (MNIST test digits, unseen speakers):
linear-probe digit accuracy from video, audio and both (probe fitted on the train split), zero-shot retrieval
(video->text, text->video, video->audio, audio->video: R@1/5/10 and median rank in pools of ``retrieval_pool``
clips), and for training: FLOPs (counted), wall time and the activation memory of a step.

Verdicts: (1) pretraining beats random initialisation on the video and the audio probe; (2) DropToken: keep 0.5 costs
at most 60% of keep 1.0's training FLOPs and its video probe is at most ``drop_margin`` below keep 1.0's; (3) shared
vs specific: the shared backbone's video probe at most ``drop_margin`` below the specific one's at equal compute.
The headline verdict is all of them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from paperzoo.data.avmnist import AVMNIST, AVMNISTParams
from paperzoo.recipes import AtMost, Beats, Job, NonInferior, Preset, all_of, run_jobs, smoke, start
from paperzoo.train import TrainConfig, Trainer, seed_everything

from .evaluate import linear_probe, retrieval_metrics
from .model import VATT, VATTConfig
from .objective import VATTLoss

PAPER = "vatt"
CLAIM = ("VATT's contrastive pretraining (NCE video-audio, MIL-NCE video-text) yields video and audio features a "
         "linear probe reads far better than random-initialised encoders; DropToken at 50% roughly halves the "
         "training cost for a small accuracy loss (paper Table 7: 785 -> 375 GFLOPs, UCF101 87.6 -> 85.5); a "
         "modality-agnostic shared backbone is competitive with modality-specific ones (sec. 4).")
KEEP_RATES = (1.0, 0.75, 0.5, 0.25)
VARIANTS = tuple(f"keep-{k}" for k in KEEP_RATES) + ("shared", "random-init", "supervised")


@dataclass(frozen=True, kw_only=True)
class VattPreset(Preset):
    data: AVMNISTParams = AVMNISTParams()
    data_seed: int = 0
    n_train: int = 3000
    n_test: int = 1000
    retrieval_pool: int = 100
    audio_noise: float = 0.01  # pretraining augmentation: Gaussian noise of std audio_noise * max|x| (official)
    drop_margin: float = 0.03  # accuracy loss still called "small" (the paper's 50% drop costs 2.1 points on UCF101)
    eval_batch: int = 250
    variants: tuple[str, ...] = VARIANTS


PRESETS: dict[str, VattPreset] = {
    # the smoke test: seconds; asserts learning, not quality
    "tiny": VattPreset(model=VATTConfig.preset("tiny"),
                       train=TrainConfig(steps=60, batch_size=16, lr=3e-3, warmup_steps=6, weight_decay=0.0,
                                         eval_every=0, ckpt_every=15, log_every=5, grad_clip=None, device="cpu"),
                       data=AVMNISTParams(captions_per_clip=3), n_train=200, n_test=100, retrieval_pool=50, seeds=2,
                       variants=("keep-1.0", "keep-0.25", "random-init")),
    # the CPU reproduction (see the README for how it is scaled down from the paper)
    "small": VattPreset(model=VATTConfig.preset("small"),
                        train=TrainConfig(steps=800, batch_size=32, lr=3e-3, warmup_steps=80, min_lr_ratio=0.05,
                                          weight_decay=0.0, eval_every=0, ckpt_every=200, log_every=50,
                                          grad_clip=None, device="cpu", precision="auto"),
                        data=AVMNISTParams(captions_per_clip=3), n_train=2000, n_test=600, seeds=3),
}


# ----------------------------------------------------------------------------------------------------- data
def load_data(p: VattPreset) -> tuple[AVMNIST, AVMNIST]:
    """The train and test triplets of the preset (deterministic from ``data_seed``)."""
    from paperzoo.data import generate_avmnist

    return (generate_avmnist("train", p.n_train, p.data_seed, p.data),
            generate_avmnist("test", p.n_test, p.data_seed, p.data))


def model_config(p: VattPreset, variant: str) -> VATTConfig:
    """The model of ``variant``: the preset's at the variant's keep rate or backbone."""
    if variant.startswith("keep-") and _is_rate(variant[5:]):
        return dataclasses.replace(p.model, keep_rate=float(variant[5:]))
    if variant == "shared":
        return dataclasses.replace(p.model, backbone="shared", keep_rate=1.0)
    if variant in ("random-init", "supervised"):
        return dataclasses.replace(p.model, keep_rate=1.0)
    raise ValueError(f"unknown VATT variant {variant!r}; valid: {VARIANTS}")


def _is_rate(text: str) -> bool:
    try:
        return 0.0 < float(text) <= 1.0
    except ValueError:
        return False


# ----------------------------------------------------------------------------------------------------- training
class Supervised(nn.Module):
    """The supervised reference: VATT's video and audio encoders with linear digit classifiers on the video, the
    audio and the joint pooled features (its text tower and heads are unused)."""

    def __init__(self, cfg: VATTConfig, classes: int = 10):
        super().__init__()
        self.vatt = VATT(cfg)
        dv, da = self.vatt.heads.video_to_va[0].in_features, self.vatt.heads.audio_to_va.in_features
        self.video_cls, self.audio_cls = nn.Linear(dv, classes), nn.Linear(da, classes)
        self.joint_cls = nn.Linear(dv + da, classes)

    def forward(self, video: torch.Tensor, audio: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v, a = self.vatt.encode_video(video), self.vatt.encode_audio(audio)
        return self.video_cls(v), self.audio_cls(a), self.joint_cls(torch.cat([v, a], -1))


def _augment(audio: torch.Tensor, std: float) -> torch.Tensor:
    """The official pretraining noise: ``x + N(0, (std * max|x|)^2)`` per clip."""
    return audio + torch.randn_like(audio) * std * audio.abs().amax(1, keepdim=True)


def contrastive_loss_fn(audio_noise: float):
    loss = VATTLoss()

    def fn(model, batch):
        video, audio, text, _ = batch
        total, parts = loss(model(video, _augment(audio, audio_noise), text))
        return total, parts
    return fn


def supervised_loss_fn(model, batch):
    video, audio, _, labels = batch
    lv, la, lj = model(video, audio)
    parts = {k: F.cross_entropy(x, labels) for k, x in (("ce_video", lv), ("ce_audio", la), ("ce_joint", lj))}
    return sum(parts.values()), {k: v.detach() for k, v in parts.items()}


def step_cost(model: nn.Module, loss_fn, batch, precision: str) -> dict[str, float]:
    """FLOPs (counted, matmuls and attention) and activation bytes of one training step's forward + backward on
    ``batch``, with every RNG state restored afterwards (the run is unchanged by the measurement)."""
    from paperzoo.measure import activation_bytes, count_flops
    from paperzoo.train.precision import resolve_precision

    amp = resolve_precision(precision, "cpu")

    def step():
        forward()[0].backward()

    def forward():
        with amp.autocast("cpu"):
            return loss_fn(model, batch)

    with torch.random.fork_rng():
        flops = count_flops(step)
        act = activation_bytes(forward)
    model.zero_grad(set_to_none=True)
    return {"flops_per_step": float(flops), "activation_mib": act / 2**20}


# ----------------------------------------------------------------------------------------------------- evaluation
@torch.no_grad()
def features(model: VATT, d: AVMNIST, batch: int, precision: str, text: bool) -> dict[str, torch.Tensor]:
    """Frozen pooled features (float32) of every clip, in eval mode (no DropToken, no dropout); with ``text`` the
    common-space embeddings for retrieval as well."""
    from paperzoo.train.precision import resolve_precision

    amp = resolve_precision(precision, "cpu")
    was = model.training
    model.eval()
    out: dict[str, list[torch.Tensor]] = {}
    for i in range(0, len(d), batch):
        v, a, t = d.video[i:i + batch], d.audio[i:i + batch], d.text[i:i + batch]
        with amp.autocast("cpu"):
            if text:
                o = model(v, a, t)
                got = {k: getattr(o, k) for k in ("video", "audio", "video_va", "video_vt", "audio_va", "text_vt")}
            else:
                got = {"video": model.encode_video(v), "audio": model.encode_audio(a)}
        for k, x in got.items():
            out.setdefault(k, []).append(x.float())
    model.train(was)
    return {k: torch.cat(v) for k, v in out.items()}


def evaluate(model: VATT, train: AVMNIST, test: AVMNIST, p: VattPreset, retrieval: bool) -> dict[str, float]:
    """Probe accuracies (video, audio, both) and, with ``retrieval``, zero-shot retrieval on the test split."""
    prec = p.train.precision
    ftr = features(model, train, p.eval_batch, prec, text=False)
    fte = features(model, test, p.eval_batch, prec, text=retrieval)
    res = {}
    for name, keys in (("video", ("video",)), ("audio", ("audio",)), ("both", ("video", "audio"))):
        xtr, xte = (torch.cat([f[k] for k in keys], 1) for f in (ftr, fte))
        res[f"probe_{name}"] = linear_probe(xtr, train.labels, xte, test.labels, 10)["test_acc"]
    if retrieval:
        pool = p.retrieval_pool
        pairs = {"v2t": (fte["video_vt"], fte["text_vt"]), "t2v": (fte["text_vt"][:, 0], fte["video_vt"]),
                 "v2a": (fte["video_va"], fte["audio_va"]), "a2v": (fte["audio_va"], fte["video_va"])}
        for name, (q, k) in pairs.items():
            for m, v in retrieval_metrics(q, k, pool).items():
                res[f"{name}_{m}"] = v
    return res


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: VattPreset, train: AVMNIST,
              test: AVMNIST) -> dict:
    """Train (or not) one variant with one seed in ``out``; returns its evaluation and costs."""
    variant = job.variant
    cfg = model_config(p, variant)
    seed_everything(job.seed)
    if variant == "supervised":
        model, loss_fn = Supervised(cfg), supervised_loss_fn
    else:
        model, loss_fn = VATT(cfg), contrastive_loss_fn(p.audio_noise)
    tc = dataclasses.replace(p.train, seed=job.seed)
    res: dict = {"params": sum(x.numel() for x in model.parameters()), "steps": 0, "train_seconds": 0.0}
    if variant != "random-init":
        data = train.dataset()
        probe_batch = tuple(t[:tc.batch_size] for t in data.tensors)
        res.update(step_cost(model.train(), loss_fn, probe_batch, tc.precision))
        trainer = Trainer(model, tc, data, loss_fn, out_dir=out, progress=progress)
        t0 = time.perf_counter()
        fit = trainer.fit(resume=resume)
        res.update(steps=fit["step"], train_seconds=fit["wall_time_s"], final_loss=fit["loss"],
                   seconds_per_step=(time.perf_counter() - t0) / max(1, fit["step"] - (fit["resumed_from"] or 0)),
                   train_flops=res["flops_per_step"] * fit["step"])
    vatt = model.vatt if variant == "supervised" else model
    t0 = time.perf_counter()
    res.update(evaluate(vatt, train, test, p, retrieval=variant not in ("supervised",)))
    res["eval_seconds"] = time.perf_counter() - t0
    return res


def direction_probe(run_dir: Path, variant: str = "keep-1.0", seed: int = 0, preset: str = "small") -> dict:
    """A diagnostic from a finished job's checkpoint: linear-probe accuracy of the motion direction (8 classes) and
    of the digit from the frozen video features, to see what the contrastive features encode."""
    from paperzoo.train import checkpoint_file, load_checkpoint

    p = PRESETS[preset]
    train, test = load_data(p)
    seed_everything(seed)
    model = VATT(model_config(p, variant))  # random-init: the job's encoders at initialisation, as in train_job
    if variant != "random-init":
        model.load_state_dict(load_checkpoint(checkpoint_file(Job(variant, seed).folder(run_dir), "a vatt"))["model"])
    ftr = features(model, train, p.eval_batch, p.train.precision, text=False)["video"]
    fte = features(model, test, p.eval_batch, p.train.precision, text=False)["video"]
    return {"direction": linear_probe(ftr, train.direction, fte, test.direction, 8)["test_acc"],
            "digit": linear_probe(ftr, train.labels, fte, test.labels, 10)["test_acc"]}


# ----------------------------------------------------------------------------------------------------- report
def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1, precision: str | None = None) -> Path:
    """Pretrain every variant at every seed, probe and retrieve, write the report; returns the run folder."""
    import json

    from paperzoo.report import plot_bars_with_ci, write_result
    from paperzoo.report.stats import mean_ci

    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, precision=precision)
    train, test = load_data(p)
    jobs = [Job(v, s) for s in range(p.seeds) for v in p.variants]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(p, train, test))
    keeps = [v for v in p.variants if v.startswith("keep-")]
    ref = "keep-1.0"
    m: dict[str, list[float]] = {}
    for v in p.variants:
        for k in ("probe_video", "probe_audio", "probe_both"):
            m[f"{v} {k.replace('_', ' ')} accuracy"] = res.values(v, k)
    for v in [x for x in ("keep-1.0", "shared", "random-init") if x in p.variants]:
        for k in ("v2t", "v2a"):
            m[f"{v} {k} R@1"] = res.values(v, f"{k}_R@1")
            m[f"{v} {k} R@10"] = res.values(v, f"{k}_R@10")
            m[f"{v} {k} median rank"] = res.values(v, f"{k}_median_rank")
    for v in keeps:
        if v != ref:
            m[f"{v} / {ref} training FLOPs"] = [a / b for a, b in zip(res.values(v, "train_flops"),
                                                                    res.values(ref, "train_flops"), strict=True)]
            m[f"{v} / {ref} wall time"] = [a / b for a, b in zip(res.values(v, "train_seconds"),
                                                              res.values(ref, "train_seconds"), strict=True)]
            m[f"{v} / {ref} activation memory"] = [a / b for a, b in zip(res.values(v, "activation_mib"),
                                                                      res.values(ref, "activation_mib"), strict=True)]

    parts = {}
    if "random-init" in p.variants:
        parts["pretraining vs random init"] = all_of(*[
            Beats().judge(res.values(ref, f"probe_{k}"), res.values("random-init", f"probe_{k}"),
                          f"pretrained {k} probe", f"random-init {k} probe") for k in ("video", "audio")])
    if "keep-0.5" in p.variants:
        ratio = mean_ci(m[f"keep-0.5 / {ref} training FLOPs"]).mean
        parts["DropToken 50%"] = all_of(
            AtMost(0.6).judge(ratio, "keep-0.5 / keep-1.0 training FLOPs"),
            NonInferior(p.drop_margin).judge(res.values("keep-0.5", "probe_video"), res.values(ref, "probe_video"),
                                             "keep-0.5 video probe", "keep-1.0 video probe"))
    if "shared" in p.variants:
        parts["shared vs specific"] = NonInferior(p.drop_margin).judge(
            res.values("shared", "probe_video"), res.values(ref, "probe_video"), "shared video probe",
            "specific video probe")
    verdict = smoke(all_of(*parts.values()), name)

    def per_variant(key: str, variants) -> dict[str, float]:
        return {v: round(float(sum(res.values(v, key)) / p.seeds), 4) for v in variants}

    trained = [v for v in p.variants if v != "random-init"]
    details = {
        "verdicts": {k: f"{v.verdict}: {v.reason}" for k, v in parts.items()},
        "costs per variant (mean over seeds)": {
            v: {"params": res[v, 0]["params"], "GFLOPs/step": round(res[v, 0]["flops_per_step"] / 1e9, 2),
                "training TFLOPs": round(res[v, 0]["train_flops"] / 1e12, 2),
                "s/step": round(float(sum(res.values(v, "seconds_per_step")) / p.seeds), 3),
                "train s": round(float(sum(res.values(v, "train_seconds")) / p.seeds), 1),
                "activation MiB": round(res[v, 0]["activation_mib"], 1),
                "probe video": per_variant("probe_video", [v])[v], "probe audio": per_variant("probe_audio", [v])[v],
                "probe both": per_variant("probe_both", [v])[v]} for v in trained},
        "retrieval per variant (mean over seeds; R@1 / R@10 / median rank)": {
            v: {k: f"{per_variant(f'{k}_R@1', [v])[v]:.3f} / {per_variant(f'{k}_R@10', [v])[v]:.3f} / "
                   f"{per_variant(f'{k}_median_rank', [v])[v]:.1f}" for k in ("v2t", "t2v", "v2a", "a2v")}
            for v in p.variants if v != "supervised"},
        "retrieval chance": {"R@1": 1 / p.retrieval_pool, "R@10": 10 / p.retrieval_pool,
                             "median rank": (p.retrieval_pool + 1) / 2},
        "data": {"train clips": p.n_train, "test clips": p.n_test, "params": dataclasses.asdict(p.data),
                 "data seed": p.data_seed},
        "budget": f"{p.train.steps} steps x {p.train.batch_size} clips per variant and seed",
    }
    plots = [plot_bars_with_ci({v: res.values(v, "probe_video") for v in p.variants}, run_dir / "probe_video.png",
                               title="linear-probe digit accuracy from video (test split)", ylabel="accuracy"),
             plot_bars_with_ci({v: res.values(v, "probe_audio") for v in p.variants}, run_dir / "probe_audio.png",
                               title="linear-probe digit accuracy from audio (unseen speakers)", ylabel="accuracy"),
             plot_droptoken(res, keeps, run_dir / "droptoken.png")]
    used = json.loads((run_dir / "config.json").read_text())["config"]["precision"]
    notes = (f"Data: AV-MNIST-style triplets generated from MNIST and FSDD (not HowTo100M/AudioSet): {p.n_train} "
             f"train clips, {p.n_test} test clips (MNIST test digits, FSDD speakers unseen in training), "
             f"{p.data.frames} frames of {p.data.size} px, {p.data.audio_samples} samples at 8 kHz, "
             f"{p.data.captions_per_clip} captions per clip. Probes: logistic regression on frozen [AGG] features "
             f"fitted on the train split. Retrieval: pools of {p.retrieval_pool} test clips (chance R@1 "
             f"{1 / p.retrieval_pool:.0%}); a clip shares its digit with about a tenth of its pool, and only the "
             f"digit links video and audio, so instance-level audio retrieval is capped near 10% R@1. Costs: FLOPs "
             f"counted per training step (matmuls and attention), activation memory = bytes autograd saves in one "
             f"step, wall time on a shared 2-core CPU. Precision: {used['used']} ({used['requested']}: "
             f"{used['reason']}).")
    write_result(run_dir, PAPER, CLAIM, m, verdict, details=details, notes=notes, plots=plots)
    return run_dir


def plot_droptoken(res, keeps: list[str], path: Path) -> Path:
    """Video probe accuracy against training FLOPs, one point per keep rate and seed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    for v in keeps:
        xs = [f / 1e12 for f in res.values(v, "train_flops")]
        ax.scatter(xs, res.values(v, "probe_video"), label=v)
    ax.set_xlabel("training TFLOPs (counted)")
    ax.set_ylabel("video probe accuracy")
    ax.set_title("DropToken: cost vs accuracy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
