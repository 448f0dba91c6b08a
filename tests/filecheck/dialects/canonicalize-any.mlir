// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,canonicalize,dce" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,canonicalize,dce" | fusec-opt | filecheck %s

// torch's _safe_softmax asks each row whether any score is above -inf and the row's maximum: in one kernel,
// `any` of `x != -inf` (or `not (x == -inf)`) becomes `max(x) != -inf`, one reduction fewer.  Without a max of the
// same values, or against another constant, the `any` stays.
builtin.module {
  fusec.graph @safe_softmax(%x : !fusec.tensor<[s0, 197], f32>) -> (!fusec.tensor<[s0, 197], f32>) symbols(s0 in [1, inf]) {
    %m = fusec.reduce "max" %x dims [1] keepdim : !fusec.tensor<[s0, 197], f32> -> !fusec.tensor<[s0, 1], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[s0, 197], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 197], f32>
    %e = fusec.pointwise "exp" %d : (!fusec.tensor<[s0, 197], f32>) -> !fusec.tensor<[s0, 197], f32>
    %s = fusec.reduce "sum" %e dims [1] keepdim : !fusec.tensor<[s0, 197], f32> -> !fusec.tensor<[s0, 1], f32>
    %p = fusec.pointwise "div" %e, %s : (!fusec.tensor<[s0, 197], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 197], f32>
    %ninf = fusec.constant -inf : !fusec.tensor<[], f32>
    %eq = fusec.pointwise "eq" %x, %ninf : (!fusec.tensor<[s0, 197], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 197], i1>
    %ne = fusec.pointwise "logical_not" %eq : (!fusec.tensor<[s0, 197], i1>) -> !fusec.tensor<[s0, 197], i1>
    %any = fusec.reduce "any" %ne dims [1] keepdim : !fusec.tensor<[s0, 197], i1> -> !fusec.tensor<[s0, 1], i1>
    %none = fusec.pointwise "logical_not" %any : (!fusec.tensor<[s0, 1], i1>) -> !fusec.tensor<[s0, 1], i1>
    %zero = fusec.constant 0.0 : !fusec.tensor<[], f32>
    %out = fusec.pointwise "where" %none, %zero, %p : (!fusec.tensor<[s0, 1], i1>, !fusec.tensor<[], f32>, !fusec.tensor<[s0, 197], f32>) -> !fusec.tensor<[s0, 197], f32>
    fusec.output %out : !fusec.tensor<[s0, 197], f32>
  }
  fusec.graph @ne_form(%x : !fusec.tensor<[s0, 64], bf16>) -> (!fusec.tensor<[s0], i1>, !fusec.tensor<[s0], bf16>) symbols(s0 in [1, inf]) {
    %ninf = fusec.constant -inf : !fusec.tensor<[], bf16>
    %ne = fusec.pointwise "ne" %ninf, %x : (!fusec.tensor<[], bf16>, !fusec.tensor<[s0, 64], bf16>) -> !fusec.tensor<[s0, 64], i1>
    %any = fusec.reduce "any" %ne dims [1] : !fusec.tensor<[s0, 64], i1> -> !fusec.tensor<[s0], i1>
    %m = fusec.reduce "max" %x dims [1] : !fusec.tensor<[s0, 64], bf16> -> !fusec.tensor<[s0], bf16>
    fusec.output %any, %m : !fusec.tensor<[s0], i1>, !fusec.tensor<[s0], bf16>
  }
  fusec.graph @kept(%x : !fusec.tensor<[s0, 64], f32>) -> (!fusec.tensor<[s0], i1>, !fusec.tensor<[s0], i1>, !fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
    %ninf = fusec.constant -inf : !fusec.tensor<[], f32>
    %ne = fusec.pointwise "ne" %x, %ninf : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 64], i1>
    %any = fusec.reduce "any" %ne dims [1] : !fusec.tensor<[s0, 64], i1> -> !fusec.tensor<[s0], i1>
    %zero = fusec.constant 0.0 : !fusec.tensor<[], f32>
    %nz = fusec.pointwise "ne" %x, %zero : (!fusec.tensor<[s0, 64], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 64], i1>
    %anz = fusec.reduce "any" %nz dims [1] : !fusec.tensor<[s0, 64], i1> -> !fusec.tensor<[s0], i1>
    %y = fusec.pointwise "exp" %x : (!fusec.tensor<[s0, 64], f32>) -> !fusec.tensor<[s0, 64], f32>
    %m = fusec.reduce "max" %y dims [1] : !fusec.tensor<[s0, 64], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %any, %anz, %m : !fusec.tensor<[s0], i1>, !fusec.tensor<[s0], i1>, !fusec.tensor<[s0], f32>
  }
}

// CHECK-LABEL: fusec.graph @safe_softmax
// CHECK:         %[[X:.*]] = fusec.load
// CHECK-NEXT:    %[[M:.*]] = fusec.reduce_r "max" %[[X]] : f32 -> f32
// CHECK-NOT:     "any"
// CHECK:         %[[NINF:.*]] = fusec.constant -inf : f32
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "ne" %[[M]], %[[NINF]] : (f32, f32) -> i1
// CHECK-NOT:     "any"
// CHECK:         fusec.output
// CHECK-LABEL: fusec.graph @ne_form
// CHECK:         %[[M:.*]] = fusec.reduce_r "max" %{{.*}} : bf16 -> bf16
// CHECK-NEXT:    %[[NINF:.*]] = fusec.constant -inf : bf16
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "ne" %[[M]], %[[NINF]] : (bf16, bf16) -> i1
// CHECK-NOT:     "any"
// CHECK:         fusec.output
// CHECK-LABEL: fusec.graph @kept
// CHECK:         fusec.reduce_r "any"
// CHECK:         fusec.reduce_r "any"
// CHECK:         fusec.reduce_r "max"
