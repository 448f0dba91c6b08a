// RUN: fusec-opt %s -p form-kernels,vertical-fusion,tile-pointwise,schedule-kernels | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,tile-pointwise,schedule-kernels{register-budget=0}" | filecheck %s --check-prefix=OFF
// RUN: fusec-opt %s -p form-kernels,vertical-fusion,tile-pointwise,schedule-kernels | fusec-opt | filecheck %s

// A kernel whose body holds many values an element at once gets a limit on the elements a thread holds
// (per_thread): its launch then takes more warps or smaller tiles, where 32 elements a thread would need more
// registers than the SM can give (Llama's rotary embedding: 255 registers and spills at 64x64 tiles of 4 warps).
// A light kernel keeps the launch heuristics' own tiles, and register-budget=0 turns the limit off.
builtin.module {
  // A rotary-like body over a transposed read: cos and sin of a position, two loads, a select: ~6 registers an element.
  fusec.graph @rotary(%q : !fusec.tensor<[64, 256], f32>, %f : !fusec.tensor<[64], f32>) -> (!fusec.tensor<[256, 64], f32>) {
    %t = fusec.permute %q [1, 0] : !fusec.tensor<[64, 256], f32> -> !fusec.tensor<[256, 64], f32, strides [1, 256]>
    %fe = fusec.expand %f : !fusec.tensor<[64], f32> -> !fusec.tensor<[256, 64], f32, strides [0, 1]>
    %a = fusec.pointwise "mul" %t, %fe : (!fusec.tensor<[256, 64], f32, strides [1, 256]>, !fusec.tensor<[256, 64], f32, strides [0, 1]>) -> !fusec.tensor<[256, 64], f32>
    %c = fusec.pointwise "cos" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %s = fusec.pointwise "sin" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %qc = fusec.pointwise "mul" %t, %c : (!fusec.tensor<[256, 64], f32, strides [1, 256]>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %qs = fusec.pointwise "mul" %a, %s : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %e = fusec.pointwise "exp" %qs : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %r = fusec.pointwise "add" %qc, %e : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %o = fusec.pointwise "mul" %r, %t : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32, strides [1, 256]>) -> !fusec.tensor<[256, 64], f32>
    fusec.output %o : !fusec.tensor<[256, 64], f32>
  }
  // A light pointwise kernel: no limit.
  fusec.graph @neg(%x : !fusec.tensor<[4096], f32>) -> (!fusec.tensor<[4096], f32>) {
    %n = fusec.pointwise "neg" %x : (!fusec.tensor<[4096], f32>) -> !fusec.tensor<[4096], f32>
    fusec.output %n : !fusec.tensor<[4096], f32>
  }
}

// CHECK-LABEL: fusec.graph @rotary
// CHECK:       fusec.kernel @{{.*}} [256, 64] tiled schedule(tiled, int32, per_thread = 8)
// CHECK-LABEL: fusec.graph @neg
// CHECK:       fusec.kernel @fusec_poi_neg_{{[0-9]+}} [4096] schedule(pointwise, int32) (%x)
// OFF-LABEL:   fusec.graph @rotary
// OFF:         fusec.kernel @{{.*}} [256, 64] tiled schedule(tiled, int32) (
