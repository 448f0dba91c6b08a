// RUN: fusec-opt %s -p "form-kernels,schedule-kernels,reuse-buffers" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,schedule-kernels,reuse-buffers" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,schedule-kernels,reuse-buffers" --emit triton | filecheck %s --check-prefix=LAUNCH

// A chain: each result takes the storage of the one its input was computed from, two storages in all.
// CHECK-LABEL: fusec.graph @chain
// CHECK:         fusec.kernel @fusec_poi_exp_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// CHECK:         fusec.kernel @fusec_poi_neg_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 1>}
// CHECK:         fusec.kernel @fusec_poi_tanh_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// CHECK:         fusec.kernel @fusec_poi_sin_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 1>}
// REMARK: remark: reuse-buffers: storages: @chain: 4 kernel results, 2 written into the storage of a dead buffer (a kernel's or an extern's), the others into new storage (none dead of their element type and size); 1 returned by the graph
// LAUNCH-LABEL: # fusec launcher for @chain
// LAUNCH:         buf2 = buf0; del buf0
// LAUNCH:         buf3 = buf1; del buf1
// LAUNCH:         return [buf3]

// exp's result lives on in its transpose until the matmul reads that: neg's result may not take its storage;
// tanh's, after the matmul, does.
// CHECK-LABEL: fusec.graph @view_alias
// CHECK:         fusec.kernel @fusec_poi_exp_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// CHECK:         fusec.kernel @fusec_poi_neg_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 1>}
// CHECK:         fusec.extern "aten.mm.default"(%t, %b) {fusec.storage = array<i64: 2>}
// CHECK:         fusec.kernel @fusec_poi_tanh_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}

// Another element type takes new storage; a dense result of as many elements takes a dead one's, reinterpreted.
// The graph returns the f16 result (through a view) and the last: neither storage is handed on.
// CHECK-LABEL: fusec.graph @sizes_and_types
// CHECK:         fusec.kernel @fusec_poi_exp_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// CHECK:         fusec.kernel @fusec_poi_neg_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 1>}
// CHECK:         fusec.kernel @fusec_poi_convert_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 2>}
// CHECK:         fusec.kernel @fusec_poi_sin_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// REMARK: remark: reuse-buffers: storages: @sizes_and_types: 4 kernel results, 1 written into the storage of a dead buffer (a kernel's or an extern's), the others into new storage (none dead of their element type and size); 2 returned by the graph
// LAUNCH-LABEL: # fusec launcher for @sizes_and_types
// LAUNCH:         buf4 = _reinterpret(buf0, (512,), (1,), 0); del buf0

// A matmul's result is a new tensor (its schema says so): once read, a kernel result takes its storage.  Its
// alignment is torch's: the kernel writing into it checks it at the launch.
// CHECK-LABEL: fusec.graph @extern_storage
// CHECK:         fusec.extern "aten.mm.default"(%x, %x) {fusec.storage = array<i64: 0>}
// CHECK:         fusec.kernel @fusec_poi_exp_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 1>}
// CHECK:         fusec.kernel @fusec_poi_neg_{{[0-9]+}} {{.*}} {fusec.storage = array<i64: 0>}
// LAUNCH-LABEL: # fusec launcher for @extern_storage
// LAUNCH:         buf0 = _aten_mm_default(arg0, arg0)
// LAUNCH:         buf2 = buf0; del buf0
// LAUNCH-NEXT:    fusec_poi_neg_{{[0-9]+}}.launch(

builtin.module {
  fusec.graph @chain(%x : !fusec.tensor<[64, 8], f32>) -> (!fusec.tensor<[64, 8], f32>) {
    %a = fusec.pointwise "exp" %x : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    %b = fusec.pointwise "neg" %a : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    %c = fusec.pointwise "tanh" %b : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    %d = fusec.pointwise "sin" %c : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    fusec.output %d : !fusec.tensor<[64, 8], f32>
  }
  fusec.graph @view_alias(%x : !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[8, 8], f32>) {
    %a = fusec.pointwise "exp" %x : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %t = fusec.permute %a [1, 0] : !fusec.tensor<[8, 8], f32> -> !fusec.tensor<[8, 8], f32, strides [1, 8]>
    %b = fusec.pointwise "neg" %x : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %y = fusec.extern "aten.mm.default"(%t, %b) : (!fusec.tensor<[8, 8], f32, strides [1, 8]>, !fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %c = fusec.pointwise "tanh" %y : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    fusec.output %c : !fusec.tensor<[8, 8], f32>
  }
  fusec.graph @sizes_and_types(%x : !fusec.tensor<[64, 8], f32>) -> (!fusec.tensor<[8, 64], f16, strides [1, 8]>, !fusec.tensor<[512], f32>) {
    %a = fusec.pointwise "exp" %x : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    %b = fusec.pointwise "neg" %a : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f32>
    %h = fusec.pointwise "convert" %b : (!fusec.tensor<[64, 8], f32>) -> !fusec.tensor<[64, 8], f16>
    %t = fusec.permute %h [1, 0] : !fusec.tensor<[64, 8], f16> -> !fusec.tensor<[8, 64], f16, strides [1, 8]>
    %r = fusec.reshape %b : !fusec.tensor<[64, 8], f32> -> !fusec.tensor<[512], f32>
    %s = fusec.pointwise "sin" %r : (!fusec.tensor<[512], f32>) -> !fusec.tensor<[512], f32>
    fusec.output %t, %s : !fusec.tensor<[8, 64], f16, strides [1, 8]>, !fusec.tensor<[512], f32>
  }
  fusec.graph @extern_storage(%x : !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[8, 8], f32>) {
    %y = fusec.extern "aten.mm.default"(%x, %x) : (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %a = fusec.pointwise "exp" %y : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %b = fusec.pointwise "neg" %a : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    fusec.output %b : !fusec.tensor<[8, 8], f32>
  }
}
