"""ELECTRA: masking statistics, labels, gradient isolation, sampling, heads at masked positions, ablations, metrics."""

import math

import pytest
import torch

from paperzoo.papers.electra.masking import default_max_predictions, mask_tokens, num_to_predict
from paperzoo.papers.electra.model import (
    ElectraConfig,
    ElectraGenerator,
    build_generator_and_discriminator,
    mlm_config,
)
from paperzoo.papers.electra.objective import (
    MODES,
    DiscriminatorMLMHead,
    ElectraPretrainer,
    ObjectiveConfig,
    binary_auc,
    gumbel_sample,
    pretraining_metrics,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, CLS, SEP, MASK)
CHI2_DF1_P001 = 10.83


def random_batch(b, n, vocab=1000, seed=0, min_len=None):
    """[CLS] tokens [SEP] [PAD]...; random lengths; a few [MASK]/[SEP] inside to check they are never chosen."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, n), generator=g)
    lengths = torch.randint(min_len or 3, n + 1, (b,), generator=g)
    mask = torch.zeros(b, n, dtype=torch.long)
    for i, L in enumerate(lengths.tolist()):
        ids[i, 0], ids[i, L - 1] = CLS, SEP
        ids[i, L:] = PAD
        mask[i, :L] = 1
    inner = (torch.rand(b, n, generator=g) < 0.02) & (mask.bool())
    inner[:, 0] = False
    ids[inner] = torch.where(torch.rand(int(inner.sum()), generator=g) < 0.5, MASK, SEP)
    return ids, mask


def tiny_models(mode="electra", **cfg_over):
    torch.manual_seed(0)
    cfg = ElectraConfig.preset("tiny", **cfg_over)
    obj = ObjectiveConfig(mode=mode)
    if mode == "mlm":
        return ElectraPretrainer(ElectraGenerator(mlm_config(cfg)), None, None, obj)
    gen, disc = build_generator_and_discriminator(cfg)
    if mode in ("electra", "electra-15"):
        return ElectraPretrainer(gen, disc.body, disc.head, obj)
    head = DiscriminatorMLMHead(disc.body.embeddings.word, cfg.dim, copy=mode == "all-tokens-mlm")
    return ElectraPretrainer(gen, disc.body, None, obj, mlm_head=head)


# ------------------------------------------------------------------------------------------------------ masking
def test_masking_statistics_over_1e5_positions():
    ids, mask = random_batch(1600, 128, seed=1)
    assert int(mask.sum()) > 100_000
    m = mask_tokens(ids, mask, MASK, SPECIAL, generator=torch.Generator().manual_seed(2))
    cand = mask.bool() & ~torch.isin(ids, torch.tensor(SPECIAL))
    # exact counts: k = clip(round(n * 0.15), 1, 19) per row (or every candidate when fewer)
    k = num_to_predict(mask.sum(1), 0.15, default_max_predictions(128))
    assert torch.equal(m.is_masked.sum(1), torch.minimum(k, cand.sum(1)))
    assert torch.equal(m.counts, m.is_masked.long())
    # special tokens and padding are never chosen
    assert not (m.is_masked & ~cand).any()
    # 85% [MASK] / 15% original; never a random token; unchosen positions untouched
    chosen = int(m.is_masked.sum())
    n_mask = int((m.input_ids[m.is_masked] == MASK).sum())
    kept = m.is_masked & (m.input_ids != MASK)
    assert torch.equal(m.input_ids[kept], ids[kept])
    assert torch.equal(m.input_ids[~m.is_masked], ids[~m.is_masked])
    exp = (0.85 * chosen, 0.15 * chosen)
    chi2 = (n_mask - exp[0]) ** 2 / exp[0] + (chosen - n_mask - exp[1]) ** 2 / exp[1]
    assert chi2 < CHI2_DF1_P001, (n_mask, chosen)
    # positions uniform among candidates: among full-length rows, a chosen rate per position of 19/~124
    full = mask.sum(1) == 128
    rate = m.is_masked[full][:, 1:-1].float()
    obs = rate.sum(0)
    expected = (cand[full][:, 1:-1].float() * (m.is_masked[full].sum(1, keepdim=True)
                                               / cand[full].sum(1, keepdim=True))).sum(0)
    chi2 = float(((obs - expected) ** 2 / expected).sum())
    df = obs.numel() - 1
    assert chi2 < df + 4 * math.sqrt(2 * df), chi2  # about 4 sigma


def test_count_rounds_in_float32_like_tensorflow():
    import numpy as np

    n = np.arange(1, 600)
    for p in (0.15, 0.25, 0.1):  # tf.round(tf.cast(n, float32) * p): float32, half to even
        want = np.clip(np.round(n.astype(np.float32) * np.float32(p)), 1, 50).astype(int).tolist()
        assert num_to_predict(torch.from_numpy(n), p, 50).tolist() == want
    assert num_to_predict(torch.tensor([30, 10, 3, 1, 1000]), 0.15, 19).tolist() == [4, 2, 1, 1, 19]
    assert default_max_predictions(128) == 19 and default_max_predictions(512) == 79


def test_masking_with_replacement_follows_the_official_draws():
    ids, mask = random_batch(400, 64, seed=3, min_len=30)
    m = mask_tokens(ids, mask, MASK, SPECIAL, replacement=True, generator=torch.Generator().manual_seed(4))
    k = num_to_predict(mask.sum(1), 0.15, default_max_predictions(64))
    assert torch.equal(m.counts.sum(1), k)  # every draw weighs in the loss
    assert (m.is_masked.sum(1) <= k).all() and (m.counts > 1).any()  # duplicates happen
    assert not (m.is_masked & torch.isin(ids, torch.tensor(SPECIAL))).any()


def test_masking_validates_input():
    ids, mask = random_batch(2, 8)
    with pytest.raises(ValueError, match="integer"):
        mask_tokens(ids.float(), mask, MASK, SPECIAL)
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(ids, mask, MASK, SPECIAL, mask_prob=0.0)
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        mask_tokens(ids, mask[:, :3], MASK, SPECIAL)


def test_bert_masking_80_10_10_over_1e5_positions():
    """BERT's rule (create_pretraining_data.py): of the chosen positions 80% [MASK], 10% a random token drawn
    uniformly from the whole vocabulary (special ids included; it may equal the original), 10% unchanged. Every
    chosen position, changed or not, carries a label; the chosen positions are drawn as ELECTRA's."""
    vocab = 1000
    ids, mask = random_batch(1600, 128, vocab=vocab, seed=1)
    m = mask_tokens(ids, mask, MASK, SPECIAL, mask_token_prob=0.8, random_token_prob=0.1, vocab_size=vocab,
                    generator=torch.Generator().manual_seed(2))
    electra = mask_tokens(ids, mask, MASK, SPECIAL, generator=torch.Generator().manual_seed(2))
    assert torch.equal(m.is_masked, electra.is_masked) and torch.equal(m.counts, electra.counts)
    assert torch.equal(m.original_ids, ids) and torch.equal(m.input_ids[~m.is_masked], ids[~m.is_masked])
    sel = m.is_masked
    chosen = int(sel.sum())
    is_mask = m.input_ids[sel] == MASK
    changed = (m.input_ids[sel] != ids[sel]) & ~is_mask
    same = m.input_ids[sel] == ids[sel]
    # a random draw lands on [MASK] or on the original with probability 1/vocab each
    p = {"mask": 0.8 + 0.1 / vocab, "random": 0.1 * (1 - 2 / vocab), "same": 0.1 + 0.1 / vocab}
    obs = {"mask": int(is_mask.sum()), "random": int(changed.sum()), "same": int(same.sum())}
    assert sum(obs.values()) == chosen
    chi2 = sum((obs[k] - p[k] * chosen) ** 2 / (p[k] * chosen) for k in p)
    assert chi2 < 13.82, (obs, chosen)  # chi2, 2 degrees of freedom, p = 0.001
    # unchanged positions keep their labels: they are masked (in the loss) with weight 1 and the original id
    assert (m.counts[sel] == 1).all() and int(same.sum()) > 0.08 * chosen


