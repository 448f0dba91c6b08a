// RUN: fusec-opt %s -p form-kernels,schedule-kernels | filecheck %s
// RUN: fusec-opt %s -p form-kernels,schedule-kernels | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,schedule-kernels{persistent-threshold=0 max-rblock=64}" | filecheck %s --check-prefix=LOOPED
// RUN: fusec-opt %s -p form-kernels,schedule-kernels,schedule-kernels | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,schedule-kernels{runtime-persistent=false}" | filecheck %s --check-prefix=ALWAYS-LOOPED

// schedule-kernels records each kernel's kind, index type, outer reduction and max RBLOCK,
// and renames reductions: fusec_per_* runs persistent, fusec_red_* looped.

builtin.module {
  // Rows of a static 512: persistent (512 <= the threshold of 4096).
  fusec.graph @static_rows(%x : !fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, 1000000]) {
    %s = fusec.reduce "sum" %x dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %s : !fusec.tensor<[s0], f32>
  }
// CHECK-LABEL: fusec.graph @static_rows
// CHECK:       fusec.kernel @fusec_per_sum_0 [s0, 512] schedule(persistent, int32) (%x)
// LOOPED-LABEL: fusec.graph @static_rows
// LOOPED:       fusec.kernel @fusec_red_sum_0 [s0, 512] schedule(looped, int32, max_rblock = 64) (%x)

  // Rows of a symbolic length: bounded by 4096 -> persistent; the bound, not a hint, decides.
  fusec.graph @bounded_rows(%x : !fusec.tensor<[64, s1], f32>) -> (!fusec.tensor<[64], f32>) symbols(s1 in [1, 4096]) {
    %s = fusec.reduce "max" %x dims [1] : !fusec.tensor<[64, s1], f32> -> !fusec.tensor<[64], f32>
    fusec.output %s : !fusec.tensor<[64], f32>
  }
// CHECK-LABEL: fusec.graph @bounded_rows
// CHECK:       fusec.kernel @fusec_per_max_1 [64, s1] schedule(persistent, int32) (%x)

  // Unbounded rows: looped with the default max RBLOCK; the domain may leave int32: int64 indices.  A call whose
  // rows fit the threshold runs the persistent form (the launcher picks by s1); without runtime-persistent, never.
  fusec.graph @unbounded_rows(%x : !fusec.tensor<[64, s1], f32>) -> (!fusec.tensor<[64], f32>) symbols(s1 in [1, inf]) {
    %s = fusec.reduce "max" %x dims [1] : !fusec.tensor<[64, s1], f32> -> !fusec.tensor<[64], f32>
    fusec.output %s : !fusec.tensor<[64], f32>
  }
// CHECK-LABEL: fusec.graph @unbounded_rows
// CHECK:       fusec.kernel @fusec_red_max_2 [64, s1] schedule(looped, int64, max_rblock = 4096, persistent_up_to = 4096) (%x)
// ALWAYS-LOOPED-LABEL: fusec.graph @unbounded_rows
// ALWAYS-LOOPED:       fusec.kernel @fusec_red_max_2 [64, s1] schedule(looped, int64, max_rblock = 4096) (%x)

  // Just past the threshold: looped, but every index fits int32.
  fusec.graph @long_rows(%x : !fusec.tensor<[64, s1], f32>) -> (!fusec.tensor<[64], f32>) symbols(s1 in [1, 4097]) {
    %s = fusec.reduce "max" %x dims [1] : !fusec.tensor<[64, s1], f32> -> !fusec.tensor<[64], f32>
    fusec.output %s : !fusec.tensor<[64], f32>
  }
// CHECK-LABEL: fusec.graph @long_rows
// CHECK:       fusec.kernel @fusec_red_max_3 [64, s1] schedule(looped, int32, max_rblock = 4096, persistent_up_to = 4096) (%x)

  // Column sums (x.sum(0)): outer reductions; persistent only up to 64 rows, whatever the threshold.
  fusec.graph @columns(%x : !fusec.tensor<[64, 64], f32>, %y : !fusec.tensor<[100, 64], f32>) -> (!fusec.tensor<[64], f32>, !fusec.tensor<[64], f32>) {
    %a = fusec.reduce "sum" %x dims [0] : !fusec.tensor<[64, 64], f32> -> !fusec.tensor<[64], f32>
    %b = fusec.reduce "sum" %y dims [0] : !fusec.tensor<[100, 64], f32> -> !fusec.tensor<[64], f32>
    fusec.output %a, %b : !fusec.tensor<[64], f32>, !fusec.tensor<[64], f32>
  }
// CHECK-LABEL: fusec.graph @columns
// CHECK:       fusec.kernel @fusec_per_sum_4 [64, 64] schedule(persistent, int32, outer) (%x)
// CHECK:       fusec.kernel @fusec_red_sum_5 [64, 100] schedule(looped, int32, outer, max_rblock = 4096) (%y)
// LOOPED-LABEL: fusec.graph @columns
// LOOPED:       fusec.kernel @fusec_red_sum_4 [64, 64] schedule(looped, int32, outer, max_rblock = 64) (%x)

  // Pointwise: int32 while the bound keeps every index in range, int64 without a bound.
  fusec.graph @pointwise(%x : !fusec.tensor<[s0], f32>, %y : !fusec.tensor<[s1], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s1], f32>) symbols(s0 in [1, 1000000], s1 in [1, inf]) {
    %a = fusec.pointwise "neg" %x : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
    %b = fusec.pointwise "neg" %y : (!fusec.tensor<[s1], f32>) -> !fusec.tensor<[s1], f32>
    fusec.output %a, %b : !fusec.tensor<[s0], f32>, !fusec.tensor<[s1], f32>
  }
// CHECK-LABEL: fusec.graph @pointwise
// CHECK:       fusec.kernel @fusec_poi_neg_6 [s0] schedule(pointwise, int32) (%x)
// CHECK:       fusec.kernel @fusec_poi_neg_7 [s1] schedule(pointwise, int64) (%y)

  // 2**31 elements reached only through the index: a bounded domain, an index past int32.
  fusec.graph @wide_index(%x : !fusec.tensor<[1024, s0], f32>) -> (!fusec.tensor<[1024, 1], f32>) symbols(s0 in [1, 4194304]) {
    %c = fusec.slice %x dim 1 start 0 step 1 : !fusec.tensor<[1024, s0], f32> -> !fusec.tensor<[1024, 1], f32, strides [s0, 1]>
    %n = fusec.pointwise "neg" %c : (!fusec.tensor<[1024, 1], f32, strides [s0, 1]>) -> !fusec.tensor<[1024, 1], f32>
    fusec.output %n : !fusec.tensor<[1024, 1], f32>
  }
// CHECK-LABEL: fusec.graph @wide_index
// CHECK:       fusec.kernel @fusec_poi_neg_{{[0-9]+}} [1024] schedule(pointwise, int64) (%x)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    fusec.load %{{.*}}[x*s0]
}
