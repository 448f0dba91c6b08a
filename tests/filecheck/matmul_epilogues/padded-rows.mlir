// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false},form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce" | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false},form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A weight gradient g.t() @ x with 33 rows (bf16 rows of 66 bytes: pad-matmuls pads A's M to 40 and slices the
// product's first 33 rows back), plus another gradient of the same weight (a tied embedding's).  The matmul kernel
// computes the 33 rows the add reads, from the padded copy's first 33 columns: no masks, no wasted rows.
builtin.module {
  fusec.graph @wgrad(%g : !fusec.tensor<[s0, 33], bf16>, %x : !fusec.tensor<[s0, 24], bf16>, %e : !fusec.tensor<[33, 24], bf16>) -> (!fusec.tensor<[33, 24], bf16>) symbols(s0 in [1, inf]) {
    %gt = fusec.permute %g [1, 0] : !fusec.tensor<[s0, 33], bf16> -> !fusec.tensor<[33, s0], bf16, strides [1, 33]>
    %p = fusec.extern "aten.mm.default"(%gt, %x) : (!fusec.tensor<[33, s0], bf16, strides [1, 33]>, !fusec.tensor<[s0, 24], bf16>) -> !fusec.tensor<[33, 24], bf16>
    %o = fusec.pointwise "add" %p, %e : (!fusec.tensor<[33, 24], bf16>, !fusec.tensor<[33, 24], bf16>) -> !fusec.tensor<[33, 24], bf16>
    fusec.output %o : !fusec.tensor<[33, 24], bf16>
  }
}

// CHECK-LABEL: fusec.graph @wgrad
// CHECK:       %[[PAD:.*]] = fusec.kernel @fusec_poi_cat_{{[0-9]+}} [40*s0] {{.*}} -> (!fusec.tensor<[s0, 40], bf16>)
// CHECK:       fusec.kernel @fusec_mm_add_{{[0-9]+}} [792, s0] matmul [1, 33, 24] (%{{.*}}, %x, %e) :
// CHECK:         fusec.load %{{.*}}[40*r + floordiv(x, 24)] : !fusec.tensor<[s0, 40], bf16>
// CHECK:         fusec.load %{{.*}}[24*r + mod(x, 24)] : !fusec.tensor<[s0, 24], bf16>
// CHECK-NOT:     mask
// CHECK:         fusec.store %{{.*}}, %{{.*}}[x] : !fusec.tensor<[33, 24], bf16>
// CHECK-NOT:   fusec.kernel
// CHECK:       fusec.output

// REMARK: pad-matmuls: padded-matmul: aten.mm.default [33, s0] @ [s0, 24] computes as [40, s0] @ [s0, 24] (M 33 -> 40
// REMARK: matmul-epilogues: matmul-epilogue: aten.mm.default [1, 40, 24, s0] and @fusec_poi_add_{{[0-9]+}} run as one kernel: {{.*}}; computed over the 33 x 24 elements the epilogue reads (a padded product's slice)