def test_bert_random_tokens_are_uniform_over_the_whole_vocabulary():
    vocab = 20
    ids = torch.full((4000, 40), 7)
    ids[:, 0] = CLS
    m = mask_tokens(ids, None, MASK, SPECIAL, mask_prob=0.5, max_predictions=20, mask_token_prob=0.0,
                    random_token_prob=1.0, vocab_size=vocab, generator=torch.Generator().manual_seed(5))
    drawn = m.input_ids[m.is_masked]
    counts = torch.bincount(drawn, minlength=vocab).float()
    assert counts.numel() == vocab and (counts > 0).all()  # special ids 0, 2, 3, 4 included, as BERT
    expected = drawn.numel() / vocab
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 43.82, counts  # chi2, 19 degrees of freedom, p = 0.001


def test_bert_masking_flag_in_the_objective():
    """``ObjectiveConfig(masking="bert")`` masks 80/10/10 with the generator's vocabulary; the default is ELECTRA's
    official masking, drawn exactly as before."""
    ids, mask = random_batch(400, 64, seed=6)
    bert, electra = tiny_models("mlm"), tiny_models("mlm")
    bert.config = ObjectiveConfig(mode="mlm", masking="bert")
    assert electra.config.masking == "electra"
    mb = bert.mask(ids, mask, torch.Generator().manual_seed(7))
    me = electra.mask(ids, mask, torch.Generator().manual_seed(7))
    direct = mask_tokens(ids, mask, MASK, SPECIAL, generator=torch.Generator().manual_seed(7))
    assert torch.equal(me.input_ids, direct.input_ids) and torch.equal(me.is_masked, direct.is_masked)
    sel = mb.is_masked
    frac_mask = float((mb.input_ids[sel] == MASK).float().mean())
    frac_random = float(((mb.input_ids[sel] != ids[sel]) & (mb.input_ids[sel] != MASK)).float().mean())
    assert abs(frac_mask - 0.8) < 0.03 and abs(frac_random - 0.1) < 0.03
    assert int(mb.input_ids.max()) < 1000  # drawn from the generator's vocabulary
    kept = me.is_masked & (me.input_ids != MASK)
    assert torch.equal(me.input_ids[kept], ids[kept])  # ELECTRA's masking never inserts random tokens
    out = bert(ids, mask)
    assert torch.isfinite(out.loss)
    with pytest.raises(ValueError, match="masking must be one of"):
        ObjectiveConfig(masking="roberta")
    with pytest.raises(ValueError, match="masking='bert'"):
        ObjectiveConfig(masking="bert", mask_token_prob=0.7)


