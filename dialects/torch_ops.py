"""fusec's own torch ops, which ``fusec.extern`` calls name like any aten op (``fusec.embedding_rows.default``).

Registered with ``torch.library`` on import, with fake (meta) implementations, so the importer, the reference
interpreter and the launchers treat them as torch ops; ``extern_calls`` imports this module.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("fusec::embedding_rows", mutates_args=())
def embedding_rows(values: torch.Tensor, indices: torch.Tensor, num_rows: int) -> torch.Tensor:
    """A [num_rows, D] table of zeros with row ``indices[t]`` set to ``values[t]`` ([T, D] values, [T] indices).
    Tokens of one word must carry the same row (embedding-gradients' sums): which write lands is then moot."""
    out = values.new_zeros((num_rows, values.shape[-1]))
    out[indices] = values
    return out


@embedding_rows.register_fake
def _embedding_rows_fake(values: torch.Tensor, indices: torch.Tensor, num_rows: int) -> torch.Tensor:
    return values.new_empty((num_rows, values.shape[-1]))
