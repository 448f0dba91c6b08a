// Invalid tiled kernels: a tiled kernel is pointwise over a 2-D domain.
// RUN: not fusec-opt --split-input-file %s 2>&1 | filecheck %s

// A tiled kernel over a 1-D domain.
fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %k = fusec.kernel @k [s0] tiled (%a) : (!fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) {
  ^bb0(%in : !fusec.tensor<[s0], f32>, %out : !fusec.tensor<[s0], f32>):
    %v = fusec.load %in[x] : !fusec.tensor<[s0], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[s0], f32>
  }
  fusec.output %k : !fusec.tensor<[s0], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid-tiled.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: a tiled kernel has a 2-D domain [xnumel, rnumel]

// -----

// A reduction in a tiled kernel.
fusec.graph @g(%a : !fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %k = fusec.kernel @k [s0, 8] tiled (%a) : (!fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[s0], f32>) {
  ^bb0(%in : !fusec.tensor<[s0, 8], f32>, %out : !fusec.tensor<[s0], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[s0, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[s0], f32>
  }
  fusec.output %k : !fusec.tensor<[s0], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid-tiled.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: fusec.reduce_r in a tiled (pointwise) kernel
