"""The AV-MNIST-style triplet generator: deterministic from its seed, speaker-disjoint, captions that fit the clip."""

import pytest
import torch

from paperzoo.data.avmnist import DIRECTIONS, AVMNISTParams, avmnist_vocab, generate_avmnist, tokenize_captions

P = AVMNISTParams(captions_per_clip=3)


@pytest.mark.data("mnist", "fsdd")
def test_generator_is_deterministic_from_its_seed():
    a, b = generate_avmnist("train", 40, seed=3, params=P), generate_avmnist("train", 40, seed=3, params=P)
    for k in ("video", "audio", "text", "labels", "direction"):
        assert torch.equal(getattr(a, k), getattr(b, k)), k
    assert a.captions == b.captions and a.speakers == b.speakers
    c = generate_avmnist("train", 40, seed=4, params=P)
    assert not torch.equal(a.video, c.video) and not torch.equal(a.labels, c.labels)


@pytest.mark.data("mnist", "fsdd")
def test_speakers_are_disjoint_between_splits_and_clips_are_well_formed():
    tr, te = generate_avmnist("train", 300, params=P), generate_avmnist("test", 300, params=P)
    assert set(tr.speakers) <= set(P.train_speakers) and set(tr.speakers) == set(P.train_speakers)
    assert not set(te.speakers) & set(tr.speakers) and set(te.speakers) == {"lucas", "yweweler"}
    assert tr.video.shape == (300, 1, P.frames, P.size, P.size) and tr.video.min() >= -1 and tr.video.max() <= 1
    assert tr.audio.shape == (300, P.audio_samples) and tr.text.shape == (300, 3, P.max_words)
    assert set(tr.labels.tolist()) == set(range(10))
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    for clip, d, k in zip(tr.captions[:50], tr.labels[:50].tolist(), tr.direction[:50].tolist(), strict=True):
        assert len(clip) == 3 and len(set(clip)) == 3
        for c in clip:
            named = str(d) in c.split() or words[d] in c.split()
            assert named != c.startswith("something"), c  # the motion-only caption names no digit, the others do
            assert (DIRECTIONS[k] in c) != c.endswith("is shown"), c  # the digit-only caption names no motion


@pytest.mark.data("mnist", "fsdd")
def test_the_digit_moves_in_its_direction():
    d = generate_avmnist("train", 64, params=AVMNISTParams(pixel_noise=0.0))
    img = (d.video[:, 0] + 1) / 2  # (n, T, H, W)
    ys, xs = torch.arange(img.shape[2]).float(), torch.arange(img.shape[3]).float()
    mass = img.sum((2, 3))
    cx = (img.sum(2) * xs).sum(-1) / mass  # (n, T) centre of mass
    cy = (img.sum(3) * ys).sum(-1) / mass
    dx, dy = cx[:, -1] - cx[:, 0], cy[:, -1] - cy[:, 0]
    angle = torch.atan2(-dy, dx)  # image y points down
    want = d.direction.float() * torch.pi / 4
    err = torch.remainder(angle - want + torch.pi, 2 * torch.pi) - torch.pi
    assert err.abs().max() < 0.35, err.abs().max()


def test_vocabulary_and_tokenizer():
    vocab = avmnist_vocab()
    assert vocab[:2] == ("<pad>", "<unk>") and len(set(vocab)) == len(vocab)
    ids = tokenize_captions([["the digit 7 is shown", "zzz"]], vocab, 4)
    assert ids.shape == (1, 2, 4) and (ids[0, 0] > 1).all() and ids[0, 1].tolist() == [1, 0, 0, 0]


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="travels"):
        AVMNISTParams(speed=(1.0, 3.0))
    with pytest.raises(ValueError, match="pca_energy_kept"):
        AVMNISTParams(pca_energy_kept=0.0)
    with pytest.raises(ValueError, match="unknown split"):
        generate_avmnist("val", 4)
