"""fusec: PyTorch programs fused into Triton kernels through an xDSL pass pipeline."""
