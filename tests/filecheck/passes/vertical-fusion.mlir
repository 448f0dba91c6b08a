// RUN: fusec-opt %s -p form-kernels,vertical-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{max-ops=5}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=LIMIT

// A pointwise chain becomes one kernel: each producer's body is inlined where the
// consumer loaded its buffer, the intermediate buffers disappear.
builtin.module {
  fusec.graph @affine_sigmoid(%x : !fusec.tensor<[s0, 64], f32>, %w : !fusec.tensor<[64], f32>, %b : !fusec.tensor<[64], f32>) -> (!fusec.tensor<[s0, 64], f32>) symbols(s0 in [1, inf]) {
    %m = fusec.pointwise "mul" %x, %w : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %a = fusec.pointwise "add" %m, %b : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %s = fusec.pointwise "sigmoid" %a : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %s : !fusec.tensor<[s0, 64], f32>
  }

// CHECK-LABEL: fusec.graph @affine_sigmoid
// CHECK-NEXT:    %s = fusec.kernel @fusec_poi_mul_add_sigmoid_2 [64*s0] (%x, %w, %b)
// CHECK-NEXT:    ^bb0(%0: !fusec.tensor<[s0, 64], f32>, %1: !fusec.tensor<[64], f32>, %2: !fusec.tensor<[64], f32>, %3: !fusec.tensor<[s0, 64], f32>):
// CHECK-NEXT:      %4 = fusec.load %0[x]
// CHECK-NEXT:      %5 = fusec.load %1[mod(x, 64)]
// CHECK-NEXT:      %6 = fusec.pointwise "mul" %4, %5
// CHECK-NEXT:      %7 = fusec.load %2[mod(x, 64)]
// CHECK-NEXT:      %8 = fusec.pointwise "add" %6, %7
// CHECK-NEXT:      %9 = fusec.pointwise "sigmoid" %8
// CHECK-NEXT:      fusec.store %9, %3[x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %s

// LIMIT: remark: vertical-fusion: limit: max-ops=5 exceeded (7) [@fusec_poi_mul_0, @fusec_poi_add_sigmoid_2]

  // A prologue: the pointwise producer of a reduction is re-indexed into the
  // reduction's domain (x := r + 32*x).
  fusec.graph @sum_of_squares(%x : !fusec.tensor<[s0, 32], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
    %e = fusec.pointwise "exp" %x : (!fusec.tensor<[s0, 32], f32>) -> !fusec.tensor<[s0, 32], f32>
    %sq = fusec.pointwise "mul" %e, %e : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[s0, 32], f32>) -> !fusec.tensor<[s0, 32], f32>
    %s = fusec.reduce "sum" %sq dims [1] : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %s : !fusec.tensor<[s0], f32>
  }

// CHECK-LABEL: fusec.graph @sum_of_squares
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_exp_mul_sum_{{[0-9]+}} [s0, 32] (%x)
// CHECK:           fusec.load %{{.*}}[r + 32*x]
// CHECK-NEXT:      fusec.pointwise "exp"
// CHECK-NEXT:      fusec.pointwise "mul"
// CHECK-NEXT:      fusec.reduce_r "sum"
// CHECK-NEXT:      fusec.store {{.*}}[x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %s

  // %w2 is computed over [64] and read broadcast over [s0, 64]: recomputing exp per
  // row costs less than its launch, so it is inlined (vertical-fusion-across-domains.mlir
  // has the cost rule); an extern reads %a: the kernel that covers %a stores it as a second output.
  fusec.graph @declines(%x : !fusec.tensor<[s0, 64], f32>, %w : !fusec.tensor<[64], f32>, %v : !fusec.tensor<[64, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) symbols(s0 in [1, inf]) {
    %w2 = fusec.pointwise "exp" %w : (!fusec.tensor<[64], f32>) -> !fusec.tensor<[64], f32>
    %a = fusec.pointwise "mul" %x, %w2 : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %mm:1 = fusec.extern "aten.mm.default"(%a, %v) : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>)
    %t = fusec.pointwise "tanh" %a : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %mm, %t : !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>
  }

  // Externs never merge: the kernel feeding one (here through a view) and the one
  // reading its result each get a remark naming the extern's torch op.
  fusec.graph @extern_boundaries(%x : !fusec.tensor<[s0, 64], f32>, %v : !fusec.tensor<[s0, 64], f32>) -> (!fusec.tensor<[64, 64], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.pointwise "sin" %x : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %st = fusec.permute %s [1, 0] : !fusec.tensor<[s0, 64], f32> -> !fusec.tensor<[64, s0], f32, strides [1, 64]>
    %mm:1 = fusec.extern "aten.mm.default"(%st, %v) : (!fusec.tensor<[64, s0], f32, strides [1, 64]>, !fusec.tensor<[s0, 64], f32>) -> (!fusec.tensor<[64, 64], f32>)
    %c = fusec.pointwise "cos" %mm : (!fusec.tensor<[64, 64], f32>) -> !fusec.tensor<[64, 64], f32>
    fusec.output %c : !fusec.tensor<[64, 64], f32>
  }
}

// CHECK-LABEL: fusec.graph @declines
// CHECK-NEXT:    %t, %a = fusec.kernel @fusec_poi_exp_mul_tanh_{{[0-9]+}} [64*s0] (%x, %w)
// CHECK:           fusec.store {{.*}}[x] : !fusec.tensor<[s0, 64], f32>
// CHECK-NEXT:      fusec.store {{.*}}[x] : !fusec.tensor<[s0, 64], f32>
// CHECK:         %mm = fusec.extern "aten.mm.default"(%a, %v)

// REMARK-DAG: remark: vertical-fusion: extern-consumer: @fusec_poi_exp_mul_tanh_{{[0-9]+}} feeds aten.mm.default [@fusec_poi_exp_mul_tanh_{{[0-9]+}}, aten.mm.default]

// CHECK-LABEL: fusec.graph @extern_boundaries
// CHECK-NEXT:    %s = fusec.kernel @fusec_poi_sin_{{[0-9]+}} [64*s0] (%x)
// CHECK:         %mm = fusec.extern "aten.mm.default"(%st, %v)
// CHECK-NEXT:    %c = fusec.kernel @fusec_poi_cos_{{[0-9]+}} [4096] (%mm)
// REMARK-DAG: remark: vertical-fusion: extern-consumer: @fusec_poi_sin_{{[0-9]+}} feeds aten.mm.default [@fusec_poi_sin_{{[0-9]+}}, aten.mm.default]
// REMARK-DAG: remark: vertical-fusion: extern-producer: @fusec_poi_cos_{{[0-9]+}} reads the result of aten.mm.default, a torch call, as input 0 [aten.mm.default, @fusec_poi_cos_{{[0-9]+}}]
