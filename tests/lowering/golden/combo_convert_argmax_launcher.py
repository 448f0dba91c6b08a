# fusec launcher for @g


def call(inputs):
    if len(inputs) != 2:
        _bad_input_count('g', 2, inputs)
    arg0, arg1 = inputs
    device = arg0.device
    s0 = arg0.shape[0]
    if arg0.shape != (s0,) or arg0.dtype != torch.float16:
        _bad_input('g', 0, arg0, (s0,), torch.float16)
    if arg0.stride() != (1,) or arg0.data_ptr() % 16:
        arg0 = _as_layout(arg0, (1,))
    if arg1.shape != (s0, 512) or arg1.dtype != torch.float32:
        _bad_input('g', 1, arg1, (s0, 512), torch.float32)
    if arg1.stride() != (512, 1) or arg1.data_ptr() % 16:
        arg1 = _as_layout(arg1, (512, 1))
    buf0 = _empty((s0,), (1,), dtype=torch.float32, device=device)
    buf1 = _empty((s0,), (1,), dtype=torch.int64, device=device)
    xnumel_0 = s0
    XBLOCK_0, RBLOCK_0, num_warps_0 = _pointwise_config(xnumel_0)
    xnumel_1 = s0
    rnumel_1 = 512
    XBLOCK_1, RBLOCK_1, num_warps_1 = _persistent_config(xnumel_1, rnumel_1, False)
    grid = (xnumel_0 + XBLOCK_0 - 1) // XBLOCK_0 + (xnumel_1 + XBLOCK_1 - 1) // XBLOCK_1
    if grid:
        fusec_combo_0.launch(grid, max(num_warps_0, num_warps_1), arg0, arg1, buf0, buf1, xnumel_0, xnumel_1, rnumel_1, XBLOCK_0, XBLOCK_1, RBLOCK_1)
    return [buf0, buf1]
