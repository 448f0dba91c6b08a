// RUN: fusec-opt %s -p "align-matmul-outputs{when=always}" | filecheck %s
// RUN: fusec-opt %s -p "align-matmul-outputs{when=always}" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "align-matmul-outputs{when=always},form-kernels" | filecheck %s --check-prefix=KERNELS
// RUN: fusec-opt %s -p "align-matmul-outputs{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "align-matmul-outputs" | filecheck %s --check-prefix=NOPAD

// A linear with 1001 outputs (1001 bf16 = 2002 bytes a row): the mm result's rows are padded
// to 1008 elements.  The relu reads the padded buffer; the mm value returned directly gets a
// contiguous identity copy, which the output names instead.
builtin.module {
  fusec.graph @linear(%x : !fusec.tensor<[8, 64], bf16>, %w : !fusec.tensor<[64, 1001], bf16>) -> (!fusec.tensor<[8, 1001], bf16>, !fusec.tensor<[8, 1001], bf16>) {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], bf16>, !fusec.tensor<[64, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    fusec.output %y, %r : !fusec.tensor<[8, 1001], bf16>, !fusec.tensor<[8, 1001], bf16>
  }

// CHECK-LABEL: fusec.graph @linear
// CHECK:       %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], bf16>, !fusec.tensor<[64, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16, strides [1008, 1]>
// CHECK-NEXT:  %[[COPY:.*]] = fusec.pointwise "identity" %y : (!fusec.tensor<[8, 1001], bf16, strides [1008, 1]>) -> !fusec.tensor<[8, 1001], bf16>
// CHECK-NEXT:  %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], bf16, strides [1008, 1]>) -> !fusec.tensor<[8, 1001], bf16>
// CHECK-NEXT:  fusec.output %[[COPY]], %r

// KERNELS-LABEL: fusec.graph @linear
// KERNELS:       fusec.extern "aten.mm.default"{{.*}}strides [1008, 1]>
// KERNELS:       fusec.load %{{.*}}[1008*floordiv(x, 1001) + mod(x, 1001)]

// REMARK: padded-matmul{{.*}}aten.mm.default result [8, 1001] gets strides [1008, 1]{{.*}}a contiguous copy feeds the graph output

// NOPAD-LABEL: fusec.graph @linear
// NOPAD:       -> !fusec.tensor<[8, 1001], bf16>{{$}}

  // The LM head's shape: [4*3, 64] @ [64, 51] reshaped to [4, 3, 51] for the output.  The reshape's type was
  // derived from a contiguous input: it reads the contiguous copy; the softmax-like kernel reads the padded buffer.
  fusec.graph @lm_head(%h : !fusec.tensor<[12, 64], f16>, %w : !fusec.tensor<[64, 51], f16>) -> (!fusec.tensor<[4, 3, 51], f16>, !fusec.tensor<[12, 51], f16>) {
    %l = fusec.extern "aten.mm.default"(%h, %w) : (!fusec.tensor<[12, 64], f16>, !fusec.tensor<[64, 51], f16>) -> !fusec.tensor<[12, 51], f16>
    %v = fusec.reshape %l : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[4, 3, 51], f16>
    %e = fusec.pointwise "exp" %l : (!fusec.tensor<[12, 51], f16>) -> !fusec.tensor<[12, 51], f16>
    fusec.output %v, %e : !fusec.tensor<[4, 3, 51], f16>, !fusec.tensor<[12, 51], f16>
  }

// CHECK-LABEL: fusec.graph @lm_head
// CHECK:       %l = fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[12, 51], f16, strides [56, 1]>
// CHECK-NEXT:  %[[LCOPY:.*]] = fusec.pointwise "identity" %l : (!fusec.tensor<[12, 51], f16, strides [56, 1]>) -> !fusec.tensor<[12, 51], f16>
// CHECK-NEXT:  %v = fusec.reshape %[[LCOPY]] : !fusec.tensor<[12, 51], f16> -> !fusec.tensor<[4, 3, 51], f16>
// CHECK-NEXT:  %e = fusec.pointwise "exp" %l : (!fusec.tensor<[12, 51], f16, strides [56, 1]>)

// REMARK: padded-matmul{{.*}}[12, 51] gets strides [56, 1]{{.*}}a contiguous copy feeds fusec.reshape

  // Aligned rows (fp32, 1000 wide = 4000 bytes), a batched matmul with 3 columns of f32, a symbolic width.
  fusec.graph @others(%a : !fusec.tensor<[4, 8], f32>, %b : !fusec.tensor<[8, 1000], f32>, %p : !fusec.tensor<[2, 4, 8], f32>, %q : !fusec.tensor<[2, 8, 3], f32>, %c : !fusec.tensor<[8, s0], f32>) -> (!fusec.tensor<[4, 1000], f32>, !fusec.tensor<[2, 4, 3], f32>, !fusec.tensor<[4, s0], f32>) symbols(s0 in [2, inf]) {
    %m = fusec.extern "aten.mm.default"(%a, %b) : (!fusec.tensor<[4, 8], f32>, !fusec.tensor<[8, 1000], f32>) -> !fusec.tensor<[4, 1000], f32>
    %bm = fusec.extern "aten.bmm.default"(%p, %q) : (!fusec.tensor<[2, 4, 8], f32>, !fusec.tensor<[2, 8, 3], f32>) -> !fusec.tensor<[2, 4, 3], f32>
    %e = fusec.pointwise "exp" %bm : (!fusec.tensor<[2, 4, 3], f32>) -> !fusec.tensor<[2, 4, 3], f32>
    %s = fusec.extern "aten.mm.default"(%a, %c) : (!fusec.tensor<[4, 8], f32>, !fusec.tensor<[8, s0], f32>) -> !fusec.tensor<[4, s0], f32>
    fusec.output %m, %e, %s : !fusec.tensor<[4, 1000], f32>, !fusec.tensor<[2, 4, 3], f32>, !fusec.tensor<[4, s0], f32>
  }
}

// CHECK-LABEL: fusec.graph @others
// CHECK:       %m = fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[4, 1000], f32>{{$}}
// CHECK-NEXT:  %bm = fusec.extern "aten.bmm.default"{{.*}} -> !fusec.tensor<[2, 4, 3], f32, strides [16, 4, 1]>
// CHECK-NEXT:  %e = fusec.pointwise "exp" %bm
// CHECK-NEXT:  %s = fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[4, s0], f32>{{$}}

// REMARK: padding-symbolic{{.*}}last dim s0 is symbolic
