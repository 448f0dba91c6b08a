// RUN: fusec-opt %s -p "attention-layouts" | filecheck %s
// RUN: fusec-opt %s -p "attention-layouts" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "attention-layouts" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "attention-layouts,form-kernels" | filecheck %s --check-prefix=KERNEL

// cuDNN's attention returns its result in its query's stride order; the IR declares [B, L, H, E] order (strides
// [4096, 64, 512, 1]), what a query sliced from a projection has.  A query the compiler makes (Llama's rotary add)
// is stored in that order, so the transpose and view feeding the output projection are views, not a copy.
builtin.module {
  fusec.graph @rotary(%q : !fusec.tensor<[2, 8, 8, 64], bf16>, %c : !fusec.tensor<[1, 1, 8, 64], bf16>, %k : !fusec.tensor<[2, 8, 8, 64], bf16>, %v : !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 512], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>) attributes {fusec.device = "cuda"} {
    %m = fusec.pointwise "mul" %q, %c : (!fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[1, 1, 8, 64], bf16>) -> !fusec.tensor<[2, 8, 8, 64], bf16>
    %qe = fusec.pointwise "add" %m, %q : (!fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>) -> !fusec.tensor<[2, 8, 8, 64], bf16>
    %o, %lse = fusec.extern "aten._scaled_dot_product_cudnn_attention.default"(%qe, %k, %v, none, false, scale = 0.125) results [0, 1] : (!fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>, !fusec.tensor<[2, 8, 8, 1], f32>)
    %t = fusec.permute %o [0, 2, 1, 3] : !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]> -> !fusec.tensor<[2, 8, 8, 64], bf16>
    %r = fusec.reshape %t : !fusec.tensor<[2, 8, 8, 64], bf16> -> !fusec.tensor<[2, 8, 512], bf16>
    %saved = fusec.pointwise "identity" %qe : (!fusec.tensor<[2, 8, 8, 64], bf16>) -> !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
    fusec.output %r, %saved : !fusec.tensor<[2, 8, 512], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
  }
  fusec.graph @query_input(%q : !fusec.tensor<[2, 8, 8, 64], bf16>, %k : !fusec.tensor<[2, 8, 8, 64], bf16>, %v : !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>) attributes {fusec.device = "cuda"} {
    %o, %lse = fusec.extern "aten._scaled_dot_product_cudnn_attention.default"(%q, %k, %v, none, false, scale = 0.125) results [0, 1] : (!fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>, !fusec.tensor<[2, 8, 8, 1], f32>)
    fusec.output %o : !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
  }
  fusec.graph @symbolic(%q : !fusec.tensor<[s0, 8, s1, 64], bf16>, %k : !fusec.tensor<[s0, 8, s1, 64], bf16>, %v : !fusec.tensor<[s0, 8, s1, 64], bf16>) -> (!fusec.tensor<[s0, 8, s1, 64], bf16, strides [512*s1, 64, 512, 1]>) symbols(s0 in [1, inf], s1 in [2, inf]) attributes {fusec.device = "cuda"} {
    %qe = fusec.pointwise "neg" %q : (!fusec.tensor<[s0, 8, s1, 64], bf16>) -> !fusec.tensor<[s0, 8, s1, 64], bf16>
    %o, %lse = fusec.extern "aten._scaled_dot_product_cudnn_attention.default"(%qe, %k, %v, none, false, scale = 0.125) results [0, 1] : (!fusec.tensor<[s0, 8, s1, 64], bf16>, !fusec.tensor<[s0, 8, s1, 64], bf16>, !fusec.tensor<[s0, 8, s1, 64], bf16>) -> (!fusec.tensor<[s0, 8, s1, 64], bf16, strides [512*s1, 64, 512, 1]>, !fusec.tensor<[s0, 8, s1, 1], f32>)
    fusec.output %o : !fusec.tensor<[s0, 8, s1, 64], bf16, strides [512*s1, 64, 512, 1]>
  }
  fusec.graph @on_cpu(%q : !fusec.tensor<[2, 8, 8, 64], bf16>, %k : !fusec.tensor<[2, 8, 8, 64], bf16>, %v : !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>) attributes {fusec.device = "cpu"} {
    %qe = fusec.pointwise "neg" %q : (!fusec.tensor<[2, 8, 8, 64], bf16>) -> !fusec.tensor<[2, 8, 8, 64], bf16>
    %o, %lse = fusec.extern "aten._scaled_dot_product_cudnn_attention.default"(%qe, %k, %v, none, false, scale = 0.125) results [0, 1] : (!fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>, !fusec.tensor<[2, 8, 8, 64], bf16>) -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>, !fusec.tensor<[2, 8, 8, 1], f32>)
    fusec.output %o : !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
  }
}

// The rotary add takes the declared result's strides; the copy into eager's strides (saved for a backward) is gone.
// CHECK-LABEL: fusec.graph @rotary
// CHECK:       %{{.*}} = fusec.pointwise "mul" {{.*}} -> !fusec.tensor<[2, 8, 8, 64], bf16>
// CHECK-NEXT:  %[[QE:.*]] = fusec.pointwise "add" {{.*}} -> !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
// CHECK-NEXT:  fusec.extern "aten._scaled_dot_product_cudnn_attention.default"(%[[QE]],
// CHECK-NOT:   "identity"
// CHECK:       fusec.output %{{.*}}, %[[QE]] :
// A graph input keeps its layout; a graph marked as running on the CPU is left alone.
// CHECK-LABEL: fusec.graph @query_input
// CHECK-NOT:   strides [4096, 64, 512, 1]>, !fusec.tensor<[2, 8, 8, 64], bf16, strides
// Symbolic sizes: the strides are expressions of them.
// CHECK-LABEL: fusec.graph @symbolic
// CHECK:       fusec.pointwise "neg" {{.*}} -> !fusec.tensor<[s0, 8, s1, 64], bf16, strides [512*s1, 64, 512, 1]>
// CHECK-LABEL: fusec.graph @on_cpu
// CHECK:       fusec.pointwise "neg" {{.*}} -> !fusec.tensor<[2, 8, 8, 64], bf16>
// CHECK-NEXT:  fusec.extern

// REMARK:     attention-layouts: attention-layout: aten._scaled_dot_product_cudnn_attention.default: its query is stored with strides [4096, 64, 512, 1]
// REMARK:     attention-layouts: attention-layout-declined: aten._scaled_dot_product_cudnn_attention.default: its query keeps its layout, a graph input (its layout is the caller's); its result comes in that order
// REMARK:     attention-layouts: attention-layout: aten._scaled_dot_product_cudnn_attention.default: its query is stored with strides [512*s1, 64, 512, 1]
// REMARK-NOT: attention-layout

// The kernel computing the query walks it in its new memory order: it reads its contiguous operands transposed.
// KERNEL-LABEL: fusec.graph @rotary
// KERNEL:       fusec.kernel @fusec_poi_add{{.*}} -> (!fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>)
// KERNEL:       fusec.load %{{.*}}[4096*floordiv(x, 4096) + mod(x, 64) + 512*mod(floordiv(x, 64), 8) + 64*mod(floordiv(x, 512), 8)]
// KERNEL:       fusec.store %{{.*}}[x] : !fusec.tensor<[2, 8, 8, 64], bf16, strides [4096, 64, 512, 1]>
