"""Let the process reuse the memory a training step frees, instead of asking the OS for fresh pages each step.

Every step frees its activations and (``zero_grad(set_to_none=True)``) its gradients, then allocates them again.
glibc serves a block above its mmap threshold (dynamic, at most 32 MB on 64-bit) with a fresh ``mmap`` and returns it
with ``munmap`` on free, so each step page-faults and zeroes those blocks anew. Switch's expert weights are such
blocks: a (32, 256, 1024) gradient is 32 MB. Raising ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` keeps them in
the heap for reuse. Measured on a quiet 2-core machine, one process, interleaved: a 32-expert Switch layer's
fwd+bwd at 8 x 128 tokens went from 66.9 to 42.3 ms in fp32 and from 85.0 to 30.4 ms in bf16. Values are
unchanged; the cost is that up to ``limit`` bytes of freed memory stay with the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
DEFAULT_LIMIT = 1 << 30


def reuse_freed_memory(limit: int = DEFAULT_LIMIT) -> bool:
    """Raise glibc's mmap and trim thresholds to ``limit`` bytes (at most 2 GiB - 1, glibc's int). True when set;
    False where the C library is not glibc (macOS, musl, Windows): nothing changes there."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit < 2**31:
        raise ValueError(f"limit: expected an int in [1, 2**31 - 1] bytes, got {limit!r}")
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, limit)) and bool(libc.mallopt(M_TRIM_THRESHOLD, limit))


@functools.cache  # find_library runs ldconfig: once per process, not once per Trainer
def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()  # glibc only: musl has no such symbol
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return libc
