// Every op, type and attribute of the fusec dialect prints in a form that parses back
// to the same IR (printing twice gives the same text).
// RUN: fusec-opt %s | fusec-opt | filecheck %s

// ---- graph level: every tensor op, strides, symbols.
fusec.graph @graph_ops(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[512], f32>, %i : !fusec.tensor<[4], i64>, %j : !fusec.tensor<[s0, 4], i64>, %w : !fusec.tensor<[512, 64], f32>) -> (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0], i64>, !fusec.tensor<[64, s0, 8], f32>, !fusec.tensor<[s0, 255], f32>, !fusec.tensor<[2*s0, 512], f32>, !fusec.tensor<[4], f32>, !fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], i64>) symbols(s0 in [2, inf]) {
  %c = fusec.constant 0.5 : !fusec.tensor<[], f32>
  %n = fusec.symbolic floordiv(s0, 2) + 1 : !fusec.tensor<[], i64>
  %add = fusec.pointwise "add" %a, %b : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[512], f32>) -> !fusec.tensor<[s0, 512], f32>
  %lt = fusec.pointwise "lt" %add, %c : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 512], i1>
  %sel = fusec.pointwise "where" %lt, %add, %c : (!fusec.tensor<[s0, 512], i1>, !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 512], f32>
  %sum = fusec.reduce "sum" %sel dims [1] keepdim : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 1], f32>
  %am = fusec.reduce "argmax" %sel dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], i64>
  %r = fusec.reshape %a : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 8, 64], f32>
  %p = fusec.permute %r [2, 0, 1] : !fusec.tensor<[s0, 8, 64], f32> -> !fusec.tensor<[64, s0, 8], f32, strides [1, 512, 64]>
  %pc = fusec.pointwise "identity" %p : (!fusec.tensor<[64, s0, 8], f32, strides [1, 512, 64]>) -> !fusec.tensor<[64, s0, 8], f32>
  %e = fusec.expand %b : !fusec.tensor<[512], f32> -> !fusec.tensor<[s0, 512], f32, strides [0, 1]>
  %sl = fusec.slice %a dim 1 start 2 step 2 : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 255], f32, strides [512, 2]>
  %slc = fusec.pointwise "identity" %sl : (!fusec.tensor<[s0, 255], f32, strides [512, 2]>) -> !fusec.tensor<[s0, 255], f32>
  %cat = fusec.cat %a, %e dim 0 : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32, strides [0, 1]>) -> !fusec.tensor<[2*s0, 512], f32>
  %ix = fusec.index %b[%i] dim 0 : !fusec.tensor<[512], f32>, !fusec.tensor<[4], i64> -> !fusec.tensor<[4], f32>
  %g = fusec.gather %a[%j] dim 1 : !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 4], i64> -> !fusec.tensor<[s0, 4], f32>
  %mm = fusec.extern "aten.mm.default"(%a, %w) : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[512, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
  fusec.output %sum, %am, %pc, %slc, %cat, %ix, %g, %mm, %n : !fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0], i64>, !fusec.tensor<[64, s0, 8], f32>, !fusec.tensor<[s0, 255], f32>, !fusec.tensor<[2*s0, 512], f32>, !fusec.tensor<[4], f32>, !fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], i64>
}

