// RUN: fusec-opt %s -p "activation-epilogues,dce" | filecheck %s
// RUN: fusec-opt %s -p "activation-epilogues,dce" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "activation-epilogues{when=always},dce" | filecheck %s --check-prefix=ALWAYS
// RUN: fusec-opt %s -p "activation-epilogues,dce" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "activation-epilogues{when=never}" | filecheck %s --check-prefix=NEVER

// mm + row-bias add + an activation that is, whatever its spelling, ReLU or tanh-GELU of the biased product, with
// nothing else reading the product or the pre-activation: one aten._addmm_activation (cuBLASLt's epilogue) on a
// CUDA graph.  Exact (erf) GELU, a GELU with another constant, a pre-activation the graph also returns: left.
// On a CPU graph torch's _addmm_activation computes erf's GELU: tanh-GELU stays; ReLU moves with when=always.

builtin.module {
  fusec.graph @gelu_new(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %half = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %a = fusec.pointwise "mul" %h, %half : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %sq = fusec.pointwise "mul" %h, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %cube = fusec.pointwise "mul" %sq, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %kappa = fusec.constant 0.044715 : !fusec.tensor<[], f32>
    %kc = fusec.pointwise "mul" %cube, %kappa : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %in = fusec.pointwise "add" %h, %kc : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %beta = fusec.constant 0.7978845608028654 : !fusec.tensor<[], f32>
    %arg = fusec.pointwise "mul" %in, %beta : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %t = fusec.pointwise "tanh" %arg : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %one = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %t1 = fusec.pointwise "add" %t, %one : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %g = fusec.pointwise "mul" %a, %t1 : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %g : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @gelu_f32(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %hf = fusec.pointwise "convert" %h : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], f32>
    %three = fusec.constant 3.0 : !fusec.tensor<[], f32>
    %cube = fusec.pointwise "pow" %hf, %three : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], f32>
    %kappa = fusec.constant 0.044715 : !fusec.tensor<[], f32>
    %kc = fusec.pointwise "mul" %kappa, %cube : (!fusec.tensor<[], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %in = fusec.pointwise "add" %kc, %hf : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %beta = fusec.constant 0.7978845608028654 : !fusec.tensor<[], f32>
    %arg = fusec.pointwise "mul" %beta, %in : (!fusec.tensor<[], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %t = fusec.pointwise "tanh" %arg : (!fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %one = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %t1 = fusec.pointwise "add" %one, %t : (!fusec.tensor<[], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %ht = fusec.pointwise "mul" %hf, %t1 : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], f32>
    %half = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %gf = fusec.pointwise "mul" %ht, %half : (!fusec.tensor<[64, 96], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], f32>
    %g = fusec.pointwise "convert" %gf : (!fusec.tensor<[64, 96], f32>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %g : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @relu(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %r = fusec.pointwise "relu" %h : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %r : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @erf(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %half = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %rs2 = fusec.constant 0.7071067811865476 : !fusec.tensor<[], f32>
    %one = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %a = fusec.pointwise "mul" %h, %half : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %u = fusec.pointwise "mul" %h, %rs2 : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %e = fusec.pointwise "erf" %u : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %e1 = fusec.pointwise "add" %e, %one : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %g = fusec.pointwise "mul" %a, %e1 : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %g : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @off(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %half = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %a = fusec.pointwise "mul" %h, %half : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %sq = fusec.pointwise "mul" %h, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %cube = fusec.pointwise "mul" %sq, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %kappa = fusec.constant 0.0448 : !fusec.tensor<[], f32>
    %kc = fusec.pointwise "mul" %cube, %kappa : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %in = fusec.pointwise "add" %h, %kc : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %beta = fusec.constant 0.7978845608028654 : !fusec.tensor<[], f32>
    %arg = fusec.pointwise "mul" %in, %beta : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %t = fusec.pointwise "tanh" %arg : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %one = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %t1 = fusec.pointwise "add" %t, %one : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %g = fusec.pointwise "mul" %a, %t1 : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %g : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @saved(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %r = fusec.pointwise "relu" %h : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %r, %h : !fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @cpu(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cpu"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %half = fusec.constant 0.5 : !fusec.tensor<[], f32>
    %a = fusec.pointwise "mul" %h, %half : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %sq = fusec.pointwise "mul" %h, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %cube = fusec.pointwise "mul" %sq, %h : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %kappa = fusec.constant 0.044715 : !fusec.tensor<[], f32>
    %kc = fusec.pointwise "mul" %cube, %kappa : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %in = fusec.pointwise "add" %h, %kc : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %beta = fusec.constant 0.7978845608028654 : !fusec.tensor<[], f32>
    %arg = fusec.pointwise "mul" %in, %beta : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %t = fusec.pointwise "tanh" %arg : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %one = fusec.constant 1.0 : !fusec.tensor<[], f32>
    %t1 = fusec.pointwise "add" %t, %one : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[], f32>) -> !fusec.tensor<[64, 96], bf16>
    %g = fusec.pointwise "mul" %a, %t1 : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %g : !fusec.tensor<[64, 96], bf16>
  }
  fusec.graph @cpu_relu(%x : !fusec.tensor<[64, 32], bf16>, %w : !fusec.tensor<[32, 96], bf16>, %b : !fusec.tensor<[96], bf16>) -> (!fusec.tensor<[64, 96], bf16>) attributes {fusec.device = "cpu"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[64, 32], bf16>, !fusec.tensor<[32, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[64, 96], bf16>, !fusec.tensor<[96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    %r = fusec.pointwise "relu" %h : (!fusec.tensor<[64, 96], bf16>) -> !fusec.tensor<[64, 96], bf16>
    fusec.output %r : !fusec.tensor<[64, 96], bf16>
  }
}

// CHECK-LABEL: fusec.graph @gelu_new
// CHECK-NEXT:    %{{.*}} = fusec.extern "aten._addmm_activation.default"(%b, %x, %w, use_gelu = true)
// CHECK-NEXT:    fusec.output
// CHECK-LABEL: fusec.graph @gelu_f32
// CHECK-NEXT:    %{{.*}} = fusec.extern "aten._addmm_activation.default"(%b, %x, %w, use_gelu = true)
// CHECK-NEXT:    fusec.output
// CHECK-LABEL: fusec.graph @relu
// CHECK-NEXT:    %{{.*}} = fusec.extern "aten._addmm_activation.default"(%b, %x, %w, use_gelu = false)
// CHECK-NEXT:    fusec.output
// CHECK-LABEL: fusec.graph @erf
// CHECK:         fusec.extern "aten.mm.default"
// CHECK:         fusec.pointwise "erf"
// CHECK-LABEL: fusec.graph @off
// CHECK:         fusec.extern "aten.mm.default"
// CHECK-LABEL: fusec.graph @saved
// CHECK:         fusec.extern "aten.mm.default"
// CHECK-LABEL: fusec.graph @cpu
// CHECK:         fusec.extern "aten.mm.default"
// CHECK:         fusec.pointwise "tanh"
// CHECK-LABEL: fusec.graph @cpu_relu
// CHECK:         fusec.extern "aten.mm.default"

// ALWAYS-LABEL: fusec.graph @cpu
// ALWAYS:         fusec.extern "aten.mm.default"
// ALWAYS-LABEL: fusec.graph @cpu_relu
// ALWAYS-NEXT:    %{{.*}} = fusec.extern "aten._addmm_activation.default"(%b, %x, %w, use_gelu = false)

// REMARK: remark: activation-epilogues: activation-epilogue: {{.*}}aten.mm.default + bias add + tanh-GELU (9 ops) -> aten._addmm_activation.default
// REMARK: remark: activation-epilogues: activation-epilogue: {{.*}}tanh-GELU (10 ops)
// REMARK: remark: activation-epilogues: activation-epilogue: {{.*}}ReLU (1 op)
// REMARK-NOT: remark: activation-epilogues

// NEVER-NOT: _addmm_activation
