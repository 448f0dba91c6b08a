// RUN: fusec-opt %s -p form-kernels,vertical-fusion | filecheck %s --check-prefix=DEFAULT
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{keep-narrow=true}" | filecheck %s --check-prefix=NARROW
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion{keep-narrow=true}" | fusec-opt | filecheck %s --check-prefix=NARROW

// A residual stream in bf16, each layer's norm reading it through an fp32 upcast (%u1, %u2, %u3) twice: the
// shape of GPT-2's and Llama's inference graphs.  By default each upcast takes in the sum before it and is then
// recomputed by its two readers, so the stream is summed again from the first layer in every layer: the last
// kernel reads %e, %a, %m1 and %m2.  With keep-narrow the sums wait for the upcasts to go into their readers and
// are stored narrow (bf16) by one of them: three kernels, the last one reading %h2 and %m2 only.
builtin.module {
  fusec.graph @residual_stream(%e : !fusec.tensor<[s0, 64], bf16>, %a : !fusec.tensor<[s0, 64], bf16>, %w : !fusec.tensor<[64, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) symbols(s0 in [1, inf]) {
    %h1 = fusec.pointwise "add" %e, %a : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], bf16>
    %u1 = fusec.pointwise "convert" %h1 : (!fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], f32>
    %q1 = fusec.pointwise "mul" %u1, %u1 : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %t1 = fusec.pointwise "tanh" %u1 : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %m1:1 = fusec.extern "aten.mm.default"(%t1, %w) : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>)
    %c1 = fusec.pointwise "convert" %m1 : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], bf16>
    %h2 = fusec.pointwise "add" %h1, %c1 : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], bf16>
    %u2 = fusec.pointwise "convert" %h2 : (!fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], f32>
    %q2 = fusec.pointwise "mul" %u2, %u2 : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %t2 = fusec.pointwise "tanh" %u2 : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %m2:1 = fusec.extern "aten.mm.default"(%t2, %w) : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[64, 64], f32>) -> (!fusec.tensor<[s0, 64], f32>)
    %c2 = fusec.pointwise "convert" %m2 : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], bf16>
    %h3 = fusec.pointwise "add" %h2, %c2 : (!fusec.tensor<[s0, 64], bf16>, !fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], bf16>
    %u3 = fusec.pointwise "convert" %h3 : (!fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], f32>
    %q3 = fusec.pointwise "mul" %u3, %u3 : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    fusec.output %q1, %q2, %q3 : !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[s0, 64], f32>
  }
}

// DEFAULT-LABEL: fusec.graph @residual_stream
// DEFAULT:         %q1 = fusec.kernel @{{.*}} [64*s0] (%e, %a)
// DEFAULT:         %t1 = fusec.kernel @{{.*}} [64*s0] (%e, %a)
// DEFAULT:         %q2 = fusec.kernel @{{.*}} [64*s0] (%e, %a, %m1)
// DEFAULT:         %t2 = fusec.kernel @{{.*}} [64*s0] (%e, %a, %m1)
// DEFAULT:         %q3 = fusec.kernel @{{.*}} [64*s0] (%e, %a, %m1, %m2)

// NARROW-LABEL: fusec.graph @residual_stream
// NARROW:         %t1, %q1, %h1 = fusec.kernel @{{.*}} [64*s0] (%e, %a)
// NARROW:         %m1 = fusec.extern "aten.mm.default"(%t1, %w)
// NARROW:         %t2, %q2, %h2 = fusec.kernel @{{.*}} [64*s0] (%e, %a, %m1)
// NARROW:           fusec.store %{{.*}} : !fusec.tensor<[s0, 64], bf16>
// NARROW:         %m2 = fusec.extern "aten.mm.default"(%t2, %w)
// NARROW-NEXT:    %q3 = fusec.kernel @{{.*}} [64*s0] (%h2, %m2)
// NARROW-NOT:     fusec.kernel
