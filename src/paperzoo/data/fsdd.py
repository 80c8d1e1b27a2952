"""Free Spoken Digit Dataset from its wav tar: waveforms, digit labels, speakers; official split.

Clips ``recordings/{digit}_{speaker}_{index}.wav`` are 8 kHz mono int16; the official split puts
index 0-4 in test (300 clips) and 5-49 in train (2700 clips).
"""

from __future__ import annotations

import os
import tarfile
import wave
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from paperzoo.data.store import require

SPLITS = ("train", "test", "all")
SAMPLE_RATE = 8000
TAR_NAME = "fsdd_recordings_wav.tar.gz"


@dataclass
class SpokenDigits(Dataset):
    """Variable-length waveforms (each float32 (T,) in [-1, 1]), labels int64 (N,), speakers and indices."""

    waveforms: list[torch.Tensor]
    labels: torch.Tensor
    speakers: list[str]
    indices: list[int]
    sample_rate: int = SAMPLE_RATE

    def __len__(self) -> int:
        return len(self.waveforms)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.waveforms[i], self.labels[i]


def _decode_wav(raw: bytes, name: str) -> np.ndarray:
    import io

    with wave.open(io.BytesIO(raw)) as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, SAMPLE_RATE):
            raise ValueError(f"{name}: expected mono int16 at {SAMPLE_RATE} Hz, got channels={w.getnchannels()} "
                             f"width={w.getsampwidth()} rate={w.getframerate()}")
        frames = w.readframes(w.getnframes())
    return (np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0)


def load_fsdd(split: str = "train", root: str | os.PathLike | None = None) -> SpokenDigits:
    """FSDD ``split``: 'train' (index 5-49, 2700), 'test' (index 0-4, 300) or 'all' (3000), sorted by file name."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for fsdd; valid: {SPLITS}")
    tar_path = require("fsdd", root=root) / TAR_NAME
    rows = []
    with tarfile.open(tar_path, "r:gz") as tar:
        for m in tar:
            base = os.path.basename(m.name)
            if not m.isfile() or not base.endswith(".wav"):
                continue
            digit, speaker, index = base[:-4].split("_")
            idx = int(index)
            if split == "all" or (split == "test") == (idx < 5):
                rows.append((base, int(digit), speaker, idx, _decode_wav(tar.extractfile(m).read(), base)))
    rows.sort(key=lambda r: r[0])
    return SpokenDigits([torch.from_numpy(r[4]) for r in rows], torch.tensor([r[1] for r in rows], dtype=torch.int64),
                        [r[2] for r in rows], [r[3] for r in rows])


def pad_or_crop(waveforms: Sequence[torch.Tensor] | torch.Tensor, length: int, center: bool = False) -> torch.Tensor:
    """Zero-pad or crop each 1-D float waveform to ``length`` samples: returns float32 (N, length).

    Cropping keeps the start (or the centre if ``center``); padding appends zeros at the end (or both ends).
    """
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be a positive int, got {length!r}")
    if isinstance(waveforms, torch.Tensor):
        waveforms = [waveforms] if waveforms.dim() == 1 else list(waveforms)
    out = torch.zeros(len(waveforms), length, dtype=torch.float32)
    for i, w in enumerate(waveforms):
        if not isinstance(w, torch.Tensor) or w.dim() != 1 or not w.is_floating_point():
            raise ValueError(f"waveform {i}: expected a 1-D float tensor (T,), got "
                             f"{getattr(w, 'dtype', type(w))} {tuple(getattr(w, 'shape', ()))}")
        t = w.shape[0]
        if t >= length:
            start = (t - length) // 2 if center else 0
            out[i] = w[start:start + length]
        else:
            start = (length - t) // 2 if center else 0
            out[i, start:start + t] = w
    return out