// ---- kernel level: kernel, load (mask), store (mask), reduce_r, symbolic x/r, combo; attribute syntax; element types.
fusec.graph @kernel_ops(%a : !fusec.tensor<[s0, 512], f32>, %h : !fusec.tensor<[s0], f16>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) symbols(s0 in [1, 4096]) {
  %k = fusec.kernel @fusec_red_sum_0 [s0, 512] (%a) {hint = #fusec.expr<s0 + 1>, scale = #fusec.number<-inf>, sym = #fusec.sym<s0 in [1, 4096]>} : (!fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>) {
  ^bb0(%in : !fusec.tensor<[s0, 512], f32>, %out : !fusec.tensor<[s0], f32>):
    %rr = fusec.symbolic r : i64
    %lim = fusec.constant 256 : i64
    %mask = fusec.pointwise "lt" %rr, %lim : (i64, i64) -> i1
    %v = fusec.load %in[512*x + r] mask %mask : !fusec.tensor<[s0, 512], f32>
    %s = fusec.reduce_r "sum" %v : f32 -> f32
    %xx = fusec.symbolic x : i64
    %half = fusec.symbolic floordiv(s0, 2) : i64
    %low = fusec.pointwise "lt" %xx, %half : (i64, i64) -> i1
    fusec.store %s, %out[x] mask %low : !fusec.tensor<[s0], f32>
  }
  %c:2 = fusec.combo @fusec_combo_0 : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) {
    %p = fusec.kernel @fusec_poi_convert_1 [s0] (%h) : (!fusec.tensor<[s0], f16>) -> (!fusec.tensor<[s0], f32>) {
    ^bb0(%in : !fusec.tensor<[s0], f16>, %out : !fusec.tensor<[s0], f32>):
      %v = fusec.load %in[x] : !fusec.tensor<[s0], f16>
      %f = fusec.pointwise "convert" %v : (f16) -> f32
      fusec.store %f, %out[x] : !fusec.tensor<[s0], f32>
    }
    %m = fusec.kernel @fusec_red_argmax_2 [s0, 512] (%a) : (!fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], i64>) {
    ^bb0(%in : !fusec.tensor<[s0, 512], f32>, %out : !fusec.tensor<[s0], i64>):
      %v = fusec.load %in[r + 512*x] : !fusec.tensor<[s0, 512], f32>
      %i = fusec.reduce_r "argmax" %v : f32 -> i64
      fusec.store %i, %out[x] : !fusec.tensor<[s0], i64>
    }
    fusec.output %p, %m : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
  }
  fusec.output %k, %c#0, %c#1 : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
}

fusec.graph @element_types(%b : !fusec.tensor<[2], i1>, %i8 : !fusec.tensor<[2], i8>, %i16 : !fusec.tensor<[2], i16>, %i32 : !fusec.tensor<[2], i32>, %u8 : !fusec.tensor<[2], ui8>, %f16 : !fusec.tensor<[2], f16>, %bf16 : !fusec.tensor<[2], bf16>, %f64 : !fusec.tensor<[2], f64>) -> (!fusec.tensor<[2], i1>, !fusec.tensor<[2], i8>, !fusec.tensor<[2], i16>, !fusec.tensor<[2], i32>, !fusec.tensor<[2], ui8>, !fusec.tensor<[2], f16>, !fusec.tensor<[2], bf16>, !fusec.tensor<[2], f64>, !fusec.tensor<[], f32>, !fusec.tensor<[], i1>) {
  %nan = fusec.constant nan : !fusec.tensor<[], f32>
  %t = fusec.constant true : !fusec.tensor<[], i1>
  fusec.output %b, %i8, %i16, %i32, %u8, %f16, %bf16, %f64, %nan, %t : !fusec.tensor<[2], i1>, !fusec.tensor<[2], i8>, !fusec.tensor<[2], i16>, !fusec.tensor<[2], i32>, !fusec.tensor<[2], ui8>, !fusec.tensor<[2], f16>, !fusec.tensor<[2], bf16>, !fusec.tensor<[2], f64>, !fusec.tensor<[], f32>, !fusec.tensor<[], i1>
}

