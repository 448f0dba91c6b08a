// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels{matmul-tma=never}" | filecheck %s --check-prefix=NEVER
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels{matmul-tma=always sm-count=78}" | filecheck %s --check-prefix=ALWAYS

// On Hopper (the graph's fusec.device_capability >= 90), a matmul of 16-bit operands laid out as 2-D tensors with
// 16-byte aligned rows, whose [128, 256] tiles make two waves over the GPU's SMs (fusec.sm_count) or more, runs
// persistent over the SMs and loads through tensor descriptors; other matmuls keep a program a [128, 128] tile.
builtin.module {
  // x @ w.t(): A and B contiguous along k.  Symbolic rows: the largest tile.
  fusec.graph @linear(%x : !fusec.tensor<[s0, 1024], bf16>, %w : !fusec.tensor<[4096, 1024], bf16>, %b : !fusec.tensor<[4096], bf16>) -> (!fusec.tensor<[s0, 4096], bf16>) symbols(s0 in [1, inf]) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[4096, 1024], bf16> -> !fusec.tensor<[1024, 4096], bf16, strides [1, 1024]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[s0, 1024], bf16>, !fusec.tensor<[1024, 4096], bf16, strides [1, 1024]>) -> !fusec.tensor<[s0, 4096], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[s0, 4096], bf16>, !fusec.tensor<[4096], bf16>) -> !fusec.tensor<[s0, 4096], bf16>
    %g = fusec.pointwise "tanh" %h : (!fusec.tensor<[s0, 4096], bf16>) -> !fusec.tensor<[s0, 4096], bf16>
    fusec.output %g : !fusec.tensor<[s0, 4096], bf16>
  }
  // A weight gradient's grad.t() @ x: A contiguous along m, B along n; 4096 x 4096: 512 tiles.
  fusec.graph @weight_grad(%g : !fusec.tensor<[2048, 4096], f16>, %x : !fusec.tensor<[2048, 4096], f16>) -> (!fusec.tensor<[4096, 4096], f16>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %gt = fusec.permute %g [1, 0] : !fusec.tensor<[2048, 4096], f16> -> !fusec.tensor<[4096, 2048], f16, strides [1, 4096]>
    %p = fusec.extern "aten.mm.default"(%gt, %x) : (!fusec.tensor<[4096, 2048], f16, strides [1, 4096]>, !fusec.tensor<[2048, 4096], f16>) -> !fusec.tensor<[4096, 4096], f16>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[4096, 4096], f16>) -> !fusec.tensor<[4096, 4096], f16>
    fusec.output %e : !fusec.tensor<[4096, 4096], f16>
  }
  // 1024 x 3072 (GPT-2's MLP): 96 tiles of [128, 256], under two waves of 132 SMs: pointer loads, a program a tile.
  fusec.graph @few_tiles(%x : !fusec.tensor<[1024, 768], bf16>, %w : !fusec.tensor<[768, 3072], bf16>) -> (!fusec.tensor<[1024, 3072], bf16>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768, 3072], bf16>) -> !fusec.tensor<[1024, 3072], bf16>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[1024, 3072], bf16>) -> !fusec.tensor<[1024, 3072], bf16>
    fusec.output %e : !fusec.tensor<[1024, 3072], bf16>
  }
  // Rows of 36 bf16 (72 bytes) are no tensor descriptor's: pointer loads, a program a tile.
  fusec.graph @misaligned(%x : !fusec.tensor<[512, 36], bf16>, %w : !fusec.tensor<[36, 512], bf16>) -> (!fusec.tensor<[512, 512], bf16>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[512, 36], bf16>, !fusec.tensor<[36, 512], bf16>) -> !fusec.tensor<[512, 512], bf16>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[512, 512], bf16>) -> !fusec.tensor<[512, 512], bf16>
    fusec.output %e : !fusec.tensor<[512, 512], bf16>
  }
  // fp32 operands (not the route measured), and a GPU before Hopper: pointer loads.
  fusec.graph @fp32(%x : !fusec.tensor<[512, 64], f32>, %w : !fusec.tensor<[64, 512], f32>) -> (!fusec.tensor<[512, 512], f32>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[512, 64], f32>, !fusec.tensor<[64, 512], f32>) -> !fusec.tensor<[512, 512], f32>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[512, 512], f32>) -> !fusec.tensor<[512, 512], f32>
    fusec.output %e : !fusec.tensor<[512, 512], f32>
  }
  fusec.graph @ampere(%x : !fusec.tensor<[4096, 64], bf16>, %w : !fusec.tensor<[64, 4096], bf16>) -> (!fusec.tensor<[4096, 4096], bf16>) attributes {fusec.device = "cuda", fusec.device_capability = 80 : i64, fusec.sm_count = 108 : i64} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[4096, 64], bf16>, !fusec.tensor<[64, 4096], bf16>) -> !fusec.tensor<[4096, 4096], bf16>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[4096, 4096], bf16>) -> !fusec.tensor<[4096, 4096], bf16>
    fusec.output %e : !fusec.tensor<[4096, 4096], bf16>
  }
  // No SM count on the graph: the option's (sm-count, 132 by default).  256 tiles: two waves of 78 SMs, not of 132.
  fusec.graph @unmarked(%x : !fusec.tensor<[8192, 1024], bf16>, %w : !fusec.tensor<[1024, 1024], bf16>) -> (!fusec.tensor<[8192, 1024], bf16>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8192, 1024], bf16>, !fusec.tensor<[1024, 1024], bf16>) -> !fusec.tensor<[8192, 1024], bf16>
    %e = fusec.pointwise "neg" %p : (!fusec.tensor<[8192, 1024], bf16>) -> !fusec.tensor<[8192, 1024], bf16>
    fusec.output %e : !fusec.tensor<[8192, 1024], bf16>
  }
}

