// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels{persistent-threshold=0}" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels{persistent-threshold=0}" | fusec-opt | filecheck %s

// A looped column reduction that stores 16-bit values per element (a layer norm's input gradient beside its
// weight's column sum) runs 2 warps a program, so that a thread's eight elements of a 64 x 8 step store 16
// bytes (the split layer-norm backward of [8192, 2048] bf16: 81.6 us at 4 warps, 54.4 at 2, H200).  One that
// stores fp32 per element, or stores only its column sums, keeps the launch heuristic's warps: nothing recorded.
builtin.module {
  fusec.graph @bf16_grad(%dy : !fusec.tensor<[4096, 1024], bf16>, %x : !fusec.tensor<[4096, 1024], bf16>) -> (!fusec.tensor<[1024], f32>, !fusec.tensor<[4096, 1024], bf16>) {
    %p = fusec.pointwise "mul" %dy, %x : (!fusec.tensor<[4096, 1024], bf16>, !fusec.tensor<[4096, 1024], bf16>) -> !fusec.tensor<[4096, 1024], bf16>
    %f = fusec.pointwise "convert" %p : (!fusec.tensor<[4096, 1024], bf16>) -> !fusec.tensor<[4096, 1024], f32>
    %s = fusec.reduce "sum" %f dims [0] : !fusec.tensor<[4096, 1024], f32> -> !fusec.tensor<[1024], f32>
    fusec.output %s, %p : !fusec.tensor<[1024], f32>, !fusec.tensor<[4096, 1024], bf16>
  }
  fusec.graph @f32_grad(%dy : !fusec.tensor<[4096, 1024], f32>, %x : !fusec.tensor<[4096, 1024], f32>) -> (!fusec.tensor<[1024], f32>, !fusec.tensor<[4096, 1024], f32>) {
    %p = fusec.pointwise "mul" %dy, %x : (!fusec.tensor<[4096, 1024], f32>, !fusec.tensor<[4096, 1024], f32>) -> !fusec.tensor<[4096, 1024], f32>
    %s = fusec.reduce "sum" %p dims [0] : !fusec.tensor<[4096, 1024], f32> -> !fusec.tensor<[1024], f32>
    fusec.output %s, %p : !fusec.tensor<[1024], f32>, !fusec.tensor<[4096, 1024], f32>
  }
  fusec.graph @bf16_sum(%dy : !fusec.tensor<[4096, 1024], bf16>) -> (!fusec.tensor<[1024], f32>) {
    %f = fusec.pointwise "convert" %dy : (!fusec.tensor<[4096, 1024], bf16>) -> !fusec.tensor<[4096, 1024], f32>
    %s = fusec.reduce "sum" %f dims [0] : !fusec.tensor<[4096, 1024], f32> -> !fusec.tensor<[1024], f32>
    fusec.output %s : !fusec.tensor<[1024], f32>
  }
}

// CHECK-LABEL: fusec.graph @bf16_grad
// CHECK:       fusec.kernel @fusec_red_{{.*}} [1024, 4096] schedule(looped, int32, outer, max_rblock = 4096, warps = 2)
// CHECK-LABEL: fusec.graph @f32_grad
// CHECK:       fusec.kernel @fusec_red_{{.*}} [1024, 4096] schedule(looped, int32, outer, max_rblock = 4096) (
// CHECK-LABEL: fusec.graph @bf16_sum
// CHECK:       fusec.kernel @fusec_red_{{.*}} [1024, 4096] schedule(looped, int32, outer, max_rblock = 4096) (
