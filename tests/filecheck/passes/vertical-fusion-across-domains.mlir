// RUN: fusec-opt %s -p form-kernels,vertical-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{max-recompute=200.0}" | filecheck %s --check-prefix=LOOSE

// Issue 12.2: a cheap pointwise producer over a smaller (or sliced) domain is recomputed
// in its consumer, its loads re-indexed through the consumer's index of it, when the
// recomputed work costs less than the store, the load and the launch it saves.

builtin.module {
  // The qkv bias add over [T, 1536] read by three [T, 512] slices (q, k, v copies):
  // each slice recomputes its third of the add; the add kernel goes with the last one.
  fusec.graph @qkv_bias(%mm : !fusec.tensor<[s0, 1536], f32>, %b : !fusec.tensor<[1536], f32>) -> (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32>) symbols(s0 in [1, inf]) {
    %a = fusec.pointwise "add" %mm, %b : (!fusec.tensor<[s0, 1536], f32>, !fusec.tensor<[1536], f32>) -> !fusec.tensor<[s0, 1536], f32>
    %q = fusec.slice %a dim 1 start 0 step 1 : !fusec.tensor<[s0, 1536], f32> -> !fusec.tensor<[s0, 512], f32, strides [1536, 1]>
    %k = fusec.slice %a dim 1 start 512 step 1 : !fusec.tensor<[s0, 1536], f32> -> !fusec.tensor<[s0, 512], f32, strides [1536, 1]>
    %v = fusec.slice %a dim 1 start 1024 step 1 : !fusec.tensor<[s0, 1536], f32> -> !fusec.tensor<[s0, 512], f32, strides [1536, 1]>
    %qc = fusec.pointwise "neg" %q : (!fusec.tensor<[s0, 512], f32, strides [1536, 1]>) -> !fusec.tensor<[s0, 512], f32>
    %kc = fusec.pointwise "neg" %k : (!fusec.tensor<[s0, 512], f32, strides [1536, 1]>) -> !fusec.tensor<[s0, 512], f32>
    %vc = fusec.pointwise "neg" %v : (!fusec.tensor<[s0, 512], f32, strides [1536, 1]>) -> !fusec.tensor<[s0, 512], f32>
    fusec.output %qc, %kc, %vc : !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32>
  }

// CHECK-LABEL: fusec.graph @qkv_bias
// CHECK-NOT:     fusec.kernel @fusec_poi_add_{{[0-9]+}}
// CHECK:         fusec.kernel @fusec_poi_add_neg_{{[0-9]+}} [512*s0] (%mm, %b)
// CHECK:           fusec.load %{{.*}}[1536*floordiv(x, 512) + mod(x, 512)]
// CHECK:           fusec.load %{{.*}}[mod(x, 512)]
// CHECK:         fusec.kernel @fusec_poi_add_neg_{{[0-9]+}} [512*s0] (%mm, %b)
// CHECK:           fusec.load %{{.*}}[1536*floordiv(x, 512) + mod(x, 512) + 512]
// CHECK:           fusec.load %{{.*}}[mod(x, 512) + 512]
// CHECK:         fusec.kernel @fusec_poi_add_neg_{{[0-9]+}} [512*s0] (%mm, %b)
// CHECK:           fusec.load %{{.*}}[1536*floordiv(x, 512) + mod(x, 512) + 1024]
// CHECK:           fusec.load %{{.*}}[mod(x, 512) + 1024]
// CHECK:         fusec.output

  // The causal mask's bitwise_not over [8, 8] read broadcast by the masked softmax's
  // max over [s0, 8, 8] (a reduction prologue).
  fusec.graph @causal_mask(%s : !fusec.tensor<[s0, 8, 8], f32>, %m : !fusec.tensor<[8, 8], i1>) -> (!fusec.tensor<[s0, 8], f32>) symbols(s0 in [1, inf]) {
    %nm = fusec.pointwise "bitwise_not" %m : (!fusec.tensor<[8, 8], i1>) -> !fusec.tensor<[8, 8], i1>
    %ninf = fusec.constant -1.0e30 : !fusec.tensor<[], f32>
    %w = fusec.pointwise "where" %nm, %ninf, %s : (!fusec.tensor<[8, 8], i1>, !fusec.tensor<[], f32>, !fusec.tensor<[s0, 8, 8], f32>) -> !fusec.tensor<[s0, 8, 8], f32>
    %mx = fusec.reduce "max" %w dims [2] : !fusec.tensor<[s0, 8, 8], f32> -> !fusec.tensor<[s0, 8], f32>
    fusec.output %mx : !fusec.tensor<[s0, 8], f32>
  }

// CHECK-LABEL: fusec.graph @causal_mask
// CHECK-NEXT:    %mx = fusec.kernel @fusec_red_bitwise_not_where_max_{{[0-9]+}} [8*s0, 8] (%m, %s)
// CHECK:           fusec.load %{{.*}}[r + 8*mod(x, 8)] : !fusec.tensor<[8, 8], i1>
// CHECK-NEXT:      fusec.pointwise "bitwise_not"
// CHECK:           fusec.reduce_r "max"
// CHECK:         fusec.output %mx

  // Backward: a per-column div over [16] read by a reduction over the rows of [32, 16].
  fusec.graph @column_sum(%g : !fusec.tensor<[32, 16], f32>, %a : !fusec.tensor<[16], f32>, %n : !fusec.tensor<[16], f32>) -> (!fusec.tensor<[16], f32>) {
    %d = fusec.pointwise "div" %a, %n : (!fusec.tensor<[16], f32>, !fusec.tensor<[16], f32>) -> !fusec.tensor<[16], f32>
    %p = fusec.pointwise "mul" %g, %d : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16], f32>) -> !fusec.tensor<[32, 16], f32>
    %s = fusec.reduce "sum" %p dims [0] : !fusec.tensor<[32, 16], f32> -> !fusec.tensor<[16], f32>
    fusec.output %s : !fusec.tensor<[16], f32>
  }

