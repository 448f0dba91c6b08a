"""fusec's decomposition table for AOTAutograd: what reaches the importer.

The importer understands pointwise ops, reductions, views, cat/index/gather,
constants and symbolic sizes natively; everything else becomes a ``fusec.extern``
(a torch call at run time).  So the table decomposes composite ops into those
pieces, which lets the fusion passes see inside them (a layer norm becomes two
reductions and a handful of pointwise ops that fuse with their neighbours),
and it leaves alone what only a library does well (mm, bmm, convolution).

Built from torch's own tables, so a decomposition means what torch says it
means: ``core_aten_decompositions()`` (down to the Core ATen opset) plus, from
``torch._decomp.decomposition_table``, the ops Core ATen keeps but fusec wants
in pieces.  Op names are looked up by name so one list serves torch 2.11-2.13
(an op a version lacks is skipped).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from fusec.base import powers
from fusec.frontend import pooling
from fusec.frontend.foreach import foreach_decompositions

aten = torch.ops.aten

# Core ATen keeps these as single ops; fusec wants them as reductions + pointwise
# ops so the statistics fuse with the normalisation that uses them.
NORMALIZATION = [
    "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm", "native_group_norm_backward",
    "native_batch_norm", "native_batch_norm_backward", "batch_norm_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
    "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
    "rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward",
]

# A softmax is amax, sub, exp, sum, div: the textbook reduction-fusion case.
SOFTMAX = ["_softmax", "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data", "logsumexp"]

# Activations and their backward formulas are short pointwise chains that
# should fuse into the producer of their input rather than run as one kernel each.
ACTIVATIONS = [
    "gelu", "gelu_backward", "silu", "silu_backward", "hardtanh", "hardtanh_backward",
    "leaky_relu", "leaky_relu_backward", "elu", "elu_backward", "softplus", "softplus_backward",
    "mish", "mish_backward", "hardswish", "hardswish_backward", "hardsigmoid", "hardsigmoid_backward",
    "sigmoid_backward", "tanh_backward", "threshold_backward", "glu", "glu_backward",
    "log_sigmoid_forward", "log_sigmoid_backward", "logit", "logit_backward",
]

# Statistics (var, std, var_mean, std_mean) are fusec's own decompositions below:
# torch's come from torch._refs and emit prims.var.  `mean` is *not* decomposed:
# the importer maps it itself (a sum divided by the symbolic element count).

# Losses reduce to gather/where/log/sum; their backward formulas likewise.
LOSSES = [
    "nll_loss_forward", "nll_loss_backward", "mse_loss", "mse_loss_backward",
    "binary_cross_entropy", "binary_cross_entropy_backward", "binary_cross_entropy_with_logits",
    "smooth_l1_loss", "smooth_l1_loss_backward", "huber_loss", "huber_loss_backward", "soft_margin_loss",
]

# Lookups become index_select / index.Tensor (fusec.index).  The embedding's
# backward is a scatter-add, which stays one torch call (EXTERN, below).
INDEXING = ["embedding", "_unsafe_index", "select_backward", "slice_backward",
            # the backward of every slice (a rotary embedding's x[..., :d/2]): a where over an index, which fuses
            "slice_scatter", "select_scatter", "_unsafe_masked_index"]

# Dropout is a random mask (rand_like, an extern) and pointwise ops that fuse.
RANDOM = ["native_dropout", "native_dropout_backward"]

# Matrix-vector products are a multiply and a sum: fusable reductions, where a
# library call would gain little.
SMALL_PRODUCTS = ["mv", "dot", "addmv"]

FROM_TORCH = NORMALIZATION + SOFTMAX + ACTIVATIONS + LOSSES + INDEXING + RANDOM + SMALL_PRODUCTS

# Never decomposed: a library (cuBLAS, cuDNN) beats anything fusec would generate,
# so they stay single ops and run as fusec.extern.  The embedding's backward too:
# decomposed, it is a zero fill and an accumulating index_put, which CUDA runs by
# sorting the indices (BERT, 1024 tokens, H200: 162 µs per table); the op itself
# takes a sort-free path up to 3072 indices and fills its own zeros.
EXTERN = ["mm", "bmm", "convolution", "convolution_backward", "_convolution", "embedding_dense_backward"]

# Never decomposed because torch's decomposition does not compute what the op
# computes (tests/backend/test_decomposition_outputs.py compares every
# multi-output decomposition the table keeps with the op itself).
NOT_EQUIVALENT = {
    # AOTAutograd decomposes the forward op *below* autograd, so the op's backward
    # formula still saves the op's outputs and calls its own backward (an extern)
    # with them.  This decomposition returns the attention probabilities
    # ([B, H, L, S]) where the op returns the log-sum-exp ([B, H, L]): the
    # backward then computes silently wrong gradients.  Inductor excludes it too.
    "_scaled_dot_product_flash_attention_for_cpu": "returns the attention probabilities in place of the log-sum-exp",
}


def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """addmm -> mm + pointwise epilogue, so the bias add fuses with what follows (a ReLU, a GELU).

    torch's own decomposition upcasts fp16/bf16 operands to fp32 before the mm
    (``pw_cast_for_opmath``), which would make the library call run in fp32: this
    one keeps the mm in the input dtype.
    """
    out = torch.mm(mat1, mat2)
    return _epilogue(self, out, beta, alpha)


def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """baddbmm -> bmm + pointwise epilogue (same reasons as addmm)."""
    return _epilogue(self, torch.bmm(batch1, batch2), beta, alpha)


def _epilogue(bias, product, beta, alpha):
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (bias if beta == 1 else bias * beta)


def _scatter_one_per_line(self, dim, index, value):
    """scatter of one position per line along ``dim`` -> where(arange == index, value, self), which fuses.

    nll_loss's backward (every classifier's, every language model's) scatters -1 at each row's
    target into a zero tensor the size of the logits: as a torch call that is a fill and a
    scatter of the whole tensor, here a compare in the kernel that reads it.  Only when index
    holds one entry per line (size 1 along ``dim``, self's sizes elsewhere, provably without a
    guard) and ``value`` is a scalar or a tensor of index's shape; otherwise the torch call.
    An index out of range leaves the line unchanged where eager raises (Inductor's rewrite does
    the same)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    dim = dim % max(self.dim(), 1)
    if self.dim() == 0 or index.dim() != self.dim() or not statically_known_true(index.shape[dim] == 1):
        return NotImplemented
    if not all(statically_known_true(i == s) for d, (i, s) in enumerate(zip(index.shape, self.shape, strict=True)) if d != dim):
        return NotImplemented
    if isinstance(value, torch.Tensor):
        if value.dim() != index.dim() or not all(statically_known_true(v == i) for v, i in zip(value.shape, index.shape, strict=True)):
            return NotImplemented
        value = value.to(self.dtype)
    else:
        value = torch.scalar_tensor(value, dtype=self.dtype, device=self.device)
    line = [1] * self.dim()
    line[dim] = -1
    positions = torch.arange(self.shape[dim], device=self.device).view(line)
    return torch.where(positions == index, value, self)


