// RUN: fusec-opt %s -p "bias-epilogues" | filecheck %s
// RUN: fusec-opt %s -p "bias-epilogues" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s --default-pipeline | filecheck %s --check-prefix=PIPELINE

// A matmul's bias add that only library calls and graph outputs read runs in cuBLAS's epilogue (addmm);
// one that a kernel would fuse (a GELU after it), or over a product something else reads, stays an add.
builtin.module {
  // An LM head's logits, and attention's projections (a view, then a library call).
  fusec.graph @unfused(%x : !fusec.tensor<[64, 32], f32>, %w : !fusec.tensor<[32, 96], f32>, %b : !fusec.tensor<[96], f32>, %w2 : !fusec.tensor<[32, 16], f32>, %b2 : !fusec.tensor<[1, 16], f32>) -> (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[16, 16], f32>) {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %logits = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[96], f32>) -> !fusec.tensor<[64, 96], f32>
    %q = fusec.extern "aten.mm.default"(%x, %w2) : (!fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 16], f32>) -> !fusec.tensor<[64, 16], f32>
    %qb = fusec.pointwise "add" %b2, %q : (!fusec.tensor<[1, 16], f32>, !fusec.tensor<[64, 16], f32>) -> !fusec.tensor<[64, 16], f32>
    %qt = fusec.permute %qb [1, 0] : !fusec.tensor<[64, 16], f32> -> !fusec.tensor<[16, 64], f32, strides [1, 16]>
    %s = fusec.extern "aten.mm.default"(%qt, %qb) : (!fusec.tensor<[16, 64], f32, strides [1, 16]>, !fusec.tensor<[64, 16], f32>) -> !fusec.tensor<[16, 16], f32>
    fusec.output %logits, %s : !fusec.tensor<[64, 96], f32>, !fusec.tensor<[16, 16], f32>
  }
  // Left as they are: an add a kernel fuses with, a product read twice, a bias per element.
  fusec.graph @kept(%x : !fusec.tensor<[64, 32], f32>, %w : !fusec.tensor<[32, 96], f32>, %b : !fusec.tensor<[96], f32>, %full : !fusec.tensor<[64, 96], f32>) -> (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>) {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[96], f32>) -> !fusec.tensor<[64, 96], f32>
    %g = fusec.pointwise "tanh" %h : (!fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %p2 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %h2 = fusec.pointwise "add" %p2, %b : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[96], f32>) -> !fusec.tensor<[64, 96], f32>
    %twice = fusec.pointwise "add" %h2, %p2 : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %p3 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %h3 = fusec.pointwise "add" %p3, %full : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    fusec.output %g, %twice, %h3 : !fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>
  }
}

// CHECK-LABEL: fusec.graph @unfused
// CHECK:       %logits = fusec.extern "aten.addmm.default"(%b, %x, %w) : (!fusec.tensor<[96], f32>, !fusec.tensor<[64, 32], f32>, !fusec.tensor<[32, 96], f32>) -> !fusec.tensor<[64, 96], f32>
// CHECK:       %qb = fusec.extern "aten.addmm.default"(%b2, %x, %w2)
// CHECK-NOT:   fusec.pointwise "add"
// CHECK-LABEL: fusec.graph @kept
// CHECK-NOT:   aten.addmm
// CHECK:       %h = fusec.pointwise "add" %p, %b
// CHECK:       %h2 = fusec.pointwise "add" %p2, %b
// CHECK:       %h3 = fusec.pointwise "add" %p3, %full

// REMARK:     bias-epilogues: bias-epilogue: aten.mm.default + bias add -> aten.addmm.default: the sum goes only to the graph output, where no kernel would fuse the add
// REMARK-NEXT: bias-epilogues: bias-epilogue: aten.mm.default + bias add -> aten.addmm.default: the sum goes only to aten.mm.default,
// REMARK-NOT: bias-epilogue

// The whole pipeline: @unfused runs no kernel at all.
// PIPELINE-LABEL: fusec.graph @unfused
// PIPELINE-NOT:   fusec.kernel
// PIPELINE:       fusec.output
