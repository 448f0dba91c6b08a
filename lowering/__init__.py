"""fusec.lowering (the folder `lowering/`, installed under the fusec namespace)."""

# Guard: imported as the bare `lowering` (from the repo root) it would make a second copy of every class.
if __name__ != "fusec.lowering":
    raise ImportError(f"import this folder as fusec.lowering, not as '{__name__}': it is mapped into the fusec package")
