// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=128}" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=128}" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=128}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=8 min-rnumel=6000}" | filecheck %s --check-prefix=OPTS
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions" | filecheck %s --check-prefix=AUTO
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=WORTHY
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion{keep-splittable=false}" | filecheck %s --check-prefix=JOINED
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=128 split-phases=false}" | filecheck %s --check-prefix=NOPHASES
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,split-reductions{splits=128 split-phases=false}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=NOPHASES-REMARK

// By default S comes from the sizes: about a thousand programs, chunks of at least 2048.
// AUTO-LABEL: fusec.graph @full_sum
// AUTO-NEXT:    %s = fusec.kernel @fusec_red_sum_0_split [512, 2048] (%a) : (!fusec.tensor<[1048576], f32>) -> (!fusec.tensor<[512, 1], f32>)

// x.sum() over 1M elements: 128 partial sums of 8192 elements each (no mask: 128
// divides the row), then one kernel adds the 128 partials.
// CHECK-LABEL: fusec.graph @full_sum
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_0_split [128, 8192] (%a) : (!fusec.tensor<[1048576], f32>) -> (!fusec.tensor<[128, 1], f32>)
// CHECK-NEXT:    ^bb0(%0: !fusec.tensor<[1048576], f32>, %1: !fusec.tensor<[128, 1], f32>):
// CHECK-NEXT:      %2 = fusec.load %0[r + 8192*x]
// CHECK-NEXT:      %3 = fusec.reduce_r "sum" %2 : f32 -> f32
// CHECK-NEXT:      fusec.store %3, %1[x]
// CHECK-NEXT:    }
// CHECK-NEXT:    %s_1 = fusec.kernel @fusec_red_sum_0 [1, 128] (%s) : (!fusec.tensor<[128, 1], f32>) -> (!fusec.tensor<[], f32>)
// CHECK-NEXT:    ^bb0(%0: !fusec.tensor<[128, 1], f32>, %1: !fusec.tensor<[], f32>):
// CHECK-NEXT:      %2 = fusec.load %0[r + x]
// CHECK-NEXT:      %3 = fusec.reduce_r "sum" %2 : f32 -> f32
// CHECK-NEXT:      fusec.store %3, %1[x]
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %s_1
// OPTS-LABEL: fusec.graph @full_sum
// OPTS-NEXT:    fusec.kernel @fusec_red_sum_0_split [8, 131072]
// OPTS:         fusec.kernel @fusec_red_sum_0 [1, 8]
builtin.module {
  fusec.graph @full_sum(%a : !fusec.tensor<[1048576], f32>) -> (!fusec.tensor<[], f32>) {
    %s = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[1048576], f32> -> !fusec.tensor<[], f32>
    fusec.output %s : !fusec.tensor<[], f32>
  }

// A mean over rows of 5000 (fp16): chunks of 40, the last chunk of a row masked past
// 5000; partials in fp32; the divide (the epilogue) runs after the combine.
// CHECK-LABEL: fusec.graph @mean
// CHECK-NEXT:    %m = fusec.kernel @fusec_red_sum_div_{{[0-9]+}}_split [512, 40] (%a) : (!fusec.tensor<[4, 5000], f16>) -> (!fusec.tensor<[128, 4], f32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %2 = fusec.symbolic r + 40*floordiv(x, 4) : i64
// CHECK-NEXT:      %3 = fusec.symbolic 5000 : i64
// CHECK-NEXT:      %4 = fusec.pointwise "lt" %2, %3 : (i64, i64) -> i1
// CHECK-NEXT:      %5 = fusec.load %0[r + 40*floordiv(x, 4) + 5000*mod(x, 4)] mask %4
// CHECK-NEXT:      %6 = fusec.pointwise "convert" %5 : (f16) -> f32
// CHECK-NEXT:      %7 = fusec.reduce_r "sum" %6 : f32 -> f32
// CHECK-NEXT:      fusec.store %7, %1[x] : !fusec.tensor<[128, 4], f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %m_1 = fusec.kernel @fusec_red_sum_div_{{[0-9]+}} [4, 128] (%m)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %2 = fusec.load %0[4*r + x] : !fusec.tensor<[128, 4], f32>
// CHECK-NEXT:      %3 = fusec.reduce_r "sum" %2 : f32 -> f32
// CHECK-NEXT:      %4 = fusec.pointwise "convert" %3 : (f32) -> f16
// CHECK-NEXT:      %5 = fusec.constant 5000.0 : f16
// CHECK-NEXT:      %6 = fusec.pointwise "div" %4, %5 : (f16, f16) -> f16
// CHECK-NEXT:      fusec.store %6, %1[x] : !fusec.tensor<[4], f16>
// CHECK-NEXT:    }
// CHECK-NEXT:    fusec.output %m_1
// With min-rnumel=6000 rows of 5000 are short: left alone, silently.
// OPTS-LABEL: fusec.graph @mean
// OPTS-NEXT:    fusec.kernel @fusec_red_sum_div_{{[0-9]+}} [4, 5000]
// OPTS-NEXT:    ^bb0
  fusec.graph @mean(%a : !fusec.tensor<[4, 5000], f16>) -> (!fusec.tensor<[4], f16>) {
    %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[4, 5000], f16> -> !fusec.tensor<[4], f16>
    %n = fusec.constant 5000.0 : !fusec.tensor<[], f16>
    %m = fusec.pointwise "div" %s, %n : (!fusec.tensor<[4], f16>, !fusec.tensor<[], f16>) -> !fusec.tensor<[4], f16>
    fusec.output %m : !fusec.tensor<[4], f16>
  }

// max: past the end of a row the masked load gives 0, which could beat a row of
// negatives: the reduction sees -inf there.
// CHECK-LABEL: fusec.graph @row_max
// CHECK-NEXT:    %m = fusec.kernel @fusec_red_max_{{[0-9]+}}_split [384, 40]
// CHECK:           %5 = fusec.load %0[r + 40*floordiv(x, 3) + 5000*mod(x, 3)] mask %4
// CHECK-NEXT:      %6 = fusec.constant -inf : f32
// CHECK-NEXT:      %7 = fusec.pointwise "where" %4, %5, %6 : (i1, f32, f32) -> f32
// CHECK-NEXT:      %8 = fusec.reduce_r "max" %7 : f32 -> f32
// CHECK:         %m_1 = fusec.kernel @fusec_red_max_{{[0-9]+}} [3, 128] (%m)
// CHECK:           fusec.reduce_r "max" %2 : f32 -> f32
  fusec.graph @row_max(%a : !fusec.tensor<[3, 5000], f32>) -> (!fusec.tensor<[3], f32>) {
    %m = fusec.reduce "max" %a dims [1] : !fusec.tensor<[3, 5000], f32> -> !fusec.tensor<[3], f32>
    fusec.output %m : !fusec.tensor<[3], f32>
  }

// A symbolic row whose declared lower bound proves it long: chunks of ceil(s0 / 128).
// CHECK-LABEL: fusec.graph @symbolic_long
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}}_split [128, floordiv(s0 + 127, 128)] (%a)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %2 = fusec.symbolic r + x*floordiv(s0 + 127, 128) : i64
// CHECK-NEXT:      %3 = fusec.symbolic s0 : i64
// CHECK-NEXT:      %4 = fusec.pointwise "lt" %2, %3 : (i64, i64) -> i1
// CHECK-NEXT:      %5 = fusec.load %0[r + x*floordiv(s0 + 127, 128)] mask %4
// CHECK-NEXT:      %6 = fusec.reduce_r "sum" %5 : f32 -> f32
// CHECK:         %s_1 = fusec.kernel @fusec_red_sum_{{[0-9]+}} [1, 128] (%s)
  fusec.graph @symbolic_long(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[], f32>) symbols(s0 in [8192, inf]) {
    %s = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[s0], f32> -> !fusec.tensor<[], f32>
    fusec.output %s : !fusec.tensor<[], f32>
  }