// CHECK-LABEL: fusec.graph @linear
// CHECK:       fusec.kernel @fusec_mm_add_tanh_{{[0-9]+}} [4096*s0, 1024] matmul [1, s0, 4096] schedule(matmul, int64, tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 132, tma)
// CHECK-LABEL: fusec.graph @weight_grad
// CHECK:       schedule(matmul, int32, tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 132, tma)
// CHECK-LABEL: fusec.graph @few_tiles
// CHECK:       schedule(matmul, int32, tile = [128, 128, 64], warps = 4, stages = 3, group_m = 8, approx_tanh)
// CHECK-LABEL: fusec.graph @misaligned
// CHECK:       schedule(matmul, int32, tile = [128, 128, 64], warps = 4, stages = 3, group_m = 8, approx_tanh)
// CHECK-LABEL: fusec.graph @fp32
// CHECK:       schedule(matmul, int32, tile = [128, 128, 32], warps = 4, stages = 3, group_m = 8)
// CHECK-LABEL: fusec.graph @ampere
// CHECK:       schedule(matmul, int32, tile = [128, 128, 64], warps = 4, stages = 3, group_m = 8, approx_tanh)
// CHECK-LABEL: fusec.graph @unmarked
// CHECK:       schedule(matmul, int32, tile = [128, 128, 64], warps = 4, stages = 3, group_m = 8, approx_tanh)

// NEVER-NOT:   tma

// ALWAYS-LABEL: fusec.graph @linear
// ALWAYS:       tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 132, tma)
// ALWAYS-LABEL: fusec.graph @misaligned
// ALWAYS-NOT:   tma
// The graph's SM count, not the option's, where it has one; the option's elsewhere.
// ALWAYS-LABEL: fusec.graph @ampere
// ALWAYS:       tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 108, tma)
// ALWAYS-LABEL: fusec.graph @unmarked
// ALWAYS:       tile = [128, 256, 64], warps = 8, stages = 3, group_m = 8, approx_tanh, programs = 78, tma)
