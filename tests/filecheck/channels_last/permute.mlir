// RUN: fusec-opt %s -p "channels-last{when=always}" | filecheck %s
// RUN: fusec-opt %s -p "channels-last{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A ConvNeXt block: a convolution, its result viewed NHWC (permute) for a per-channel scale over the last dim,
// viewed back NCHW and added to the block's input.  Channels-last, the NHWC view is dense: the permute's result
// is retyped with the convolution's.  In @to_output the view is the graph's output (eager's strides): the
// convolution keeps its layout.
builtin.module {
  fusec.graph @convnext(%x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 1, 3, 3], bf16>, %g : !fusec.tensor<[4], bf16>) -> (!fusec.tensor<[2, 4, 8, 8], bf16>) {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 4) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 1, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %p = fusec.permute %y [0, 2, 3, 1] : !fusec.tensor<[2, 4, 8, 8], bf16> -> !fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>
    %s = fusec.pointwise "mul" %p, %g : (!fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>, !fusec.tensor<[4], bf16>) -> !fusec.tensor<[2, 8, 8, 4], bf16>
    %b = fusec.permute %s [0, 3, 1, 2] : !fusec.tensor<[2, 8, 8, 4], bf16> -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
    %o = fusec.pointwise "add" %x, %b : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    fusec.output %o : !fusec.tensor<[2, 4, 8, 8], bf16>
  }
  fusec.graph @to_output(%x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 1, 3, 3], bf16>) -> (!fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>) {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 4) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 1, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %p = fusec.permute %y [0, 2, 3, 1] : !fusec.tensor<[2, 4, 8, 8], bf16> -> !fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>
    fusec.output %p : !fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>
  }
}

// CHECK-LABEL: fusec.graph @convnext
// CHECK:       %[[Y:.*]] = fusec.extern "aten.convolution.default"({{.*}}) : ({{.*}}) -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %[[P:.*]] = fusec.permute %[[Y]] [0, 2, 3, 1] : !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]> -> !fusec.tensor<[2, 8, 8, 4], bf16>
// CHECK-NEXT:  fusec.pointwise "mul" %[[P]], %g : (!fusec.tensor<[2, 8, 8, 4], bf16>, !fusec.tensor<[4], bf16>)
// CHECK-LABEL: fusec.graph @to_output
// CHECK:       fusec.extern "aten.convolution.default"({{.*}}) : ({{.*}}) -> !fusec.tensor<[2, 4, 8, 8], bf16>
// CHECK-NEXT:  fusec.permute {{.*}} -> !fusec.tensor<[2, 8, 8, 4], bf16, strides [256, 8, 1, 64]>

// REMARK: channels-last: channels-last: aten.convolution.default: activations channels-last
// REMARK: channels-last-declined: aten.convolution.default keeps eager's layouts: its result is read by fusec.permute, whose result a view or the graph output reads
