// RUN: fusec-opt %s -p form-kernels | filecheck %s

// Views fold into index expressions: a reshape that keeps row-major order reads
// `x`; a transpose reads with floordiv/mod; a slice adds its start; cat masks its loads.
builtin.module {
  fusec.graph @views(%a : !fusec.tensor<[s0, 8, 64], f32>, %t : !fusec.tensor<[s1, s0], f32>) -> (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0, 30], f32>, !fusec.tensor<[2*s0, 512], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {
    %r = fusec.reshape %a : !fusec.tensor<[s0, 8, 64], f32> -> !fusec.tensor<[s0, 512], f32>
    %e = fusec.pointwise "exp" %r : (!fusec.tensor<[s0, 512], f32>) -> !fusec.tensor<[s0, 512], f32>
    %p = fusec.permute %t [1, 0] : !fusec.tensor<[s1, s0], f32> -> !fusec.tensor<[s0, s1], f32>
    %n = fusec.pointwise "neg" %p : (!fusec.tensor<[s0, s1], f32>) -> !fusec.tensor<[s0, s1], f32>
    %sl = fusec.slice %r dim 1 start 4 step 2 : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 30], f32>
    %q = fusec.pointwise "abs" %sl : (!fusec.tensor<[s0, 30], f32>) -> !fusec.tensor<[s0, 30], f32>
    %c = fusec.cat %r, %e dim 0 : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32>) -> !fusec.tensor<[2*s0, 512], f32>
    fusec.output %e, %n, %q, %c : !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0, 30], f32>, !fusec.tensor<[2*s0, 512], f32>
  }
}

// CHECK:      fusec.kernel @fusec_poi_exp_0 [512*s0] (%a)
// CHECK:        fusec.load %{{.*}}[x] : !fusec.tensor<[s0, 8, 64], f32>
// CHECK:      fusec.kernel @fusec_poi_neg_1 [s0*s1] (%t)
// CHECK:        fusec.load %{{.*}}[s0*mod(x, s1) + floordiv(x, s1)]
// CHECK:      fusec.kernel @fusec_poi_abs_2 [30*s0] (%a)
// CHECK:        fusec.load %{{.*}}[512*floordiv(x, 30) + 2*mod(x, 30) + 4]
// CHECK:      fusec.kernel @fusec_poi_cat_3 [1024*s0] (%a, %e)
// CHECK:        fusec.load %{{.*}}[x] mask
// CHECK:        fusec.load %{{.*}}[x - 512*s0] mask
// CHECK:        fusec.pointwise "where"
// CHECK-NOT:  fusec.reshape
// CHECK-NOT:  fusec.slice
