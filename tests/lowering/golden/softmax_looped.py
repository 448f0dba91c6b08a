# fusec kernel fusec_red_max_sum_0: looped reduction (RBLOCK-wide steps over r) over [s0, 512], int32 indexing
import triton
import triton.language as tl


_sum = tl.standard._sum_combine


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def fusec_red_max_sum_0(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    _acc1 = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    _acc4 = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    _acc4_max = tl.full([XBLOCK, RBLOCK], float('-inf'), tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = tl.full([1, RBLOCK], True, tl.int1) if 512 % RBLOCK == 0 else rindex < rnumel
        tmp0 = tl.load(in_ptr0 + (rindex + 512*xindex), rmask & xmask, other=0, eviction_policy='evict_last')
        _acc1 = _max_nan(_acc1, tl.where(rmask & xmask, tmp0, float("-inf")))
        _acc4_in = tl.where(rmask & xmask, tmp0, float('-inf'))
        _acc4_new = _max_nan(_acc4_max, _acc4_in)
        _acc4_shift = tl.where(_acc4_new == float('-inf'), 0.0, _acc4_new)
        _acc4 = _acc4 * tl.exp(_acc4_max - _acc4_shift) + tl.exp(_acc4_in - _acc4_shift)
        _acc4_max = _acc4_new
    tmp1 = tl.reduce(_acc1, 1, _max_nan)[:, None]
    _acc4_row = tl.reduce(_acc4_max, 1, _max_nan)[:, None]
    _acc4_row = tl.where(_acc4_row == float('-inf'), 0.0, _acc4_row)
    tmp4 = tl.reduce(_acc4 * tl.exp(_acc4_max - _acc4_row), 1, _sum)[:, None]
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = tl.full([1, RBLOCK], True, tl.int1) if 512 % RBLOCK == 0 else rindex < rnumel
        tmp0 = tl.load(in_ptr0 + (rindex + 512*xindex), rmask & xmask, other=0, eviction_policy='evict_first')
        tmp2 = tmp0 - tmp1
        tmp3 = tl.exp(tmp2)
        tmp5 = tmp3 / tmp4
        tl.store(out_ptr0 + (rindex + 512*xindex), tmp5, rmask & xmask)
