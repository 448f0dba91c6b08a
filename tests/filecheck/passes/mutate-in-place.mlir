// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels,mutate-in-place" | filecheck %s
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels,mutate-in-place" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec-opt %s -p "form-kernels,vertical-fusion,reduction-fusion,combo-grouping,schedule-kernels,mutate-in-place" --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=COMBO

// A batch norm's running mean: the kernel that computes the new value reads the old one at the index it
// stores at, and nothing reads it later: stored into the input in place.
// CHECK-LABEL: fusec.graph @running_mean
// CHECK-SAME:    fusec.input_mutations = {{\[}}[1 : i64, 1 : i64, 1 : i64]]

// The extern's consumer reads the input after the kernel that writes it: copied after the call.  With
// combo-grouping the two kernels launch as one combo: another member reads the input, copied as well.
// CHECK-LABEL: fusec.graph @read_later
// CHECK-SAME:    fusec.input_mutations = {{\[}}[1 : i64, 0 : i64, 0 : i64]]
// REMARK: remark: mutate-in-place: copied-mutation: input 1 takes output 0 by a copy after the call: @fusec_poi_add_{{[0-9]+}} reads the input after the kernel writes it
// COMBO: remark: mutate-in-place: copied-mutation: input 1 takes output 0 by a copy after the call: another kernel of the same launch, or a view, reads the input

// x.t() + x into x: a program would overwrite elements another still has to read.
// CHECK-LABEL: fusec.graph @other_elements
// CHECK-SAME:    fusec.input_mutations = {{\[}}[0 : i64, 0 : i64, 0 : i64]]
// REMARK: remark: mutate-in-place: copied-mutation: input 0 takes output 0 by a copy after the call: the kernel reads the input at other elements than it writes

builtin.module {
  fusec.graph @running_mean(%x : !fusec.tensor<[64, 8], f32>, %rm : !fusec.tensor<[8], f32>) -> (!fusec.tensor<[8], f32>, !fusec.tensor<[8], f32>) attributes {fusec.input_mutations = [[1 : i64, 1 : i64, 0 : i64]]} {
    %s = fusec.reduce "sum" %x dims [0] : !fusec.tensor<[64, 8], f32> -> !fusec.tensor<[8], f32>
    %c = fusec.constant 64.0 : !fusec.tensor<[], f32>
    %m = fusec.pointwise "div" %s, %c : (!fusec.tensor<[8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[8], f32>
    %k = fusec.constant 0.9 : !fusec.tensor<[], f32>
    %b = fusec.pointwise "mul" %rm, %k : (!fusec.tensor<[8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[8], f32>
    %n = fusec.pointwise "add" %m, %b : (!fusec.tensor<[8], f32>, !fusec.tensor<[8], f32>) -> !fusec.tensor<[8], f32>
    fusec.output %m, %n : !fusec.tensor<[8], f32>, !fusec.tensor<[8], f32>
  }
  fusec.graph @read_later(%x : !fusec.tensor<[8, 8], f32>, %rm : !fusec.tensor<[8], f32>) -> (!fusec.tensor<[8], f32>, !fusec.tensor<[8, 8], f32>) attributes {fusec.input_mutations = [[1 : i64, 0 : i64, 0 : i64]]} {
    %k = fusec.constant 2.0 : !fusec.tensor<[], f32>
    %n = fusec.pointwise "mul" %rm, %k : (!fusec.tensor<[8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[8], f32>
    %t = fusec.permute %x [1, 0] : !fusec.tensor<[8, 8], f32> -> !fusec.tensor<[8, 8], f32, strides [1, 8]>
    %y = fusec.extern "aten.mm.default"(%x, %t) : (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[8, 8], f32, strides [1, 8]>) -> !fusec.tensor<[8, 8], f32>
    %z = fusec.pointwise "add" %y, %rm : (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[8], f32>) -> !fusec.tensor<[8, 8], f32>
    fusec.output %n, %z : !fusec.tensor<[8], f32>, !fusec.tensor<[8, 8], f32>
  }
  fusec.graph @other_elements(%rm : !fusec.tensor<[4, 4], f32>) -> (!fusec.tensor<[4, 4], f32>) attributes {fusec.input_mutations = [[0 : i64, 0 : i64, 0 : i64]]} {
    %t = fusec.permute %rm [1, 0] : !fusec.tensor<[4, 4], f32> -> !fusec.tensor<[4, 4], f32, strides [1, 4]>
    %n = fusec.pointwise "add" %t, %rm : (!fusec.tensor<[4, 4], f32, strides [1, 4]>, !fusec.tensor<[4, 4], f32>) -> !fusec.tensor<[4, 4], f32>
    fusec.output %n : !fusec.tensor<[4, 4], f32>
  }
}
