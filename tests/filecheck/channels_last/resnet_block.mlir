// RUN: fusec-opt %s -p "channels-last{when=always}" | filecheck %s
// RUN: fusec-opt %s -p "channels-last{when=always}" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "channels-last{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "channels-last" | filecheck %s --check-prefix=AUTO
// RUN: fusec-opt %s -p "channels-last{when=always},form-kernels" | filecheck %s --check-prefix=KERNEL
// RUN: fusec-opt %s -p "channels-last{when=always}" | filecheck %s --check-prefix=SAVED
// RUN: fusec-opt %s -p "channels-last" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=SKIPPED
// RUN: fusec-opt %s -p "channels-last{when=always}" | filecheck %s --check-prefix=PATCH
// RUN: fusec-opt %s -p "channels-last{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=DECLINED
// RUN: fusec-opt %s -p "channels-last" | filecheck %s --check-prefix=BACKWARD
// RUN: fusec-opt %s -p "channels-last" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=BACKWARD-REMARK

// A convolution, a per-channel scale, ReLU, a second convolution and a residual add, then a mean over the
// image: every activation becomes channels-last, the images are copied into it (a graph input keeps the
// caller's layout), and the reduction reads it as it is.  The graph output, the per-channel scale and the
// weights keep theirs.  Without the device mark (IR written by hand), when=auto leaves the graph alone.
builtin.module {
  fusec.graph @block(%x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 4, 3, 3], bf16>, %s : !fusec.tensor<[1, 4, 1, 1], bf16>) -> (!fusec.tensor<[2, 4], bf16>) {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %z = fusec.pointwise "mul" %y, %s : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[1, 4, 1, 1], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %r = fusec.pointwise "relu" %z : (!fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %v = fusec.extern "aten.convolution.default"(%r, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %o = fusec.pointwise "add" %v, %r : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %m = fusec.reduce "sum" %o dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], bf16> -> !fusec.tensor<[2, 4], bf16>
    fusec.output %m : !fusec.tensor<[2, 4], bf16>
  }
}

// CHECK-LABEL: fusec.graph @block
// CHECK:       %[[X:.*]] = fusec.pointwise "identity" %x : (!fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %[[W:.*]] = fusec.pointwise "identity" %w : (!fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[4, 4, 3, 3], bf16, strides [36, 1, 12, 4]>
// CHECK-NEXT:  %y = fusec.extern "aten.convolution.default"(%[[X]], %[[W]], {{.*}}) : (!fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>, !fusec.tensor<[4, 4, 3, 3], bf16, strides [36, 1, 12, 4]>) -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %z = fusec.pointwise "mul" %y, %s : (!fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>, !fusec.tensor<[1, 4, 1, 1], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %r = fusec.pointwise "relu" %z {{.*}} -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %v = fusec.extern "aten.convolution.default"(%r, %[[W]], {{.*}} -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %o = fusec.pointwise "add" %v, %r {{.*}} -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// CHECK-NEXT:  %m = fusec.reduce "sum" %o dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]> -> !fusec.tensor<[2, 4], bf16>
// CHECK-NEXT:  fusec.output %m : !fusec.tensor<[2, 4], bf16>

// REMARK: channels-last: channels-last-copy: aten.convolution.default: operand 0 is copied to channels-last: it is a graph input (its layout is the caller's)
// REMARK: channels-last: channels-last-copy: aten.convolution.default: operand 1 is copied to channels-last: it is a graph input (its layout is the caller's)
// REMARK-NOT: operand 1 is copied
// REMARK: channels-last: channels-last: aten.convolution.default: activations channels-last (5 values in this graph)

// AUTO-LABEL: fusec.graph @block
// AUTO-NOT: strides

// The relu kernel walks memory in channels-last order: x is the offset of what it loads and stores.
// KERNEL:       fusec.kernel @fusec_poi_relu_{{[0-9]+}} [512]
// KERNEL:       fusec.load %{{.*}}[x] : !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// KERNEL-NEXT:  fusec.pointwise "relu"
// KERNEL-NEXT:  fusec.store %{{.*}}[x] : !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>

// With the importer's device mark, when=auto relayouts 16-bit graphs, a training forward's saved outputs
// included, but leaves a training graph with symbolic sizes as it is, saying why.
builtin.module {
  fusec.graph @infer(%x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 4, 3, 3], bf16>) -> (!fusec.tensor<[2, 4], bf16>) attributes {fusec.device = "cuda"} {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %m = fusec.reduce "sum" %r dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], bf16> -> !fusec.tensor<[2, 4], bf16>
    fusec.output %m : !fusec.tensor<[2, 4], bf16>
  }
  fusec.graph @train(%x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 4, 3, 3], bf16>) -> (!fusec.tensor<[2, 4], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16>) attributes {fusec.device = "cuda", fusec.saved_outputs = 1 : i64} {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %m = fusec.reduce "sum" %r dims [2, 3] : !fusec.tensor<[2, 4, 8, 8], bf16> -> !fusec.tensor<[2, 4], bf16>
    fusec.output %m, %r : !fusec.tensor<[2, 4], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16>
  }
  fusec.graph @train_dynamic(%x : !fusec.tensor<[s0, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 4, 3, 3], bf16>) -> (!fusec.tensor<[s0, 4], bf16>, !fusec.tensor<[s0, 4, 8, 8], bf16>) symbols(s0 in [2, inf]) attributes {fusec.device = "cuda", fusec.saved_outputs = 1 : i64} {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[s0, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[s0, 4, 8, 8], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[s0, 4, 8, 8], bf16>) -> !fusec.tensor<[s0, 4, 8, 8], bf16>
    %m = fusec.reduce "sum" %r dims [2, 3] : !fusec.tensor<[s0, 4, 8, 8], bf16> -> !fusec.tensor<[s0, 4], bf16>
    fusec.output %m, %r : !fusec.tensor<[s0, 4], bf16>, !fusec.tensor<[s0, 4, 8, 8], bf16>
  }
}

