# lit configuration for fusec's FileCheck tests: `python -m lit -v tests/filecheck`.
#
# Tools run through the Python that runs lit (sys.executable), never through PATH:
# in CI the venv's bin/ need not be on PATH, and a stale console script could
# belong to another install.
import os
import sys

import lit.formats

config.name = "fusec"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Output", "Inputs"]  # Inputs/: files that RUN lines read, not tests

python = f'"{sys.executable}"'
# Replace the tool names only as whole words, so paths such as tests/filecheck/... stay intact.
config.substitutions.append((r"(?<![\w/.-])fusec-opt(?![\w/.-])", f"{python} -m fusec.tools.fusec_opt"))
config.substitutions.append((r"(?<![\w/.-])filecheck(?![\w/.-])", f"{python} -m filecheck"))

# lit starts tests with a clean environment; keep what locates the Python packages.
for var in ("PYTHONPATH", "VIRTUAL_ENV", "HOME", "TRITON_INTERPRET", "FUSEC_VERIFY_EACH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
