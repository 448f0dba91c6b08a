// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false siblings=true},dce,schedule-kernels" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce" | filecheck %s --check-prefix=ALONE
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{siblings=true},dce" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=COST

// SwiGLU's gate and up projections of one input, read together by silu(gate) * up.  With siblings=true both products
// come from one matmul kernel of two accumulators: A's element is loaded once, each product is summed over r, and the
// epilogue reads both from registers.  Without it the gate fuses alone and the up product stays cuBLAS's.
builtin.module {
  fusec.graph @swiglu(%x : !fusec.tensor<[s0, 64], bf16>, %wg : !fusec.tensor<[96, 64], bf16>, %wu : !fusec.tensor<[96, 64], bf16>) -> (!fusec.tensor<[s0, 96], bf16>) symbols(s0 in [2, inf]) attributes {fusec.device = "cuda"} {
    %wgt = fusec.permute %wg [1, 0] : !fusec.tensor<[96, 64], bf16> -> !fusec.tensor<[64, 96], bf16, strides [1, 64]>
    %g = fusec.extern "aten.mm.default"(%x, %wgt) : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[64, 96], bf16, strides [1, 64]>) -> !fusec.tensor<[s0, 96], bf16>
    %wut = fusec.permute %wu [1, 0] : !fusec.tensor<[96, 64], bf16> -> !fusec.tensor<[64, 96], bf16, strides [1, 64]>
    %u = fusec.extern "aten.mm.default"(%x, %wut) : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[64, 96], bf16, strides [1, 64]>) -> !fusec.tensor<[s0, 96], bf16>
    %sg = fusec.pointwise "sigmoid" %g : (!fusec.tensor<[s0, 96], bf16>) -> !fusec.tensor<[s0, 96], bf16>
    %s = fusec.pointwise "mul" %g, %sg : (!fusec.tensor<[s0, 96], bf16>, !fusec.tensor<[s0, 96], bf16>) -> !fusec.tensor<[s0, 96], bf16>
    %h = fusec.pointwise "mul" %s, %u : (!fusec.tensor<[s0, 96], bf16>, !fusec.tensor<[s0, 96], bf16>) -> !fusec.tensor<[s0, 96], bf16>
    fusec.output %h : !fusec.tensor<[s0, 96], bf16>
  }
  // The cost rule's view at a Llama-like size: two main loops at 83% of cuBLAS lose more than the products' traffic saves.
  fusec.graph @large(%x : !fusec.tensor<[2048, 2048], bf16>, %wg : !fusec.tensor<[5632, 2048], bf16>, %wu : !fusec.tensor<[5632, 2048], bf16>) -> (!fusec.tensor<[2048, 5632], bf16>) attributes {fusec.device = "cuda"} {
    %wgt = fusec.permute %wg [1, 0] : !fusec.tensor<[5632, 2048], bf16> -> !fusec.tensor<[2048, 5632], bf16, strides [1, 2048]>
    %g = fusec.extern "aten.mm.default"(%x, %wgt) : (!fusec.tensor<[2048, 2048], bf16>, !fusec.tensor<[2048, 5632], bf16, strides [1, 2048]>) -> !fusec.tensor<[2048, 5632], bf16>
    %wut = fusec.permute %wu [1, 0] : !fusec.tensor<[5632, 2048], bf16> -> !fusec.tensor<[2048, 5632], bf16, strides [1, 2048]>
    %u = fusec.extern "aten.mm.default"(%x, %wut) : (!fusec.tensor<[2048, 2048], bf16>, !fusec.tensor<[2048, 5632], bf16, strides [1, 2048]>) -> !fusec.tensor<[2048, 5632], bf16>
    %sg = fusec.pointwise "sigmoid" %g : (!fusec.tensor<[2048, 5632], bf16>) -> !fusec.tensor<[2048, 5632], bf16>
    %s = fusec.pointwise "mul" %g, %sg : (!fusec.tensor<[2048, 5632], bf16>, !fusec.tensor<[2048, 5632], bf16>) -> !fusec.tensor<[2048, 5632], bf16>
    %h = fusec.pointwise "mul" %s, %u : (!fusec.tensor<[2048, 5632], bf16>, !fusec.tensor<[2048, 5632], bf16>) -> !fusec.tensor<[2048, 5632], bf16>
    fusec.output %h : !fusec.tensor<[2048, 5632], bf16>
  }
}

