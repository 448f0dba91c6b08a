// RUN: fusec-opt %s -p form-kernels | filecheck %s

// A piece of a cat is read only under its mask, where its coordinate along the cat dim lies in
// [0, its extent): views fold with that bound known.  Zero-padding the rows of a reshaped [2, 32, 50257]
// (pad-matmuls' copy of GPT-2's logit gradients) loads at row*50257 + column, not at a nest of
// floordivs and mods of a column that could be past the piece; the same under size symbols.
builtin.module {
  fusec.graph @pad(%g : !fusec.tensor<[2, 32, 50257], bf16>, %h : !fusec.tensor<[s0, 4, s1], f32>) -> (!fusec.tensor<[64, 50264], bf16>, !fusec.tensor<[4*s0, s1 + 3], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {
    %r = fusec.reshape %g : !fusec.tensor<[2, 32, 50257], bf16> -> !fusec.tensor<[64, 50257], bf16>
    %z = fusec.constant 0 : !fusec.tensor<[64, 7], bf16>
    %c = fusec.cat %r, %z dim 1 : (!fusec.tensor<[64, 50257], bf16>, !fusec.tensor<[64, 7], bf16>) -> !fusec.tensor<[64, 50264], bf16>
    %hr = fusec.reshape %h : !fusec.tensor<[s0, 4, s1], f32> -> !fusec.tensor<[4*s0, s1], f32>
    %hz = fusec.constant 0.0 : !fusec.tensor<[4*s0, 3], f32>
    %hc = fusec.cat %hz, %hr dim 1 : (!fusec.tensor<[4*s0, 3], f32>, !fusec.tensor<[4*s0, s1], f32>) -> !fusec.tensor<[4*s0, s1 + 3], f32>
    fusec.output %c, %hc : !fusec.tensor<[64, 50264], bf16>, !fusec.tensor<[4*s0, s1 + 3], f32>
  }
}

// CHECK:      fusec.kernel @fusec_poi_cat_0 [3216896] (%g)
// CHECK:        fusec.load %{{.*}}[50257*floordiv(x, 50264) + mod(x, 50264)] mask
// CHECK:      fusec.kernel @fusec_poi_cat_1 [4*s0*(s1 + 3)] (%h)
// CHECK:        fusec.load %{{.*}}[s1*floordiv(x, s1 + 3) + mod(x, s1 + 3) - 3] mask
