// Invalid IR: each chunk fails with one clear message naming the file, the op and, for
// parse errors, line:col with a caret.
// RUN: not fusec-opt --split-input-file %s 2>&1 | filecheck %s

// Wrong operand count.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %t = fusec.pointwise "add" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %t : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:3: input IR does not verify: fusec.pointwise "add": expected 2 operands, got 1
// CHECK-NEXT: %t = fusec.pointwise "add" %a

// -----

// Shapes that do not broadcast.
fusec.graph @g(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[3], f32>) -> (!fusec.tensor<[s0, 512], f32>) symbols(s0 in [1, inf]) {
  %t = fusec.pointwise "add" %a, %b : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[3], f32>) -> !fusec.tensor<[s0, 512], f32>
  fusec.output %t : !fusec.tensor<[s0, 512], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.pointwise "add": operand shapes [s0, 512] and [3] do not broadcast

// -----

// A result shape that differs from the one the op computes.
fusec.graph @g(%a : !fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0, 512], f32>) symbols(s0 in [1, inf]) {
  %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[512], f32>
  fusec.output %a : !fusec.tensor<[s0, 512], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.reduce: result: expected shape [s0], got [512]

// -----

// Mismatched dtypes: a view cannot change the element type.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[16], f16>) {
  %r = fusec.reshape %a : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[16], f16>
  fusec.output %r : !fusec.tensor<[16], f16>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.reshape: element type changes from f32 to f16

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
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.graph: size symbol 's1' in !fusec.tensor<[s0, s1], f32> is not declared by fusec.graph @g

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
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @pointwise_only: fusec.load uses r in a kernel without a reduction domain

// -----

// A storage plan (reuse-buffers' fusec.storage) with more entries than the kernel has results.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @two_storages [4] (%a) {fusec.storage = array<i64: 0, 1>} : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @two_storages: fusec.storage must be an array<i64> with a storage (or -1) per result

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
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: unknown operation 'fusec.bogus'

// -----

// Verifier: an extern whose arguments hold fewer operand places than it has operands.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = "fusec.extern"(%a) <{target = "aten.neg.default", args = [], kwargs = {}}> : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.extern "aten.neg.default": its arguments hold 0 tensor operands, but it has 1

// -----

// Verifier: more result positions than results.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = fusec.extern "aten.aminmax.default"(%a) results [0, 1] : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.extern "aten.aminmax.default": 'results' gives 2 positions for 1 results

// -----

// Parse error: an unknown torch constant in an extern's arguments.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %e = fusec.extern "aten.clone.default"(%a, memory_format = torch.sideways) : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %e : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:{{[0-9]+}}: unknown torch constant 'torch.sideways'

// -----

// Verifier: a float literal for an integer type.
fusec.graph @g() -> (!fusec.tensor<[], i64>) {
  %c = fusec.constant 0.5 : !fusec.tensor<[], i64>
  fusec.output %c : !fusec.tensor<[], i64>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.constant: float literal 0.5 for integer type i64

// -----

// Verifier: x outside a kernel.
fusec.graph @g() -> (!fusec.tensor<[], i64>) {
  %n = fusec.symbolic x + 1 : !fusec.tensor<[], i64>
  fusec.output %n : !fusec.tensor<[], i64>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.symbolic: x and r are only defined inside a fusec.kernel

// -----

// Verifier: a reshape that changes the element count.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[15], f32>) {
  %r = fusec.reshape %a : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[15], f32>
  fusec.output %r : !fusec.tensor<[15], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.reshape: element count 16 != 15

// -----

// Verifier: not a permutation.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[8, 8], f32>) {
  %p = fusec.permute %a [1, 1] : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[8, 8], f32>
  fusec.output %p : !fusec.tensor<[8, 8], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.permute: [1, 1] is not a permutation of 2 dims

// -----

// Verifier: expanding a dim that is not 1.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[4, 8], f32>) {
  %e = fusec.expand %a : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[4, 8], f32>
  fusec.output %e : !fusec.tensor<[4, 8], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.expand: dim 2 cannot expand to 4

// -----

// Verifier: a slice with step 0.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>) -> (!fusec.tensor<[2, 4], f32>) {
  %s = fusec.slice %a dim 1 start 0 step 0 : !fusec.tensor<[2, 8], f32> -> !fusec.tensor<[2, 4], f32>
  fusec.output %s : !fusec.tensor<[2, 4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.slice: step must be positive

// -----

// Verifier: a cat whose result is not as long as its inputs together.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>, %b : !fusec.tensor<[3, 8], f32>) -> (!fusec.tensor<[4, 8], f32>) {
  %c = fusec.cat %a, %b dim 0 : (!fusec.tensor<[2, 8], f32>, !fusec.tensor<[3, 8], f32>) -> !fusec.tensor<[4, 8], f32>
  fusec.output %c : !fusec.tensor<[4, 8], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.cat: the cat dim: expected shape [5], got [4]

// -----

// Verifier: a float index.
fusec.graph @g(%a : !fusec.tensor<[8], f32>, %i : !fusec.tensor<[3], f32>) -> (!fusec.tensor<[3], f32>) {
  %x = fusec.index %a[%i] dim 0 : !fusec.tensor<[8], f32>, !fusec.tensor<[3], f32> -> !fusec.tensor<[3], f32>
  fusec.output %x : !fusec.tensor<[3], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.index: index must be i64 or i32

// -----

// Verifier: a gather index of another rank.
fusec.graph @g(%a : !fusec.tensor<[2, 8], f32>, %i : !fusec.tensor<[3], i64>) -> (!fusec.tensor<[3], f32>) {
  %x = fusec.gather %a[%i] dim 1 : !fusec.tensor<[2, 8], f32>, !fusec.tensor<[3], i64> -> !fusec.tensor<[3], f32>
  fusec.output %x : !fusec.tensor<[3], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.gather: index must have the input's rank, dim in range

// -----

// Verifier: an argmax over r that gives a float.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %i = fusec.reduce_r "argmax" %v : f32 -> f32
    fusec.store %i, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.reduce_r "argmax": result must be i64, got f32

// -----

// Verifier: a combo whose kernels depend on each other.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %c = fusec.combo @c : (!fusec.tensor<[4], f32>) {
    %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
    ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
      %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
      fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
    }
    %m = fusec.kernel @m [4] (%k) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
    ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
      %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
      fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
    }
    fusec.output %m : !fusec.tensor<[4], f32>
  }
  fusec.output %c : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.combo @c: kernel @m depends on another kernel of the combo

// -----

// Parse error: a load from a buffer that is not a tensor.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x] : f32
    fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 5]]:30: fusec.load: the buffer type must be a !fusec.tensor

// -----

// Parse error: a mask that is not i1.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] mask %v : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 4]]:34: operand is used with type i1, but has been previously used or defined with type f32

// -----

// A size fact over a symbol the graph does not declare.
fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) facts(s2*s1 = s0) {
  fusec.output %a : !fusec.tensor<[s0, s1], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.graph @g: size fact s1*s2 = s0 uses s2, not declared

// -----

// A size fact that rewrites a constant.
fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) facts(4 = s0*s1) {
  fusec.output %a : !fusec.tensor<[s0, s1], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.graph @g: size fact 4 = s0*s1 rewrites a constant

// -----

// Parse error: a size fact without its right side.
fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) facts(s0) {
  fusec.output %a : !fusec.tensor<[s0], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:[[# @LINE - 3]]:{{[0-9]+}}: Expected '='
