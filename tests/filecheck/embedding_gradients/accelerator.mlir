// RUN: fusec-opt %s -p embedding-gradients | filecheck %s

// The default (when=accelerator), as in the default pipeline: a graph the IR marks as running on a GPU takes the
// equality matmul; one with no mark (or "cpu") keeps torch's call.
builtin.module {
  fusec.graph @gpu(%grad : !fusec.tensor<[16, 8], bf16>, %idx : !fusec.tensor<[16], i64>) -> (!fusec.tensor<[50, 8], bf16>) attributes {fusec.device = "cuda", fusec.device_capability = 90 : i64, fusec.sm_count = 132 : i64} {
    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, 50, -1, false) : (!fusec.tensor<[16, 8], bf16>, !fusec.tensor<[16], i64>) -> !fusec.tensor<[50, 8], bf16>
    fusec.output %w : !fusec.tensor<[50, 8], bf16>
  }
  fusec.graph @unmarked(%grad : !fusec.tensor<[16, 8], bf16>, %idx : !fusec.tensor<[16], i64>) -> (!fusec.tensor<[50, 8], bf16>) {
    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, 50, -1, false) : (!fusec.tensor<[16, 8], bf16>, !fusec.tensor<[16], i64>) -> !fusec.tensor<[50, 8], bf16>
    fusec.output %w : !fusec.tensor<[50, 8], bf16>
  }
}

// CHECK-LABEL: fusec.graph @gpu
// CHECK:       fusec.extern "aten.mm.default"
// CHECK:       fusec.extern "fusec.embedding_rows.default"
// CHECK-NOT:   aten.embedding_dense_backward
// CHECK-LABEL: fusec.graph @unmarked
// CHECK:       fusec.extern "aten.embedding_dense_backward.default"
