"""AV-MNIST-style (video, audio, captions) triplets for VATT, built deterministically from MNIST and FSDD.

One clip: a short video of one MNIST digit moving in a straight line (start, direction and speed from the seed),
the same digit spoken by a Free Spoken Digit Dataset speaker (8 kHz), and ``captions_per_clip`` captions made from
templates that name the digit and describe the motion (some name only one of the two, as narrations are often
off: MIL-NCE's several candidates). Both modalities are degraded the AV-MNIST way (Vielzeuf et al., 2018) so that
neither alone is at ceiling: the digit image keeps only its leading principal components (the rest of its energy is
removed) and gets pixel noise; the waveform is mixed with white noise at a fixed SNR.

Splits: ``train`` uses MNIST's train images and the FSDD clips of ``train_speakers``; ``test`` uses MNIST's test
images and the clips of the other speakers (speaker-disjoint). Everything follows from ``seed``; the parameters are
published in ``AVMNIST.md`` next to this file.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

__all__ = ["AVMNIST", "AVMNISTParams", "DIRECTIONS", "avmnist_vocab", "generate_avmnist", "tokenize_captions"]

SPLITS = ("train", "test")
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
DIRECTIONS = ("right", "up and to the right", "up", "up and to the left", "left", "down and to the left", "down",
              "down and to the right")  # index k: angle k * 45 degrees, counter-clockwise from +x (image y points down)
VERBS = ("moves", "drifts", "slides", "travels", "goes")
TEMPLATES = (  # (template, names the digit, names the motion)
    ("a {digit} {verb} {speed} {dir}", True, True),
    ("the number {digit} {verb} {dir}", True, True),
    ("we see a {digit} that {verb} {dir} across the frame", True, True),
    ("the digit {digit} is shown", True, False),
    ("something {verb} {speed} {dir}", False, True),
)
PAD, UNK = 0, 1


@dataclass(frozen=True)
class AVMNISTParams:
    """Everything the generator draws from besides the seed (see ``AVMNIST.md``)."""

    frames: int = 8  # T
    size: int = 32  # canvas H = W
    digit_size: int = 20  # the 28-px MNIST digit is resized to this many pixels
    speed: tuple[float, float] = (0.7, 1.5)  # pixels per frame, uniform; "slowly" below the middle, "quickly" above
    pca_energy_kept: float = 0.4  # the digit keeps the leading principal components holding this share of energy
    pca_fit_images: int = 10000  # MNIST train images the components are fitted on
    pixel_noise: float = 0.15  # std of Gaussian noise per pixel and frame, on the [0, 1] scale
    audio_samples: int = 8192  # ~1 s at 8 kHz
    audio_snr_db: float = 0.0  # white noise mixed in at this signal-to-noise ratio (of the speech's RMS)
    audio_shift: int = 1024  # the utterance's centre moves up to this many samples either way
    captions_per_clip: int = 5
    max_words: int = 16
    train_speakers: tuple[str, ...] = ("george", "jackson", "nicolas", "theo")  # test: lucas, yweweler

    def __post_init__(self) -> None:
        if not 0.0 < self.pca_energy_kept <= 1.0:
            raise ValueError(f"pca_energy_kept must be in (0, 1], got {self.pca_energy_kept}")
        if self.digit_size > self.size:
            raise ValueError(f"digit_size ({self.digit_size}) must be <= size ({self.size})")
        travel = self.speed[1] * (self.frames - 1)
        if travel > self.size - self.digit_size:
            raise ValueError(f"the fastest digit travels {travel:.1f} px but the canvas leaves "
                             f"{self.size - self.digit_size}: lower speed or frames, or enlarge size")
        if not 1 <= self.captions_per_clip <= len(TEMPLATES):
            raise ValueError(f"captions_per_clip must be in [1, {len(TEMPLATES)}], got {self.captions_per_clip}")


@dataclass
class AVMNIST:
    """One split. ``video`` float32 (N, 1, T, H, W) in [-1, 1]; ``audio`` float32 (N, L); ``text`` int64
    (N, K, max_words) word ids (0 = padding); ``labels`` int64 (N,) the digit; ``direction`` int64 (N,) index into
    ``DIRECTIONS``; ``speakers`` the FSDD speaker of each clip; ``captions`` the K strings per clip."""

    video: torch.Tensor
    audio: torch.Tensor
    text: torch.Tensor
    labels: torch.Tensor
    direction: torch.Tensor
    speakers: list[str]
    captions: list[list[str]]
    vocab: tuple[str, ...]
    params: AVMNISTParams

    def __len__(self) -> int:
        return len(self.labels)

    def dataset(self) -> TensorDataset:
        """``(video, audio, text, labels)`` as a TensorDataset (what the Trainer slices)."""
        return TensorDataset(self.video, self.audio, self.text, self.labels)


def avmnist_vocab() -> tuple[str, ...]:
    """The word vocabulary of the caption templates: padding, unknown, then every word, sorted."""
    words = set(DIGIT_WORDS) | {str(d) for d in range(10)} | {"slowly", "quickly"}
    for phrase in DIRECTIONS + VERBS + tuple(t for t, _, _ in TEMPLATES):
        words |= {w for w in re.sub(r"\{\w+\}", " ", phrase).split()}
    return ("<pad>", "<unk>", *sorted(words))


def tokenize_captions(captions: list[list[str]], vocab: tuple[str, ...], max_words: int) -> torch.Tensor:
    """Word ids int64 (N, K, max_words) of ``captions`` (N lists of K strings); unknown words map to 1, padding 0."""
    index = {w: i for i, w in enumerate(vocab)}
    out = torch.zeros(len(captions), len(captions[0]) if captions else 0, max_words, dtype=torch.int64)
    for i, clip in enumerate(captions):
        for k, c in enumerate(clip):
            ids = [index.get(w, UNK) for w in c.split()][:max_words]
            out[i, k, :len(ids)] = torch.tensor(ids, dtype=torch.int64)
    return out


def generate_avmnist(split: str, n: int, seed: int = 0, params: AVMNISTParams = AVMNISTParams(),
                     root=None) -> AVMNIST:
    """``n`` triplets of ``split`` ('train' or 'test'), deterministic from ``seed`` (reads MNIST and FSDD)."""
    from paperzoo.data.fsdd import load_fsdd, pad_or_crop
    from paperzoo.data.idx import load_mnist

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for avmnist; valid: {SPLITS}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    p = params
    rng = np.random.default_rng(np.random.SeedSequence([seed, SPLITS.index(split)]))
    labels = rng.integers(0, 10, n)

    # video: the digit of each clip, degraded, moving along a straight line
    mnist = load_mnist(split, root=root)
    comps = _pca_basis(load_mnist("train", root=root).images[:p.pca_fit_images], p.pca_energy_kept)
    by_class = [np.flatnonzero(mnist.labels.numpy() == d) for d in range(10)]
    pick = np.array([by_class[d][rng.integers(len(by_class[d]))] for d in labels])
    digits = _keep_components(mnist.images[torch.from_numpy(pick)].float() / 255.0, *comps)  # (n, 1, 28, 28)
    direction = rng.integers(0, len(DIRECTIONS), n)
    speed = rng.uniform(*p.speed, n)
    video = _render_motion(digits, direction, speed, rng, p)
    video = video + torch.from_numpy(rng.normal(0.0, p.pixel_noise, video.shape).astype(np.float32))
    video = (video.clamp(0, 1) * 2 - 1).contiguous()  # [-1, 1] as the official input pipeline

    # audio: the same digit spoken by a speaker of this split, shifted, mixed with white noise
    fsdd = load_fsdd("all", root=root)
    train_side = split == "train"
    pool = [[i for i, (lab, spk) in enumerate(zip(fsdd.labels.tolist(), fsdd.speakers, strict=True))
             if lab == d and (spk in p.train_speakers) == train_side] for d in range(10)]
    if any(not c for c in pool):
        raise ValueError(f"no FSDD clips of some digit for the {split} speakers; train_speakers={p.train_speakers}")
    clips = [pool[d][rng.integers(len(pool[d]))] for d in labels]
    audio = pad_or_crop([fsdd.waveforms[i] for i in clips], p.audio_samples, center=True)
    shifts = rng.integers(-p.audio_shift, p.audio_shift + 1, n)
    audio = torch.stack([torch.roll(a, int(s)) for a, s in zip(audio, shifts, strict=True)])
    audio = audio / audio.pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-8) * 0.1  # speech RMS 0.1
    noise_rms = 0.1 * 10 ** (-p.audio_snr_db / 20)
    audio = audio + torch.from_numpy(rng.normal(0.0, noise_rms, audio.shape).astype(np.float32))
    audio = audio / audio.abs().amax(1, keepdim=True)  # peak 1: the waveform in [-1, 1] as the official input

    # captions: K templates per clip, words drawn from the seed
    captions = [_captions(int(d), int(k), float(s), rng, p) for d, k, s in zip(labels, direction, speed, strict=True)]
    vocab = avmnist_vocab()
    return AVMNIST(video, audio.contiguous(), tokenize_captions(captions, vocab, p.max_words),
                   torch.from_numpy(labels.astype(np.int64)), torch.from_numpy(direction.astype(np.int64)),
                   [fsdd.speakers[i] for i in clips], captions, vocab, p)


def describe_params(params: AVMNISTParams) -> dict:
    """The generator's parameters as a JSON-ready dict."""
    return asdict(params)


