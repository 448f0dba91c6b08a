# fusec combo kernel fusec_combo_0: 2 sub-kernels routed by program id: fusec_poi_convert_1 (pointwise), fusec_per_argmax_2 (persistent)
import triton
import triton.language as tl


@triton.jit
def _argmax_combine(value1, index1, value2, index2):
    # torch.argmax: NaN is the largest value; ties go to the first index.
    nan1 = value1 != value1
    nan2 = value2 != value2
    equal = (value1 == value2) | (nan1 & nan2)
    pick1 = (value1 > value2) | (nan1 & (nan2 == 0)) | (equal & (index1 < index2))
    return tl.where(pick1, value1, value2), tl.where(pick1, index1, index2)


@triton.jit
def fusec_combo_0(in_ptr0, in_ptr1, out_ptr0, out_ptr1, xnumel_0, xnumel_1, rnumel_1, XBLOCK_0: tl.constexpr, XBLOCK_1: tl.constexpr, RBLOCK_1: tl.constexpr):
    pid = tl.program_id(0)
    num_blocks_0 = (xnumel_0 + XBLOCK_0 - 1) // XBLOCK_0
    num_blocks_1 = num_blocks_0 + (xnumel_1 + XBLOCK_1 - 1) // XBLOCK_1
    if pid < num_blocks_0:
        # sub-kernel 0: fusec_poi_convert_1: pointwise over [s0]
        xoffset_0 = pid.to(tl.int64) * XBLOCK_0
        xindex_0 = xoffset_0 + tl.arange(0, XBLOCK_0)
        xmask_0 = xindex_0 < xnumel_0
        tmp0_0 = tl.load(in_ptr0 + (xindex_0), xmask_0, other=0).to(tl.float32)
        tmp1_0 = tmp0_0
        tl.store(out_ptr0 + (xindex_0), tmp1_0, xmask_0)
    elif pid < num_blocks_1:
        # sub-kernel 1: fusec_per_argmax_2: persistent over [s0, 512]
        rnumel_1_v = rnumel_1
        rnumel_1_v = tl.cast(rnumel_1_v, tl.int64)
        xoffset_1 = (pid - num_blocks_0).to(tl.int64) * XBLOCK_1
        xindex_1 = xoffset_1 + tl.arange(0, XBLOCK_1)[:, None]
        xmask_1 = xindex_1 < xnumel_1
        rindex_1 = tl.arange(0, RBLOCK_1)[None, :].to(tl.int64)
        rmask_1 = tl.full([1, RBLOCK_1], True, tl.int1) if 512 % RBLOCK_1 == 0 else rindex_1 < rnumel_1_v
        tmp0_1 = tl.load(in_ptr1 + (rindex_1 + 512*xindex_1), rmask_1 & xmask_1, other=0)
        tmp1_value_1, tmp1_index_1 = tl.reduce((tl.where(rmask_1 & xmask_1, tmp0_1, float("-inf")), tl.broadcast_to(rindex_1, [XBLOCK_1, RBLOCK_1])), 1, _argmax_combine)
        tmp1_1 = tmp1_index_1[:, None].to(tl.int64)
        tl.store(out_ptr1 + (xindex_1), tmp1_1, xmask_1)
