// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues" --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,dce,vertical-fusion,matmul-epilogues" | filecheck %s --check-prefix=IR

// What matmul-epilogues leaves to cuBLAS, and the remark that says why.
builtin.module {
  fusec.graph @declined(%x : !fusec.tensor<[256, 64], bf16>, %w : !fusec.tensor<[64, 256], bf16>, %b : !fusec.tensor<[256], bf16>, %big : !fusec.tensor<[256, 65536], bf16>, %wbig : !fusec.tensor<[65536, 128], bf16>) -> (!fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 128], bf16>) attributes {fusec.device = "cuda"} {
    // Only the graph output reads the product.
    %p0 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    // Two kernels read it.
    %p1 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %e1 = fusec.pointwise "exp" %p1 : (!fusec.tensor<[256, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %n1 = fusec.pointwise "neg" %p1 : (!fusec.tensor<[256, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    // One kernel reads it transposed.
    %p2 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %t2 = fusec.permute %p2 [1, 0] : !fusec.tensor<[256, 256], bf16> -> !fusec.tensor<[256, 256], bf16, strides [1, 256]>
    %e2 = fusec.pointwise "exp" %t2 : (!fusec.tensor<[256, 256], bf16, strides [1, 256]>) -> !fusec.tensor<[256, 256], bf16>
    // An erf GELU: exact libdevice work after the main loop.
    %p3 = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %h3 = fusec.pointwise "add" %p3, %b : (!fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %e3 = fusec.pointwise "erf" %h3 : (!fusec.tensor<[256, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    // A long K and a small product: the Triton main loop loses more than fusing saves.
    %p4 = fusec.extern "aten.mm.default"(%big, %wbig) : (!fusec.tensor<[256, 65536], bf16>, !fusec.tensor<[65536, 128], bf16>) -> !fusec.tensor<[256, 128], bf16>
    %e4 = fusec.pointwise "relu" %p4 : (!fusec.tensor<[256, 128], bf16>) -> !fusec.tensor<[256, 128], bf16>
    fusec.output %p0, %e1, %n1, %e2, %e3, %e4 : !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 128], bf16>
  }
  // fp32 at torch's default precision: cuBLAS's exact SGEMM stays.
  fusec.graph @exact(%x : !fusec.tensor<[256, 64], f32>, %w : !fusec.tensor<[64, 256], f32>) -> (!fusec.tensor<[256, 256], f32>) attributes {fusec.device = "cuda", fusec.float32_matmul_precision = "highest"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[64, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    %e = fusec.pointwise "relu" %p : (!fusec.tensor<[256, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    fusec.output %e : !fusec.tensor<[256, 256], f32>
  }
  // No accelerator mark: the graph runs on the CPU, where cuBLAS does not run either.
  fusec.graph @cpu(%x : !fusec.tensor<[256, 64], f32>, %w : !fusec.tensor<[64, 256], f32>) -> (!fusec.tensor<[256, 256], f32>) {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[64, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    %e = fusec.pointwise "relu" %p : (!fusec.tensor<[256, 256], f32>) -> !fusec.tensor<[256, 256], f32>
    fusec.output %e : !fusec.tensor<[256, 256], f32>
  }
  // A row statistic of the product (a LayerNorm's mean): a matmul program holds a tile, not whole rows.
  fusec.graph @row_statistic(%x : !fusec.tensor<[256, 64], bf16>, %w : !fusec.tensor<[64, 256], bf16>) -> (!fusec.tensor<[256], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %s = fusec.reduce "sum" %p dims [1] : !fusec.tensor<[256, 256], bf16> -> !fusec.tensor<[256], bf16>
    fusec.output %s : !fusec.tensor<[256], bf16>
  }
  // A GELU's backward fused with its bias's gradient (column sums of the product): a matmul program holds a tile,
  // not whole columns.
  fusec.graph @column_sums(%x : !fusec.tensor<[256, 64], bf16>, %w : !fusec.tensor<[64, 256], bf16>, %h : !fusec.tensor<[256, 256], bf16>) -> (!fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256], bf16>) attributes {fusec.device = "cuda"} {
    %p = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[256, 64], bf16>, !fusec.tensor<[64, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %t = fusec.pointwise "tanh" %h : (!fusec.tensor<[256, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %g = fusec.pointwise "mul" %p, %t : (!fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256, 256], bf16>) -> !fusec.tensor<[256, 256], bf16>
    %s = fusec.reduce "sum" %g dims [0] : !fusec.tensor<[256, 256], bf16> -> !fusec.tensor<[256], bf16>
    fusec.output %g, %s : !fusec.tensor<[256, 256], bf16>, !fusec.tensor<[256], bf16>
  }
}

// CHECK:      remark: matmul-epilogues: no-epilogue: aten.mm.default: no kernel reads its product (only the graph output)
// CHECK-NEXT: remark: matmul-epilogues: several-epilogues: aten.mm.default: 2 kernels read its product (@fusec_poi_exp_{{[0-9]+}}, @fusec_poi_neg_{{[0-9]+}})
// CHECK-NEXT: remark: matmul-epilogues: not-elementwise: aten.mm.default -> @{{.*}}: it reads the product at [floordiv(x, 256) + 256*mod(x, 256)], not at [x]
// CHECK-NEXT: remark: matmul-epilogues: epilogue-cost: aten.mm.default -> @{{.*}}: its erf would run exactly (libdevice) after the main loop
// CHECK-NEXT: remark: matmul-epilogues: main-loop-cost: [1x256x128, K=65536]: the Triton main loop at 83% of cuBLAS in 2 tiles would lose {{[0-9.]+}} us of {{[0-9.]+}}, fusing saves {{[0-9.]+}} us
// CHECK-NEXT: remark: matmul-epilogues: fp32-exact: an fp32 matmul at float32_matmul_precision 'highest' (exact fp32, no TF32) stays cuBLAS's SGEMM
// CHECK-NEXT: remark: matmul-epilogues: epilogues-skipped: matmuls stay library calls: the IR marks no accelerator for this graph (when=always fuses anyway) [@cpu]
// CHECK-NEXT: remark: matmul-epilogues: not-elementwise: aten.mm.default -> @{{.*}}: it reduces over rows of the product (a LayerNorm, a LayerNorm's backward): a matmul program holds a tile of the product, not whole rows
// CHECK-NEXT: remark: matmul-epilogues: not-elementwise: aten.mm.default -> @fusec_red_{{.*}}: it sums the product's columns (a bias's gradient, with what it fuses: an activation's backward): a matmul program holds a tile of the product, not whole columns, and column partial sums in a matmul's epilogue are not built

// IR-NOT: matmul [
