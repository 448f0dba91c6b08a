// RUN: fusec-opt %s -p "form-kernels,vertical-fusion" | filecheck %s --check-prefix=READER
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{cross-domain=per-producer}" | filecheck %s --check-prefix=PRODUCER
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{cross-domain=per-producer}" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A cos over [256, 64] read through broadcasts by a small reader ([16, 256, 64]) and a large one ([512, 256, 64]).
// per-reader (the default): the small reader recomputes it, credited half of the cos's launch, then the large one,
// now its last reader, declines, so the cos is stored anyway and the small reader's 120 instructions a point buy
// nothing.  per-producer: one decision for both readers -- together they would not pay for the cos's store and
// launch, so it stays stored and each reader recomputes it only where its own load pays (neither does).
builtin.module {
  fusec.graph @two(%f : !fusec.tensor<[256, 64], f32>, %a : !fusec.tensor<[16, 256, 64], f32>, %b : !fusec.tensor<[512, 256, 64], f32>) -> (!fusec.tensor<[16, 256, 64], f32>, !fusec.tensor<[512, 256, 64], f32>) {
    %c = fusec.pointwise "cos" %f : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %ca = fusec.expand %c : !fusec.tensor<[256, 64], f32> -> !fusec.tensor<[16, 256, 64], f32, strides [0, 64, 1]>
    %cb = fusec.expand %c : !fusec.tensor<[256, 64], f32> -> !fusec.tensor<[512, 256, 64], f32, strides [0, 64, 1]>
    %ya = fusec.pointwise "mul" %a, %ca : (!fusec.tensor<[16, 256, 64], f32>, !fusec.tensor<[16, 256, 64], f32, strides [0, 64, 1]>) -> !fusec.tensor<[16, 256, 64], f32>
    %yb = fusec.pointwise "mul" %b, %cb : (!fusec.tensor<[512, 256, 64], f32>, !fusec.tensor<[512, 256, 64], f32, strides [0, 64, 1]>) -> !fusec.tensor<[512, 256, 64], f32>
    fusec.output %ya, %yb : !fusec.tensor<[16, 256, 64], f32>, !fusec.tensor<[512, 256, 64], f32>
  }
}

// READER:      %c = fusec.kernel @fusec_poi_cos_{{[0-9]+}} [16384] (%f)
// READER:      %ya = fusec.kernel @fusec_poi_cos_mul_{{[0-9]+}} [262144] (%a, %f)
// READER:      %yb = fusec.kernel @fusec_poi_mul_{{[0-9]+}} [8388608] (%b, %c)

// PRODUCER:    %c = fusec.kernel @fusec_poi_cos_{{[0-9]+}} [16384] (%f)
// PRODUCER:    %ya = fusec.kernel @fusec_poi_mul_{{[0-9]+}} [262144] (%a, %c)
// PRODUCER:    %yb = fusec.kernel @fusec_poi_mul_{{[0-9]+}} [8388608] (%b, %c)

// REMARK: recompute-cost: @fusec_poi_mul_{{[0-9]+}} over [262144] would recompute @fusec_poi_cos_{{[0-9]+}} over [16384] {{.*}} no launch (it stays stored: its readers together would not pay for it)
