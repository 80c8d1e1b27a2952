"""Free Spoken Digit Dataset from its wav tar: waveforms, digit labels, speakers; official split.

Clips ``recordings/{digit}_{speaker}_{index}.wav`` are 8 kHz mono int16; the official split puts
index 0-4 in test (300 clips) and 5-49 in train (2700 clips).

:func:`build_fsdd_tar` rebuilds the reference tar from GitHub's archive of tag v1.0.10: the wav files of its
``recordings/`` folder, verbatim, packed like the reference (GNU format, ``recordings`` then the files sorted by
name, fixed mtime and owner, the git file modes: the clips of nicolas and theo are committed executable). Its
decompressed bytes equal the reference's, which is how the catalog checks it.
"""

from __future__ import annotations

import os
import re
import tarfile
import wave
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from paperzoo.data.store import atomic_writer, require

SPLITS = ("train", "test", "all")
SAMPLE_RATE = 8000
TAR_NAME = "fsdd_recordings_wav.tar.gz"
ARCHIVE = "free-spoken-digit-dataset-1.0.10.zip"
TAR_MTIME = 1714608000  # every member of the reference tar carries this mtime (2024-05-02)
_CLIP = re.compile(r"[0-9]_[a-z]+_[0-9]+\.wav")
_EXECUTABLE_SPEAKERS = ("nicolas", "theo")  # git mode 100755 in v1.0.10, for an archive that records no modes


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


def read_fsdd_tar(path: str | os.PathLike, split: str = "train") -> SpokenDigits:
    """Parse a tar of ``recordings/{digit}_{speaker}_{index}.wav``: ``split`` as in :func:`load_fsdd`."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for fsdd; valid: {SPLITS}")
    rows = []
    with tarfile.open(path, "r:*") as tar:
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


def load_fsdd(split: str = "train", root: str | os.PathLike | None = None) -> SpokenDigits:
    """FSDD ``split``: 'train' (index 5-49, 2700), 'test' (index 0-4, 300) or 'all' (3000), sorted by file name."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for fsdd; valid: {SPLITS}")
    return read_fsdd_tar(require("fsdd", root=root, files=(TAR_NAME,)) / TAR_NAME, split)


def build_fsdd_tar(archive: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Write ``out_dir/fsdd_recordings_wav.tar.gz`` from the repository archive (a zip whose one top folder holds
    ``recordings/*.wav``); every clip is checked to be 8 kHz mono int16. Returns the relative paths written."""
    from paperzoo.data.upstream import pack_tar_gz

    clips: dict[str, tuple[bytes, bool]] = {}
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if info.is_dir() or len(parts) != 3 or parts[1] != "recordings" or not parts[2].endswith(".wav"):
                continue
            if not _CLIP.fullmatch(parts[2]):
                raise ValueError(f"{archive}: {info.filename}: expected recordings/<digit>_<speaker>_<index>.wav")
            raw = z.read(info)
            _decode_wav(raw, info.filename)
            mode = info.external_attr >> 16 if info.create_system == 3 else 0  # unix mode, as git archive writes it
            executable = bool(mode & 0o100) if mode else parts[2].split("_")[1] in _EXECUTABLE_SPEAKERS
            clips[parts[2]] = (raw, executable)
    if not clips:
        raise ValueError(f"{archive} holds no <top>/recordings/*.wav: not the free-spoken-digit-dataset archive")
    members = [("recordings", None, True)] + [(f"recordings/{n}", *clips[n]) for n in sorted(clips)]
    with atomic_writer(Path(out_dir) / TAR_NAME) as f:
        f.write(pack_tar_gz(members, TAR_MTIME, level=9))
    return [TAR_NAME]


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
