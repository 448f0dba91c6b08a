// RUN: fusec-opt %s -p form-kernels,tile-pointwise | filecheck %s
// RUN: fusec-opt %s -p form-kernels,tile-pointwise | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p form-kernels,tile-pointwise --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,tile-pointwise{broadcasts=false}" | filecheck %s --check-prefix=NOBCAST
// RUN: fusec-opt %s -p form-kernels,combo-grouping,tile-pointwise | filecheck %s --check-prefix=COMBO

// x.t() + y on symbolic sizes: flat, the load of x steps by s1 between neighbours.  Split
// by the output's last dim s0 (it divides xnumel = s0*s1), a tile reads x contiguous along
// its rows and y along its columns.
builtin.module {
  fusec.graph @transpose_add(%x : !fusec.tensor<[s0, s1], f32>, %y : !fusec.tensor<[s1, s0], f32>) -> (!fusec.tensor<[s1, s0], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {
    %t = fusec.permute %x [1, 0] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s1, s0], f32, strides [1, s1]>
    %s = fusec.pointwise "add" %t, %y : (!fusec.tensor<[s1, s0], f32, strides [1, s1]>, !fusec.tensor<[s1, s0], f32>) -> !fusec.tensor<[s1, s0], f32>
    fusec.output %s : !fusec.tensor<[s1, s0], f32>
  }

// CHECK-LABEL: fusec.graph @transpose_add
// CHECK:       %s = fusec.kernel @fusec_poi_add_1 [s1, s0] tiled (%x, %y)
// CHECK:         fusec.load %{{.*}}[r*s1 + x] : !fusec.tensor<[s0, s1], f32>
// CHECK-NEXT:    fusec.load %{{.*}}[r + x*s0] : !fusec.tensor<[s1, s0], f32>
// CHECK-NEXT:    fusec.pointwise "add"
// CHECK-NEXT:    fusec.store %{{.*}}, %{{.*}}[r + x*s0] : !fusec.tensor<[s1, s0], f32>

  // A batch of transposes (permute [0, 2, 1]): split by the last dim s0, the tile rows run
  // over (batch, s1) and the load is contiguous along them between batch boundaries.
  fusec.graph @batched_transpose(%x : !fusec.tensor<[4, s0, s1], f32>) -> (!fusec.tensor<[4, s1, s0], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {
    %t = fusec.permute %x [0, 2, 1] : !fusec.tensor<[4, s0, s1], f32> -> !fusec.tensor<[4, s1, s0], f32, strides [s0*s1, 1, s1]>
    %s = fusec.pointwise "neg" %t : (!fusec.tensor<[4, s1, s0], f32, strides [s0*s1, 1, s1]>) -> !fusec.tensor<[4, s1, s0], f32>
    fusec.output %s : !fusec.tensor<[4, s1, s0], f32>
  }

// CHECK-LABEL: fusec.graph @batched_transpose
// CHECK:       fusec.kernel @fusec_poi_neg_2 [4*s1, s0] tiled (%x)
// CHECK:         fusec.load %{{.*}}[r*s1 + s0*s1*floordiv(x, s1) + mod(x, s1)]
// CHECK:         fusec.store %{{.*}}, %{{.*}}[r + x*s0]

  // Broadcasts along either dim: no integer division per element left, the vector is
  // read once per tile column (w) or row (b).
  fusec.graph @broadcasts(%x : !fusec.tensor<[s0, 64], f32>, %w : !fusec.tensor<[64], f32>, %b : !fusec.tensor<[s0, 1], f32>) -> (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) symbols(s0 in [2, inf]) {
    %m = fusec.pointwise "mul" %x, %w : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %n = fusec.pointwise "mul" %x, %b : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %m, %n : !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>
  }

// CHECK-LABEL: fusec.graph @broadcasts
// CHECK:       %m = fusec.kernel @fusec_poi_mul_3 [s0, 64] tiled (%x, %w)
// CHECK:         fusec.load %{{.*}}[r + 64*x] : !fusec.tensor<[s0, 64], f32>
// CHECK-NEXT:    fusec.load %{{.*}}[r] : !fusec.tensor<[64], f32>
// CHECK:       %n = fusec.kernel @fusec_poi_mul_4 [s0, 64] tiled (%x, %b)
// CHECK:         fusec.load %{{.*}}[r + 64*x] : !fusec.tensor<[s0, 64], f32>
// CHECK-NEXT:    fusec.load %{{.*}}[x] : !fusec.tensor<[s0, 1], f32>

  // A permute that moves the contiguous dim of the input last ([1, 2, 0]) on static sizes:
  // split by 8, the load steps by 512 along r and by 1 along x.
  fusec.graph @rotate(%x : !fusec.tensor<[8, 16, 32], f32>) -> (!fusec.tensor<[16, 32, 8], f32>) {
    %t = fusec.permute %x [1, 2, 0] : !fusec.tensor<[8, 16, 32], f32> -> !fusec.tensor<[16, 32, 8], f32, strides [32, 1, 512]>
    %s = fusec.pointwise "neg" %t : (!fusec.tensor<[16, 32, 8], f32, strides [32, 1, 512]>) -> !fusec.tensor<[16, 32, 8], f32>
    fusec.output %s : !fusec.tensor<[16, 32, 8], f32>
  }

// CHECK-LABEL: fusec.graph @rotate
// CHECK:       fusec.kernel @fusec_poi_neg_5 [512, 8] tiled (%x)
// CHECK:         fusec.load %{{.*}}[512*r + x]
// CHECK:         fusec.store %{{.*}}, %{{.*}}[r + 8*x]

  // Contiguous operands of one shape: nothing to gain, left alone and no remark.
  fusec.graph @contiguous(%x : !fusec.tensor<[s0, 64], f32>, %y : !fusec.tensor<[s0, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>) symbols(s0 in [2, inf]) {
    %s = fusec.pointwise "add" %x, %y : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %s : !fusec.tensor<[s0, 64], f32>
  }

// CHECK-LABEL: fusec.graph @contiguous
// CHECK:       fusec.kernel @fusec_poi_add_6 [64*s0] (%x, %y)
// CHECK:         fusec.load %{{.*}}[x]

  // A strided load no split fixes: every other element of each row.
  fusec.graph @every_other(%x : !fusec.tensor<[s0, 2], f32>) -> (!fusec.tensor<[s0, 1], f32>) symbols(s0 in [2, inf]) {
    %t = fusec.slice %x dim 1 start 0 step 1 : !fusec.tensor<[s0, 2], f32> -> !fusec.tensor<[s0, 1], f32>
    %s = fusec.pointwise "neg" %t : (!fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1], f32>
    fusec.output %s : !fusec.tensor<[s0, 1], f32>
  }

// CHECK-LABEL: fusec.graph @every_other
// CHECK:       fusec.kernel @fusec_poi_neg_7 [s0] (%x)
// CHECK:         fusec.load %{{.*}}[2*x]

  // A hand-written kernel whose inner extent s1 does not provably divide its domain s2:
  // the transposed load stays flat, and a remark says why.
  fusec.graph @no_divisor(%x : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s2], f32>) symbols(s0 in [2, inf], s1 in [2, inf], s2 in [2, inf]) {
    %k = fusec.kernel @hand_strided [s2] (%x) : (!fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s2], f32>) {
    ^bb0(%in : !fusec.tensor<[s0, s1], f32>, %out : !fusec.tensor<[s2], f32>):
      %v = fusec.load %in[s1*mod(x, s0) + floordiv(x, s0)] : !fusec.tensor<[s0, s1], f32>
      %n = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %n, %out[x] : !fusec.tensor<[s2], f32>
    }
    fusec.output %k : !fusec.tensor<[s2], f32>
  }
}

