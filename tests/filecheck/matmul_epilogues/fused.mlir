// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// The default pipeline with the cost rule off (these products are small: fused, they would lose to cuBLAS).
// RUN: fusec-opt %s -p "channels-last,attention-layouts,pad-matmuls,bias-epilogues,sink-gathers,form-kernels,dce,vertical-fusion,matmul-epilogues{cost-rule=false},reduction-fusion,split-reductions,combo-grouping,tile-pointwise,canonicalize,dce,schedule-kernels,mutate-in-place" | filecheck %s --check-prefix=PIPELINE
// RUN: fusec-opt %s -p "channels-last,attention-layouts,pad-matmuls,bias-epilogues,sink-gathers,form-kernels,dce,vertical-fusion,matmul-epilogues{cost-rule=false},reduction-fusion,split-reductions,combo-grouping,tile-pointwise,canonicalize,dce,schedule-kernels,mutate-in-place" | fusec-opt | filecheck %s --check-prefix=PIPELINE

// A matmul and the pointwise kernel that reads its product element by element become one matmul kernel:
// the product is the fp32 sum over r of A at (m, r) times B at (r, n), rounded to bf16, and the epilogue reads it
// from there.  A product something else reads too is also stored.
builtin.module {
  fusec.graph @linear_tanh(%x : !fusec.tensor<[s0, 64], bf16>, %w : !fusec.tensor<[96, 64], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[s0, 96], bf16>) symbols(s0 in [2, inf]) attributes {fusec.device = "cuda"} {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[96, 64], bf16> -> !fusec.tensor<[64, 96], bf16, strides [1, 64]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[64, 96], bf16, strides [1, 64]>) -> !fusec.tensor<[s0, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[s0, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[s0, 96], bf16>
    %g = fusec.pointwise "tanh" %h : (!fusec.tensor<[s0, 96], bf16>) -> !fusec.tensor<[s0, 96], bf16>
    fusec.output %g : !fusec.tensor<[s0, 96], bf16>
  }
  // Batched, fp32; the product also goes to the graph output.
  fusec.graph @scores(%q : !fusec.tensor<[4, 32, 16], f32>, %k : !fusec.tensor<[4, 16, 32], f32>, %mask : !fusec.tensor<[32, 32], f32>) -> (!fusec.tensor<[4, 32, 32], f32>, !fusec.tensor<[4, 32, 32], f32>) attributes {fusec.device = "cuda"} {
    %s = fusec.extern "aten.bmm.default"(%q, %k) : (!fusec.tensor<[4, 32, 16], f32>, !fusec.tensor<[4, 16, 32], f32>) -> !fusec.tensor<[4, 32, 32], f32>
    %c = fusec.constant 0.25 : !fusec.tensor<[], f32>
    %t = fusec.pointwise "mul" %s, %c : (!fusec.tensor<[4, 32, 32], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[4, 32, 32], f32>
    %y = fusec.pointwise "add" %t, %mask : (!fusec.tensor<[4, 32, 32], f32>, !fusec.tensor<[32, 32], f32>) -> !fusec.tensor<[4, 32, 32], f32>
    fusec.output %y, %s : !fusec.tensor<[4, 32, 32], f32>, !fusec.tensor<[4, 32, 32], f32>
  }
  // A padded product read through its slice (pad-matmuls' LM head): the kernel computes the first 50 of its 56 columns.
  fusec.graph @padded(%x : !fusec.tensor<[s0, 64], bf16>, %w : !fusec.tensor<[64, 56], bf16>) -> (!fusec.tensor<[s0, 50], bf16>) symbols(s0 in [2, inf]) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[64, 56], bf16>) -> !fusec.tensor<[s0, 56], bf16>
    %s = fusec.slice %p dim 1 start 0 step 1 : !fusec.tensor<[s0, 56], bf16> -> !fusec.tensor<[s0, 50], bf16, strides [56, 1]>
    %o = fusec.pointwise "identity" %s : (!fusec.tensor<[s0, 50], bf16, strides [56, 1]>) -> !fusec.tensor<[s0, 50], bf16>
    fusec.output %o : !fusec.tensor<[s0, 50], bf16>
  }
  // fp32 where torch's float32_matmul_precision allows TF32 ('high'): the schedule says so.
  fusec.graph @tf32(%x : !fusec.tensor<[256, 64], f32>, %w : !fusec.tensor<[64, 256], f32>) -> (!fusec.tensor<[256, 256], f32>) attributes {fusec.device = "cuda", fusec.float32_matmul_precision = "high"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[64, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    %e = fusec.pointwise "relu" %p : (!fusec.tensor<[256, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    fusec.output %e : !fusec.tensor<[256, 256], f32>
  }
}

// CHECK-LABEL: fusec.graph @linear_tanh
// CHECK-NOT:   fusec.extern
// CHECK:       %g = fusec.kernel @fusec_mm_add_tanh_{{[0-9]+}} [96*s0, 64] matmul [1, s0, 96] (%x, %w, %b)
// CHECK-NEXT:  ^bb0(%[[X:.*]]: !fusec.tensor<[s0, 64], bf16>, %[[W:.*]]: !fusec.tensor<[96, 64], bf16>, %[[B:.*]]: !fusec.tensor<[96], bf16>, %[[OUT:.*]]: !fusec.tensor<[s0, 96], bf16>):
// CHECK-NEXT:    %[[A:.*]] = fusec.load %[[X]][r + 64*floordiv(x, 96)]
// CHECK-NEXT:    %[[BW:.*]] = fusec.load %[[W]][r + 64*mod(x, 96)]
// CHECK-NEXT:    %[[AF:.*]] = fusec.pointwise "convert" %[[A]] : (bf16) -> f32
// CHECK-NEXT:    %[[BF:.*]] = fusec.pointwise "convert" %[[BW]] : (bf16) -> f32
// CHECK-NEXT:    %[[M:.*]] = fusec.pointwise "mul" %[[AF]], %[[BF]] : (f32, f32) -> f32
// CHECK-NEXT:    %[[S:.*]] = fusec.reduce_r "sum" %[[M]] : f32 -> f32
// CHECK-NEXT:    %[[P:.*]] = fusec.pointwise "convert" %[[S]] : (f32) -> bf16
// CHECK-NEXT:    %[[BIAS:.*]] = fusec.load %[[B]][mod(x, 96)]
// CHECK-NEXT:    %[[H:.*]] = fusec.pointwise "add" %[[P]], %[[BIAS]]
// CHECK-NEXT:    %[[T:.*]] = fusec.pointwise "tanh" %[[H]]
// CHECK-NEXT:    fusec.store %[[T]], %[[OUT]][x]
// CHECK-LABEL: fusec.graph @scores
// CHECK:       %s, %y = fusec.kernel @fusec_mm_mul_add_{{[0-9]+}} [4096, 16] matmul [4, 32, 32] (%q, %k, %mask)
// CHECK:         fusec.load %{{.*}}[r + 16*floordiv(x, 32)]
// CHECK-NEXT:    fusec.load %{{.*}}[32*r + 512*floordiv(x, 1024) + mod(x, 32)]
// CHECK-NEXT:    %[[M:.*]] = fusec.pointwise "mul" %{{.*}}, %{{.*}} : (f32, f32) -> f32
// CHECK-NEXT:    %[[S:.*]] = fusec.reduce_r "sum" %[[M]] : f32 -> f32
// CHECK-NOT:     "convert"
// CHECK:         fusec.store %[[S]], %{{.*}}[x]
// CHECK-NEXT:    fusec.store

// REMARK:      matmul-epilogues: matmul-epilogue: aten.mm.default [1, s0, 96, 64] and @fusec_poi_add_tanh_{{[0-9]+}} run as one kernel: its epilogue reads the product from registers
// CHECK-LABEL: fusec.graph @padded
// CHECK:       %o = fusec.kernel @fusec_mm_identity_{{[0-9]+}} [50*s0, 64] matmul [1, s0, 50] (%x, %w)
// CHECK:         fusec.load %{{.*}}[56*r + mod(x, 50)] : !fusec.tensor<[64, 56], bf16>
// CHECK:         fusec.store %{{.*}}, %{{.*}}[x] : !fusec.tensor<[s0, 50], bf16>

// REMARK:      matmul-epilogues: matmul-epilogue: aten.bmm.default [4, 32, 32, 16] and @fusec_poi_{{.*}} run as one kernel: its epilogue reads the product from registers; the product is also stored for the graph output
// REMARK:      matmul-epilogues: matmul-epilogue: aten.mm.default [1, s0, 56, 64] and @fusec_poi_identity_{{[0-9]+}} run as one kernel: its epilogue reads the product from registers; computed over the s0 x 50 elements the epilogue reads (a padded product's slice)

// The default pipeline on a GPU graph: schedule-kernels records the tiles; a bf16 kernel's tanh is approximate.
// PIPELINE-LABEL: fusec.graph @linear_tanh
// PIPELINE:       fusec.kernel @fusec_mm_add_tanh_{{[0-9]+}} [96*s0, 64] matmul [1, s0, 96] schedule(matmul, int64, tile = [128, 128, 64], warps = 4, stages = 3, group_m = 8, approx_tanh)
// PIPELINE-LABEL: fusec.graph @scores
// PIPELINE:       fusec.kernel @fusec_mm_{{.*}} [4096, 16] matmul [4, 32, 32] schedule(matmul, int32, tile = [32, 32, 32], warps = 4, stages = 3, group_m = 8)
// PIPELINE-LABEL: fusec.graph @tf32
// PIPELINE:       fusec.kernel @fusec_mm_relu_{{[0-9]+}} [65536, 64] matmul [1, 256, 256] schedule(matmul, int32, tile = [128, 128, 32], warps = 4, stages = 3, group_m = 8, tf32)