// Declined: argmax (partial maxima would need their positions).
// CHECK-LABEL: fusec.graph @argmax
// CHECK-NEXT:    %i = fusec.kernel @fusec_red_argmax_{{[0-9]+}} [2, 8192] (%a)
// REMARK: remark: split-reductions: split-declined: argmax: @fusec_red_argmax_{{[0-9]+}} reduces with argmax; partial results would need their positions
  fusec.graph @argmax(%a : !fusec.tensor<[2, 8192], f32>) -> (!fusec.tensor<[2], i64>) {
    %i = fusec.reduce "argmax" %a dims [1] : !fusec.tensor<[2, 8192], f32> -> !fusec.tensor<[2], i64>
    fusec.output %i : !fusec.tensor<[2], i64>
  }

// Softmax over few long rows: its sum reduces exp(x - max), a second phase over the row.  The division stays
// out (split-worthy); the two phases become a kernel each, the max handed on as a per-row buffer, each split.
// CHECK-LABEL: fusec.graph @softmax
// CHECK-NEXT:    %0 = fusec.kernel @fusec_red_max_sub_exp_sum_[[N:[0-9]+]]_phase1_split [256, 64] (%x)
// CHECK:         %1 = fusec.kernel @fusec_red_max_sub_exp_sum_[[N]]_phase1 [2, 128] (%0) : (!fusec.tensor<[128, 2], f32>) -> (!fusec.tensor<[2], f32>)
// CHECK:         %2 = fusec.kernel @fusec_red_max_sub_exp_sum_[[N]]_split [256, 64] (%x, %1)
// CHECK:           fusec.load %{{[0-9]+}}[mod(x, 2)] : !fusec.tensor<[2], f32>
// CHECK:         %m, %s = fusec.kernel @fusec_red_max_sub_exp_sum_[[N]] [2, 128] (%1, %2)
// CHECK:         %y = fusec.kernel @fusec_poi_sub_exp_div_{{[0-9]+}} [16384] (%x, %m, %s)
// REMARK: remark: split-reductions: split-phases: @fusec_red_max_sub_exp_sum_{{[0-9]+}}: 2 reduction phases
// With split-phases=false the two phases stay one kernel, declined.
// NOPHASES-LABEL: fusec.graph @softmax
// NOPHASES-NEXT:    %m, %s = fusec.kernel @fusec_red_max_sub_exp_sum_{{[0-9]+}} [2, 8192] (%x)
// NOPHASES-REMARK: remark: split-reductions: split-declined: dependent reductions: @fusec_red_max_sub_exp_sum_{{[0-9]+}} reduces a value that needs another of its reductions (softmax-like phases)
  fusec.graph @softmax(%x : !fusec.tensor<[2, 8192], f32>) -> (!fusec.tensor<[2, 8192], f32>) {
    %m = fusec.reduce "max" %x dims [1] keepdim : !fusec.tensor<[2, 8192], f32> -> !fusec.tensor<[2, 1], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[2, 8192], f32>, !fusec.tensor<[2, 1], f32>) -> !fusec.tensor<[2, 8192], f32>
    %e = fusec.pointwise "exp" %d : (!fusec.tensor<[2, 8192], f32>) -> !fusec.tensor<[2, 8192], f32>
    %s = fusec.reduce "sum" %e dims [1] keepdim : !fusec.tensor<[2, 8192], f32> -> !fusec.tensor<[2, 1], f32>
    %y = fusec.pointwise "div" %e, %s : (!fusec.tensor<[2, 8192], f32>, !fusec.tensor<[2, 1], f32>) -> !fusec.tensor<[2, 8192], f32>
    fusec.output %y : !fusec.tensor<[2, 8192], f32>
  }

