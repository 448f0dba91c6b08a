// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion,reduction-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion{siblings=false}" | filecheck %s --check-prefix=NOSIB
// RUN: not fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,expect-fused{max-kernels=1}" 2>&1 | filecheck %s --check-prefix=EXPECT

// softmax: the max, exp(x - max), the sum and the division in one kernel that
// loads x once and stores per (x, r).
// CHECK-LABEL: fusec.graph @softmax
// CHECK-NEXT:    %y = fusec.kernel @fusec_red_max_sub_exp_sum_div_4 [s0, 32] (%x)
// CHECK:           %2 = fusec.load %0[r + 32*x]
// CHECK-NEXT:      %3 = fusec.reduce_r "max" %2
// CHECK-NEXT:      %4 = fusec.pointwise "sub" %2, %3
// CHECK-NEXT:      %5 = fusec.pointwise "exp" %4
// CHECK-NEXT:      %6 = fusec.reduce_r "sum" %5
// CHECK-NEXT:      %7 = fusec.pointwise "div" %5, %6
// CHECK-NEXT:      fusec.store %7, %1[r + 32*x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %y

// RMSNorm: prologue (x*x), per-row epilogue (mean, + eps, rsqrt), per-element epilogue (* x * w).
// CHECK-LABEL: fusec.graph @rmsnorm
// CHECK-NEXT:    %z = fusec.kernel @fusec_red_mul_sum_div_add_rsqrt_{{[0-9]+}} [s0, 64] (%x, %w)
// CHECK:           fusec.reduce_r "sum"
// CHECK:           fusec.pointwise "rsqrt"
// CHECK:           fusec.load %1[r] : !fusec.tensor<[64], f32>
// CHECK:           fusec.store %{{.*}}, %2[r + 64*x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %z

// A reduction over the first dim: x is a column, the epilogue's flat index becomes x + 8*r.
// CHECK-LABEL: fusec.graph @column_normalise
// CHECK-NEXT:    %d = fusec.kernel @fusec_red_sum_div_{{[0-9]+}} [8, s0] (%x)
// CHECK:           fusec.load %0[8*r + x]
// CHECK:           fusec.store %{{.*}}, %1[8*r + x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %d

// Siblings over one input: one load, two reductions, two outputs.
// CHECK-LABEL: fusec.graph @var_mean
// CHECK-NEXT:    %s, %ss = fusec.kernel @fusec_red_sum_mul_{{[0-9]+}} [s0, 32] (%x)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %3 = fusec.load %0[r + 32*x]
// CHECK-NEXT:      %4 = fusec.reduce_r "sum" %3
// CHECK-NEXT:      %5 = fusec.pointwise "mul" %3, %3
// CHECK-NEXT:      %6 = fusec.reduce_r "sum" %5
// CHECK:         fusec.output %s, %ss
// NOSIB-LABEL: fusec.graph @var_mean
// NOSIB:         %s = fusec.kernel @fusec_red_sum_{{[0-9]+}} [s0, 32] (%x)
// NOSIB:         %ss = fusec.kernel @fusec_red_mul_sum_{{[0-9]+}} [s0, 32] (%x)

// Declined: the epilogue reads the row sums along both dims (an outer sum); no
// placement in the reduction's domain reads them at x.
// CHECK-LABEL: fusec.graph @outer_sum
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}} [s0, s0] (%x)
// CHECK:         %o = fusec.kernel @fusec_poi_add_{{[0-9]+}} [pow(s0, 2)] (%s)
// REMARK: remark: reduction-fusion: index-mismatch: @fusec_poi_add_{{[0-9]+}} reads [floordiv(x, s0), mod(x, s0)] of @fusec_red_sum_{{[0-9]+}} [s0, s0], which stores at [x]
// EXPECT: fusec-opt: error: {{.*}}reduction-fusion.mlir:[[# @LINE + 45]]:3: pass 'expect-fused' failed: @outer_sum: expected at most 1 kernel launch, found 2: @fusec_red_sum_{{[0-9]+}}, @fusec_poi_add_{{[0-9]+}}
// EXPECT-NEXT: {{^}}  fusec.graph @outer_sum(
// EXPECT-NEXT: {{^  \^$}}
// EXPECT-NEXT: remark: vertical-fusion: extern-producer
// EXPECT: remark: reduction-fusion: index-mismatch

