"""ELECTRA's joint objective: MLM generator + replaced-token detection, and the paper's ablations (sec. 2, 3.2).

One step (sec. 2 of the paper, the official ``PretrainingModel``), in :meth:`ElectraPretrainer.forward`'s order::

    m = mask(x)                                     # masking.mask_tokens: 15%, 85% [MASK] / 15% kept
                                                    # (masking="bert": 80% [MASK] / 10% random / 10% kept)
    logits_G = G(x_masked)[m]                       # generator logits at the masked positions only, (M, vocab)
    x_hat_i ~ argmax(logits_G / T + Gumbel)          # Gumbel-max sample, T = 1, no gradient through it
    x_corrupt = x with x_hat at m
    y_t = 1[t in m and x_corrupt_t != x_t]          # a correctly sampled token counts as original
    L = L_MLM(G) + lambda * L_Disc(D),  lambda = 50, L_Disc averaged over all non-pad tokens

Modes (the ablations of sec. 3.2 / Table 5, plus the BERT baseline):

* ``"electra"``: the above.
* ``"mlm"``: BERT-style masked LM only (the generator is the full-size model being trained; no discriminator).
* ``"electra-15"``: the discriminator loss only over the masked positions.
* ``"replace-mlm"``: the main model sees generator samples at the masked positions and predicts the originals
  there (MLM head tied to its embeddings); the generator is trained jointly by MLM.
* ``"all-tokens-mlm"``: as replace-mlm but predicting every non-pad token, with the paper's copy mechanism:
  ``p(x_t) = D_t 1[x_t = x_corrupt_t] + (1 - D_t) p_MLM(x_t)``, ``D_t = sigmoid(w^T h_t)``.

The pretrainer is assembled from explicit parts: ``ElectraPretrainer(generator, discriminator_body, rtd_head,
config)``. The discriminator body may be any encoder whose ``forward(input_ids=, attention_mask=, token_type_ids=)``
returns ``last_hidden_state`` (batch, seq, dim) (Funnel plugs its own in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .evaluation import binary_auc, evaluate_pretrainer, pretraining_metrics
from .masking import BERT_MASKING, MaskedBatch, mask_tokens
from .model import ElectraDiscriminator, MLMHead, init_weights

__all__ = ["MODES", "ObjectiveConfig", "PretrainOutput", "DiscriminatorMLMHead", "ElectraPretrainer", "gumbel_sample",
           "binary_auc", "evaluate_pretrainer", "pretrain_step_flops", "pretraining_metrics"]

MODES = ("electra", "mlm", "electra-15", "replace-mlm", "all-tokens-mlm")
MASKINGS = ("electra", "bert")


@dataclass(frozen=True)
class ObjectiveConfig:
    """Objective knobs (official defaults). Token ids default to :mod:`.tokenizer`'s order
    (``[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4``); ``special_ids`` are never masked.

    ``masking``: ``"electra"`` (default, the official masking: ``mask_token_prob`` [MASK], the rest kept, no random
    tokens) or ``"bert"`` (BERT's 80% [MASK] / 10% random token from the generator's vocabulary / 10% kept, for
    an MLM baseline trained as BERT was; it fixes the split, so ``mask_token_prob`` must stay at its default).
    Both choose the same positions (:mod:`.masking`).
    """

    mode: str = "electra"
    mask_prob: float = 0.15
    max_predictions: int | None = None
    mask_token_prob: float = 0.85
    replacement: bool = False
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    temperature: float = 1.0
    disallow_correct: bool = False
    mask_token_id: int = 4
    special_ids: tuple[int, ...] = (0, 2, 3, 4)
    masking: str = "electra"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, got {self.masking!r}")
        if self.masking == "bert" and self.mask_token_prob != 0.85:
            raise ValueError(f"masking='bert' is BERT's fixed 80/10/10 split; mask_token_prob ({self.mask_token_prob}) "
                             "applies to masking='electra'")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        object.__setattr__(self, "special_ids", tuple(int(i) for i in self.special_ids))


@dataclass
class PretrainOutput:
    """``loss`` (scalar), its parts, and what the metrics need (all detached except ``loss``).

    ``disc_logits``/``labels``/``weights`` (batch, seq): discriminator scores, 1 = replaced, and the positions the
    discriminator loss covers (None in "mlm" mode); ``gen_correct``: per masked position, argmax == original;
    ``corrupt_ids`` (batch, seq): what the discriminator read (None in "mlm" mode).
    """

    loss: torch.Tensor
    mlm_loss: torch.Tensor
    disc_loss: torch.Tensor | None = None
    disc_logits: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    gen_correct: torch.Tensor | None = None
    masked: MaskedBatch | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    corrupt_ids: torch.Tensor | None = None

    def metrics(self) -> dict[str, float]:
        """Per-step figures for the training log (see :func:`pretraining_metrics`)."""
        return pretraining_metrics(self, auc=False)


def gumbel_sample(logits: torch.Tensor, temperature: float = 1.0, generator: torch.Generator | None = None,
                  disallow: torch.Tensor | None = None) -> torch.Tensor:
    """Gumbel-max sample of ``softmax(logits / T)`` per row: ``(n, vocab) -> (n,)`` int64, without gradient.

    ``argmax(logits / T + g)``, ``g = -log(-log(u))``, ``u ~ U(0, 1)``, is an exact sample from the softmax
    (computed as ``g = -log(E)``, ``E ~ Exp(1)``, the same distribution).
    ``disallow`` (n,) ids get -1000 added first (the official ``disallow_correct`` option).
    """
    if logits.ndim != 2:
        raise ValueError(f"logits must be (n, vocab), got shape {tuple(logits.shape)}")
    with torch.no_grad():
        z = logits.detach().float() / temperature
        if disallow is not None:
            z = z.scatter_add(1, disallow[:, None], torch.full((len(z), 1), -1000.0, device=z.device))
        # -log(-log(u)) = -log(E) with E = -log(u) ~ Exponential(1): one log, one random kernel
        if generator is not None and generator.device != z.device:
            e = torch.empty(z.shape).exponential_(generator=generator).to(z.device)
        else:
            e = torch.empty_like(z).exponential_(generator=generator)
        g = -torch.log(e.clamp_min(1e-30))
        return (z + g).argmax(-1)


def _weighted_mean(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x * w).sum() / (w.sum() + 1e-6)


class DiscriminatorMLMHead(nn.Module):
    """The main model's head in Replace MLM / All-Tokens MLM (Table 5): it predicts the original tokens.

    ``p_MLM(x_t | h_t) = softmax(e^T LN(gelu(W h_t)))`` tied to the discriminator body's word embeddings ``e``
    (``forward``: h (n, dim) -> logits (n, vocab)); with ``copy=True`` (All-Tokens MLM) also the copy gate
    ``D_t = sigmoid(w^T h_t)`` (``copy_logit``: h (n, dim) -> (n,)).
    """

    def __init__(self, word_embeddings: nn.Embedding, dim: int, norm_eps: float = 1e-12, copy: bool = False):
        super().__init__()
        _check_embedding(word_embeddings)
        self.word_embeddings = word_embeddings
        self.mlm = init_weights(MLMHead(dim, word_embeddings.embedding_dim, word_embeddings.num_embeddings,
                                        norm_eps))
        self.copy = init_weights(nn.Linear(dim, 1)) if copy else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.mlm(h, self.word_embeddings.weight).float()

    def copy_logit(self, h: torch.Tensor) -> torch.Tensor:
        if self.copy is None:
            raise ValueError("this head has no copy gate: build it with copy=True (All-Tokens MLM)")
        return self.copy(h).squeeze(-1).float()


class ElectraPretrainer(nn.Module):
    """The pretraining model, from explicit parts: generator, discriminator body and the head the mode needs.

    Args:
        generator: an :class:`ElectraGenerator` (in "mlm" mode the model being pretrained).
        discriminator_body: the encoder that reads the corrupted input and is fine-tuned afterwards; any module
            whose ``forward(input_ids=, attention_mask=, token_type_ids=)`` returns ``last_hidden_state`` (batch,
            seq, dim) (an :class:`ElectraDiscriminator`'s ``body``, or Funnel's encoder). None in "mlm" mode.
        rtd_head: the replaced-token-detection head, (batch, seq, dim) -> (batch, seq) logits (an
            ``ElectraDiscriminator``'s ``head``, or ``init_weights(RTDHead(dim))``), for "electra" and "electra-15".
        config: :class:`ObjectiveConfig`.
        mlm_head: a :class:`DiscriminatorMLMHead`, for "replace-mlm" (``copy=False``) and "all-tokens-mlm"
            (``copy=True``).

    ``forward(input_ids (batch, seq), attention_mask, token_type_ids, masked=None, noise_generator=None)``
    masks dynamically (global torch RNG) unless a :class:`MaskedBatch` is given, and returns :class:`PretrainOutput`.
    """

    def __init__(self, generator: nn.Module, discriminator_body: nn.Module | None, rtd_head: nn.Module | None = None,
                 config: ObjectiveConfig = ObjectiveConfig(), *, mlm_head: DiscriminatorMLMHead | None = None,
                 **removed):
        super().__init__()
        _check_parts(discriminator_body, rtd_head, config, mlm_head, removed)
        self.config = config
        self.generator = generator
        self.discriminator_body = discriminator_body
        self.rtd_head = rtd_head
        self.mlm_head = mlm_head

    def encoder(self) -> nn.Module:
        """The encoder that is fine-tuned afterwards: the discriminator body (the generator's in "mlm" mode)."""
        return self.generator.body if self.discriminator_body is None else self.discriminator_body

    def mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             generator: torch.Generator | None = None) -> MaskedBatch:
        """Step 1: choose m (15% of the tokens) and build x_masked (:func:`~.masking.mask_tokens`); with
        ``masking="bert"`` 10% of m get random tokens of the generator's vocabulary."""
        c = self.config
        if c.masking == "bert":
            vocab = self.generator.body.embeddings.word.num_embeddings
            return mask_tokens(input_ids, attention_mask, c.mask_token_id, c.special_ids, c.mask_prob,
                               c.max_predictions, replacement=c.replacement, generator=generator, vocab_size=vocab,
                               **BERT_MASKING)
        return mask_tokens(input_ids, attention_mask, c.mask_token_id, c.special_ids, c.mask_prob, c.max_predictions,
                           c.mask_token_prob, c.replacement, generator)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, masked: MaskedBatch | None = None,
                noise_generator: torch.Generator | None = None) -> PretrainOutput:
        _check_input_ids(input_ids)
        c = self.config
        attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask  # 1 = token

        # 1. mask: m = positions to predict, x_masked = REPLACE(x, m, [MASK])
        masked = masked if masked is not None else self.mask(input_ids, attention_mask)
        m = masked.is_masked  # (batch, seq) bool
        targets = input_ids[m]  # (M,) the originals x_t at the masked positions
        # 2. generator MLM, p_G (eq. 1): L_MLM = E[sum_{t in m} -log p_G(x_t | x_masked)]                (sec. 2)
        g_logits = self.generator(masked.input_ids, attention_mask, token_type_ids, positions=m).logits  # (M, vocab)
        mlm_loss = _weighted_mean(F.cross_entropy(g_logits.float(), targets, reduction="none"),
                                  masked.counts[m].to(torch.float32))
        gen_correct = g_logits.detach().argmax(-1) == targets
        if c.mode == "mlm":
            loss = c.gen_weight * mlm_loss if c.gen_weight != 1.0 else mlm_loss
            return PretrainOutput(loss, mlm_loss.detach(), gen_correct=gen_correct, masked=masked)

        # 3. sample replacements: x_hat_t ~ p_G(x_t | x_masked), x_corrupt = REPLACE(x, m, x_hat)        (sec. 2)
        #    Gumbel-max on the generator's logits; integer ids carry no gradient back to the generator
        sampled = gumbel_sample(g_logits, c.temperature, noise_generator, targets if c.disallow_correct else None)
        x_corrupt = input_ids.masked_scatter(m, sampled.to(input_ids.dtype))
        labels = m & (x_corrupt != input_ids)  # y_t = 1[x_corrupt_t != x_t]: a correct sample counts as original
        h = self.discriminator_body(input_ids=x_corrupt, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids).last_hidden_state  # (batch, seq, dim)
        if c.mode in ("electra", "electra-15"):
            # 4. discriminator RTD, D (eq. 2): L_Disc = E[sum_t -y_t log D(x_corrupt, t) - (1-y_t) log(1-D)]
            #    over every token ("electra") or over the masked ones only ("electra-15")
            logits = self.rtd_head(h).float()  # (batch, seq)
            weights = (attention_mask.to(torch.bool) if c.mode == "electra" else m).to(torch.float32)
            bce = F.binary_cross_entropy_with_logits(logits, labels.to(torch.float32), reduction="none")
            disc_loss = _weighted_mean(bce, weights)
            # 5. L = L_MLM + lambda L_Disc, lambda = 50                                                   (sec. 2)
            loss = c.gen_weight * mlm_loss + c.disc_weight * disc_loss
            return PretrainOutput(loss, mlm_loss.detach(), disc_loss.detach(), logits.detach(), labels, weights,
                                  gen_correct, masked, corrupt_ids=x_corrupt)
        # 4'. the Table 5 ablations: the main model predicts the original tokens instead of detecting replacements
        main, main_acc = self._token_prediction_loss(h, input_ids, x_corrupt, attention_mask, m, targets, masked)
        loss = c.gen_weight * mlm_loss + main
        extra = {"main_acc": main_acc, "main_loss": main.detach()}
        return PretrainOutput(loss, mlm_loss.detach(), None, None, labels, None, gen_correct, masked, extra, x_corrupt)

    def _token_prediction_loss(self, h: torch.Tensor, input_ids: torch.Tensor, x_corrupt: torch.Tensor,
                               attention_mask: torch.Tensor, m: torch.Tensor, targets: torch.Tensor,
                               masked: MaskedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, accuracy) of Replace MLM (masked positions) or All-Tokens MLM (every token, copy mechanism)."""
        if self.config.mode == "replace-mlm":
            lg = self.mlm_head(h[m])  # (M, vocab)
            loss = _weighted_mean(F.cross_entropy(lg, targets, reduction="none"), masked.counts[m].to(torch.float32))
            return loss, (lg.detach().argmax(-1) == targets).float().mean()
        tokens = attention_mask.to(torch.bool)
        orig, seen = input_ids[tokens], x_corrupt[tokens]  # (T,)
        h_tokens = h[tokens]  # (T, dim)
        logp = F.log_softmax(self.mlm_head(h_tokens), -1)  # (T, vocab)
        logp_orig = logp.gather(1, orig[:, None]).squeeze(1)
        c_logit = self.mlm_head.copy_logit(h_tokens)  # (T,)
        # p(x_t) = D_t 1[x_t = x_corrupt_t] + (1 - D_t) p_MLM(x_t): log(D + (1 - D) p) where the input shows the
        # original, log((1 - D) p) elsewhere
        lp = torch.where(seen == orig, torch.logaddexp(F.logsigmoid(c_logit), F.logsigmoid(-c_logit) + logp_orig),
                         F.logsigmoid(-c_logit) + logp_orig)
        return -lp.mean(), (logp.detach().argmax(-1) == orig).float().mean()


def pretrain_step_flops(model: ElectraPretrainer, batch: dict[str, torch.Tensor],
                        counter: Callable | None = None) -> int:
    """FLOPs of one pretraining step (forward + backward, no optimizer) on ``batch``, measured by
    ``torch.utils.flop_counter`` (matmuls; elementwise ops count 0). The masking uses a fixed seed; grads are reset."""
    if counter is None:
        from paperzoo.measure import count_flops as counter
    input_ids = batch["input_ids"]
    attention_mask = batch.get("attention_mask", torch.ones_like(input_ids))
    masked = model.mask(input_ids, attention_mask, torch.Generator().manual_seed(0))

    def step():
        model(**batch, masked=masked, noise_generator=torch.Generator().manual_seed(0)).loss.backward()

    flops = counter(step)
    model.zero_grad(set_to_none=True)
    return flops


# ----------------------------------------------------------------------------------------------------- checks
def _check_input_ids(input_ids: torch.Tensor) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got "
                         f"{getattr(input_ids, 'dtype', type(input_ids).__name__)} of shape "
                         f"{tuple(getattr(input_ids, 'shape', ()))}")


def _check_embedding(word_embeddings: nn.Module) -> None:
    if not isinstance(word_embeddings, nn.Embedding):
        raise ValueError(f"the MLM head ties its output matrix to the discriminator body's word embeddings: expected "
                         f"an nn.Embedding (e.g. body.embeddings.word), got {type(word_embeddings).__name__}")


def _check_parts(body: nn.Module | None, rtd_head: nn.Module | None, config: ObjectiveConfig,
                 mlm_head: nn.Module | None, removed: dict) -> None:
    new_call = ("ElectraPretrainer(generator, discriminator_body, rtd_head, config): e.g. "
                "ElectraPretrainer(gen, disc.body, disc.head, ObjectiveConfig()) for an ElectraDiscriminator disc, "
                "ElectraPretrainer(gen, body, init_weights(RTDHead(dim)), config) for another encoder, "
                "ElectraPretrainer(gen, None, None, ObjectiveConfig(mode='mlm')) for MLM")
    if removed or isinstance(rtd_head, ObjectiveConfig) or isinstance(body, ElectraDiscriminator):
        raise ValueError(f"ElectraPretrainer takes explicit parts now (dim=, activation=, word_embeddings= and a "
                         f"built discriminator are gone): {new_call}")
    if not isinstance(config, ObjectiveConfig):
        raise ValueError(f"config must be an ObjectiveConfig, got {type(config).__name__}")
    mode = config.mode
    wants = {"mlm": (False, False, False), "electra": (True, True, False), "electra-15": (True, True, False),
             "replace-mlm": (True, False, True), "all-tokens-mlm": (True, False, True)}[mode]
    for (name, part), want in zip((("discriminator_body", body), ("rtd_head", rtd_head), ("mlm_head", mlm_head)),
                                  wants, strict=True):
        if (part is not None) != want:
            raise ValueError(f"mode {mode!r} {'needs' if want else 'takes no'} {name}: {new_call}; "
                             "'replace-mlm'/'all-tokens-mlm' take mlm_head=DiscriminatorMLMHead(body.embeddings.word, "
                             "dim, copy=mode == 'all-tokens-mlm') instead of rtd_head")
    if mlm_head is not None and (mlm_head.copy is not None) != (mode == "all-tokens-mlm"):
        raise ValueError(f"mode {mode!r}: the mlm_head needs copy={mode == 'all-tokens-mlm'}")