// AUTO-LABEL: fusec.graph @infer
// AUTO:         fusec.pointwise "relu" {{.*}} -> !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// AUTO-LABEL: fusec.graph @train
// AUTO:         fusec.output %m, %r : !fusec.tensor<[2, 4], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>
// AUTO-LABEL: fusec.graph @train_dynamic
// AUTO-NOT:     strides
// AUTO:         fusec.output

// SAVED-LABEL: fusec.graph @train
// SAVED-SAME:  -> (!fusec.tensor<[2, 4], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>)
// SAVED:       fusec.output %m, %r : !fusec.tensor<[2, 4], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>

// SKIPPED: remark: channels-last: channels-last-skipped: a training graph with symbolic sizes keeps its layouts {{.*}} [@train_dynamic]

// A convolution's backward: its weight copied channels-last (once), its weight's gradient computed
// channels-last and copied back for the graph output, which keeps eager's layout.
builtin.module {
  fusec.graph @backward(%g : !fusec.tensor<[2, 4, 8, 8], bf16>, %x : !fusec.tensor<[2, 4, 8, 8], bf16>, %w : !fusec.tensor<[4, 4, 3, 3], bf16>) -> (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) attributes {fusec.device = "cuda"} {
    %gi, %gw = fusec.extern "aten.convolution_backward.default"(%g, %x, %w, [0], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [true, true, false]) : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>) -> (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>)
    %r = fusec.pointwise "relu" %gi : (!fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    %s = fusec.pointwise "add" %r, %g : (!fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[2, 4, 8, 8], bf16>) -> !fusec.tensor<[2, 4, 8, 8], bf16>
    fusec.output %s, %gw : !fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>
  }
}

// BACKWARD-LABEL: fusec.graph @backward
// BACKWARD:       %[[W:.*]] = fusec.pointwise "identity" %w : (!fusec.tensor<[4, 4, 3, 3], bf16>) -> !fusec.tensor<[4, 4, 3, 3], bf16, strides [36, 1, 12, 4]>
// BACKWARD-NEXT:  %gi, %gw = fusec.extern "aten.convolution_backward.default"({{.*}}, %[[W]], {{.*}} -> (!fusec.tensor<[2, 4, 8, 8], bf16, strides [256, 1, 32, 4]>, !fusec.tensor<[4, 4, 3, 3], bf16, strides [36, 1, 12, 4]>)
// BACKWARD-NEXT:  %[[GW:.*]] = fusec.pointwise "identity" %gw : (!fusec.tensor<[4, 4, 3, 3], bf16, strides [36, 1, 12, 4]>) -> !fusec.tensor<[4, 4, 3, 3], bf16>
// BACKWARD:       fusec.output %s, %[[GW]] : !fusec.tensor<[2, 4, 8, 8], bf16>, !fusec.tensor<[4, 4, 3, 3], bf16>
// BACKWARD-REMARK: remark: channels-last: channels-last-copy: aten.convolution_backward.default: the weight's gradient is computed channels-last, as the library does, and copied back: it is a graph output (eager's strides)

// A patch embedding: the convolution's result is flattened by a view, so it keeps eager's layout, and its
// input is not copied either (torch would return a channels-last result that the launcher copies back).
builtin.module {
  fusec.graph @patches(%x : !fusec.tensor<[2, 3, 32, 32], bf16>, %w : !fusec.tensor<[8, 3, 16, 16], bf16>) -> (!fusec.tensor<[2, 8, 4], bf16>) {
    %y = fusec.extern "aten.convolution.default"(%x, %w, none, [16, 16], [0, 0], [1, 1], false, [0, 0], 1) : (!fusec.tensor<[2, 3, 32, 32], bf16>, !fusec.tensor<[8, 3, 16, 16], bf16>) -> !fusec.tensor<[2, 8, 2, 2], bf16>
    %f = fusec.reshape %y : !fusec.tensor<[2, 8, 2, 2], bf16> -> !fusec.tensor<[2, 8, 4], bf16>
    fusec.output %f : !fusec.tensor<[2, 8, 4], bf16>
  }
}

// PATCH-LABEL: fusec.graph @patches
// PATCH-NOT:   strides
// PATCH:       fusec.output
// DECLINED: remark: channels-last: channels-last-declined: aten.convolution.default keeps eager's layouts: its result is read by fusec.reshape