// CHECK:      builtin.module {
// CHECK-LABEL: fusec.graph @graph_ops(%a : !fusec.tensor<[s0, 512], f32>, %b : !fusec.tensor<[512], f32>, %i : !fusec.tensor<[4], i64>, %j : !fusec.tensor<[s0, 4], i64>, %w : !fusec.tensor<[512, 64], f32>) -> (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0], i64>, !fusec.tensor<[64, s0, 8], f32>, !fusec.tensor<[s0, 255], f32>, !fusec.tensor<[2*s0, 512], f32>, !fusec.tensor<[4], f32>, !fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], i64>) symbols(s0 in [2, inf]) {
// CHECK-NEXT: %c = fusec.constant 0.5 : !fusec.tensor<[], f32>
// CHECK-NEXT: %n = fusec.symbolic floordiv(s0, 2) + 1 : !fusec.tensor<[], i64>
// CHECK-NEXT: %add = fusec.pointwise "add" %a, %b : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[512], f32>) -> !fusec.tensor<[s0, 512], f32>
// CHECK-NEXT: %lt = fusec.pointwise "lt" %add, %c : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 512], i1>
// CHECK-NEXT: %sel = fusec.pointwise "where" %lt, %add, %c : (!fusec.tensor<[s0, 512], i1>, !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 512], f32>
// CHECK-NEXT: %sum = fusec.reduce "sum" %sel dims [1] keepdim : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 1], f32>
// CHECK-NEXT: %am = fusec.reduce "argmax" %sel dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], i64>
// CHECK-NEXT: %r = fusec.reshape %a : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 8, 64], f32>
// CHECK-NEXT: %p = fusec.permute %r [2, 0, 1] : !fusec.tensor<[s0, 8, 64], f32> -> !fusec.tensor<[64, s0, 8], f32, strides [1, 512, 64]>
// CHECK-NEXT: %pc = fusec.pointwise "identity" %p : (!fusec.tensor<[64, s0, 8], f32, strides [1, 512, 64]>) -> !fusec.tensor<[64, s0, 8], f32>
// CHECK-NEXT: %e = fusec.expand %b : !fusec.tensor<[512], f32> -> !fusec.tensor<[s0, 512], f32, strides [0, 1]>
// CHECK-NEXT: %sl = fusec.slice %a dim 1 start 2 step 2 : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0, 255], f32, strides [512, 2]>
// CHECK-NEXT: %slc = fusec.pointwise "identity" %sl : (!fusec.tensor<[s0, 255], f32, strides [512, 2]>) -> !fusec.tensor<[s0, 255], f32>
// CHECK-NEXT: %cat = fusec.cat %a, %e dim 0 : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 512], f32, strides [0, 1]>) -> !fusec.tensor<[2*s0, 512], f32>
// CHECK-NEXT: %ix = fusec.index %b[%i] dim 0 : !fusec.tensor<[512], f32>, !fusec.tensor<[4], i64> -> !fusec.tensor<[4], f32>
// CHECK-NEXT: %g = fusec.gather %a[%j] dim 1 : !fusec.tensor<[s0, 512], f32>, !fusec.tensor<[s0, 4], i64> -> !fusec.tensor<[s0, 4], f32>
// CHECK-NEXT: %mm = fusec.extern "aten.mm.default"(%a, %w) : (!fusec.tensor<[s0, 512], f32>, !fusec.tensor<[512, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
// CHECK-NEXT: fusec.output %sum, %am, %pc, %slc, %cat, %ix, %g, %mm, %n : !fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0], i64>, !fusec.tensor<[64, s0, 8], f32>, !fusec.tensor<[s0, 255], f32>, !fusec.tensor<[2*s0, 512], f32>, !fusec.tensor<[4], f32>, !fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], i64>
// CHECK-NEXT: }
// CHECK-LABEL: fusec.graph @kernel_ops(%a : !fusec.tensor<[s0, 512], f32>, %h : !fusec.tensor<[s0], f16>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) symbols(s0 in [1, 4096]) {
// CHECK-NEXT: %k = fusec.kernel @fusec_red_sum_0 [s0, 512] (%a) {hint = #fusec.expr<s0 + 1>, scale = #fusec.number<-inf>, sym = #fusec.sym<s0 in [1, 4096]>} : (!fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>) {
// CHECK-NEXT: ^bb0(%in: !fusec.tensor<[s0, 512], f32>, %out: !fusec.tensor<[s0], f32>):
// CHECK-NEXT: %rr = fusec.symbolic r : i64
// CHECK-NEXT: %lim = fusec.constant 256 : i64
// CHECK-NEXT: %mask = fusec.pointwise "lt" %rr, %lim : (i64, i64) -> i1
// CHECK-NEXT: %v = fusec.load %in[r + 512*x] mask %mask : !fusec.tensor<[s0, 512], f32>
// CHECK-NEXT: %s = fusec.reduce_r "sum" %v : f32 -> f32
// CHECK-NEXT: %xx = fusec.symbolic x : i64
// CHECK-NEXT: %half = fusec.symbolic floordiv(s0, 2) : i64
// CHECK-NEXT: %low = fusec.pointwise "lt" %xx, %half : (i64, i64) -> i1
// CHECK-NEXT: fusec.store %s, %out[x] mask %low : !fusec.tensor<[s0], f32>
// CHECK-NEXT: }
// CHECK-NEXT: %c, %c_1 = fusec.combo @fusec_combo_0 : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) {
// CHECK-NEXT: %p = fusec.kernel @fusec_poi_convert_1 [s0] (%h) : (!fusec.tensor<[s0], f16>) -> (!fusec.tensor<[s0], f32>) {
// CHECK-NEXT: ^bb0(%in: !fusec.tensor<[s0], f16>, %out: !fusec.tensor<[s0], f32>):
// CHECK-NEXT: %v = fusec.load %in[x] : !fusec.tensor<[s0], f16>
// CHECK-NEXT: %f = fusec.pointwise "convert" %v : (f16) -> f32
// CHECK-NEXT: fusec.store %f, %out[x] : !fusec.tensor<[s0], f32>
// CHECK-NEXT: }
// CHECK-NEXT: %m = fusec.kernel @fusec_red_argmax_2 [s0, 512] (%a) : (!fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], i64>) {
// CHECK-NEXT: ^bb0(%in: !fusec.tensor<[s0, 512], f32>, %out: !fusec.tensor<[s0], i64>):
// CHECK-NEXT: %v = fusec.load %in[r + 512*x] : !fusec.tensor<[s0, 512], f32>
// CHECK-NEXT: %i = fusec.reduce_r "argmax" %v : f32 -> i64
// CHECK-NEXT: fusec.store %i, %out[x] : !fusec.tensor<[s0], i64>
// CHECK-NEXT: }
// CHECK-NEXT: fusec.output %p, %m : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
// CHECK-NEXT: }
// CHECK-NEXT: fusec.output %k, %c, %c_1 : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
// CHECK-NEXT: }
// CHECK-LABEL: fusec.graph @element_types(%b : !fusec.tensor<[2], i1>, %i8 : !fusec.tensor<[2], i8>, %i16 : !fusec.tensor<[2], i16>, %i32 : !fusec.tensor<[2], i32>, %u8 : !fusec.tensor<[2], ui8>, %f16 : !fusec.tensor<[2], f16>, %bf16 : !fusec.tensor<[2], bf16>, %f64 : !fusec.tensor<[2], f64>) -> (!fusec.tensor<[2], i1>, !fusec.tensor<[2], i8>, !fusec.tensor<[2], i16>, !fusec.tensor<[2], i32>, !fusec.tensor<[2], ui8>, !fusec.tensor<[2], f16>, !fusec.tensor<[2], bf16>, !fusec.tensor<[2], f64>, !fusec.tensor<[], f32>, !fusec.tensor<[], i1>) {
// CHECK-NEXT: %nan = fusec.constant nan : !fusec.tensor<[], f32>
// CHECK-NEXT: %t = fusec.constant true : !fusec.tensor<[], i1>
// CHECK-NEXT: fusec.output %b, %i8, %i16, %i32, %u8, %f16, %bf16, %f64, %nan, %t : !fusec.tensor<[2], i1>, !fusec.tensor<[2], i8>, !fusec.tensor<[2], i16>, !fusec.tensor<[2], i32>, !fusec.tensor<[2], ui8>, !fusec.tensor<[2], f16>, !fusec.tensor<[2], bf16>, !fusec.tensor<[2], f64>, !fusec.tensor<[], f32>, !fusec.tensor<[], i1>
// CHECK-NEXT: }