# ----------------------------------------------------------------------------------------------------- helpers
def _pca_basis(images: torch.Tensor, energy: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean (784,), leading components (k, 784))`` holding ``energy`` of the centred images' variance."""
    x = images.reshape(len(images), -1).double() / 255.0
    mean = x.mean(0)
    _, s, vt = torch.linalg.svd(x - mean, full_matrices=False)
    share = (s**2).cumsum(0) / (s**2).sum()
    k = int((share < energy).sum()) + 1
    return mean.float(), vt[:k].float()


def _keep_components(digits: torch.Tensor, mean: torch.Tensor, comps: torch.Tensor) -> torch.Tensor:
    """Project (n, 1, 28, 28) images in [0, 1] on ``mean + span(comps)``: the rest of the energy is removed."""
    x = digits.reshape(len(digits), -1) - mean
    x = (x @ comps.T) @ comps + mean  # x_kept = mean + V_k V_k^T (x - mean)
    return x.clamp(0, 1).reshape(digits.shape)


def _render_motion(digits: torch.Tensor, direction: np.ndarray, speed: np.ndarray, rng: np.random.Generator,
                   p: AVMNISTParams) -> torch.Tensor:
    """(n, 1, T, H, W) in [0, 1]: each digit (resized to ``digit_size``) translated along its line, bilinear."""
    n, t, s, d = len(digits), p.frames, p.size, p.digit_size
    small = F.interpolate(digits, size=(d, d), mode="bilinear", antialias=True, align_corners=False)
    angle = direction * (np.pi / 4)
    v = np.stack([np.cos(angle), -np.sin(angle)], 1) * speed[:, None]  # (n, 2) px/frame in (x, y); y grows down
    travel = v * (t - 1)
    free = s - d
    lo = np.maximum(0.0, -travel)  # top-left corner range that keeps the whole path inside the canvas
    hi = np.minimum(free, free - travel)
    start = lo + rng.uniform(0, 1, (n, 2)) * (hi - lo)
    corner = start[:, None, :] + v[:, None, :] * np.arange(t)[None, :, None]  # (n, T, 2)
    canvas = F.pad(small, (0, s - d, 0, s - d))  # the digit at the top-left corner of the canvas
    canvas = canvas[:, None].expand(n, t, 1, s, s).reshape(n * t, 1, s, s)
    shift = torch.from_numpy(corner.reshape(n * t, 2)).float()
    theta = torch.zeros(n * t, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, :, 2] = -2.0 * shift / s  # output pixel x samples input x - shift (normalised coordinates)
    grid = F.affine_grid(theta, (n * t, 1, s, s), align_corners=False)
    frames = F.grid_sample(canvas, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return frames.reshape(n, t, 1, s, s).transpose(1, 2).contiguous()


def _captions(digit: int, direction: int, speed: float, rng: np.random.Generator, p: AVMNISTParams) -> list[str]:
    """``captions_per_clip`` captions from distinct templates (shuffled), words drawn from ``rng``."""
    order = rng.permutation(len(TEMPLATES))[:p.captions_per_clip]
    slow = speed < (p.speed[0] + p.speed[1]) / 2
    out = []
    for i in order:
        template = TEMPLATES[i][0]
        word = DIGIT_WORDS[digit] if rng.random() < 0.5 else str(digit)
        out.append(template.format(digit=word, verb=VERBS[rng.integers(len(VERBS))],
                                   speed="slowly" if slow else "quickly", dir=DIRECTIONS[direction]))
    return out
