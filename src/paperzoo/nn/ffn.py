"""Position-wise feed-forward networks: the plain MLP and the GLU family (Shazeer, 2020)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "GLU_VARIANTS", "make_activation", "FeedForward", "ffn_flops"]


class SquaredReLU(nn.Module):
    """``relu(x)^2`` (So et al., 2021, Primer)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x).square()


ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact erf form, as BERT
    "gelu_new": lambda: nn.GELU(approximate="tanh"),  # GPT-2 / T5 v1.1 tanh approximation
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "swish": nn.SiLU,
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "softplus": nn.Softplus,  # log(1 + e^x)
    "elu": nn.ELU,  # x if x > 0 else e^x - 1 (Clevert et al., 2016)
    "selu": nn.SELU,  # lambda * elu_alpha(x), the self-normalising constants (Klambauer et al., 2017)
    "tanh": nn.Tanh,
    "relu2": SquaredReLU,
    "squared_relu": SquaredReLU,
    "identity": nn.Identity,
    "linear": nn.Identity,
}

# The activation each GLU variant applies to its gate (Shazeer, 2020, sec. 2).
GLU_VARIANTS = {"glu": "sigmoid", "geglu": "gelu", "reglu": "relu", "swiglu": "swish", "liglu": "identity"}


def make_activation(name: str) -> nn.Module:
    """An activation module by name (see ``ACTIVATIONS``)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()


class FeedForward(nn.Module):
    """Position-wise FFN on ``(..., dim) -> (..., dim)``.

    Plain (Vaswani et al., 2017, eq. 2): ``FFN(x) = act(x W1 + b1) W2 + b2`` with ``fc1: dim -> hidden_dim`` and
    ``fc2: hidden_dim -> dim`` (Hugging Face BERT: ``intermediate.dense -> fc1``, ``output.dense -> fc2``).

    GLU variants (Shazeer, 2020, sec. 2): ``FFN(x) = (act(x W) * (x V)) W2``, with ``act`` sigmoid (``glu``),
    GELU (``geglu``), ReLU (``reglu``), Swish (``swiglu``) or none (``liglu``, bilinear). ``fc1`` is one fused
    projection ``dim -> 2 * hidden_dim`` whose **first half is the gate** ``x W`` (activated) and second half the
    value ``x V`` (T5 v1.1: ``wi_0 -> first half, wi_1 -> second``; Llama: ``gate_proj``, ``up_proj``). The
    variant fixes the activation; ``activation`` is ignored, except that for ``geglu`` a GELU flavour
    (``"gelu"`` exact, ``"gelu_new"``/``"gelu_tanh"`` as T5 v1.1) is honoured. Shazeer shrinks ``hidden_dim`` by
    2/3 to match the plain FFN's parameters; that choice is the caller's.

    ``dropout`` is applied to the hidden activations (before ``fc2``), as T5 does; residual dropout belongs to
    the block.
    """

    def __init__(
        self,
        dim: int,
        hidden_dim: int,
        activation: str | None = "gelu",
        glu: str | None = None,
        bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        for name, v in (("dim", dim), ("hidden_dim", hidden_dim)):
            if type(v) is not int or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if glu is not None and glu not in GLU_VARIANTS:
            raise ValueError(f"glu must be None or one of {sorted(GLU_VARIANTS)}, got {glu!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if glu is None:
            act = activation or "gelu"
        elif glu == "geglu" and activation in ("gelu", "gelu_new", "gelu_tanh", "gelu_pytorch_tanh"):
            act = activation
        else:
            act = GLU_VARIANTS[glu]
        self.dim, self.hidden_dim, self.glu, self.activation_name = dim, hidden_dim, glu, act
        self.fc1 = nn.Linear(dim, hidden_dim * (2 if glu else 1), bias=bias)
        self.act = make_activation(act)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden_dim, dim, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"expected input (..., dim={self.dim}), got shape {tuple(x.shape)}")
        h = self.fc1(x)
        if self.glu:
            gate, value = h.chunk(2, dim=-1)
            h = self.act(gate) * value
        else:
            h = self.act(h)
        return self.fc2(self.dropout(h))


def ffn_flops(dim: int, hidden_dim: int, glu: str | None = None, tokens: int = 1) -> int:
    """Forward matmul FLOPs (2 per multiply-add) of :class:`FeedForward` over ``tokens`` tokens, ignoring
    activations and biases: ``4 * dim * hidden`` per token plain, ``6 * dim * hidden`` with a GLU."""
    return (6 if glu else 4) * dim * hidden_dim * tokens

