// RUN: fusec-opt %s --emit triton | filecheck %s
// RUN: fusec-opt %s | fusec-opt --emit triton | filecheck %s

// A schedule written by hand is what the lowering obeys: this kernel's 4 x 8 rows would be
// persistent with int32 indices by the pass's rule, but it runs as written: looped in steps
// of at most 4, with int64 indices, under the name it has.

builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
    %k = fusec.kernel @my_row_sum [4, 8] schedule(looped, int64, max_rblock = 4) (%a) : (!fusec.tensor<[4, 8], f32>) -> (!fusec.tensor<[4], f32>) {
    ^bb0(%in : !fusec.tensor<[4, 8], f32>, %out : !fusec.tensor<[4], f32>):
      %v = fusec.load %in[8*x + r] : !fusec.tensor<[4, 8], f32>
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out[x] : !fusec.tensor<[4], f32>
    }
    fusec.output %k : !fusec.tensor<[4], f32>
  }
}

// CHECK:      # fusec kernel my_row_sum: looped reduction (RBLOCK-wide steps over r) over [4, 8], int64 indexing
// CHECK:      def my_row_sum(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
// CHECK:        xoffset = tl.program_id(0).to(tl.int64) * XBLOCK
// CHECK:        for roffset in range(0, rnumel, RBLOCK):
// CHECK:      my_row_sum.launch({{.*}})  # grid {{[0-9]+}}, num_warps {{[0-9]+}}, XBLOCK={{[0-9]+}}, RBLOCK=4
