// RUN: fusec-opt %s -p form-kernels,combo-grouping | filecheck %s
// RUN: fusec-opt %s -p form-kernels,combo-grouping | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,combo-grouping{max-subkernels=2}" | filecheck %s --check-prefix=MAX2
// RUN: fusec-opt %s -p "form-kernels,combo-grouping{max-args=4}" --remarks -o %t 2>&1 | filecheck %s --check-prefix=REMARK

// The seed talk's four independent row reductions become one combo.  The negation
// depends on %a, so it cannot join them; the long reduction (rnumel 8192 > 2048)
// does not join short ones, but pointwise and reductions mix: it joins the negation.
builtin.module {
  fusec.graph @seed(%t1 : !fusec.tensor<[s0, 512], f32>, %t2 : !fusec.tensor<[s0, 512], f32>, %t3 : !fusec.tensor<[s0, 512], f32>, %t4 : !fusec.tensor<[s0, 512], f32>, %l : !fusec.tensor<[64, 8192], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[64], f32>) symbols(s0 in [2, inf]) {
    %a = fusec.reduce "sum" %t1 dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %b = fusec.reduce "max" %t2 dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %c = fusec.reduce "min" %t3 dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %d = fusec.reduce "sum" %t4 dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %e = fusec.pointwise "neg" %a : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
    %big = fusec.reduce "sum" %l dims [1] : !fusec.tensor<[64, 8192], f32> -> !fusec.tensor<[64], f32>
    fusec.output %a, %b, %c, %d, %e, %big : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[64], f32>
  }
}

// CHECK:      fusec.graph @seed
// CHECK:      %a, %b, %c, %d = fusec.combo @fusec_combo_0 : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) {
// CHECK-NEXT:   fusec.kernel @fusec_red_sum_0 [s0, 512] (%t1)
// CHECK:        fusec.reduce_r "sum"
// CHECK:        fusec.kernel @fusec_red_max_1 [s0, 512] (%t2)
// CHECK:        fusec.kernel @fusec_red_min_2 [s0, 512] (%t3)
// CHECK:        fusec.kernel @fusec_red_sum_3 [s0, 512] (%t4)
// CHECK:        fusec.output %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>
// CHECK-NEXT: }
// CHECK-NEXT: %e, %big = fusec.combo @fusec_combo_1 : (!fusec.tensor<[s0], f32>, !fusec.tensor<[64], f32>) {
// CHECK-NEXT:   fusec.kernel @fusec_poi_neg_4 [s0] (%a)
// CHECK:        fusec.kernel @fusec_red_sum_5 [64, 8192] (%l)
// CHECK:        fusec.output
// CHECK-NEXT: }
// CHECK-NEXT: fusec.output %a, %b, %c, %d, %e, %big

// Two kernels a combo at most: the reductions pair up in order; the long reduction still
// stays apart from the short ones and joins the negation.
// MAX2:      %a, %b = fusec.combo @fusec_combo_0
// MAX2:      %c, %d = fusec.combo @fusec_combo_1
// MAX2:      %e, %big = fusec.combo @fusec_combo_2
// MAX2:      fusec.output %a, %b, %c, %d, %e, %big

// Four arguments at most (a reduction alone takes 3: %t, its output and s0): nothing groups,
// and each kernel left alone says why, with the group it came closest to joining.
// REMARK:      remark: combo-grouping: limit-max-args: the combined kernel would take 5 arguments > max-args=4 [@fusec_red_max_1]
// REMARK-NEXT: remark: combo-grouping: limit-max-args: {{.*}} [@fusec_red_min_2]
// REMARK-NEXT: remark: combo-grouping: limit-max-args: {{.*}} [@fusec_red_sum_3]
// REMARK-NEXT: remark: combo-grouping: limit-max-args: {{.*}} [@fusec_poi_neg_4]
// REMARK-NEXT: remark: combo-grouping: limit-max-args: {{.*}} [@fusec_red_sum_5]