// Batch norm's statistics over a channels-last [N*H*W, C] activation: the mean, then the squares around it.
// Chunk-local moments: A stores each chunk's sum and its squares around the chunk's own mean (the last of
// 128 chunks of 40 rows is short: Min/Max count the rows inside), B combines them by Chan's formula around
// the column's mean.  Two kernels, not four (moments=false: four); split-phases=false keeps one.
// CHECK-LABEL: fusec.graph @batch_norm_statistics
// CHECK-NEXT:    %{{.*}}, %{{.*}} = fusec.kernel @fusec_red_sum_div_sub_mul_[[BN:[0-9]+]]_split [8192, 40] (%x) : {{.*}} -> (!fusec.tensor<[128, 64], f32>, !fusec.tensor<[128, 64], f32>)
// CHECK:           %[[SUM:[0-9]+]] = fusec.reduce_r "sum"
// CHECK:           fusec.symbolic min(40, max(0, 5000 - 40*floordiv(x, 64))) : i64
// CHECK:           %[[DIFF:[0-9]+]] = fusec.pointwise "sub"
// CHECK:           fusec.pointwise "mul" %[[DIFF]], %[[DIFF]]
// CHECK:           fusec.store %[[SUM]], %{{[0-9]+}}[x] : !fusec.tensor<[128, 64], f32>
// CHECK:         %m, %w = fusec.kernel @fusec_red_sum_div_sub_mul_[[BN]] [64, 128]
// CHECK:           fusec.symbolic min(40, max(0, 5000 - 40*r)) : i64
// CHECK:           fusec.reduce_r "sum"
// CHECK-NOT:     fusec.kernel
// CHECK:         fusec.output %m, %w
// REMARK: remark: split-reductions: split-moments: @fusec_red_sum_div_sub_mul_{{[0-9]+}}: its 1 sum(s) of squares around a per-row value
// NOPHASES-LABEL: fusec.graph @batch_norm_statistics
// NOPHASES-NEXT:    %m, %w = fusec.kernel @fusec_red_sum_div_sub_mul_{{[0-9]+}} [64, 5000] (%x)
  fusec.graph @batch_norm_statistics(%x : !fusec.tensor<[5000, 64], f32>) -> (!fusec.tensor<[1, 64], f32>, !fusec.tensor<[1, 64], f32>) {
    %s = fusec.reduce "sum" %x dims [0] keepdim : !fusec.tensor<[5000, 64], f32> -> !fusec.tensor<[1, 64], f32>
    %n = fusec.constant 5000.0 : !fusec.tensor<[], f32>
    %m = fusec.pointwise "div" %s, %n : (!fusec.tensor<[1, 64], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[1, 64], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[5000, 64], f32>, !fusec.tensor<[1, 64], f32>) -> !fusec.tensor<[5000, 64], f32>
    %q = fusec.pointwise "mul" %d, %d : (!fusec.tensor<[5000, 64], f32>, !fusec.tensor<[5000, 64], f32>) -> !fusec.tensor<[5000, 64], f32>
    %v = fusec.reduce "sum" %q dims [0] keepdim : !fusec.tensor<[5000, 64], f32> -> !fusec.tensor<[1, 64], f32>
    %w = fusec.pointwise "div" %v, %n : (!fusec.tensor<[1, 64], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[1, 64], f32>
    fusec.output %m, %w : !fusec.tensor<[1, 64], f32>, !fusec.tensor<[1, 64], f32>
  }

// x - sum(x) over few long rows: the subtraction stays out of the sum (it would need the finished row),
// which splits.  (split-reductions' own dependent-store decline: tests/passes/test_split_reductions.py, on rows
// too short for reduction-fusion to keep them apart.)
// JOINED-LABEL: fusec.graph @center
// JOINED-NEXT:    %y = fusec.kernel @fusec_red_sum_sub_{{[0-9]+}} [2, 8192] (%x)
// CHECK-LABEL: fusec.graph @center
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}}_split [256, 64] (%x)
// CHECK:         %s_1 = fusec.kernel @fusec_red_sum_{{[0-9]+}} [2, 128] (%s)
// CHECK:         %y = fusec.kernel @fusec_poi_sub_{{[0-9]+}} [16384] (%x, %s_1)
// WORTHY: remark: reduction-fusion: split-worthy: @fusec_poi_sub_{{[0-9]+}} [16384] needs the finished rows of @fusec_red_sum_{{[0-9]+}} [2, 8192]
  fusec.graph @center(%x : !fusec.tensor<[2, 8192], f32>) -> (!fusec.tensor<[2, 8192], f32>) {
    %s = fusec.reduce "sum" %x dims [1] keepdim : !fusec.tensor<[2, 8192], f32> -> !fusec.tensor<[2, 1], f32>
    %y = fusec.pointwise "sub" %x, %s : (!fusec.tensor<[2, 8192], f32>, !fusec.tensor<[2, 1], f32>) -> !fusec.tensor<[2, 8192], f32>
    fusec.output %y : !fusec.tensor<[2, 8192], f32>
  }

