// RUN: fusec-opt %s -p "sink-gathers" | filecheck %s
// RUN: fusec-opt %s -p "sink-gathers" | fusec-opt | filecheck %s
// RUN: fusec-opt %s -p "sink-gathers,form-kernels,dce,vertical-fusion,reduction-fusion" | filecheck %s --check-prefix=KERNELS
// RUN: fusec-opt %s -p "sink-gathers" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Cross-entropy's forward: the log-softmax of the logits read at one target per row.  The gather moves
// through both subtractions and the upcast to the logits; the per-row statistics are expanded, not gathered.
builtin.module {
  fusec.graph @cross_entropy(%logits : !fusec.tensor<[s0, 1000], bf16>, %target : !fusec.tensor<[s0, 1], i64>) -> (!fusec.tensor<[s0, 1], f32>) symbols(s0 in [1, inf]) {
    %x = fusec.pointwise "convert" %logits : (!fusec.tensor<[s0, 1000], bf16>) -> !fusec.tensor<[s0, 1000], f32>
    %m = fusec.reduce "max" %x dims [1] keepdim : !fusec.tensor<[s0, 1000], f32> -> !fusec.tensor<[s0, 1], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[s0, 1000], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1000], f32>
    %e = fusec.pointwise "exp" %d : (!fusec.tensor<[s0, 1000], f32>) -> !fusec.tensor<[s0, 1000], f32>
    %s = fusec.reduce "sum" %e dims [1] keepdim : !fusec.tensor<[s0, 1000], f32> -> !fusec.tensor<[s0, 1], f32>
    %l = fusec.pointwise "log" %s : (!fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1], f32>
    %ls = fusec.pointwise "sub" %d, %l : (!fusec.tensor<[s0, 1000], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1000], f32>
    %g = fusec.gather %ls[%target] dim 1 : !fusec.tensor<[s0, 1000], f32>, !fusec.tensor<[s0, 1], i64> -> !fusec.tensor<[s0, 1], f32>
    fusec.output %g : !fusec.tensor<[s0, 1], f32>
  }

// CHECK-LABEL: fusec.graph @cross_entropy
// CHECK-NOT:     %ls =
// CHECK:         %[[LOGIT:.*]] = fusec.gather %logits[%target] dim 1 : !fusec.tensor<[s0, 1000], bf16>, !fusec.tensor<[s0, 1], i64> -> !fusec.tensor<[s0, 1], bf16>
// CHECK-NEXT:    %[[X:.*]] = fusec.pointwise "convert" %[[LOGIT]] : (!fusec.tensor<[s0, 1], bf16>) -> !fusec.tensor<[s0, 1], f32>
// CHECK-NEXT:    %[[D:.*]] = fusec.pointwise "sub" %[[X]], %m : (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1], f32>
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "sub" %[[D]], %l : (!fusec.tensor<[s0, 1], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1], f32>

// After fusion one reduction kernel reads the logits, and the target's logit in its epilogue, and stores
// one value per row: nothing of size [s0, 1000].
// KERNELS-LABEL: fusec.graph @cross_entropy
// KERNELS-NEXT:    %{{.*}} = fusec.kernel @fusec_red_convert_max_sub_exp_sum_gather_{{[0-9]+}} [s0, 1000] (%logits, %target) : (!fusec.tensor<[s0, 1000], bf16>, !fusec.tensor<[s0, 1], i64>) -> (!fusec.tensor<[s0, 1], f32>) {
// KERNELS-NOT:     fusec.kernel
// KERNELS:         fusec.output

// REMARK: remark: sink-gathers: sunk-gather: sub computed for the s0 gathered elements, not for all 1000*s0
// REMARK: remark: sink-gathers: sunk-gather: sub computed for the s0 gathered elements, not for all 1000*s0
// REMARK: remark: sink-gathers: sunk-gather: convert computed for the s0 gathered elements, not for all 1000*s0

// KERNELS-LABEL: fusec.graph @reshaped_logits

