// RUN: fusec-opt %s -p "pad-matmuls{cost-rule=false}" | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls{cost-rule=false}" | fusec-opt | filecheck %s --check-prefix=ROUNDTRIP

// The importer's device mark prints with the graph, so replaying a dump of a GPU graph pads it as the
// backend did (the default when=accelerator); the graph without the mark is left alone.
builtin.module {
  fusec.graph @on_gpu(%x : !fusec.tensor<[8, 64], bf16>, %w : !fusec.tensor<[64, 1001], bf16>) -> (!fusec.tensor<[8, 1001], bf16>) attributes {fusec.device = "cuda"} {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], bf16>, !fusec.tensor<[64, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    fusec.output %r : !fusec.tensor<[8, 1001], bf16>
  }
  fusec.graph @unmarked(%x : !fusec.tensor<[8, 64], bf16>, %w : !fusec.tensor<[64, 1001], bf16>) -> (!fusec.tensor<[8, 1001], bf16>) {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], bf16>, !fusec.tensor<[64, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], bf16>) -> !fusec.tensor<[8, 1001], bf16>
    fusec.output %r : !fusec.tensor<[8, 1001], bf16>
  }
}

// CHECK-LABEL: fusec.graph @on_gpu
// CHECK-SAME:  attributes {fusec.device = "cuda"}
// CHECK:       fusec.cat %w
// CHECK:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[8, 1008], bf16>
// CHECK-LABEL: fusec.graph @unmarked
// CHECK-NOT:   fusec.cat
// CHECK:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[8, 1001], bf16>

// ROUNDTRIP: fusec.graph @on_gpu{{.*}} attributes {fusec.device = "cuda"} {
