// RUN: fusec-opt %s -p form-kernels,combo-grouping | filecheck %s

// A collective and its wait are ordered side effects: no combo spans them.  The cosine is
// independent of the all_reduce, yet it groups with the exponential after the wait, never
// with the sine before the collective.
builtin.module {
  fusec.graph @around(%x : !fusec.tensor<[1024], f32>, %y : !fusec.tensor<[1024], f32>, %z : !fusec.tensor<[1024], f32>) -> (!fusec.tensor<[1024], f32>, !fusec.tensor<[1024], f32>, !fusec.tensor<[1024], f32>) {
    %a = fusec.pointwise "sin" %x : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    %n = fusec.pointwise "neg" %y : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    %r = fusec.extern "_c10d_functional.all_reduce.default"(%n, "sum", "0") {collective = "issue"} : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    %w = fusec.extern "_c10d_functional.wait_tensor.default"(%r) {collective = "wait"} : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    %b = fusec.pointwise "cos" %z : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    %c = fusec.pointwise "exp" %w : (!fusec.tensor<[1024], f32>) -> !fusec.tensor<[1024], f32>
    fusec.output %a, %c, %b : !fusec.tensor<[1024], f32>, !fusec.tensor<[1024], f32>, !fusec.tensor<[1024], f32>
  }
}

// CHECK:      %a, %n = fusec.combo
// CHECK:      %r = fusec.extern "_c10d_functional.all_reduce.default"(%n, "sum", "0") {collective = "issue"}
// CHECK-NEXT: %w = fusec.extern "_c10d_functional.wait_tensor.default"(%r) {collective = "wait"}
// CHECK-NEXT: %b, %c = fusec.combo
// CHECK-NEXT:   fusec.kernel @fusec_poi_cos_{{[0-9]+}} [1024] (%z)
// CHECK:        fusec.kernel @fusec_poi_exp_{{[0-9]+}} [1024] (%w)
// CHECK:      fusec.output