// CHECK-LABEL: fusec.graph @swiglu
// CHECK-NOT:   fusec.extern
// CHECK:       %h = fusec.kernel @fusec_mm_sigmoid_mul_{{[0-9]+}} [96*s0, 64] matmul [1, s0, 96] schedule(matmul, int64, tile = [128, 128, 64], warps = 8, stages = 3, group_m = 8, approx_tanh) (%x, %wg, %wu)
// CHECK-NEXT:  ^bb0(%[[X:.*]]: !fusec.tensor<[s0, 64], bf16>, %[[WG:.*]]: !fusec.tensor<[96, 64], bf16>, %[[WU:.*]]: !fusec.tensor<[96, 64], bf16>, %[[OUT:.*]]: !fusec.tensor<[s0, 96], bf16>):
// CHECK-NEXT:    %[[A:.*]] = fusec.load %[[X]][r + 64*floordiv(x, 96)]
// CHECK-NEXT:    %[[BG:.*]] = fusec.load %[[WG]][r + 64*mod(x, 96)]
// CHECK-NEXT:    %[[BU:.*]] = fusec.load %[[WU]][r + 64*mod(x, 96)]
// CHECK-NEXT:    %[[AF:.*]] = fusec.pointwise "convert" %[[A]] : (bf16) -> f32
// CHECK-NEXT:    %[[BGF:.*]] = fusec.pointwise "convert" %[[BG]] : (bf16) -> f32
// CHECK-NEXT:    %[[MG:.*]] = fusec.pointwise "mul" %[[AF]], %[[BGF]] : (f32, f32) -> f32
// CHECK-NEXT:    %[[SG:.*]] = fusec.reduce_r "sum" %[[MG]] : f32 -> f32
// CHECK-NEXT:    %[[G:.*]] = fusec.pointwise "convert" %[[SG]] : (f32) -> bf16
// CHECK-NEXT:    %[[BUF:.*]] = fusec.pointwise "convert" %[[BU]] : (bf16) -> f32
// CHECK-NEXT:    %[[MU:.*]] = fusec.pointwise "mul" %[[AF]], %[[BUF]] : (f32, f32) -> f32
// CHECK-NEXT:    %[[SU:.*]] = fusec.reduce_r "sum" %[[MU]] : f32 -> f32
// CHECK-NEXT:    %[[U:.*]] = fusec.pointwise "convert" %[[SU]] : (f32) -> bf16
// CHECK-NEXT:    %[[SIG:.*]] = fusec.pointwise "sigmoid" %[[G]]
// CHECK-NEXT:    %[[SILU:.*]] = fusec.pointwise "mul" %[[G]], %[[SIG]]
// CHECK-NEXT:    %[[H:.*]] = fusec.pointwise "mul" %[[SILU]], %[[U]]
// CHECK-NEXT:    fusec.store %[[H]], %[[OUT]][x]

// ALONE-LABEL: fusec.graph @swiglu
// ALONE:       %u = fusec.extern "aten.mm.default"
// ALONE:       fusec.kernel @fusec_mm_sigmoid_mul_{{[0-9]+}} [96*s0, 64] matmul [1, s0, 96] (%x, %wg, %u)

// COST:     matmul-epilogues: main-loop-cost: [1x2048x5632, K=2048]: the Triton main loop at 83% of cuBLAS in 704 tiles would lose {{.*}} us of 2 x {{.*}}, fusing saves {{.*}} us [fusec.extern, fusec.extern, @fusec_poi_sigmoid_mul_{{[0-9]+}}]
// COST-NOT: main-loop-cost: [1x2048x5632
