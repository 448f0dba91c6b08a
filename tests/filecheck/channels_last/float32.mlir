// RUN: fusec-opt %s -p "channels-last" | filecheck %s
// RUN: fusec-opt %s -p "channels-last" | fusec-opt | filecheck %s

// fp32 convolutions: where cuDNN may use TF32 (torch's default, recorded by the importer) its kernels are NHWC,
// as for 16-bit ones, and given NCHW tensors it converts each input and result; without TF32 its fp32 kernels
// take NCHW as it is, and auto leaves the graph alone.
builtin.module {
  fusec.graph @tf32(%x : !fusec.tensor<[2, 4, 8, 8], f32>, %w : !fusec.tensor<[4, 4, 3, 3], f32>, %s : !fusec.tensor<[1, 4, 1, 1], f32>) -> (!fusec.tensor<[2, 4], f32>) attributes {fusec.device = "cuda", fusec.cudnn_allow_tf32 = true} {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[4, 4, 3, 3], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %z = fusec.pointwise "mul" %y, %s : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[1, 4, 1, 1], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %r = fusec.pointwise "relu" %z : (!fusec.tensor<[2, 4, 8, 8], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %v = fusec.extern "aten.convolution.default"(%r, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[4, 4, 3, 3], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %o = fusec.pointwise "add" %v, %r : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[2, 4, 8, 8], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %m = fusec.reduce "sum" %o dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], f32> -> !fusec.tensor<[2, 4], f32>
    fusec.output %m : !fusec.tensor<[2, 4], f32>
  }
  fusec.graph @ieee(%x : !fusec.tensor<[2, 4, 8, 8], f32>, %w : !fusec.tensor<[4, 4, 3, 3], f32>, %s : !fusec.tensor<[1, 4, 1, 1], f32>) -> (!fusec.tensor<[2, 4], f32>) attributes {fusec.device = "cuda", fusec.cudnn_allow_tf32 = false} {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[4, 4, 3, 3], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %z = fusec.pointwise "mul" %y, %s : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[1, 4, 1, 1], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %r = fusec.pointwise "relu" %z : (!fusec.tensor<[2, 4, 8, 8], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %v = fusec.extern "aten.convolution.default"(%r, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[4, 4, 3, 3], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %o = fusec.pointwise "add" %v, %r : (!fusec.tensor<[2, 4, 8, 8], f32>, !fusec.tensor<[2, 4, 8, 8], f32>) -> !fusec.tensor<[2, 4, 8, 8], f32>
    %m = fusec.reduce "sum" %o dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], f32> -> !fusec.tensor<[2, 4], f32>
    fusec.output %m : !fusec.tensor<[2, 4], f32>
  }
}

// CHECK-LABEL: fusec.graph @tf32
// CHECK-SAME:  fusec.cudnn_allow_tf32 = true
// CHECK:       fusec.extern "aten.convolution.default"{{.*}} -> !fusec.tensor<[2, 4, 8, 8], f32, strides [256, 1, 32, 4]>
// CHECK-LABEL: fusec.graph @ieee
// CHECK-SAME:  fusec.cudnn_allow_tf32 = false
// CHECK-NOT:   [256, 1, 32, 4]
// CHECK:       fusec.output
