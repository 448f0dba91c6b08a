"""fusec.passes (the folder `passes/`, installed under the fusec namespace)."""

# Guard: imported as the bare `passes` (from the repo root) it would make a second copy of every class.
if __name__ != "fusec.passes":
    raise ImportError(f"import this folder as fusec.passes, not as '{__name__}': it is mapped into the fusec package")
