# fusec kernel fusec_poi_add_0: tiled pointwise ([XBLOCK, RBLOCK] tiles) over [s1, s0], int64 indexing
import triton
import triton.language as tl


@triton.jit
def fusec_poi_add_0(in_ptr0, in_ptr1, out_ptr0, xnumel, rnumel, s0, s1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    rnumel = tl.cast(rnumel, tl.int64)
    s0 = tl.cast(s0, tl.int64)
    s1 = tl.cast(s1, tl.int64)
    pid = tl.program_id(0).to(tl.int64)
    rtiles = (rnumel + RBLOCK - 1) // RBLOCK
    xoffset = (pid // rtiles) * XBLOCK
    roffset = (pid % rtiles) * RBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rindex = roffset + tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    tmp0 = tl.load(in_ptr0 + (rindex*s1 + xindex), rmask & xmask, other=0)
    tmp1 = tl.load(in_ptr1 + (rindex + xindex*s0), rmask & xmask, other=0)
    tmp2 = tmp0 + tmp1
    tl.store(out_ptr0 + (rindex + xindex*s0), tmp2, rmask & xmask)
