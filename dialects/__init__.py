"""fusec.dialects (the folder `dialects/`, installed under the fusec namespace)."""

# Guard: imported as the bare `dialects` (from the repo root) it would make a second copy of every class.
if __name__ != "fusec.dialects":
    raise ImportError(f"import this folder as fusec.dialects, not as '{__name__}': it is mapped into the fusec package")