// Split: a bias gradient (a column sum over 1024 rows, 12 programs of 64 columns unsplit) that also hands
// the per-(x, r) gradient on: A stores it at the substituted row beside its partials, B combines them.
// AUTO-LABEL: fusec.graph @bias_gradient
// AUTO-NEXT:    %{{.*}}, %d = fusec.kernel @fusec_red_tanh_mul_sub_sum_{{[0-9]+}}_split [12288, 64] (%g, %x) : {{.*}} -> (!fusec.tensor<[16, 768], f32>, !fusec.tensor<[1024, 768], f32>)
// AUTO:           fusec.store %{{.*}}, %{{.*}}[x] : !fusec.tensor<[16, 768], f32>
// AUTO-NEXT:      fusec.store %{{.*}}, %{{.*}}[768*r + 49152*floordiv(x, 768) + mod(x, 768)] : !fusec.tensor<[1024, 768], f32>
// AUTO:         %db = fusec.kernel @fusec_red_tanh_mul_sub_sum_{{[0-9]+}} [768, 16]
// AUTO:         fusec.output %d, %db
// REMARK: remark: split-reductions: split: [768, 1024] -> [98304, 8] partial rows, then [768, 128] combined
  fusec.graph @bias_gradient(%x : !fusec.tensor<[1024, 768], f32>, %g : !fusec.tensor<[1024, 768], f32>) -> (!fusec.tensor<[1024, 768], f32>, !fusec.tensor<[768], f32>) {
    %y = fusec.pointwise "tanh" %x : (!fusec.tensor<[1024, 768], f32>) -> !fusec.tensor<[1024, 768], f32>
    %y2 = fusec.pointwise "mul" %y, %y : (!fusec.tensor<[1024, 768], f32>, !fusec.tensor<[1024, 768], f32>) -> !fusec.tensor<[1024, 768], f32>
    %d = fusec.pointwise "sub" %g, %y2 : (!fusec.tensor<[1024, 768], f32>, !fusec.tensor<[1024, 768], f32>) -> !fusec.tensor<[1024, 768], f32>
    %db = fusec.reduce "sum" %d dims [0] : !fusec.tensor<[1024, 768], f32> -> !fusec.tensor<[768], f32>
    fusec.output %d, %db : !fusec.tensor<[1024, 768], f32>, !fusec.tensor<[768], f32>
  }

