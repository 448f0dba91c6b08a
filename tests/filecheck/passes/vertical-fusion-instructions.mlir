// RUN: fusec-opt %s -p form-kernels,vertical-fusion | filecheck %s
// RUN: fusec-opt %s -p form-kernels,vertical-fusion --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Recomputing a producer across domains costs the instructions its ops take, not one per op: a cos is ~120 adds
// (cost_model.FUNCTION_INSTRUCTIONS).  A rotary embedding's cos over [T, D], read by q's and k's kernels of four
// layers over [B, H, T, D], stays stored once (Llama: recomputing it in every layer's q and k cost 13 us of 300
// on an H200), while a square over the same domains, one multiply a point, is recomputed by every reader.
builtin.module {
  fusec.graph @rotary(%f : !fusec.tensor<[256, 64], f32>, %q0 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k0 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q1 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k1 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q2 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k2 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q3 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k3 : !fusec.tensor<[4, 4, 256, 64], bf16>) -> (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>) {
    %a = fusec.pointwise "cos" %f : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %c = fusec.pointwise "convert" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], bf16>
    %cq = fusec.expand %c : !fusec.tensor<[256, 64], bf16> -> !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>
    %ck = fusec.expand %c : !fusec.tensor<[256, 64], bf16> -> !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>
    %yq0 = fusec.pointwise "mul" %q0, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk0 = fusec.pointwise "mul" %k0, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq1 = fusec.pointwise "mul" %q1, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk1 = fusec.pointwise "mul" %k1, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq2 = fusec.pointwise "mul" %q2, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk2 = fusec.pointwise "mul" %k2, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq3 = fusec.pointwise "mul" %q3, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk3 = fusec.pointwise "mul" %k3, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    fusec.output %yq0, %yk0, %yq1, %yk1, %yq2, %yk2, %yq3, %yk3 : !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>
  }
  fusec.graph @square(%f : !fusec.tensor<[256, 64], f32>, %q0 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k0 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q1 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k1 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q2 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k2 : !fusec.tensor<[4, 4, 256, 64], bf16>, %q3 : !fusec.tensor<[4, 8, 256, 64], bf16>, %k3 : !fusec.tensor<[4, 4, 256, 64], bf16>) -> (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>) {
    %a = fusec.pointwise "abs" %f : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %c = fusec.pointwise "convert" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], bf16>
    %cq = fusec.expand %c : !fusec.tensor<[256, 64], bf16> -> !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>
    %ck = fusec.expand %c : !fusec.tensor<[256, 64], bf16> -> !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>
    %yq0 = fusec.pointwise "mul" %q0, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk0 = fusec.pointwise "mul" %k0, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq1 = fusec.pointwise "mul" %q1, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk1 = fusec.pointwise "mul" %k1, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq2 = fusec.pointwise "mul" %q2, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk2 = fusec.pointwise "mul" %k2, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    %yq3 = fusec.pointwise "mul" %q3, %cq : (!fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 8, 256, 64], bf16>
    %yk3 = fusec.pointwise "mul" %k3, %ck : (!fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16, strides [0, 0, 64, 1]>) -> !fusec.tensor<[4, 4, 256, 64], bf16>
    fusec.output %yq0, %yk0, %yq1, %yk1, %yq2, %yk2, %yq3, %yk3 : !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>, !fusec.tensor<[4, 8, 256, 64], bf16>, !fusec.tensor<[4, 4, 256, 64], bf16>
  }
}

// CHECK-LABEL: fusec.graph @rotary
// CHECK:         %c = fusec.kernel @fusec_poi_cos_convert_{{[0-9]+}} [16384] (%f)
// CHECK-COUNT-8: fusec.kernel @fusec_poi_mul_{{[0-9]+}} [{{524288|262144}}] (%{{[qk][0-9]}}, %c)
// CHECK-LABEL: fusec.graph @square
// CHECK-NOT:     [16384]
// CHECK-COUNT-8: fusec.kernel @fusec_poi_{{[a-z_]+}}_{{[0-9]+}} [{{524288|262144}}] (%{{[qk][0-9]}}, %f)

// REMARK: remark: vertical-fusion: recompute-cost: @fusec_poi_mul_{{[0-9]+}} over [{{524288|262144}}] would recompute @fusec_poi_cos_convert_{{[0-9]+}} over [16384] (121 instructions a point)