// CHECK-LABEL: fusec.graph @no_divisor
// CHECK:       fusec.kernel @hand_strided [s2] (%x)

// REMARK:      remark: tile-pointwise: tile-declined: load [2*x] is strided along x: no floordiv/mod of x in the indices gives an inner extent to split x by [@fusec_poi_neg_7]
// REMARK-NEXT: remark: tile-pointwise: tile-declined: load [s1*mod(x, s0) + floordiv(x, s0)] is strided along x: s0 does not provably divide xnumel = s2 [@hand_strided]
// REMARK-NOT:  remark

// Transposes only: the broadcast kernels stay flat.
// NOBCAST:       fusec.kernel @fusec_poi_add_1 [s1, s0] tiled
// NOBCAST:       fusec.kernel @fusec_poi_mul_3 [64*s0] (%x, %w)
// NOBCAST:       fusec.load %{{.*}}[mod(x, 64)]
// NOBCAST:       fusec.kernel @fusec_poi_mul_4 [64*s0] (%x, %b)
// NOBCAST:       fusec.load %{{.*}}[floordiv(x, 64)]

// Members of a combo are tiled like kernels outside combos (the combo gives a tiled member a program a tile).
// COMBO:       fusec.kernel @fusec_poi_add_1 [s1, s0] tiled
// COMBO:       fusec.combo @fusec_combo_0
// COMBO-NEXT:    fusec.kernel @fusec_poi_mul_3 [s0, 64] tiled (%x, %w)
// COMBO:         fusec.kernel @fusec_poi_mul_4 [s0, 64] tiled (%x, %b)
