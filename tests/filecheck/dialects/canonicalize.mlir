// RUN: fusec-opt %s -p canonicalize | filecheck %s

// pow by a constant exponent becomes the multiplications torch itself uses for 2, 3, -1 and -2
// (fusec.base.powers; integers: 2 and 3 only, wrapping as torch's integer pow); 0.5 and -0.5 stay
// (signed zeros differ), as do negative integer powers of integers and conversions.

// CHECK-LABEL: fusec.graph @pows
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "mul" %x, %x : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT:    %[[CH:.*]] = fusec.constant 0.5
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %x, %[[CH]]
// CHECK-NEXT:    %[[CMH:.*]] = fusec.constant -0.5
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %x, %[[CMH]]
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "reciprocal" %x : (!fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT:    %[[SQ:.*]] = fusec.pointwise "mul" %x, %x
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "mul" %[[SQ]], %x
// CHECK-NEXT:    %[[SQ2:.*]] = fusec.pointwise "mul" %x, %x
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "reciprocal" %[[SQ2]]
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "mul" %i, %i : (!fusec.tensor<[s0, 8], i32>, !fusec.tensor<[s0, 8], i32>) -> !fusec.tensor<[s0, 8], i32>
// CHECK-NEXT:    %[[CM1I:.*]] = fusec.constant -1
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "pow" %i, %[[CM1I]]
// CHECK-NEXT:    fusec.output %x,
builtin.module {
  fusec.graph @pows(%x : !fusec.tensor<[s0, 8], f32>, %i : !fusec.tensor<[s0, 8], i32>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], i32>, !fusec.tensor<[s0, 8], i32>) symbols(s0 in [1, inf]) {
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
    %cm2 = fusec.constant -2.0 : !fusec.tensor<[], f32>
    %pm2 = fusec.pointwise "pow" %x, %cm2 : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
    %ci = fusec.constant 2 : !fusec.tensor<[], i32>
    %pi = fusec.pointwise "pow" %i, %ci : (!fusec.tensor<[s0, 8], i32>, !fusec.tensor<[], i32>) -> !fusec.tensor<[s0, 8], i32>
    %cmi = fusec.constant -1 : !fusec.tensor<[], i32>
    %pmi = fusec.pointwise "pow" %i, %cmi : (!fusec.tensor<[s0, 8], i32>, !fusec.tensor<[], i32>) -> !fusec.tensor<[s0, 8], i32>
    fusec.output %p1, %p2, %ph, %pmh, %pm1, %p3, %pm2, %pi, %pmi : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], i32>, !fusec.tensor<[s0, 8], i32>
  }
}
