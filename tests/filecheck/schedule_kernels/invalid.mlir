// Schedules that do not fit their kernel.
// RUN: not fusec-opt --split-input-file %s 2>&1 | filecheck %s

// A pointwise schedule on a reduction domain.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(pointwise, int32) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: the pointwise schedule is for, and only for, a 1-D domain

// -----

// A looped schedule without its max RBLOCK.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(looped, int32) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: a looped schedule, and only it, has a max_rblock

// -----

// An index type other than int32 or int64.
fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4] schedule(pointwise, int16) (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x] : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: index type must be int32 or int64, got 'int16'

// -----

// An RBLOCK that is not a power of 2.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(looped, int32, max_rblock = 6) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: max_rblock must be a power of 2 of at least 2, got 6

// -----

// A persistent form on a kernel that is persistent already.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(persistent, int32, persistent_up_to = 8) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: persistent_up_to (a positive rnumel) belongs to a looped schedule only

// -----

// A schedule entry fusec does not know.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(looped, int32, max_rblock = 8, unroll = 2) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: expected outer, max_rblock or persistent_up_to
