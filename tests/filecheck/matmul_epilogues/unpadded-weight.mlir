// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false},form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false}" | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls{when=always cost-rule=false},form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// An LM head with 33 outputs: pad-matmuls pads the weight's rows to 40 (bf16 rows of 66 bytes are misaligned for
// cuBLAS) and slices the product back.  Run as a Triton matmul with the copy to eager's layout as its epilogue,
// the product reads the weight itself over its 33 rows: no padded columns, no mask, and the zero-padded copy is
// not made.
builtin.module {
  fusec.graph @lm_head(%x : !fusec.tensor<[s0, 24], bf16>, %w : !fusec.tensor<[33, 24], bf16>) -> (!fusec.tensor<[s0, 33], bf16>) symbols(s0 in [1, inf]) {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[33, 24], bf16> -> !fusec.tensor<[24, 33], bf16, strides [1, 24]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[s0, 24], bf16>, !fusec.tensor<[24, 33], bf16, strides [1, 24]>) -> !fusec.tensor<[s0, 33], bf16>
    fusec.output %p : !fusec.tensor<[s0, 33], bf16>
  }
}

// CHECK-LABEL: fusec.graph @lm_head
// CHECK-NOT:   fusec_poi_cat
// CHECK:       fusec.kernel @fusec_mm_identity_{{[0-9]+}} [33*s0, 24] matmul [1, s0, 33] (%x, %w) :
// CHECK:         fusec.load %{{.*}}[r + 24*mod(x, 33)] : !fusec.tensor<[33, 24], bf16>
// CHECK:         fusec.store %{{.*}}, %{{.*}}[x] : !fusec.tensor<[s0, 33], bf16>
// CHECK-NOT:   fusec.kernel
// CHECK:       fusec.output

// REMARK: matmul-epilogues: matmul-epilogue: aten.mm.default [1, s0, 40, 24] and @fusec_poi_identity_{{[0-9]+}} run as one kernel: {{.*}}; computed over the s0 x 33 elements the epilogue reads (a padded product's slice); B is read from a graph input itself, not its zero-padded copy