// Not split: a symbolic row that the bounds admit as short (s0 >= 2), with a remark.
// CHECK-LABEL: fusec.graph @symbolic_short
// CHECK-NEXT:    %s = fusec.kernel @fusec_red_sum_{{[0-9]+}} [1, s0] (%a)
// REMARK: remark: split-reductions: split-declined: unproven size: @fusec_red_sum_{{[0-9]+}} has rnumel s0, as small as 2 by the symbols' bounds: not provably >= min-rnumel=4096
  fusec.graph @symbolic_short(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[], f32>) symbols(s0 in [2, inf]) {
    %s = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[s0], f32> -> !fusec.tensor<[], f32>
    fusec.output %s : !fusec.tensor<[], f32>
  }

// Not split, silently: provably many rows, provably short rows.
// CHECK-LABEL: fusec.graph @many_rows
// CHECK-NEXT:    fusec.kernel @fusec_red_sum_{{[0-9]+}} [128, 8192]
// CHECK-LABEL: fusec.graph @short_rows
// CHECK-NEXT:    fusec.kernel @fusec_red_sum_{{[0-9]+}} [s0, 512]
// REMARK-NOT: remark
  fusec.graph @many_rows(%a : !fusec.tensor<[128, 8192], f32>) -> (!fusec.tensor<[128], f32>) {
    %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[128, 8192], f32> -> !fusec.tensor<[128], f32>
    fusec.output %s : !fusec.tensor<[128], f32>
  }
  fusec.graph @short_rows(%a : !fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
    %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %s : !fusec.tensor<[s0], f32>
  }
}