def test_random_token_masking_validates():
    ids, mask = random_batch(2, 8)
    with pytest.raises(ValueError, match="vocab_size"):
        mask_tokens(ids, mask, MASK, SPECIAL, random_token_prob=0.1)
    with pytest.raises(ValueError, match="mask_token_prob \\+ random_token_prob"):
        mask_tokens(ids, mask, MASK, SPECIAL, mask_token_prob=0.95, random_token_prob=0.1, vocab_size=1000)
    with pytest.raises(ValueError, match="random_token_prob"):
        mask_tokens(ids, mask, MASK, SPECIAL, random_token_prob=-0.1, vocab_size=1000)


# ------------------------------------------------------------------------------------------------------ labels
class FixedGenerator(torch.nn.Module):
    """A generator whose logits put all mass on the original token (exact) or on a fixed wrong token."""

    def __init__(self, inner, exact: bool):
        super().__init__()
        self.inner, self.exact, self.original = inner, exact, None

    @property
    def body(self):
        return self.inner.body

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, positions=None):
        out = self.inner(input_ids, attention_mask, token_type_ids, positions=positions)
        target = self.original[positions] if self.exact else torch.full_like(self.original[positions], 7)
        if not self.exact:
            target = torch.where(self.original[positions] == 7, 8, 7)
        out.logits = out.logits + 1e4 * torch.nn.functional.one_hot(target, out.logits.shape[-1])
        return out


