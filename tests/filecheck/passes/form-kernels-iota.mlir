// RUN: fusec-opt %s -p form-kernels | filecheck %s

// Index arithmetic (an iota, with constants, symbolic sizes and integer pointwise ops) folds into
// its readers: a value read at [x] becomes the expression itself, and an index select whose index
// is provably >= 0 index arithmetic (here a strided window clamped into the input, as pooling
// reads it) folds into the load index like a view.  An index select by a loaded tensor stays a gather.
builtin.module {
  fusec.graph @iota(%a : !fusec.tensor<[s0, 16], f32>, %i : !fusec.tensor<[6], i64>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 6], f32>, !fusec.tensor<[8], i64>) symbols(s0 in [2, inf]) {
    %io = fusec.pointwise "iota" : () -> !fusec.tensor<[8], i64>
    %two = fusec.constant 2 : !fusec.tensor<[], i64>
    %m1 = fusec.constant -1 : !fusec.tensor<[], i64>
    %zero = fusec.constant 0 : !fusec.tensor<[], i64>
    %last = fusec.constant 15 : !fusec.tensor<[], i64>
    %s = fusec.pointwise "mul" %io, %two : (!fusec.tensor<[8], i64>, !fusec.tensor<[], i64>) -> !fusec.tensor<[8], i64>
    %p = fusec.pointwise "add" %s, %m1 : (!fusec.tensor<[8], i64>, !fusec.tensor<[], i64>) -> !fusec.tensor<[8], i64>
    %lo = fusec.pointwise "maximum" %p, %zero : (!fusec.tensor<[8], i64>, !fusec.tensor<[], i64>) -> !fusec.tensor<[8], i64>
    %c = fusec.pointwise "minimum" %lo, %last : (!fusec.tensor<[8], i64>, !fusec.tensor<[], i64>) -> !fusec.tensor<[8], i64>
    %w = fusec.index %a[%c] dim 1 : !fusec.tensor<[s0, 16], f32>, !fusec.tensor<[8], i64> -> !fusec.tensor<[s0, 8], f32>
    %f = fusec.pointwise "convert" %p : (!fusec.tensor<[8], i64>) -> !fusec.tensor<[8], f32>
    %y = fusec.pointwise "mul" %w, %f : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8], f32>) -> !fusec.tensor<[s0, 8], f32>
    %g = fusec.index %a[%i] dim 1 : !fusec.tensor<[s0, 16], f32>, !fusec.tensor<[6], i64> -> !fusec.tensor<[s0, 6], f32>
    fusec.output %y, %g, %p : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 6], f32>, !fusec.tensor<[8], i64>
  }
}

// CHECK-NOT:  fusec.constant
// CHECK:      %p = fusec.kernel @fusec_poi_iota_2 [8] ()
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   fusec.symbolic 2*x - 1 : i64
// CHECK:      %y = fusec.kernel @fusec_poi_mul_0 [8*s0] (%a)
// CHECK:        fusec.load %{{.*}}[16*floordiv(x, 8) + min(15, max(0, 2*mod(x, 8) - 1))]
// CHECK-NEXT:   fusec.symbolic 2*mod(x, 8) - 1 : i64
// CHECK:      %g = fusec.kernel @fusec_poi_index_1 [6*s0] (%i, %a)
// CHECK:        fusec.load %{{.*}}[%{{.*}} + 16*floordiv(x, 6)]
// CHECK-NOT:  fusec.index
// CHECK-NOT:  "iota"
