// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false}" | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false}" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false},form-kernels,dce,vertical-fusion" | filecheck %s --check-prefix=KERNELS
// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "pad-matmuls{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=COST
// RUN: fusec-opt %s -p "pad-matmuls" | filecheck %s --check-prefix=NOPAD

// Matmuls whose rows are not 16 bytes long compute on zero-padded operands (cuBLAS's fast kernels need
// aligned rows); a slice of the padded product stands for the result.  cost-rule=false: these are far too
// small to gain, which the COST run's remarks say.
builtin.module {
  fusec.graph @linear(%x : !fusec.tensor<[8, 64], bf16>, %w : !fusec.tensor<[64, 1001], bf16>) -> (!fusec.tensor<[8, 1001], bf16>, !fusec.tensor<[8, 1001], bf16>) {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], bf16>, !fusec.tensor<[64, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    fusec.output %y, %r : !fusec.tensor<[8, 1001], bf16>, !fusec.tensor<[8, 1001], bf16>
  }

// A linear with 1001 bf16 outputs: W gets 7 zero columns, the product [8, 1008] is sliced back.  The relu
// reads the slice (padded rows); the value returned directly gets a contiguous copy.
// CHECK-LABEL: fusec.graph @linear
// CHECK:       %[[Z:.*]] = fusec.constant 0 : !fusec.tensor<[64, 7], bf16>
// CHECK-NEXT:  %[[W:.*]] = fusec.cat %w, %[[Z]] dim 1 : {{.*}} -> !fusec.tensor<[64, 1008], bf16>
// CHECK-NEXT:  %[[P:.*]] = fusec.extern "aten.mm.default"(%x, %[[W]]) : {{.*}} -> !fusec.tensor<[8, 1008], bf16>
// CHECK-NEXT:  %y = fusec.slice %[[P]] dim 1 start 0 step 1 : !fusec.tensor<[8, 1008], bf16> -> !fusec.tensor<[8, 1001], bf16, strides [1008, 1]>
// CHECK-NEXT:  %[[COPY:.*]] = fusec.pointwise "identity" %y : (!fusec.tensor<[8, 1001], bf16, strides [1008, 1]>) -> !fusec.tensor<[8, 1001], bf16>
// CHECK-NEXT:  %r = fusec.pointwise "relu" %y
// CHECK-NEXT:  fusec.output %[[COPY]], %r

// KERNELS-LABEL: fusec.graph @linear
// KERNELS:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[8, 1008], bf16>
// KERNELS:       fusec.load %{{.*}}[1008*floordiv(x, 1001) + mod(x, 1001)]

// REMARK: padded-matmul{{.*}}aten.mm.default [8, 64] @ [64, 1001] computes as [8, 64] @ [64, 1008] (N 1001 -> 1008{{.*}}a contiguous copy feeds the graph output
// COST: padding-unprofitable{{.*}}aten.mm.default [8, 64] @ [64, 1001]: aligned rows would save ~{{.*}} µs, the padded copies cost ~{{.*}} µs

// NOPAD-LABEL: fusec.graph @linear
// NOPAD-NOT:   fusec.cat
  fusec.graph @lm_head(%h : !fusec.tensor<[12, 64], f16>, %w : !fusec.tensor<[51, 64], f16>) -> (!fusec.tensor<[4, 3, 51], f16>, !fusec.tensor<[12, 51], f16>) {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[51, 64], f16> -> !fusec.tensor<[64, 51], f16, strides [1, 64]>
    %l = fusec.extern "aten.mm.default"(%h, %wt) : (!fusec.tensor<[12, 64], f16>, !fusec.tensor<[64, 51], f16, strides [1, 64]>) -> !fusec.tensor<[12, 51], f16>
    %v = fusec.reshape %l : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[4, 3, 51], f16>
    %e = fusec.pointwise "exp" %l : (!fusec.tensor<[12, 51], f16>) -> !fusec.tensor<[12, 51], f16>
    fusec.output %v, %e : !fusec.tensor<[4, 3, 51], f16>, !fusec.tensor<[12, 51], f16>
  }

// The LM head reads its weight as w.t(): W is padded before the permute, so the copy keeps W's row-major layout.
// CHECK-LABEL: fusec.graph @lm_head
// CHECK:       %[[Z:.*]] = fusec.constant 0 : !fusec.tensor<[5, 64], f16>
// CHECK-NEXT:  %[[W:.*]] = fusec.cat %w, %[[Z]] dim 0 : {{.*}} -> !fusec.tensor<[56, 64], f16>
// CHECK-NEXT:  %[[WT:.*]] = fusec.permute %[[W]] [1, 0] : !fusec.tensor<[56, 64], f16> -> !fusec.tensor<[64, 56], f16, strides [1, 64]>
// CHECK-NEXT:  %[[P:.*]] = fusec.extern "aten.mm.default"(%h, %[[WT]])
// CHECK-NEXT:  %l = fusec.slice %[[P]] dim 1 start 0 step 1 : {{.*}} -> !fusec.tensor<[12, 51], f16, strides [56, 1]>
// CHECK-NEXT:  %[[LCOPY:.*]] = fusec.pointwise "identity" %l
// CHECK-NEXT:  %v = fusec.reshape %[[LCOPY]] : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[4, 3, 51], f16>
// CHECK-NEXT:  %e = fusec.pointwise "exp" %l : (!fusec.tensor<[12, 51], f16, strides [56, 1]>)

// REMARK: padded-matmul{{.*}}(N 51 -> 56{{.*}}a contiguous copy feeds fusec.reshape
  fusec.graph @weight_grad(%g : !fusec.tensor<[12, 51], f16>, %h : !fusec.tensor<[12, 64], f16>) -> (!fusec.tensor<[51, 64], f16>) {
    %gt = fusec.permute %g [1, 0] : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[51, 12], f16, strides [1, 51]>
    %dw = fusec.extern "aten.mm.default"(%gt, %h) : (!fusec.tensor<[51, 12], f16, strides [1, 51]>, !fusec.tensor<[12, 64], f16>) -> !fusec.tensor<[51, 64], f16>
    fusec.output %dw : !fusec.tensor<[51, 64], f16>
  }

// A weight gradient g.t() @ h: A is column-major with 51 rows, so M is padded (on g, before its permute); the
// first 51 rows of the product are contiguous, so no copy.
// CHECK-LABEL: fusec.graph @weight_grad
// CHECK:       %[[G:.*]] = fusec.cat %g, %{{.*}} dim 1 : {{.*}} -> !fusec.tensor<[12, 56], f16>
// CHECK-NEXT:  %[[GT:.*]] = fusec.permute %[[G]] [1, 0] : {{.*}} -> !fusec.tensor<[56, 12], f16, strides [1, 56]>
// CHECK-NEXT:  %[[P:.*]] = fusec.extern "aten.mm.default"(%[[GT]], %h) : {{.*}} -> !fusec.tensor<[56, 64], f16>
// CHECK-NEXT:  %dw = fusec.slice %[[P]] dim 0 start 0 step 1 : !fusec.tensor<[56, 64], f16> -> !fusec.tensor<[51, 64], f16>{{$}}
// CHECK-NEXT:  fusec.output %dw

// REMARK: padded-matmul{{.*}}(M 51 -> 56: rows aligned to 16 bytes) [fusec.extern]
  fusec.graph @lm_head_backward(%g : !fusec.tensor<[12, 51], f16>, %w : !fusec.tensor<[51, 64], f16>, %h : !fusec.tensor<[12, 64], f16>) -> (!fusec.tensor<[12, 64], f16>, !fusec.tensor<[51, 64], f16>) {
    %dh = fusec.extern "aten.mm.default"(%g, %w) : (!fusec.tensor<[12, 51], f16>, !fusec.tensor<[51, 64], f16>) -> !fusec.tensor<[12, 64], f16>
    %gt = fusec.permute %g [1, 0] : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[51, 12], f16, strides [1, 51]>
    %dw = fusec.extern "aten.mm.default"(%gt, %h) : (!fusec.tensor<[51, 12], f16, strides [1, 51]>, !fusec.tensor<[12, 64], f16>) -> !fusec.tensor<[51, 64], f16>
    fusec.output %dh, %dw : !fusec.tensor<[12, 64], f16>, !fusec.tensor<[51, 64], f16>
  }

// The LM head's backward: g @ w pads K (g's columns, w's rows), g.t() @ h pads M (g's columns again, before
// the permute): one padded copy of g serves both.  K padding leaves the result's dims, so no slice.
// CHECK-LABEL: fusec.graph @lm_head_backward
// CHECK:       %[[G:.*]] = fusec.cat %g, %{{.*}} dim 1 : {{.*}} -> !fusec.tensor<[12, 56], f16>
// CHECK:       %[[W:.*]] = fusec.cat %w, %{{.*}} dim 0 : {{.*}} -> !fusec.tensor<[56, 64], f16>
// CHECK-NEXT:  %dh = fusec.extern "aten.mm.default"(%[[G]], %[[W]]) : {{.*}} -> !fusec.tensor<[12, 64], f16>
// CHECK:       %[[GT:.*]] = fusec.permute %[[G]] [1, 0]
// CHECK-NEXT:  %[[P:.*]] = fusec.extern "aten.mm.default"(%[[GT]], %h)
// CHECK-NOT:   fusec.cat
// CHECK:       fusec.output %dh, %dw

  fusec.graph @others(%a : !fusec.tensor<[4, 8], f32>, %b : !fusec.tensor<[8, 1000], f32>, %p : !fusec.tensor<[2, 4, 8], f32>, %q : !fusec.tensor<[2, 8, 3], f32>, %c : !fusec.tensor<[8, s0], f32>) -> (!fusec.tensor<[4, 1000], f32>, !fusec.tensor<[2, 4, 3], f32>, !fusec.tensor<[4, s0], f32>) symbols(s0 in [2, inf]) {
    %m = fusec.extern "aten.mm.default"(%a, %b) : (!fusec.tensor<[4, 8], f32>, !fusec.tensor<[8, 1000], f32>) -> !fusec.tensor<[4, 1000], f32>
    %bm = fusec.extern "aten.bmm.default"(%p, %q) : (!fusec.tensor<[2, 4, 8], f32>, !fusec.tensor<[2, 8, 3], f32>) -> !fusec.tensor<[2, 4, 3], f32>
    %e = fusec.pointwise "exp" %bm : (!fusec.tensor<[2, 4, 3], f32>) -> !fusec.tensor<[2, 4, 3], f32>
    %s = fusec.extern "aten.mm.default"(%a, %c) : (!fusec.tensor<[4, 8], f32>, !fusec.tensor<[8, s0], f32>) -> !fusec.tensor<[4, s0], f32>
    fusec.output %m, %e, %s : !fusec.tensor<[4, 1000], f32>, !fusec.tensor<[2, 4, 3], f32>, !fusec.tensor<[4, s0], f32>
  }
}

// Aligned rows (fp32, 1000 wide) stay; a bmm with 3 f32 columns gets one zero column; a symbolic width is left.
// CHECK-LABEL: fusec.graph @others
// CHECK:       %m = fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[4, 1000], f32>{{$}}
// CHECK:       fusec.extern "aten.bmm.default"{{.*}} -> !fusec.tensor<[2, 4, 4], f32>
// CHECK-NEXT:  %bm = fusec.slice {{.*}} -> !fusec.tensor<[2, 4, 3], f32, strides [16, 4, 1]>
// CHECK:       %s = fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[4, s0], f32>{{$}}

// REMARK: padding-symbolic{{.*}}N = s0 symbolic