// CHECK-LABEL: fusec.graph @column_sum
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_div_mul_sum_{{[0-9]+}} [16, 32] (%g, %a, %n)
// CHECK:           fusec.pointwise "div"
// CHECK:           fusec.reduce_r "sum"
// CHECK:         fusec.output %s

  // Batch norm (eval): the per-channel scale rsqrt(var + eps) * w over [64] read by the
  // NCHW pointwise over [s0*64*56*56] through a [64, 1, 1] view.
  fusec.graph @batch_norm(%x : !fusec.tensor<[s0, 64, 56, 56], f32>, %var : !fusec.tensor<[64], f32>, %w : !fusec.tensor<[64], f32>, %sh : !fusec.tensor<[64, 1, 1], f32>) -> (!fusec.tensor<[s0, 64, 56, 56], f32>) symbols(s0 in [1, inf]) {
    %eps = fusec.constant 1.0e-05 : !fusec.tensor<[], f32>
    %ve = fusec.pointwise "add" %var, %eps : (!fusec.tensor<[64], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64], f32>
    %r = fusec.pointwise "rsqrt" %ve : (!fusec.tensor<[64], f32>) -> !fusec.tensor<[64], f32>
    %sc = fusec.pointwise "mul" %r, %w : (!fusec.tensor<[64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[64], f32>
    %sv = fusec.reshape %sc : !fusec.tensor<[64], f32> -> !fusec.tensor<[64, 1, 1], f32>
    %y = fusec.pointwise "mul" %x, %sv : (!fusec.tensor<[s0, 64, 56, 56], f32>, !fusec.tensor<[64, 1, 1], f32>) -> !fusec.tensor<[s0, 64, 56, 56], f32>
    %z = fusec.pointwise "add" %y, %sh : (!fusec.tensor<[s0, 64, 56, 56], f32>, !fusec.tensor<[64, 1, 1], f32>) -> !fusec.tensor<[s0, 64, 56, 56], f32>
    %o = fusec.pointwise "relu" %z : (!fusec.tensor<[s0, 64, 56, 56], f32>) -> !fusec.tensor<[s0, 64, 56, 56], f32>
    fusec.output %o : !fusec.tensor<[s0, 64, 56, 56], f32>
  }

// CHECK-LABEL: fusec.graph @batch_norm
// CHECK-NEXT:    %o = fusec.kernel @fusec_poi_add_rsqrt_mul_relu_{{[0-9]+}} [200704*s0] (%x, %var, %w, %sh)
// CHECK:           fusec.load %{{.*}}[mod(floordiv(x, 3136), 64)] : !fusec.tensor<[64], f32>
// CHECK:           fusec.pointwise "rsqrt"
// CHECK:         fusec.output %o

  // A per-row statistic over [64] read by the pointwise over [64, 768].
  fusec.graph @row_statistic(%x : !fusec.tensor<[64, 768], f32>, %v : !fusec.tensor<[64, 1], f32>) -> (!fusec.tensor<[64, 768], f32>) {
    %eps = fusec.constant 1.0e-05 : !fusec.tensor<[], f32>
    %ve = fusec.pointwise "add" %v, %eps : (!fusec.tensor<[64, 1], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 1], f32>
    %r = fusec.pointwise "rsqrt" %ve : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %y = fusec.pointwise "mul" %x, %r : (!fusec.tensor<[64, 768], f32>, !fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 768], f32>
    fusec.output %y : !fusec.tensor<[64, 768], f32>
  }

// CHECK-LABEL: fusec.graph @row_statistic
// CHECK-NEXT:    %y = fusec.kernel @fusec_poi_add_rsqrt_mul_{{[0-9]+}} [49152] (%x, %v)
// CHECK:           fusec.load %{{.*}}[floordiv(x, 768)] : !fusec.tensor<[64, 1], f32>
// CHECK:         fusec.output %y

  // A gather of a pointwise producer: one element a row of exp(x) * y is recomputed at the
  // gathered position (the copied loads take the gather's offset); [s0, 10] is never stored.
  fusec.graph @gathered(%x : !fusec.tensor<[s0, 10], f32>, %y : !fusec.tensor<[s0, 10], f32>, %t : !fusec.tensor<[s0, 1], i64>) -> (!fusec.tensor<[s0, 1], f32>) symbols(s0 in [1, inf]) {
    %e = fusec.pointwise "exp" %x : (!fusec.tensor<[s0, 10], f32>) -> !fusec.tensor<[s0, 10], f32>
    %p = fusec.pointwise "mul" %e, %y : (!fusec.tensor<[s0, 10], f32>, !fusec.tensor<[s0, 10], f32>) -> !fusec.tensor<[s0, 10], f32>
    %g = fusec.gather %p[%t] dim 1 : !fusec.tensor<[s0, 10], f32>, !fusec.tensor<[s0, 1], i64> -> !fusec.tensor<[s0, 1], f32>
    fusec.output %g : !fusec.tensor<[s0, 1], f32>
  }

// CHECK-LABEL: fusec.graph @gathered
// CHECK-NEXT:    %g = fusec.kernel @fusec_poi_exp_mul_gather_{{[0-9]+}} [s0] (%t, %x, %y)
// CHECK:           fusec.load %{{[0-9]+}}[%{{[0-9]+}} + 10*x] : !fusec.tensor<[s0, 10], f32>
// CHECK-NEXT:      fusec.pointwise "exp"
// CHECK-NEXT:      fusec.load %{{[0-9]+}}[%{{[0-9]+}} + 10*x] : !fusec.tensor<[s0, 10], f32>
// CHECK-NEXT:      fusec.pointwise "mul"
// CHECK:         fusec.output %g

  // Declined: 48 chained exps over [64] read broadcast over [64, 1048576] by a kernel
  // moving 2 bytes a point: recomputing them at 67M points costs more compute time
  // than the consumer's memory traffic hides, the launch and the 256 bytes saved.
  // A looser max-recompute takes it.
  fusec.graph @expensive(%m : !fusec.tensor<[64, 1048576], i1>, %w : !fusec.tensor<[64, 1], f32>) -> (!fusec.tensor<[64, 1048576], i1>) {
    %e1 = fusec.pointwise "exp" %w : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e2 = fusec.pointwise "exp" %e1 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e3 = fusec.pointwise "exp" %e2 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e4 = fusec.pointwise "exp" %e3 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e5 = fusec.pointwise "exp" %e4 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e6 = fusec.pointwise "exp" %e5 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e7 = fusec.pointwise "exp" %e6 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e8 = fusec.pointwise "exp" %e7 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e9 = fusec.pointwise "exp" %e8 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e10 = fusec.pointwise "exp" %e9 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e11 = fusec.pointwise "exp" %e10 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e12 = fusec.pointwise "exp" %e11 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e13 = fusec.pointwise "exp" %e12 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e14 = fusec.pointwise "exp" %e13 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e15 = fusec.pointwise "exp" %e14 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e16 = fusec.pointwise "exp" %e15 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e17 = fusec.pointwise "exp" %e16 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e18 = fusec.pointwise "exp" %e17 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e19 = fusec.pointwise "exp" %e18 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e20 = fusec.pointwise "exp" %e19 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e21 = fusec.pointwise "exp" %e20 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e22 = fusec.pointwise "exp" %e21 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e23 = fusec.pointwise "exp" %e22 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e24 = fusec.pointwise "exp" %e23 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e25 = fusec.pointwise "exp" %e24 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e26 = fusec.pointwise "exp" %e25 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e27 = fusec.pointwise "exp" %e26 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e28 = fusec.pointwise "exp" %e27 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e29 = fusec.pointwise "exp" %e28 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e30 = fusec.pointwise "exp" %e29 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e31 = fusec.pointwise "exp" %e30 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e32 = fusec.pointwise "exp" %e31 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e33 = fusec.pointwise "exp" %e32 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e34 = fusec.pointwise "exp" %e33 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e35 = fusec.pointwise "exp" %e34 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e36 = fusec.pointwise "exp" %e35 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e37 = fusec.pointwise "exp" %e36 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e38 = fusec.pointwise "exp" %e37 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e39 = fusec.pointwise "exp" %e38 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e40 = fusec.pointwise "exp" %e39 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e41 = fusec.pointwise "exp" %e40 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e42 = fusec.pointwise "exp" %e41 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e43 = fusec.pointwise "exp" %e42 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e44 = fusec.pointwise "exp" %e43 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e45 = fusec.pointwise "exp" %e44 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e46 = fusec.pointwise "exp" %e45 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e47 = fusec.pointwise "exp" %e46 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %e48 = fusec.pointwise "exp" %e47 : (!fusec.tensor<[64, 1], f32>) -> !fusec.tensor<[64, 1], f32>
    %c = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %g = fusec.pointwise "gt" %e48, %c : (!fusec.tensor<[64, 1], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 1], i1>
    %y = fusec.pointwise "logical_and" %m, %g : (!fusec.tensor<[64, 1048576], i1>, !fusec.tensor<[64, 1], i1>) -> !fusec.tensor<[64, 1048576], i1>
    fusec.output %y : !fusec.tensor<[64, 1048576], i1>
  }
}

// CHECK-LABEL: fusec.graph @expensive
// CHECK:         %g = fusec.kernel @fusec_poi_exp_gt_{{[0-9]+}} [64] (%w)
// CHECK:         %y = fusec.kernel @fusec_poi_logical_and_{{[0-9]+}} [67108864] (%m, %g)

// REMARK-NOT: domain-mismatch
// REMARK: remark: vertical-fusion: recompute-cost: @fusec_poi_logical_and_{{[0-9]+}} over [67108864] would recompute @fusec_poi_exp_gt_{{[0-9]+}} over [64] (243 instructions a point): 16307438400 instructions more on top of its 268435456 and 134217792 B, 458 us > max-recompute=1 x saving 128 B and a launch (4.5 us) [@fusec_poi_exp_gt_{{[0-9]+}}, @fusec_poi_logical_and_{{[0-9]+}}]
// REMARK-NOT: domain-mismatch

// LOOSE-LABEL: fusec.graph @expensive
// LOOSE-NEXT:    %y = fusec.kernel @fusec_poi_exp_gt_logical_and_{{[0-9]+}} [67108864] (%m, %w)
