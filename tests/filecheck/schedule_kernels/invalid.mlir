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
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: expected outer, max_rblock, persistent_up_to, per_thread, or a matmul's tile

// -----

// A limit on elements a thread holds that is not a power of 2.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(persistent, int32, per_thread = 3) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}per_thread must be a power of 2 of at least 1, and not on a matmul schedule

// -----

// A matmul schedule on a kernel that is not a matmul kernel.
fusec.graph @g(%a : !fusec.tensor<[32, 16], f32>, %b : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  %k = fusec.kernel @k [1024, 16] schedule(matmul, int32, tile = [32, 32, 16], warps = 4, stages = 2, group_m = 8) (%a, %b) : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  ^bb0(%a0 : !fusec.tensor<[32, 16], f32>, %b0 : !fusec.tensor<[16, 32], f32>, %out : !fusec.tensor<[32, 32], f32>):
    %a1 = fusec.load %a0[r + 16*floordiv(x, 32)] : !fusec.tensor<[32, 16], f32>
    %b1 = fusec.load %b0[32*r + mod(x, 32)] : !fusec.tensor<[16, 32], f32>
    %p = fusec.pointwise "mul" %a1, %b1 : (f32, f32) -> f32
    %s = fusec.reduce_r "sum" %p : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[32, 32], f32>
  }
  fusec.output %k : !fusec.tensor<[32, 32], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: the matmul schedule is for, and only for, a matmul kernel

// -----

// A matmul kernel with a reduction's schedule.
fusec.graph @g(%a : !fusec.tensor<[32, 16], f32>, %b : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  %k = fusec.kernel @k [1024, 16] matmul [1, 32, 32] schedule(persistent, int32) (%a, %b) : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  ^bb0(%a0 : !fusec.tensor<[32, 16], f32>, %b0 : !fusec.tensor<[16, 32], f32>, %out : !fusec.tensor<[32, 32], f32>):
    %a1 = fusec.load %a0[r + 16*floordiv(x, 32)] : !fusec.tensor<[32, 16], f32>
    %b1 = fusec.load %b0[32*r + mod(x, 32)] : !fusec.tensor<[16, 32], f32>
    %p = fusec.pointwise "mul" %a1, %b1 : (f32, f32) -> f32
    %s = fusec.reduce_r "sum" %p : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[32, 32], f32>
  }
  fusec.output %k : !fusec.tensor<[32, 32], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: the matmul schedule is for, and only for, a matmul kernel

// -----

// A tile tl.dot cannot take.
fusec.graph @g(%a : !fusec.tensor<[32, 16], f32>, %b : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  %k = fusec.kernel @k [1024, 16] matmul [1, 32, 32] schedule(matmul, int32, tile = [32, 8, 16], warps = 4, stages = 2, group_m = 8) (%a, %b) : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  ^bb0(%a0 : !fusec.tensor<[32, 16], f32>, %b0 : !fusec.tensor<[16, 32], f32>, %out : !fusec.tensor<[32, 32], f32>):
    %a1 = fusec.load %a0[r + 16*floordiv(x, 32)] : !fusec.tensor<[32, 16], f32>
    %b1 = fusec.load %b0[32*r + mod(x, 32)] : !fusec.tensor<[16, 32], f32>
    %p = fusec.pointwise "mul" %a1, %b1 : (f32, f32) -> f32
    %s = fusec.reduce_r "sum" %p : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[32, 32], f32>
  }
  fusec.output %k : !fusec.tensor<[32, 32], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: a matmul's tile sizes must be powers of 2 of at least 16 (tl.dot)

// -----

// A matmul's sizes that do not multiply to its x.
fusec.graph @g(%a : !fusec.tensor<[32, 16], f32>, %b : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  %k = fusec.kernel @k [1024, 16] matmul [1, 32, 16] (%a, %b) : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  ^bb0(%a0 : !fusec.tensor<[32, 16], f32>, %b0 : !fusec.tensor<[16, 32], f32>, %out : !fusec.tensor<[32, 32], f32>):
    %a1 = fusec.load %a0[r + 16*floordiv(x, 32)] : !fusec.tensor<[32, 16], f32>
    %b1 = fusec.load %b0[32*r + mod(x, 32)] : !fusec.tensor<[16, 32], f32>
    %p = fusec.pointwise "mul" %a1, %b1 : (f32, f32) -> f32
    %s = fusec.reduce_r "sum" %p : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[32, 32], f32>
  }
  fusec.output %k : !fusec.tensor<[32, 32], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: a matmul kernel's xnumel must be B*M*N of its matmul [B, M, N]

// -----

// Tiles without warps.
fusec.graph @g(%a : !fusec.tensor<[32, 16], f32>, %b : !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  %k = fusec.kernel @k [1024, 16] matmul [1, 32, 32] schedule(matmul, int32, tile = [32, 32, 16]) (%a, %b) : (!fusec.tensor<[32, 16], f32>, !fusec.tensor<[16, 32], f32>) -> (!fusec.tensor<[32, 32], f32>) {
  ^bb0(%a0 : !fusec.tensor<[32, 16], f32>, %b0 : !fusec.tensor<[16, 32], f32>, %out : !fusec.tensor<[32, 32], f32>):
    %a1 = fusec.load %a0[r + 16*floordiv(x, 32)] : !fusec.tensor<[32, 16], f32>
    %b1 = fusec.load %b0[32*r + mod(x, 32)] : !fusec.tensor<[16, 32], f32>
    %p = fusec.pointwise "mul" %a1, %b1 : (f32, f32) -> f32
    %s = fusec.reduce_r "sum" %p : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[32, 32], f32>
  }
  fusec.output %k : !fusec.tensor<[32, 32], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: a matmul schedule needs tile, warps, stages and group_m

// -----

// Warps without a matmul's tiles on a schedule that is not a looped outer reduction's.
fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  %k = fusec.kernel @k [4, 8] schedule(persistent, int32, warps = 2) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
  }
  fusec.output %k : !fusec.tensor<[4], f32>
}
// CHECK: fusec-opt: error: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: input IR does not verify: fusec.kernel @k: warps without a matmul's tiles belong to a looped outer schedule, a power of 2 from 1 to 16

