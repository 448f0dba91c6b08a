// Invalid IR: each chunk fails with one clear message naming the file, the op and, for
// parse errors, line:col with a caret.
// RUN: not fusec-opt --split-input-file %s 2>&1 | filecheck %s

// Wrong operand count.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %t = fusec.pointwise "add" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %t : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.pointwise "add": expected 2 operands, got 1
// CHECK-NEXT: at: %t = fusec.pointwise "add" %a

// -----

// Shapes that do not broadcast.
fusec.graph @g(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[3], f32>) -> (!fusec.tensor<[s0, 512], f32>) symbols(s0 in [1, inf]) {
  %t = fusec.pointwise "add" %a, %b : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[3], f32>) -> !fusec.tensor<[s0, 512], f32>
  fusec.output %t : !fusec.tensor<[s0, 512], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.pointwise "add": operand shapes [s0, 512] and [3] do not broadcast

// -----

// A result shape that differs from the one the op computes.
fusec.graph @g(%a : !fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0, 512], f32>) symbols(s0 in [1, inf]) {
  %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[512], f32>
  fusec.output %a : !fusec.tensor<[s0, 512], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.reduce: result: expected shape [s0], got [512]

// -----

// Mismatched dtypes: a view cannot change the element type.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[16], f16>) {
  %r = fusec.reshape %a : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[16], f16>
  fusec.output %r : !fusec.tensor<[16], f16>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.reshape: element type changes from f32 to f16

// -----

// Mismatched dtypes: a stored value must have the buffer's element type.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f16>) {
  %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f16>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f16>):
    %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[4], f16>
  }
  fusec.output %k : !fusec.tensor<[4], f16>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 4]]:17: operand is used with type f16, but has been previously used or defined with type f32

// -----

// A size symbol the graph does not declare.
fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf]) {
  fusec.output %a : !fusec.tensor<[s0, s1], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.graph: size symbol 's1' in !fusec.tensor<[s0, s1], f32> is not declared by fusec.graph @g

// -----

// r in a kernel without a reduction domain.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @pointwise_only [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[r] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.kernel @pointwise_only: fusec.load uses r in a kernel without a reduction domain

// -----

// Parse error: a misspelt keyword, with line:col and a caret.
fusec.graph @g(%a : !fusec.tensor<[4, 4], f32>) -> (!fusec.tensor<[4], f32>) {
  %s = fusec.reduce "sum" %a dimz [1] : !fusec.tensor<[4, 4], f32> -> !fusec.tensor<[4], f32>
  fusec.output %s : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:30: Expected 'dims'
// CHECK-NEXT: %s = fusec.reduce "sum" %a dimz [1]
// CHECK-NEXT: {{^ +\^\^\^\^$}}

// -----

// Parse error: an index expression cut short.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x +] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 5]]:28: expected an integer expression

// -----

// Parse error: a tensor type with fewer strides than dims.
fusec.graph @g(%a : !fusec.tensor<[4, 4], f32, strides [1]>) -> () {
  fusec.output
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:{{[0-9]+}}: 1 strides given for a tensor of rank 2

// -----

// Parse error: an op that does not exist.
fusec.graph @g() -> () {
  fusec.bogus
  fusec.output
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: Operation fusec.bogus is not registered

// -----

// Verifier: an extern whose arguments hold fewer operand places than it has operands.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = "fusec.extern"(%a) <{target = "aten.neg.default", args = [], kwargs = {}}> : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.extern "aten.neg.default": its arguments hold 0 tensor operands, but it has 1

// -----

// Verifier: more result positions than results.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = fusec.extern "aten.aminmax.default"(%a) results [0, 1] : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir: input IR does not verify: fusec.extern "aten.aminmax.default": 'results' gives 2 positions for 1 results

// -----

// Parse error: an unknown torch constant in an extern's arguments.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = fusec.extern "aten.clone.default"(%a, memory_format = torch.sideways) : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:{{[0-9]+}}: unknown torch constant 'torch.sideways'