// ---- discardable attributes survive on ops whose syntax writes values bare.
fusec.graph @discardable_attributes(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>, !fusec.tensor<[], i64>) {
  %n = fusec.symbolic 4 {note = "n"} : !fusec.tensor<[], i64>
  %k = fusec.kernel @k [4] (%a) : (!fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  ^bb0(%in : !fusec.tensor<[4], f32>, %out : !fusec.tensor<[4], f32>):
    %v = fusec.load %in[x] {note = "load"} : !fusec.tensor<[4], f32>
    fusec.store %v, %out[x] {note = "store"} : !fusec.tensor<[4], f32>
  }
  fusec.output %k, %n : !fusec.tensor<[4], f32>, !fusec.tensor<[], i64>
}
// CHECK-LABEL: fusec.graph @discardable_attributes
// CHECK-NEXT: %n = fusec.symbolic 4 {note = "n"} : !fusec.tensor<[], i64>
// CHECK: %v = fusec.load %in[x] {note = "load"} : !fusec.tensor<[4], f32>
// CHECK-NEXT: fusec.store %v, %out[x] {note = "store"} : !fusec.tensor<[4], f32>

// ---- extern calls: arguments as data (operands inline, sizes, numbers, none, strings, dtypes,
// ---- torch constants, devices, ops a higher-order op runs, nested lists, keyword arguments) and result positions.
fusec.graph @extern_calls(%x : !fusec.tensor<[s0, 8], f32>, %w : !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>) symbols(s0 in [2, inf]) {
  %f = fusec.extern "aten.full.default"([s0, 8], -0.5, dtype = f32, layout = torch.strided, device = device, pin_memory = false) : () -> !fusec.tensor<[s0, 8], f32>
  %c = fusec.extern "aten.empty.memory_format"([s0 - 1, 2*s0], dtype = bf16, device = device "cpu", memory_format = torch.channels_last) : () -> !fusec.tensor<[s0 - 1, 2*s0], bf16>
  %rng, %r = fusec.extern "higher_order.run_and_save_rng_state"(op "aten.rand_like.default", %x, pin_memory = false) : (!fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[16], ui8>, !fusec.tensor<[s0, 8], f32>)
  %a, %b = fusec.extern "aten.some_op.default"([%x, none, %x], %w, -inf, 1.0e-05, nan, true, "tanh", -s0 + 3) results [0, 2] : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>)
  fusec.output %f, %a, %b : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>
}
// CHECK-LABEL: fusec.graph @extern_calls
// CHECK-NEXT: %f = fusec.extern "aten.full.default"([s0, 8], -0.5, dtype = f32, layout = torch.strided, device = device, pin_memory = false) : () -> !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT: %c = fusec.extern "aten.empty.memory_format"([s0 - 1, 2*s0], dtype = bf16, device = device "cpu", memory_format = torch.channels_last) : () -> !fusec.tensor<[s0 - 1, 2*s0], bf16>
// CHECK-NEXT: %rng, %r = fusec.extern "higher_order.run_and_save_rng_state"(op "aten.rand_like.default", %x, pin_memory = false) : (!fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[16], ui8>, !fusec.tensor<[s0, 8], f32>)
// CHECK-NEXT: %a, %b = fusec.extern "aten.some_op.default"([%x, none, %x], %w, -inf, 1.0e-05, nan, true, "tanh", 3 - s0) results [0, 2] : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>)
// CHECK-NEXT: fusec.output %f, %a, %b : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>
// CHECK-NEXT: }
// CHECK-NEXT: }
