"""The op corpus: one small program per aten op the importer lowers, shared by the importer's tests
(tests/importer/test_import_ops.py) and the end-to-end backend tests (tests/backend/test_corpus.py).

``CASES``: (id, function, a function making its inputs, the aten op that must appear in the traced graph).
``DYNAMIC_CASES``: the ids also run with symbolic sizes (``dynamic=True``).
"""

import torch
import torch.nn.functional as Fn


def _gen(seed=0):
    g = torch.Generator().manual_seed(seed)
    return g


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=_gen(seed)).to(dtype)


def randint(low, high, *shape, seed=0, dtype=torch.int64):
    return torch.randint(low, high, shape, generator=_gen(seed), dtype=dtype)


def positive(*shape, seed=0):
    return randn(*shape, seed=seed).abs() + 0.1


def relative_position_index(wh: int, ww: int) -> torch.Tensor:
    """BEiT's relative-position index, as transformers builds it every call: on the CPU, with in-place writes."""
    grid = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    rel = (grid[:, :, None] - grid[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    index = torch.zeros(size=(wh * ww + 1,) * 2, dtype=rel.dtype)
    index[1:, 1:] = rel.sum(-1)
    index[0, 0:] = torch.tensor((2 * wh - 1) * (2 * ww - 1))  # a lifted constant (Dynamo makes ints such too)
    index[0:, 0] = (2 * wh - 1) * (2 * ww - 1) + 1
    return index


def relative_position_bias(table):
    index = relative_position_index(3, 4)
    return torch.ops.aten.index.Tensor(table, [index.view(-1).to(table.device)]).view(13, 13, -1).permute(2, 0, 1) * 2


X = lambda: (randn(4, 6),)  # noqa: E731
XY = lambda: (randn(4, 6), randn(4, 6, seed=1))  # noqa: E731

# (id, function, inputs, aten op that must appear in the traced graph)
CASES = [
    # ---- pointwise, unary
    *[(name, getattr(torch, name), lambda: (randn(4, 6),), name) for name in
      ["neg", "abs", "exp", "exp2", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "erfc", "floor", "ceil",
       "round", "trunc", "sign", "relu", "atan", "sinh", "cosh", "isnan", "signbit"]],
    *[(name, getattr(torch, name), lambda: (positive(4, 6),), name) for name in ["log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal"]],
    ("asin", torch.asin, lambda: (randn(4, 6).clamp(-0.9, 0.9),), "asin"),
    ("acos", torch.acos, lambda: (randn(4, 6).clamp(-0.9, 0.9),), "acos"),
    ("isinf", lambda x: torch.isinf(x / (x > 0)), lambda: (randn(4, 6),), "isinf"),
    ("logical_not", torch.logical_not, lambda: (randn(4, 6) > 0,), "logical_not"),
    ("bitwise_not", torch.bitwise_not, lambda: (randint(-5, 5, 4, 6),), "bitwise_not"),
    # ---- pointwise, binary (tensors, scalars, alpha, rounding modes, promotion)
    ("add_alpha", lambda x, y: torch.add(x, y, alpha=2), XY, "add"),
    ("sub_alpha", lambda x, y: torch.sub(x, y, alpha=0.5), XY, "sub"),
    ("rsub_scalar", lambda x: 1 - x, lambda: (randn(4, 6),), "sub"),
    ("mul_broadcast", lambda x, v: x * v, lambda: (randn(4, 6), randn(6, seed=1)), "mul"),
    ("mul_bool_float", lambda x, y: (x > 0) * y, XY, "mul"),
    ("div", torch.div, XY, "div"),
    ("div_int_true", lambda a, b: a / b, lambda: (randint(-9, 9, 4, 6), randint(1, 4, 4, 6, seed=1)), "div"),
    ("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), XY, "div"),
    ("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), XY, "div"),
    ("floor_divide_int", torch.floor_divide, lambda: (randint(-9, 9, 4, 6), randint(1, 4, 4, 6, seed=1)), "div"),
    ("remainder", torch.remainder, lambda: (randn(4, 6), positive(4, 6, seed=1)), "remainder"),
    ("pow_scalar", lambda x: x ** 4, lambda: (randn(4, 6),), "pow"),  # 2 and 3 are multiplied out (fusec.base.powers)
    ("pow_tensor", torch.pow, lambda: (positive(4, 6), randn(4, 6, seed=1)), "pow"),
    ("pow_scalar_base", lambda x: 2 ** x, lambda: (randn(4, 6),), "pow"),
    ("maximum", torch.maximum, XY, "maximum"),
    ("minimum", torch.minimum, XY, "minimum"),
    ("max_other", torch.max, XY, "maximum"),
    ("atan2", torch.atan2, XY, "atan2"),
    ("bitwise_and", torch.bitwise_and, lambda: (randint(0, 9, 4, 6), randint(0, 9, 4, 6, seed=1)), "bitwise_and"),
    ("bitwise_or", torch.bitwise_or, lambda: (randint(0, 9, 4, 6), randint(0, 9, 4, 6, seed=1)), "bitwise_or"),
    ("bitwise_xor", torch.bitwise_xor, lambda: (randint(0, 9, 4, 6), randint(0, 9, 4, 6, seed=1)), "bitwise_xor"),
    ("logical_and", lambda x, y: torch.logical_and(x > 0, y), XY, "logical_and"),
    ("logical_or", lambda x, y: torch.logical_or(x > 0, y > 0), XY, "logical_or"),
    ("logical_xor", lambda x, y: torch.logical_xor(x > 0, y), XY, "logical_xor"),
    *[(f"{name}_tensor", getattr(torch, name), XY, name) for name in ["eq", "ne", "lt", "le", "gt", "ge"]],
    ("gt_scalar", lambda x: x > 0.25, lambda: (randn(4, 6),), "gt"),
    ("int_lt_float_scalar", lambda a: a < 0.5, lambda: (randint(-2, 3, 4, 6),), "lt"),
    ("where", lambda x, y: torch.where(x > 0, x, y), XY, "where"),
    ("where_scalar", lambda x: torch.where(x > 0, x, 0.5), lambda: (randn(4, 6),), "where"),
    ("clamp", lambda x: x.clamp(-0.5, 0.5), lambda: (randn(4, 6),), "clamp"),
    ("clamp_min", lambda x: x.clamp(min=0.1), lambda: (randn(4, 6),), "clamp"),
    ("clamp_tensor", lambda x, lo: x.clamp(min=lo), lambda: (randn(4, 6), randn(6, seed=1)), "clamp"),
    ("to_half", lambda x: x.to(torch.float16), lambda: (randn(4, 6),), "_to_copy"),
    ("to_int", lambda x: (x * 4).to(torch.int32), lambda: (randn(4, 6),), "_to_copy"),
    ("to_bool", lambda x: x.to(torch.bool), lambda: (randn(4, 6),), "_to_copy"),
    ("half_arith", lambda x, y: x * y + 1, lambda: (randn(4, 6, dtype=torch.float16), randn(4, 6, seed=1, dtype=torch.float16)), "mul"),
    ("clone", lambda x: x.clone() + 0, lambda: (randn(4, 6),), "clone"),
    ("contiguous_of_transpose", lambda x: x.t().contiguous(), lambda: (randn(4, 6),), "clone"),
    # ---- reductions
    ("sum_dim", lambda x: x.sum(1), X, "sum"),
    ("sum_all", lambda x: x.sum(), X, "sum"),
    ("sum_keepdim_neg", lambda x: x.sum(-1, keepdim=True), X, "sum"),
    ("sum_dtype", lambda x: x.sum(0, dtype=torch.float64), X, "sum"),
    ("sum_bool", lambda x: (x > 0).sum(1), X, "sum"),
    ("sum_int32", lambda a: a.sum(0), lambda: (randint(-5, 5, 4, 6, dtype=torch.int32),), "sum"),
    ("prod", lambda x: x.prod(1), X, "prod"),
    ("amax", lambda x: x.amax((0, 1)), X, "amax"),
    ("amin_keepdim", lambda x: x.amin(0, keepdim=True), X, "amin"),
    ("max_dim", lambda x: tuple(x.max(1)), X, "max"),
    ("min_dim_keepdim", lambda x: tuple(x.min(0, keepdim=True)), X, "min"),
    ("max_all", lambda x: x.max(), X, "max"),
    ("argmax", lambda x: x.argmax(1), X, "argmax"),
    ("argmax_flat", lambda x: x.argmax(), X, "argmax"),
    ("argmin_keepdim", lambda x: x.argmin(0, keepdim=True), X, "argmin"),
    ("any_dim", lambda x: (x > 1).any(1), X, "any"),
    ("all", lambda x: (x > -3).all(), X, "any"),  # core ATen: all(x) = not any(not x)
    ("mean_dim", lambda x: x.mean(1, keepdim=True), X, "mean"),
    ("mean_all", lambda x: x.mean(), X, "mean"),
    ("var", lambda x: x.var(1), X, "mean"),
    ("std_unbiased_false", lambda x: x.std(0, unbiased=False), X, "mean"),
    ("var_mean", lambda x: torch.var_mean(x, 1, correction=0), X, "mean"),
    # ---- views
    ("view", lambda x: x.view(2, 12) * 2, X, "view"),
    ("reshape_flatten", lambda x: x.t().reshape(-1) + 1, X, "view"),
    ("permute", lambda x: x.view(2, 2, 6).permute(2, 0, 1) + 1, X, "permute"),
    ("transpose_t", lambda x: x.t() * x.transpose(0, 1), X, "permute"),
    ("expand", lambda v: v.expand(3, 6) + 0, lambda: (randn(6),), "expand"),
    ("expand_unsqueeze", lambda x: x.unsqueeze(1).expand(4, 3, 6).sum(1), X, "expand"),
    ("slice_step", lambda x: x[:, 1::2] + 1, X, "slice"),
    ("slice_negative", lambda x: x[-3:, :-1] * 2, X, "slice"),
    ("select", lambda x: x[:, -2].unsqueeze(1) + x[1], X, "select"),
    ("squeeze_unsqueeze", lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(0) + 1, X, "unsqueeze"),
    ("split", lambda x: tuple(t * 2 for t in x.split(2, 1)), X, "split_with_sizes"),
    ("unbind", lambda x: tuple(t + 1 for t in x.unbind(0)), X, "squeeze"),  # core ATen: unbind = slices + squeezes
    ("chunk_narrow", lambda x: x.chunk(3, 1)[1] + x.narrow(1, 2, 2), X, "slice"),
    ("cat", lambda x, y: torch.cat([x, y * 2, x], 1), XY, "cat"),
    ("cat_promote_and_empty", lambda x, a: torch.cat([x, a.to(torch.float32), torch.empty(0)]), lambda: (randn(4, 6), randint(0, 5, 2, 6)), "cat"),
    ("stack", lambda x, y: torch.stack([x, y], 1), XY, "cat"),
    # ---- constants
    ("full", lambda x: x + torch.full((4, 6), 0.5), X, "full"),
    ("zeros_ones_like", lambda x: torch.zeros_like(x) + torch.ones_like(x) * 2 + x, X, "full_like"),
    ("new_full", lambda x: x.new_full((6,), 3.0) * x, X, "full"),
    ("scalar_tensor_where", lambda x: torch.where(x > 0, torch.tensor(2.0), x), X, "where"),
    # ---- indexing
    ("index_select", lambda x, i: x.index_select(1, i), lambda: (randn(4, 6), randint(0, 6, 5)), "index_select"),
    ("embedding", lambda w, i: Fn.embedding(i, w), lambda: (randn(10, 3), randint(0, 10, 2, 5)), "index"),
    ("index_tensor_neg", lambda x, i: x[i - 2], lambda: (randn(4, 6), randint(0, 4, 3)), "index"),
    ("index_dim1", lambda x, i: x[:, i], lambda: (randn(4, 6), randint(0, 6, 2, 2)), "index"),
    ("gather", lambda x, i: torch.gather(x, 1, i), lambda: (randn(4, 6), randint(0, 6, 4, 3)), "gather"),
    # ---- composites, after fusec's decompositions
    ("softmax", lambda x: x.softmax(-1), X, "amax"),
    ("log_softmax", lambda x: Fn.log_softmax(x, 0), X, "amax"),
    ("layer_norm", lambda x, w, b: Fn.layer_norm(x, (6,), w, b), lambda: (randn(4, 6), randn(6, seed=1), randn(6, seed=2)), "mean"),
    ("rms_norm", lambda x, w: Fn.rms_norm(x, (6,), w), lambda: (randn(4, 6), randn(6, seed=1)), "mean"),
    ("group_norm", lambda x: Fn.group_norm(x, 2), lambda: (randn(2, 4, 3),), "mean"),
    ("batch_norm_eval", lambda x, m, v: Fn.batch_norm(x, m, v), lambda: (randn(4, 3), randn(3, seed=1), positive(3, seed=2)), "reciprocal"),
    ("gelu", lambda x: Fn.gelu(x), X, "erf"),
    ("gelu_tanh", lambda x: Fn.gelu(x, approximate="tanh"), X, "tanh"),
    ("silu", lambda x: Fn.silu(x), X, "sigmoid"),
    ("hardtanh_leaky_elu", lambda x: Fn.hardtanh(x) + Fn.leaky_relu(x) + Fn.elu(x), X, "where"),
    ("softplus", lambda x: Fn.softplus(x), X, "log1p"),
    ("logsumexp", lambda x: x.logsumexp(1), X, "amax"),
    ("mse_loss", lambda x, y: Fn.mse_loss(x, y), XY, "mean"),
    ("cross_entropy", lambda x, t: Fn.cross_entropy(x, t), lambda: (randn(4, 6), randint(0, 6, 4)), "gather"),
    ("linear", lambda x, w, b: Fn.linear(x, w, b), lambda: (randn(4, 6), randn(3, 6, seed=1), randn(3, seed=2)), "mm"),
    ("addmm", lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0), lambda: (randn(3), randn(4, 6, seed=1), randn(6, 3, seed=2)), "mm"),
    ("baddbmm", lambda b, x, w: torch.baddbmm(b, x, w), lambda: (randn(2, 4, 3), randn(2, 4, 6, seed=1), randn(2, 6, 3, seed=2)), "bmm"),
]

DYNAMIC_CASES = ["sum_keepdim_neg", "mean_dim", "var", "argmax_flat", "softmax", "layer_norm", "slice_negative", "select",
                 "split", "cat", "reshape_flatten", "index_tensor_neg", "gather", "cross_entropy",
                 "linear", "where_scalar"]
