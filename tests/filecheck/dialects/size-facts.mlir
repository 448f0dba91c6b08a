// Size facts: equalities of sizes every call satisfies (Dynamo's guards; fusec.frontend.size_facts).  A loss
// graph's labels ([s2, s3]) and logits ([s0, s1, 8]) have separate symbols after a graph break; the fact
// s2*s3 = s0*s1 lets the labels' reshape verify and the two broadcast, so the pipeline fuses them into one kernel.
// RUN: fusec-opt %s | fusec-opt | filecheck %s --check-prefix=ROUNDTRIP
// RUN: fusec-opt --default-pipeline %s | filecheck %s --check-prefix=FUSED

fusec.graph @loss(%logits : !fusec.tensor<[s0, s1, 8], f32>, %labels : !fusec.tensor<[s2, s3], i64>) -> (!fusec.tensor<[s0*s1, 8], f32>) symbols(s0 in [2, inf], s1 in [2, inf], s2 in [2, inf], s3 in [2, inf]) facts(s2*s3 = s0*s1) {
  %flat = fusec.reshape %labels : !fusec.tensor<[s2, s3], i64> -> !fusec.tensor<[s0*s1], i64>
  %col = fusec.reshape %flat : !fusec.tensor<[s0*s1], i64> -> !fusec.tensor<[s0*s1, 1], i64>
  %iota = fusec.pointwise "iota" : () -> !fusec.tensor<[8], i64>
  %row = fusec.reshape %iota : !fusec.tensor<[8], i64> -> !fusec.tensor<[1, 8], i64>
  %hit = fusec.pointwise "eq" %row, %col : (!fusec.tensor<[1, 8], i64>, !fusec.tensor<[s0*s1, 1], i64>) -> !fusec.tensor<[s0*s1, 8], i1>
  %x = fusec.reshape %logits : !fusec.tensor<[s0, s1, 8], f32> -> !fusec.tensor<[s0*s1, 8], f32>
  %zero = fusec.constant 0.0 : !fusec.tensor<[], f32>
  %out = fusec.pointwise "where" %hit, %x, %zero : (!fusec.tensor<[s0*s1, 8], i1>, !fusec.tensor<[s0*s1, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0*s1, 8], f32>
  fusec.output %out : !fusec.tensor<[s0*s1, 8], f32>
}
// ROUNDTRIP: fusec.graph @loss({{.*}}) symbols(s0 in [2, inf], s1 in [2, inf], s2 in [2, inf], s3 in [2, inf]) facts(s2*s3 = s0*s1) {
// ROUNDTRIP: fusec.reshape %{{.*}} : !fusec.tensor<[s2, s3], i64> -> !fusec.tensor<[s0*s1], i64>

// FUSED: facts(s2*s3 = s0*s1)
// FUSED-NOT: fusec.extern
// FUSED: fusec.kernel @fusec_poi_{{[a-z_]*}}where{{[_0-9]*}} [s0*s1, 8]
// FUSED-NOT: fusec.kernel
// FUSED-NOT: fusec.extern
// FUSED: fusec.output
