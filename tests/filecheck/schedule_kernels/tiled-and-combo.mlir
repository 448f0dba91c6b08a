// RUN: fusec-opt %s -p form-kernels,tile-pointwise,schedule-kernels | filecheck %s
// RUN: fusec-opt %s -p form-kernels,combo-grouping,tile-pointwise,schedule-kernels | filecheck %s --check-prefix=COMBO
// RUN: fusec-opt %s -p "form-kernels,combo-grouping,schedule-kernels{persistent-threshold=0 max-rblock=128}" | filecheck %s --check-prefix=LOOPED

// A tiled kernel keeps its tiles; members of a combo keep a schedule of their own.

builtin.module {
  fusec.graph @transpose_add(%x : !fusec.tensor<[s0, s1], f32>, %y : !fusec.tensor<[s1, s0], f32>) -> (!fusec.tensor<[s1, s0], f32>) symbols(s0 in [2, 1000], s1 in [2, 1000]) {
    %t = fusec.permute %x [1, 0] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s1, s0], f32, strides [1, s1]>
    %s = fusec.pointwise "add" %t, %y : (!fusec.tensor<[s1, s0], f32, strides [1, s1]>, !fusec.tensor<[s1, s0], f32>) -> !fusec.tensor<[s1, s0], f32>
    fusec.output %s : !fusec.tensor<[s1, s0], f32>
  }
// CHECK-LABEL: fusec.graph @transpose_add
// CHECK:       fusec.kernel @fusec_poi_add_0 [s1, s0] tiled schedule(tiled, int32, per_thread = 16) (%x, %y)

  fusec.graph @three_sums(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[s0, 8192], f32>, %c : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) symbols(s0 in [1, 64]) {
    %ra = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %rb = fusec.reduce "sum" %b dims [1] : !fusec.tensor<[s0, 8192], f32> -> !fusec.tensor<[s0], f32>
    %nc = fusec.pointwise "neg" %c : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
    fusec.output %ra, %rb, %nc : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>
  }
// COMBO-LABEL: fusec.graph @three_sums
// COMBO:       fusec.kernel @fusec_red_sum_2 [s0, 8192] schedule(looped, int32, max_rblock = 4096) (%b)
// COMBO:       fusec.combo @fusec_combo_0
// COMBO:         fusec.kernel @fusec_per_sum_1 [s0, 512] schedule(persistent, int32) (%a)
// COMBO:         fusec.kernel @fusec_poi_neg_3 [s0] schedule(pointwise, int32) (%c)
// LOOPED-LABEL: fusec.graph @three_sums
// LOOPED:       fusec.combo @fusec_combo_0
// LOOPED:         fusec.kernel @fusec_red_sum_1 [s0, 512] schedule(looped, int32, max_rblock = 128) (%a)
// LOOPED:         fusec.kernel @fusec_poi_neg_3 [s0] schedule(pointwise, int32) (%c)
}
