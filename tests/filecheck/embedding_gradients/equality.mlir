// RUN: fusec-opt %s -p "embedding-gradients{when=always}" | filecheck %s
// RUN: fusec-opt %s -p "embedding-gradients{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "embedding-gradients{when=always max-gflop=0.0001}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=BOUND

// An embedding's weight gradient over 2*s0 <= 128 tokens, padding word 3: its tokens' rows zeroed, each word's
// tokens summed by (idx == idx.T) @ grad, the sums written at idx into a [50, 8] table of zeros.  The fp32 one
// stays torch's (the [T, T] product would run on CUDA cores).
builtin.module {
  fusec.graph @g(%grad : !fusec.tensor<[2, s0, 8], bf16>, %idx : !fusec.tensor<[2, s0], i64>) -> (!fusec.tensor<[50, 8], bf16>) symbols(s0 in [1, 64]) {
    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, 50, 3, false) : (!fusec.tensor<[2, s0, 8], bf16>, !fusec.tensor<[2, s0], i64>) -> !fusec.tensor<[50, 8], bf16>
    fusec.output %w : !fusec.tensor<[50, 8], bf16>
  }
  fusec.graph @fp32(%grad : !fusec.tensor<[16, 8], f32>, %idx : !fusec.tensor<[16], i64>) -> (!fusec.tensor<[50, 8], f32>) {
    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, 50, -1, false) : (!fusec.tensor<[16, 8], f32>, !fusec.tensor<[16], i64>) -> !fusec.tensor<[50, 8], f32>
    fusec.output %w : !fusec.tensor<[50, 8], f32>
  }
}

// CHECK-LABEL: fusec.graph @g
// CHECK:       %[[FLAT:.*]] = fusec.reshape %idx : !fusec.tensor<[2, s0], i64> -> !fusec.tensor<[2*s0], i64>
// CHECK:       %[[COL:.*]] = fusec.reshape %[[FLAT]] : {{.*}} -> !fusec.tensor<[2*s0, 1], i64>
// CHECK:       %[[PAD:.*]] = fusec.pointwise "eq" %[[COL]], %{{.*}} : {{.*}} -> !fusec.tensor<[2*s0, 1], i1>
// CHECK:       %[[ROWS:.*]] = fusec.pointwise "where" %[[PAD]], %{{.*}}, %{{.*}} : {{.*}} -> !fusec.tensor<[2*s0, 8], bf16>
// CHECK:       %[[ROW:.*]] = fusec.reshape %[[FLAT]] : {{.*}} -> !fusec.tensor<[1, 2*s0], i64>
// CHECK:       %[[SAME:.*]] = fusec.pointwise "eq" %[[COL]], %[[ROW]] : {{.*}} -> !fusec.tensor<[2*s0, 2*s0], i1>
// CHECK:       %[[ONES:.*]] = fusec.pointwise "convert" %[[SAME]] : {{.*}} -> !fusec.tensor<[2*s0, 2*s0], bf16>
// CHECK:       %[[SUMS:.*]] = fusec.extern "aten.mm.default"(%[[ONES]], %[[ROWS]])
// CHECK:       fusec.extern "fusec.embedding_rows.default"(%[[SUMS]], %[[FLAT]], 50) : {{.*}} -> !fusec.tensor<[50, 8], bf16>
// CHECK-LABEL: fusec.graph @fp32
// CHECK:       fusec.extern "aten.embedding_dense_backward.default"

// REMARK: embedding-gradients: equality-matmul: aten.embedding_dense_backward.default over 2*s0 tokens -> (idx == idx.T) @ grad (0.000262 GFLOP at most)
// REMARK: embedding-gradients: not-16-bit: aten.embedding_dense_backward.default: a f32 gradient

// BOUND: embedding-gradients: too-many-tokens: aten.embedding_dense_backward.default: 2*s0 tokens x 8: the equality matmul would take up to 0.000262 GFLOP (max-gflop 0.0001)
