"""``compile_model``: ``torch.compile`` as the training engine and the compile bench use it.

Two of our models do less work by using sizes read from the data: ELECTRA's generator projects only the masked
positions onto the vocabulary (a boolean-mask gather, ``nonzero``), and a Switch layer's expert buffer is only as
long as its fullest expert (``int(...)`` of a count). By default dynamo breaks the graph at both. With
``capture_dynamic_output_shape_ops`` and ``capture_scalar_outputs`` it traces them as unbacked symbolic sizes
instead: one graph, no recompile when the size changes from step to step, the same arithmetic. Both flags are
process-wide dynamo settings; they only let dynamo trace operations it would otherwise hand back to Python.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["compile_model", "trace_data_dependent_sizes"]


def trace_data_dependent_sizes() -> None:
    """Let dynamo trace ``nonzero``/boolean-mask indexing and ``Tensor.item()`` instead of breaking the graph."""
    import torch._dynamo

    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    torch._dynamo.config.capture_scalar_outputs = True


def compile_model(model: nn.Module, **kwargs) -> nn.Module:
    """``torch.compile(model, **kwargs)`` with data-dependent sizes traced (:func:`trace_data_dependent_sizes`)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"compile_model: expected an nn.Module, got {type(model).__name__}")
    trace_data_dependent_sizes()
    return torch.compile(model, **kwargs)
