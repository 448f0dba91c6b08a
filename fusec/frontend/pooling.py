"""2-D max and average pooling, forward and backward, as windowed pointwise ops fusec fuses.

Each is unrolled over the kernel's offsets (its sizes are static): the offset
``(i, j)`` of window ``(oh, ow)`` reads the input at row ``oh*sh - ph + i*dh``,
clamped into the input and masked where it falls in the padding, through
``index_select`` by ``arange`` arithmetic.  form-kernels folds such an index
select into the load's index (``passes/kernel_builder.py``), so a pooling is one
pointwise kernel over its output, with no padded copy and no gather, and it
fuses with its neighbours like any pointwise op (Inductor lowers max_pool2d the
same way).  The semantics follow eager's kernels (``aten/src/ATen/native/cpu/
MaxPoolKernel.cpp``, ``AvgPoolKernel.cpp``): max picks the first maximum in
row-major window order, NaN wins, a window's index starts at its first element
inside the input; avg divides by the window clipped to the padded input
(``count_include_pad``) or to the input, unless ``divisor_override``.

The backward passes are scatter-free: each input element sums, over the kernel
offsets, the gradient of the window whose offset lands on it (when one does) if
that window's argmax is this element (max) or divided by that window's divisor (avg).
"""

from __future__ import annotations

import torch
from torch._meta_registrations import pooling_output_shape


def _symbolic(x) -> bool:
    """A symbolic plane size: left to torch for now (an extern, with a remark), because simplifying the
    clamped window indices over symbolic sizes (``passes/kernel_index.py``) does not finish in time."""
    return not all(isinstance(d, int) for d in x.shape[-2:])


def _pair(v, default=None) -> tuple:
    if v is None or (not isinstance(v, int) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v, v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Per dim (rows, cols): (input size, output size, kernel, stride, padding, dilation)."""
    k = _pair(kernel_size)
    s = _pair(stride, k)
    p = _pair(padding)
    d = _pair(dilation)
    return [(x.shape[-2 + a], pooling_output_shape(x.shape[-2 + a], k[a], p[a], s[a], d[a], ceil_mode), k[a], s[a], p[a], d[a])
            for a in range(2)]


def _window_reads(x, geometry, offset: tuple[int, int]):
    """x at offset (i, j) of every window, clamped into the input, and where that read is inside the input."""
    reads, masks = x, []
    for axis, (g, o) in enumerate(zip(geometry, offset, strict=True)):
        size, pos = g[0], _window_positions(g, o, x.device)
        reads = reads.index_select(x.dim() - 2 + axis, pos.clamp(0, size - 1))
        masks.append((pos >= 0) & (pos < size))
    return reads, masks[0][:, None] & masks[1][None, :], masks


def _offsets(geometry):
    return [(i, j) for i in range(geometry[0][2]) for j in range(geometry[1][2])]


def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if x.dtype == torch.bool or _symbolic(x):
        return NotImplemented
    floating = x.is_floating_point()
    lowest = float("-inf") if floating else torch.iinfo(x.dtype).min
    geometry = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    width = x.shape[-1]
    # eager starts each window at its first element inside the input, at -inf, then takes any strictly
    # greater value or a NaN (so a window of -inf points at its first element, never at the padding)
    first = [_first_inside(g, x.device) for g in geometry]
    index = first[0][:, None] * width + first[1][None, :]
    best = None
    for offset in _offsets(geometry):
        value, valid, _ = _window_reads(x, geometry, offset)
        rows, cols = (_window_positions(g, o, x.device) for g, o in zip(geometry, offset, strict=True))
        value = torch.where(valid, value, lowest)
        if best is None:
            best = value
            continue
        take = (value > best) | torch.isnan(value) if floating else value > best
        best = torch.where(take, value, best)
        index = torch.where(take, rows[:, None] * width + cols[None, :], index)
    assert best is not None  # a window has at least one offset
    return best, index.expand(best.shape).contiguous()


def _window_positions(geometry, offset: int, device):
    size, out, _, s, p, d = geometry
    return torch.arange(out, device=device) * s + (offset * d - p)


def _first_inside(geometry, device):
    """Each window's first row (or column) inside the input: its start, stepped by the dilation past the padding."""
    size, out, _, s, p, d = geometry
    before = (p - torch.arange(out, device=device) * s).clamp(min=0)  # padding rows the window starts in
    return torch.arange(out, device=device) * s - p + (before + (d - 1)) // d * d


def max_pool2d_with_indices_backward(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    if _symbolic(x):
        return NotImplemented
    geometry = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    height, width = x.shape[-2], x.shape[-1]
    here = (torch.arange(height, device=x.device)[:, None] * width + torch.arange(width, device=x.device)[None, :])
    grad = None
    for offset in _offsets(geometry):
        g, idx, valid = _windows_covering(grad_output, indices, geometry, offset, x.device)
        term = torch.where(valid & (idx == here), g, 0)
        grad = term if grad is None else grad + term
    assert grad is not None  # a window has at least one offset
    return grad.to(x.dtype)


def _windows_covering(grad_output, per_window, geometry, offset, device):
    """For each input element: grad_output and ``per_window`` at the window whose offset ``offset``
    lands on it (clamped), and whether such a window exists."""
    masks = []
    for axis, ((size, out, _, s, p, d), o) in enumerate(zip(geometry, offset, strict=True)):
        start = torch.arange(size, device=device) + (p - o * d)  # window start * stride, when it divides
        window = start.clamp(min=0) // s
        dim = grad_output.dim() - 2 + axis
        grad_output = grad_output.index_select(dim, window.clamp(max=out - 1))
        if per_window is not None:
            per_window = per_window.index_select(dim, window.clamp(max=out - 1))
        masks.append((start >= 0) & (start % s == 0) & (window < out))
    return grad_output, per_window, masks[0][:, None] & masks[1][None, :]


def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if not x.is_floating_point() or _symbolic(x):  # eager divides integers its own way: left to torch
        return NotImplemented
    geometry = _geometry(x, kernel_size, stride, padding, 1, ceil_mode)
    total = None
    for offset in _offsets(geometry):
        value, valid, _ = _window_reads(x, geometry, offset)
        term = torch.where(valid, value, 0)
        total = term if total is None else total + term
    return total / _divisors(geometry, count_include_pad, divisor_override, x.device)


def avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if _symbolic(x):
        return NotImplemented
    geometry = _geometry(x, kernel_size, stride, padding, 1, ceil_mode)
    scaled = grad_output / _divisors(geometry, count_include_pad, divisor_override, x.device)
    grad = None
    for offset in _offsets(geometry):
        g, _, valid = _windows_covering(scaled, None, geometry, offset, x.device)
        term = torch.where(valid, g, 0)
        grad = term if grad is None else grad + term
    assert grad is not None  # a window has at least one offset
    return grad.to(x.dtype)


def _divisors(geometry, count_include_pad, divisor_override, device):
    """Each window's divisor, [OH, OW]: eager's clipped window sizes."""
    if divisor_override:
        return divisor_override
    extents = []
    for size, out, k, s, p, _ in geometry:
        start = torch.arange(out, device=device) * s - p
        end = (start + k).clamp(max=size + p)
        if count_include_pad:
            extents.append(end - start)
        else:
            extents.append(end.clamp(max=size) - start.clamp(min=0))
    return extents[0][:, None] * extents[1][None, :]