@pytest.mark.parametrize("exact", [True, False])
def test_labels_replaced_only_if_masked_and_different(exact):
    model = tiny_models()
    model.generator = FixedGenerator(model.generator, exact)
    ids, mask = random_batch(8, 32, seed=5)
    model.generator.original = ids
    out = model(ids, mask)
    if exact:  # a correctly sampled token is labelled original
        assert not out.labels.any()
    else:
        assert torch.equal(out.labels, out.masked.is_masked)
    assert out.masked.num_masked > 0


def test_discriminator_loss_sends_no_gradient_to_the_generator():
    model = tiny_models()
    model.config = ObjectiveConfig(gen_weight=0.0)  # loss = 50 * disc loss only
    ids, mask = random_batch(8, 32, seed=6)
    model(ids, mask).loss.backward()
    shared = {id(p) for p in model.discriminator_body.parameters()}
    own = [(n, p) for n, p in model.generator.named_parameters() if id(p) not in shared]
    assert own and all(p.grad is None or not p.grad.any() for _, p in own), [n for n, p in own if p.grad is not None]
    assert model.discriminator_body.embeddings.word.weight.grad.abs().sum() > 0  # shared embeddings do learn from D


def test_gumbel_max_samples_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(40_000, 1)
    s = gumbel_sample(logits.requires_grad_(), generator=torch.Generator().manual_seed(7))
    assert not s.requires_grad and s.dtype == torch.int64
    obs = torch.bincount(s, minlength=4).double()
    exp = torch.softmax(logits[0].detach().double(), 0) * len(s)
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    assert chi2 < 16.27  # df 3, p = 0.001
    hot = gumbel_sample(torch.tensor([[0.0, 50.0, 0.0]]), disallow=torch.tensor([1]))
    assert int(hot) != 1


def test_loss_is_mlm_plus_50_rtd_over_non_pad_tokens():
    import torch.nn.functional as F

    model = tiny_models()
    ids, mask = random_batch(6, 40, seed=8)
    masked = model.mask(ids, mask, torch.Generator().manual_seed(9))
    out = model(ids, mask, masked=masked, noise_generator=torch.Generator().manual_seed(10))
    pos = masked.is_masked
    full = model.generator(masked.input_ids, mask).logits
    mlm = F.cross_entropy(full[pos], ids[pos])
    sampled = gumbel_sample(full[pos], generator=torch.Generator().manual_seed(10))
    fake = ids.clone()
    fake[pos] = sampled
    labels = (fake != ids).float()
    d = model.rtd_head(model.discriminator_body(input_ids=fake, attention_mask=mask).last_hidden_state)
    keep = mask.bool()
    disc = F.binary_cross_entropy_with_logits(d[keep], labels[keep])
    assert abs(out.loss.item() - (mlm + 50 * disc).item()) < 1e-4
    assert torch.equal(out.weights.bool(), keep)


