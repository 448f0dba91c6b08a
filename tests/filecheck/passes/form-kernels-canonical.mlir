// RUN: fusec-opt %s -p form-kernels | filecheck %s

// Canonical index arithmetic (issue 12.1): a view chain folded into a load prints as the
// plain access it is, on symbolic shapes too.

// [B, T, C] -> [B*T, C] -> [B, T*C] -> [B, T, C]: contiguous throughout.
// CHECK-LABEL: fusec.graph @reshape_round_trip
// CHECK:         fusec.load %0[x] : !fusec.tensor<[s0, s1, 32], f32>

// A permute, a flatten, its inverse: every element where it was.
// CHECK-LABEL: fusec.graph @permute_inverse
// CHECK:         fusec.load %0[x] : !fusec.tensor<[s0, 12, 16], f32>

// A row sum over [B*12, 128] of a [B, 12, 128] tensor: r + 128*x (it was
// 1536*floordiv(r + 128*x, 1536) + mod(r, 128) + 128*mod(x + floordiv(r, 128), 12)).
// CHECK-LABEL: fusec.graph @row_sum_through_view
// CHECK:         fusec.load %0[r + 128*x] : !fusec.tensor<[s0, 12, 128], f32>

builtin.module {
  fusec.graph @reshape_round_trip(%x : !fusec.tensor<[s0, s1, 32], f32>) -> (!fusec.tensor<[s0, s1, 32], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %f = fusec.reshape %x : !fusec.tensor<[s0, s1, 32], f32> -> !fusec.tensor<[s0*s1, 32], f32>
    %g = fusec.reshape %f : !fusec.tensor<[s0*s1, 32], f32> -> !fusec.tensor<[s0, 32*s1], f32>
    %h = fusec.reshape %g : !fusec.tensor<[s0, 32*s1], f32> -> !fusec.tensor<[s0, s1, 32], f32>
    %y = fusec.pointwise "neg" %h : (!fusec.tensor<[s0, s1, 32], f32>) -> !fusec.tensor<[s0, s1, 32], f32>
    fusec.output %y : !fusec.tensor<[s0, s1, 32], f32>
  }
  fusec.graph @permute_inverse(%x : !fusec.tensor<[s0, 12, 16], f32>) -> (!fusec.tensor<[s0, 12, 16], f32>) symbols(s0 in [1, inf]) {
    %p = fusec.permute %x [0, 2, 1] : !fusec.tensor<[s0, 12, 16], f32> -> !fusec.tensor<[s0, 16, 12], f32>
    %f = fusec.reshape %p : !fusec.tensor<[s0, 16, 12], f32> -> !fusec.tensor<[s0, 192], f32>
    %u = fusec.reshape %f : !fusec.tensor<[s0, 192], f32> -> !fusec.tensor<[s0, 16, 12], f32>
    %q = fusec.permute %u [0, 2, 1] : !fusec.tensor<[s0, 16, 12], f32> -> !fusec.tensor<[s0, 12, 16], f32>
    %y = fusec.pointwise "neg" %q : (!fusec.tensor<[s0, 12, 16], f32>) -> !fusec.tensor<[s0, 12, 16], f32>
    fusec.output %y : !fusec.tensor<[s0, 12, 16], f32>
  }
  fusec.graph @row_sum_through_view(%x : !fusec.tensor<[s0, 12, 128], f32>) -> (!fusec.tensor<[12*s0], f32>) symbols(s0 in [1, inf]) {
    %f = fusec.reshape %x : !fusec.tensor<[s0, 12, 128], f32> -> !fusec.tensor<[12*s0, 128], f32>
    %s = fusec.reduce "sum" %f dims [1] : !fusec.tensor<[12*s0, 128], f32> -> !fusec.tensor<[12*s0], f32>
    fusec.output %s : !fusec.tensor<[12*s0], f32>
  }
}
