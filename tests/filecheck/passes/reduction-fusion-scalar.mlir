// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Scalar epilogues (issue 12.4): a one-row reduction [1, n] stores its value at x = 0, where
// its scalar epilogue reads it, so the mean's division joins the sum.
// CHECK-LABEL: fusec.graph @mean_all
// CHECK-NEXT:    %m = fusec.kernel @fusec_red_sum_div_{{[0-9]+}} [1, 32*s0] (%x)
// CHECK:           %2 = fusec.load %0[r]
// CHECK-NEXT:      %3 = fusec.reduce_r "sum" %2
// CHECK-NEXT:      %4 = fusec.symbolic 32*s0 : i64
// CHECK-NEXT:      %5 = fusec.pointwise "div" %3, %4
// CHECK-NEXT:      fusec.store %5, %1[x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %m

// Declined: a per-element epilogue of the full sum would run all its elements in the
// reduction's one program.
// CHECK-LABEL: fusec.graph @minus_sum
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}} [1, 32*s0] (%x)
// CHECK:         %y = fusec.kernel @fusec_poi_sub_{{[0-9]+}} [32*s0] (%x, %s)
// REMARK: remark: reduction-fusion: serial-epilogue: @fusec_poi_sub_{{[0-9]+}} [32*s0] would run in the one program of @fusec_red_sum_{{[0-9]+}} [1, 32*s0]

builtin.module {
  fusec.graph @mean_all(%x : !fusec.tensor<[s0, 32], f32>) -> (!fusec.tensor<[], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [0, 1] : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[], f32>
    %n = fusec.symbolic 32*s0 : !fusec.tensor<[], i64>
    %m = fusec.pointwise "div" %s, %n : (!fusec.tensor<[], f32>, !fusec.tensor<[], i64>) -> !fusec.tensor<[], f32>
    fusec.output %m : !fusec.tensor<[], f32>
  }
  fusec.graph @minus_sum(%x : !fusec.tensor<[s0, 32], f32>) -> (!fusec.tensor<[s0, 32], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [0, 1] : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[], f32>
    %y = fusec.pointwise "sub" %x, %s : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 32], f32>
    fusec.output %y : !fusec.tensor<[s0, 32], f32>
  }
}
