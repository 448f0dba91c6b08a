"""fusec.tools (the folder `tools/`, installed under the fusec namespace)."""

# Guard: imported as the bare `tools` (from the repo root) it would make a second copy of every class.
if __name__ != "fusec.tools":
    raise ImportError(f"import this folder as fusec.tools, not as '{__name__}': it is mapped into the fusec package")
