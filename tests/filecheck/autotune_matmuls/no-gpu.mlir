// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels,autotune-matmuls" | filecheck %s
// RUN: env CUDA_VISIBLE_DEVICES= fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels,autotune-matmuls{when=always candidates=64x64x32x4x2}" --remarks 2>&1 | filecheck %s --check-prefix=NOGPU
// RUN: not fusec-opt %s -p "autotune-matmuls{candidates=100x64x32x4x3}" 2>&1 | filecheck %s --check-prefix=BAD

// autotune-matmuls is opt-in: by default (when=never) the heuristic's schedule stays, and nothing is timed.  Asked
// to tune (when=always or accelerator) where the process has no GPU, it keeps the schedule and says why.
builtin.module {
  fusec.graph @linear(%x : !fusec.tensor<[s0, 1024], bf16>, %w : !fusec.tensor<[4096, 1024], bf16>, %b : !fusec.tensor<[4096], bf16>) -> (!fusec.tensor<[s0, 4096], bf16>) symbols(s0 in [1, inf] hint 8192) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[4096, 1024], bf16> -> !fusec.tensor<[1024, 4096], bf16, strides [1, 1024]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[s0, 1024], bf16>, !fusec.tensor<[1024, 4096], bf16, strides [1, 1024]>) -> !fusec.tensor<[s0, 4096], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[s0, 4096], bf16>, !fusec.tensor<[4096], bf16>) -> !fusec.tensor<[s0, 4096], bf16>
    %g = fusec.pointwise "tanh" %h : (!fusec.tensor<[s0, 4096], bf16>) -> !fusec.tensor<[s0, 4096], bf16>
    fusec.output %g : !fusec.tensor<[s0, 4096], bf16>
  }
}

// CHECK: fusec.kernel @fusec_mm_add_tanh_1 [4096*s0, 1024] matmul [1, s0, 4096] schedule(matmul, int64, tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 132, tma)

// NOGPU: remark: autotune-matmuls: autotune-skipped: matmul schedules stay the heuristic's: no GPU in this process to time kernels on [@linear]
// NOGPU: fusec.kernel @fusec_mm_add_tanh_1 [4096*s0, 1024] matmul [1, s0, 4096] schedule(matmul, int64, tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 132, tma)

// BAD: fusec-opt: error: pass 'autotune-matmuls': a candidate '100x64x32x4x3': block sizes are powers of 2 of at least 16
