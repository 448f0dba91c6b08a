// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Views between a reduction and its epilogue (issue 12.1): the epilogue's read of the
// per-row statistic, folded through the views, simplifies to the index the reduction
// stores it at, so the two fuse.

// A [B, T, C] layer-norm-like centring: the [B, T, 1] sum read at (b, t) is row x
// (T*floordiv(x, T*C) + mod(floordiv(x, C), T) is floordiv(x, C), which is x once x := r + C*x).
// CHECK-LABEL: fusec.graph @center_3d
// CHECK-NEXT:    %y = fusec.kernel @fusec_red_sum_sub_{{[0-9]+}} [8*s0, 32] (%x)
// CHECK:           %2 = fusec.load %0[r + 32*x]
// CHECK-NEXT:      %3 = fusec.reduce_r "sum" %2
// CHECK-NEXT:      %4 = fusec.pointwise "sub" %2, %3
// CHECK-NEXT:      fusec.store %4, %1[r + 32*x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %y

// Attention heads: [B, T, H, D] permuted to [B, H, T, D] and flattened to [B*H, T, D]; the
// max per (b*h, t) is read back through the inverse views.  One kernel, one load of x.
// CHECK-LABEL: fusec.graph @heads_softmax
// CHECK-NEXT:    %y = fusec.kernel @fusec_red_max_sub_{{[0-9]+}} [16*s0, 16] (%x)
// CHECK:           %2 = fusec.load %0[r + 256*floordiv(x, 16) + 32*mod(x, 8) + 16*mod(floordiv(x, 8), 2)]
// CHECK-NEXT:      %3 = fusec.reduce_r "max" %2
// CHECK-NEXT:      %4 = fusec.pointwise "sub" %2, %3
// CHECK-NEXT:      fusec.store %4, %1[r + 16*x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %y

// Declined: the sums are read transposed (the sum of row (b, j) for element (b, i, j)),
// which is no per-row value of the reduction.
// CHECK-LABEL: fusec.graph @transposed_stats
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}} [8*s0, 8] (%x)
// CHECK:         %y = fusec.kernel @fusec_poi_sub_{{[0-9]+}} [64*s0] (%x, %s)
// REMARK: remark: reduction-fusion: index-mismatch: @fusec_poi_sub_{{[0-9]+}} reads [8*floordiv(x, 64) + mod(x, 8)] of @fusec_red_sum_{{[0-9]+}} [8*s0, 8], which stores at [x]

builtin.module {
  fusec.graph @center_3d(%x : !fusec.tensor<[s0, 8, 32], f32>) -> (!fusec.tensor<[s0, 8, 32], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [2] keepdim : !fusec.tensor<[s0, 8, 32], f32> -> !fusec.tensor<[s0, 8, 1], f32>
    %y = fusec.pointwise "sub" %x, %s : (!fusec.tensor<[s0, 8, 32], f32>, !fusec.tensor<[s0, 8, 1], f32>) -> !fusec.tensor<[s0, 8, 32], f32>
    fusec.output %y : !fusec.tensor<[s0, 8, 32], f32>
  }
  fusec.graph @heads_softmax(%x : !fusec.tensor<[s0, 8, 2, 16], f32>) -> (!fusec.tensor<[s0, 2, 8, 16], f32>) symbols(s0 in [1, inf]) {
    %t = fusec.permute %x [0, 2, 1, 3] : !fusec.tensor<[s0, 8, 2, 16], f32> -> !fusec.tensor<[s0, 2, 8, 16], f32>
    %f = fusec.reshape %t : !fusec.tensor<[s0, 2, 8, 16], f32> -> !fusec.tensor<[2*s0, 8, 16], f32>
    %m = fusec.reduce "max" %f dims [2] keepdim : !fusec.tensor<[2*s0, 8, 16], f32> -> !fusec.tensor<[2*s0, 8, 1], f32>
    %v = fusec.reshape %m : !fusec.tensor<[2*s0, 8, 1], f32> -> !fusec.tensor<[s0, 2, 8, 1], f32>
    %y = fusec.pointwise "sub" %t, %v : (!fusec.tensor<[s0, 2, 8, 16], f32>, !fusec.tensor<[s0, 2, 8, 1], f32>) -> !fusec.tensor<[s0, 2, 8, 16], f32>
    fusec.output %y : !fusec.tensor<[s0, 2, 8, 16], f32>
  }
  fusec.graph @transposed_stats(%x : !fusec.tensor<[s0, 8, 8], f32>) -> (!fusec.tensor<[s0, 8, 8], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [2] keepdim : !fusec.tensor<[s0, 8, 8], f32> -> !fusec.tensor<[s0, 8, 1], f32>
    %t = fusec.permute %s [0, 2, 1] : !fusec.tensor<[s0, 8, 1], f32> -> !fusec.tensor<[s0, 1, 8], f32>
    %y = fusec.pointwise "sub" %x, %t : (!fusec.tensor<[s0, 8, 8], f32>, !fusec.tensor<[s0, 1, 8], f32>) -> !fusec.tensor<[s0, 8, 8], f32>
    fusec.output %y : !fusec.tensor<[s0, 8, 8], f32>
  }
}