def _constant_pad_nd(x, pad, value=0):
    """constant_pad_nd -> slices (negative pads) and a cat with constant blocks (positive ones), which fuse with
    what reads the result (a causal LM's loss pads its labels by one before shifting them).  Only static pads;
    not where the result would take the input's channels-last layout (a cat's may differ)."""
    if not all(isinstance(p, int) for p in pad) or len(pad) % 2 or len(pad) // 2 > x.dim():
        return NotImplemented
    if x.dim() >= 4 and torch._prims_common.suggest_memory_format(x) != torch.contiguous_format:
        return NotImplemented
    out = x
    for i in range(len(pad) // 2):
        dim, before, after = x.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before < 0:
            out = out.narrow(dim, -before, out.shape[dim] + before)
        if after < 0:
            out = out.narrow(dim, 0, out.shape[dim] + after)
        if before > 0 or after > 0:
            def block(size, like=out, dim=dim):
                shape = [size if d == dim else n for d, n in enumerate(like.shape)]
                return [torch.full(shape, value, dtype=x.dtype, device=x.device)] if size > 0 else []
            out = torch.cat([*block(before), out, *block(after)], dim)
    return out.clone() if out is x else out.contiguous()


def _pow_scalar(x, exponent):
    """x ** c by multiplication for the exponents torch itself multiplies out (``fusec.base.powers``):
    the same bits, no libdevice pow per element (RMSNorm's ``x.pow(2)``, GELU's ``x ** 3``)."""
    if isinstance(x, torch.Tensor) and x.dtype != torch.bool:
        rule = powers.as_products(exponent, x.is_floating_point())
        if rule is not None and exponent != 1:  # x ** 1 is a new tensor, not x: canonicalize folds it in the IR
            return rule(x, torch.mul, torch.reciprocal)
    return NotImplemented


def _moments(x, dim, correction, keepdim):
    """(variance, mean) in aten ops: mean, (x - mean)^2, sum, divide by max(n - correction, 0).

    Low-precision floats are computed in fp32 like torch does, then rounded back.
    """
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        dims = list(range(x.dim()))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [d % x.dim() if x.dim() else 0 for d in dims]
    n = 1
    for d in dims:
        n = n * (x.shape[d] if x.dim() else 1)
    correction = 1 if correction is None else correction
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xc = x.to(compute)
    if not dims:  # a 0-d input: the "reduction" is the element itself
        mean = xc
        var = (xc - mean) * (xc - mean) / torch.sym_max(n - correction, 0)
        return var.to(x.dtype), mean.to(x.dtype)
    mean = torch.mean(xc, dims, keepdim=True)
    centered = xc - mean
    var = torch.sum(centered * centered, dims, keepdim=keepdim) / torch.sym_max(n - correction, 0)
    if not keepdim:
        mean = torch.squeeze(mean, dims)
    return var.to(x.dtype), mean.to(x.dtype)


def _correction(unbiased):
    return 1 if unbiased else 0


def _variance_overloads() -> dict[str, Callable]:
    def var_default(x, unbiased=True):
        return _moments(x, None, _correction(unbiased), False)[0]

    def var_dim(x, dim, unbiased=True, keepdim=False):
        return _moments(x, dim, _correction(unbiased), keepdim)[0]

    def var_correction(x, dim=None, *, correction=None, keepdim=False):
        return _moments(x, dim, correction, keepdim)[0]

    def var_mean_default(x, unbiased=True):
        return _moments(x, None, _correction(unbiased), False)

    def var_mean_dim(x, dim, unbiased=True, keepdim=False):
        return _moments(x, dim, _correction(unbiased), keepdim)

    def var_mean_correction(x, dim=None, *, correction=None, keepdim=False):
        return _moments(x, dim, correction, keepdim)

    def with_sqrt(fn, pair):
        if pair:
            return lambda *a, **k: (lambda vm: (torch.sqrt(vm[0]), vm[1]))(fn(*a, **k))
        return lambda *a, **k: torch.sqrt(fn(*a, **k))

    table: dict[str, Callable] = {
        "var.default": var_default, "var.dim": var_dim, "var.correction": var_correction,
        "var_mean.default": var_mean_default, "var_mean.dim": var_mean_dim, "var_mean.correction": var_mean_correction,
    }
    table.update({"std." + k.split(".")[1]: with_sqrt(fn, False) for k, fn in table.items() if k.startswith("var.")})
    table.update({"std_mean." + k.split(".")[1]: with_sqrt(fn, True) for k, fn in table.items() if k.startswith("var_mean.")})
    return table


# Pooling as windowed pointwise ops (``fusec/frontend/pooling.py``): one kernel, fused with its neighbours.
POOLING: dict[str, Callable] = {
    "max_pool2d_with_indices.default": pooling.max_pool2d_with_indices,
    "max_pool2d_with_indices_backward.default": pooling.max_pool2d_with_indices_backward,
    "avg_pool2d.default": pooling.avg_pool2d,
    "avg_pool2d_backward.default": pooling.avg_pool2d_backward,
}

FUSEC_OWN: dict[str, Callable] = {"addmm.default": _addmm, "baddbmm.default": _baddbmm, "pow.Tensor_Scalar": _pow_scalar,
                                   "scatter.value": _scatter_one_per_line, "scatter.src": _scatter_one_per_line,
                                   "constant_pad_nd.default": _constant_pad_nd,
                                   **_variance_overloads()}


def _packets(names: Iterable[str]) -> list:
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


def _overloads(names: Iterable[str]) -> list:
    return [getattr(p, o) for p in _packets(names) for o in p.overloads()]


def fusec_decompositions(native_pooling: bool = False) -> dict:
    """The table to give ``aot_autograd(decompositions=...)``: op overload -> Python decomposition.

    ``native_pooling``: max/avg pooling (and backward) as windowed pointwise ops that fuse, instead of torch
    calls.  The backend asks for it in inference graphs (ResNet-18 on an H200, BENCHMARKS.md 2026-11-28: device time
    -11% bf16, -8% fp32); in a training step it saved ~1% and its unrolled windows cost ~7 s of first call."""
    table = dict(_table())
    if native_pooling:
        for name, fn in POOLING.items():
            packet, overload = name.split(".")
            table[getattr(getattr(aten, packet), overload)] = fn
    return table


@functools.cache
def _table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_packets(FROM_TORCH)))
    for name, fn in FUSEC_OWN.items():
        packet, overload = name.split(".")
        if hasattr(aten, packet) and overload in getattr(aten, packet).overloads():
            table[getattr(getattr(aten, packet), overload)] = fn
    table.update(foreach_decompositions())  # optimizers' foreach=True path: per-tensor pointwise ops that fuse
    for op in _overloads([*EXTERN, *NOT_EQUIVALENT]):
        table.pop(op, None)
    return table
