// RUN: fusec-opt %s -p form-kernels | filecheck %s
// RUN: fusec-opt %s -p form-kernels | fusec-opt | filecheck %s

// One kernel per computing op; the broadcast of %b folds into its load index,
// the constant folds into the kernel body, sizes stay symbolic.
builtin.module {
  fusec.graph @bias_sum(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[512], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[512, s0], f32>) symbols(s0 in [2, inf]) {
    %c = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %m = fusec.pointwise "mul" %a, %c : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 512], f32>
    %ad = fusec.pointwise "add" %m, %b : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[512], f32>) -> !fusec.tensor<[s0, 512], f32>
    %s = fusec.reduce "sum" %ad dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
    %p = fusec.permute %ad [1, 0] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[512, s0], f32>
    fusec.output %s, %p : !fusec.tensor<[s0], f32>, !fusec.tensor<[512, s0], f32>
  }
}

// CHECK:      fusec.graph @bias_sum
// CHECK-NOT:  fusec.constant {{.*}} !fusec.tensor
// CHECK:      %m = fusec.kernel @fusec_poi_mul_0 [512*s0] (%a)
// CHECK:        fusec.load %{{.*}}[x] : !fusec.tensor<[s0, 512], f32>
// CHECK:        fusec.constant 0.5 : f32
// CHECK:        fusec.pointwise "mul" {{.*}} : (f32, f32) -> f32
// CHECK:        fusec.store {{.*}}[x]
// CHECK:      %ad = fusec.kernel @fusec_poi_add_1 [512*s0] (%m, %b)
// CHECK:        fusec.load %{{.*}}[mod(x, 512)] : !fusec.tensor<[512], f32>
// CHECK:      %s = fusec.kernel @fusec_red_sum_2 [s0, 512] (%ad)
// CHECK:        fusec.load %{{.*}}[r + 512*x]
// CHECK:        fusec.reduce_r "sum"
// CHECK:      %p = fusec.permute %ad [1, 0]
// CHECK:      fusec.output %s, %p
