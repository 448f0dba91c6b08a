"""Facts about IR that passes and the lowering share: costs, liveness, launch-configuration heuristics, bind plans."""
