# fusec kernel fusec_per_max_sum_0: persistent reduction (whole rows in RBLOCK) over [s0, 512], int32 indexing
import triton
import triton.language as tl


_sum = tl.standard._sum_combine


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def fusec_per_max_sum_0(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = tl.full([1, RBLOCK], True, tl.int1) if 512 % RBLOCK == 0 else rindex < rnumel
    tmp0 = tl.load(in_ptr0 + (rindex + 512*xindex), rmask & xmask, other=0)
    tmp1 = tl.reduce(tl.where(rmask & xmask, tmp0, float("-inf")), 1, _max_nan)[:, None]
    tmp2 = tmp0 - tmp1
    tmp3 = tl.exp(tmp2)
    tmp4 = tl.reduce(tl.where(rmask & xmask, tmp3, 0), 1, _sum)[:, None]
    tmp5 = tmp3 / tmp4
    tl.store(out_ptr0 + (rindex + 512*xindex), tmp5, rmask & xmask)