// HuggingFace's loss upcasts [batch, length, vocabulary] logits, then views them as [tokens, vocabulary]: the
// view moves above the upcast (applied to the bf16 logits), so the gather still reaches the logits and the
// fp32 copy is never stored; the full-size upcast stays for the reduction, which fusion then reads in place.
  fusec.graph @reshaped_logits(%logits : !fusec.tensor<[s0, s1, 1000], bf16>, %target : !fusec.tensor<[s0*s1, 1], i64>) -> (!fusec.tensor<[s0*s1, 1], f32>, !fusec.tensor<[s0*s1, 1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %x = fusec.pointwise "convert" %logits : (!fusec.tensor<[s0, s1, 1000], bf16>) -> !fusec.tensor<[s0, s1, 1000], f32>
    %v = fusec.reshape %x : !fusec.tensor<[s0, s1, 1000], f32> -> !fusec.tensor<[s0*s1, 1000], f32>
    %m = fusec.reduce "max" %v dims [1] keepdim : !fusec.tensor<[s0*s1, 1000], f32> -> !fusec.tensor<[s0*s1, 1], f32>
    %d = fusec.pointwise "sub" %v, %m : (!fusec.tensor<[s0*s1, 1000], f32>, !fusec.tensor<[s0*s1, 1], f32>) -> !fusec.tensor<[s0*s1, 1000], f32>
    %g = fusec.gather %d[%target] dim 1 : !fusec.tensor<[s0*s1, 1000], f32>, !fusec.tensor<[s0*s1, 1], i64> -> !fusec.tensor<[s0*s1, 1], f32>
    fusec.output %g, %m : !fusec.tensor<[s0*s1, 1], f32>, !fusec.tensor<[s0*s1, 1], f32>
  }
// CHECK-LABEL: fusec.graph @reshaped_logits
// CHECK:         %[[V:.*]] = fusec.reshape %logits : !fusec.tensor<[s0, s1, 1000], bf16> -> !fusec.tensor<[s0*s1, 1000], bf16>
// CHECK-NEXT:    %[[LOGIT:.*]] = fusec.gather %[[V]][%target] dim 1 : !fusec.tensor<[s0*s1, 1000], bf16>, !fusec.tensor<[s0*s1, 1], i64> -> !fusec.tensor<[s0*s1, 1], bf16>
// CHECK-NEXT:    %{{.*}} = fusec.pointwise "convert" %[[LOGIT]]
// KERNELS-NEXT:    %{{.*}}, %{{.*}} = fusec.kernel @fusec_red_convert_max_gather_sub_{{[0-9]+}} [s0*s1, 1000] (%logits, %target) : (!fusec.tensor<[s0, s1, 1000], bf16>, !fusec.tensor<[s0*s1, 1], i64>) -> (!fusec.tensor<[s0*s1, 1], f32>, !fusec.tensor<[s0*s1, 1], f32>) {
// KERNELS-NOT:     fusec.kernel
// KERNELS:         fusec.output
// REMARK: remark: sink-gathers: sunk-gather: sub computed for the s0*s1 gathered elements, not for all 1000*s0*s1
// REMARK: remark: sink-gathers: sunk-gather: convert computed for the s0*s1 gathered elements, not for all 1000*s0*s1

// KERNELS-LABEL: fusec.graph @kept

// Kept: iota is its own position; an operand broadcast along the other dim; an index as long as the input.
  fusec.graph @kept(%a : !fusec.tensor<[4, 8], f32>, %b : !fusec.tensor<[1, 8], f32>, %i : !fusec.tensor<[4, 1], i64>, %j : !fusec.tensor<[4, 8], i64>) -> (!fusec.tensor<[4, 1], f32>, !fusec.tensor<[4, 8], f32>) {
    %p = fusec.pointwise "mul" %a, %b : (!fusec.tensor<[4, 8], f32>, !fusec.tensor<[1, 8], f32>) -> !fusec.tensor<[4, 8], f32>
    %g = fusec.gather %p[%i] dim 1 : !fusec.tensor<[4, 8], f32>, !fusec.tensor<[4, 1], i64> -> !fusec.tensor<[4, 1], f32>
    %q = fusec.pointwise "exp" %a : (!fusec.tensor<[4, 8], f32>) -> !fusec.tensor<[4, 8], f32>
    %h = fusec.gather %q[%j] dim 1 : !fusec.tensor<[4, 8], f32>, !fusec.tensor<[4, 8], i64> -> !fusec.tensor<[4, 8], f32>
    fusec.output %g, %h : !fusec.tensor<[4, 1], f32>, !fusec.tensor<[4, 8], f32>
  }
// CHECK-LABEL: fusec.graph @kept
// CHECK-NEXT:    %p = fusec.pointwise "mul"
// CHECK-NEXT:    %g = fusec.gather %p[%i]
// CHECK-NEXT:    %q = fusec.pointwise "exp"
// CHECK-NEXT:    %h = fusec.gather %q[%j]
// REMARK: remark: sink-gathers: gather-kept: mul stays whole for fusec.gather: an operand of shape [1, 8] broadcasts along another dim
// REMARK: remark: sink-gathers: gather-kept: exp stays whole for fusec.gather: the index's 8 along dim 1 is not provably fewer than the 8 elements it gathers from

// Labels with their own row symbol (dynamic=True gives a separate input its own symbols): the gather reads the
// logits' first s1 rows, and so do the sunk gather and the per-row maximum, through slices.
  fusec.graph @other_rows(%logits : !fusec.tensor<[s0, 1000], bf16>, %target : !fusec.tensor<[s1, 1], i64>) -> (!fusec.tensor<[s1, 1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %x = fusec.pointwise "convert" %logits : (!fusec.tensor<[s0, 1000], bf16>) -> !fusec.tensor<[s0, 1000], f32>
    %m = fusec.reduce "max" %x dims [1] keepdim : !fusec.tensor<[s0, 1000], f32> -> !fusec.tensor<[s0, 1], f32>
    %d = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[s0, 1000], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, 1000], f32>
    %g = fusec.gather %d[%target] dim 1 : !fusec.tensor<[s0, 1000], f32>, !fusec.tensor<[s1, 1], i64> -> !fusec.tensor<[s1, 1], f32>
    fusec.output %g : !fusec.tensor<[s1, 1], f32>
  }
// CHECK-LABEL: fusec.graph @other_rows
// CHECK:         %[[ROWS:.*]] = fusec.slice %logits dim 0 start 0 step 1 : !fusec.tensor<[s0, 1000], bf16> -> !fusec.tensor<[s1, 1000], bf16>
// CHECK-NEXT:    %[[LOGIT:.*]] = fusec.gather %[[ROWS]][%target] dim 1
// CHECK:         %[[MAX:.*]] = fusec.slice %m dim 0 start 0 step 1 : !fusec.tensor<[s0, 1], f32> -> !fusec.tensor<[s1, 1], f32>
// CHECK-NEXT:    fusec.pointwise "sub" %{{.*}}, %[[MAX]] : (!fusec.tensor<[s1, 1], f32>, !fusec.tensor<[s1, 1], f32>) -> !fusec.tensor<[s1, 1], f32>
// KERNELS-LABEL: fusec.graph @other_rows
// KERNELS:         fusec.kernel @fusec_red_convert_max_{{[0-9]+}} [s0, 1000]
// KERNELS:         fusec.kernel @fusec_poi_gather_convert_sub_{{[0-9]+}} [s1] (%target, %logits, %m)
// REMARK: remark: sink-gathers: sunk-gather: sub computed for the s1 gathered elements, not for all 1000*s0

// A 0-d op viewed as [1] and gathered (found by the fuzzer, seed 10400): its 0-d operands are its whole operands,
// viewed with it, not scalars it broadcasts (the rewritten op was [1] over 0-d operands, which does not verify).
  fusec.graph @zero_dims(%a : !fusec.tensor<[], f32>, %i : !fusec.tensor<[s0], i64>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [2, inf]) {
    %c = fusec.constant 2.0 : !fusec.tensor<[], f32>
    %p = fusec.pointwise "add" %a, %c : (!fusec.tensor<[], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[], f32>
    %v = fusec.reshape %p : !fusec.tensor<[], f32> -> !fusec.tensor<[1], f32>
    %g = fusec.gather %v[%i] dim 0 : !fusec.tensor<[1], f32>, !fusec.tensor<[s0], i64> -> !fusec.tensor<[s0], f32>
    fusec.output %g : !fusec.tensor<[s0], f32>
  }
// CHECK-LABEL: fusec.graph @zero_dims
// CHECK:         %[[A:.*]] = fusec.reshape %a : !fusec.tensor<[], f32> -> !fusec.tensor<[1], f32>
// CHECK-NEXT:    %[[C:.*]] = fusec.reshape %c : !fusec.tensor<[], f32> -> !fusec.tensor<[1], f32>
// CHECK-NEXT:    %[[P:.*]] = fusec.pointwise "add" %[[A]], %[[C]] : (!fusec.tensor<[1], f32>, !fusec.tensor<[1], f32>) -> !fusec.tensor<[1], f32>
// CHECK-NEXT:    fusec.gather %[[P]][%i] dim 0
}