// A reduction reading an extern's result takes its epilogue; the boundary with the
// extern stays, reported under the merged kernel's name.
// CHECK-LABEL: fusec.graph @mm_then_softmax_numerator
// CHECK-NEXT:    %mm = fusec.extern "aten.mm.default"(%x, %w)
// CHECK-NEXT:    %e = fusec.kernel @fusec_red_max_sub_exp_{{[0-9]+}} [s0, 32] (%mm)
// REMARK: remark: reduction-fusion: extern-producer: @fusec_red_max_sub_exp_{{[0-9]+}} reads the result of aten.mm.default, a torch call, as input 0 [aten.mm.default, @fusec_red_max_sub_exp_{{[0-9]+}}]

builtin.module {
  fusec.graph @softmax(%x : !fusec.tensor<[s0, 32], f32>) -> (!fusec.tensor<[s0, 32], f32>) symbols(s0 in [1, inf]) {
    %m = fusec.reduce "max" %x dims [1] keepdim : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0, 1], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 32], f32>
    %e = fusec.pointwise "exp" %d : (!fusec.tensor<[s0, 32], f32>) -> !fusec.tensor<[s0, 32], f32>
    %s = fusec.reduce "sum" %e dims [1] keepdim : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0, 1], f32>
    %y = fusec.pointwise "div" %e, %s : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 32], f32>
    fusec.output %y : !fusec.tensor<[s0, 32], f32>
  }
  fusec.graph @rmsnorm(%x : !fusec.tensor<[s0, 64], f32>, %w : !fusec.tensor<[64], f32>) -> (!fusec.tensor<[s0, 64], f32>) symbols(s0 in [1, inf]) {
    %sq = fusec.pointwise "mul" %x, %x : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %s = fusec.reduce "sum" %sq dims [1] keepdim : !fusec.tensor<[s0, 64], f32> -> !fusec.tensor<[s0, 1], f32>
    %n = fusec.constant 64.0 : !fusec.tensor<[], f32>
    %ms = fusec.pointwise "div" %s, %n : (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 1], f32>
    %eps = fusec.constant 0.001 : !fusec.tensor<[], f32>
    %a = fusec.pointwise "add" %ms, %eps : (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 1], f32>
    %r = fusec.pointwise "rsqrt" %a : (!fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1], f32>
    %y = fusec.pointwise "mul" %x, %r : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 64], f32>
    %z = fusec.pointwise "mul" %y, %w : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %z : !fusec.tensor<[s0, 64], f32>
  }
  fusec.graph @column_normalise(%x : !fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[s0, 8], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [0] keepdim : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[1, 8], f32>
    %d = fusec.pointwise "div" %x, %s : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[1, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
    fusec.output %d : !fusec.tensor<[s0, 8], f32>
  }
  fusec.graph @var_mean(%x : !fusec.tensor<[s0, 32], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [1] : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0], f32>
    %sq = fusec.pointwise "mul" %x, %x : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[s0, 32], f32>) -> !fusec.tensor<[s0, 32], f32>
    %ss = fusec.reduce "sum" %sq dims [1] : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %s, %ss : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>
  }
  fusec.graph @outer_sum(%x : !fusec.tensor<[s0, s0], f32>) -> (!fusec.tensor<[s0, s0], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %x dims [1] : !fusec.tensor<[s0, s0], f32> -> !fusec.tensor<[s0], f32>
    %a = fusec.reshape %s : !fusec.tensor<[s0], f32> -> !fusec.tensor<[s0, 1], f32>
    %b = fusec.reshape %s : !fusec.tensor<[s0], f32> -> !fusec.tensor<[1, s0], f32>
    %o = fusec.pointwise "add" %a, %b : (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[1, s0], f32>) -> !fusec.tensor<[s0, s0], f32>
    fusec.output %o : !fusec.tensor<[s0, s0], f32>
  }
  fusec.graph @mm_then_softmax_numerator(%x : !fusec.tensor<[s0, 16], f32>, %w : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[s0, 32], f32>) symbols(s0 in [1, inf]) {
    %mm:1 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[s0, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[s0, 32], f32>)
    %m = fusec.reduce "max" %mm dims [1] keepdim : !fusec.tensor<[s0, 32], f32> -> !fusec.tensor<[s0, 1], f32>
    %d = fusec.pointwise "sub" %mm, %m : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 32], f32>
    %e = fusec.pointwise "exp" %d : (!fusec.tensor<[s0, 32], f32>) -> !fusec.tensor<[s0, 32], f32>
    fusec.output %e : !fusec.tensor<[s0, 32], f32>
  }
}