def test_generator_head_runs_only_at_masked_positions():
    """The generator's MLM head costs, per masked position, exactly its transform and vocabulary matmul (forward and
    two backward matmuls), and nothing per unmasked position: two batches of one shape with different padding (so
    different masked counts) give head FLOPs a + b n with b the hand-computed per-position cost and a (work done once,
    e.g. the tied weight's gradient through the embedding projection) far below running the head everywhere."""
    from torch.utils.flop_counter import FlopCounterMode

    model = tiny_models(vocab_size=4000)
    costs = []
    for min_len in (64, 3):  # full rows, then rows with padding: fewer real tokens, fewer masked
        ids, mask = random_batch(8, 64, vocab=4000, seed=11, min_len=min_len)
        m = model.mask(ids, mask, torch.Generator().manual_seed(0))
        mode = FlopCounterMode(display=False)
        with mode:
            model(input_ids=ids, attention_mask=mask, masked=m,
                  noise_generator=torch.Generator().manual_seed(0)).loss.backward()
        costs.append((m.num_masked, sum(mode.get_flop_counts()["ElectraPretrainer.generator.head"].values())))
    (n_full, f_full), (n_pad, f_pad) = costs
    assert n_pad < 0.8 * n_full, costs  # the two batches do differ in masked count
    e, v = model.generator.head.dense.out_features, 4000
    per_position = 3 * 2 * (e * e + e * v)  # dense transform + vocabulary matmul, forward + 2 backward
    assert f_full - f_pad == per_position * (n_full - n_pad), costs
    fixed = f_full - per_position * n_full
    assert 0 <= fixed < 0.25 * per_position * (ids.numel() - n_full), (fixed, costs)


def test_tying_flags():
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny"))
    assert gen.body.embeddings.word is disc.body.embeddings.word
    assert gen.body.embeddings.position is disc.body.embeddings.position
    assert gen.body.embeddings.norm is disc.body.embeddings.norm
    assert gen.body.embeddings.project is not disc.body.embeddings.project
    assert gen.body.cfg.transformer.dim == 32 and disc.body.cfg.transformer.dim == 64
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny", tie="none"))
    assert gen.body.embeddings.word is not disc.body.embeddings.word
    assert gen.body.embeddings.embedding_dim == gen.body.cfg.transformer.dim
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny", tie="all", generator_size=1.0))
    assert gen.body is disc.body
    with pytest.raises(ValueError, match="generator_size=1.0"):
        ElectraConfig.preset("tiny", tie="all")
    with pytest.raises(ValueError, match="tie must be one of"):
        ElectraConfig(tie="some")


def test_generator_size_presets():
    small = ElectraConfig.preset("paper-small").generator_config().transformer
    assert (small.dim, small.num_heads, small.hidden_dim, small.num_layers) == (64, 1, 256, 12)
    laptop = ElectraConfig.preset("small").generator_config().transformer
    assert (laptop.dim, laptop.num_heads, laptop.hidden_dim, laptop.num_layers) == (32, 1, 128, 4)
    released = ElectraConfig.preset("paper-small", released=True).generator_config().transformer
    assert (released.dim, released.num_heads, released.hidden_dim) == (256, 4, 1024)
    base = ElectraConfig.preset("base").generator_config().transformer
    assert (base.dim, base.num_heads) == (256, 4)
    with pytest.raises(ValueError, match="unknown ELECTRA preset"):
        ElectraConfig.preset("huge")


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_trains(mode):
    model = tiny_models(mode)
    ids, mask = random_batch(4, 32, seed=12)
    out = model(ids, mask)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    m = pretraining_metrics(out)
    assert 0 <= m["gen_acc"] <= 1
    if mode in ("electra", "electra-15"):
        assert {"disc_acc", "disc_precision", "disc_recall", "disc_auc", "baseline_acc"} <= set(m)
    if mode == "electra-15":
        assert torch.equal(out.weights.bool(), out.masked.is_masked)
    if mode in ("replace-mlm", "all-tokens-mlm"):
        assert "main_loss" in m and model.mlm_head.mlm.weight is None  # tied to the discriminator's embeddings
        assert model.mlm_head.word_embeddings is model.discriminator_body.embeddings.word
    assert model.encoder() is (model.generator.body if mode == "mlm" else model.discriminator_body)


