// RUN: fusec-opt %s -p "pad-matmuls" | filecheck %s
// RUN: fusec-opt %s -p "pad-matmuls" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// An fp32 matmul pads only where it may run on TF32 tensor cores: at float32_matmul_precision "highest"
// (torch's default) cuBLAS runs it on CUDA cores, whose kernels gain nothing from aligned rows, and the
// copies would be pure cost (GPT-2's fp32 LM head: a 154 MB weight copy and a 206 MB result copy per call).
builtin.module {
  fusec.graph @ieee(%x : !fusec.tensor<[1024, 768], f32>, %w : !fusec.tensor<[768, 50257], f32>) -> (!fusec.tensor<[1024, 50257], f32>) attributes {fusec.device = "cuda", fusec.float32_matmul_precision = "highest"} {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[1024, 768], f32>, !fusec.tensor<[768, 50257], f32>) -> !fusec.tensor<[1024, 50257], f32>
    fusec.output %y : !fusec.tensor<[1024, 50257], f32>
  }
  fusec.graph @tf32(%x : !fusec.tensor<[1024, 768], f32>, %w : !fusec.tensor<[768, 50257], f32>) -> (!fusec.tensor<[1024, 50257], f32>) attributes {fusec.device = "cuda", fusec.float32_matmul_precision = "high"} {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[1024, 768], f32>, !fusec.tensor<[768, 50257], f32>) -> !fusec.tensor<[1024, 50257], f32>
    fusec.output %y : !fusec.tensor<[1024, 50257], f32>
  }
  fusec.graph @bf16(%x : !fusec.tensor<[1024, 768], bf16>, %w : !fusec.tensor<[768, 50257], bf16>) -> (!fusec.tensor<[1024, 50257], bf16>) attributes {fusec.device = "cuda", fusec.float32_matmul_precision = "highest"} {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768, 50257], bf16>) -> !fusec.tensor<[1024, 50257], bf16>
    fusec.output %y : !fusec.tensor<[1024, 50257], bf16>
  }
}

// CHECK-LABEL: fusec.graph @ieee
// CHECK-NOT:   fusec.cat
// CHECK:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[1024, 50257], f32>
// CHECK-LABEL: fusec.graph @tf32
// CHECK:       fusec.cat %w
// CHECK:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[1024, 50260], f32>
// CHECK-LABEL: fusec.graph @bf16
// CHECK:       fusec.cat %w
// CHECK:       fusec.extern "aten.mm.default"{{.*}} -> !fusec.tensor<[1024, 50264], bf16>

// REMARK:     pad-matmuls: padding-unprofitable: aten.mm.default: an fp32 matmul at float32_matmul_precision 'highest' (no TF32) runs on CUDA cores
// REMARK-NOT: padding-unprofitable
