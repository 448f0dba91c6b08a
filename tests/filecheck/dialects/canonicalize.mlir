// RUN: fusec-opt %s -p canonicalize | filecheck %s

// pow by a constant exponent becomes cheaper arithmetic where the results are the same to the bit;
// 0.5 and -0.5 stay (signed zeros differ), integers and conversions stay.

// CHECK-LABEL: fusec.graph @pows
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "mul" %x, %x : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT:    %[[CH:.*]] = fusec.constant 0.5
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %x, %[[CH]]
// CHECK-NEXT:    %[[CMH:.*]] = fusec.constant -0.5
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %x, %[[CMH]]
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "reciprocal" %x : (!fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT:    %[[C3:.*]] = fusec.constant 3.0
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %x, %[[C3]]
// CHECK-NEXT:    %[[C2I:.*]] = fusec.constant 2
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %i, %[[C2I]]
// CHECK-NEXT:    fusec.output %x,
builtin.module {
  fusec.graph @pows(%x : !fusec.tensor<[s0, 8], f32>, %i : !fusec.tensor<[s0, 8], i32>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], i32>) symbols(s0 in [1, inf]) {
    %c2 = fusec.constant 2.0 : !fusec.tensor<[], f32>
    %p2 = fusec.pointwise "pow" %x, %c2 : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %c1 = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %p1 = fusec.pointwise "pow" %x, %c1 : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %ch = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %ph = fusec.pointwise "pow" %x, %ch : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %cmh = fusec.constant -0.5 : !fusec.tensor<[], f32>
    %pmh = fusec.pointwise "pow" %x, %cmh : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %cm1 = fusec.constant -1.0 : !fusec.tensor<[], f32>
    %pm1 = fusec.pointwise "pow" %x, %cm1 : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %c3 = fusec.constant 3.0 : !fusec.tensor<[], f32>
    %p3 = fusec.pointwise "pow" %x, %c3 : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %ci = fusec.constant 2 : !fusec.tensor<[], i32>
    %pi = fusec.pointwise "pow" %i, %ci : (!fusec.tensor<[s0, 8], i32>, !fusec.tensor<[], i32>) -> !fusec.tensor<[s0, 8], i32>
    fusec.output %p1, %p2, %ph, %pmh, %pm1, %p3, %pi : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], i32>
  }
}