def test_all_tokens_copy_mechanism():
    model = tiny_models("all-tokens-mlm")
    ids, mask = random_batch(4, 24, seed=13)
    with torch.no_grad():
        model.mlm_head.copy.bias.fill_(30.0)  # D ~ 1: copy everything
        model.mlm_head.copy.weight.zero_()
        model.generator.head.bias.zero_()
        model.generator.head.bias[7] = 1e4  # every sample is token 7, so masked positions differ from the input
    out = model(ids, mask)
    n_diff = int(out.labels.sum())
    # copied tokens cost ~0; each replaced token costs -log((1 - D) p) ~ 30 + log(vocab)
    assert n_diff > 0
    assert float(out.extra["main_loss"]) * int(mask.sum()) > 25 * n_diff


def test_binary_auc_matches_pair_counting():
    g = torch.Generator().manual_seed(14)
    s = torch.randint(0, 5, (300,), generator=g).float()  # many ties
    y = torch.rand(300, generator=g) < 0.3
    pos, neg = s[y], s[~y]
    brute = ((pos[:, None] > neg[None]).double() + 0.5 * (pos[:, None] == neg[None]).double()).mean()
    assert abs(binary_auc(s, y) - float(brute)) < 1e-9
    assert math.isnan(binary_auc(s, torch.zeros(300, dtype=torch.bool)))


def test_objective_validation():
    with pytest.raises(ValueError, match="mode must be one of"):
        ObjectiveConfig(mode="bert")
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny"))
    with pytest.raises(ValueError, match="takes no discriminator_body"):
        ElectraPretrainer(gen, disc.body, None, ObjectiveConfig(mode="mlm"))
    with pytest.raises(ValueError, match="needs discriminator_body"):
        ElectraPretrainer(gen, None, disc.head, ObjectiveConfig())
    with pytest.raises(ValueError, match="needs rtd_head"):
        ElectraPretrainer(gen, disc.body, None, ObjectiveConfig())
    with pytest.raises(ValueError, match="takes no rtd_head"):
        ElectraPretrainer(gen, disc.body, disc.head, ObjectiveConfig(mode="replace-mlm"))
    with pytest.raises(ValueError, match="needs mlm_head"):
        ElectraPretrainer(gen, disc.body, None, ObjectiveConfig(mode="replace-mlm"))
    head = DiscriminatorMLMHead(disc.body.embeddings.word, 64, copy=False)
    with pytest.raises(ValueError, match="copy=True"):
        ElectraPretrainer(gen, disc.body, None, ObjectiveConfig(mode="all-tokens-mlm"), mlm_head=head)
    with pytest.raises(ValueError, match="nn.Embedding"):
        DiscriminatorMLMHead(disc.body.embeddings, 64)
    model = ElectraPretrainer(gen, disc.body, disc.head, ObjectiveConfig())
    with pytest.raises(ValueError, match="batch, seq"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(2, 3))


@pytest.mark.parametrize("old_call", [
    lambda gen, disc: ElectraPretrainer(gen, disc, ObjectiveConfig()),  # a built discriminator taken apart
    lambda gen, disc: ElectraPretrainer(gen, disc.body, ObjectiveConfig(), dim=64, activation="gelu"),
    lambda gen, disc: ElectraPretrainer(gen, disc, disc.head, ObjectiveConfig()),
])
def test_the_old_call_names_the_new_one(old_call):
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny"))
    with pytest.raises(ValueError, match=r"explicit parts.*ElectraPretrainer\(generator, discriminator_body, rtd_head"):
        old_call(gen, disc)


def test_any_encoder_plugs_in_as_discriminator():
    """Funnel's use: a bare encoder returning last_hidden_state, with an RTD head of its width."""
    from paperzoo.nn.transformer import TextEncoder
    from paperzoo.papers.electra.model import RTDHead, init_weights

    cfg = ElectraConfig.preset("tiny")
    gen, _ = build_generator_and_discriminator(cfg)
    body = TextEncoder(cfg.discriminator_config())
    head = init_weights(RTDHead(cfg.dim))
    model = ElectraPretrainer(gen, body, head, ObjectiveConfig())
    assert model.discriminator_body is body and model.rtd_head is head and model.encoder() is body
    ids, mask = random_batch(2, 16, seed=15)
    model(ids, mask).loss.backward()
