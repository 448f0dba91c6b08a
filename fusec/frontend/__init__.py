"""From PyTorch to the fusec dialect: the decomposition table, the FX importer and its aten op table."""
