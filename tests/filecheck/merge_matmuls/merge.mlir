// RUN: fusec-opt %s -p "merge-matmuls{when=always}" | filecheck %s
// RUN: fusec-opt %s -p "merge-matmuls{when=always}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "merge-matmuls" | filecheck %s --check-prefix=UNMARKED

// Matmuls sharing an operand, or summed, run as one matmul on concatenated operands.
builtin.module {
  // Query, key and value projections of one input (weights read as w.t()): the weights are concatenated as
  // they are stored, each result is a column slice, the views reading it are retyped for its row stride, and
  // the graph output reads a contiguous copy.
  fusec.graph @projections(%x : !fusec.tensor<[128, 64], bf16>, %wq : !fusec.tensor<[64, 64], bf16>, %wk : !fusec.tensor<[32, 64], bf16>, %wv : !fusec.tensor<[32, 64], bf16>) -> (!fusec.tensor<[2, 64, 64], bf16>, !fusec.tensor<[128, 32], bf16>, !fusec.tensor<[128, 32], bf16>) {
    %tq = fusec.permute %wq [1, 0] : !fusec.tensor<[64, 64], bf16> -> !fusec.tensor<[64, 64], bf16, strides [1, 64]>
    %q = fusec.extern "aten.mm.default"(%x, %tq) : (!fusec.tensor<[128, 64], bf16>, !fusec.tensor<[64, 64], bf16, strides [1, 64]>) -> !fusec.tensor<[128, 64], bf16>
    %q3 = fusec.reshape %q : !fusec.tensor<[128, 64], bf16> -> !fusec.tensor<[2, 64, 64], bf16>
    %tk = fusec.permute %wk [1, 0] : !fusec.tensor<[32, 64], bf16> -> !fusec.tensor<[64, 32], bf16, strides [1, 64]>
    %k = fusec.extern "aten.mm.default"(%x, %tk) : (!fusec.tensor<[128, 64], bf16>, !fusec.tensor<[64, 32], bf16, strides [1, 64]>) -> !fusec.tensor<[128, 32], bf16>
    %k2 = fusec.pointwise "neg" %k : (!fusec.tensor<[128, 32], bf16>) -> !fusec.tensor<[128, 32], bf16>
    %tv = fusec.permute %wv [1, 0] : !fusec.tensor<[32, 64], bf16> -> !fusec.tensor<[64, 32], bf16, strides [1, 64]>
    %v = fusec.extern "aten.mm.default"(%x, %tv) : (!fusec.tensor<[128, 64], bf16>, !fusec.tensor<[64, 32], bf16, strides [1, 64]>) -> !fusec.tensor<[128, 32], bf16>
    fusec.output %q3, %k2, %v : !fusec.tensor<[2, 64, 64], bf16>, !fusec.tensor<[128, 32], bf16>, !fusec.tensor<[128, 32], bf16>
  }
  // CHECK-LABEL: fusec.graph @projections
  // CHECK:      %[[W:.*]] = fusec.cat %wq, %wk, %wv dim 0 : {{.*}} -> !fusec.tensor<[128, 64], bf16>
  // CHECK-NEXT: %[[WT:.*]] = fusec.permute %[[W]] [1, 0]
  // CHECK-NEXT: %[[P:.*]] = fusec.extern "aten.mm.default"(%x, %[[WT]]) : {{.*}} -> !fusec.tensor<[128, 128], bf16>
  // CHECK-NEXT: %[[Q:.*]] = fusec.slice %[[P]] dim 1 start 0 step 1 : !fusec.tensor<[128, 128], bf16> -> !fusec.tensor<[128, 64], bf16, strides [128, 1]>
  // CHECK-NEXT: %[[K:.*]] = fusec.slice %[[P]] dim 1 start 64 step 1 : {{.*}} -> !fusec.tensor<[128, 32], bf16, strides [128, 1]>
  // CHECK-NEXT: %[[V:.*]] = fusec.slice %[[P]] dim 1 start 96 step 1 : {{.*}} -> !fusec.tensor<[128, 32], bf16, strides [128, 1]>
  // CHECK-NEXT: %[[VC:.*]] = fusec.pointwise "identity" %[[V]] : {{.*}} -> !fusec.tensor<[128, 32], bf16>
  // CHECK:      fusec.reshape %[[Q]] : !fusec.tensor<[128, 64], bf16, strides [128, 1]> -> !fusec.tensor<[2, 64, 64], bf16, strides [8192, 128, 1]>
  // CHECK:      fusec.pointwise "neg" %[[K]]
  // CHECK-NOT:  aten.mm.default
  // CHECK:      fusec.output {{.*}}, %[[VC]]

  // Biased projections (a BERT layer's): the biases are concatenated and added once, for bias-epilogues.
  fusec.graph @biased(%x : !fusec.tensor<[128, 64], f32>, %wq : !fusec.tensor<[64, 64], f32>, %bq : !fusec.tensor<[64], f32>, %wk : !fusec.tensor<[64, 64], f32>, %bk : !fusec.tensor<[64], f32>) -> (!fusec.tensor<[128, 64], f32>) {
    %tq = fusec.permute %wq [1, 0] : !fusec.tensor<[64, 64], f32> -> !fusec.tensor<[64, 64], f32, strides [1, 64]>
    %q = fusec.extern "aten.mm.default"(%x, %tq) : (!fusec.tensor<[128, 64], f32>, !fusec.tensor<[64, 64], f32, strides [1, 64]>) -> !fusec.tensor<[128, 64], f32>
    %qb = fusec.pointwise "add" %q, %bq : (!fusec.tensor<[128, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[128, 64], f32>
    %tk = fusec.permute %wk [1, 0] : !fusec.tensor<[64, 64], f32> -> !fusec.tensor<[64, 64], f32, strides [1, 64]>
    %k = fusec.extern "aten.mm.default"(%x, %tk) : (!fusec.tensor<[128, 64], f32>, !fusec.tensor<[64, 64], f32, strides [1, 64]>) -> !fusec.tensor<[128, 64], f32>
    %kb = fusec.pointwise "add" %bk, %k : (!fusec.tensor<[64], f32>, !fusec.tensor<[128, 64], f32>) -> !fusec.tensor<[128, 64], f32>
    %s = fusec.pointwise "mul" %qb, %kb : (!fusec.tensor<[128, 64], f32>, !fusec.tensor<[128, 64], f32>) -> !fusec.tensor<[128, 64], f32>
    fusec.output %s : !fusec.tensor<[128, 64], f32>
  }
  // CHECK-LABEL: fusec.graph @biased
  // CHECK:      %[[P:.*]] = fusec.extern "aten.mm.default"
  // CHECK-NEXT: %[[B:.*]] = fusec.cat %bq, %bk dim 0 : {{.*}} -> !fusec.tensor<[128], f32>
  // CHECK-NEXT: %[[S:.*]] = fusec.pointwise "add" %[[P]], %[[B]] : {{.*}} -> !fusec.tensor<[128, 128], f32>
  // CHECK-NEXT: %[[Q:.*]] = fusec.slice %[[S]] dim 1 start 0
  // CHECK-NEXT: %[[K:.*]] = fusec.slice %[[S]] dim 1 start 64
  // CHECK-NEXT: fusec.pointwise "mul" %[[Q]], %[[K]]

  // A backward: weight gradients dy_i.t() @ x from one input (stacked: the gradients are concatenated along their
  // columns, before the transpose), and the input's gradient sum dy_1 @ w_1 + dy_2 @ w_2 (+ a residual term),
  // through reshapes: one product on the same concatenated gradients.
  fusec.graph @backward(%x : !fusec.tensor<[128, 64], bf16>, %dy1 : !fusec.tensor<[128, 64], bf16>, %dy2 : !fusec.tensor<[128, 32], bf16>, %w1 : !fusec.tensor<[64, 64], bf16>, %w2 : !fusec.tensor<[32, 64], bf16>, %r : !fusec.tensor<[2, 64, 64], bf16>) -> (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[32, 64], bf16>, !fusec.tensor<[2, 64, 64], bf16>) {
    %t1 = fusec.permute %dy1 [1, 0] : !fusec.tensor<[128, 64], bf16> -> !fusec.tensor<[64, 128], bf16, strides [1, 64]>
    %g1 = fusec.extern "aten.mm.default"(%t1, %x) : (!fusec.tensor<[64, 128], bf16, strides [1, 64]>, !fusec.tensor<[128, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    %d1 = fusec.extern "aten.mm.default"(%dy1, %w1) : (!fusec.tensor<[128, 64], bf16>, !fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[128, 64], bf16>
    %e1 = fusec.reshape %d1 : !fusec.tensor<[128, 64], bf16> -> !fusec.tensor<[2, 64, 64], bf16>
    %t2 = fusec.permute %dy2 [1, 0] : !fusec.tensor<[128, 32], bf16> -> !fusec.tensor<[32, 128], bf16, strides [1, 32]>
    %g2 = fusec.extern "aten.mm.default"(%t2, %x) : (!fusec.tensor<[32, 128], bf16, strides [1, 32]>, !fusec.tensor<[128, 64], bf16>) -> !fusec.tensor<[32, 64], bf16>
    %d2 = fusec.extern "aten.mm.default"(%dy2, %w2) : (!fusec.tensor<[128, 32], bf16>, !fusec.tensor<[32, 64], bf16>) -> !fusec.tensor<[128, 64], bf16>
    %e2 = fusec.reshape %d2 : !fusec.tensor<[128, 64], bf16> -> !fusec.tensor<[2, 64, 64], bf16>
    %s1 = fusec.pointwise "add" %e1, %r : (!fusec.tensor<[2, 64, 64], bf16>, !fusec.tensor<[2, 64, 64], bf16>) -> !fusec.tensor<[2, 64, 64], bf16>
    %s2 = fusec.pointwise "add" %s1, %e2 : (!fusec.tensor<[2, 64, 64], bf16>, !fusec.tensor<[2, 64, 64], bf16>) -> !fusec.tensor<[2, 64, 64], bf16>
    fusec.output %g1, %g2, %s2 : !fusec.tensor<[64, 64], bf16>, !fusec.tensor<[32, 64], bf16>, !fusec.tensor<[2, 64, 64], bf16>
  }
  // CHECK-LABEL: fusec.graph @backward
  // CHECK:      %[[DY:.*]] = fusec.cat %dy1, %dy2 dim 1 : {{.*}} -> !fusec.tensor<[128, 96], bf16>
  // CHECK-NEXT: %[[DYT:.*]] = fusec.permute %[[DY]] [1, 0]
  // CHECK-NEXT: %[[G:.*]] = fusec.extern "aten.mm.default"(%[[DYT]], %x) : {{.*}} -> !fusec.tensor<[96, 64], bf16>
  // CHECK-NEXT: %[[G1:.*]] = fusec.slice %[[G]] dim 0 start 0 step 1 : {{.*}} -> !fusec.tensor<[64, 64], bf16>
  // CHECK-NEXT: %[[G2:.*]] = fusec.slice %[[G]] dim 0 start 64 step 1 : {{.*}} -> !fusec.tensor<[32, 64], bf16>
  // CHECK:      %[[W:.*]] = fusec.cat %w1, %w2 dim 0 : {{.*}} -> !fusec.tensor<[96, 64], bf16>
  // CHECK-NEXT: %[[D:.*]] = fusec.extern "aten.mm.default"(%[[DY]], %[[W]]) : {{.*}} -> !fusec.tensor<[128, 64], bf16>
  // CHECK-NEXT: %[[E:.*]] = fusec.reshape %[[D]] : {{.*}} -> !fusec.tensor<[2, 64, 64], bf16>
  // CHECK-NEXT: %[[S:.*]] = fusec.pointwise "add" %[[E]], %r
  // CHECK-NEXT: fusec.output %[[G1]], %[[G2]], %[[S]]

  // Left apart: a matmul reading another's product, and products too large for the calls' fixed time to matter
  // against copying 100 MB of weights.
  fusec.graph @kept(%x : !fusec.tensor<[64, 64], bf16>, %w : !fusec.tensor<[64, 64], bf16>, %big : !fusec.tensor<[4096, 4096], bf16>, %w1 : !fusec.tensor<[4096, 4096], bf16>, %w2 : !fusec.tensor<[4096, 4096], bf16>) -> (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[4096, 4096], bf16>) {
    %a = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    %b = fusec.extern "aten.mm.default"(%x, %a) : (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    %p = fusec.extern "aten.mm.default"(%big, %w1) : (!fusec.tensor<[4096, 4096], bf16>, !fusec.tensor<[4096, 4096], bf16>) -> !fusec.tensor<[4096, 4096], bf16>
    %q = fusec.extern "aten.mm.default"(%big, %w2) : (!fusec.tensor<[4096, 4096], bf16>, !fusec.tensor<[4096, 4096], bf16>) -> !fusec.tensor<[4096, 4096], bf16>
    %s = fusec.pointwise "add" %p, %q : (!fusec.tensor<[4096, 4096], bf16>, !fusec.tensor<[4096, 4096], bf16>) -> !fusec.tensor<[4096, 4096], bf16>
    fusec.output %b, %s : !fusec.tensor<[64, 64], bf16>, !fusec.tensor<[4096, 4096], bf16>
  }
  // CHECK-LABEL: fusec.graph @kept
  // CHECK-COUNT-4: fusec.extern "aten.mm.default"
  // CHECK-NOT:  fusec.cat

  // SwiGLU's gate and up projections at 1024 tokens (sigmoid for silu): merged where the product reads them; left apart where the
  // graph also returns them (a training forward saves them for the backward), as each slice would be copied.
  fusec.graph @swiglu(%x : !fusec.tensor<[1024, 512], bf16>, %wg : !fusec.tensor<[512, 1376], bf16>, %wu : !fusec.tensor<[512, 1376], bf16>) -> (!fusec.tensor<[1024, 1376], bf16>) {
    %g = fusec.extern "aten.mm.default"(%x, %wg) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %u = fusec.extern "aten.mm.default"(%x, %wu) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %s = fusec.pointwise "sigmoid" %g : (!fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %h = fusec.pointwise "mul" %s, %u : (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    fusec.output %h : !fusec.tensor<[1024, 1376], bf16>
  }
  // CHECK-LABEL: fusec.graph @swiglu
  // CHECK-COUNT-1: fusec.extern "aten.mm.default"
  // CHECK-NOT:  fusec.extern "aten.mm.default"
  fusec.graph @swiglu_saved(%x : !fusec.tensor<[1024, 512], bf16>, %wg : !fusec.tensor<[512, 1376], bf16>, %wu : !fusec.tensor<[512, 1376], bf16>) -> (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) {
    %g = fusec.extern "aten.mm.default"(%x, %wg) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %u = fusec.extern "aten.mm.default"(%x, %wu) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %s = fusec.pointwise "sigmoid" %g : (!fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %h = fusec.pointwise "mul" %s, %u : (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    fusec.output %h, %g, %u : !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>
  }
  // CHECK-LABEL: fusec.graph @swiglu_saved
  // CHECK-COUNT-2: fusec.extern "aten.mm.default"
  // CHECK-NOT:  fusec.cat

  // A training forward (fusec.saved_outputs = 1: outputs from the second on are saved for the backward) hands its
  // saved gate and up on as the merged product's column slices: their strides are static, the backend reports them
  // to AOTAutograd, and no copy is counted or made.
  fusec.graph @swiglu_saved_strided(%x : !fusec.tensor<[1024, 512], bf16>, %wg : !fusec.tensor<[512, 1376], bf16>, %wu : !fusec.tensor<[512, 1376], bf16>) -> (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) attributes {fusec.saved_outputs = 1 : i64} {
    %g = fusec.extern "aten.mm.default"(%x, %wg) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %u = fusec.extern "aten.mm.default"(%x, %wu) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %s = fusec.pointwise "sigmoid" %g : (!fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %h = fusec.pointwise "mul" %s, %u : (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    fusec.output %h, %g, %u : !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>
  }
  // CHECK-LABEL: fusec.graph @swiglu_saved_strided
  // CHECK-SAME:  -> (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16, strides [2752, 1]>, !fusec.tensor<[1024, 1376], bf16, strides [2752, 1]>)
  // CHECK:       %[[P:.*]] = fusec.extern "aten.mm.default"
  // CHECK-NEXT:  %[[G:.*]] = fusec.slice %[[P]] dim 1 start 0 step 1
  // CHECK-NEXT:  %[[U:.*]] = fusec.slice %[[P]] dim 1 start 1376 step 1
  // CHECK-NOT:   "identity"
  // CHECK:       fusec.output %{{.*}}, %[[G]], %[[U]]

  // ... but a saved projection that a torch kernel other than a matmul reads (an attention's query: its backward
  // would copy a strided operand) is handed on dense, and its copy counted: here they stay apart.
  fusec.graph @saved_read_by_torch(%x : !fusec.tensor<[1024, 512], bf16>, %wq : !fusec.tensor<[512, 1376], bf16>, %wk : !fusec.tensor<[512, 1376], bf16>) -> (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) attributes {fusec.saved_outputs = 1 : i64} {
    %q = fusec.extern "aten.mm.default"(%x, %wq) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %k = fusec.extern "aten.mm.default"(%x, %wk) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %a = fusec.extern "aten.abs.default"(%q) : (!fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    %h = fusec.pointwise "mul" %a, %k : (!fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>) -> !fusec.tensor<[1024, 1376], bf16>
    fusec.output %h, %q, %k : !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>, !fusec.tensor<[1024, 1376], bf16>
  }
  // CHECK-LABEL: fusec.graph @saved_read_by_torch
  // CHECK-COUNT-2: fusec.extern "aten.mm.default"
  // CHECK-NOT:  fusec.cat

  // Left apart: merging would move a draw of random numbers (it reads the first product) after the second
  // projection's, which may draw its own: each draw would get other numbers than eager's.
  fusec.graph @random(%x : !fusec.tensor<[64, 64], bf16>, %w1 : !fusec.tensor<[64, 64], bf16>, %w2 : !fusec.tensor<[64, 64], bf16>) -> (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>) {
    %a = fusec.extern "aten.mm.default"(%x, %w1) : (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    %r = fusec.extern "aten.rand_like.default"(%a) : (!fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    %b = fusec.extern "aten.mm.default"(%x, %w2) : (!fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>) -> !fusec.tensor<[64, 64], bf16>
    fusec.output %r, %b : !fusec.tensor<[64, 64], bf16>, !fusec.tensor<[64, 64], bf16>
  }
  // CHECK-LABEL: fusec.graph @random
  // CHECK-COUNT-2: fusec.extern "aten.mm.default"
  // CHECK-NOT:  fusec.cat
}

// REMARK: merged-matmuls: 3 matmuls with one left operand ([128, 64] @ [64, 64]; [128, 64] @ [64, 32]; [128, 64] @ [64, 32]) run as one call
// REMARK: merged-matmuls: 2 matmuls with one left operand and row biases
// REMARK: merged-matmuls: 2 matmuls with one right operand
// REMARK: merged-matmuls: 2 matmuls with summed products
// REMARK: merge-dependent: 1 of 2 matmuls with one left operand read another's product (through other ops): they stay apart
// REMARK: merge-unprofitable: 2 matmuls with one left operand ([4096, 4096] @ [4096, 4096]; [4096, 4096] @ [4096, 4096]): one call would save ~2.5 µs, its operands' copies cost ~{{.*}} µs; they stay apart
// REMARK: merge-unprofitable: 2 matmuls with summed products
// REMARK: merged-matmuls: 2 matmuls with one left operand ([1024, 512] @ [512, 1376]; [1024, 512] @ [512, 1376]) run as one call on concatenated operands (~2.5 µs saved, ~1.9 µs of copies)
// REMARK: merge-unprofitable: 2 matmuls with one left operand ([1024, 512] @ [512, 1376]; [1024, 512] @ [512, 1376]): one call would save ~2.5 µs, its operands' copies cost ~5.6 µs, 2 of them slices copied dense for outputs or views; they stay apart
// REMARK: merged-matmuls: 2 matmuls with one left operand ([1024, 512] @ [512, 1376]; [1024, 512] @ [512, 1376]) run as one call on concatenated operands (~2.5 µs saved, ~1.9 µs of copies)
// REMARK: merge-unprofitable: 2 matmuls with one left operand ([1024, 512] @ [512, 1376]; [1024, 512] @ [512, 1376]): one call would save ~2.5 µs, its operands' copies cost ~3.8 µs, 1 of them slices copied dense for outputs or views; they stay apart
// REMARK: merge-reorders-random: 2 matmuls with one left operand: merging them would move aten.rand_like.default (it reads an earlier one's product) after the later ones' random numbers; they stay apart

// Without when=always, a graph the IR does not mark as on an accelerator keeps its matmuls.
// UNMARKED-LABEL: fusec.graph @projections
// UNMARKED-COUNT-3: aten.mm.default
