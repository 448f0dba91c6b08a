// RUN: fusec-opt %s -p "merge-matmuls,pad-matmuls,bias-epilogues" | filecheck %s
// RUN: fusec-opt %s -p "merge-matmuls,pad-matmuls,bias-epilogues" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A BERT layer's biased query, key and value projections on a GPU graph (the device mark: when=accelerator acts),
// read by library calls through views: merge-matmuls concatenates weights and biases, and bias-epilogues then adds
// the concatenated bias in cuBLAS's epilogue -- one addmm where there were three.
builtin.module {
  fusec.graph @attention_inputs(%x : !fusec.tensor<[1024, 768], bf16>, %wq : !fusec.tensor<[768, 768], bf16>, %bq : !fusec.tensor<[768], bf16>, %wk : !fusec.tensor<[768, 768], bf16>, %bk : !fusec.tensor<[768], bf16>, %wv : !fusec.tensor<[768, 768], bf16>, %bv : !fusec.tensor<[768], bf16>) -> (!fusec.tensor<[8, 128, 128], bf16>, !fusec.tensor<[8, 128, 768], bf16>) attributes {fusec.device = "cuda"} {
    %tq = fusec.permute %wq [1, 0] : !fusec.tensor<[768, 768], bf16> -> !fusec.tensor<[768, 768], bf16, strides [1, 768]>
    %q = fusec.extern "aten.mm.default"(%x, %tq) : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768, 768], bf16, strides [1, 768]>) -> !fusec.tensor<[1024, 768], bf16>
    %qb = fusec.pointwise "add" %q, %bq : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768], bf16>) -> !fusec.tensor<[1024, 768], bf16>
    %tk = fusec.permute %wk [1, 0] : !fusec.tensor<[768, 768], bf16> -> !fusec.tensor<[768, 768], bf16, strides [1, 768]>
    %k = fusec.extern "aten.mm.default"(%x, %tk) : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768, 768], bf16, strides [1, 768]>) -> !fusec.tensor<[1024, 768], bf16>
    %kb = fusec.pointwise "add" %k, %bk : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768], bf16>) -> !fusec.tensor<[1024, 768], bf16>
    %tv = fusec.permute %wv [1, 0] : !fusec.tensor<[768, 768], bf16> -> !fusec.tensor<[768, 768], bf16, strides [1, 768]>
    %v = fusec.extern "aten.mm.default"(%x, %tv) : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768, 768], bf16, strides [1, 768]>) -> !fusec.tensor<[1024, 768], bf16>
    %vb = fusec.pointwise "add" %v, %bv : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768], bf16>) -> !fusec.tensor<[1024, 768], bf16>
    %q3 = fusec.reshape %qb : !fusec.tensor<[1024, 768], bf16> -> !fusec.tensor<[8, 128, 768], bf16>
    %k3 = fusec.reshape %kb : !fusec.tensor<[1024, 768], bf16> -> !fusec.tensor<[8, 128, 768], bf16>
    %kt = fusec.permute %k3 [0, 2, 1] : !fusec.tensor<[8, 128, 768], bf16> -> !fusec.tensor<[8, 768, 128], bf16, strides [98304, 1, 768]>
    %s = fusec.extern "aten.bmm.default"(%q3, %kt) : (!fusec.tensor<[8, 128, 768], bf16>, !fusec.tensor<[8, 768, 128], bf16, strides [98304, 1, 768]>) -> !fusec.tensor<[8, 128, 128], bf16>
    %v3 = fusec.reshape %vb : !fusec.tensor<[1024, 768], bf16> -> !fusec.tensor<[8, 128, 768], bf16>
    %o = fusec.extern "aten.bmm.default"(%s, %v3) : (!fusec.tensor<[8, 128, 128], bf16>, !fusec.tensor<[8, 128, 768], bf16>) -> !fusec.tensor<[8, 128, 768], bf16>
    fusec.output %s, %o : !fusec.tensor<[8, 128, 128], bf16>, !fusec.tensor<[8, 128, 768], bf16>
  }
}

// CHECK:      %[[W:.*]] = fusec.cat %wq, %wk, %wv dim 0 : {{.*}} -> !fusec.tensor<[2304, 768], bf16>
// CHECK-NEXT: %[[WT:.*]] = fusec.permute %[[W]] [1, 0]
// CHECK:      %[[B:.*]] = fusec.cat %bq, %bk, %bv dim 0 : {{.*}} -> !fusec.tensor<[2304], bf16>
// CHECK-NEXT: %[[P:.*]] = fusec.extern "aten.addmm.default"(%[[B]], %x, %[[WT]]) : {{.*}} -> !fusec.tensor<[1024, 2304], bf16>
// CHECK-NEXT: fusec.slice %[[P]] dim 1 start 0 step 1 : !fusec.tensor<[1024, 2304], bf16> -> !fusec.tensor<[1024, 768], bf16, strides [2304, 1]>
// CHECK-NOT:  "aten.mm.default"
// CHECK-NOT:  fusec.pointwise "add"

// REMARK: merged-matmuls: 3 matmuls with one left operand and row biases
// REMARK: bias-epilogue: aten.mm.default + bias add -> aten.addmm.default: the sum goes only to aten.bmm.default
